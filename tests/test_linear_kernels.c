/*
 * test_linear_kernels.c - dsv4q_linear gives the same bits as a plain
 * reference of its arithmetic, with every row kernel this CPU runs.
 *
 * Owns that one property. oracle/linear.c keeps rdot's 8 lanes in one
 * vector, decodes FP8/FP4 codes straight into it at 1 token, and compiles
 * its row kernel per x86 ISA (AVX-512, baseline; one kernel elsewhere). The
 * reference here is the pre-vectorisation code written out in scalars:
 * decode each row from the bit layout (tests/mpref.h, not oracle/formats.c),
 * rdot's order spelled out (lane l sums elements i % 8 == l, combine
 * ((0+4)+(2+6))+((1+5)+(3+7)), then the tail), FP8 block dots scaled per
 * 128 (V4.1: 32) and FP4 per 32, in block order. Every kernel x thread count must
 * match it byte for byte (memcmp), at both widths, for F32, F64, BF16, FP8
 * (E8M0 and F32 scales, K not a multiple of 128 or of 8, all finite codes
 * including subnormals and -0) and FP4, with s = 1, 2, 3, 16 tokens, in the
 * exact and the source profile (both act-quant scale rules: ue8m0 and
 * exact). Rows holding a NaN code must give NaN. The reference shares one
 * function with the code under test, the activation quantization
 * (dsv4q_act_quant_codes: not part of this change; its bits are pinned by
 * test_ops_cases and the goldens). The kernels compared are printed; a CPU
 * with AVX-512F must compare the avx512 one.
 *
 * The per-width bodies are written once in the vocabulary of oracle/width.h
 * (real, X(name), R_NAME) and expanded at both widths by including this
 * file into itself through oracle/both.h (the ops.inc pattern of
 * oracle/ops.h).
 */
#ifndef LK_BODY

#include "tests/testutil.h"

#include <omp.h>

#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "tests/mpref.h"

/* One weight in stored form plus what the reference decodes it with. */
typedef struct {
    dsv4q_weight w;
    void *data, *scale;
    int nan_row;   /* row holding a NaN code (FP8 only), else -1 */
} tw;

static void tw_free(tw *t)
{
    free(t->data);
    free(t->scale);
}

/* fmt over [N, K]; FP8 scales E8M0 (f32scale 0) or F32. */
static void tw_make(tw *t, mp_rng *r, dsv4q_wfmt fmt, long N, long K, int f32scale, int with_nan, int blk)
{
    const long b = blk > 0 ? blk : 128; /* the FP8 block (V4 128, V4.1 32) */
    memset(t, 0, sizeof *t);
    t->nan_row = -1;
    long nsc = 0;
    switch (fmt) {
    case DSV4Q_WF_F32: {
        float *p = malloc(sizeof(float) * (size_t)(N * K));
        assert_non_null(p);
        for (long i = 0; i < N * K; i++) p[i] = (float)mp_rng_gauss_f32(r, 0.1);
        t->data = p;
        break;
    }
    case DSV4Q_WF_F64: {
        double *p = malloc(sizeof(double) * (size_t)(N * K));
        assert_non_null(p);
        for (long i = 0; i < N * K; i++) p[i] = mp_rng_unif(r, -0.3, 0.3);
        t->data = p;
        break;
    }
    case DSV4Q_WF_BF16: {
        uint16_t *p = malloc(sizeof(uint16_t) * (size_t)(N * K));
        assert_non_null(p);
        for (long i = 0; i < N * K; i++) {
            uint16_t c;
            do c = (uint16_t)mp_rng_u64(r);   /* any finite code, subnormals included */
            while (((c >> 7) & 0xFF) == 0xFF || ((c >> 7) & 0xFF) > 0x90);
            p[i] = c;
        }
        t->data = p;
        break;
    }
    case DSV4Q_WF_FP8: {
        uint8_t *p = malloc((size_t)(N * K));
        assert_non_null(p);
        for (long i = 0; i < N * K; i++) {
            uint8_t c;
            do c = (uint8_t)mp_rng_u64(r);
            while ((c & 0x7F) == 0x7F);
            p[i] = c;
        }
        if (with_nan && N > 3) {
            t->nan_row = (int)(N / 2);
            p[t->nan_row * K + K / 3] = 0xFF;
        }
        nsc = ((N + b - 1) / b) * ((K + b - 1) / b);
        t->data = p;
        break;
    }
    case DSV4Q_WF_FP4: {
        uint8_t *p = malloc((size_t)(N * K / 2));
        assert_non_null(p);
        for (long i = 0; i < N * K / 2; i++) p[i] = (uint8_t)mp_rng_u64(r);
        p[0] = 0x80;   /* -0 (nibble 8) next to +0: both decode to zero */
        p[N * K / 4] = 0x08;
        nsc = N * K / 32;
        t->data = p;
        break;
    }
    default:
        fail();
    }
    if (nsc) {
        if (f32scale) {
            float *sc = malloc(sizeof(float) * (size_t)nsc);
            assert_non_null(sc);
            for (long i = 0; i < nsc; i++) sc[i] = (float)mp_rng_unif(r, 1e-4, 3e-3);
            t->scale = sc;
        } else {
            uint8_t *sc = malloc((size_t)nsc);
            assert_non_null(sc);
            /* mostly ordinary exponents, a few extreme (2^-127, 2^100) */
            for (long i = 0; i < nsc; i++)
                sc[i] = mp_rng_int(r, 16) == 0 ? (mp_rng_int(r, 2) ? 0 : mp_e8m0_byte(100))
                                               : mp_e8m0_byte(-12 + mp_rng_int(r, 8));
            t->scale = sc;
        }
    }
    dsv4q_weight w = {"lk", fmt, N, K, t->data, t->scale, f32scale ? DSV4Q_DT_F32 : DSV4Q_DT_F8_E8M0, 0};
    t->w = w;
    t->w.blk = blk;
}

