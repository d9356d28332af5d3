/*
 * test_v41_linear.c - V4.1's quantized linears (dsv4q_linear, oracle/linear.c, on weights of blk 32): FP8
 * weights with [32,32] blocks and FP8 activations with 1x32 power-of-two
 * scales; FP4 experts with activations per 32.
 *
 * Expected values are computed here, independently of oracle/linear.c, from the
 * reference's definitions (model.py Linear / linear, kernel.py fp8_gemm,
 * fp4_gemm, act_quant with scale_fmt "ue8m0"):
 *  - weight element (o, k) = E4M3(code) * 2^(scale_byte - 127) with the
 *    scale of block [o/32][k/32] of a [ceil(out/32), ceil(in/32)] grid;
 *  - activation block b of 32: s = smallest power of two with 448 * s >=
 *    max(amax, 1e-4), code = E4M3(clamp(x/s, +-448)) (RNE);
 *  - y = sum over k of (code_k * s_{k/32}) * w(o, k), accumulated in long
 *    double (every term is a short dyadic, so this is within a few ulps of
 *    the exact sum).
 * The oracle's result must be within 4e-16 (f64) / 4e-7 (f32) relative of
 * that per output (it accumulates in rdot's order at its width). A wrong
 * block geometry (128 instead of 32, or a transposed scale grid) moves
 * outputs by whole scale factors and fails by orders of magnitude.
 * The ABI case linear(fmt=fp8b32) goes through the same reference: its
 * scale grid, dsv4q_op_weight's blk and the oracle run by dsv4q_oracle_exec.
 */
#include "tests/testutil.h"
#include "oracle/formats.h"
#include "oracle/ops41.h"
#include "oracle/boundary.h"
#include "oracle/ops.h"
#include "harness/cases/cases.h"
#include "harness/ops/ops.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t next_u64(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return rng_state ^ (rng_state >> 29);
}

static double e4m3_val(uint8_t c)   /* the format definition */
{
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    double v = e == 0 ? m / 8.0 * ldexp(1, -6) : (1 + m / 8.0) * ldexp(1, e - 7);
    return s ? -v : v;
}

static uint8_t rand_e4m3(void)
{
    uint8_t c;
    do c = (uint8_t)next_u64(); while ((c & 0x7F) == 0x7F);   /* no NaN */
    return c;
}

/* act quant of one row per 32, from the definition */
static void ref_act(const double *x, long K, double *q, double *sa)
{
    for (long b = 0; b * 32 < K; b++) {
        long len = K - b * 32 < 32 ? K - b * 32 : 32;
        double amax = 1e-4;
        for (long i = 0; i < len; i++) amax = fmax(amax, fabs(x[b * 32 + i]));
        double s = ldexp(1, -140);
        while (448 * s < amax) s *= 2;
        sa[b] = s;
        for (long i = 0; i < len; i++) {
            double v = x[b * 32 + i] / s;
            v = v > 448 ? 448 : (v < -448 ? -448 : v);
            q[b * 32 + i] = dsv4q_e4m3_decode(dsv4q_e4m3_encode(v, 1));
        }
    }
}

/* The exact sum over k of (q[k] * sa[k/32]) * wv[k] in long double (each
 * term a short dyadic); *mag = sum of |terms|. */
static long double ref_dot(const double *q, const double *sa, const double *wv, long K, long double *mag)
{
    long double acc = 0;
    *mag = 0;
    for (long k = 0; k < K; k++) {
        const long double term = (long double)(q[k] * sa[k / 32]) * (long double)wv[k];
        acc += term;
        *mag += fabsl(term);
    }
    return acc;
}

/* FP8 weight [out, in] with 32x32 E8M0 scales: element decode and a
 * quantized GEMM with 1x32 activation blocks. */
