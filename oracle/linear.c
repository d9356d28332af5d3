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
 * Speed without new bits: every dot is rdot's 8-lane order, with the 8
 * lanes in register-sized vectors (lanes.h; the row code is
 * linear_row.inc, instantiated per representation). One token (decode)
 * loads FP8/FP4 codes through the decode tables, and F32 weights, straight
 * into the lanes, no row buffer; two or more tokens decode the row once
 * into `wrow` and share each load of it among 4 tokens (2 for lquad). The
 * row kernel is compiled for AVX-512, AVX2 and the baseline ISA, picked
 * from the CPU at first use (or by DSV4Q_KERNEL): all give identical bits
 * (tests/test_linear_kernels.c compares them with a plain reference); only
 * the registers differ.
 */
#include "base/unaligned.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/lanes.h"
#include "oracle/ops.h"

/* Decode tables at the working width, built from the oracle's own decoders
 * (identical by construction: every E8M0 / E4M3 / E2M1 value is exact in
 * binary32 too, E8M0's 2^-127 as a subnormal): the FP4 rows decode K/32
 * scales each, a libm ldexp per scale cost as much as the row's dot; and at
 * f32 a double table cost one conversion per weight code. */
static double k_e8m0[256];
static real k_e4m3[256], k_e2m1p[512]; /* dsv4q_e4m3_table, dsv4q_e2m1_pair_table */
static pthread_once_t k_tables_once = PTHREAD_ONCE_INIT;
static void build_tables(void)
{
    const double *t8 = dsv4q_e4m3_table(), *t4 = dsv4q_e2m1_pair_table();
    for (int c = 0; c < 256; c++) k_e8m0[c] = dsv4q_e8m0_decode((uint8_t)c);
    for (int c = 0; c < 256; c++) k_e4m3[c] = (real)t8[c];
    for (int c = 0; c < 512; c++) k_e2m1p[c] = (real)t4[c];
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
    const real *t8, *t4; /* k_e4m3, k_e2m1p */
} lin_args;

static inline __attribute__((always_inline)) real w_scale(const dsv4q_weight *w, int64_t i)
{
    if (w->scale_dtype == DSV4Q_DT_F32) return (real)dsv4q_ld_f32(w->scale, i);
    return (real)k_e8m0[((const uint8_t *)w->scale)[i]];
}

/* The row body per lane representation (lanes.h): lvec, lpair and (f64)
 * lquad; which kernel uses which is ROW_NARROW / ROW_WIDE below. The .inc
 * #undefs its parameters. */
#define LT lvec
#define LN(op) lv_##op
#define LR(name) name##_v
#define LPERM 1
#define LGROUP 4
#include "oracle/linear_row.inc"
#define LT lpair
#define LN(op) lp_##op
#define LR(name) name##_p
#define LPERM 0
#define LGROUP 4
#include "oracle/linear_row.inc"
#if DSV4Q_WIDTH == 64
#define LT lquad
#define LN(op) lq_##op
#define LR(name) name##_q
#define LPERM 0
#define LGROUP 2
#include "oracle/linear_row.inc"
#define ROW_NARROW row_body_q /* 2 doubles per SSE2 / NEON register */
#define ROW_WIDE row_body_p   /* 4 doubles per ymm */
/* FP4 decode on AVX2 at f64: table loads; the binary32 permute's widening
 * shuffles measured slower there (0.87x against 1.40x dgemv) */
#define ROW_FP4_AVX2 row_body_q
#define FP4_AVX2_PERM 0
#define FP4_AVX512_PERM 1 /* vpermt2pd over the 16 values in two zmm */
#else
#define ROW_NARROW row_body_p   /* 4 floats per SSE2 / NEON register */
#define ROW_WIDE row_body_v     /* 8 floats per ymm */
#define ROW_FP4_AVX2 row_body_v /* binary32 permute, no widening (e2m1_permf) */
#define FP4_AVX2_PERM 2
#define FP4_AVX512_PERM 2 /* vpermps: AVX-512F has no 256-bit vpermt2ps (that is AVX512VL) */
#endif

/* The row kernel per ISA: the same body, compiled with wider registers.
 * target() only changes what the lanes lower to (no FMA: -ffp-contract=off
 * and no "fma" target). One token (decode) is bound by the table loads of
 * the codes: register-sized pieces, filled two codes at a time, measured
 * faster there than wider vectors (docs/bench.md), which win once a decoded
 * row is shared by tokens; FP4 on AVX-512 decodes by permute (e2m1_perm8). */
