/*
 * test_op_kv41_quant.c - KV41_QUANT (V4.1's compressed-KV codec) on hand
 * values through dsv4q_oracle_exec at both widths, and its cases' keys.
 *
 * Rows of one 16-block each (the values worked out by hand):
 *   row 0, amax 1: a/6 = 0.1666.. = 1.333*2^-3 rounds to the E4M3 value
 *     1.375*2^-3 = 0.171875 (not a power of two: E8M0 would give 0.25).
 *     1 / s = 5.82 -> 6 -> 1.03125; 0.5 / s = 2.91 -> 3 -> 0.515625;
 *     0.25 / s = 1.45 -> 1.5; -0.1 / s = -0.58 -> -0.5 -> -0.0859375;
 *     exact midpoints k*s: 0.75 -> 1, 2.5 -> 2, 0.25 -> 0, 5 -> 4,
 *     3.5 -> 4, 1.25 -> 1, 1.75 -> 2 (ties to the even code).
 *   row 1, amax 0.001 < the floor 6*2^-9: s = 2^-9 (E4M3's smallest
 *     subnormal); 0.001 / s = 0.512 -> 0.5 -> 2^-10; 1.5*2^-9 stays;
 *     2^-11 / s = 0.25 -> 0.
 *   row 2, amax 3000 > 448*6: the scale saturates to 448; 3000 -> 6*448 =
 *     2688; -1500 / 448 = -3.35 -> -3 -> -1344; 100 / 448 = 0.22 -> 0.
 *   row 3, amax 0.03: a/6 = 0.005 = 2.56*2^-9 rounds on the subnormal grid
 *     to 3*2^-9 = 0.005859375; 0.03 / s = 5.12 -> 6 -> 0.03515625;
 *     0.01 / s = 1.71 -> 1.5 -> 0.0087890625.
 */
#include "tests/testutil.h"

#include "harness/ops/ops.h"

#define B 16
static const float x_in[4][B] = {
    {1.0f, 0.5f, 0.25f, -0.1f, 0.0f, 0.12890625f, 0.4296875f, 0.04296875f, 0.859375f, 0.6015625f, 0.21484375f,
     0.30078125f, -0.12890625f, -0.4296875f, -0.859375f, -0.6015625f},
    {0.001f, 0.0029296875f, -0.00048828125f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {3000.0f, -1500.0f, 100.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0.03f, 0.01f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};
static const double y_want[4][B] = {
    {1.03125, 0.515625, 0.2578125, -0.0859375, 0, 0.171875, 0.34375, 0, 0.6875, 0.6875, 0.171875, 0.34375, -0.171875,
     -0.34375, -0.6875, -0.6875},
    {0.0009765625, 0.0029296875, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {2688, -1344, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0.03515625, 0.0087890625, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

static void hand_values(void **state)
{
    (void)state;
    const int op = dsv4q_op_find("kv41_quant");
    assert_int_equal(op, DSV4Q_OP_KV41_QUANT);
    dsv4q_bt in = {.name = "x", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {4, B}, .data = (void *)x_in};
    dsv4q_bt out = {.name = "y", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {4, B}};
    dsv4q_bcall call = {.op = op, .nin = 1, .nout = 1, .in = &in, .out = &out, .param = NULL, .nparam = 0};
    double y64[4 * B];
    float y32[4 * B];
    char err[256];
    void *o64[1] = {y64}, *o32[1] = {y32};
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, o64, err, sizeof err), 0);
    assert_int_equal(dsv4q_oracle_exec(32, 0, &call, o32, err, sizeof err), 0);
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < B; j++) {
            if (y64[r * B + j] != y_want[r][j] || (double)y32[r * B + j] != y_want[r][j])
                print_error("row %d col %d: f64 %a f32 %a want %a\n", r, j, y64[r * B + j], (double)y32[r * B + j],
                            y_want[r][j]);
            assert_true(y64[r * B + j] == y_want[r][j]);
            assert_true((double)y32[r * B + j] == y_want[r][j]);
        }
}

/* The case recipes do what they say: e4m3scale blocks have a maximum of
 * 6 s with s an E4M3 value that is not a power of two; floor blocks an
 * amax within 2x of 6*2^-9; saturate blocks one at or above 0.9*2688. */
static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "kv41_quant(rows=2)", err, sizeof err), 0);
    assert_string_equal(c.key, "kv41_quant(rows=2,n=512,recipe=normal,seed=1)");
    dsv4q_case_free(&c);
    assert_int_not_equal(dsv4q_case_build(&c, "kv41_quant(rows=2,n=40)", err, sizeof err), 0);

    assert_int_equal(dsv4q_case_build(&c, "kv41_quant(rows=4,n=64,recipe=e4m3scale,seed=3)", err, sizeof err), 0);
    const float *x = c.in[0].data;
    for (int b = 0; b < 4 * 64; b += B) {
        double amax = 0;
        for (int j = 0; j < B; j++) amax = fmax(amax, fabs((double)x[b + j]));
        const double s = amax / 6;
        int e;
        const double m = frexp(s, &e);
        assert_true(m != 0.5);                          /* not a power of two */
        assert_true(ldexp(m, 4) == floor(ldexp(m, 4))); /* 4 significant bits: on the E4M3 grid */
    }
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "kv41_quant(rows=4,n=64,recipe=floor,seed=3)", err, sizeof err), 0);
    x = c.in[0].data;
    for (int b = 0; b < 4 * 64; b += B) {
        double amax = 0;
        for (int j = 0; j < B; j++) amax = fmax(amax, fabs((double)x[b + j]));
        assert_true(amax <= 2 * 6.0 / 512);
    }
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "kv41_quant(rows=4,n=64,recipe=saturate,seed=3)", err, sizeof err), 0);
    x = c.in[0].data;
    for (int b = 0; b < 4 * 64; b += B) {
        double amax = 0;
        for (int j = 0; j < B; j++) amax = fmax(amax, fabs((double)x[b + j]));
        assert_true(amax >= 0.9 * 2688 - 1e-3);
    }
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
