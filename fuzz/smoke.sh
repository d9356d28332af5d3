#!/usr/bin/env bash
# fuzz/smoke.sh [SECONDS] - run every fuzz target (build/fuzz/fuzz_*, `make
# fuzz`) for SECONDS (default 20) each on its seed corpus (fuzz/seeds.sh,
# made with build/dsv4q). Exit 1 on the first target that finds a crash,
# leak, UB or timeout (the reproducer is left in build/fuzz/crash-TARGET/).
# CI runs it as a bounded smoke; run longer by hand (docs/robustness.md).
# libFuzzer's random seed is FUZZ_SEED (default 1), so a finding replays:
# the same seed makes the same inputs in the same order on any machine.
set -u
secs=${1:-20}
cd "$(dirname "$0")/.."
seeds=build/fuzz/seeds
[ -d "$seeds" ] || bash fuzz/seeds.sh "$seeds" build/dsv4q >/dev/null || exit 1
rc=0
for f in build/fuzz/fuzz_*; do
  case "$f" in *.d|*.o) continue;; esac
  [ -x "$f" ] || continue
  t=${f#build/fuzz/fuzz_}
  corpus=build/fuzz/corpus-$t; mkdir -p "$corpus" "build/fuzz/crash-$t"
  cp -n "$seeds/$t"/* "$corpus"/ 2>/dev/null || true
  out=$("$f" -seed="${FUZZ_SEED:-1}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/crash-$t/" "$corpus" 2>&1); r=$?
  ex=$(echo "$out" | sed -n 's/^stat::number_of_executed_units: *//p' | tail -1)
  cov=$(echo "$out" | grep -o 'cov: [0-9]*' | tail -1)
  echo "fuzz $t: ${ex:-?} executions, ${cov:-cov: ?} edges, exit $r"
  if [ $r -ne 0 ]; then echo "$out" | tail -40; rc=1; fi
done
exit $rc
