/*
 * gguf_model.c - bind a llama.cpp deepseek4 GGUF to dsv4q_model (see
 * gguf_model.h). The binder walks the same reference names as
 * model_load.c, maps each through one table to its GGUF name, and checks
 * the GGUF shape (ggml order, ne[0] = in) against the config; routed
 * experts are slices of one stacked [n_expert, out, in] tensor per
 * projection.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base/util.h"
#include "io/gguf_model.h"
#include "oracle/formats.h"
#include "oracle/ggml_decode.h"

/* reference layer-relative name -> llama.cpp GGUF suffix (blk.N.<suffix>) */
static const char *const k_layer_map[][2] = {
    {"hc_attn_fn", "hc_attn_fn.weight"},
    {"hc_attn_base", "hc_attn_base.weight"},
    {"hc_attn_scale", "hc_attn_scale.weight"},
    {"hc_ffn_fn", "hc_ffn_fn.weight"},
    {"hc_ffn_base", "hc_ffn_base.weight"},
    {"hc_ffn_scale", "hc_ffn_scale.weight"},
    {"attn_norm.weight", "attn_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"attn.attn_sink", "attn_sinks.weight"},
    {"attn.wq_a.weight", "attn_q_a.weight"},
    {"attn.q_norm.weight", "attn_q_a_norm.weight"},
    {"attn.wq_b.weight", "attn_q_b.weight"},
    {"attn.wkv.weight", "attn_kv.weight"},
    {"attn.kv_norm.weight", "attn_kv_a_norm.weight"},
    {"attn.wo_a.weight", "attn_output_a.weight"},
    {"attn.wo_b.weight", "attn_output_b.weight"},
    {"attn.compressor.wkv.weight", "attn_compressor_kv.weight"},
    {"attn.compressor.wgate.weight", "attn_compressor_gate.weight"},
    {"attn.compressor.ape", "attn_compressor_ape.weight"},
    {"attn.compressor.norm.weight", "attn_compressor_norm.weight"},
    {"attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
    {"attn.indexer.weights_proj.weight", "indexer.proj.weight"},
    {"attn.indexer.compressor.wkv.weight", "indexer_compressor_kv.weight"},
    {"attn.indexer.compressor.wgate.weight", "indexer_compressor_gate.weight"},
    {"attn.indexer.compressor.ape", "indexer_compressor_ape.weight"},
    {"attn.indexer.compressor.norm.weight", "indexer_compressor_norm.weight"},
    {"ffn.gate.weight", "ffn_gate_inp.weight"},
    {"ffn.gate.bias", "exp_probs_b.bias"},
    {"ffn.gate.tid2eid", "ffn_gate_tid2eid.weight"},
    {"ffn.shared_experts.w1.weight", "ffn_gate_shexp.weight"},
    {"ffn.shared_experts.w2.weight", "ffn_down_shexp.weight"},
    {"ffn.shared_experts.w3.weight", "ffn_up_shexp.weight"},
};
static const char *const k_global_map[][2] = {
    {"embed.weight", "token_embd.weight"},   {"norm.weight", "output_norm.weight"},
    {"head.weight", "output.weight"},        {"hc_head_fn", "output_hc_fn.weight"},
    {"hc_head_base", "output_hc_base.weight"}, {"hc_head_scale", "output_hc_scale.weight"},
};

int dsv4q_gguf_name(const char *ref, char *buf, size_t len, int *expert)
{
    *expert = -1;
    for (size_t i = 0; i < sizeof k_global_map / sizeof *k_global_map; i++)
        if (!strcmp(ref, k_global_map[i][0])) return snprintf(buf, len, "%s", k_global_map[i][1]), 0;
    int li, n = 0, e;
    char part[4];
    if (sscanf(ref, "layers.%d.%n", &li, &n) != 1 || n == 0 || li < 0) return -1;
    const char *suf = ref + n;
    for (size_t i = 0; i < sizeof k_layer_map / sizeof *k_layer_map; i++)
        if (!strcmp(suf, k_layer_map[i][0])) return snprintf(buf, len, "blk.%d.%s", li, k_layer_map[i][1]), 0;
    int m = 0;
    if (sscanf(suf, "ffn.experts.%d.%2[w123].weight%n", &e, part, &m) == 2 && m > 0 && !suf[m] && e >= 0) {
        const char *p = !strcmp(part, "w1") ? "ffn_gate_exps" : !strcmp(part, "w2") ? "ffn_down_exps" : "ffn_up_exps";
        *expert = e;
        return snprintf(buf, len, "blk.%d.%s.weight", li, p), 0;
    }
    return -1;
}

int dsv4q_is_gguf(const char *path)
{
    struct stat sb;
    /* only a regular file is looked into (a FIFO would block fopen) */
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    char m[4];
    if (!f) return 0;
    int ok = fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
    fclose(f);
    return ok;
}

/* What a model path must be, appended to each refusal of dsv4q_model_path_kind. */
#define EXPECTED_MODEL "expected a GGUF file or a checkpoint directory holding config.json"

int dsv4q_model_path_kind(const char *path, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return dsv4q_errf(err, errlen, "%s: no such file or directory (" EXPECTED_MODEL ")", path);
        return dsv4q_errf(err, errlen, "%s: cannot stat: %s (" EXPECTED_MODEL ")", path, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode)) return 0;
    if (!S_ISREG(sb.st_mode))
        return dsv4q_errf(err, errlen, "%s: not a regular file or a directory (" EXPECTED_MODEL ")", path);
    /* 24 = magic, version (u32) and the two u64 counts: the fixed GGUF header */
    if (sb.st_size == 0)
        return dsv4q_errf(err, errlen, "%s: empty file (0 bytes), not a GGUF file (" EXPECTED_MODEL ")", path);
    if (sb.st_size < 4)
        return dsv4q_errf(err, errlen, "%s: file too short (%lld bytes) for a GGUF header (24 bytes, magic 'GGUF')",
                          path, (long long)sb.st_size);
    FILE *f = fopen(path, "rb");
    if (!f) return dsv4q_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    unsigned char m[4];
    size_t got = fread(m, 1, 4, f);
    fclose(f);
    if (got != 4) return dsv4q_errf(err, errlen, "%s: cannot read the first 4 bytes", path);
    if (memcmp(m, "GGUF", 4)) {
        char shown[5];
        for (int i = 0; i < 4; i++) shown[i] = m[i] >= 0x20 && m[i] < 0x7f ? (char)m[i] : '.';
        shown[4] = 0;
        return dsv4q_errf(
            err, errlen,
            "%s: not a GGUF file (magic %02x %02x %02x %02x '%s', expected 47 47 55 46 'GGUF'; " EXPECTED_MODEL ")",
            path, m[0], m[1], m[2], m[3], shown);
    }
    return 1;
}

/* ---- metadata ------------------------------------------------------------ */

/* The shortest decimal that rounds to the binary32 x, as a double. */
static double f32_decimal(float x)
{
    char b[64];
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof b, "%.*g", p, (double)x);
        if (strtof(b, NULL) == x) return strtod(b, NULL);
    }
    return x;
}

