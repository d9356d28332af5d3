/*
 * weights.h - a view of one checkpoint weight, in its stored form.
 *
 * The oracle never holds a dequantized copy of a large weight: linears
 * decode FP8/FP4/BF16 codes on the fly (exactly: every code is a dyadic
 * rational), so the f64 instance of a Flash-shaped layer needs the bytes of
 * the checkpoint, not 8x them. Width-independent.
 */
#ifndef DSV4Q_WEIGHTS_H
#define DSV4Q_WEIGHTS_H

#include <stdint.h>
#include "oracle/formats.h"

typedef enum dsv4q_wfmt {
    DSV4Q_WF_NONE = 0,
    DSV4Q_WF_F32,   /* F32 values [out, in] */
    DSV4Q_WF_F64,   /* F64 values [out, in] (tests, synthetic inputs) */
    DSV4Q_WF_BF16,  /* BF16 codes [out, in] */
    DSV4Q_WF_FP8,   /* E4M3 codes [out, in] + scale [ceil(out/b), ceil(in/b)], b = the weight's blk */
    DSV4Q_WF_FP4    /* packed E2M1 [out, in/2] (low nibble = even k) + scale [out, in/32] */
} dsv4q_wfmt;

typedef struct dsv4q_weight {
    const char *name;        /* checkpoint tensor name (for messages) */
    dsv4q_wfmt fmt;
    int64_t out, in;         /* logical shape [out, in]; vectors have out = 1 */
    const void *data;
    const void *scale;       /* FP8/FP4 only */
    dsv4q_dtype scale_dtype; /* DSV4Q_DT_F8_E8M0 (ue8m0) or DSV4Q_DT_F32 */
    /* The model's FP8 block b (DSV4Q_FP8_BLOCK): an FP8 weight's scales
     * cover b x b tiles, and a linear act-quantizes its input in 1 x b blocks
     * before an FP8 or FP4 GEMM (FP4 weight scales stay per 32 along in).
     * 0 means 128, V4's block, so every weight built before V4.1 keeps its
     * meaning; V4.1 (model.py fp8_block_size) is 32. */
    int32_t blk;
} dsv4q_weight;

#define DSV4Q_FP8_BLOCK_V4 128
#define DSV4Q_FP8_BLOCK_V41 32
/* The FP8 block of weight w (0 -> V4's 128). */
static inline int64_t dsv4q_weight_blk(const dsv4q_weight *w) { return w->blk > 0 ? w->blk : DSV4Q_FP8_BLOCK_V4; }

/* The three projections of one SwiGLU expert (model.py:Expert). */
typedef struct dsv4q_expert_w {
    dsv4q_weight w1;   /* gate [inter, dim] */
    dsv4q_weight w2;   /* down [dim, inter] */
    dsv4q_weight w3;   /* up   [inter, dim] */
} dsv4q_expert_w;

/* Row o (0 <= o < out) decoded to float: out[k] = (float)dsv4q_weight_at(w,
 * o, k) for every k < in, bit for bit, with the code tables and one scale
 * lookup per block (what the harness hands a backend as the decoded form).
 * out: [in] floats. An unknown format gives NaN. No reference function of
 * its own: it is dsv4q_weight_at (the reference's dequantized value) by rows. */
void dsv4q_weight_row_f32(const dsv4q_weight *w, int64_t o, float *out);

/* Decode element (o, k) of a weight to double, including its block scale. */
double dsv4q_weight_at(const dsv4q_weight *w, int64_t o, int64_t k);

#endif
