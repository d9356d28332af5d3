/*
 * hc_pre41.c - HC_PRE41, V4.1's lagged hyper-connection pre step (V4.1
 * model.py Block.hc_mixes + Block.hc_pre; kernel.py
 * hc_split_sinkhorn_kernel): the mixes of a sub-block (pre, post, comb)
 * are computed from ITS input streams Xs as V4's hc_pre computes them, but
 * the collapse y = sum_j premix_j Xs_j in front of it uses premix, the
 * pre-mix the PREVIOUS sub-block computed (an input; identity [1, 0, ..]
 * before layer 0). The new pre is handed on to the next sub-block. The
 * recipes make the two pre-mixes differ (lagged: one-hot, identity: layer
 * 0's), so a kernel that collapses with its own pre-mix fails every case.
 */
#include "harness/ops/op.h"
#include "oracle/ops41.h"

DSV4Q_OP_ROW(25, HC_PRE41, hc_pre41, 5, 4, 3)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0);
    NEED(1);
    NEED(3);
    NEED(4);
    const long s = (long)in[0].shape[0], d = (long)in[0].shape[2];
    const int hc = (int)in[0].shape[1];
    dsv4q_weight fn = dsv4q_op_weight(&in[2]);
    if (X(dsv4q_hc_mixes)(bs, a[0], s, hc, d, &fn, a[3], a[4], p[0], p[1], (int)p[2], out[1], out[2], out[3])) return 1;
    X(dsv4q_hc_collapse)(bs, a[0], a[1], s, hc, d, out[0]);
    return 0;
}
DSV4Q_OP_EXEC(hc_pre41, exec)

#if DSV4Q_OP_ONCE
/* norm_eps of V4.1 Flash (its config; V4's is 1e-6, DSV4Q_CASE_EPS). */
#define HC41_NORM_EPS 1e-20

static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    const long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), hc = dsv4q_kv_int(kv, "hc", 1, 16, &bad),
               d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad), iters = dsv4q_kv_int(kv, "iters", 1, 1000, &bad);
    const double hceps = dsv4q_kv_num(kv, "hceps", 0, 1, &bad);
    if (bad) {
        snprintf(err, errlen, "%s: bad s/hc/d/iters/hceps", c->key);
        return -1;
    }
    RECIPES("normal", "lagged", "identity", "f32", "extreme");
    const char *rc = c->recipe;
    float *Xs = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, s, hc, d),
          *pm = dsv4q_case_input(c, 1, DSV4Q_BT_F32, 2, s, hc, 0);
    NEEDP(Xs);
    NEEDP(pm);
    dsv4q_gen_act(r, !strcmp(rc, "extreme") || !strcmp(rc, "f32") ? rc : "normal", Xs, s * hc, d, 1.0, d);
    /* the incoming pre-mix: normal / f32 / extreme a previous sub-block's
     * (FP32 values in (hc_eps, 1 + hc_eps), as sigmoid + hc_eps leaves
     * them; no libm: K2); lagged one-hot on a stream other than 0 (no
     * computed pre-mix is one-hot); identity layer 0's [1, 0, ..] */
    for (long t = 0; t < s; t++) {
        const long hot = hc > 1 ? 1 + (long)dsv4q_rng_below(r, (uint64_t)(hc - 1)) : 0;
        for (long j = 0; j < hc; j++) {
            float *v = &pm[t * hc + j];
            if (!strcmp(rc, "lagged")) *v = j == hot ? 1.0f : 0.0f;
            else if (!strcmp(rc, "identity")) *v = j == 0 ? 1.0f : 0.0f;
            else *v = (float)(dsv4q_rng_u01(r) + hceps);
        }
    }
    if (dsv4q_gen_hc_params(c, r, 2, (2 + hc) * hc, hc * d, 3, err, errlen)) return -1;
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    dsv4q_case_output(c, 1, DSV4Q_BT_F32, 2, s, hc, 0);
    dsv4q_case_output(c, 2, DSV4Q_BT_F32, 2, s, hc, 0);
    dsv4q_case_output(c, 3, DSV4Q_BT_F32, 3, s, hc, hc);
    c->param[0] = HC41_NORM_EPS;
    c->param[1] = hceps;
    c->param[2] = (double)iters;
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_set_role(c, "layers.0.hc_attn", (const char *const[]){NULL, NULL, "_fn", "_scale", "_base"});
}

