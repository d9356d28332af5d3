/*
 * ggml_decode.c - decode GGML blocks to ggml's own float values (see
 * ggml_decode.h). Each decoder follows the layout and the float operation
 * order of ggml-quants.c dequantize_row_<type> (llama.cpp 0c1e570); the
 * comments name the block struct. Unaligned input is fine: multi-byte
 * fields are read with memcpy, little-endian (GGUF is little-endian; the
 * oracle's supported hosts are too).
 */
#include <math.h>
#include <string.h>
#include "oracle/ggml_decode.h"
#include "oracle/formats.h"
#include "oracle/ggml_iq.h"

#define QK_K 256

typedef struct { const char *name; int64_t elems; size_t bytes; } type_info;

static const type_info k_types[DSV4Q_GGML_TYPE_LIMIT] = {
    [DSV4Q_GGML_F32] = {"F32", 1, 4},          [DSV4Q_GGML_F16] = {"F16", 1, 2},
    [DSV4Q_GGML_Q4_0] = {"Q4_0", 32, 18},      [DSV4Q_GGML_Q4_1] = {"Q4_1", 32, 20},
    [DSV4Q_GGML_Q5_0] = {"Q5_0", 32, 22},      [DSV4Q_GGML_Q5_1] = {"Q5_1", 32, 24},
    [DSV4Q_GGML_Q8_0] = {"Q8_0", 32, 34},      [DSV4Q_GGML_Q8_1] = {"Q8_1", 32, 40},
    [DSV4Q_GGML_Q2_K] = {"Q2_K", 256, 84},     [DSV4Q_GGML_Q3_K] = {"Q3_K", 256, 110},
    [DSV4Q_GGML_Q4_K] = {"Q4_K", 256, 144},    [DSV4Q_GGML_Q5_K] = {"Q5_K", 256, 176},
    [DSV4Q_GGML_Q6_K] = {"Q6_K", 256, 210},    [DSV4Q_GGML_Q8_K] = {"Q8_K", 256, 292},
    [DSV4Q_GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66}, [DSV4Q_GGML_IQ2_XS] = {"IQ2_XS", 256, 74},
    [DSV4Q_GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98}, [DSV4Q_GGML_IQ1_S] = {"IQ1_S", 256, 50},
    [DSV4Q_GGML_IQ4_NL] = {"IQ4_NL", 32, 18},  [DSV4Q_GGML_IQ3_S] = {"IQ3_S", 256, 110},
    [DSV4Q_GGML_IQ2_S] = {"IQ2_S", 256, 82},   [DSV4Q_GGML_IQ4_XS] = {"IQ4_XS", 256, 136},
    [DSV4Q_GGML_I8] = {"I8", 1, 1},            [DSV4Q_GGML_I16] = {"I16", 1, 2},
    [DSV4Q_GGML_I32] = {"I32", 1, 4},          [DSV4Q_GGML_I64] = {"I64", 1, 8},
    [DSV4Q_GGML_F64] = {"F64", 1, 8},          [DSV4Q_GGML_IQ1_M] = {"IQ1_M", 256, 56},
    [DSV4Q_GGML_BF16] = {"BF16", 1, 2},        [DSV4Q_GGML_TQ1_0] = {"TQ1_0", 256, 54},
    [DSV4Q_GGML_TQ2_0] = {"TQ2_0", 256, 66},   [DSV4Q_GGML_MXFP4] = {"MXFP4", 32, 17},
    [DSV4Q_GGML_NVFP4] = {"NVFP4", 64, 36},    [DSV4Q_GGML_Q1_0] = {"Q1_0", 128, 18},
};

static const type_info *info(int t)
{
    if (t < 0 || t >= DSV4Q_GGML_TYPE_LIMIT || !k_types[t].name) return NULL;
    return &k_types[t];
}

const char *dsv4q_ggml_type_name(int t) { const type_info *i = info(t); return i ? i->name : NULL; }
int64_t dsv4q_ggml_block_elems(int t) { const type_info *i = info(t); return i ? i->elems : 0; }
size_t dsv4q_ggml_block_bytes(int t) { const type_info *i = info(t); return i ? i->bytes : 0; }

size_t dsv4q_ggml_row_bytes(int t, int64_t ne0)
{
    const type_info *i = info(t);
    if (!i || ne0 < 0 || ne0 % i->elems) return 0;
    return (size_t)(ne0 / i->elems) * i->bytes;
}

