/*
 * test_engine_actq.c - the activation quantizers engines really run
 * (issue 29 item 1), as declarable engine points:
 *
 *  - act_q8_0_rne (Q8_0, F32 scale, ties to even) and act_q8_k (ggml's
 *    Q8_K per 256) in the oracle at both widths against hand-computed
 *    values, where ties and the scale's format decide the result;
 *  - the declaration rules: each replaces gemm_act_fp8, at most one
 *    quantizer, act_q_all needs one, a descriptor's bad declaration is
 *    named as a declaration (not as the --boundary option);
 *  - tests/backends/act_q8.c, a correct kernel behind each quantizer,
 *    passes when it declares what it runs and fails when another
 *    quantizer is declared; with act_q_all its BF16-weight linear is
 *    judged quantized, and fails if act_q_all is left out.
 */
#include "tests/testutil.h"

#include "gates/gates.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"
#include "oracle/boundary.h"
#include "oracle/ops.h"

#define PLUG(name) DSV4Q_TEST_BUILD "/plugins/" name ".so"
#define BIT DSV4Q_BIT

static dsv4q_gates G;

static int setup_gates(void **state)
{
    (void)state;
    char err[1024];
    if (dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

/* x [n] through both widths' quantizer q32/q64; every element must be
 * want (0 where want lists none). */
static void expect_quant(void (*q32)(float *, long), void (*q64)(double *, long), const double (*in)[2], size_t nin,
                         const double (*want)[2], size_t nwant, long n, const char *what)
{
    float *xf = calloc((size_t)n, sizeof *xf);
    double *xd = calloc((size_t)n, sizeof *xd);
    assert_non_null(xf);
    assert_non_null(xd);
    for (size_t i = 0; i < nin; i++) {
        xf[(long)in[i][0]] = (float)in[i][1];
        xd[(long)in[i][0]] = in[i][1];
    }
    q32(xf, n);
    q64(xd, n);
    for (long k = 0; k < n; k++) {
        double w = 0;
        for (size_t i = 0; i < nwant; i++)
            if ((long)want[i][0] == k) w = want[i][1];
        if (xf[k] != (float)w || xd[k] != w)
            fail_msg("%s element %ld: f32 %.17g f64 %.17g, want %.17g", what, k, xf[k], xd[k], w);
    }
    free(xf);
    free(xd);
}

/* Q8_0 with an F32 scale, ties to even. Block 0: amax 127 -> d = 1, so q
 * = RNE(x): 2.5 -> 2 and -2.5 -> -2 (ggml's roundf gives 3 and -3), 3.5
 * -> 4, 0.5 -> 0, 1.5 -> 2. Block 1: amax 63.5 -> d = 0.5 exactly, 1/d =
 * 2: 1.25 -> 2.5 -> 2 -> 1.0, 0.75 -> 1.5 -> 2 -> 1.0, -63.5 -> -127. */
static void test_q8_0_rne_by_hand(void **state)
{
    (void)state;
    const double in[][2] = {{0, 127}, {1, 2.5},    {2, -2.5},  {3, 3.5},  {4, 0.5},
                            {5, 1.5}, {32, -63.5}, {33, 1.25}, {34, 0.75}};
    const double want[][2] = {{0, 127}, {1, 2}, {2, -2}, {3, 4}, {4, 0}, {5, 2}, {32, -63.5}, {33, 1.0}, {34, 1.0}};
    expect_quant(dsv4q_q8_0_rne_quant_f32, dsv4q_q8_0_rne_quant_f64, in, 9, want, 9, 72, "q8_0_rne");
    /* the scale stays F32: amax 1 gives d = fl(1/127), and 1 comes back
     * within 2 binary32 ulps of 1, where ggml's F16 scale (2^-7 (1 +
     * 8/1024)) gives 127 * 0.00787353515625 = 0.99993896484375 */
    float x[32] = {1.0f};
    dsv4q_q8_0_rne_quant_f32(x, 32);
    assert_true(fabsf(x[0] - 1.0f) <= 2 * 0x1p-24f);
    float g[32] = {1.0f};
    dsv4q_q8_0_quant_f32(g, 32);
    assert_true(g[0] == 0.99993896484375f);
}

/* Q8_K (ggml quantize_row_q8_K_ref): the SIGNED value of largest |x|
 * sets is = -127/m. Block 0: m = -127 (x[5]; +127 at x[6] comes later
 * and is not larger) -> is = 1, d = 1: 2.5 -> 2, 3.5 -> 4, +-127 stay.
 * Block 1: m = 63.5 -> is = -2, d = -0.5: 1.25 -> -2.5 -> -2 -> 1.0,
 * 0.75 -> -1.5 -> -2 -> 1.0, -63.5 -> 127 -> -63.5. Block 2 (44
 * elements, the tail of n = 556): all zero -> zero. */
static void test_q8_k_by_hand(void **state)
{
    (void)state;
    const double in[][2] = {{5, -127},   {6, 127},    {7, 2.5},    {8, 3.5},
                            {256, 63.5}, {257, 1.25}, {258, 0.75}, {259, -63.5}};
    const double want[][2] = {{5, -127}, {6, 127}, {7, 2}, {8, 4}, {256, 63.5}, {257, 1.0}, {258, 1.0}, {259, -63.5}};
    expect_quant(dsv4q_q8_k_quant_f32, dsv4q_q8_k_quant_f64, in, 8, want, 8, 556, "q8_k");
    /* blocks are 256 wide: x[40] shares x[0]'s block (d = 1, RNE -> 2);
     * in a 32-block of its own it would come back as ~2.5 */
    float x[256] = {0};
    x[0] = 127.0f;
    x[40] = 2.5f; /* same 256-block: d = 1, RNE -> 2 */
    dsv4q_q8_k_quant_f32(x, 256);
    assert_true(x[40] == 2.0f);
}

static void test_actq_declarations(void **state)
{
    (void)state;
    uint64_t qat, s, back;
    char err[1024], buf[512];
    assert_int_equal(dsv4q_profile_set("qat", &qat), 0);
    const int pts[2] = {DSV4Q_B_ACT_Q8_0_RNE, DSV4Q_B_ACT_Q8_K};
    const char *names[2] = {"qat:act_q8_0_rne", "qat:act_q8_k"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dsv4q_declaration_parse(names[i], &s, err, sizeof err), 0);
        assert_int_equal(s, (qat & ~BIT(DSV4Q_B_GEMM_ACT_FP8)) | BIT(pts[i])); /* replaces gemm_act_fp8 */
        dsv4q_declaration_format(s, buf, sizeof buf);
        assert_int_equal(dsv4q_declaration_parse(buf, &back, err, sizeof err), 0);
        assert_int_equal(back, s);
        assert_int_equal(dsv4q_boundary_get(pts[i])->kind, DSV4Q_BK_ENGINE);
    }
    assert_int_equal(dsv4q_declaration_parse("source:act_q8_k,act_q_all", &s, err, sizeof err), 0);
    assert_true(dsv4q_engine_act_q_applies(s, 0) && dsv4q_engine_act_q_applies(s, 1));
    assert_int_equal(dsv4q_declaration_parse("source:act_q8_k", &s, err, sizeof err), 0);
    assert_true(!dsv4q_engine_act_q_applies(s, 0) && dsv4q_engine_act_q_applies(s, 1));
    /* refused, naming the conflict */
    assert_int_equal(dsv4q_declaration_parse("qat:act_q8_0,act_q8_k", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "alternatives"));
    assert_int_equal(dsv4q_declaration_parse("qat:act_q_all", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "act_q_all needs"));
    /* a declaration's error names the declaration, not --boundary */
    assert_int_equal(dsv4q_declaration_parse("source:act_q9", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "declaration 'source:act_q9': unknown boundary 'act_q9'"));
    assert_null(strstr(err, "--boundary"));
}

static const char *const keys[] = {"linear(s=2,N=1024,K=4096,fmt=fp8,out=bf16,recipe=normal,seed=1)",
                                   "linear(s=2,N=1024,K=4096,fmt=bf16,out=bf16,recipe=normal,seed=1)", NULL};

/* Qualify act_q8.so (mode, all: its environment) under decl (NULL: its
 * own); verdicts of the FP8 and the BF16 case. */
static void run_plugin(const char *mode, const char *all, const char *decl, dsv4q_verdict *fp8, dsv4q_verdict *bf16)
{
    char err[1024];
    const char *spec[1] = {PLUG("act_q8")};
    dsv4q_qualify_opts o = {.gates = &G, .keys = keys, .iso = {120, 0}, .quiet = 1, .declare = decl};
    dsv4q_qualify_result q;
    setenv("DSV4Q_TEST_Q8", mode, 1);
    setenv("DSV4Q_TEST_Q8_ALL", all, 1);
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    unsetenv("DSV4Q_TEST_Q8");
    unsetenv("DSV4Q_TEST_Q8_ALL");
    if (q.load_failed) fail_msg("%s", q.msg);
    assert_int_equal(q.ncases, 2);
    *fp8 = q.cases[0].verdict;
    *bf16 = q.cases[1].verdict;
    dsv4q_qualify_free(&q);
}

static void test_plugin_as_declared(void **state)
{
    (void)state;
    dsv4q_verdict a, b;
    /* what it runs, declared: pass */
    run_plugin("rne", "0", NULL, &a, &b);
    assert_true(a == DSV4Q_V_PASS && b == DSV4Q_V_PASS);
    run_plugin("k", "1", NULL, &a, &b);
    assert_true(a == DSV4Q_V_PASS && b == DSV4Q_V_PASS);
    /* another quantizer declared: the FP8 linear fails, the BF16 one
     * (not quantized) still passes */
    run_plugin("rne", "0", "source:act_q8_0", &a, &b);
    assert_true(a == DSV4Q_V_FAIL && b == DSV4Q_V_PASS);
    run_plugin("k", "0", "source:act_q8_0_rne", &a, &b);
    assert_true(a == DSV4Q_V_FAIL && b == DSV4Q_V_PASS);
    /* both the engine quantizer and the gemm_act_fp8 it replaces switched
     * on: the engine's quantizer is what the oracle runs (the FP8 case
     * failed when the oracle's linear let gemm_act_fp8 win) */
    run_plugin("rne", "0", "source:act_q8_0_rne,gemm_act_fp8=on", &a, &b);
    assert_true(a == DSV4Q_V_PASS && b == DSV4Q_V_PASS);
    /* the BF16 weight's quantized input left undeclared: that case fails */
    run_plugin("rne", "1", "source:act_q8_0_rne", &a, &b);
    assert_true(a == DSV4Q_V_PASS && b == DSV4Q_V_FAIL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_rne_by_hand),
        cmocka_unit_test(test_q8_k_by_hand),
        cmocka_unit_test(test_actq_declarations),
        cmocka_unit_test(test_plugin_as_declared),
    };
    return cmocka_run_group_tests(tests, setup_gates, NULL);
}
