/*
 * hc_pre.c - HC_PRE, the hyper-connection collapse before a sublayer
 * (model.py Block.hc_pre; kernel.py hc_split_sinkhorn_kernel): the mixes
 * of the flattened hc streams through fn, split into pre / post / comb,
 * comb made doubly stochastic by Sinkhorn, and y = sum_j pre_j X_j. pre
 * weighs the streams into the sublayer input, post (hc) and comb (hc x
 * hc) are what HC_POST needs afterwards.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(11, HC_PRE, hc_pre, 4, 3, 3)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0); NEED(2); NEED(3);
    dsv4q_weight fn = dsv4q_op_weight(&in[1]);
    return X(dsv4q_hc_pre)(bs, a[0], (long)in[0].shape[0], (int)in[0].shape[1], (long)in[0].shape[2], &fn, a[2], a[3],
                           p[0], p[1], (int)p[2], out[0], out[1], out[2]) ? 1 : 0;
}
DSV4Q_OP_EXEC(hc_pre, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), hc = dsv4q_kv_int(kv, "hc", 1, 16, &bad),
         d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad), iters = dsv4q_kv_int(kv, "iters", 1, 1000, &bad);
    double hceps = dsv4q_kv_num(kv, "hceps", 0, 1, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad s/hc/d/iters/hceps", c->key); return -1; }
    RECIPES("normal", "extreme", "f32");
    float *Xs = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, s, hc, d);
    NEEDP(Xs);
    dsv4q_gen_act(r, c->recipe, Xs, s * hc, d, 1.0, d);
    if (dsv4q_gen_hc_params(c, r, 1, (2 + hc) * hc, hc * d, 3, err, errlen)) return -1;
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    dsv4q_case_output(c, 1, DSV4Q_BT_F32, 2, s, hc, 0);
    dsv4q_case_output(c, 2, DSV4Q_BT_F32, 3, s, hc, hc);
    c->param[0] = DSV4Q_CASE_EPS;
    c->param[1] = hceps;
    c->param[2] = (double)iters;
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_set_role(c, "layers.0.hc_attn", (const char *const[]){NULL, "_fn", "_scale", "_base"});
}

/* clang-format off */
DSV4Q_OP_DESC(hc_pre,
    .in = { T("X", "[s,hc,d]", "F32", "hc residual streams"), 
          T("fn", "[(2+hc)*hc,hc*d]", "F32 (+ raw)",
            "FP32 math: mix = fn X_t * rsqrt(mean(X_t^2) + norm_eps), X_t flat [hc*d]"),
          T("scale", "[3]", "F32", "scale0 (pre), scale1 (post), scale2 (comb)"),
          T("base", "[(2+hc)*hc]", "F32", "bias of each mix entry (pre, post, comb)") },
    .out = { T("y", "[s,d]", "F32|BF16",
            "sublayer input sum_j pre_j X_j, pre_j = sigmoid(mix_j scale0 + base_j) + hc_eps (not an output)"),
          T("post", "[s,hc]", "F32",
            "post_j = 2 sigmoid(mix_{hc+j} scale1 + base_{hc+j}): the weight of the sublayer output in stream j "
            "(hc_post)"),
          T("comb", "[s,hc,hc]", "F32",
            "C[j][k], j = source stream: Sinkhorn(mix_{2hc+hc*j+k} scale2 + base_{2hc+hc*j+k}), doubly stochastic; "
            "hc_post's Y_k = post_k x + sum_j C[j][k] X_j") },
    .param = { "norm_eps (mixes RMS)", "hc_eps (Sinkhorn)", "iters (hc_sinkhorn_iters)" },
    .oracle = "oracle/hc.c dsv4q_hc_pre",
    .reference = "model.py Block.hc_pre; kernel.py hc_split_sinkhorn_kernel",
    .boundaries = "resid_bf16 (y)",
    .notes = "Per token t, mix [(2+hc)*hc] is split into pre (first hc), post (next hc) and comb (last hc*hc, "
             "row-major); pre weighs the streams into y, post and comb are what hc_post needs afterwards.",
    .keys = {{"s", "2"}, {"hc", "4"}, {"d", "4096"}},
    .optkeys = {{"iters", "20"}, {"hceps", "1e-6"}},
    .cases = (const dsv4q_case_entry[]){
        {"hc_pre(s=2,hc=4,d=4096,recipe=normal,seed=1)", SET_FLASH},
        {"hc_pre(s=2,hc=4,d=4096,recipe=extreme,seed=1)", SET_FLASH},
        {"hc_pre(s=2,hc=4,d=4096,iters=3,hceps=1e-5,recipe=f32,seed=1)", SET_FLASH},
        {"hc_pre(s=2,hc=4,d=4096,iters=1,recipe=normal,seed=1)", SET_FLASH},
        {"hc_pre(s=2,hc=4,d=7168,recipe=normal,seed=1)", SET_PRO},
        {"hc_pre(s=2,hc=4,d=7168,recipe=extreme,seed=1)", SET_PRO},
        {"hc_pre(s=2,hc=4,d=7168,iters=3,hceps=1e-5,recipe=f32,seed=1)", SET_PRO},
        {"hc_pre(s=2,hc=4,d=7168,iters=1,recipe=normal,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .role = role, .rowfloor = 1u)
/* clang-format on */
#endif
