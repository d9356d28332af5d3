/*
 * topk.c - TOPK, the indexer's top-k over its scores (model.py
 * Indexer.forward, score.topk): the k largest finite scores per row,
 * descending, ties to the lower index, -1 pads. A selection: compared as
 * sets, with swaps inside the tie-run at the cut legitimate; its cases
 * crowd BF16 scores into long exact-tie runs at the cut.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(10, TOPK, topk, 1, 1, 1)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0);
    return X(dsv4q_topk)(a[0], (long)in[0].shape[0], (long)in[0].shape[1], (int)p[0], out[0]) ? 1 : 0;
}
DSV4Q_OP_EXEC(topk, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), T = dsv4q_kv_int(kv, "T", 1, 1 << 22, &bad),
         k = dsv4q_kv_int(kv, "k", 1, 1 << 16, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/T/k", c->key); return -1; }
    RECIPES("normal", "ties", "masked", "crowd");
    float *sc = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, T, 0);
    NEEDP(sc);
    for (long i = 0; i < rows; i++) {
        float *v = sc + i * T;
        for (long t = 0; t < T; t++) v[t] = dsv4q_gen_bf16(dsv4q_rng_gauss(r) * 4);
        if (!strcmp(c->recipe, "ties"))   /* coarse grid: ~100 distinct values, so the
                                              cut falls inside a run of equal scores */
            for (long t = 0; t < T; t++) v[t] = (float)(floor(v[t] * 4.0) / 4.0);
        if (!strcmp(c->recipe, "masked"))   /* fewer finite scores than k in row 0 */
            for (long t = 0; t < T; t++)
                if (i == 0 ? t >= k / 2 : dsv4q_rng_below(r, 3) == 0) v[t] = -INFINITY;
        if (!strcmp(c->recipe, "crowd")) {
            /* real BF16 index scores: sums of relu'd head scores stored in
             * BF16 crowd one binade (128 codes), so thousands of scores
             * share a few codes and the cut falls inside a long run of
             * exact ties; a radix / histogram top-k must split that run
             * by the tie rule, not by the bucket. Even rows: all in
             * [2, 4) around 3; odd rows: all but ~k/2 scores are the exact
             * zeros relu leaves (the cut inside the zero run), the causal
             * tail -inf. */
            if (i % 2 == 0)
                for (long t = 0; t < T; t++) {
                    double x = 3.0 + 0.1 * dsv4q_rng_gauss(r);
                    v[t] = dsv4q_gen_bf16(x < 2 ? 2 : x > 3.98 ? 3.98 : x);
                }
            else
                for (long t = 0; t < T; t++)
                    v[t] = t >= T - T / 8 ? -INFINITY : dsv4q_rng_below(r, T) < k / 2 ? dsv4q_gen_bf16(0.5 + dsv4q_rng_u01(r)) : 0.0f;
        }
    }
    dsv4q_case_output(c, 0, DSV4Q_BT_I32, 2, rows, k, 0);
    c->param[0] = (double)k;
    return 0;
}

static int post(dsv4q_case *c, char *err, size_t errlen)
{
    long n = (long)dsv4q_bt_numel(&c->in[0]);
    double *z = dsv4q_case_alloc(c, sizeof(double) * (size_t)n);
    if (!z) { snprintf(err, errlen, "%s: out of memory", c->key); return -1; }
    for (long i = 0; i < n; i++) z[i] = ((const float *)c->in[0].data)[i];
    c->sel_scores = z;
    c->sel_rows = (long)c->in[0].shape[0];
    c->sel_T = (long)c->in[0].shape[1];
    c->sel_out = 0;
    return 0;
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (!(c->param[0] >= 1)) {
        snprintf(err, errlen, "topk: k = %g must be >= 1", c->param[0]);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(topk,
    .in = { T("score", "[rows,T]", "F32", "-inf = not selectable") },
    .out = { T("idx", "[rows,k]", "I32", "the k largest finite scores; -1 pads") },
    .param = { "k" },
    .oracle = "oracle/indexer.c dsv4q_topk",
    .reference = "model.py Indexer.forward (score.topk)",
    .boundaries = "",
    .notes = "A selection: compared as sets. Swaps inside the tie-run at the cut (scores exactly equal to the k-th) " 
        "are legitimate and counted; others fail.",
    .keys = {{"rows", "2"}, {"T", "16384"}, {"k", "512"}},
    .cases = (const dsv4q_case_entry[]){
        {"topk(rows=2,T=16384,k=512,recipe=normal,seed=1)", SET_FLASH},
        {"topk(rows=4,T=4096,k=512,recipe=ties,seed=1)", SET_FLASH},
        {"topk(rows=2,T=1024,k=512,recipe=masked,seed=1)", SET_FLASH | SET_PRO},
        {"topk(rows=2,T=65536,k=512,recipe=crowd,seed=1)", SET_FLASH},
        {"topk(rows=2,T=16384,k=1024,recipe=ties,seed=1)", SET_PRO},
        {"topk(rows=2,T=16384,k=1024,recipe=normal,seed=1)", SET_PRO},
        {"topk(rows=2,T=1048576,k=1024,recipe=crowd,seed=1)", SET_PRO},
        {"topk(rows=1,T=262144,k=512,recipe=crowd,seed=1)", SET_LONG},
        {NULL, 0}},
    .build = build, .post = post, .check = check, .sel = 1u)
#endif
