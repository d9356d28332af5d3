/*
 * real.h - the one switch between the two oracle instances.
 *
 * Every width-dependent oracle source includes this header and is compiled
 * twice (-DDSV4Q_WIDTH=32 and =64, see Makefile). `real` is the working
 * type and X(name) mangles a symbol to name_f32 / name_f64, so both
 * instances link into one binary and cannot drift: there is one source.
 * (The FFTW precision-build pattern.) Constants are written as double
 * literals and converted once with RC(), so the f32 instance rounds a
 * constant exactly as a float literal would.
 */
#ifndef DSV4Q_REAL_H
#define DSV4Q_REAL_H

#include <math.h>
#include <stdint.h>
#include "oracle/formats.h"
#include "oracle/dmath.h"
#include "oracle/boundary.h"

#if !defined(DSV4Q_WIDTH)
#error "DSV4Q_WIDTH must be 32 or 64 (set by the Makefile)"
#elif DSV4Q_WIDTH == 32
typedef float real;
#define X(name) name##_f32
#define R_EXP(v) dsv4q_expf(v)
#define R_LOG1P(v) dsv4q_log1pf(v)
#define R_SQRT(v) sqrtf(v)
#define R_NAME "f32"
#elif DSV4Q_WIDTH == 64
typedef double real;
#define X(name) name##_f64
#define R_EXP(v) dsv4q_exp(v)
#define R_LOG1P(v) dsv4q_log1p(v)
#define R_SQRT(v) sqrt(v)
#define R_NAME "f64"
#else
#error "DSV4Q_WIDTH must be 32 or 64"
#endif

#define RC(c) ((real)(c))

/* Round a working value to BF16 and back (one RNE rounding). */
static inline real rbf16(real v)
{
#if DSV4Q_WIDTH == 32
    return dsv4q_bf16_to_f32(dsv4q_bf16_from_f32(v));
#else
    return (real)dsv4q_bf16_to_f32(dsv4q_bf16_encode(v));
#endif
}

/* Round to BF16 only when boundary b is on in set `bs`. */
static inline real rb(uint64_t bs, int b, real v)
{
    return ((bs >> b) & 1u) ? rbf16(v) : v;
}

/* Round a whole array in place when boundary b is on. */
static inline void rb_arr(uint64_t bs, int b, real *v, long n)
{
    if (!((bs >> b) & 1u)) return;
    for (long i = 0; i < n; i++) v[i] = rbf16(v[i]);
}

/* Round to binary32 (the FP32 steps of the source profile). */
static inline real rf32(real v) { return (real)(float)v; }

/*
 * Dot product in a fixed order: 8 interleaved partial sums (lane l takes
 * elements i with i % 8 == l), combined as ((0+4)+(2+6))+((1+5)+(3+7)),
 * then the tail. The order is written out in C, so a compiler may put the
 * lanes in SIMD registers but may not reorder them (no -ffast-math): the
 * result is the same on every instruction set and thread count.
 */
static inline real rdot(const real *a, const real *b, long n)
{
    real s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const long nb = n / 8;
    for (long blk = 0; blk < nb; blk++)
        for (int l = 0; l < 8; l++) s[l] += a[blk * 8 + l] * b[blk * 8 + l];
    real t = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    for (long i = nb * 8; i < n; i++) t += a[i] * b[i];
    return t;
}

/* Sum of squares in the same fixed order. */
static inline real rsumsq(const real *a, long n) { return rdot(a, a, n); }

#endif