typedef struct mctx {
    const dsv4q_gguf *g;
    char *err;
    size_t errlen;
    char key[160];
} mctx;

static const char *K(mctx *c, const char *suffix)
{
    snprintf(c->key, sizeof c->key, "deepseek4.%s", suffix);
    return c->key;
}

static int m_int(mctx *c, const char *suffix, int req, int64_t lo, int64_t hi, int *out)
{
    int64_t v;
    int r = dsv4q_gguf_get_int(c->g, K(c, suffix), &v, c->err, c->errlen);
    if (r < 0) return -1;
    if (r == 1) {
        if (!req) return 0;
        snprintf(c->err, c->errlen, "gguf: %s: missing metadata key '%s'", dsv4q_gguf_path(c->g), c->key);
        return -1;
    }
    if (v < lo || v > hi) {
        snprintf(c->err, c->errlen, "gguf: %s: key '%s' is %lld, expected %lld..%lld", dsv4q_gguf_path(c->g), c->key,
                 (long long)v, (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int m_real(mctx *c, const char *suffix, int req, double *out)
{
    const dsv4q_gguf_kv *kv = dsv4q_gguf_kv_find(c->g, K(c, suffix));
    double v;
    int r = dsv4q_gguf_get_real(c->g, c->key, &v, c->err, c->errlen);
    if (r < 0) return -1;
    if (r == 1) {
        if (!req) return 0;
        snprintf(c->err, c->errlen, "gguf: %s: missing metadata key '%s'", dsv4q_gguf_path(c->g), c->key);
        return -1;
    }
    if (kv->type == DSV4Q_GGUF_F32) v = f32_decimal((float)v);
    if (!isfinite(v)) {
        snprintf(c->err, c->errlen, "gguf: %s: key '%s' is not finite", dsv4q_gguf_path(c->g), c->key);
        return -1;
    }
    *out = v;
    return 0;
}

/* A key that llama.cpp stores as a scalar or a per-layer array whose
 * entries dsv4q needs equal (expert_feed_forward_length, swiglu_clamp_*). */
static int m_uniform(mctx *c, const char *suffix, int req, int nl, double *out)
{
    const dsv4q_gguf_kv *kv = dsv4q_gguf_kv_find(c->g, K(c, suffix));
    if (!kv || kv->type != DSV4Q_GGUF_ARRAY) return m_real(c, suffix, req, out);
    if (kv->n < (uint64_t)nl) {
        snprintf(c->err, c->errlen, "gguf: %s: key '%s' has %llu entries, expected one per layer (%d)",
                 dsv4q_gguf_path(c->g), c->key, (unsigned long long)kv->n, nl);
        return -1;
    }
    double first = 0;
    for (int i = 0; i < nl; i++) {
        double v;
        if (dsv4q_gguf_arr_real(kv, (uint64_t)i, &v)) {
            snprintf(c->err, c->errlen, "gguf: %s: key '%s' is not an array of numbers", dsv4q_gguf_path(c->g), c->key);
            return -1;
        }
        if (kv->atype == DSV4Q_GGUF_F32) v = f32_decimal((float)v);
        if (i == 0) first = v;
        else if (v != first) {
            snprintf(c->err, c->errlen, "gguf: %s: key '%s' differs between layers (%g at 0, %g at %d); dsv4q's "
                     "config holds one value", dsv4q_gguf_path(c->g), c->key, first, v, i);
            return -1;
        }
    }
    *out = first;
    return 0;
}

int dsv4q_gguf_config(const dsv4q_gguf *g, dsv4q_config *cfg, char *err, size_t errlen)
{
    mctx c = {g, err, errlen, ""};
    const char *arch = NULL;
    const char *path = dsv4q_gguf_path(g);
    int r = dsv4q_gguf_get_str(g, "general.architecture", &arch, err, errlen);
    if (r < 0) return -1;
    if (r == 1 || strcmp(arch, "deepseek4")) {
        snprintf(err, errlen, "gguf: %s: general.architecture is '%s', expected 'deepseek4'", path,
                 r == 1 ? "(missing)" : arch);
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "gguf");
    /* a deepseek4 GGUF is V4: its V4.1 members as io/config.c sets them for V4 (C8 there) */
    cfg->arch = DSV4Q_ARCH_V4;
    cfg->fp8_block = DSV4Q_FP8_BLOCK_V4;
    cfg->gate_temp = 1.0;
    cfg->candidate_source_layer = -1;
    const int BIG = 1 << 30;
    int nblk = 0, nextn = 0, gating = 4, v;
    double d;
    if (m_int(&c, "block_count", 1, 1, DSV4Q_MAX_LAYERS, &nblk) ||
        m_int(&c, "nextn_predict_layers", 0, 0, DSV4Q_MAX_LAYERS, &nextn))
        return -1;
    if (nextn >= nblk) {
        snprintf(err, errlen, "gguf: %s: nextn_predict_layers %d leaves no main layer of block_count %d", path, nextn,
                 nblk);
        return -1;
    }
    cfg->n_layers = nblk - nextn;
    cfg->n_mtp_layers = 0;
    if (m_int(&c, "embedding_length", 1, 1, BIG, &cfg->dim) ||
        m_int(&c, "attention.head_count", 1, 1, BIG, &cfg->n_heads) ||
        m_int(&c, "attention.key_length", 1, 1, BIG, &cfg->head_dim) ||
        m_int(&c, "rope.dimension_count", 1, 1, BIG, &cfg->rope_head_dim) ||
        m_int(&c, "attention.q_lora_rank", 1, 1, BIG, &cfg->q_lora_rank) ||
        m_int(&c, "attention.sliding_window", 1, 1, BIG, &cfg->window_size) ||
        m_int(&c, "expert_count", 1, 1, BIG, &cfg->n_routed_experts) ||
        m_int(&c, "expert_used_count", 1, 1, BIG, &cfg->n_activated_experts) ||
        m_int(&c, "expert_shared_count", 1, 1, BIG, &cfg->n_shared_experts) ||
        m_int(&c, "expert_gating_func", 0, 0, 16, &gating) ||
        m_int(&c, "attention.indexer.head_count", 1, 1, BIG, &cfg->index_n_heads) ||
        m_int(&c, "attention.indexer.key_length", 1, 1, BIG, &cfg->index_head_dim) ||
        m_int(&c, "attention.indexer.top_k", 1, 1, BIG, &cfg->index_topk) ||
        m_int(&c, "attention.output_group_count", 1, 1, BIG, &cfg->o_groups) ||
        m_int(&c, "attention.output_lora_rank", 1, 1, BIG, &cfg->o_lora_rank) ||
        m_int(&c, "hyper_connection.count", 1, 1, BIG, &cfg->hc_mult) ||
        m_int(&c, "hyper_connection.sinkhorn_iterations", 1, 0, BIG, &cfg->hc_sinkhorn_iters) ||
        m_int(&c, "hash_layer_count", 1, 0, DSV4Q_MAX_LAYERS, &cfg->n_hash_layers))
        return -1;
    /* llama_expert_gating_func_type: 1 softmax, 2 sigmoid, 4 sqrtsoftplus */
    const char *sf = gating == 1 ? "softmax" : gating == 2 ? "sigmoid" : gating == 4 ? "sqrtsoftplus" : NULL;
    if (!sf) {
        snprintf(err, errlen, "gguf: %s: key 'deepseek4.expert_gating_func' is %d, expected 1, 2 or 4", path, gating);
        return -1;
    }
    snprintf(cfg->score_func, sizeof cfg->score_func, "%s", sf);
    if (m_uniform(&c, "expert_feed_forward_length", 1, nblk, &d)) return -1;
    cfg->moe_inter_dim = (int)d;
    if (d != cfg->moe_inter_dim || d < 1) {
        snprintf(err, errlen, "gguf: %s: key 'deepseek4.expert_feed_forward_length' is %g, expected a positive integer",
                 path, d);
        return -1;
    }
    double shexp = 0;
    cfg->swiglu_limit = 0;
    if (m_uniform(&c, "swiglu_clamp_exp", 0, cfg->n_layers, &cfg->swiglu_limit)) return -1;
    shexp = cfg->swiglu_limit;
    if (m_uniform(&c, "swiglu_clamp_shexp", 0, cfg->n_layers, &shexp)) return -1;
    if (shexp != cfg->swiglu_limit) {
        snprintf(err, errlen, "gguf: %s: swiglu_clamp_shexp (%g) differs from swiglu_clamp_exp (%g); the reference "
                 "clamps both with one swiglu_limit", path, shexp, cfg->swiglu_limit);
        return -1;
    }
    cfg->route_scale = 1.0;
    cfg->rope_theta = 10000.0;
    cfg->beta_fast = 32.0;   /* llama.cpp's YaRN defaults when the keys are absent */
    cfg->beta_slow = 1.0;
    cfg->rope_factor = 1.0;
    if (m_real(&c, "expert_weights_scale", 0, &cfg->route_scale) ||
        m_real(&c, "attention.layer_norm_rms_epsilon", 1, &cfg->norm_eps) ||
        m_real(&c, "rope.freq_base", 0, &cfg->rope_theta) ||
        m_real(&c, "attention.compress_rope_freq_base", 1, &cfg->compress_rope_theta) ||
        m_real(&c, "hyper_connection.epsilon", 1, &cfg->hc_eps))
        return -1;
    const char *rs = NULL;
    r = dsv4q_gguf_get_str(g, K(&c, "rope.scaling.type"), &rs, err, errlen);
    if (r < 0) return -1;
    if (r == 0 && strcmp(rs, "none")) {
        if (strcmp(rs, "yarn")) {
            snprintf(err, errlen, "gguf: %s: key 'deepseek4.rope.scaling.type' is '%s', expected 'yarn' or 'none'", path,
                     rs);
            return -1;
        }
        if (m_real(&c, "rope.scaling.factor", 1, &cfg->rope_factor) ||
            m_int(&c, "rope.scaling.original_context_length", 1, 1, BIG, &cfg->original_seq_len) ||
            m_real(&c, "rope.scaling.yarn_beta_fast", 0, &cfg->beta_fast) ||
            m_real(&c, "rope.scaling.yarn_beta_slow", 0, &cfg->beta_slow))
            return -1;
    }
    const dsv4q_gguf_kv *cr = dsv4q_gguf_kv_find(g, K(&c, "attention.compress_ratios"));
    if (!cr || cr->type != DSV4Q_GGUF_ARRAY || cr->n < (uint64_t)cfg->n_layers) {
        snprintf(err, errlen, "gguf: %s: key 'deepseek4.attention.compress_ratios' is %s, expected an integer array "
                 "of at least block_count - nextn_predict_layers (%d) entries", path, cr ? "too short or not an array"
                 : "missing", cfg->n_layers);
        return -1;
    }
    for (int i = 0; i < cfg->n_layers; i++) {
        int64_t x;
        if (dsv4q_gguf_arr_int(cr, (uint64_t)i, &x) || (x != 0 && x != 4 && x != 128)) {
            snprintf(err, errlen, "gguf: %s: key 'deepseek4.attention.compress_ratios' entry %d is not 0, 4 or 128", path,
                     i);
            return -1;
        }
        cfg->compress_ratios[i] = (int)x;
    }
    cfg->n_compress_ratios = cfg->n_layers;
    const dsv4q_gguf_tensor *te = dsv4q_gguf_find(g, "token_embd.weight");
    if (!te || te->ndim != 2 || te->ne[1] > BIG) {
        snprintf(err, errlen, "gguf: %s: tensor 'token_embd.weight' is %s, expected 2-D [dim, vocab]", path,
                 te ? "not 2-D" : "missing");
        return -1;
    }
    cfg->vocab_size = (int)te->ne[1];
    cfg->dtype = DSV4Q_WDT_BF16;
    cfg->expert_dtype = DSV4Q_WDT_BF16;
    cfg->scale_ue8m0 = 1;   /* DeepSeek V4's scale_fmt; GGUF has no key for it */
    (void)v;
    if (dsv4q_config_validate(cfg, err, errlen)) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, errlen, "gguf: %s: metadata gives an invalid config: %s", path, tmp);
        return -1;
    }
    return 0;
}

int dsv4q_gguf_load_config(const char *path, dsv4q_config *cfg, char *err, size_t errlen)
{
    dsv4q_gguf *g;
    if (dsv4q_gguf_open(&g, path, err, errlen)) return -1;
    int rc = dsv4q_gguf_config(g, cfg, err, errlen);
    dsv4q_gguf_close(g);
    return rc;
}

/* ---- tensors ------------------------------------------------------------- */

static int own(dsv4q_model *m, void *p)
{
    if (!p) return -1;
    if (m->nowned == m->capowned) {
        long cap = m->capowned ? 2 * m->capowned : 64;
        void **n = realloc(m->owned, sizeof(void *) * (size_t)cap);
        if (!n) { free(p); return -1; }
        m->owned = n;
        m->capowned = cap;
    }
    m->owned[m->nowned++] = p;
    return 0;
}

static const char *gpath(const dsv4q_model *m) { return dsv4q_gguf_path(m->gguf); }

/* The GGUF tensor behind reference name `ref`; *expert = slice or -1. */
static const dsv4q_gguf_tensor *need(dsv4q_model *m, const char *ref, int *expert, char *err, size_t errlen)
{
    char gn[160];
    if (dsv4q_gguf_name(ref, gn, sizeof gn, expert)) {
        snprintf(err, errlen, "gguf: internal: no GGUF name for '%s'", ref);
        return NULL;
    }
    const dsv4q_gguf_tensor *t = dsv4q_gguf_find(m->gguf, gn);
    if (!t) snprintf(err, errlen, "gguf: %s: missing tensor '%s' (the reference's '%s')", gpath(m), gn, ref);
    return t;
}

static int shape_err(const dsv4q_model *m, const dsv4q_gguf_tensor *t, const char *want, char *err, size_t errlen)
{
    char got[96] = "";
    size_t n = 0;
    for (int i = 0; i < t->ndim && n < sizeof got; i++)
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long)t->ne[i]);
    snprintf(err, errlen, "gguf: %s: tensor '%s' has ne [%s], expected %s", gpath(m), t->name, got, want);
    return -1;
}

