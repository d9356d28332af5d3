/*
 * expert.c - EXPERT, one SwiGLU expert of the MoE (model.py
 * Expert.forward): y = w2(bf16(silu(min(w1 x, L)) * clamp(w3 x, +-L) *
 * weight)) with FP4 or FP8 weights and the FP8 activation quant before
 * each GEMM; an empty routing weight is the shared expert (weight 1).
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(15, EXPERT, expert, 5, 1, 2)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    /* weight[n] is optional: an empty input (ndim 0) means weight 1,
     * the shared expert (model.py Expert.forward with weights None) */
    const int has_w = in[4].ndim > 0 && in[4].data;
    NEED(0);
    if (has_w) NEED(4);
    dsv4q_expert_w E = {dsv4q_op_weight(&in[1]), dsv4q_op_weight(&in[2]), dsv4q_op_weight(&in[3])};
    return X(dsv4q_expert)(bs, (int)p[1], &E, a[0], (long)in[0].shape[0], has_w ? a[4] : NULL, p[0], out[0]) ? 1 : 0;
}
DSV4Q_OP_EXEC(expert, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long n = dsv4q_kv_int(kv, "n", 1, 4096, &bad), d = dsv4q_kv_int(kv, "d", 32, 1 << 16, &bad), I = dsv4q_kv_int(kv, "I", 32, 1 << 16, &bad);
    const char *fmt = dsv4q_kv_str(kv, "fmt");
    if (bad || (strcmp(fmt, "fp4") && strcmp(fmt, "fp8"))) {
        snprintf(err, errlen, "%s: bad n/d/I/fmt (fmt fp4|fp8)", c->key);
        return -1;
    }
    RECIPES("normal", "extreme", "f32");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, n, d, 0);
    NEEDP(x);
    /* extreme: large inputs drive w1 x / w3 x into the swiglu clamp (10) */
    dsv4q_gen_act(r, dsv4q_gen_full(c->recipe) ? "f32" : "normal", x, n, d, !strcmp(c->recipe, "extreme") ? 24.0 : 1.0, 128);
    if (dsv4q_gen_weight(c, 1, r, fmt, I, d, 1.0 / sqrt((double)d), "normal", err, errlen) ||
        dsv4q_gen_weight(c, 2, r, fmt, d, I, 1.0 / sqrt((double)I), "normal", err, errlen) ||
        dsv4q_gen_weight(c, 3, r, fmt, I, d, 1.0 / sqrt((double)d), "normal", err, errlen))
        return -1;
    const char *shared = dsv4q_kv_str(kv, "shared");
    if (strcmp(shared, "0") && strcmp(shared, "1")) {
        snprintf(err, errlen, "%s: shared must be 0 or 1", c->key);
        return -1;
    }
    if (!strcmp(shared, "1")) {
        dsv4q_case_input(c, 4, DSV4Q_BT_F32, 0, 0, 0, 0);   /* the shared expert: no routing weight (ndim 0) */
    } else {
        float *w = dsv4q_case_input(c, 4, DSV4Q_BT_F32, 1, n, 0, 0);
        NEEDP(w);
        for (long i = 0; i < n; i++) w[i] = (float)(0.05 + 0.4 * dsv4q_rng_u01(r));
    }
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, n, d, 0);
    c->param[0] = 10;
    c->param[1] = 1;
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    dsv4q_case_set_role(c, strcmp(dsv4q_kv_str(kv, "shared"), "1") ? "layers.0.ffn.experts.0" : "layers.0.ffn.shared_experts",
             (const char *const[]){NULL, ".w1", ".w2", ".w3", NULL});
}

DSV4Q_OP_DESC(expert,
    .in = { T("x", "[n,d]", "F32", "rows routed to this expert"), 
          T("w1", "[I,d]", "F32 + raw", "gate proj; raw packed E2M1 + E8M0 [I,d/32] or F8_E4M3 + 128x128 scales"), 
          T("w2", "[d,I]", "F32 + raw", "down proj"), T("w3", "[I,d]", "F32 + raw", "up proj"), 
          T("weight", "[n]", "F32", "routing weight per row; empty (ndim 0) = 1, the shared expert") },
    .out = { T("y", "[n,d]", "F32|BF16", "w2(bf16(silu(min(w1 x,L)) * clamp(w3 x,+-L) * weight))") },
    .param = { "swiglu_limit L (0 = none)", "ue8m0" },
    .oracle = "oracle/moe.c dsv4q_expert",
    .reference = "model.py Expert.forward",
    .boundaries = "gemm_act_fp8, linear_bf16, moe_bf16",
    .notes = "",
    .keys = {{"n", "2"}, {"d", "4096"}, {"I", "2048"}, {"fmt", "fp4"}},
    .optkeys = {{"shared", "0"}},
    .cases = (const dsv4q_case_entry[]){
        {"expert(n=2,d=4096,I=2048,fmt=fp4,recipe=normal,seed=1)", SET_FLASH},
        {"expert(n=2,d=4096,I=2048,fmt=fp4,recipe=extreme,seed=1)", SET_FLASH},
        {"expert(n=2,d=4096,I=2048,fmt=fp8,recipe=normal,seed=1)", SET_FLASH},
        {"expert(n=2,d=4096,I=2048,fmt=fp8,recipe=extreme,seed=1)", SET_FLASH},
        {"expert(n=2,d=4096,I=2048,fmt=fp4,recipe=f32,seed=1)", SET_FLASH},
        {"expert(n=2,d=4096,I=2048,fmt=fp8,shared=1,recipe=normal,seed=1)", SET_FLASH},
        {"expert(n=2,d=7168,I=3072,fmt=fp4,recipe=normal,seed=1)", SET_PRO},
        {"expert(n=2,d=7168,I=3072,fmt=fp8,recipe=extreme,seed=1)", SET_PRO},
        {"expert(n=2,d=7168,I=3072,fmt=fp4,recipe=extreme,seed=1)", SET_PRO},
        {"expert(n=2,d=7168,I=3072,fmt=fp8,recipe=normal,seed=1)", SET_PRO},
        {"expert(n=2,d=7168,I=3072,fmt=fp4,recipe=f32,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .role = role)
#endif
