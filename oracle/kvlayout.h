/*
 * kvlayout.h - the byte layouts engines store DeepSeek V4 KV, compressed-KV
 * and indexer-K caches in, and an exact decoder from those bytes to
 * per-token rows in binary64 (docs/caches.md has the catalog table and the
 * engine file each layout was read from).
 *
 * Vocabulary. A cache is a byte string of whole blocks. A slot is one token
 * position in it: slot s lives in block s / block_size at position
 * s % block_size (vLLM's slot_mapping; the engine's block table maps a
 * sequence's tokens to slots, which this file does not see). A decoded row
 * is n_val values (the dequantized latent: nope values first, then the
 * n_rope RoPE values) and n_scale scales (the power-of-two or FP16 factor of
 * each quantization group, as a value, not a code).
 *
 * Arrangements:
 *  - planar (the vLLM layouts): a block of B tokens is
 *    [B x data_bytes][B x scale_bytes][zero padding up to block_stride];
 *    a token's data and its scales are NOT adjacent.
 *  - rows (llama.cpp, raw rows): one record of token_bytes per slot, rows
 *    back to back (a ggml tensor [width, kv_size]); block_size is 1.
 *
 * Every decoded value is exact: each stored code times its scale is a
 * binary64 number (E4M3 x 2^k, E2M1 x 2^k, BF16, F16, int8 x F16), so the
 * decoder never rounds. Width-independent (one instance for f32 and f64).
 */
#ifndef DSV4Q_KVLAYOUT_H
#define DSV4Q_KVLAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* One catalog entry. Static, read-only; dsv4q_kvlayout_find returns these. */
typedef struct dsv4q_kvlayout {
    const char *name;   /* "vllm_fp8_ds_mla" (the CLI's --layout word) */
    const char *engine; /* "vLLM", "llama.cpp" */
    const char *cache;  /* which cache it holds: "KV / compressed KV", "indexer K", "K or V" */
    const char *source; /* the engine file the layout was read from */
    const char *fields; /* one line: the per-token fields, in byte order */
    int planar;         /* 1: planar blocks; 0: back-to-back rows (see above) */
    int data_bytes;     /* planar: data bytes per token (0 for rows) */
    int scale_bytes;    /* planar: scale bytes per token, pad included */
    int align;          /* planar: block_stride is rounded up to a multiple of this */
    int n_val, n_rope;  /* planar: decoded values per token, of which the last n_rope are RoPE */
    int n_scale;        /* planar: scales per token (pad excluded) */
    int group;          /* elements per quantization group (rows: per scale); 0 = unscaled */
    int ggml_type;      /* rows: the element type (oracle/ggml_decode.h numbering), else -1 */
    int default_block;  /* planar: tokens per block when the caller gives 0 */
    int codec;          /* planar: how data and scale bytes decode (DSV4Q_KVC_*) */
} dsv4q_kvlayout;

/* The planar codecs: value = code x the scale of its group. */
enum {
    DSV4Q_KVC_ROWS = 0,       /* not planar: a ggml row type */
    DSV4Q_KVC_FP8_UE8M0_ROPE, /* E4M3 nope x UE8M0 per group, then BF16 rope (unscaled) */
    DSV4Q_KVC_FP8_UE8M0,      /* E4M3 x UE8M0 per group, every value */
    DSV4Q_KVC_FP8_F32,        /* E4M3 x one binary32 scale */
    DSV4Q_KVC_E2M1_UE8M0,     /* packed E2M1 (low nibble even) x UE8M0 per group */
    DSV4Q_KVC_E2M1_E4M3,      /* packed E2M1 (low nibble even) x E4M3 per group */
};

/* The catalog: *n entries, in docs/caches.md order. */
const dsv4q_kvlayout *dsv4q_kvlayout_all(int *n);
/* The entry named `name`, or NULL (unknown layout). */
const dsv4q_kvlayout *dsv4q_kvlayout_find(const char *name);

