/*
 * cpuref_formats.c - cpu-ref's number-format helpers: decode lookup tables
 * (built once from the format definitions of oracle/formats.h), bit-level
 * E4M3 / E2M1 rounding and the power-of-two (ue8m0) scale rule.
 *
 * The scale rule works on amax's bits: with amax = (1+m)*2^E and
 * fmax = (1+f)*2^F, the smallest e with fmax*2^e >= amax is E-F when
 * m <= f and E-F+1 otherwise. No log2, no division: exact for every amax.
 * The mutant ue8m0_log2f replaces it by ceilf(log2f(amax/448)), the
 * shortcut that rounds log2 down to k just above 448*2^k (|k| >= 4).
 */
#include <math.h>
#include <pthread.h>
#include "backends/cpuref/kernels.h"
#include "oracle/formats.h"

float cpuref_e4m3_lut[256];
float cpuref_e2m1_lut[256][2];
float cpuref_int4_lut[256][2];

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void)
{
    for (int c = 0; c < 256; c++) cpuref_e4m3_lut[c] = (float)dsv4q_e4m3_decode((uint8_t)c);
    for (int b = 0; b < 256; b++) {
        cpuref_e2m1_lut[b][0] = (float)dsv4q_e2m1_decode((uint8_t)(b & 0xF));
        cpuref_e2m1_lut[b][1] = (float)dsv4q_e2m1_decode((uint8_t)(b >> 4));
        /* the byte taken as int8, split into its two's-complement nibbles */
        int8_t sb = (int8_t)b;
        cpuref_int4_lut[b][0] = (float)(int8_t)((uint8_t)(b << 4)) / 16.0f;
        cpuref_int4_lut[b][1] = (float)(sb >> 4);
    }
}

void cpuref_tables_init(void) { pthread_once(&once, build); }

float cpuref_e4m3_round(float v)
{
    float a = fabsf(v), r;
    if (a < 0x1p-6f) {
        r = rintf(a * 512.0f) * (1.0f / 512.0f);          /* subnormal grid 2^-9 */
    } else {
        uint32_t u = cpuref_f_bits(a);
        u += 0x7FFFFu + ((u >> 20) & 1u);                 /* keep 3 mantissa bits, RNE */
        r = cpuref_bits_f(u & 0xFFF00000u);
    }
    return copysignf(r, v);
}

float cpuref_e2m1_round(float v)
{
    /* grid {0, .5, 1, 1.5, 2, 3, 4, 6}; midpoints go to the even mantissa:
     * .25->0, .75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4 */
    float a = fabsf(v), r;
    if (a <= 0.25f) r = 0.0f;
    else if (a < 0.75f) r = 0.5f;
    else if (a <= 1.25f) r = 1.0f;
    else if (a < 1.75f) r = 1.5f;
    else if (a <= 2.5f) r = 2.0f;
    else if (a < 3.5f) r = 3.0f;
    else if (a <= 5.0f) r = 4.0f;
    else r = 6.0f;
    return copysignf(r, v);
}

float cpuref_pow2_scale(float amax, uint32_t fmax_mant, int fmax_exp)
{
    uint32_t u = cpuref_f_bits(amax);
    int E = (int)((u >> 23) & 0xFF) - 127;
    int e = E - fmax_exp + ((u & 0x7FFFFFu) > fmax_mant);
    return ldexpf(1.0f, e);
}

float cpuref_fp8_scale(float amax, int ue8m0, int mut)
{
    if (amax < 1e-4f) amax = 1e-4f;
    if (!ue8m0) return amax * (1.0f / 448.0f);
    if (mut == CPUREF_M_UE8M0_LOG2F) return exp2f(ceilf(log2f(amax / 448.0f)));
    return cpuref_pow2_scale(amax, 0x600000u, 8);   /* 448 = 1.75 * 2^8 */
}
