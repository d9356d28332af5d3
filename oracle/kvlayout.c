/*
 * kvlayout.c - the cache layout catalog and its exact decoders (kvlayout.h).
 *
 * What was read where (facts only; docs/caches.md repeats them):
 *  - vllm_fp8_ds_mla: vLLM vllm/models/deepseek_v4/common/ops/cache_utils.py
 *    (quantize_and_insert_k_kernel, _dequantize_and_gather_k_kernel) and
 *    fused_compress_quant_cache.py (_fused_kv_compress_norm_rope_insert_
 *    sparse_attn): per token 448 E4M3 nope bytes then 64 BF16 RoPE values
 *    (576 B), all of a block's token data first, then per token 8 UE8M0
 *    bytes (7 scales, one per 64 nope values, byte = exponent + 127; the 8th
 *    is written 0), block stride padded to a multiple of 576 (the
 *    quantize_and_insert_k_cache docstring; the spec's alignment=576).
 *  - vllm_fp8_index_k: the same fused_compress_quant_cache.py
 *    (_fused_kv_compress_norm_rope_insert_indexer_attn): 128 E4M3 bytes per
 *    token, then per token one little-endian binary32 scale (a power of two).
 *  - vllm_mxfp4_index_k: the same file (..._indexer_mxfp4_attn): 64 packed
 *    E2M1 bytes per token (low nibble = even element, fused_indexer_q.py's
 *    _fp32x2_to_fp4x2), then 4 UE8M0 bytes per token (one per 32 values).
 *  - llamacpp_f16 / llamacpp_q8_0: llama.cpp src/llama-kv-cache.cpp creates
 *    each layer's cache as ggml_new_tensor_3d(type_k, n_embd_k_gqa,
 *    kv_size, n_stream): one contiguous row of n_embd_k_gqa elements per
 *    cell, in the cache type (ggml's F16, or Q8_0 blocks of an F16 scale and
 *    32 int8).
 *  - sglang_v4_fp8, sglang_v41_fp8, sglang_v41_fp4: SGLang
 *    sglang/kernels/ops/attention/dsv4/kv_layout.py (KVLayout: "a
 *    page block stores page_size data rows followed by page_size scale
 *    rows"): V4 = 576 data (448 FP8 nope + 64 BF16 rope) + 8 scale bytes (7
 *    UE8M0 per 64 + 1 pad), page padded to 576 (the same bytes as vLLM's
 *    fp8_ds_mla; sglang/srt/mem_cache/deepseek_v4_memory_pool.py asserts 584 B/token);
 *    V41 = 512 FP8 (rope quantized too) + 16 UE8M0 scales per 32 values,
 *    page padded to 512; V41_FP4 = 512 E2M1 packed two per byte (even index
 *    low nibble, 256 B) + 32 E4M3 scales per 16 values, page padded to 256:
 *    the 288 B/token V4.1 FP4 record.
 */
#include <stdio.h>
#include <string.h>
#include "oracle/formats.h"
#include "oracle/ggml_decode.h"
#include "oracle/kvlayout.h"

