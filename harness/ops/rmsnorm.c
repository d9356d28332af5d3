/*
 * rmsnorm.c - RMSNORM, y = w * x * rsqrt(mean(x^2) + eps) per row
 * (model.py RMSNorm.forward), stored at norm_bf16.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(1, RMSNORM, rmsnorm, 2, 1, 1)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0); NEED(1);
    X(dsv4q_rmsnorm)(bs, a[0], (long)in[0].shape[0], (long)in[0].shape[1], a[1], p[0], out[0]);
    return 0;
}
DSV4Q_OP_EXEC(rmsnorm, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), d = dsv4q_kv_int(kv, "d", 1, 1 << 20, &bad);
    double eps = dsv4q_kv_num(kv, "eps", 0, 1, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/d/eps", c->key); return -1; }
    RECIPES("normal", "extreme", "nearzero", "f32");
    const int full = dsv4q_gen_full(c->recipe);
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, d, 0), *w = dsv4q_case_input(c, 1, DSV4Q_BT_F32, 1, d, 0, 0);
    NEEDP(x && w);
    dsv4q_gen_act(r, c->recipe, x, rows, d, 1.0, d);   /* per row: the norm's unit */
    if (!strcmp(c->recipe, "extreme")) {
        for (long i = 0; i < d; i += 97) x[i] = dsv4q_gen_bf16(x[i] * 4096.0);   /* outlier features */
    }
    if (!strcmp(c->recipe, "nearzero")) {            /* rows where eps dominates */
        for (long i = 0; i < d; i++) x[(rows - 1) * d + i] = dsv4q_gen_bf16(dsv4q_rng_gauss(r) * 1e-4);
    }
    for (long i = 0; i < d; i++) w[i] = dsv4q_gen_store(full, 1.0 + 0.25 * dsv4q_rng_gauss(r));   /* RMSNorm.weight is F32 */
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, rows, d, 0);
    c->param[0] = eps;
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_set_role(c, "layers.0.attn_norm", (const char *const[]){NULL, ""});
}

DSV4Q_OP_DESC(rmsnorm,
    .in = { T("x", "[rows,d]", "F32", ""), T("w", "[d]", "F32", "norm weight") },
    .out = { T("y", "[rows,d]", "F32|BF16", "w * x * rsqrt(mean(x^2) + eps)") },
    .param = { "eps" },
    .oracle = "oracle/norm.c dsv4q_rmsnorm",
    .reference = "model.py RMSNorm.forward",
    .boundaries = "norm_bf16",
    .notes = "",
    .keys = {{"rows", "2"}, {"d", "4096"}},
    .optkeys = {{"eps", "1e-6"}},
    .cases = (const dsv4q_case_entry[]){
        {"rmsnorm(rows=2,d=4096,recipe=normal,seed=1)", SET_FLASH},
        {"rmsnorm(rows=4,d=1024,recipe=extreme,seed=1)", SET_FLASH},
        {"rmsnorm(rows=4,d=512,recipe=nearzero,seed=1)", SET_FLASH | SET_PRO},
        {"rmsnorm(rows=2,d=4096,eps=1e-5,recipe=f32,seed=1)", SET_FLASH},
        {"rmsnorm(rows=2,d=7168,recipe=normal,seed=1)", SET_FLASH | SET_PRO},
        {"rmsnorm(rows=4,d=1536,recipe=extreme,seed=1)", SET_PRO},
        {"rmsnorm(rows=2,d=7168,eps=1e-5,recipe=f32,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .role = role)
#endif
