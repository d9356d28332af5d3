/*
 * kv41.c - V4.1's compressed-KV codec: E2M1 values, one E4M3 scale per 16.
 *
 * Owns the rule of oracle/ops41.inc (the reference's
 * fp4_act_quant(latent, 16, True, scale_dtype=torch.float8_e4m3fn) on the
 * post-RoPE compressed latent). It differs from V4's FP4 quantizer
 * (quant.c dsv4q_fp4_act_quant, blocks of 32, power-of-two E8M0 scales) in
 * three ways that each change bits: the block is 16; the scale is a/6
 * ROUNDED to E4M3 (3 mantissa bits), not rounded UP to a power of two, so
 * x/s is no longer exact and the block maximum can land above 6 (it
 * saturates) or between grid points; and the amax floor is 6*2^-9 (the
 * scale never drops below E4M3's smallest subnormal, so a zero block still
 * has a nonzero scale) instead of 6*2^-126.
 *
 * Width: the two divisions (a/6 and x/s) are at the working width, as the
 * kernel does them in FP32; at f64 they are the float64 golden's. Every
 * other step is exact: E4M3 and E2M1 codes are dyadic, and code * scale has
 * at most 5 significant bits, exact in binary32.
 *
 * Edge chosen where the reference is not explicit: a quotient a/6 above 448
 * (amax above 2688) saturates to the scale 448 (the kernel's satfinite
 * conversion); torch's plain .to(float8_e4m3fn) would give NaN from 464 up.
 * Real latents are RMS-normalised and far below this.
 */
#include <math.h>
#include "oracle/real.h"
#include "oracle/ops41.h"

static real amax_of(const real *x, long n)
{
    real m = 0;
    for (long i = 0; i < n; i++)
        if (fabs((double)x[i]) > (double)m) m = (real)fabs((double)x[i]);
    return m;
}

uint8_t X(dsv4q_kv41_scale)(real amax)
{
    real a = amax;
    if (!(a >= RC(DSV4Q_KV41_AMAX_FLOOR))) a = RC(DSV4Q_KV41_AMAX_FLOOR);   /* also NaN-safe */
    const real q = a / RC(6.0);                                               /* working width */
    return dsv4q_e4m3_encode((double)q, 1);                                   /* RNE, saturate at 448 */
}

static void encode_block(const real *x, long len, uint8_t *codes, uint8_t *scale)
{
    const uint8_t sc = X(dsv4q_kv41_scale)(amax_of(x, len));
    const real s = (real)dsv4q_e4m3_decode(sc);
    for (long i = 0; i < len; i++) {
        real v = x[i] / s;   /* working width */
        v = v < RC(-6.0) ? RC(-6.0) : (v > RC(6.0) ? RC(6.0) : v);
        codes[i] = dsv4q_e2m1_encode((double)v);
    }
    *scale = sc;
}

void X(dsv4q_kv41_encode)(const real *x, long n, uint8_t *packed, uint8_t *scales)
{
    for (long b = 0; b * DSV4Q_KV41_BLOCK < n; b++) {
        uint8_t c[DSV4Q_KV41_BLOCK];
        encode_block(x + b * DSV4Q_KV41_BLOCK, DSV4Q_KV41_BLOCK, c, &scales[b]);
        for (int i = 0; i < DSV4Q_KV41_BLOCK; i += 2)
            packed[(b * DSV4Q_KV41_BLOCK + i) / 2] = (uint8_t)(c[i] | (c[i + 1] << 4));
    }
}

void X(dsv4q_kv41_decode)(const uint8_t *packed, const uint8_t *scales, long n, real *y)
{
    for (long i = 0; i < n; i++) {
        const double s = dsv4q_e4m3_decode(scales[i / DSV4Q_KV41_BLOCK]);
        y[i] = (real)(dsv4q_e2m1_decode(dsv4q_e2m1_nibble(packed, (size_t)i)) * s);
    }
}

void X(dsv4q_kv41_quant)(real *x, long rows, long n)
{
    for (long r = 0; r < rows; r++)
        for (long b0 = 0; b0 < n; b0 += DSV4Q_KV41_BLOCK) {
            real *v = x + r * n + b0;
            uint8_t c[DSV4Q_KV41_BLOCK], sc;
            encode_block(v, DSV4Q_KV41_BLOCK, c, &sc);
            const double s = dsv4q_e4m3_decode(sc);
            for (int i = 0; i < DSV4Q_KV41_BLOCK; i++) v[i] = (real)(dsv4q_e2m1_decode(c[i]) * s);
        }
}
