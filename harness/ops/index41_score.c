/*
 * index41_score.c - INDEX41_SCORE, the V4.1 indexer score with LATENT keys
 * (V4.1 model.py Indexer.forward of a key owner): the index keys are made
 * here from the kv source's compressor latent BEFORE attention's RoPE,
 *     K[t] = FP4(RoPE_{(k0+t)*ratio}(k_norm(wk latent[t])))      (idx_k_fp4)
 * with RoPE (compress_rope_theta + YaRN) on the last rope_dim dims at the
 * compressed position of cache row k0+t ("a latent stands for the first
 * token of its group"). The latent rows are cache rows k0..k0+T-1: the
 * whole cache (k0 = 0, what the reference scores) or a chunk of it, as an
 * engine tiles the key cache (and as cases reach positions past
 * original_seq_len without projecting 32k rows). The queries come
 * projected and RoPE'd and are FP4'd here (idx_q_fp4; no Hadamard in
 * V4.1); then V4's score arithmetic,
 * score[i,t] = sum_h relu(q_h . K_t) w_h, partials at idx_partial_bf16, the
 * sum at idx_score_bf16, prefill (start_pos 0) masked to -inf at
 * t >= (i+1)/ratio. The adapter calls the oracle functions in the order
 * oracle/model_v41.c indexer41 does.
 *
 * What it refuses (check): a ratio other than 1, 2, 4; an odd rope_dim or
 * one outside 2..min(Di, 512); no key row; positions past 2^24; a chunk
 * (k0 > 0) in a prefill, whose causal mask is by the absolute row; a
 * non-positive theta or factor; a negative start, original_seq_len or eps;
 * an idx_wk stored as anything but BF16 (V4.1's format). The shapes
 * themselves are the contract's (cli/capi.c unifies them).
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(24, INDEX41_SCORE, index41_score, 5, 1, 10)

/* Key rows kn [T, Di] from latent [T, D] (model_v41.c indexer41: linear,
 * rmsnorm, rope_groups, fp4_quant), then the queries' FP4, then the score. */
