/*
 * indexer_score.c - INDEXER_SCORE, the lightning indexer's scores
 * (model.py Indexer.forward): score[i,t] = sum_h relu(q_h . K_t) w_h over
 * the processed queries (RoPE, Hadamard, FP4 applied) and the index key
 * rows, causally masked in prefill (t >= (i+1)/ratio is -inf); partials
 * and scores at idx_partial_bf16 / idx_score_bf16. V4 calls it at ratio 4;
 * V4.1's index sources at ratio 1 and 2 with 32 heads (oracle/model_v41.c
 * indexer41; its cases are in the flash41 set).
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(9, INDEXER_SCORE, indexer_score, 3, 1, 2)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0); NEED(1); NEED(2);
    X(dsv4q_indexer_scores)(bs, a[0], a[1], (long)in[0].shape[0], (int)in[0].shape[1], (int)in[0].shape[2], a[2],
                            (long)in[2].shape[0], (long)p[0], (int)p[1], out[0]);
    return 0;
}
DSV4Q_OP_EXEC(indexer_score, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), Hi = dsv4q_kv_int(kv, "Hi", 1, 1024, &bad),
         Di = dsv4q_kv_int(kv, "Di", 1, 4096, &bad), T = dsv4q_kv_int(kv, "T", 1, 1 << 20, &bad),
         start = dsv4q_kv_int(kv, "start", 0, 1L << 30, &bad), ratio = dsv4q_kv_int(kv, "ratio", 1, 4, &bad);
    if (bad || ratio == 3) {
        snprintf(err, errlen, "%s: bad s/Hi/Di/T/start/ratio (ratio 1|2|4)", c->key);
        return -1;
    }
    RECIPES("normal", "ties", "f32");
    float *q = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, s, Hi, Di), *w = dsv4q_case_input(c, 1, DSV4Q_BT_F32, 2, s, Hi, 0),
          *K = dsv4q_case_input(c, 2, DSV4Q_BT_F32, 2, T, Di, 0);
    NEEDP(q && w && K);
    /* queries and keys as the FP4 simulation leaves them */
    dsv4q_gen_act(r, "normal", q, s * Hi, Di, 1.0, Di);
    dsv4q_fp4_act_quant_f32(q, s * Hi, Di);
    dsv4q_gen_act(r, "normal", K, T, Di, 1.0, Di);
    dsv4q_fp4_act_quant_f32(K, T, Di);
    if (!strcmp(c->recipe, "ties"))   /* duplicate key rows: exactly equal scores */
        for (long t = 1; t < T; t += 2)
            if (dsv4q_rng_below(r, 2)) memcpy(K + t * Di, K + (t - 1) * Di, sizeof(float) * (size_t)Di);
    double ws = 1.0 / sqrt((double)Di * (double)Hi);
    for (long i = 0; i < s * Hi; i++) w[i] = dsv4q_gen_full(c->recipe) ? (float)(dsv4q_rng_gauss(r) * ws) : dsv4q_gen_bf16(dsv4q_gen_bf16(dsv4q_rng_gauss(r)) * ws);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, T, 0);
    c->param[0] = (double)start;
    c->param[1] = (double)ratio;
    return 0;
}

/* The prefill mask divides by the ratio. */
static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (!(c->param[1] >= 1) || c->param[1] != floor(c->param[1])) {
        snprintf(err, errlen, "indexer_score: ratio = %g must be an integer >= 1", c->param[1]);
        return -1;
    }
    return 0;
}

/* clang-format off */
DSV4Q_OP_DESC(indexer_score,
    .in = { T("q", "[s,Hi,Di]", "F32", "processed queries (RoPE, Hadamard, FP4 applied)"), 
          T("w", "[s,Hi]", "F32", "head weights (already scaled by Di^-0.5 Hi^-0.5)"), 
          T("K", "[T,Di]", "F32", "index key rows") },
    .out = { T("score", "[s,T]", "F32|BF16", "sum_h relu(q_h . K_t) w_h; masked = -inf") },
    .param = { "start_pos: position of the first query (0 = prefill: t >= (i+1)/ratio masked)",
          "ratio (V4: 4; V4.1: 1, 2)" },
    .oracle = "oracle/indexer.c dsv4q_indexer_scores",
    .reference = "model.py Indexer.forward",
    .boundaries = "idx_partial_bf16, idx_score_bf16",
    .notes = "",
    .keys = {{"s", "1"}, {"Hi", "64"}, {"Di", "128"}, {"T", "16384"}, {"start", "65536"}},
    .optkeys = {{"ratio", "4"}},
    .cases = (const dsv4q_case_entry[]){
        {"indexer_score(s=1,Hi=64,Di=128,T=16384,start=65536,recipe=normal,seed=1)", SET_FLASH},
        {"indexer_score(s=16,Hi=64,Di=128,T=4,start=0,recipe=normal,seed=1)", SET_FLASH | SET_PRO},
        {"indexer_score(s=2,Hi=64,Di=128,T=2048,start=8192,recipe=ties,seed=1)", SET_FLASH | SET_PRO},
        {"indexer_score(s=2,Hi=64,Di=128,T=2048,start=8192,recipe=f32,seed=1)", SET_FLASH},
        {"indexer_score(s=2,Hi=64,Di=128,T=16384,start=65536,recipe=normal,seed=1)", SET_PRO},
        {"indexer_score(s=2,Hi=16,Di=128,T=16384,start=65536,recipe=f32,seed=1)", SET_PRO},
        {"indexer_score(s=1,Hi=64,Di=128,T=262144,start=1048575,recipe=normal,seed=1)", SET_LONG},
        /* V4.1 Flash: 32 index heads, ratios 2 and 1 */
        {"indexer_score(s=1,Hi=32,Di=128,T=2048,start=4095,ratio=2,recipe=normal,seed=1)", SET_FLASH41},
        {"indexer_score(s=16,Hi=32,Di=128,T=8,start=0,ratio=2,recipe=normal,seed=1)", SET_FLASH41},
        {"indexer_score(s=16,Hi=32,Di=128,T=16,start=0,ratio=1,recipe=normal,seed=1)", SET_FLASH41},
        {"indexer_score(s=2,Hi=32,Di=128,T=2048,start=4094,ratio=2,recipe=ties,seed=1)", SET_FLASH41},
        {"indexer_score(s=2,Hi=32,Di=128,T=2048,start=2046,ratio=1,recipe=f32,seed=1)", SET_FLASH41},
        {NULL, 0}},
    .build = build, .check = check)
/* clang-format on */
#endif
