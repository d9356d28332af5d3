/*
 * config.c - DeepSeek V4 hyper-parameters: parse, validate, emit.
 *
 * Owns: the mapping from both config.json dialects (inference/model.py
 * ModelArgs keys and Hugging Face keys) onto dsv4q_config, the rules a
 * config must satisfy before any operator sees it, and the canonical
 * inference-style serialisation. The built-in configs are config.json texts
 * in io/config_builtin.c, parsed here like any file.
 * Refuses: to guess. A field present under both spellings must agree; a
 * field of the wrong type or out of range is an error naming the key as it
 * was written; a required field has no default. Unknown keys are ignored
 * (configs carry tokenizer ids, max_batch_size, _source, ...), because a
 * loader that rejects them could not read a published checkpoint.
 *
 * DESIGN NOTES (tests cite C1..C5)
 *  C1. One table (FIELDS) lists every scalar key once: inference spelling,
 *      Hugging Face spelling ("a.b" = key b inside object a), kind, range,
 *      required-ness, struct member. Parse and emit both walk it, so the two
 *      cannot drift: config_parse(config_to_json(c)) == c field by field.
 *  C2. JSON null counts as absent, except expert_dtype / scale_fmt where
 *      null is a value ("same as dtype" / "no ue8m0").
 *  C3. Defaults (absent optional keys) follow inference/model.py ModelArgs:
 *      n_hash_layers 0, n_shared_experts 1, swiglu_limit 0 (no clamp),
 *      route_scale 1, score_func "sqrtsoftplus", norm_eps 1e-6,
 *      original_seq_len 0 (YaRN off), rope_theta 10000, rope_factor 40,
 *      beta_fast 32, beta_slow 1, compress_rope_theta 160000 (the published
 *      value; every published config sets it), hc_mult 4,
 *      hc_sinkhorn_iters 20, hc_eps 1e-6, dtype bf16, scale_ue8m0 0.
 *      n_mtp_layers defaults to 0, not to ModelArgs' 1: a config that does
 *      not mention MTP layers must not make loaders look for MTP weights.
 *  C4. compress_ratios has n_layers + n_mtp_layers entries; a list of
 *      exactly n_layers entries is accepted when n_mtp_layers > 0 and the
 *      MTP layers get ratio 0.
 *  C5. scale_ue8m0 = (scale_fmt == "ue8m0") || (scale_dtype == "fp8"), as
 *      the reference does (scale_fmt = "ue8m0" if scale_dtype == "fp8").
 *
 * DeepSeek V4.1 (the V4.1-Flash reference's ModelArgs; the fields and
 * rules are listed in docs/model.md, "V4.1 configs"):
 *  C6. A config is V4.1 when `model_type` (top level or inside an object
 *      `text_config`) is deepseek_v41 / deepseek_v41_text (or the legacy
 *      deepseek_v4.1 / deepseek_v4.1_text), or when any V4.1-only key is
 *      present (V41_ONLY_KEYS: kv/index source lists, the candidate source,
 *      engram_layer_ids); the reference's own config.json has no
 *      model_type. model_type deepseek_v4 with a V4.1-only key is refused.
 *      Everything else is V4 and parses exactly as before C6 existed.
 *  C7. V4.1 composite (Hugging Face) configs: every key this parser reads
 *      is taken from `text_config`; a copy at the top level must agree, one
 *      only at the top level (quantization_config, vision_config, ...) is
 *      used. A `dtype` that is a torch dtype name ("bfloat16", ...) is
 *      transformers' compute dtype, not ModelArgs.dtype, and is ignored.
 *  C8. V4.1 defaults are ModelArgs': norm_eps 1e-20, dtype fp8,
 *      expert_dtype fp4 (null or the dtype's own name: the dtype, as the
 *      reference's `None`), scale_ue8m0 1 (ue8m0 / E8M0 are module
 *      constants: scale_fmt other than "ue8m0" and scale_dtype other than
 *      "fp8" are refused), fp8_block 32 (V4: 128), gate_temp 1,
 *      norm_topk_prob true, candidate_source_layer -1 (any negative value
 *      reads as -1), engram_max_ngram_size 1, engram_pad_id 2,
 *      image_token_id 129264. n_hash_layers must be 0. The mtp.* layers of
 *      a V4.1 checkpoint are DSpark draft stages, built by the reference
 *      only when dspark_block_size > 0: then n_mtp_layers is kept (the
 *      stage count; compress_ratios entries n_layers.. must be 0) and the
 *      other dspark_* keys are read (DSPARK_FIELDS, dspark_target_layer_ids;
 *      dspark_markov_rank defaults to 256). With dspark_block_size 0,
 *      n_mtp_layers is set to 0, compress_ratios keeps its first n_layers
 *      entries and the dspark_* members hold their defaults, silently (the
 *      backbone is the model).
 *      vision_n_layers > 0 is accepted (vision tensors are not loaded).
 *  C9. to_json of a V4 config emits no V4.1 key (receipts and golden pins
 *      hash that text); a V4.1 config emits model_type "deepseek_v41" and
 *      its V4.1 keys (V41_FIELDS order, lists slotted in) after the V4 ones,
 *      then, only when dspark_block_size > 0, DSPARK_FIELDS and
 *      dspark_target_layer_ids (a DSpark-off text is as before DSpark).
 */
#include "base/file.h"
#include "io/config.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "oracle/engram_hash.h"

#define CFG_MAX_MTP 8   /* compress_ratios holds DSV4Q_MAX_LAYERS + 8 entries */


/* ------------------------------------------------------------------------ */
/* the field table (C1)                                                      */

typedef enum {
    FK_INT,
    FK_DBL,
    FK_I64,  /* int64_t (V4.1 only) */
    FK_BOOL, /* int 0/1 from true/false (V4.1 only) */
    FK_LAYER /* int: a layer id, any negative value read as -1 (V4.1 only) */
} cfg_kind;
typedef enum { FC_POS, FC_NONNEG } cfg_range;

typedef struct cfg_field {
    const char *key;       /* inference spelling (emitted) */
    const char *hf;        /* Hugging Face spelling, or NULL if the same */
    cfg_kind kind;
    cfg_range range;
    int required;
    size_t off;
} cfg_field;

#define FI(k, hf, rg, req, m) { k, hf, FK_INT, rg, req, offsetof(dsv4q_config, m) }
#define FD(k, hf, rg, req, m) { k, hf, FK_DBL, rg, req, offsetof(dsv4q_config, m) }
/* clang-format off */
#define FL(k, hf, rg, m)      { k, hf, FK_I64, rg, 0, offsetof(dsv4q_config, m) }
#define FB(k, hf, m)          { k, hf, FK_BOOL, FC_NONNEG, 0, offsetof(dsv4q_config, m) }
#define FY(k, hf, m)          { k, hf, FK_LAYER, FC_NONNEG, 0, offsetof(dsv4q_config, m) }
/* clang-format on */

/* Emission order of to_json = this order, with the non-scalar keys slotted
 * in by emit_json (score_func, compress_ratios, dtype, ...). */
static const cfg_field FIELDS[] = {
    FI("vocab_size",          NULL,                         FC_POS,    1, vocab_size),
    FI("dim",                 "hidden_size",                FC_POS,    1, dim),
    FI("moe_inter_dim",       "moe_intermediate_size",      FC_POS,    1, moe_inter_dim),
    FI("n_layers",            "num_hidden_layers",          FC_POS,    1, n_layers),
    FI("n_hash_layers",       "num_hash_layers",            FC_NONNEG, 0, n_hash_layers),
    FI("n_mtp_layers",        "num_nextn_predict_layers",   FC_NONNEG, 0, n_mtp_layers),
    FI("n_heads",             "num_attention_heads",        FC_POS,    1, n_heads),
    FI("n_routed_experts",    NULL,                         FC_POS,    1, n_routed_experts),
    FI("n_shared_experts",    NULL,                         FC_NONNEG, 0, n_shared_experts),
    FI("n_activated_experts", "num_experts_per_tok",        FC_POS,    1, n_activated_experts),
    FD("route_scale",         "routed_scaling_factor",      FC_POS,    0, route_scale),
    FD("swiglu_limit",        NULL,                         FC_NONNEG, 0, swiglu_limit),
    FI("q_lora_rank",         NULL,                         FC_POS,    1, q_lora_rank),
    FI("head_dim",            NULL,                         FC_POS,    1, head_dim),
    FI("rope_head_dim",       "qk_rope_head_dim",           FC_POS,    1, rope_head_dim),
    FD("norm_eps",            "rms_norm_eps",               FC_POS,    0, norm_eps),
    FI("o_groups",            NULL,                         FC_POS,    1, o_groups),
    FI("o_lora_rank",         NULL,                         FC_POS,    1, o_lora_rank),
    FI("window_size",         "sliding_window",             FC_POS,    1, window_size),
    FD("compress_rope_theta", NULL,                         FC_POS,    0, compress_rope_theta),
    FI("original_seq_len",    "rope_scaling.original_max_position_embeddings", FC_NONNEG, 0, original_seq_len),
    FD("rope_theta",          NULL,                         FC_POS,    0, rope_theta),
    FD("rope_factor",         "rope_scaling.factor",        FC_POS,    0, rope_factor),
    FD("beta_fast",           "rope_scaling.beta_fast",     FC_POS,    0, beta_fast),
    FD("beta_slow",           "rope_scaling.beta_slow",     FC_POS,    0, beta_slow),
    FI("index_n_heads",       NULL,                         FC_POS,    1, index_n_heads),
    FI("index_head_dim",      NULL,                         FC_POS,    1, index_head_dim),
    FI("index_topk",          NULL,                         FC_POS,    1, index_topk),
    FI("hc_mult",             NULL,                         FC_POS,    0, hc_mult),
    FI("hc_sinkhorn_iters",   NULL,                         FC_POS,    0, hc_sinkhorn_iters),
    FD("hc_eps",              NULL,                         FC_POS,    0, hc_eps),
};
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

