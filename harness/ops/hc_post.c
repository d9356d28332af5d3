/*
 * hc_post.c - HC_POST, the hyper-connection expansion after a sublayer
 * (model.py Block.hc_post): Y_k = post_k x + sum_j comb[j][k] X_j, the
 * sublayer output x spread over the hc streams and the old streams mixed
 * by comb (j the source stream), stored at resid_bf16.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(12, HC_POST, hc_post, 4, 1, 0)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    NEED(0); NEED(1); NEED(2); NEED(3);
    X(dsv4q_hc_post)(bs, a[0], a[1], a[2], a[3], (long)in[1].shape[0], (int)in[1].shape[1], (long)in[1].shape[2],
                     out[0]);
    return 0;
}
DSV4Q_OP_EXEC(hc_post, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), hc = dsv4q_kv_int(kv, "hc", 1, 16, &bad),
         d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad s/hc/d/iters/hceps", c->key); return -1; }
    RECIPES("normal", "f32");
    float *Xs = dsv4q_case_input(c, 1, DSV4Q_BT_F32, 3, s, hc, d);
    NEEDP(Xs);
    dsv4q_gen_act(r, c->recipe, Xs, s * hc, d, 1.0, d);
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, s, d, 0), *post = dsv4q_case_input(c, 2, DSV4Q_BT_F32, 2, s, hc, 0),
          *comb = dsv4q_case_input(c, 3, DSV4Q_BT_F32, 3, s, hc, hc);
    if (!x || !post || !comb) return dsv4q_case_oom(c, err, errlen);
    dsv4q_gen_act(r, dsv4q_gen_full(c->recipe) ? "f32" : "normal", x, s, d, 1.0, d);
    for (long i = 0; i < s * hc; i++) post[i] = (float)(2 * dsv4q_rng_u01(r));
    for (long t = 0; t < s; t++)   /* roughly doubly stochastic, as Sinkhorn leaves it */
        for (long j = 0; j < hc; j++) {
            double sum = 0, v[16];
            for (long k = 0; k < hc; k++) sum += v[k] = 0.1 + dsv4q_rng_u01(r);
            for (long k = 0; k < hc; k++) comb[(t * hc + j) * hc + k] = (float)(v[k] / sum);
        }
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 3, s, hc, d);
    return 0;
}

DSV4Q_OP_DESC(hc_post,
    .in = { T("x", "[s,d]", "F32", "sublayer output"), T("X", "[s,hc,d]", "F32", "residual streams"), 
          T("post", "[s,hc]", "F32", ""), T("comb", "[s,hc,hc]", "F32", "C[j][k], j = source stream") },
    .out = { T("Y", "[s,hc,d]", "F32|BF16", "Y_k = post_k x + sum_j C[j][k] X_j") },
    .param = { NULL },
    .oracle = "oracle/hc.c dsv4q_hc_post",
    .reference = "model.py Block.hc_post",
    .boundaries = "resid_bf16",
    .notes = "",
    .keys = {{"s", "2"}, {"hc", "4"}, {"d", "4096"}},
    .cases = (const dsv4q_case_entry[]){
        {"hc_post(s=2,hc=4,d=4096,recipe=normal,seed=1)", SET_FLASH},
        {"hc_post(s=2,hc=4,d=4096,recipe=f32,seed=1)", SET_FLASH},
        {"hc_post(s=2,hc=4,d=7168,recipe=normal,seed=1)", SET_PRO},
        {"hc_post(s=2,hc=4,d=7168,recipe=f32,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build)
#endif
