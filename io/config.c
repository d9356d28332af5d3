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

#define CFG_MAX_MTP 8   /* compress_ratios holds DSV4Q_MAX_LAYERS + 8 entries */


/* ------------------------------------------------------------------------ */
/* the field table (C1)                                                      */

typedef enum { FK_INT, FK_DBL } cfg_kind;
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

/* C3 defaults for every optional field. */
static void cfg_defaults(dsv4q_config *c)
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

static int cfg_parse_root(dsv4q_config *c, const json_t *root, const char *origin, char *err, size_t errlen)
{
    cfg_defaults(c);
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
    return parse_precision(c, root, origin, err, errlen);
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
    if (c->dtype == DSV4Q_WDT_FP8) {
        /* every FP8 linear's input dim is a whole number of 128-blocks */
        VREQ(c->dim % 128 == 0, "field 'dim' (%d) must be a multiple of 128 for dtype fp8", c->dim);
        VREQ(c->q_lora_rank % 128 == 0, "field 'q_lora_rank' (%d) must be a multiple of 128 for dtype fp8",
             c->q_lora_rank);
        VREQ(((long long)c->o_groups * c->o_lora_rank) % 128 == 0,
             "field 'o_lora_rank' (o_groups * o_lora_rank = %lld) must be a multiple of 128 for dtype fp8",
             (long long)c->o_groups * c->o_lora_rank);
        VREQ(c->moe_inter_dim % 128 == 0, "field 'moe_inter_dim' (%d) must be a multiple of 128 for dtype fp8",
             c->moe_inter_dim);
    }
    if (c->expert_dtype != DSV4Q_WDT_BF16) {
        const char *e = wdt_name(c->expert_dtype);
        VREQ(c->dim % 128 == 0, "field 'dim' (%d) must be a multiple of 128 for expert_dtype %s", c->dim, e);
        VREQ(c->moe_inter_dim % 128 == 0, "field 'moe_inter_dim' (%d) must be a multiple of 128 for expert_dtype %s",
             c->moe_inter_dim, e);
    }
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
    char *s = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(real_precision(c)));
    json_decref(o);
    return s;
}
