/*
 * formats.c - decode and RNE encode for every stored number format of the
 * DeepSeek V4 checkpoints (see formats.h for the contract, F1-F4).
 *
 * Width-independent: everything is done in binary64 with exact operations
 * only (integer bit assembly, power-of-two scaling via ldexp/frexp, rint in
 * the default round-to-nearest-even mode). Rounding to a narrow format is a
 * single RNE step on the exact input (dsv4q_round_grid), followed by exact
 * packing of the already-rounded value, so no path ever rounds twice.
 */
#include "oracle/formats.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- dtype vocabulary --------------------------------------------------- */

static const char *const k_names[DSV4Q_DT_COUNT] = {
    [DSV4Q_DT_INVALID] = NULL,      [DSV4Q_DT_F64] = "F64",
    [DSV4Q_DT_F32] = "F32",         [DSV4Q_DT_F16] = "F16",
    [DSV4Q_DT_BF16] = "BF16",       [DSV4Q_DT_F8_E4M3] = "F8_E4M3",
    [DSV4Q_DT_F8_E8M0] = "F8_E8M0", [DSV4Q_DT_I8] = "I8",
    [DSV4Q_DT_U8] = "U8",           [DSV4Q_DT_I32] = "I32",
    [DSV4Q_DT_I64] = "I64",
};

static const size_t k_sizes[DSV4Q_DT_COUNT] = {
    [DSV4Q_DT_INVALID] = 0, [DSV4Q_DT_F64] = 8,     [DSV4Q_DT_F32] = 4,
    [DSV4Q_DT_F16] = 2,     [DSV4Q_DT_BF16] = 2,    [DSV4Q_DT_F8_E4M3] = 1,
    [DSV4Q_DT_F8_E8M0] = 1, [DSV4Q_DT_I8] = 1,      [DSV4Q_DT_U8] = 1,
    [DSV4Q_DT_I32] = 4,     [DSV4Q_DT_I64] = 8,
};

const char *dsv4q_dtype_name(dsv4q_dtype dt) {
    if ((int)dt <= (int)DSV4Q_DT_INVALID || (int)dt >= (int)DSV4Q_DT_COUNT) return NULL;
    return k_names[dt];
}

dsv4q_dtype dsv4q_dtype_from_name(const char *name) {
    if (!name) return DSV4Q_DT_INVALID;
    for (int i = DSV4Q_DT_INVALID + 1; i < DSV4Q_DT_COUNT; i++)
        if (strcmp(name, k_names[i]) == 0) return (dsv4q_dtype)i;
    return DSV4Q_DT_INVALID;
}

size_t dsv4q_dtype_size(dsv4q_dtype dt) {
    if ((int)dt <= (int)DSV4Q_DT_INVALID || (int)dt >= (int)DSV4Q_DT_COUNT) return 0;
    return k_sizes[dt];
}

/* ---- generic grid rounding and minifloat packing ------------------------ */

double dsv4q_round_grid(double v, int mbits, int emin) {
    if (v == 0.0 || !isfinite(v)) return v; /* keeps -0, inf, NaN as they are */
    int ex;
    (void)frexp(v, &ex);         /* |v| = f * 2^ex, f in [0.5, 1) */
    int e = ex - 1;              /* floor(log2|v|), exact */
    if (e < emin) e = emin;      /* below min normal: fixed subnormal quantum */
    int q = e - mbits;           /* quantum = 2^q */
    /* v * 2^-q has at most mbits+1 integer bits: the scaling is exact, rint
     * is the one RNE step, and scaling back is exact (the result is a small
     * integer times 2^q). rint keeps the sign of a value rounding to zero. */
    return ldexp(rint(ldexp(v, -q)), q);
}

/* Bits (sign excluded) of a non-negative value that already lies on the grid
 * of a format with `mbits` mantissa bits and exponent bias `bias`, and is
 * within its finite range. A subnormal that rounded up to the min normal
 * produces mantissa 2^mbits, which carries into exponent field 1: exactly the
 * min-normal code. */
static uint32_t pack_minifloat(double a, int mbits, int bias) {
    if (a == 0.0) return 0;
    int ex;
    double f = frexp(a, &ex); /* a = f * 2^ex, f in [0.5, 1) */
    int e = ex - 1;
    if (e < 1 - bias) /* subnormal: a = m * 2^(1 - bias - mbits) */
        return (uint32_t)ldexp(a, bias - 1 + mbits);
    uint32_t m = (uint32_t)ldexp(f, mbits + 1) - (1u << mbits); /* drop hidden 1 */
    return ((uint32_t)(e + bias) << mbits) | m;
}

/* Value of the sign-less bits of a minifloat (exponent field ef, mantissa m);
 * the caller handles inf/NaN codes. */
