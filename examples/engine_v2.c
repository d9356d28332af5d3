/*
 * engine_v2.c - the worked example of docs/engines.md: an ABI v2 plugin
 * that behaves like a real engine (built by `make plugins`/`make test` into
 * build/plugins/engine_v2.so and qualified by tests/test_engines.c):
 * it quantizes the input of every FP8/FP4-weight LINEAR to GGML Q8_0
 * blocks of 32 (not DeepSeek's FP8 per 128) and DECLARES that
 * ("source:act_q8_0,kv_f16"); it declines the FP32-math head case through
 * supports() (by tensor role, not by parsing the key); its RMSNORM refuses
 * to run without the tensor identity the harness must pass.
 *
 * Written independently of the oracle: Q8_0 follows ggml's
 * quantize_row_q8_0_ref in float (d = amax/127, id = 1/d, q = roundf(x*id),
 * scale stored F16), products accumulated in double. The environment
 * variable DSV4Q_TEST_UNDECLARED=1 makes the SAME plugin declare plain
 * "source": its Q8_0 linears must then fail (an undeclared deviation).
 *
 * Engine-stored weights (ABI v2 load_weight), DSV4Q_TEST_OWN_WEIGHTS:
 *   1  FP8/FP4 linear weights are re-encoded GGML Q8_0 (ggml's
 *      quantize_row_q8_0_ref on the decoded rows), BF16 ones F16, and run()
 *      computes with them: the kernel error is the engine's, the format
 *      error is reported apart;
 *   2  the same claim, but run() uses the reference weights (a lie the
 *      kernel error must catch).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "abi/dsv4q_backend.h"   /* the only dsv4q header an engine needs */

/* RNE float -> BF16 code (finite inputs), NaN kept quiet. */
static uint16_t tp_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int64_t tp_numel(const dsv4q_bt *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return t->ndim ? n : 0;
}

/* RMSNORM, source profile: double accumulation, output as BF16 codes. */
static void tp_rmsnorm(const dsv4q_bcall *c)
{
    const float *x = c->in[0].data, *w = c->in[1].data;
    const int64_t rows = c->in[0].shape[0], d = c->in[0].shape[1];
    uint16_t *y = c->out[0].data;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
        double inv = 1.0 / sqrt(ss / (double)d + c->param[0]);
        for (int64_t i = 0; i < d; i++) y[r * d + i] = tp_bf16((float)(w[i] * (x[r * d + i] * inv)));
    }
    c->out[0].dtype = DSV4Q_BT_BF16;
}

/* F16 code of a float already rounded to F16 (f16_round), normal or
 * subnormal, written from the format's definition. */
static uint16_t f16_bits(float r)
{
    uint16_t sgn = signbit(r) ? 0x8000 : 0;
    double a = fabs((double)r);
    if (a == 0) return sgn;
    if (isinf(a)) return sgn | 0x7C00;
    int e;
    double m = frexp(a, &e);   /* a = m 2^e, m in [0.5, 1) */
    if (e - 1 < -14) return sgn | (uint16_t)nearbyint(a * 16777216.0);   /* subnormal: a / 2^-24 */
    return sgn | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)nearbyint((2 * m - 1) * 1024);
}

/* F16 round trip (RNE) of a float, for the Q8_0 scale. */
static float f16_round(float f)
{
    if (f == 0 || !isfinite(f)) return f;
    int e;
    frexpf(f, &e);                         /* |f| in [2^(e-1), 2^e) */
    int q = e - 1 < -14 ? -24 : e - 1 - 10;   /* ulp exponent: 10 fraction bits, subnormal floor 2^-24 */
    double u = ldexp(1.0, q), r = nearbyint((double)f / u) * u;   /* default rounding mode: RNE */
    return fabs(r) > 65504 ? copysignf(INFINITY, f) : (float)r;   /* overflow, as GGML's FP32_TO_FP16 */
}

static void q8_0_row(const float *x, long n, float *y)
{
    for (long b0 = 0; b0 < n; b0 += 32) {
        long len = n - b0 < 32 ? n - b0 : 32;
        float amax = 0;
        for (long i = 0; i < len; i++) amax = fabsf(x[b0 + i]) > amax ? fabsf(x[b0 + i]) : amax;
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f, d16 = f16_round(d);
        for (long i = 0; i < len; i++) y[b0 + i] = roundf(x[b0 + i] * id) * d16;
    }
}

/* ---- engine-stored weights ---------------------------------------------- */

typedef struct ectx {
    void *w;            /* the stored weight: Q8_0 blocks or F16 codes */
    int q8;             /* 1: Q8_0, 0: F16 */
    float *dec;         /* its decoded values [N, K] (what run() multiplies by) */
} ectx;

static int own_weights(void)
{
    const char *v = getenv("DSV4Q_TEST_OWN_WEIGHTS");
    return v ? atoi(v) : 0;
}

