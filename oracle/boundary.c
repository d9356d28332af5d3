/*
 * boundary.c - the table of named rounding points and the profiles.
 *
 * The table is the single source for `dsv4q boundaries`, docs/boundaries.md
 * and the run headers; the forward pass refers to boundaries only by enum.
 * Each row names the reference line it comes from (inference/model.py or
 * kernel.py) so a reader can check the claim.
 */
#include <stdio.h>
#include <string.h>
#include "oracle/boundary.h"

#define M DSV4Q_BK_MODEL
#define S DSV4Q_BK_STORAGE
static const dsv4q_boundary_info table[DSV4Q_B_COUNT] = {
    [DSV4Q_B_GEMM_ACT_FP8] = {"gemm_act_fp8", M, 1, "FP8 E4M3 block 128 (V4.1: 32), ue8m0 scale",
                              "input of every FP8/FP4-weight linear", "model.py:linear -> kernel.py:act_quant", NULL,
                              DSV4Q_BA_ALL},
    [DSV4Q_B_KV_FP8] = {"kv_fp8", M, 1, "FP8 E4M3 block 64 in place (V4.1: 32)",
                        "window KV nope dims after RoPE (V4.1: the whole post-RoPE vector)",
                        "model.py:Attention.forward act_quant(kv[..., :-rd], 64)", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_CKV_FP8] = {"ckv_fp8", M, 1, "FP8 E4M3 block 64 in place", "compressed KV rows, nope dims",
                         "model.py:Compressor.forward act_quant(kv[..., :-rd], 64)", NULL, DSV4Q_BA_V4},
    [DSV4Q_B_IDX_Q_FP4] = {"idx_q_fp4", M, 1, "Hadamard (V4 only) + FP4 E2M1 block 32, ue8m0",
                           "indexer queries after RoPE", "model.py:Indexer.forward rotate_activation + fp4_act_quant",
                           NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_IDX_K_FP4] = {"idx_k_fp4", M, 1, "Hadamard (V4 only) + FP4 E2M1 block 32, ue8m0",
                           "indexer compressed keys (V4.1: k_norm(wk(latent)) of the kv source)",
                           "model.py:Compressor.forward (rotate) fp4_act_quant", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_IDX_SCORE_BF16] = {"idx_score_bf16", M, 0, "BF16", "indexer score sum over heads",
                                "model.py:Indexer.forward index_score (...).sum(dim=2)", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_ATTN_P_BF16] = {"attn_p_bf16", M, 0, "BF16", "attention probabilities before P*V (per 64-key block)",
                             "kernel.py:sparse_attn_kernel acc_s_cast", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_RESID_BF16] =
        {"resid_bf16", S, 0, "BF16",
         "hc streams (hc_post out), hc_pre / hc_head outputs, MTP input sum (V4.1: hc_pre, hc_post, Engram)",
         "model.py:Block.hc_pre/hc_post, ParallelHead.hc_head", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_NORM_BF16] = {"norm_bf16", S, 0, "BF16", "RMSNorm outputs (attn/ffn/q/kv/compressor/final/MTP norms)",
                           "model.py:RMSNorm.forward .to(dtype)", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_LINEAR_BF16] = {"linear_bf16", S, 0, "BF16", "outputs of BF16/FP8/FP4 linears and the wo_a einsum",
                             "model.py:linear, kernel.py:fp8_gemm/fp4_gemm", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_QNORM_BF16] = {"qnorm_bf16", S, 0, "BF16 x5", "q head norm: q^2, mean, +eps, rsqrt, product",
                            "model.py:Attention.forward q *= rsqrt(...)", NULL, DSV4Q_BA_V4},
    [DSV4Q_B_ROPE_BF16] = {"rope_bf16", S, 0, "BF16",
                           "RoPE results written back (q, kv, compressed rows, indexer q, inverse on o)",
                           "model.py:apply_rotary_emb y.copy_(x)", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_ROPE_TABLE_F32] = {"rope_table_f32", S, 0, "FP32 angles, complex64 cos/sin", "RoPE table",
                                "model.py:precompute_freqs_cis", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_ATTN_OUT_BF16] = {"attn_out_bf16", S, 0, "BF16", "sparse attention output",
                               "kernel.py:sparse_attn_kernel o (BF16)", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_HADAMARD_BF16] = {"hadamard_bf16", S, 0, "BF16", "Hadamard output (indexer q and keys)",
                               "model.py:rotate_activation", NULL, DSV4Q_BA_V4},
    [DSV4Q_B_CMP_BF16] = {"cmp_bf16", S, 0, "BF16", "compressor pooled row before its norm",
                          "model.py:Compressor.forward kv.to(dtype)", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_IDX_PARTIAL_BF16] = {"idx_partial_bf16", S, 0, "BF16",
                                  "indexer head weights (x2), per-head dots, relu(dot)*w products",
                                  "model.py:Indexer.forward weights_proj, einsum, relu_()*weights", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_MOE_BF16] = {"moe_bf16", S, 0, "BF16", "expert hidden before w2, MoE output",
                          "model.py:Expert.forward x.to(dtype), MoE.forward type_as", NULL, DSV4Q_BA_ALL},
    [DSV4Q_B_CKV_FP4] = {"ckv_fp4", M, 1, "FP4 E2M1 block 16, E4M3 scale E4M3(amax/6), in place",
                         "V4.1 compressed KV rows after RoPE (whole vector)",
                         "V4.1 model.py:Attention._compress_kv fp4_act_quant(latent, 16, True, float8_e4m3fn)", NULL,
                         DSV4Q_BA_V41},
};
#undef M
#undef S

