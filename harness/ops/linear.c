/*
 * linear.c - LINEAR, y[s,N] = x[s,K] w^T for every weight format
 * (model.py linear; kernel.py act_quant + fp8_gemm / fp4_gemm): FP8
 * weights with 128x128 E8M0 blocks and the FP8 activation quant of the
 * input per 128 (gemm_act_fp8), or V4.1's 32x32 blocks with the input
 * quantized per 32 (fmt=fp8b32: the weight's scale grid [ceil(N/32),
 * ceil(K/32)] says so, dsv4q_op_weight), packed FP4 weights with per-32
 * scales, BF16 and FP32-math weights; the BF16 rounding of y (linear_bf16)
 * when bf16_out.
 * Its weight is the one ABI v2 lets an engine store in its own encoding
 * (load_weight).
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(0, LINEAR, linear, 2, 1, 2)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    dsv4q_weight w = dsv4q_op_weight(&in[1]);
    NEED(0);
    return X(dsv4q_linear)(bs, (int)p[0], &w, a[0], (long)in[0].shape[0], out[0],
                         p[1] != 0 ? DSV4Q_B_LINEAR_BF16 : -1) ? 1 : 0;
}
DSV4Q_OP_EXEC(linear, exec)

#if DSV4Q_OP_ONCE
/* Recipe blockedge (fmt=fp8b32): within every 128 group the 32-wide K
 * blocks differ in magnitude by up to 2^15 (block j times 2^-a_j, a_j in
 * {0,5,10,15} drawn per block, the same for every token), and the
 * weight's K block j is scaled by 2^+a_j to match (its E8M0 scales
 * shifted, the decoded values with them), so each block carries a like
 * share of y; each token's amax of block j sits on one of its edges (the
 * first or last column). Quantized per 32 (the reference) every block
 * keeps E4M3's precision; quantized per 128 the small blocks fall to E4M3
 * subnormals or zero, and a weight read as 128x128 tiles takes another
 * block's scale. x: BF16 values of recipe normal, [s,K]. */
static void blockedge(dsv4q_case *c, dsv4q_rng *r, float *x, long s, long N, long K)
{
    dsv4q_bt *w = &c->in[1];
    float *wd = w->data;
    uint8_t *sc = (uint8_t *)(uintptr_t)w->raw_scale; /* the case's own buffer (dsv4q_gen_weight) */
    const long nb0 = (long)w->scale_shape[0], nb1 = (long)w->scale_shape[1];
    for (long j = 0; j < nb1; j++) {
        const int a = 5 * (int)dsv4q_rng_below(r, 4);
        const long k0 = j * 32, k1 = k0 + 32 < K ? k0 + 32 : K;
        for (long t = 0; t < s; t++) {
            for (long k = k0; k < k1; k++) x[t * K + k] = ldexpf(x[t * K + k], -a); /* exact: BF16 stays BF16 */
            const long at = dsv4q_rng_below(r, 2) ? k1 - 1 : k0;                    /* then its sign */
            x[t * K + at] = ldexpf(dsv4q_rng_below(r, 2) ? 4.0f : -4.0f, -a);       /* > every |gauss| (3.47) */
        }
        for (long o = 0; o < N; o++)
            for (long k = k0; k < k1; k++) wd[o * K + k] = ldexpf(wd[o * K + k], a);
        for (long b = 0; b < nb0; b++)
            sc[b * nb1 + j] = (uint8_t)(sc[b * nb1 + j] + a); /* 2^(<= -6 + 15): no NaN byte */
    }
}

static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), N = dsv4q_kv_int(kv, "N", 1, 1 << 20, &bad),
         K = dsv4q_kv_int(kv, "K", 1, 1 << 20, &bad);
    const char *outs = dsv4q_kv_str(kv, "out");
    if (bad || (strcmp(outs, "bf16") && strcmp(outs, "f32"))) {
        snprintf(err, errlen, "%s: bad s/N/K/out", c->key);
        return -1;
    }
    RECIPES("normal", "extreme", "nearzero", "f32", "blockedge");
    const char *fmt = dsv4q_kv_str(kv, "fmt");
    const int b32 = !strcmp(fmt, "fp8b32"), edge = !strcmp(c->recipe, "blockedge");
    if (edge && !b32) {
        snprintf(err, errlen, "%s: recipe blockedge needs fmt=fp8b32 (32x32 blocks)", c->key);
        return -1;
    }
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, s, K, 0);
    NEEDP(x);
    dsv4q_gen_act(r, edge ? "normal" : c->recipe, x, s, K, 1.0, b32 ? 32 : 128); /* per act-quant block */
    if (dsv4q_gen_weight(c, 1, r, fmt, N, K, 1.0 / sqrt((double)K), c->recipe, err, errlen)) return -1;
    if (edge) blockedge(c, r, x, s, N, K);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, s, N, 0);
    c->param[0] = 1;
    c->param[1] = !strcmp(outs, "bf16");
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    const char *fmt = dsv4q_kv_str(kv, "fmt");
    long N = atol(dsv4q_kv_str(kv, "N")), K = atol(dsv4q_kv_str(kv, "K"));
    const char *role = !strcmp(fmt, "f32") ? "head"                      /* FP32-math [vocab, dim] slice */
                       : !strcmp(fmt, "bf16") ? "layers.0.attn.wo_a"      /* the BF16 grouped einsum */
                       : N == 512 ? "layers.0.attn.wkv"
                       : N > K ? "layers.0.attn.wo_b" : "layers.0.attn.wq_a";
    dsv4q_case_set_role(c, role, (const char *const[]){NULL, ""});
}

