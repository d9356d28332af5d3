/*
 * compressor.c - gated pooling of `ratio` consecutive tokens into one KV row.
 *
 * Mirrors model.py:Compressor.forward (prefill and incremental decode).
 * FP32 math in the source (wkv, wgate, ape, softmax, pooled sum); the pooled
 * row is then cast to storage (cmp_bf16), RMS-normed, RoPE'd at the block's
 * FIRST position, and either act_quant'ed on its nope dims (attention rows,
 * ckv_fp8) or Hadamard-rotated and FP4-quantized (indexer rows, idx_k_fp4).
 *
 * State (per sequence), as in the reference buffers kv_state/score_state:
 *   rows [0, ratio)           previous complete block (overlap only)
 *   rows [off, off + ratio)   current partial block; off = ratio if overlap
 * each row 2*Dc wide with overlap (prev half | cur half), else Dc. Gate rows
 * already include ape. A fresh state is kv 0 / gate -inf (absent: masked,
 * never averaged in).
 *
 * Invariants:
 *  C1. Prefill of s tokens leaves exactly the state that s one-token decode
 *      calls would leave (tests/test_ops_cases.c checks rows and state).
 *  C2. Candidates are pooled in the reference order: previous block's
 *      positions first, then the current block's, position ascending.
 */
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"

int X(dsv4q_cmp_state_init)(X(dsv4q_cmp_state) *st, int ratio, int Dc)
{
    st->ratio = ratio;
    st->overlap = ratio == 4;
    st->Dc = Dc;
    int coff = st->overlap ? 2 : 1;
    long n = (long)coff * ratio * coff * Dc;
    st->kv = malloc(sizeof(real) * (size_t)n);
    st->score = malloc(sizeof(real) * (size_t)n);
    if (!st->kv || !st->score) {
        free(st->kv);
        free(st->score);
        st->kv = st->score = NULL;
        return -1;
    }
    for (long i = 0; i < n; i++) {
        st->kv[i] = 0;
        st->score[i] = -INFINITY;
    }
    return 0;
}

void X(dsv4q_cmp_state_free)(X(dsv4q_cmp_state) *st)
{
    free(st->kv);
    free(st->score);
    st->kv = st->score = NULL;
}

/* Pool n candidates of dim j: softmax over g, weighted sum of kv. */
static real pool(const real *kv, const real *g, int n, long stride)
{
    real m = -INFINITY;
    for (int t = 0; t < n; t++)
        if (g[t * stride] > m) m = g[t * stride];
    real e[2 * 128], sum = 0;
    for (int t = 0; t < n; t++) {
        e[t] = g[t * stride] == -INFINITY ? RC(0) : R_EXP(g[t * stride] - m);
        sum += e[t];
    }
    real acc = 0;
    for (int t = 0; t < n; t++) acc += kv[t * stride] * (e[t] / sum);
    return acc;
}

/* Post-process one pooled row in place: storage cast, norm, RoPE, QAT. */
static void finish_row(uint64_t bs, int ue8m0, const X(dsv4q_cmp) *c, real *row, long pos,
                       const X(dsv4q_rope_table) *rope, double eps)
{
    const int Dc = c->Dc, r = rope->half * 2;
    rb_arr(bs, DSV4Q_B_CMP_BF16, row, Dc);
    X(dsv4q_rmsnorm)(bs, row, 1, Dc, c->norm, eps, row);
    X(dsv4q_rope_apply)(bs, rope, row, 1, Dc, Dc - r, pos, 1, 0);
    if (c->rotate) {
        if (dsv4q_idx_hadamard_on(bs)) X(dsv4q_hadamard)(bs, row, 1, Dc);
        if ((bs >> DSV4Q_B_IDX_K_FP4) & 1u) X(dsv4q_fp4_act_quant)(row, 1, Dc);
    } else if ((bs >> DSV4Q_B_CKV_FP8) & 1u) {
        X(dsv4q_act_quant)(row, 1, Dc - r, 64, ue8m0);
    }
}

