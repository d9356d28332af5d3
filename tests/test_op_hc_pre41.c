/*
 * test_op_hc_pre41.c - HC_PRE41 (V4.1's lagged hc pre step) on hand values
 * through dsv4q_oracle_exec at both widths, its cases, and hostile calls
 * refused with a message (the C API's shape and value checks, cpu-ref's).
 *
 * s = 2, hc = 2, d = 2, hc_eps e = 0.25 (large, so where it is added
 * shows), norm_eps 1e-20, scale = (2, 1, 0.5), base = (0, 1, 0, ..).
 * X token 0 = [[1, 1], [1, -1]] (flattened x = 1 1 1 -1: mean x^2 = 1,
 * rsqrt = 1); token 1 = 2 X0 (mean 4, rsqrt 0.5), so both tokens have the
 * same mixes m = (fn x) rsqrt. The 8 rows of fn (pre0 pre1 post0 post1
 * c00 c01 c10 c11): ra = (.5 .5 0 0) gives m = 1, rc = (0 0 -.5 .5)
 * gives m = -1, zero rows m = 0; fn = ra 0 0 rc ra 0 0 0. Then
 *   pre0  = sig(1*2 + 0) + e = 0.8807970779778823 + 0.25 = 1.1307970779778822
 *   pre1  = sig(0*2 + 1) + e = 0.7310585786300049 + 0.25 = 0.9810585786300049
 *   post0 = 2 sig(0) = 1;  post1 = 2 sig(-1) = 2 * 0.2689414213699951 = 0.5378828427399902
 *   comb logits row 0 = (1*0.5, 0), row 1 = (0, 0); softmax + e:
 *     row 0 = (sig(.5), sig(-.5)) + e = (0.8724593312018546, 0.6275406687981454),
 *     row 1 = (0.75, 0.75);
 *   iteration 1, columns / (sum + e): col 0 sum 1.6224593312 + e = 1.8724593312,
 *     col 1 1.3775406688 + e = 1.6275406688:
 *     C = [[0.4659430069660626, 0.3855760294220799], [0.4005427447754531, 0.46081797793344]]
 *   iteration 2 (iters = 2), rows / (sum + e): row 0 0.8515190364 + e, row 1
 *     0.8613607227 + e -> [[0.42300, 0.35004], [0.36041, 0.41465]]; then
 *     columns: col 0 0.78341 + e, col 1 0.76469 + e ->
 *     C = [[0.40932569376401645, 0.3449749049035333], [0.34875628352559673, 0.4086428022209292]]
 * y collapses with the INCOMING premix, token 0 identity (1, 0): y = X0's
 * stream 0 = (1, 1); token 1 (0.5, (float)1/3): y = 0.5 (2, 2) +
 * 0.33333334 (2, -2) = (1.66666669, 0.33333331), stored at resid_bf16:
 * (1.6640625, 0.333984375) (213 steps of 2^-7; 171 of 2^-9). With the
 * pre-mix just computed y would be (pre0 + pre1) (1, 1) = 2.11, ... .
 */
#include "tests/testutil.h"

#include <math.h>
#include "backends/cpuref/cpuref.h"
#include "cli/dsv4q_capi.h"
#include "harness/ops/ops.h"
#include "oracle/boundary.h"

#define S 2
#define HC 2
#define D 2
#define NMIX ((2 + HC) * HC)

typedef struct call5 {
    float X[S * HC * D], premix[S * HC], fn[NMIX * HC * D], scale[3], base[NMIX];
    dsv4q_bt in[5], out[4];
    double p[3];
    dsv4q_bcall c;
} call5;

static void setup(call5 *k, int iters)
{
    static const float X[S * HC * D] = {1, 1, 1, -1, 2, 2, 2, -2};
    static const float ra[4] = {0.5f, 0.5f, 0, 0}, rc[4] = {0, 0, -0.5f, 0.5f};
    memset(k, 0, sizeof *k);
    memcpy(k->X, X, sizeof X);
    k->premix[0] = 1;
    k->premix[1] = 0;
    k->premix[2] = 0.5f;
    k->premix[3] = (float)(1.0 / 3.0);
    memcpy(k->fn + 0 * 4, ra, sizeof ra);
    memcpy(k->fn + 3 * 4, rc, sizeof rc);
    memcpy(k->fn + 4 * 4, ra, sizeof ra);
    k->scale[0] = 2;
    k->scale[1] = 1;
    k->scale[2] = 0.5f;
    k->base[1] = 1;
    k->in[0] = (dsv4q_bt){.name = "X", .dtype = DSV4Q_BT_F32, .ndim = 3, .shape = {S, HC, D}, .data = k->X};
    k->in[1] = (dsv4q_bt){.name = "premix", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {S, HC}, .data = k->premix};
    k->in[2] = (dsv4q_bt){.name = "fn", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {NMIX, HC * D}, .data = k->fn};
    k->in[3] = (dsv4q_bt){.name = "scale", .dtype = DSV4Q_BT_F32, .ndim = 1, .shape = {3}, .data = k->scale};
    k->in[4] = (dsv4q_bt){.name = "base", .dtype = DSV4Q_BT_F32, .ndim = 1, .shape = {NMIX}, .data = k->base};
    k->out[0] = (dsv4q_bt){.name = "y", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {S, D}};
    k->out[1] = (dsv4q_bt){.name = "pre", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {S, HC}};
    k->out[2] = (dsv4q_bt){.name = "post", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {S, HC}};
    k->out[3] = (dsv4q_bt){.name = "comb", .dtype = DSV4Q_BT_F32, .ndim = 3, .shape = {S, HC, HC}};
    k->p[0] = 1e-20;
    k->p[1] = 0.25;
    k->p[2] = iters;
    k->c = (dsv4q_bcall){
        .op = DSV4Q_OP_HC_PRE41, .nin = 5, .nout = 4, .in = k->in, .out = k->out, .param = k->p, .nparam = 3};
}

