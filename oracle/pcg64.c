/*
 * pcg64.c - numpy's SeedSequence, PCG64 and Generator.integers(int64).
 *
 * Owns the arithmetic behind oracle/pcg64.h (design notes R1..R4 there).
 * Every constant is numpy's: SeedSequence's INIT_A/MULT_A (hashmix while
 * mixing the pool), INIT_B/MULT_B (generate_state), MIX_MULT_L/R (mix),
 * XSHIFT 16; PCG64's default 128-bit multiplier. Everything is unsigned
 * modular arithmetic on uint32 / uint64 (numpy does the same on uint32
 * arrays and __uint128_t), so there is nothing to round and nothing that
 * depends on the compiler: the 128-bit products are built from 32-bit
 * halves below.
 */
#include "oracle/pcg64.h"

#define SS_INIT_A 0x43b0d7e5u
#define SS_MULT_A 0x931e8875u
#define SS_INIT_B 0x8b51f9ddu
#define SS_MULT_B 0x58f38dedu
#define SS_MIX_L 0xca01f9ddu
#define SS_MIX_R 0x4973f715u
#define SS_XSHIFT 16

/* PCG_DEFAULT_MULTIPLIER_128 = 2549297995355413924 * 2^64 + 4865540595714422341 */
#define PCG_MULT_HI 0x2360ED051FC65DA4ull
#define PCG_MULT_LO 0x4385DF649FCCF645ull

/* ------------------------------------------------------------------------ */
/* SeedSequence                                                              */

/* hashmix(value, hash_const): hash_const is updated in place. */
static uint32_t ss_hashmix(uint32_t v, uint32_t *hc)
{
    v ^= *hc;
    *hc *= SS_MULT_A;
    v *= *hc;
    v ^= v >> SS_XSHIFT;
    return v;
}

static uint32_t ss_mix(uint32_t x, uint32_t y)
{
    uint32_t r = SS_MIX_L * x - SS_MIX_R * y;
    r ^= r >> SS_XSHIFT;
    return r;
}

void dsv4q_seedseq_pool(uint32_t pool[DSV4Q_SEEDSEQ_POOL], const uint32_t *entropy, size_t n)
{
    uint32_t hc = SS_INIT_A;
    /* the first pool words take the first entropy words (0 past the end) */
    for (size_t i = 0; i < DSV4Q_SEEDSEQ_POOL; i++)
        pool[i] = ss_hashmix(i < n ? entropy[i] : 0u, &hc);
    /* every pool word into every other */
    for (size_t s = 0; s < DSV4Q_SEEDSEQ_POOL; s++)
        for (size_t d = 0; d < DSV4Q_SEEDSEQ_POOL; d++)
            if (s != d) pool[d] = ss_mix(pool[d], ss_hashmix(pool[s], &hc));
    /* entropy words beyond the pool size */
    for (size_t s = DSV4Q_SEEDSEQ_POOL; s < n; s++)
        for (size_t d = 0; d < DSV4Q_SEEDSEQ_POOL; d++)
            pool[d] = ss_mix(pool[d], ss_hashmix(entropy[s], &hc));
}

void dsv4q_seedseq_generate(const uint32_t pool[DSV4Q_SEEDSEQ_POOL], uint32_t *out, size_t n_words)
{
    uint32_t hc = SS_INIT_B;
    for (size_t i = 0; i < n_words; i++) {
        uint32_t v = pool[i % DSV4Q_SEEDSEQ_POOL];
        v ^= hc;
        hc *= SS_MULT_B;
        v *= hc;
        v ^= v >> SS_XSHIFT;
        out[i] = v;
    }
}

/* ------------------------------------------------------------------------ */
/* 128-bit helpers (two uint64 halves)                                       */

/* hi:lo = a * b (full 128-bit product of two 64-bit values). */
static void mul64x64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
    const uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
    const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
    *lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* state = state * MULT + inc (mod 2^128): pcg_setseq_128_step_r. */
static void pcg_step(dsv4q_pcg64 *g)
{
    uint64_t hi, lo;
    mul64x64(g->state_lo, PCG_MULT_LO, &hi, &lo);
    hi += g->state_hi * PCG_MULT_LO + g->state_lo * PCG_MULT_HI;   /* cross terms, mod 2^64 */
    const uint64_t nlo = lo + g->inc_lo;
    hi += g->inc_hi + (nlo < lo);
    g->state_hi = hi;
    g->state_lo = nlo;
}

/* ------------------------------------------------------------------------ */
/* PCG64                                                                     */

