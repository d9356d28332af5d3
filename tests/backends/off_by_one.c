/*
 * off_by_one.c - a deliberately wrong plugin: RMSNORM output scaled by
 * 1.01 (HC_POST correct). Qualification must fail exactly on rmsnorm.
 */
#include "tests/backends/plugin_common.h"

static int o_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx;
    (void)err;
    (void)errlen;
    if (c->op == DSV4Q_OP_RMSNORM) { tp_rmsnorm(c, 1.01); return DSV4Q_BACKEND_OK; }
    if (c->op == DSV4Q_OP_HC_POST) { tp_hc_post(c); return DSV4Q_BACKEND_OK; }
    return DSV4Q_BACKEND_UNSUPPORTED;
}

static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-off-by-one", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_HC_POST), NULL, o_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
