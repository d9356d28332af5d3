/*
 * exec.c - the oracle on one ABI call (ops.h dsv4q_oracle_exec): the input
 * conversion every operator's adapter uses, and the dispatch to the
 * adapters of the descriptor files, generated from DSV4Q_OP_LIST (an
 * operator without its DSV4Q_OP_EXEC does not link), and the row gather
 * of the attention adapters (op.h dsv4q_op_rows). Compiled at both
 * widths like the descriptors; the width-independent entry point and the
 * weight view are compiled once (DSV4Q_OP_ONCE).
 */
#include "harness/ops/op.h"

real *X(dsv4q_op_in)(const dsv4q_bcall *c, int i, real **a)
{
    if (a[i]) return a[i];
    const dsv4q_bt *t = &c->in[i];
    int64_t n = dsv4q_bt_numel(t);
    real *v = malloc(sizeof(real) * (size_t)(n ? n : 1));
    if (!v) return NULL;
    const float *f = t->data;
    for (int64_t k = 0; k < n; k++) v[k] = (real)f[k];
    return a[i] = v;
}

static int cmp_i32(const void *x, const void *y)
{
    const int32_t u = *(const int32_t *)x, v = *(const int32_t *)y;
    return (u > v) - (u < v);
}

real *X(dsv4q_op_rows)(const dsv4q_bt *t, long D, const int32_t *cols, long n, int32_t *packed, long *nrows)
{
    const long N = t->ndim > 0 ? (long)t->shape[0] : 0;
    int32_t *u = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!u) return NULL;
    long k = 0, m = 0;
    for (long j = 0; j < n; j++)
        if (cols[j] >= 0 && cols[j] < N) u[k++] = cols[j];
    qsort(u, (size_t)k, sizeof *u, cmp_i32);
    for (long j = 0; j < k; j++)
        if (!m || u[j] != u[m - 1]) u[m++] = u[j];
    real *v = malloc(sizeof(real) * (size_t)(m * D > 0 ? m * D : 1));
    if (!v) {
        free(u);
        return NULL;
    }
    const float *f = t->data;
    for (long r = 0; r < m; r++)
        for (long d = 0; d < D; d++) v[r * D + d] = (real)f[(long)u[r] * D + d];
    for (long j = 0; j < n; j++) {
        const int32_t *at = cols[j] >= 0 && cols[j] < N ? bsearch(&cols[j], u, (size_t)m, sizeof *u, cmp_i32) : NULL;
        packed[j] = at ? (int32_t)(at - u) : -1;
    }
    free(u);
    *nrows = m;
    return v;
}

typedef int (*X(exec_fn))(DSV4Q_OP_EXEC_ARGS);
#define EXEC_DECL_(E, nm, ni, no, np) int X(dsv4q_op_exec_##nm)(DSV4Q_OP_EXEC_ARGS);
DSV4Q_OP_LIST(EXEC_DECL_)
#undef EXEC_DECL_
#define EXEC_ROW_(E, nm, ni, no, np) [DSV4Q_OP_##E] = X(dsv4q_op_exec_##nm),
static const X(exec_fn) X(exec_table)[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(EXEC_ROW_)};
#undef EXEC_ROW_

int X(dsv4q_op_exec)(uint64_t bs, const dsv4q_bcall *c, void *const *out, char *err, size_t errlen)
{
    if (c->op < 0 || c->op >= DSV4Q_OP_COUNT) {
        snprintf(err, errlen, "unknown op %d", (int)c->op);
        return -1;
    }
    real *a[DSV4Q_OPS_MAX_T] = {0};
    const int rc = X(exec_table)[c->op](bs, c, out, a, err, errlen);
    for (int i = 0; i < DSV4Q_OPS_MAX_T; i++) free(a[i]);
    if (rc > 0) snprintf(err, errlen, "oracle-%s: out of memory", R_NAME);
    return rc ? -1 : 0;
}

#if DSV4Q_OP_ONCE

int dsv4q_oracle_exec(int width, uint64_t bs, const dsv4q_bcall *call, void *const *out, char *err, size_t errlen)
{
    if (width == 32) return dsv4q_op_exec_f32(bs, call, out, err, errlen);
    if (width == 64) return dsv4q_op_exec_f64(bs, call, out, err, errlen);
    snprintf(err, errlen, "oracle width %d: expected 32 or 64", width);
    return -1;
}

dsv4q_weight dsv4q_op_weight(const dsv4q_bt *t)
{
    dsv4q_weight w = {t->name, DSV4Q_WF_F32, 1, t->shape[0], t->data, NULL, DSV4Q_DT_INVALID, 0};
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
    /* The FP8 tile is the one the scale grid implies: [ceil(N/32),
     * ceil(K/32)] and not V4's 128 grid = V4.1's 32x32 (act blocks of 32 too).
     * Where both grids agree (N, K <= 32) the two readings are the same. */
    if (w.fmt == DSV4Q_WF_FP8 && t->scale_shape[0] == (w.out + 31) / 32 && t->scale_shape[1] == (w.in + 31) / 32 &&
        !(t->scale_shape[0] == (w.out + 127) / 128 && t->scale_shape[1] == (w.in + 127) / 128))
        w.blk = DSV4Q_FP8_BLOCK_V41;
    return w;
}
#endif
