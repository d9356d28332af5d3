/*
 * test_op_compressor41.c - COMPRESSOR41 (V4.1's ratio-1/2 compressor of a
 * kv source, before RoPE) on hand values through dsv4q_oracle_exec at both
 * widths, hostile calls refused, and its cases.
 *
 * Dc = 2, norm w = (1, 2), eps = 2^-66, no boundaries unless named. With
 * Dc = 2 the norm of a row (a, b) is (a, b) / sqrt((a^2 + b^2)/2 + eps) * w.
 *
 * Ratio 1, d = 2, wkv (BF16) = [[1, 1], [1, -1]]: kv = (x0 + x1, x0 - x1).
 *   t0 x = (4, 3):     kv (7, 1), ms 25 -> (7/5, 1/5) w = (1.4, 0.4);
 *   t1 x = (2, 2):     kv (4, 0), ms 8  -> (4/sqrt 8, 0) w = (sqrt 2, 0);
 *   t2 x = (2^-33, 0): kv (2^-33, 2^-33), ms 2^-66 = eps, so the norm
 *     divides by sqrt(2^-65): 2^-0.5 (1, 1) w = (0.7071, 1.4142) (without
 *     eps it would be (1, 2)).
 *   With linear_bf16 on, x = (1, 2^-9): kv (1 + 2^-9, 1 - 2^-9) rounds to
 *   BF16 (1, 1) (below half an ulp; 1 - 2^-9 is the tie between 1 - 2^-8
 *   and 1, to the even 1), ms 1 -> (1, 2); unrounded it would be
 *   (1.00195, 1.99610).
 *
 * Ratio 2, d = 3, x = (k0, k1, g): wkv = [[1,0,0],[0,1,0]] (kv = (k0, k1)),
 * wgate = [[0,0,1],[0,0,-1]] (score = (g, -g)). With g = ln 3 on the first
 * token of a pair and 0 on the second, feature 0 weighs the pair
 * (3/4, 1/4) and feature 1 (1/4, 3/4). s = 7:
 *   pair 0: t0 (8, 4, ln3), t1 (4, 0, 0): (6 + 1, 1 + 0) = (7, 1) -> (1.4, 0.4);
 *   pair 1: t2 (0, 4, ln3), t3 (4, 8, 0): (0 + 1, 1 + 6) = (1, 7) -> (0.2, 2.8);
 *     (t2 alone from a fresh slot, the mutant's defect: (4, 8) -> (0.632, 2.530));
 *   pair 2: t4 (7, 1, 200), t5 (100, 1, 0): weights (1, e^-200) and
 *     (e^-200, 1): (7, 1) -> (1.4, 0.4) (exp(200) overflows FP32: only
 *     with the max subtracted is it finite);
 *   t6 (5, 5, 5): its pair never completes, no row.
 * The rows do not depend on where the prefill ends: p = 1, 2, 3, 6, 7 all
 * give the same three rows (an odd p leaves its last token in the state).
 */
#include "tests/testutil.h"

#include <math.h>
#include <string.h>
#include "harness/ops/ops.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"

#define DC 2

static const float NW[DC] = {1, 2};

typedef struct {
    dsv4q_bt in[4], out;
    double p[3];
    dsv4q_bcall call;
} c41;

/* A call of ratio r over x [s, d] with wkv [DC, d] (BF16 codes in raw when
 * wkv_raw), wgate [DC, d] or NULL, prefill p, rows [n, DC]. */
static void mk(c41 *c, int r, const float *x, long s, long d, const float *wkv, const uint16_t *wkv_raw,
               const float *wg, long p, long n)
{
    memset(c, 0, sizeof *c);
    c->in[0] = (dsv4q_bt){.name = "x", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {s, d}, .data = (void *)x};
    c->in[1] = (dsv4q_bt){.name = "wkv", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {DC, d}, .data = (void *)wkv};
    if (wkv_raw) {
        c->in[1].raw = (void *)wkv_raw;
        c->in[1].raw_dtype = DSV4Q_BT_BF16;
        c->in[1].raw_ndim = 2;
        c->in[1].raw_shape[0] = DC;
        c->in[1].raw_shape[1] = d;
    }
    c->in[2] =
        (dsv4q_bt){.name = "wgate", .dtype = DSV4Q_BT_F32, .ndim = wg ? 2 : 0, .shape = {DC, d}, .data = (void *)wg};
    c->in[3] = (dsv4q_bt){.name = "norm", .dtype = DSV4Q_BT_F32, .ndim = 1, .shape = {DC}, .data = (void *)NW};
    c->out = (dsv4q_bt){.name = "rows", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {n, DC}};
    c->p[0] = r;
    c->p[1] = (double)p;
    c->p[2] = 0x1p-66;
    c->call = (dsv4q_bcall){
        .op = DSV4Q_OP_COMPRESSOR41, .nin = 4, .nout = 1, .in = c->in, .out = &c->out, .param = c->p, .nparam = 3};
}