void dsv4q_pcg64_seed(dsv4q_pcg64 *g, const uint32_t *entropy, size_t n)
{
    uint32_t pool[DSV4Q_SEEDSEQ_POOL], w[8];
    dsv4q_seedseq_pool(pool, entropy, n);
    dsv4q_seedseq_generate(pool, w, 8);
    /* generate_state(4, np.uint64): word pairs, low word first */
    uint64_t v[4];
    for (int i = 0; i < 4; i++) v[i] = (uint64_t)w[2 * i] | ((uint64_t)w[2 * i + 1] << 32);
    /* pcg64_set_seed(seed = v[0..1], inc = v[2..3]): PCG_128BIT_CONSTANT(high, low) */
    const uint64_t init_hi = v[0], init_lo = v[1], seq_hi = v[2], seq_lo = v[3];
    /* pcg_setseq_128_srandom_r (R2) */
    g->state_hi = g->state_lo = 0;
    g->inc_hi = (seq_hi << 1) | (seq_lo >> 63);
    g->inc_lo = (seq_lo << 1) | 1u;
    pcg_step(g);
    const uint64_t lo = g->state_lo + init_lo;
    g->state_hi += init_hi + (lo < g->state_lo);
    g->state_lo = lo;
    pcg_step(g);
    g->has_uint32 = 0;
    g->uinteger = 0;
}

void dsv4q_pcg64_seed_u64(dsv4q_pcg64 *g, uint64_t seed)
{
    uint32_t w[2] = { (uint32_t)(seed & 0xFFFFFFFFu), (uint32_t)(seed >> 32) };
    dsv4q_pcg64_seed(g, w, w[1] ? 2 : 1);   /* R1: 0 .. 2^32-1 is one word */
}

uint64_t dsv4q_pcg64_next64(dsv4q_pcg64 *g)
{
    pcg_step(g);
    /* pcg_output_xsl_rr_128_64: rotr64(hi ^ lo, state >> 122) */
    const uint64_t x = g->state_hi ^ g->state_lo;
    const unsigned r = (unsigned)(g->state_hi >> 58);
    return (x >> r) | (x << ((64u - r) & 63u));
}

uint32_t dsv4q_pcg64_next32(dsv4q_pcg64 *g)
{
    if (g->has_uint32) {
        g->has_uint32 = 0;
        return g->uinteger;
    }
    const uint64_t x = dsv4q_pcg64_next64(g);
    g->has_uint32 = 1;
    g->uinteger = (uint32_t)(x >> 32);
    return (uint32_t)(x & 0xFFFFFFFFu);
}

/* ------------------------------------------------------------------------ */
/* Generator.integers (R4)                                                   */

/* numpy's bounded_lemire_uint64: a draw in [0, rng], rng < 2^64 - 1. */
static uint64_t lemire64(dsv4q_pcg64 *g, uint64_t rng)
{
    const uint64_t excl = rng + 1;
    uint64_t hi, lo;
    mul64x64(dsv4q_pcg64_next64(g), excl, &hi, &lo);
    if (lo < excl) {
        const uint64_t threshold = (UINT64_MAX - rng) % excl;
        while (lo < threshold) mul64x64(dsv4q_pcg64_next64(g), excl, &hi, &lo);
    }
    return hi;
}

/* numpy's buffered_bounded_lemire_uint32: a draw in [0, rng], rng < 2^32 - 1. */
static uint32_t lemire32(dsv4q_pcg64 *g, uint32_t rng)
{
    const uint32_t excl = rng + 1;
    uint64_t m = (uint64_t)dsv4q_pcg64_next32(g) * excl;
    uint32_t lo = (uint32_t)m;
    if (lo < excl) {
        const uint32_t threshold = (UINT32_MAX - rng) % excl;
        while (lo < threshold) {
            m = (uint64_t)dsv4q_pcg64_next32(g) * excl;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* The int64 whose two's-complement bits are x (numpy's uint64 -> int64
 * view), without C's implementation-defined out-of-range conversion. */
static int64_t as_i64(uint64_t x)
{
    return x <= (uint64_t)INT64_MAX ? (int64_t)x : -(int64_t)(UINT64_MAX - x) - 1;
}

int dsv4q_rng_integers_i64(dsv4q_pcg64 *g, int64_t low, int64_t high, size_t n, int64_t *out)
{
    if (low >= high) return -1;
    const uint64_t off = (uint64_t)low;
    const uint64_t rng = (uint64_t)high - 1u - (uint64_t)low;   /* numpy: high - 1 - low in uint64 */
    for (size_t i = 0; i < n; i++) {
        uint64_t d;
        if (rng == 0) d = 0;
        else if (rng < 0xFFFFFFFFull) d = lemire32(g, (uint32_t)rng);
        else if (rng == 0xFFFFFFFFull) d = dsv4q_pcg64_next32(g);
        else if (rng == UINT64_MAX) d = dsv4q_pcg64_next64(g);
        else d = lemire64(g, rng);
        out[i] = as_i64(off + d);
    }
    return 0;
}
