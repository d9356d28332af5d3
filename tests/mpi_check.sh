#!/usr/bin/env bash
# The MPI driver (mpi/, docs/mpi.md) against one process: `mpirun
# --oversubscribe -np 1|2|3 dsv4q-mpi run` on the built-in tiny checkpoint
# writes a file byte-identical to `dsv4q run`'s (the logits of the prefill
# and 2 decode steps, at f64 and f32, in the source profile and in exact,
# where the hidden streams are not rounded to BF16 and so a boundary sent
# narrower than the run's width changes the logits), with the prompt in
# chunks (the pipeline) and with --ranks-layers. Faults: ranks that
# disagree on the width (a boundary message of the wrong size) stop with
# one line naming the rank; so does a checkpoint one rank cannot open
# (exit 2 on every rank); a bad --ranks-layers exits 2 before any work.
# DSV4Q_TEST_SLOW=1 adds flash-slice at -np 2 (2.3 min on two loaded cores).
# Skips without mpirun or build/dsv4q-mpi (`make mpi`), fails so under
# CI=true. Prints cmocka-style summary lines for tests/run_all.sh.
set -u
cd "$(dirname "$0")/.."
B=${DSV4Q_TEST_BUILD:-build}
fail() { echo "mpi_check: $*"; echo "[  FAILED  ] 1 test(s)."; exit 1; }
if ! command -v mpirun >/dev/null || [ ! -x "$B/dsv4q-mpi" ]; then
  why="mpirun or $B/dsv4q-mpi missing (install libopenmpi-dev openmpi-bin: sh scripts/deps.sh; then make mpi)"
  [ "${CI:-}" = true ] && fail "CI=true: $why"
  echo "mpi_check: skipped: $why"; echo "[  SKIPPED ] 1 test(s)."; exit 0
fi
# CI runs as root: Open MPI refuses that unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# an ASan build (DSV4Q_TEST_BUILD=build/asan): Open MPI leaves its own
# allocations (and its unloaded plugins') at exit, which LeakSanitizer
# reports; ASan and UBSan stay on. tests/test_layers.c runs the oracle's
# side of a rank under LeakSanitizer.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
tmp=$(mktemp -d /tmp/dsv4q-mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
T=60 # seconds a run may take before it counts as hung
mpi() { timeout "$T" mpirun --oversubscribe "$@"; }
n=0
for prof in source exact; do
  for w in f64 f32; do
    args=(--width "$w" --profile "$prof" --prompt-len 13 --decode 2 --quiet)
    "$B/dsv4q" run "${args[@]}" --out "$tmp/ref.st" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "dsv4q run $w failed"; }
    for case in "1 --chunk 5" "2 --chunk 4" "3 --chunk 1" "2 --ranks-layers 0-0,1-4"; do
      np=${case%% *}; extra=${case#* }
      # shellcheck disable=SC2086
      mpi -np "$np" "$B/dsv4q-mpi" run "${args[@]}" $extra --out "$tmp/mpi.st" >"$tmp/out" 2>"$tmp/err" ||
        { cat "$tmp/err"; fail "-np $np $extra ($prof $w) failed"; }
      grep -q "^wrote $tmp/mpi.st (logits_prefill \[1024\], logits_decode \[2, 1024\])$" "$tmp/out" ||
        { cat "$tmp/out"; fail "-np $np: rank 0 did not print dsv4q run's line"; }
      cmp -s "$tmp/ref.st" "$tmp/mpi.st" || fail "-np $np $extra ($prof $w): the logits differ from dsv4q run's"
      n=$((n + 1))
    done
  done
done
echo "mpi_check: $n runs byte-identical to dsv4q run (np 1-3, f64/f32, source/exact, chunks 1-7, --ranks-layers)"
# a boundary of the wrong size: rank 0 at f64 sends twice the bytes rank 1 at f32 expects
mpi -np 1 "$B/dsv4q-mpi" run --width f64 --prompt-len 8 --quiet --out "$tmp/x.st" : \
    -np 1 "$B/dsv4q-mpi" run --width f32 --prompt-len 8 --quiet --out "$tmp/x.st" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -ne 0 ] || fail "a wrong-size boundary did not stop the run"
