/*
 * compressor41.c - the V4.1 compressor of a kv-source layer: ratio 1
 * (projection + norm) and ratio 2 (softmax pooling of disjoint pairs).
 *
 * Mirrors V4.1 model.py:Compressor.forward; the contract is in
 * oracle/ops41.inc. Differences from V4's compressor (compressor.c), each
 * the reference's: no ape, no overlap, ratio 1 keeps the checkpoint's BF16
 * wkv and has no gate, and the latent comes out BEFORE RoPE (Attention
 * rotates and quantizes it after the indexer has made its keys from it).
 *
 * Invariants:
 *  K1. The token at position p sits in state slot p % ratio until its group
 *      completes (the reference's kv_state / score_state: a prefill at 0
 *      leaves its trailing s % ratio tokens in slots 0.., a decode at p
 *      writes slot p % ratio), so any split of a sequence into calls (one
 *      prefill, prefill chunks at any position, one-token decodes) pools
 *      the same groups from the same rows: one walk over [the state's
 *      partial group | this call's tokens] (oracle/model.c M4); the
 *      reference has the two ends only (start_pos 0, and s = 1).
 *  K2. A group pools its positions in ascending order (softmax and sum).
 */
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/ops41.h"

int X(dsv4q_cmp41_init)(X(dsv4q_cmp41) * c)
{
    c->kv = c->score = NULL;
    if (c->ratio < 2) return 0;
    const long n = (long)c->ratio * c->Dc;
    c->kv = malloc(sizeof(real) * (size_t)n);
    c->score = malloc(sizeof(real) * (size_t)n);
    if (!c->kv || !c->score) {
        X(dsv4q_cmp41_free)(c);
        return -1;
    }
    for (long i = 0; i < n; i++) {
        c->kv[i] = 0;
        c->score[i] = -INFINITY;
    }
    return 0;
}

void X(dsv4q_cmp41_free)(X(dsv4q_cmp41) * c)
{
    free(c->kv);
    free(c->score);
    c->kv = c->score = NULL;
}

/* out[j] = sum_t kv[t][j] * softmax_t(g[t][j]) over n rows of stride Dc
 * (torch's softmax: max subtracted, exp, divided by the sum). */
static void pool_group(const real *kv, const real *g, int n, int Dc, real *out)
{
    for (int j = 0; j < Dc; j++) {
        real m = -INFINITY, sum = 0, e[8], acc = 0;
        for (int t = 0; t < n; t++)
            if (g[t * Dc + j] > m) m = g[t * Dc + j];
        for (int t = 0; t < n; t++) {
            e[t] = g[t * Dc + j] == -INFINITY ? RC(0) : R_EXP(g[t * Dc + j] - m);
            sum += e[t];
        }
        for (int t = 0; t < n; t++) acc += kv[t * Dc + j] * (e[t] / sum);
        out[j] = acc;
    }
}

/* The pooled row's storage cast and the compressor's norm, in place. */
static void finish41(uint64_t bs, const X(dsv4q_cmp41) * c, real *row, double eps)
{
    rb_arr(bs, DSV4Q_B_CMP_BF16, row, c->Dc);
    X(dsv4q_rmsnorm)(bs, row, 1, c->Dc, c->norm, eps, row);
}

long X(dsv4q_compressor41)(uint64_t bs, int ue8m0, X(dsv4q_cmp41) * c, const real *x, long s, long start_pos,
                           double eps, real *out)
{
    const int ratio = c->ratio, Dc = c->Dc;
    if (ratio == 1) { /* one token per group: projection + norm, BF16 as stored */
        if (X(dsv4q_linear)(bs, ue8m0, &c->wkv, x, s, out, DSV4Q_B_LINEAR_BF16)) return -1;
        X(dsv4q_rmsnorm)(bs, out, s, Dc, c->norm, eps, out);
        return s;
    }
    if (ratio > 8 || !c->kv) return -1; /* pool_group's buffer; an uninitialised state */
    /* one walk (K1): rows [the q0 tokens of the partial group in the state | this call's s] */
    const long q0 = start_pos % ratio, n_all = q0 + s;
    real *kv = malloc(sizeof(real) * (size_t)(n_all * Dc > 0 ? n_all * Dc : 1));
    real *g = malloc(sizeof(real) * (size_t)(n_all * Dc > 0 ? n_all * Dc : 1));
    long n = -1;
    if (!kv || !g || X(dsv4q_linear)(bs, ue8m0, &c->wkv, x, s, kv + q0 * Dc, -1) ||
        X(dsv4q_linear)(bs, ue8m0, &c->wgate, x, s, g + q0 * Dc, -1))
        goto out;
    memcpy(kv, c->kv, sizeof(real) * (size_t)(q0 * Dc));
    memcpy(g, c->score, sizeof(real) * (size_t)(q0 * Dc));
    n = n_all / ratio;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < n; b++) {
        pool_group(kv + b * ratio * Dc, g + b * ratio * Dc, ratio, Dc, out + b * Dc);
        finish41(bs, c, out + b * Dc, eps);
    }
    /* the state: the group of the last position, complete or not, in slots 0.. */
    const long rem = n_all % ratio, last = rem ? n * ratio : (n - 1) * ratio, nlast = rem ? rem : ratio;
    if (n_all > 0) {
        memcpy(c->kv, kv + last * Dc, sizeof(real) * (size_t)(nlast * Dc));
        memcpy(c->score, g + last * Dc, sizeof(real) * (size_t)(nlast * Dc));
    }
out:
    free(kv);
    free(g);
    return n;
}