static void near(const char *what, int w, double got, double want)
{
    const double tol = w == 64 ? 1e-14 : 2e-6;
    if (!(fabs(got - want) <= tol * fmax(1, fabs(want)))) {
        print_error("f%d %s: %.17g, want %.17g\n", w, what, got, want);
        fail();
    }
}

static void run_width(int iters, int w, const double C[4])
{
    static const double pre[HC] = {1.1307970779778822, 0.9810585786300049}, post[HC] = {1.0, 0.5378828427399902};
    static const double y[S * D] = {1, 1, 1.6640625, 0.333984375};
    call5 k;
    setup(&k, iters);
    k.c.boundaries = DSV4Q_BIT(DSV4Q_B_RESID_BF16);
    double o64[4][8];
    float o32[4][8];
    void *dst[4];
    for (int i = 0; i < 4; i++) dst[i] = w == 64 ? (void *)o64[i] : (void *)o32[i];
    char err[256];
    assert_int_equal(dsv4q_oracle_exec(w, k.c.boundaries, &k.c, dst, err, sizeof err), 0);
#define V(i, j) (w == 64 ? o64[i][j] : (double)o32[i][j])
    for (int t = 0; t < S; t++) {
        for (int i = 0; i < D; i++) assert_true(V(0, t * D + i) == y[t * D + i]); /* BF16: exact */
        for (int j = 0; j < HC; j++) {
            near("pre", w, V(1, t * HC + j), pre[j]);
            near("post", w, V(2, t * HC + j), post[j]);
        }
        for (int j = 0; j < HC * HC; j++) near("comb", w, V(3, t * HC * HC + j), C[j]);
    }
#undef V
}

static void hand_values(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_op_find("hc_pre41"), DSV4Q_OP_HC_PRE41);
    static const double C1[4] = {0.4659430069660626, 0.3855760294220799, 0.4005427447754531, 0.46081797793344},
                        C2[4] = {0.40932569376401645, 0.3449749049035333, 0.34875628352559673, 0.4086428022209292};
    for (int w = 32; w <= 64; w += 32) {
        run_width(1, w, C1);
        run_width(2, w, C2);
    }
}

/* cpu-ref on the same call: the same values (its own FP32 code). */
static void cpuref_hand_values(void **state)
{
    (void)state;
    call5 k;
    setup(&k, 2);
    float y[S * D], pre[S * HC], post[S * HC], comb[S * HC * HC];
    k.out[0].data = y;
    k.out[1].data = pre;
    k.out[2].data = post;
    k.out[3].data = comb;
    const dsv4q_backend_v1 *b = dsv4q_cpuref_backend(NULL);
    void *ctx = NULL;
    char err[256];
    assert_int_equal(b->init(&ctx, err, sizeof err), 0);
    assert_int_equal(b->run(ctx, &k.c, err, sizeof err), 0);
    assert_int_equal(k.out[0].dtype, DSV4Q_BT_BF16); /* y returned as BF16 codes */
    const uint16_t *yc = (const uint16_t *)y;
    static const uint16_t want_y[4] = {0x3F80, 0x3F80, 0x3FD5, 0x3EAB}; /* 1, 1, 1.6640625, 0.333984375 */
    for (int i = 0; i < 4; i++) assert_int_equal(yc[i], want_y[i]);
    near("cpu-ref pre0", 32, pre[2], 1.1307970779778822);
    near("cpu-ref C11", 32, comb[7], 0.4086428022209292);
}

/* One hostile call through the C API: refused with a message containing want. */
static void refused(call5 *k, const char *want)
{
    char err[256] = "";
    dsv4q_bt tmpl[4];
    assert_int_equal(dsv4q_capi_shapes(DSV4Q_OP_HC_PRE41, k->in, 5, k->p, 3, tmpl, 4, err, sizeof err), -1);
    if (!strstr(err, want)) {
        print_error("message '%s' lacks '%s'\n", err, want);
        fail();
    }
}

