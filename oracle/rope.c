/*
 * rope.c - YaRN RoPE table, interleaved application and its inverse.
 *
 * Mirrors model.py:precompute_freqs_cis and apply_rotary_emb. With boundary
 * rope_table_f32 the table is built as the source does (frequencies, YaRN
 * blend and angle t*f in FP32, cos/sin rounded to FP32 = complex64); without
 * it the table is built at the working width (the ideal). cos/sin come from
 * dsv4q_cos/dsv4q_sin (oracle/dmath.h) so the table is identical on every
 * machine. Pairs are interleaved: (x[2i], x[2i+1]) is one complex number.
 */
#include <stdlib.h>
#include "oracle/real.h"
#include "oracle/ops.h"

static void freqs_src(const dsv4q_rope_params *p, double *f)
{
    /* FP32 steps of precompute_freqs_cis; every op rounded to binary32. */
    const int r = p->rope_dim, half = r / 2;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)r;
        float pw = (float)dsv4q_pow((double)(float)p->base, (double)e);
        f[i] = (float)(1.0f / pw);
    }
    if (p->original_seq_len > 0) {
        double lo, hi;
        dsv4q_yarn_range(p, &lo, &hi);
        for (int i = 0; i < half; i++) {
            float ramp = ((float)i - (float)lo) / ((float)hi - (float)lo);
            ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
            float smooth = 1.0f - ramp;
            float fi = (float)f[i];
            float a = (fi / (float)p->factor) * (1.0f - smooth);
            float b = fi * smooth;
            f[i] = (float)(a + b);
        }
    }
}

static void freqs_ideal(const dsv4q_rope_params *p, real *f)
{
    const int r = p->rope_dim, half = r / 2;
    for (int i = 0; i < half; i++)
        f[i] = RC(1) / (real)dsv4q_pow(p->base, (double)(2 * i) / (double)r);
    if (p->original_seq_len > 0) {
        double lo, hi;
        dsv4q_yarn_range(p, &lo, &hi);
        for (int i = 0; i < half; i++) {
            real ramp = ((real)i - (real)lo) / ((real)hi - (real)lo);
            ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
            real smooth = RC(1) - ramp;
            f[i] = (f[i] / (real)p->factor) * (RC(1) - smooth) + f[i] * smooth;
        }
    }
}

int X(dsv4q_rope_build)(X(dsv4q_rope_table) *t, const dsv4q_rope_params *p, long npos, uint64_t bs)
{
    const int half = p->rope_dim / 2;
    t->half = half;
    t->npos = npos;
    t->cos = malloc(sizeof(real) * (size_t)(npos * half));
    t->sin = malloc(sizeof(real) * (size_t)(npos * half));
    double fs[256];
    real fi[256];
    if (!t->cos || !t->sin || half > 256) {
        free(t->cos);
        free(t->sin);
        t->cos = t->sin = NULL;
        return -1;
    }
    int src = (bs >> DSV4Q_B_ROPE_TABLE_F32) & 1u;
    if (src) freqs_src(p, fs);
    else freqs_ideal(p, fi);
    #pragma omp parallel for schedule(static)
    for (long pos = 0; pos < npos; pos++)
        for (int i = 0; i < half; i++) {
            real c, s;
            if (src) {
                float ang = (float)pos * (float)fs[i];
                c = (real)(float)dsv4q_cos((double)ang);
                s = (real)(float)dsv4q_sin((double)ang);
            } else {
                real ang = (real)pos * fi[i];
                c = (real)dsv4q_cos((double)ang);
                s = (real)dsv4q_sin((double)ang);
            }
            t->cos[pos * half + i] = c;
            t->sin[pos * half + i] = s;
        }
    return 0;
}

void X(dsv4q_rope_free)(X(dsv4q_rope_table) *t)
{
    free(t->cos);
    free(t->sin);
    t->cos = t->sin = NULL;
}

void X(dsv4q_rope_apply)(uint64_t bs, const X(dsv4q_rope_table) *t, real *x, long rows, long stride,
                         long off, long pos0, long rows_per_pos, int inverse)
{
    const int half = t->half;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        long pos = pos0 + r / rows_per_pos;
        const real *c = t->cos + pos * half, *s = t->sin + pos * half;
        real *v = x + r * stride + off;
        for (int i = 0; i < half; i++) {
            real a = v[2 * i], b = v[2 * i + 1];
            real si = inverse ? -s[i] : s[i];
            v[2 * i] = rb(bs, DSV4Q_B_ROPE_BF16, a * c[i] - b * si);
            v[2 * i + 1] = rb(bs, DSV4Q_B_ROPE_BF16, a * si + b * c[i]);
        }
    }
}
