/*
 * cpuref_cmp.c - cpu-ref's compressor (prefill from position 0).
 *
 * kv = x Wkv^T and g = x Wgate^T + ape[pos % ratio] in FP32 (one GEMM
 * each, all tokens). Each block's row is pooled for all Dc dims at once:
 * a max pass over the candidates, then sum(kv * e) and sum(e) with
 * e = exp(g - max), and one division at the end. With overlap (ratio 4)
 * the candidates are the previous block's tokens on dims [0, Dc) and this
 * block's on [Dc, 2Dc); block 0 has no previous block, so it pools its own
 * ratio candidates only. Then BF16 storage, RMSNorm, RoPE on the last r
 * dims at the block's first position, and Hadamard + FP4 (indexer keys)
 * or FP8 act-quant of the nope dims (attention rows).
 *
 * Mutants: cmp_block0_zeros pools block 0 with `ratio` extra candidates of
 * kv 0 and gate 0 (a zero-initialised score state instead of -inf);
 * cmp_rope_last_pos rotates at the block's last position; idx_k_no_hadamard
 * skips the Hadamard on indexer keys; idx_rope_halfsplit uses the
 * half-split pair layout on indexer keys; ue8m0_log2f reaches the FP8
 * act-quant of attention rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/kernels.h"

int cpuref_compressor(const cpuref_cmp_args *a, const float *x, long s, float *rows, int mut)
{
    const int ratio = a->ratio, Dc = a->Dc, ov = ratio == 4, r = a->rope_dim;
    const long W = (ov ? 2 : 1) * (long)Dc;
    const long nrows = s / ratio;
    float *kv = malloc(sizeof(float) * (size_t)(s * W + 1));
    float *g = malloc(sizeof(float) * (size_t)(s * W + 1));
    float *mx = malloc(sizeof(float) * (size_t)Dc);
    float *num = malloc(sizeof(float) * (size_t)Dc);
    float *den = malloc(sizeof(float) * (size_t)Dc);
    int rc = -1;
    if (!kv || !g || !mx || !num || !den) goto out;
    if (cpuref_linear(a->wkv, x, s, 0, 0, kv, mut) || cpuref_linear(a->wgate, x, s, 0, 0, g, mut)) goto out;
    for (long t = 0; t < s; t++) {
        const float *ape = a->ape + (t % ratio) * W;
        for (long j = 0; j < W; j++) g[t * W + j] += ape[j];
    }
    for (long b = 0; b < nrows; b++) {
        /* candidate list: (token, column offset) pairs */
        long tok[256], col[256];
        int nc = 0;
        if (ov && b > 0)
            for (int t = 0; t < ratio; t++) { tok[nc] = (b - 1) * ratio + t; col[nc++] = 0; }
        for (int t = 0; t < ratio; t++) { tok[nc] = b * ratio + t; col[nc++] = ov ? Dc : 0; }
        const int zeros = ov && b == 0 && mut == CPUREF_M_CMP_BLOCK0_ZEROS ? ratio : 0;

        for (int j = 0; j < Dc; j++) mx[j] = zeros ? 0.0f : -INFINITY;
        for (int c = 0; c < nc; c++) {
            const float *gc = g + tok[c] * W + col[c];
            for (int j = 0; j < Dc; j++) mx[j] = fmaxf(mx[j], gc[j]);
        }
        for (int j = 0; j < Dc; j++) {
            float e0 = zeros ? expf(0.0f - mx[j]) : 0.0f;
            den[j] = (float)zeros * e0;
            num[j] = 0;
        }
        for (int c = 0; c < nc; c++) {
            const float *gc = g + tok[c] * W + col[c], *kc = kv + tok[c] * W + col[c];
            for (int j = 0; j < Dc; j++) {
                float e = expf(gc[j] - mx[j]);
                den[j] += e;
                num[j] += kc[j] * e;
            }
        }
        float *row = rows + b * Dc;
        for (int j = 0; j < Dc; j++) row[j] = cpuref_bf16(num[j] / den[j]);

        cpuref_rmsnorm(row, 1, Dc, a->norm, a->eps, row);
        long pos = b * ratio + (mut == CPUREF_M_CMP_ROPE_LAST_POS ? ratio - 1 : 0);
        cpuref_rope_row(a->rope, row + Dc - r, pos, 0, a->rotate && mut == CPUREF_M_IDX_ROPE_HALFSPLIT);
        if (a->rotate) {
            if (mut != CPUREF_M_IDX_K_NO_HADAMARD) cpuref_hadamard(row, 1, Dc);
            cpuref_fp4_quant(row, 1, Dc);
        } else {
            cpuref_act_quant(row, 1, Dc - r, 64, a->ue8m0, mut);
        }
    }
    rc = 0;
out:
    free(kv); free(g); free(mx); free(num); free(den);
    return rc;
}