static int e_init(void **ctx, char *err, size_t errlen)
{
    *ctx = calloc(1, sizeof(ectx));
    if (!*ctx) { snprintf(err, errlen, "engine_v2: out of memory"); return -1; }
    return 0;
}

static void e_fini(void *ctx)
{
    ectx *e = ctx;
    if (!e) return;
    free(e->w);
    free(e->dec);
    free(e);
}

/* ggml block_q8_0: F16 scale d, then 32 int8 quants (34 bytes). */
static int e_load_weight(void *ctx, const char *role, const dsv4q_bt *ref, dsv4q_bweight *enc, char *err,
                         size_t errlen)
{
    ectx *e = ctx;
    (void)role;
    const int64_t N = ref->shape[0], K = ref->shape[1];
    const float *w = ref->data;
    const int quant = ref->raw && (ref->raw_dtype == DSV4Q_BT_F8_E4M3 || ref->raw_dtype == DSV4Q_BT_I8);
    if (!ref->raw || ref->raw_dtype == DSV4Q_BT_F32 || (quant && K % 32)) return 0;   /* keep F32 / odd shapes */
    e->q8 = quant;
    e->dec = malloc(sizeof(float) * (size_t)(N * K));
    e->w = malloc(quant ? (size_t)(N * (K / 32)) * 34 : sizeof(uint16_t) * (size_t)(N * K));
    if (!e->dec || !e->w) { snprintf(err, errlen, "engine_v2: out of memory"); return -1; }
    if (quant) {
        unsigned char *b = e->w;
        for (int64_t o = 0; o < N; o++)
            for (int64_t b0 = 0; b0 < K; b0 += 32, b += 34) {
                const float *x = w + o * K + b0;
                float amax = 0;
                for (int i = 0; i < 32; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
                const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f, d16 = f16_round(d);
                const uint16_t dc = f16_bits(d16);
                memcpy(b, &dc, 2);
                for (int i = 0; i < 32; i++) {
                    int8_t q = (int8_t)roundf(x[i] * id);
                    memcpy(b + 2 + i, &q, 1);
                    e->dec[o * K + b0 + i] = (float)q * d16;
                }
            }
        enc->dtype = DSV4Q_BW_GGML(8);   /* GGML_TYPE_Q8_0 */
    } else {
        uint16_t *h = e->w;
        for (int64_t i = 0; i < N * K; i++) {
            e->dec[i] = f16_round(w[i]);
            h[i] = f16_bits(e->dec[i]);
        }
        enc->dtype = DSV4Q_BT_F16;
    }
    enc->data = e->w;
    return 1;
}

static int linear(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    const dsv4q_bt *X = &c->in[0], *W = &c->in[1];
    const int64_t s = X->shape[0], K = X->shape[1], N = W->shape[0];
    const int quant = W->raw && (W->raw_dtype == DSV4Q_BT_F8_E4M3 || W->raw_dtype == DSV4Q_BT_I8);
    const ectx *e = ctx;
    const float *x = X->data, *w = e && e->dec && own_weights() == 1 ? e->dec : W->data;
    float *xq = malloc(sizeof(float) * (size_t)(s * K));
    if (!xq) { snprintf(err, errlen, "engine_v2: out of memory"); return DSV4Q_BACKEND_ERROR; }
    for (int64_t t = 0; t < s; t++) {
        if (quant) q8_0_row(x + t * K, K, xq + t * K);
        else memcpy(xq + t * K, x + t * K, sizeof(float) * (size_t)K);
    }
    const int bf16_out = c->param[1] != 0;
    uint16_t *yb = c->out[0].data;
    float *yf = c->out[0].data;
    for (int64_t t = 0; t < s; t++)
        for (int64_t o = 0; o < N; o++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (double)xq[t * K + k] * w[o * K + k];
            if (bf16_out) yb[t * N + o] = tp_bf16((float)acc);
            else yf[t * N + o] = (float)acc;
        }
    if (bf16_out) c->out[0].dtype = DSV4Q_BT_BF16;
    free(xq);
    return DSV4Q_BACKEND_OK;
}

/* SPARSE_ATTN with an F16 KV cache (declared kv_f16), kernel.py's
 * sparse_attn_kernel in double: per (query, head), blocks of 64 columns,
 * running max m, e = exp(s - m) unrounded into the denominator and rounded
 * to BF16 (attn_p_bf16) for P*V, accumulator rescaled when m moves, the
 * sink in the denominator only, output rounded to BF16 (attn_out_bf16);
 * a fully masked query gives 0. */
static int sparse_attn(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const float *q = c->in[0].data, *kv = c->in[1].data, *sink = c->in[3].data;
    const int32_t *idx = c->in[2].data;
    const int64_t s = c->in[0].shape[0], H = c->in[0].shape[1], D = c->in[0].shape[2], N = c->in[1].shape[0];
    const int64_t nc = c->in[2].shape[1];
    const double scale = c->param[0];
    float *kv16 = malloc(sizeof(float) * (size_t)(N * D > 0 ? N * D : 1));
    double *acc = malloc(sizeof(double) * (size_t)D);
    if (!kv16 || !acc) { free(kv16); free(acc); snprintf(err, errlen, "engine_v2: out of memory"); return DSV4Q_BACKEND_ERROR; }
    for (int64_t i = 0; i < N * D; i++) kv16[i] = f16_round(kv[i]);   /* the engine's KV cache is F16 */
    uint16_t *o = c->out[0].data;
    for (int64_t t = 0; t < s; t++)
        for (int64_t h = 0; h < H; h++) {
            const float *qh = q + (t * H + h) * D;
            double m = -INFINITY, l = 0;
            for (int64_t d = 0; d < D; d++) acc[d] = 0;
            for (int64_t b0 = 0; b0 < nc; b0 += 64) {
                const int64_t nb = nc - b0 < 64 ? nc - b0 : 64;
                double sc[64], mb = m;
                for (int64_t j = 0; j < nb; j++) {
                    const int32_t id = idx[t * nc + b0 + j];
                    sc[j] = -INFINITY;
                    if (id < 0 || id >= N) continue;
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += (double)qh[d] * kv16[id * D + d];
                    sc[j] = dot * scale;
                    if (sc[j] > mb) mb = sc[j];
                }
                if (mb == -INFINITY) continue;
                const double alpha = m == -INFINITY ? 0 : exp(m - mb);
                double bsum = 0;
                for (int64_t d = 0; d < D; d++) acc[d] *= alpha;
                for (int64_t j = 0; j < nb; j++) {
                    if (sc[j] == -INFINITY) continue;
                    const double e = exp(sc[j] - mb);
                    bsum += e;
                    const uint16_t pb = tp_bf16((float)e);
                    uint32_t u = (uint32_t)pb << 16;
                    float p;
                    memcpy(&p, &u, 4);
                    const float *k = kv16 + (int64_t)idx[t * nc + b0 + j] * D;
                    for (int64_t d = 0; d < D; d++) acc[d] += (double)p * k[d];
                }
                l = l * alpha + bsum;
                m = mb;
            }
            uint16_t *oh = o + (t * H + h) * D;
            if (m == -INFINITY) {
                for (int64_t d = 0; d < D; d++) oh[d] = 0;
                continue;
            }
            l += exp((double)sink[h] - m);
            for (int64_t d = 0; d < D; d++) oh[d] = tp_bf16((float)(acc[d] / l));
        }
    c->out[0].dtype = DSV4Q_BT_BF16;
    free(kv16);
    free(acc);
    return DSV4Q_BACKEND_OK;
}

static int e_supports(const dsv4q_bcall *c, char *reason, size_t len)
{
    if (c->op != DSV4Q_OP_LINEAR) return 1;
    if (c->role && !strcmp(c->role, "head")) {
        snprintf(reason, len, "engine_v2 keeps the output head on the host (role head)");
        return 0;
    }
    /* a Q8_0 block scale amax/127 above F16's 65504 is inf: decline the shape up front */
    const float *x = c->in[0].data;
    const int quant = c->in[1].raw && (c->in[1].raw_dtype == DSV4Q_BT_F8_E4M3 || c->in[1].raw_dtype == DSV4Q_BT_I8);
    for (int64_t i = 0; quant && i < tp_numel(&c->in[0]); i++)
        if (fabsf(x[i]) > 127.0f * 65504.0f) {
            snprintf(reason, len, "engine_v2: |x| = %g overflows the F16 scale of a Q8_0 block", (double)fabsf(x[i]));
            return 0;
        }
    return 1;
}

static int e_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    switch (c->op) {
    case DSV4Q_OP_LINEAR: return linear(ctx, c, err, errlen);
    case DSV4Q_OP_SPARSE_ATTN: return sparse_attn(c, err, errlen);
    case DSV4Q_OP_RMSNORM:
        /* a case must name its weight (role and in_role); a whole-model call names the role */
        if (!strncmp(c->case_key, "rmsnorm(", 8) ? !c->role || !c->in_role || !c->in_role[1] || c->in_role[0]
                                                 : !c->role) {
            snprintf(err, errlen, "engine_v2: rmsnorm call without tensor identity (role %s)", c->role ? c->role : "NULL");
            return DSV4Q_BACKEND_ERROR;
        }
        tp_rmsnorm(c);
        return DSV4Q_BACKEND_OK;
    default: return DSV4Q_BACKEND_UNSUPPORTED;
    }
}

static dsv4q_backend_v2 desc = {
    {DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v2), "test-engine-v2", "1.0", "source:act_q8_0,kv_f16",
     DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN), e_init, e_run, e_fini},
    e_supports,
    NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void)
{
    const char *u = getenv("DSV4Q_TEST_UNDECLARED");
    desc.base.profile = u && !strcmp(u, "1") ? "source" : "source:act_q8_0,kv_f16";
    desc.load_weight = own_weights() ? e_load_weight : NULL;
    return &desc.base;
}
