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
#include "oracle/model_types.h"   /* dsv4q_engram_w */

/* The compressed-KV block: values per E4M3 scale. */
#define DSV4Q_KV41_BLOCK 16
/* The smallest amax the scale rule uses: 6 * 2^-9, so the scale is never
 * below E4M3's smallest subnormal 2^-9 (and never 0, even for a zero block). */
#define DSV4Q_KV41_AMAX_FLOOR (6.0 / 512.0)
/* V4.1's FP8 block (fp8_block_size in model.py): 32x32 weight blocks and
 * 1x32 activation blocks. */
#define DSV4Q_V41_FP8_BLOCK 32



#define DSV4Q_BOTH "oracle/kv41.inc"
#include "oracle/both.h"

#endif
