/*
 * cpuref_hc.c - cpu-ref's hyper-connection kernels.
 *
 * hc_pre is one fused pass per token over the hc*d stream values: each
 * 4-wide piece of X is loaded once and feeds the sum of squares and all
 * (2+hc)*hc mixing dots (4 lanes each, folded into FP32 totals every 256
 * values); then the RMS scale, the split into
 * pre / post / comb, Sinkhorn, and the weighted stream reduction (BF16).
 * hc_post: Y_k = BF16(post_k x + sum_j C[j][k] X_j), the stream sum on two
 * partial sums (even / odd j). hc_head: the same fused mixes pass with hc
 * outputs, sigmoid weights + hc_eps, BF16 reduction.
 *
 * hc_pre41 (V4.1): the same per-token mixes, handed out as pre / post /
 * comb, and the stream reduction with the INCOMING pre-mix instead.
 *
 * Mutant hc_post_transposed: hc_post reads C[k][j] (C^T). Mutant
 * premix_not_lagged: hc_pre41 reduces with the pre-mix it just computed.
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

static inline float hsum4(v4 v) { return (v[0] + v[2]) + (v[1] + v[3]); }

static inline float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }

/* mixes [nmix] = (fn Xt) * rsqrt(mean(Xt^2) + eps), one pass over Xt:
 * 4-lane partial sums per 256-wide chunk, folded into FP32 totals per
 * chunk (two-level accumulation). */
#define HC_CHUNK 256
static int fused_mixes(const float *Xt, long hd, const float *fn, int nmix, float eps, float *mixes)
{
    v4 *acc = malloc(sizeof(v4) * (size_t)nmix);
    if (!acc) return -1;
    float ssq = 0;
    for (int m = 0; m < nmix; m++) mixes[m] = 0;
    for (long c0 = 0; c0 < hd; c0 += HC_CHUNK) {
        const long c1 = hd - c0 < HC_CHUNK ? hd : c0 + HC_CHUNK;
        v4 sq = {0};
        for (int m = 0; m < nmix; m++) acc[m] = (v4){0};
        long i = c0;
        for (; i + 4 <= c1; i += 4) {
            v4 xv = ld4(Xt + i);
            sq += xv * xv;
            for (int m = 0; m < nmix; m++) acc[m] += ld4(fn + m * hd + i) * xv;
        }
        float sc = hsum4(sq);
        float part[(2 + 16) * 16];
        for (int m = 0; m < nmix; m++) part[m] = hsum4(acc[m]);
        for (; i < c1; i++) {
            sc += Xt[i] * Xt[i];
            for (int m = 0; m < nmix; m++) part[m] += fn[m * hd + i] * Xt[i];
        }
        ssq += sc;
        for (int m = 0; m < nmix; m++) mixes[m] += part[m];
    }
    const float rs = 1.0f / sqrtf(ssq / (float)hd + eps);
    for (int m = 0; m < nmix; m++) mixes[m] *= rs;
    free(acc);
    return 0;
}

/* y [d] = BF16(sum_j w_j Xt_j) */
static void reduce_streams(const float *Xt, int hc, long d, const float *w, float *y)
{
    for (long i = 0; i < d; i++) {
        float e = 0, o = 0;
        for (int j = 0; j + 1 < hc; j += 2) {
            e += w[j] * Xt[j * d + i];
            o += w[j + 1] * Xt[(j + 1) * d + i];
        }
        if (hc & 1) e += w[hc - 1] * Xt[(hc - 1) * d + i];
        y[i] = cpuref_bf16(e + o);
    }
}

/* One token's mixes: pre [hc] (sigmoid + hc_eps), post [hc] (2 sigmoid),
 * C [hc, hc] (row softmax + hc_eps, then iters column / row passes). */
