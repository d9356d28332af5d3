/*
 * cmp41.c - cpu-ref's V4.1 compressor (ratio 1 or 2, before RoPE), run as
 * an engine runs it: a prefill call, then one call per decode position,
 * with the ratio-2 state an engine keeps between calls.
 *
 * Ratio 1: one GEMM per call with the product rounded to BF16, then the
 * norm (BF16 out). Ratio 2: kv and score GEMMs in FP32; a pair (a, b) is
 * pooled as (kv_a e_a + kv_b e_b) / (e_a + e_b) with e = exp(score - max)
 * and one division at the end, rounded to BF16, then the norm. The state
 * is two slots of kv and score; a fresh score slot is -inf (exp gives 0).
 * A prefill pools its complete pairs straight from the GEMM rows and
 * copies an odd last token into slot 0; a decode at p writes slot p % 2
 * and pools the slots when p is odd.
 *
 * Mutant: cmp41_partial_dropped leaves the prefill's odd last token out of
 * the state, so the decode at p pools the fresh slot 0 with token p alone.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/kernels.h"

/* row [Dc] = the pair (kv0, sc0), (kv1, sc1) pooled, BF16. */
static void pool_pair(const float *kv0, const float *sc0, const float *kv1, const float *sc1, int Dc, float *row)
{
    for (int j = 0; j < Dc; j++) {
        const float m = sc0[j] > sc1[j] ? sc0[j] : sc1[j];
        const float e0 = sc0[j] == -INFINITY ? 0.0f : expf(sc0[j] - m);
        const float e1 = sc1[j] == -INFINITY ? 0.0f : expf(sc1[j] - m);
        row[j] = cpuref_bf16((kv0[j] * e0 + kv1[j] * e1) / (e0 + e1));
    }
}

int cpuref_compressor41(const cpuref_cmp41_args *a, const float *x, long s, long p, float *rows, int mut)
{
    const int Dc = a->Dc;
    const long d = a->wkv->in;
    if (a->ratio == 1) { /* the calls are independent per token: prefill, then each decode */
        if (cpuref_linear(a->wkv, x, p, 0, 1, rows, mut)) return -1;
        for (long t = p; t < s; t++)
            if (cpuref_linear(a->wkv, x + t * d, 1, 0, 1, rows + t * Dc, mut)) return -1;
        cpuref_rmsnorm(rows, s, Dc, a->norm, a->eps, rows);
        return 0;
    }
    float *kv = malloc(sizeof(float) * (size_t)(p * Dc + 2 * Dc));
    float *sc = malloc(sizeof(float) * (size_t)(p * Dc + 2 * Dc));
    float *skv = malloc(sizeof(float) * 2 * (size_t)Dc), *ssc = malloc(sizeof(float) * 2 * (size_t)Dc);
    int rc = -1;
    if (!kv || !sc || !skv || !ssc) goto out;
    for (int j = 0; j < 2 * Dc; j++) {
        skv[j] = 0;
        ssc[j] = -INFINITY;
    }
    /* prefill: positions 0..p-1 */
    if (cpuref_linear(a->wkv, x, p, 0, 0, kv, mut) || cpuref_linear(a->wgate, x, p, 0, 0, sc, mut)) goto out;
    long n = 0;
    for (long t = 0; t + 1 < p; t += 2, n++)
        pool_pair(kv + t * Dc, sc + t * Dc, kv + (t + 1) * Dc, sc + (t + 1) * Dc, Dc, rows + n * Dc);
    if (p % 2 && mut != CPUREF_M_CMP41_PARTIAL_DROPPED) {
        memcpy(skv, kv + (p - 1) * Dc, sizeof(float) * (size_t)Dc);
        memcpy(ssc, sc + (p - 1) * Dc, sizeof(float) * (size_t)Dc);
    }
    /* decode: one token per call into slot t % 2 */
    for (long t = p; t < s; t++) {
        float *k1 = skv + (t % 2) * Dc, *s1 = ssc + (t % 2) * Dc;
        if (cpuref_linear(a->wkv, x + t * d, 1, 0, 0, k1, mut) || cpuref_linear(a->wgate, x + t * d, 1, 0, 0, s1, mut))
            goto out;
        if (t % 2) pool_pair(skv, ssc, skv + Dc, ssc + Dc, Dc, rows + n++ * Dc);
    }
    cpuref_rmsnorm(rows, n, Dc, a->norm, a->eps, rows);
    rc = 0;
out:
    free(kv);
    free(sc);
    free(skv);
    free(ssc);
    return rc;
}
