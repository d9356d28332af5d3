/* crash.c - a plugin whose run() writes through NULL (SIGSEGV). */
#include "tests/backends/plugin_common.h"

static int c_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx; (void)c; (void)err; (void)errlen;
    volatile int *p = NULL;
    *p = 42;
    return DSV4Q_BACKEND_OK;
}

static const dsv4q_backend_v1 desc = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "test-crash", "1.0", "source",
    DSV4Q_CAP(DSV4Q_OP_RMSNORM), NULL, c_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
