/*
 * linear.c - y = W x for every weight format, with the reference's block
 * accumulation structure.
 *
 * Mirrors model.py:linear and kernel.py fp8_gemm_kernel / fp4_gemm_kernel:
 *  - BF16 / F32 / F64 weights: one dot over K (FP32 accumulation in the
 *    source; here the working width in the fixed rdot order).
 *  - FP8 weights: the activation is act_quant'ed per b (the weight's FP8
 *    block, dsv4q_weight_blk: 128 in V4, 32 in V4.1; boundary
 *    gemm_act_fp8); per b-wide K block the block dot (exact at the working
 *    width, the tensor core's in-block order is unspecified) is scaled by
 *    sa[kb]*sw[n/b][kb] and added to a second accumulator, in kb order.
 *  - FP4 weights: the same with 32-wide blocks, scale sa[kb*32/b] * sw[n][kb]
 *    (one activation scale per b/32 weight blocks: kb/4 in V4).
 * The output is rounded at boundary `out_b` (-1: no rounding, the FP32-math
 * linears). OpenMP splits output rows only, so each y element has one fixed
 * order.
 *
 * Speed without new bits: every dot is rdot's 8-lane order with the 8
 * lanes in one vector (ldot, lanes.h). One token (decode) loads FP8/FP4
 * codes through the decode tables straight into the lanes, no row buffer;
 * two or more tokens decode the row once into `wrow` and share it between
 * token pairs. The row kernel is compiled for AVX-512 and for baseline
 * x86-64 (once elsewhere) and picked from the CPU at first use: both give
 * identical bits (tests/test_linear_kernels.c compares them with a plain
 * reference); only the registers differ.
 */
#include "base/unaligned.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/lanes.h"
#include "oracle/ops.h"

/* E8M0 scale values, built from dsv4q_e8m0_decode itself (identical by
 * construction): the FP4 rows decode K/32 scales each, a libm ldexp per
 * scale cost as much as the row's dot. */
static double k_e8m0[256];
static pthread_once_t k_e8m0_once = PTHREAD_ONCE_INIT;
static void build_e8m0(void)
{
    for (int c = 0; c < 256; c++) k_e8m0[c] = dsv4q_e8m0_decode((uint8_t)c);
}

/* Everything a row kernel needs; one per call. */
typedef struct lin_args {
    const dsv4q_weight *W;
    const real *xa, *xs;     /* activations (act_quant codes when act_q), their block scales */
    long s;
    real *y;
    int64_t K, N, blk, nab;  /* blk: the FP8 block (128 V4, 32 V4.1); nab: activation blocks of blk */
    int act_q, out_b;
    uint64_t bs;
    const double *t8, *t4;   /* dsv4q_e4m3_table, dsv4q_e2m1_pair_table */
} lin_args;

static inline __attribute__((always_inline)) real w_scale(const dsv4q_weight *w, int64_t i)
{
    if (w->scale_dtype == DSV4Q_DT_F32) return (real)dsv4q_ld_f32(w->scale, i);
    return (real)k_e8m0[((const uint8_t *)w->scale)[i]];
}

/* Decode row o of W into wrow (codes only; block scales are applied by the
 * caller). */
