/*
 * engram_hash.h - DeepSeek V4.1's Engram n-gram hash: token ids -> table rows.
 *
 * Owns: everything between a token id and the row ids an Engram layer looks
 * up, exactly as inference/engram.py derives them (EngramLayout.from_args,
 * compute_hash_multipliers, NgramHashState.forward): the compressed token
 * map applied, the per-layer odd multipliers from numpy's
 * default_rng(10007 * layer_id) (oracle/pcg64.h), the disjoint prime bucket
 * sizes, the rolling XOR hash of the 2..max_ngram-grams ending at each
 * position, the per-layer column offsets, the pad id before the sequence
 * start and at dead (image) tokens, and the position-indexed cache that
 * carries the look-back across prefill / decode calls.
 * Refuses: building the compressed token map itself (that needs the
 * tokenizer; the map is an input: io/engram_map.h), and any input it cannot
 * hash exactly as the reference does (token ids outside the vocabulary, a
 * map entry outside the compressed vocabulary, a call that skips positions).
 *
 * Width-independent integer code (built once, ORACLE_COMMON).
 *
 * DESIGN NOTES (tests cite E1..E6)
 *  E1. Primes: for each Engram layer in engram_layer_ids order, for each
 *      n-gram size 2..max_ngram, for each head: the smallest prime above
 *      `current` not handed out before (in any layer), where `current`
 *      restarts at engram_vocab_size - 1 for every (layer, n-gram) and then
 *      follows the previous head's prime. So the primes of the whole model
 *      are the consecutive primes >= engram_vocab_size, in that order.
 *  E2. Multipliers: bound = max(1, (INT64_MAX // compressed_vocab_size) //
 *      2); m[l][s] = 2 * default_rng(10007 * layer_ids[l]).integers(0,
 *      bound, size=max_ngram, dtype=int64)[s] + 1, s = 0 .. max_ngram-1
 *      (s = look-back distance: 0 is the current token).
 *  E3. Tokens: tok[s] for the position p = the compressed id at p - s,
 *      unless an earlier or equal look-back was blocked: p - s < 0 or a DEAD
 *      id at p - s blocks s and every longer look-back; a blocked slot holds
 *      pad = token_map[engram_pad_id] (the pad's COMPRESSED id).
 *  E4. Hash: prod[s] = tok[s] * m[l][s] (int64, two's-complement wrap as
 *      torch; the bound E2 makes it exact for ids < compressed_vocab_size);
 *      roll = prod[0]; for i = 1 .. max_ngram-1: roll ^= prod[i], and the
 *      (i+1)-gram's column for head h is c = (i-1)*n_heads + h with id
 *      floor_mod(roll, prime[l][c]) + offset[l][c], where offset[l][c] is
 *      the sum of prime[l][0..c-1] (every layer's ids start at 0: each
 *      layer has its own table). floor_mod is torch's % (sign of the
 *      divisor).
 *  E5. Output layout [n tokens][n_layers][ncols], ncols = (max_ngram-1) *
 *      n_heads, as the reference's [B, L, n_engram_layers, n_hash_cols].
 *  E6. The cache holds one compressed id (or DEAD) per absolute position,
 *      written before the call hashes (the reference's NgramHashState.cache);
 *      a call at start_pos reads positions start_pos - (max_ngram-1) ..
 *      start_pos + n - 1. A call may start at most at the number of
 *      positions written so far (the reference would read uninitialised
 *      memory); a call at an earlier start_pos rewrites from there.
 */
#ifndef DSV4Q_ENGRAM_HASH_H
#define DSV4Q_ENGRAM_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The reference's NgramHashState.DEAD: a cached id that takes no part in
 * any n-gram (an image-span position). */
#define DSV4Q_ENGRAM_DEAD (-1)
/* engram.py's per-layer RNG seed factor. */
#define DSV4Q_ENGRAM_SEED_PRIME 10007
/* Limits of this implementation (the released Flash: 2 layers, n-gram 4,
 * 8 heads, engram_vocab_size 16e6; primes by trial division). */
#define DSV4Q_ENGRAM_MAX_LAYERS 64
#define DSV4Q_ENGRAM_MAX_NGRAM 16
#define DSV4Q_ENGRAM_MAX_HEADS 256
#define DSV4Q_ENGRAM_MAX_VOCAB_SIZE (INT64_C(1) << 40)