static double tw_scale(const tw *t, long i)
{
    if (t->w.scale_dtype == DSV4Q_DT_F32) return ((const float *)t->scale)[i];
    return mp_pow2i((int)((const uint8_t *)t->scale)[i] - 127);
}

/* Element k of row o as the stored value (binary64; exact at f32 too). */
static double tw_value(const tw *t, long o, long k)
{
    const long K = t->w.in;
    switch (t->w.fmt) {
    case DSV4Q_WF_F32: return ((const float *)t->data)[o * K + k];
    case DSV4Q_WF_F64: return ((const double *)t->data)[o * K + k];
    case DSV4Q_WF_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)t->data)[o * K + k] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case DSV4Q_WF_FP8: return mp_e4m3_value(((const uint8_t *)t->data)[o * K + k]);
    case DSV4Q_WF_FP4: {
        uint8_t b = ((const uint8_t *)t->data)[(o * K + k) / 2];
        return mp_e2m1_value(k & 1 ? b >> 4 : b & 15);
    }
    default: return NAN;
    }
}

#define LK_BODY
#define DSV4Q_BOTH "tests/test_linear_kernels.c"
#include "oracle/both.h"

static void test_kernel_names(void **state)
{
    (void)state;
    const char *def32 = dsv4q_linear_kernel_f32(NULL), *def64 = dsv4q_linear_kernel_f64(NULL);
    assert_non_null(def32);
    assert_non_null(def64);
    assert_string_equal(def32, def64);
    assert_null(dsv4q_linear_kernel_f64("no-such-isa"));
    assert_string_equal(dsv4q_linear_kernel_f64("generic"), "generic");   /* always available */
    assert_string_equal(dsv4q_linear_kernel_f64(def64), def64);
    print_message("default linear kernel: %s\n", def64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_names),
        cmocka_unit_test(test_linear_kernels_f32),
        cmocka_unit_test(test_linear_kernels_f64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* LK_BODY: one width, real = float|double, X(name) = name_f32|name_f64 */

/* rdot's order, spelled out in scalars. */
static real X(ref_dot)(const real *a, const real *b, long n)
{
    real s[8] = {0};
    const long nb = n / 8;
    for (long blk = 0; blk < nb; blk++)
        for (int l = 0; l < 8; l++) s[l] += a[blk * 8 + l] * b[blk * 8 + l];
    real t = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    for (long i = nb * 8; i < n; i++) t += a[i] * b[i];
    return t;
}

/* The linear's arithmetic as the code had it before vectorisation. */
static void X(ref_linear)(uint64_t bs, int ue8m0, const tw *t, const real *x, long s, real *y, int out_b)
{
    const long K = t->w.in, N = t->w.out, B = dsv4q_weight_blk(&t->w), nab = (K + B - 1) / B;
    const dsv4q_wfmt fmt = t->w.fmt;
    const int quant = fmt == DSV4Q_WF_FP8 || fmt == DSV4Q_WF_FP4;
    const int act_q = quant && ((bs >> DSV4Q_B_GEMM_ACT_FP8) & 1u);
    real *xq = malloc(sizeof(real) * (size_t)(s * K)), *xs = malloc(sizeof(real) * (size_t)(s * nab));
    real *wrow = malloc(sizeof(real) * (size_t)K);
    assert_true(xq && xs && wrow);
    for (long i = 0; i < s * K; i++) xq[i] = x[i];
    if (act_q)
        for (long tk = 0; tk < s; tk++)
            X(dsv4q_act_quant_codes)(x + tk * K, K, (int)B, ue8m0, xq + tk * K, xs + tk * nab);
    for (long o = 0; o < N; o++) {
        for (long k = 0; k < K; k++) wrow[k] = (real)tw_value(t, o, k);
        for (long tk = 0; tk < s; tk++) {
            const real *xr = xq + tk * K;
            real acc = 0;
            if (fmt == DSV4Q_WF_FP8) {
                for (long kb = 0; kb < nab; kb++) {
                    long k0 = kb * B, len = K - k0 < B ? K - k0 : B;
                    real d = X(ref_dot)(wrow + k0, xr + k0, len);
                    real sc = (real)tw_scale(t, (o / B) * nab + kb);
                    if (act_q) sc = xs[tk * nab + kb] * sc;
                    acc += d * sc;
                }
            } else if (fmt == DSV4Q_WF_FP4) {
                for (long kb = 0; kb < K / 32; kb++) {
                    real d = X(ref_dot)(wrow + kb * 32, xr + kb * 32, 32), sw = (real)tw_scale(t, o * (K / 32) + kb);
                    acc += act_q ? (d * xs[tk * nab + kb * 32 / B]) * sw : d * sw;
                }
            } else {
                acc = X(ref_dot)(wrow, xr, K);
            }
            if (out_b >= 0 && ((bs >> out_b) & 1u)) acc = (real)dsv4q_bf16_to_f32(dsv4q_bf16_encode((double)acc));
            y[tk * N + o] = acc;
        }
    }
    free(xq);
    free(xs);
    free(wrow);
}

/* One weight against the reference: every kernel, 1 and 2 threads, every
 * token count, both profiles. Returns the number of comparisons. */
static int X(check_weight)(const tw *t, mp_rng *r, unsigned *used)
{
    static const long toks[] = {1, 2, 3, 5, 16}; /* 5: a group of 4 and one token */
    static const char *const kern[] = {"avx512", "avx2", "generic"};
    enum { NK = (int)(sizeof kern / sizeof kern[0]) };
    uint64_t src = 0;
    assert_int_equal(dsv4q_profile_set("source", &src), 0);
    const uint64_t sets[2] = {0, src};
    const long K = t->w.in, N = t->w.out;
    const char *def = X(dsv4q_linear_kernel)(NULL);
    int n = 0;
    real *x = malloc(sizeof(real) * (size_t)(16 * K));
    real *ref = malloc(sizeof(real) * (size_t)(16 * N)), *got = malloc(sizeof(real) * (size_t)(16 * N));
    assert_true(x && ref && got);
    for (long i = 0; i < 16 * K; i++) x[i] = (real)mp_rng_gauss_f32(r, 1.0);
    for (int si = 0; si < 2; si++)
        for (int ti = 0; ti < (int)(sizeof toks / sizeof toks[0]); ti++) {
            const long s = toks[ti];
            const int out_b = si ? DSV4Q_B_LINEAR_BF16 : -1;
            const int ue8m0 = ti % 2 ? 0 : 1;   /* the act-quant scale rule: power of two or exact */
            X(ref_linear)(sets[si], ue8m0, t, x, s, ref, out_b);
            for (int ki = 0; ki < NK; ki++) {
                if (!X(dsv4q_linear_kernel)(kern[ki])) {   /* not on this CPU: say so, never silently */
#if defined(__x86_64__)
                    __builtin_cpu_init();
                    if (!strcmp(kern[ki], "avx512") && __builtin_cpu_supports("avx512f"))
                        fail_msg("the CPU has AVX-512F but the avx512 kernel was refused");
                    if (!strcmp(kern[ki], "avx2") && __builtin_cpu_supports("avx2"))
                        fail_msg("the CPU has AVX2 but the avx2 kernel was refused");
#endif
                    continue;
                }
                *used |= 1u << ki;
                for (int th = 1; th <= 2; th++) {
                    omp_set_num_threads(th);
                    memset(got, 0x5A, sizeof(real) * (size_t)(s * N));
                    assert_int_equal(X(dsv4q_linear)(sets[si], ue8m0, &t->w, x, s, got, out_b), 0);
                    for (long tk = 0; tk < s; tk++)
                        for (long o = 0; o < N; o++) {
                            real a = ref[tk * N + o], b = got[tk * N + o];
                            int same = o == t->nan_row ? isnan(a) && isnan(b) : !memcmp(&a, &b, sizeof a);
                            if (!same) {
                                print_error("fmt %d [%ld,%ld] s=%ld set %d kernel %s threads %d: y[%ld][%ld] %a vs ref %a\n",
                                            (int)t->w.fmt, N, K, s, si, kern[ki], th, tk, o, (double)b, (double)a);
                                fail();
                            }
                        }
                    n++;
                }
            }
        }
    assert_non_null(X(dsv4q_linear_kernel)(def));   /* restore the default */
    omp_set_num_threads(2);
    free(x);
    free(ref);
    free(got);
    return n;
}

static void X(test_linear_kernels)(void **state)
{
    (void)state;
    static const struct {
        dsv4q_wfmt fmt;
        long N, K;
        int f32scale, nan, blk;
    } cases
        [] =
            {
                {DSV4Q_WF_FP8, 200, 300, 0, 0, 128}, /* K: 2 full blocks + 44 (5 lanes-blocks + 4 tail) */
                {DSV4Q_WF_FP8, 130, 5, 0, 0, 128},   /* K < 8: tail only */
                {DSV4Q_WF_FP8, 64, 1024, 1, 0, 128}, /* F32 block scales */
                {DSV4Q_WF_FP8, 40, 256, 0, 1, 128},  /* a NaN code (0xFF) in one row */
                {DSV4Q_WF_FP4, 100, 96, 0, 0, 128},
                {DSV4Q_WF_FP4, 40, 512, 0, 0, 128},
                {DSV4Q_WF_BF16, 50, 37, 0, 0, 128},
                {DSV4Q_WF_BF16, 33, 256, 0, 0, 128},
                {DSV4Q_WF_F32, 50, 37, 0, 0, 128},
                {DSV4Q_WF_F64, 33, 259, 0, 0, 128},
                {DSV4Q_WF_FP8, 70, 100, 0, 0, 32}, /* V4.1: 32-blocks, K = 3 blocks + 4 */
                {DSV4Q_WF_FP8, 33, 96, 1, 1, 32},
                {DSV4Q_WF_FP4, 40, 256, 0, 0, 32}, /* one activation scale per weight block */
            };
    mp_rng r;
    mp_rng_seed(&r, "linear_kernels_" R_NAME);
    int n = 0;
    unsigned used = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tw t;
        tw_make(&t, &r, cases[c].fmt, cases[c].N, cases[c].K, cases[c].f32scale, cases[c].nan, cases[c].blk);
        n += X(check_weight)(&t, &r, &used);
        tw_free(&t);
    }
    print_message("%s: %d linear runs bit-identical to the reference; kernels compared:%s%s%s\n", R_NAME, n,
                  used & 1u ? " avx512" : "", used & 2u ? " avx2" : "", used & 4u ? " generic" : "");
    assert_true(used & 4u); /* the baseline kernel runs everywhere */
}

#endif