grep -q "^dsv4q-mpi: rank 1: the boundary message of call 0 from rank 0 has 32768 bytes, expected 16384" "$tmp/err" ||
  { cat "$tmp/err"; fail "a wrong-size boundary: no line naming rank 1 and the sizes"; }
[ ! -e "$tmp/x.st" ] || fail "a failed run left its output file"
# a checkpoint one rank cannot open: every rank stops at the start, the rank named
mpi -np 1 "$B/dsv4q-mpi" run --width f64 --prompt-len 8 --quiet --out "$tmp/x.st" : \
    -np 1 "$B/dsv4q-mpi" run --width f64 --prompt-len 8 --quiet --model "$tmp/none" --out "$tmp/x.st" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] || { cat "$tmp/err"; fail "a checkpoint missing on rank 1 exited $rc, expected 2"; }
grep -q "^dsv4q-mpi: rank 1: could not start" "$tmp/err" || { cat "$tmp/err"; fail "a checkpoint missing on rank 1: rank not named"; }
[ ! -e "$tmp/x.st" ] || fail "a run that did not start left an output file"
mpi -np 2 "$B/dsv4q-mpi" run --width f64 --ranks-layers 0-1,3-4 --out "$tmp/x.st" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] || fail "a gap in --ranks-layers exited $rc, expected 2"
grep -q "range 1 (3-4) should start at layer 2" "$tmp/err" || { cat "$tmp/err"; fail "a gap in --ranks-layers: no message"; }
# a --chunk past the prompt is the one call (no overflow of chunk x bytes per token)
mpi -np 2 "$B/dsv4q-mpi" run --width f64 --prompt-len 13 --decode 2 --quiet --chunk 9223372036854775807 \
    --out "$tmp/mpi.st" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "--chunk LONG_MAX failed"; }
"$B/dsv4q" run --width f64 --prompt-len 13 --decode 2 --quiet --out "$tmp/ref.st" >/dev/null 2>&1
cmp -s "$tmp/ref.st" "$tmp/mpi.st" || fail "--chunk LONG_MAX: the logits differ from dsv4q run's"
mpi -np 6 "$B/dsv4q-mpi" run --width f64 --out "$tmp/x.st" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "6 ranks for a model of 5 layers" "$tmp/err" || { cat "$tmp/err"; fail "6 ranks on 5 layers not refused"; }
# DSV4Q_TEST_SLOW=1: flash-slice too (3 layers at Flash's widths: the synth
# and four runs, 2.3 min on two loaded cores), -np 2 against one process
if [ "${DSV4Q_TEST_SLOW:-}" = 1 ]; then
  T=600
  "$B/dsv4q" synth --config flash-slice --out "$tmp/flash" >/dev/null 2>&1 || fail "synth flash-slice failed"
  for w in f64 f32; do
    args=(--model "$tmp/flash" --width "$w" --profile exact --prompt-len 24 --decode 1 --quiet)
    "$B/dsv4q" run "${args[@]}" --out "$tmp/ref.st" >/dev/null 2>&1 || fail "dsv4q run flash-slice $w failed"
    mpi -np 2 "$B/dsv4q-mpi" run "${args[@]}" --chunk 8 --out "$tmp/mpi.st" >/dev/null 2>"$tmp/err" ||
      { cat "$tmp/err"; fail "-np 2 flash-slice $w failed"; }
    cmp -s "$tmp/ref.st" "$tmp/mpi.st" || fail "-np 2 flash-slice $w: the logits differ from dsv4q run's"
  done
  echo "mpi_check: flash-slice -np 2 byte-identical to dsv4q run (f64, f32, exact profile, chunks of 8)"
  T=60
fi
# --help: once (rank 0), with this binary's own option
mpi -np 2 "$B/dsv4q-mpi" run --help >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "--help failed"; }
[ "$(grep -c '^usage: dsv4q run' "$tmp/out")" = 1 ] && grep -q -- '--ranks-layers A-B' "$tmp/out" ||
  { cat "$tmp/out"; fail "--help: not printed once by rank 0 with --ranks-layers"; }
echo "mpi_check: faults: wrong-size boundary (rank 1 named, MPI_Abort), a checkpoint missing on one rank, --ranks-layers gap, more ranks than layers"
echo "[  PASSED  ] 1 test(s)."