/* The V4.1 scalar keys (C6-C9): parsed and emitted for V4.1 configs only,
 * after FIELDS, in this order; emit_json slots the lists in
 * (kv_source_layers and index_source_layers after norm_topk_prob,
 * engram_layer_ids and engram_num_embeddings after candidate_block_size).
 * The HF spellings are those of the V4.1 text_config (docs/model.md). */
/* clang-format off */
static const cfg_field V41_FIELDS[] = {
    FD("gate_temp",                    NULL,                              FC_POS,    0, gate_temp),
    FB("norm_topk_prob",               NULL,                              norm_topk_prob),
    FY("candidate_source_layer",       "candidate_source_layer_id",       candidate_source_layer),
    FI("candidate_topk_blocks",        NULL,                              FC_NONNEG, 0, candidate_topk_blocks),
    FI("candidate_block_size",         NULL,                              FC_NONNEG, 0, candidate_block_size),
    FI("engram_max_ngram_size",        NULL,                              FC_NONNEG, 0, engram_max_ngram_size),
    FL("engram_vocab_size",            NULL,                              FC_NONNEG, engram_vocab_size),
    FI("engram_n_heads",               NULL,                              FC_NONNEG, 0, engram_n_heads),
    FI("engram_head_dim",              NULL,                              FC_NONNEG, 0, engram_head_dim),
    FI("engram_pad_id",                NULL,                              FC_NONNEG, 0, engram_pad_id),
    FL("engram_compressed_vocab_size", NULL,                              FC_NONNEG, engram_compressed_vocab_size),
    FI("vision_n_layers",              "vision_config.num_hidden_layers", FC_NONNEG, 0, vision_n_layers),
    FI("image_token_id",               NULL,                              FC_NONNEG, 0, image_token_id),
    FI("dspark_block_size",            NULL,                              FC_NONNEG, 0, dspark_block_size),
};
/* The DSpark scalars (C8): read only when dspark_block_size > 0, emitted
 * after V41_FIELDS then (C9). */
static const cfg_field DSPARK_FIELDS[] = {
    FI("dspark_noise_token_id",        NULL,                              FC_NONNEG, 0, dspark_noise_token_id),
    FI("dspark_markov_rank",           NULL,                              FC_NONNEG, 0, dspark_markov_rank),
    FI("dspark_n_routed_experts",      NULL,                              FC_NONNEG, 0, dspark_n_routed_experts),
    FI("dspark_n_activated_experts",   "dspark_num_experts_per_tok",      FC_NONNEG, 0, dspark_n_activated_experts),
};
/* clang-format on */
#define NV41FIELDS (sizeof V41_FIELDS / sizeof V41_FIELDS[0])
#define NDSPARKFIELDS (sizeof DSPARK_FIELDS / sizeof DSPARK_FIELDS[0])

/* The V4.1 lists: inference key, HF key, member, count member, capacity.
 * engram_num_embeddings has no count of its own: its length must equal
 * engram_layer_ids' (checked at parse, which parses the ids first). */
typedef struct cfg_list {
    const char *key, *hf;
    int is64;         /* int64_t entries */
    size_t off, noff; /* noff: LST_NO_COUNT for engram_num_embeddings */
    int cap;
} cfg_list;
#define LST_NO_COUNT ((size_t)-1)
/* clang-format off */
#define LST(k, hf, is64, m, nm, cap) { k, hf, is64, offsetof(dsv4q_config, m), offsetof(dsv4q_config, nm), cap }
static const cfg_list V41_LISTS[] = {
    LST("kv_source_layers",    "kv_source_layer_ids",    0, kv_source_layers,    n_kv_source_layers,    DSV4Q_MAX_LAYERS),
    LST("index_source_layers", "index_source_layer_ids", 0, index_source_layers, n_index_source_layers, DSV4Q_MAX_LAYERS),
    LST("engram_layer_ids",    NULL,                     0, engram_layer_ids,    n_engram_layers,       DSV4Q_MAX_ENGRAM_LAYERS),
    { "engram_num_embeddings", NULL, 1, offsetof(dsv4q_config, engram_num_embeddings), LST_NO_COUNT, DSV4Q_MAX_ENGRAM_LAYERS },
    LST("dspark_target_layer_ids", NULL,                 0, dspark_target_layer_ids, n_dspark_target_layer_ids, DSV4Q_MAX_LAYERS),
};
#define DSPARK_LIST 4   /* V41_LISTS index of dspark_target_layer_ids (emitted with DSPARK_FIELDS) */
/* clang-format on */
#define NV41LISTS (sizeof V41_LISTS / sizeof V41_LISTS[0])

/* C6: the keys whose presence makes a config V4.1 (both spellings). */
static const char *const V41_ONLY_KEYS[] = {
    "kv_source_layers",       "kv_source_layer_ids",       "index_source_layers", "index_source_layer_ids",
    "candidate_source_layer", "candidate_source_layer_id", "engram_layer_ids",
};
#define V41_NAME "deepseek_v41"

/* C3 defaults for every optional field (V4.1: C8). */
static void cfg_defaults(dsv4q_config *c, dsv4q_arch arch)
{
    memset(c, 0, sizeof *c);
    c->n_hash_layers = 0;
    c->n_mtp_layers = 0;
    c->n_shared_experts = 1;
    snprintf(c->score_func, sizeof c->score_func, "%s", "sqrtsoftplus");
    c->route_scale = 1.0;
    c->swiglu_limit = 0.0;
    c->norm_eps = 1e-6;
    c->compress_rope_theta = 160000.0;
    c->original_seq_len = 0;
    c->rope_theta = 10000.0;
    c->rope_factor = 40.0;
    c->beta_fast = 32.0;
    c->beta_slow = 1.0;
    c->hc_mult = 4;
    c->hc_sinkhorn_iters = 20;
    c->hc_eps = 1e-6;
    c->dtype = DSV4Q_WDT_BF16;
    c->expert_dtype = DSV4Q_WDT_BF16;
    c->scale_ue8m0 = 0;
    /* the V4.1 members of a V4 config (never emitted, C9) */
    c->arch = arch;
    c->gate_temp = 1.0;
    c->candidate_source_layer = -1;
    if (arch == DSV4Q_ARCH_V4) {
        c->fp8_block = DSV4Q_FP8_BLOCK_V4;
        return;
    }
    c->fp8_block = DSV4Q_FP8_BLOCK_V41;
    c->norm_eps = 1e-20;
    c->norm_topk_prob = 1;
    c->engram_max_ngram_size = 1;
    c->engram_pad_id = 2;
    c->image_token_id = 129264;
    c->dspark_markov_rank = 256;
    c->dtype = DSV4Q_WDT_FP8;
    c->expert_dtype = DSV4Q_WDT_FP4;
    c->scale_ue8m0 = 1;
}

/* ------------------------------------------------------------------------ */
/* JSON access                                                               */

/* root[path], where path is "key" or "obj.key"; NULL when absent or null
 * (C2), and NULL when `obj` is not an object. */
static const json_t *cfg_lookup(const json_t *root, const char *path)
{
    const char *dot = strchr(path, '.');
    const json_t *v;
    if (!dot) {
        v = json_object_get(root, path);
    } else {
        char head[64];
        size_t n = (size_t)(dot - path);
        if (n >= sizeof head)
            return NULL;
        memcpy(head, path, n);
        head[n] = '\0';
        const json_t *o = json_object_get(root, head);
        v = json_is_object(o) ? json_object_get(o, dot + 1) : NULL;
    }
    return json_is_null(v) ? NULL : v;
}

/* Short JSON rendering of a value for messages ("abc" with quotes, 1.5). */
static void cfg_render(const json_t *v, char *out, size_t n)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!s) {
        snprintf(out, n, "?");
        return;
    }
    if (strlen(s) > 40)
        snprintf(out, n, "%.37s...", s);
    else
        snprintf(out, n, "%s", s);
    free(s);
}

static int cfg_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    return json_equal((json_t *)a, (json_t *)b);
}

/* The value of a key with two spellings; *used names the spelling found.
 * Both present and different -> error. */
static int cfg_get2(const json_t *root, const char *key, const char *hf, const json_t **out,
                    const char **used, const char *origin, char *err, size_t errlen)
{
    const json_t *a = cfg_lookup(root, key);
    const json_t *b = hf ? cfg_lookup(root, hf) : NULL;
    *out = a ? a : b;
    *used = a ? key : hf;
    if (a && b && !cfg_same(a, b)) {
        char ra[48], rb[48];
        cfg_render(a, ra, sizeof ra);
        cfg_render(b, rb, sizeof rb);
        return dsv4q_errf(err, errlen, "%s: field '%s' (%s) and '%s' (%s) disagree", origin, key, ra, hf, rb);
    }
    return 0;
}

static int cfg_int(const json_t *v, const char *used, cfg_range rg, int *out, const char *origin,
                   char *err, size_t errlen)
{
    const char *what = rg == FC_POS ? "a positive integer" : "a non-negative integer";
    double x;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < INT_MIN || i > INT_MAX)
            goto bad;
        x = (double)i;
    } else if (json_is_real(v)) {
        x = json_real_value(v);
        if (!(x == floor(x)) || x < INT_MIN || x > INT_MAX)
            goto bad;
    } else {
        goto bad;
    }
    if (rg == FC_POS ? !(x > 0) : !(x >= 0))
        goto bad;
    *out = (int)x;
    return 0;
bad:;
    char r[48];
    cfg_render(v, r, sizeof r);
    return dsv4q_errf(err, errlen, "%s: field '%s' must be %s, got %s", origin, used, what, r);
}

