/*
 * ds4_session.c - ds4's KV checkpoint files (see ds4_session.h for the
 * layout and where it was read from). Parsing walks the payload once with a
 * cursor whose every step is checked against the bytes present; nothing is
 * read before its size has been checked.
 */
#include "io/ds4_session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/unaligned.h"
#include "base/util.h"
#include "oracle/formats.h"

enum { KVC_HEADER = 48, PAYLOAD_U32 = 13 };
#define PAYLOAD_MAGIC 0x34565344u /* "DSV4" little-endian */

uint32_t dsv4q_ds4_ratio(uint32_t l) { return l < 2 ? 0 : (l & 1u) == 0 ? 4u : 128u; }

static uint32_t u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t u64_at(const unsigned char *p) { return (uint64_t)u32_at(p) | (uint64_t)u32_at(p + 4) << 32; }

/* A cursor over the payload: take(n) advances by n bytes when they are
 * there, else fails naming what was being read. */
typedef struct cur {
    const dsv4q_ds4_session *s;
    size_t at, end;
    const char *path;
    char *err;
    size_t errlen;
} cur;

static int take(cur *c, uint64_t n, const char *what, size_t *off)
{
    if (n > (uint64_t)(c->end - c->at))
        return dsv4q_errf(c->err, c->errlen,
                          "%s: ds4 session payload ends inside %s (needs %llu bytes at offset %zu, %zu left)", c->path,
                          what, (unsigned long long)n, c->at, c->end - c->at);
    if (off) *off = c->at;
    c->at += (size_t)n;
    return 0;
}

/* f32 blocks: rows x width x 4 bytes, with the product checked for overflow. */
static int take_f32(cur *c, uint64_t rows, uint64_t width, const char *what, size_t *off)
{
    if (width && rows > UINT64_MAX / 4 / width) return take(c, UINT64_MAX, what, off);
    return take(c, rows * width * 4, what, off);
}

static uint64_t state_vals(uint32_t ratio, uint32_t width)
{
    const uint64_t coff = ratio == 4 ? 2 : 1;
    return coff * width * coff * ratio;
}

static int parse_kvc(dsv4q_ds4_session *s, const char *path, char *err, size_t errlen)
{
    const unsigned char *h = s->buf;
    if (s->len < KVC_HEADER + 4)
        return dsv4q_errf(err, errlen, "%s: %zu bytes, shorter than a ds4 KVC header (52)", path, s->len);
    if (h[3] != 1) return dsv4q_errf(err, errlen, "%s: ds4 KVC version %u, expected 1", path, h[3]);
    s->kvc = 1;
    s->quant_bits = h[4];
    s->kvc_tokens = u32_at(h + 8);
    const uint64_t payload_bytes = u64_at(h + 40);
    s->text_bytes = u32_at(h + KVC_HEADER);
    const uint64_t start = (uint64_t)KVC_HEADER + 4 + s->text_bytes;
    if (start > s->len || payload_bytes > s->len - start)
        return dsv4q_errf(err, errlen,
                          "%s: the KVC header declares %u text bytes and a %llu-byte payload, the file has %zu bytes",
                          path, s->text_bytes, (unsigned long long)payload_bytes, s->len);
    s->payload = (size_t)start;
    s->payload_end = (size_t)(start + payload_bytes);
    return 0;
}

