/*
 * cpuref_norm.c - cpu-ref's RMSNorm, q head norm and RoPE.
 *
 * RMSNorm: FP32 sum of squares on 16 lanes, (x * rsqrt) * w, BF16 out.
 * q head norm: the source's five BF16 tensor ops (q^2, mean, +eps, rsqrt,
 * product), the mean's sum on 16 lanes.
 * RoPE: frequencies, YaRN blend and angles in FP32 as precompute_freqs_cis
 * does (complex64 cos/sin), computed per row from the position (no table);
 * interleaved pairs, BF16 results.
 *
 * Mutants: yarn_on_ratio0 applies YaRN when original_seq_len == 0 with the
 * model-wide YaRN settings (original_seq_len 65536, and factor 16 /
 * beta 32 / 1 where the call passes none) - an engine that builds one
 * YaRN table for every layer. idx_rope_halfsplit pairs x[i] with
 * x[i + r/2] (GPT-NeoX layout) where the caller says the rows are indexer
 * rows (see cpuref_backend.c).
 */
#include <math.h>
#include "backends/cpuref/kernels.h"

void cpuref_rmsnorm(const float *x, long rows, long d, const float *w, float eps, float *y)
{
    for (long r = 0; r < rows; r++) {
        const float *v = x + r * d;
        float ms = cpuref_dot(v, v, d) / (float)d;
        float inv = 1.0f / sqrtf(ms + eps);
        for (long i = 0; i < d; i++) y[r * d + i] = cpuref_bf16((v[i] * inv) * (w ? w[i] : 1.0f));
    }
}

void cpuref_qhead_norm(const float *q, long rows, long D, float eps, float *y)
{
    static const float one[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (long r = 0; r < rows; r++) {
        const float *v = q + r * D;
        float *o = y + r * D;
        /* q.square() as a BF16 tensor, then its FP32-accumulated mean */
        for (long i = 0; i < D; i++) o[i] = cpuref_bf16(v[i] * v[i]);
        float sum = 0;
        long i = 0;
        for (; i + 16 <= D; i += 16) sum += cpuref_dot(o + i, one, 16);
        for (; i < D; i++) sum += o[i];
        float mean = cpuref_bf16(sum / (float)D);
        float t = cpuref_bf16(mean + eps);
        float inv = cpuref_bf16(1.0f / sqrtf(t));
        for (long k = 0; k < D; k++) o[k] = cpuref_bf16(v[k] * inv);
    }
}

int cpuref_rope_init(cpuref_rope *rp, int r, double base, int orig_seq_len, double factor,
                     double beta_fast, double beta_slow, int mut)
{
    const int half = r / 2;
    if (r <= 0 || r % 2 || half > 256) return -1;
    rp->half = half;
    const float fb = (float)base;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)r;
        rp->f[i] = 1.0f / powf(fb, e);
    }
    if (orig_seq_len <= 0 && mut == CPUREF_M_YARN_ON_RATIO0) {
        orig_seq_len = 65536;
        if (!(factor > 1)) factor = 16;
        if (!(beta_fast > 0)) beta_fast = 32;
        if (!(beta_slow > 0)) beta_slow = 1;
    }
    if (orig_seq_len > 0) {
        /* find_correction_range in double, as Python computes it */
        const double two_pi = 2.0 * 3.14159265358979323846, lb = 2.0 * log(base);
        double lo = floor(r * log(orig_seq_len / (beta_fast * two_pi)) / lb);
        double hi = ceil(r * log(orig_seq_len / (beta_slow * two_pi)) / lb);
        if (lo < 0) lo = 0;
        if (hi > r - 1) hi = r - 1;
        if (lo == hi) hi += 0.001;
        const float flo = (float)lo, span = (float)(hi - lo), ff = (float)factor;
        for (int i = 0; i < half; i++) {
            float ramp = ((float)i - flo) / span;
            ramp = ramp < 0.0f ? 0.0f : (ramp > 1.0f ? 1.0f : ramp);
            float smooth = 1.0f - ramp;
            float f = rp->f[i];
            rp->f[i] = (f / ff) * (1.0f - smooth) + f * smooth;
        }
    }
    return 0;
}

void cpuref_rope_row(const cpuref_rope *rp, float *v, long pos, int inverse, int halfsplit)
{
    const int half = rp->half;
    const float t = (float)pos;
    for (int i = 0; i < half; i++) {
        float ang = t * rp->f[i];
        float c = cosf(ang), s = sinf(ang);
        if (inverse) s = -s;
        float *a = halfsplit ? v + i : v + 2 * i;
        float *b = halfsplit ? v + i + half : v + 2 * i + 1;
        float re = *a * c - *b * s, im = *a * s + *b * c;
        *a = cpuref_bf16(re);
        *b = cpuref_bf16(im);
    }
}
