/*
 * stages.c - the stage table and the capture names derived from it (see
 * stages.h). Width-independent (Makefile ORACLE_COMMON).
 *
 * The table is the contract an engine's dump is written against, so every
 * row says where the stage sits in DeepSeek's code and which rounding points
 * it contains: an engine author reads one row and knows which tensor to dump
 * and what the oracle will compute from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/stages.h"

#define S_ DSV4Q_SD_S
#define HC DSV4Q_SD_HC
#define D_ DSV4Q_SD_DIM
#define V_ DSV4Q_SD_VOCAB
#define B(x) DSV4Q_BIT(DSV4Q_B_##x)
#define ST(x) (DSV4Q_B_##x + 1)

/* The operators a stage calls (stages.h `ops`). An attention block calls
 * every attention operator its layer's compress ratio and the boundary set
 * may need; mtp is one whole block plus its own head. */
#define OPS_ATTN                                                                                          \
    "linear, rmsnorm, qhead_norm, rope, act_quant, fp4_quant, hadamard, sparse_attn, compressor, "        \
    "indexer_score, topk, window_attn_decode"
#define OPS_MOE "moe_gate, expert"
#define OPS_HEAD "linear, rmsnorm, hc_head"

#define HC_PRE_ROW(ID, NAME, WHICH, TAP)                                                                            \
    [ID] = {ID, NAME, 1, 0, 0, 1, 3,                                                                                \
            {{"X", 3, {S_, HC, D_}, "hc streams entering the sub-layer", ST(RESID_BF16)}},                                         \
            {{"y", 2, {S_, D_}, "the mixed input of the sub-layer (before its norm)", ST(RESID_BF16)},                              \
             {"post", 2, {S_, HC}, "post weights (FP32), input of the matching hc_post"},                          \
             {"comb", 3, {S_, HC, HC}, "Sinkhorn combination [source stream, target stream] (FP32)"}},              \
            B(RESID_BF16),                                                                                          \
            "oracle/hc.c dsv4q_hc_pre (layers.N." WHICH "_fn/_scale/_base)",                                         \
            "model.py Block.hc_pre; kernel.py hc_split_sinkhorn_kernel", "hc_pre", TAP, 0, "hc_pre"}

#define NORM_ROW(ID, NAME, WHICH)                                                                                   \
    [ID] = {ID, NAME, 1, 0, 0, 1, 1,                                                                                \
            {{"x", 2, {S_, D_}, "y of the hc_pre before it", ST(RESID_BF16)}},                                                      \
            {{"y", 2, {S_, D_}, "RMSNorm output", ST(NORM_BF16)}},                                                                 \
            B(NORM_BF16), "oracle/norm.c dsv4q_rmsnorm (layers.N." WHICH ".weight)",                               \
            "model.py Block.forward self." WHICH " (RMSNorm.forward)", "rmsnorm", NAME, 0, "rmsnorm"}

#define HC_POST_ROW(ID, NAME, WHAT, XST, TAP)                                                                            \
    [ID] = {ID, NAME, 1, 0, 0, 4, 1,                                                                                \
            {{"x", 2, {S_, D_}, "output of the " WHAT " stage", XST},                                                    \
             {"X", 3, {S_, HC, D_}, "the hc streams the matching hc_pre read", ST(RESID_BF16)},                                    \
             {"post", 2, {S_, HC}, "post of the matching hc_pre"},                                                 \
             {"comb", 3, {S_, HC, HC}, "comb of the matching hc_pre"}},                                            \
            {{"X", 3, {S_, HC, D_}, "the new hc streams", ST(RESID_BF16)}},                                                        \
            B(RESID_BF16), "oracle/hc.c dsv4q_hc_post", "model.py Block.hc_post", "hc_post", TAP, 0, "hc_post"}