/* clang-format off */
static const dsv4q_kvlayout CATALOG[] = {
    {"vllm_fp8_ds_mla", "vLLM", "KV / compressed KV (head 512)",
     "vllm/models/deepseek_v4/common/ops/cache_utils.py, fused_compress_quant_cache.py",
     "block: [B x (448 E4M3 nope | 64 BF16 rope)] [B x (7 UE8M0 scales | 1 pad)] pad to 576",
     1, 576, 8, 576, 512, 64, 7, 64, -1, 64, DSV4Q_KVC_FP8_UE8M0_ROPE},
    {"vllm_fp8_index_k", "vLLM", "indexer K (head 128)",
     "vllm/models/deepseek_v4/common/ops/fused_compress_quant_cache.py",
     "block: [B x 128 E4M3] [B x 1 F32 scale]",
     1, 128, 4, 1, 128, 64, 1, 128, -1, 64, DSV4Q_KVC_FP8_F32},
    {"vllm_mxfp4_index_k", "vLLM", "indexer K (head 128)",
     "vllm/models/deepseek_v4/common/ops/fused_compress_quant_cache.py, fused_indexer_q.py",
     "block: [B x 64 B packed E2M1, low nibble even] [B x 4 UE8M0 scales]",
     1, 64, 4, 1, 128, 64, 4, 32, -1, 64, DSV4Q_KVC_E2M1_UE8M0},
    {"sglang_v4_fp8", "SGLang", "KV / compressed KV (head 512)",
     "sglang/kernels/ops/attention/dsv4/kv_layout.py (KVLayout.V4)",
     "page: [B x (448 E4M3 nope | 64 BF16 rope)] [B x (7 UE8M0 scales | 1 pad)] pad to 576",
     1, 576, 8, 576, 512, 64, 7, 64, -1, 64, DSV4Q_KVC_FP8_UE8M0_ROPE},
    {"sglang_v41_fp8", "SGLang", "V4.1 KV (head 512)",
     "sglang/kernels/ops/attention/dsv4/kv_layout.py (KVLayout.V41)",
     "page: [B x 512 E4M3 (rope too)] [B x 16 UE8M0 scales, one per 32] pad to 512",
     1, 512, 16, 512, 512, 64, 16, 32, -1, 64, DSV4Q_KVC_FP8_UE8M0},
    {"sglang_v41_fp4", "SGLang", "V4.1 KV (head 512)",
     "sglang/kernels/ops/attention/dsv4/kv_layout.py (KVLayout.V41_FP4)",
     "page: [B x 256 B packed E2M1, low nibble even] [B x 32 E4M3 scales, one per 16] pad to 256",
     1, 256, 32, 256, 512, 64, 32, 16, -1, 64, DSV4Q_KVC_E2M1_E4M3},
    {"llamacpp_f16", "llama.cpp", "K or V (cache_k_l*, cache_v_l*)",
     "src/llama-kv-cache.cpp (ggml_new_tensor_3d(type_k, n_embd_k_gqa, kv_size, n_stream))",
     "row per cell: width F16 values",
     0, 0, 0, 1, 0, 0, 0, 0, DSV4Q_GGML_F16, 1, DSV4Q_KVC_ROWS},
    {"llamacpp_q8_0", "llama.cpp", "K or V (cache_k_l*, cache_v_l*)",
     "src/llama-kv-cache.cpp; ggml Q8_0 block (F16 d, 32 int8)",
     "row per cell: width/32 blocks of (F16 scale | 32 int8)",
     0, 0, 0, 1, 0, 0, 0, 32, DSV4Q_GGML_Q8_0, 1, DSV4Q_KVC_ROWS},
};
/* clang-format on */
#define NCAT ((int)(sizeof CATALOG / sizeof CATALOG[0]))

const dsv4q_kvlayout *dsv4q_kvlayout_all(int *n)
{
    *n = NCAT;
    return CATALOG;
}

const dsv4q_kvlayout *dsv4q_kvlayout_find(const char *name)
{
    for (int i = 0; name && i < NCAT; i++)
        if (!strcmp(CATALOG[i].name, name)) return &CATALOG[i];
    return NULL;
}

static void names(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < NCAT && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", CATALOG[i].name);
}

int dsv4q_kvgeom_init(dsv4q_kvgeom *g, const char *name, long block_size, long width, char *err, size_t errlen)
{
    const dsv4q_kvlayout *l = dsv4q_kvlayout_find(name);
    memset(g, 0, sizeof *g);
    if (!l) {
        char all[256];
        names(all, sizeof all);
        snprintf(err, errlen, "unknown cache layout '%s' (known: %s)", name ? name : "", all);
        return -1;
    }
    g->l = l;
    if (l->planar) {
        if (width && width != l->n_val) {
            snprintf(err, errlen, "layout %s: width %ld, expected %d (fixed by the layout)", l->name, width, l->n_val);
            return -1;
        }
        if (block_size < 0 || block_size > (1L << 20)) {
            snprintf(err, errlen, "layout %s: block size %ld, expected 1..%ld tokens", l->name, block_size, 1L << 20);
            return -1;
        }
        g->block_size = block_size ? block_size : l->default_block;
        g->width = l->n_val;
        g->token_bytes = (size_t)(l->data_bytes + l->scale_bytes);
        const size_t raw = g->token_bytes * (size_t)g->block_size, a = (size_t)l->align;
        g->block_stride = (raw + a - 1) / a * a;
        g->n_val = l->n_val;
        g->n_rope = l->n_rope;
        g->n_scale = l->n_scale;
        return 0;
    }
    if (block_size > 1) {
        snprintf(err, errlen, "layout %s: block size %ld, expected 1 (one row per cell)", l->name, block_size);
        return -1;
    }
    const int64_t be = dsv4q_ggml_block_elems(l->ggml_type);
    if (width <= 0 || width > (1L << 24) || width % be) {
        snprintf(err, errlen, "layout %s: width %ld, expected the row's element count (1..%ld, a multiple of %lld)",
                 l->name, width, 1L << 24, (long long)be);
        return -1;
    }
    g->block_size = 1;
    g->width = width;
    g->token_bytes = g->block_stride = dsv4q_ggml_row_bytes(l->ggml_type, width);
    g->n_val = (int)width;
    g->n_rope = 0;
    g->n_scale = l->group ? (int)(width / l->group) : 0;
    return 0;
}

