/*
 * moe_gate.c - MOE_GATE, the router (model.py Gate.forward): scores
 * sqrtsoftplus / sigmoid / softmax of W x in FP32, the top-k by score +
 * bias (or the hash route tid2eid[token]), weights renormalised and
 * scaled by route_scale. indices is a selection (compared as sets, ties
 * at the cut legitimate); weights come in the order of the picks, so they
 * are realigned to the candidate's picks before they are compared.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(14, MOE_GATE, moe_gate, 5, 2, 3)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0);
    dsv4q_weight W = dsv4q_op_weight(&in[1]);
    const real *bias = NULL;
    if (in[2].ndim > 0 && in[2].data) { NEED(2); bias = a[2]; }
    const int32_t *t2e = in[3].ndim > 0 ? in[3].data : NULL;
    static const char *const sf[3] = {"sqrtsoftplus", "sigmoid", "softmax"};
    int f = (int)p[2];
    if (f < 0 || f > 2) { snprintf(err, errlen, "moe_gate: score_func %d out of range", f); return -1; }
    return X(dsv4q_moe_gate)(a[0], (long)in[0].shape[0], (long)in[0].shape[1], &W, bias, t2e, in[4].data,
                           (int)in[1].shape[0], (int)p[0], sf[f], p[1], out[0], out[1]) ? 1 : 0;
}
DSV4Q_OP_EXEC(moe_gate, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad), E = dsv4q_kv_int(kv, "E", 1, 1024, &bad),
         k = dsv4q_kv_int(kv, "k", 1, 64, &bad);
    const char *route = dsv4q_kv_str(kv, "route"), *func = dsv4q_kv_str(kv, "func");
    int f = !strcmp(func, "sqrtsoftplus") ? 0 : !strcmp(func, "sigmoid") ? 1 : !strcmp(func, "softmax") ? 2 : -1;
    int hash = !strcmp(route, "hash");
    if (bad || k > E || f < 0 || (!hash && strcmp(route, "topk"))) {
        snprintf(err, errlen, "%s: bad s/d/E/k/route/func (route topk|hash; func sqrtsoftplus|sigmoid|softmax)", c->key);
        return -1;
    }
    RECIPES("normal", "ties", "f32");
    const long vocab = 129280;
    const int full = dsv4q_gen_full(c->recipe);
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    NEEDP(x);
    dsv4q_gen_act(r, full ? "f32" : "normal", x, s, d, 1.0, d);
    if (dsv4q_gen_weight(c, 1, r, "f32", E, d, 1.0 / sqrt((double)d), "normal", err, errlen)) return -1;
    float *W = c->in[1].data;
    int ties = !strcmp(c->recipe, "ties");
    if (ties)   /* experts in groups of 8 identical rows: equal scores straddle the cut */
        for (long e = 0; e < E; e++)
            if (e % 8) memcpy(W + e * d, W + (e - e % 8) * d, sizeof(float) * (size_t)d);
    float *bias = NULL;
    if (!hash) {
        bias = dsv4q_case_input(c, 2, DSV4Q_BT_F32, 1, E, 0, 0);
        NEEDP(bias);
        for (long e = 0; e < E; e++) bias[e] = ties ? (float)((e / 8) % 3) * 0.0625f : dsv4q_gen_store(full, 0.1 * dsv4q_rng_gauss(r));
        dsv4q_case_input(c, 3, DSV4Q_BT_I32, 0, 0, 0, 0);
    } else {
        dsv4q_case_input(c, 2, DSV4Q_BT_F32, 0, 0, 0, 0);
        int32_t *t2e = dsv4q_case_input(c, 3, DSV4Q_BT_I32, 2, vocab, k, 0);
        NEEDP(t2e);
        for (long v = 0; v < vocab; v++)
            for (long j = 0; j < k; j++) {
                int32_t e;
                int dup;
                do {   /* distinct experts per token */
                    e = (int32_t)dsv4q_rng_below(r, E);
                    dup = 0;
                    for (long u = 0; u < j; u++) dup |= t2e[v * k + u] == e;
                } while (dup);
                t2e[v * k + j] = e;
            }
    }
    int32_t *ids = dsv4q_case_input(c, 4, DSV4Q_BT_I32, 1, s, 0, 0);
    NEEDP(ids);
    for (long i = 0; i < s; i++) ids[i] = (int32_t)dsv4q_rng_below(r, vocab);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, k, 0);
    dsv4q_case_output(c, 1, DSV4Q_BT_I32, 2, s, k, 0);
    c->param[0] = (double)k;
    c->param[1] = E > 256 ? 2.5 : 1.5;
    c->param[2] = f;
    if (!hash) {
        /* the scores the selection is made from (sc + bias), in f64 */
        double *z = dsv4q_case_alloc(c, sizeof(double) * (size_t)(s * E)), *xd = dsv4q_case_alloc(c, sizeof(double) * (size_t)(s * d));
        if (!z || !xd) return dsv4q_case_oom(c, err, errlen);
        for (long i = 0; i < s * d; i++) xd[i] = x[i];
        dsv4q_weight Wv = {"W", DSV4Q_WF_F32, E, d, W, NULL, DSV4Q_DT_INVALID, 0};
        if (dsv4q_linear_f64(0, 0, &Wv, xd, s, z, -1)) return dsv4q_case_oom(c, err, errlen);
        for (long i = 0; i < s; i++) {
            double *v = z + i * E, m = v[0], sum = 0;
            if (f == 2) {
                for (long e = 1; e < E; e++) if (v[e] > m) m = v[e];
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
    }
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_set_role(c, "layers.0.ffn.gate", (const char *const[]){NULL, ".weight", ".bias", ".tid2eid", NULL});
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (!(c->param[0] >= 1)) {
        snprintf(err, errlen, "moe_gate: k = %g must be >= 1", c->param[0]);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(moe_gate,
    .in = { T("x", "[s,d]", "F32", ""), T("W", "[n_exp,d]", "F32 (+ raw)", "gate weight, FP32 math"), 
          T("bias", "[n_exp]", "F32", "selection bias, or empty"), 
          T("tid2eid", "[vocab,k]", "I32", "hash routing table, or empty"), 
          T("ids", "[s]", "I32", "token ids (hash routing)") },
    .out = { T("weights", "[s,k]", "F32", "routing weights, in the order of indices"), 
          T("indices", "[s,k]", "I32", "chosen experts (a selection: compared as sets)") },
    .param = { "k (n_activated_experts)", "route_scale", "score_func: 0 sqrtsoftplus, 1 sigmoid, 2 softmax" },
    .oracle = "oracle/moe.c dsv4q_moe_gate",
    .reference = "model.py Gate.forward",
    .boundaries = "",
    .notes = "Swaps inside the tie-run of sc+bias at the cut are legitimate; weights are compared per expert.",
    .keys = {{"s", "4"}, {"d", "4096"}, {"E", "256"}, {"k", "6"}, {"route", "topk"}, {"func", "sqrtsoftplus"}},
    .cases = (const dsv4q_case_entry[]){
        {"moe_gate(s=4,d=4096,E=256,k=6,route=topk,func=sqrtsoftplus,recipe=normal,seed=1)", SET_FLASH},
        {"moe_gate(s=4,d=4096,E=256,k=6,route=topk,func=sqrtsoftplus,recipe=ties,seed=1)", SET_FLASH},
        {"moe_gate(s=4,d=4096,E=256,k=6,route=hash,func=sqrtsoftplus,recipe=normal,seed=1)", SET_FLASH},
        {"moe_gate(s=4,d=4096,E=256,k=6,route=topk,func=sqrtsoftplus,recipe=f32,seed=1)", SET_FLASH},
        {"moe_gate(s=4,d=7168,E=384,k=6,route=topk,func=sqrtsoftplus,recipe=normal,seed=1)", SET_PRO},
        {"moe_gate(s=4,d=7168,E=384,k=6,route=topk,func=sqrtsoftplus,recipe=ties,seed=1)", SET_PRO},
        {"moe_gate(s=4,d=7168,E=384,k=6,route=hash,func=sqrtsoftplus,recipe=normal,seed=1)", SET_PRO},
        {"moe_gate(s=4,d=7168,E=384,k=6,route=topk,func=sqrtsoftplus,recipe=f32,seed=1)", SET_PRO},
        {"moe_gate(s=4,d=7168,E=256,k=8,route=topk,func=sigmoid,recipe=normal,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .role = role, .check = check, .sel = 1u << 1, .per_pick = 1u)
#endif