static const dsv4q_stage_info table[DSV4Q_STAGE_COUNT] = {
    [DSV4Q_STAGE_EMBED] = {DSV4Q_STAGE_EMBED, "embed", 0, 0, 1, 0, 1, {{0}},
                           {{"X", 3, {S_, HC, D_}, "embedding row of each token, copied to the hc streams", ST(RESID_BF16)}},
                           0, "oracle/model.c dsv4q_run_step (embed.weight, exact BF16 decode)",
                           "model.py Transformer.forward embed + hc expand", "linear", "embed", 0, ""},
    HC_PRE_ROW(DSV4Q_STAGE_HC_ATTN_PRE, "hc_attn_pre", "hc_attn", "hc_attn_pre"),
    NORM_ROW(DSV4Q_STAGE_ATTN_NORM, "attn_norm", "attn_norm"),
    [DSV4Q_STAGE_ATTN] = {DSV4Q_STAGE_ATTN, "attn", 1, 1, 0, 1, 1,
                          {{"x", 2, {S_, D_}, "attn_norm output", ST(NORM_BF16)}},
                          {{"y", 2, {S_, D_}, "attention output after wo_b", ST(LINEAR_BF16)}},
                          B(GEMM_ACT_FP8) | B(KV_FP8) | B(CKV_FP8) | B(IDX_Q_FP4) | B(IDX_K_FP4) |
                              B(IDX_SCORE_BF16) | B(ATTN_P_BF16) | B(NORM_BF16) | B(LINEAR_BF16) |
                              B(QNORM_BF16) | B(ROPE_BF16) | B(ROPE_TABLE_F32) | B(ATTN_OUT_BF16) |
                              B(HADAMARD_BF16) | B(CMP_BF16) | B(IDX_PARTIAL_BF16),
                          "oracle/model.c attention (+ indexer, dsv4q_compressor, dsv4q_sparse_attn)",
                          "model.py Attention.forward (Compressor, Indexer, sparse_attn, wo_a, wo_b)",
                          "sparse_attn", "attn", 0, OPS_ATTN},
    HC_POST_ROW(DSV4Q_STAGE_HC_ATTN_POST, "hc_attn_post", "attn", ST(LINEAR_BF16), "hc_attn_post"),
    HC_PRE_ROW(DSV4Q_STAGE_HC_FFN_PRE, "hc_ffn_pre", "hc_ffn", "hc_ffn_pre"),
    NORM_ROW(DSV4Q_STAGE_FFN_NORM, "ffn_norm", "ffn_norm"),
    [DSV4Q_STAGE_MOE] = {DSV4Q_STAGE_MOE, "moe", 1, 0, 1, 1, 1,
                         {{"x", 2, {S_, D_}, "ffn_norm output (+ the call's token ids for hash layers)", ST(NORM_BF16)}},
                         {{"y", 2, {S_, D_}, "routed experts + shared expert", ST(MOE_BF16)}},
                         B(GEMM_ACT_FP8) | B(LINEAR_BF16) | B(MOE_BF16),
                         "oracle/moe.c dsv4q_moe_gate + dsv4q_moe",
                         "model.py MoE.forward (Gate.forward, Expert.forward)", "expert", "moe_out", 0, OPS_MOE},
    HC_POST_ROW(DSV4Q_STAGE_HC_FFN_POST, "hc_ffn_post", "moe", ST(MOE_BF16), "block_out"),
    [DSV4Q_STAGE_HEAD] = {DSV4Q_STAGE_HEAD, "head", 0, 0, 0, 1, 1,
                          {{"X", 2, {HC, D_}, "hc streams of the call's last token after the last layer", ST(RESID_BF16)}},
                          {{"logits", 1, {V_}, "logits of the call's last token", 0, ST(NORM_BF16)}},
                          B(RESID_BF16) | B(NORM_BF16),
                          "oracle/model.c head (dsv4q_hc_head, dsv4q_rmsnorm, dsv4q_linear)",
                          "model.py ParallelHead.forward (hc_head, norm, get_logits)", "linear", "logits", 0, OPS_HEAD},
    [DSV4Q_STAGE_MTP] = {DSV4Q_STAGE_MTP, "mtp", 0, 1, 1, 1, 1,
                         {{"X", 3, {S_, HC, D_}, "hc streams of the call after the last layer (+ the MTP token ids)",
                           ST(RESID_BF16)}},
                         {{"logits", 1, {V_}, "MTP logits of the call's last token", 0, ST(NORM_BF16)}},
                         B(GEMM_ACT_FP8) | B(KV_FP8) | B(CKV_FP8) | B(IDX_Q_FP4) | B(IDX_K_FP4) |
                             B(IDX_SCORE_BF16) | B(ATTN_P_BF16) | B(NORM_BF16) | B(LINEAR_BF16) | B(QNORM_BF16) |
                             B(ROPE_BF16) | B(ROPE_TABLE_F32) | B(ATTN_OUT_BF16) | B(HADAMARD_BF16) | B(CMP_BF16) |
                             B(IDX_PARTIAL_BF16) | B(RESID_BF16) | B(MOE_BF16),
                         "oracle/model.c dsv4q_run_mtp (enorm, hnorm, e_proj + h_proj, one block, hc_head, head)",
                         "model.py MTPBlock.forward", "linear", "mtp_logits", 1,
                         OPS_ATTN ", hc_pre, hc_post, hc_head, " OPS_MOE},
};

