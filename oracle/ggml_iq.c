/*
 * ggml_iq.c - the block decoders of ggml's IQ types (ggml_iq.h): the
 * non-linear 4-bit ones (IQ4_NL, IQ4_XS: a 16-value table) and the
 * codebook ones (IQ2_*, IQ3_*, IQ1_*: grid entries of 4 or 8 magnitudes,
 * oracle/iq*_grid.inc, with sign bits). Layouts are ggml-common.h's
 * block_<type> structs (llama.cpp), checked field by field against
 * gguf-py 0.19.0's gguf.quants.<TYPE>.dequantize_blocks; the comments give
 * the struct and the formula. Width-independent (ORACLE_COMMON).
 */
#include "oracle/ggml_iq.h"

#define QK_K 256

static const uint64_t k_iq2xxs_grid[256] = {
#include "oracle/iq2xxs_grid.inc"
};
static const uint64_t k_iq2xs_grid[512] = {
#include "oracle/iq2xs_grid.inc"
};
static const uint64_t k_iq2s_grid[1024] = {
#include "oracle/iq2s_grid.inc"
};
static const uint32_t k_iq3xxs_grid[256] = {
#include "oracle/iq3xxs_grid.inc"
};
static const uint32_t k_iq3s_grid[512] = {
#include "oracle/iq3s_grid.inc"
};
static const uint64_t k_iq1s_grid[2048] = {
#include "oracle/iq1s_grid.inc"
};

/* IQ1S_DELTA (ggml-common.h; gguf.quants.IQ1_S.delta): the shift added to
 * every -1/0/+1 grid value, its sign chosen per 8 elements */
#define IQ1_DELTA 0.125f

/* kvalues_iq4nl (ggml-common.h; gguf.quants.IQ4_NL.kvalues) */
static const int8_t k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ksigns_iq2xs[i]: the 7 explicit sign bits i plus an 8th bit that makes
 * the count of negative signs even (ggml-common.h; it is exactly this). */
static uint8_t ksign(unsigned i) { return (uint8_t)(i | ((unsigned)__builtin_popcount(i) & 1u) << 7); }

/* block_iq4_nl {f16 d; u8 qs[16]}: y = d kvalues[q]; low nibbles are
 * elements 0..15, high nibbles 16..31 */
void dsv4q_iq_iq4_nl(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)k_iq4nl[b[2 + j] & 0xF];
        y[j + 16] = d * (float)k_iq4nl[b[2 + j] >> 4];
    }
}

/* block_iq4_xs {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}: per 32
 * elements ib a 6-bit scale ls (low 4 bits: nibble ib of scales_l, high 2:
 * bits 2ib of scales_h), dl = d (ls - 32), y = dl kvalues[q]; 16 bytes of
 * qs per 32, low nibbles first */
void dsv4q_iq_iq4_xs(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    uint16_t sh;
    memcpy(&sh, b + 2, 2);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)k_iq4nl[qs[j] & 0xF];
            y[j + 16] = dl * (float)k_iq4nl[qs[j] >> 4];
        }
        y += 32;
        qs += 16;
    }
}

/* block_iq2_xxs {f16 d; u16 qs[32]}: per 32 elements two u32 words: 4 grid
 * indices (bytes of the first), 4 x 7 sign bits and a 4-bit scale (the
 * second); db = d (0.5 + s) 0.25, y = db grid[j] (+-1) */
void dsv4q_iq_iq2_xxs(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint32_t a[2];
        memcpy(a, b + 2 + 8 * ib, 8);
        const uint8_t *idx = (const uint8_t *)&a[0];
        const float db = d * (0.5f + (float)(a[1] >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const uint64_t g = k_iq2xxs_grid[idx[l]];
            const uint8_t s = ksign((a[1] >> (7 * l)) & 127);
            for (int j = 0; j < 8; j++) *y++ = db * (float)(uint8_t)(g >> (8 * j)) * ((s >> j) & 1 ? -1.f : 1.f);
        }
    }
}

/* block_iq2_xs {f16 d; u16 qs[32]; u8 scales[8]}: each u16 codes 8
 * elements: grid index (low 9 bits, iq2xs_grid) and 7 sign bits (high 7,
 * through ksigns); 16 elements k share the 4-bit scale s = nibble k of
 * scales, db = d (0.5 + s) 0.25, y = db grid[j] (+-1) */
void dsv4q_iq_iq2_xs(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    const uint8_t *sc = b + 66;
    for (int k = 0; k < QK_K / 16; k++) {
        const float db = d * (0.5f + (float)((sc[k / 2] >> (4 * (k % 2))) & 0xF)) * 0.25f;
        for (int l = 0; l < 2; l++) {
            uint16_t q;
            memcpy(&q, b + 2 + 2 * (2 * k + l), 2);
            const uint64_t g = k_iq2xs_grid[q & 511];
            const uint8_t s = ksign(q >> 9);
            for (int j = 0; j < 8; j++) *y++ = db * (float)(uint8_t)(g >> (8 * j)) * ((s >> j) & 1 ? -1.f : 1.f);
        }
    }
}

/* block_iq2_s {f16 d; u8 qs[64]; u8 qh[8]; u8 scales[8]}: qs is 32 grid
 * index bytes then 32 sign bytes; index i (8 elements) is qs[i] | 2 bits
 * 2 (i % 4) of qh[i / 4] << 8 (iq2s_grid); element e's sign is bit e % 8
 * of sign byte e / 8; scales as IQ2_XS (one nibble per 16 elements) */
