/*
 * rng.h - the project's one deterministic generator: the splitmix64 mixer
 * and step, and the FNV-1a string hash that turns a name into a seed.
 *
 * Every synthetic value dsv4q makes (checkpoint weights, golden inputs, case
 * inputs, synthetic token ids) is a pure function of a name and a counter,
 * never of OS entropy, time or thread count, so a file can be pinned by its
 * SHA-256 and a case re-created from its key alone. These are the bits every
 * generator builds on; they are frozen: a change moves every synthetic
 * checkpoint (DSV4Q_SYNTH_VERSION) and every golden (`dsv4q golden check`
 * fails), so they live here once, static inline, and are never "improved".
 *
 * splitmix64 (Steele, Lea & Flood, "Fast Splittable Pseudorandom Number
 * Generators", OOPSLA 2014; the public-domain C of Vigna's splitmix64.c):
 * a Weyl sequence state += DSV4Q_RNG_GAMMA, output mix(state), where
 *  - DSV4Q_RNG_GAMMA = 0x9E3779B97F4A7C15, the odd integer nearest 2^64 / phi (the
 *    golden-ratio increment: odd, so the sequence has full period 2^64);
 *  - mix = David Stafford's "Mix13" 64-bit finaliser ("Better Bit Mixing -
 *    Improving on MurmurHash3's 64-bit Finalizer", 2011): xor-shift 30,
 *    * 0xBF58476D1CE4E5B9, xor-shift 27, * 0x94D049BB133111EB, xor-shift 31.
 *    A bijection of 64-bit words chosen for its avalanche, so mix(key + n * GAMMA)
 *    is a counter-based generator: element n is computed without the n-1
 *    before it (what lets synth fill rows in parallel).
 * FNV-1a 64 (Fowler, Noll & Vo; IETF draft-eastlake-fnv): h = offset basis
 * 0xCBF29CE484222325 (14695981039346656037), then per byte h = (h ^ byte) *
 * prime 0x100000001B3 (2^40 + 2^8 + 0xB3 = 1099511628211), bytes as unsigned
 * char. Used only to turn a name into 64 bits; it is not a cryptographic
 * hash, and nothing here is a secret.
 */
#ifndef DSV4Q_BASE_RNG_H
#define DSV4Q_BASE_RNG_H

#include <stdint.h>

#define DSV4Q_RNG_GAMMA 0x9E3779B97F4A7C15ull

/* Stafford's Mix13, the splitmix64 output function. */
static inline uint64_t dsv4q_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One splitmix64 step: advance the Weyl state, return the mixed value. */
static inline uint64_t dsv4q_splitmix64(uint64_t *state) { return dsv4q_mix64(*state += DSV4Q_RNG_GAMMA); }

/* FNV-1a 64 of a NUL-terminated string. */
static inline uint64_t dsv4q_fnv1a64(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 0x100000001B3ull;
    return h;
}

#endif