long X(dsv4q_compressor)(uint64_t bs, int ue8m0, const X(dsv4q_cmp) *c, X(dsv4q_cmp_state) *st,
                         const real *x, long s, long start_pos, const X(dsv4q_rope_table) *rope,
                         double eps, real *rows_out)
{
    const int ratio = c->ratio, Dc = c->Dc, ov = ratio == 4;
    const int W = (ov ? 2 : 1) * Dc;                   /* projection width */
    real *kv = malloc(sizeof(real) * (size_t)(s * W));
    real *g = malloc(sizeof(real) * (size_t)(s * W));
    long nrows = 0;
    if (!kv || !g || X(dsv4q_linear)(bs, ue8m0, &c->wkv, x, s, kv, -1) ||
        X(dsv4q_linear)(bs, ue8m0, &c->wgate, x, s, g, -1)) {
        free(kv);
        free(g);
        return -1;
    }
    if (start_pos == 0) {
        long cutoff = s - s % ratio, rem = s % ratio, off = ov ? ratio : 0;
        /* gate rows get ape of their position within the block */
        for (long t = 0; t < s; t++)
            for (int j = 0; j < W; j++) g[t * W + j] += c->ape[(t % ratio) * W + j];
        if (ov && cutoff >= ratio) {
            memcpy(st->kv, kv + (cutoff - ratio) * W, sizeof(real) * (size_t)(ratio * W));
            memcpy(st->score, g + (cutoff - ratio) * W, sizeof(real) * (size_t)(ratio * W));
        }
        if (rem) {
            memcpy(st->kv + off * W, kv + cutoff * W, sizeof(real) * (size_t)(rem * W));
            memcpy(st->score + off * W, g + cutoff * W, sizeof(real) * (size_t)(rem * W));
        }
        nrows = cutoff / ratio;
        #pragma omp parallel for schedule(static)
        for (long b = 0; b < nrows; b++) {
            real *row = rows_out + b * Dc;
            real ckv[2 * 128], cg[2 * 128];
            for (int j = 0; j < Dc; j++) {
                int n = 0;
                if (ov) {
                    for (int t = 0; t < ratio; t++, n++) {
                        if (b > 0) {
                            ckv[n] = kv[((b - 1) * ratio + t) * W + j];
                            cg[n] = g[((b - 1) * ratio + t) * W + j];
                        } else {
                            ckv[n] = 0;
                            cg[n] = -INFINITY;
                        }
                    }
                    for (int t = 0; t < ratio; t++, n++) {
                        ckv[n] = kv[(b * ratio + t) * W + Dc + j];
                        cg[n] = g[(b * ratio + t) * W + Dc + j];
                    }
                } else {
                    for (int t = 0; t < ratio; t++, n++) {
                        ckv[n] = kv[(b * ratio + t) * W + j];
                        cg[n] = g[(b * ratio + t) * W + j];
                    }
                }
                row[j] = pool(ckv, cg, n, 1);
            }
            finish_row(bs, ue8m0, c, row, b * ratio, rope, eps);
        }
    } else {
        long slot = start_pos % ratio;
        for (int j = 0; j < W; j++) g[j] += c->ape[slot * W + j];
        long at = (ov ? ratio : 0) + slot;
        memcpy(st->kv + at * W, kv, sizeof(real) * (size_t)W);
        memcpy(st->score + at * W, g, sizeof(real) * (size_t)W);
        if ((start_pos + 1) % ratio == 0) {
            real ckv[2 * 128], cg[2 * 128];
            for (int j = 0; j < Dc; j++) {
                int n = 0;
                if (ov) {
                    for (int t = 0; t < ratio; t++, n++) {
                        ckv[n] = st->kv[t * W + j];
                        cg[n] = st->score[t * W + j];
                    }
                    for (int t = 0; t < ratio; t++, n++) {
                        ckv[n] = st->kv[(ratio + t) * W + Dc + j];
                        cg[n] = st->score[(ratio + t) * W + Dc + j];
                    }
                } else {
                    for (int t = 0; t < ratio; t++, n++) {
                        ckv[n] = st->kv[t * W + j];
                        cg[n] = st->score[t * W + j];
                    }
                }
                rows_out[j] = pool(ckv, cg, n, 1);
            }
            if (ov) {   /* the whole current block becomes the previous one */
                memcpy(st->kv, st->kv + ratio * W, sizeof(real) * (size_t)(ratio * W));
                memcpy(st->score, st->score + ratio * W, sizeof(real) * (size_t)(ratio * W));
            }
            finish_row(bs, ue8m0, c, rows_out, start_pos + 1 - ratio, rope, eps);
            nrows = 1;
        }
    }
    free(kv);
    free(g);
    return nrows;
}
