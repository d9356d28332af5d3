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
    [DSV4Q_B_GEMM_ACT_FP8] = {"gemm_act_fp8", M, 1, "FP8 E4M3 block 128, ue8m0 scale",
        "input of every FP8/FP4-weight linear", "model.py:linear -> kernel.py:act_quant"},
    [DSV4Q_B_KV_FP8] = {"kv_fp8", M, 1, "FP8 E4M3 block 64 in place",
        "window KV nope dims after RoPE", "model.py:Attention.forward act_quant(kv[..., :-rd], 64)"},
    [DSV4Q_B_CKV_FP8] = {"ckv_fp8", M, 1, "FP8 E4M3 block 64 in place",
        "compressed KV rows, nope dims", "model.py:Compressor.forward act_quant(kv[..., :-rd], 64)"},
    [DSV4Q_B_IDX_Q_FP4] = {"idx_q_fp4", M, 1, "Hadamard + FP4 E2M1 block 32, ue8m0",
        "indexer queries after RoPE", "model.py:Indexer.forward rotate_activation + fp4_act_quant"},
    [DSV4Q_B_IDX_K_FP4] = {"idx_k_fp4", M, 1, "Hadamard + FP4 E2M1 block 32, ue8m0",
        "indexer compressed keys", "model.py:Compressor.forward (rotate) fp4_act_quant"},
    [DSV4Q_B_IDX_SCORE_BF16] = {"idx_score_bf16", M, 0, "BF16",
        "indexer score sum over heads", "model.py:Indexer.forward index_score (...).sum(dim=2)"},
    [DSV4Q_B_ATTN_P_BF16] = {"attn_p_bf16", M, 0, "BF16",
        "attention probabilities before P*V (per 64-key block)", "kernel.py:sparse_attn_kernel acc_s_cast"},
    [DSV4Q_B_RESID_BF16] = {"resid_bf16", S, 0, "BF16",
        "hc streams (hc_post out), hc_pre / hc_head outputs, MTP input sum",
        "model.py:Block.hc_pre/hc_post, ParallelHead.hc_head"},
    [DSV4Q_B_NORM_BF16] = {"norm_bf16", S, 0, "BF16",
        "RMSNorm outputs (attn/ffn/q/kv/compressor/final/MTP norms)", "model.py:RMSNorm.forward .to(dtype)"},
    [DSV4Q_B_LINEAR_BF16] = {"linear_bf16", S, 0, "BF16",
        "outputs of BF16/FP8/FP4 linears and the wo_a einsum", "model.py:linear, kernel.py:fp8_gemm/fp4_gemm"},
    [DSV4Q_B_QNORM_BF16] = {"qnorm_bf16", S, 0, "BF16 x5",
        "q head norm: q^2, mean, +eps, rsqrt, product", "model.py:Attention.forward q *= rsqrt(...)"},
    [DSV4Q_B_ROPE_BF16] = {"rope_bf16", S, 0, "BF16",
        "RoPE results written back (q, kv, compressed rows, indexer q, inverse on o)",
        "model.py:apply_rotary_emb y.copy_(x)"},
    [DSV4Q_B_ROPE_TABLE_F32] = {"rope_table_f32", S, 0, "FP32 angles, complex64 cos/sin",
        "RoPE table", "model.py:precompute_freqs_cis"},
    [DSV4Q_B_ATTN_OUT_BF16] = {"attn_out_bf16", S, 0, "BF16",
        "sparse attention output", "kernel.py:sparse_attn_kernel o (BF16)"},
    [DSV4Q_B_HADAMARD_BF16] = {"hadamard_bf16", S, 0, "BF16",
        "Hadamard output (indexer q and keys)", "model.py:rotate_activation"},
    [DSV4Q_B_CMP_BF16] = {"cmp_bf16", S, 0, "BF16",
        "compressor pooled row before its norm", "model.py:Compressor.forward kv.to(dtype)"},
    [DSV4Q_B_IDX_PARTIAL_BF16] = {"idx_partial_bf16", S, 0, "BF16",
        "indexer head weights (x2), per-head dots, relu(dot)*w products",
        "model.py:Indexer.forward weights_proj, einsum, relu_()*weights"},
    [DSV4Q_B_MOE_BF16] = {"moe_bf16", S, 0, "BF16",
        "expert hidden before w2, MoE output", "model.py:Expert.forward x.to(dtype), MoE.forward type_as"},
};
#undef M
#undef S

const char *const dsv4q_profile_names[] = {"source", "model", "qat", "exact", NULL};

const dsv4q_boundary_info *dsv4q_boundary_get(int b)
{
    return (b >= 0 && b < DSV4Q_B_COUNT) ? &table[b] : NULL;
}

int dsv4q_boundary_find(const char *name)
{
    for (int b = 0; b < DSV4Q_B_COUNT; b++)
        if (strcmp(table[b].name, name) == 0) return b;
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
    for (int b = 0; b < DSV4Q_B_COUNT && n < errlen; b++)
        n += (size_t)snprintf(err + n, errlen - n, " %s", table[b].name);
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
        if (!eq) {
            snprintf(msg, sizeof msg, "--boundary: '%s' is not NAME=on|off", tok);
            list_names(err, errlen, msg);
            return -1;
        }
        *eq = 0;
        int b = dsv4q_boundary_find(tok);
        if (b < 0) {
            snprintf(msg, sizeof msg, "--boundary: unknown boundary '%s'", tok);
            list_names(err, errlen, msg);
            return -1;
        }
        if (strcmp(eq + 1, "on") == 0) s |= DSV4Q_BIT(b);
        else if (strcmp(eq + 1, "off") == 0) s &= ~DSV4Q_BIT(b);
        else {
            snprintf(err, errlen, "--boundary: value for '%s' must be on or off, got '%s'", tok, eq + 1);
            return -1;
        }
    }
    *set = s;
    return 0;
}

void dsv4q_boundary_format(uint64_t set, char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = 0;
    for (int b = 0; b < DSV4Q_B_COUNT && n < len; b++)
        if (set & DSV4Q_BIT(b))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", table[b].name);
    if (n == 0 && len) snprintf(buf, len, "(none)");
}