static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0);
    NEED(1);
    NEED(2);
    NEED(4);
    const long s = (long)in[0].shape[0], T = (long)in[2].shape[0], p0 = (long)p[0], k0 = (long)p[2];
    const int Hi = (int)in[0].shape[1], Di = (int)in[0].shape[2], ratio = (int)p[1], rd = (int)p[3];
    const dsv4q_weight wk = dsv4q_op_weight(&in[3]);
    dsv4q_rope_params rp = {rd, p[4], (int)p[5], p[6], p[7], p[8]};
    X(dsv4q_rope_table) tab = {0};
    real *kn = malloc(sizeof(real) * (size_t)(T * Di > 0 ? T * Di : 1));
    int rc = !kn || X(dsv4q_rope_build)(&tab, &rp, (k0 + (T > 0 ? T - 1 : 0)) * ratio + 1, bs) ||
             X(dsv4q_linear)(bs, 1, &wk, a[2], T, kn, DSV4Q_B_LINEAR_BF16);
    if (!rc) {
        X(dsv4q_rmsnorm)(bs, kn, T, Di, a[4], p[9], kn);
        for (long t = 0; t < T; t++) X(dsv4q_rope_apply)(bs, &tab, kn + t * Di, 1, Di, Di - rd, (k0 + t) * ratio, 1, 0);
        if ((bs >> DSV4Q_B_IDX_K_FP4) & 1u) X(dsv4q_fp4_act_quant)(kn, T, Di);
        if ((bs >> DSV4Q_B_IDX_Q_FP4) & 1u) X(dsv4q_fp4_act_quant)(a[0], s * Hi, Di); /* a[0] is this call's copy */
        X(dsv4q_indexer_scores)(bs, a[0], a[1], s, Hi, Di, kn, T, p0, ratio, out[0]);
    }
    X(dsv4q_rope_free)(&tab);
    free(kn);
    return rc ? 1 : 0;
}
DSV4Q_OP_EXEC(index41_score, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    const long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), Hi = dsv4q_kv_int(kv, "Hi", 1, 1024, &bad),
               Di = dsv4q_kv_int(kv, "Di", 2, 4096, &bad), D = dsv4q_kv_int(kv, "D", 1, 1 << 14, &bad),
               T = dsv4q_kv_int(kv, "T", 1, 1 << 20, &bad), ratio = dsv4q_kv_int(kv, "ratio", 1, 4, &bad),
               start = dsv4q_kv_int(kv, "start", 0, 1L << 24, &bad), k0 = dsv4q_kv_int(kv, "k0", 0, 1L << 23, &bad),
               rd = dsv4q_kv_int(kv, "rd", 2, 512, &bad);
    /* the rows end where the model's cache does: (start + s) / ratio */
    if (bad || ratio == 3 || rd % 2 || rd > Di || k0 + T != (start + s) / ratio || (start == 0 && k0)) {
        snprintf(err, errlen,
                 "%s: bad s/Hi/Di/D/T/ratio/start/k0/rd (ratio 1|2|4, rd even <= Di, k0 + T = (start+s)/ratio, "
                 "k0 = 0 when start = 0)",
                 c->key);
        return -1;
    }
    RECIPES("normal", "f32");
    const int full = dsv4q_gen_full(c->recipe);
    float *q = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, s, Hi, Di),
          *w = dsv4q_case_input(c, 1, DSV4Q_BT_F32, 2, s, Hi, 0),
          *lat = dsv4q_case_input(c, 2, DSV4Q_BT_F32, 2, T, D, 0);
    NEEDP(q && w && lat);
    /* queries post-RoPE (BF16 as rope_bf16 leaves them), the latent as the
     * compressor's RMSNorm leaves it: both ~unit scale */
    dsv4q_gen_act(r, c->recipe, q, s * Hi, Di, 1.0, 32);
    dsv4q_gen_act(r, c->recipe, lat, T, D, 1.0, 32);
    if (dsv4q_gen_weight(c, 3, r, "bf16", Di, D, 1.0 / sqrt((double)D), "normal", err, errlen)) return -1;
    float *nw = dsv4q_case_input(c, 4, DSV4Q_BT_F32, 1, Di, 0, 0);
    NEEDP(nw);
    for (long i = 0; i < Di; i++) nw[i] = dsv4q_gen_store(full, 1.0 + 0.25 * dsv4q_rng_gauss(r));
    /* head weights: weights_proj(x) * Di^-0.5 Hi^-0.5, stored BF16 (idx_partial_bf16) */
    const double ws = 1.0 / sqrt((double)Di * (double)Hi);
    for (long i = 0; i < s * Hi; i++)
        w[i] = full ? (float)(dsv4q_rng_gauss(r) * ws) : dsv4q_gen_bf16(dsv4q_gen_bf16(dsv4q_rng_gauss(r)) * ws);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, T, 0);
    /* V4.1 Flash: compress_rope_theta, original_seq_len, rope_factor, beta_fast/slow, norm_eps */
    const double p[10] = {(double)start, (double)ratio, (double)k0, (double)rd, 160000, 65536, 16, 32, 1, 1e-20};
    memcpy(c->param, p, sizeof p);
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_set_role(c, "layers.0.attn.indexer", (const char *const[]){NULL, NULL, NULL, ".wk", ".k_norm"});
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const double *p = c->param;
    const double T = c->in[2].ndim == 2 ? (double)c->in[2].shape[0] : 0,
                 Di = c->in[0].ndim == 3 ? (double)c->in[0].shape[2] : 0;
    const char *why = NULL;
    if (!(p[1] == 1 || p[1] == 2 || p[1] == 4)) why = "ratio must be 1, 2 or 4";
    else if (!(p[3] >= 2 && p[3] <= Di && p[3] <= 512 && p[3] == 2 * floor(p[3] / 2)))
        why = "rope_dim must be even, 2..min(Di, 512)";
    else if (!(T >= 1)) why = "latent needs at least one row (T >= 1)";
    else if (!(p[2] >= 0 && p[2] == floor(p[2]))) why = "k0 must be an integer >= 0";
    else if (!((p[2] + T - 1) * p[1] < 16777216.0)) why = "key positions (k0+T-1)*ratio must stay below 2^24";
    else if (!(p[0] >= 0 && p[0] < 2147483648.0 && p[0] == floor(p[0]))) why = "start_pos must be an integer >= 0";
    else if (p[0] == 0 && p[2] != 0) why = "a prefill (start_pos 0) scores the whole cache: k0 must be 0";
    else if (!(p[4] > 0) || !(p[6] > 0)) why = "rope theta and factor must be positive";
    else if (!(p[5] >= 0 && p[5] < 2147483648.0)) why = "original_seq_len must be >= 0";
    else if (!(p[9] >= 0)) why = "eps must be >= 0";
    else if (c->in[3].raw && c->in[3].raw_dtype != DSV4Q_BT_BF16)
        why = "idx_wk must be stored BF16 (or given as F32 values)";
    if (!why) return 0;
    snprintf(err, errlen, "index41_score: %s (ratio %g, k0 %g, rope_dim %g, T %g, start_pos %g)", why, p[1], p[2], p[3],
             T, p[0]);
    return -1;
}

