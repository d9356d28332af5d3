/*
 * cases.c - the golden cases: the operator cases and the table of all of
 * them, in its fixed order (the manifest's, the report's).
 *
 * The operator case bodies are goldens/cases.inc, written once and included
 * here twice (R = float / double, S(n) = n_f32 / n_f64, G(n) = n_f32 /
 * n_f64), the same way oracle/ops.h expands oracle/ops.inc; the weight
 * builders below turn a stream into stored codes (BF16, F32, FP8 with block
 * scales with 128 or 32 blocks, packed FP4), identical at both widths. The
 * V4.1 operator cases (oracle/ops41.h, oracle/engram_hash.h) follow V4's
 * in cases.inc and in the table. The whole-model cases live
 * in goldens/model_cases.c. Adding a case: its body in cases.inc, its row
 * in the table (key, and the description of its inputs the manifest keeps),
 * then `dsv4q golden record --ops KEY` (docs/goldens.md).
 */
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "goldens/golden.h"
#include "goldens/payload.h"
#include "oracle/boundary.h"
#include "oracle/engram_hash.h"
#include "oracle/ops.h"
#include "oracle/ops41.h"
#include "oracle/weights.h"

/* ---- weights (width-independent: stored codes) --------------------------- */

static dsv4q_weight wview(const char *name, dsv4q_wfmt fmt, long out, long in, const void *data, const void *scale,
                          dsv4q_dtype sdt)
{
    dsv4q_weight w = {name, fmt, out, in, data, scale, sdt, 0};
    return w;
}

/* BF16 [out, in] = bf16(normal * amp). data NULL on allocation failure. */
static dsv4q_weight w_bf16(gctx *g, const char *stream, long out, long in, double amp)
{
    grng r = rng_of(g, stream);
    uint16_t *c = NEW(uint16_t, out * in);
    if (c)
        for (long i = 0; i < out * in; i++) c[i] = dsv4q_bf16_encode(r_normal(&r) * amp);
    return wview(stream, DSV4Q_WF_BF16, out, in, c, NULL, DSV4Q_DT_INVALID);
}

/* F32 [out, in] = normal * amp. */
static dsv4q_weight w_f32(gctx *g, const char *stream, long out, long in, double amp)
{
    grng r = rng_of(g, stream);
    float *c = NEW(float, (out * in));   /* parenthesised: clang-format reads `float, a * b` as a declaration */
    if (c)
        for (long i = 0; i < out * in; i++) c[i] = (float)(r_normal(&r) * amp);
    return wview(stream, DSV4Q_WF_F32, out, in, c, NULL, DSV4Q_DT_INVALID);
}

/* BF16 [out, in] = bf16(1 + normal/4) (V4.1's Engram q/k gains). */
static dsv4q_weight w_bf16_gain(gctx *g, const char *stream, long out, long in)
{
    grng r = rng_of(g, stream);
    uint16_t *c = NEW(uint16_t, out * in);
    if (c)
        for (long i = 0; i < out * in; i++) c[i] = dsv4q_bf16_encode(1.0 + r_normal(&r) / 4);
    return wview(stream, DSV4Q_WF_BF16, out, in, c, NULL, DSV4Q_DT_INVALID);
}

/* FP8 E4M3 [out, in] with blk x blk block scales [ceil(out/blk),
 * ceil(in/blk)] (blk 128: V4, 32: V4.1): E8M0 2^-14..2^-11, or (f32scale)
 * F32 (1 + u) 2^-13. Codes are E4M3(normal * 96), saturating (no NaN code). */
static dsv4q_weight w_fp8_blk(gctx *g, const char *stream, long out, long in, int blk, int f32scale)
{
    grng r = rng_of(g, stream);
    const long nsc = ((out + blk - 1) / blk) * ((in + blk - 1) / blk);
    uint8_t *c = NEW(uint8_t, out * in);
    void *s = f32scale ? (void *)NEW(float, nsc) : (void *)NEW(uint8_t, nsc);
    if (c && s) {
        for (long i = 0; i < out * in; i++) c[i] = dsv4q_e4m3_encode(r_normal(&r) * 96.0, 1);
        for (long i = 0; i < nsc; i++) {
            if (f32scale) ((float *)s)[i] = (float)((1.0 + r_unit(&r)) * 0x1p-13);
            else ((uint8_t *)s)[i] = (uint8_t)dsv4q_e8m0_encode_exp(-14 + r_int(&r, 4));
        }
    }
    dsv4q_weight w =
        wview(stream, DSV4Q_WF_FP8, out, in, c && s ? c : NULL, s, f32scale ? DSV4Q_DT_F32 : DSV4Q_DT_F8_E8M0);
    w.blk = blk;
    return w;
}