/* A layout with its run-time shape resolved. */
typedef struct dsv4q_kvgeom {
    const dsv4q_kvlayout *l;
    int64_t block_size;  /* tokens per block (rows: 1) */
    int64_t width;       /* rows: elements per row; planar: n_val */
    size_t token_bytes;  /* payload bytes per token (584 for vllm_fp8_ds_mla) */
    size_t block_stride; /* bytes per block, padding included */
    int n_val, n_rope, n_scale;
} dsv4q_kvgeom;

/* Resolve `name` with block_size (planar; 0 = the layout's default) and
 * width (rows: elements per row, required, a multiple of the type's block;
 * planar: must be 0 or n_val). Returns 0, or -1 with one line in err naming
 * the layout and what was expected (unknown layout, bad width/block). */
int dsv4q_kvgeom_init(dsv4q_kvgeom *g, const char *name, long block_size, long width, char *err, size_t errlen);

/* Slots held by a cache of nbytes: nbytes / block_stride * block_size.
 * Returns that count, or -1 with one line in err (naming `what`, the layout
 * and the expected size) when nbytes is 0 or not a whole number of blocks. */
int64_t dsv4q_kvcache_slots(const dsv4q_kvgeom *g, size_t nbytes, const char *what, char *err, size_t errlen);

/* Decode slot s of the cache at `bytes` (which holds at least s + 1 slots,
 * rounded up to its block): val[0 .. n_val) and, when scale is not NULL,
 * scale[0 .. n_scale). interleaved != 0 reads a planar layout as if each
 * token's data and scale bytes were one adjacent record of token_bytes
 * (slot s at s * token_bytes): the wrong arrangement, used by the compare to
 * name a planar/interleaved swap; ignored for rows. A NaN code decodes to
 * NaN. Never fails. */
void dsv4q_kvcache_decode(const dsv4q_kvgeom *g, const uint8_t *bytes, int64_t s, int interleaved, double *val,
                          double *scale);

/* --- compare: an engine's cache bytes against the oracle's rows ---------- */

/* The first difference and, where it is recognised, the bug class. */
typedef struct dsv4q_kvdiff {
    int differ;          /* 0: every compared slot is bit-identical (NaN equals NaN) */
    int64_t slot;        /* the first differing slot */
    const char *field;   /* "scale", "nope", "rope" (planar) or "k" (rows) */
    int index;           /* element within the field (scale: the group) */
    double got, want;    /* the engine's decoded value and the oracle's */
    int64_t ndiff;       /* slots with any difference */
    char diagnosis[256]; /* the named bug class, "" when none is recognised */
} dsv4q_kvdiff;

/* Compare slots [0, ntok) of the engine's cache bytes (nbytes, a whole
 * number of blocks holding >= ntok slots) with the oracle's rows
 * ref_val[ntok x n_val] and ref_scale[ntok x n_scale] (ref_scale may be NULL:
 * scales not compared). Exact (binary64 equality): the oracle builds its
 * rows from the engine's own inputs with the layout's quantizer, so any
 * difference is a format or composition bug. Within a slot the scales are
 * checked first, then the values in order. On a difference it tries, in
 * order, the cheap bug classes: planar/interleaved swap (the bytes decode
 * to the reference when read token-interleaved), slot 0 overwritten (only
 * slot 0 differs; names the token it holds if any), tokens shifted by k
 * (slot t holds token t + k for every overlapping t, |k| <= block_size: a
 * flat-id or offset read), and scale-only (the scaled codes agree, the
 * group's scale does not). Returns 0 (d filled), or -1 with one line in err
 * (too few slots in the cache, out of memory). */
int dsv4q_kvcache_compare(const dsv4q_kvgeom *g, const uint8_t *bytes, size_t nbytes, const double *ref_val,
                          const double *ref_scale, int64_t ntok, dsv4q_kvdiff *d, char *err, size_t errlen);

#endif
