/*
 * no_act_fp8.c - a deliberately wrong plugin: an FP32 engine that skips
 * the FP8 activation simulation everywhere, as an engine that dequantizes
 * FP8/FP4 weights and multiplies BF16/F32 activations would, while it
 * declares the source profile (where DeepSeek's kernels quantize every
 * FP8/FP4 GEMM input to E4M3 per 128-wide block, gemm_act_fp8, and the KV
 * nope dims per 64, kv_fp8).
 *
 *   LINEAR     y = x W^T on the decoded weights, no act_quant of x; BF16
 *              output when bf16_out (linear_bf16)
 *   EXPERT     model.py Expert.forward on the same LINEAR: gate = w1 x,
 *              up = w3 x (BF16), clamp (gate <= limit, |up| <= limit),
 *              h = silu(gate) * up * weight rounded to BF16 (moe_bf16),
 *              y = w2 h (BF16)
 *   ACT_QUANT  the identity (no FP8 round trip)
 * Everything else runs on oracle-f32 (a partial engine, docs/engines.md).
 * Arithmetic in double, so the missing quantization is the only deviation.
 *
 * The issue-19 claim it checks (tests/test_stagewise.c): the operator
 * gates fail it by orders of magnitude, the whole-model per-stage verdict
 * fails it, whatever the logit gate says.
 */
#include <stdlib.h>
#include "tests/backends/plugin_common.h"

static float bf(double v) { return tp_bf16_f(tp_bf16((float)v)); }

/* y[s, N] = x[s, K] W[N, K]^T in double; BF16-valued when round. */
static void matmul(const float *x, long s, long K, const float *W, long N, int round, float *y)
{
    for (long t = 0; t < s; t++)
        for (long o = 0; o < N; o++) {
            double acc = 0;
            for (long k = 0; k < K; k++) acc += (double)x[t * K + k] * W[o * K + k];
            y[t * N + o] = round ? bf(acc) : (float)acc;
        }
}

static int linear(const dsv4q_bcall *c)
{
    const dsv4q_bt *X = &c->in[0], *W = &c->in[1];
    matmul(X->data, (long)X->shape[0], (long)X->shape[1], W->data, (long)W->shape[0], c->param[1] != 0,
           c->out[0].data);
    return DSV4Q_BACKEND_OK;
}

static int expert(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const dsv4q_bt *X = &c->in[0], *w1 = &c->in[1], *w2 = &c->in[2], *w3 = &c->in[3], *wt = &c->in[4];
    const long n = (long)X->shape[0], d = (long)X->shape[1], I = (long)w1->shape[0];
    const double L = c->param[0];
    const float *weight = wt->ndim ? wt->data : NULL;   /* empty: the shared expert */
    float *g = malloc(sizeof(float) * (size_t)(n * I)), *u = malloc(sizeof(float) * (size_t)(n * I));
    if (!g || !u) {
        free(g);
        free(u);
        snprintf(err, errlen, "no_act_fp8: out of memory");
        return DSV4Q_BACKEND_ERROR;
    }
    matmul(X->data, n, d, w1->data, I, 1, g);
    matmul(X->data, n, d, w3->data, I, 1, u);
    for (long t = 0; t < n; t++)
        for (long i = 0; i < I; i++) {
            double gv = g[t * I + i], uv = u[t * I + i];
            if (L > 0) {
                uv = uv < -L ? -L : (uv > L ? L : uv);
                gv = gv > L ? L : gv;
            }
            double h = gv / (1 + exp(-gv)) * uv;
            if (weight) h *= weight[t];
            g[t * I + i] = bf(h);
        }
    matmul(g, n, I, w2->data, d, 1, c->out[0].data);
    free(g);
    free(u);
    return DSV4Q_BACKEND_OK;
}

static int n_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx;
    switch (c->op) {
    case DSV4Q_OP_LINEAR: return linear(c);
    case DSV4Q_OP_EXPERT: return expert(c, err, errlen);
    case DSV4Q_OP_ACT_QUANT:
        memcpy(c->out[0].data, c->in[0].data, sizeof(float) * (size_t)tp_numel(&c->in[0]));
        return DSV4Q_BACKEND_OK;
    default: return DSV4Q_BACKEND_UNSUPPORTED;
    }
}

static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-no-act-fp8", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_EXPERT) | DSV4Q_CAP(DSV4Q_OP_ACT_QUANT), NULL, n_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