static void hostile_calls(void **state)
{
    (void)state;
    call5 k;
    char err[256];
    dsv4q_bt tmpl[4];
    setup(&k, 2);
    assert_int_equal(dsv4q_capi_shapes(DSV4Q_OP_HC_PRE41, k.in, 5, k.p, 3, tmpl, 4, err, sizeof err), 0);
    assert_true(tmpl[3].ndim == 3 && tmpl[3].shape[1] == HC && tmpl[3].shape[2] == HC);
    k.in[1].shape[1] = HC + 1; /* premix with a stream too many */
    refused(&k, "premix");
    setup(&k, 2);
    k.in[2].shape[0] = NMIX - 1; /* fn one mix short */
    refused(&k, "fn");
    setup(&k, 2);
    k.p[2] = 0;
    refused(&k, "iters");
    setup(&k, 2);
    k.p[2] = 2.5;
    refused(&k, "iters");
    setup(&k, 2);
    k.p[0] = 0;
    refused(&k, "norm_eps");
    setup(&k, 2);
    k.p[1] = -1;
    refused(&k, "hc_eps");
    /* 17 streams: consistent shapes, refused by the value check */
    setup(&k, 2);
    const long hc = 17, nm = (2 + hc) * hc;
    float *big = calloc((size_t)(nm * hc + 2 * hc + nm), sizeof(float));
    assert_non_null(big);
    k.in[0].shape[0] = 1;
    k.in[0].shape[1] = hc;
    k.in[0].shape[2] = 1;
    k.in[0].data = big;
    k.in[1].shape[0] = 1;
    k.in[1].shape[1] = hc;
    k.in[1].data = big;
    k.in[2].shape[0] = nm;
    k.in[2].shape[1] = hc;
    k.in[2].data = big;
    k.in[4].shape[0] = nm;
    k.in[4].data = big;
    refused(&k, "hc = 17");
    /* cpu-ref refuses a premix that does not match X, with a message */
    setup(&k, 2);
    k.in[1].shape[0] = 1;
    float o[4][8];
    for (int i = 0; i < 4; i++) k.out[i].data = o[i];
    const dsv4q_backend_v1 *b = dsv4q_cpuref_backend(NULL);
    void *ctx = NULL;
    assert_int_equal(b->init(&ctx, err, sizeof err), 0);
    assert_int_equal(b->run(ctx, &k.c, err, sizeof err), DSV4Q_BACKEND_ERROR);
    assert_non_null(strstr(err, "hc_pre41"));
    /* and a 17-stream call */
    setup(&k, 2);
    k.in[0] = (dsv4q_bt){.name = "X", .dtype = DSV4Q_BT_F32, .ndim = 3, .shape = {1, hc, 1}, .data = big};
    assert_int_equal(b->run(ctx, &k.c, err, sizeof err), DSV4Q_BACKEND_ERROR);
    assert_non_null(strstr(err, "hc_pre41"));
    free(big);
}

/* The recipes' incoming pre-mix: identity [1, 0, ..]; lagged one-hot on a
 * stream other than 0; normal values in (hc_eps, 1 + hc_eps). Params are
 * V4.1's (norm_eps 1e-20) with the keys' iters / hc_eps. */
static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "hc_pre41(d=64)", err, sizeof err), 0);
    assert_string_equal(c.key, "hc_pre41(s=2,hc=4,d=64,recipe=normal,seed=1)");
    assert_true(c.param[0] == 1e-20 && c.param[1] == 1e-6 && c.param[2] == 20);
    assert_int_equal(c.nin, 5);
    assert_int_equal(c.nout, 4);
    for (int i = 0; i < 8; i++) {
        const float v = ((const float *)c.in[1].data)[i];
        assert_true(v > 1e-6 && v < 1 + 1e-6);
    }
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "hc_pre41(s=8,d=64,iters=3,hceps=1e-5,recipe=identity)", err, sizeof err), 0);
    assert_true(c.param[1] == 1e-5 && c.param[2] == 3);
    for (int t = 0; t < 8; t++)
        for (int j = 0; j < 4; j++) assert_true(((const float *)c.in[1].data)[t * 4 + j] == (j == 0 ? 1.0f : 0.0f));
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "hc_pre41(s=16,d=64,recipe=lagged,seed=5)", err, sizeof err), 0);
    for (int t = 0; t < 16; t++) {
        const float *pm = (const float *)c.in[1].data + t * 4;
        assert_true(pm[0] == 0);
        assert_true(pm[1] + pm[2] + pm[3] == 1 && (pm[1] == 1 || pm[2] == 1 || pm[3] == 1));
    }
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "hc_pre41(d=64,recipe=ties)", err, sizeof err), -1);
    assert_non_null(strstr(err, "recipe 'ties' is not defined for hc_pre41"));
    assert_int_equal(dsv4q_case_build(&c, "hc_pre41(d=64,iters=0)", err, sizeof err), -1);
    assert_non_null(strstr(err, "iters"));
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(cpuref_hand_values),
                                       cmocka_unit_test(hostile_calls), cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
