/*
 * act_q8.c - a correct LINEAR kernel behind each of the activation
 * quantizers real GGUF engines run (issue 29), to show that each passes
 * when declared and fails when another is declared. Chosen by the
 * environment (read in dsv4q_backend_entry, so a qualify child sees it):
 *
 *   DSV4Q_TEST_Q8=rne   Q8_0 per 32 as engines' runtime quantizers write
 *                       it: d = amax/127 kept F32, q = rintf(x * (1/d))
 *                       (ties to even), x = q * d; declares act_q8_0_rne
 *   DSV4Q_TEST_Q8=k     Q8_K per 256 (ggml's K-quant/IQ vec_dot input):
 *                       m = the first value of largest |x|, is = -127/m,
 *                       q = min(127, rintf(x * is)), x = q * (1/is);
 *                       declares act_q8_k
 *   DSV4Q_TEST_Q8_ALL=1 the same quantizer also on BF16/F32-weight
 *                       linears (an engine that stores them as Q8_0 or
 *                       K-quants); declares act_q_all too
 *
 * Only FP8/FP4-weight linears are quantized otherwise. The product is
 * accumulated in double on the decoded reference weight (in[1].data), so
 * the quantizer is the only deviation from the oracle. Written from the
 * definitions above (ggml's quantize_row_q8_K_ref for Q8_K), not from the
 * oracle's source.
 */
#include <stdlib.h>
#include "tests/backends/plugin_common.h"

static int g_mode; /* 0: Q8_0 F32-scale RNE, 1: Q8_K */
static int g_all;  /* also BF16/F32 weights */

static void q8_0_rne(float *v, long n)
{
    for (long b = 0; b < n; b += 32) {
        long len = n - b < 32 ? n - b : 32;
        float amax = 0;
        for (long i = 0; i < len; i++)
            if (fabsf(v[b + i]) > amax) amax = fabsf(v[b + i]);
        float d = amax / 127.0f, id = amax > 0 ? 1.0f / d : 0.0f;
        for (long i = 0; i < len; i++) {
            float q = rintf(v[b + i] * id);
            v[b + i] = fmaxf(-127.0f, fminf(127.0f, q)) * d;
        }
    }
}

static void q8_k(float *v, long n)
{
    for (long b = 0; b < n; b += 256) {
        long len = n - b < 256 ? n - b : 256;
        float amax = 0, m = 0;
        for (long i = 0; i < len; i++)
            if (fabsf(v[b + i]) > amax) {
                amax = fabsf(v[b + i]);
                m = v[b + i];
            }
        if (amax == 0) continue; /* an all-zero block decodes to zeros */
        float is = -127.0f / m, d = 1.0f / is;
        for (long i = 0; i < len; i++) v[b + i] = fminf(127.0f, rintf(v[b + i] * is)) * d;
    }
}

static int q_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx;
    if (c->op != DSV4Q_OP_LINEAR) return DSV4Q_BACKEND_UNSUPPORTED;
    const dsv4q_bt *X = &c->in[0], *W = &c->in[1];
    const long s = (long)X->shape[0], K = (long)X->shape[1], N = (long)W->shape[0];
    const int quant = W->raw && (W->raw_dtype == DSV4Q_BT_F8_E4M3 || W->raw_dtype == DSV4Q_BT_I8);
    float *x = malloc(sizeof(float) * (size_t)(s * K > 0 ? s * K : 1));
    if (!x) {
        snprintf(err, errlen, "act_q8: out of memory");
        return DSV4Q_BACKEND_ERROR;
    }
    memcpy(x, X->data, sizeof(float) * (size_t)(s * K));
    if (quant || g_all)
        for (long t = 0; t < s; t++) (g_mode ? q8_k : q8_0_rne)(x + t * K, K);
    const float *w = W->data;
    float *y = c->out[0].data;
    for (long t = 0; t < s; t++)
        for (long o = 0; o < N; o++) {
            double acc = 0;
            for (long k = 0; k < K; k++) acc += (double)x[t * K + k] * w[o * K + k];
            y[t * N + o] = c->param[1] != 0 ? tp_bf16_f(tp_bf16((float)acc)) : (float)acc; /* BF16-valued */
        }
    free(x);
    return DSV4Q_BACKEND_OK;
}

static dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION,
    sizeof(dsv4q_backend_v1),
    "test-act-q8",
    "1.0",
    "source:act_q8_0_rne",
    DSV4Q_CAP(DSV4Q_OP_LINEAR),
    NULL,
    q_run,
    NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void)
{
    const char *m = getenv("DSV4Q_TEST_Q8"), *a = getenv("DSV4Q_TEST_Q8_ALL");
    g_mode = m && !strcmp(m, "k");
    g_all = a && !strcmp(a, "1");
    static const char *const decl[2][2] = {{"source:act_q8_0_rne", "source:act_q8_0_rne,act_q_all"},
                                           {"source:act_q8_k", "source:act_q8_k,act_q_all"}};
    desc.profile = decl[g_mode][g_all];
    return &desc;
}
