/*
 * test_ops_cases.c - named regression cases for the oracle operators.
 *
 * Each case here is a bug that a real DeepSeek V4 engine shipped (ceil-log2
 * scale off by one just above 448*2^k, SwiGLU gate clamped on both sides,
 * softplus overflow, the two hc epsilons swapped, transposed hc mixing,
 * a sink in the numerator, YaRN on a ratio-0 layer, overlap pooling that
 * averages in an absent block, top-k tie order, Hadamard order, FP4 ties,
 * packed-FP4 read as int8...). The expected value of every case comes from
 * hand computation, from MPFR at 200 bits (tests/mpref.h), or from an
 * independent formula written in this file - never from the oracle. Where
 * an ideal result is bit-exact (dyadic inputs, exact block dots) the test
 * says so and compares bits; elsewhere the bound is stated next to the check
 * with the reason for its size.
 *
 * Spec: /work/shared/spec/OPERATORS.md (section numbers cited per case).
 */
#include "tests/testutil.h"

#include <mpfr.h>

#include "oracle/boundary.h"
#include "oracle/ops.h"
#include "tests/mpref.h"

/* Fails with a message when v > bound (NaN fails too). */
#define CHECK_LE(v, bound, ...)                                                  \
    do {                                                                         \
        double v_ = (v), b_ = (bound);                                           \
        if (!(v_ <= b_)) {                                                       \
            print_error(__VA_ARGS__);                                            \
            print_error(": %.6g exceeds bound %.6g\n", v_, b_);                  \
            fail();                                                              \
        }                                                                        \
    } while (0)

static dsv4q_weight w_f64(const char *name, const double *data, long out, long in)
{
    dsv4q_weight w = {name, DSV4Q_WF_F64, out, in, data, NULL, DSV4Q_DT_INVALID, 0};
    return w;
}

/* ======================================================================== *
 * 1. ue8m0 act-quant scale (spec section 2): s = 2^ceil(log2(amax/448))
 *    exactly; the floating-point log2/ceil shortcut is off by one right at
 *    and just above 448*2^k.
 * ======================================================================== */

static void test_ue8m0_scale(void **state)
{
    (void)state;
    static const int ks[3] = {-3, 0, 5};
    for (int i = 0; i < 3; i++) {
        const int k = ks[i];
        const double a = 448.0 * mp_pow2i(k);
        const double a_up = a * (1.0 + 0x1p-23); /* exact: 448 has 3 significant bits */
        assert_int_equal(mp_ceil_log2_ratio(a, 448.0), k);       /* the test's own rule */
        assert_int_equal(mp_ceil_log2_ratio(a_up, 448.0), k + 1);
        assert_int_equal(dsv4q_ceil_log2_ratio(a, 448.0), k);
        assert_int_equal(dsv4q_ceil_log2_ratio(a_up, 448.0), k + 1);
        assert_int_equal(dsv4q_ceil_log2_ratio(nextafter(a, 0.0), 448.0), k);
        assert_int_equal(dsv4q_ceil_log2_ratio(nextafter(a, INFINITY), 448.0), k + 1);

        /* GEMM mode, one block of 128 whose amax is element 5 (negative). */
        double x[128], q[128], s[1];
        float xf[128], qf[128], sf[1];
        for (int j = 0; j < 128; j++) x[j] = a * (double)((j % 17) - 8) / 16.0;
        x[5] = -a;
        dsv4q_act_quant_codes_f64(x, 128, 128, 1, q, s);
        assert_true(s[0] == mp_pow2i(k));
        assert_true(q[5] == -448.0);
        x[5] = -a_up; /* a_up / 2^(k+1) = 224(1+2^-23) -> E4M3 224 */
        dsv4q_act_quant_codes_f64(x, 128, 128, 1, q, s);
        assert_true(s[0] == mp_pow2i(k + 1));
        assert_true(q[5] == -224.0);

        /* binary32: 448*2^k*(1+2^-23) rounds to 448*2^k + 2 ulp in float;
         * still strictly above, so still 2^(k+1). */
        for (int j = 0; j < 128; j++) xf[j] = (float)x[j];
        xf[5] = -(float)a;
        dsv4q_act_quant_codes_f32(xf, 128, 128, 1, qf, sf);
        assert_true(sf[0] == (float)mp_pow2i(k));
        assert_true(qf[5] == -448.0f);
        xf[5] = -(float)a_up;
        assert_true(-xf[5] > (float)a);
        dsv4q_act_quant_codes_f32(xf, 128, 128, 1, qf, sf);
        assert_true(sf[0] == (float)mp_pow2i(k + 1));
        xf[5] = -nextafterf((float)a, INFINITY);
        dsv4q_act_quant_codes_f32(xf, 128, 128, 1, qf, sf);
        assert_true(sf[0] == (float)mp_pow2i(k + 1));
    }

    /* All-zero block: amax floored at 1e-4, 2^ceil(log2(1e-4/448)) = 2^-22
     * (448*2^-22 = 1.07e-4 >= 1e-4 > 448*2^-23 = 5.3e-5). Second block has
     * amax 448*2^-3 to show the scale is per block. */
    assert_int_equal(mp_ceil_log2_ratio(1e-4, 448.0), -22);
    assert_int_equal(dsv4q_ceil_log2_ratio(1e-4, 448.0), -22);
    double x[256], q[256], s[2];
    float xf[256], qf[256], sf[2];
    for (int j = 0; j < 256; j++) x[j] = j < 128 ? 0.0 : (double)((j % 9) - 4) / 4.0 * 56.0;
    x[200] = 56.0;
    dsv4q_act_quant_codes_f64(x, 256, 128, 1, q, s);
    assert_true(s[0] == mp_pow2i(-22));
    assert_true(s[1] == mp_pow2i(-3));
    for (int j = 0; j < 128; j++) assert_true(q[j] == 0.0);
    for (int j = 0; j < 256; j++) xf[j] = (float)x[j];
    dsv4q_act_quant_codes_f32(xf, 256, 128, 1, qf, sf);
    assert_true(sf[0] == (float)mp_pow2i(-22));
    assert_true(sf[1] == (float)mp_pow2i(-3));
    for (int j = 0; j < 128; j++) assert_true(qf[j] == 0.0f);
    /* A tiny non-zero block is floored the same way. */
    for (int j = 0; j < 128; j++) x[j] = 1e-7;
    dsv4q_act_quant_codes_f64(x, 128, 128, 1, q, s);
    assert_true(s[0] == mp_pow2i(-22));
}

/* ======================================================================== *
 * 2. SwiGLU clamp (spec section 9): u clamped to [-L, L], the gate only from
 *    above (g = min(g, L)). Boundary set 0 and F64 weights: no rounding but
 *    the arithmetic of silu itself.
 * ======================================================================== */