static void fp8_blocks_32(void **state)
{
    (void)state;
    enum { O = 70, K = 100, S = 3 };   /* partial blocks in both directions */
    const int64_t nob = (O + 31) / 32, nkb = (K + 31) / 32;
    uint8_t *w = malloc(O * K), sc[3 * 4];
    for (long i = 0; i < O * K; i++) w[i] = rand_e4m3();
    for (long i = 0; i < nob * nkb; i++) sc[i] = (uint8_t)(127 - 6 + next_u64() % 9);   /* 2^-6 .. 2^2 */
    dsv4q_weight W = {.name = "t", .fmt = DSV4Q_WF_FP8, .blk = 32, .out = O, .in = K, .data = w, .scale = sc,
                      .scale_dtype = DSV4Q_DT_F8_E8M0};
    for (int64_t o = 0; o < O; o++)
        for (int64_t k = 0; k < K; k++)
            assert_true(dsv4q_weight_at(&W, o, k) == e4m3_val(w[o * K + k]) * ldexp(1, sc[(o / 32) * nkb + k / 32] - 127));

    double x[S * K], q[K], sa[4];
    float xf[S * K];
    for (long i = 0; i < S * K; i++) {
        x[i] = ((double)(next_u64() >> 11) / 9007199254740992.0 - 0.5) * ldexp(1, (int)(next_u64() % 7) - 3);
        xf[i] = (float)x[i];
        x[i] = xf[i];   /* the same input at both widths */
    }
    x[5] = xf[5] = 0;   /* a block with a zero and ... */
    for (int i = 64; i < 96; i++) x[i] = xf[i] = 0;   /* ... an all-zero block (amax floor 1e-4) */
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("qat", &bs), 0);
    double y[S * O];
    float yf[S * O];
    assert_int_equal(dsv4q_linear_f64(bs, 1, &W, x, S, y, -1), 0);
    assert_int_equal(dsv4q_linear_f32(bs, 1, &W, xf, S, yf, -1), 0);
    double worst64 = 0, worst32 = 0;
    for (int t = 0; t < S; t++) {
        ref_act(x + t * K, K, q, sa);
        for (int64_t o = 0; o < O; o++) {
            double wv[K];
            for (int64_t k = 0; k < K; k++)
                wv[k] = e4m3_val(w[o * K + k]) * ldexp(1, sc[(o / 32) * nkb + k / 32] - 127);
            long double mag;
            const long double acc = ref_dot(q, sa, wv, K, &mag);
            worst64 = fmax(worst64, (double)(fabsl((long double)y[t * O + o] - acc) / mag));
            worst32 = fmax(worst32, (double)(fabsl((long double)yf[t * O + o] - acc) / mag));
        }
    }
    printf("fp8 32x32: worst |y - exact| / sum|terms|: f64 %.2e, f32 %.2e\n", worst64, worst32);
    assert_true(worst64 < 4e-16);
    assert_true(worst32 < 4e-7);

    /* the same bytes through V4's dsv4q_linear (128x128 weight blocks, 1x128
     * activation blocks) give a different linear: the geometry matters */
    double y4[S * O];
    dsv4q_weight W4 = W;
    W4.blk = 0;   /* V4's block */
    assert_int_equal(dsv4q_linear_f64(bs, 1, &W4, x, S, y4, -1), 0);
    double far = 0;
    for (int i = 0; i < S * O; i++) far = fmax(far, fabs(y4[i] - y[i]) / (fabs(y[i]) + 1e-3));
    printf("fp8: V4's 128-block reading differs by up to %.2e relative\n", far);
    assert_true(far > 1e-2);

    /* without gemm_act_fp8 (exact profile) the activation is not quantized */
    uint64_t ex;
    assert_int_equal(dsv4q_profile_set("exact", &ex), 0);
    assert_int_equal(dsv4q_linear_f64(ex, 1, &W, x, 1, y, -1), 0);
    long double acc = 0;
    for (int64_t k = 0; k < K; k++) acc += (long double)x[k] * dsv4q_weight_at(&W, 0, k);
    assert_true(fabsl((long double)y[0] - acc) <= 1e-14L * fabsl(acc) + 1e-300L);
    free(w);
}

