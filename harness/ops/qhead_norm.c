/*
 * qhead_norm.c - QHEAD_NORM, the weightless per-head query norm of the
 * attention (model.py Attention.forward: q *= rsqrt(mean(q^2) + eps)),
 * rows = tokens * heads; the source's five BF16 tensor ops at qnorm_bf16.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(2, QHEAD_NORM, qhead_norm, 1, 1, 1)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0);
    int64_t n = dsv4q_bt_numel(&in[0]);
    memcpy(out[0], a[0], sizeof(real) * (size_t)n);
    X(dsv4q_qhead_norm)(bs, out[0], (long)in[0].shape[0], (long)in[0].shape[1], p[0]);
    return 0;
}
DSV4Q_OP_EXEC(qhead_norm, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), H = dsv4q_kv_int(kv, "H", 1, 1024, &bad), D = dsv4q_kv_int(kv, "D", 1, 1 << 16, &bad);
    double eps = dsv4q_kv_num(kv, "eps", 0, 1, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad s/H/D/eps", c->key); return -1; }
    RECIPES("normal", "nearzero", "f32");
    const int full = dsv4q_gen_full(c->recipe);
    float *q = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, s * H, D, 0);
    NEEDP(q);
    for (long i = 0; i < s * H; i++) {
        /* nearzero: mean(q^2) near and below 3e-4, where +eps is not lost */
        double m = !strcmp(c->recipe, "nearzero") ? ldexp(1.0, -(int)dsv4q_rng_below(r, 14)) * 0.02 : 1.0 + 3 * dsv4q_rng_u01(r);
        for (long j = 0; j < D; j++) q[i * D + j] = dsv4q_gen_store(full, dsv4q_rng_gauss(r) * m);
    }
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s * H, D, 0);
    c->param[0] = eps;
    return 0;
}

DSV4Q_OP_DESC(qhead_norm,
    .in = { T("q", "[rows,D]", "F32", "rows = tokens*heads") },
    .out = { T("y", "[rows,D]", "F32|BF16", "q * rsqrt(mean(q^2) + eps), no weight") },
    .param = { "eps" },
    .oracle = "oracle/norm.c dsv4q_qhead_norm",
    .reference = "model.py Attention.forward (q *= rsqrt(q.square().mean(-1) + eps))",
    .boundaries = "qnorm_bf16 (five BF16 tensor ops in the source)",
    .notes = "",
    .keys = {{"s", "2"}, {"H", "64"}, {"D", "512"}},
    .optkeys = {{"eps", "1e-6"}},
    .cases = (const dsv4q_case_entry[]){
        {"qhead_norm(s=2,H=64,D=512,recipe=normal,seed=1)", SET_FLASH},
        {"qhead_norm(s=1,H=64,D=512,recipe=nearzero,seed=1)", SET_FLASH},
        {"qhead_norm(s=2,H=8,D=128,eps=1e-5,recipe=f32,seed=1)", SET_FLASH},
        {"qhead_norm(s=2,H=128,D=512,recipe=normal,seed=1)", SET_PRO},
        {"qhead_norm(s=1,H=128,D=512,recipe=nearzero,seed=1)", SET_PRO},
        {"qhead_norm(s=2,H=16,D=256,eps=1e-5,recipe=f32,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build)
#endif
