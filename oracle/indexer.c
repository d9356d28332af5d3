/*
 * indexer.c - lightning-indexer scores and the deterministic top-k.
 *
 * Mirrors model.py:Indexer.forward: score[t] = sum_h relu(q_h . K_t) * w_h.
 * In the source each per-head dot is stored BF16, each product
 * BF16(relu(dot)) * w_h is stored BF16 (idx_partial_bf16), and the sum over
 * heads is one FP32-accumulated reduction rounded once to BF16
 * (idx_score_bf16: this rounding creates exact ties at the top-k cut).
 * Prefill masks rows t >= (i+1)/ratio to -inf.
 *
 * Top-k tie rule (documented, deterministic): order by score descending,
 * equal scores by LOWER row index first. torch.topk leaves the order among
 * equal scores unspecified; the margins command reports how often the cut
 * falls inside such a tie-run. Picks that are masked (-inf) become -1.
 */
#include <stdlib.h>
#include "oracle/real.h"
#include "oracle/ops.h"

void X(dsv4q_indexer_scores)(uint64_t bs, const real *q, const real *w, long s, int Hi, int Di,
                             const real *K, long T, long start_pos, int ratio, real *score)
{
    const int pb = DSV4Q_B_IDX_PARTIAL_BF16;
    #pragma omp parallel for schedule(static)
    for (long it = 0; it < s * T; it++) {
        long i = it / T, t = it % T;
        if (start_pos == 0 && t >= (i + 1) / ratio) {
            score[it] = -INFINITY;
            continue;
        }
        real acc = 0;
        for (int h = 0; h < Hi; h++) {
            real d = rb(bs, pb, rdot(q + (i * Hi + h) * Di, K + t * Di, Di));
            if (d < 0) d = 0;
            acc += rb(bs, pb, d * w[i * Hi + h]);
        }
        acc = rb(bs, DSV4Q_B_IDX_SCORE_BF16, acc);
        /* engine point idx_score_f32: the score kept as binary32 (a no-op at f32) */
        score[it] = ((bs >> DSV4Q_B_IDX_SCORE_F32) & 1u) ? rf32(acc) : acc;
    }
}

typedef struct { real v; int32_t i; } scored;

static int cmp_desc(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->v > y->v) return -1;
    if (x->v < y->v) return 1;
    return (x->i > y->i) - (x->i < y->i);
}

int X(dsv4q_topk)(const real *score, long rows, long T, int k, int32_t *out)
{
    int rc = 0;
    #pragma omp parallel
    {
        scored *buf = malloc(sizeof(scored) * (size_t)(T ? T : 1));
        if (!buf) {
            #pragma omp atomic write
            rc = -1;
        }
        #pragma omp for schedule(static)
        for (long r = 0; r < rows; r++) {
            if (!buf) continue;
            long n = 0;
            for (long t = 0; t < T; t++)
                if (score[r * T + t] != -INFINITY) buf[n++] = (scored){score[r * T + t], (int32_t)t};
            qsort(buf, (size_t)n, sizeof *buf, cmp_desc);
            for (int j = 0; j < k; j++) out[r * k + j] = j < n ? buf[j].i : -1;
        }
        free(buf);
    }
    return rc;
}