static inline __attribute__((always_inline)) void decode_row(const lin_args *a, int64_t o, real *wrow)
{
    const dsv4q_weight *w = a->W;
    const int64_t K = w->in;
    switch (w->fmt) {
    case DSV4Q_WF_F32: {
        const unsigned char *p = (const unsigned char *)w->data + o * K * 4;
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)dsv4q_ld_f32(p, k);
        break;
    }
    case DSV4Q_WF_F64: {
        const unsigned char *p = (const unsigned char *)w->data + o * K * 8;
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)dsv4q_ld_f64(p, k);
        break;
    }
    case DSV4Q_WF_BF16: {
        const unsigned char *p = (const unsigned char *)w->data + o * K * 2;
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)dsv4q_bf16_to_f32(dsv4q_ld_u16(p, k));
        break;
    }
    case DSV4Q_WF_FP8: {
        const uint8_t *p = (const uint8_t *)w->data + o * K;
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            const lvec v = e4m3_load8(p + k, a->t8);
            memcpy(wrow + k, &v, sizeof v);
        }
        for (; k < K; k++) wrow[k] = (real)a->t8[p[k]];
        break;
    }
    case DSV4Q_WF_FP4: {   /* K is a multiple of 32 (the scale blocks) */
        const uint8_t *p = (const uint8_t *)w->data + o * (K / 2);
        for (int64_t k = 0; k < K; k += 8) {
            const lvec v = e2m1_load8(p + k / 2, a->t4);
            memcpy(wrow + k, &v, sizeof v);
        }
        break;
    }
    default:
        for (int64_t k = 0; k < K; k++) wrow[k] = NAN;
    }
}

/* One token: rdot(decoded FP8 block, x block, len) without the row buffer.
 * Same lanes, same order; the < 8 tail reads the table as before. */
static inline __attribute__((always_inline)) real fp8_block_dot(const uint8_t *c, const real *x, int64_t len,
                                                                const double *t8)
{
    const int64_t nb = len / 8;
    lvec acc = {0};
    for (int64_t b = 0; b < nb; b++) acc += e4m3_load8(c + b * 8, t8) * lv_load(x + b * 8);
    real t = lv_sum(&acc);
    for (int64_t i = nb * 8; i < len; i++) t += (real)t8[c[i]] * x[i];
    return t;
}

/* One token: rdot over a 32-element FP4 block (16 packed bytes). */
static inline __attribute__((always_inline)) real fp4_block_dot(const uint8_t *c, const real *x,
                                                                const double *t4, const e2m1_regs *r4,
                                                                int perm)
{
    lvec acc = {0};
    for (int b = 0; b < 4; b++)
        acc += (perm ? e2m1_perm8(c + 4 * b, r4) : e2m1_load8(c + 4 * b, t4)) * lv_load(x + 8 * b);
    return lv_sum(&acc);
}

