/*
 * cpuref_gemm.c - cpu-ref's dot product, GEMM for every weight format, and
 * the QAT simulations (FP8 act-quant, FP4 act-quant, Hadamard).
 *
 * Production choices (deliberately not the oracle's):
 *  - dot: two-level FP32 accumulation: per 256-wide chunk 16 lanes (four
 *    4-wide vectors, lane l takes i % 16 == l) folded pairwise
 *    (v0+v1)+(v2+v3) then (l0+l1)+(l2+l3), tail last; chunk sums added in
 *    order into a second accumulator (split-K style promotion);
 *  - weights decoded a row at a time from the stored bytes through lookup
 *    tables (E4M3 256-entry, E2M1 256-entry pair table), never dequantized
 *    as a whole;
 *  - FP8: per blk-wide K block (128 in V4, 32 in V4.1: the weight's scale
 *    grid says which), block dot then (dot * sa) * sw into a second FP32
 *    accumulator, sa per blk; FP4: 32-wide blocks, sa per 128;
 *  - Hadamard: butterflies from the widest stride down (decimation in
 *    frequency), the same matrix as the natural-order Sylvester transform.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/kernels.h"

typedef float v4 __attribute__((vector_size(16)));

static inline v4 ld4(const float *p)
{
    v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One chunk (n <= CHUNK): 16 lanes, folded pairwise, tail last. */
static inline float dot_chunk(const float *a, const float *b, long n)
{
    v4 c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        c0 += ld4(a + i) * ld4(b + i);
        c1 += ld4(a + i + 4) * ld4(b + i + 4);
        c2 += ld4(a + i + 8) * ld4(b + i + 8);
        c3 += ld4(a + i + 12) * ld4(b + i + 12);
    }
    v4 c = (c0 + c1) + (c2 + c3);
    float t = (c[0] + c[1]) + (c[2] + c[3]);
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

/* Two-level FP32 accumulation, as split-K GEMMs promote per K block: each
 * 256-wide chunk is reduced on 16 lanes, the chunk sums are added in
 * order into a second accumulator. */
#define CHUNK 256
float cpuref_dot(const float *a, const float *b, long n)
{
    if (n <= CHUNK) return dot_chunk(a, b, n);
    float acc = 0;
    for (long k0 = 0; k0 < n; k0 += CHUNK) acc += dot_chunk(a + k0, b + k0, n - k0 < CHUNK ? n - k0 : CHUNK);
    return acc;
}

static float scale_at(const cpuref_w *W, long i)
{
    if (W->scale_f32) return ((const float *)W->scale)[i];
    uint8_t e = ((const uint8_t *)W->scale)[i];
    return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
}

/* Row o of W as F32 values; returns a pointer to them (wrow or the data). */
static const float *decode_row(const cpuref_w *W, long o, float *wrow, int mut)
{
    const long K = W->in;
    switch (W->kind) {
    case CPUREF_W_F32:
        return (const float *)W->data + o * K;
    case CPUREF_W_BF16: {
        const uint16_t *p = (const uint16_t *)W->data + o * K;
        for (long k = 0; k < K; k++) wrow[k] = cpuref_bits_f((uint32_t)p[k] << 16);
        return wrow;
    }
    case CPUREF_W_FP8: {
        const uint8_t *p = (const uint8_t *)W->data + o * K;
        for (long k = 0; k < K; k++) wrow[k] = cpuref_e4m3_lut[p[k]];
        return wrow;
    }
    case CPUREF_W_FP4: {
        const uint8_t *p = (const uint8_t *)W->data + o * (K / 2);
        float (*lut)[2] = mut == CPUREF_M_FP4_AS_INT8 ? cpuref_int4_lut : cpuref_e2m1_lut;
        for (long b = 0; b < K / 2; b++) {
            wrow[2 * b] = lut[p[b]][0];
            wrow[2 * b + 1] = lut[p[b]][1];
        }
        return wrow;
    }
    }
    return wrow;
}

/* FP8 act-quant of one token row into codes q [K] and scales sa [ceil(K/bl)], blocks of bl. */
static void quant_row(const float *x, long K, long bl, int ue8m0, int mut, float *q, float *sa)
{
    for (long k0 = 0, kb = 0; k0 < K; k0 += bl, kb++) {
        long len = K - k0 < bl ? K - k0 : bl;
        float amax = 0;
        for (long i = 0; i < len; i++) amax = fmaxf(amax, fabsf(x[k0 + i]));
        float s = cpuref_fp8_scale(amax, ue8m0, mut);
        sa[kb] = s;
        for (long i = 0; i < len; i++) q[k0 + i] = cpuref_e4m3_round(fminf(fmaxf(x[k0 + i] / s, -448.0f), 448.0f));
    }
}

