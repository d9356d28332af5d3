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
 */
#include "tests/testutil.h"
#include "oracle/formats.h"
#include "oracle/ops41.h"
#include "oracle/boundary.h"
#include "oracle/ops.h"

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
            long double acc = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                long double term = (long double)(q[k] * sa[k / 32]) * (long double)(e4m3_val(w[o * K + k]) * ldexp(1, sc[(o / 32) * nkb + k / 32] - 127));
                acc += term;
                mag += fabsl(term);
            }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp8_blocks_32),
        cmocka_unit_test(fp4_act_32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