static int cfg_dbl(const json_t *v, const char *used, cfg_range rg, double *out, const char *origin,
                   char *err, size_t errlen)
{
    const char *what = rg == FC_POS ? "a positive number" : "a non-negative number";
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if (isfinite(x) && (rg == FC_POS ? x > 0 : x >= 0)) {
            *out = x;
            return 0;
        }
    }
    char r[48];
    cfg_render(v, r, sizeof r);
    return dsv4q_errf(err, errlen, "%s: field '%s' must be %s, got %s", origin, used, what, r);
}

/* An integral JSON number (integer, or a real with no fraction) in
 * [lo, hi]; 0, or -1 without a message. */
static int cfg_integral(const json_t *v, double lo, double hi, int64_t *out)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if ((double)i < lo || (double)i > hi) return -1;
        *out = (int64_t)i;
        return 0;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!(x == floor(x)) || x < lo || x > hi) return -1;
        *out = (int64_t)x;
        return 0;
    }
    return -1;
}

static int cfg_bad(const json_t *v, const char *used, const char *what, const char *origin, char *err, size_t errlen)
{
    char r[48];
    cfg_render(v, r, sizeof r);
    return dsv4q_errf(err, errlen, "%s: field '%s' must be %s, got %s", origin, used, what, r);
}

/* A V4.1 scalar of kind FK_I64 / FK_BOOL / FK_LAYER (FK_INT / FK_DBL go
 * through cfg_int / cfg_dbl as in FIELDS). */
static int cfg_v41_scalar(const cfg_field *f, const json_t *v, const char *used, void *dst, const char *origin,
                          char *err, size_t errlen)
{
    int64_t x;
    switch (f->kind) {
    case FK_INT: return cfg_int(v, used, f->range, (int *)dst, origin, err, errlen);
    case FK_DBL: return cfg_dbl(v, used, f->range, (double *)dst, origin, err, errlen);
    case FK_I64:
        if (cfg_integral(v, f->range == FC_POS ? 1 : 0, 9007199254740992.0, &x) != 0)
            return cfg_bad(v, used, f->range == FC_POS ? "a positive integer" : "a non-negative integer", origin, err,
                           errlen);
        *(int64_t *)dst = x;
        return 0;
    case FK_BOOL:
        if (json_is_boolean(v)) {
            *(int *)dst = json_is_true(v);
            return 0;
        }
        if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
            *(int *)dst = (int)json_integer_value(v);
            return 0;
        }
        return cfg_bad(v, used, "true or false", origin, err, errlen);
    case FK_LAYER:
        if (cfg_integral(v, INT_MIN, INT_MAX, &x) != 0)
            return cfg_bad(v, used, "an integer (a layer id, or negative for none)", origin, err, errlen);
        *(int *)dst = x < 0 ? -1 : (int)x;
        return 0;
    }
    return -1;
}

/* A string field: returns the string, or NULL + error if not a string. */
static const char *cfg_str(const json_t *v, const char *used, const char *origin, char *err, size_t errlen)
{
    if (json_is_string(v))
        return json_string_value(v);
    char r[48];
    cfg_render(v, r, sizeof r);
    dsv4q_errf(err, errlen, "%s: field '%s' must be a string, got %s", origin, used, r);
    return NULL;
}

static int parse_wdt(const char *s, int allow_fp4, dsv4q_wdtype *out)
{
    if (strcmp(s, "bf16") == 0) { *out = DSV4Q_WDT_BF16; return 0; }
    if (strcmp(s, "fp8") == 0) { *out = DSV4Q_WDT_FP8; return 0; }
    if (allow_fp4 && strcmp(s, "fp4") == 0) { *out = DSV4Q_WDT_FP4; return 0; }
    return -1;
}

static const char *wdt_name(dsv4q_wdtype t)
{
    switch (t) {
    case DSV4Q_WDT_BF16: return "bf16";
    case DSV4Q_WDT_FP8:  return "fp8";
    case DSV4Q_WDT_FP4:  return "fp4";
    }
    return "?";
}

/* ------------------------------------------------------------------------ */
/* parse                                                                     */

/* dtype, expert_dtype, scale_ue8m0 (C5), from both dialects. */
static int parse_precision(dsv4q_config *c, const json_t *root, const char *origin, char *err, size_t errlen)
{
    const char *s;
    /* quantization_config (HF): fmt "e4m3" / quant_method "fp8" => fp8. */
    const json_t *qc = cfg_lookup(root, "quantization_config");
    int hf_fp8 = 0, hf_ue8m0 = 0;
    if (qc) {
        if (!json_is_object(qc))
            return dsv4q_errf(err, errlen, "%s: field 'quantization_config' must be an object", origin);
        const json_t *fmt = cfg_lookup(root, "quantization_config.fmt");
        const json_t *qm = cfg_lookup(root, "quantization_config.quant_method");
        if (fmt) {
            if (!(s = cfg_str(fmt, "quantization_config.fmt", origin, err, errlen)))
                return -1;
            if (strcmp(s, "e4m3") != 0)
                return dsv4q_errf(err, errlen, "%s: field 'quantization_config.fmt' must be \"e4m3\", got \"%s\"",
                                  origin, s);
        }
        if (qm) {
            if (!(s = cfg_str(qm, "quantization_config.quant_method", origin, err, errlen)))
                return -1;
            if (strcmp(s, "fp8") != 0)
                return dsv4q_errf(
                    err, errlen, "%s: field 'quantization_config.quant_method' must be \"fp8\", got \"%s\"", origin, s);
        }
        hf_fp8 = 1;
        const json_t *sf = cfg_lookup(root, "quantization_config.scale_fmt");
        if (sf) {
            if (!(s = cfg_str(sf, "quantization_config.scale_fmt", origin, err, errlen)))
                return -1;
            if (strcmp(s, "ue8m0") != 0)
                return dsv4q_errf(err, errlen,
                                  "%s: field 'quantization_config.scale_fmt' must be \"ue8m0\" or null, got \"%s\"",
                                  origin, s);
            hf_ue8m0 = 1;
        }
    }

    const json_t *dt = cfg_lookup(root, "dtype");
    if (dt) {
        if (!(s = cfg_str(dt, "dtype", origin, err, errlen)))
            return -1;
        if (parse_wdt(s, 0, &c->dtype) != 0)
            return dsv4q_errf(err, errlen, "%s: field 'dtype' must be \"bf16\" or \"fp8\", got \"%s\"", origin, s);
        if (qc && c->dtype != DSV4Q_WDT_FP8)
            return dsv4q_errf(err, errlen, "%s: field 'dtype' (\"%s\") and 'quantization_config' (fp8) disagree",
                              origin, s);
    } else {
        c->dtype = hf_fp8 ? DSV4Q_WDT_FP8 : DSV4Q_WDT_BF16;
    }

    const json_t *ed = json_object_get(root, "expert_dtype");
    if (ed && !json_is_null(ed)) {
        if (!(s = cfg_str(ed, "expert_dtype", origin, err, errlen)))
            return -1;
        if (parse_wdt(s, 1, &c->expert_dtype) != 0)
            return dsv4q_errf(err, errlen,
                              "%s: field 'expert_dtype' must be \"fp4\", \"fp8\", \"bf16\" or null, "
                              "got \"%s\"",
                              origin, s);
    } else {
        c->expert_dtype = c->dtype;   /* null / absent: same as dtype */
    }

    int ue8m0 = hf_ue8m0;
    const json_t *sf = json_object_get(root, "scale_fmt");
    if (sf && !json_is_null(sf)) {
        if (!(s = cfg_str(sf, "scale_fmt", origin, err, errlen)))
            return -1;
        if (strcmp(s, "ue8m0") != 0)
            return dsv4q_errf(err, errlen, "%s: field 'scale_fmt' must be \"ue8m0\" or null, got \"%s\"", origin, s);
        ue8m0 = 1;
    }
    const json_t *sd = cfg_lookup(root, "scale_dtype");
    if (sd) {
        if (!(s = cfg_str(sd, "scale_dtype", origin, err, errlen)))
            return -1;
        if (strcmp(s, "fp8") == 0)
            ue8m0 = 1;
    }
    c->scale_ue8m0 = ue8m0;
    return 0;
}

