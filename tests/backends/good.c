/*
 * good.c - a correct plugin for a subset of ops (RMSNORM, HC_POST, TOPK),
 * written independently of the oracle. TOPK breaks ties to the HIGHER
 * index (the oracle: lower), so the ties recipe exercises the tie-run rule:
 * its swaps are legitimate and must be counted, not failed.
 */
#include <stdlib.h>
#include "tests/backends/plugin_common.h"

typedef struct { float v; int32_t i; } sc;

static int cmp(const void *a, const void *b)
{
    const sc *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->i < y->i) - (x->i > y->i);   /* ties: higher index first */
}

static int topk(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const float *s = c->in[0].data;
    const int64_t rows = c->in[0].shape[0], T = c->in[0].shape[1];
    const int k = (int)c->param[0];
    int32_t *out = c->out[0].data;
    sc *buf = malloc(sizeof(sc) * (size_t)T);
    if (!buf) { snprintf(err, errlen, "good: out of memory"); return DSV4Q_BACKEND_ERROR; }
    for (int64_t r = 0; r < rows; r++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++)
            if (!isinf(s[r * T + t]) || s[r * T + t] > 0) buf[n++] = (sc){s[r * T + t], (int32_t)t};
        qsort(buf, (size_t)n, sizeof *buf, cmp);
        for (int j = 0; j < k; j++) out[r * k + j] = j < n ? buf[j].i : -1;
    }
    free(buf);
    return DSV4Q_BACKEND_OK;
}

static int g_init(void **ctx, char *err, size_t errlen) { (void)err; (void)errlen; *ctx = NULL; return 0; }

static int g_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx;
    switch (c->op) {
    case DSV4Q_OP_RMSNORM: tp_rmsnorm(c, 1.0); return DSV4Q_BACKEND_OK;
    case DSV4Q_OP_HC_POST: tp_hc_post(c); return DSV4Q_BACKEND_OK;
    case DSV4Q_OP_TOPK: return topk(c, err, errlen);
    default: return DSV4Q_BACKEND_UNSUPPORTED;
    }
}

static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-good", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_HC_POST) | DSV4Q_CAP(DSV4Q_OP_TOPK), g_init, g_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
