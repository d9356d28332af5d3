/*
 * test_op_recipe_scale.c - the recipe's template operator (scripts/recipe/):
 * hand values through the oracle at both widths (3 * 0.5 = 1.5 exactly;
 * 3 * (1 + 2^-10) rounds to 3 at norm_bf16 (BF16 keeps 7 fraction bits:
 * 3.0029296875 is 3 + 3 * 2^-10, below the half-ulp 2^-7 of [2, 4)), and
 * its cases build canonically. scripts/recipe-check.sh copies it to
 * test_op_recipe_scale.c in tests of a scratch copy of the tree.
 */
#include "tests/testutil.h"

#include "harness/ops/ops.h"
#include "oracle/boundary.h"

static void hand_values(void **state)
{
    (void)state;
    const int op = dsv4q_op_find("recipe_scale");
    assert_true(op >= 0);
    float x[2] = {0.5f, 1.0f + 0x1p-10f};
    dsv4q_bt in = {.name = "x", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {1, 2}, .data = x};
    dsv4q_bt out = {.name = "y", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {1, 2}};
    const double k = 3;
    dsv4q_bcall call = {.op = op, .nin = 1, .nout = 1, .in = &in, .out = &out, .param = &k, .nparam = 1};
    double y64[2];
    float y32[2];
    char err[256];
    void *o64[1] = {y64}, *o32[1] = {y32};
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, o64, err, sizeof err), 0);
    assert_true(y64[0] == 1.5 && y64[1] == 3.0 + 3 * 0x1p-10);
    assert_int_equal(dsv4q_oracle_exec(32, DSV4Q_BIT(DSV4Q_B_NORM_BF16), &call, o32, err, sizeof err), 0);
    assert_true(y32[0] == 1.5f && y32[1] == 3.0f);
}

static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "recipe_scale(k=2)", err, sizeof err), 0);
    assert_string_equal(c.key, "recipe_scale(rows=2,n=64,k=2,recipe=normal,seed=1)");
    assert_true(c.in[0].shape[0] == 2 && c.in[0].shape[1] == 64 && c.param[0] == 2);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