/* FP4 weight [out, in/2] with per-32 scales [out, in/32]; activation
 * scales per 32 (V4 used one per 128 for the same weight). */
static void fp4_act_32(void **state)
{
    (void)state;
    enum { O = 9, K = 128, S = 2 };
    uint8_t w[O * K / 2], sc[O * K / 32];
    for (long i = 0; i < O * K / 2; i++) w[i] = (uint8_t)next_u64();
    for (long i = 0; i < O * K / 32; i++) sc[i] = (uint8_t)(127 - 4 + next_u64() % 5);
    dsv4q_weight W = {.name = "e", .fmt = DSV4Q_WF_FP4, .blk = 32, .out = O, .in = K, .data = w, .scale = sc,
                      .scale_dtype = DSV4Q_DT_F8_E8M0};
    double x[S * K], q[K], sa[4], y[S * O];
    for (long i = 0; i < S * K; i++)
        x[i] = (float)(((double)(next_u64() >> 11) / 9007199254740992.0 - 0.5) * ldexp(1, (int)(i / 32) * 3 - 6));
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("qat", &bs), 0);
    assert_int_equal(dsv4q_linear_f64(bs, 1, &W, x, S, y, -1), 0);
    static const double E2M1[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6};
    double worst = 0;
    for (int t = 0; t < S; t++) {
        ref_act(x + t * K, K, q, sa);   /* the four 32-blocks have very different ranges */
        for (int o = 0; o < O; o++) {
            long double acc = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const uint8_t b = w[(o * K + k) / 2], nib = (k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15);
                long double term = (long double)(q[k] * sa[k / 32]) * (E2M1[nib] * ldexp(1, sc[o * (K / 32) + k / 32] - 127));
                acc += term;
                mag += fabsl(term);
            }
            worst = fmax(worst, (double)(fabsl((long double)y[t * O + o] - acc) / (mag > 0 ? mag : 1)));
        }
    }
    printf("fp4 act 1x32: worst relative error f64 %.2e\n", worst);
    assert_true(worst < 4e-16);
}

/* The ABI case linear(fmt=fp8b32): its weight carries a [ceil(N/32),
 * ceil(K/32)] E8M0 grid whose decode is the F32 data, dsv4q_op_weight
 * reads that grid as blk 32 (the ABI output is dsv4q_linear's on a blk-32
 * weight, bit for bit, not V4's 128 reading), and the oracle through
 * dsv4q_oracle_exec (f64,
 * qat, out=f32: no output rounding) equals the per-32 reference above
 * (ref_act, long double sum) within 4e-16 of sum|terms|. Recipe blockedge
 * (harness/ops/linear.c): each token's amax of every 32-block is its
 * first or last element, and the 32-blocks of one 128 group spread by
 * 2^15 somewhere (amax ratio >= 2^12: their magnitudes 2^-a, a in
 * {0,5,10,15}). */
