/*
 * kv_f16.c - a deliberately wrong plugin: correct sparse attention and
 * window decode step (source profile: online softmax over 64-column
 * blocks, BF16 probabilities for P*V, BF16 output), except that it keeps
 * the KV rows (and the ring it hands back) in F16, as an engine with an
 * F16 KV cache would, without declaring it. F16 holds every BF16 value of
 * ordinary size exactly, so the BF16-valued attention recipes cannot see
 * it; the full-mantissa recipe (f32) must (issue 19: nrms ~2.5e-4 against
 * a ~2e-6 bound). tests/test_qualify.c checks that it fails exactly the
 * attention cases whose KV rows carry F32 bits.
 *
 * Arithmetic in double (closer to the FP64 reference than the FP32 level
 * it is judged against), outputs stored as BF16 codes (ABI option b), so
 * the F16 storage is the only deviation.
 */
#include <stdlib.h>
#include "tests/backends/plugin_common.h"

/* RNE float -> nearest F16 value (as a float): 10 mantissa bits, normal
 * exponents down to -14, subnormal quantum 2^-24, overflow to inf. */
static float f16(float x)
{
    if (!isfinite(x) || x == 0) return x;
    double a = fabs((double)x);
    if (a >= 65520.0) return x > 0 ? INFINITY : -INFINITY;
    int e;
    frexp(a, &e);   /* a in [2^(e-1), 2^e) */
    double q = e - 1 < -14 ? ldexp(1.0, -24) : ldexp(1.0, e - 1 - 10);
    return (float)copysign(rint(a / q) * q, (double)x);
}

static float bf(double v) { return tp_bf16_f(tp_bf16((float)v)); }

/* One query token, all heads: the kernel of kernel.py sparse_attn over
 * the key rows kv (already F16-valued), columns idx (-1 / >= N masked). */
static void attend(const float *q, int H, int D, const float *kv, long N, const int32_t *idx, long ncols,
                   const float *sink, double scale, uint16_t *o, double *O)
{
    for (int h = 0; h < H; h++) {
        const float *qh = q + (long)h * D;
        double m = -INFINITY, l = 0;
        double *Oh = O;
        for (int d = 0; d < D; d++) Oh[d] = 0;
        for (long b0 = 0; b0 < ncols; b0 += 64) {
            long nb = ncols - b0 < 64 ? ncols - b0 : 64;
            double sc[64], mb = m;
            for (long j = 0; j < nb; j++) {
                int32_t id = idx[b0 + j];
                sc[j] = -INFINITY;
                if (id < 0 || id >= N) continue;
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)qh[d] * kv[(long)id * D + d];
                sc[j] = dot * scale;
                if (sc[j] > mb) mb = sc[j];
            }
            if (mb == -INFINITY) continue;
            double alpha = m == -INFINITY ? 0 : exp(m - mb);
            l *= alpha;
            for (int d = 0; d < D; d++) Oh[d] *= alpha;
            for (long j = 0; j < nb; j++) {
                if (sc[j] == -INFINITY) continue;
                double e = exp(sc[j] - mb);
                l += e;
                double p = bf(e);   /* attn_p_bf16 */
                const float *k = kv + (long)idx[b0 + j] * D;
                for (int d = 0; d < D; d++) Oh[d] += p * k[d];
            }
            m = mb;
        }
        uint16_t *oh = o + (long)h * D;
        if (m == -INFINITY) {
            for (int d = 0; d < D; d++) oh[d] = 0;
            continue;
        }
        double den = l + exp((double)sink[h] - m);
        for (int d = 0; d < D; d++) oh[d] = tp_bf16((float)(Oh[d] / den));   /* attn_out_bf16: BF16 codes */
    }
}

static int k_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx;
    if (c->op == DSV4Q_OP_SPARSE_ATTN) {
        const float *q = c->in[0].data, *kv = c->in[1].data, *sink = c->in[3].data;
        const int32_t *idx = c->in[2].data;
        const long s = c->in[0].shape[0], N = c->in[1].shape[0], ncols = c->in[2].shape[1];
        const int H = (int)c->in[0].shape[1], D = (int)c->in[0].shape[2];
        float *cache = malloc(sizeof(float) * (size_t)(N * D + 1));
        double *O = malloc(sizeof(double) * (size_t)D);
        if (!cache || !O) {
            free(cache);
            free(O);
            snprintf(err, errlen, "out of memory");
            return DSV4Q_BACKEND_ERROR;
        }
        for (long i = 0; i < N * D; i++) cache[i] = f16(kv[i]);   /* the F16 KV cache */
        for (long t = 0; t < s; t++)
            attend(q + t * H * D, H, D, cache, N, idx + t * ncols, ncols, sink, c->param[0],
                   (uint16_t *)c->out[0].data + t * H * D, O);
        free(cache);
        free(O);
        c->out[0].dtype = DSV4Q_BT_BF16;
        return DSV4Q_BACKEND_OK;
    }
    if (c->op == DSV4Q_OP_WINDOW_ATTN_DECODE) {
        const float *q = c->in[0].data, *kn = c->in[1].data, *ring = c->in[2].data, *cmp = c->in[3].data,
                    *sink = c->in[5].data;
        const int32_t *cidx = c->in[4].data;
        const int H = (int)c->in[0].shape[1], D = (int)c->in[0].shape[2];
        const long w = c->in[2].shape[0], Nc = c->in[3].ndim ? c->in[3].shape[0] : 0,
                   nc = c->in[4].ndim ? c->in[4].shape[1] : 0, p = (long)c->param[0], slot = p % w;
        float *keys = malloc(sizeof(float) * (size_t)((w + Nc) * D)), *ring_out = c->out[1].data;
        int32_t *cols = malloc(sizeof(int32_t) * (size_t)(w + nc));
        double *O = malloc(sizeof(double) * (size_t)D);
        if (!keys || !cols || !O) {
            free(keys);
            free(cols);
            free(O);
            snprintf(err, errlen, "out of memory");
            return DSV4Q_BACKEND_ERROR;
        }
        /* the cache [ring | compressed rows] in F16; the new row first */
        for (long i = 0; i < w * D; i++) keys[i] = f16(ring[i]);
        for (long d = 0; d < D; d++) keys[slot * D + d] = f16(kn[d]);
        for (long i = 0; i < Nc * D; i++) keys[w * D + i] = f16(cmp[i]);
        memcpy(ring_out, keys, sizeof(float) * (size_t)(w * D));
        long n = 0;
        if (p + 1 >= w)
            for (long t = slot + 1; n < w; t++) cols[n++] = (int32_t)(t % w);
        else
            for (; n < w; n++) cols[n] = n <= p ? (int32_t)n : -1;
        for (long j = 0; j < nc; j++) cols[w + j] = (cidx[j] >= 0 && cidx[j] < Nc) ? (int32_t)(w + cidx[j]) : -1;
        attend(q, H, D, keys, w + Nc, cols, w + nc, sink, c->param[2], c->out[0].data, O);
        free(keys);
        free(cols);
        free(O);
        c->out[0].dtype = DSV4Q_BT_BF16;
        return DSV4Q_BACKEND_OK;
    }
    return DSV4Q_BACKEND_UNSUPPORTED;
}

static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-kv-f16", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) | DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE), NULL, k_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
