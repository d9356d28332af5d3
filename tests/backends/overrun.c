/* overrun.c - a plugin that writes 8 elements past the end of its output. */
#include "tests/backends/plugin_common.h"

static int o_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx; (void)err; (void)errlen;
    tp_rmsnorm(c, 1.0);
    c->out[0].dtype = DSV4Q_BT_F32;
    float *y = c->out[0].data;
    int64_t n = tp_numel(&c->out[0]);
    for (int64_t i = 0; i < n + 8; i++) y[i] = 1.0f;
    return DSV4Q_BACKEND_OK;
}

static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-overrun", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_RMSNORM), NULL, o_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
