/*
 * hadamard.c - HADAMARD, the rotation the indexer applies to its queries
 * and keys before the FP4 simulation (model.py rotate_activation): the
 * Sylvester Walsh-Hadamard transform of each row times n^-0.5, n a power
 * of two, output at hadamard_bf16.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(6, HADAMARD, hadamard, 1, 1, 0)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    NEED(0);
    const long rows = (long)c->in[0].shape[0], n = (long)c->in[0].shape[1];
    real *y = out[0];
    memcpy(y, a[0], sizeof(real) * (size_t)(rows * n));
    X(dsv4q_hadamard)(bs, y, rows, n);
    return 0;
}
DSV4Q_OP_EXEC(hadamard, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), n = dsv4q_kv_int(kv, "n", 1, 1 << 20, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/n/block", c->key); return -1; }
    if (n & (n - 1)) { snprintf(err, errlen, "%s: n must be a power of two", c->key); return -1; }
    RECIPES("normal", "extreme");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    NEEDP(x);
    dsv4q_gen_act(r, c->recipe, x, rows, n, 1.0, 32);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    return 0;
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const long long n = c->in[0].ndim == 2 ? c->in[0].shape[1] : 0;
    if (n <= 0 || (n & (n - 1))) {
        snprintf(err, errlen, "hadamard: n = %lld must be a power of two", n);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(hadamard,
    .in = { T("x", "[rows,n]", "F32", "n a power of two") },
    .out = { T("y", "[rows,n]", "F32|BF16", "Sylvester Walsh-Hadamard * n^-0.5") },
    .param = { NULL },
    .oracle = "oracle/quant.c dsv4q_hadamard",
    .reference = "model.py rotate_activation",
    .boundaries = "hadamard_bf16",
    .notes = "",
    .keys = {{"rows", "64"}, {"n", "128"}},
    .cases = (const dsv4q_case_entry[]){
        {"hadamard(rows=64,n=128,recipe=normal,seed=1)", SET_FLASH | SET_PRO},
        {"hadamard(rows=8,n=128,recipe=extreme,seed=1)", SET_FLASH | SET_PRO},
        {NULL, 0}},
    .build = build, .check = check)
#endif
