/*
 * kv41.h - DeepSeek V4.1's numerical primitives that V4 does not have, at
 * both widths: the compressed-KV codec (E2M1 values with one E4M3 scale per
 * 16) and the Engram layer. (The linears with 32x32 FP8 weight blocks and
 * 1x32 activation blocks are dsv4q_linear on weights whose blk is 32.)
 *
 * kv41.inc is expanded at both widths through oracle/both.h (the
 * vocabulary of oracle/width.h), as oracle/ops.h does with ops.inc, so the
 * two widths cannot drift. Kept out of ops.inc on purpose: the V4 operator list and its ABI
 * tables are not touched until the V4.1 forward pass wires these in.
 * Implemented in oracle/kv41.c (codec) and oracle/engram41.c.
 */
#ifndef DSV4Q_KV41_H
#define DSV4Q_KV41_H

#include <stdint.h>
#include "base/unaligned.h"
#include "oracle/weights.h"
#include "oracle/boundary.h"

/* The compressed-KV block: values per E4M3 scale. */
#define DSV4Q_KV41_BLOCK 16
/* The smallest amax the scale rule uses: 6 * 2^-9, so the scale is never
 * below E4M3's smallest subnormal 2^-9 (and never 0, even for a zero block). */
#define DSV4Q_KV41_AMAX_FLOOR (6.0 / 512.0)
/* V4.1's FP8 block (fp8_block_size in model.py): 32x32 weight blocks and
 * 1x32 activation blocks. */
#define DSV4Q_V41_FP8_BLOCK 32


/* The weights of one Engram layer (model.py Engram, ParallelEngramEmbedding),
 * as stored in a V4.1 checkpoint (names layers.{L}.engram.*). */
typedef struct dsv4q_engram41_w {
    const uint8_t *table;         /* embed.weight: E4M3 codes [rows, head_dim] */
    const uint8_t *table_scale;   /* embed.scale: E8M0 [rows, head_dim/32] (one per 32 of a row) */
    int64_t rows;                 /* engram_num_embeddings of this layer */
    int head_dim;                 /* engram_head_dim, a multiple of 32 */
    int ncols;                    /* (engram_max_ngram_size - 1) * engram_n_heads */
    dsv4q_weight wkv;             /* FP8 32x32 [dim*(hc+1), ncols*head_dim] */
    dsv4q_weight q_weight, k_weight;   /* BF16 [hc, dim] */
    int hc, dim;
} dsv4q_engram41_w;

#define DSV4Q_BOTH "oracle/kv41.inc"
#include "oracle/both.h"

#endif