/* The V4 FP8 weight: 128x128 blocks. */
static dsv4q_weight w_fp8(gctx *g, const char *stream, long out, long in, int f32scale)
{
    return w_fp8_blk(g, stream, out, in, DSV4Q_FP8_BLOCK_V4, f32scale);
}

/* FP4 E2M1 packed [out, in/2] (every code, uniformly) with E8M0 scales
 * [out, in/32] of 2^-6..2^-3. */
static dsv4q_weight w_fp4(gctx *g, const char *stream, long out, long in)
{
    grng r = rng_of(g, stream);
    uint8_t *c = NEW(uint8_t, out * in / 2), *s = NEW(uint8_t, out * (in / 32));
    if (c && s) {
        for (long i = 0; i < out * in / 2; i++) c[i] = (uint8_t)(rbits(&r) >> 56);
        for (long i = 0; i < out * (in / 32); i++) s[i] = (uint8_t)dsv4q_e8m0_encode_exp(-6 + r_int(&r, 4));
    }
    return wview(stream, DSV4Q_WF_FP4, out, in, c && s ? c : NULL, s, DSV4Q_DT_F8_E8M0);
}

/* ---- the operator cases, once per width ---------------------------------- */

#define DSV4Q_BOTH "goldens/cases.inc"
#include "oracle/both.h"

/* ---- the table ------------------------------------------------------------- */

/* clang-format off */
#define OPCASE(k, desc) {#k, desc, c_##k##_f32, c_##k##_f64, NULL, NULL}
/* clang-format on */