/* ---- the V4.1 table (stages.h dsv4q_stage41), one row per stage as V4's ---- */
/* clang-format off */

#define OPS41_ATTN                                                                                                     \
    "linear, rmsnorm, rope, act_quant, sparse_attn, compressor41, kv41_quant, index41_score, candidate_blocks, topk41"
#define B41_ATTN                                                                                                       \
    (B(GEMM_ACT_FP8) | B(KV_FP8) | B(IDX_Q_FP4) | B(IDX_K_FP4) | B(IDX_SCORE_BF16) | B(ATTN_P_BF16) | B(NORM_BF16) |   \
     B(LINEAR_BF16) | B(ROPE_BF16) | B(ROPE_TABLE_F32) | B(ATTN_OUT_BF16) | B(CMP_BF16) | B(IDX_PARTIAL_BF16) |        \
     B(CKV_FP4))

#define HC_PRE41_ROW(ID, NAME, WHICH, FROM, TO, TAP)                                                                   \
    [ID] = {ID, NAME, 1, 0, 0, 2, 4,                                                                                   \
            {{"X", 3, {S_, HC, D_}, "hc streams entering the sub-layer", ST(RESID_BF16)},                              \
             {"pre", 2, {S_, HC}, "the pre-mix it collapses with: " FROM " (FP32)"}},                                  \
            {{"y", 2, {S_, D_}, "sum_c pre_c X_c, the sub-layer's input (before its norm)", ST(RESID_BF16)},           \
             {"pre", 2, {S_, HC}, "this sub-layer's own pre-mix, handed on to " TO " (FP32)"},                         \
             {"post", 2, {S_, HC}, "post weights (FP32), input of the matching hc_post"},                              \
             {"comb", 3, {S_, HC, HC}, "Sinkhorn combination [source stream, target stream] (FP32)"}},                 \
            B(RESID_BF16),                                                                                             \
            "oracle/hc.c dsv4q_hc_mixes + dsv4q_hc_collapse (layers.N." WHICH "_fn/_scale/_base)",                     \
            "V4.1 model.py Block.hc_mixes, Block.hc_pre; kernel.py hc_split_sinkhorn_kernel", "hc_pre41", TAP, 0,     \
            "hc_pre41"}

