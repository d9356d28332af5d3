#!/usr/bin/env bash
# Run each cmocka test binary, then print one total line for CI:
#   N passed, N failed, N skipped
# Python pieces run with build/venv (`make pydeps`, tests/requirements.txt)
# when it exists: its bin/ goes first on PATH, so every test's `python3`
# is the venv's. With CI=true a missing Python test dependency is a
# failure, not a skip: CI must not go green on interop tests it never ran.
set -u
[ -x build/venv/bin/python3 ] && export PATH="$PWD/build/venv/bin:$PATH"
pass=0; fail=0; skipped=0; failed=()
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  echo "$out"
  p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  s=$(echo "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0})); skipped=$((skipped + ${s:-0}))
  if [ $rc -ne 0 ]; then failed+=("$(basename "$t")"); [ -z "$f" ] && fail=$((fail + 1)); fi
done
# Interop with the ecosystem's own safetensors reader/writer (PyPI).
if python3 -c "import numpy, safetensors" 2>/dev/null && [ -x "${DSV4Q_TEST_BUILD:-build}/tests/test_safetensors" ]; then
  if python3 tests/interop_safetensors.py run "${DSV4Q_TEST_BUILD:-build}/tests/test_safetensors" >/tmp/dsv4q-interop.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_safetensors.py"
  else
    fail=$((fail + 1)); failed+=("interop_safetensors.py"); tail -20 /tmp/dsv4q-interop.log
  fi
else
  skipped=$((skipped + 1))
  echo "interop_safetensors.py: skipped (python3 numpy/safetensors not installed; run make pydeps)"
fi
if [ "${CI:-}" = true ] && ! python3 -c "import numpy, safetensors, junitparser, yaml" 2>/dev/null; then
  fail=$((fail + 1)); failed+=("python-test-deps")
  echo "CI=true: python3 lacks numpy/safetensors/junitparser/yaml (make pydeps): interop tests would be skipped"
fi
# numpy's default_rng stream (the V4.1 Engram multipliers) vs oracle/pcg64
# (tests/interop_numpy_rng.py; PyPI numpy).
if python3 -c "import numpy" 2>/dev/null && [ -x "${DSV4Q_TEST_BUILD:-build}/tests/test_v41_rng" ]; then
  if python3 tests/interop_numpy_rng.py "${DSV4Q_TEST_BUILD:-build}/tests/test_v41_rng" >/tmp/dsv4q-interop-rng.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_numpy_rng.py"; grep -E "^numpy vectors" /tmp/dsv4q-interop-rng.log
  else
    fail=$((fail + 1)); failed+=("interop_numpy_rng.py"); tail -20 /tmp/dsv4q-interop-rng.log
  fi
else
  skipped=$((skipped + 1))
  echo "interop_numpy_rng.py: skipped (python3 numpy not installed; run make pydeps)"
  if [ "${CI:-}" = true ]; then fail=$((fail + 1)); failed+=("interop_numpy_rng.py (CI=true: not run)"); fi
fi
# GGML decoders vs gguf-py's gguf.quants, and the oracle on a GGUF vs the
# same weights in safetensors (tests/interop_gguf.py; PyPI gguf).
if python3 -c "import numpy, gguf" 2>/dev/null && [ -x "${DSV4Q_TEST_BUILD:-build}/tests/test_gguf" ] && [ -x "${DSV4Q_TEST_BUILD:-build}/dsv4q" ]; then
  if python3 tests/interop_gguf.py >/tmp/dsv4q-interop-gguf.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_gguf.py"; grep -E "^(decoder|binding)" /tmp/dsv4q-interop-gguf.log
  else
    fail=$((fail + 1)); failed+=("interop_gguf.py"); tail -20 /tmp/dsv4q-interop-gguf.log
  fi
else
  skipped=$((skipped + 1))
  echo "interop_gguf.py: skipped (python3 numpy/gguf not installed; run make pydeps)"
  if [ "${CI:-}" = true ]; then fail=$((fail + 1)); failed+=("interop_gguf.py (CI=true: not run)"); fi
fi
# The F16 route: scripts/st2gguf.py --f16 vs numpy's float16, and the
# oracle on the F16 GGUF (tests/interop_gguf_f16.py; PyPI gguf).
if python3 -c "import numpy, gguf" 2>/dev/null && [ -x "${DSV4Q_TEST_BUILD:-build}/dsv4q" ]; then
  if python3 tests/interop_gguf_f16.py >/tmp/dsv4q-interop-gguf-f16.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_gguf_f16.py"; grep -E "^  ok" /tmp/dsv4q-interop-gguf-f16.log
  else
    fail=$((fail + 1)); failed+=("interop_gguf_f16.py"); tail -20 /tmp/dsv4q-interop-gguf-f16.log
  fi
else
  skipped=$((skipped + 1))
  echo "interop_gguf_f16.py: skipped (python3 numpy/gguf not installed; run make pydeps)"
  if [ "${CI:-}" = true ]; then fail=$((fail + 1)); failed+=("interop_gguf_f16.py (CI=true: not run)"); fi
fi
# The cache layout catalog: dsv4q cache decode against a numpy encoder
# written from each engine's layout (tests/interop_kvcache.py; PyPI numpy).
if python3 -c "import numpy" 2>/dev/null && [ -x "${DSV4Q_TEST_BUILD:-build}/dsv4q" ]; then
  if python3 tests/interop_kvcache.py >/tmp/dsv4q-interop-kvcache.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_kvcache.py"; grep -E "^  ok" /tmp/dsv4q-interop-kvcache.log
  else
    fail=$((fail + 1)); failed+=("interop_kvcache.py"); tail -20 /tmp/dsv4q-interop-kvcache.log
  fi
else
  skipped=$((skipped + 1))
  echo "interop_kvcache.py: skipped (python3 numpy not installed; run make pydeps)"
  if [ "${CI:-}" = true ]; then fail=$((fail + 1)); failed+=("interop_kvcache.py (CI=true: not run)"); fi
fi
# ds4's KV checkpoint files: dsv4q cache ds4 against a writer written from
# ds4's description (tests/interop_ds4_session.py; PyPI numpy).
if python3 -c "import numpy" 2>/dev/null && [ -x "${DSV4Q_TEST_BUILD:-build}/dsv4q" ]; then
  if python3 tests/interop_ds4_session.py >/tmp/dsv4q-interop-ds4.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_ds4_session.py"; grep -E "^  ok" /tmp/dsv4q-interop-ds4.log
  else
    fail=$((fail + 1)); failed+=("interop_ds4_session.py"); tail -20 /tmp/dsv4q-interop-ds4.log
  fi
else
  skipped=$((skipped + 1))
  echo "interop_ds4_session.py: skipped (python3 numpy not installed; run make pydeps)"
  if [ "${CI:-}" = true ]; then fail=$((fail + 1)); failed+=("interop_ds4_session.py (CI=true: not run)"); fi
fi
# llama.cpp end to end (tests/llamacpp_e2e.py; needs build/llamacpp from
# scripts/llamacpp/build.sh, which .ci/run runs).
if [ -f build/llamacpp/env.sh ] && python3 -c "import numpy, gguf, safetensors, jinja2, diskcache, typing_extensions" 2>/dev/null; then
  if timeout 1800 python3 tests/llamacpp_e2e.py >/tmp/dsv4q-llamacpp-e2e.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). llamacpp_e2e.py"; grep -E "^  (ok|note)" /tmp/dsv4q-llamacpp-e2e.log
  else
    fail=$((fail + 1)); failed+=("llamacpp_e2e.py"); tail -30 /tmp/dsv4q-llamacpp-e2e.log
  fi
else
  skipped=$((skipped + 1))
  echo "llamacpp_e2e.py: skipped (no build/llamacpp: run scripts/llamacpp/build.sh build/llamacpp)"
fi
[ ${#failed[@]} -gt 0 ] && echo "failing binaries: ${failed[*]}"
echo "${pass} passed, ${fail} failed, ${skipped} skipped"
[ $fail -eq 0 ] && [ ${#failed[@]} -eq 0 ]