#define W DSV4Q_BK_SWITCH
static const dsv4q_boundary_info switch_table[DSV4Q_B_SWITCH_END - DSV4Q_B_SWITCH_FIRST] = {
    [DSV4Q_B_YARN_GATED - DSV4Q_B_SWITCH_FIRST] =
        {"yarn_gated", W, 0, "off: YaRN whenever original_seq_len > 0 (the reference); on: only past it",
         "RoPE table of the compressed layers: YaRN only when the run's context exceeds original_seq_len",
         "model.py:precompute_freqs_cis (if original_seq_len > 0); engines that gate on the context", NULL,
         DSV4Q_BA_ALL},
    [DSV4Q_B_IDXK_PER_SOURCE - DSV4Q_B_SWITCH_FIRST] =
        {"idxk_per_source", W, 0,
         "off: one shared index-key slot, published only with a new latent (the reference); on: per source",
         "V4.1 indexer keys read by index sources on calls that leave a ratio-2 group incomplete",
         "V4.1 model.py:Indexer.forward shared_attn.index_k (golden_fp64_indexk_fix has it on)", NULL, DSV4Q_BA_V41},
    [DSV4Q_B_ATTN_EMPTY_NAN - DSV4Q_B_SWITCH_FIRST] =
        {"attn_empty_nan", W, 0, "off: a query with no valid key gets 0 (the kernel); on: NaN (a naive softmax's 0/0)",
         "sparse attention rows whose every column is masked",
         "kernel.py:sparse_attn_kernel (running max starts at -1e30, so masked terms are 0); naive softmax ports", NULL,
         DSV4Q_BA_ALL},
};
#undef W

#define E DSV4Q_BK_ENGINE
static const dsv4q_boundary_info engine_table[DSV4Q_B_END - DSV4Q_B_ENGINE_FIRST] = {
    [DSV4Q_B_KV_F16 - DSV4Q_B_ENGINE_FIRST] = {"kv_f16", E, 0, "F16 (IEEE binary16, RNE)",
                                               "KV rows read by attention (window ring and compressed rows)",
                                               "GGUF engines: KV cache type f16 (llama.cpp cache_type_k/v = f16)", NULL,
                                               DSV4Q_BA_ALL},
    [DSV4Q_B_ACT_Q8_0 -
        DSV4Q_B_ENGINE_FIRST] = {"act_q8_0", E, 0,
                                 "GGML Q8_0 block 32: d = amax/127 stored F16, q = round(x * (1/d)) half away",
                                 "input of every FP8/FP4-weight linear",
                                 "ggml quantize_row_q8_0_ref (vec_dot_type of Q8_0)", "gemm_act_fp8", DSV4Q_BA_ALL},
    [DSV4Q_B_IDX_SCORE_F32 - DSV4Q_B_ENGINE_FIRST] = {"idx_score_f32", E, 0, "FP32", "indexer score sum over heads",
                                                      "engines keeping the score FP32 (no BF16 tie-making cast)",
                                                      "idx_score_bf16", DSV4Q_BA_ALL},
    [DSV4Q_B_ACT_F16 -
        DSV4Q_B_ENGINE_FIRST] = {"act_f16", E, 0, "F16 instead of BF16",
                                 "every storage boundary that is on (resid_bf16 .. moe_bf16) rounds to F16",
                                 "engines whose activation type is F16 (GGML_TYPE_F16 intermediates)", NULL,
                                 DSV4Q_BA_ALL},
    [DSV4Q_B_ACT_Q8_0_RNE -
        DSV4Q_B_ENGINE_FIRST] = {"act_q8_0_rne", E, 0, "Q8_0 block 32: d = amax/127 kept F32, q = RNE(x * (1/d))",
                                 "input of every FP8/FP4-weight linear",
                                 "C engines' runtime Q8_0 (ds4-style: F32 scale, rintf ties to even)", "gemm_act_fp8",
                                 DSV4Q_BA_ALL},
    [DSV4Q_B_ACT_Q8_K - DSV4Q_B_ENGINE_FIRST] = {"act_q8_k", E, 0,
                                                 "GGML Q8_K block 256: m = the largest-|x| value, q = min(127, "
                                                 "RNE(x * (-127/m))), x = q * (1/(-127/m)), F32",
                                                 "input of every FP8/FP4-weight linear",
                                                 "ggml quantize_row_q8_K_ref (vec_dot_type of K-quants and IQ types)",
                                                 "gemm_act_fp8", DSV4Q_BA_ALL},
    [DSV4Q_B_ACT_Q_ALL - DSV4Q_B_ENGINE_FIRST] =
        {"act_q_all", E, 0, "(the declared act_q8_0/_rne/act_q8_k)",
         "also the input of BF16/F32-weight linears (wo_a, head, compressor, indexer, hc fn; not the router)",
         "engines that store BF16/F32 weights as Q8_0 or K-quants", NULL, DSV4Q_BA_ALL},
};
#undef E