static void abi_case_b32(void **state)
{
    (void)state;
    static const char *const keys[] = {"linear(s=2,N=70,K=100,fmt=fp8b32,out=f32,recipe=normal,seed=2)",
                                       "linear(s=2,N=40,K=512,fmt=fp8b32,out=f32,recipe=blockedge,seed=2)"};
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("qat", &bs), 0);
    for (int ki = 0; ki < 2; ki++) {
        dsv4q_case c;
        char err[256];
        assert_int_equal(dsv4q_case_build(&c, keys[ki], err, sizeof err), 0);
        const dsv4q_bt *wt = &c.in[1];
        const long S = (long)c.in[0].shape[0], N = (long)wt->shape[0], K = (long)wt->shape[1], nkb = (K + 31) / 32;
        assert_int_equal(wt->raw_dtype, DSV4Q_BT_F8_E4M3);
        assert_int_equal(wt->scale_shape[0], (N + 31) / 32);
        assert_int_equal(wt->scale_shape[1], nkb);
        const uint8_t *code = wt->raw, *sc = wt->raw_scale;
        const float *wd = wt->data, *xf = c.in[0].data;
        for (long o = 0; o < N; o++)
            for (long k = 0; k < K; k++)
                assert_true((double)wd[o * K + k] ==
                            e4m3_val(code[o * K + k]) * ldexp(1, sc[(o / 32) * nkb + k / 32] - 127));
        double *y = calloc((size_t)(S * N), sizeof(double)), *x = malloc(sizeof(double) * (size_t)(S * K)),
               *q = malloc(sizeof(double) * (size_t)K), *wv = malloc(sizeof(double) * (size_t)K), sa[64];
        assert_true(y && x && q && wv && nkb <= 64);
        for (long i = 0; i < S * K; i++) x[i] = xf[i];
        dsv4q_bt out = c.out[0];
        dsv4q_bcall call;
        dsv4q_case_call(&c, &out, bs, &call);
        void *ptr[1] = {y};
        assert_int_equal(dsv4q_oracle_exec(64, bs, &call, ptr, err, sizeof err), 0);
        double worst = 0, spread = 1;
        for (long t = 0; t < S; t++) {
            ref_act(x + t * K, K, q, sa);
            for (long o = 0; o < N; o++) {
                for (long k = 0; k < K; k++) wv[k] = wd[o * K + k];
                long double mag;
                const long double acc = ref_dot(q, sa, wv, K, &mag);
                worst = fmax(worst, (double)(fabsl((long double)y[t * N + o] - acc) / (mag > 0 ? mag : 1)));
            }
            if (ki == 1)
                for (long g = 0; g < K; g += 128) {
                    double lo = INFINITY, hi = 0;
                    for (long b = g; b < g + 128; b += 32) {
                        double amax = 0;
                        for (long k = b; k < b + 32; k++) amax = fmax(amax, fabs(x[t * K + k]));
                        assert_true(fabs(x[t * K + b]) == amax || fabs(x[t * K + b + 31]) == amax);
                        lo = fmin(lo, amax);
                        hi = fmax(hi, amax);
                    }
                    spread = fmax(spread, hi / lo);
                }
        }
        /* the ABI path read the grid as blk 32: bit for bit dsv4q_linear on a
         * blk-32 weight of the same bytes, and not V4's 128 reading */
        /* clang-format off */
        dsv4q_weight W = {.name = "w", .fmt = DSV4Q_WF_FP8, .blk = 32, .out = N, .in = K, .data = code, .scale = sc,
                          .scale_dtype = DSV4Q_DT_F8_E8M0};
        /* clang-format on */
        double *yd = malloc(sizeof(double) * (size_t)(S * N));
        assert_non_null(yd);
        assert_int_equal(dsv4q_linear_f64(bs, 1, &W, x, S, yd, -1), 0);
        assert_memory_equal(yd, y, sizeof(double) * (size_t)(S * N));
        W.blk = 0;
        assert_int_equal(dsv4q_linear_f64(bs, 1, &W, x, S, yd, -1), 0);
        double far = 0;
        for (long i = 0; i < S * N; i++) far = fmax(far, fabs(yd[i] - y[i]) / (fabs(y[i]) + 1e-3));
        assert_true(far > 1e-2);
        free(yd);
        printf("%s: worst |y - per-32 reference| / sum|terms| %.2e", c.key, worst);
        if (ki == 1) printf(", widest 128-group amax spread %.3g", spread);
        printf("\n");
        assert_true(worst < 4e-16);
        if (ki == 1) assert_true(spread >= 0x1p12);
        free(y);
        free(x);
        free(q);
        free(wv);
        dsv4q_case_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp8_blocks_32),
        cmocka_unit_test(abi_case_b32),
        cmocka_unit_test(fp4_act_32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