static int decodable(const dsv4q_model *m, const dsv4q_gguf_tensor *t, char *err, size_t errlen)
{
    if (dsv4q_ggml_decodable(t->type)) return 0;
    /* the accepted list comes from the decoder itself, so it cannot go stale */
    char ok[512];
    size_t n = 0;
    ok[0] = 0;
    for (int ty = 0; ty < DSV4Q_GGML_TYPE_LIMIT; ty++)
        if (dsv4q_ggml_decodable(ty) && n < sizeof ok)
            n += (size_t)snprintf(ok + n, sizeof ok - n, "%s%s", n ? ", " : "", dsv4q_ggml_type_name(ty));
    snprintf(err, errlen, "gguf: %s: tensor '%s' has GGML type %s, which dsv4q does not decode (%s)", gpath(m), t->name,
             dsv4q_ggml_type_name(t->type) ? dsv4q_ggml_type_name(t->type) : "?", ok);
    return -1;
}

/* Bind 2-D weight `ref` as [out, in]: a GGUF [in, out] tensor, or slice e
 * of a stacked [in, out, n_expert] one. */
static int g_weight(dsv4q_model *m, const char *ref, int64_t out, int64_t in, const char *what, dsv4q_weight *w,
                    char *err, size_t errlen)
{
    int e;
    const dsv4q_gguf_tensor *t = need(m, ref, &e, err, errlen);
    if (!t) return -1;
    char want[128];
    if (e < 0) {
        snprintf(want, sizeof want, "[%lld, %lld] (%s, ggml order)", (long long)in, (long long)out, what);
        if (t->ndim != 2 || t->ne[0] != in || t->ne[1] != out) return shape_err(m, t, want, err, errlen);
    } else {
        const int64_t ne = m->cfg.n_routed_experts;
        snprintf(want, sizeof want, "[%lld, %lld, %lld] (%s, stacked experts)", (long long)in, (long long)out,
                 (long long)ne, what);
        if (t->ndim != 3 || t->ne[0] != in || t->ne[1] != out || t->ne[2] != ne) return shape_err(m, t, want, err, errlen);
    }
    if (decodable(m, t, err, errlen)) return -1;
    const size_t rb = dsv4q_ggml_row_bytes(t->type, in);
    const uint8_t *base = (const uint8_t *)t->data + (e < 0 ? 0 : (size_t)e * (size_t)out * rb);
    memset(w, 0, sizeof *w);
    w->out = out;
    w->in = in;
    if (e < 0) w->name = t->name;
    else {
        char *nm = malloc(strlen(t->name) + 24);
        if (own(m, nm)) { snprintf(err, errlen, "out of memory"); return -1; }
        sprintf(nm, "%s[%d]", t->name, e);
        w->name = nm;
    }
    const int64_t n = out * in;
    if (t->type == DSV4Q_GGML_F32 || t->type == DSV4Q_GGML_BF16 || t->type == DSV4Q_GGML_F64) {
        w->fmt = t->type == DSV4Q_GGML_F32 ? DSV4Q_WF_F32 : t->type == DSV4Q_GGML_BF16 ? DSV4Q_WF_BF16 : DSV4Q_WF_F64;
        w->data = base;
    } else {
        float *f = malloc(sizeof(float) * (size_t)n);
        if (own(m, f)) { snprintf(err, errlen, "out of memory decoding '%s'", w->name); return -1; }
        #pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < out; o++) dsv4q_ggml_row_f32(t->type, base, in, o, f + o * in);
        w->fmt = DSV4Q_WF_F32;
        w->data = f;
    }
    /* non-finite scan, as the safetensors loader does */
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < in; k++)
            if (!isfinite(dsv4q_weight_at(w, o, k))) {
                snprintf(err, errlen, "gguf: %s: tensor '%s' holds a non-finite value at [%lld, %lld]", gpath(m),
                         w->name, (long long)o, (long long)k);
                return -1;
            }
    return 0;
}