int dsv4q_ds4_session_parse(dsv4q_ds4_session *s, const unsigned char *buf, size_t len, const char *path, char *err,
                            size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->buf = buf;
    s->len = len;
    if (len >= 3 && !memcmp(buf, "KVC", 3)) {
        if (parse_kvc(s, path, err, errlen)) return -1;
    } else {
        s->payload_end = len;
    }
    cur c = {s, s->payload, s->payload_end, path, err, errlen};
    size_t at = 0;
    if (take(&c, PAYLOAD_U32 * 4, "the 13 header fields", &at)) return -1;
    uint32_t f[PAYLOAD_U32];
    for (int i = 0; i < PAYLOAD_U32; i++) f[i] = u32_at(buf + at + 4 * i);
    if (f[0] != PAYLOAD_MAGIC)
        return dsv4q_errf(err, errlen, "%s: %s magic 0x%08x, expected 0x%08x (\"DSV4\") or a \"KVC\" file", path,
                          s->kvc ? "payload" : "file", f[0], PAYLOAD_MAGIC);
    if (f[1] != 1) return dsv4q_errf(err, errlen, "%s: ds4 session payload version %u, expected 1", path, f[1]);
    s->ctx = f[2], s->prefill_cap = f[3], s->raw_cap = f[4], s->raw_window = f[5], s->comp_cap = f[6];
    s->n_tokens = f[7], s->n_layer = f[8], s->head_dim = f[9], s->index_dim = f[10], s->vocab = f[11];
    s->raw_live = f[12];
    if (!s->n_layer || s->n_layer > 4096 || !s->head_dim || s->head_dim > 65536 || s->index_dim > 65536)
        return dsv4q_errf(err, errlen,
                          "%s: ds4 payload geometry layers %u, head_dim %u, indexer head_dim %u: "
                          "expected 1..4096 layers and dims up to 65536",
                          path, s->n_layer, s->head_dim, s->index_dim);
    if (s->raw_live > s->n_tokens || (s->raw_cap && s->raw_live > s->raw_cap))
        return dsv4q_errf(err, errlen, "%s: raw_live %u rows, more than the %u tokens or the raw cap %u", path,
                          s->raw_live, s->n_tokens, s->raw_cap);
    if (s->kvc && s->kvc_tokens != s->n_tokens)
        return dsv4q_errf(err, errlen, "%s: the KVC header says %u tokens, its payload %u", path, s->kvc_tokens,
                          s->n_tokens);
    size_t ncomp = 0, nidx = 0;
    if (take(&c, (uint64_t)s->n_tokens * 4, "the token ids", &s->ids) ||
        take_f32(&c, 1, s->vocab, "the logits", &s->logits) ||
        take(&c, (uint64_t)s->n_layer * 4, "the per-layer compressed row counts", &ncomp) ||
        take(&c, (uint64_t)s->n_layer * 4, "the per-layer indexer row counts", &nidx))
        return -1;
    s->layer = calloc(s->n_layer, sizeof *s->layer);
    if (!s->layer) return dsv4q_errf(err, errlen, "%s: out of memory", path);
    for (uint32_t l = 0; l < s->n_layer; l++) {
        dsv4q_ds4_layer *y = &s->layer[l];
        char what[96];
        y->ratio = dsv4q_ds4_ratio(l);
        y->n_raw = s->raw_live;
        y->n_comp = u32_at(buf + ncomp + 4 * l);
        y->n_index = u32_at(buf + nidx + 4 * l);
        if ((!y->ratio && y->n_comp) || (y->ratio != 4 && y->n_index)) {
            dsv4q_errf(err, errlen, "%s: layer %u (ratio %u) declares %u compressed and %u indexer rows; ds4 keeps %s",
                       path, l, y->ratio, y->n_comp, y->n_index,
                       y->ratio ? "no indexer rows on a ratio-128 layer" : "none on a ratio-0 layer");
            dsv4q_ds4_session_free(s);
            return -1;
        }
        snprintf(what, sizeof what, "layer %u's raw rows", l);
        int bad = take_f32(&c, y->n_raw, s->head_dim, what, &y->raw);
        if (!bad && y->ratio) {
            snprintf(what, sizeof what, "layer %u's compressed rows and compressor state", l);
            bad = take_f32(&c, y->n_comp, s->head_dim, what, &y->comp) ||
                  take_f32(&c, 2, state_vals(y->ratio, s->head_dim), what, NULL);
        }
        if (!bad && y->ratio == 4) {
            snprintf(what, sizeof what, "layer %u's indexer rows and indexer state", l);
            bad = take_f32(&c, y->n_index, s->index_dim, what, &y->index) ||
                  take_f32(&c, 2, state_vals(4, s->index_dim), what, NULL);
        }
        if (bad) {
            dsv4q_ds4_session_free(s);
            return -1;
        }
    }
    if (c.at != c.end) {
        dsv4q_ds4_session_free(s);
        return dsv4q_errf(err, errlen, "%s: %zu bytes after the last layer's rows, inside the %s", path, c.end - c.at,
                          s->kvc ? "payload the KVC header declares" : "file");
    }
    return 0;
}

