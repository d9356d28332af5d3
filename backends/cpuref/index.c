/*
 * cpuref_index.c - cpu-ref's lightning-indexer scores and top-k.
 *
 * Scores: for each (query, key) the Hi per-head dots (16-lane FP32), each
 * stored BF16, relu, times the head weight, stored BF16; the head sum is
 * one FP32 reduction on 4 lanes (h % 4) folded pairwise, stored BF16 -
 * the source's rounding points with cpu-ref's own summation order.
 * Prefill (start_pos 0) masks key t >= (i+1)/ratio to -inf.
 *
 * Top-k: every finite score becomes a 64-bit key (order-preserving bits of
 * the score, inverted for descending, then the row index), sorted by a
 * 8-bit-digit LSD radix sort; the first k keys win. Equal scores therefore
 * come out lower index first, the documented rule. -1 pads.
 *
 * V4.1 scores with latent keys: the keys are made from the latent rows
 * (one GEMM over all rows, BF16 out; RMSNorm; RoPE per row, computed from
 * the position; FP4), the queries FP4'd on a copy, then the scores above.
 *
 * Mutant topk_tie_unstable: the tie key alternates between the index and
 * its reverse on successive calls, so two runs of the same input disagree
 * whenever a tie touches the output (an engine whose tie order follows
 * thread / rank scheduling). Mutant idx41_keys_after_rope: the V4.1 keys are
 * projected from the latent after attention's RoPE on its last rope dims
 * (an engine that reuses the rotated compressed-KV latent).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/kernels.h"

void cpuref_indexer_score(const float *q, const float *w, long s, int Hi, int Di, const float *K, long T,
                          long start_pos, int ratio, float *score)
{
    for (long i = 0; i < s; i++) {
        const float *qi = q + i * (long)Hi * Di, *wi = w + i * Hi;
        for (long t = 0; t < T; t++) {
            if (start_pos == 0 && t >= (i + 1) / ratio) {
                score[i * T + t] = -INFINITY;
                continue;
            }
            const float *kt = K + t * Di;
            float lane[4] = {0, 0, 0, 0};
            for (int h = 0; h < Hi; h++) {
                float d = cpuref_bf16(cpuref_dot(qi + (long)h * Di, kt, Di));
                d = d > 0.0f ? d : 0.0f;
                lane[h & 3] += cpuref_bf16(d * wi[h]);
            }
            score[i * T + t] = cpuref_bf16((lane[0] + lane[1]) + (lane[2] + lane[3]));
        }
    }
}

int cpuref_index41_score(const cpuref_idx41_args *a, const float *q, const float *latent, float *score, int mut)
{
    const long T = a->T, D = a->wk->in, nq = a->s * a->Hi * (long)a->Di;
    const int Di = a->Di, rd = 2 * a->rope->half;
    float *K = malloc(sizeof(float) * (size_t)(T * Di + 1)), *qf = malloc(sizeof(float) * (size_t)(nq + 1));
    float *rot = mut == CPUREF_M_IDX41_KEYS_AFTER_ROPE ? malloc(sizeof(float) * (size_t)(T * D + 1)) : NULL;
    int rc = -1;
    if (!K || !qf || (mut == CPUREF_M_IDX41_KEYS_AFTER_ROPE && !rot)) goto out;
    const float *src = latent;
    if (rot) { /* the defect: attention's rotation of the latent first */
        memcpy(rot, latent, sizeof(float) * (size_t)(T * D));
        for (long t = 0; t < T; t++) cpuref_rope_row(a->rope, rot + t * D + D - rd, (a->k0 + t) * a->ratio, 0, 0);
        src = rot;
    }
    if (cpuref_linear(a->wk, src, T, 1, 1, K, mut)) goto out;
    cpuref_rmsnorm(K, T, Di, a->knorm, a->eps, K);
    for (long t = 0; t < T; t++) cpuref_rope_row(a->rope, K + t * Di + Di - rd, (a->k0 + t) * a->ratio, 0, 0);
    cpuref_fp4_quant(K, T, Di);
    memcpy(qf, q, sizeof(float) * (size_t)nq);
    cpuref_fp4_quant(qf, a->s * a->Hi, Di);
    cpuref_indexer_score(qf, a->w, a->s, a->Hi, Di, K, T, a->start_pos, a->ratio, score);
    rc = 0;
out:
    free(K);
    free(qf);
    free(rot);
    return rc;
}

/* LSD radix sort of n 64-bit keys, 8-bit digits (8 stable passes). */
static void radix64(uint64_t *a, uint64_t *tmp, long n)
{
    long cnt[256];
    for (int sh = 0; sh < 64; sh += 8) {
        memset(cnt, 0, sizeof cnt);
        for (long i = 0; i < n; i++) cnt[(a[i] >> sh) & 0xFF]++;
        long sum = 0;
        for (int d = 0; d < 256; d++) { long c = cnt[d]; cnt[d] = sum; sum += c; }
        for (long i = 0; i < n; i++) tmp[cnt[(a[i] >> sh) & 0xFF]++] = a[i];
        memcpy(a, tmp, sizeof(uint64_t) * (size_t)n);
    }
}

static unsigned long topk_calls;

