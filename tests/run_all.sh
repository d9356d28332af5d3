#!/usr/bin/env bash
# Run each cmocka test binary, then print one total line for CI.
set -u
pass=0; fail=0; failed=()
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  echo "$out"
  p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
  if [ $rc -ne 0 ]; then failed+=("$(basename "$t")"); [ -z "$f" ] && fail=$((fail + 1)); fi
done
# Interop with the ecosystem's own safetensors reader/writer (PyPI).
if python3 -c "import numpy, safetensors" 2>/dev/null && [ -x build/tests/test_safetensors ]; then
  if python3 tests/interop_safetensors.py >/tmp/dsv4q-interop.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_safetensors.py"
  else
    fail=$((fail + 1)); failed+=("interop_safetensors.py"); tail -20 /tmp/dsv4q-interop.log
  fi
else
  echo "interop_safetensors.py: skipped (python3 numpy/safetensors not installed)"
fi
# GGML decoders vs gguf-py's gguf.quants, and the oracle on a GGUF vs the
# same weights in safetensors (tests/interop_gguf.py; PyPI gguf).
if python3 -c "import numpy, gguf" 2>/dev/null && [ -x build/tests/test_gguf ] && [ -x build/dsv4q ]; then
  if python3 tests/interop_gguf.py >/tmp/dsv4q-interop-gguf.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_gguf.py"; grep -E "^(decoder|binding)" /tmp/dsv4q-interop-gguf.log
  else
    fail=$((fail + 1)); failed+=("interop_gguf.py"); tail -20 /tmp/dsv4q-interop-gguf.log
  fi
else
  echo "interop_gguf.py: skipped (python3 numpy/gguf not installed)"
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
  echo "llamacpp_e2e.py: skipped (no build/llamacpp: run scripts/llamacpp/build.sh build/llamacpp)"
fi
[ ${#failed[@]} -gt 0 ] && echo "failing binaries: ${failed[*]}"
echo "${pass} passed, ${fail} failed"
[ $fail -eq 0 ] && [ ${#failed[@]} -eq 0 ]
