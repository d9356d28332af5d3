/*
 * hc.c - hyper-connections: hc_pre (with Sinkhorn), hc_post, hc_head.
 *
 * Mirrors model.py:Block.hc_pre / hc_post, ParallelHead.hc_head and
 * kernel.py:hc_split_sinkhorn_kernel. All hc math is FP32 in the source
 * (the working width here); the only boundary is the BF16 storage of the
 * results (resid_bf16).
 *
 *  mixes = (fn X) * rsqrt(mean(X^2) + norm_eps)        X flattened [hc*d]
 *  pre_j  = sigmoid(mixes_j*scale0 + base_j) + hc_eps
 *  post_j = 2*sigmoid(mixes_{hc+j}*scale1 + base_{hc+j})
 *  C[j][k] = mixes_{2hc+j*hc+k}*scale2 + base_{2hc+j*hc+k}
 *  Sinkhorn: C = softmax_row(C) + hc_eps; C /= colsum + hc_eps;
 *            (iters-1) x { C /= rowsum + hc_eps; C /= colsum + hc_eps }
 * Note the two epsilons: the mixes RMS uses norm_eps, Sinkhorn uses hc_eps.
 * hc_post mixes with out_k = post_k*x + sum_j C[j][k] X_j (C's ROW index is
 * the source stream); the transposed reading is a known real-world bug.
 *
 * V4.1 (oracle/ops41.inc): hc_mixes and hc_collapse are the two halves of
 * hc_pre with the same arithmetic, so V4.1's lagged pair reuses V4's steps.
 */
#include <stdlib.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/ops41.h"

static real sigm(real z) { return RC(1) / (RC(1) + R_EXP(-z)); }

void X(dsv4q_hc_sinkhorn)(const real *mixes, int hc, const real *scale, const real *base,
                          double hc_eps, int iters, real *pre, real *post, real *comb)
{
    const real eps = RC(hc_eps);
    for (int j = 0; j < hc; j++) pre[j] = sigm(mixes[j] * scale[0] + base[j]) + eps;
    for (int j = 0; j < hc; j++) post[j] = RC(2) * sigm(mixes[hc + j] * scale[1] + base[hc + j]);
    for (int j = 0; j < hc; j++)
        for (int k = 0; k < hc; k++)
            comb[j * hc + k] = mixes[2 * hc + j * hc + k] * scale[2] + base[2 * hc + j * hc + k];
    for (int j = 0; j < hc; j++) {          /* row softmax + eps */
        real m = comb[j * hc], sum = 0;
        for (int k = 1; k < hc; k++) if (comb[j * hc + k] > m) m = comb[j * hc + k];
        for (int k = 0; k < hc; k++) { comb[j * hc + k] = R_EXP(comb[j * hc + k] - m); sum += comb[j * hc + k]; }
        for (int k = 0; k < hc; k++) comb[j * hc + k] = comb[j * hc + k] / sum + eps;
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int j = 0; j < hc; j++) {
                real rs = 0;
                for (int k = 0; k < hc; k++) rs += comb[j * hc + k];
                for (int k = 0; k < hc; k++) comb[j * hc + k] /= rs + eps;
            }
        for (int k = 0; k < hc; k++) {
            real cs = 0;
            for (int j = 0; j < hc; j++) cs += comb[j * hc + k];
            for (int j = 0; j < hc; j++) comb[j * hc + k] /= cs + eps;
        }
    }
}

/* mixes[s, nmix] = (fn Xs) * rsqrt(mean(Xs^2) + norm_eps) */
static int hc_mixes(uint64_t bs, const real *Xs, long s, long hcd, const dsv4q_weight *fn,
                    double norm_eps, real *mixes)
{
    if (X(dsv4q_linear)(bs, 0, fn, Xs, s, mixes, -1)) return -1;
    for (long t = 0; t < s; t++) {
        real rsq = RC(1) / R_SQRT(rsumsq(Xs + t * hcd, hcd) / (real)hcd + RC(norm_eps));
        for (long m = 0; m < fn->out; m++) mixes[t * fn->out + m] *= rsq;
    }
    return 0;
}