static void test_swiglu_clamp(void **state)
{
    (void)state;
    /* dim 3, inter 3; x = e0, so w1 x and w3 x are w1[:,0], w3[:,0]:
     *   unit 0: g = 12 -> 10, u = -15 -> -10     y0 = silu(10) * -10
     *   unit 1: g = -30 (NOT clamped), u = 3.5   y1 = silu(-30) * 3.5
     *   unit 2: g = 12 -> 10, u = 15 -> 10       y2 = silu(10) * 10
     * w2 = identity, so y = h exactly. */
    static const double w1[9] = {12, 0, 0, -30, 0, 0, 12, 0, 0};
    static const double w3[9] = {-15, 0, 0, 3.5, 0, 0, 15, 0, 0};
    static const double w2[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    dsv4q_expert_w E = {w_f64("w1", w1, 3, 3), w_f64("w2", w2, 3, 3), w_f64("w3", w3, 3, 3)};
    const double x[3] = {1, 0, 0};
    const float xf[3] = {1, 0, 0};
    double y[3];
    float yf[3];
    assert_int_equal(dsv4q_expert_f64(0, 1, &E, x, 1, NULL, 10.0, y), 0);
    assert_int_equal(dsv4q_expert_f32(0, 1, &E, xf, 1, NULL, 10.0, yf), 0);

    mpfr_t e[3], t;
    for (int i = 0; i < 3; i++) mpfr_init2(e[i], MP_PREC);
    mpfr_init2(t, MP_PREC);
    mp_silu_d(e[0], 10.0);
    mpfr_mul_si(e[0], e[0], -10, MPFR_RNDN);
    mp_silu_d(e[1], -30.0);
    mpfr_mul_d(e[1], e[1], 3.5, MPFR_RNDN);
    mp_silu_d(e[2], 10.0);
    mpfr_mul_si(e[2], e[2], 10, MPFR_RNDN);
    /* Oracle: exp (<= 1 ulp, test_dmath), 1+e, g/(...), *u: 4 roundings. */
    for (int i = 0; i < 3; i++) {
        CHECK_LE(mp_ulp_err(y[i], e[i], 53), 4.0, "swiglu f64 unit %d: got %.17g", i, y[i]);
        CHECK_LE(mp_ulp_err((double)yf[i], e[i], 24), 4.0, "swiglu f32 unit %d: got %.9g", i, (double)yf[i]);
    }
    /* The symmetric-clamp bug would give silu(-10)*3.5 ~ -1.6e-3 for unit 1,
     * 1e8 times the right answer (~ -9.8e-12). */
    mp_silu_d(t, -10.0);
    mpfr_mul_d(t, t, 3.5, MPFR_RNDN);
    assert_true(fabs(y[1] - mpfr_get_d(t, MPFR_RNDN)) > 1e-4);
    assert_true(fabs(y[1]) < 1e-10 && y[1] < 0);
    for (int i = 0; i < 3; i++) mpfr_clear(e[i]);
    mpfr_clear(t);
}

/* ======================================================================== *
 * 3. sqrtsoftplus gate (spec section 9): sc = sqrt(softplus(z)), softplus
 *    threshold 20; exp(z) must not overflow and tiny scores must not make
 *    the normalised routing weights NaN.
 * ======================================================================== */

static void test_gate_sqrtsoftplus(void **state)
{
    (void)state;
    static const double zs[3] = {-20.0, -200.0, 100.0};
    const double rs = 1.5;
    mpfr_t s0, s1, t;
    mpfr_inits2(MP_PREC, s0, s1, t, (mpfr_ptr)0);
    for (int i = 0; i < 3; i++) {
        const double z = zs[i];
        /* (a) one expert: the weight is route_scale whatever the score. */
        static const double W1[1] = {1.0};
        dsv4q_weight g1 = w_f64("gate", W1, 1, 1);
        double x[1] = {z}, w[2];
        float xf[1] = {(float)z}, wf[2];
        int32_t ix[2];
        assert_int_equal(dsv4q_moe_gate_f64(x, 1, 1, &g1, NULL, NULL, NULL, 1, 1, "sqrtsoftplus", rs, w, ix), 0);
        assert_int_equal(ix[0], 0);
        assert_true(w[0] == rs);
        assert_int_equal(dsv4q_moe_gate_f32(xf, 1, 1, &g1, NULL, NULL, NULL, 1, 1, "sqrtsoftplus", rs, wf, ix), 0);
        assert_int_equal(ix[0], 0);
        assert_true(wf[0] == (float)rs); /* f32 at z=-200: sc underflows to 0, 1/k rule */

        /* (b) two experts, the second at z = 0 (sc = sqrt(ln 2)): the
         * weight of the first is sc(z)/(sc(z)+sc(0))*rs, which exposes
         * sc(z) to a relative check. 4 ulp: exp, log1p, sqrt (~0.5 each,
         * test_dmath) + sum, division and route_scale product. */
        static const double W2[2] = {1.0, 0.0};
        dsv4q_weight g2 = w_f64("gate", W2, 2, 1);
        assert_int_equal(dsv4q_moe_gate_f64(x, 1, 1, &g2, NULL, NULL, NULL, 2, 2, "sqrtsoftplus", rs, w, ix), 0);
        assert_true((ix[0] == 0 && ix[1] == 1) || (ix[0] == 1 && ix[1] == 0));
        mpfr_set_d(t, z, MPFR_RNDN);
        mp_sqrtsoftplus(s0, t);
        mpfr_set_zero(t, 1);
        mp_sqrtsoftplus(s1, t);
        assert_true(mpfr_number_p(s0) && mpfr_sgn(s0) > 0);
        for (int j = 0; j < 2; j++) {
            assert_true(isfinite(w[j]));
            mpfr_add(t, s0, s1, MPFR_RNDN);
            mpfr_div(t, ix[j] == 0 ? s0 : s1, t, MPFR_RNDN);
            mpfr_mul_d(t, t, rs, MPFR_RNDN);
            CHECK_LE(mp_ulp_err(w[j], t, 53), 4.0, "sqrtsoftplus z=%g expert %d weight %.17g", z, ix[j], w[j]);
        }
        CHECK_LE(fabs(w[0] + w[1] - rs), 2 * MP_U64 * rs, "z=%g weights sum", z);
        /* The score alone, recovered from the ratio of the two weights. */
        double sc = (ix[0] == 0 ? w[0] / w[1] : w[1] / w[0]) * mpfr_get_d(s1, MPFR_RNDN);
        if (z == 100.0) CHECK_LE(fabs(sc - 10.0), 1e-14, "z=100 score %.17g vs sqrt(100)", sc);
        else CHECK_LE(mp_ulp_err(sc, s0, 53), 8.0, "z=%g score %.17g", z, sc);
    }
    /* (c) all three in one gate (W = I): weights finite, sum route_scale. */
    static const double W3[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    dsv4q_weight g3 = w_f64("gate", W3, 3, 3);
    double x3[3] = {-20, -200, 100}, w3[3];
    float x3f[3] = {-20, -200, 100}, w3f[3];
    int32_t ix3[3];
    assert_int_equal(dsv4q_moe_gate_f64(x3, 1, 3, &g3, NULL, NULL, NULL, 3, 3, "sqrtsoftplus", rs, w3, ix3), 0);
    assert_int_equal(ix3[0], 2); /* score 10 first */
    CHECK_LE(fabs(w3[0] + w3[1] + w3[2] - rs), 3 * MP_U64 * rs, "3-expert weights sum");
    for (int j = 0; j < 3; j++) assert_true(isfinite(w3[j]) && w3[j] >= 0);
    assert_int_equal(dsv4q_moe_gate_f32(x3f, 1, 3, &g3, NULL, NULL, NULL, 3, 3, "sqrtsoftplus", rs, w3f, ix3), 0);
    for (int j = 0; j < 3; j++) assert_true(isfinite(w3f[j]) && w3f[j] >= 0);
    CHECK_LE(fabs((double)w3f[0] + w3f[1] + w3f[2] - rs), 3 * MP_U32 * rs, "3-expert f32 weights sum");
    /* (d) f64 score underflow (z = -800: exp(z) = 0): documented 1/k rule. */
    double x4[3] = {-800, -800, -800}, w4[3];
    assert_int_equal(dsv4q_moe_gate_f64(x4, 1, 3, &g3, NULL, NULL, NULL, 3, 2, "sqrtsoftplus", rs, w4, ix3), 0);
    assert_true(w4[0] == rs / 2 && w4[1] == rs / 2);
    mpfr_clears(s0, s1, t, (mpfr_ptr)0);
}

/* ======================================================================== *
 * 4. Hyper-connections (spec section 8): mixes RMS with norm_eps, Sinkhorn
 *    with hc_eps; hc_post mixes with out_k = sum_j C[j][k] X_j.
 * ======================================================================== */

enum { HC = 4, HC_D = 8, HC_S = 2, HC_NMIX = (2 + HC) * HC, HC_ITERS = 20 };

typedef struct {
    double X[HC_S * HC * HC_D], fn[HC_NMIX * HC * HC_D], scale[3], base[HC_NMIX];
} hc_inputs;

static void hc_make(hc_inputs *in, const char *key)
{
    mp_rng r;
    mp_rng_seed(&r, key);
    /* |X| <= 0.6: mean(X^2) ~ 0.12, so norm_eps = 0.2 changes the mixes by
     * ~40% and a swapped epsilon cannot hide. */
    for (int i = 0; i < HC_S * HC * HC_D; i++) in->X[i] = mp_rng_unif(&r, -0.6, 0.6);
    for (int i = 0; i < HC_NMIX * HC * HC_D; i++) in->fn[i] = mp_rng_unif(&r, -0.5, 0.5);
    in->scale[0] = 0.7;
    in->scale[1] = 0.9;
    in->scale[2] = 1.3;
    for (int i = 0; i < HC_NMIX; i++) in->base[i] = mp_rng_unif(&r, -0.5, 0.5); /* non-symmetric C */
}

/* max |got - ref| / max |ref| over n values */
static double maxrel_vec(const double *got, mpfr_t *ref, long n)
{
    mp_err e = {0};
    for (long i = 0; i < n; i++) mp_err_add(&e, got[i], ref[i]);
    return mp_err_maxrel(&e);
}

static void test_hc_pre_eps(void **state)
{
    (void)state;
    hc_inputs in;
    hc_make(&in, "hc_pre_eps");
    dsv4q_weight fn = w_f64("hc_fn", in.fn, HC_NMIX, HC * HC_D);
    /* Two calls: (norm_eps, hc_eps) = (0.2, 1e-6) and (1e-6, 0.02). */
    static const double eps[2][2] = {{0.2, 1e-6}, {1e-6, 0.02}};
    mpfr_t *y = mp_vec_new(HC_D), *post = mp_vec_new(HC), *comb = mp_vec_new(HC * HC);
    for (int c = 0; c < 2; c++) {
        double yo[HC_S * HC_D], po[HC_S * HC], co[HC_S * HC * HC];
        assert_int_equal(dsv4q_hc_pre_f64(0, in.X, HC_S, HC, HC_D, &fn, in.scale, in.base, eps[c][0], eps[c][1],
                                          HC_ITERS, yo, po, co), 0);
        for (int t = 0; t < HC_S; t++) {
            const double *Xt = in.X + t * HC * HC_D;
            mp_hc_pre_ref(Xt, HC, HC_D, in.fn, in.scale, in.base, eps[c][0], eps[c][1], HC_ITERS, y, post, comb);
            /* fp64: a few hundred roundings, all well conditioned (sigmoid,
             * softmax, 20 Sinkhorn divisions): 1e-13 is ~500 u. */
            CHECK_LE(maxrel_vec(yo + t * HC_D, y, HC_D), 1e-13, "hc_pre y call %d token %d", c, t);
            CHECK_LE(maxrel_vec(po + t * HC, post, HC), 1e-13, "hc_pre post call %d token %d", c, t);
            CHECK_LE(maxrel_vec(co + t * HC * HC, comb, HC * HC), 1e-13, "hc_pre comb call %d token %d", c, t);

            /* The same reference with the epsilons swapped is far away: the
             * check above can tell the two apart. */
            mp_hc_pre_ref(Xt, HC, HC_D, in.fn, in.scale, in.base, eps[c][1], eps[c][0], HC_ITERS, y, post, comb);
            assert_true(maxrel_vec(co + t * HC * HC, comb, HC * HC) > 1e-3 ||
                        maxrel_vec(yo + t * HC_D, y, HC_D) > 1e-3);

            if (c == 0) {
                /* hc_eps = 1e-6. The last step divides each column by its
                 * sum cs + eps, leaving cs/(cs+eps): |1 - colsum| =
                 * eps/(cs+eps). Converged, cs = 1 - eps + d (rows were just
                 * normalised to ~1 - eps) with a residual |d| << 1e-4, so
                 * |1 - colsum| = 1e-6 (1 - d + ...) <= 1e-6 (1 + 1e-4). The
                 * rows were normalised one half-step earlier and are off by
                 * the same eps plus the column step's change: bound
                 * 2 hc_eps (measured 1.00000004e-6). */
                double wc = 0, wr = 0;
                for (int k = 0; k < HC; k++) {
                    long double cs = 0, rsum = 0;
                    for (int j = 0; j < HC; j++) cs += co[t * HC * HC + j * HC + k];
                    for (int j = 0; j < HC; j++) rsum += co[t * HC * HC + k * HC + j];
                    CHECK_LE(fabsl(cs - 1), 1e-6 * (1 + 1e-4), "column %d sum", k);
                    CHECK_LE(fabsl(rsum - 1), 2e-6, "row %d sum", k);
                    wc = fmax(wc, (double)fabsl(cs - 1));
                    wr = fmax(wr, (double)fabsl(rsum - 1));
                }
                printf("hc sinkhorn token %d: max |colsum-1| %.9e, max |rowsum-1| %.9e\n", t, wc, wr);
            }
        }
    }
    mp_vec_free(y, HC_D);
    mp_vec_free(post, HC);
    mp_vec_free(comb, HC * HC);
}

static void test_hc_post_orientation(void **state)
{
    (void)state;
    /* Non-symmetric dyadic C and small integer streams: every product and
     * sum is exact, so the hand sum is bit-exact. */
    static const double C[HC * HC] = {
        0.5, 0.25, 0, 0.125,
        0, 0.75, 0.25, 0,
        0.125, 0, 0.5, 0.375,
        0.25, 0, 0.125, 0.5,
    };
    static const double post[HC] = {0.5, 1.25, 2.0, 0.75};
    enum { D = 3 };
    static const double x[D] = {2, -1, 3};
    static const double Xs[HC * D] = {1, 2, 3, -4, 5, -6, 7, 8, -9, 10, -11, 12};
    double out[HC * D];
    float outf[HC * D];
    float Cf[HC * HC], pf[HC], xf[D], Xf[HC * D];
    for (int i = 0; i < HC * HC; i++) Cf[i] = (float)C[i];
    for (int i = 0; i < HC; i++) pf[i] = (float)post[i];
    for (int i = 0; i < D; i++) xf[i] = (float)x[i];
    for (int i = 0; i < HC * D; i++) Xf[i] = (float)Xs[i];
    dsv4q_hc_post_f64(0, x, Xs, post, C, 1, HC, D, out);
    dsv4q_hc_post_f32(0, xf, Xf, pf, Cf, 1, HC, D, outf);
    int differs_from_transpose = 0;
    for (int k = 0; k < HC; k++)
        for (int i = 0; i < D; i++) {
            double h = post[k] * x[i], ht = post[k] * x[i];
            for (int j = 0; j < HC; j++) {
                h += C[j * HC + k] * Xs[j * D + i];  /* out_k = sum_j C[j][k] X_j */
                ht += C[k * HC + j] * Xs[j * D + i]; /* the transposed reading */
            }
            assert_true(out[k * D + i] == h);
            assert_true((double)outf[k * D + i] == h);
            differs_from_transpose |= out[k * D + i] != ht;
        }
    assert_true(differs_from_transpose);
}

/* ======================================================================== *
 * 5. Sparse attention with sink (spec section 5): the sink adds e^sink to
 *    the denominator only; masked columns contribute nothing.
 * ======================================================================== */

/* mp_attn_ref with the (double) scale the oracle was given. */
static void attn_ref(const double *q, int D, const double *kv, long N, const int32_t *idx, long ncols, double sink,
                     double scale, mpfr_t *o)
{
    mpfr_t sc;
    mpfr_init2(sc, MP_PREC);
    mpfr_set_d(sc, scale, MPFR_RNDN);
    mp_attn_ref(q, D, kv, N, idx, ncols, sink, sc, o);
    mpfr_clear(sc);
}

static void test_attn_sink_one_key(void **state)
{
    (void)state;
    enum { D = 16, H = 3, N = 6 };
    static const double sinks[H] = {-5.0, 0.0, 20.0};
    mp_rng r;
    mp_rng_seed(&r, "attn_sink_one_key");
    /* Multiples of 1/16: q.k is exact at both widths; scale 1/4 exact. */
    double q[H * D], kv[N * D];
    float qf[H * D], kvf[N * D], sinkf[H];
    for (int i = 0; i < H * D; i++) qf[i] = (float)(q[i] = (mp_rng_int(&r, 33) - 16) / 16.0);
    for (int i = 0; i < N * D; i++) kvf[i] = (float)(kv[i] = (mp_rng_int(&r, 33) - 16) / 16.0);
    for (int h = 0; h < H; h++) sinkf[h] = (float)sinks[h];
    /* Two layouts with the single valid key (row 3): a 5-column row with
     * masks of every kind (-1, -3, row N out of range), and a 130-column row
     * where the key sits in the second 64-block after an all-masked block. */
    int32_t idx5[5] = {-1, 3, -1, N, -3};
    int32_t idx130[130];
    for (int c = 0; c < 130; c++) idx130[c] = -1;
    idx130[100] = 3;
    const int32_t *idxs[2] = {idx5, idx130};
    const long ncs[2] = {5, 130};
    mpfr_t *ref = mp_vec_new(D);
    for (int L = 0; L < 2; L++) {
        double o[H * D];
        float of[H * D];
        assert_int_equal(dsv4q_sparse_attn_f64(0, q, 1, H, D, kv, N, idxs[L], ncs[L], sinks, 0.25, o), 0);
        assert_int_equal(dsv4q_sparse_attn_f32(0, qf, 1, H, D, kvf, N, idxs[L], ncs[L], sinkf, 0.25f, of), 0);
        for (int h = 0; h < H; h++) {
            /* o = v * e^s / (e^s + e^sink): the oracle forms 1 + e^(sink-s)
             * and divides: exp (~0.5 ulp), add, divide -> <= 4 ulp. */
            attn_ref(q + h * D, D, kv, N, idxs[L], ncs[L], sinks[h], 0.25, ref);
            for (int d = 0; d < D; d++) {
                CHECK_LE(mp_ulp_err(o[h * D + d], ref[d], 53), 4.0, "sink %g layout %d dim %d f64", sinks[h], L, d);
                CHECK_LE(mp_ulp_err((double)of[h * D + d], ref[d], 24), 4.0, "sink %g layout %d dim %d f32", sinks[h],
                         L, d);
            }
        }
    }
    mp_vec_free(ref, D);
}

static void test_attn_all_masked(void **state)
{
    (void)state;
    /* Documented (attn.c): a query with every column masked gets o = 0 (the
     * kernel itself would produce NaN from exp(-inf - -inf)). */
    enum { D = 8, H = 2, N = 4, NC = 70 };
    double q[H * D], kv[N * D], o[H * D], sink[H] = {-1.0, 3.0};
    float qf[H * D], kvf[N * D], of[H * D], sinkf[H] = {-1.0f, 3.0f};
    for (int i = 0; i < H * D; i++) qf[i] = (float)(q[i] = 0.5 + i);
    for (int i = 0; i < N * D; i++) kvf[i] = (float)(kv[i] = 1.0 - 0.25 * i);
    int32_t idx[NC];
    for (int c = 0; c < NC; c++) idx[c] = (c % 3 == 0) ? -1 : N + c; /* -1 and out of range */
    for (int i = 0; i < H * D; i++) o[i] = of[i] = NAN;
    assert_int_equal(dsv4q_sparse_attn_f64(0, q, 1, H, D, kv, N, idx, NC, sink, 0.5, o), 0);
    assert_int_equal(dsv4q_sparse_attn_f32(0, qf, 1, H, D, kvf, N, idx, NC, sinkf, 0.5f, of), 0);
    for (int i = 0; i < H * D; i++) {
        assert_true(o[i] == 0.0);
        assert_true(of[i] == 0.0f);
    }
}

static void test_attn_two_keys(void **state)
{
    (void)state;
    /* Two keys at different rows (9 and 2), a masked column between them. */
    enum { D = 8, N = 12 };
    mp_rng r;
    mp_rng_seed(&r, "attn_two_keys");
    double q[D], kv[N * D], o[D], sink[1] = {0.5};
    for (int i = 0; i < D; i++) q[i] = mp_rng_f32(&r, -2, 2);
    for (int i = 0; i < N * D; i++) kv[i] = mp_rng_f32(&r, -1, 1);
    const int32_t idx[3] = {9, -1, 2};
    const double scale = 0.35355339059327373; /* 8^-0.5 rounded */
    assert_int_equal(dsv4q_sparse_attn_f64(0, q, 1, 1, D, kv, N, idx, 3, sink, scale, o), 0);
    mpfr_t *ref = mp_vec_new(D);
    attn_ref(q, D, kv, N, idx, 3, sink[0], scale, ref);
    CHECK_LE(maxrel_vec(o, ref, D), 8 * MP_U64, "two-key attention");
    mp_vec_free(ref, D);
}

/* The attn_p_bf16 profile of one head, from the kernel structure spelled
 * out in spec section 5: blocks of 64 columns in idx order, running max m_b
 * after block b; the P*V numerator gets BF16(e^{s_j - m_b}) (MPFR rounded
 * to 8 significant bits, RNE: the BF16 grid for these magnitudes), rescaled
 * by e^{m_b - m_final}; the denominator gets the UNROUNDED e^{s_j - m_final}
 * plus e^{sink - m_final}. */
static void attn_p_bf16_ref(const double *q, int D, const double *kv, long N, const int32_t *idx, long ncols,
                            double sink, double scale, mpfr_t *o)
{
    mpfr_t *sc = mp_vec_new(ncols), *mb = mp_vec_new(ncols);
    mpfr_t m, e, den, t, p;
    mpfr_inits2(MP_PREC, m, e, den, t, (mpfr_ptr)0);
    mpfr_init2(p, 8);
    mpfr_set_inf(m, -1);
    for (long c = 0; c < ncols; c++) { /* scores, and the running max per column */
        if (idx[c] >= 0 && idx[c] < N) {
            mp_dot_d(sc[c], q, kv + (long)idx[c] * D, D, 1, t);
            mpfr_mul_d(sc[c], sc[c], scale, MPFR_RNDN);
        }
    }
    for (long b0 = 0; b0 < ncols; b0 += 64) {
        for (long c = b0; c < ncols && c < b0 + 64; c++)
            if (idx[c] >= 0 && idx[c] < N && mpfr_cmp(sc[c], m) > 0) mpfr_set(m, sc[c], MPFR_RNDN);
        for (long c = b0; c < ncols && c < b0 + 64; c++) mpfr_set(mb[c], m, MPFR_RNDN);
    }
    mpfr_set_d(den, sink, MPFR_RNDN); /* m is now the final max */
    mpfr_sub(den, den, m, MPFR_RNDN);
    mpfr_exp(den, den, MPFR_RNDN);
    for (int d = 0; d < D; d++) mpfr_set_zero(o[d], 1);
    for (long c = 0; c < ncols; c++) {
        if (idx[c] < 0 || idx[c] >= N) continue;
        mpfr_sub(e, sc[c], m, MPFR_RNDN);
        mpfr_exp(e, e, MPFR_RNDN);
        mpfr_add(den, den, e, MPFR_RNDN);
        mpfr_sub(e, sc[c], mb[c], MPFR_RNDN);
        mpfr_exp(e, e, MPFR_RNDN);
        mpfr_set(p, e, MPFR_RNDN); /* BF16 */
        mpfr_sub(e, mb[c], m, MPFR_RNDN);
        mpfr_exp(e, e, MPFR_RNDN);
        mpfr_mul(e, e, p, MPFR_RNDN);
        for (int d = 0; d < D; d++) {
            mpfr_mul_d(t, e, kv[(long)idx[c] * D + d], MPFR_RNDN);
            mpfr_add(o[d], o[d], t, MPFR_RNDN);
        }
    }
    for (int d = 0; d < D; d++) mpfr_div(o[d], o[d], den, MPFR_RNDN);
    mpfr_clears(m, e, den, t, p, (mpfr_ptr)0);
    mp_vec_free(sc, ncols);
    mp_vec_free(mb, ncols);
}

static void test_attn_150_keys(void **state)
{
    (void)state;
    /* 150 columns = blocks of 64, 64, 22; rows in a shuffled order with 6
     * masked columns; values (= keys) positive so that every output element
     * is a positive combination (makes the BF16 bound below rigorous). */
    enum { D = 32, H = 2, N = 160, NC = 150 };
    mp_rng r;
    mp_rng_seed(&r, "attn_150_keys");
    double q[H * D], kv[N * D], sink[H] = {-1.0, 0.5};
    for (int i = 0; i < H * D; i++) q[i] = mp_rng_f32(&r, -5, 5);
    for (int i = 0; i < N * D; i++) kv[i] = mp_rng_f32(&r, 0.5, 1.5);
    int32_t perm[N], idx[NC];
    for (int i = 0; i < N; i++) perm[i] = i;
    for (int i = N - 1; i > 0; i--) {
        int j = mp_rng_int(&r, i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int c = 0; c < NC; c++) idx[c] = perm[c];
    static const int masked[6] = {3, 64, 65, 100, 127, 149};
    for (int m = 0; m < 6; m++) idx[masked[m]] = -1;
    const double scale = 0.17677669529663687; /* 32^-0.5 rounded */
    double o0[H * D], op[H * D];
    assert_int_equal(dsv4q_sparse_attn_f64(0, q, 1, H, D, kv, N, idx, NC, sink, scale, o0), 0);
    assert_int_equal(dsv4q_sparse_attn_f64(DSV4Q_BIT(DSV4Q_B_ATTN_P_BF16), q, 1, H, D, kv, N, idx, NC, sink,
                                           scale, op), 0);
    mpfr_t *ref = mp_vec_new(D);
    for (int h = 0; h < H; h++) {
        attn_ref(q + h * D, D, kv, N, idx, NC, sink[h], scale, ref);
        /* exact profile: 150 exps (~0.5 ulp), online rescaling, ~150-term
         * sums of positive terms: 1e-14 is ~90 u. */
        CHECK_LE(maxrel_vec(o0 + h * D, ref, D), 1e-14, "150-key attention head %d (exact)", h);
        /* attn_p_bf16: each numerator weight off by <= 2^-9 relative; with
         * positive values every element is off by <= 2^-9 relative. */
        for (int d = 0; d < D; d++) {
            double e = mpfr_get_d(ref[d], MPFR_RNDN);
            CHECK_LE(fabs(op[h * D + d] - e) / e, 0x1p-8, "150-key attention head %d dim %d (attn_p_bf16)", h, d);
        }
    }
    assert_true(memcmp(o0, op, sizeof o0) != 0);
    /* and it is exactly the spec's structure: rounded numerator, unrounded
     * denominator (a BF16 copy in the denominator too is off by ~2^-9) */
    for (int h = 0; h < H; h++) {
        attn_p_bf16_ref(q + h * D, D, kv, N, idx, NC, sink[h], scale, ref);
        CHECK_LE(maxrel_vec(op + h * D, ref, D), 1e-14, "150-key attention head %d vs attn_p_bf16 structure", h);
    }
    mp_vec_free(ref, D);
}

/* ======================================================================== *
 * 6. RoPE (spec section 4): YaRN table at large positions, the inverse, and
 *    a ratio-0 layer without YaRN.
 * ======================================================================== */

static const dsv4q_rope_params k_yarn = {64, 160000.0, 65536, 16.0, 32.0, 1.0};
static dsv4q_rope_table_f64 g_big; /* npos = 200001, built once for the group */

static int rope_group_setup(void **state)
{
    (void)state;
    return dsv4q_rope_build_f64(&g_big, &k_yarn, 200001, 0);
}

static int rope_group_teardown(void **state)
{
    (void)state;
    dsv4q_rope_free_f64(&g_big);
    return 0;
}

static const long k_rope_pos[5] = {0, 127, 65535, 65536, 200000};

static void test_rope_inverse(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, "rope_inverse");
    enum { R = 64, ROWS = 8 };
    double worst = 0;
    for (int pi = 0; pi < 5; pi++) {
        double x[ROWS * R], y[ROWS * R];
        for (int i = 0; i < ROWS * R; i++) x[i] = y[i] = mp_rng_unif(&r, -3, 3);
        dsv4q_rope_apply_f64(0, &g_big, y, ROWS, R, 0, k_rope_pos[pi], ROWS, 0);
        if (k_rope_pos[pi] > 0) assert_true(memcmp(x, y, sizeof x) != 0);
        dsv4q_rope_apply_f64(0, &g_big, y, ROWS, R, 0, k_rope_pos[pi], ROWS, 1);
        /* ULPs of the larger component of each rotated pair: a rotation
         * spreads rounding error across the pair. */
        for (int i = 0; i < ROWS * R; i += 2) {
            double m = fmax(fabs(x[i]), fabs(x[i + 1]));
            int ex;
            (void)frexp(m, &ex);
            double ulp = ldexp(1.0, ex - 53);
            for (int c = 0; c < 2; c++) {
                double e = fabs(y[i + c] - x[i + c]) / ulp;
                if (e > worst) worst = e;
                CHECK_LE(e, 4.0, "rope inverse at p=%ld elem %d (ulps)", k_rope_pos[pi], i + c);
            }
        }
    }
    printf("rope inverse(forward) max error %.2f ulp\n", worst);
}

/* |table - MPFR cos/sin(t f)| <= 2^-52 (the cos/sin result, ~0.5 ulp, plus
 * MPFR's rounding of the reference) + |t f| * 8u (the angle: f carries pow
 * (~0.5 ulp), 1/x and the YaRN blend, <= 6 roundings; t*f one more). For
 * i = 0, f = base^0 = 1 exactly, so the angle t is exact and only the first
 * term remains, even at t = 200000. Where |t f| * 8u < 1e-13 the brief's
 * absolute 1e-12 is asserted as well. */
static void check_table(const dsv4q_rope_table_f64 *tb, long t, int i, int r, double base, int osl, double factor,
                        double *worst_ratio)
{
    mpfr_t f, a, c, s;
    mpfr_inits2(MP_PREC, f, a, c, s, (mpfr_ptr)0);
    mp_rope_freq(f, i, r, base, osl, factor, 32.0, 1.0);
    mpfr_mul_si(a, f, t, MPFR_RNDN);
    mpfr_sin_cos(s, c, a, MPFR_RNDN);
    double ang = fabs(mpfr_get_d(a, MPFR_RNDN));
    double tol = 0x1p-52 + (i == 0 ? 0.0 : ang * 8 * MP_U64);
    double ec = fabs(mpfr_get_d(c, MPFR_RNDN) - tb->cos[t * tb->half + i]);
    double es = fabs(mpfr_get_d(s, MPFR_RNDN) - tb->sin[t * tb->half + i]);
    CHECK_LE(ec, tol, "rope cos t=%ld i=%d (angle %.6g)", t, i, ang);
    CHECK_LE(es, tol, "rope sin t=%ld i=%d (angle %.6g)", t, i, ang);
    if (fmax(ec, es) / tol > *worst_ratio) *worst_ratio = fmax(ec, es) / tol;
    if (ang * 8 * MP_U64 < 1e-13) CHECK_LE(fmax(ec, es), 1e-12, "rope t=%ld i=%d absolute", t, i);
    mpfr_clears(f, a, c, s, (mpfr_ptr)0);
}

static void test_rope_yarn_table(void **state)
{
    (void)state;
    /* i = 0, 1 (below the ramp: f unchanged), 15..25 (the ramp for these
     * parameters: lo = floor(15.45) = 15, hi = ceil(24.71) = 25) and r/2-1
     * (above it: f/16). */
    static const int is[8] = {0, 1, 15, 16, 20, 24, 25, 31};
    double worst = 0;
    for (int pi = 0; pi < 5; pi++)
        for (int k = 0; k < 8; k++) check_table(&g_big, k_rope_pos[pi], is[k], 64, 160000.0, 65536, 16.0, &worst);
    printf("rope yarn table worst error / bound %.3f\n", worst);
}

static void test_rope_ratio0_no_yarn(void **state)
{
    (void)state;
    /* A ratio-0 layer: rope_theta 10000, original_seq_len 0 (no YaRN even
     * though factor/beta are set). At t = 1 the table holds cos/sin(f_i)
     * with f_i = 10000^(-2i/64). */
    const dsv4q_rope_params p0 = {64, 10000.0, 0, 16.0, 32.0, 1.0};
    dsv4q_rope_table_f64 tb;
    assert_int_equal(dsv4q_rope_build_f64(&tb, &p0, 3, 0), 0);
    double worst = 0;
    for (int i = 0; i < 32; i++) check_table(&tb, 1, i, 64, 10000.0, 0, 16.0, &worst);
    for (int i = 0; i < 32; i++) check_table(&tb, 2, i, 64, 10000.0, 0, 16.0, &worst);
    /* YaRN would have divided f_31 by 16: sin(f_31) and sin(f_31/16) differ
     * by ~1.2e-4, far outside the tolerance above. */
    mpfr_t f;
    mpfr_init2(f, MP_PREC);
    mp_rope_freq(f, 31, 64, 10000.0, 65536, 16.0, 32.0, 1.0);
    assert_true(fabs(tb.sin[1 * 32 + 31] - mpfr_get_d(f, MPFR_RNDN)) > 1e-5);
    mpfr_clear(f);
    dsv4q_rope_free_f64(&tb);
}

/* ======================================================================== *
 * 7. Compressor (spec section 6): prefill == token-by-token decode, bit for
 *    bit; block 0 of an overlapping compressor has NO previous half (masked,
 *    not averaged in); ratio 128 pools 128 positions, no overlap.
 * ======================================================================== */

enum { CM_D = 8, CM_DC = 16, CM_R = 8 };

typedef struct {
    int ratio, W;
    double *wkv, *wgate, *ape, norm[CM_DC];
    dsv4q_cmp_f64 c;
} cmp_fixture;

static void cmp_make(cmp_fixture *f, int ratio, const char *key)
{
    mp_rng r;
    mp_rng_seed(&r, key);
    f->ratio = ratio;
    f->W = (ratio == 4 ? 2 : 1) * CM_DC;
    f->wkv = malloc(sizeof(double) * (size_t)(f->W * CM_D));
    f->wgate = malloc(sizeof(double) * (size_t)(f->W * CM_D));
    f->ape = malloc(sizeof(double) * (size_t)(ratio * f->W));
    assert_non_null(f->wkv);
    assert_non_null(f->wgate);
    assert_non_null(f->ape);
    for (int i = 0; i < f->W * CM_D; i++) f->wkv[i] = mp_rng_unif(&r, -1, 1);
    for (int i = 0; i < f->W * CM_D; i++) f->wgate[i] = mp_rng_unif(&r, -0.6, 0.6);
    for (int i = 0; i < ratio * f->W; i++) f->ape[i] = mp_rng_unif(&r, -1, 1);
    for (int i = 0; i < CM_DC; i++) f->norm[i] = mp_rng_unif(&r, 0.5, 1.5);
    f->c.ratio = ratio;
    f->c.Dc = CM_DC;
    f->c.rotate = 0;
    f->c.wkv = w_f64("wkv", f->wkv, f->W, CM_D);
    f->c.wgate = w_f64("wgate", f->wgate, f->W, CM_D);
    f->c.ape = f->ape;
    f->c.norm = f->norm;
}

static void cmp_free(cmp_fixture *f)
{
    free(f->wkv);
    free(f->wgate);
    free(f->ape);
}

/* Row b in MPFR (mp_cmp_row_ref, spec section 6): RoPE base 10000 without
 * YaRN on the last CM_R dims at the block's first position. */
static void cmp_row_ref(const cmp_fixture *f, const double *x, int b, double eps, int absent_as_zero, mpfr_t *out)
{
    const mp_cmp_spec c = {f->ratio, CM_DC, CM_D, CM_R, f->wkv, f->wgate, f->ape, f->norm, eps, 10000.0, 1.0, 0};
    mp_cmp_row_ref(&c, x, b, absent_as_zero, out);
}

static void test_compressor_ratio4(void **state)
{
    (void)state;
    enum { S = 12, S2 = 16 };
    const double eps = 1e-6;
    cmp_fixture f;
    cmp_make(&f, 4, "compressor_ratio4");
    const dsv4q_rope_params rp = {CM_R, 10000.0, 0, 1.0, 32.0, 1.0};
    dsv4q_rope_table_f64 rope;
    assert_int_equal(dsv4q_rope_build_f64(&rope, &rp, 64, 0), 0);
    mp_rng r;
    mp_rng_seed(&r, "compressor_ratio4_x");
    double x[S2 * CM_D];
    for (int i = 0; i < S2 * CM_D; i++) x[i] = mp_rng_unif(&r, -1.5, 1.5);

    /* one prefill of 12 tokens */
    dsv4q_cmp_state_f64 sp, sd;
    assert_int_equal(dsv4q_cmp_state_init_f64(&sp, 4, CM_DC), 0);
    assert_int_equal(dsv4q_cmp_state_init_f64(&sd, 4, CM_DC), 0);
    double rows_p[S / 4 * CM_DC], rows_d[S / 4 * CM_DC], one[CM_DC];
    assert_int_equal(dsv4q_compressor_f64(0, 1, &f.c, &sp, x, S, 0, &rope, eps, rows_p), S / 4);
    /* 12 one-token calls: start_pos 0 is a prefill of 1 token, then decode */
    long got = 0;
    for (long p = 0; p < S; p++) {
        long n = dsv4q_compressor_f64(0, 1, &f.c, &sd, x + p * CM_D, 1, p, &rope, eps, one);
        assert_int_equal(n, (p + 1) % 4 == 0 ? 1 : 0);
        if (n == 1) memcpy(rows_d + got++ * CM_DC, one, sizeof one);
    }
    assert_int_equal(got, 3);
    assert_memory_equal(rows_p, rows_d, sizeof rows_p);
    /* Invariant C1: the previous-block state (all that carries forward)
     * is the same, so the next block (decode at 12..15) matches too. */
    assert_memory_equal(sp.kv, sd.kv, sizeof(double) * 4 * f.W);
    assert_memory_equal(sp.score, sd.score, sizeof(double) * 4 * f.W);
    double r3p[CM_DC], r3d[CM_DC];
    for (long p = S; p < S2; p++) {
        long n1 = dsv4q_compressor_f64(0, 1, &f.c, &sp, x + p * CM_D, 1, p, &rope, eps, r3p);
        long n2 = dsv4q_compressor_f64(0, 1, &f.c, &sd, x + p * CM_D, 1, p, &rope, eps, r3d);
        assert_int_equal(n1, n2);
    }
    assert_memory_equal(r3p, r3d, sizeof r3p);

    /* Hand rows: row 0 pools ONLY the 4 current candidates. */
    mpfr_t *ref = mp_vec_new(CM_DC);
    for (int b = 0; b < S / 4; b++) {
        cmp_row_ref(&f, x, b, eps, 0, ref);
        /* ~30 roundings per element through projection, softmax, norm,
         * rope: 1e-13 is ~500 u */
        CHECK_LE(maxrel_vec(rows_p + b * CM_DC, ref, CM_DC), 1e-13, "compressor ratio 4 row %d", b);
    }
    cmp_row_ref(&f, x, 3, eps, 0, ref);
    CHECK_LE(maxrel_vec(r3p, ref, CM_DC), 1e-13, "compressor ratio 4 row 3 (decode after prefill)");
    /* The averaged-in bug variant is far from the oracle's row 0. */
    cmp_row_ref(&f, x, 0, eps, 1, ref);
    assert_true(maxrel_vec(rows_p, ref, CM_DC) > 1e-3);
    mp_vec_free(ref, CM_DC);
    dsv4q_cmp_state_free_f64(&sp);
    dsv4q_cmp_state_free_f64(&sd);
    dsv4q_rope_free_f64(&rope);
    cmp_free(&f);
}

static void test_compressor_ratio128(void **state)
{
    (void)state;
    enum { S = 256 };
    const double eps = 1e-6;
    cmp_fixture f;
    cmp_make(&f, 128, "compressor_ratio128");
    const dsv4q_rope_params rp = {CM_R, 10000.0, 0, 1.0, 32.0, 1.0};
    dsv4q_rope_table_f64 rope;
    assert_int_equal(dsv4q_rope_build_f64(&rope, &rp, S, 0), 0);
    mp_rng r;
    mp_rng_seed(&r, "compressor_ratio128_x");
    double *x = malloc(sizeof(double) * S * CM_D);
    assert_non_null(x);
    for (int i = 0; i < S * CM_D; i++) x[i] = mp_rng_unif(&r, -1.5, 1.5);
    dsv4q_cmp_state_f64 sp, sd;
    assert_int_equal(dsv4q_cmp_state_init_f64(&sp, 128, CM_DC), 0);
    assert_int_equal(dsv4q_cmp_state_init_f64(&sd, 128, CM_DC), 0);
    double rows[2 * CM_DC], rows_d[2 * CM_DC], one[CM_DC];
    assert_int_equal(dsv4q_compressor_f64(0, 1, &f.c, &sp, x, S, 0, &rope, eps, rows), 2);
    mpfr_t *ref = mp_vec_new(CM_DC);
    for (int b = 0; b < 2; b++) {
        cmp_row_ref(&f, x, b, eps, 0, ref);
        CHECK_LE(maxrel_vec(rows + b * CM_DC, ref, CM_DC), 1e-13, "compressor ratio 128 row %d", b);
    }
    /* and token-by-token decode gives the same bits */
    long got = 0;
    for (long p = 0; p < S; p++) {
        long n = dsv4q_compressor_f64(0, 1, &f.c, &sd, x + p * CM_D, 1, p, &rope, eps, one);
        assert_int_equal(n, (p + 1) % 128 == 0 ? 1 : 0);
        if (n == 1) memcpy(rows_d + got++ * CM_DC, one, sizeof one);
    }
    assert_int_equal(got, 2);
    assert_memory_equal(rows, rows_d, sizeof rows);
    mp_vec_free(ref, CM_DC);
    free(x);
    dsv4q_cmp_state_free_f64(&sp);
    dsv4q_cmp_state_free_f64(&sd);
    dsv4q_rope_free_f64(&rope);
    cmp_free(&f);
}

/* ======================================================================== *
 * 8. Indexer (spec section 7): deterministic top-k (lower index wins ties,
 *    -1 pads, masked rows never picked); BF16 scores.
 * ======================================================================== */

static void test_topk_ties(void **state)
{
    (void)state;
    enum { T = 10 };
    const double NI = -INFINITY;
    /* row 0: all equal, wider than k -> 0..k-1
     * row 1: a tie group {2,3,5,6} straddling rank 3 -> 4, 0, then 2 and 3
     * row 2: 2 visible rows < k -> 1, 3, -1, -1 (never a masked row)
     * row 3: nothing visible -> all -1 */
    const double sc[4][T] = {
        {1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5},
        {5, 1, 3, 3, 9, 3, 3, 0, NI, 3},
        {NI, 2, NI, 1, NI, NI, NI, NI, NI, NI},
        {NI, NI, NI, NI, NI, NI, NI, NI, NI, NI},
    };
    static const int32_t want[4][4] = {{0, 1, 2, 3}, {4, 0, 2, 3}, {1, 3, -1, -1}, {-1, -1, -1, -1}};
    double s64[4 * T];
    float s32[4 * T];
    for (int i = 0; i < 4 * T; i++) s32[i] = (float)(s64[i] = sc[i / T][i % T]);
    int32_t out[4 * 4];
    assert_int_equal(dsv4q_topk_f64(s64, 4, T, 4, out), 0);
    assert_memory_equal(out, want, sizeof want);
    memset(out, 0x55, sizeof out);
    assert_int_equal(dsv4q_topk_f32(s32, 4, T, 4, out), 0);
    assert_memory_equal(out, want, sizeof want);
    /* k = 3 cuts the tie group after its lowest member */
    int32_t out3[3];
    assert_int_equal(dsv4q_topk_f64(s64 + T, 1, T, 3, out3), 0);
    assert_int_equal(out3[0], 4);
    assert_int_equal(out3[1], 0);
    assert_int_equal(out3[2], 2);
}

static void test_indexer_scores_bf16(void **state)
{
    (void)state;
    enum { S = 8, HI = 4, DI = 16, T = 8 };
    mp_rng r;
    mp_rng_seed(&r, "indexer_scores_bf16");
    double q[S * HI * DI], w[S * HI], K[T * DI], sc[S * T];
    float qf[S * HI * DI], wf[S * HI], Kf[T * DI], scf[S * T];
    for (int i = 0; i < S * HI * DI; i++) qf[i] = (float)(q[i] = mp_rng_f32(&r, -1, 1));
    for (int i = 0; i < S * HI; i++) wf[i] = (float)(w[i] = mp_rng_f32(&r, -0.3, 0.3));
    for (int i = 0; i < T * DI; i++) Kf[i] = (float)(K[i] = mp_rng_f32(&r, -1, 1));
    const uint64_t sets[2] = {DSV4Q_BIT(DSV4Q_B_IDX_SCORE_BF16),
                              DSV4Q_BIT(DSV4Q_B_IDX_SCORE_BF16) | DSV4Q_BIT(DSV4Q_B_IDX_PARTIAL_BF16)};
    mpfr_t ref, d, t;
    mpfr_inits2(MP_PREC, ref, d, t, (mpfr_ptr)0);
    for (int k = 0; k < 2; k++)
        for (int prefill = 0; prefill < 2; prefill++) {
            long sp = prefill ? 0 : 100;
            dsv4q_indexer_scores_f64(sets[k], q, w, S, HI, DI, K, T, sp, 4, sc);
            dsv4q_indexer_scores_f32(sets[k], qf, wf, S, HI, DI, Kf, T, sp, 4, scf);
            for (int i = 0; i < S; i++)
                for (int tt = 0; tt < T; tt++) {
                    double v = sc[i * T + tt], vf = scf[i * T + tt];
                    if (prefill && tt >= (i + 1) / 4) { /* masked */
                        assert_true(v == -INFINITY && vf == -INFINITY);
                        continue;
                    }
                    assert_true(isfinite(v) && isfinite(vf));
                    assert_true(mp_is_bf16(v));
                    assert_true(mp_is_bf16(vf));
                    if (k == 0) {
                        /* only the final rounding: within half a BF16 ulp
                         * (<= 2^-8 relative) of the exact score */
                        mpfr_set_zero(ref, 1);
                        for (int h = 0; h < HI; h++) {
                            mp_dot_d(d, q + (i * HI + h) * DI, K + tt * DI, DI, 1, t);
                            if (mpfr_sgn(d) < 0) continue;
                            mpfr_mul_d(d, d, w[i * HI + h], MPFR_RNDN);
                            mpfr_add(ref, ref, d, MPFR_RNDN);
                        }
                        double e = mpfr_get_d(ref, MPFR_RNDN);
                        CHECK_LE(fabs(v - e), 0x1p-8 * fabs(e) * (1 + 1e-9), "indexer score %d,%d", i, tt);
                    }
                }
        }
    /* Without the boundary the same scores are generally not BF16 values:
     * the representability check above can fail. */
    dsv4q_indexer_scores_f64(0, q, w, S, HI, DI, K, T, 100, 4, sc);
    int not_bf16 = 0;
    for (int i = 0; i < S * T; i++) not_bf16 += sc[i] != 0 && !mp_is_bf16(sc[i]);
    assert_true(not_bf16 > 0);
    mpfr_clears(ref, d, t, (mpfr_ptr)0);
}

/* ======================================================================== *
 * 9. Hadamard (spec section 2): natural-order Sylvester, times n^-0.5; an
 *    orthogonal map, so it preserves dot products and is its own inverse.
 * ======================================================================== */

static void test_hadamard(void **state)
{
    (void)state;
    enum { N = 128 };
    mp_rng r;
    mp_rng_seed(&r, "hadamard");
    double q[N], k[N], hq[N], hk[N];
    for (int i = 0; i < N; i++) {
        q[i] = mp_rng_unif(&r, -1, 1);
        k[i] = 0.5 * q[i] + mp_rng_unif(&r, -1, 1); /* correlated: q.k well away from 0 */
    }
    memcpy(hq, q, sizeof q);
    memcpy(hk, k, sizeof k);
    dsv4q_hadamard_f64(0, hq, 1, N);
    dsv4q_hadamard_f64(0, hk, 1, N);
    mpfr_t a, b, t;
    mpfr_inits2(MP_PREC, a, b, t, (mpfr_ptr)0);
    mp_dot_d(a, q, k, N, 1, t);
    mp_dot_d(b, hq, hk, N, 1, t);
    mpfr_sub(t, a, b, MPFR_RNDN);
    double qk = mpfr_get_d(a, MPFR_RNDN), diff = fabs(mpfr_get_d(t, MPFR_RNDN));
    /* 7 butterfly levels + scale: each output off by ~8u*||x||; the dot
     * by ~16u*||q||*||k|| ~ 1e-15 relative to q.k here. */
    CHECK_LE(diff / fabs(qk), 1e-13, "(Hq).(Hk) vs q.k relative");
    printf("hadamard: |(Hq).(Hk) - q.k| / |q.k| = %.3g\n", diff / fabs(qk));
    /* H twice is the identity */
    dsv4q_hadamard_f64(0, hq, 1, N);
    double m = 0, mx = 0;
    for (int i = 0; i < N; i++) {
        m = fmax(m, fabs(hq[i] - q[i]));
        mx = fmax(mx, fabs(q[i]));
    }
    CHECK_LE(m / mx, 1e-15, "H(H(q)) - q, max relative to max|q|");
    printf("hadamard: max|H(H(q)) - q| / max|q| = %.3g\n", m / mx);
    /* Natural (Sylvester) order: H e_j has entries (-1)^popcount(i & j) /
     * sqrt(n), not the sequency (Walsh) order. */
    mpfr_set_ui(a, N, MPFR_RNDN);
    mpfr_rec_sqrt(a, a, MPFR_RNDN);
    static const int js[4] = {1, 2, 5, 127};
    for (int c = 0; c < 4; c++) {
        double e[N];
        for (int i = 0; i < N; i++) e[i] = i == js[c] ? 1.0 : 0.0;
        dsv4q_hadamard_f64(0, e, 1, N);
        for (int i = 0; i < N; i++) {
            int sgn = __builtin_popcount((unsigned)(i & js[c])) & 1 ? -1 : 1;
            mpfr_mul_si(t, a, sgn, MPFR_RNDN);
            CHECK_LE(mp_ulp_err(e[i], t, 53), 1.0, "H e_%d entry %d", js[c], i);
        }
    }
    mpfr_clears(a, b, t, (mpfr_ptr)0);
}

/* ======================================================================== *
 * 10. FP4 act quant (spec sections 1-2): E2M1 grid, ties to even mantissa,
 *     ue8m0 block scale from amax/6.
 * ======================================================================== */

static void test_fp4_act_quant(void **state)
{
    (void)state;
    /* Block 0: amax 6 -> s = 1. value -> hand-rounded E2M1 */
    static const double v0[32] = {0.25, 0.75, 2.5, 5, 1.25, 1.75, 3.5, -0.25, -0.75, -2.5, -5, 6, -6, 0.3, 2.9, 4.9,
                                  5.1, 0.1, 0.5, 1, 1.5, 2, 3, 4, 0, -3.5, 2.75, 2.25, 0.74, 0.76, 1.0001, -4.5};
    static const double e0[32] = {0, 1, 2, 4, 1, 2, 4, -0.0, -1, -2, -4, 6, -6, 0.5, 3, 4,
                                  6, 0, 0.5, 1, 1.5, 2, 3, 4, 0, -4, 3, 2, 0.5, 1, 1, -4};
    /* Block 2: amax 7 -> 7/6 > 1 -> s = 2: 7 -> 3.5 -> 4 -> 8; 5 -> 2.5 -> 2
     * -> 4; 1.5 -> 0.75 -> 1 -> 2; 0.5 -> 0.25 -> 0; 3 -> 1.5 -> 3. */
    static const double v2[8] = {7, 5, 1.5, 0.5, 3, -7, 1, -2.5};
    static const double e2[8] = {8, 4, 2, 0, 3, -8, 1, -2};
    enum { N = 128 };
    double x[N], want[N];
    for (int i = 0; i < 32; i++) {
        x[i] = v0[i];
        want[i] = e0[i];
        /* block 1: the same values scaled by 2^-3 (amax 0.75 -> s = 2^-3) */
        x[32 + i] = v0[i] * 0.125;
        want[32 + i] = e0[i] * 0.125;
        /* block 3: all zero -> stays zero (amax floor, no NaN) */
        x[96 + i] = 0;
        want[96 + i] = 0;
    }
    for (int i = 0; i < 32; i++) {
        x[64 + i] = i < 8 ? v2[i] : 0.0;
        want[64 + i] = i < 8 ? e2[i] : 0.0;
    }
    double y[N];
    float yf[N];
    memcpy(y, x, sizeof x);
    for (int i = 0; i < N; i++) yf[i] = (float)x[i];
    dsv4q_fp4_act_quant_f64(y, 1, N);
    dsv4q_fp4_act_quant_f32(yf, 1, N);
    for (int i = 0; i < N; i++) {
        if (y[i] != want[i] || (double)yf[i] != want[i])
            print_error("fp4 element %d: x=%g want %g got f64 %g f32 %g\n", i, x[i], want[i], y[i], (double)yf[i]);
        assert_true(y[i] == want[i]);
        assert_true((double)yf[i] == want[i]);
        assert_true(signbit(y[i]) == signbit(want[i]) || want[i] != 0);
    }
}

/* ======================================================================== *
 * 11. Linear layers (spec section 3) against independent hand loops.
 * ======================================================================== */

enum { LIN_IN = 256, LIN_OUT = 3 };

/* act_quant(x, 128) codes and scales, written from the spec: exhaustive
 * nearest-E4M3 search, exact power-of-two scale. */
static void hand_act_quant(const double *x, long n, double *q, double *sa)
{
    for (long b = 0; b * 128 < n; b++) {
        double amax = 1e-4;
        for (long i = b * 128; i < (b + 1) * 128 && i < n; i++) amax = fmax(amax, fabs(x[i]));
        sa[b] = mp_pow2i(mp_ceil_log2_ratio(amax, 448.0));
        for (long i = b * 128; i < (b + 1) * 128 && i < n; i++) q[i] = mp_e4m3_nearest(x[i] / sa[b]);
    }
}

static void lin_input(double *x, const char *key)
{
    mp_rng r;
    mp_rng_seed(&r, key);
    for (int i = 0; i < LIN_IN; i++) x[i] = i < 128 ? mp_rng_unif(&r, -3, 3) : mp_rng_unif(&r, -0.01, 0.01);
}

static void test_linear_fp8(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, "linear_fp8");
    uint8_t codes[LIN_OUT * LIN_IN], scale[2] = {mp_e8m0_byte(-3), mp_e8m0_byte(2)};
    for (int i = 0; i < LIN_OUT * LIN_IN; i++) {
        uint8_t c;
        do c = (uint8_t)mp_rng_u64(&r);
        while ((c & 0x7F) == 0x7F);
        codes[i] = c;
    }
    dsv4q_weight W = {"w_fp8", DSV4Q_WF_FP8, LIN_OUT, LIN_IN, codes, scale, DSV4Q_DT_F8_E8M0, 0};
    double x[LIN_IN], y[LIN_OUT], q[LIN_IN], sa[2];
    lin_input(x, "linear_fp8_x");
    assert_int_equal(dsv4q_linear_f64(DSV4Q_BIT(DSV4Q_B_GEMM_ACT_FP8), 1, &W, x, 1, y, -1), 0);
    hand_act_quant(x, LIN_IN, q, sa);
    assert_true(sa[0] == 0x1p-7 && sa[1] == 0x1p-15); /* 3/448 -> 2^-7; 0.01/448 -> 2^-15 */
    mpfr_t ex, t;
    mpfr_inits2(MP_PREC, ex, t, (mpfr_ptr)0);
    for (int o = 0; o < LIN_OUT; o++) {
        double acc = 0;
        mpfr_set_zero(ex, 1);
        for (int kb = 0; kb < 2; kb++) {
            /* The block dot is exact in binary64 in any order: products of
             * two E4M3 values are multiples of 2^-18 below 2^18, 128 of
             * them sum below 2^25: 43 bits. MPFR confirms it. */
            double d = 0;
            for (int k = kb * 128; k < kb * 128 + 128; k++) d += mp_e4m3_value(codes[o * LIN_IN + k]) * q[k];
            mpfr_set_zero(t, 1);
            for (int k = kb * 128; k < kb * 128 + 128; k++)
                mpfr_add_d(t, t, mp_e4m3_value(codes[o * LIN_IN + k]) * q[k], MPFR_RNDN);
            assert_true(mpfr_cmp_d(t, d) == 0);
            double sw = mp_pow2i(scale[kb] - 127);
            acc += d * (sa[kb] * sw); /* one FP accumulator over blocks, kb order */
        }
        if (y[o] != acc) print_error("fp8 linear row %d: oracle %a hand %a\n", o, y[o], acc);
        assert_true(y[o] == acc);
    }
    mpfr_clears(ex, t, (mpfr_ptr)0);
}

static void test_linear_fp4(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, "linear_fp4");
    uint8_t packed[LIN_OUT * LIN_IN / 2], scale[LIN_OUT * LIN_IN / 32];
    for (int i = 0; i < LIN_OUT * LIN_IN / 2; i++) packed[i] = (uint8_t)mp_rng_u64(&r);
    for (int i = 0; i < LIN_OUT * LIN_IN / 32; i++) scale[i] = mp_e8m0_byte(mp_rng_int(&r, 6) - 4);
    dsv4q_weight W = {"w_fp4", DSV4Q_WF_FP4, LIN_OUT, LIN_IN, packed, scale, DSV4Q_DT_F8_E8M0, 0};
    double x[LIN_IN], y[LIN_OUT], q[LIN_IN], sa[2];
    lin_input(x, "linear_fp4_x");
    assert_int_equal(dsv4q_linear_f64(DSV4Q_BIT(DSV4Q_B_GEMM_ACT_FP8), 1, &W, x, 1, y, -1), 0);
    hand_act_quant(x, LIN_IN, q, sa);
    int as_int8_differs = 0;
    for (int o = 0; o < LIN_OUT; o++) {
        double acc = 0, acc_i8 = 0;
        for (int kb = 0; kb < LIN_IN / 32; kb++) {
            double d = 0, d8 = 0; /* exact: E2M1 x E4M3 products, 32 terms */
            for (int k = kb * 32; k < kb * 32 + 32; k++) {
                uint8_t byte = packed[(o * LIN_IN + k) / 2];
                uint8_t nib = (k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xF); /* low nibble = even k */
                d += mp_e2m1_value(nib) * q[k];
                d8 += (double)(int8_t)byte * q[k];
            }
            double sw = mp_pow2i(scale[o * (LIN_IN / 32) + kb] - 127);
            acc += (d * sa[kb / 4]) * sw;
            acc_i8 += (d8 * sa[kb / 4]) * sw;
        }
        if (y[o] != acc) print_error("fp4 linear row %d: oracle %a hand %a\n", o, y[o], acc);
        assert_true(y[o] == acc);
        as_int8_differs |= y[o] != acc_i8; /* the I8-as-int8 bug is visible */
    }
    assert_true(as_int8_differs);
}

