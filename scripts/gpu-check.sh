#!/usr/bin/env bash
# scripts/gpu-check.sh OUTDIR - the CUDA backend's check on one GPU machine
# (written for one NVIDIA H200; docs/cuda.md).
#
#   bash scripts/gpu-check.sh OUTDIR     on the GPU machine, from the repo root
#   bash scripts/gpu-check.sh --prepare  on the dev machine first (optional):
#                                        builds build/dsv4q and the test binary
#                                        and copies the shared libraries they
#                                        need into build/gpu-libs, for a GPU
#                                        image without the -dev packages
#
# BUDGET. The device machine lends a task about 15 minutes of device time in
# all (machine start, idle time and every retry count), so this script must
# finish in under 8 minutes on one H200, leaving room to rerun it once. It is
# sized for that: every step runs under `timeout` with its own budget and a
# global deadline (DEADLINE_S, default 450 s from the start); a step that
# runs out is recorded as TIMEOUT and the script goes on and still writes
# its files. The Flash suite is the 44 Flash-shape cases of
# `dsv4q qualify --shapes flash` (2-16 tokens per case, Flash widths: the
# oracle's FP64 reference on 16 cores is the long pole, ~1-2 minutes); the
# whole-model run is flash-slice (3 layers at Flash widths) with a short
# prompt (PROMPT_LEN, default 16, DECODE default 2); the bench times each
# operator for at most ~1 s.
#
# Steps (each one's status goes to OUTDIR/summary.txt):
#   1. build   make cuda cuda-bench all + the test binary (nvcc, gcc). If the
#              image cannot build dsv4q (missing mpfr/sqlite/sodium/jansson/
#              cmocka development packages), a prebuilt build/dsv4q and
#              build/tests/test_cuda_plugin carried from the dev machine are
#              used with LD_LIBRARY_PATH=build/gpu-libs (see --prepare).
#   2. device  nvidia-smi -L and the clocks/memory (read only; nothing is set)
#   3. tests   build/tests/test_cuda_plugin with DSV4Q_HAVE_GPU=1: init, one
#              RMSNORM against the oracle, the self-test (GEMM tiles, compressor
#              prefill == decode), 33 small cases of every operator
#   4. qualify dsv4q qualify --backend build/plugins/libdsv4q_cuda.so --shapes flash
#              -> qualify_flash.txt (table), qualify_flash.json, receipt in receipts.db
#   5. model   qualify --whole-model on a synthesized tiny-bf16 (default
#              prompt), then on flash-slice with a short prompt
#   6. bench   build/cuda/bench_cuda: per-operator GPU timings at Flash shapes
#
# Files under OUTDIR (at most 8, flat: what the device tool brings back):
#   summary.txt env.log test_cuda_plugin.log qualify_flash.txt
#   qualify_flash.json qualify_model.txt bench.csv receipts.db
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--prepare" ]; then
    make -j"$(nproc)" all build/tests/test_cuda_plugin
    mkdir -p build/gpu-libs
    ldd build/dsv4q build/tests/test_cuda_plugin | awk '/=> \// {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libdl|libpthread|librt|libgomp|libz|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" build/gpu-libs/; done
    echo "prepared: carry build/dsv4q build/tests/test_cuda_plugin build/gpu-libs"
    exit 0
fi

OUT=${1:?usage: scripts/gpu-check.sh OUTDIR | --prepare}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DEADLINE_S=${DEADLINE_S:-450}
PROMPT_LEN=${PROMPT_LEN:-16}
DECODE=${DECODE:-2}
JOBS=$(nproc)
T0=$(date +%s)
SUMMARY="$OUT/summary.txt"
ENVLOG="$OUT/env.log"
: >"$SUMMARY"
: >"$ENVLOG"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((DEADLINE_S - ($(date +%s) - T0))); }
# step NAME BUDGET_S LOG CMD...: run CMD under the smaller of BUDGET_S and
# the time left; record ok / FAILED (rc) / TIMEOUT; never stop the script.
step() {
    local name=$1 budget=$2 log=$3
    shift 3
    local t
    t=$(left)
    if [ "$budget" -lt "$t" ]; then t=$budget; fi
    if [ "$t" -le 5 ]; then
        say "[$name] SKIPPED: no time left under the ${DEADLINE_S} s deadline"
        return 0
    fi
    local s rc=0
    s=$(date +%s)
    timeout -k 5 "$t" "$@" >>"$log" 2>&1 || rc=$?
    local took=$(($(date +%s) - s))
    if [ $rc -eq 0 ]; then say "[$name] ok (${took} s)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then say "[$name] TIMEOUT after ${took} s (budget ${t} s)"
    else say "[$name] FAILED rc=$rc (${took} s; see $(basename "$log"))"
    fi
    return 0
}

say "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), deadline ${DEADLINE_S} s, $JOBS cores"
say "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"

