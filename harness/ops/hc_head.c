/*
 * hc_head.c - HC_HEAD, the final collapse of the hc streams before the
 * head (model.py ParallelHead.hc_head): y = sum_j (sigmoid(mix_j * scale0
 * + base_j) + hc_eps) X_j, the mixes from fn over the flattened streams.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(13, HC_HEAD, hc_head, 4, 1, 2)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0); NEED(2); NEED(3);
    dsv4q_weight fn = dsv4q_op_weight(&in[1]);
    return X(dsv4q_hc_head)(bs, a[0], (long)in[0].shape[0], (int)in[0].shape[1], (long)in[0].shape[2], &fn, a[2],
                            a[3], p[0], p[1], out[0]) ? 1 : 0;
}
DSV4Q_OP_EXEC(hc_head, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), hc = dsv4q_kv_int(kv, "hc", 1, 16, &bad),
         d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad);
    double hceps = dsv4q_kv_num(kv, "hceps", 0, 1, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad s/hc/d/iters/hceps", c->key); return -1; }
    RECIPES("normal", "f32");
    float *Xs = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, s, hc, d);
    NEEDP(Xs);
    dsv4q_gen_act(r, c->recipe, Xs, s * hc, d, 1.0, d);
    if (dsv4q_gen_hc_params(c, r, 1, hc, hc * d, 1, err, errlen)) return -1;
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    c->param[0] = DSV4Q_CASE_EPS;
    c->param[1] = hceps;
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_set_role(c, "hc_head", (const char *const[]){NULL, "_fn", "_scale", "_base"});
}

DSV4Q_OP_DESC(hc_head,
    .in = { T("X", "[s,hc,d]", "F32", ""), T("fn", "[hc,hc*d]", "F32 (+ raw)", "FP32 math"), 
          T("scale", "[1]", "F32", ""), T("base", "[hc]", "F32", "") },
    .out = { T("y", "[s,d]", "F32|BF16", "sum_j (sigmoid(mix_j scale + base_j) + hc_eps) X_j") },
    .param = { "norm_eps", "hc_eps" },
    .oracle = "oracle/hc.c dsv4q_hc_head",
    .reference = "model.py ParallelHead.hc_head",
    .boundaries = "resid_bf16",
    .notes = "",
    .keys = {{"s", "2"}, {"hc", "4"}, {"d", "4096"}},
    .optkeys = {{"hceps", "1e-6"}},
    .cases = (const dsv4q_case_entry[]){
        {"hc_head(s=2,hc=4,d=4096,recipe=normal,seed=1)", SET_FLASH},
        {"hc_head(s=2,hc=4,d=4096,hceps=1e-5,recipe=f32,seed=1)", SET_FLASH},
        {"hc_head(s=2,hc=4,d=7168,recipe=normal,seed=1)", SET_PRO},
        {"hc_head(s=2,hc=4,d=7168,hceps=1e-5,recipe=f32,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .role = role)
#endif