/* clang-format off */
DSV4Q_OP_DESC(linear,
    .in = { T("x", "[s,K]", "F32", "activations"), 
          T("w", "[N,K]", "F32 + raw", "weight; raw BF16, F8_E4M3 + E8M0 scale [ceil(N/128),ceil(K/128)] " 
                                      "(V4.1: [ceil(N/32),ceil(K/32)], fmt=fp8b32), " 
                                      "or packed E2M1 (I8 [N,K/2]) + E8M0 scale [N,K/32]") },
    .out = { T("y", "[s,N]", "F32|BF16", "y = x w^T") },
    .param = { "ue8m0: 1 = power-of-two act_quant scales (shipped configs)", 
          "bf16_out: 1 = BF16 activation output (linear_bf16); 0 = FP32-math linear (no output rounding)" },
    .oracle = "oracle/linear.c dsv4q_linear",
    .reference = "model.py linear; kernel.py act_quant, fp8_gemm_kernel, fp4_gemm_kernel",
    .boundaries = "gemm_act_fp8 (FP8/FP4 weights), linear_bf16 (bf16_out)",
    .notes = "FP8: per 128-wide K block (a.w) * sa * sw summed in block order; V4.1 (a 32x32 scale grid): 32-wide "
             "K blocks, x act-quantized per 32, sw of the 32x32 tile; FP4: 32-wide blocks, sa per 128.",
    .keys = {{"s", "2"}, {"N", "1024"}, {"K", "4096"}, {"fmt", "fp8"}, {"out", "bf16"}},
    .cases = (const dsv4q_case_entry[]){
        {"linear(s=2,N=1024,K=4096,fmt=fp8,out=bf16,recipe=normal,seed=1)", SET_FLASH | SET_PRO},
        {"linear(s=2,N=512,K=4096,fmt=fp8,out=bf16,recipe=extreme,seed=1)", SET_FLASH},
        {"linear(s=2,N=512,K=4096,fmt=fp8,out=bf16,recipe=nearzero,seed=1)", SET_FLASH},
        {"linear(s=2,N=1024,K=4096,fmt=bf16,out=bf16,recipe=normal,seed=1)", SET_FLASH},
        {"linear(s=2,N=1024,K=4096,fmt=f32,out=f32,recipe=normal,seed=1)", SET_FLASH},
        {"linear(s=2,N=1024,K=4096,fmt=f32,out=f32,recipe=f32,seed=1)", SET_FLASH},
        {"linear(s=2,N=512,K=7168,fmt=fp8,out=bf16,recipe=normal,seed=1)", SET_FLASH},
        {"linear(s=2,N=1536,K=7168,fmt=fp8,out=bf16,recipe=normal,seed=1)", SET_PRO},
        {"linear(s=2,N=7168,K=2048,fmt=fp8,out=bf16,recipe=extreme,seed=1)", SET_PRO},
        {"linear(s=2,N=1536,K=7168,fmt=fp8,out=bf16,recipe=nearzero,seed=1)", SET_PRO},
        {"linear(s=2,N=1024,K=8192,fmt=bf16,out=bf16,recipe=normal,seed=1)", SET_PRO},
        {"linear(s=2,N=1024,K=7168,fmt=f32,out=f32,recipe=f32,seed=1)", SET_PRO},
        /* V4.1 Flash (dim 5120, q_lora 1280, head_dim 512, o_lora 1024): wq_a, wkv, a wo_b group slice */
        {"linear(s=2,N=1280,K=5120,fmt=fp8b32,out=bf16,recipe=normal,seed=1)", SET_FLASH41},
        {"linear(s=2,N=512,K=5120,fmt=fp8b32,out=bf16,recipe=extreme,seed=1)", SET_FLASH41},
        {"linear(s=2,N=512,K=5120,fmt=fp8b32,out=bf16,recipe=blockedge,seed=1)", SET_FLASH41},
        {"linear(s=2,N=512,K=5120,fmt=fp8b32,out=bf16,recipe=nearzero,seed=1)", SET_FLASH41},
        {"linear(s=2,N=5120,K=1024,fmt=fp8b32,out=bf16,recipe=blockedge,seed=1)", SET_FLASH41},
        {NULL, 0}},
    .build = build, .role = role, .weight_in = 1u << 1)
/* clang-format on */
#endif
