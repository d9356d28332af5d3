/*
 * cases.c - the golden cases: the operator cases and the table of all of
 * them, in its fixed order (the manifest's, the report's).
 *
 * The operator case bodies are goldens/cases.inc, written once and included
 * here twice (R = float / double, S(n) = n_f32 / n_f64, G(n) = n_f32 /
 * n_f64), the same way oracle/ops.h expands oracle/ops.inc; the weight
 * builders below turn a stream into stored codes (BF16, F32, FP8 with block
 * scales, packed FP4), identical at both widths. The whole-model cases live
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
#include "oracle/ops.h"
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

/* FP8 E4M3 [out, in] with 128x128 block scales [ceil(out/128), ceil(in/128)]:
 * E8M0 2^-14..2^-11, or (f32scale) F32 (1 + u) 2^-13. Codes are
 * E4M3(normal * 96), saturating (no NaN code). */
static dsv4q_weight w_fp8(gctx *g, const char *stream, long out, long in, int f32scale)
{
    grng r = rng_of(g, stream);
    const long nsc = ((out + 127) / 128) * ((in + 127) / 128);
    uint8_t *c = NEW(uint8_t, out * in);
    void *s = f32scale ? (void *)NEW(float, nsc) : (void *)NEW(uint8_t, nsc);
    if (c && s) {
        for (long i = 0; i < out * in; i++) c[i] = dsv4q_e4m3_encode(r_normal(&r) * 96.0, 1);
        for (long i = 0; i < nsc; i++) {
            if (f32scale) ((float *)s)[i] = (float)((1.0 + r_unit(&r)) * 0x1p-13);
            else ((uint8_t *)s)[i] = (uint8_t)dsv4q_e8m0_encode_exp(-14 + r_int(&r, 4));
        }
    }
    return wview(stream, DSV4Q_WF_FP8, out, in, c && s ? c : NULL, s, f32scale ? DSV4Q_DT_F32 : DSV4Q_DT_F8_E8M0);
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