/* y[t] = sum_j pre_j X_j in j order, rounded at resid_bf16. */
static void hc_reduce(uint64_t bs, const real *Xs, long t, int hc, long d, const real *pre, real *y)
{
    for (long i = 0; i < d; i++) {
        real acc = 0;
        for (int j = 0; j < hc; j++) acc += pre[j] * Xs[(t * hc + j) * d + i];
        y[t * d + i] = rb(bs, DSV4Q_B_RESID_BF16, acc);
    }
}

int X(dsv4q_hc_pre)(uint64_t bs, const real *Xs, long s, int hc, long d, const dsv4q_weight *fn,
                    const real *scale, const real *base, double norm_eps, double hc_eps, int iters,
                    real *y, real *post, real *comb)
{
    const int nmix = (2 + hc) * hc;
    real *mixes = malloc(sizeof(real) * (size_t)(s * nmix));
    if (!mixes || hc_mixes(bs, Xs, s, (long)hc * d, fn, norm_eps, mixes)) { free(mixes); return -1; }
    #pragma omp parallel for schedule(static)
    for (long t = 0; t < s; t++) {
        real pre[16];
        X(dsv4q_hc_sinkhorn)(mixes + t * nmix, hc, scale, base, hc_eps, iters, pre, post + t * hc,
                             comb + t * hc * hc);
        hc_reduce(bs, Xs, t, hc, d, pre, y);
    }
    free(mixes);
    return 0;
}

void X(dsv4q_hc_post)(uint64_t bs, const real *x, const real *Xs, const real *post, const real *comb,
                      long s, int hc, long d, real *out)
{
    #pragma omp parallel for schedule(static)
    for (long t = 0; t < s; t++)
        for (int k = 0; k < hc; k++) {
            const real *C = comb + t * hc * hc;
            for (long i = 0; i < d; i++) {
                real mix = 0;
                for (int j = 0; j < hc; j++) mix += C[j * hc + k] * Xs[(t * hc + j) * d + i];
                out[(t * hc + k) * d + i] = rb(bs, DSV4Q_B_RESID_BF16, post[t * hc + k] * x[t * d + i] + mix);
            }
        }
}

int X(dsv4q_hc_head)(uint64_t bs, const real *Xs, long s, int hc, long d, const dsv4q_weight *fn,
                     const real *scale, const real *base, double norm_eps, double hc_eps, real *y)
{
    real *mixes = malloc(sizeof(real) * (size_t)(s * hc));
    if (!mixes || hc_mixes(bs, Xs, s, (long)hc * d, fn, norm_eps, mixes)) { free(mixes); return -1; }
    for (long t = 0; t < s; t++) {
        real pre[16];
        for (int j = 0; j < hc; j++) pre[j] = sigm(mixes[t * hc + j] * scale[0] + base[j]) + RC(hc_eps);
        hc_reduce(bs, Xs, t, hc, d, pre, y);
    }
    free(mixes);
    return 0;
}

int X(dsv4q_hc_mixes)(uint64_t bs, const real *Xs, long s, int hc, long d, const dsv4q_weight *fn, const real *scale,
                      const real *base, double norm_eps, double hc_eps, int iters, real *pre, real *post, real *comb)
{
    const int nmix = (2 + hc) * hc;
    real *mixes = malloc(sizeof(real) * (size_t)(s * nmix > 0 ? s * nmix : 1));
    if (!mixes || hc_mixes(bs, Xs, s, (long)hc * d, fn, norm_eps, mixes)) {
        free(mixes);
        return -1;
    }
#pragma omp parallel for schedule(static)
    for (long t = 0; t < s; t++) {
        real *pt = pre + t * hc, *qt = post + t * hc, *ct = comb + t * hc * hc;
        X(dsv4q_hc_sinkhorn)(mixes + t * nmix, hc, scale, base, hc_eps, iters, pt, qt, ct);
    }
    free(mixes);
    return 0;
}

void X(dsv4q_hc_collapse)(uint64_t bs, const real *Xs, const real *pre, long s, int hc, long d, real *y)
{
#pragma omp parallel for schedule(static)
    for (long t = 0; t < s; t++) hc_reduce(bs, Xs, t, hc, d, pre + t * hc, y);
}
