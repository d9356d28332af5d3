/*
 * pcg64.h - numpy's `np.random.default_rng(seed)` stream, bit for bit.
 *
 * Owns: exactly the part of numpy's random machinery that DeepSeek V4.1's
 * Engram hash multipliers depend on (inference/engram.py
 * compute_hash_multipliers: `np.random.default_rng(10007 * layer_id)
 * .integers(low=0, high=bound, size=(max_ngram_size,), dtype=np.int64)`):
 *   - SeedSequence (numpy/random/bit_generator.pyx): the 4-word uint32
 *     entropy pool mixed with hashmix/mix, and generate_state;
 *   - PCG64 (numpy/random/src/pcg64): the 128-bit LCG seeded from
 *     generate_state(4, uint64), output XSL-RR 128->64, and the buffered
 *     32-bit draw next_uint32 uses;
 *   - Generator.integers for dtype int64, endpoint=False
 *     (numpy/random/_bounded_integers.pyx _rand_int64 ->
 *     random_bounded_uint64_fill, Lemire's method, numpy's default
 *     use_masked=False), for every range width numpy distinguishes.
 * Refuses: the legacy RandomState (Mersenne Twister), floats, other dtypes,
 * endpoint=True and array-valued bounds: the reference uses none of them.
 *
 * Width-independent integer code (built once, ORACLE_COMMON). The 128-bit
 * arithmetic is written with two uint64 halves (no __int128), so every
 * compiler and target computes the same bits.
 *
 * DESIGN NOTES (tests cite R1..R4)
 *  R1. A seed is a non-negative integer of any size, given as its
 *      little-endian uint32 words (numpy's _coerce_to_uint32_array; the seed
 *      0 is the one word {0}). dsv4q_pcg64_seed_u64 is the common case.
 *  R2. PCG64's state after seeding equals numpy's: state = 0,
 *      inc = (seq << 1) | 1, step, state += initstate, step; where
 *      initstate = (w0 << 64) | w1 and seq = (w2 << 64) | w3 for the four
 *      uint64 words w of generate_state(4, uint64).
 *  R3. next64 steps first, then outputs XSL-RR of the new state; next32
 *      returns the low half of a fresh next64 and keeps the high half for
 *      the following next32 (numpy's has_uint32 / uinteger buffer).
 *  R4. integers(low, high, n) draws from the generator in numpy's order:
 *      rng = high - 1 - low (as uint64); rng == 0: no draw; rng < 2^32 - 1:
 *      32-bit Lemire on next32; rng == 2^32 - 1: next32; rng == 2^64 - 1:
 *      next64; otherwise 64-bit Lemire on next64 (threshold
 *      (2^64 - 1 - rng) % (rng + 1), redraw while the low half is below it).
 *      Results are low + draw in uint64, read as int64.
 */
#ifndef DSV4Q_PCG64_H
#define DSV4Q_PCG64_H

#include <stddef.h>
#include <stdint.h>

/* numpy's SeedSequence pool size (words of 32 bits). */
#define DSV4Q_SEEDSEQ_POOL 4

/* The 4-word entropy pool of SeedSequence(entropy), spawn_key () (R1).
 * entropy: n >= 1 little-endian uint32 words of the seed. */
void dsv4q_seedseq_pool(uint32_t pool[DSV4Q_SEEDSEQ_POOL], const uint32_t *entropy, size_t n);

/* SeedSequence.generate_state(n_words, np.uint32): out [n_words]. A
 * generate_state(k, np.uint64) is the same words taken in pairs, low word
 * first. */
void dsv4q_seedseq_generate(const uint32_t pool[DSV4Q_SEEDSEQ_POOL], uint32_t *out, size_t n_words);

/* numpy.random.PCG64's state (pcg64_state: the 128-bit LCG + the 32-bit
 * buffer). Halves: hi = bits 127..64, lo = bits 63..0. */
typedef struct dsv4q_pcg64 {
    uint64_t state_hi, state_lo;
    uint64_t inc_hi, inc_lo;
    int has_uint32;
    uint32_t uinteger;
} dsv4q_pcg64;

/* np.random.PCG64(SeedSequence(seed)) (R1, R2); seed words as in
 * dsv4q_seedseq_pool (n >= 1). */
void dsv4q_pcg64_seed(dsv4q_pcg64 *g, const uint32_t *entropy, size_t n);
/* The same for a seed that fits in 64 bits (np.random.default_rng(seed)). */
void dsv4q_pcg64_seed_u64(dsv4q_pcg64 *g, uint64_t seed);

/* PCG64.random_raw(): the next 64-bit output (R3). */
uint64_t dsv4q_pcg64_next64(dsv4q_pcg64 *g);
/* numpy's next_uint32 for PCG64 (R3). */
uint32_t dsv4q_pcg64_next32(dsv4q_pcg64 *g);

/* Generator.integers(low, high, size=n, dtype=np.int64) (endpoint=False)
 * on the generator g: out [n] (R4). Returns 0, or -1 when low >= high
 * (numpy raises ValueError "low >= high"); nothing is drawn then. */
int dsv4q_rng_integers_i64(dsv4q_pcg64 *g, int64_t low, int64_t high, size_t n, int64_t *out);

#endif