/* Bind a small vector `ref` of n elements (any shape with numel n). */
static int g_vec(dsv4q_model *m, const char *ref, long n, dsv4q_vec *v, char *err, size_t errlen)
{
    int e;
    const dsv4q_gguf_tensor *t = need(m, ref, &e, err, errlen);
    if (!t) return -1;
    if (t->numel != n) {
        snprintf(err, errlen, "gguf: %s: tensor '%s' has %lld elements, expected %ld", gpath(m), t->name,
                 (long long)t->numel, n);
        return -1;
    }
    if (decodable(m, t, err, errlen)) return -1;
    const int64_t be = dsv4q_ggml_block_elems(t->type);
    v->n = n;
    v->d = malloc(sizeof(double) * (size_t)n);
    v->f = malloc(sizeof(float) * (size_t)n);
    if (own(m, v->d) || own(m, v->f)) { snprintf(err, errlen, "out of memory"); return -1; }
    dsv4q_ggml_decode_f64(t->type, t->data, 0, n / be, v->d);
    for (long i = 0; i < n; i++) {
        if (!isfinite(v->d[i])) {
            snprintf(err, errlen, "gguf: %s: tensor '%s' holds a non-finite value at flat index %ld", gpath(m), t->name, i);
            return -1;
        }
        v->f[i] = (float)v->d[i];
    }
    return 0;
}

