/*
 * oracle_f32.c - the built-in backend "oracle-f32": the oracle's _f32
 * instance behind the backend ABI.
 *
 * It is the rounding level made into a backend: qualifying it measures
 * oracle-f32 against oracle-f64 exactly as the level does, so every metric
 * equals its level (ratio 1) and it must pass any gate with factor >= 1.
 * That makes it the harness's self-test (tests/test_qualify.c) and the
 * template for a real backend (docs/backends.md). It follows
 * call->boundaries, so it implements whatever profile the harness asks for;
 * it declares "source". Outputs are written as F32 (no dtype change).
 */
#include <stdlib.h>
#include <string.h>
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/ops/ops.h"

static int o_init(void **ctx, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    *ctx = NULL;
    return 0;
}

static int o_run(void *ctx, const dsv4q_bcall *call, char *err, size_t errlen)
{
    (void)ctx;
    void *out[DSV4Q_OPS_MAX_T];
    for (int i = 0; i < call->nout && i < DSV4Q_OPS_MAX_T; i++) out[i] = call->out[i].data;
    return dsv4q_oracle_exec(32, call->boundaries, call, out, err, errlen) ? DSV4Q_BACKEND_ERROR : DSV4Q_BACKEND_OK;
}

static void o_fini(void *ctx) { (void)ctx; }

static const dsv4q_backend_v1 oracle_f32 = {
    DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), "oracle-f32", "dsv4q oracle (f32 instance)", "source",
    DSV4Q_CAP_KNOWN, o_init, o_run, o_fini,
};

const dsv4q_backend_v1 *dsv4q_backend_oracle_f32(void) { return &oracle_f32; }
