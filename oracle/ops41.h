/*
 * ops41.h - the DeepSeek V4.1 operators V4 does not have, at both widths:
 * the compressed-KV codec (E2M1 values, one E4M3 scale per 16), the Engram
 * layer, the lagged hyper-connection pair (mixes, collapse), the V4.1 MoE
 * gate, the ratio-1/2 compressor and the two-level top-k (candidate blocks,
 * position top-k). The linears with 32x32 FP8 weight blocks and 1x32
 * activation blocks are dsv4q_linear on weights whose blk is 32; RMSNorm,
 * RoPE, act_quant, FP4 quant, indexer scores and sparse attention are V4's
 * (oracle/ops.h) with V4.1's block sizes.
 *
 * ops41.inc is expanded at both widths through oracle/both.h (the
 * vocabulary of oracle/width.h), as oracle/ops.h does with ops.inc, so the
 * two widths cannot drift. The V4.1 forward pass is oracle/model_v41.c.
 * Implemented in oracle/kv41.c (codec), engram41.c, hc.c (mixes,
 * collapse), moe.c (gate41), compressor41.c and index41.c.
 */
#ifndef DSV4Q_OPS41_H
#define DSV4Q_OPS41_H

#include <stdint.h>
#include "base/unaligned.h"
#include "oracle/weights.h"
#include "oracle/boundary.h"
#include "oracle/model_types.h" /* dsv4q_engram_w */

/* The compressed-KV block: values per E4M3 scale. */
#define DSV4Q_KV41_BLOCK 16
/* The smallest amax the scale rule uses: 6 * 2^-9, so the scale is never
 * below E4M3's smallest subnormal 2^-9 (and never 0, even for a zero block). */
#define DSV4Q_KV41_AMAX_FLOOR (6.0 / 512.0)

#define DSV4Q_BOTH "oracle/ops41.inc"
#include "oracle/both.h"

#endif
