/*
 * fp4_quant.c - FP4_QUANT, the E2M1 quantizer in its in-place simulation
 * mode (kernel.py fp4_quant_kernel): blocks of 32, s = 2^ceil(log2(amax/6))
 * with amax floored at 6*2^-126, x = E2M1(clamp(x/s, +-6)) * s. It IS the
 * idx_q_fp4 / idx_k_fp4 simulation of the indexer, always applied.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(5, FP4_QUANT, fp4_quant, 1, 1, 0)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    NEED(0);
    const long rows = (long)c->in[0].shape[0], n = (long)c->in[0].shape[1];
    real *y = out[0];
    memcpy(y, a[0], sizeof(real) * (size_t)(rows * n));
    X(dsv4q_fp4_act_quant)(y, rows, n);
    return 0;
}
DSV4Q_OP_EXEC(fp4_quant, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), n = dsv4q_kv_int(kv, "n", 1, 1 << 20, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/n/block", c->key); return -1; }
    if (n % 32) { snprintf(err, errlen, "%s: n must be a multiple of 32", c->key); return -1; }
    RECIPES("normal", "extreme", "nearzero", "ties", "scaletrap");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    NEEDP(x);
    dsv4q_gen_quant(r, c->recipe, x, rows, n, 32, 0);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    return 0;
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const long long n = c->in[0].ndim == 2 ? c->in[0].shape[1] : 0;
    if (n % 32) {
        snprintf(err, errlen, "fp4_quant: n = %lld must be a multiple of 32 (the block)", n);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(fp4_quant,
    .in = { T("x", "[rows,n]", "F32", "n a multiple of 32") },
    .out = { T("y", "[rows,n]", "F32|BF16", "E2M1(clamp(x/s,+-6))*s per 32-block, s = 2^ceil(log2(amax/6))") },
    .param = { NULL },
    .oracle = "oracle/quant.c dsv4q_fp4_act_quant",
    .reference = "kernel.py fp4_quant_kernel (inplace)",
    .boundaries = "(the op IS the idx_q_fp4/idx_k_fp4 simulation; always applied)",
    .notes = "amax floored at 6*2^-126.",
    .keys = {{"rows", "64"}, {"n", "128"}},
    .cases = (const dsv4q_case_entry[]){
        {"fp4_quant(rows=64,n=128,recipe=normal,seed=1)", SET_FLASH | SET_PRO},
        {"fp4_quant(rows=8,n=128,recipe=ties,seed=1)", SET_FLASH | SET_PRO},
        {"fp4_quant(rows=8,n=128,recipe=nearzero,seed=1)", SET_FLASH | SET_PRO},
        {"fp4_quant(rows=64,n=128,recipe=scaletrap,seed=1)", SET_FLASH | SET_PRO},
        {NULL, 0}},
    .build = build, .check = check)
#endif