/* dtype, expert_dtype, scale_ue8m0 of a V4.1 config (C8). */
static int parse_precision_v41(dsv4q_config *c, const json_t *root, const char *origin, char *err, size_t errlen)
{
    const char *s;
    const json_t *qc = cfg_lookup(root, "quantization_config");
    if (qc) {
        if (!json_is_object(qc))
            return dsv4q_errf(err, errlen, "%s: field 'quantization_config' must be an object", origin);
        static const char *const want[][2] = {
            {"quantization_config.fmt", "e4m3"},
            {"quantization_config.quant_method", "fp8"},
            {"quantization_config.scale_fmt", "ue8m0"},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            const json_t *v = cfg_lookup(root, want[i][0]);
            if (!v) continue;
            if (!(s = cfg_str(v, want[i][0], origin, err, errlen))) return -1;
            if (strcmp(s, want[i][1]) != 0)
                return dsv4q_errf(err, errlen, "%s: field '%s' must be \"%s\" for " V41_NAME ", got \"%s\"", origin,
                                  want[i][0], want[i][1], s);
        }
        const json_t *wb = cfg_lookup(root, "quantization_config.weight_block_size");
        if (wb && !(json_is_array(wb) && json_array_size(wb) == 2 && json_is_integer(json_array_get(wb, 0)) &&
                    json_integer_value(json_array_get(wb, 0)) == 32 && json_is_integer(json_array_get(wb, 1)) &&
                    json_integer_value(json_array_get(wb, 1)) == 32)) {
            char r[48];
            cfg_render(wb, r, sizeof r);
            return dsv4q_errf(err, errlen,
                              "%s: field 'quantization_config.weight_block_size' must be [32, 32] for " V41_NAME
                              " (FP8 32x32 blocks), got %s",
                              origin, r);
        }
    }
    const json_t *dt = cfg_lookup(root, "dtype");
    if (dt) {
        if (!(s = cfg_str(dt, "dtype", origin, err, errlen))) return -1;
        if (parse_wdt(s, 0, &c->dtype) != 0)
            return dsv4q_errf(err, errlen, "%s: field 'dtype' must be \"bf16\" or \"fp8\", got \"%s\"", origin, s);
        if (qc && c->dtype != DSV4Q_WDT_FP8)
            return dsv4q_errf(err, errlen, "%s: field 'dtype' (\"%s\") and 'quantization_config' (fp8) disagree",
                              origin, s);
    }
    /* model.py: experts are FP4 iff expert_dtype == "fp4", else the default dtype (None) */
    const json_t *ed = json_object_get(root, "expert_dtype");
    if (!ed) {
        c->expert_dtype = DSV4Q_WDT_FP4;
    } else if (json_is_null(ed)) {
        c->expert_dtype = c->dtype;
    } else {
        if (!(s = cfg_str(ed, "expert_dtype", origin, err, errlen))) return -1;
        dsv4q_wdtype e;
        if (parse_wdt(s, 1, &e) != 0 || (e != DSV4Q_WDT_FP4 && e != c->dtype))
            return dsv4q_errf(err, errlen,
                              "%s: field 'expert_dtype' must be \"fp4\", null or the dtype (\"%s\") for " V41_NAME
                              ", got \"%s\"",
                              origin, wdt_name(c->dtype), s);
        c->expert_dtype = e;
    }
    const json_t *sf = cfg_lookup(root, "scale_fmt");
    if (sf) {
        if (!(s = cfg_str(sf, "scale_fmt", origin, err, errlen))) return -1;
        if (strcmp(s, "ue8m0") != 0)
            return dsv4q_errf(err, errlen,
                              "%s: field 'scale_fmt' must be \"ue8m0\" or absent for " V41_NAME
                              " (its scales are E8M0 by construction), got \"%s\"",
                              origin, s);
    }
    const json_t *sd = cfg_lookup(root, "scale_dtype");
    if (sd) {
        if (!(s = cfg_str(sd, "scale_dtype", origin, err, errlen))) return -1;
        if (strcmp(s, "fp8") != 0)
            return dsv4q_errf(err, errlen,
                              "%s: field 'scale_dtype' must be \"fp8\" or absent for " V41_NAME ", got \"%s\"", origin,
                              s);
    }
    c->scale_ue8m0 = 1;
    return 0;
}

/* C4. */
static int parse_ratios(dsv4q_config *c, const json_t *root, const char *origin, char *err, size_t errlen)
{
    const json_t *v = cfg_lookup(root, "compress_ratios");
    if (!v) return dsv4q_errf(err, errlen, "%s: missing required field 'compress_ratios'", origin);
    if (!json_is_array(v))
        return dsv4q_errf(err, errlen, "%s: field 'compress_ratios' must be an array of integers", origin);
    size_t n = json_array_size(v);
    size_t want = (size_t)c->n_layers + (size_t)c->n_mtp_layers;
    if (n != want && !(n == (size_t)c->n_layers && c->n_mtp_layers > 0))
        return dsv4q_errf(err, errlen,
                          "%s: field 'compress_ratios' has %zu entries, expected n_layers + "
                          "n_mtp_layers = %zu",
                          origin, n, want);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT_MAX) {
            char r[48];
            cfg_render(e, r, sizeof r);
            return dsv4q_errf(err, errlen,
                              "%s: field 'compress_ratios' entry %zu must be a non-negative "
                              "integer, got %s",
                              origin, i, r);
        }
        c->compress_ratios[i] = (int)json_integer_value(e);
    }
    for (size_t i = n; i < want; i++)
        c->compress_ratios[i] = 0;   /* MTP layers not listed: ratio 0 */
    c->n_compress_ratios = (int)want;
    return 0;
}

/* One V4.1 list (V41_LISTS row): a JSON array of integers >= 0. */
static int parse_list(dsv4q_config *c, const json_t *root, const cfg_list *l, const char *origin, char *err,
                      size_t errlen)
{
    const json_t *v;
    const char *used;
    if (cfg_get2(root, l->key, l->hf, &v, &used, origin, err, errlen) != 0) return -1;
    if (!v && l->noff == LST_NO_COUNT && c->n_engram_layers > 0)
        return dsv4q_errf(err, errlen, "%s: missing field '%s' (engram_layer_ids has %d entries)", origin, l->key,
                          c->n_engram_layers);
    if (!v) return 0;
    if (!json_is_array(v)) return dsv4q_errf(err, errlen, "%s: field '%s' must be an array of integers", origin, used);
    const size_t n = json_array_size(v);
    if (n > (size_t)l->cap)
        return dsv4q_errf(err, errlen, "%s: field '%s' has %zu entries, at most %d supported", origin, used, n, l->cap);
    if (l->noff == LST_NO_COUNT && n != (size_t)c->n_engram_layers)
        return dsv4q_errf(err, errlen, "%s: field '%s' has %zu entries, but engram_layer_ids has %d", origin, used, n,
                          c->n_engram_layers);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        int64_t x;
        if (cfg_integral(e, 0, l->is64 ? 9007199254740992.0 : (double)INT_MAX, &x) != 0) {
            char r[48];
            cfg_render(e, r, sizeof r);
            return dsv4q_errf(err, errlen, "%s: field '%s' entry %zu must be a non-negative integer, got %s", origin,
                              used, i, r);
        }
        if (l->is64) ((int64_t *)((char *)c + l->off))[i] = x;
        else ((int *)((char *)c + l->off))[i] = (int)x;
    }
    if (l->noff != LST_NO_COUNT) *(int *)((char *)c + l->noff) = (int)n;
    return 0;
}

/* The V4.1 keys (C8): scalars, lists, the MTP/DSpark rule. */
static int parse_v41(dsv4q_config *c, const json_t *root, const char *origin, char *err, size_t errlen)
{
    for (size_t i = 0; i < NV41FIELDS; i++) {
        const cfg_field *f = &V41_FIELDS[i];
        const json_t *v;
        const char *used;
        if (cfg_get2(root, f->key, f->hf, &v, &used, origin, err, errlen) != 0) return -1;
        if (v && cfg_v41_scalar(f, v, used, (char *)c + f->off, origin, err, errlen) != 0) return -1;
    }
    for (size_t i = 0; i < NV41LISTS; i++)
        if (i != DSPARK_LIST && parse_list(c, root, &V41_LISTS[i], origin, err, errlen) != 0) return -1;
    if (c->dspark_block_size > 0) {
        /* C8: the mtp.* layers are DSpark stages; their keys are read */
        for (size_t i = 0; i < NDSPARKFIELDS; i++) {
            const cfg_field *f = &DSPARK_FIELDS[i];
            const json_t *v;
            const char *used;
            if (cfg_get2(root, f->key, f->hf, &v, &used, origin, err, errlen) != 0) return -1;
            if (v && cfg_v41_scalar(f, v, used, (char *)c + f->off, origin, err, errlen) != 0) return -1;
        }
        return parse_list(c, root, &V41_LISTS[DSPARK_LIST], origin, err, errlen);
    }
    /* C8: no DSpark (dspark_block_size 0): the reference builds no mtp.* layers, the backbone only */
    c->n_mtp_layers = 0;
    c->n_compress_ratios = c->n_layers;
    for (int i = c->n_layers; i < DSV4Q_MAX_LAYERS + CFG_MAX_MTP; i++) c->compress_ratios[i] = 0;
    return 0;
}

static int is_v41_type(const char *s)
{
    return !strcmp(s, "deepseek_v41") || !strcmp(s, "deepseek_v41_text") || !strcmp(s, "deepseek_v4.1") ||
           !strcmp(s, "deepseek_v4.1_text");
}

static int is_v4_type(const char *s) { return !strcmp(s, "deepseek_v4") || !strcmp(s, "deepseek_v4_text"); }

/* C6: V4 or V4.1. text is root's object text_config or NULL. */
static int detect_arch(const json_t *root, const json_t *text, dsv4q_arch *arch, const char *origin, char *err,
                       size_t errlen)
{
    const json_t *objs[2] = {root, text};
    const char *v41_type = NULL, *v4_type = NULL, *v41_key = NULL;
    for (int o = 0; o < 2; o++) {
        if (!objs[o]) continue;
        const json_t *mt = json_object_get(objs[o], "model_type");
        if (json_is_string(mt)) {
            const char *t = json_string_value(mt);
            if (is_v41_type(t)) v41_type = t;
            if (is_v4_type(t)) v4_type = t;
        }
        for (size_t k = 0; !v41_key && k < sizeof V41_ONLY_KEYS / sizeof V41_ONLY_KEYS[0]; k++)
            if (cfg_lookup(objs[o], V41_ONLY_KEYS[k])) v41_key = V41_ONLY_KEYS[k];
    }
    if (v4_type && (v41_type || v41_key))
        return v41_type
                   ? dsv4q_errf(err, errlen, "%s: field 'model_type' says both %s and %s", origin, v4_type, v41_type)
                   : dsv4q_errf(err, errlen, "%s: field 'model_type' (%s) but V4.1 field '%s' present", origin, v4_type,
                                v41_key);
    *arch = v41_type || v41_key ? DSV4Q_ARCH_V41 : DSV4Q_ARCH_V4;
    return 0;
}

/* transformers' torch dtype names: a `dtype` holding one is the compute
 * dtype of a Hugging Face config, not ModelArgs.dtype (C7). */
static int is_torch_dtype(const json_t *v)
{
    static const char *const names[] = {"bfloat16", "float16", "float32", "float64", "half", "float", "double"};
    if (!json_is_string(v)) return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(json_string_value(v), names[i])) return 1;
    return 0;
}

/* Add the top-level copy of `key` to merged (the text_config's keys), or
 * check that it agrees with the text_config's (C7). */
