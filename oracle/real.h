/*
 * real.h - the one switch between the two oracle instances.
 *
 * Every width-dependent oracle source includes this header and is compiled
 * twice (-DDSV4Q_WIDTH=32 and =64, see Makefile). The vocabulary is
 * oracle/width.h's: `real` is the working type and X(name) mangles a
 * symbol to name_f32 / name_f64, so both instances link into one binary
 * and cannot drift: there is one source. This header adds what only
 * width-compiled code needs (the libm choice, BF16/F16 rounding helpers,
 * the fixed-order dot products). Constants are written as double
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

#if !defined(DSV4Q_WIDTH) || (DSV4Q_WIDTH != 32 && DSV4Q_WIDTH != 64)
#error "DSV4Q_WIDTH must be 32 or 64 (set by the Makefile)"
#endif
#undef DSV4Q_W
#define DSV4Q_W DSV4Q_WIDTH
#include "oracle/width.h"   /* real, X(name), R_NAME */

#if DSV4Q_WIDTH == 32
#define R_EXP(v) dsv4q_expf(v)
#define R_LOG1P(v) dsv4q_log1pf(v)
#define R_SQRT(v) sqrtf(v)
#else
#define R_EXP(v) dsv4q_exp(v)
#define R_LOG1P(v) dsv4q_log1p(v)
#define R_SQRT(v) sqrt(v)
#endif

#define RC(c) ((real)(c))

/* Round a working value to BF16 and back (one RNE rounding). */
static inline real rbf16(real v)
{
#if DSV4Q_WIDTH == 32
    return dsv4q_bf16_to_f32(dsv4q_bf16_from_f32(v));
#else
    /* Fast path for normal BF16 magnitudes [2^-126, 2^127]: RNE on the
     * binary64 pattern keeps 7 fraction bits (bit 45 up); a carry moves
     * into the exponent as it should. One rounding, like the slow path,
     * which handles subnormals, overflow, inf and NaN. */
    uint64_t u;
    __builtin_memcpy(&u, &v, 8);
    uint64_t e = (u >> 52) & 0x7FF;
    if (e >= 1023 - 126 && e <= 1023 + 127) {
        u += 0xFFFFFFFFFFFull + ((u >> 45) & 1);   /* half - 1 + lsb */
        u &= ~0x1FFFFFFFFFFFull;
        if (((u >> 52) & 0x7FF) <= 1023 + 127) {
            double r;
            __builtin_memcpy(&r, &u, 8);
            return r;
        }
    }
    return (real)dsv4q_bf16_to_f32(dsv4q_bf16_encode(v));
#endif
}

/* Round a working value to F16 (IEEE binary16) and back: one RNE rounding
 * at both widths (float -> double is exact), overflow -> inf. */
static inline real rf16(real v) { return (real)dsv4q_f16_decode(dsv4q_f16_encode((double)v)); }

/* 1 if boundary b rounds to F16 rather than BF16 in set bs: a storage
 * boundary while the engine point act_f16 is declared. */
static inline int rb_is_f16(uint64_t bs, int b)
{
    return b >= DSV4Q_B_RESID_BF16 && b <= DSV4Q_B_MOE_BF16 && ((bs >> DSV4Q_B_ACT_F16) & 1u);
}

/* Round to BF16 only when boundary b is on in set `bs` (to F16 instead for
 * a storage boundary under act_f16). */
static inline real rb(uint64_t bs, int b, real v)
{
    if (!((bs >> b) & 1u)) return v;
    return rb_is_f16(bs, b) ? rf16(v) : rbf16(v);
}

/* Round a whole array in place when boundary b is on. */
static inline void rb_arr(uint64_t bs, int b, real *v, long n)
{
    if (!((bs >> b) & 1u)) return;
    if (rb_is_f16(bs, b)) {
        for (long i = 0; i < n; i++) v[i] = rf16(v[i]);
        return;
    }
    for (long i = 0; i < n; i++) v[i] = rbf16(v[i]);
}

/* Round to binary32 (the FP32 steps of the source profile). */
static inline real rf32(real v) { return (real)(float)v; }

/*
 * Dot product in a fixed order: 8 interleaved partial sums (lane l takes
 * elements i with i % 8 == l), combined as ((0+4)+(2+6))+((1+5)+(3+7)),
 * then the tail. The lanes are GCC/Clang vector-extension types: every
 * lane is an ordinary IEEE multiply and add (no FMA: -ffp-contract=off),
 * lowered to SSE2/AVX on x86-64 and NEON on ARM, so the result is the same
 * on every instruction set and thread count; only the speed differs.
 */
typedef real rvec __attribute__((vector_size(16)));   /* 2 doubles or 4 floats */
#define RV_L ((int)(16 / sizeof(real)))                 /* lanes per vector */
#define RV_N (8 / RV_L)                                 /* vectors per 8-lane block */

static inline rvec rvec_load(const real *p)
{
    rvec v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

/* The fixed combine tree over the 8 lane sums. */
static inline real rlanes_combine(const real *s)
{
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* One 8-lane block step: acc[v] += a[v] * b[v] for the RV_N vectors of
 * the block, written out so the accumulators stay in registers. */
#if DSV4Q_WIDTH == 32
#define RV_STEP(acc, a, b)                                                        \
    do {                                                                          \
        (acc)[0] += rvec_load(a) * rvec_load(b);                                  \
        (acc)[1] += rvec_load((a) + 4) * rvec_load((b) + 4);                      \
    } while (0)
#else
#define RV_STEP(acc, a, b)                                                        \
    do {                                                                          \
        (acc)[0] += rvec_load(a) * rvec_load(b);                                  \
        (acc)[1] += rvec_load((a) + 2) * rvec_load((b) + 2);                      \
        (acc)[2] += rvec_load((a) + 4) * rvec_load((b) + 4);                      \
        (acc)[3] += rvec_load((a) + 6) * rvec_load((b) + 6);                      \
    } while (0)
#endif

static inline real rdot(const real *a, const real *b, long n)
{
    const long nb = n / 8;
    rvec acc[RV_N];
    real s[8];
    for (int v = 0; v < RV_N; v++) acc[v] = (rvec){0};
    for (long blk = 0; blk < nb; blk++) RV_STEP(acc, a + blk * 8, b + blk * 8);
    __builtin_memcpy(s, acc, sizeof s);
    real t = rlanes_combine(s);
    for (long i = nb * 8; i < n; i++) t += a[i] * b[i];
    return t;
}

/* rdot of one row a against two vectors b0, b1: each result is computed
 * with exactly the operations of rdot(a, bj, n). */
static inline void rdot2(const real *a, const real *b0, const real *b1, long n, real *r0, real *r1)
{
    const long nb = n / 8;
    rvec c0[RV_N], c1[RV_N];
    real s0[8], s1[8];
    for (int v = 0; v < RV_N; v++) c0[v] = c1[v] = (rvec){0};
    for (long blk = 0; blk < nb; blk++) {
        RV_STEP(c0, a + blk * 8, b0 + blk * 8);
        RV_STEP(c1, a + blk * 8, b1 + blk * 8);
    }
    __builtin_memcpy(s0, c0, sizeof s0);
    __builtin_memcpy(s1, c1, sizeof s1);
    real t0 = rlanes_combine(s0), t1 = rlanes_combine(s1);
    for (long i = nb * 8; i < n; i++) {
        t0 += a[i] * b0[i];
        t1 += a[i] * b1[i];
    }
    *r0 = t0;
    *r1 = t1;
}

/* Sum of squares in the same fixed order. */
static inline real rsumsq(const real *a, long n) { return rdot(a, a, n); }

#endif
