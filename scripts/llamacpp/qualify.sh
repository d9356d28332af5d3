#!/usr/bin/env bash
# qualify.sh - llama.cpp end to end on one deepseek4 GGUF: llama_capture.py
# runs llama.cpp (through llama-cpp-python's ctypes API) and dumps its graph
# tensors as a dsv4q capture, then `dsv4q replay` judges every stage on
# llama.cpp's own inputs against the oracle on the same GGUF weights, and
# the whole-model logits against the fp64 oracle.
# usage: scripts/llamacpp/qualify.sh MODEL.gguf OUTDIR [llama_capture.py options]
# env:   LLAMA_CPP_LIB_PATH (libllama.so dir), PYTHONPATH (llama_cpp package),
#        DSV4Q (default build/dsv4q). Exit: replay's (0 pass, 1 fail, 2 error).
set -u
model=$1; out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
dsv4q=${DSV4Q:-$here/../../build/dsv4q}
rm -rf "$out/capture"; mkdir -p "$out"
python3 "$here/llama_capture.py" "$model" "$out/capture" "$@" > "$out/llama.log" 2>&1 || {
  echo "qualify.sh: llama_capture.py failed (log: $out/llama.log)"; tail -5 "$out/llama.log"; exit 2; }
tail -1 "$out/llama.log"
"$dsv4q" replay --model "$model" --capture "$out/capture" --json "$out/replay.json" --db "$out/replay.db" \
  > "$out/replay.txt" 2>&1
rc=$?
grep -E "whole model|logit NRMS|greedy|stages compared" "$out/replay.txt"
exit $rc
