/*
 * engine_v2.c - an ABI v2 test plugin that behaves like a real engine:
 * it quantizes the input of every FP8/FP4-weight LINEAR to GGML Q8_0
 * blocks of 32 (not DeepSeek's FP8 per 128) and DECLARES that
 * ("source:act_q8_0"); it declines the FP32-math head case through
 * supports() (by tensor role, not by parsing the key); its RMSNORM refuses
 * to run without the tensor identity the harness must pass.
 *
 * Written independently of the oracle: Q8_0 follows ggml's
 * quantize_row_q8_0_ref in float (d = amax/127, id = 1/d, q = roundf(x*id),
 * scale stored F16), products accumulated in double. The environment
 * variable DSV4Q_TEST_UNDECLARED=1 makes the SAME plugin declare plain
 * "source": its Q8_0 linears must then fail (an undeclared deviation).
 */
#include <stdlib.h>
#include "tests/backends/plugin_common.h"

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

static int linear(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const dsv4q_bt *X = &c->in[0], *W = &c->in[1];
    const int64_t s = X->shape[0], K = X->shape[1], N = W->shape[0];
    const int quant = W->raw && (W->raw_dtype == DSV4Q_BT_F8_E4M3 || W->raw_dtype == DSV4Q_BT_I8);
    const float *x = X->data, *w = W->data;
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
    (void)ctx;
    switch (c->op) {
    case DSV4Q_OP_LINEAR: return linear(c, err, errlen);
    case DSV4Q_OP_RMSNORM:
        if (!c->role || !c->in_role || !c->in_role[1] || c->in_role[0]) {
            snprintf(err, errlen, "engine_v2: rmsnorm call without tensor identity (role %s)", c->role ? c->role : "NULL");
            return DSV4Q_BACKEND_ERROR;
        }
        tp_rmsnorm(c, 1.0);
        return DSV4Q_BACKEND_OK;
    default: return DSV4Q_BACKEND_UNSUPPORTED;
    }
}

static dsv4q_backend_v2 desc = {
    {DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v2), "test-engine-v2", "1.0", "source:act_q8_0",
     DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM), NULL, e_run, NULL},
    e_supports,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void)
{
    const char *u = getenv("DSV4Q_TEST_UNDECLARED");
    desc.base.profile = u && !strcmp(u, "1") ? "source" : "source:act_q8_0";
    return &desc.base;
}