void dsv4q_iq_iq2_s(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *sc = b + 74;
    for (int k = 0; k < QK_K / 16; k++) {
        const float db = d * (0.5f + (float)((sc[k / 2] >> (4 * (k % 2))) & 0xF)) * 0.25f;
        for (int l = 0; l < 2; l++) {
            const int i = 2 * k + l;
            const uint64_t g = k_iq2s_grid[qs[i] | ((qh[i / 4] >> (2 * (i % 4))) & 3) << 8];
            for (int j = 0; j < 8; j++) *y++ = db * (float)(uint8_t)(g >> (8 * j)) * ((signs[i] >> j) & 1 ? -1.f : 1.f);
        }
    }
}

/* block_iq3_xxs {f16 d; u8 qs[96]}: the first 64 bytes are grid indices
 * (4 elements each, iq3xxs_grid), then one u32 per 32 elements: 4 x 7
 * sign bits (through ksigns, each for 8 elements = two indices) and a
 * 4-bit scale s (top); db = d (0.5 + s) 0.5, y = db grid[j] (+-1) */
void dsv4q_iq_iq3_xxs(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    const uint8_t *qs = b + 2;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint32_t a;
        memcpy(&a, b + 66 + 4 * ib, 4);
        const float db = d * (0.5f + (float)(a >> 28)) * 0.5f;
        for (int l = 0; l < 8; l++) {
            const uint32_t g = k_iq3xxs_grid[qs[8 * ib + l]];
            const uint8_t s = ksign((a >> (7 * (l / 2))) & 127);
            for (int j = 0; j < 4; j++)
                *y++ = db * (float)(uint8_t)(g >> (8 * j)) * ((s >> (4 * (l % 2) + j)) & 1 ? -1.f : 1.f);
        }
    }
}

/* block_iq3_s {f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]}:
 * index i (4 elements) is qs[i] | bit i % 8 of qh[i / 8] << 8
 * (iq3s_grid); element e's sign is bit e % 8 of signs[e / 8]; 32 elements
 * ib share s = nibble ib of scales, db = d (1 + 2 s), y = db grid[j] (+-1) */
void dsv4q_iq_iq3_s(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *sc = b + 106;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const float db = d * (float)(1 + 2 * ((sc[ib / 2] >> (4 * (ib % 2))) & 0xF));
        for (int l = 0; l < 8; l++) {
            const int i = 8 * ib + l;
            const uint32_t g = k_iq3s_grid[qs[i] | ((qh[i / 8] >> (i % 8)) & 1) << 8];
            for (int j = 0; j < 4; j++) {
                const int e = 4 * i + j;
                *y++ = db * (float)(uint8_t)(g >> (8 * j)) * ((signs[e / 8] >> (e % 8)) & 1 ? -1.f : 1.f);
            }
        }
    }
}

/* block_iq1_s {f16 d; u8 qs[32]; u16 qh[8]}: per 32 elements ib, u16 h =
 * qh[ib]: index l (8 elements) is qs[4 ib + l] | bits 3 l of h (3) << 8
 * (iq1s_grid, int8 -1/0/+1); dl = d (2 ((h >> 12) & 7) + 1), delta =
 * -0.125 if bit 15 of h else +0.125, y = dl (grid[j] + delta) */
void dsv4q_iq_iq1_s(const uint8_t *b, float *y)
{
    const float d = dsv4q_ggml_f16(b);
    const uint8_t *qs = b + 2;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint16_t h;
        memcpy(&h, b + 34 + 2 * ib, 2);
        const float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
        const float delta = h & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
        for (int l = 0; l < 4; l++) {
            const uint64_t g = k_iq1s_grid[qs[4 * ib + l] | ((h >> (3 * l)) & 7) << 8];
            for (int j = 0; j < 8; j++) *y++ = dl * ((float)(int8_t)(uint8_t)(g >> (8 * j)) + delta);
        }
    }
}

/* block_iq1_m {u8 qs[32]; u8 qh[16]; u8 scales[8]}: the F16 d is the top
 * nibbles of the four u16 scale words (word w gives bits 4 w .. 4 w + 3);
 * index k (8 elements) is qs[k] | nibble k of qh (low 3 bits) << 8
 * (iq1s_grid), the nibble's bit 3 negating the delta; 16 elements
 * 2 ib + h share the 3-bit scale s at bits 6 (ib % 2) + 3 h of word ib / 2,
 * dl = d (2 s + 1), y = dl (grid[j] + delta) */
void dsv4q_iq_iq1_m(const uint8_t *b, float *y)
{
    const uint8_t *qs = b, *qh = b + 32;
    uint16_t sc[4];
    memcpy(sc, b + 48, 8);
    const uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
    uint8_t dd[2];
    memcpy(dd, &dh, 2);
    const float d = dsv4q_ggml_f16(dd);
    for (int ib = 0; ib < QK_K / 32; ib++)
        for (int h = 0; h < 2; h++) {
            const float dl = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * h)) & 7) + 1);
            for (int i = 0; i < 2; i++) {
                const int k = 4 * ib + 2 * h + i;
                const unsigned nib = (qh[k / 2] >> (4 * (k % 2))) & 0xF;
                const uint64_t g = k_iq1s_grid[qs[k] | (nib & 7) << 8];
                const float delta = nib & 8 ? -IQ1_DELTA : IQ1_DELTA;
                for (int j = 0; j < 8; j++) *y++ = dl * ((float)(int8_t)(uint8_t)(g >> (8 * j)) + delta);
            }
        }
}
