/*
 * ds4_session.h - read the KV checkpoint files of ds4 (antirez/ds4, the
 * C/Metal DeepSeek V4 Flash engine): its disk KV cache `<sha1>.kv` (a KVC
 * file) or a bare session payload, decoded exactly to the per-layer cache
 * rows ds4 restores a session from (docs/caches.md, "ds4 session files").
 *
 * Read from ds4 at commit 8d57664: ds4_kvstore.c (ds4_kvstore_fill_header,
 * ds4_kvstore_read_header: the KVC header) and ds4.c
 * (ds4_session_save_payload, layer_attn_state_bytes,
 * layer_index_state_bytes, ds4_layer_compress_ratio, kv_cache_push_raw).
 * All integers and floats little-endian.
 *
 *   KVC file: 48-byte header: "KVC", version 1, quant_bits (2 or 4),
 *     reason, ext_flags, 0; u32 tokens @8, hits @12, ctx_size @16;
 *     u64 created_at @24, last_used @32, payload_bytes @40; then u32
 *     text_bytes, that many bytes of text, then the payload (a file may
 *     carry trailer bytes after it).
 *   payload: 13 u32: magic 0x34565344 ("DSV4"), version 1, ctx, prefill
 *     chunk, raw cap, raw window, compressed cap, tokens, layers, head_dim,
 *     indexer head_dim, vocab, raw_live; tokens x u32 token ids; vocab x
 *     f32 logits; layers x u32 n_comp; layers x u32 n_index_comp; then per
 *     layer l: raw_live x head_dim f32 (the sliding-window rows of the last
 *     raw_live positions, oldest first); when ratio(l) != 0: n_comp[l] x
 *     head_dim f32 compressed rows, then the compressor state (kv, then
 *     score: c x head_dim x c x ratio f32 each, c = 2 for ratio 4 else 1);
 *     when ratio(l) == 4: n_index_comp[l] x indexer head_dim f32 rows and
 *     the indexer compressor state (kv, score: c x idx_dim x c x 4 f32).
 *   ratio(l): ds4's fixed Flash schedule: 0 for layers 0 and 1, then 4 on
 *     even and 128 on odd layers (the payload does not store it).
 *
 * A compressor emits one row per `ratio` positions, so a checkpoint of T
 * tokens holds T / ratio compressed rows (and as many indexer rows):
 * dsv4q_ds4_session_check reports a layer that does not as a finding.
 * ds4's CPU path stores every raw and compressed value as an F16 value held
 * in f32 (kv_cache_push_raw / kv_cache_push_comp round through F16); its
 * Metal path stores the FP8-quantized row (ds4_gpu_kv_fp8_store_raw_tensor),
 * so "every value is F16" is reported as a fact of the file, not judged.
 */
#ifndef DSV4Q_DS4_SESSION_H
#define DSV4Q_DS4_SESSION_H

#include <stddef.h>
#include <stdint.h>

/* Where one layer's parts lie in the payload (byte offsets into the file). */
typedef struct dsv4q_ds4_layer {
    uint32_t ratio;           /* 0, 4 or 128 (ds4's schedule) */
    uint32_t n_raw;           /* raw rows (the header's raw_live) */
    uint32_t n_comp, n_index; /* compressed and indexer rows */
    size_t raw, comp, index;  /* offsets of the row blocks (comp/index: 0 when absent) */
} dsv4q_ds4_layer;

/* A parsed file. The buffer is the caller's and must outlive the struct. */
typedef struct dsv4q_ds4_session {
    const unsigned char *buf;
    size_t len;
    int kvc; /* 1: a KVC file; 0: a bare payload */
    uint32_t kvc_tokens, quant_bits, text_bytes;
    uint32_t ctx, prefill_cap, raw_cap, raw_window, comp_cap;
    uint32_t n_tokens, n_layer, head_dim, index_dim, vocab, raw_live;
    size_t ids, logits;          /* offsets of the token ids and the logits */
    size_t payload, payload_end; /* the payload's first and one-past-last byte */
    dsv4q_ds4_layer *layer;      /* n_layer entries (malloc'd) */
} dsv4q_ds4_session;

/* ds4's compress ratio of layer l (ds4.c ds4_layer_compress_ratio). */
uint32_t dsv4q_ds4_ratio(uint32_t l);

/* Parse buf[0..len) (the file `path`, for messages). Every size is checked
 * against the bytes present before any offset is used. 0, or -1 with one
 * line naming the file, the field and what was expected (bad magic or
 * version, a count beyond the file, a payload that ends early, a KVC token
 * count that is not the payload's). */
int dsv4q_ds4_session_parse(dsv4q_ds4_session *s, const unsigned char *buf, size_t len, const char *path, char *err,
                            size_t errlen);
void dsv4q_ds4_session_free(dsv4q_ds4_session *s);

/* Value i of the f32 block at byte offset off, widened exactly to f64. */
double dsv4q_ds4_value(const dsv4q_ds4_session *s, size_t off, uint64_t i);

/* The part of a layer: 0 raw, 1 compressed, 2 indexer rows; its row
 * count, row width and offset. -1 when the layer has no such part. */
int dsv4q_ds4_part(const dsv4q_ds4_session *s, uint32_t l, int part, uint32_t *rows, uint32_t *width, size_t *off);

/* The consistency findings of a parsed file, one line each into buf (at
 * most len bytes, "layer L: 2 compressed rows, 12 tokens / ratio 4 = 3"):
 * n_comp and n_index = tokens / ratio, every row value finite. Returns the
 * number of findings (0: consistent). *not_f16 (when not NULL) gets the
 * number of row values that are not F16 values, and *first_not_f16 a
 * "layer L raw row R [i] = v" line for the first (the CPU path's rule). */
long dsv4q_ds4_session_check(const dsv4q_ds4_session *s, char *buf, size_t len, uint64_t *not_f16, char *first_not_f16,
                             size_t flen);

#endif
