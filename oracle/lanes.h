/*
 * lanes.h - rdot's 8 lanes as ONE vector, and 8-wide E4M3 / E2M1 loads,
 * for the linear kernels (oracle/linear.c only).
 *
 * rdot (real.h) keeps 8 interleaved partial sums in 16-byte vectors; here
 * the same 8 sums are one `lvec` (64 bytes at f64, 32 at f32). Each lane is
 * still an ordinary IEEE multiply, then add (-ffp-contract=off), in the same
 * order, so ldot(a, b, n) == rdot(a, b, n) bit for bit whatever registers
 * the compiler lowers lvec to: 1 zmm (AVX-512), 4 xmm (SSE2), 4 NEON q
 * (aarch64). linear.c compiles its row kernel once per x86 ISA.
 * Every helper is always_inline: it must be compiled with the ISA of the
 * kernel that uses it, and lvec must never cross a call (ABI).
 */
#ifndef DSV4Q_LANES_H
#define DSV4Q_LANES_H

#include <string.h>
#include "oracle/real.h"

#define LANES_AI static inline __attribute__((always_inline))
/* GCC and Clang warn that a 32/64-byte vector argument's ABI depends on -mavx;
 * these helpers are always inlined, so no such call exists. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef real lvec __attribute__((vector_size(8 * sizeof(real))));  /* rdot's 8 lanes */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lanes.h: the code loads below assume little-endian byte order"
#endif

LANES_AI lvec lv_load(const real *p)
{
    lvec v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* rdot's combine tree ((0+4)+(2+6))+((1+5)+(3+7)) over the 8 lane sums,
 * as halvings: lanes j + j+4, then j + j+2, then 0 + 1 (same additions,
 * same operand order, fewer shuffles than lane by lane). Pointer
 * argument: a 32/64-byte vector passed by value draws GCC's ABI note
 * under baseline x86-64 even when the call is inlined. */
typedef real qvec __attribute__((vector_size(4 * sizeof(real))));
typedef real dvec __attribute__((vector_size(2 * sizeof(real))));
LANES_AI real lv_sum(const lvec *acc)
{
    qvec a, b;
    dvec c, d;
    memcpy(&a, acc, sizeof a);
    memcpy(&b, (const char *)acc + sizeof a, sizeof b);
    const qvec q = a + b;
    memcpy(&c, &q, sizeof c);
    memcpy(&d, (const char *)&q + sizeof c, sizeof d);
    const dvec e = c + d;
    return e[0] + e[1];
}

/* 8 E4M3 codes at p -> lanes, from t8 = dsv4q_e4m3_table(): 8 independent
 * loads straight into the register, no row buffer. (Building the bits
 * with integer vector ops instead was measured slower: see docs/bench.md.) */
LANES_AI lvec e4m3_load8(const uint8_t *p, const double *t8)
{
    return (lvec){(real)t8[p[0]], (real)t8[p[1]], (real)t8[p[2]], (real)t8[p[3]],
                  (real)t8[p[4]], (real)t8[p[5]], (real)t8[p[6]], (real)t8[p[7]]};
}

/* 8 E2M1 values from the 4 packed bytes at p (low nibble = even index),
 * from t4 = dsv4q_e2m1_pair_table(). */
LANES_AI lvec e2m1_load8(const uint8_t *p, const double *t4)
{
    return (lvec){(real)t4[2 * p[0]], (real)t4[2 * p[0] + 1], (real)t4[2 * p[1]], (real)t4[2 * p[1] + 1],
                  (real)t4[2 * p[2]], (real)t4[2 * p[2] + 1], (real)t4[2 * p[3]], (real)t4[2 * p[3] + 1]};
}

/* The 16 E2M1 values (t4: dsv4q_e2m1_pair_table) as two lane vectors:
 * codes 0-7 and 8-15, for e2m1_perm8. */
typedef struct { lvec lo, hi; } e2m1_regs;
LANES_AI e2m1_regs e2m1_regs_of(const double *t4)
{
    e2m1_regs r;
    real v[16];
    for (int c = 0; c < 16; c++) v[c] = (real)t4[2 * c];   /* low nibble of byte c = c */
    memcpy(&r.lo, v, sizeof r.lo);
    memcpy(&r.hi, v + 8, sizeof r.hi);
    return r;
}

/* e2m1_load8 without memory lookups, for the AVX-512 kernel: each lane
 * shifts its nibble out of one broadcast word and a two-register permute
 * (vpermt2pd) picks that lane's value from the 16 table values. The
 * shuffle index is taken modulo 16 (GCC's __builtin_shuffle rule, the
 * instruction's, and the explicit mask of the Clang path), so the bits above the nibble need no masking. The same
 * values as the table, by construction. */
#if DSV4Q_WIDTH == 32
typedef uint32_t lidx __attribute__((vector_size(32)));
#else
typedef uint64_t lidx __attribute__((vector_size(64)));
#endif
LANES_AI lvec e2m1_perm8(const uint8_t *p, const e2m1_regs *r)
{
    uint32_t w;
    memcpy(&w, p, 4);
    const lidx n = ((lidx){0} + w) >> (lidx){0, 4, 8, 12, 16, 20, 24, 28};
#if defined(__clang__)
    /* Clang has no variable two-vector shuffle builtin: pick lane by lane
     * (the same table values; the compiler may still emit a permute). */
    lvec v;
    for (int i = 0; i < 8; i++) {
        const unsigned c = (unsigned)n[i] & 15u;
        v[i] = c < 8 ? r->lo[c] : r->hi[c - 8];
    }
    return v;
#else
    return __builtin_shuffle(r->lo, r->hi, n);
#endif
}

/* rdot(a, b, n) with the 8 lanes in one vector: the same operations. */
LANES_AI real ldot(const real *a, const real *b, long n)
{
    const long nb = n / 8;
    lvec acc = {0};
    for (long blk = 0; blk < nb; blk++) acc += lv_load(a + blk * 8) * lv_load(b + blk * 8);
    real t = lv_sum(&acc);
    for (long i = nb * 8; i < n; i++) t += a[i] * b[i];
    return t;
}

/* rdot2 (real.h): one row a against b0 and b1, each exactly rdot's result. */
LANES_AI void ldot2(const real *a, const real *b0, const real *b1, long n, real *r0, real *r1)
{
    const long nb = n / 8;
    lvec c0 = {0}, c1 = {0};
    for (long blk = 0; blk < nb; blk++) {
        const lvec w = lv_load(a + blk * 8);
        c0 += w * lv_load(b0 + blk * 8);
        c1 += w * lv_load(b1 + blk * 8);
    }
    real t0 = lv_sum(&c0), t1 = lv_sum(&c1);
    for (long i = nb * 8; i < n; i++) {
        t0 += a[i] * b0[i];
        t1 += a[i] * b1[i];
    }
    *r0 = t0;
    *r1 = t1;
}

#endif
