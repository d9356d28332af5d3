/*
 * ggml_decode.h - exact decoders for the GGML tensor types of GGUF files.
 *
 * Owns: the GGML type vocabulary (ids as in ggml.h enum ggml_type, block
 * sizes and bytes per block as in ggml.c type_traits / gguf-py
 * GGML_QUANT_SIZES), and the decode of every block of the types
 * llama-quantize writes to the value ggml itself computes: F32, F16, BF16,
 * F64, Q4_0, Q4_1, Q5_0, Q5_1 (also llama-quantize's fallbacks for rows
 * that are not a multiple of 256 under a K-quant ftype), Q8_0, Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, TQ1_0, TQ2_0, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (the IQ block decoders live in
 * oracle/ggml_iq.c), MXFP4, NVFP4 (plus I32 for hash-routing
 * tables, which is not a float type and is not decoded here). F64 decodes
 * exactly in the _f64 variants and rounds to nearest in the _f32 ones.
 *
 * What "exact" means: ggml dequantizes in binary32 with a fixed order of
 * operations (ggml-quants.c dequantize_row_*: e.g. Q4_K y = (d*sc)*q -
 * (dmin*m), each product rounded to float). We do the same float operations
 * in the same order (this file is compiled with -ffp-contract=off like every
 * other), so the float we return is bit for bit ggml's and gguf-py's
 * (gguf.quants.dequantize; tests/interop_gguf.py compares them on random
 * and edge blocks). The double variants return that float widened, exactly.
 * Width-independent (in ORACLE_COMMON): one implementation for both oracle
 * instances.
 *
 * Layout: a tensor of type t with ne0 elements per row stores each row as
 * ne0 / block_elems(t) consecutive blocks of block_bytes(t) bytes; rows
 * follow each other (ggml_row_size). ne0 must be a multiple of the block.
 */
#ifndef DSV4Q_GGML_DECODE_H
#define DSV4Q_GGML_DECODE_H

#include <stddef.h>
#include <stdint.h>

/* ggml.h enum ggml_type (the ids stored in GGUF tensor infos). */
typedef enum dsv4q_ggml_type {
    DSV4Q_GGML_F32 = 0,
    DSV4Q_GGML_F16 = 1,
    DSV4Q_GGML_Q4_0 = 2,
    DSV4Q_GGML_Q4_1 = 3,
    DSV4Q_GGML_Q5_0 = 6,
    DSV4Q_GGML_Q5_1 = 7,
    DSV4Q_GGML_Q8_0 = 8,
    DSV4Q_GGML_Q8_1 = 9,
    DSV4Q_GGML_Q2_K = 10,
    DSV4Q_GGML_Q3_K = 11,
    DSV4Q_GGML_Q4_K = 12,
    DSV4Q_GGML_Q5_K = 13,
    DSV4Q_GGML_Q6_K = 14,
    DSV4Q_GGML_Q8_K = 15,
    DSV4Q_GGML_IQ2_XXS = 16,
    DSV4Q_GGML_IQ2_XS = 17,
    DSV4Q_GGML_IQ3_XXS = 18,
    DSV4Q_GGML_IQ1_S = 19,
    DSV4Q_GGML_IQ4_NL = 20,
    DSV4Q_GGML_IQ3_S = 21,
    DSV4Q_GGML_IQ2_S = 22,
    DSV4Q_GGML_IQ4_XS = 23,
    DSV4Q_GGML_I8 = 24,
    DSV4Q_GGML_I16 = 25,
    DSV4Q_GGML_I32 = 26,
    DSV4Q_GGML_I64 = 27,
    DSV4Q_GGML_F64 = 28,
    DSV4Q_GGML_IQ1_M = 29,
    DSV4Q_GGML_BF16 = 30,
    DSV4Q_GGML_TQ1_0 = 34,
    DSV4Q_GGML_TQ2_0 = 35,
    DSV4Q_GGML_MXFP4 = 39,
    DSV4Q_GGML_NVFP4 = 40,
    DSV4Q_GGML_Q1_0 = 41,
    DSV4Q_GGML_TYPE_LIMIT = 42   /* ids >= this are unknown */
} dsv4q_ggml_type;

/* Name as ggml spells it ("Q4_K", "IQ2_XXS", ...); NULL for an unknown id. */
const char *dsv4q_ggml_type_name(int type);
/* Elements per block and bytes per block; 0 / 0 for an unknown id. */
int64_t dsv4q_ggml_block_elems(int type);
size_t dsv4q_ggml_block_bytes(int type);
/* 1 if dsv4q_ggml_decode_* can decode the type (the float types and the
 * quantized types named above), else 0. */
int dsv4q_ggml_decodable(int type);

/* dsv4q_ggml_decode_f32/_f64 (blocks to float / double) and
 * dsv4q_ggml_row_f32/_f64 (one row), declared once in oracle/ggml_decode.inc. */
#define DSV4Q_BOTH "oracle/ggml_decode.inc"
#include "oracle/both.h"

/* Bytes of one ne0-element row (ggml_row_size); 0 if unknown or ne0 is not
 * a multiple of the block. */
size_t dsv4q_ggml_row_bytes(int type, int64_t ne0);

#endif