const char *const dsv4q_profile_names[] = {"source", "model", "qat", "exact", NULL};

const dsv4q_boundary_info *dsv4q_boundary_get(int b)
{
    if (b >= 0 && b < DSV4Q_B_COUNT) return &table[b];
    if (b >= DSV4Q_B_SWITCH_FIRST && b < DSV4Q_B_SWITCH_END) return &switch_table[b - DSV4Q_B_SWITCH_FIRST];
    if (b >= DSV4Q_B_ENGINE_FIRST && b < DSV4Q_B_END) return &engine_table[b - DSV4Q_B_ENGINE_FIRST];
    return NULL;
}

/* The next valid bit after b: reference boundaries, switches, engine points. */
static int next_bit(int b)
{
    b++;
    if (b == DSV4Q_B_COUNT) return DSV4Q_B_SWITCH_FIRST;
    if (b == DSV4Q_B_SWITCH_END) return DSV4Q_B_ENGINE_FIRST;
    return b;
}
/* Every valid bit, reference boundaries first. */
#define FOR_EACH_BIT(b) for (int b = 0; b < DSV4Q_B_END; b = next_bit(b))

uint64_t dsv4q_boundary_arch_mask(int arch)
{
    uint64_t m = 0;
    const int want = arch == 1 ? DSV4Q_BA_V41 : DSV4Q_BA_V4;
    FOR_EACH_BIT(b)
    {
        int a = dsv4q_boundary_get(b)->arch;
        if (a == DSV4Q_BA_ALL || a == want) m |= DSV4Q_BIT(b);
    }
    return m;
}

int dsv4q_boundary_find(const char *name)
{
    FOR_EACH_BIT(b)
        if (strcmp(dsv4q_boundary_get(b)->name, name) == 0) return b;
    return -1;
}

int dsv4q_profile_set(const char *profile, uint64_t *set)
{
    uint64_t s = 0;
    int want;
    if (strcmp(profile, "source") == 0) want = 0;
    else if (strcmp(profile, "model") == 0) want = 1;
    else if (strcmp(profile, "qat") == 0) want = 2;
    else if (strcmp(profile, "exact") == 0) want = 3;
    else return -1;
    for (int b = 0; b < DSV4Q_B_COUNT; b++) {
        int on = want == 0 || (want == 1 && table[b].kind == DSV4Q_BK_MODEL) ||
                 (want == 2 && table[b].qat);
        if (on) s |= DSV4Q_BIT(b);
    }
    *set = s;
    return 0;
}

static void list_names(char *err, size_t errlen, const char *prefix)
{
    size_t n = (size_t)snprintf(err, errlen, "%s; valid boundaries:", prefix);
    FOR_EACH_BIT(b)
        if (n < errlen) n += (size_t)snprintf(err + n, errlen - n, " %s", dsv4q_boundary_get(b)->name);
}