/* The values the oracle relies on beyond the shapes (cli/capi.c checks
 * those): hc within the 16 streams kernels size for, at least one
 * Sinkhorn iteration, finite non-negative epsilons, norm_eps > 0 (an
 * all-zero stream would divide by zero). */
static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const double *p = c->param;
    const long long hc = c->in[0].ndim == 3 ? c->in[0].shape[1] : 0;
    if (hc < 1 || hc > 16) {
        snprintf(err, errlen, "hc_pre41: hc = %lld streams, want 1..16", hc);
        return -1;
    }
    if (!(p[0] > 0) || !isfinite(p[0]) || !(p[1] >= 0) || !isfinite(p[1])) {
        snprintf(err, errlen, "hc_pre41: norm_eps = %g must be > 0 and hc_eps = %g >= 0, both finite", p[0], p[1]);
        return -1;
    }
    if (!(p[2] >= 1 && p[2] <= 1000) || p[2] != floor(p[2])) {
        snprintf(err, errlen, "hc_pre41: iters = %g must be an integer in 1..1000", p[2]);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(
    hc_pre41,
    .in = {T("X", "[s,hc,d]", "F32", "hc streams entering the sub-block"),
           T("premix", "[s,hc]", "F32", "the previous sub-block's pre-mix (identity [1,0,..] before layer 0)"),
           T("fn", "[(2+hc)*hc,hc*d]", "F32 (+ raw)", "FP32 math"), T("scale", "[3]", "F32", ""),
           T("base", "[(2+hc)*hc]", "F32", "")},
    .out = {T("y", "[s,d]", "F32|BF16", "sum_j premix_j X_j (the INCOMING pre-mix)"),
            T("pre", "[s,hc]", "F32", "this sub-block's pre-mix, handed on (hc_pre's pre_j)"),
            T("post", "[s,hc]", "F32", "hc_pre's post_j"),
            T("comb", "[s,hc,hc]", "F32", "Sinkhorn-normalised mixing C[j][k] (hc_pre's comb)")},
    .param = {"norm_eps (mixes RMS; 1e-20 in V4.1)", "hc_eps (Sinkhorn)", "iters (hc_sinkhorn_iters)"},
    .oracle = "oracle/hc.c dsv4q_hc_mixes + dsv4q_hc_collapse",
    .reference = "V4.1 model.py Block.hc_mixes, Block.hc_pre; kernel.py hc_split_sinkhorn_kernel",
    .boundaries = "resid_bf16 (y)",
    .notes = "pre, post and comb are V4's hc_pre mixes of X; y collapses X with premix, not with pre (the lag).",
    .keys = {{"s", "2"}, {"hc", "4"}, {"d", "5120"}}, .optkeys = {{"iters", "20"}, {"hceps", "1e-6"}},
    .cases = (const dsv4q_case_entry[]){{"hc_pre41(s=2,hc=4,d=5120,recipe=normal,seed=1)", SET_FLASH41},
                                        {"hc_pre41(s=2,hc=4,d=5120,recipe=lagged,seed=1)", SET_FLASH41},
                                        {"hc_pre41(s=2,hc=4,d=5120,recipe=identity,seed=1)", SET_FLASH41},
                                        {"hc_pre41(s=2,hc=4,d=5120,recipe=f32,seed=1)", SET_FLASH41},
                                        {"hc_pre41(s=2,hc=4,d=5120,recipe=extreme,seed=1)", SET_FLASH41},
                                        {NULL, 0}},
    .build = build, .role = role, .check = check, .rowfloor = 1u)
#endif
