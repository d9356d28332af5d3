/*
 * engram41.c - one V4.1 Engram layer: table lookup, wkv, per-copy gate,
 * injection into the hyper-connection stream (model.py Engram.forward,
 * ParallelEngramEmbedding.forward; the contract is in oracle/ops41.inc).
 *
 * Owns the arithmetic between the hash ids (oracle/engram_hash.c) and the
 * updated stream. What the reference rounds and where it sits here:
 *  - table rows: E4M3 code * E8M0 scale per 32, cast to BF16: exact (a
 *    3-bit mantissa times a power of two), so no boundary;
 *  - kv = wkv(e): an FP8 linear with V4.1's blocks (dsv4q_linear on a weight of blk 32: the
 *    act_quant per 32 is gemm_act_fp8), stored BF16 (linear_bf16);
 *  - the gate math in FP32 (.float() on h, key, the weights): at the
 *    working width here, as the oracle does for every FP32 internal;
 *  - the result cast back to the stream's dtype (resid_bf16).
 * Reduction orders are fixed: rsumsq / rdot's lanes for the means and the
 * dot, the products formed as (h * w) * key as the source writes them.
 */
#include <stdlib.h>
#include <math.h>
#include "base/unaligned.h"
#include "oracle/real.h"
#include "oracle/ops41.h"
#include "oracle/ops.h"

int X(dsv4q_engram41)(uint64_t bs, int ue8m0, const dsv4q_engram_w *w, const int64_t *ids,
                      const uint8_t *text_mask, real *h, long s, double eps)
{
    const int hc = w->hc, dim = w->dim, hd = w->head_dim, C = w->ncols;
    const long K = (long)C * hd, N = (long)dim * (hc + 1);
    real *e = malloc(sizeof(real) * (size_t)(s * K > 0 ? s * K : 1));
    real *kv = malloc(sizeof(real) * (size_t)(s * N > 0 ? s * N : 1));
    real *wt = malloc(sizeof(real) * (size_t)hc * (size_t)dim);
    real *prod = malloc(sizeof(real) * (size_t)dim);
    if (!e || !kv || !wt || !prod) {
        free(e), free(kv), free(wt), free(prod);
        return -1;
    }
    /* the table lookup */
    for (long t = 0; t < s; t++)
        for (int c = 0; c < C; c++) {
            real *row = e + t * K + (long)c * hd;
            const int64_t id = ids[t * C + c];
            if (id < 0 || id >= w->rows) {   /* the sharded lookup's mask: a zero row */
                for (int k = 0; k < hd; k++) row[k] = 0;
                continue;
            }
            for (int k = 0; k < hd; k++)
                row[k] = (real)(dsv4q_e4m3_decode(w->table[id * hd + k]) *
                                dsv4q_e8m0_decode(w->table_scale[id * (hd / 32) + k / 32]));
        }
    if (X(dsv4q_linear)(bs, ue8m0, &w->wkv, e, s, kv, DSV4Q_B_LINEAR_BF16) != 0) {
        free(e), free(kv), free(wt), free(prod);
        return -1;
    }
    /* q_weight * k_weight: "only ever used as a product" */
    for (long i = 0; i < (long)hc * dim; i++)
        wt[i] = (real)(dsv4q_weight_at(&w->q_weight, i / dim, i % dim) * dsv4q_weight_at(&w->k_weight, i / dim, i % dim));
    const real inv_sqrt_dim = (real)(1.0 / sqrt((double)dim));   /* dim**-0.5, a Python float */
    for (long t = 0; t < s; t++) {
        const real *key = kv + t * N, *value = kv + t * N + (long)hc * dim;
        for (int c = 0; c < hc; c++) {
            real *hv = h + (t * hc + c) * dim;
            const real *kc = key + (long)c * dim, *wc = wt + (long)c * dim;
            const real r = (RC(1) / R_SQRT(rsumsq(hv, dim) / (real)dim + RC(eps))) *
                           (RC(1) / R_SQRT(rsumsq(kc, dim) / (real)dim + RC(eps)));
            for (int d = 0; d < dim; d++) prod[d] = hv[d] * wc[d];
            const real dot = rdot(prod, kc, dim) * r * inv_sqrt_dim;
            real mag = (real)fabs((double)dot);
            if (mag < RC(1e-6)) mag = RC(1e-6);   /* clamp_min(self.clamp_value) */
            const real z = (real)copysign((double)R_SQRT(mag), (double)dot);
            real g = RC(1) / (RC(1) + R_EXP(-z));
            if (text_mask && !text_mask[t]) g = 0;
            for (int d = 0; d < dim; d++) hv[d] = rb(bs, DSV4Q_B_RESID_BF16, hv[d] + g * value[d]);
        }
    }
    free(e), free(kv), free(wt), free(prod);
    return 0;
}
