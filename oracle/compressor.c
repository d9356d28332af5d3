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
 *  C1. Any split of a sequence into calls (one prefill, prefill chunks at
 *      any position, one-token decodes) emits the same rows bit for bit and
 *      leaves the same state (tests/test_ops_cases.c checks rows and state);
 *      the reference has the two ends only (start_pos 0, and s = 1).
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
    /* One sequence of rows, block-aligned: [the previous complete block |
     * the partial block the state holds (q0 tokens) | this call's s
     * tokens]. A prefill (fresh state) and a decode step are the two ends
     * of the same walk, so any split of a sequence into calls pools the
     * same candidates in the same order (C1, C2). */
    const long q0 = start_pos % ratio, n = ratio + q0 + s;
    real *kv = malloc(sizeof(real) * (size_t)(n * W));
    real *g = malloc(sizeof(real) * (size_t)(n * W));
    const long at = ratio + q0; /* this call's first row */
    if (!kv || !g || X(dsv4q_linear)(bs, ue8m0, &c->wkv, x, s, kv + at * W, -1) ||
        X(dsv4q_linear)(bs, ue8m0, &c->wgate, x, s, g + at * W, -1)) {
        free(kv);
        free(g);
        return -1;
    }
    const long off = ov ? ratio : 0; /* the state's partial block */
    if (ov) {
        memcpy(kv, st->kv, sizeof(real) * (size_t)(ratio * W));
        memcpy(g, st->score, sizeof(real) * (size_t)(ratio * W));
    }
    memcpy(kv + ratio * W, st->kv + off * W, sizeof(real) * (size_t)(q0 * W));
    memcpy(g + ratio * W, st->score + off * W, sizeof(real) * (size_t)(q0 * W));
    /* gate rows get ape of their position within the block */
    for (long t = 0; t < s; t++)
        for (int j = 0; j < W; j++) g[(at + t) * W + j] += c->ape[((start_pos + t) % ratio) * W + j];
    const long nrows = (q0 + s) / ratio, rem = (q0 + s) % ratio;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nrows; b++) {
        real *row = rows_out + b * Dc;
        const long prev = b * ratio, cur = ratio + b * ratio; /* first rows of the two blocks */
        real ckv[2 * 128], cg[2 * 128];
        for (int j = 0; j < Dc; j++) {
            int nc = 0;
            if (ov) {
                for (int t = 0; t < ratio; t++, nc++) {
                    ckv[nc] = kv[(prev + t) * W + j];
                    cg[nc] = g[(prev + t) * W + j];
                }
                for (int t = 0; t < ratio; t++, nc++) {
                    ckv[nc] = kv[(cur + t) * W + Dc + j];
                    cg[nc] = g[(cur + t) * W + Dc + j];
                }
            } else {
                for (int t = 0; t < ratio; t++, nc++) {
                    ckv[nc] = kv[(cur + t) * W + j];
                    cg[nc] = g[(cur + t) * W + j];
                }
            }
            row[j] = pool(ckv, cg, nc, 1);
        }
        finish_row(bs, ue8m0, c, row, start_pos - q0 + b * ratio, rope, eps);
    }
    /* the state: the last complete block (overlap), and the block of the
     * last position, complete or not (as the reference's decode buffers:
     * a position's row is written before its block is pooled) */
    const long done = ratio + nrows * ratio;
    if (ov && nrows) {
        memcpy(st->kv, kv + (done - ratio) * W, sizeof(real) * (size_t)(ratio * W));
        memcpy(st->score, g + (done - ratio) * W, sizeof(real) * (size_t)(ratio * W));
    }
    const long last = rem ? done : done - ratio, nlast = rem ? rem : ratio;
    memcpy(st->kv + off * W, kv + last * W, sizeof(real) * (size_t)(nlast * W));
    memcpy(st->score + off * W, g + last * W, sizeof(real) * (size_t)(nlast * W));
    free(kv);
    free(g);
    return nrows;
}
