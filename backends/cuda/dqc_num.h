/*
 * dqc_num.h - the number formats and rounding rules of the reference, as
 * __host__ __device__ functions, plus the warp/block reductions.
 *
 * These are the places where a kernel set most often goes quietly wrong, so
 * each one is written as an exact rule, not a float approximation:
 *  - BF16: integer round-to-nearest-even on the dropped 16 bits.
 *  - E4M3 / E2M1: RNE on the format's grid by scaling with an exact power
 *    of two, rintf, and scaling back (no table, no float log).
 *  - ue8m0 scales: the smallest 2^e with fmax*2^e >= amax, found by exact
 *    comparisons (NOT ceil(log2f(amax/448)), which is off by one just above
 *    448*2^k: the failure mode the harness looks for).
 * The host instances of the same functions are exported through
 * dsv4q_cuda_debug() so CI checks them against oracle/formats.c.
 *
 * Elementary functions: exp is evaluated as (float)exp((double)x), i.e.
 * the device's double exp rounded once, which is what the oracle's FP32
 * instance does (dsv4q_expf); the float intrinsics (__expf) are not used.
 */
#ifndef DQC_NUM_H
#define DQC_NUM_H

#include "backends/cuda/dqc_rt.h"

DQC_HD uint32_t dqc_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

DQC_HD float dqc_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* 2^e as a float, e in [-126, 127] (exact). */
DQC_HD float dqc_pow2f(int e) { return dqc_u2f((uint32_t)(e + 127) << 23); }

/* Round to BF16 and back (RNE; NaN stays NaN). */
DQC_HD float dqc_bf16r(float v)
{
    if (v != v) return v;
    uint32_t u = dqc_f2u(v);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return dqc_u2f(u & 0xFFFF0000u);
}

/* BF16 code of a value (host side: output packing). */
DQC_HD uint16_t dqc_bf16_code(float v)
{
    if (v != v) return 0x7FC0;
    return (uint16_t)(dqc_f2u(dqc_bf16r(v)) >> 16);
}

/* Round if boundary b is in set bs. */
DQC_HD float dqc_rb(uint64_t bs, int b, float v) { return ((bs >> b) & 1u) ? dqc_bf16r(v) : v; }

/* RNE of a finite v onto the grid with `mbits` mantissa bits and minimum
 * normal exponent emin (no maximum: callers clamp first). Exact: the
 * scalings are by powers of two within the float range, rintf is the one
 * rounding. Valid for emin >= -100 and |v| < 2^100 (E4M3, E2M1). */
DQC_HD float dqc_round_grid(float v, int mbits, int emin)
{
    if (v == 0.0f || !(v - v == 0.0f)) return v;   /* keeps -0, inf, NaN */
    int e = (int)((dqc_f2u(v) >> 23) & 255u) - 127; /* subnormal -> -127 */
    if (e < emin) e = emin;
    const int q = e - mbits;
    return rintf(v * dqc_pow2f(-q)) * dqc_pow2f(q);
}

/* E4M3fn value of an already clamped |v| <= 448 (saturating). */
DQC_HD float dqc_e4m3r(float v)
{
    float r = dqc_round_grid(v, 3, -6);
    if (r > 448.0f) r = 448.0f;
    if (r < -448.0f) r = -448.0f;
    return r;
}

/* E2M1 value of an already clamped |v| <= 6; NaN -> +6 (the oracle's
 * satfinite convention for a format without NaN). */
DQC_HD float dqc_e2m1r(float v)
{
    if (v != v) return 6.0f;
    float r = dqc_round_grid(v, 1, 0);
    if (r > 6.0f) r = 6.0f;
    if (r < -6.0f) r = -6.0f;
    return r;
}

/* Decoders of stored codes. */
DQC_HD float dqc_e4m3_decode(uint8_t c)
{
    const uint32_t e = (c >> 3) & 15u, m = c & 7u;
    float v;
    if ((c & 0x7Fu) == 0x7Fu) return dqc_u2f(0x7FC00000u | ((uint32_t)(c & 0x80u) << 24));
    if (e == 0) v = (float)m * 0x1p-9f;
    else v = dqc_u2f(((e + 120u) << 23) | (m << 20));   /* (1+m/8) * 2^(e-7) */
    return (c & 0x80u) ? -v : v;
}

DQC_HD float dqc_e2m1_decode(uint32_t nib)
{
    const uint32_t e = (nib >> 1) & 3u, m = nib & 1u;
    float v = e == 0 ? (float)m * 0.5f : dqc_u2f(((e + 126u) << 23) | (m << 22)); /* (1+m/2)*2^(e-1) */
    return (nib & 8u) ? -v : v;
}

DQC_HD float dqc_bf16_decode(uint16_t c) { return dqc_u2f((uint32_t)c << 16); }

/* Smallest e with fmax * 2^e >= amax (amax > 0 finite; exact). */
DQC_HD int dqc_ceil_log2_ratio(double amax, double fmax)
{
    int e;
    frexp(amax / fmax, &e);
    while (ldexp(fmax, e) < amax) e++;
    while (ldexp(fmax, e - 1) >= amax) e--;
    return e;
}

/* act_quant scale of a block (kernel.py act_quant_kernel). */
DQC_HD float dqc_fp8_scale(float amax, int ue8m0)
{
    if (amax < 1e-4f) amax = 1e-4f;
    if (ue8m0) return (float)ldexp(1.0, dqc_ceil_log2_ratio((double)amax, 448.0));
    return amax * (float)(1.0 / 448.0);
}

/* fp4_quant scale of a 32-block (kernel.py fp4_quant_kernel). */
DQC_HD float dqc_fp4_scale(float amax_f)
{
    double amax = (double)amax_f;
    const double floor_amax = 6.0 * 0x1p-126;
    if (amax < floor_amax) amax = floor_amax;
    return (float)ldexp(1.0, dqc_ceil_log2_ratio(amax, 6.0));
}

DQC_HD float dqc_clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* One exp as the oracle's FP32 instance rounds it. */
DQC_HD float dqc_expf(float x) { return (float)exp((double)x); }
DQC_HD float dqc_sigmoid(float z) { return 1.0f / (1.0f + dqc_expf(-z)); }

/* --- reductions (device) ------------------------------------------------- */

template <class T>
DQC_D T dqc_warp_sum(T v)
{
    for (int m = 16; m; m >>= 1) v += dqc_shfl_xor(v, m);
    return v;
}

DQC_D float dqc_warp_max(float v)
{
    for (int m = 16; m; m >>= 1) v = fmaxf(v, dqc_shfl_xor(v, m));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32; every thread calls it;
 * every thread gets the result). Fixed tree: deterministic. */
template <class T>
__device__ T dqc_block_sum(T v)
{
    DQC_SHARED(T, red, 32);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = dqc_warp_sum(v);
    __syncthreads();   /* red may still be read by a previous call */
    if (lane == 0) red[wid] = v;
    __syncthreads();
    if (wid == 0) {
        T r = lane < nw ? red[lane] : (T)0;
        r = dqc_warp_sum(r);
        if (lane == 0) red[0] = r;
    }
    __syncthreads();
    return red[0];
}

#endif