#define P(buf, ...) snprintf(buf, sizeof buf, __VA_ARGS__)

static int g_cmp(dsv4q_model *m, const char *pre, int ratio, int Dc, dsv4q_cmp_w *c, char *err, size_t errlen)
{
    char n[256];
    const int coff = ratio == 4 ? 2 : 1;
    P(n, "%s.wkv.weight", pre);
    if (g_weight(m, n, coff * Dc, m->cfg.dim, "compressor wkv [coff*Dc, dim]", &c->wkv, err, errlen)) return -1;
    P(n, "%s.wgate.weight", pre);
    if (g_weight(m, n, coff * Dc, m->cfg.dim, "compressor wgate [coff*Dc, dim]", &c->wgate, err, errlen)) return -1;
    P(n, "%s.ape", pre);
    if (g_vec(m, n, (long)ratio * coff * Dc, &c->ape, err, errlen)) return -1;
    P(n, "%s.norm.weight", pre);
    return g_vec(m, n, Dc, &c->norm, err, errlen);
}

static int g_expert(dsv4q_model *m, const char *pre, long inter, dsv4q_expert_w *x, char *err, size_t errlen)
{
    char n[256];
    const long d = m->cfg.dim;
    P(n, "%s.w1.weight", pre);
    if (g_weight(m, n, inter, d, "w1 [inter, dim]", &x->w1, err, errlen)) return -1;
    P(n, "%s.w2.weight", pre);
    if (g_weight(m, n, d, inter, "w2 [dim, inter]", &x->w2, err, errlen)) return -1;
    P(n, "%s.w3.weight", pre);
    return g_weight(m, n, inter, d, "w3 [inter, dim]", &x->w3, err, errlen);
}

