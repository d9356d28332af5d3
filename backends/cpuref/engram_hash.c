/*
 * engram_hash.c - cpu-ref's Engram n-gram hash (ENGRAM_HASH, V4.1 engram.py
 * NgramHashState.forward for one layer), written as an engine would: one
 * pass per row that walks the look-backs newest first, keeps a "window
 * still open" flag, and folds id * multiplier into a running XOR in
 * uint64 (wrap-around by the unsigned type, no signed overflow); the floor
 * remainder is taken from the unsigned bits of the roll (a negative roll's
 * remainder from its one's complement), never through C's signed %.
 */
#include "backends/cpuref/kernels.h"

#include <stdlib.h>

/* torch's floor remainder of the signed roll whose two's-complement bits
 * are h, by m >= 1: h % m for h >= 0; for h < 0, with h = -(k + 1) and k =
 * ~h >= 0, the remainder is m - 1 - k % m. */
static int64_t floor_rem(uint64_t h, int64_t m)
{
    const uint64_t um = (uint64_t)m;
    if (!(h >> 63)) return (int64_t)(h % um);
    return (int64_t)(um - 1u - (~h) % um);
}

int cpuref_engram_hash(const int32_t *ids, long n, int N, int H, const int64_t *mult, const int64_t *primes, long start,
                       int32_t pad, int32_t *out, int mut)
{
    const int C = (N - 1) * H;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)C);
    if (!off) return -1;
    int64_t acc = 0;
    for (int k = 0; k < C; k++) {
        off[k] = acc;
        acc += primes[k];
    }
    for (long i = 0; i < n; i++) {
        const long j0 = (N - 1) + i;   /* ids[j0] is position start + i */
        uint64_t roll = 0;
        int open = 1;
        int32_t *o = out + i * C;
        for (int s = 0; s < N; s++) {
            /* the look-back distance; the mutant engram_ngram_shift reads
             * one position further back (1..N instead of 0..N-1) */
            const long d = mut == CPUREF_M_ENGRAM_NGRAM_SHIFT ? s + 1 : s;
            const long j = j0 - d;
            const int32_t v = j >= 0 && start + i - d >= 0 ? ids[j] : -1;
            if (j < 0 || start + i - d < 0) open = 0;
            /* DEAD closes the window for every longer look-back; the mutant
             * engram_barrier_ignored pads only the DEAD slot itself */
            if (v < 0 && mut != CPUREF_M_ENGRAM_BARRIER_IGNORED) open = 0;
            const uint64_t t = (uint64_t)(int64_t)(open && v >= 0 ? v : pad);
            roll ^= t * (uint64_t)mult[s];
            for (int h = 0; s > 0 && h < H; h++) {
                const int col = (s - 1) * H + h;
                o[col] = (int32_t)(floor_rem(roll, primes[col]) + off[col]);
            }
        }
    }
    free(off);
    return 0;
}