static int merge_key(json_t *merged, const json_t *root, const char *key, const char *origin, char *err, size_t errlen)
{
    const json_t *r = json_object_get(root, key), *t = json_object_get(merged, key);
    if (!strcmp(key, "dtype")) {
        if (is_torch_dtype(r)) r = NULL;
        if (is_torch_dtype(t)) json_object_del(merged, key), t = NULL;
    }
    if (!r || json_is_null(r)) return 0;
    if (t && !json_is_null(t)) {
        if (cfg_same(r, t)) return 0;
        char rr[48], rt[48];
        cfg_render(t, rt, sizeof rt);
        cfg_render(r, rr, sizeof rr);
        return dsv4q_errf(err, errlen, "%s: field '%s' in 'text_config' (%s) and at the top level (%s) disagree",
                          origin, key, rt, rr);
    }
    if (json_object_set(merged, key, (json_t *)r) != 0) return dsv4q_errf(err, errlen, "%s: out of memory", origin);
    return 0;
}

/* The top-level key of a FIELDS spelling ("rope_scaling.factor" -> "rope_scaling"). */
static int merge_spelling(json_t *merged, const json_t *root, const char *sp, const char *origin, char *err,
                          size_t errlen)
{
    if (!sp) return 0;
    char head[64];
    const char *dot = strchr(sp, '.');
    size_t n = dot ? (size_t)(dot - sp) : strlen(sp);
    if (n >= sizeof head) return 0;
    memcpy(head, sp, n);
    head[n] = '\0';
    return merge_key(merged, root, head, origin, err, errlen);
}

/* C7: the one object a V4.1 composite config is read from (a new
 * reference, or NULL with err). */
static json_t *merge_text_config(const json_t *root, const json_t *text, const char *origin, char *err, size_t errlen)
{
    json_t *m = json_copy((json_t *)text);
    if (!m) {
        dsv4q_errf(err, errlen, "%s: out of memory", origin);
        return NULL;
    }
    static const char *const other[] = {
        "name",      "score_func",  "scoring_func",        "compress_ratios", "dtype",        "expert_dtype",
        "scale_fmt", "scale_dtype", "quantization_config", "rope_scaling",    "vision_config"};
    int bad = 0;
    for (size_t i = 0; !bad && i < NFIELDS; i++)
        bad = merge_spelling(m, root, FIELDS[i].key, origin, err, errlen) ||
              merge_spelling(m, root, FIELDS[i].hf, origin, err, errlen);
    for (size_t i = 0; !bad && i < NV41FIELDS; i++)
        bad = merge_spelling(m, root, V41_FIELDS[i].key, origin, err, errlen) ||
              merge_spelling(m, root, V41_FIELDS[i].hf, origin, err, errlen);
    for (size_t i = 0; !bad && i < NDSPARKFIELDS; i++)
        bad = merge_spelling(m, root, DSPARK_FIELDS[i].key, origin, err, errlen) ||
              merge_spelling(m, root, DSPARK_FIELDS[i].hf, origin, err, errlen);
    for (size_t i = 0; !bad && i < NV41LISTS; i++)
        bad = merge_spelling(m, root, V41_LISTS[i].key, origin, err, errlen) ||
              merge_spelling(m, root, V41_LISTS[i].hf, origin, err, errlen);
    for (size_t i = 0; !bad && i < sizeof other / sizeof other[0]; i++)
        bad = merge_key(m, root, other[i], origin, err, errlen);
    if (bad) {
        json_decref(m);
        return NULL;
    }
    return m;
}

static int cfg_parse_body(dsv4q_config *c, const json_t *root, dsv4q_arch arch, const char *origin, char *err,
                          size_t errlen)
{
    cfg_defaults(c, arch);
    const json_t *nm = json_object_get(root, "name");
    if (json_is_string(nm))
        snprintf(c->name, sizeof c->name, "%s", json_string_value(nm));

    for (size_t i = 0; i < NFIELDS; i++) {
        const cfg_field *f = &FIELDS[i];
        const json_t *v;
        const char *used;
        if (cfg_get2(root, f->key, f->hf, &v, &used, origin, err, errlen) != 0)
            return -1;
        if (!v) {
            if (f->required)
                return f->hf ? dsv4q_errf(err, errlen, "%s: missing required field '%s' (Hugging Face: '%s')", origin,
                                          f->key, f->hf)
                             : dsv4q_errf(err, errlen, "%s: missing required field '%s'", origin, f->key);
            continue;
        }
        void *dst = (char *)c + f->off;
        int r = f->kind == FK_INT ? cfg_int(v, used, f->range, (int *)dst, origin, err, errlen)
                                  : cfg_dbl(v, used, f->range, (double *)dst, origin, err, errlen);
        if (r != 0)
            return -1;
    }

    /* rope_scaling (HF): an object whose type must be YaRN. */
    const json_t *rs = cfg_lookup(root, "rope_scaling");
    if (rs) {
        if (!json_is_object(rs))
            return dsv4q_errf(err, errlen, "%s: field 'rope_scaling' must be an object or null", origin);
        const char *tk = cfg_lookup(root, "rope_scaling.type") ? "rope_scaling.type" : "rope_scaling.rope_type";
        const json_t *ty = cfg_lookup(root, tk);
        if (ty) {
            const char *s = cfg_str(ty, tk, origin, err, errlen);
            if (!s)
                return -1;
            if (strcmp(s, "yarn") != 0 && strcmp(s, "deepseek_yarn") != 0)
                return dsv4q_errf(err, errlen, "%s: field '%s' must be \"yarn\", got \"%s\"", origin, tk, s);
        }
    }

    const json_t *sfv;
    const char *used;
    if (cfg_get2(root, "score_func", "scoring_func", &sfv, &used, origin, err, errlen) != 0)
        return -1;
    if (sfv) {
        const char *s = cfg_str(sfv, used, origin, err, errlen);
        if (!s)
            return -1;
        if (strlen(s) >= sizeof c->score_func ||
            (strcmp(s, "sqrtsoftplus") != 0 && strcmp(s, "softmax") != 0 && strcmp(s, "sigmoid") != 0))
            return dsv4q_errf(err, errlen,
                              "%s: field '%s' must be \"sqrtsoftplus\", \"softmax\" or \"sigmoid\", "
                              "got \"%s\"",
                              origin, used, s);
        snprintf(c->score_func, sizeof c->score_func, "%s", s);
    }

    if (c->n_layers > DSV4Q_MAX_LAYERS)
        return dsv4q_errf(err, errlen, "%s: field 'n_layers' is %d, at most %d supported", origin, c->n_layers,
                          DSV4Q_MAX_LAYERS);
    if (c->n_mtp_layers > CFG_MAX_MTP)
        return dsv4q_errf(err, errlen, "%s: field 'n_mtp_layers' is %d, at most %d supported", origin, c->n_mtp_layers,
                          CFG_MAX_MTP);
    if (parse_ratios(c, root, origin, err, errlen) != 0)
        return -1;
    if (arch == DSV4Q_ARCH_V4) return parse_precision(c, root, origin, err, errlen);
    if (parse_precision_v41(c, root, origin, err, errlen) != 0) return -1;
    return parse_v41(c, root, origin, err, errlen);
}

static int cfg_parse_root(dsv4q_config *c, const json_t *root, const char *origin, char *err, size_t errlen)
{
    const json_t *text = json_object_get(root, "text_config");
    if (!json_is_object(text)) text = NULL;
    dsv4q_arch arch = DSV4Q_ARCH_V4;
    if (detect_arch(root, text, &arch, origin, err, errlen) != 0) return -1;
    if (arch == DSV4Q_ARCH_V4 || !text) {
        if (arch == DSV4Q_ARCH_V41 && is_torch_dtype(json_object_get(root, "dtype"))) {
            json_t *m = json_copy((json_t *)root);
            if (!m) return dsv4q_errf(err, errlen, "%s: out of memory", origin);
            json_object_del(m, "dtype");
            int rc = cfg_parse_body(c, m, arch, origin, err, errlen);
            json_decref(m);
            return rc;
        }
        return cfg_parse_body(c, root, arch, origin, err, errlen);
    }
    json_t *m = merge_text_config(root, text, origin, err, errlen);
    if (!m) return -1;
    int rc = cfg_parse_body(c, m, arch, origin, err, errlen);
    json_decref(m);
    return rc;
}

int dsv4q_config_parse(dsv4q_config *cfg, const char *json, const char *origin, char *err, size_t errlen)
{
    const char *o = origin && origin[0] ? origin : "config";
    if (!json) return dsv4q_errf(err, errlen, "%s: no JSON text", o);
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return dsv4q_errf(err, errlen, "%s: invalid JSON (line %d, column %d): %s", o, je.line, je.column, je.text);
    int rc;
    if (!json_is_object(root)) rc = dsv4q_errf(err, errlen, "%s: top level is not a JSON object", o);
    else
        rc = cfg_parse_root(cfg, root, o, err, errlen);
    json_decref(root);
    if (rc != 0)
        return -1;
    char verr[384];
    if (dsv4q_config_validate(cfg, verr, sizeof verr) != 0) return dsv4q_errf(err, errlen, "%s: %s", o, verr);
    return 0;
}

