/*
 * compressor.c - COMPRESSOR, the KV compressor of a compressed layer on a
 * prefill from position 0 (model.py Compressor.forward): gated softmax
 * pooling of ratio tokens (overlapping windows of 2*ratio at ratio 4),
 * RMSNorm, RoPE at the block's first position, then the attention rows'
 * FP8 simulation (ckv_fp8) or, for the indexer's keys, Hadamard + FP4.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(8, COMPRESSOR, compressor, 5, 1, 10)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0); NEED(3); NEED(4);
    const long s = (long)in[0].shape[0];
    X(dsv4q_cmp) cm = {(int)p[0], (int)in[4].shape[0], (int)p[1], dsv4q_op_weight(&in[1]), dsv4q_op_weight(&in[2]),
                       a[3], a[4]};
    dsv4q_rope_params rp = {(int)p[3], p[4], (int)p[5], p[6], p[7], p[8]};
    X(dsv4q_rope_table) tab;
    X(dsv4q_cmp_state) st;
    if (X(dsv4q_rope_build)(&tab, &rp, s > 0 ? s : 1, bs)) return 1;
    if (X(dsv4q_cmp_state_init)(&st, cm.ratio, cm.Dc)) { X(dsv4q_rope_free)(&tab); return 1; }
    long nr = X(dsv4q_compressor)(bs, (int)p[9], &cm, &st, a[0], s, 0, &tab, p[2], out[0]);
    X(dsv4q_cmp_state_free)(&st);
    X(dsv4q_rope_free)(&tab);
    return nr < 0 ? 1 : 0;
}
DSV4Q_OP_EXEC(compressor, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 1 << 16, &bad), d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad),
         ratio = dsv4q_kv_int(kv, "ratio", 1, 128, &bad), Dc = dsv4q_kv_int(kv, "Dc", 64, 128 * 4, &bad),
         rot = dsv4q_kv_int(kv, "rotate", 0, 1, &bad);
    if (bad || (ratio != 4 && ratio != 128) || s < ratio || (rot && (Dc & (Dc - 1)))) {
        snprintf(err, errlen, "%s: bad s/d/ratio/Dc/rotate (ratio 4|128, s >= ratio, Dc <= 512)", c->key);
        return -1;
    }
    RECIPES("normal", "extreme", "f32");
    const long coff = ratio == 4 ? 2 : 1, W = coff * Dc;
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    NEEDP(x);
    dsv4q_gen_act(r, c->recipe, x, s, d, 1.0, 128);
    if (dsv4q_gen_weight(c, 1, r, "f32", W, d, 1.0 / sqrt((double)d), "normal", err, errlen) ||
        dsv4q_gen_weight(c, 2, r, "f32", W, d, 1.0 / sqrt((double)d), "normal", err, errlen))
        return -1;
    float *ape = dsv4q_case_input(c, 3, DSV4Q_BT_F32, 2, ratio, W, 0), *nw = dsv4q_case_input(c, 4, DSV4Q_BT_F32, 1, Dc, 0, 0);
    NEEDP(ape && nw);
    for (long i = 0; i < ratio * W; i++) ape[i] = (float)(0.5 * dsv4q_rng_gauss(r));
    for (long i = 0; i < Dc; i++) nw[i] = dsv4q_gen_store(dsv4q_gen_full(c->recipe), 1.0 + 0.25 * dsv4q_rng_gauss(r));
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s / ratio, Dc, 0);
    double p[10] = {(double)ratio, (double)rot, DSV4Q_CASE_EPS, 64, 160000, 65536, 16, 32, 1, 1};
    memcpy(c->param, p, sizeof p);
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    dsv4q_case_set_role(c, strcmp(dsv4q_kv_str(kv, "rotate"), "0") ? "layers.0.attn.indexer.compressor" : "layers.0.attn.compressor",
             (const char *const[]){NULL, ".wkv", ".wgate", ".ape", ".norm"});
}

/* The ratio a caller gives must be positive (the oracle divides by it). */
static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (!(c->param[0] > 0)) {
        snprintf(err, errlen, "compressor: ratio = %g must be positive", c->param[0]);
        return -1;
    }
    return 0;
}

/* coff: 2 weight row blocks per output row at ratio 4 (the overlap), else 1. */
static int shape_names(const double *param, const char *names[4], long long vals[4])
{
    names[0] = "coff";
    vals[0] = param[0] == 4 ? 2 : 1;
    return 1;
}

DSV4Q_OP_DESC(compressor,
    .in = { T("x", "[s,d]", "F32", "tokens at positions 0..s-1 (prefill)"), 
          T("wkv", "[coff*Dc,d]", "F32 (+ raw)", "coff = 2 if ratio == 4 (overlap) else 1; FP32 math"), 
          T("wgate", "[coff*Dc,d]", "F32 (+ raw)", "FP32 math"), 
          T("ape", "[ratio,coff*Dc]", "F32", "added to the gate rows"), 
          T("norm", "[Dc]", "F32", "RMSNorm weight of the pooled row") },
    .out = { T("rows", "[s/ratio,Dc]", "F32|BF16", "compressed rows (norm, RoPE at the block's first position, QAT)") },
    .param = { "ratio: 4 (overlap) or 128", "rotate: 1 = indexer keys (Hadamard + FP4), 0 = attention rows (ckv_fp8)", 
          "eps (norm)", "rope_dim r (the last r dims of a row)", "rope base (compress_rope_theta)", 
          "original_seq_len (YaRN; 0 = off)", "factor", "beta_fast", "beta_slow", "ue8m0" },
    .oracle = "oracle/compressor.c dsv4q_compressor",
    .reference = "model.py Compressor.forward",
    .boundaries = "cmp_bf16, norm_bf16, rope_*, ckv_fp8 | idx_k_fp4 + hadamard_bf16",
    .notes = "",
    .keys = {{"s", "8"}, {"d", "4096"}, {"ratio", "4"}, {"Dc", "512"}, {"rotate", "0"}},
    .cases = (const dsv4q_case_entry[]){
        {"compressor(s=8,d=4096,ratio=4,Dc=512,rotate=0,recipe=normal,seed=1)", SET_FLASH},
        {"compressor(s=8,d=4096,ratio=4,Dc=128,rotate=1,recipe=normal,seed=1)", SET_FLASH},
        {"compressor(s=128,d=4096,ratio=128,Dc=512,rotate=0,recipe=normal,seed=1)", SET_FLASH},
        {"compressor(s=8,d=4096,ratio=4,Dc=512,rotate=0,recipe=extreme,seed=1)", SET_FLASH},
        {"compressor(s=8,d=4096,ratio=4,Dc=128,rotate=1,recipe=f32,seed=1)", SET_FLASH},
        {"compressor(s=8,d=7168,ratio=4,Dc=512,rotate=0,recipe=extreme,seed=1)", SET_PRO},
        {"compressor(s=128,d=7168,ratio=128,Dc=512,rotate=0,recipe=normal,seed=1)", SET_PRO},
        {"compressor(s=8,d=7168,ratio=4,Dc=128,rotate=1,recipe=normal,seed=1)", SET_PRO},
        {"compressor(s=8,d=7168,ratio=4,Dc=512,rotate=0,recipe=f32,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .role = role, .check = check, .shape_names = shape_names)
#endif