DSV4Q_OP_DESC(
    index41_score,
    .in = {T("q", "[s,Hi,Di]", "F32", "index queries after wq_b and RoPE, before FP4 (idx_q_fp4 is applied here)"),
           T("w", "[s,Hi]", "F32", "head weights (weights_proj(x) * Di^-0.5 Hi^-0.5, at idx_partial_bf16)"),
           T("latent", "[T,D]", "F32",
             "the kv source's compressor latent, cache rows k0..k0+T-1, BEFORE attention's RoPE"),
           T("idx_wk", "[Di,D]", "F32 + raw", "indexer wk; raw BF16"),
           T("idx_k_norm", "[Di]", "F32", "RMSNorm weight of the keys")},
    .out = {T("score", "[s,T]", "F32|BF16",
              "column t: key row k0+t; sum_h relu(q_h . K_t) w_h; prefill t >= (i+1)/ratio = -inf")},
    .param = {"start_pos: position of the first query (0 = prefill: t >= (i+1)/ratio masked)", "ratio (1, 2; 4)",
              "k0: the cache row of latent row 0 (key row t at position (k0+t)*ratio; 0 in a prefill)",
              "rope_dim r (the last r dims of a key)", "rope base (compress_rope_theta)",
              "original_seq_len (YaRN; 0 = off)", "factor", "beta_fast", "beta_slow", "eps (k_norm; norm_eps)"},
    .oracle = "oracle/linear.c dsv4q_linear + oracle/norm.c dsv4q_rmsnorm + oracle/rope.c dsv4q_rope_apply + "
              "oracle/quant.c dsv4q_fp4_act_quant + oracle/indexer.c dsv4q_indexer_scores (as oracle/model_v41.c "
              "indexer41 composes them)",
    .reference = "V4.1 model.py Indexer.forward (owns_k: k_norm(wk(latent)), apply_rotary_emb, fp4_act_quant, "
                 "index_score)",
    .boundaries = "linear_bf16, norm_bf16, rope_bf16, rope_table_f32, idx_k_fp4, idx_q_fp4, idx_partial_bf16, "
                  "idx_score_bf16",
    .notes = "Key row k0+t sits at position (k0+t)*ratio. The keys come from the latent BEFORE the RoPE attention "
             "applies to "
             "the compressed KV (an engine that reuses the rotated KV latent fails: mutant idx41_keys_after_rope).",
    .keys = {{"s", "1"}, {"Hi", "32"}, {"Di", "128"}, {"D", "512"}, {"T", "2048"}, {"ratio", "2"}, {"start", "4095"}},
    .optkeys = {{"k0", "0"}, {"rd", "64"}},
    .cases =
        (const dsv4q_case_entry[]){
            {"index41_score(s=1,Hi=32,Di=128,D=512,T=2048,ratio=2,start=4095,recipe=normal,seed=1)", SET_FLASH41},
            {"index41_score(s=16,Hi=32,Di=128,D=512,T=8,ratio=2,start=0,recipe=normal,seed=1)", SET_FLASH41},
            {"index41_score(s=1,Hi=32,Di=128,D=512,T=2048,ratio=1,start=2047,recipe=normal,seed=1)", SET_FLASH41},
            {"index41_score(s=16,Hi=32,Di=128,D=512,T=16,ratio=1,start=0,recipe=normal,seed=1)", SET_FLASH41},
            {"index41_score(s=1,Hi=32,Di=128,D=512,T=2048,ratio=2,start=69631,k0=32768,recipe=normal,seed=1)",
             SET_FLASH41},
            {"index41_score(s=2,Hi=32,Di=128,D=512,T=1024,ratio=2,start=2046,recipe=f32,seed=1)", SET_FLASH41},
            {NULL, 0}},
    .build = build, .role = role, .check = check, .rowfloor = 1u, .weight_in = 1u << 3)
#endif
