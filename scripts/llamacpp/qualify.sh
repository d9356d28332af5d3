#!/usr/bin/env bash
# qualify.sh - llama.cpp end to end on one deepseek4 GGUF: llama_capture.py
# runs llama.cpp (through llama-cpp-python's ctypes API) and dumps its graph
# tensors as a dsv4q capture, then `dsv4q replay` judges every stage on
# llama.cpp's own inputs against the oracle on the same GGUF weights, and
# the whole-model logits against the fp64 oracle.
# usage: scripts/llamacpp/qualify.sh MODEL.gguf OUTDIR [llama_capture.py options]
#        (e.g. --prompt-len 12 --decode 4, or --tokens 17,4,900,3,3 --decode 2)
# env:   LLAMA_CPP_LIB_PATH (libllama.so dir), PYTHONPATH (llama_cpp package),
#        DSV4Q (default build/dsv4q), DSV4Q_PYTHON (default: build/venv/bin/python
#        of `make pydeps` when it has numpy and safetensors, else python3).
#        Exit: replay's (0 pass, 1 fail, 2 error).
set -u
[ $# -ge 2 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
model=$1; out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dsv4q=${DSV4Q:-$root/build/dsv4q}
# the capture needs numpy and safetensors (llama_cpp itself comes from
# PYTHONPATH): the test venv has them, a bare python3 usually not
has_deps() { "$1" -c "import numpy, safetensors" >/dev/null 2>&1; }
if [ -n "${DSV4Q_PYTHON:-}" ]; then
  py=$DSV4Q_PYTHON
  has_deps "$py" || { echo "qualify.sh: DSV4Q_PYTHON=$py cannot import numpy and safetensors" \
    "(install them into it: $py -m pip install numpy safetensors, or unset DSV4Q_PYTHON after make pydeps)"; exit 2; }
elif [ -x "$root/build/venv/bin/python" ] && has_deps "$root/build/venv/bin/python"; then
  py=$root/build/venv/bin/python
elif has_deps python3; then
  py=python3
else
  echo "qualify.sh: no python with numpy and safetensors: neither $root/build/venv/bin/python nor python3" \
    "($(command -v python3 || echo 'not found')) imports them; run 'make pydeps' in $root (creates build/venv)," \
    "or set DSV4Q_PYTHON to a python that has them"
  exit 2
fi
echo "qualify.sh: python: $py"
rm -rf "$out/capture"; mkdir -p "$out"
"$py" "$here/llama_capture.py" "$model" "$out/capture" "$@" > "$out/llama.log" 2>&1 || {
  echo "qualify.sh: llama_capture.py failed (log: $out/llama.log)"; tail -5 "$out/llama.log"; exit 2; }
tail -1 "$out/llama.log"
"$dsv4q" replay --model "$model" --capture "$out/capture" --json "$out/replay.json" --db "$out/replay.db" \
  > "$out/replay.txt" 2>&1
rc=$?
grep -E "whole model|logit NRMS|greedy|stages compared" "$out/replay.txt"
exit $rc