static int g_layer(dsv4q_model *m, int li, dsv4q_layer_w *L, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    char pre[64], n[256];
    P(pre, "layers.%d", li);
    L->ratio = g->compress_ratios[li];
    L->hash = li < g->n_hash_layers;
    L->is_mtp = 0;
    const int hc = g->hc_mult, nmix = (2 + hc) * hc;
    const long d = g->dim, H = g->n_heads, D = g->head_dim;
    P(n, "%s.hc_attn_fn", pre);
    if (g_weight(m, n, nmix, hc * d, "hc fn [(2+hc)*hc, hc*dim]", &L->hc_attn_fn, err, errlen)) return -1;
    P(n, "%s.hc_ffn_fn", pre);
    if (g_weight(m, n, nmix, hc * d, "hc fn [(2+hc)*hc, hc*dim]", &L->hc_ffn_fn, err, errlen)) return -1;
    P(n, "%s.hc_attn_base", pre);
    if (g_vec(m, n, nmix, &L->hc_attn_base, err, errlen)) return -1;
    P(n, "%s.hc_ffn_base", pre);
    if (g_vec(m, n, nmix, &L->hc_ffn_base, err, errlen)) return -1;
    P(n, "%s.hc_attn_scale", pre);
    if (g_vec(m, n, 3, &L->hc_attn_scale, err, errlen)) return -1;
    P(n, "%s.hc_ffn_scale", pre);
    if (g_vec(m, n, 3, &L->hc_ffn_scale, err, errlen)) return -1;
    P(n, "%s.attn_norm.weight", pre);
    if (g_vec(m, n, d, &L->attn_norm, err, errlen)) return -1;
    P(n, "%s.ffn_norm.weight", pre);
    if (g_vec(m, n, d, &L->ffn_norm, err, errlen)) return -1;
    P(n, "%s.attn.attn_sink", pre);
    if (g_vec(m, n, H, &L->attn_sink, err, errlen)) return -1;
    P(n, "%s.attn.wq_a.weight", pre);
    if (g_weight(m, n, g->q_lora_rank, d, "wq_a [q_lora_rank, dim]", &L->wq_a, err, errlen)) return -1;
    P(n, "%s.attn.q_norm.weight", pre);
    if (g_vec(m, n, g->q_lora_rank, &L->q_norm, err, errlen)) return -1;
    P(n, "%s.attn.wq_b.weight", pre);
    if (g_weight(m, n, H * D, g->q_lora_rank, "wq_b [n_heads*head_dim, q_lora_rank]", &L->wq_b, err, errlen)) return -1;
    P(n, "%s.attn.wkv.weight", pre);
    if (g_weight(m, n, D, d, "wkv [head_dim, dim]", &L->wkv, err, errlen)) return -1;
    P(n, "%s.attn.kv_norm.weight", pre);
    if (g_vec(m, n, D, &L->kv_norm, err, errlen)) return -1;
    P(n, "%s.attn.wo_a.weight", pre);
    if (g_weight(m, n, (long)g->o_groups * g->o_lora_rank, H * D / g->o_groups,
                 "wo_a [o_groups*o_lora_rank, n_heads*head_dim/o_groups]", &L->wo_a, err, errlen)) return -1;
    P(n, "%s.attn.wo_b.weight", pre);
    if (g_weight(m, n, d, (long)g->o_groups * g->o_lora_rank, "wo_b [dim, o_groups*o_lora_rank]", &L->wo_b, err, errlen))
        return -1;
    if (L->ratio) {
        P(n, "%s.attn.compressor", pre);
        if (g_cmp(m, n, L->ratio, (int)D, &L->cmp, err, errlen)) return -1;
    }
    if (L->ratio == 4) {
        const long Hi = g->index_n_heads, Di = g->index_head_dim;
        P(n, "%s.attn.indexer.wq_b.weight", pre);
        if (g_weight(m, n, Hi * Di, g->q_lora_rank, "indexer wq_b [index_n_heads*index_head_dim, q_lora_rank]",
                     &L->idx_wq_b, err, errlen)) return -1;
        P(n, "%s.attn.indexer.weights_proj.weight", pre);
        if (g_weight(m, n, Hi, d, "indexer weights_proj [index_n_heads, dim]", &L->idx_weights_proj, err, errlen))
            return -1;
        P(n, "%s.attn.indexer.compressor", pre);
        if (g_cmp(m, n, 4, (int)Di, &L->idx_cmp, err, errlen)) return -1;
    }
    P(n, "%s.ffn.gate.weight", pre);
    if (g_weight(m, n, g->n_routed_experts, d, "gate [n_routed_experts, dim]", &L->gate, err, errlen)) return -1;
    if (L->hash) {
        int e;
        P(n, "%s.ffn.gate.tid2eid", pre);
        const dsv4q_gguf_tensor *t = need(m, n, &e, err, errlen);
        if (!t) return -1;
        if (t->type != DSV4Q_GGML_I32) {
            snprintf(err, errlen, "gguf: %s: tensor '%s' has GGML type %s, expected I32", gpath(m), t->name,
                     dsv4q_ggml_type_name(t->type));
            return -1;
        }
        char want[96];
        snprintf(want, sizeof want, "[%d, %d] (tid2eid [vocab, n_activated_experts], ggml order)",
                 g->n_activated_experts, g->vocab_size);
        if (t->ndim != 2 || t->ne[0] != g->n_activated_experts || t->ne[1] != g->vocab_size)
            return shape_err(m, t, want, err, errlen);
        const int32_t *ids = t->data;
        for (long i = 0; i < t->numel; i++)
            if (ids[i] < 0 || ids[i] >= g->n_routed_experts) {
                snprintf(err, errlen, "gguf: %s: tensor '%s' element %ld is expert %d, outside [0, %d)", gpath(m),
                         t->name, i, ids[i], g->n_routed_experts);
                return -1;
            }
        L->tid2eid = ids;
    } else {
        P(n, "%s.ffn.gate.bias", pre);
        if (g_vec(m, n, g->n_routed_experts, &L->gate_bias, err, errlen)) return -1;
    }
    L->experts = calloc((size_t)g->n_routed_experts, sizeof *L->experts);
    if (own(m, L->experts)) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int e = 0; e < g->n_routed_experts; e++) {
        P(n, "%s.ffn.experts.%d", pre, e);
        if (g_expert(m, n, g->moe_inter_dim, &L->experts[e], err, errlen)) return -1;
    }
    P(n, "%s.ffn.shared_experts", pre);
    return g_expert(m, n, (long)g->moe_inter_dim * g->n_shared_experts, &L->shared, err, errlen);
}