int cpuref_topk(const float *score, long rows, long T, int k, int32_t *out, int mut)
{
    uint64_t *key = malloc(sizeof(uint64_t) * (size_t)(T ? T : 1));
    uint64_t *tmp = malloc(sizeof(uint64_t) * (size_t)(T ? T : 1));
    if (!key || !tmp) { free(key); free(tmp); return -1; }
    const int reverse_ties = mut == CPUREF_M_TOPK_TIE_UNSTABLE && (topk_calls++ & 1u);
    for (long r = 0; r < rows; r++) {
        long n = 0;
        for (long t = 0; t < T; t++) {
            float v = score[r * T + t];
            if (!isfinite(v)) continue;
            if (v == 0.0f) v = 0.0f;                       /* -0 == +0 */
            uint32_t u = cpuref_f_bits(v);
            uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   /* ascending in v */
            uint32_t tie = reverse_ties ? (uint32_t)(T - 1 - t) : (uint32_t)t;
            key[n++] = ((uint64_t)~ord << 32) | tie;
        }
        radix64(key, tmp, n);
        for (int j = 0; j < k; j++) {
            if (j >= n) { out[r * k + j] = -1; continue; }
            uint32_t tie = (uint32_t)(key[j] & 0xFFFFFFFFu);
            out[r * k + j] = (int32_t)(reverse_ties ? (uint32_t)(T - 1) - tie : tie);
        }
    }
    free(key);
    free(tmp);
    return 0;
}

/* V4.1 level one: block maxima, the newest block pinned, then a sort of
 * (score descending, id ascending) pairs: the first min(topb, nb) whose
 * score is not -inf are kept, written ascending. (The oracle picks by
 * repeated arg-max; this sorts.) */
typedef struct {
    float s;
    int32_t b;
} cpuref_bscore;

static int bscore_cmp(const void *pa, const void *pb)
{
    const cpuref_bscore *a = pa, *b = pb;
    if (a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

static int i32_cmp(const void *pa, const void *pb)
{
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

int cpuref_candidate_blocks(const float *score, long rows, long T, const int32_t *clen, int topb, int B, int32_t *out,
                            int mut)
{
    const long nb = (T + B - 1) / B;
    cpuref_bscore *bs = malloc(sizeof *bs * (size_t)(nb > 0 ? nb : 1));
    if (!bs) return -1;
    for (long r = 0; r < rows; r++) {
        const float *sc = score + r * T;
        for (long b = 0; b < nb; b++) {
            float m = -INFINITY;
            const long end = (b + 1) * B < T ? (b + 1) * B : T;
            for (long t = b * B; t < end; t++) m = fmaxf(m, sc[t]);
            if (mut == CPUREF_M_CAND_BLOCK_MEAN) { /* the mutant: mean (-inf if any position is) */
                float sum = 0;
                for (long t = b * B; t < end; t++) sum += sc[t];
                m = sum / (float)(end - b * B);
            }
            bs[b].s = m;
            bs[b].b = (int32_t)b;
        }
        if (clen[r] > 0 && mut != CPUREF_M_CAND_NEWEST_UNPINNED) bs[(clen[r] - 1) / B].s = INFINITY;
        qsort(bs, (size_t)nb, sizeof *bs, bscore_cmp);
        int32_t *o = out + r * topb;
        int n = 0;
        for (long j = 0; j < nb && n < topb; j++)
            if (bs[j].s != -INFINITY) o[n++] = bs[j].b;
        qsort(o, (size_t)n, sizeof *o, i32_cmp);
        for (int j = n; j < topb; j++) o[j] = -1;
    }
    free(bs);
    return 0;
}

/* V4.1 level two: the positions of the listed blocks (all when blocks is
 * NULL) with a finite score, sorted (score descending, position
 * ascending); the first k, less those >= clen, ascending, -1 padded. */
int cpuref_topk41(const float *score, long rows, long T, const int32_t *clen, const int32_t *blocks, long topb, int B,
                  int k, int32_t *out)
{
    cpuref_bscore *c = malloc(sizeof *c * (size_t)(T > 0 ? T : 1));
    unsigned char *in = malloc((size_t)(T > 0 ? T : 1));
    if (!c || !in) {
        free(c);
        free(in);
        return -1;
    }
    for (long r = 0; r < rows; r++) {
        const float *sc = score + r * T;
        memset(in, blocks ? 0 : 1, (size_t)T);
        for (long j = 0; blocks && j < topb; j++) {
            const long b = blocks[r * topb + j];
            if (b < 0) continue;
            for (long t = b * B; t < (b + 1) * B && t < T; t++) in[t] = 1;
        }
        long n = 0;
        for (long t = 0; t < T; t++)
            if (in[t] && sc[t] > -INFINITY) {
                c[n].s = sc[t];
                c[n++].b = (int32_t)t;
            }
        qsort(c, (size_t)n, sizeof *c, bscore_cmp);
        int32_t *o = out + r * k;
        int m = 0;
        for (long j = 0; j < n && j < k; j++)
            if (c[j].b < clen[r]) o[m++] = c[j].b;
        qsort(o, (size_t)m, sizeof *o, i32_cmp);
        for (int j = m; j < k; j++) o[j] = -1;
    }
    free(c);
    free(in);
    return 0;
}
