#!/bin/sh
# recipe-check.sh - prove the "Add an operator" recipe of docs/architecture.md
# by following it: in a scratch copy of the tree, add the template operator
# of scripts/recipe/ (recipe_scale, y = x * k) by the recipe's steps alone,
#   1. recipe_scale.c in harness/ops     the descriptor (next free id)
#   2. recipe_scale.c in oracle          the oracle function
#   3. test_op_recipe_scale.c in tests   its test
#   4. scripts/gen-ops.sh, make docs   (generated: the ABI's list and
#      summary, docs/backends.md)
# then build, run the tests an operator touches (its own, with the operator
# table check; the stage links; cpu-ref and the CUDA plugin's claims;
# the Python package's operator list when a venv exists), qualify it on
# oracle-f32 (passes) and cpu-ref (skipped: no backend implements it), and
# check that nothing but those files changed. Exit 0 when the recipe holds,
# 1 when a step fails (the step is named). Run by `make test`.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsv4q-recipe.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# cmocka-style summary lines, so tests/run_all.sh counts the check as one test
fail() { echo "recipe-check: FAILED at $*"; [ -f "$tmp/log" ] && tail -25 "$tmp/log"; echo "[  FAILED  ] 1 test(s)."; exit 1; }
# the tree as it is (committed or not), without build outputs
(cd "$src" && git ls-files -co --exclude-standard | grep -v '^build/' | tar -cf - -T -) | (mkdir -p "$tmp/t" && cd "$tmp/t" && tar -xf -) ||
    fail "copying the tree"
cp -a "$tmp/t" "$tmp/orig"
cd "$tmp/t" || exit 2
id=$(grep -h '^DSV4Q_OP_ROW(' harness/ops/*.c | wc -l)
sed "s/@ID@/$id/" scripts/recipe/op.c > harness/ops/recipe_scale.c
cp scripts/recipe/oracle.c oracle/recipe_scale.c
cp scripts/recipe/test.c tests/test_op_recipe_scale.c
sh scripts/gen-ops.sh > "$tmp/log" 2>&1 || fail "step 4: scripts/gen-ops.sh"
make -j2 build/dsv4q build/libdsv4q.so plugins > "$tmp/log" 2>&1 || fail "building the tree with the new operator"
make docs > "$tmp/log" 2>&1 || fail "step 4: make docs"
tests="test_op_recipe_scale test_stage_ops test_cpuref"
command -v g++ > /dev/null 2>&1 && tests="$tests test_cuda_plugin"
for t in $tests; do
    make -j2 "build/tests/$t" > "$tmp/log" 2>&1 || fail "building tests/$t.c"
    "./build/tests/$t" > "$tmp/log" 2>&1 || fail "tests/$t.c"
done
if [ -x "$src/build/venv/bin/python" ] && "$src/build/venv/bin/python" -c "import numpy, pytest" 2> /dev/null; then
    DSV4Q_LIB="$PWD/build/libdsv4q.so" PYTHONPATH="$PWD/python" "$src/build/venv/bin/python" -m pytest -q -p no:cacheprovider \
        python/tests/test_oracle.py > "$tmp/log" 2>&1 || fail "python/tests/test_oracle.py (the package's operator list)"
fi
export DSV4Q_DB="$tmp/r.db" HOME="$tmp/home"
./build/dsv4q qualify --backend oracle-f32 --ops recipe_scale -q > "$tmp/log" 2>&1 || fail "qualify --backend oracle-f32 --ops recipe_scale"
grep -q '2 cases: 2 pass' "$tmp/log" || fail "oracle-f32 passing both recipe_scale cases"
./build/dsv4q qualify --backend cpu-ref --ops recipe_scale -q > "$tmp/log" 2>&1
grep -q '2 skipped' "$tmp/log" || fail "cpu-ref skipping the operator it does not implement"
# nothing else was touched: the three new files and the generated texts
changed=$(diff -rq "$tmp/orig" "$tmp/t" -x build -x '*.db' 2>&1 | sed "s|$tmp/t/||g; s|$tmp/orig/||g" | sort)
want="Files abi/dsv4q_backend.h and abi/dsv4q_backend.h differ
Files docs/backends.md and docs/backends.md differ
Only in harness/ops: recipe_scale.c
Only in oracle: recipe_scale.c
Only in tests: test_op_recipe_scale.c"
[ "$changed" = "$want" ] || { printf '%s\n' "$changed" > "$tmp/log"; fail "the set of changed files (above; expected the 3 new files + abi/dsv4q_backend.h, docs/backends.md)"; }
echo "recipe-check: ok (operator $id recipe_scale: 3 hand-written files, 2 regenerated; built, tested, qualified)"
echo "[  PASSED  ] 1 test(s)."