int dsv4q_config_load(dsv4q_config *cfg, const char *path, char *err, size_t errlen)
{
    if (!path) return dsv4q_errf(err, errlen, "config: NULL path");
    char *text;
    size_t len;
    if (dsv4q_file_read_all(path, "config", DSV4Q_LIMIT_CONFIG, &text, &len, err, errlen) != 0)
        return -1;
    text[len] = '\0';
    if (memchr(text, '\0', len))
        len = 0;   /* an embedded NUL: let the parser report it as invalid JSON */
    int rc = dsv4q_config_parse(cfg, len ? text : "", path, err, errlen);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* validate                                                                  */

#define VREQ(cond, ...)                                                                                                \
    do {                                                                                                               \
        if (!(cond)) return dsv4q_errf(err, errlen, __VA_ARGS__);                                                      \
    } while (0)

static int is_pow2(int x)
{
    return x > 0 && (x & (x - 1)) == 0;
}

/* The nearest layer of list[n] at or before layer i, or -1. */
static int nearest_at_or_before(const int *list, int n, int i)
{
    int best = -1;
    for (int k = 0; k < n && list[k] <= i; k++) best = list[k];
    return best;
}

static int in_list(const int *list, int n, int x)
{
    for (int k = 0; k < n; k++)
        if (list[k] == x) return 1;
    return 0;
}

/* Rule 2 of docs/model.md (V4.1 configs): strictly increasing layer ids of
 * ratio > 0 layers. */
static int check_sources(const dsv4q_config *c, const int *list, int n, const char *key, char *err, size_t errlen)
{
    for (int k = 0; k < n; k++) {
        const int L = list[k];
        VREQ(L >= 0 && L < c->n_layers, "field '%s' entry %d is %d, outside the layers [0, %d)", key, k, L,
             c->n_layers);
        VREQ(k == 0 || L > list[k - 1],
             "field '%s' entry %d (%d) must be greater than entry %d (%d): ascending, no repeats", key, k, L, k - 1,
             list[k - 1]);
        VREQ(c->compress_ratios[L] > 0,
             "field '%s' entry %d is layer %d, whose compress ratio is 0 (a source compresses)", key, k, L);
    }
    return 0;
}

/* Work bound of the prime search (trial division: about sqrt(V) per prime,
 * n_primes primes): the released Flash needs 48 * 4000; a hostile config
 * could ask for 30720 primes near 2^40. */
#define CFG_PRIME_WORK_MAX (1.0 * (1 << 28))

/* The FP8 block rules of V4 (blk 128) and V4.1 (blk 32): every FP8
 * linear's input dim, and the FP4/FP8 experts' dims, are a whole number of
 * blk-blocks (act_quant), each refusal naming the field. */
static int validate_blocks(const dsv4q_config *c, int blk, char *err, size_t errlen)
{
    if (c->dtype == DSV4Q_WDT_FP8) {
        VREQ(c->dim % blk == 0, "field 'dim' (%d) must be a multiple of %d for dtype fp8", c->dim, blk);
        VREQ(c->q_lora_rank % blk == 0, "field 'q_lora_rank' (%d) must be a multiple of %d for dtype fp8",
             c->q_lora_rank, blk);
        VREQ(((long long)c->o_groups * c->o_lora_rank) % blk == 0,
             "field 'o_lora_rank' (o_groups * o_lora_rank = %lld) must be a multiple of %d for dtype fp8",
             (long long)c->o_groups * c->o_lora_rank, blk);
        VREQ(c->moe_inter_dim % blk == 0, "field 'moe_inter_dim' (%d) must be a multiple of %d for dtype fp8",
             c->moe_inter_dim, blk);
    }
    if (c->expert_dtype != DSV4Q_WDT_BF16) {
        const char *e = wdt_name(c->expert_dtype);
        VREQ(c->dim % blk == 0, "field 'dim' (%d) must be a multiple of %d for expert_dtype %s", c->dim, blk, e);
        VREQ(c->moe_inter_dim % blk == 0, "field 'moe_inter_dim' (%d) must be a multiple of %d for expert_dtype %s",
             c->moe_inter_dim, blk, e);
    }
    return 0;
}

/* Rules 7-8 (Engram). */
static int validate_engram(const dsv4q_config *c, char *err, size_t errlen)
{
    const int n = c->n_engram_layers;
    VREQ(n >= 0 && n <= DSV4Q_MAX_ENGRAM_LAYERS, "field 'engram_layer_ids' has %d entries, at most %d supported", n,
         DSV4Q_MAX_ENGRAM_LAYERS);
    if (n == 0) return 0;
    for (int l = 0; l < n; l++) {
        const int L = c->engram_layer_ids[l];
        VREQ(L >= 0 && L < c->n_layers, "field 'engram_layer_ids' entry %d is %d, outside the layers [0, %d)", l, L,
             c->n_layers);
        for (int j = 0; j < l; j++)
            VREQ(c->engram_layer_ids[j] != L, "field 'engram_layer_ids' lists layer %d twice (entries %d and %d)", L, j,
                 l);
    }
    VREQ(c->engram_max_ngram_size >= 2 && c->engram_max_ngram_size <= DSV4Q_ENGRAM_MAX_NGRAM,
         "field 'engram_max_ngram_size' is %d, must be 2..%d with Engram layers", c->engram_max_ngram_size,
         DSV4Q_ENGRAM_MAX_NGRAM);
    VREQ(c->engram_n_heads >= 1 && c->engram_n_heads <= DSV4Q_ENGRAM_MAX_HEADS,
         "field 'engram_n_heads' is %d, must be 1..%d with Engram layers", c->engram_n_heads, DSV4Q_ENGRAM_MAX_HEADS);
    VREQ(c->engram_head_dim > 0 && c->engram_head_dim % 32 == 0,
         "field 'engram_head_dim' is %d, must be a positive multiple of 32 (one E8M0 scale per 32)",
         c->engram_head_dim);
    VREQ(c->engram_vocab_size >= 1 && c->engram_vocab_size <= DSV4Q_ENGRAM_MAX_VOCAB_SIZE,
         "field 'engram_vocab_size' is %lld, must be 1..2^40 with Engram layers", (long long)c->engram_vocab_size);
    VREQ(c->engram_compressed_vocab_size >= 1 && c->engram_compressed_vocab_size <= INT32_MAX,
         "field 'engram_compressed_vocab_size' is %lld, must be 1..2^31-1 with Engram layers",
         (long long)c->engram_compressed_vocab_size);
    VREQ(c->engram_pad_id >= 0 && c->engram_pad_id < c->vocab_size,
         "field 'engram_pad_id' is %d, outside the vocabulary [0, %d)", c->engram_pad_id, c->vocab_size);
    const int C = (c->engram_max_ngram_size - 1) * c->engram_n_heads;
    const long np = (long)n * C;
    VREQ((double)np * sqrt((double)c->engram_vocab_size) <= CFG_PRIME_WORK_MAX,
         "field 'engram_vocab_size' (%lld) with %ld bucket primes: the prime search is beyond this implementation's "
         "work bound",
         (long long)c->engram_vocab_size, np);
    int64_t *pr = malloc(sizeof(int64_t) * (size_t)np);
    if (!pr) return dsv4q_errf(err, errlen, "config: out of memory checking 'engram_num_embeddings'");
    if (dsv4q_engram_primes(pr, n, c->engram_max_ngram_size, c->engram_n_heads, c->engram_vocab_size) != 0) {
        free(pr);
        return dsv4q_errf(err, errlen, "field 'engram_vocab_size': the bucket primes cannot be derived");
    }
    for (int l = 0; l < n; l++) {
        int64_t sum = 0;
        for (int k = 0; k < C; k++) sum += pr[(long)l * C + k];
        if (c->engram_num_embeddings[l] != sum) {
            free(pr);
            return dsv4q_errf(
                err, errlen, "field 'engram_num_embeddings' entry %d is %lld, but layer %d's bucket primes sum to %lld",
                l, (long long)c->engram_num_embeddings[l], c->engram_layer_ids[l], (long long)sum);
        }
    }
    free(pr);
    return 0;
}

/* The DSpark rules (C8; model.py DSparkBlock, ModelArgs.get_moe_config).
 * Off (dspark_block_size 0): no stages and the dspark_* defaults. On:
 * every stage window-only, targets distinct backbone layers (at least one
 * when there is a stage: stage 0's main_proj reads them), the noise token
 * in the vocabulary, a positive Markov rank, the stage expert counts
 * consistent. */
static int validate_dspark(const dsv4q_config *c, char *err, size_t errlen)
{
    if (c->dspark_block_size == 0) {
        VREQ(c->n_mtp_layers == 0,
             "field 'n_mtp_layers' is %d, must be 0 for " V41_NAME " without DSpark (dspark_block_size 0)",
             c->n_mtp_layers);
        VREQ(c->n_dspark_target_layer_ids == 0 && c->dspark_noise_token_id == 0 && c->dspark_markov_rank == 256 &&
                 c->dspark_n_routed_experts == 0 && c->dspark_n_activated_experts == 0,
             "field 'dspark_block_size' is 0 but other dspark_* fields are set");
        return 0;
    }
    VREQ(c->dspark_block_size > 0, "field 'dspark_block_size' must be non-negative, got %d", c->dspark_block_size);
    for (int j = 0; j < c->n_mtp_layers; j++)
        VREQ(c->compress_ratios[c->n_layers + j] == 0,
             "field 'compress_ratios' entry %d (DSpark stage %d) is %d, must be 0 (DSpark attention is window-only)",
             c->n_layers + j, j, c->compress_ratios[c->n_layers + j]);
    const int nt = c->n_dspark_target_layer_ids;
    VREQ(nt >= 0 && nt <= DSV4Q_MAX_LAYERS, "field 'dspark_target_layer_ids': count %d out of range", nt);
    VREQ(c->n_mtp_layers == 0 || nt >= 1,
         "field 'dspark_target_layer_ids' is empty, but DSpark stage 0's main_proj needs at least one target layer");
    for (int k = 0; k < nt; k++) {
        const int L = c->dspark_target_layer_ids[k];
        VREQ(L >= 0 && L < c->n_layers, "field 'dspark_target_layer_ids' entry %d is %d, outside the layers [0, %d)", k,
             L, c->n_layers);
        for (int q = 0; q < k; q++)
            VREQ(c->dspark_target_layer_ids[q] != L, "field 'dspark_target_layer_ids' entry %d repeats layer %d", k, L);
    }
    VREQ(c->dspark_noise_token_id >= 0 && c->dspark_noise_token_id < c->vocab_size,
         "field 'dspark_noise_token_id' is %d, outside the vocabulary [0, %d)", c->dspark_noise_token_id,
         c->vocab_size);
    VREQ(c->dspark_markov_rank >= 1, "field 'dspark_markov_rank' must be positive, got %d", c->dspark_markov_rank);
    VREQ(c->dspark_n_routed_experts >= 0 && c->dspark_n_activated_experts >= 0,
         "field 'dspark_n_routed_experts' / 'dspark_n_activated_experts' must be non-negative, got %d / %d",
         c->dspark_n_routed_experts, c->dspark_n_activated_experts);
    const int nr = c->dspark_n_routed_experts ? c->dspark_n_routed_experts : c->n_routed_experts;
    const int na = c->dspark_n_activated_experts ? c->dspark_n_activated_experts : c->n_activated_experts;
    VREQ(na <= nr, "field 'dspark_n_activated_experts' (%d activated) exceeds the DSpark stages' %d routed experts", na,
         nr);
    return 0;
}

/* Every rule a V4.1 config must satisfy (docs/model.md, V4.1 configs,
 * rules 1-15); the V4 rules it shares are restated here, the V4 block rules
 * (128, Hadamard, ratios 4/128) do not apply. */
static int validate_v41(const dsv4q_config *c, char *err, size_t errlen)
{
    VREQ(c->fp8_block == DSV4Q_FP8_BLOCK_V41, "the FP8 block (fp8_block) is %d, must be 32 for " V41_NAME,
         c->fp8_block);
    VREQ(c->n_hash_layers == 0, "field 'n_hash_layers' is %d, must be 0 for " V41_NAME " (no hash-routed layers)",
         c->n_hash_layers);
    if (validate_dspark(c, err, errlen)) return -1;
    VREQ(c->scale_ue8m0 == 1, "field 'scale_fmt' must be \"ue8m0\" for " V41_NAME);
    for (int i = 0; i < c->n_compress_ratios; i++) {
        int r = c->compress_ratios[i];
        VREQ(r == 0 || r == 1 || r == 2, "field 'compress_ratios' entry %d is %d, must be 0, 1 or 2 for " V41_NAME, i,
             r);
    }
    VREQ(c->rope_head_dim % 2 == 0, "field 'rope_head_dim' must be even, got %d", c->rope_head_dim);
    VREQ(c->rope_head_dim < c->head_dim, "field 'rope_head_dim' (%d) must be less than head_dim (%d)", c->rope_head_dim,
         c->head_dim);
    VREQ(c->head_dim % 32 == 0,
         "field 'head_dim' (%d) must be a multiple of 32 (window KV act-quant blocks over the whole vector)",
         c->head_dim);
    VREQ(c->index_head_dim % 32 == 0, "field 'index_head_dim' must be a multiple of 32 (FP4 block), got %d",
         c->index_head_dim);
    VREQ(c->index_head_dim >= c->rope_head_dim, "field 'index_head_dim' (%d) must be at least rope_head_dim (%d)",
         c->index_head_dim, c->rope_head_dim);
    VREQ(c->n_heads % c->o_groups == 0, "field 'o_groups' (%d) must divide n_heads (%d)", c->o_groups, c->n_heads);
    VREQ(c->n_activated_experts <= c->n_routed_experts,
         "field 'n_activated_experts' (%d) exceeds n_routed_experts (%d)", c->n_activated_experts, c->n_routed_experts);
    VREQ(c->n_routed_experts <= DSV4Q_MAX_EXPERTS, "field 'n_routed_experts' is %d, at most %d supported",
         c->n_routed_experts, DSV4Q_MAX_EXPERTS);
    VREQ(c->n_shared_experts == 1, "field 'n_shared_experts' must be 1 (the reference asserts it), got %d",
         c->n_shared_experts);
    VREQ(c->hc_mult >= 1, "field 'hc_mult' must be at least 1, got %d", c->hc_mult);
    VREQ(c->hc_sinkhorn_iters >= 1, "field 'hc_sinkhorn_iters' must be at least 1, got %d", c->hc_sinkhorn_iters);
    VREQ(strcmp(c->score_func, "sqrtsoftplus") == 0 || strcmp(c->score_func, "softmax") == 0 ||
             strcmp(c->score_func, "sigmoid") == 0,
         "field 'score_func' must be \"sqrtsoftplus\", \"softmax\" or \"sigmoid\", got \"%.15s\"", c->score_func);
    VREQ(c->dtype == DSV4Q_WDT_BF16 || c->dtype == DSV4Q_WDT_FP8, "field 'dtype' must be bf16 or fp8, got %d",
         (int)c->dtype);
    VREQ(c->expert_dtype == DSV4Q_WDT_FP4 || c->expert_dtype == c->dtype,
         "field 'expert_dtype' must be fp4 or the dtype for " V41_NAME ", got %d", (int)c->expert_dtype);
    VREQ(isfinite(c->gate_temp) && c->gate_temp > 0, "field 'gate_temp' must be positive and finite, got %g",
         c->gate_temp);
    VREQ(c->norm_topk_prob == 0 || c->norm_topk_prob == 1, "field 'norm_topk_prob' must be true or false, got %d",
         c->norm_topk_prob);
    if (validate_blocks(c, DSV4Q_FP8_BLOCK_V41, err, errlen)) return -1;

    /* sources (rules 2-5) */
    const int nk = c->n_kv_source_layers, ni = c->n_index_source_layers;
    VREQ(nk >= 0 && nk <= DSV4Q_MAX_LAYERS && ni >= 0 && ni <= DSV4Q_MAX_LAYERS,
         "field 'kv_source_layers' / 'index_source_layers': counts %d / %d out of range", nk, ni);
    if (check_sources(c, c->kv_source_layers, nk, "kv_source_layers", err, errlen)) return -1;
    if (check_sources(c, c->index_source_layers, ni, "index_source_layers", err, errlen)) return -1;
    for (int i = 0; i < c->n_layers; i++) {
        const int r = c->compress_ratios[i];
        if (r == 0) continue;
        const int kv = nearest_at_or_before(c->kv_source_layers, nk, i);
        VREQ(kv >= 0, "field 'kv_source_layers': layer %d has compress ratio %d but no kv source at or before it", i,
             r);
        VREQ(c->compress_ratios[kv] == r,
             "field 'kv_source_layers': layer %d has compress ratio %d but its kv source (layer %d) has ratio %d", i, r,
             kv, c->compress_ratios[kv]);
        const int ix = nearest_at_or_before(c->index_source_layers, ni, i);
        if (ix == i) {
            /* its index keys: made by its kv source, which must run an indexer to make them */
            VREQ(in_list(c->index_source_layers, ni, kv),
                 "field 'index_source_layers': layer %d reads its index keys from kv source layer %d, which is not "
                 "an index source (only a layer in both lists makes index keys)",
                 i, kv);
            continue;
        }
        VREQ(ix >= 0, "field 'index_source_layers': layer %d has compress ratio %d but no index source at or before it",
             i, r);
        VREQ(c->compress_ratios[ix] == r,
             "field 'index_source_layers': layer %d has compress ratio %d but its index source (layer %d) has ratio %d",
             i, r, ix, c->compress_ratios[ix]);
    }
    const int cs = c->candidate_source_layer;
    VREQ(c->candidate_topk_blocks >= 0 && c->candidate_block_size >= 0,
         "field 'candidate_topk_blocks' / 'candidate_block_size' must be non-negative, got %d / %d",
         c->candidate_topk_blocks, c->candidate_block_size);
    if (cs >= 0) {
        VREQ(in_list(c->index_source_layers, ni, cs),
             "field 'candidate_source_layer' is %d, which is not one of index_source_layers", cs);
        VREQ(c->candidate_topk_blocks >= 1,
             "field 'candidate_topk_blocks' is %d, must be at least 1 with a candidate source",
             c->candidate_topk_blocks);
        VREQ(c->candidate_block_size >= 1,
             "field 'candidate_block_size' is %d, must be at least 1 with a candidate source", c->candidate_block_size);
        for (int k = 0; k < ni; k++) {
            const int L = c->index_source_layers[k];
            VREQ(L <= cs || c->compress_ratios[L] == c->compress_ratios[cs],
                 "field 'candidate_source_layer': index source layer %d (ratio %d) after the candidate source "
                 "(layer %d, ratio %d) must have its ratio (the candidate mask has its shape)",
                 L, c->compress_ratios[L], cs, c->compress_ratios[cs]);
        }
    } else {
        VREQ(cs == -1, "field 'candidate_source_layer' is %d, must be -1 or a layer", cs);
    }
    if (validate_engram(c, err, errlen)) return -1;
    VREQ(c->vision_n_layers >= 0, "field 'vision_n_layers' must be non-negative, got %d", c->vision_n_layers);
    VREQ(c->image_token_id >= 0, "field 'image_token_id' must be non-negative, got %d", c->image_token_id);
    return 0;
}

int dsv4q_config_validate(const dsv4q_config *c, char *err, size_t errlen)
{
    if (!c) return dsv4q_errf(err, errlen, "config: NULL");
    /* positivity / ranges of every table field */
    for (size_t i = 0; i < NFIELDS; i++) {
        const cfg_field *f = &FIELDS[i];
        const void *p = (const char *)c + f->off;
        if (f->kind == FK_INT) {
            int x = *(const int *)p;
            VREQ(f->range == FC_POS ? x > 0 : x >= 0, "field '%s' must be %s, got %d", f->key,
                 f->range == FC_POS ? "positive" : "non-negative", x);
        } else {
            double x = *(const double *)p;
            VREQ(isfinite(x) && (f->range == FC_POS ? x > 0 : x >= 0), "field '%s' must be %s, got %g",
                 f->key, f->range == FC_POS ? "positive and finite" : "non-negative and finite", x);
        }
    }
    VREQ(memchr(c->name, '\0', sizeof c->name) != NULL, "field 'name' is not NUL-terminated");
    VREQ(c->n_layers <= DSV4Q_MAX_LAYERS, "field 'n_layers' is %d, at most %d supported",
         c->n_layers, DSV4Q_MAX_LAYERS);
    VREQ(c->n_mtp_layers <= CFG_MAX_MTP, "field 'n_mtp_layers' is %d, at most %d supported",
         c->n_mtp_layers, CFG_MAX_MTP);
    VREQ(c->n_compress_ratios == c->n_layers + c->n_mtp_layers,
         "field 'compress_ratios' has %d entries, expected n_layers + n_mtp_layers = %d",
         c->n_compress_ratios, c->n_layers + c->n_mtp_layers);
    if (c->arch == DSV4Q_ARCH_V41) return validate_v41(c, err, errlen);
    VREQ(c->arch == DSV4Q_ARCH_V4, "field 'model_type': unknown architecture %d", (int)c->arch);
    for (int i = 0; i < c->n_compress_ratios; i++) {
        int r = c->compress_ratios[i];
        VREQ(r == 0 || r == 4 || r == 128, "field 'compress_ratios' entry %d is %d, must be 0, 4 or 128", i, r);
    }
    VREQ(c->rope_head_dim % 2 == 0, "field 'rope_head_dim' must be even, got %d", c->rope_head_dim);
    VREQ(c->rope_head_dim < c->head_dim, "field 'rope_head_dim' (%d) must be less than head_dim (%d)",
         c->rope_head_dim, c->head_dim);
    VREQ((c->head_dim - c->rope_head_dim) % 64 == 0,
         "field 'head_dim' minus rope_head_dim (%d) must be a multiple of 64 (the KV act-quant block)",
         c->head_dim - c->rope_head_dim);
    VREQ(is_pow2(c->index_head_dim), "field 'index_head_dim' must be a power of two (Hadamard), got %d",
         c->index_head_dim);
    VREQ(c->index_head_dim % 32 == 0, "field 'index_head_dim' must be a multiple of 32 (FP4 block), got %d",
         c->index_head_dim);
    VREQ(c->index_head_dim >= c->rope_head_dim, "field 'index_head_dim' (%d) must be at least rope_head_dim (%d)",
         c->index_head_dim, c->rope_head_dim);
    VREQ(c->n_heads % c->o_groups == 0, "field 'o_groups' (%d) must divide n_heads (%d)", c->o_groups, c->n_heads);
    VREQ(c->n_activated_experts <= c->n_routed_experts,
         "field 'n_activated_experts' (%d) exceeds n_routed_experts (%d)", c->n_activated_experts,
         c->n_routed_experts);
    VREQ(c->n_routed_experts <= DSV4Q_MAX_EXPERTS, "field 'n_routed_experts' is %d, at most %d supported",
         c->n_routed_experts, DSV4Q_MAX_EXPERTS);
    VREQ(c->n_hash_layers <= c->n_layers, "field 'n_hash_layers' (%d) exceeds n_layers (%d)",
         c->n_hash_layers, c->n_layers);
    VREQ(c->n_shared_experts == 1, "field 'n_shared_experts' must be 1 (the reference asserts it), got %d",
         c->n_shared_experts);
    VREQ(c->hc_mult >= 1, "field 'hc_mult' must be at least 1, got %d", c->hc_mult);
    VREQ(c->hc_sinkhorn_iters >= 1, "field 'hc_sinkhorn_iters' must be at least 1, got %d", c->hc_sinkhorn_iters);
    VREQ(strcmp(c->score_func, "sqrtsoftplus") == 0 || strcmp(c->score_func, "softmax") == 0 ||
         strcmp(c->score_func, "sigmoid") == 0,
         "field 'score_func' must be \"sqrtsoftplus\", \"softmax\" or \"sigmoid\", got \"%.15s\"", c->score_func);
    VREQ(c->dtype == DSV4Q_WDT_BF16 || c->dtype == DSV4Q_WDT_FP8, "field 'dtype' must be bf16 or fp8, got %d",
         (int)c->dtype);
    VREQ(c->expert_dtype == DSV4Q_WDT_BF16 || c->expert_dtype == DSV4Q_WDT_FP8 || c->expert_dtype == DSV4Q_WDT_FP4,
         "field 'expert_dtype' must be bf16, fp8 or fp4, got %d", (int)c->expert_dtype);
    VREQ(c->scale_ue8m0 == 0 || c->scale_ue8m0 == 1, "field 'scale_fmt' (scale_ue8m0) must be 0 or 1, got %d",
         c->scale_ue8m0);
    if (validate_blocks(c, 128, err, errlen)) return -1;
    /* a V4 config holds no V4.1 structure (0 = the zeroed struct of a GGUF or a test) */
    VREQ(c->fp8_block == 0 || c->fp8_block == DSV4Q_FP8_BLOCK_V4,
         "the FP8 block (fp8_block) is %d, must be 128 for deepseek_v4", c->fp8_block);
    VREQ(c->n_kv_source_layers == 0 && c->n_index_source_layers == 0 && c->n_engram_layers == 0,
         "field 'kv_source_layers' / 'index_source_layers' / 'engram_layer_ids' set on a deepseek_v4 config");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* emit                                                                      */

static int put_field(json_t *o, const cfg_field *f, const dsv4q_config *c)
{
    const void *p = (const char *)c + f->off;
    json_t *v = f->kind == FK_INT ? json_integer(*(const int *)p) : json_real(*(const double *)p);
    return json_object_set_new(o, f->key, v);
}

static json_t *v41_list_json(const dsv4q_config *c, const cfg_list *l)
{
    json_t *a = json_array();
    int n = l->noff == LST_NO_COUNT ? c->n_engram_layers : *(const int *)((const char *)c + l->noff);
    if (n < 0 || n > l->cap) n = 0;
    for (int k = 0; a && k < n; k++) {
        json_int_t x = l->is64 ? (json_int_t)((const int64_t *)((const char *)c + l->off))[k]
                               : (json_int_t)((const int *)((const char *)c + l->off))[k];
        if (json_array_append_new(a, json_integer(x))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *v41_field_json(const dsv4q_config *c, const cfg_field *f)
{
    const void *p = (const char *)c + f->off;
    switch (f->kind) {
    case FK_DBL: return json_real(*(const double *)p);
    case FK_I64: return json_integer((json_int_t) * (const int64_t *)p);
    case FK_BOOL: return json_boolean(*(const int *)p);
    default: return json_integer(*(const int *)p);
    }
}

/* C9: the V4.1 keys, after the V4 ones. */
static int emit_v41(json_t *o, const dsv4q_config *c)
{
    int bad = json_object_set_new(o, "model_type", json_string(V41_NAME));
    for (size_t i = 0; i < NV41FIELDS; i++) {
        const cfg_field *f = &V41_FIELDS[i];
        bad |= json_object_set_new(o, f->key, v41_field_json(c, f));
        const size_t lo = !strcmp(f->key, "norm_topk_prob") ? 0 : !strcmp(f->key, "candidate_block_size") ? 2 : 9;
        for (size_t k = lo; k < lo + 2 && k < DSPARK_LIST; k++)
            bad |= json_object_set_new(o, V41_LISTS[k].key, v41_list_json(c, &V41_LISTS[k]));
    }
    if (c->dspark_block_size > 0) {
        for (size_t i = 0; i < NDSPARKFIELDS; i++)
            bad |= json_object_set_new(o, DSPARK_FIELDS[i].key, v41_field_json(c, &DSPARK_FIELDS[i]));
        bad |= json_object_set_new(o, V41_LISTS[DSPARK_LIST].key, v41_list_json(c, &V41_LISTS[DSPARK_LIST]));
    }
    return bad;
}

/* Fewest significant digits (15..17) that round-trip every double field, so
 * 1e-6 is written "1e-06" rather than "9.9999999999999995e-07", and the
 * parse of the text is still bit-exact. */
static int real_precision(const dsv4q_config *c)
{
    for (int p = 15; p < 17; p++) {
        int ok = 1;
        for (size_t i = 0; i < NFIELDS && ok; i++) {
            if (FIELDS[i].kind != FK_DBL)
                continue;
            double x = *(const double *)((const char *)c + FIELDS[i].off);
            char buf[64];
            snprintf(buf, sizeof buf, "%.*g", p, x);
            ok = strtod(buf, NULL) == x;
        }
        if (c->arch == DSV4Q_ARCH_V41 && ok) { /* C9: V4 texts do not depend on the V4.1 doubles */
            char buf[64];
            snprintf(buf, sizeof buf, "%.*g", p, c->gate_temp);
            ok = strtod(buf, NULL) == c->gate_temp;
        }
        if (ok)
            return p;
    }
    return 17;
}

char *dsv4q_config_to_json(const dsv4q_config *c)
{
    if (!c)
        return NULL;
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = 0;
    if (c->name[0])
        bad |= json_object_set_new(o, "name", json_string(c->name));
    for (size_t i = 0; i < NFIELDS; i++) {
        const cfg_field *f = &FIELDS[i];
        bad |= put_field(o, f, c);
        if (strcmp(f->key, "n_activated_experts") == 0)
            bad |= json_object_set_new(o, "score_func", json_string(c->score_func));
        if (strcmp(f->key, "window_size") == 0) {
            json_t *a = json_array();
            int n = c->n_compress_ratios;
            if (n < 0 || n > DSV4Q_MAX_LAYERS + CFG_MAX_MTP)
                n = 0;
            for (int k = 0; a && k < n; k++)
                bad |= json_array_append_new(a, json_integer(c->compress_ratios[k]));
            bad |= json_object_set_new(o, "compress_ratios", a);
        }
    }
    bad |= json_object_set_new(o, "dtype", json_string(wdt_name(c->dtype)));
    bad |= json_object_set_new(o, "expert_dtype", json_string(wdt_name(c->expert_dtype)));
    bad |= json_object_set_new(o, "scale_fmt", c->scale_ue8m0 ? json_string("ue8m0") : json_null());
    if (c->arch == DSV4Q_ARCH_V41) bad |= emit_v41(o, c);
    char *s = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(real_precision(c)));
    json_decref(o);
    return s;
}