static void test_linear_bf16(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, "linear_bf16");
    uint16_t codes[LIN_OUT * LIN_IN];
    for (int i = 0; i < LIN_OUT * LIN_IN; i++) {
        /* sign, exponent 120..133 (2^-7 .. 2^6), random mantissa */
        unsigned e = 120 + (unsigned)mp_rng_int(&r, 14);
        codes[i] = (uint16_t)(((mp_rng_u64(&r) & 1) << 15) | (e << 7) | (mp_rng_u64(&r) & 0x7F));
    }
    dsv4q_weight W = {"w_bf16", DSV4Q_WF_BF16, LIN_OUT, LIN_IN, codes, NULL, DSV4Q_DT_INVALID, 0};
    double x[LIN_IN], y[LIN_OUT];
    for (int i = 0; i < LIN_IN; i++) x[i] = mp_rng_unif(&r, -1, 1);
    /* gemm_act_fp8 on: it must NOT touch a BF16-weight linear */
    assert_int_equal(dsv4q_linear_f64(DSV4Q_BIT(DSV4Q_B_GEMM_ACT_FP8), 1, &W, x, 1, y, -1), 0);
    mpfr_t ex, t;
    mpfr_inits2(MP_PREC, ex, t, (mpfr_ptr)0);
    for (int o = 0; o < LIN_OUT; o++) {
        mpfr_set_zero(ex, 1);
        for (int k = 0; k < LIN_IN; k++) {
            uint16_t c = codes[o * LIN_IN + k]; /* BF16 from the bit layout */
            double w = ((c >> 15) ? -1.0 : 1.0) * (1.0 + (c & 0x7F) / 128.0) * mp_pow2i(((c >> 7) & 0xFF) - 127);
            mp_addmul_dd(ex, w, x[k], t);
        }
        mpfr_sub_d(t, ex, y[o], MPFR_RNDN);
        double rel = fabs(mpfr_get_d(t, MPFR_RNDN)) / fabs(mpfr_get_d(ex, MPFR_RNDN));
        /* 256-term dot in 8 lanes (32 terms each) + 3 combines: worst case
         * ~35u times the condition; measured ~1e-17 */
        CHECK_LE(rel, 1e-15, "bf16 linear row %d relative", o);
    }
    mpfr_clears(ex, t, (mpfr_ptr)0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ue8m0_scale),
        cmocka_unit_test(test_swiglu_clamp),
        cmocka_unit_test(test_gate_sqrtsoftplus),
        cmocka_unit_test(test_hc_pre_eps),
        cmocka_unit_test(test_hc_post_orientation),
        cmocka_unit_test(test_attn_sink_one_key),
        cmocka_unit_test(test_attn_all_masked),
        cmocka_unit_test(test_attn_two_keys),
        cmocka_unit_test(test_attn_150_keys),
        cmocka_unit_test(test_rope_inverse),
        cmocka_unit_test(test_rope_yarn_table),
        cmocka_unit_test(test_rope_ratio0_no_yarn),
        cmocka_unit_test(test_compressor_ratio4),
        cmocka_unit_test(test_compressor_ratio128),
        cmocka_unit_test(test_topk_ties),
        cmocka_unit_test(test_indexer_scores_bf16),
        cmocka_unit_test(test_hadamard),
        cmocka_unit_test(test_fp4_act_quant),
        cmocka_unit_test(test_linear_fp8),
        cmocka_unit_test(test_linear_fp4),
        cmocka_unit_test(test_linear_bf16),
    };
    return cmocka_run_group_tests(tests, rope_group_setup, rope_group_teardown);
}
