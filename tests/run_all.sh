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
if python3 -c "import numpy, safetensors" 2>/dev/null && [ -x "${DSV4Q_TEST_BUILD:-build}/tests/test_safetensors" ]; then
  if python3 tests/interop_safetensors.py run "${DSV4Q_TEST_BUILD:-build}/tests/test_safetensors" >/tmp/dsv4q-interop.log 2>&1; then
    pass=$((pass + 1)); echo "[  PASSED  ] 1 test(s). interop_safetensors.py"
  else
    fail=$((fail + 1)); failed+=("interop_safetensors.py"); tail -20 /tmp/dsv4q-interop.log
  fi
else
  echo "interop_safetensors.py: skipped (python3 numpy/safetensors not installed)"
fi
[ ${#failed[@]} -gt 0 ] && echo "failing binaries: ${failed[*]}"
echo "${pass} passed, ${fail} failed"
[ $fail -eq 0 ] && [ ${#failed[@]} -eq 0 ]