static const dsv4q_stage_info table41[DSV4Q_S41_COUNT] = {
    [DSV4Q_S41_EMBED] = {DSV4Q_S41_EMBED, "embed", 0, 0, 1, 0, 1, {{0}},
                         {{"X", 3, {S_, HC, D_}, "embedding row of each token, copied to the hc streams",
                           ST(RESID_BF16)}},
                         0, "oracle/model_v41.c dsv4q_v41_step (embed.weight, exact BF16 decode)",
                         "V4.1 model.py Transformer.forward embed + repeat to hc", "linear", "embed", 0, ""},
    [DSV4Q_S41_ENGRAM] = {DSV4Q_S41_ENGRAM, "engram", 1, 1, 1, 1, 1,
                          {{"X", 3, {S_, HC, D_}, "hc streams entering the block (+ the call's token ids, hashed)",
                            ST(RESID_BF16)}},
                          {{"X", 3, {S_, HC, D_}, "the streams with the gated Engram value added", ST(RESID_BF16)}},
                          B(GEMM_ACT_FP8) | B(LINEAR_BF16) | B(RESID_BF16),
                          "oracle/engram_hash.c dsv4q_engram_hash_ids + oracle/engram41.c dsv4q_engram41",
                          "V4.1 engram.py NgramHashState; model.py Engram.forward", "engram41", "engram_out", 0,
                          "engram_hash, engram41"},
    HC_PRE41_ROW(DSV4Q_S41_HC_ATTN_PRE, "hc_attn_pre", "hc_attn",
                 "the previous block's FFN pre-mix, [1, 0, ..] at layer 0", "hc_ffn_pre", "hc_attn_pre"),
    NORM_ROW(DSV4Q_S41_ATTN_NORM, "attn_norm", "attn_norm"),
    [DSV4Q_S41_ATTN] = {DSV4Q_S41_ATTN, "attn", 1, 1, 0, 1, 1,
                        {{"x", 2, {S_, D_}, "attn_norm output", ST(NORM_BF16)}},
                        {{"y", 2, {S_, D_}, "attention output after wo_b", ST(LINEAR_BF16)}},
                        B41_ATTN,
                        "oracle/model_v41.c attention41 (+ dsv4q_compressor41, the indexer, dsv4q_topk41, "
                        "dsv4q_sparse_attn)",
                        "V4.1 model.py Attention.forward (Compressor, Indexer, select_candidate_blocks, sparse_attn, "
                        "wo_a, wo_b)",
                        "sparse_attn", "attn", 0, OPS41_ATTN},
    HC_POST_ROW(DSV4Q_S41_HC_ATTN_POST, "hc_attn_post", "attn", ST(LINEAR_BF16), "hc_attn_post"),
    HC_PRE41_ROW(DSV4Q_S41_HC_FFN_PRE, "hc_ffn_pre", "hc_ffn", "hc_attn_pre's pre-mix of this block",
                 "the next block's hc_attn_pre (or the head)", "hc_ffn_pre"),
    NORM_ROW(DSV4Q_S41_FFN_NORM, "ffn_norm", "ffn_norm"),
    [DSV4Q_S41_MOE] = {DSV4Q_S41_MOE, "moe", 1, 0, 0, 1, 1,
                       {{"x", 2, {S_, D_}, "ffn_norm output", ST(NORM_BF16)}},
                       {{"y", 2, {S_, D_}, "routed experts + shared expert", ST(MOE_BF16)}},
                       B(GEMM_ACT_FP8) | B(LINEAR_BF16) | B(MOE_BF16), "oracle/moe.c dsv4q_moe_gate41 + dsv4q_moe",
                       "V4.1 model.py MoE.forward (Gate.forward, Expert.forward)", "expert", "moe_out", 0,
                       "moe_gate41, expert"},
    HC_POST_ROW(DSV4Q_S41_HC_FFN_POST, "hc_ffn_post", "moe", ST(MOE_BF16), "block_out"),
    [DSV4Q_S41_HEAD] = {DSV4Q_S41_HEAD, "head", 0, 0, 0, 2, 1,
                        {{"X", 2, {HC, D_}, "hc streams of the call's last token after the last layer",
                          ST(RESID_BF16)},
                         {"pre", 1, {HC}, "the last block's FFN pre-mix of that token (FP32)"}},
                        {{"logits", 1, {V_}, "logits of the call's last token", 0, ST(NORM_BF16)}},
                        B(RESID_BF16) | B(NORM_BF16),
                        "oracle/model_v41.c dsv4q_v41_step (dsv4q_hc_collapse, dsv4q_rmsnorm, dsv4q_linear)",
                        "V4.1 model.py Transformer.forward (hc_pre with the last pre-mix, norm, head)", "linear",
                        "logits", 0, "linear, rmsnorm"},
};
/* clang-format on */

/* The table of an arch. */
typedef struct stab {
    const dsv4q_stage_info *rows;
    int n;
} stab;

static stab tab_of(int arch)
{
    return arch == DSV4Q_ARCH_V41 ? (stab){table41, DSV4Q_S41_COUNT} : (stab){table, DSV4Q_STAGE_COUNT};
}

#define TAP_NAME_(E, name, sel) [DSV4Q_TAP_##E] = #name,
static const char *const tap_names[DSV4Q_TAP_COUNT] = {DSV4Q_TAP_LIST(TAP_NAME_)};
#undef TAP_NAME_
#define TAP_SEL_(E, name, sel) [DSV4Q_TAP_##E] = sel,
static const unsigned char tap_sel[DSV4Q_TAP_COUNT] = {DSV4Q_TAP_LIST(TAP_SEL_)};
#undef TAP_SEL_

