/*
 * index41.c - the V4.1 two-level top-k: the candidate source's block
 * selection and every index source's position picks.
 *
 * Mirrors V4.1 model.py:select_candidate_blocks and the end of
 * Indexer.forward; the contract is in oracle/ops41.inc. Comparisons only:
 * nothing here rounds, so both widths choose the same sets from the same
 * scores.
 *
 * Invariants:
 *  T1. The block holding a row's newest reachable position is always kept
 *      (it is partly filled and would lose to full older blocks).
 *  T2. A kept block never has score -inf: fewer reachable blocks than topb
 *      leave -1s, not unreachable blocks.
 *  T3. Picks come out ascending by position, the -1s last (the reference's
 *      sort, then its `idxs < compress_lens` mask on the largest ones).
 */
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/ops41.h"

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int X(dsv4q_candidate_blocks)(const real *score, long rows, long T, const long *clen, int topb, int B, int32_t *blocks,
                              uint8_t *mask)
{
    if (B < 1 || topb < 0) return -1;
    const long nb = (T + B - 1) / B;
    real *bsc = malloc(sizeof(real) * (size_t)(nb > 0 ? nb : 1));
    unsigned char *used = malloc((size_t)(nb > 0 ? nb : 1));
    if (!bsc || !used) {
        free(bsc);
        free(used);
        return -1;
    }
    const long keep = topb < nb ? topb : nb;
    for (long r = 0; r < rows; r++) {
        const real *sc = score + r * T;
        for (long b = 0; b < nb; b++) {
            real m = -INFINITY;
            for (long t = b * B; t < (b + 1) * B && t < T; t++)
                if (sc[t] > m) m = sc[t];
            bsc[b] = m;
        }
        /* floor division: clen 0 gives -1, no block (T1) */
        const long last = clen[r] > 0 ? (clen[r] - 1) / B : -1;
        if (last >= 0 && last < nb) bsc[last] = INFINITY;
        memset(used, 0, (size_t)(nb > 0 ? nb : 1));
        int32_t *out = blocks + r * topb;
        long n = 0;
        for (long j = 0; j < keep; j++) {
            long best = -1;
            for (long b = 0; b < nb; b++)
                if (!used[b] && (best < 0 || bsc[b] > bsc[best])) best = b;
            used[best] = 1;
            if (bsc[best] > -INFINITY) out[n++] = (int32_t)best; /* T2 */
        }
        qsort(out, (size_t)n, sizeof *out, cmp_i32);
        for (long j = n; j < topb; j++) out[j] = -1;
        uint8_t *mk = mask + r * T;
        memset(mk, 0, (size_t)T);
        for (long j = 0; j < n; j++)
            for (long t = (long)out[j] * B; t < ((long)out[j] + 1) * B && t < T; t++) mk[t] = 1;
    }
    free(bsc);
    free(used);
    return 0;
}

int X(dsv4q_topk41)(const real *score, long rows, long T, int k, const long *clen, int32_t *out)
{
    if (k <= 0) return 0;
    if (X(dsv4q_topk)(score, rows, T, k, out)) return -1; /* k largest finite, ties to the lower index */
    for (long r = 0; r < rows; r++) {
        int32_t *o = out + r * k;
        int n = 0;
        for (int j = 0; j < k; j++)
            if (o[j] >= 0 && o[j] < clen[r]) o[n++] = o[j];
        qsort(o, (size_t)n, sizeof *o, cmp_i32); /* T3 */
        for (int j = n; j < k; j++) o[j] = -1;
    }
    return 0;
}
