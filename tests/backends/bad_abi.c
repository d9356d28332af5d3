/* bad_abi.c - a plugin built against a future ABI (version 99). */
#include "tests/backends/plugin_common.h"

static int b_run(void *ctx, const dsv4q_bcall *c, char *err, size_t errlen)
{
    (void)ctx; (void)c; (void)err; (void)errlen;
    return DSV4Q_BACKEND_OK;
}

static const dsv4q_backend_v1 desc = {
    99, sizeof(dsv4q_backend_v1), "test-bad-abi", "1.0", "source", DSV4Q_CAP_ALL, NULL, b_run, NULL,
};

const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &desc; }
