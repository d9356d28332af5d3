/*
 * int32_offset.c - a deliberately wrong plugin: correct sparse attention
 * and window decode step (source profile, kv_f16.c's arithmetic without
 * its F16 cache: double accumulation, BF16 probabilities for P*V, BF16
 * output), except that it finds a key row by a byte offset held in an int,
 *     int off = row * D * 4;      (a kernel written for short contexts)
 * which wraps past 2^31 bytes: at D = 512 in F32 every row from 1048576 on
 * is read 4 GiB before where it lies (a crash, or some other tensor's
 * bytes). Every Flash and Pro case keeps its KV under 2^31 bytes, so the
 * plugin passes them; the long slice (`qualify --shapes long-slice`,
 * KV tensors of 2 GiB + 256 KiB held sparse) must fail it, in `make test`
 * (tests/test_long_slice.c, issue 30).
 */
#include <stdlib.h>
#include "tests/backends/plugin_common.h"

/* Row `row` of the F32 rows at base, addressed the buggy way. The wrap is
 * written with unsigned arithmetic and a conversion to int32_t (what the
 * int multiply does on every machine a kernel runs on, without C's
 * undefined signed overflow, which a compiler could fold away). */
static const float *row_at(const float *base, int32_t row, int D)
{
    const int32_t off = (int32_t)((uint32_t)row * (uint32_t)D * 4u);
    return (const float *)(const void *)((const char *)base + off);
}

static float bf(double v) { return tp_bf16_f(tp_bf16((float)v)); }

/* The keys of one call: column id < N1 is row id of k1, N1 <= id < N1 + N2
 * row id - N1 of k2 (the decode step's ring snapshot and compressed rows);
 * anything else is masked. */
typedef struct keys {
    const float *k1, *k2;
    long N1, N2;
} keys;

static const float *key_row(const keys *k, int32_t id, int D)
{
    if (id < 0) return NULL;
    if (id < k->N1) return row_at(k->k1, id, D);
    if (id - k->N1 < k->N2) return row_at(k->k2, (int32_t)(id - k->N1), D);
    return NULL;
}

/* One query token, all heads: kernel.py sparse_attn over columns idx. */
static void attend(const float *q, int H, int D, const keys *kv, const int32_t *idx, long ncols, const float *sink,
                   double scale, uint16_t *o, double *O)
{
    for (int h = 0; h < H; h++) {
        const float *qh = q + (long)h * D;
        double m = -INFINITY, l = 0;
        for (int d = 0; d < D; d++) O[d] = 0;
        for (long b0 = 0; b0 < ncols; b0 += 64) {
            long nb = ncols - b0 < 64 ? ncols - b0 : 64;
            double sc[64], mb = m;
            const float *rows[64];
            for (long j = 0; j < nb; j++) {
                rows[j] = key_row(kv, idx[b0 + j], D);
                sc[j] = -INFINITY;
                if (!rows[j]) continue;
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)qh[d] * rows[j][d];
                sc[j] = dot * scale;
                if (sc[j] > mb) mb = sc[j];
            }
            if (mb == -INFINITY) continue;
            double alpha = m == -INFINITY ? 0 : exp(m - mb);
            l *= alpha;
            for (int d = 0; d < D; d++) O[d] *= alpha;
            for (long j = 0; j < nb; j++) {
                if (sc[j] == -INFINITY) continue;
                double e = exp(sc[j] - mb);
                l += e;
                double p = bf(e); /* attn_p_bf16 */
                for (int d = 0; d < D; d++) O[d] += p * rows[j][d];
            }
            m = mb;
        }
        uint16_t *oh = o + (long)h * D;
        if (m == -INFINITY) {
            for (int d = 0; d < D; d++) oh[d] = 0;
            continue;
        }
        double den = l + exp((double)sink[h] - m);
        for (int d = 0; d < D; d++) oh[d] = tp_bf16((float)(O[d] / den)); /* attn_out_bf16: BF16 codes */
    }
}

static int oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    return DSV4Q_BACKEND_ERROR;
}

static int i_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx;
    if (c->op == DSV4Q_OP_SPARSE_ATTN) {
        const float *q = c->in[0].data, *sink = c->in[3].data;
        const int32_t *idx = c->in[2].data;
        const long s = c->in[0].shape[0], ncols = c->in[2].shape[1];
        const int H = (int)c->in[0].shape[1], D = (int)c->in[0].shape[2];
        const keys kv = {c->in[1].data, NULL, c->in[1].shape[0], 0};
        double *O = malloc(sizeof(double) * (size_t)D);
        if (!O) return oom(err, errlen);
        for (long t = 0; t < s; t++)
            attend(q + t * H * D, H, D, &kv, idx + t * ncols, ncols, sink, c->param[0],
                   (uint16_t *)c->out[0].data + t * H * D, O);
        free(O);
        c->out[0].dtype = DSV4Q_BT_BF16;
        return DSV4Q_BACKEND_OK;
    }
    if (c->op == DSV4Q_OP_WINDOW_ATTN_DECODE) {
        const float *q = c->in[0].data, *kn = c->in[1].data, *ring = c->in[2].data, *sink = c->in[5].data;
        const int32_t *cidx = c->in[4].data;
        const int H = (int)c->in[0].shape[1], D = (int)c->in[0].shape[2];
        const long w = c->in[2].shape[0], Nc = c->in[3].ndim ? c->in[3].shape[0] : 0,
                   nc = c->in[4].ndim ? c->in[4].shape[1] : 0, p = (long)c->param[0], slot = p % w;
        float *ring_out = c->out[1].data;
        int32_t *cols = malloc(sizeof(int32_t) * (size_t)(w + nc));
        double *O = malloc(sizeof(double) * (size_t)D);
        if (!cols || !O) {
            free(cols);
            free(O);
            return oom(err, errlen);
        }
        /* the ring with the new row in its slot, then attend over [ring | cmp] */
        memcpy(ring_out, ring, sizeof(float) * (size_t)(w * D));
        memcpy(ring_out + slot * D, kn, sizeof(float) * (size_t)D);
        long n = 0;
        if (p + 1 >= w)
            for (long t = slot + 1; n < w; t++) cols[n++] = (int32_t)(t % w);
        else
            for (; n < w; n++) cols[n] = n <= p ? (int32_t)n : -1;
        for (long j = 0; j < nc; j++) cols[w + j] = (cidx[j] >= 0 && cidx[j] < Nc) ? (int32_t)(w + cidx[j]) : -1;
        const keys kv = {ring_out, c->in[3].data, w, Nc};
        attend(q, H, D, &kv, cols, w + nc, sink, c->param[2], c->out[0].data, O);
        free(cols);
        free(O);
        c->out[0].dtype = DSV4Q_BT_BF16;
        return DSV4Q_BACKEND_OK;
    }
    return DSV4Q_BACKEND_UNSUPPORTED;
}

/* clang-format off */
static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-int32-offset", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) | DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE), NULL, i_run, NULL,
};
/* clang-format on */

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
