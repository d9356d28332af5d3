#!/usr/bin/env bash
# The Python package's tests, as a user gets the package: a venv
# ($DSV4Q_VENV; default build/venv of `make pydeps` if present, else
# .pyvenv, created once per clone), `pip install ./python`
# (reinstalled every run; the wheel bundles build/libdsv4q.so and
# gates/default.json), then pytest over python/tests and examples/pytorch.
# Prints cmocka-style summary lines so tests/run_all.sh folds the counts into
# its total.
#
# torch (PyPI's wheel pulls ~2.8 GB of CUDA libraries and does not import
# without them; docs/python.md): installed when DSV4Q_TORCH=1 or CI=true, and
# then REQUIRED: a skipped test counts as a failure, so CI never passes by
# skipping. Otherwise it is used when the venv has it, and the torch tests are
# skipped with their reason (the count is printed).
set -u
cd "$(dirname "$0")/.."
# the shared test venv of `make pydeps` (build/venv) when there is one, else
# .pyvenv: outside build/ so that `make clean` (.ci/run cleans between its
# clang and gcc passes) does not cost a second torch install
V=${DSV4Q_VENV:-}
[ -z "$V" ] && { [ -x build/venv/bin/python ] && V=build/venv || V=.pyvenv; }
log=build/pytest-setup.log
mkdir -p build
: > "$log"
fail() { echo "pytest_check: $*"; echo "[  FAILED  ] 1 test(s)."; exit 1; }
want_torch=0
{ [ "${DSV4Q_TORCH:-}" = 1 ] || [ "${CI:-}" = true ]; } && want_torch=1
[ -f build/libdsv4q.so ] || fail "build/libdsv4q.so missing (make)"
if [ ! -x "$V/bin/python" ]; then
  python3 -m venv "$V" >>"$log" 2>&1 || { tail -5 "$log"; fail "python3 -m venv failed (Debian: apt-get install python3-venv)"; }
fi
py="$V/bin/python"
if ! "$py" -c "import numpy, pytest, safetensors" 2>/dev/null; then
  "$py" -m pip install -q -r python/requirements-test.txt >>"$log" 2>&1 ||
    { tail -5 "$log"; fail "pip install -r python/requirements-test.txt failed (see $log)"; }
fi
if [ $want_torch = 1 ] && ! "$py" -c "import torch" 2>/dev/null; then
  echo "pytest_check: installing torch from PyPI into $V (once; ~2.8 GB with its CUDA libraries)"
  "$py" -m pip install -q torch >>"$log" 2>&1 || { tail -5 "$log"; fail "pip install torch failed (see $log)"; }
fi
"$py" -m pip install -q --force-reinstall --no-deps ./python >>"$log" 2>&1 ||
  { tail -20 "$log"; fail "pip install ./python failed (see $log)"; }
export DSV4Q_BIN="$PWD/build/dsv4q"
[ $want_torch = 1 ] && export DSV4Q_REQUIRE_TORCH=1
unset DSV4Q_LIB
out=$("$py" -m pytest -q -p no:cacheprovider -r fEs python/tests examples/pytorch 2>&1); rc=$?
echo "$out" | tail -40
last=$(echo "$out" | grep -E '^=*\s*[0-9]+ (passed|failed|error|skipped)|^[0-9]+ (passed|failed)' | tail -1)
n() { echo "$last" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
p=$(n passed); f=$(n failed); e=$(n error); s=$(n skipped)
bad=$((f + e))
if [ "$s" != 0 ]; then
  echo "pytest_check: $s test(s) skipped (reasons above)"; echo "[  SKIPPED ] $s test(s)."
  [ $want_torch = 1 ] && { echo "pytest_check: skips are failures here (torch required)"; bad=$((bad + s)); }
fi
[ $rc -ne 0 ] && [ $bad = 0 ] && bad=1     # pytest itself failed (collection, usage)
[ "$p" = 0 ] && [ $bad = 0 ] && bad=1      # ran nothing
echo "[  PASSED  ] $p test(s). (pytest: python/tests, examples/pytorch)"
[ $bad -gt 0 ] && echo "[  FAILED  ] $bad test(s), listed above"
[ $bad = 0 ]