void dsv4q_ds4_session_free(dsv4q_ds4_session *s)
{
    free(s->layer);
    s->layer = NULL;
}

double dsv4q_ds4_value(const dsv4q_ds4_session *s, size_t off, uint64_t i)
{
    return (double)dsv4q_ld_f32(s->buf + off, (int64_t)i);
}

int dsv4q_ds4_part(const dsv4q_ds4_session *s, uint32_t l, int part, uint32_t *rows, uint32_t *width, size_t *off)
{
    if (l >= s->n_layer) return -1;
    const dsv4q_ds4_layer *y = &s->layer[l];
    if (part == 0) *rows = y->n_raw, *width = s->head_dim, *off = y->raw;
    else if (part == 1 && y->ratio) *rows = y->n_comp, *width = s->head_dim, *off = y->comp;
    else if (part == 2 && y->ratio == 4) *rows = y->n_index, *width = s->index_dim, *off = y->index;
    else return -1;
    return 0;
}

static const char *const k_part[3] = {"raw", "compressed", "indexer"};

long dsv4q_ds4_session_check(const dsv4q_ds4_session *s, char *buf, size_t len, uint64_t *not_f16, char *first_not_f16,
                             size_t flen)
{
    long n = 0;
    size_t o = 0;
    uint64_t nf = 0;
    if (len) buf[0] = 0;
    if (flen) first_not_f16[0] = 0;
#define FINDING(...)                                                                                                   \
    do {                                                                                                               \
        n++;                                                                                                           \
        if (o < len) o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__);                                             \
    } while (0)
    for (uint32_t l = 0; l < s->n_layer; l++) {
        const dsv4q_ds4_layer *y = &s->layer[l];
        if (y->ratio && y->n_comp != s->n_tokens / y->ratio)
            FINDING("layer %u: %u compressed rows, %u tokens / ratio %u = %u\n", l, y->n_comp, s->n_tokens, y->ratio,
                    s->n_tokens / y->ratio);
        if (y->ratio == 4 && y->n_index != s->n_tokens / 4)
            FINDING("layer %u: %u indexer rows, %u tokens / ratio 4 = %u\n", l, y->n_index, s->n_tokens,
                    s->n_tokens / 4);
        for (int p = 0; p < 3; p++) {
            uint32_t rows, w;
            size_t off;
            if (dsv4q_ds4_part(s, l, p, &rows, &w, &off)) continue;
            int bad_row = 0;
            for (uint64_t i = 0; i < (uint64_t)rows * w; i++) {
                const double v = dsv4q_ds4_value(s, off, i);
                if (!isfinite(v)) {
                    if (!bad_row++)
                        FINDING("layer %u %s row %llu [%llu] = %g: not finite\n", l, k_part[p],
                                (unsigned long long)(i / w), (unsigned long long)(i % w), v);
                } else if (dsv4q_f16_decode(dsv4q_f16_encode(v)) != v) {
                    if (!nf++ && flen)
                        snprintf(first_not_f16, flen, "layer %u %s row %llu [%llu] = %.9g", l, k_part[p],
                                 (unsigned long long)(i / w), (unsigned long long)(i % w), v);
                }
            }
        }
    }
#undef FINDING
    if (not_f16) *not_f16 = nf;
    return n;
}
