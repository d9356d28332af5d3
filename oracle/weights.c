/*
 * weights.c - width-independent helpers for stored weights and scales.
 */
#include "base/unaligned.h"
#include <math.h>
#include "oracle/weights.h"
#include "oracle/ops.h"
#include "oracle/dmath.h"

int dsv4q_ceil_log2_ratio(double amax, double fmax)
{
    /* Start from frexp's estimate, then correct with exact comparisons:
     * fmax * 2^e is exact in binary64 for the formats used (448, 6). */
    int e;
    frexp(amax / fmax, &e);
    while (ldexp(fmax, e) < amax) e++;
    while (ldexp(fmax, e - 1) >= amax) e--;
    return e;
}

static double scale_at(const dsv4q_weight *w, int64_t i)
{
    if (w->scale_dtype == DSV4Q_DT_F32) return dsv4q_ld_f32(w->scale, i);
    return dsv4q_e8m0_decode(((const uint8_t *)w->scale)[i]);
}

double dsv4q_weight_at(const dsv4q_weight *w, int64_t o, int64_t k)
{
    int64_t i = o * w->in + k;
    switch (w->fmt) {
    case DSV4Q_WF_F32: return dsv4q_ld_f32(w->data, i);
    case DSV4Q_WF_F64: return dsv4q_ld_f64(w->data, i);
    case DSV4Q_WF_BF16: return dsv4q_bf16_decode(dsv4q_ld_u16(w->data, i));
    case DSV4Q_WF_FP8: {
        const int64_t b = dsv4q_weight_blk(w), nkb = (w->in + b - 1) / b;
        return dsv4q_e4m3_decode(((const uint8_t *)w->data)[i]) * scale_at(w, (o / b) * nkb + k / b);
    }
    case DSV4Q_WF_FP4: {
        const uint8_t *row = (const uint8_t *)w->data + o * (w->in / 2);
        return dsv4q_e2m1_decode(dsv4q_e2m1_nibble(row, (size_t)k)) * scale_at(w, o * (w->in / 32) + k / 32);
    }
    default: return NAN;
    }
}

void dsv4q_weight_row_f32(const dsv4q_weight *w, int64_t o, float *out)
{
    const int64_t K = w->in;
    switch (w->fmt) {
    case DSV4Q_WF_FP8: {
        const uint8_t *c = (const uint8_t *)w->data + o * K;
        const double *t = dsv4q_e4m3_table();
        const int64_t b = dsv4q_weight_blk(w), nkb = (K + b - 1) / b;
        for (int64_t kb = 0; kb < nkb; kb++) {
            const double s = scale_at(w, (o / b) * nkb + kb);
            for (int64_t k = kb * b; k < K && k < kb * b + b; k++) out[k] = (float)(t[c[k]] * s);
        }
        return;
    }
    case DSV4Q_WF_FP4: {
        const uint8_t *c = (const uint8_t *)w->data + o * (K / 2);
        const double *t = dsv4q_e2m1_pair_table();   /* [byte][low, high nibble] */
        for (int64_t kb = 0; kb < K / 32; kb++) {
            const double s = scale_at(w, o * (K / 32) + kb);
            for (int64_t k = kb * 32; k < kb * 32 + 32; k += 2) {
                out[k] = (float)(t[2 * c[k / 2]] * s);
                out[k + 1] = (float)(t[2 * c[k / 2] + 1] * s);
            }
        }
        return;
    }
    default:
        for (int64_t k = 0; k < K; k++) out[k] = (float)dsv4q_weight_at(w, o, k);
    }
}

void dsv4q_yarn_range(const dsv4q_rope_params *p, double *lo, double *hi)
{
    /* model.py find_correction_range, in double as Python computes it. */
    const double r = p->rope_dim, two_pi = 6.283185307179586;
    double clo = r * dsv4q_log(p->original_seq_len / (p->beta_fast * two_pi)) / (2 * dsv4q_log(p->base));
    double chi = r * dsv4q_log(p->original_seq_len / (p->beta_slow * two_pi)) / (2 * dsv4q_log(p->base));
    double l = floor(clo), h = ceil(chi);
    if (l < 0) l = 0;
    if (h > r - 1) h = r - 1;
    if (l == h) h += 0.001;
    *lo = l;
    *hi = h;
}