static const gcase cases[] = {
    OPCASE(act_quant, "x [4,320] f32-exact: zero row (amax floor), uniform with 448 and 448+2^-15 block maxima, "
                      "normal*32, uniform*2^-20; in place, block 128 ue8m0 and block 64 FP32 scale"),
    OPCASE(act_quant_codes, "x [320] (row 1 of act_quant's pattern); GEMM codes + scales, block 128 ue8m0 and "
                            "block 64 FP32 scale"),
    OPCASE(fp4_act_quant, "x [4,112]: subnormal-range row (amax floor), E2M1 midpoint ties, normal, "
                          "normal*2^20; in place"),
    OPCASE(hadamard, "x [3,128] and [2,64] normal"),
    OPCASE(linear_bf16, "W BF16 [96,256] normal/16, x [3,256] BF16 normal; out linear_bf16 and unrounded"),
    OPCASE(linear_fp8, "W FP8 [160,320] (partial 128-blocks) E8M0 scales, ue8m0; same with FP32 scales, "
                       "ue8m0 off; x [3,320] BF16 normal (row 2 *64)"),
    OPCASE(linear_fp4, "W FP4 [64,256] every code, E8M0 scales per 32; x [3,256] BF16 normal; ue8m0; "
                       "out linear_bf16 and unrounded"),
    OPCASE(linear_f32, "W F32 [64,200] normal/16, x [3,200] normal; unrounded (FP32-math) and linear_bf16"),
    OPCASE(rmsnorm, "x [4,256] normal * 2^{0,6,-10,-24} per row, w [256] 1+normal/8, eps 1e-6; with and "
                    "without w"),
    OPCASE(qhead_norm, "q [6,128] and [2,60] (tail) normal * 2^{0,3,-5}, eps 1e-6"),
    OPCASE(rope_table, "YaRN (r 64, theta 160000, orig 65536, factor 16, beta 32/1) and plain (theta 10000); "
                       "npos 4097, rows at positions 0..7,63,64,1000,4095,4096"),
    OPCASE(rope_apply, "x [6,128] BF16 normal, 3 tokens x 2 heads at pos 5.., rope dims 64..127, YaRN table; "
                       "forward, inverse of forward, plain table at pos 62/63"),
    OPCASE(sparse_attn, "q [3,4,64], kv [150,64] BF16 normal, idx [3,140] (row 0 mixed with -1 and out-of-range "
                        "150/200, row 1 first 70 masked, row 2 all masked), sinks {-2,0,3,12}, scale 1/8"),
    OPCASE(compressor, "dim 128, Dc 128, BF16 wkv/wgate /16, ape, norm; ratio 4 attention (ckv_fp8) and "
                       "ratio 4 indexer (Hadamard+FP4): prefill 10 + decode pos 10..15; ratio 128: prefill 254 "
                       "+ decode 254,255; YaRN table theta 160000; ue8m0"),
    OPCASE(indexer, "Hi 4, Di 64, ratio 4: prefill s 16 T 4 (causal mask), k 2; decode s 2 start 95 T 24, "
                    "k 8, key rows 17=3 and 11=5 (exact ties); q/K BF16 normal, w normal/4"),
    OPCASE(hc_pre, "X [3,4,128] BF16 normal, fn F32 [24,512] normal/32, scale {0.5,0.25,1}, base normal/2, "
                   "eps 1e-6/1e-6, 20 Sinkhorn iterations"),
    OPCASE(hc_post, "x [3,128], X [3,4,128] BF16 normal, post 2*unit, comb unit"),
    OPCASE(hc_head, "X [3,4,128] BF16 normal, fn F32 [4,512] normal/32, scale {0.5}, base normal/2"),
    OPCASE(moe_gate, "x [6,128] BF16 normal (row 5 *64: softplus threshold), W F32 [16,128] normal/16 with row "
                     "7 = row 3, bias unif/8 (bias 7 = bias 3), k 4, route 1.5: sqrtsoftplus+bias, hash "
                     "(tid2eid [10,4]), softmax, sigmoid"),
    OPCASE(expert, "FP4 w1/w3 [128,128], w2 [128,128]; x [3,128] BF16 normal (row 2 *16: clamp), weight "
                   "unit; limit 10; with and without weight; FP8 shared-style expert"),
    OPCASE(moe, "4 FP4 experts + FP8 shared, inter 128, x [5,128] BF16 normal, k 2 (expert 2 unused), weights "
                "unit, limit 10"),
    {"model_tiny",
     "dsv4q synth tiny seed 1; prompt 40 ids + 4 decode ids + 1 MTP id from splitmix64('model_tiny','ids') % "
     "1024; logits [5,1024] of every call, MTP logits after the last",
     dsv4q_golden_model_tiny, dsv4q_golden_model_tiny, dsv4q_golden_tiny_setup, dsv4q_golden_tiny_teardown},
    {"stages_tiny",
     "dsv4q synth tiny seed 1; ids from splitmix64('stages_tiny','ids') % 1024: prompt 4 + 1 decode, MTP after "
     "each call on the next ids; SHA-256 [32] U8 of every stage output of oracle/stages.h per call, "
     "c{call}.s{slot}.{tensor}",
     dsv4q_golden_stages_tiny, dsv4q_golden_stages_tiny, dsv4q_golden_tiny_setup, dsv4q_golden_tiny_teardown},
    /* DeepSeek V4.1 (oracle/ops41.h, oracle/engram_hash.h, oracle/model_v41.c) */
    OPCASE(kv41_quant, "x [6,64] (4 blocks of 16): zero row (amax floor 6*2^-9), E2M1 midpoint ties at scale 1, "
                       "normal, normal*2^{-7,-10,-4,-1} per block (E4M3 subnormal scales), uniform*1000 with "
                       "block maxima 3000 (scale saturates at 448), 2688, 6.3 and 6.5 (a/6 rounds down / up), "
                       "uniform*2^-20; encode (codes, E4M3 scales), decode, in-place quant; the scale of 14 amax "
                       "values"),
    OPCASE(engram41, "hc 4, dim 64, head_dim 64, 6 columns, table 40 rows E4M3(normal*64) with E8M0 2^-8..2^-6 "
                     "per 32, wkv FP8 32x32 blocks [320,384], q/k weights BF16 1+normal/4; h [5,4,64] BF16 "
                     "normal, ids uniform with -1 and 40 (zero rows) and an all-(-1) token (the dot clamp); "
                     "eps 1e-20, ue8m0; without and with text_mask {1,1,0,1,1}"),
    OPCASE(compressor41, "dim 128, Dc 64, x [12,128] BF16 normal, norms 1+normal/8, eps 1e-20, ue8m0; ratio 1 "
                         "(BF16 wkv /16): prefill 5 + decode pos 5,6; ratio 2 (F32 wkv /16, wgate /4): prefill 7 "
                         "(3 rows, token 6 waiting, slot 1 fresh) + decode pos 7..11; the state after the prefill "
                         "and at the end"),
    OPCASE(topk41, "score [7,24] BF16 normal, -inf from clen {0,1,6,13,24,24,24}; block ties (row 3), exact "
                   "position ties at the k-th pick (row 4), 4 finite scores (row 5), the newest block worst "
                   "(row 6); candidate_blocks B 4 topb 3 (blocks, mask), topk41 k 6 on the raw and on the "
                   "candidate-masked score"),
    OPCASE(moe_gate41, "x [6,128] BF16 normal (row 5 *64: softplus threshold), W BF16 [16,128] normal/16 with row "
                       "7 = row 3, bias unif/8 (bias 7 = bias 3), k 4, route 1.5: sqrtsoftplus+bias+norm, the "
                       "same at gate_temp 0.75, softmax+norm, sigmoid+bias without norm, sqrtsoftplus k 1"),
    OPCASE(hc_mixes, "X, X_prev [3,4,128] BF16 normal, fn F32 [24,512] normal/32, scale {0.5,0.25,1}, base "
                     "normal/2, norm_eps 1e-20, hc_eps 1e-6, 20 Sinkhorn iterations: hc_mixes of X (pre, post, "
                     "comb); hc_collapse of X with its own pre, X_prev's (the lag) and the identity [1,0,0,0]"),
    OPCASE(engram_hash, "layers {2,5}, n-gram 4, 2 heads, engram_vocab_size 40, compressed vocab 50, token map "
                        "[64] uniform with the pad (id 2) -> 7; 15 tokens uniform: prefill 10 (position 4 dead) + "
                        "decode 10,11,12 + a call back at 11 with 2 new tokens; primes, offsets, multipliers, "
                        "rows; the Flash prime layout (2 layers, n-gram 4, 8 heads, 16e6)"),
    OPCASE(linear_fp8_b32, "W FP8 [80,200] with 32x32 blocks (partial in both directions) E8M0 scales; x [3,200] "
                           "BF16 normal (row 2 *64); activations per 32 ue8m0: linear_bf16 and unrounded; "
                           "FP32 activation scales (ue8m0 off)"),
    {"model_tiny_v41",
     "tests/data/pub_v41_tiny (DeepSeek's V4.1 reference checkpoint, 8 layers); prompt 16 ids + 2 decode ids "
     "from splitmix64('model_tiny_v41','ids') % 384; logits [3,384] of every call; SHA-256 [32] U8 of block_out "
     "of every layer and of engram_out, per call, c{call}.L{layer}.{tap}",
     dsv4q_golden_model_tiny_v41, dsv4q_golden_model_tiny_v41, dsv4q_golden_v41_setup, dsv4q_golden_v41_teardown},
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))
_Static_assert(NCASES <= DSV4Q_GOLDEN_MAX_CASES, "raise DSV4Q_GOLDEN_MAX_CASES (goldens/payload.h)");

int dsv4q_golden_count(void) { return NCASES; }
const char *dsv4q_golden_key(int i) { return i >= 0 && i < NCASES ? cases[i].key : NULL; }
const char *dsv4q_golden_inputs(int i) { return i >= 0 && i < NCASES ? cases[i].inputs : NULL; }

const gcase *dsv4q_golden_case(const char *key)
{
    for (int i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].key, key)) return &cases[i];
    return NULL;
}

const gcase *dsv4q_golden_case_at(int i) { return i >= 0 && i < NCASES ? &cases[i] : NULL; }