/* block_q4_0 {f16 d; u8 qs[16]}: y[j] = (lo(qs[j]) - 8) d, y[j+16] = (hi - 8) d */
static void q4_0(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

/* block_q4_1 {f16 d; f16 m; u8 qs[16]}: y = q d + m */
static void q4_1(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b), m = dsv4q_ggml_f16(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 0x0F) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

/* block_q5_0 {f16 d; u8 qh[4]; u8 qs[16]}: 5th bit j of qh (element j) and
 * j + 16 (element j + 16); y = (q - 16) d */
static void q5_0(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    for (int j = 0; j < 16; j++) {
        const int x0 = (int)((b[6 + j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
        const int x1 = (int)((b[6 + j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
        y[j] = (float)x0 * d;
        y[j + 16] = (float)x1 * d;
    }
}

/* block_q5_1 {f16 d; f16 m; u8 qh[4]; u8 qs[16]}: y = q d + m */
static void q5_1(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b), m = dsv4q_ggml_f16(b + 2);
    uint32_t qh;
    memcpy(&qh, b + 4, 4);
    for (int j = 0; j < 16; j++) {
        const int x0 = (int)((b[8 + j] & 0x0F) | (((qh >> j) << 4) & 0x10));
        const int x1 = (int)((b[8 + j] >> 4) | ((qh >> (j + 12)) & 0x10));
        y[j] = (float)x0 * d + m;
        y[j + 16] = (float)x1 * d + m;
    }
}

/* block_q8_0 {f16 d; i8 qs[32]}: y = qs * d */
static void q8_0(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* block_q2_K {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin}:
 * per 16 elements dl = d (sc & 15), ml = dmin (sc >> 4), y = dl q - ml */
static void q2_k(const uint8_t *b, float *y)
{
    const uint8_t *sc = b, *qs = b + 16;
    const float d = dsv4q_ggml_f16(b + 80), dmin = dsv4q_ggml_f16(b + 82);
    int is = 0;
    for (int n = 0; n < 2; n++) {
        const uint8_t *q = qs + 32 * n;
        for (int shift = 0; shift < 8; shift += 2)
            for (int half = 0; half < 2; half++) {
                const uint8_t s = sc[is++];
                const float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[16 * half + l] >> shift) & 3) - ml;
            }
    }
}

/* block_q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}: element
 * e = 128 n + 32 s + l has low bits (qs[32 n + l] >> 2 s) & 3, and 4 is
 * subtracted unless bit 4 n + s of hmask[l] is set; per 16 elements j a
 * 6-bit scale (low 4 bits: nibble j / 8 of scales[j % 8]; high 2: bits
 * 2 (j / 4) of scales[8 + j % 4]), dl = d (sc - 32), y = dl q */
static void q3_k(const uint8_t *b, float *y)
{
    const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    const float d = dsv4q_ggml_f16(b + 108);
    for (int j = 0; j < 16; j++) {
        const int s6 = ((sc[j % 8] >> (4 * (j / 8))) & 0xF) | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
        const float dl = d * (float)(s6 - 32);
        for (int k = 0; k < 16; k++) {
            const int e = 16 * j + k, n = e / 128, sh = (e % 128) / 32, l = e % 32;
            const int q = ((qs[32 * n + l] >> (2 * sh)) & 3) - ((hm[l] >> (4 * n + sh)) & 1 ? 0 : 4);
            y[e] = dl * (float)q;
        }
    }
}

/* ggml-quants.c get_scale_min_k4: 6-bit scale and min j of a K-quant block */
static void scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* block_q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}: per 64 elements,
 * low nibbles with (sc, m) 2j, high nibbles with 2j+1; y = (d sc) q - (dmin m) */
static void q4_k(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b), dmin = dsv4q_ggml_f16(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    for (int j = 0; j < 4; j++) {
        int sc, m;
        scale_min_k4(2 * j, scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(2 * j + 1, scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        q += 32;
    }
}

/* block_q5_K {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: as
 * Q4_K with bit (2j | 2j+1) of qh[l] adding 16 */
static void q5_k(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b), dmin = dsv4q_ggml_f16(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0; j < 4; j++) {
        int sc, m;
        scale_min_k4(2 * j, scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        scale_min_k4(2 * j + 1, scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        ql += 32;
        u1 <<= 2;
        u2 <<= 2;
    }
}

/* block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: 6-bit q - 32,
 * y = (d sc) q with one int8 scale per 16 elements */
static void q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = dsv4q_ggml_f16(b + 208);
    for (int n = 0; n < 2; n++) {
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
            const int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
            const int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

/* block_tq1_0 {u8 qs[48]; u8 qh[4]; f16 d}: ternary, 5 trits per byte of
 * qs and 4 per byte of qh, stored as ceil(v 256 / 243) of the base-3
 * number v (first trit most significant). Trit k of a byte is the top of
 * (u8)(byte 3^k) times 3 (>> 8); y = (t - 1) d. Elements: 0..159 are
 * qs[l] (l < 32) trit k at 32 k + l, 160..239 are qs[32 + l] trit k at
 * 160 + 16 k + l, 240..255 are qh[l] trit k at 240 + 4 k + l. */
static void tq1_0(const uint8_t *b, float *y)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const float d = dsv4q_ggml_f16(b + 52);
    for (int k = 0; k < 5; k++) {
        for (int l = 0; l < 32; l++) y[32 * k + l] = (float)((((uint8_t)(b[l] * pow3[k]) * 3) >> 8) - 1) * d;
        for (int l = 0; l < 16; l++) y[160 + 16 * k + l] = (float)((((uint8_t)(b[32 + l] * pow3[k]) * 3) >> 8) - 1) * d;
    }
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 4; l++) y[240 + 4 * k + l] = (float)((((uint8_t)(b[48 + l] * pow3[k]) * 3) >> 8) - 1) * d;
}

/* block_tq2_0 {u8 qs[64]; f16 d}: element 128 n + 32 s + l is
 * ((qs[32 n + l] >> 2 s) & 3) - 1, times d */
static void tq2_0(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b + 64);
    for (int e = 0; e < QK_K; e++) {
        const int n = e / 128, sh = (e % 128) / 32, l = e % 32;
        y[e] = (float)(((b[32 * n + l] >> (2 * sh)) & 3) - 1) * d;
    }
}

/* block_mxfp4 {u8 e; u8 qs[16]}: E2M1 doubled (kvalues_mxfp4) times
 * 2^(e-128) (ggml_e8m0_to_fp32_half); low nibbles are elements 0..15 */
static void mxfp4(const uint8_t *b, float *y)
{
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t e = b[0];
    union { uint32_t u; float f; } h = {e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23};
    const float d = h.f;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)kv[b[1 + j] & 0xF] * d;
        y[j + 16] = (float)kv[b[1 + j] >> 4] * d;
    }
}

/* block_nvfp4 {u8 d[4]; u8 qs[32]}: 4 sub-blocks of 16, each with an
 * unsigned E4M3 scale (bias 7; bits 3-6 exponent, 0-2 mantissa, bit 7
 * ignored; codes 0x00 and 0x7F are 0) halved for the doubled E2M1 values
 * (kvalues_mxfp4), as gguf.quants.NVFP4.ue4m3_to_fp32; sub-block s holds
 * elements 16 s + j (low nibble of qs[8 s + j]) and 16 s + 8 + j (high).
 * Scale and product are exact in binary32 (<= 4 and 2 significant bits). */
static void nvfp4(const uint8_t *b, float *y)
{
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int s = 0; s < 4; s++) {
        const unsigned x = b[s], e = (x >> 3) & 0xF, m = x & 7;
        const float d = x == 0 || x == 0x7F ? 0.0f : e ? ldexpf((float)(8 + m), (int)e - 11) : ldexpf((float)m, -10);
        for (int j = 0; j < 8; j++) {
            y[16 * s + j] = d * (float)kv[b[4 + 8 * s + j] & 0xF];
            y[16 * s + 8 + j] = d * (float)kv[b[4 + 8 * s + j] >> 4];
        }
    }
}

typedef void (*block_fn)(const uint8_t *, float *);

static block_fn block_decoder(int t)
{
    switch (t) {
    case DSV4Q_GGML_Q4_0: return q4_0;
    case DSV4Q_GGML_Q4_1: return q4_1;
    case DSV4Q_GGML_Q5_0: return q5_0;
    case DSV4Q_GGML_Q5_1: return q5_1;
    case DSV4Q_GGML_Q8_0: return q8_0;
    case DSV4Q_GGML_Q2_K: return q2_k;
    case DSV4Q_GGML_Q3_K: return q3_k;
    case DSV4Q_GGML_Q4_K: return q4_k;
    case DSV4Q_GGML_Q5_K: return q5_k;
    case DSV4Q_GGML_Q6_K: return q6_k;
    case DSV4Q_GGML_TQ1_0: return tq1_0;
    case DSV4Q_GGML_TQ2_0: return tq2_0;
    case DSV4Q_GGML_IQ4_NL: return dsv4q_iq_iq4_nl;
    case DSV4Q_GGML_IQ4_XS: return dsv4q_iq_iq4_xs;
    case DSV4Q_GGML_IQ2_XXS: return dsv4q_iq_iq2_xxs;
    case DSV4Q_GGML_IQ2_XS: return dsv4q_iq_iq2_xs;
    case DSV4Q_GGML_IQ2_S: return dsv4q_iq_iq2_s;
    case DSV4Q_GGML_IQ3_XXS: return dsv4q_iq_iq3_xxs;
    case DSV4Q_GGML_IQ3_S: return dsv4q_iq_iq3_s;
    case DSV4Q_GGML_IQ1_S: return dsv4q_iq_iq1_s;
    case DSV4Q_GGML_IQ1_M: return dsv4q_iq_iq1_m;
    case DSV4Q_GGML_MXFP4: return mxfp4;
    case DSV4Q_GGML_NVFP4: return nvfp4;
    default: return NULL;
    }
}

int dsv4q_ggml_decodable(int t)
{
    switch (t) {
    case DSV4Q_GGML_F32:
    case DSV4Q_GGML_F16:
    case DSV4Q_GGML_BF16:
    case DSV4Q_GGML_F64: return 1;
    default: return block_decoder(t) != NULL;
    }
}

/* dsv4q_ggml_decode_f32/_f64 and dsv4q_ggml_row_f32/_f64: one definition
 * over the block decoders above, expanded at both widths. */
#define DSV4Q_BOTH "oracle/ggml_decode_body.inc"
#include "oracle/both.h"
