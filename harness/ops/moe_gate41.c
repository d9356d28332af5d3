/*
 * moe_gate41.c - MOE_GATE41, the V4.1 router (V4.1 model.py Gate.forward):
 * z = (W x) / gate_temp in FP32, scores sqrtsoftplus / sigmoid / softmax
 * of z, the top-k by score + bias (ties to the lower expert id), weights
 * = the unbiased scores of the chosen, divided by (their sum + 1e-20) when
 * norm_topk_prob and k > 1 (for every score function, softmax included:
 * V4 renormalises only non-softmax scores and has no 1e-20), then *
 * route_scale. No hash routing in V4.1. indices is a selection (compared
 * as sets, ties at the cut legitimate); weights come in the order of the
 * picks (realigned before they are compared), as for MOE_GATE.
 */
#include "harness/ops/op.h"
#include "oracle/ops41.h"

DSV4Q_OP_ROW(18, MOE_GATE41, moe_gate41, 3, 2, 5)

static const char *const score_funcs[3] = {"sqrtsoftplus", "sigmoid", "softmax"};

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0);
    dsv4q_weight W = dsv4q_op_weight(&in[1]);
    const real *bias = NULL;
    if (in[2].ndim > 0 && in[2].data) {
        NEED(2);
        bias = a[2];
    }
    const int f = (int)p[2];
    if (f < 0 || f > 2) {
        snprintf(err, errlen, "moe_gate41: score_func %d out of range", f);
        return -1;
    }
    return X(dsv4q_moe_gate41)(a[0], (long)in[0].shape[0], (long)in[0].shape[1], &W, bias, (int)in[1].shape[0],
                               (int)p[0], score_funcs[f], p[3], p[4] != 0, p[1], out[0], out[1])
               ? 1
               : 0;
}
DSV4Q_OP_EXEC(moe_gate41, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad),
         E = dsv4q_kv_int(kv, "E", 1, 1024, &bad), k = dsv4q_kv_int(kv, "k", 1, 64, &bad),
         norm = dsv4q_kv_int(kv, "norm", 0, 1, &bad);
    const double temp = dsv4q_kv_num(kv, "temp", 1e-3, 1e3, &bad);
    const char *func = dsv4q_kv_str(kv, "func");
    const int f = !strcmp(func, "sqrtsoftplus") ? 0 : !strcmp(func, "sigmoid") ? 1 : !strcmp(func, "softmax") ? 2 : -1;
    if (bad || k > E || f < 0) {
        snprintf(err, errlen, "%s: bad s/d/E/k/temp/norm/func (func sqrtsoftplus|sigmoid|softmax; norm 0|1)", c->key);
        return -1;
    }
    RECIPES("normal", "ties", "near", "tiny", "f32");
    const int full = dsv4q_gen_full(c->recipe), ties = !strcmp(c->recipe, "ties"), near = !strcmp(c->recipe, "near"),
              tiny = !strcmp(c->recipe, "tiny");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    NEEDP(x);
    if (tiny) {
        /* positive activations against negative weights: every logit near -50 */
        for (long i = 0; i < s * d; i++) x[i] = dsv4q_gen_bf16(fabs(dsv4q_rng_gauss(r)));
    } else {
        dsv4q_gen_act(r, full ? "f32" : "normal", x, s, d, 1.0, d);
    }
    if (dsv4q_gen_weight(c, 1, r, "f32", E, d, 1.0 / sqrt((double)d), "normal", err, errlen)) return -1;
    float *W = c->in[1].data;
    if (ties) {
        /* experts in groups of 8 identical rows: equal scores straddle the cut */
        for (long e = 0; e < E; e++)
            if (e % 8) memcpy(W + e * d, W + (e - e % 8) * d, sizeof(float) * (size_t)d);
    }
    if (near) {
        /* pairs: row 2j+1 = row 2j * (1 + 2^-10), same bias: a relative logit
         * gap of 2^-10, far above FP32's error, below BF16's half-ulp 2^-9 (a
         * gate kept in BF16 ties or swaps them) */
        for (long e = 1; e < E; e += 2)
            for (long i = 0; i < d; i++) W[e * d + i] = (float)((double)W[(e - 1) * d + i] * (1 + 0x1p-10));
    }
    if (tiny) {
        /* w = -|W| 50 / (2/pi sqrt(d)): z = -50 +- 0.8 (E|g1 g2| = 2/pi),
         * sigmoid ~ 2e-22, so the top-k sum is near the 1e-20 the
         * renormalisation adds */
        const double g = 50.0 / (2.0 / M_PI * sqrt((double)d));
        for (long i = 0; i < E * d; i++) W[i] = (float)(-fabs((double)W[i]) * g);
    }
    float *bias = dsv4q_case_input(c, 2, DSV4Q_BT_F32, 1, E, 0, 0);
    NEEDP(bias);
    for (long e = 0; e < E; e++) {
        double b = ties ? (double)((e / 8) % 3) * 0.0625 : tiny ? 0 : 0.1 * dsv4q_rng_gauss(r);
        bias[e] = near && (e & 1) ? bias[e - 1] : dsv4q_gen_store(full, b);
    }
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, k, 0);
    dsv4q_case_output(c, 1, DSV4Q_BT_I32, 2, s, k, 0);
    c->param[0] = (double)k;
    c->param[1] = E > 256 ? 2.5 : 1.5;
    c->param[2] = f;
    c->param[3] = temp;
    c->param[4] = (double)norm;
    /* the scores the selection is made from (score(z / temp) + bias), in f64 */
    double *z = dsv4q_case_alloc(c, sizeof(double) * (size_t)(s * E)),
           *xd = dsv4q_case_alloc(c, sizeof(double) * (size_t)(s * d));
    if (!z || !xd) return dsv4q_case_oom(c, err, errlen);
    for (long i = 0; i < s * d; i++) xd[i] = x[i];
    dsv4q_weight Wv = {"W", DSV4Q_WF_F32, E, d, W, NULL, DSV4Q_DT_INVALID, 0};
    if (dsv4q_linear_f64(0, 0, &Wv, xd, s, z, -1)) return dsv4q_case_oom(c, err, errlen);
    for (long i = 0; i < s; i++) {
        double *v = z + i * E, m, sum = 0;
        for (long e = 0; e < E; e++) v[e] /= temp;
        m = v[0];
        if (f == 2) {
            for (long e = 1; e < E; e++)
                if (v[e] > m) m = v[e];
            for (long e = 0; e < E; e++) sum += v[e] = exp(v[e] - m);
            for (long e = 0; e < E; e++) v[e] /= sum;
        } else {
            for (long e = 0; e < E; e++)
                v[e] = f == 1 ? 1 / (1 + exp(-v[e])) : sqrt(v[e] > 20 ? v[e] : log1p(exp(v[e])));
        }
        for (long e = 0; e < E; e++) v[e] += bias[e];
    }
    c->sel_scores = z;
    c->sel_rows = s;
    c->sel_T = E;
    c->sel_out = 1;
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_set_role(c, "layers.0.ffn.gate", (const char *const[]){NULL, ".weight", ".bias", NULL});
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (!(c->param[0] >= 1) || !(c->param[0] <= (double)c->in[1].shape[0])) {
        snprintf(err, errlen, "moe_gate41: k = %g must be in 1..n_exp", c->param[0]);
        return -1;
    }
    if (!(c->param[3] > 0) || !isfinite(c->param[3])) {
        snprintf(err, errlen, "moe_gate41: gate_temp = %g must be positive and finite", c->param[3]);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(
    moe_gate41,
    .in = {T("x", "[s,d]", "F32", ""), T("W", "[n_exp,d]", "F32 (+ raw)", "gate weight, FP32 math"),
           T("bias", "[n_exp]", "F32", "selection bias, or empty")},
    .out = {T("weights", "[s,k]", "F32", "routing weights, in the order of indices"),
            T("indices", "[s,k]", "I32", "chosen experts (a selection: compared as sets)")},
    .param = {"k (n_activated_experts)", "route_scale", "score_func: 0 sqrtsoftplus, 1 sigmoid, 2 softmax",
              "gate_temp: the logits are divided by it before the score function",
              "norm_topk_prob: 1 = weights / (sum + 1e-20) when k > 1 (every score function)"},
    .oracle = "oracle/moe.c dsv4q_moe_gate41", .reference = "V4.1 model.py Gate.forward", .boundaries = "",
    .notes = "The renormalisation adds the literal 1e-20 (not norm_eps) and is skipped for k = 1 or norm_topk_prob 0; "
             "softmax scores are renormalised too. Swaps inside the tie-run of score+bias at the cut are "
             "legitimate; weights are compared per expert.",
    .keys =
        {{"s", "4"}, {"d", "5120"}, {"E", "256"}, {"k", "6"}, {"func", "sqrtsoftplus"}, {"temp", "1"}, {"norm", "1"}},
    .cases =
        (const dsv4q_case_entry[]){
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=sqrtsoftplus,temp=1,norm=1,recipe=normal,seed=1)",
             SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=sqrtsoftplus,temp=1,norm=1,recipe=ties,seed=1)",
             SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=sqrtsoftplus,temp=1,norm=1,recipe=near,seed=1)",
             SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=sqrtsoftplus,temp=1,norm=1,recipe=f32,seed=1)", SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=sqrtsoftplus,temp=1.25,norm=1,recipe=normal,seed=1)",
             SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=sqrtsoftplus,temp=1,norm=0,recipe=normal,seed=1)",
             SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=1,func=sqrtsoftplus,temp=1,norm=1,recipe=normal,seed=1)",
             SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=softmax,temp=1,norm=1,recipe=normal,seed=1)", SET_FLASH41},
            {"moe_gate41(s=4,d=5120,E=256,k=6,func=sigmoid,temp=1,norm=1,recipe=tiny,seed=1)", SET_FLASH41},
            {NULL, 0}},
    .build = build, .role = role, .check = check, .sel = 1u << 1, .per_pick = 1u)
#endif