/* What the hash needs from config.json and the token map. */
typedef struct dsv4q_engram_hash_params {
    int n_layers;                   /* entries of engram_layer_ids, 1..DSV4Q_ENGRAM_MAX_LAYERS */
    const int *layer_ids;           /* engram_layer_ids [n_layers], each >= 0 */
    int max_ngram;                  /* engram_max_ngram_size, 2..DSV4Q_ENGRAM_MAX_NGRAM */
    int n_heads;                    /* engram_n_heads, 1..DSV4Q_ENGRAM_MAX_HEADS */
    int64_t engram_vocab_size;      /* where each prime search starts, 1..2^40 */
    const int64_t *num_embeddings;  /* engram_num_embeddings [n_layers], or NULL: not checked */
    int64_t compressed_vocab_size;  /* engram_compressed_vocab_size (config) */
    int64_t map_vocab_size;         /* the token map file's compressed_vocab_size, or 0: not checked */
    const int32_t *token_map;       /* [vocab]: compressed id of each token id */
    int64_t vocab;                  /* entries of token_map (the model's vocab_size) */
    int64_t pad_id;                 /* engram_pad_id: a RAW token id (default 2) */
} dsv4q_engram_hash_params;

/* The derived layout (EngramLayout + NgramHashState buffers). */
typedef struct dsv4q_engram_hash {
    int n_layers, max_ngram, n_heads, ncols;   /* ncols = (max_ngram-1)*n_heads */
    int64_t V;                 /* compressed vocabulary size */
    int64_t pad;               /* token_map[pad_id] */
    int64_t vocab;
    int32_t *token_map;        /* [vocab], owned copy */
    int64_t *primes;           /* [n_layers][ncols] bucket sizes (E1) */
    int64_t *offsets;          /* [n_layers][ncols] (E4) */
    int64_t *mult;             /* [n_layers][max_ngram] (E2) */
    int64_t *rows;             /* [n_layers] sum of the layer's primes = its table rows */
} dsv4q_engram_hash;

/* The per-sequence cache of compressed ids by absolute position (E6). */
typedef struct dsv4q_engram_cache {
    int64_t *ids;              /* [cap] */
    long cap;                  /* max_seq_len */
    long filled;               /* positions 0 .. filled-1 are written */
} dsv4q_engram_cache;

/* EngramLayout.from_args primes (E1): primes [n_layers][(max_ngram-1) *
 * n_heads], layer-major, then n-gram size, then head. Returns 0, -1 on
 * arguments outside the limits above. */
int dsv4q_engram_primes(int64_t *primes, int n_layers, int max_ngram, int n_heads, int64_t engram_vocab_size);

/* compute_hash_multipliers (E2): mult [n_layers][max_ngram]. Returns 0, -1
 * when V < 1, a layer id is negative or a count is outside the limits. */
int dsv4q_engram_multipliers(int64_t *mult, const int *layer_ids, int n_layers, int max_ngram, int64_t V);

/* Derive the layout from p (validating it): 0, or -1 with a message naming
 * the config field or map entry. *h is zeroed first; free with
 * dsv4q_engram_hash_free (also after a failure). */
int dsv4q_engram_hash_init(dsv4q_engram_hash *h, const dsv4q_engram_hash_params *p, char *err, size_t errlen);
void dsv4q_engram_hash_free(dsv4q_engram_hash *h);

/* A cache for positions 0 .. max_seq_len-1 (nothing written). 0 or -1. */
int dsv4q_engram_cache_init(dsv4q_engram_cache *c, long max_seq_len);
void dsv4q_engram_cache_free(dsv4q_engram_cache *c);

/* NgramHashState.forward for one sequence: write the compressed ids of
 * tokens [n] at positions start_pos .. start_pos+n-1 (DEAD where
 * text_mask[i] == 0; text_mask NULL = all text), then out [n][n_layers]
 * [ncols] = the hash ids with offsets (E3..E5). Returns 0, or -1 with a
 * message (a token id outside [0, vocab), start_pos past c->filled, the
 * cache capacity exceeded); nothing is written to the cache on failure. */
int dsv4q_engram_hash_ids(const dsv4q_engram_hash *h, dsv4q_engram_cache *c, long start_pos, const int32_t *tokens,
                          const uint8_t *text_mask, long n, int64_t *out, char *err, size_t errlen);

/* The hash of one layer from a given context (E3, E4), for callers that
 * hold the ids themselves (the ABI operator ENGRAM_HASH): ctx [n +
 * max_ngram - 1] the compressed ids of positions start_pos - (max_ngram-1)
 * .. start_pos + n - 1 (DSV4Q_ENGRAM_DEAD for a dead token; entries at
 * positions < 0 are never read: blocked as E3 says), mult [max_ngram] the
 * layer's multipliers (E2), primes and offsets [(max_ngram-1) * n_heads]
 * (E1, E4), pad the pad's compressed id. out [n][ncols] = the ids with
 * offsets, as dsv4q_engram_hash_ids gives one layer. Returns 0, or -1 with
 * a message (counts out of range, a bucket size < 1). */
int dsv4q_engram_hash_ctx(const int64_t *ctx, long start_pos, long n, int max_ngram, int n_heads, const int64_t *mult,
                          const int64_t *primes, const int64_t *offsets, int64_t pad, int64_t *out, char *err,
                          size_t errlen);

#endif