const char *dsv4q_tap_name(int tap) { return tap >= 0 && tap < DSV4Q_TAP_COUNT ? tap_names[tap] : NULL; }
int dsv4q_tap_is_selection(int tap) { return tap >= 0 && tap < DSV4Q_TAP_COUNT && tap_sel[tap]; }

int dsv4q_tap_find(const char *name)
{
    for (int i = 0; name && i < DSV4Q_TAP_COUNT; i++)
        if (!strcmp(tap_names[i], name)) return i;
    return -1;
}

static int check_tab(stab T, const char *which, char *err, size_t errlen)
{
    for (int i = 0; i < T.n; i++) {
        const dsv4q_stage_info *si = &T.rows[i];
        const char *why = NULL;
        if (si->id != i || !si->name) why = "id or name missing";
        else if (dsv4q_tap_find(si->tap) < 0) why = "its tap is not in DSV4Q_TAP_LIST";
        else if (!si->gate_op || !si->gate_op[0]) why = "no gate operator (it would go ungated)";
        else if (!si->ops) why = "no operator list (\"\" when it calls none)";
        else if (si->per_layer && i > 0 && !T.rows[i - 1].per_layer)
            for (int j = 0; j < i - 1 && !why; j++)
                if (T.rows[j].per_layer) why = "per-layer stages must be one contiguous run (forward order, S2)";
        for (int j = 0; !why && j < i; j++)
            if (!strcmp(T.rows[j].name, si->name)) why = "name appears twice";
        if (why) {
            snprintf(err, errlen, "%sstage table row %d (%s): %s", which, i, si->name ? si->name : "?", why);
            return -1;
        }
    }
    return 0;
}

int dsv4q_stage_table_check(char *err, size_t errlen)
{
    return check_tab(tab_of(DSV4Q_ARCH_V4), "", err, errlen) || check_tab(tab_of(DSV4Q_ARCH_V41), "V4.1 ", err, errlen)
               ? -1
               : 0;
}

/* The table's three runs (S2): model-level rows before the first per-layer
 * row, the per-layer rows, model-level rows after them. */
static void runs(stab T, int *first_pl, int *npl)
{
    int f = -1, n = 0;
    for (int i = 0; i < T.n; i++)
        if (T.rows[i].per_layer) {
            if (f < 0) f = i;
            n++;
        }
    *first_pl = f;
    *npl = n;
}

long dsv4q_stage_nslots_arch(int arch, int n_layers)
{
    const stab T = tab_of(arch);
    int f, n;
    runs(T, &f, &n);
    return (T.n - n) + (long)n * (n_layers > 0 ? n_layers : 0);
}

long dsv4q_stage_nslots(int n_layers) { return dsv4q_stage_nslots_arch(DSV4Q_ARCH_V4, n_layers); }

int dsv4q_stage_slot(int n_layers, long i, int *stage, int *layer)
{
    return dsv4q_stage_slot_arch(DSV4Q_ARCH_V4, n_layers, i, stage, layer);
}

int dsv4q_stage_slot_arch(int arch, int n_layers, long i, int *stage, int *layer)
{
    int f, n;
    runs(tab_of(arch), &f, &n);
    const long nl = n_layers > 0 ? n_layers : 0, mid = (long)n * nl;
    if (i < 0 || i >= dsv4q_stage_nslots_arch(arch, n_layers)) return -1;
    if (i < f) { *stage = (int)i; *layer = -1; return 0; }
    if (i < f + mid) { *stage = f + (int)((i - f) % n); *layer = (int)((i - f) / n); return 0; }
    *stage = (int)(i - mid + n);   /* past the per-layer rows */
    *layer = -1;
    return 0;
}

long dsv4q_stage_slot_of_arch(int arch, int n_layers, int stage, int layer)
{
    int f, n;
    const stab T = tab_of(arch);
    runs(T, &f, &n);
    if (stage < 0 || stage >= T.n) return -1;
    if (!T.rows[stage].per_layer) return stage < f ? stage : stage - n + (long)n * n_layers;
    if (layer < 0 || layer >= n_layers) return -1;
    return f + (long)layer * n + (stage - f);
}

long dsv4q_stage_slot_of(int n_layers, int stage, int layer)
{
    return dsv4q_stage_slot_of_arch(DSV4Q_ARCH_V4, n_layers, stage, layer);
}