typedef void (*row_fn)(const lin_args *, int64_t, real *, real *);
static void row_generic(const lin_args *a, int64_t o, real *wrow, real *srow) { ROW_NARROW(a, o, wrow, srow, 0); }
#if defined(__x86_64__) && defined(__GNUC__)
#define LINEAR_X86 1
__attribute__((target("avx2"))) static void row_avx2(const lin_args *a, int64_t o, real *wrow, real *srow)
{
    if (a->s == 1 && a->W->fmt == DSV4Q_WF_FP4) ROW_FP4_AVX2(a, o, wrow, srow, FP4_AVX2_PERM);
    else if (a->s == 1) ROW_NARROW(a, o, wrow, srow, 0);
    else ROW_WIDE(a, o, wrow, srow, 0);
}
__attribute__((target("avx512f"))) static void row_avx512(const lin_args *a, int64_t o, real *wrow, real *srow)
{
    if (a->s == 1 && a->W->fmt != DSV4Q_WF_FP4) ROW_NARROW(a, o, wrow, srow, 0);
    else row_body_v(a, o, wrow, srow, FP4_AVX512_PERM);
}
#endif

static const struct {
    const char *name;
    row_fn fn;
} k_kernels[] = {
#ifdef LINEAR_X86
    {"avx512", row_avx512},
    {"avx2", row_avx2},
#endif
#if defined(__aarch64__)
    {"neon", row_generic}, /* the same function: baseline aarch64 has Advanced SIMD */
#endif
    {"generic", row_generic},
};
enum { NKERN = (int)(sizeof k_kernels / sizeof k_kernels[0]) };

static int kernel_ok(int i)
{
#ifdef LINEAR_X86
    __builtin_cpu_init();   /* libgcc's CPUID + XGETBV (OS state) check */
    if (!strcmp(k_kernels[i].name, "avx512")) return __builtin_cpu_supports("avx512f");
    if (!strcmp(k_kernels[i].name, "avx2")) return __builtin_cpu_supports("avx2");
#endif
#if defined(__aarch64__)
    if (!strcmp(k_kernels[i].name, "neon")) return 1;
#endif
    return i == NKERN - 1;
}

static int g_kernel = -1;   /* index into k_kernels; atomics: set once, read by every call */
static pthread_once_t g_kernel_once = PTHREAD_ONCE_INIT;
static int kernel_index(const char *name)
{
    for (int i = 0; i < NKERN; i++)
        if (!strcmp(name, k_kernels[i].name)) return i;
    return -1;
}
/* The first (widest) kernel the CPU runs (generic always does), unless
 * DSV4Q_KERNEL names another it runs. A name it cannot run is reported
 * once on stderr and ignored: the CLI refuses it before any work
 * (cli/cmdtab.c), a library user still gets correct bits. */
static void pick_kernel(void)
{
    int i = 0;
    while (!kernel_ok(i)) i++;
    const char *env = getenv("DSV4Q_KERNEL");
    if (env && *env) {
        const int e = kernel_index(env);
        if (e >= 0 && kernel_ok(e)) i = e;
#if DSV4Q_WIDTH == 64 /* once per process, not once per width */
        else
            fprintf(stderr, "dsv4q: DSV4Q_KERNEL=%s is not a linear kernel this CPU runs; using %s\n", env,
                    k_kernels[i].name);
#endif
    }
    __atomic_store_n(&g_kernel, i, __ATOMIC_RELEASE);
}

const char *X(dsv4q_linear_kernel)(const char *name)
{
    pthread_once(&g_kernel_once, pick_kernel);
    if (name) {
        const int i = kernel_index(name);
        if (i < 0 || !kernel_ok(i)) return NULL;
        __atomic_store_n(&g_kernel, i, __ATOMIC_RELEASE);
        return k_kernels[i].name;
    }
    return k_kernels[__atomic_load_n(&g_kernel, __ATOMIC_ACQUIRE)].name;
}

const char *X(dsv4q_linear_kernel_at)(int i)
{
    for (int k = 0; k < NKERN; k++)
        if (kernel_ok(k) && i-- == 0) return k_kernels[k].name;
    return NULL;
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

    pthread_once(&k_tables_once, build_tables);
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
    const lin_args a = {W, act_q ? xq : x, xs, s, y, K, N, blk, nab, act_q, out_b, bs, k_e4m3, k_e2m1p};

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
