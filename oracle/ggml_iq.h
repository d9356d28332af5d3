/*
 * ggml_iq.h - private to oracle/ggml_decode.c and oracle/ggml_iq.c: the
 * block decoders of ggml's IQ types (the codebook and non-linear ones),
 * kept apart from the linear and K-quant decoders because they carry the
 * codebook tables (oracle/iq*_grid.inc).
 *
 * Each dsv4q_iq_<type>(b, y) reads one block of block_bytes(type) bytes at
 * b (any alignment; little-endian fields) and writes block_elems(type)
 * floats to y: 32 for IQ4_NL, 256 for the others. The float is bit for
 * bit the one gguf.quants.dequantize (gguf-py 0.19.0) and ggml's
 * dequantize_row_<type> compute: the same binary32 operations in the same
 * order (ggml_decode.h, "What exact means"). No errors: every byte
 * pattern decodes (a non-finite F16 scale gives inf/NaN, as in ggml).
 */
#ifndef DSV4Q_GGML_IQ_H
#define DSV4Q_GGML_IQ_H

#include <stdint.h>
#include <string.h>
#include "oracle/formats.h"

/* The binary16 at p (little-endian) as float: exact (every binary16 value
 * is a binary32 value). */
static inline float dsv4q_ggml_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return (float)dsv4q_f16_decode(h);
}

void dsv4q_iq_iq4_nl(const uint8_t *b, float *y);
void dsv4q_iq_iq4_xs(const uint8_t *b, float *y);
void dsv4q_iq_iq2_xxs(const uint8_t *b, float *y);
void dsv4q_iq_iq2_xs(const uint8_t *b, float *y);
void dsv4q_iq_iq2_s(const uint8_t *b, float *y);
void dsv4q_iq_iq3_xxs(const uint8_t *b, float *y);
void dsv4q_iq_iq3_s(const uint8_t *b, float *y);
void dsv4q_iq_iq1_s(const uint8_t *b, float *y);
void dsv4q_iq_iq1_m(const uint8_t *b, float *y);

#endif
