/* init_fail.c - a plugin whose init() fails, as a GPU backend does on a
 * machine without a GPU: "cannot run here", not a verdict on its kernels. */
#include "tests/backends/plugin_common.h"

static int f_init(void **ctx, char *err, size_t errlen)
{
    *ctx = NULL;
    snprintf(err, errlen, "no CUDA device (test plugin)");
    return DSV4Q_BACKEND_ERROR;
}

static int f_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx; (void)c;
    snprintf(err, errlen, "run() without a successful init()");
    return DSV4Q_BACKEND_ERROR;
}

static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-init-fail", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_RMSNORM), f_init, f_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
