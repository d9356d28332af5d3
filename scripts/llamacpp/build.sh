#!/usr/bin/env bash
# build.sh - build llama.cpp's libllama (CPU) from the llama-cpp-python
# 0.3.36 source distribution on PyPI, for the llama.cpp end-to-end check.
# Only the libraries are built (libllama, libggml*; no tools, tests,
# server, common, mtmd), and the sdist's pure-Python llama_cpp package is
# used in place over them (PYTHONPATH + LLAMA_CPP_LIB_PATH), so nothing is
# compiled twice. Extra cmake options (e.g. -DGGML_CUDA=ON) pass through.
# usage: scripts/llamacpp/build.sh OUTDIR [cmake options]
# Leaves OUTDIR/src (the sdist), OUTDIR/bin (the .so files) and
# OUTDIR/env.sh (exports for llama_capture.py); prints the build time.
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd); shift
# the C++ toolchain llama.cpp needs (Debian packages; CI runs as root)
if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq cmake g++ ninja-build >/dev/null
fi
ver=0.3.36
if [ ! -d "$out/src/llama_cpp_python-$ver" ]; then
  mkdir -p "$out/src"
  python3 -m pip download -q --no-deps --no-binary :all: -d "$out/src" "llama-cpp-python==$ver"
  tar -C "$out/src" -xzf "$out/src/llama_cpp_python-$ver.tar.gz"
fi
src="$out/src/llama_cpp_python-$ver"
t0=$(date +%s)
cmake -S "$src/vendor/llama.cpp" -B "$out/build" -G "$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')" \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF "$@" > "$out/cmake.log" 2>&1
cmake --build "$out/build" --target llama -j "${LLAMACPP_JOBS:-2}" > "$out/build.log" 2>&1
rm -rf "$out/bin" && cp -a "$out/build/bin" "$out/bin"
cat > "$out/env.sh" <<EOT
export LLAMA_CPP_LIB_PATH="$out/bin"
export PYTHONPATH="$src\${PYTHONPATH:+:\$PYTHONPATH}"
export LLAMA_CPP_DIR="$src/vendor/llama.cpp"
EOT
echo "llama.cpp (llama-cpp-python $ver) built in $(( $(date +%s) - t0 )) s -> $out/bin"
