/*
 * lanes.h - rdot's 8 lanes as register-sized vectors, and 8-wide E4M3 /
 * E2M1 / F32 loads, for the linear kernels (oracle/linear.c and its
 * linear_row.inc only).
 *
 * rdot (real.h) keeps 8 interleaved partial sums in 16-byte vectors; here
 * the same 8 sums are one `lvec` (64 bytes at f64, 32 at f32), two halves
 * (`lpair`) or four quarters (`lquad`), whichever fits the kernel's
 * registers. Each lane is still an ordinary IEEE multiply, then add
 * (-ffp-contract=off), in the same order, and every combine is rdot's
 * tree, so a dot is rdot's result bit for bit whatever representation and
 * registers the compiler lowers it to.
 * Every helper is always_inline: it must be compiled with the ISA of the
 * kernel that uses it, and a lane vector must never cross a call (ABI).
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
LANES_AI lvec e4m3_load8(const uint8_t *p, const real *t8)
{
    return (lvec){t8[p[0]], t8[p[1]], t8[p[2]], t8[p[3]], t8[p[4]], t8[p[5]], t8[p[6]], t8[p[7]]};
}

/* 8 E2M1 values from the 4 packed bytes at p (low nibble = even index),
 * from t4 = dsv4q_e2m1_pair_table(). */
LANES_AI lvec e2m1_load8(const uint8_t *p, const real *t4)
{
    return (lvec){t4[2 * p[0]], t4[2 * p[0] + 1], t4[2 * p[1]], t4[2 * p[1] + 1],
                  t4[2 * p[2]], t4[2 * p[2] + 1], t4[2 * p[3]], t4[2 * p[3] + 1]};
}

/* The 16 E2M1 values (t4: dsv4q_e2m1_pair_table) as two lane vectors:
 * codes 0-7 and 8-15, for e2m1_perm8. */