static double unpack_minifloat(uint32_t ef, uint32_t m, int mbits, int bias) {
    if (ef == 0) return ldexp((double)m, 1 - bias - mbits);
    return ldexp((double)((1u << mbits) | m), (int)ef - bias - mbits);
}

/* ---- BF16 ---------------------------------------------------------------- */

double dsv4q_bf16_decode(uint16_t code) {
    return (double)dsv4q_bf16_to_f32(code); /* float -> double is exact */
}

/* NaN -> 0x7FC0 (canonical quiet NaN, as c10::BFloat16 produces). */
uint16_t dsv4q_bf16_encode(double v) {
    if (isnan(v)) return 0x7FC0;
    uint16_t s = signbit(v) ? 0x8000 : 0;
    /* One RNE step on the exact double; BF16 shares binary32's exponent
     * range, so the rounded value is exactly a binary32 whose low 16 bits
     * are zero (or overflows: >= 2^128, i.e. at or past the halfway point
     * above the max 0x7F7F, which ties to the even code 0x7F80 = inf). */
    double r = fabs(dsv4q_round_grid(v, 7, -126));
    if (r >= 0x1p128) return (uint16_t)(s | 0x7F80);
    return (uint16_t)(s | pack_minifloat(r, 7, 127));
}

uint16_t dsv4q_bf16_from_f32(float v) {
    if (isnan(v)) return 0x7FC0;
    uint32_t u;
    memcpy(&u, &v, 4);
    /* Integer RNE on the dropped 16 bits; a carry out of the mantissa bumps
     * the exponent, and out of the max finite exponent gives inf, as RNE
     * requires. */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- FP16 ---------------------------------------------------------------- */

double dsv4q_f16_decode(uint16_t code) {
    double s = (code & 0x8000) ? -1.0 : 1.0;
    uint32_t ef = (code >> 10) & 0x1F, m = code & 0x3FF;
    if (ef == 0x1F) return m ? NAN : s * INFINITY;
    return s * unpack_minifloat(ef, m, 10, 15);
}

/* NaN -> 0x7E00 (canonical quiet NaN). */
uint16_t dsv4q_f16_encode(double v) {
    if (isnan(v)) return 0x7E00;
    uint16_t s = signbit(v) ? 0x8000 : 0;
    /* Max finite 65504; the halfway point 65520 ties to 65536 (even), so
     * anything rounding to >= 2^16 overflows to inf. */
    double r = fabs(dsv4q_round_grid(v, 10, -14));
    if (r >= 65536.0) return (uint16_t)(s | 0x7C00);
    return (uint16_t)(s | pack_minifloat(r, 10, 15));
}

/* ---- FP8 E4M3fn ---------------------------------------------------------- */

/* Written out (not computed at first use) so it needs no initialisation and
 * is trivially thread-safe; tests/test_formats.c checks it against an
 * independent bit-layout formula and against dsv4q_e4m3_decode. */
static const double k_e4m3[256] = {
    0.0, 0x1p-9, 0x1p-8, 0x1.8p-8, 0x1p-7, 0x1.4p-7, 0x1.8p-7, 0x1.cp-7,
    0x1p-6, 0x1.2p-6, 0x1.4p-6, 0x1.6p-6, 0x1.8p-6, 0x1.ap-6, 0x1.cp-6, 0x1.ep-6,
    0x1p-5, 0x1.2p-5, 0x1.4p-5, 0x1.6p-5, 0x1.8p-5, 0x1.ap-5, 0x1.cp-5, 0x1.ep-5,
    0x1p-4, 0x1.2p-4, 0x1.4p-4, 0x1.6p-4, 0x1.8p-4, 0x1.ap-4, 0x1.cp-4, 0x1.ep-4,
    0x1p-3, 0x1.2p-3, 0x1.4p-3, 0x1.6p-3, 0x1.8p-3, 0x1.ap-3, 0x1.cp-3, 0x1.ep-3,
    0x1p-2, 0x1.2p-2, 0x1.4p-2, 0x1.6p-2, 0x1.8p-2, 0x1.ap-2, 0x1.cp-2, 0x1.ep-2,
    0x1p-1, 0x1.2p-1, 0x1.4p-1, 0x1.6p-1, 0x1.8p-1, 0x1.ap-1, 0x1.cp-1, 0x1.ep-1,
    0x1p+0, 0x1.2p+0, 0x1.4p+0, 0x1.6p+0, 0x1.8p+0, 0x1.ap+0, 0x1.cp+0, 0x1.ep+0,
    0x1p+1, 0x1.2p+1, 0x1.4p+1, 0x1.6p+1, 0x1.8p+1, 0x1.ap+1, 0x1.cp+1, 0x1.ep+1,
    0x1p+2, 0x1.2p+2, 0x1.4p+2, 0x1.6p+2, 0x1.8p+2, 0x1.ap+2, 0x1.cp+2, 0x1.ep+2,
    0x1p+3, 0x1.2p+3, 0x1.4p+3, 0x1.6p+3, 0x1.8p+3, 0x1.ap+3, 0x1.cp+3, 0x1.ep+3,
    0x1p+4, 0x1.2p+4, 0x1.4p+4, 0x1.6p+4, 0x1.8p+4, 0x1.ap+4, 0x1.cp+4, 0x1.ep+4,
    0x1p+5, 0x1.2p+5, 0x1.4p+5, 0x1.6p+5, 0x1.8p+5, 0x1.ap+5, 0x1.cp+5, 0x1.ep+5,
    0x1p+6, 0x1.2p+6, 0x1.4p+6, 0x1.6p+6, 0x1.8p+6, 0x1.ap+6, 0x1.cp+6, 0x1.ep+6,
    0x1p+7, 0x1.2p+7, 0x1.4p+7, 0x1.6p+7, 0x1.8p+7, 0x1.ap+7, 0x1.cp+7, 0x1.ep+7,
    0x1p+8, 0x1.2p+8, 0x1.4p+8, 0x1.6p+8, 0x1.8p+8, 0x1.ap+8, 0x1.cp+8, NAN,
    -0.0, -0x1p-9, -0x1p-8, -0x1.8p-8, -0x1p-7, -0x1.4p-7, -0x1.8p-7, -0x1.cp-7,
    -0x1p-6, -0x1.2p-6, -0x1.4p-6, -0x1.6p-6, -0x1.8p-6, -0x1.ap-6, -0x1.cp-6, -0x1.ep-6,
    -0x1p-5, -0x1.2p-5, -0x1.4p-5, -0x1.6p-5, -0x1.8p-5, -0x1.ap-5, -0x1.cp-5, -0x1.ep-5,
    -0x1p-4, -0x1.2p-4, -0x1.4p-4, -0x1.6p-4, -0x1.8p-4, -0x1.ap-4, -0x1.cp-4, -0x1.ep-4,
    -0x1p-3, -0x1.2p-3, -0x1.4p-3, -0x1.6p-3, -0x1.8p-3, -0x1.ap-3, -0x1.cp-3, -0x1.ep-3,
    -0x1p-2, -0x1.2p-2, -0x1.4p-2, -0x1.6p-2, -0x1.8p-2, -0x1.ap-2, -0x1.cp-2, -0x1.ep-2,
    -0x1p-1, -0x1.2p-1, -0x1.4p-1, -0x1.6p-1, -0x1.8p-1, -0x1.ap-1, -0x1.cp-1, -0x1.ep-1,
    -0x1p+0, -0x1.2p+0, -0x1.4p+0, -0x1.6p+0, -0x1.8p+0, -0x1.ap+0, -0x1.cp+0, -0x1.ep+0,
    -0x1p+1, -0x1.2p+1, -0x1.4p+1, -0x1.6p+1, -0x1.8p+1, -0x1.ap+1, -0x1.cp+1, -0x1.ep+1,
    -0x1p+2, -0x1.2p+2, -0x1.4p+2, -0x1.6p+2, -0x1.8p+2, -0x1.ap+2, -0x1.cp+2, -0x1.ep+2,
    -0x1p+3, -0x1.2p+3, -0x1.4p+3, -0x1.6p+3, -0x1.8p+3, -0x1.ap+3, -0x1.cp+3, -0x1.ep+3,
    -0x1p+4, -0x1.2p+4, -0x1.4p+4, -0x1.6p+4, -0x1.8p+4, -0x1.ap+4, -0x1.cp+4, -0x1.ep+4,
    -0x1p+5, -0x1.2p+5, -0x1.4p+5, -0x1.6p+5, -0x1.8p+5, -0x1.ap+5, -0x1.cp+5, -0x1.ep+5,
    -0x1p+6, -0x1.2p+6, -0x1.4p+6, -0x1.6p+6, -0x1.8p+6, -0x1.ap+6, -0x1.cp+6, -0x1.ep+6,
    -0x1p+7, -0x1.2p+7, -0x1.4p+7, -0x1.6p+7, -0x1.8p+7, -0x1.ap+7, -0x1.cp+7, -0x1.ep+7,
    -0x1p+8, -0x1.2p+8, -0x1.4p+8, -0x1.6p+8, -0x1.8p+8, -0x1.ap+8, -0x1.cp+8, -NAN,
};

const double *dsv4q_e4m3_table(void) { return k_e4m3; }

double dsv4q_e4m3_decode(uint8_t code) {
    double s = (code & 0x80) ? -1.0 : 1.0;
    if ((code & 0x7F) == 0x7F) return NAN;
    return s * unpack_minifloat((code >> 3) & 0xF, code & 7, 3, 7);
}

uint8_t dsv4q_e4m3_encode(double v, int saturate) {
    uint8_t s = signbit(v) ? 0x80 : 0;
    if (isnan(v)) return (uint8_t)(s | 0x7F);
    /* RNE on the unbounded grid first: (448, 464] lands on 448 (464 is the
     * tie between 448 = 1.110b*2^8 and 480 = 1.111b*2^8 and goes to the even
     * mantissa), anything beyond lands on >= 480, which E4M3fn lacks. */
    double r = fabs(dsv4q_round_grid(v, 3, -6));
    if (r > 448.0) return (uint8_t)(s | (saturate ? 0x7E : 0x7F));
    return (uint8_t)(s | pack_minifloat(r, 3, 7));
}

/* ---- E8M0 ---------------------------------------------------------------- */

double dsv4q_e8m0_decode(uint8_t code) {
    if (code == 0xFF) return NAN;
    return ldexp(1.0, (int)code - 127); /* 2^-127 is a normal double */
}

int dsv4q_e8m0_encode_exp(int k) {
    if (k < -127 || k > 127) return -1;
    return k + 127;
}

/* ---- E2M1 ---------------------------------------------------------------- */

double dsv4q_e2m1_decode(uint8_t nibble) {
    double s = (nibble & 0x8) ? -1.0 : 1.0;
    return s * unpack_minifloat((nibble >> 1) & 3, nibble & 1, 1, 1);
}

/* Both elements of every packed byte: [2*b] = low nibble (even index),
 * [2*b+1] = high nibble. Built once from dsv4q_e2m1_decode; the hot
 * FP4 GEMM path reads it instead of decoding nibble by nibble. */
static double k_e2m1_pairs[512];
static pthread_once_t k_e2m1_once = PTHREAD_ONCE_INIT;
static void build_e2m1_pairs(void) {
    for (int b = 0; b < 256; b++) {
        k_e2m1_pairs[2 * b] = dsv4q_e2m1_decode((uint8_t)(b & 0xF));
        k_e2m1_pairs[2 * b + 1] = dsv4q_e2m1_decode((uint8_t)(b >> 4));
    }
}
const double *dsv4q_e2m1_pair_table(void) {
    pthread_once(&k_e2m1_once, build_e2m1_pairs);
    return k_e2m1_pairs;
}

/* E2M1 has no NaN code: NaN maps to +6 (0x7), the saturate-to-max-finite
 * convention of satfinite conversions. Callers that must see NaN check
 * isnan() before encoding. */
uint8_t dsv4q_e2m1_encode(double v) {
    if (isnan(v)) return 0x7;
    uint8_t s = signbit(v) ? 0x8 : 0;
    /* Grid: 1 mantissa bit, min normal 2^0 (bias 1), subnormal quantum 0.5.
     * Values rounding past 6 (including 7, the tie that goes to 8) clamp. */
    double r = fabs(dsv4q_round_grid(v, 1, 0));
    if (r > 6.0) return (uint8_t)(s | 0x7);
    return (uint8_t)(s | pack_minifloat(r, 1, 1));
}

/* ---- generic element decode ----------------------------------------------- */

/* Safetensors data is little-endian; assemble explicitly so a big-endian
 * host decodes the same bytes to the same values. */
static uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t u = 0;
    for (size_t k = 0; k < n; k++) u |= (uint64_t)p[k] << (8 * k);
    return u;
}