int dsv4q_boundary_apply(uint64_t *set, const char *spec, char *err, size_t errlen)
{
    char buf[1024];
    if (strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "--boundary: specification too long");
        return -1;
    }
    strcpy(buf, spec);
    uint64_t s = *set;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        char msg[160];
        static char on[] = "=on";
        if (!eq) {   /* a bare NAME means NAME=on */
            if (dsv4q_boundary_find(tok) < 0) {
                snprintf(msg, sizeof msg, "--boundary: unknown boundary '%s' (NAME or NAME=on|off)", tok);
                list_names(err, errlen, msg);
                return -1;
            }
            eq = on;
        }
        *eq = 0;
        int b = dsv4q_boundary_find(tok);
        if (b < 0) {
            snprintf(msg, sizeof msg, "--boundary: unknown boundary '%s'", tok);
            list_names(err, errlen, msg);
            return -1;
        }
        if (strcmp(eq + 1, "on") == 0) {
            s |= DSV4Q_BIT(b);
            const char *rep = dsv4q_boundary_get(b)->replaces;
            if (rep) s &= ~DSV4Q_BIT(dsv4q_boundary_find(rep));   /* the engine point replaces it */
        } else if (strcmp(eq + 1, "off") == 0) s &= ~DSV4Q_BIT(b);
        else {
            snprintf(err, errlen, "--boundary: value for '%s' must be on or off, got '%s'", tok, eq + 1);
            return -1;
        }
    }
    const uint64_t aq = s & DSV4Q_ACT_Q_ENGINE;
    if (aq & (aq - 1)) {
        snprintf(err, errlen, "--boundary: act_q8_0, act_q8_0_rne and act_q8_k are alternatives: declare one");
        return -1;
    }
    if (((s >> DSV4Q_B_ACT_Q_ALL) & 1u) && !aq) {
        snprintf(err, errlen,
                 "--boundary: act_q_all needs the activation quantizer it extends (act_q8_0, "
                 "act_q8_0_rne or act_q8_k)");
        return -1;
    }
    *set = s;
    return 0;
}

void dsv4q_boundary_format(uint64_t set, char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = 0;
    FOR_EACH_BIT(b)
        if ((set & DSV4Q_BIT(b)) && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", dsv4q_boundary_get(b)->name);
    if (n == 0 && len) snprintf(buf, len, "(none)");
}

int dsv4q_declaration_parse(const char *decl, uint64_t *set, char *err, size_t errlen)
{
    char base[32];
    const char *colon = strchr(decl, ':');
    size_t bn = colon ? (size_t)(colon - decl) : strlen(decl);
    if (bn >= sizeof base) bn = sizeof base - 1;
    memcpy(base, decl, bn);
    base[bn] = 0;
    uint64_t s;
    if (dsv4q_profile_set(base, &s)) {
        snprintf(err, errlen, "declaration '%s': unknown base profile '%s' (source, model, qat, exact; "
                 "then optionally :NAME[=on|off],...)", decl, base);
        return -1;
    }
    char m[1024];
    if (colon && colon[1] && dsv4q_boundary_apply(&s, colon + 1, m, sizeof m)) {
        /* the message names the declaration, not the --boundary option a
         * backend's descriptor never used */
        const char *t = strncmp(m, "--boundary: ", 12) ? m : m + 12;
        snprintf(err, errlen, "declaration '%s': %s", decl, t);
        return -1;
    }
    *set = s;
    return 0;
}

static int popcount64(uint64_t v)
{
    int n = 0;
    for (; v; v &= v - 1) n++;
    return n;
}

void dsv4q_declaration_format(uint64_t set, char *buf, size_t len)
{
    int best = 0, bestd = 65;
    for (int p = 0; dsv4q_profile_names[p]; p++) {
        uint64_t s;
        dsv4q_profile_set(dsv4q_profile_names[p], &s);
        int d = popcount64(s ^ set);
        if (d < bestd) { bestd = d; best = p; }
    }
    uint64_t base;
    dsv4q_profile_set(dsv4q_profile_names[best], &base);
    size_t n = (size_t)snprintf(buf, len, "%s", dsv4q_profile_names[best]);
    int first = 1;
    /* order: reference points switched off, engine points switched on,
     * then reference points switched on (also a base one that an engine
     * point in set replaces), so the re-parse gives set back whatever the
     * replacement rule switches off on the way */
    for (int pass = 0; pass < 3; pass++)
        FOR_EACH_BIT(b) {
            uint64_t bit = DSV4Q_BIT(b);
            int on = (set & bit) != 0, eng = b >= DSV4Q_B_SWITCH_FIRST, want;
            if (pass == 0) want = !on && (base & bit);
            else if (pass == 1) want = on && eng && !(base & bit);
            else {
                int replaced = 0;
                FOR_EACH_BIT(e) {
                    const char *rep = dsv4q_boundary_get(e)->replaces;
                    if (rep && (set & DSV4Q_BIT(e)) && dsv4q_boundary_find(rep) == b) replaced = 1;
                }
                want = on && !eng && (!(base & bit) || replaced);
            }
            if (!want || n >= len) continue;
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%s", first ? ":" : ",", dsv4q_boundary_get(b)->name,
                                  on ? "on" : "off");
            first = 0;
        }
}

int dsv4q_declaration_has_engine(uint64_t set)
{
    return (set >> DSV4Q_B_ENGINE_FIRST) != 0;
}