int64_t dsv4q_kvcache_slots(const dsv4q_kvgeom *g, size_t nbytes, const char *what, char *err, size_t errlen)
{
    if (nbytes == 0 || nbytes % g->block_stride) {
        snprintf(err, errlen,
                 "%s: %zu bytes is not a whole number of %s blocks (expected a multiple of %zu B: %lld token(s) of "
                 "%zu B%s)",
                 what, nbytes, g->l->name, g->block_stride, (long long)g->block_size, g->token_bytes,
                 g->block_stride > g->token_bytes * (size_t)g->block_size ? " + padding" : "");
        return -1;
    }
    return (int64_t)(nbytes / g->block_stride) * g->block_size;
}

static double ue8m0(uint8_t b) { return dsv4q_e8m0_decode(b); }

static double f32_le(const uint8_t *p)
{
    union {
        uint32_t u;
        float f;
    } x;
    x.u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return (double)x.f;
}

static uint16_t u16_le(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static double e2m1_at(const uint8_t *d, int i)
{
    return dsv4q_e2m1_decode((uint8_t)(i & 1 ? d[i / 2] >> 4 : d[i / 2] & 15));
}

/* The planar layouts, given the token's data and scale bytes. */
static void decode_planar(const dsv4q_kvlayout *l, const uint8_t *d, const uint8_t *s, double *val, double *scale)
{
    const int nope = l->n_val - l->n_rope, g = l->group;
    switch (l->codec) {
    case DSV4Q_KVC_FP8_UE8M0_ROPE:
        for (int i = 0; i < nope; i++) val[i] = dsv4q_e4m3_decode(d[i]) * ue8m0(s[i / g]);
        for (int i = 0; i < l->n_rope; i++) val[nope + i] = dsv4q_bf16_decode(u16_le(d + nope + 2 * i));
        break;
    case DSV4Q_KVC_FP8_UE8M0:
        for (int i = 0; i < l->n_val; i++) val[i] = dsv4q_e4m3_decode(d[i]) * ue8m0(s[i / g]);
        break;
    case DSV4Q_KVC_FP8_F32:
        for (int i = 0; i < l->n_val; i++) val[i] = dsv4q_e4m3_decode(d[i]) * f32_le(s);
        break;
    case DSV4Q_KVC_E2M1_UE8M0:
        for (int i = 0; i < l->n_val; i++) val[i] = e2m1_at(d, i) * ue8m0(s[i / g]);
        break;
    default: /* DSV4Q_KVC_E2M1_E4M3 */
        for (int i = 0; i < l->n_val; i++) val[i] = e2m1_at(d, i) * dsv4q_e4m3_decode(s[i / g]);
        break;
    }
    if (!scale) return;
    for (int k = 0; k < l->n_scale; k++)
        scale[k] = l->codec == DSV4Q_KVC_FP8_F32     ? f32_le(s)
                   : l->codec == DSV4Q_KVC_E2M1_E4M3 ? dsv4q_e4m3_decode(s[k])
                                                     : ue8m0(s[k]);
}

void dsv4q_kvcache_decode(const dsv4q_kvgeom *g, const uint8_t *bytes, int64_t s, int interleaved, double *val,
                          double *scale)
{
    const dsv4q_kvlayout *l = g->l;
    if (!l->planar) {
        const uint8_t *row = bytes + (size_t)s * g->token_bytes;
        dsv4q_ggml_row_f64(l->ggml_type, row, g->width, 0, val);
        if (scale) /* Q8_0: the F16 d at the head of each 34-byte block */
            for (int k = 0; k < g->n_scale; k++) scale[k] = dsv4q_f16_decode(u16_le(row + (size_t)k * 34));
        return;
    }
    const uint8_t *d, *sc;
    if (interleaved) {
        d = bytes + (size_t)s * g->token_bytes;
        sc = d + l->data_bytes;
    } else {
        const uint8_t *blk = bytes + (size_t)(s / g->block_size) * g->block_stride;
        const int64_t p = s % g->block_size;
        d = blk + (size_t)p * (size_t)l->data_bytes;
        sc = blk + (size_t)g->block_size * (size_t)l->data_bytes + (size_t)p * (size_t)l->scale_bytes;
    }
    decode_planar(l, d, sc, val, scale);
}
