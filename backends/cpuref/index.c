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
 * Mutant topk_tie_unstable: the tie key alternates between the index and
 * its reverse on successive calls, so two runs of the same input disagree
 * whenever a tie touches the output (an engine whose tie order follows
 * thread / rank scheduling).
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
