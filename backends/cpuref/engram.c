/*
 * engram.c - cpu-ref's V4.1 Engram layer (model.py Engram.forward):
 * table lookup, wkv, the per-copy gate, the injection into the stream.
 *
 * Production choices (deliberately not the oracle's):
 *  - the table rows decoded through the E4M3 lookup table times 2^(e-127)
 *    built from the scale byte's bits;
 *  - wkv in 32x32 tiles, tile-major: for each 32-row tile and 32-wide K
 *    block, the block dots of its rows (cpuref_dot) times the activation
 *    scale, times the tile's weight scale, into per-row FP32 accumulators;
 *  - the gate: q * k folded first (exact: two BF16 values), the means of
 *    squares as cpuref_dot(x, x) / dim, the dot of (h * w) with the key on
 *    cpuref_dot's lanes, the sigmoid as 1 / (1 + expf(-z)).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/kernels.h"

#define EBLK 32 /* V4.1's FP8 block: weight tiles 32x32, activation blocks 1x32 */

/* 2^(e-127) of an E8M0 byte, from the bits (0xFF: NaN). */
static float e8m0(uint8_t e)
{
    if (e == 0xFF) return NAN;
    if (e == 0) return 0x1p-127f; /* the one E8M0 value below FP32's normals */
    return cpuref_bits_f((uint32_t)e << 23);
}

/* Row o of a BF16 or F32 [rows, n] weight into w. */
static void plain_row(const cpuref_w *W, long o, float *w)
{
    if (W->kind == CPUREF_W_BF16) {
        const uint16_t *p = (const uint16_t *)W->data + o * W->in;
        for (long d = 0; d < W->in; d++) w[d] = cpuref_bits_f((uint32_t)p[d] << 16);
    } else memcpy(w, (const float *)W->data + o * W->in, sizeof(float) * (size_t)W->in);
}

/* kv [N] = wkv e for one token: e [K] act-quantized per 32 (codes in q,
 * scales in sa), then the tile-major block-scaled sums, BF16-rounded. */
static void wkv_row(const cpuref_w *W, const float *e, int ue8m0, float *q, float *sa, float *wt, float *kv)
{
    const long N = W->out, K = W->in, nkb = (K + EBLK - 1) / EBLK;
    for (long kb = 0; kb < nkb; kb++) {
        const long k0 = kb * EBLK, len = K - k0 < EBLK ? K - k0 : EBLK;
        float amax = 0;
        for (long i = 0; i < len; i++) amax = fmaxf(amax, fabsf(e[k0 + i]));
        const float s = sa[kb] = cpuref_fp8_scale(amax, ue8m0, CPUREF_OK);
        for (long i = 0; i < len; i++) q[k0 + i] = cpuref_e4m3_round(fminf(fmaxf(e[k0 + i] / s, -448.0f), 448.0f));
    }
    const uint8_t *codes = W->data;
    for (long o0 = 0; o0 < N; o0 += EBLK) {
        const long rows = N - o0 < EBLK ? N - o0 : EBLK;
        float acc[EBLK] = {0};
        for (long kb = 0; kb < nkb; kb++) {
            const long k0 = kb * EBLK, len = K - k0 < EBLK ? K - k0 : EBLK, si = (o0 / EBLK) * W->scale_cols + kb;
            const float sw = W->scale_f32 ? ((const float *)W->scale)[si] : e8m0(((const uint8_t *)W->scale)[si]);
            for (long r = 0; r < rows; r++) {
                const uint8_t *p = codes + (o0 + r) * K + k0;
                for (long i = 0; i < len; i++) wt[i] = cpuref_e4m3_lut[p[i]];
                acc[r] += (cpuref_dot(wt, q + k0, len) * sa[kb]) * sw;
            }
        }
        for (long r = 0; r < rows; r++) kv[o0 + r] = cpuref_bf16(acc[r]);
    }
}

int cpuref_engram41(const cpuref_engram_args *a, const float *h, long s, const int32_t *ids, const int32_t *mask,
                    float *y, int mut)
{
    cpuref_tables_init();
    const int hc = a->hc, hd = a->hd, C = a->ncols;
    const long dim = a->dim, K = (long)C * hd, N = dim * (hc + 1);
    /* the mutant norm_eps_1e6: the per-copy normalisation with 1e-6 */
    const float eps = mut == CPUREF_M_NORM_EPS_1E6 ? 1e-6f : a->eps, rdim = 1.0f / sqrtf((float)dim);
    float *e = malloc(sizeof(float) * (size_t)K), *q = malloc(sizeof(float) * (size_t)K),
          *sa = malloc(sizeof(float) * (size_t)(K / EBLK + 1)), *kv = malloc(sizeof(float) * (size_t)N),
          *w = malloc(sizeof(float) * (size_t)(hc * dim)),
          *tmp = malloc(sizeof(float) * (size_t)(dim > EBLK ? dim : EBLK));
    int rc = !e || !q || !sa || !kv || !w || !tmp ? -1 : 0;
    for (int c = 0; !rc && c < hc; c++) { /* w = q_weight * k_weight */
        plain_row(a->qw, c, w + c * dim);
        plain_row(a->kw, c, tmp);
        for (long d = 0; d < dim; d++) w[c * dim + d] *= tmp[d];
    }
    for (long t = 0; !rc && t < s; t++) {
        for (int j = 0; j < C; j++) {
            const int64_t id = ids[t * C + j];
            float *row = e + (long)j * hd;
            if (id < 0 || id >= a->rows) {
                memset(row, 0, sizeof(float) * (size_t)hd);
                continue;
            }
            const uint8_t *cd = a->table + id * hd, *sc = a->table_scale + id * (hd / 32);
            for (int k = 0; k < hd; k++) row[k] = cpuref_e4m3_lut[cd[k]] * e8m0(sc[k / 32]);
        }
        wkv_row(a->wkv, e, a->ue8m0, q, sa, tmp, kv);
        const float *value = kv + (long)hc * dim;
        for (int c = 0; c < hc; c++) {
            const float *hv = h + (t * hc + c) * dim, *key = kv + (long)c * dim;
            float *yv = y + (t * hc + c) * dim;
            const float mh = cpuref_dot(hv, hv, dim) / (float)dim, mk = cpuref_dot(key, key, dim) / (float)dim;
            for (long d = 0; d < dim; d++) tmp[d] = hv[d] * w[c * dim + d];
            const float dot = cpuref_dot(tmp, key, dim) * (1.0f / sqrtf(mh + eps)) * (1.0f / sqrtf(mk + eps)) * rdim;
            const float mag = sqrtf(fmaxf(fabsf(dot), 1e-6f));
            /* the mutant engram_gate_nosign drops the sign of the dot */
            const float z = mut == CPUREF_M_ENGRAM_GATE_NOSIGN ? mag : copysignf(mag, dot);
            const float g = mask && !mask[t] ? 0.0f : 1.0f / (1.0f + expf(-z));
            for (long d = 0; d < dim; d++) yv[d] = cpuref_bf16(hv[d] + g * value[d]);
        }
    }
    free(e), free(q), free(sa), free(kv), free(w), free(tmp);
    return rc;
}
