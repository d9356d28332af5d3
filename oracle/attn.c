/*
 * attn.c - sparse attention with an attention sink.
 *
 * Mirrors kernel.py:sparse_attn_kernel: per (query, head), an online softmax
 * over the columns of idx in blocks of 64, in idx order. Per block: scores
 * s_j = (q . k_j) * scale (masked column: -inf), running max m, e_j =
 * exp(s_j - m); the UNROUNDED e_j go to the denominator, a copy rounded to
 * BF16 (boundary attn_p_bf16) multiplies V; the accumulator is rescaled by
 * exp(m_old - m) when the max moves. After the last block the sink adds
 * exp(sink_h - m) to the denominator only. V = K (the whole D-dim row).
 *
 * Engine point kv_f16: the key/value rows are read as F16 (an engine's F16
 * KV cache); the rows are rounded once into a copy before the loop.
 *
 * Documented edge case: a query whose every column is masked has m = -inf
 * and no support. The kernel starts its running max at -1e30 rather than
 * -inf, so its exp(-inf - m) terms are 0 and the row comes out 0 (the
 * sink-only limit: 0 / exp(sink - m)); the oracle returns o = 0. The
 * behaviour switch attn_empty_nan (oracle/boundary.h B4) gives NaN instead,
 * what a naive softmax port computes (0/0), so a capture with NaN rows can
 * be told apart from a wrong mask.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"

#define ATTN_BLOCK 64

static void attend_one(uint64_t bs, const real *q, int D, const real *kv, long N,
                       const int32_t *idx, long ncols, real sink, real scale, real *o,
                       real *acc)
{
    const int pb = (bs >> DSV4Q_B_ATTN_P_BF16) & 1u;
    real m = -INFINITY, l = 0;
    real sc[ATTN_BLOCK], p[ATTN_BLOCK];
    memset(acc, 0, sizeof(real) * (size_t)D);
    for (long b0 = 0; b0 < ncols; b0 += ATTN_BLOCK) {
        long nb = ncols - b0 < ATTN_BLOCK ? ncols - b0 : ATTN_BLOCK;
        real mb = m;
        for (long j = 0; j < nb; j++) {
            int32_t id = idx[b0 + j];
            if (id < 0 || id >= N) { sc[j] = -INFINITY; continue; }
            sc[j] = rdot(q, kv + (long)id * D, D) * scale;
            if (sc[j] > mb) mb = sc[j];
        }
        if (mb == -INFINITY) continue;   /* nothing visible yet: state unchanged */
        real alpha = m == -INFINITY ? RC(0) : R_EXP(m - mb);
        real bsum = 0;
        for (long j = 0; j < nb; j++) {
            real e = sc[j] == -INFINITY ? RC(0) : R_EXP(sc[j] - mb);
            bsum += e;
            p[j] = pb ? rbf16(e) : e;
        }
        l = l * alpha + bsum;
        for (int d = 0; d < D; d++) acc[d] *= alpha;
        for (long j = 0; j < nb; j++) {
            if (p[j] == 0) continue;
            const real *k = kv + (long)idx[b0 + j] * D;
            for (int d = 0; d < D; d++) acc[d] += p[j] * k[d];
        }
        m = mb;
    }
    if (m == -INFINITY) {
        memset(o, 0, sizeof(real) * (size_t)D);
        if ((bs >> DSV4Q_B_ATTN_EMPTY_NAN) & 1u)
            for (int d = 0; d < D; d++) o[d] = (real)NAN;
        return;
    }
    l += R_EXP(sink - m);
    for (int d = 0; d < D; d++) o[d] = rb(bs, DSV4Q_B_ATTN_OUT_BF16, acc[d] / l);
}

int X(dsv4q_sparse_attn)(uint64_t bs, const real *q, long s, int H, int D, const real *kv, long N,
                         const int32_t *idx, long ncols, const real *sink, real scale, real *o)
{
    int rc = 0;
    real *kv16 = NULL;
    if ((bs >> DSV4Q_B_KV_F16) & 1u) {
        kv16 = malloc(sizeof(real) * (size_t)(N * D > 0 ? N * D : 1));
        if (!kv16) return -1;
        for (long i = 0; i < N * D; i++) kv16[i] = rf16(kv[i]);
        kv = kv16;
    }
    #pragma omp parallel
    {
        real *acc = malloc(sizeof(real) * (size_t)D);
        if (!acc) {
            #pragma omp atomic write
            rc = -1;
        }
        #pragma omp for schedule(static)
        for (long qh = 0; qh < s * H; qh++) {
            if (!acc) continue;
            long t = qh / H;
            int h = (int)(qh % H);
            attend_one(bs, q + qh * D, D, kv, N, idx + t * ncols, ncols, sink[h], scale,
                       o + qh * D, acc);
        }
        free(acc);
    }
    free(kv16);
    return rc;
}