/* y[., o] for every token: the whole oracle arithmetic of one output row. */
static inline __attribute__((always_inline)) void row_body(const lin_args *a, int64_t o, real *wrow, real *srow,
                                                           int perm)
{
    const dsv4q_weight *W = a->W;
    const int64_t K = a->K, N = a->N, blk = a->blk, nab = a->nab;
    const int act_q = a->act_q;
    const real *xa = a->xa, *xs = a->xs;
    const long s = a->s;

    /* block scales of this row, decoded once for all tokens */
    if (W->fmt == DSV4Q_WF_FP8)
        for (int64_t kb = 0; kb < nab; kb++) srow[kb] = w_scale(W, (o / blk) * nab + kb);
    else if (W->fmt == DSV4Q_WF_FP4)
        for (int64_t kb = 0; kb < K / 32; kb++) srow[kb] = w_scale(W, o * (K / 32) + kb);

    if (s == 1 && (W->fmt == DSV4Q_WF_FP8 || W->fmt == DSV4Q_WF_FP4)) {
        /* decode: each code is used once, so decode it in the lanes */
        real acc0 = 0;
        if (W->fmt == DSV4Q_WF_FP8) {
            const uint8_t *p = (const uint8_t *)W->data + o * K;
            for (int64_t kb = 0; kb * blk < K; kb++) {
                int64_t k0 = kb * blk, len = K - k0 < blk ? K - k0 : blk;
                real d0 = fp8_block_dot(p + k0, xa + k0, len, a->t8);
                real sc0 = srow[kb];
                if (act_q) sc0 = xs[kb] * sc0;
                acc0 += d0 * sc0;
            }
        } else {
            const uint8_t *p = (const uint8_t *)W->data + o * (K / 2);
            const e2m1_regs r4 = e2m1_regs_of(a->t4);
            for (int64_t kb = 0; kb * 32 < K; kb++) {
                real d0 = fp4_block_dot(p + kb * 16, xa + kb * 32, a->t4, &r4, perm), sw = srow[kb];
                acc0 += act_q ? (d0 * xs[kb * 32 / blk]) * sw : d0 * sw;
            }
        }
        a->y[o] = a->out_b >= 0 ? rb(a->bs, a->out_b, acc0) : acc0;
        return;
    }

    decode_row(a, o, wrow);
    /* tokens in pairs: ldot2 loads the weight row once for both and gives
     * each token exactly rdot's result */
    for (long t = 0; t < s; t += 2) {
        const int two = t + 1 < s;
        const real *x0 = xa + t * K, *x1 = two ? xa + (t + 1) * K : x0;
        real acc0 = 0, acc1 = 0;
        if (W->fmt == DSV4Q_WF_FP8) {
            for (int64_t kb = 0; kb * blk < K; kb++) {
                int64_t k0 = kb * blk, len = K - k0 < blk ? K - k0 : blk;
                real d0, d1 = 0;
                if (two) ldot2(wrow + k0, x0 + k0, x1 + k0, len, &d0, &d1);
                else d0 = ldot(wrow + k0, x0 + k0, len);
                real sc0 = srow[kb], sc1 = srow[kb];
                if (act_q) {
                    sc0 = xs[t * nab + kb] * sc0;
                    if (two) sc1 = xs[(t + 1) * nab + kb] * sc1;
                }
                acc0 += d0 * sc0;
                acc1 += d1 * sc1;
            }
        } else if (W->fmt == DSV4Q_WF_FP4) {
            for (int64_t kb = 0; kb * 32 < K; kb++) {
                int64_t k0 = kb * 32;
                real d0, d1 = 0, sw = srow[kb];
                if (two) ldot2(wrow + k0, x0 + k0, x1 + k0, 32, &d0, &d1);
                else d0 = ldot(wrow + k0, x0 + k0, 32);
                acc0 += act_q ? (d0 * xs[t * nab + kb * 32 / blk]) * sw : d0 * sw;
                if (two) acc1 += act_q ? (d1 * xs[(t + 1) * nab + kb * 32 / blk]) * sw : d1 * sw;
            }
        } else if (two) {
            ldot2(wrow, x0, x1, K, &acc0, &acc1);
        } else {
            acc0 = ldot(wrow, x0, K);
        }
        a->y[t * N + o] = a->out_b >= 0 ? rb(a->bs, a->out_b, acc0) : acc0;
        if (two) a->y[(t + 1) * N + o] = a->out_b >= 0 ? rb(a->bs, a->out_b, acc1) : acc1;
    }
}

/* The row kernel per ISA: the same body, compiled with wider registers.
 * target() only changes what lvec lowers to (no FMA: -ffp-contract=off).
 * No AVX2 kernel: GCC 12 keeps a 64-byte vector on the stack when it has
 * 32-byte but not 64-byte registers, and that kernel measured 3-4x slower
 * than the baseline one, so AVX2-only CPUs run "generic" (SSE2). */
typedef void (*row_fn)(const lin_args *, int64_t, real *, real *);
static void row_generic(const lin_args *a, int64_t o, real *wrow, real *srow) { row_body(a, o, wrow, srow, 0); }
#if defined(__x86_64__) && defined(__GNUC__)
#define LINEAR_X86 1
__attribute__((target("avx512f")))
static void row_avx512(const lin_args *a, int64_t o, real *wrow, real *srow) { row_body(a, o, wrow, srow, 1); }
#endif

static const struct { const char *name; row_fn fn; } k_kernels[] = {
#ifdef LINEAR_X86
    {"avx512", row_avx512},
#endif
    {"generic", row_generic},
};
enum { NKERN = (int)(sizeof k_kernels / sizeof k_kernels[0]) };

static int kernel_ok(int i)
{
#ifdef LINEAR_X86
    __builtin_cpu_init();   /* libgcc's CPUID + XGETBV (OS state) check */
    if (!strcmp(k_kernels[i].name, "avx512")) return __builtin_cpu_supports("avx512f");
#endif
    return i == NKERN - 1;
}