/* Run at both widths; every value within rel 1e-6 (f32) / 1e-12 (f64) of want. */
static void expect(c41 *c, uint64_t bs, const double *want, long n, const char *what)
{
    double o64[16];
    float o32[16];
    char err[256];
    void *v64[1] = {o64}, *v32[1] = {o32};
    assert_true(n * DC <= 16);
    if (dsv4q_oracle_exec(64, bs, &c->call, v64, err, sizeof err)) fail_msg("%s: %s", what, err);
    if (dsv4q_oracle_exec(32, bs, &c->call, v32, err, sizeof err)) fail_msg("%s: %s", what, err);
    for (long i = 0; i < n * DC; i++) {
        const double tol = fabs(want[i]) + 1e-30;
        if (!(fabs(o64[i] - want[i]) <= 1e-12 * tol) || !(fabs(o32[i] - want[i]) <= 1e-6 * tol))
            fail_msg("%s: value %ld: f64 %.9g f32 %.9g want %.9g", what, i, o64[i], (double)o32[i], want[i]);
    }
}

static void ratio1_hand(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_op_find("compressor41"), DSV4Q_OP_COMPRESSOR41);
    const float w[DC * 2] = {1, 1, 1, -1};
    const uint16_t raw[DC * 2] = {0x3F80, 0x3F80, 0x3F80, 0xBF80}; /* BF16 1, 1, 1, -1 */
    for (int i = 0; i < 4; i++) assert_true(dsv4q_bf16_to_f32(raw[i]) == w[i]);
    const float x[3 * 2] = {4, 3, 2, 2, 0x1p-33f, 0};
    const double r2 = sqrt(2.0), want[3 * DC] = {1.4, 0.4, r2, 0, 1 / r2, r2};
    c41 c;
    for (long p = 1; p <= 3; p++) { /* the prefill / decode split changes nothing at ratio 1 */
        mk(&c, 1, x, 3, 2, w, raw, NULL, p, 3);
        expect(&c, 0, want, 3, "ratio 1");
    }
    /* linear_bf16: the product is rounded before the norm (ratio 1 only) */
    const float xb[2] = {1, 0x1p-9f};
    const double wb[DC] = {1, 2};
    mk(&c, 1, xb, 1, 2, w, raw, NULL, 1, 1);
    expect(&c, 1ull << DSV4Q_B_LINEAR_BF16, wb, 1, "ratio 1, linear_bf16");
}

static void ratio2_hand(void **state)
{
    (void)state;
    const float l3 = (float)log(3.0);
    const float wkv[DC * 3] = {1, 0, 0, 0, 1, 0}, wg[DC * 3] = {0, 0, 1, 0, 0, -1};
    const float x[7 * 3] = {8, 4, l3, 4, 0, 0, 0, 4, l3, 4, 8, 0, 7, 1, 200, 100, 1, 0, 5, 5, 5};
    /* l3 is ln 3 rounded to FP32: the weights 3/4, 1/4 move by ~1e-8, so
     * the expectation uses the exact softmax of l3 (still by hand: e^l3 / (e^l3 + 1)) */
    const double e = exp((double)l3), a = e / (e + 1), b = 1 / (e + 1);
    const double p0[2] = {8 * a + 4 * b, 4 * b + 0 * a}, p1[2] = {0 * a + 4 * b, 4 * b + 8 * a};
    double want[3 * DC];
    const double *pr[3] = {p0, p1, (const double[]){7, 1}};
    for (int g = 0; g < 3; g++) { /* the norm of each pooled row, eps negligible here */
        const double inv = 1 / sqrt((pr[g][0] * pr[g][0] + pr[g][1] * pr[g][1]) / 2);
        for (int j = 0; j < DC; j++) want[g * DC + j] = pr[g][j] * inv * NW[j];
    }
    /* and the values the comment gives, to the FP32 rounding of ln 3 */
    const double hand[3 * DC] = {1.4, 0.4, 0.2, 2.8, 1.4, 0.4};
    for (int i = 0; i < 3 * DC; i++) assert_true(fabs(want[i] - hand[i]) < 1e-6);
    c41 c;
    const long ps[5] = {1, 2, 3, 6, 7};
    for (int q = 0; q < 5; q++) {
        char what[64];
        snprintf(what, sizeof what, "ratio 2, prefill %ld", ps[q]);
        mk(&c, 2, x, 7, 3, wkv, NULL, wg, ps[q], 3);
        expect(&c, 0, want, 3, what);
    }
    /* s = 3, p = 3: the third token waits in the state, one row */
    mk(&c, 2, x, 3, 3, wkv, NULL, wg, 3, 1);
    expect(&c, 0, want, 1, "ratio 2, s 3");
    /* cmp_bf16 rounds the pooled row: (7, 1) stays, so the same values */
    mk(&c, 2, x + 12, 2, 3, wkv, NULL, wg, 1, 1);
    expect(&c, 1ull << DSV4Q_B_CMP_BF16, want + 4, 1, "ratio 2, cmp_bf16");
}