static int token_mixes(const float *Xt, int hc, long d, const float *fn, const float *scale, const float *base,
                       float norm_eps, float hc_eps, int iters, float *pre, float *pt, float *C)
{
    float mixes[(2 + 16) * 16];
    if (fused_mixes(Xt, (long)hc * d, fn, (2 + hc) * hc, norm_eps, mixes)) return -1;
    for (int j = 0; j < hc; j++) {
        pre[j] = sigmoidf(mixes[j] * scale[0] + base[j]) + hc_eps;
        pt[j] = 2.0f * sigmoidf(mixes[hc + j] * scale[1] + base[hc + j]);
    }
    for (int j = 0; j < hc; j++) {
        /* row softmax + eps */
        float *row = C + j * hc, mx = -INFINITY, sum = 0;
        for (int k = 0; k < hc; k++) {
            row[k] = mixes[2 * hc + j * hc + k] * scale[2] + base[2 * hc + j * hc + k];
            mx = fmaxf(mx, row[k]);
        }
        for (int k = 0; k < hc; k++) {
            row[k] = expf(row[k] - mx);
            sum += row[k];
        }
        for (int k = 0; k < hc; k++) row[k] = row[k] / sum + hc_eps;
    }
    for (int it = 0; it < iters; it++) {
        if (it) {
            for (int j = 0; j < hc; j++) {
                float rs = 0;
                for (int k = 0; k < hc; k++) rs += C[j * hc + k];
                rs += hc_eps;
                for (int k = 0; k < hc; k++) C[j * hc + k] /= rs;
            }
        }
        float cs[16] = {0};
        for (int j = 0; j < hc; j++)
            for (int k = 0; k < hc; k++) cs[k] += C[j * hc + k];
        for (int k = 0; k < hc; k++) cs[k] += hc_eps;
        for (int j = 0; j < hc; j++)
            for (int k = 0; k < hc; k++) C[j * hc + k] /= cs[k];
    }
    return 0;
}

int cpuref_hc_pre(const float *X, long s, int hc, long d, const float *fn, const float *scale,
                  const float *base, float norm_eps, float hc_eps, int iters, float *y, float *post,
                  float *comb)
{
    const long hd = (long)hc * d;
    float pre[16];
    if (hc > 16) return -1;
    for (long t = 0; t < s; t++) {
        const float *Xt = X + t * hd;
        if (token_mixes(Xt, hc, d, fn, scale, base, norm_eps, hc_eps, iters, pre, post + t * hc, comb + t * hc * hc))
            return -1;
        reduce_streams(Xt, hc, d, pre, y + t * d);
    }
    return 0;
}

int cpuref_hc_pre41(const float *X, const float *premix, long s, int hc, long d, const float *fn, const float *scale,
                    const float *base, float norm_eps, float hc_eps, int iters, float *y, float *pre, float *post,
                    float *comb, int mut)
{
    const long hd = (long)hc * d;
    if (hc > 16) return -1;
    for (long t = 0; t < s; t++) {
        const float *Xt = X + t * hd;
        float *pt = pre + t * hc;
        if (token_mixes(Xt, hc, d, fn, scale, base, norm_eps, hc_eps, iters, pt, post + t * hc, comb + t * hc * hc))
            return -1;
        /* the lag: collapse with the previous sub-block's pre-mix */
        reduce_streams(Xt, hc, d, mut == CPUREF_M_PREMIX_NOT_LAGGED ? pt : premix + t * hc, y + t * d);
    }
    return 0;
}

void cpuref_hc_post(const float *x, const float *X, const float *post, const float *comb, long s, int hc,
                    long d, float *Y, int mut)
{
    const int tr = mut == CPUREF_M_HC_POST_TRANSPOSED;
    for (long t = 0; t < s; t++) {
        const float *Xt = X + t * hc * d, *xt = x + t * d, *C = comb + t * hc * hc;
        for (int k = 0; k < hc; k++) {
            float w[16];
            for (int j = 0; j < hc; j++) w[j] = tr ? C[k * hc + j] : C[j * hc + k];
            const float pk = post[t * hc + k];
            float *Yk = Y + (t * hc + k) * d;
            for (long i = 0; i < d; i++) {
                float e = 0, o = 0;
                for (int j = 0; j + 1 < hc; j += 2) {
                    e += w[j] * Xt[j * d + i];
                    o += w[j + 1] * Xt[(j + 1) * d + i];
                }
                if (hc & 1) e += w[hc - 1] * Xt[(hc - 1) * d + i];
                Yk[i] = cpuref_bf16(pk * xt[i] + (e + o));
            }
        }
    }
}

int cpuref_hc_head(const float *X, long s, int hc, long d, const float *fn, const float *scale,
                   const float *base, float norm_eps, float hc_eps, float *y)
{
    const long hd = (long)hc * d;
    float mixes[16], pre[16];
    if (hc > 16) return -1;
    for (long t = 0; t < s; t++) {
        const float *Xt = X + t * hd;
        if (fused_mixes(Xt, hd, fn, hc, norm_eps, mixes)) return -1;
        for (int j = 0; j < hc; j++) pre[j] = sigmoidf(mixes[j] * scale[0] + base[j]) + hc_eps;
        reduce_streams(Xt, hc, d, pre, y + t * d);
    }
    return 0;
}
