/*
 * act_quant.c - ACT_QUANT, the FP8 activation quantizer in its in-place
 * simulation mode (kernel.py act_quant_kernel): x = E4M3(clamp(x/s, +-448))
 * * s per block of 64 (the KV nope dims) or 128 (GEMM inputs), s a power of
 * two (ue8m0) or amax/448. The op IS the kv_fp8 / ckv_fp8 / gemm_act_fp8
 * simulation, so it is always applied; its cases aim at the scale rule
 * (ties, the scale trap) because that is where engines differ.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(4, ACT_QUANT, act_quant, 1, 1, 2)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    NEED(0);
    const long rows = (long)c->in[0].shape[0], n = (long)c->in[0].shape[1];
    real *y = out[0];
    memcpy(y, a[0], sizeof(real) * (size_t)(rows * n));
    X(dsv4q_act_quant)(y, rows, n, (int)c->param[0], (int)c->param[1]);
    return 0;
}
DSV4Q_OP_EXEC(act_quant, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), n = dsv4q_kv_int(kv, "n", 1, 1 << 20, &bad);
    long block = dsv4q_kv_int(kv, "block", 1, 4096, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/n/block", c->key); return -1; }
    RECIPES("normal", "extreme", "nearzero", "ties", "scaletrap");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    NEEDP(x);
    dsv4q_gen_quant(r, c->recipe, x, rows, n, block, 1);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    c->param[0] = (double)block;
    c->param[1] = 1;
    return 0;
}

/* n must be a multiple of the block (the oracle quantizes whole blocks). */
static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const long long n = c->in[0].ndim == 2 ? c->in[0].shape[1] : 0, block = (long long)c->param[0];
    if (block < 1 || n % block) {   /* a block below 1 (0.5 too) is no block */
        snprintf(err, errlen, "act_quant: n = %lld must be a multiple of block = %g", n, c->param[0]);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(act_quant,
    .in = { T("x", "[rows,n]", "F32", "") },
    .out = { T("y", "[rows,n]", "F32|BF16", "E4M3(clamp(x/s,+-448))*s per block (in-place simulation)") },
    .param = { "block: 64 (KV nope dims) or 128 (GEMM inputs)", "ue8m0: 1 = s = 2^ceil(log2(amax/448))" },
    .oracle = "oracle/quant.c dsv4q_act_quant",
    .reference = "kernel.py act_quant_kernel (inplace)",
    .boundaries = "(the op IS the kv_fp8/ckv_fp8/gemm_act_fp8 simulation; always applied)",
    .notes = "amax floored at 1e-4.",
    .keys = {{"rows", "2"}, {"n", "4096"}, {"block", "128"}},
    .cases = (const dsv4q_case_entry[]){
        {"act_quant(rows=2,n=4096,block=128,recipe=normal,seed=1)", SET_FLASH},
        {"act_quant(rows=4,n=448,block=64,recipe=extreme,seed=1)", SET_FLASH},
        {"act_quant(rows=4,n=448,block=64,recipe=ties,seed=1)", SET_FLASH | SET_PRO},
        {"act_quant(rows=2,n=4096,block=128,recipe=nearzero,seed=1)", SET_FLASH},
        {"act_quant(rows=8,n=4096,block=128,recipe=scaletrap,seed=1)", SET_FLASH | SET_PRO},
        {"act_quant(rows=8,n=448,block=64,recipe=scaletrap,seed=1)", SET_FLASH | SET_PRO},
        {"act_quant(rows=8,n=512,block=32,recipe=scaletrap,seed=1)", SET_FLASH | SET_PRO},
        {"act_quant(rows=2,n=7168,block=128,recipe=extreme,seed=1)", SET_PRO},
        {"act_quant(rows=2,n=7168,block=128,recipe=normal,seed=1)", SET_PRO},
        {"act_quant(rows=2,n=7168,block=128,recipe=nearzero,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .check = check)
#endif