int dsv4q_model_open_gguf(dsv4q_model **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    dsv4q_model *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "out of memory"); return -1; }
    snprintf(m->dir, sizeof m->dir, "%s", path);
    if (dsv4q_gguf_open(&m->gguf, path, err, errlen) || dsv4q_gguf_config(m->gguf, &m->cfg, err, errlen)) goto fail;
    const dsv4q_config *g = &m->cfg;
    const int hc = g->hc_mult;
    if (g_weight(m, "embed.weight", g->vocab_size, g->dim, "embed [vocab_size, dim]", &m->embed, err, errlen) ||
        g_weight(m, "head.weight", g->vocab_size, g->dim, "head [vocab_size, dim]", &m->head, err, errlen) ||
        g_weight(m, "hc_head_fn", hc, (long)hc * g->dim, "hc_head_fn [hc, hc*dim]", &m->hc_head_fn, err, errlen) ||
        g_vec(m, "hc_head_base", hc, &m->hc_head_base, err, errlen) ||
        g_vec(m, "hc_head_scale", 1, &m->hc_head_scale, err, errlen) ||
        g_vec(m, "norm.weight", g->dim, &m->norm, err, errlen))
        goto fail;
    m->layers = calloc((size_t)g->n_layers, sizeof *m->layers);
    if (own(m, m->layers)) { snprintf(err, errlen, "out of memory"); goto fail; }
    for (int li = 0; li < g->n_layers; li++) {
        m->layers[li].kv_src = m->layers[li].idx_src = m->layers[li].engram_index = -1;   /* V4: no V4.1 roles */
        if (g_layer(m, li, &m->layers[li], err, errlen)) goto fail;
    }
    *out = m;
    return 0;
fail:
    dsv4q_model_close(m);
    return -1;
}