int dsv4q_stage_cache_index(int stage, int layer, const dsv4q_config *cfg)
{
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(cfg->arch, stage);
    if (!si || !si->stateful) return -1;
    if (cfg->arch == DSV4Q_ARCH_V41 && stage == DSV4Q_S41_ENGRAM) {
        for (int e = 0; e < cfg->n_engram_layers; e++)
            if (cfg->engram_layer_ids[e] == layer) return cfg->n_layers + e;
        return -1;
    }
    return si->per_layer ? layer : cfg->n_layers;
}

static int listed(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x) return 1;
    return 0;
}

int dsv4q_v41_unready_source(const dsv4q_config *cfg, int layer, const long *next, long end)
{
    if (cfg->arch != DSV4Q_ARCH_V41 || layer < 0 || layer >= cfg->n_layers || !cfg->compress_ratios[layer]) return -1;
    for (int j = 0; j < layer; j++) {
        const int src = listed(cfg->kv_source_layers, cfg->n_kv_source_layers, j) ||
                        listed(cfg->index_source_layers, cfg->n_index_source_layers, j) ||
                        j == cfg->candidate_source_layer;
        if (src && cfg->compress_ratios[j] && next[j] != end) return j;
    }
    return -1;
}

int dsv4q_stage_cache_count(const dsv4q_config *cfg)
{
    const int extra = cfg->arch == DSV4Q_ARCH_V41 ? cfg->n_engram_layers : cfg->n_mtp_layers;
    return cfg->n_layers + (extra > 0 ? extra : 0);
}

const dsv4q_stage_info *dsv4q_stage_get(int id)
{
    return id >= 0 && id < DSV4Q_STAGE_COUNT ? &table[id] : NULL;
}

int dsv4q_stage_count_arch(int arch) { return tab_of(arch).n; }

const dsv4q_stage_info *dsv4q_stage_get_arch(int arch, int id)
{
    const stab T = tab_of(arch);
    return id >= 0 && id < T.n ? &T.rows[id] : NULL;
}

int dsv4q_stage_present(const dsv4q_config *cfg, int stage, int layer)
{
    if (cfg->arch == DSV4Q_ARCH_V41) {
        if (stage != DSV4Q_S41_ENGRAM) return 1;
        for (int e = 0; e < cfg->n_engram_layers; e++)
            if (cfg->engram_layer_ids[e] == layer) return 1;
        return 0;
    }
    return stage != DSV4Q_STAGE_MTP || cfg->n_mtp_layers > 0;
}

int dsv4q_stage_storage(const dsv4q_stage_tensor *t, uint64_t bs)
{
    return t->storage > 0 && ((bs >> (t->storage - 1)) & 1u) ? DSV4Q_DT_BF16 : DSV4Q_DT_F32;
}

static int find_in(stab T, const char *name)
{
    for (int i = 0; i < T.n; i++)
        if (!strcmp(T.rows[i].name, name)) return i;
    return -1;
}

int dsv4q_stage_find(const char *name) { return find_in(tab_of(DSV4Q_ARCH_V4), name); }

static int64_t dim_value(int d, const dsv4q_config *c, long s)
{
    switch (d) {
    case DSV4Q_SD_S: return s;
    case DSV4Q_SD_HC: return c->hc_mult;
    case DSV4Q_SD_DIM: return c->dim;
    case DSV4Q_SD_VOCAB: return c->vocab_size;
    default: return 0;
    }
}

static const char *dim_symbol(int d)
{
    switch (d) {
    case DSV4Q_SD_S: return "s";
    case DSV4Q_SD_HC: return "hc";
    case DSV4Q_SD_DIM: return "d";
    case DSV4Q_SD_VOCAB: return "vocab";
    default: return "?";
    }
}

int dsv4q_stage_shape(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, long s, int64_t *shape)
{
    for (int i = 0; i < t->ndim; i++) shape[i] = dim_value(t->dims[i], cfg, s);
    return t->ndim;
}

int64_t dsv4q_stage_numel(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, long s)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= dim_value(t->dims[i], cfg, s);
    return n;
}

void dsv4q_stage_shape_str(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < t->ndim && o < len; i++) {
        if (cfg && t->dims[i] != DSV4Q_SD_S)
            o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)dim_value(t->dims[i], cfg, 1));
        else
            o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", dim_symbol(t->dims[i]));
    }
    if (o < len) snprintf(buf + o, len - o, "]");
}

