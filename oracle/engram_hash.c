/*
 * engram_hash.c - the Engram layout and n-gram hash of inference/engram.py.
 *
 * Owns the derivations behind oracle/engram_hash.h (design notes E1..E6
 * there): primes by exact trial division (sympy.isprime gives the same
 * answer; the searched values stay below 2^40 + a prime gap, so at most
 * ~2^20 divisions per candidate), multipliers from numpy's stream
 * (oracle/pcg64.h), and the hash itself in int64 with torch's wrap-around
 * and floor-mod semantics written out (C's signed overflow is undefined, so
 * products are formed in uint64 and viewed as int64).
 */
#include "oracle/engram_hash.h"

#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "oracle/pcg64.h"

#define eh_fail dsv4q_errf

/* ------------------------------------------------------------------------ */
/* E1: primes                                                                */

static int is_prime(int64_t n)
{
    if (n < 2) return 0;
    if (n % 2 == 0) return n == 2;
    for (int64_t d = 3; d <= n / d; d += 2)
        if (n % d == 0) return 0;
    return 1;
}

static int seen_has(const int64_t *seen, long n, int64_t v)
{
    for (long i = 0; i < n; i++)
        if (seen[i] == v) return 1;
    return 0;
}

int dsv4q_engram_primes(int64_t *primes, int n_layers, int max_ngram, int n_heads, int64_t engram_vocab_size)
{
    if (n_layers < 1 || n_layers > DSV4Q_ENGRAM_MAX_LAYERS || max_ngram < 2 || max_ngram > DSV4Q_ENGRAM_MAX_NGRAM ||
        n_heads < 1 || n_heads > DSV4Q_ENGRAM_MAX_HEADS || engram_vocab_size < 1 ||
        engram_vocab_size > DSV4Q_ENGRAM_MAX_VOCAB_SIZE)
        return -1;
    long k = 0;   /* primes handed out so far = primes[0 .. k-1] (the "seen" set) */
    for (int l = 0; l < n_layers; l++)
        for (int g = 0; g < max_ngram - 1; g++) {
            int64_t current = engram_vocab_size - 1;
            for (int h = 0; h < n_heads; h++) {
                /* find_next_prime(current, seen): smallest unseen prime > current */
                int64_t c = current + 1;
                while (!is_prime(c) || seen_has(primes, k, c)) c++;
                primes[k++] = c;
                current = c;
            }
        }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* E2: multipliers                                                           */

int dsv4q_engram_multipliers(int64_t *mult, const int *layer_ids, int n_layers, int max_ngram, int64_t V)
{
    if (V < 1 || n_layers < 1 || n_layers > DSV4Q_ENGRAM_MAX_LAYERS || max_ngram < 1 ||
        max_ngram > DSV4Q_ENGRAM_MAX_NGRAM)
        return -1;
    int64_t bound = (INT64_MAX / V) / 2;
    if (bound < 1) bound = 1;
    for (int l = 0; l < n_layers; l++) {
        if (layer_ids[l] < 0) return -1;   /* numpy refuses a negative seed */
        dsv4q_pcg64 g;
        dsv4q_pcg64_seed_u64(&g, (uint64_t)DSV4Q_ENGRAM_SEED_PRIME * (uint64_t)layer_ids[l]);
        int64_t v[DSV4Q_ENGRAM_MAX_NGRAM];
        if (dsv4q_rng_integers_i64(&g, 0, bound, (size_t)max_ngram, v) != 0) return -1;
        for (int s = 0; s < max_ngram; s++) mult[l * max_ngram + s] = v[s] * 2 + 1;   /* v < bound: no overflow */
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* layout                                                                    */

void dsv4q_engram_hash_free(dsv4q_engram_hash *h)
{
    if (!h) return;
    free(h->token_map);
    free(h->primes);
    free(h->offsets);
    free(h->mult);
    free(h->rows);
    memset(h, 0, sizeof *h);
}

int dsv4q_engram_hash_init(dsv4q_engram_hash *h, const dsv4q_engram_hash_params *p, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (!p || !p->layer_ids || !p->token_map)
        return eh_fail(err, errlen, "engram: no layer ids or token map");
    if (p->n_layers < 1 || p->n_layers > DSV4Q_ENGRAM_MAX_LAYERS)
        return eh_fail(err, errlen, "engram: field 'engram_layer_ids' has %d entries, must be 1..%d", p->n_layers,
                       DSV4Q_ENGRAM_MAX_LAYERS);
    for (int l = 0; l < p->n_layers; l++) {
        if (p->layer_ids[l] < 0)
            return eh_fail(err, errlen, "engram: field 'engram_layer_ids' entry %d is %d, must be >= 0", l,
                           p->layer_ids[l]);
        for (int j = 0; j < l; j++)
            if (p->layer_ids[j] == p->layer_ids[l])
                return eh_fail(err, errlen, "engram: field 'engram_layer_ids' lists layer %d twice", p->layer_ids[l]);
    }
    if (p->max_ngram < 2 || p->max_ngram > DSV4Q_ENGRAM_MAX_NGRAM)
        return eh_fail(err, errlen, "engram: field 'engram_max_ngram_size' is %d, must be 2..%d", p->max_ngram,
                       DSV4Q_ENGRAM_MAX_NGRAM);
    if (p->n_heads < 1 || p->n_heads > DSV4Q_ENGRAM_MAX_HEADS)
        return eh_fail(err, errlen, "engram: field 'engram_n_heads' is %d, must be 1..%d", p->n_heads,
                       DSV4Q_ENGRAM_MAX_HEADS);
    if (p->engram_vocab_size < 1 || p->engram_vocab_size > DSV4Q_ENGRAM_MAX_VOCAB_SIZE)
        return eh_fail(err, errlen, "engram: field 'engram_vocab_size' is %lld, must be 1..2^40",
                       (long long)p->engram_vocab_size);
    if (p->compressed_vocab_size < 1)
        return eh_fail(err, errlen, "engram: field 'engram_compressed_vocab_size' is %lld, must be positive",
                       (long long)p->compressed_vocab_size);
    if (p->map_vocab_size && p->map_vocab_size != p->compressed_vocab_size)
        /* the reference asserts this: every multiplier derives from the size */
        return eh_fail(err, errlen, "engram: the token map's compressed_vocab_size (%lld) differs from field "
                       "'engram_compressed_vocab_size' (%lld)", (long long)p->map_vocab_size,
                       (long long)p->compressed_vocab_size);
    if (p->vocab < 1)
        return eh_fail(err, errlen, "engram: token map has %lld entries", (long long)p->vocab);
    if (p->pad_id < 0 || p->pad_id >= p->vocab)
        return eh_fail(err, errlen, "engram: field 'engram_pad_id' is %lld, outside the vocabulary [0, %lld)",
                       (long long)p->pad_id, (long long)p->vocab);
    for (int64_t t = 0; t < p->vocab; t++)
        if (p->token_map[t] < 0 || p->token_map[t] >= p->compressed_vocab_size)
            return eh_fail(err, errlen, "engram: token map entry %lld is %d, outside [0, %lld) "
                           "(engram_compressed_vocab_size)", (long long)t, (int)p->token_map[t],
                           (long long)p->compressed_vocab_size);

    const int L = p->n_layers, N = p->max_ngram, C = (p->max_ngram - 1) * p->n_heads;
    h->n_layers = L;
    h->max_ngram = N;
    h->n_heads = p->n_heads;
    h->ncols = C;
    h->V = p->compressed_vocab_size;
    h->vocab = p->vocab;
    h->token_map = malloc(sizeof(int32_t) * (size_t)p->vocab);
    h->primes = malloc(sizeof(int64_t) * (size_t)(L * C));
    h->offsets = malloc(sizeof(int64_t) * (size_t)(L * C));
    h->mult = malloc(sizeof(int64_t) * (size_t)(L * N));
    h->rows = malloc(sizeof(int64_t) * (size_t)L);
    if (!h->token_map || !h->primes || !h->offsets || !h->mult || !h->rows) {
        dsv4q_engram_hash_free(h);
        return eh_fail(err, errlen, "engram: out of memory");
    }
    memcpy(h->token_map, p->token_map, sizeof(int32_t) * (size_t)p->vocab);
    h->pad = h->token_map[p->pad_id];
    if (dsv4q_engram_primes(h->primes, L, N, p->n_heads, p->engram_vocab_size) != 0 ||
        dsv4q_engram_multipliers(h->mult, p->layer_ids, L, N, h->V) != 0) {
        dsv4q_engram_hash_free(h);
        return eh_fail(err, errlen, "engram: layout derivation failed");
    }
    for (int l = 0; l < L; l++) {
        int64_t acc = 0;
        for (int c = 0; c < C; c++) {
            h->offsets[l * C + c] = acc;   /* cumsum([0, *primes[:-1]]) */
            acc += h->primes[l * C + c];
        }
        h->rows[l] = acc;
        if (p->num_embeddings && p->num_embeddings[l] != acc) {
            long long want = (long long)p->num_embeddings[l];
            dsv4q_engram_hash_free(h);
            /* the reference would silently read zero rows past the table */
            return eh_fail(err, errlen, "engram: field 'engram_num_embeddings' entry %d is %lld, but layer %d's "
                           "bucket primes sum to %lld", l, want, p->layer_ids[l], (long long)acc);
        }
    }
    return 0;
}

int dsv4q_engram_cache_init(dsv4q_engram_cache *c, long max_seq_len)
{
    memset(c, 0, sizeof *c);
    if (max_seq_len < 1) return -1;
    c->ids = malloc(sizeof(int64_t) * (size_t)max_seq_len);
    if (!c->ids) return -1;
    c->cap = max_seq_len;
    return 0;
}

void dsv4q_engram_cache_free(dsv4q_engram_cache *c)
{
    if (!c) return;
    free(c->ids);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------------ */
/* E3..E5: the hash                                                          */

static int64_t as_i64(uint64_t x)
{
    return x <= (uint64_t)INT64_MAX ? (int64_t)x : -(int64_t)(UINT64_MAX - x) - 1;
}

/* torch's int64 a * b: two's-complement wrap. */
static int64_t mul_wrap(int64_t a, int64_t b)
{
    return as_i64((uint64_t)a * (uint64_t)b);
}

/* torch's a % m for m > 0: the result has the sign of m. */
static int64_t floor_mod(int64_t a, int64_t m)
{
    int64_t r = a % m;
    return r < 0 ? r + m : r;
}

/* E3: tok[s] for position p, with at[-s] the id at p - s (read only for
 * s <= p); a DEAD id or p - s < 0 blocks s and every longer look-back. */
static void ngram_tokens(const int64_t *at, long p, int N, int64_t pad, int64_t *tok)
{
    int blocked = 0;
    for (int s = 0; s < N; s++) {
        if (p < s) blocked = 1;
        else if (at[-s] == DSV4Q_ENGRAM_DEAD) blocked = 1;
        tok[s] = blocked ? pad : at[-s];
    }
}

/* E4: the ncols = (N-1)*H ids of one position and one layer into o. */
static void hash_columns(const int64_t *tok, int N, int H, const int64_t *m, const int64_t *pr, const int64_t *of,
                         int64_t *o)
{
    int64_t roll = mul_wrap(tok[0], m[0]);
    for (int g = 1; g < N; g++) {
        roll ^= mul_wrap(tok[g], m[g]);
        for (int hh = 0; hh < H; hh++) {
            const int col = (g - 1) * H + hh;
            o[col] = floor_mod(roll, pr[col]) + of[col];
        }
    }
}

int dsv4q_engram_hash_ids(const dsv4q_engram_hash *h, dsv4q_engram_cache *c, long start_pos, const int32_t *tokens,
                          const uint8_t *text_mask, long n, int64_t *out, char *err, size_t errlen)
{
    if (n < 0 || start_pos < 0)
        return eh_fail(err, errlen, "engram hash: negative start_pos or length");
    if (start_pos > c->filled)
        return eh_fail(err, errlen, "engram hash: start_pos %ld skips positions (%ld written)", start_pos, c->filled);
    if (n > c->cap - start_pos)
        return eh_fail(err, errlen, "engram hash: positions %ld..%ld exceed the cache (%ld)", start_pos,
                       start_pos + n - 1, c->cap);
    for (long i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= h->vocab)
            return eh_fail(err, errlen, "engram hash: token %ld is id %d, outside [0, %lld)", i, (int)tokens[i],
                           (long long)h->vocab);
    /* E6: the cache is written first */
    for (long i = 0; i < n; i++)
        c->ids[start_pos + i] = (text_mask && !text_mask[i]) ? DSV4Q_ENGRAM_DEAD : h->token_map[tokens[i]];
    c->filled = start_pos + n;

    const int N = h->max_ngram, C = h->ncols;
    for (long i = 0; i < n; i++) {
        const long p = start_pos + i;
        int64_t tok[DSV4Q_ENGRAM_MAX_NGRAM];
        ngram_tokens(c->ids + p, p, N, h->pad, tok);
        for (int l = 0; l < h->n_layers; l++)
            hash_columns(tok, N, h->n_heads, h->mult + l * N, h->primes + l * C, h->offsets + l * C,
                         out + (i * h->n_layers + l) * C);
    }
    return 0;
}

int dsv4q_engram_hash_ctx(const int64_t *ctx, long start_pos, long n, int max_ngram, int n_heads, const int64_t *mult,
                          const int64_t *primes, const int64_t *offsets, int64_t pad, int64_t *out, char *err,
                          size_t errlen)
{
    if (n < 0 || start_pos < 0 || max_ngram < 2 || max_ngram > DSV4Q_ENGRAM_MAX_NGRAM || n_heads < 1 ||
        n_heads > DSV4Q_ENGRAM_MAX_HEADS)
        return eh_fail(err, errlen, "engram hash: n %ld, start_pos %ld, max_ngram %d or n_heads %d out of range", n,
                       start_pos, max_ngram, n_heads);
    const int C = (max_ngram - 1) * n_heads;
    for (int c = 0; c < C; c++)
        if (primes[c] < 1)
            return eh_fail(err, errlen, "engram hash: bucket size %d is %lld, must be positive", c,
                           (long long)primes[c]);
    for (long i = 0; i < n; i++) {
        int64_t tok[DSV4Q_ENGRAM_MAX_NGRAM];
        ngram_tokens(ctx + (max_ngram - 1) + i, start_pos + i, max_ngram, pad, tok);
        hash_columns(tok, max_ngram, n_heads, mult, primes, offsets, out + i * C);
    }
    return 0;
}
