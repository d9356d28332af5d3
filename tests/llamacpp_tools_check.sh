#!/usr/bin/env bash
# The llama.cpp tools' own behaviour, without llama.cpp (tests/llamacpp_e2e.py
# runs them with it): scripts/llamacpp/qualify.sh picks build/venv/bin/python
# when a bare python3 lacks numpy, and says what to run when no python has
# numpy; scripts/llamacpp/llama_capture.py's --tokens parses ids and refuses
# bad ones naming them. Prints cmocka-style summary lines for tests/run_all.sh.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d /tmp/dsv4q-lltools.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0; skip=0
ok() { echo "[       OK ] $1"; pass=$((pass + 1)); }
bad() { echo "[  FAILED  ] $1"; sed 's/^/    /' "$tmp/out" | tail -8; fail=$((fail + 1)); }
# a python3 without site-packages: what a user's bare python3 is when numpy is not installed
mkdir -p "$tmp/bin"
printf '#!/bin/sh\nexec %s -S "$@"\n' "$(command -v python3)" > "$tmp/bin/python3"
chmod +x "$tmp/bin/python3"
: > "$tmp/model.gguf"

# 1. DSV4Q_PYTHON without numpy: refused by name, exit 2, before any capture
DSV4Q_PYTHON="$tmp/bin/python3" bash scripts/llamacpp/qualify.sh "$tmp/model.gguf" "$tmp/o1" > "$tmp/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "DSV4Q_PYTHON=$tmp/bin/python3 cannot import numpy" "$tmp/out" && [ ! -e "$tmp/o1/llama.log" ]; then
  ok "qualify.sh: a DSV4Q_PYTHON without numpy is refused by name (exit 2)"
else bad "qualify.sh: a DSV4Q_PYTHON without numpy (rc $rc)"; fi

# 2. no usable python at all (a copy of the script in a tree without build/venv): says what to run
mkdir -p "$tmp/tree/scripts/llamacpp"
cp scripts/llamacpp/qualify.sh scripts/llamacpp/llama_capture.py "$tmp/tree/scripts/llamacpp/"
PATH="$tmp/bin:/usr/bin:/bin" bash "$tmp/tree/scripts/llamacpp/qualify.sh" "$tmp/model.gguf" "$tmp/o2" > "$tmp/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "no python with numpy and safetensors" "$tmp/out" && grep -q "run 'make pydeps'" "$tmp/out"; then
  ok "qualify.sh: no python with numpy: says to run make pydeps (exit 2)"
else bad "qualify.sh: no python with numpy (rc $rc)"; fi

# 3. the default picks build/venv/bin/python even when PATH's python3 lacks numpy
if [ -x build/venv/bin/python ] && build/venv/bin/python -c "import numpy, safetensors" 2>/dev/null; then
  PATH="$tmp/bin:/usr/bin:/bin" DSV4Q_PYTHON= bash scripts/llamacpp/qualify.sh "$tmp/model.gguf" "$tmp/o3" > "$tmp/out" 2>&1
  if grep -q "python: $root/build/venv/bin/python" "$tmp/out" && [ -e "$tmp/o3/llama.log" ] &&
     ! grep -q "No module named 'numpy'" "$tmp/o3/llama.log"; then
    ok "qualify.sh: build/venv/bin/python is used when python3 lacks numpy"
  else cat "$tmp/o3/llama.log" >> "$tmp/out" 2>/dev/null; bad "qualify.sh: build/venv/bin/python not used"; fi
  py=build/venv/bin/python
else
  echo "llamacpp_tools_check: build/venv has no numpy/safetensors (make pydeps): venv and --tokens cases skipped"
  skip=$((skip + 1)); py=
fi

# 4. llama_capture.py --tokens (argument checks run before llama_cpp is imported)
if [ -n "$py" ]; then
  cap=scripts/llamacpp/llama_capture.py
  t4() {   # expected-message args...
    local want=$1; shift
    "$py" "$cap" "$tmp/model.gguf" "$tmp/o4" "$@" > "$tmp/out" 2>&1
    local rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$want" "$tmp/out"; then ok "llama_capture.py $*: exit 2, '$want'"
    else bad "llama_capture.py $* (rc $rc, wanted '$want')"; fi
  }
  t4 "element 1 is 'x', expected a non-negative integer token id" --tokens 5,x,7
  t4 "element 0 is '-3'" --tokens=-3,4
  t4 "--tokens: 2 ids, but --decode 2 needs at least 3" --tokens 5,6 --decode 2
  t4 "--tokens excludes --prompt-len and --seed" --tokens 5,6,7 --seed 3
  if "$py" -c "
import importlib.util, sys
s = importlib.util.spec_from_file_location('c', '$cap'); m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
sys.exit(0 if m.parse_tokens('17, 4,900', 1) == [17, 4, 900] else 1)" > "$tmp/out" 2>&1; then
    ok "llama_capture.py parse_tokens('17, 4,900') = [17, 4, 900]"
  else bad "llama_capture.py parse_tokens"; fi
fi
[ $skip -gt 0 ] && echo "[  SKIPPED ] $skip test(s)."
echo "[==========] $((pass + fail)) test(s) run."
if [ $fail -eq 0 ]; then echo "[  PASSED  ] $pass test(s)."; else echo "[  FAILED  ] $fail test(s)."; fi
[ $fail -eq 0 ]
