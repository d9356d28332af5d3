/*
 * cpuref_attn.c - cpu-ref's sparse attention with sink, shaped like the
 * TileLang kernel: per query token, all heads at once, over the idx columns
 * in blocks of 64. Per block: a score tile S[H][64] (each gathered key row
 * read once for every head), the tile's row max, the running max and
 * rescale factor, e = exp(s - m) whose FP32 row sum goes to the
 * denominator while a BF16 copy multiplies V (= the key row) into an FP32
 * accumulator O[H][D]. After the last block: denominator += exp(sink - m),
 * o = BF16(O / denominator) (one division, not a reciprocal product: the
 * output is rounded to BF16 right after, every extra rounding adds flips). A query with every column masked gets o = 0
 * (the oracle's documented choice; the kernel would produce NaN).
 *
 * Mutant attn_sink_missing: the sink term is not added.
 *
 * Window decode step (WINDOW_ATTN_DECODE): cpu-ref addresses its keys as
 * an engine's KV cache lays them out, [window ring | compressed rows]
 * (columns w.. are compressed rows), in two segments: a snapshot of the
 * ring and the compressed rows where they lie (a paged cache; a copy of a
 * 1M-context compressed cache would be 2 GiB). It writes the new token's
 * row into its ring slot, walks the ring
 * from the slot after the newest (the oldest position) round to the newest,
 * and runs the same kernel. Mutant window_off_by_one: the engine builds the
 * key buffer (a snapshot of the cache) before the cache update, so the
 * newest column reads slot p % w as it was: position p - w, the stale row
 * (ring_out is still updated, after the attention).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/kernels.h"

#define BLK 64

/* The kernel over keys held in two segments, as a paged cache holds them:
 * column id < N is row id of kv, N <= id < N + N2 row id - N of kv2 (the
 * decode step's ring and its compressed rows, never copied into one
 * buffer: a 1M-context compressed cache is 2 GiB). */
static int attn2(const float *q, long s, int H, int D, const float *kv, long N, const float *kv2, long N2,
                 const int32_t *idx, long ncols, const float *sink, float scale, float *o, int mut)
{
    float *S = malloc(sizeof(float) * (size_t)H * BLK);
    float *P = malloc(sizeof(float) * (size_t)H * BLK);
    float *O = malloc(sizeof(float) * (size_t)H * D);
    float *m = malloc(sizeof(float) * (size_t)H);
    float *l = malloc(sizeof(float) * (size_t)H);
    const float *rows[BLK];
    int rc = -1;
    if (!S || !P || !O || !m || !l) goto out;
    for (long t = 0; t < s; t++) {
        const float *qt = q + t * (long)H * D;
        const int32_t *it = idx + t * ncols;
        memset(O, 0, sizeof(float) * (size_t)H * D);
        for (int h = 0; h < H; h++) { m[h] = -INFINITY; l[h] = 0; }
        for (long b0 = 0; b0 < ncols; b0 += BLK) {
            int nb = (int)(ncols - b0 < BLK ? ncols - b0 : BLK);
            for (int j = 0; j < nb; j++) {
                int32_t id = it[b0 + j];
                rows[j] = id < 0 ? NULL : id < N ? kv + (long)id * D : id - N < N2 ? kv2 + (long)(id - N) * D : NULL;
            }
            /* score tile: one pass over the gathered rows, all heads */
            for (int j = 0; j < nb; j++)
                for (int h = 0; h < H; h++)
                    S[h * BLK + j] = rows[j] ? cpuref_dot(qt + (long)h * D, rows[j], D) * scale : -INFINITY;
            for (int h = 0; h < H; h++) {
                float *sh = S + h * BLK, *ph = P + h * BLK;
                float mb = m[h];
                for (int j = 0; j < nb; j++) mb = fmaxf(mb, sh[j]);
                if (mb == -INFINITY) continue;           /* nothing visible yet */
                float alpha = m[h] == -INFINITY ? 0.0f : expf(m[h] - mb);
                float rs[4] = {0, 0, 0, 0};
                for (int j = 0; j < nb; j++) {
                    float e = sh[j] == -INFINITY ? 0.0f : expf(sh[j] - mb);
                    rs[j & 3] += e;
                    ph[j] = cpuref_bf16(e);
                }
                l[h] = l[h] * alpha + ((rs[0] + rs[1]) + (rs[2] + rs[3]));
                m[h] = mb;
                float *Oh = O + (long)h * D;
                if (alpha != 1.0f)
                    for (int d = 0; d < D; d++) Oh[d] *= alpha;
                for (int j = 0; j < nb; j++) {
                    if (ph[j] == 0.0f) continue;
                    const float *k = rows[j], p = ph[j];
                    for (int d = 0; d < D; d++) Oh[d] += p * k[d];
                }
            }
        }
        for (int h = 0; h < H; h++) {
            float *oh = o + (t * H + h) * (long)D;
            if (m[h] == -INFINITY) {
                memset(oh, 0, sizeof(float) * (size_t)D);
                continue;
            }
            float den = l[h];
            if (mut != CPUREF_M_ATTN_SINK_MISSING) den += expf(sink[h] - m[h]);
            const float *Oh = O + (long)h * D;
            for (int d = 0; d < D; d++) oh[d] = cpuref_bf16(Oh[d] / den);
        }
    }
    rc = 0;
out:
    free(S); free(P); free(O); free(m); free(l);
    return rc;
}

int cpuref_sparse_attn(const float *q, long s, int H, int D, const float *kv, long N, const int32_t *idx, long ncols,
                       const float *sink, float scale, float *o, int mut)
{
    return attn2(q, s, H, D, kv, N, NULL, 0, idx, ncols, sink, scale, o, mut);
}

int cpuref_window_attn_decode(const float *q, int H, int D, const float *kv_new, const float *ring, long w,
                              const float *cmp, long Nc, const int32_t *cidx, long nc, const float *sink,
                              float scale, long p, float *o, float *ring_out, int mut)
{
    const long slot = p % w;
    float *keys = malloc(sizeof(float) * (size_t)(w * D)); /* the ring's snapshot; cmp is read in place */
    int32_t *cols = malloc(sizeof(int32_t) * (size_t)(w + nc));
    int rc = -1;
    if (!keys || !cols) goto out;
    memcpy(ring_out, ring, sizeof(float) * (size_t)(w * D));
    if (mut != CPUREF_M_WINDOW_OFF_BY_ONE) memcpy(ring_out + slot * D, kv_new, sizeof(float) * (size_t)D);
    memcpy(keys, ring_out, sizeof(float) * (size_t)(w * D));
    if (mut == CPUREF_M_WINDOW_OFF_BY_ONE) memcpy(ring_out + slot * D, kv_new, sizeof(float) * (size_t)D);
    /* window: oldest first; before the ring is full, slots 0..p then none */
    long n = 0;
    if (p + 1 >= w)
        for (long t = slot + 1; n < w; t++) cols[n++] = (int32_t)(t % w);
    else
        for (; n < w; n++) cols[n] = n <= p ? (int32_t)n : -1;
    for (long j = 0; j < nc; j++) cols[w + j] = (cidx[j] >= 0 && cidx[j] < Nc) ? (int32_t)(w + cidx[j]) : -1;
    rc = attn2(q, 1, H, D, keys, w, cmp, Nc, cols, w + nc, sink, scale, o, mut);
out:
    free(keys);
    free(cols);
    return rc;
}
