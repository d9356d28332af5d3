/*
 * quant.c - the QAT simulations: FP8 act_quant, FP4 act_quant, Hadamard.
 *
 * Mirrors kernel.py act_quant_kernel / fp4_quant_kernel and model.py
 * rotate_activation. Scales are powers of two chosen by the EXACT rule
 * (smallest 2^e with fmax*2^e >= amax, spec section 2): the kernel's
 * bit trick on amax*fp32(1/448) agrees with it on BF16 inputs, and the
 * oracle must not inherit the floating-point log2/ceil failure mode
 * (amax just above 448*2^k) that the harness looks for in backends.
 * x/s and q*s are exact (s is a power of two), so these functions are
 * width-independent in value except where x itself differs.
 */
#include <math.h>
#include "oracle/real.h"
#include "oracle/ops.h"

static real fp8_scale(real amax, int ue8m0)
{
    if (amax < RC(1e-4)) amax = RC(1e-4);
    if (ue8m0) return (real)ldexp(1.0, dsv4q_ceil_log2_ratio((double)amax, 448.0));
    /* kernel.py: amax * fp8_max_inv in FP32, kept at working width here */
    return amax * RC(1.0 / 448.0);
}

static real block_amax(const real *x, long n)
{
    real m = 0;
    for (long i = 0; i < n; i++)
        if (fabs((double)x[i]) > (double)m) m = (real)fabs((double)x[i]);
    return m;
}

static real clampr(real v, real lo, real hi) { return v < lo ? lo : (v > hi ? hi : v); }

void X(dsv4q_act_quant)(real *x, long rows, long n, int block, int ue8m0)
{
    for (long r = 0; r < rows; r++)
        for (long b0 = 0; b0 < n; b0 += block) {
            real *v = x + r * n + b0;
            long len = n - b0 < block ? n - b0 : block;
            real s = fp8_scale(block_amax(v, len), ue8m0);
            for (long i = 0; i < len; i++)
                v[i] = (real)dsv4q_e4m3_decode(dsv4q_e4m3_encode((double)clampr(v[i] / s, -448, 448), 1)) * s;
        }
}

void X(dsv4q_act_quant_codes)(const real *x, long n, int block, int ue8m0, real *q, real *s)
{
    for (long b0 = 0, kb = 0; b0 < n; b0 += block, kb++) {
        long len = n - b0 < block ? n - b0 : block;
        real sc = fp8_scale(block_amax(x + b0, len), ue8m0);
        s[kb] = sc;
        for (long i = 0; i < len; i++)
            q[b0 + i] = (real)dsv4q_e4m3_decode(dsv4q_e4m3_encode((double)clampr(x[b0 + i] / sc, -448, 448), 1));
    }
}

/* Engine point act_q8_0: GGML's quantize_row_q8_0_ref + dequantize. The
 * point's DEFINITION is GGML's binary32 arithmetic, at both widths (as
 * rope_table_f32 defines FP32 angles): x as binary32, d = amax/127, id =
 * 1/d (0 when d = 0), q = roundf(x*id) (half away from zero), value = q *
 * F16(d); q is computed with the unrounded d, as GGML does. Computing d
 * and x*id in binary64 instead would move q across the many exact .5 ties
 * that BF16 inputs produce (x*127/amax), and the level (f32 vs f64) would
 * measure that ambiguity instead of the GEMM's rounding. */
void X(dsv4q_q8_0_quant)(real *x, long n)
{
    for (long b0 = 0; b0 < n; b0 += 32) {
        real *v = x + b0;
        long len = n - b0 < 32 ? n - b0 : 32;
        float amax = 0;
        for (long i = 0; i < len; i++) {
            float a = fabsf((float)v[i]);
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        const real d16 = (real)dsv4q_f16_decode(dsv4q_f16_encode((double)d));
        for (long i = 0; i < len; i++) {
            float q = roundf((float)v[i] * id);
            q = q > 127 ? 127 : (q < -127 ? -127 : q);
            v[i] = (real)q * d16;
        }
    }
}

void X(dsv4q_q8_0_rne_quant)(real *x, long n)
{
    for (long b0 = 0; b0 < n; b0 += 32) {
        real *v = x + b0;
        long len = n - b0 < 32 ? n - b0 : 32;
        float amax = 0;
        for (long i = 0; i < len; i++) {
            float a = fabsf((float)v[i]);
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        for (long i = 0; i < len; i++) {
            float q = rintf((float)v[i] * id); /* the default mode: ties to even */
            q = q > 127 ? 127 : (q < -127 ? -127 : q);
            v[i] = (real)(q * d);
        }
    }
}

void X(dsv4q_q8_k_quant)(real *x, long n)
{
    for (long b0 = 0; b0 < n; b0 += 256) {
        real *v = x + b0;
        long len = n - b0 < 256 ? n - b0 : 256;
        float amax = 0, m = 0;
        for (long i = 0; i < len; i++) {
            float a = fabsf((float)v[i]);
            if (a > amax) {
                amax = a;
                m = (float)v[i];
            } /* the first largest, signed */
        }
        if (amax == 0) {
            for (long i = 0; i < len; i++) v[i] = 0;
            continue;
        }
        const float is = -127.0f / m, d = 1.0f / is;
        for (long i = 0; i < len; i++) {
            float q = rintf((float)v[i] * is);
            if (q > 127) q = 127; /* GGML clamps the top only: -127 * (m/|m|) is the far end */
            v[i] = (real)(q * d);
        }
    }
}

int X(dsv4q_engine_act_quant)(uint64_t bs, int quant, real *x, long n)
{
    if (!dsv4q_engine_act_q_applies(bs, quant)) return 0;
    if ((bs >> DSV4Q_B_ACT_Q8_0) & 1u) X(dsv4q_q8_0_quant)(x, n);
    else if ((bs >> DSV4Q_B_ACT_Q8_0_RNE) & 1u) X(dsv4q_q8_0_rne_quant)(x, n);
    else if ((bs >> DSV4Q_B_ACT_Q8_K) & 1u) X(dsv4q_q8_k_quant)(x, n);
    else return 0;
    return 1;
}

void X(dsv4q_fp4_act_quant)(real *x, long rows, long n)
{
    const double floor_amax = 6.0 * ldexp(1.0, -126);
    for (long r = 0; r < rows; r++)
        for (long b0 = 0; b0 < n; b0 += 32) {
            real *v = x + r * n + b0;
            long len = n - b0 < 32 ? n - b0 : 32;
            double amax = (double)block_amax(v, len);
            if (amax < floor_amax) amax = floor_amax;
            real s = (real)ldexp(1.0, dsv4q_ceil_log2_ratio(amax, 6.0));
            for (long i = 0; i < len; i++)
                v[i] = (real)dsv4q_e2m1_decode(dsv4q_e2m1_encode((double)clampr(v[i] / s, -6, 6))) * s;
        }
}

void X(dsv4q_hadamard)(uint64_t bs, real *x, long rows, long n)
{
    const real norm = RC(1.0 / sqrt((double)n));
    for (long r = 0; r < rows; r++) {
        real *v = x + r * n;
        /* Sylvester order: butterflies over strides 1, 2, 4, ... */
        for (long h = 1; h < n; h *= 2)
            for (long i = 0; i < n; i += 2 * h)
                for (long j = i; j < i + h; j++) {
                    real a = v[j], b = v[j + h];
                    v[j] = a + b;
                    v[j + h] = a - b;
                }
        for (long i = 0; i < n; i++) v[i] = rb(bs, DSV4Q_B_HADAMARD_BF16, v[i] * norm);
    }
}