typedef struct { lvec lo, hi; } e2m1_regs;
LANES_AI e2m1_regs e2m1_regs_of(const real *t4)
{
    e2m1_regs r;
    real v[16];
    for (int c = 0; c < 16; c++) v[c] = t4[2 * c]; /* low nibble of byte c = c */
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

/* ---- The 8 lanes in three representations, one op set each ----
 * lv_: one 8-lane vector (AVX-512 at f64; AVX2 / AVX-512 at f32).
 * lp_: two 4-lane halves, lanes 0-3 and 4-7 (AVX2 at f64: two ymm).
 * lq_: four 2-lane quarters, lanes 0-1, 2-3, 4-5, 6-7 (SSE2 / NEON at f64).
 * GCC keeps a vector wider than the ISA's registers in memory (the reason
 * an AVX2 kernel over lvec measured 3-4x slower than SSE2); the split
 * types are structs of register-sized vectors, which it keeps in
 * registers. Every op is lane for lane the same IEEE operation, and every
 * sum is rdot's tree, so the three give identical bits. linear_row.inc is
 * written once over these ops (LN(op)). */
typedef struct {
    qvec lo, hi;
} lpair;
typedef struct {
    dvec q0, q1, q2, q3;
} lquad;

LANES_AI lvec lv_zero(void) { return (lvec){0}; }
/* madd(acc, a, b) = acc + a * b lane by lane; a macro, because a function
 * taking a 32/64-byte vector by value draws GCC's ABI note (see lv_sum). */
#define lv_madd(acc, a, b) ((acc) + (a) * (b))
LANES_AI void lv_store(real *p, const lvec *v) { memcpy(p, v, sizeof *v); }
LANES_AI lvec lv_e4m3(const uint8_t *p, const real *t8) { return e4m3_load8(p, t8); }
LANES_AI lvec lv_e2m1(const uint8_t *p, const real *t4) { return e2m1_load8(p, t4); }

/* 8 binary32 values at p (any alignment) -> lanes: widened exactly at f64.
 * The F32 weights' 1-token dot reads them straight into the lanes. */
typedef float f4v __attribute__((vector_size(16)));
typedef float f2v __attribute__((vector_size(8)));
typedef float f8v __attribute__((vector_size(32)));
LANES_AI lvec lv_f32(const unsigned char *p)
{
    f8v f;
    memcpy(&f, p, sizeof f);
    return __builtin_convertvector(f, lvec);
}

/* 8 E2M1 values from the 4 packed bytes at p (low nibble = even index) as
 * binary32 without table loads, for the AVX2 kernel: each lane shifts its
 * nibble out of one broadcast word, a one-register permute (vpermps) picks
 * |value| from the 8 magnitudes in *mag (codes 0-7, from e2m1_mag8), and
 * bit 3 of the code becomes the sign bit (E2M1 codes 8-15 are codes 0-7
 * negated, code 8 = -0). Every E2M1 value is exact in binary32. */
typedef uint32_t u8v __attribute__((vector_size(32)));
typedef int32_t i8v __attribute__((vector_size(32)));
LANES_AI f8v e2m1_mag8(const real *t4)
{
    f8v m;
    for (int c = 0; c < 8; c++) m[c] = (float)t4[2 * c]; /* low nibble of byte c = c */
    return m;
}
LANES_AI f8v e2m1_permf(const uint8_t *p, const f8v *mag)
{
    uint32_t w;
    memcpy(&w, p, 4);
    const u8v n = ((u8v){0} + w) >> (u8v){0, 4, 8, 12, 16, 20, 24, 28};
    f8v v;
#if defined(__clang__)
    for (int i = 0; i < 8; i++) v[i] = (*mag)[n[i] & 7u]; /* no variable one-vector shuffle builtin */
#else
    v = __builtin_shuffle(*mag, (i8v)(n & 7u));
#endif
    u8v bits;
    memcpy(&bits, &v, sizeof bits);
    bits ^= (n & 8u) << 28;
    memcpy(&v, &bits, sizeof v);
    return v;
}
LANES_AI lvec lv_from_f8(const f8v *v) { return __builtin_convertvector(*v, lvec); }
LANES_AI lpair lp_from_f8(const f8v *v)
{
    const f4v lo = __builtin_shufflevector(*v, *v, 0, 1, 2, 3), hi = __builtin_shufflevector(*v, *v, 4, 5, 6, 7);
    return (lpair){__builtin_convertvector(lo, qvec), __builtin_convertvector(hi, qvec)};
}
LANES_AI lquad lq_from_f8(const f8v *v)
{
    return (lquad){__builtin_convertvector(__builtin_shufflevector(*v, *v, 0, 1), dvec),
                   __builtin_convertvector(__builtin_shufflevector(*v, *v, 2, 3), dvec),
                   __builtin_convertvector(__builtin_shufflevector(*v, *v, 4, 5), dvec),
                   __builtin_convertvector(__builtin_shufflevector(*v, *v, 6, 7), dvec)};
}

LANES_AI lpair lp_zero(void) { return (lpair){{0}, {0}}; }
LANES_AI lpair lp_load(const real *p)
{
    lpair v;
    memcpy(&v.lo, p, sizeof v.lo);
    memcpy(&v.hi, p + 4, sizeof v.hi);
    return v;
}
LANES_AI void lp_store(real *p, const lpair *v)
{
    memcpy(p, &v->lo, sizeof v->lo);
    memcpy(p + 4, &v->hi, sizeof v->hi);
}
#define lp_madd(acc, a, b)                                                                                             \
    __extension__({                                                                                                    \
        const lpair a_ = (a), b_ = (b);                                                                                \
        (lpair){(acc).lo + a_.lo * b_.lo, (acc).hi + a_.hi * b_.hi};                                                   \
    })
LANES_AI real lp_sum(const lpair *acc) /* lanes j + j+4 (lo + hi), then as lv_sum */
{
    const qvec q = acc->lo + acc->hi;
    dvec c, d;
    memcpy(&c, &q, sizeof c);
    memcpy(&d, (const char *)&q + sizeof c, sizeof d);
    const dvec e = c + d;
    return e[0] + e[1];
}
LANES_AI lpair lp_e4m3(const uint8_t *p, const real *t8)
{
    return (lpair){{t8[p[0]], t8[p[1]], t8[p[2]], t8[p[3]]}, {t8[p[4]], t8[p[5]], t8[p[6]], t8[p[7]]}};
}
LANES_AI lpair lp_e2m1(const uint8_t *p, const real *t4)
{
    return (lpair){{t4[2 * p[0]], t4[2 * p[0] + 1], t4[2 * p[1]], t4[2 * p[1] + 1]},
                   {t4[2 * p[2]], t4[2 * p[2] + 1], t4[2 * p[3]], t4[2 * p[3] + 1]}};
}

LANES_AI lpair lp_f32(const unsigned char *p)
{
    f4v a, b;
    memcpy(&a, p, sizeof a);
    memcpy(&b, p + 16, sizeof b);
    return (lpair){__builtin_convertvector(a, qvec), __builtin_convertvector(b, qvec)};
}

LANES_AI lquad lq_zero(void) { return (lquad){{0}, {0}, {0}, {0}}; }
LANES_AI lquad lq_load(const real *p)
{
    lquad v;
    memcpy(&v.q0, p, sizeof v.q0);
    memcpy(&v.q1, p + 2, sizeof v.q1);
    memcpy(&v.q2, p + 4, sizeof v.q2);
    memcpy(&v.q3, p + 6, sizeof v.q3);
    return v;
}
LANES_AI void lq_store(real *p, const lquad *v)
{
    memcpy(p, &v->q0, sizeof v->q0);
    memcpy(p + 2, &v->q1, sizeof v->q1);
    memcpy(p + 4, &v->q2, sizeof v->q2);
    memcpy(p + 6, &v->q3, sizeof v->q3);
}
#define lq_madd(acc, a, b)                                                                                             \
    __extension__({                                                                                                    \
        const lquad a_ = (a), b_ = (b);                                                                                \
        (lquad){(acc).q0 + a_.q0 * b_.q0, (acc).q1 + a_.q1 * b_.q1, (acc).q2 + a_.q2 * b_.q2,                          \
                (acc).q3 + a_.q3 * b_.q3};                                                                             \
    })
LANES_AI real lq_sum(const lquad *acc) /* (0,1)+(4,5), (2,3)+(6,7), then j + j+2, then 0 + 1 */
{
    const dvec e = (acc->q0 + acc->q2) + (acc->q1 + acc->q3);
    return e[0] + e[1];
}
LANES_AI lquad lq_e4m3(const uint8_t *p, const real *t8)
{
    return (lquad){{t8[p[0]], t8[p[1]]}, {t8[p[2]], t8[p[3]]}, {t8[p[4]], t8[p[5]]}, {t8[p[6]], t8[p[7]]}};
}
LANES_AI lquad lq_e2m1(const uint8_t *p, const real *t4)
{
    return (lquad){{t4[2 * p[0]], t4[2 * p[0] + 1]},
                   {t4[2 * p[1]], t4[2 * p[1] + 1]},
                   {t4[2 * p[2]], t4[2 * p[2] + 1]},
                   {t4[2 * p[3]], t4[2 * p[3] + 1]}};
}

LANES_AI lquad lq_f32(const unsigned char *p)
{
    f2v a, b, c, d;
    memcpy(&a, p, sizeof a);
    memcpy(&b, p + 8, sizeof b);
    memcpy(&c, p + 16, sizeof c);
    memcpy(&d, p + 24, sizeof d);
    return (lquad){__builtin_convertvector(a, dvec), __builtin_convertvector(b, dvec), __builtin_convertvector(c, dvec),
                   __builtin_convertvector(d, dvec)};
}

#endif