double dsv4q_decode_elem(dsv4q_dtype dt, const void *data, size_t i) {
    size_t sz = dsv4q_dtype_size(dt);
    if (sz == 0 || data == NULL) return NAN;
    uint64_t u = load_le((const uint8_t *)data + i * sz, sz);
    switch (dt) {
    case DSV4Q_DT_F64: { double d; memcpy(&d, &u, 8); return d; }
    case DSV4Q_DT_F32: { uint32_t w = (uint32_t)u; float f; memcpy(&f, &w, 4); return (double)f; }
    case DSV4Q_DT_F16: return dsv4q_f16_decode((uint16_t)u);
    case DSV4Q_DT_BF16: return dsv4q_bf16_decode((uint16_t)u);
    case DSV4Q_DT_F8_E4M3: return dsv4q_e4m3_decode((uint8_t)u);
    case DSV4Q_DT_F8_E8M0: return dsv4q_e8m0_decode((uint8_t)u);
    case DSV4Q_DT_I8: return (double)(int8_t)(uint8_t)u;
    case DSV4Q_DT_U8: return (double)(uint8_t)u;
    case DSV4Q_DT_I32: return (double)(int32_t)(uint32_t)u;
    case DSV4Q_DT_I64: return (double)(int64_t)u; /* RNE above 2^53 */
    default: return NAN;
    }
}