int cpuref_linear(const cpuref_w *W, const float *x, long s, int ue8m0, int bf16_out, float *y, int mut)
{
    cpuref_tables_init();
    /* bl: the FP8 tile and act block (FP4: act blocks of 128); the mutant
     * fp8_blk128 keeps V4's 128 whatever the weight's scale grid is */
    const long bl = W->kind == CPUREF_W_FP8 && W->blk > 0 && mut != CPUREF_M_FP8_BLK128 ? W->blk : 128;
    const long K = W->in, N = W->out, nab = (K + bl - 1) / bl;
    const int quant = W->kind == CPUREF_W_FP8 || W->kind == CPUREF_W_FP4;
    float *xq = NULL, *sa = NULL, *wrow = malloc(sizeof(float) * (size_t)(K ? K : 1));
    if (!wrow) return -1;
    if (quant) {
        xq = malloc(sizeof(float) * (size_t)(s * K + 1));
        sa = malloc(sizeof(float) * (size_t)(s * nab + 1));
        if (!xq || !sa) {
            free(xq); free(sa); free(wrow);
            return -1;
        }
        for (long t = 0; t < s; t++) quant_row(x + t * K, K, bl, ue8m0, mut, xq + t * K, sa + t * nab);
    }
    for (long o = 0; o < N; o++) {
        const float *w = decode_row(W, o, wrow, mut);
        for (long t = 0; t < s; t++) {
            float acc = 0;
            if (W->kind == CPUREF_W_FP8) {
                const float *a = xq + t * K;
                for (long kb = 0; kb < nab; kb++) {
                    long k0 = kb * bl, len = K - k0 < bl ? K - k0 : bl;
                    float bd = cpuref_dot(w + k0, a + k0, len);
                    acc += (bd * sa[t * nab + kb]) * scale_at(W, (o / bl) * W->scale_cols + kb);
                }
            } else if (W->kind == CPUREF_W_FP4) {
                const float *a = xq + t * K;
                for (long kb = 0; kb < K / 32; kb++) {
                    float bd = cpuref_dot(w + kb * 32, a + kb * 32, 32);
                    acc += (bd * sa[t * nab + kb / 4]) * scale_at(W, o * W->scale_cols + kb);
                }
            } else {
                acc = cpuref_dot(w, x + t * K, K);
            }
            y[t * N + o] = bf16_out ? cpuref_bf16(acc) : acc;
        }
    }
    free(xq);
    free(sa);
    free(wrow);
    return 0;
}

void cpuref_act_quant(float *x, long rows, long n, int block, int ue8m0, int mut)
{
    for (long r = 0; r < rows; r++)
        for (long b0 = 0; b0 < n; b0 += block) {
            float *v = x + r * n + b0;
            long len = n - b0 < block ? n - b0 : block;
            float amax = 0;
            for (long i = 0; i < len; i++) amax = fmaxf(amax, fabsf(v[i]));
            float s = cpuref_fp8_scale(amax, ue8m0, mut);
            for (long i = 0; i < len; i++) v[i] = cpuref_e4m3_round(fminf(fmaxf(v[i] / s, -448.0f), 448.0f)) * s;
        }
}

void cpuref_fp4_quant(float *x, long rows, long n)
{
    for (long r = 0; r < rows; r++)
        for (long b0 = 0; b0 < n; b0 += 32) {
            float *v = x + r * n + b0;
            long len = n - b0 < 32 ? n - b0 : 32;
            float amax = 0x1.8p-124f;                       /* 6 * 2^-126 */
            for (long i = 0; i < len; i++) amax = fmaxf(amax, fabsf(v[i]));
            float s = cpuref_pow2_scale(amax, 0x400000u, 2);  /* 6 = 1.5 * 2^2 */
            for (long i = 0; i < len; i++) v[i] = cpuref_e2m1_round(fminf(fmaxf(v[i] / s, -6.0f), 6.0f)) * s;
        }
}

/* V4.1's compressed-KV codec: blocks of 16, the scale amax/6 (amax floored
 * at 6*2^-9 = 0x1.8p-7) rounded onto the E4M3 grid from its bits (the
 * quotient capped at 448 first: the grid's largest finite value), then
 * E2M1 of x/s clamped to +-6. */
void cpuref_kv41_quant(float *x, long rows, long n, int mut)
{
    for (long r = 0; r < rows; r++)
        for (long b0 = 0; b0 < n; b0 += 16) {
            float *v = x + r * n + b0;
            float amax = 0x1.8p-7f;
            for (int i = 0; i < 16; i++) amax = fmaxf(amax, fabsf(v[i]));
            /* kv41_scale_e8m0: V4's FP4 scale rule (the smallest 2^e with 6 * 2^e >= amax) */
            const float s = mut == CPUREF_M_KV41_SCALE_E8M0 ? cpuref_pow2_scale(amax, 0x400000u, 2)
                                                            : cpuref_e4m3_round(fminf(amax / 6.0f, 448.0f));
            for (int i = 0; i < 16; i++) v[i] = cpuref_e2m1_round(fminf(fmaxf(v[i] / s, -6.0f), 6.0f)) * s;
        }
}

void cpuref_hadamard(float *x, long rows, long n)
{
    const float norm = (float)(1.0 / sqrt((double)n));
    for (long r = 0; r < rows; r++) {
        float *v = x + r * n;
        for (long h = n / 2; h >= 1; h /= 2)
            for (long i = 0; i < n; i += 2 * h)
                for (long j = i; j < i + h; j++) {
                    float a = v[j], b = v[j + h];
                    v[j] = a + b;
                    v[j + h] = a - b;
                }
        for (long i = 0; i < n; i++) v[i] = cpuref_bf16(v[i] * norm);
    }
}
