#!/usr/bin/env bash
# llamacpp-gpu.sh - llama.cpp's DeepSeek V4 on an NVIDIA GPU, qualified end
# to end like tests/llamacpp_e2e.py does on the CPU (docs/llamacpp.md):
# builds libllama with CUDA (same llama-cpp-python 0.3.36 sdist), then for
# the F32 GGUF (flash attention off and auto), the converter GGUF and its
# Q4_K_M re-quantization runs llama.cpp with every layer on the GPU
# (--gpu-layers 99), captures its graph tensors (ggml_backend_tensor_get
# reads device buffers) and replays them against the oracle; writes
# OUT/table.md. Needs nvcc (PATH or /usr/local/cuda/bin), cmake, python3
# with numpy gguf safetensors jinja2 diskcache, and `make` done.
# usage: scripts/llamacpp-gpu.sh [OUT=build/llamacpp-gpu-run] [CUDA_ARCH=90]
set -eu
cd "$(dirname "$0")/.."
out=${1:-build/llamacpp-gpu-run}; arch=${2:-90}
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "llamacpp-gpu.sh: no nvcc"; exit 3; }
mkdir -p "$out"
[ -x build/dsv4q ] || make -j"$(nproc)" build/dsv4q
LLAMACPP_JOBS=$(nproc) bash scripts/llamacpp/build.sh build/llamacpp-cuda -DGGML_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_CUDA_FA_ALL_QUANTS=OFF
. build/llamacpp-cuda/env.sh
export DSV4Q="$PWD/build/dsv4q"
st="$out/tiny-bf16"; rm -rf "$st"
./build/dsv4q synth --config tiny-bf16 --out "$st" >/dev/null
python3 scripts/st2gguf.py "$st" "$out/tiny-f32.gguf" --f32
conv=tests/data/llamacpp/tiny-llamacpp.gguf
python3 scripts/llamacpp/quantize.py "$conv" "$out/tiny-Q4_K_M.gguf" Q4_K_M
run() { scripts/llamacpp/qualify.sh "$1" "$out/$2" --prompt-len 12 --decode 4 --kv f32 --gpu-layers 99 "${@:3}" || true; }
run "$out/tiny-f32.gguf" f32-nofa --flash-attn off
run "$out/tiny-f32.gguf" f32-fa --flash-attn auto
run "$conv" converter
run "$out/tiny-Q4_K_M.gguf" q4km
python3 scripts/llamacpp/table.py "GPU F32 no-FA=$out/f32-nofa/replay.json" "GPU F32 FA=$out/f32-fa/replay.json" \
  "GPU converter=$out/converter/replay.json" "GPU Q4_K_M=$out/q4km/replay.json" | tee "$out/table.md"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt" || true