/* Calls the oracle must not run: refused with a message naming the fault. */
static void hostile(void **state)
{
    (void)state;
    const float w[DC * 3] = {1, 0, 0, 0, 1, 0}, x[4 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3};
    const dsv4q_op_info *oi = dsv4q_op_get(DSV4Q_OP_COMPRESSOR41);
    assert_non_null(oi);
    assert_non_null(oi->check);
    struct {
        int ratio;
        long s, p, n;
        int gate, bad_out, bad_wkv;
        double eps;
        const char *msg;
    } bad[] = {
        /* clang-format off */
        {3, 4, 4, 1, 1, 0, 0, 0, "ratio = 3"},
        {0, 4, 4, 4, 0, 0, 0, 0, "ratio = 0"},
        {2, 4, 4, 2, 0, 0, 0, 0, "needs wgate"},
        {1, 4, 4, 4, 1, 0, 0, 0, "no gate"},
        {2, 4, 0, 2, 1, 0, 0, 0, "prefill p = 0"},
        {2, 4, 5, 2, 1, 0, 0, 0, "prefill p = 5"},
        {2, 4, 4, 4, 1, 0, 0, 0, "rows must be [2,2]"},
        {1, 4, 4, 2, 0, 0, 0, 0, "rows must be [4,2]"},
        {2, 4, 4, 2, 1, 1, 0, 0, "rows must be"},
        {2, 4, 4, 2, 1, 0, 1, 0, "wkv is [2,2]"},
        {2, 4, 4, 2, 1, 0, 0, -1, "eps = -1"},
        /* clang-format on */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c41 c;
        mk(&c, bad[i].ratio, x, bad[i].s, 3, w, NULL, bad[i].gate ? w : NULL, bad[i].p, bad[i].n);
        if (bad[i].bad_out) c.out.shape[1] = 3;
        if (bad[i].bad_wkv) c.in[1].shape[1] = 2;
        if (bad[i].eps) c.p[2] = bad[i].eps;
        double o64[16];
        float o32[16];
        void *v64[1] = {o64}, *v32[1] = {o32};
        char err[256] = "", e32[256] = "", ec[256] = "";
        assert_int_equal(dsv4q_oracle_exec(64, 0, &c.call, v64, err, sizeof err), -1);
        assert_int_equal(dsv4q_oracle_exec(32, 0, &c.call, v32, e32, sizeof e32), -1);
        assert_int_equal(oi->check(&c.call, ec, sizeof ec), -1);
        if (!strstr(err, bad[i].msg) || strcmp(err, e32) || strcmp(err, ec))
            fail_msg("hostile %zu: '%s' / '%s' / '%s' (want '%s')", i, err, e32, ec, bad[i].msg);
    }
}

/* The recipes and keys: shapes by ratio, dominant's structure, refusals. */
static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "compressor41(d=64,Dc=16)", err, sizeof err), 0);
    assert_string_equal(c.key, "compressor41(s=12,d=64,ratio=2,Dc=16,p=7,recipe=normal,seed=1)");
    assert_int_equal(c.out[0].shape[0], 6);
    assert_true(c.param[0] == 2 && c.param[1] == 7 && c.param[2] == 1e-20);
    assert_int_equal(c.in[2].ndim, 2);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "compressor41(s=5,d=64,ratio=1,Dc=16,p=2)", err, sizeof err), 0);
    assert_int_equal(c.out[0].shape[0], 5);
    assert_int_equal(c.in[2].ndim, 0);
    assert_int_equal(c.in[1].raw_dtype, DSV4Q_BT_BF16);
    dsv4q_case_free(&c);
    /* dominant: column 0 feeds only the gate; one token per pair at 96, the
     * carried token (6) leading the pair that crosses p = 7 */
    assert_int_equal(dsv4q_case_build(&c, "compressor41(d=64,Dc=16,recipe=dominant)", err, sizeof err), 0);
    const float *x = c.in[0].data, *wk = c.in[1].data, *wg = c.in[2].data;
    for (int j = 0; j < 16; j++) assert_true(wk[j * 64] == 0 && wg[j * 64] == 1);
    for (int g = 0; g < 6; g++) assert_true((x[2 * g * 64] == 96) + (x[(2 * g + 1) * 64] == 96) == 1);
    assert_true(x[6 * 64] == 96 && x[7 * 64] == 0);
    dsv4q_case_free(&c);
    static const char *const refused[] = {"compressor41(ratio=3)", "compressor41(s=4,p=5)", "compressor41(p=0)",
                                          "compressor41(ratio=1,recipe=dominant)", "compressor41(recipe=ties)"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        err[0] = 0;
        assert_int_not_equal(dsv4q_case_build(&c, refused[i], err, sizeof err), 0);
        assert_true(err[0] != 0);
    }
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(ratio1_hand), cmocka_unit_test(ratio2_hand),
                                       cmocka_unit_test(hostile), cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