int dsv4q_stage_tensor_name(char *buf, size_t len, int stage, int layer, int io, int t)
{
    return dsv4q_stage_tensor_name_arch(DSV4Q_ARCH_V4, buf, len, stage, layer, io, t);
}

int dsv4q_stage_tensor_name_arch(int arch, char *buf, size_t len, int stage, int layer, int io, int t)
{
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(arch, stage);
    if (!si || io < 0 || io > 1 || t < 0 || t >= (io ? si->nout : si->nin)) return -1;
    int n = io ? si->nout : si->nin;
    const char *side = io ? "out" : "in";
    const char *tn = io ? si->out[t].name : si->in[t].name;
    char scope[24];
    if (si->per_layer) snprintf(scope, sizeof scope, "L%d", layer);
    else snprintf(scope, sizeof scope, "model");
    if (n == 1) snprintf(buf, len, "%s.%s.%s", scope, si->name, side);
    else snprintf(buf, len, "%s.%s.%s.%s", scope, si->name, side, tn);
    return 0;
}

/* "L12" -> 12, "model" -> -1; -2 if neither. */
static int parse_scope(const char *s, size_t n)
{
    if (n == 5 && !strncmp(s, "model", 5)) return -1;
    if (n < 2 || s[0] != 'L' || n > 8) return -2;
    int v = 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -2;
        if (i == 1 && s[i] == '0' && n > 2) return -2;   /* no leading zeros: one spelling */
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int dsv4q_stage_parse_name(const char *name, int *stage, int *layer, int *io, int *t, char *err, size_t errlen)
{
    return dsv4q_stage_parse_name_arch(DSV4Q_ARCH_V4, name, stage, layer, io, t, err, errlen);
}

int dsv4q_stage_parse_name_arch(int arch, const char *name, int *stage, int *layer, int *io, int *t, char *err,
                                size_t errlen)
{
    const stab T = tab_of(arch);
    char buf[DSV4Q_STAGE_NAME_MAX];
    if (strlen(name) >= sizeof buf) {
        snprintf(err, errlen, "tensor name '%.40s...' is too long for a stage tensor", name);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", name);
    char *part[5] = {0};
    int np = 0;
    for (char *p = buf, *save = NULL, *tok; np < 5 && (tok = strtok_r(p, ".", &save)); p = NULL) part[np++] = tok;
    if (np < 3 || np > 4 || strchr(name, '.') == name || strstr(name, "..") || name[strlen(name) - 1] == '.') {
        snprintf(err, errlen, "tensor '%s' is not a stage tensor name (L{layer}.{stage}.{in|out}[.{name}] or "
                 "model.{stage}.{in|out}[.{name}]; see `dsv4q stages`)", name);
        return -1;
    }
    int sc = parse_scope(part[0], strlen(part[0]));
    if (sc == -2) {
        snprintf(err, errlen, "tensor '%s': '%s' is neither L{layer} nor model", name, part[0]);
        return -1;
    }
    int st = find_in(T, part[1]);
    if (st < 0) {
        char list[256] = "";
        for (int i = 0; i < T.n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", T.rows[i].name);
        snprintf(err, errlen, "tensor '%s': unknown stage '%s' (stages: %s)", name, part[1], list);
        return -1;
    }
    const dsv4q_stage_info *si = &T.rows[st];
    if (si->per_layer != (sc >= 0)) {
        snprintf(err, errlen, "tensor '%s': stage '%s' is %s, so its tensors are named %s.%s...", name, si->name,
                 si->per_layer ? "per layer" : "model-level", si->per_layer ? "L{layer}" : "model", si->name);
        return -1;
    }
    int side = !strcmp(part[2], "in") ? 0 : !strcmp(part[2], "out") ? 1 : -1;
    if (side < 0) {
        snprintf(err, errlen, "tensor '%s': '%s' must be 'in' or 'out'", name, part[2]);
        return -1;
    }
    int n = side ? si->nout : si->nin;
    if (n == 0) {
        snprintf(err, errlen, "tensor '%s': stage '%s' has no %s tensors (token ids come from the metadata)", name,
                 si->name, part[2]);
        return -1;
    }
    const dsv4q_stage_tensor *ts = side ? si->out : si->in;
    int ti = -1;
    if (n == 1 && np == 3) ti = 0;
    else if (n > 1 && np == 4)
        for (int i = 0; i < n; i++)
            if (!strcmp(ts[i].name, part[3])) ti = i;
    if (ti < 0) {
        char want[200] = "";
        for (int i = 0; i < n; i++) {
            char nm[DSV4Q_STAGE_NAME_MAX];
            dsv4q_stage_tensor_name_arch(arch, nm, sizeof nm, st, sc < 0 ? 0 : sc, side, i);
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "", nm);
        }
        snprintf(err, errlen, "tensor '%s': stage '%s' %s tensors are named %s", name, si->name, part[2], want);
        return -1;
    }
    *stage = st;
    *layer = sc < 0 ? -1 : sc;
    *io = side;
    *t = ti;
    return 0;
}

void dsv4q_stage_print(FILE *f, const dsv4q_config *cfg, int md)
{
    if (md) {
        fprintf(f, "| stage | tensor | shape | stored (source) | what | boundaries inside | oracle | reference | gate op | "
                   "operators called |\n");
        fprintf(f, "|---|---|---|---|---|---|---|---|---|---|\n");
    } else {
        fprintf(f, "%-13s %-32s %-16s %-17s %s\n", "stage", "tensor", "shape", "stored (source)", "what");
    }
    const int arch = cfg ? cfg->arch : DSV4Q_ARCH_V4;
    const stab T = tab_of(arch);
    for (int i = 0; i < T.n; i++) {
        const dsv4q_stage_info *si = &T.rows[i];
        char braw[512], bnames[600];
        dsv4q_boundary_format(si->boundaries, braw, sizeof braw);
        size_t bo = 0;
        for (const char *p = braw; *p && bo + 2 < sizeof bnames; p++) {   /* "a,b" -> "a, b" */
            bnames[bo++] = *p;
            if (*p == ',') bnames[bo++] = ' ';
        }
        bnames[bo] = 0;
        if (!si->boundaries) snprintf(bnames, sizeof bnames, "-");
        int first = 1;
        for (int io = 0; io < 2; io++)
            for (int t = 0; t < (io ? si->nout : si->nin); t++) {
                const dsv4q_stage_tensor *ts = io ? &si->out[t] : &si->in[t];
                char name[DSV4Q_STAGE_NAME_MAX], shape[64];
                dsv4q_stage_tensor_name_arch(arch, name, sizeof name, i, 0, io, t);
                if (si->per_layer) {   /* L0.x -> L{l}.x */
                    char tmp[DSV4Q_STAGE_NAME_MAX];
                    snprintf(tmp, sizeof tmp, "L{l}%s", name + 2);
                    snprintf(name, sizeof name, "%s", tmp);
                }
                dsv4q_stage_shape_str(ts, cfg, shape, sizeof shape);
                char what[200];
                snprintf(what, sizeof what, "%s%s", ts->doc,
                         first && si->stateful ? "; STATEFUL: calls replayed in order" : "");
                char stored[48];
                if (ts->storage > 0) snprintf(stored, sizeof stored, "BF16 (%s)", dsv4q_boundary_get(ts->storage - 1)->name);
                else snprintf(stored, sizeof stored, "FP32");
                if (md)
                    fprintf(f, "| %s | `%s` | `%s` | %s | %s | %s | %s | %s | %s | %s |\n", first ? si->name : "", name,
                            shape, stored, what, first ? bnames : "", first ? si->oracle : "",
                            first ? si->reference : "", first ? si->gate_op : "",
                            first ? (si->ops[0] ? si->ops : "-") : "");
                else
                    fprintf(f, "%-13s %-32s %-16s %-17s %s\n", first ? si->name : "", name, shape, stored, what);
                first = 0;
            }
        if (si->uses_ids) {
            if (md) fprintf(f, "| | (metadata `token_ids`) | `[s]` | | the call's token ids | | | | | |\n");
            else fprintf(f, "%-13s %-32s %-16s %-17s %s\n", "", "(metadata token_ids)", "[s]", "", "the call's token ids");
        }
        if (!md)
            fprintf(f, "%-13s   boundaries: %s\n%-13s   oracle: %s\n%-13s   reference: %s; gate op: %s\n"
                       "%-13s   operators: %s\n", "", bnames, "", si->oracle, "", si->reference, si->gate_op, "",
                    si->ops[0] ? si->ops : "-");
    }
}
