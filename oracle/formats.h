/*
 * formats.h - the number formats of DeepSeek V4 checkpoints and QAT paths.
 *
 * Owns: storage dtypes (the safetensors dtype vocabulary), exact decode of
 * every stored code, and round-to-nearest-even (RNE) encode from a wide value.
 * Width-independent: decode returns double (every code of every format here
 * is exactly representable in binary64, and in binary32 except F64/I64), and
 * encode takes double (a binary32 value converts to double exactly), so the
 * f32 and f64 oracle instances share this file and can never disagree on a
 * code. Mirrors the dtype handling of inference/model.py and kernel.py
 * (torch.bfloat16, float8_e4m3fn, float8_e8m0fnu, float4_e2m1fn_x2).
 *
 * Invariants:
 *  F1. decode(encode(v)) == v for every v that is a finite value of the format.
 *  F2. encode is RNE on the format's grid, NaN in -> NaN out.
 *  F3. E4M3fn has no infinity: |v| > 464 encodes to NaN (0x7F|sign) unless
 *      the caller asks for saturation, which clamps to +-448 (0x7E|sign).
 *  F4. E2M1 is packed two per byte, LOW nibble = even element index.
 */
#ifndef DSV4Q_FORMATS_H
#define DSV4Q_FORMATS_H

#include <stddef.h>
#include <stdint.h>

/* Storage dtypes, spelled as in the safetensors header. */
typedef enum dsv4q_dtype {
    DSV4Q_DT_INVALID = 0,
    DSV4Q_DT_F64,
    DSV4Q_DT_F32,
    DSV4Q_DT_F16,
    DSV4Q_DT_BF16,
    DSV4Q_DT_F8_E4M3, /* "F8_E4M3": E4M3fn */
    DSV4Q_DT_F8_E8M0, /* "F8_E8M0": ue8m0 scale byte */
    DSV4Q_DT_I8,      /* "I8": in expert tensors, packed E2M1 pairs */
    DSV4Q_DT_U8,
    DSV4Q_DT_I32,
    DSV4Q_DT_I64,
    DSV4Q_DT_COUNT
} dsv4q_dtype;

/* Name as in a safetensors header ("BF16", "F8_E4M3", ...); NULL if invalid. */
const char *dsv4q_dtype_name(dsv4q_dtype dt);
/* Inverse of dsv4q_dtype_name; DSV4Q_DT_INVALID for an unknown name. */
dsv4q_dtype dsv4q_dtype_from_name(const char *name);
/* Bytes per stored element (1 for F8/I8/U8). 0 if invalid. */
size_t dsv4q_dtype_size(dsv4q_dtype dt);

/* --- BF16: upper half of binary32. ------------------------------------- */
double   dsv4q_bf16_decode(uint16_t code);
uint16_t dsv4q_bf16_encode(double v);          /* RNE, single rounding from v */
uint16_t dsv4q_bf16_from_f32(float v);         /* RNE from binary32 */
static inline float dsv4q_bf16_to_f32(uint16_t c) {
    union { uint32_t u; float f; } x = { (uint32_t)c << 16 };
    return x.f;
}

/* --- FP16 (IEEE binary16). ---------------------------------------------- */
double   dsv4q_f16_decode(uint16_t code);
uint16_t dsv4q_f16_encode(double v);           /* RNE, overflow -> inf */

/* --- FP8 E4M3fn: bias 7, max 448 (0x7E), 0x7F/0xFF NaN, no inf. --------- */
double  dsv4q_e4m3_decode(uint8_t code);
/* RNE. saturate != 0: |v| beyond 448 -> +-448 (the QAT paths clamp first). */
uint8_t dsv4q_e4m3_encode(double v, int saturate);
/* Decode table: all 256 codes (NaN codes hold NaN). */
extern const double *dsv4q_e4m3_table(void);

/* --- E8M0 ("ue8m0") scale: value 2^(e-127), 0xFF NaN. ------------------- */
double dsv4q_e8m0_decode(uint8_t code);
/* Code of 2^k; -1 if k is outside [-127, 127]. */
int    dsv4q_e8m0_encode_exp(int k);

/* --- FP4 E2M1: codes 0..7 = {0,.5,1,1.5,2,3,4,6}, bit 3 sign. ----------- */
double  dsv4q_e2m1_decode(uint8_t nibble);     /* low 4 bits used */
/* RNE on the E2M1 grid (ties to even mantissa); |v| > 6 saturates to 6. */
uint8_t dsv4q_e2m1_encode(double v);
/* Decoded pairs of every packed byte b: [2b] low nibble, [2b+1] high. */
const double *dsv4q_e2m1_pair_table(void);
/* Element i of a packed E2M1 array (low nibble = even index). */
static inline uint8_t dsv4q_e2m1_nibble(const uint8_t *packed, size_t i) {
    uint8_t b = packed[i >> 1];
    return (i & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 0xF);
}

/* --- Generic RNE onto a binary grid with `mbits` stored mantissa bits and
 * minimum normal exponent `emin` (no exponent maximum: callers clamp).
 * Returns the rounded value. Used for BF16 (7,-126), FP16 (10,-14),
 * E4M3 (3,-6), E2M1 (1,0). Exact: power-of-two scaling and rint only. ---- */
double dsv4q_round_grid(double v, int mbits, int emin);

/* Decode element i of a stored tensor of dtype dt to double.
 * I8 decodes as a plain int8 (callers that hold packed E2M1 use
 * dsv4q_e2m1_nibble). NaN for DSV4Q_DT_INVALID. */
double dsv4q_decode_elem(dsv4q_dtype dt, const void *data, size_t i);

#endif