# 1. build ---------------------------------------------------------------------
echo "== build" >>"$ENVLOG"
step build-cuda 150 "$ENVLOG" make -j"$JOBS" cuda cuda-bench
if [ ! -f build/plugins/libdsv4q_cuda.so ]; then
    say "no plugin was built: nothing to check"
fi
step build-host 150 "$ENVLOG" make -j"$JOBS" all build/tests/test_cuda_plugin
DSV4Q=./build/dsv4q
# Prebuilt binaries carried from the dev machine find the libraries this
# image may lack (sqlite3, sodium, jansson, cmocka; never libc, libgomp, libz
# or libstdc++) in build/gpu-libs.
if [ -d build/gpu-libs ]; then
    export LD_LIBRARY_PATH="$PWD/build/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if ! "$DSV4Q" boundaries >/dev/null 2>>"$ENVLOG"; then
    say "dsv4q does not run here (not built, and no working prebuilt one: see --prepare)"
    DSV4Q=""
elif grep -qE "(jansson|sqlite3|sodium|mpfr|gmp|cmocka)\.h: No such file" "$ENVLOG"; then
    say "  (build-host: this image lacks -dev headers; using build/dsv4q and the test binary carried from the dev machine)"
fi

# 2. device --------------------------------------------------------------------
{
    echo "== nvidia-smi -L"
    nvidia-smi -L || true
    echo "== nvidia-smi query"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
        --format=csv || true
    echo "== nvcc"
    ${NVCC:-nvcc} --version 2>/dev/null | tail -2 || true
} >>"$ENVLOG" 2>&1
say "device: $(nvidia-smi -L 2>/dev/null | head -1 || echo 'nvidia-smi failed')"

# 3. the plugin's own tests on the GPU -----------------------------------------
if [ -x build/tests/test_cuda_plugin ]; then
    step tests 90 "$OUT/test_cuda_plugin.log" env DSV4Q_HAVE_GPU=1 ./build/tests/test_cuda_plugin
    grep -E '^\[  (PASSED|FAILED)  \]|rmsnorm on the GPU|^  gpu ' "$OUT/test_cuda_plugin.log" | head -60 >>"$SUMMARY" || true
else
    say "[tests] SKIPPED: build/tests/test_cuda_plugin not built"
fi

# 4. operator qualification on the Flash-shape suite ---------------------------
if [ -n "$DSV4Q" ] && [ -f build/plugins/libdsv4q_cuda.so ]; then
    step qualify-flash 200 "$OUT/qualify_flash.txt" "$DSV4Q" qualify --backend build/plugins/libdsv4q_cuda.so \
        --shapes flash --timeout 60 --json "$OUT/qualify_flash.json" --db "$OUT/receipts.db"
    grep -E '^[0-9]+ cases:|^receipt' "$OUT/qualify_flash.txt" >>"$SUMMARY" || true
    grep -E 'FAIL|ERROR' "$OUT/qualify_flash.txt" | grep -v '^\[qualify\]' | cut -c1-220 | head -25 >>"$SUMMARY" || true
else
    say "[qualify-flash] SKIPPED: needs dsv4q and the plugin"
fi

# 5. whole-model qualify: tiny-bf16 (the gate the tests use), then flash-slice
MODEL_LOG="$OUT/qualify_model.txt"
: >"$MODEL_LOG"
if [ -n "$DSV4Q" ] && [ -f build/plugins/libdsv4q_cuda.so ]; then
    step synth-tiny-bf16 30 "$MODEL_LOG" "$DSV4Q" synth --config tiny-bf16 --out "$WORK/tiny-bf16"
    step qualify-model-tiny 60 "$MODEL_LOG" "$DSV4Q" qualify --whole-model --backend build/plugins/libdsv4q_cuda.so \
        --model "$WORK/tiny-bf16" --timeout 60 --db "$OUT/receipts.db"
    step synth-flash-slice 120 "$MODEL_LOG" "$DSV4Q" synth --config flash-slice --out "$WORK/flash-slice"
    step qualify-model-flash-slice 150 "$MODEL_LOG" "$DSV4Q" qualify --whole-model \
        --backend build/plugins/libdsv4q_cuda.so --model "$WORK/flash-slice" --prompt-len "$PROMPT_LEN" \
        --decode "$DECODE" --timeout 120 --db "$OUT/receipts.db"
    grep -E 'PASS|FAIL|floor|NRMS|greedy' "$MODEL_LOG" | cut -c1-220 | head -20 >>"$SUMMARY" || true
else
    say "[qualify-model] SKIPPED: needs dsv4q and the plugin"
fi

# 6. bench ----------------------------------------------------------------------
if [ -x build/cuda/bench_cuda ]; then
    echo "== bench (per-operator GPU timings, Flash shapes)" >>"$SUMMARY"
    step bench 90 "$SUMMARY" ./build/cuda/bench_cuda --tokens 128 --csv "$OUT/bench.csv"
else
    say "[bench] SKIPPED: build/cuda/bench_cuda not built"
fi

say "total $(($(date +%s) - T0)) s (deadline ${DEADLINE_S} s); files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
cat "$SUMMARY"