static int g_kernel = -1;   /* index into k_kernels; atomics: set once, read by every call */
static pthread_once_t g_kernel_once = PTHREAD_ONCE_INIT;
static void pick_kernel(void)
{
    int i = 0;
    while (!kernel_ok(i)) i++;   /* the first (widest) the CPU runs; generic always does */
    __atomic_store_n(&g_kernel, i, __ATOMIC_RELEASE);
}

const char *X(dsv4q_linear_kernel)(const char *name)
{
    pthread_once(&g_kernel_once, pick_kernel);
    if (name) {
        for (int i = 0; i < NKERN; i++)
            if (!strcmp(name, k_kernels[i].name)) {
                if (!kernel_ok(i)) return NULL;
                __atomic_store_n(&g_kernel, i, __ATOMIC_RELEASE);
                return k_kernels[i].name;
            }
        return NULL;
    }
    return k_kernels[__atomic_load_n(&g_kernel, __ATOMIC_ACQUIRE)].name;
}

int X(dsv4q_linear)(uint64_t bs, int ue8m0, const dsv4q_weight *W, const real *x, long s,
                    real *y, int out_b)
{
    const int64_t K = W->in, N = W->out;
    const int quant = W->fmt == DSV4Q_WF_FP8 || W->fmt == DSV4Q_WF_FP4;
    /* an engine activation quantizer replaces gemm_act_fp8 even when a
     * declaration turns both on (qat:act_q8_0,gemm_act_fp8=on), as in
     * harness/qualify's kernel references of engine-stored weights */
    const int act_q = quant && ((bs >> DSV4Q_B_GEMM_ACT_FP8) & 1u) && !dsv4q_engine_act_q_applies(bs, quant);
    const int64_t blk = dsv4q_weight_blk(W), nab = (K + blk - 1) / blk;
    real *xq = NULL, *xs = NULL;
    int rc = 0;

    pthread_once(&k_e8m0_once, build_e8m0);
    pthread_once(&g_kernel_once, pick_kernel);
    const row_fn row = k_kernels[__atomic_load_n(&g_kernel, __ATOMIC_ACQUIRE)].fn;

    if (act_q) {
        xq = malloc(sizeof(real) * (size_t)(s * K));
        xs = malloc(sizeof(real) * (size_t)(s * nab));
        if (!xq || !xs) { free(xq); free(xs); return -1; }
        for (long t = 0; t < s; t++)
            X(dsv4q_act_quant_codes)(x + t * K, K, (int)blk, ue8m0, xq + t * K, xs + t * nab);
    } else if (dsv4q_engine_act_q_applies(bs, quant)) {
        /* engine points act_q8_0 / act_q8_0_rne / act_q8_k (they replace
         * gemm_act_fp8; with act_q_all also on BF16/F32 weights): the input
         * as the engine's Q8 blocks decode it, then the plain product */
        xq = malloc(sizeof(real) * (size_t)(s * K > 0 ? s * K : 1));
        if (!xq) return -1;
        memcpy(xq, x, sizeof(real) * (size_t)(s * K));
        for (long t = 0; t < s; t++) X(dsv4q_engine_act_quant)(bs, quant, xq + t * K, K);
        x = xq;
    }
    const lin_args a = {W, act_q ? xq : x, xs, s, y, K, N, blk, nab, act_q, out_b, bs, dsv4q_e4m3_table(),
                        dsv4q_e2m1_pair_table()};

    #pragma omp parallel
    {
        real *wrow = malloc(sizeof(real) * (size_t)K);
        real *srow = malloc(sizeof(real) * (size_t)(K / 32 + 1));
        if (!wrow || !srow) {
            #pragma omp atomic write
            rc = -1;
        }
        #pragma omp for schedule(static)
        for (int64_t o = 0; o < N; o++) {
            if (!wrow || !srow) continue;
            row(&a, o, wrow, srow);
        }
        free(wrow);
        free(srow);
    }
    free(xq);
    free(xs);
    return rc;
}
