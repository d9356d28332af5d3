/*
 * oracle_exec.c - the ABI-call adapter of the oracle at both widths (see
 * oracle_exec.h). The body is oracle_exec.inc, expanded per width.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness/ops/ops.h"
#include "harness/ops/oracle_exec.h"
#include "oracle/ops.h"

/* The oracle's view of a weight tensor: its stored form when it has one. */
static dsv4q_weight wview(const dsv4q_bt *t)
{
    dsv4q_weight w = {t->name, DSV4Q_WF_F32, 1, t->shape[0], t->data, NULL, DSV4Q_DT_INVALID};
    if (t->ndim >= 2) {
        w.out = t->shape[0];
        w.in = t->shape[1];
    }
    if (!t->raw) return w;
    switch (t->raw_dtype) {
    case DSV4Q_BT_BF16: w.fmt = DSV4Q_WF_BF16; break;
    case DSV4Q_BT_F8_E4M3: w.fmt = DSV4Q_WF_FP8; break;
    case DSV4Q_BT_I8: w.fmt = DSV4Q_WF_FP4; break;
    case DSV4Q_BT_F32: w.fmt = DSV4Q_WF_F32; break;
    default: return w;
    }
    w.data = t->raw;
    w.scale = t->raw_scale;
    w.scale_dtype = (dsv4q_dtype)t->scale_dtype;
    return w;
}

#define R float
#define S(n) n##_f32
#include "harness/ops/oracle_exec.inc"
#undef R
#undef S
#define R double
#define S(n) n##_f64
#include "harness/ops/oracle_exec.inc"
#undef R
#undef S

int dsv4q_oracle_exec_f32(uint64_t bs, const dsv4q_bcall *call, void *const *out, char *err, size_t errlen)
{
    return exec_f32(bs, call, out, err, errlen);
}

int dsv4q_oracle_exec_f64(uint64_t bs, const dsv4q_bcall *call, void *const *out, char *err, size_t errlen)
{
    return exec_f64(bs, call, out, err, errlen);
}
