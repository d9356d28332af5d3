/*
 * model_load.c - bind a checkpoint's tensors to dsv4q_model (see model.h).
 *
 * Every expected tensor is looked up by its reference name, its dtype and
 * shape are checked against the config, and its bytes are scanned for
 * non-finite codes (NaN/inf BF16/F32, E4M3 0x7F/0xFF, E8M0 0xFF). The scan
 * reads each byte once; a load therefore costs one pass over the file,
 * which is also what catches a truncated or corrupted weight early rather
 * than as a NaN logit three layers later.
 *
 * DeepSeek V4.1 checkpoints (cfg.arch, io/config.c C6) are bound by
 * bind_layer_v41 / bind_globals_v41 in the layout of the V4.1 reference's
 * Transformer.state_dict() (docs/model.md, "V4.1 checkpoints"): FP8 linears
 * with 32x32 scale grids, every FP8 and FP4 weight marked blk = 32, the
 * parameters the reference keeps in BF16 required BF16 (or F32 holding
 * BF16 values), compressors / indexer keys only on the source layers,
 * Engram tables, no hc_head; the per-layer roles are derived from the
 * config, and the Engram hash is built from engram_token_map.json of the
 * checkpoint directory.
 */
#include "base/unaligned.h"
#include "base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/engram_map.h"
#include "io/model.h"
#include "io/gguf_model.h"
#include "oracle/engram_hash.h"

typedef enum { CLS_FP8, CLS_EXPERT, CLS_BF16, CLS_F32 } wclass;

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

static const char *tfile(const dsv4q_st_tensor *t) { return t->file ? t->file : "checkpoint"; }

/*
 * Hugging Face `transformers` spellings of the reference names. DeepSeek's
 * own V4 release uses the reference (state-dict) names; converted
 * checkpoints use these. Only 1:1 tensors are mapped (per-expert tensors in
 * the V3-style per-expert layout; a packed gate_up_proj is not accepted).
 */
static const char *const hf_layer_map[][2] = {
    {"attn.wq_a.weight", "self_attn.q_a_proj.weight"},
    {"attn.q_norm.weight", "self_attn.q_a_norm.weight"},
    {"attn.wq_b.weight", "self_attn.q_b_proj.weight"},
    {"attn.wkv.weight", "self_attn.kv_proj.weight"},
    {"attn.kv_norm.weight", "self_attn.kv_norm.weight"},
    {"attn.wo_a.weight", "self_attn.o_a_proj.weight"},
    {"attn.wo_b.weight", "self_attn.o_b_proj.weight"},
    {"attn.attn_sink", "self_attn.sinks"},
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"ffn.gate.weight", "mlp.gate.weight"},
    {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"},
    {"ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"},
    {"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"},
    {"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"},
    {"attn.compressor.ape", "self_attn.compressor.position_bias"},
    {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"},
    {"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
    {"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
    {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
    {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
    {"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"},
    {"attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
};
static const char *const hf_global_map[][2] = {
    {"embed.weight", "model.embed_tokens.weight"}, {"norm.weight", "model.norm.weight"},
    {"head.weight", "lm_head.weight"},             {"hc_head_fn", "model.hc_head.hc_fn"},
    {"hc_head_base", "model.hc_head.hc_base"},     {"hc_head_scale", "model.hc_head.hc_scale"},
};

/* The HF spelling of a reference name into buf; 0 if it has one. A
 * `.scale` of a linear maps to `<hf weight>_scale_inv`. */
int dsv4q_hf_name(const char *name, char *buf, size_t len)
{
    for (size_t i = 0; i < sizeof hf_global_map / sizeof *hf_global_map; i++)
        if (!strcmp(name, hf_global_map[i][0])) return snprintf(buf, len, "%s", hf_global_map[i][1]), 0;
    int li, n = 0;
    if (sscanf(name, "layers.%d.%n", &li, &n) != 1 || n == 0) return -1;
    const char *suf = name + n;
    char wname[256];
    int scale = strlen(suf) > 6 && !strcmp(suf + strlen(suf) - 6, ".scale");
    if (scale) {
        snprintf(wname, sizeof wname, "%.*s.weight", (int)(strlen(suf) - 6), suf);
        suf = wname;
    }
    char hf[256] = "";
    int e;
    char part[8];
    for (size_t i = 0; i < sizeof hf_layer_map / sizeof *hf_layer_map; i++)
        if (!strcmp(suf, hf_layer_map[i][0])) snprintf(hf, sizeof hf, "%s", hf_layer_map[i][1]);
    if (!hf[0] && sscanf(suf, "ffn.experts.%d.%2[w123].weight", &e, part) == 2) {
        const char *proj = !strcmp(part, "w1") ? "gate_proj" : !strcmp(part, "w2") ? "down_proj" : "up_proj";
        snprintf(hf, sizeof hf, "mlp.experts.%d.%s.weight", e, proj);
    }
    if (!hf[0]) return -1;
    snprintf(buf, len, "model.layers.%d.%s%s", li, hf, scale ? "_scale_inv" : "");
    return 0;
}

static const dsv4q_st_tensor *need(dsv4q_model *m, const char *name, char *err, size_t errlen)
{
    const dsv4q_st_tensor *t = dsv4q_st_find(m->st, name);
    char hf[300];
    if (!t && dsv4q_hf_name(name, hf, sizeof hf) == 0) t = dsv4q_st_find(m->st, hf);
    if (!t) snprintf(err, errlen, "%s: missing tensor '%s'", m->dir, name);
    return t;
}

static int check_shape(const dsv4q_st_tensor *t, int ndim, int64_t a, int64_t b, const char *what,
                       char *err, size_t errlen)
{
    int ok = t->ndim == ndim && t->shape[0] == a && (ndim < 2 || t->shape[1] == b);
    if (ok) return 0;
    char got[128] = "";
    size_t n = 0;
    for (int i = 0; i < t->ndim && n < sizeof got; i++)
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (ndim == 1)
        snprintf(err, errlen, "%s: tensor '%s' has shape [%s], expected [%lld] (%s)", tfile(t), t->name,
                 got, (long long)a, what);
    else
        snprintf(err, errlen, "%s: tensor '%s' has shape [%s], expected [%lld, %lld] (%s)", tfile(t),
                 t->name, got, (long long)a, (long long)b, what);
    return -1;
}

static int bad_dtype(const dsv4q_st_tensor *t, const char *expected, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: tensor '%s' has dtype %s, expected %s", tfile(t), t->name,
             dsv4q_dtype_name(t->dtype) ? dsv4q_dtype_name(t->dtype) : "?", expected);
    return -1;
}

/* Scan stored codes for NaN/inf; returns the first bad element or -1. */
static long first_nonfinite(const dsv4q_st_tensor *t)
{
    switch (t->dtype) {
    case DSV4Q_DT_BF16: {
        const uint16_t *p = t->data;
        for (long i = 0; i < t->numel; i++) if ((p[i] & 0x7F80) == 0x7F80) return i;
        break;
    }
    case DSV4Q_DT_F16: {
        const uint16_t *p = t->data;
        for (long i = 0; i < t->numel; i++) if ((p[i] & 0x7C00) == 0x7C00) return i;
        break;
    }
    case DSV4Q_DT_F32: {
        const float *p = t->data;
        for (long i = 0; i < t->numel; i++) if (!isfinite(p[i])) return i;
        break;
    }
    case DSV4Q_DT_F64: {
        const double *p = t->data;
        for (long i = 0; i < t->numel; i++) if (!isfinite(p[i])) return i;
        break;
    }
    case DSV4Q_DT_F8_E4M3: {
        const uint8_t *p = t->data;
        for (long i = 0; i < t->numel; i++) if ((p[i] & 0x7F) == 0x7F) return i;
        break;
    }
    case DSV4Q_DT_F8_E8M0: {
        const uint8_t *p = t->data;
        for (long i = 0; i < t->numel; i++) if (p[i] == 0xFF) return i;
        break;
    }
    default: break;
    }
    return -1;
}

static int check_finite(const dsv4q_st_tensor *t, char *err, size_t errlen)
{
    long i = first_nonfinite(t);
    if (i < 0) return 0;
    snprintf(err, errlen, "%s: tensor '%s' holds a non-finite value at flat index %ld", tfile(t),
             t->name, i);
    return -1;
}

int dsv4q_weight_check_finite(const dsv4q_weight *w, char *err, size_t errlen)
{
    for (int64_t o = 0; o < w->out; o++)
        for (int64_t k = 0; k < w->in; k++)
            if (!isfinite(dsv4q_weight_at(w, o, k))) {
                snprintf(err, errlen, "tensor '%s': non-finite value at [%lld, %lld]",
                         w->name ? w->name : "?", (long long)o, (long long)k);
                return -1;
            }
    return 0;
}

/* V4.1 scales are E8M0 parameters of the reference (float8_e8m0fnu): an
 * F32 scale is accepted only when every value is a power of two E8M0
 * holds (it then decodes to the same value), so the oracle never scales by
 * something the reference would have rounded. */
static int check_scale_v41(const dsv4q_st_tensor *s, char *err, size_t errlen)
{
    if (s->dtype != DSV4Q_DT_F32) return 0;
    for (long i = 0; i < s->numel; i++) {
        const float v = dsv4q_ld_f32(s->data, i);
        int e;
        const float f = frexpf(v, &e);
        if (!(v > 0) || f != 0.5f || e - 1 < -127 || e - 1 > 127) {
            snprintf(err, errlen,
                     "%s: tensor '%s' element %ld is %g: V4.1 scales are E8M0 (powers of two 2^-127..2^127)", tfile(s),
                     s->name, i, (double)v);
            return -1;
        }
    }
    return 0;
}

/* A parameter the V4.1 reference keeps in BF16 (RMSNorm weights, embed,
 * wo_a, gate.weight, indexer wk / weights_proj, the ratio-1 compressor wkv,
 * engram q/k weights): BF16, or F32 / F64 whose every value BF16 holds
 * (what the reference's load would keep unrounded). */
static int check_bf16_param(const dsv4q_st_tensor *t, char *err, size_t errlen)
{
    if (t->dtype == DSV4Q_DT_BF16) return 0;
    for (long i = 0; i < t->numel; i++) {
        const double v = dsv4q_decode_elem(t->dtype, t->data, (size_t)i);
        if (dsv4q_bf16_decode(dsv4q_bf16_encode(v)) != v) {
            snprintf(err, errlen,
                     "%s: tensor '%s' is %s with a value BF16 cannot hold (element %ld): the V4.1 reference keeps "
                     "this parameter in BF16",
                     tfile(t), t->name, dsv4q_dtype_name(t->dtype) ? dsv4q_dtype_name(t->dtype) : "?", i);
            return -1;
        }
    }
    return 0;
}

/* Bind a 2-D float-ish tensor (F32/BF16/F64) as a FP32-math weight. */
static int bind_plain(dsv4q_model *m, const char *name, int64_t out, int64_t in, const char *what,
                      dsv4q_weight *w, char *err, size_t errlen)
{
    const dsv4q_st_tensor *t = need(m, name, err, errlen);
    if (!t || check_shape(t, 2, out, in, what, err, errlen) || check_finite(t, err, errlen)) return -1;
    memset(w, 0, sizeof *w);
    w->name = t->name;
    w->out = out;
    w->in = in;
    w->data = t->data;
    switch (t->dtype) {
    case DSV4Q_DT_F32: w->fmt = DSV4Q_WF_F32; break;
    case DSV4Q_DT_BF16: w->fmt = DSV4Q_WF_BF16; break;
    case DSV4Q_DT_F64: w->fmt = DSV4Q_WF_F64; break;
    default: return bad_dtype(t, "F32, BF16 or F64", err, errlen);
    }
    return 0;
}

/* Bind prefix.weight (+ prefix.scale) of class cls as [out, in]. */
static int bind_linear(dsv4q_model *m, const char *prefix, int64_t out, int64_t in, wclass cls,
                       const char *what, dsv4q_weight *w, char *err, size_t errlen)
{
    char name[256], sname[256];
    snprintf(name, sizeof name, "%s.weight", prefix);
    snprintf(sname, sizeof sname, "%s.scale", prefix);
    dsv4q_wdtype want = cls == CLS_FP8 ? m->cfg.dtype : cls == CLS_EXPERT ? m->cfg.expert_dtype : DSV4Q_WDT_BF16;
    if (cls == CLS_F32) return bind_plain(m, name, out, in, what, w, err, errlen);
    /* the FP8 block: V4's 128 (blk 0 in the weight, as before V4.1), V4.1's 32 */
    const int v41 = m->cfg.arch == DSV4Q_ARCH_V41;
    const int64_t B = v41 ? DSV4Q_FP8_BLOCK_V41 : 128;
    const char *sgrid = v41 ? "E8M0 scale per 32x32 block" : "E8M0 scale per 128x128 block";
    const dsv4q_st_tensor *t = need(m, name, err, errlen);
    if (!t) return -1;
    memset(w, 0, sizeof *w);
    w->name = t->name;
    w->out = out;
    w->in = in;
    if (cls == CLS_BF16 && t->dtype == DSV4Q_DT_F8_E4M3) {
        /* wo_a: FP8 in the checkpoint, dequantized exactly to BF16 at load
         * (DeepSeek's converter / model.py treat it as a BF16 weight). */
        const dsv4q_st_tensor *s = need(m, sname, err, errlen);
        if (!s) return -1;
        if (check_shape(t, 2, out, in, what, err, errlen) || check_finite(t, err, errlen) ||
            check_shape(s, 2, (out + B - 1) / B, (in + B - 1) / B, sgrid, err, errlen) ||
            check_finite(s, err, errlen) || (v41 && check_scale_v41(s, err, errlen)))
            return -1;
        dsv4q_weight q = {name, DSV4Q_WF_FP8, out, in, t->data, s->data, s->dtype, 0};
        uint16_t *bf = malloc(sizeof(uint16_t) * (size_t)(out * in));
        if (own(m, bf)) { snprintf(err, errlen, "out of memory dequantizing '%s'", name); return -1; }
        const double *e4 = dsv4q_e4m3_table();
        const uint8_t *codes = t->data;
        const int64_t nkb = (in + B - 1) / B;
#pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < out; o++)
            for (int64_t k = 0; k < in; k++) {
                int64_t si = (o / B) * nkb + k / B;
                double sc = s->dtype == DSV4Q_DT_F32 ? dsv4q_ld_f32(s->data, si)
                                                     : dsv4q_e8m0_decode(((const uint8_t *)s->data)[si]);
                /* code * 2^e is exact in BF16 (3-bit mantissa): no rounding happens */
                bf[o * in + k] = dsv4q_bf16_from_f32((float)(e4[codes[o * in + k]] * sc));
            }
        (void)q;
        w->fmt = DSV4Q_WF_BF16;
        w->data = bf;
        return 0;
    }
    if (want == DSV4Q_WDT_BF16 || t->dtype == DSV4Q_DT_BF16) {
        if (t->dtype != DSV4Q_DT_BF16) return bad_dtype(t, "BF16", err, errlen);
        if (check_shape(t, 2, out, in, what, err, errlen) || check_finite(t, err, errlen)) return -1;
        if (want != DSV4Q_WDT_BF16 && m->n_bf16_quant++ == 0)
            snprintf(m->first_bf16_quant, sizeof m->first_bf16_quant, "%s", name);
        w->fmt = DSV4Q_WF_BF16;
        w->data = t->data;
        return 0;
    }
    const dsv4q_st_tensor *s = need(m, sname, err, errlen);
    if (!s) return -1;
    if (s->dtype != DSV4Q_DT_F8_E8M0 && s->dtype != DSV4Q_DT_F32)
        return bad_dtype(s, "F8_E8M0 or F32", err, errlen);
    if (v41 && check_scale_v41(s, err, errlen)) return -1;
    w->scale = s->data;
    w->scale_dtype = s->dtype;
    if (v41) w->blk = DSV4Q_FP8_BLOCK_V41; /* FP8 tiles and 1 x 32 act blocks; FP4: 1 x 32 act blocks */
    if (want == DSV4Q_WDT_FP4 && t->dtype == DSV4Q_DT_I8) {
        /* packed E2M1: [out, in/2] bytes, scales [out, in/32] */
        if (check_shape(t, 2, out, in / 2, "packed FP4 E2M1 pairs [out, in/2]", err, errlen) ||
            check_shape(s, 2, out, in / 32, "E8M0 scale per 32 [out, in/32]", err, errlen) ||
            check_finite(s, err, errlen))
            return -1;
        w->fmt = DSV4Q_WF_FP4;
        w->data = t->data;
        return 0;
    }
    if (t->dtype != DSV4Q_DT_F8_E4M3)
        return bad_dtype(t, want == DSV4Q_WDT_FP4 ? "I8 (packed FP4)" : "F8_E4M3", err, errlen);
    if (check_shape(t, 2, out, in, what, err, errlen) ||
        check_shape(s, 2, (out + B - 1) / B, (in + B - 1) / B, sgrid, err, errlen) || check_finite(t, err, errlen) ||
        check_finite(s, err, errlen))
        return -1;
    w->fmt = DSV4Q_WF_FP8;
    w->data = t->data;
    return 0;
}

static int bind_vec(dsv4q_model *m, const char *name, long n, dsv4q_vec *v, char *err, size_t errlen)
{
    const dsv4q_st_tensor *t = need(m, name, err, errlen);
    if (!t) return -1;
    if (t->numel != n || t->ndim < 1) {
        snprintf(err, errlen, "%s: tensor '%s' has %lld elements, expected %ld", tfile(t), name,
                 (long long)t->numel, n);
        return -1;
    }
    if (t->dtype != DSV4Q_DT_F32 && t->dtype != DSV4Q_DT_BF16 && t->dtype != DSV4Q_DT_F64)
        return bad_dtype(t, "F32, BF16 or F64", err, errlen);
    if (check_finite(t, err, errlen)) return -1;
    v->n = n;
    v->d = malloc(sizeof(double) * (size_t)n);
    v->f = malloc(sizeof(float) * (size_t)n);
    if (own(m, v->d) || own(m, v->f)) { snprintf(err, errlen, "out of memory"); return -1; }
    for (long i = 0; i < n; i++) {
        v->d[i] = dsv4q_decode_elem(t->dtype, t->data, (size_t)i);
        v->f[i] = (float)v->d[i];
    }
    return 0;
}

#define P(buf, ...) snprintf(buf, sizeof buf, __VA_ARGS__)

static int bind_cmp(dsv4q_model *m, const char *pre, int ratio, int Dc, dsv4q_cmp_w *c, char *err,
                    size_t errlen)
{
    char n[256];
    int coff = ratio == 4 ? 2 : 1;
    const dsv4q_config *g = &m->cfg;
    P(n, "%s.wkv", pre);
    if (bind_linear(m, n, coff * Dc, g->dim, CLS_F32, "compressor wkv [coff*Dc, dim]", &c->wkv, err, errlen)) return -1;
    P(n, "%s.wgate", pre);
    if (bind_linear(m, n, coff * Dc, g->dim, CLS_F32, "compressor wgate [coff*Dc, dim]", &c->wgate, err, errlen)) return -1;
    P(n, "%s.ape", pre);
    if (bind_vec(m, n, (long)ratio * coff * Dc, &c->ape, err, errlen)) return -1;
    P(n, "%s.norm.weight", pre);
    return bind_vec(m, n, Dc, &c->norm, err, errlen);
}

static int bind_expert(dsv4q_model *m, const char *pre, wclass cls, dsv4q_expert_w *e, char *err, size_t errlen)
{
    char n[256];
    const dsv4q_config *g = &m->cfg;
    P(n, "%s.w1", pre);
    if (bind_linear(m, n, g->moe_inter_dim, g->dim, cls, "expert w1 [inter, dim]", &e->w1, err, errlen)) return -1;
    P(n, "%s.w2", pre);
    if (bind_linear(m, n, g->dim, g->moe_inter_dim, cls, "expert w2 [dim, inter]", &e->w2, err, errlen)) return -1;
    P(n, "%s.w3", pre);
    return bind_linear(m, n, g->moe_inter_dim, g->dim, cls, "expert w3 [inter, dim]", &e->w3, err, errlen);
}

static int bind_vec_bf16(dsv4q_model *m, const char *name, long n, dsv4q_vec *v, char *err, size_t errlen);

/* The hyper-connection parameters of both halves and the two block norms
 * of layers.{li} (pre): V4 and V4.1 name and shape them alike; V4.1 keeps
 * the norms in BF16 (bf16_norms: checked, check_bf16_param). */
static int bind_hc(dsv4q_model *m, const char *pre, dsv4q_layer_w *L, int bf16_norms, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    const int hc = g->hc_mult, nmix = (2 + hc) * hc;
    const long d = g->dim;
    char n[256];
    P(n, "%s.hc_attn_fn", pre);
    if (bind_plain(m, n, nmix, hc * d, "hc fn [(2+hc)*hc, hc*dim]", &L->hc_attn_fn, err, errlen)) return -1;
    P(n, "%s.hc_ffn_fn", pre);
    if (bind_plain(m, n, nmix, hc * d, "hc fn [(2+hc)*hc, hc*dim]", &L->hc_ffn_fn, err, errlen)) return -1;
    P(n, "%s.hc_attn_base", pre);
    if (bind_vec(m, n, nmix, &L->hc_attn_base, err, errlen)) return -1;
    P(n, "%s.hc_ffn_base", pre);
    if (bind_vec(m, n, nmix, &L->hc_ffn_base, err, errlen)) return -1;
    P(n, "%s.hc_attn_scale", pre);
    if (bind_vec(m, n, 3, &L->hc_attn_scale, err, errlen)) return -1;
    P(n, "%s.hc_ffn_scale", pre);
    if (bind_vec(m, n, 3, &L->hc_ffn_scale, err, errlen)) return -1;
    P(n, "%s.attn_norm.weight", pre);
    if ((bf16_norms ? bind_vec_bf16 : bind_vec)(m, n, d, &L->attn_norm, err, errlen)) return -1;
    P(n, "%s.ffn_norm.weight", pre);
    if ((bf16_norms ? bind_vec_bf16 : bind_vec)(m, n, d, &L->ffn_norm, err, errlen)) return -1;
    return 0;
}

static int bind_layer(dsv4q_model *m, int li, dsv4q_layer_w *L, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    char pre[64], n[256];
    int mtp = li >= g->n_layers;
    if (mtp) P(pre, "mtp.%d", li - g->n_layers);
    else P(pre, "layers.%d", li);
    L->ratio = g->compress_ratios[li];
    L->hash = !mtp && li < g->n_hash_layers;
    L->is_mtp = mtp;
    L->kv_src = L->idx_src = L->engram_index = -1; /* the V4.1 roles: none */
    const int hc = g->hc_mult;
    const long d = g->dim, H = g->n_heads, D = g->head_dim;
    if (bind_hc(m, pre, L, 0, err, errlen)) return -1;
    P(n, "%s.attn.attn_sink", pre);
    if (bind_vec(m, n, H, &L->attn_sink, err, errlen)) return -1;
    P(n, "%s.attn.wq_a", pre);
    if (bind_linear(m, n, g->q_lora_rank, d, CLS_FP8, "wq_a [q_lora_rank, dim]", &L->wq_a, err, errlen)) return -1;
    P(n, "%s.attn.q_norm.weight", pre);
    if (bind_vec(m, n, g->q_lora_rank, &L->q_norm, err, errlen)) return -1;
    P(n, "%s.attn.wq_b", pre);
    if (bind_linear(m, n, H * D, g->q_lora_rank, CLS_FP8, "wq_b [n_heads*head_dim, q_lora_rank]", &L->wq_b, err, errlen)) return -1;
    P(n, "%s.attn.wkv", pre);
    if (bind_linear(m, n, D, d, CLS_FP8, "wkv [head_dim, dim]", &L->wkv, err, errlen)) return -1;
    P(n, "%s.attn.kv_norm.weight", pre);
    if (bind_vec(m, n, D, &L->kv_norm, err, errlen)) return -1;
    P(n, "%s.attn.wo_a", pre);
    if (bind_linear(m, n, (long)g->o_groups * g->o_lora_rank, H * D / g->o_groups, CLS_BF16,
                    "wo_a [o_groups*o_lora_rank, n_heads*head_dim/o_groups]", &L->wo_a, err, errlen)) return -1;
    P(n, "%s.attn.wo_b", pre);
    if (bind_linear(m, n, d, (long)g->o_groups * g->o_lora_rank, CLS_FP8, "wo_b [dim, o_groups*o_lora_rank]", &L->wo_b, err, errlen)) return -1;
    if (L->ratio) {
        P(n, "%s.attn.compressor", pre);
        if (bind_cmp(m, n, L->ratio, (int)D, &L->cmp, err, errlen)) return -1;
    }
    if (L->ratio == 4) {
        const long Hi = g->index_n_heads, Di = g->index_head_dim;
        P(n, "%s.attn.indexer.wq_b", pre);
        if (bind_linear(m, n, Hi * Di, g->q_lora_rank, CLS_FP8, "indexer wq_b [index_n_heads*index_head_dim, q_lora_rank]", &L->idx_wq_b, err, errlen)) return -1;
        P(n, "%s.attn.indexer.weights_proj", pre);
        if (bind_linear(m, n, Hi, d, CLS_BF16, "indexer weights_proj [index_n_heads, dim]", &L->idx_weights_proj, err, errlen)) return -1;
        P(n, "%s.attn.indexer.compressor", pre);
        if (bind_cmp(m, n, 4, (int)Di, &L->idx_cmp, err, errlen)) return -1;
    }
    P(n, "%s.ffn.gate", pre);
    if (bind_linear(m, n, g->n_routed_experts, d, CLS_F32, "gate [n_routed_experts, dim]", &L->gate, err, errlen)) return -1;
    if (L->hash) {
        P(n, "%s.ffn.gate.tid2eid", pre);
        const dsv4q_st_tensor *t = need(m, n, err, errlen);
        if (!t) return -1;
        if (t->dtype != DSV4Q_DT_I32) return bad_dtype(t, "I32", err, errlen);
        if (check_shape(t, 2, g->vocab_size, g->n_activated_experts, "tid2eid [vocab, n_activated_experts]", err, errlen)) return -1;
        const int32_t *e = t->data;
        for (long i = 0; i < t->numel; i++)
            if (e[i] < 0 || e[i] >= g->n_routed_experts) {
                snprintf(err, errlen, "%s: tensor '%s' element %ld is expert %d, outside [0, %d)", tfile(t), n, i,
                         e[i], g->n_routed_experts);
                return -1;
            }
        L->tid2eid = e;
    } else {
        P(n, "%s.ffn.gate.bias", pre);
        if (bind_vec(m, n, g->n_routed_experts, &L->gate_bias, err, errlen)) return -1;
    }
    L->experts = calloc((size_t)g->n_routed_experts, sizeof *L->experts);
    if (own(m, L->experts)) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int e = 0; e < g->n_routed_experts; e++) {
        P(n, "%s.ffn.experts.%d", pre, e);
        if (bind_expert(m, n, CLS_EXPERT, &L->experts[e], err, errlen)) return -1;
    }
    P(n, "%s.ffn.shared_experts", pre);
    if (bind_expert(m, n, CLS_FP8, &L->shared, err, errlen)) return -1;
    if (mtp) {
        P(n, "%s.e_proj", pre);
        if (bind_linear(m, n, d, d, CLS_FP8, "e_proj [dim, dim]", &L->e_proj, err, errlen)) return -1;
        P(n, "%s.h_proj", pre);
        if (bind_linear(m, n, d, d, CLS_FP8, "h_proj [dim, dim]", &L->h_proj, err, errlen)) return -1;
        P(n, "%s.enorm.weight", pre);
        if (bind_vec(m, n, d, &L->enorm, err, errlen)) return -1;
        P(n, "%s.hnorm.weight", pre);
        if (bind_vec(m, n, d, &L->hnorm, err, errlen)) return -1;
        P(n, "%s.norm.weight", pre);
        if (bind_vec(m, n, d, &L->norm, err, errlen)) return -1;
        P(n, "%s.hc_head_fn", pre);
        if (bind_plain(m, n, hc, hc * d, "hc_head_fn [hc, hc*dim]", &L->hc_head_fn, err, errlen)) return -1;
        P(n, "%s.hc_head_base", pre);
        if (bind_vec(m, n, hc, &L->hc_head_base, err, errlen)) return -1;
        P(n, "%s.hc_head_scale", pre);
        if (bind_vec(m, n, 1, &L->hc_head_scale, err, errlen)) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* DeepSeek V4.1                                                             */

/* bind_plain / bind_vec of a BF16 parameter of the V4.1 reference. */
static int bind_plain_bf16(dsv4q_model *m, const char *name, int64_t out, int64_t in, const char *what, dsv4q_weight *w,
                           char *err, size_t errlen)
{
    if (bind_plain(m, name, out, in, what, w, err, errlen)) return -1;
    return check_bf16_param(dsv4q_st_find(m->st, w->name), err, errlen);
}

static int bind_vec_bf16(dsv4q_model *m, const char *name, long n, dsv4q_vec *v, char *err, size_t errlen)
{
    if (bind_vec(m, name, n, v, err, errlen)) return -1;
    const dsv4q_st_tensor *t = dsv4q_st_find(m->st, name);
    char hf[300];
    if (!t && dsv4q_hf_name(name, hf, sizeof hf) == 0) t = dsv4q_st_find(m->st, hf);
    return t ? check_bf16_param(t, err, errlen) : 0;
}

static int v41_in(const int *list, int n, int x)
{
    for (int k = 0; k < n; k++)
        if (list[k] == x) return k;
    return -1;
}

static int v41_nearest(const int *list, int n, int i)
{
    int best = -1;
    for (int k = 0; k < n && list[k] <= i; k++) best = list[k];
    return best;
}

/* The per-layer roles the forward pass reads, from the config (model.py
 * Attention.is_kv_source / is_index_source, Indexer.owns_k /
 * is_candidate_source / uses_candidates, Block.engram). kv_src / idx_src
 * are -1 on ratio-0 layers (they read no compressed KV). */
static void roles_v41(const dsv4q_config *g, int li, dsv4q_layer_w *L)
{
    L->kv_source = v41_in(g->kv_source_layers, g->n_kv_source_layers, li) >= 0;
    L->index_source = v41_in(g->index_source_layers, g->n_index_source_layers, li) >= 0;
    L->kv_src = L->ratio > 0 ? v41_nearest(g->kv_source_layers, g->n_kv_source_layers, li) : -1;
    L->idx_src = L->ratio > 0 ? v41_nearest(g->index_source_layers, g->n_index_source_layers, li) : -1;
    L->candidate_source = g->candidate_source_layer >= 0 && li == g->candidate_source_layer;
    L->candidate_consumer = L->index_source && g->candidate_source_layer >= 0 && g->candidate_source_layer < li;
    L->engram_index = v41_in(g->engram_layer_ids, g->n_engram_layers, li);
}

/* layers.{li}.engram.*: the FP8 table with per-32 row scales, wkv, q/k weights. */
static int bind_engram(dsv4q_model *m, const char *pre, int e, dsv4q_engram_w *E, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    const int64_t rows = g->engram_num_embeddings[e], hd = g->engram_head_dim;
    const int ncols = (g->engram_max_ngram_size - 1) * g->engram_n_heads;
    char n[256];
    P(n, "%s.engram.embed.weight", pre);
    const dsv4q_st_tensor *t = need(m, n, err, errlen);
    if (!t) return -1;
    if (t->dtype != DSV4Q_DT_F8_E4M3) return bad_dtype(t, "F8_E4M3 (the Engram table)", err, errlen);
    if (t->ndim == 2 && t->shape[1] == hd && t->shape[0] != rows) {
        snprintf(err, errlen, "%s: tensor '%s' has %lld rows, engram_num_embeddings[%d] says %lld", tfile(t), n,
                 (long long)t->shape[0], e, (long long)rows);
        return -1;
    }
    if (check_shape(t, 2, rows, hd, "Engram table [engram_num_embeddings, engram_head_dim]", err, errlen) ||
        check_finite(t, err, errlen))
        return -1;
    P(n, "%s.engram.embed.scale", pre);
    const dsv4q_st_tensor *s = need(m, n, err, errlen);
    if (!s) return -1;
    if (s->dtype != DSV4Q_DT_F8_E8M0) return bad_dtype(s, "F8_E8M0 (one scale per 32 of a table row)", err, errlen);
    if (check_shape(s, 2, rows, hd / 32, "E8M0 scale per 32 of a row [rows, engram_head_dim/32]", err, errlen) ||
        check_finite(s, err, errlen))
        return -1;
    E->table = t->data;
    E->table_scale = s->data;
    E->rows = rows;
    E->head_dim = (int)hd;
    E->ncols = ncols;
    E->hc = g->hc_mult;
    E->dim = g->dim;
    P(n, "%s.engram.wkv", pre);
    if (bind_linear(m, n, (int64_t)g->dim * (g->hc_mult + 1), (int64_t)ncols * hd, CLS_FP8,
                    "engram wkv [dim*(hc_mult+1), (engram_max_ngram_size-1)*engram_n_heads*engram_head_dim]", &E->wkv,
                    err, errlen))
        return -1;
    P(n, "%s.engram.q_weight", pre);
    if (bind_plain_bf16(m, n, g->hc_mult, g->dim, "engram q_weight [hc_mult, dim]", &E->q_weight, err, errlen))
        return -1;
    P(n, "%s.engram.k_weight", pre);
    return bind_plain_bf16(m, n, g->hc_mult, g->dim, "engram k_weight [hc_mult, dim]", &E->k_weight, err, errlen);
}

/* The DSpark-only tensors of stage j under pre = "mtp.{j}" (model.py
 * DSparkBlock's state_dict names): main_proj + main_norm on stage 0; norm,
 * markov_head.embed / head, confidence_head.proj on the last stage. The
 * stages' embed / head are the main model's (shared modules): copies
 * under mtp.{j}.embed / .head, if a checkpoint has them, are not read. */
static int bind_dspark_v41(dsv4q_model *m, const char *pre, int j, dsv4q_layer_w *L, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    const long d = g->dim, R = g->dspark_markov_rank;
    char n[256];
    if (j == 0) {
        P(n, "%s.main_proj", pre);
        if (bind_linear(m, n, d, d * g->n_dspark_target_layer_ids, CLS_FP8,
                        "main_proj [dim, dim*len(dspark_target_layer_ids)]", &L->main_proj, err, errlen))
            return -1;
        P(n, "%s.main_norm.weight", pre);
        if (bind_vec_bf16(m, n, d, &L->main_norm, err, errlen)) return -1;
    }
    if (j != g->n_mtp_layers - 1) return 0;
    P(n, "%s.norm.weight", pre);
    if (bind_vec_bf16(m, n, d, &L->norm, err, errlen)) return -1;
    P(n, "%s.markov_head.embed.weight", pre);
    if (bind_plain_bf16(m, n, g->vocab_size, R, "markov_head.embed [vocab_size, dspark_markov_rank]", &L->markov_embed,
                        err, errlen))
        return -1;
    /* ParallelHead / the confidence Linear: FP32 parameters (BF16 in the checkpoint), bound as head.weight is */
    P(n, "%s.markov_head.head.weight", pre);
    if (bind_plain(m, n, g->vocab_size, R, "markov_head.head [vocab_size, dspark_markov_rank]", &L->markov_head, err,
                   errlen))
        return -1;
    P(n, "%s.confidence_head.proj.weight", pre);
    return bind_plain(m, n, 1, d + R, "confidence_head.proj [1, dim+dspark_markov_rank]", &L->conf_proj, err, errlen);
}

/* One V4.1 block, layers.{li} (docs/model.md, V4.1 checkpoints); li >=
 * n_layers: DSpark stage li - n_layers under mtp.{j} (window-only, the
 * DSpark expert counts, then bind_dspark_v41). */
static int bind_layer_v41(dsv4q_model *m, int li, dsv4q_layer_w *L, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    char pre[64], n[256];
    const int stage = li >= g->n_layers ? li - g->n_layers : -1;
    if (stage >= 0) P(pre, "mtp.%d", stage);
    else P(pre, "layers.%d", li);
    L->ratio = g->compress_ratios[li];
    roles_v41(g, li, L);
    L->is_mtp = stage >= 0;
    const int n_routed = stage >= 0 && g->dspark_n_routed_experts ? g->dspark_n_routed_experts : g->n_routed_experts;
    if (stage >= 0) {
        L->n_routed = n_routed;
        L->n_activated = g->dspark_n_activated_experts ? g->dspark_n_activated_experts : g->n_activated_experts;
    }
    const long d = g->dim, H = g->n_heads, D = g->head_dim, Hi = g->index_n_heads, Di = g->index_head_dim;
    if (bind_hc(m, pre, L, 1, err, errlen)) return -1;
    P(n, "%s.attn.attn_sink", pre);
    if (bind_vec(m, n, H, &L->attn_sink, err, errlen)) return -1;
    P(n, "%s.attn.wq_a", pre);
    if (bind_linear(m, n, g->q_lora_rank, d, CLS_FP8, "wq_a [q_lora_rank, dim]", &L->wq_a, err, errlen)) return -1;
    P(n, "%s.attn.q_norm.weight", pre);
    if (bind_vec_bf16(m, n, g->q_lora_rank, &L->q_norm, err, errlen)) return -1;
    P(n, "%s.attn.wq_b", pre);
    if (bind_linear(m, n, H * D, g->q_lora_rank, CLS_FP8, "wq_b [n_heads*head_dim, q_lora_rank]", &L->wq_b, err,
                    errlen))
        return -1;
    P(n, "%s.attn.wkv", pre);
    if (bind_linear(m, n, D, d, CLS_FP8, "wkv [head_dim, dim]", &L->wkv, err, errlen)) return -1;
    P(n, "%s.attn.kv_norm.weight", pre);
    if (bind_vec_bf16(m, n, D, &L->kv_norm, err, errlen)) return -1;
    P(n, "%s.attn.wo_a", pre);
    /* wo_a: BF16 (CLS_BF16 takes BF16 only, or FP8 + a 32-block scale dequantized exactly, as convert.py does) */
    if (bind_linear(m, n, (long)g->o_groups * g->o_lora_rank, H * D / g->o_groups, CLS_BF16,
                    "wo_a [o_groups*o_lora_rank, n_heads*head_dim/o_groups]", &L->wo_a, err, errlen))
        return -1;
    P(n, "%s.attn.wo_b", pre);
    if (bind_linear(m, n, d, (long)g->o_groups * g->o_lora_rank, CLS_FP8, "wo_b [dim, o_groups*o_lora_rank]", &L->wo_b,
                    err, errlen))
        return -1;
    if (L->kv_source) {
        /* Compressor: ratio 1 a BF16 projection, ratio 2 FP32 wkv + wgate (softmax pooling); no ape */
        P(n, "%s.attn.compressor.wkv.weight", pre);
        if (L->ratio == 1 ? bind_plain_bf16(m, n, D, d, "compressor wkv [head_dim, dim] (BF16 at ratio 1)", &L->cmp.wkv,
                                            err, errlen)
                          : bind_plain(m, n, D, d, "compressor wkv [head_dim, dim]", &L->cmp.wkv, err, errlen))
            return -1;
        if (L->ratio > 1) {
            P(n, "%s.attn.compressor.wgate.weight", pre);
            if (bind_plain(m, n, D, d, "compressor wgate [head_dim, dim]", &L->cmp.wgate, err, errlen)) return -1;
        }
        P(n, "%s.attn.compressor.norm.weight", pre);
        if (bind_vec_bf16(m, n, D, &L->cmp.norm, err, errlen)) return -1;
    }
    if (L->index_source) {
        P(n, "%s.attn.indexer.wq_b", pre);
        if (bind_linear(m, n, Hi * Di, g->q_lora_rank, CLS_FP8,
                        "indexer wq_b [index_n_heads*index_head_dim, q_lora_rank]", &L->idx_wq_b, err, errlen))
            return -1;
        P(n, "%s.attn.indexer.weights_proj", pre);
        if (bind_linear(m, n, Hi, d, CLS_BF16, "indexer weights_proj [index_n_heads, dim]", &L->idx_weights_proj, err,
                        errlen))
            return -1;
        if (L->kv_source) {
            /* Indexer.owns_k: keys k_norm(wk(latent)) from this layer's compressor latent */
            P(n, "%s.attn.indexer.wk.weight", pre);
            if (bind_plain_bf16(m, n, Di, D, "indexer wk [index_head_dim, head_dim]", &L->idx_wk, err, errlen))
                return -1;
            P(n, "%s.attn.indexer.k_norm.weight", pre);
            if (bind_vec_bf16(m, n, Di, &L->idx_k_norm, err, errlen)) return -1;
        }
    }
    /* the gate (BF16 weight, FP32 bias; bias_vl of a vision checkpoint is not loaded: text only) */
    P(n, "%s.ffn.gate.weight", pre);
    if (bind_plain_bf16(m, n, n_routed, d, "gate [n_routed_experts, dim]", &L->gate, err, errlen)) return -1;
    P(n, "%s.ffn.gate.bias", pre);
    if (bind_vec(m, n, n_routed, &L->gate_bias, err, errlen)) return -1;
    L->experts = calloc((size_t)n_routed, sizeof *L->experts);
    if (own(m, L->experts)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int e = 0; e < n_routed; e++) {
        P(n, "%s.ffn.experts.%d", pre, e);
        if (bind_expert(m, n, CLS_EXPERT, &L->experts[e], err, errlen)) return -1;
    }
    P(n, "%s.ffn.shared_experts", pre);
    if (bind_expert(m, n, CLS_FP8, &L->shared, err, errlen)) return -1;
    if (stage >= 0) return bind_dspark_v41(m, pre, stage, L, err, errlen);
    if (L->engram_index >= 0 && bind_engram(m, pre, L->engram_index, &L->engram, err, errlen)) return -1;
    return 0;
}

/* embed, norm, head (no hc_head in V4.1) and the Engram hash. */
static int bind_globals_v41(dsv4q_model *m, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    if (bind_plain_bf16(m, "embed.weight", g->vocab_size, g->dim, "embed [vocab_size, dim]", &m->embed, err, errlen))
        return -1;
    if (bind_plain(m, "head.weight", g->vocab_size, g->dim, "head [vocab_size, dim]", &m->head, err, errlen)) return -1;
    return bind_vec_bf16(m, "norm.weight", g->dim, &m->norm, err, errlen);
}

/* m->engram_hash from the config and DIR/engram_token_map.json (io/engram_map.h). */
static int engram_hash_v41(dsv4q_model *m, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    if (g->n_engram_layers == 0) return 0;
    char path[4200], e2[768];
    snprintf(path, sizeof path, "%s/engram_token_map.json", m->dir);
    dsv4q_engram_map map;
    if (dsv4q_engram_map_load(&map, path, e2, sizeof e2)) {
        snprintf(err, errlen, "%s (the Engram layers need the compressed-token map)", e2);
        return -1;
    }
    if (map.vocab > g->vocab_size) {
        snprintf(err, errlen, "%s: field 'token_map' has %lld entries, more than the model's vocab_size %d", path,
                 (long long)map.vocab, g->vocab_size);
        dsv4q_engram_map_free(&map);
        return -1;
    }
    m->engram_hash = calloc(1, sizeof *m->engram_hash);
    if (!m->engram_hash) {
        dsv4q_engram_map_free(&map);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const dsv4q_engram_hash_params p = {
        .n_layers = g->n_engram_layers,
        .layer_ids = g->engram_layer_ids,
        .max_ngram = g->engram_max_ngram_size,
        .n_heads = g->engram_n_heads,
        .engram_vocab_size = g->engram_vocab_size,
        .num_embeddings = g->engram_num_embeddings,
        .compressed_vocab_size = g->engram_compressed_vocab_size,
        .map_vocab_size = map.compressed_vocab_size,
        .token_map = map.token_map,
        .vocab = map.vocab,
        .pad_id = g->engram_pad_id,
    };
    int rc = dsv4q_engram_hash_init(m->engram_hash, &p, e2, sizeof e2);
    dsv4q_engram_map_free(&map);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, e2);
        return -1;
    }
    for (int e = 0; e < g->n_engram_layers; e++)
        if (m->engram_hash->rows[e] != g->engram_num_embeddings[e]) { /* validate checked the sums: never */
            snprintf(err, errlen, "%s: Engram layer %d has %lld rows, engram_num_embeddings[%d] says %lld", path,
                     g->engram_layer_ids[e], (long long)m->engram_hash->rows[e], e,
                     (long long)g->engram_num_embeddings[e]);
            return -1;
        }
    return 0;
}

/* Whether the checkpoint holds any mtp.* tensor (DSpark stages). */
static int has_mtp_tensors(const dsv4q_model *m)
{
    for (size_t i = 0, n = dsv4q_st_count(m->st); i < n; i++)
        if (!strncmp(dsv4q_st_at(m->st, i)->name, "mtp.", 4)) return 1;
    return 0;
}

/* The backbone, then the DSpark stages when the config has them
 * (dspark_block_size > 0, n_mtp_layers stages): a checkpoint with no mtp.*
 * tensor at all loads as the backbone only (cfg.n_mtp_layers set to 0 and
 * compress_ratios cut to n_layers: DSpark is optional, callers say so);
 * one with some mtp.* tensors must have every one (missing: refused,
 * named). */
static int bind_v41(dsv4q_model *m, char *err, size_t errlen)
{
    dsv4q_config *g = &m->cfg;
    if (bind_globals_v41(m, err, errlen)) return -1;
    if (g->n_mtp_layers > 0 && !has_mtp_tensors(m)) {
        g->n_mtp_layers = 0;
        g->n_compress_ratios = g->n_layers;
    }
    const int nl = g->n_layers + g->n_mtp_layers;
    m->layers = calloc((size_t)nl, sizeof *m->layers);
    if (own(m, m->layers)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int li = 0; li < nl; li++)
        if (bind_layer_v41(m, li, &m->layers[li], err, errlen)) return -1;
    return engram_hash_v41(m, err, errlen);
}

/* A V4.1 checkpoint whose tensors say a layer has a role its config does
 * not give it (an Engram table on a layer not in engram_layer_ids, a
 * compressor off the kv sources, an indexer off the index sources, index
 * keys on a layer that does not own them) is refused: the config would run
 * a different model than the weights hold, silently (the reference's
 * load_state_dict refuses the unexpected keys too). */
static int check_roles_v41(const dsv4q_model *m, char *err, size_t errlen)
{
    for (size_t i = 0; i < dsv4q_st_count(m->st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(m->st, i);
        int li, off = 0;
        if (sscanf(t->name, "layers.%d.%n", &li, &off) != 1 || off == 0 || li < 0 || li >= m->cfg.n_layers) continue;
        const dsv4q_layer_w *L = &m->layers[li];
        const char *rest = t->name + off, *why = NULL;
        if (!strncmp(rest, "engram.", 7) && L->engram_index < 0) why = "engram_layer_ids does not list the layer";
        else if (!strncmp(rest, "attn.compressor.", 16) && !L->kv_source)
            why = "kv_source_layer_ids does not list the layer";
        else if ((!strncmp(rest, "attn.indexer.wk.", 16) || !strncmp(rest, "attn.indexer.k_norm.", 20)) &&
                 !(L->kv_source && L->index_source))
            why = "only a layer in both kv_source_layer_ids and index_source_layer_ids owns index keys";
        else if (!strncmp(rest, "attn.indexer.", 13) && !L->index_source)
            why = "index_source_layer_ids does not list the layer";
        if (why)
            return dsv4q_errf(err, errlen,
                              "%s: tensor '%s' is in the checkpoint, but %s (config.json and the weights "
                              "disagree)",
                              tfile(t), t->name, why);
    }
    return 0;
}

int dsv4q_model_open(dsv4q_model **out, const char *dir, char *err, size_t errlen)
{
    *out = NULL;
    const int kind = dsv4q_model_path_kind(dir, err, errlen);
    if (kind < 0) return -1;
    if (kind == 1) return dsv4q_model_open_gguf(out, dir, err, errlen);
    dsv4q_model *m = calloc(1, sizeof *m);
    char path[4200];
    *out = NULL;
    if (!m) { snprintf(err, errlen, "out of memory"); return -1; }
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (dsv4q_config_load(&m->cfg, path, err, errlen)) goto fail;
    /* Prefer the checkpoint's own index or single file, so that other
     * safetensors files in the directory (goldens, captures) are ignored. */
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, R_OK) != 0) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (access(path, R_OK) != 0) snprintf(path, sizeof path, "%s", dir);
    }
    if (dsv4q_st_open(&m->st, path, err, errlen)) goto fail;
    if (m->cfg.arch == DSV4Q_ARCH_V41) {
        if (bind_v41(m, err, errlen) || check_roles_v41(m, err, errlen)) goto fail;
        *out = m;
        return 0;
    }
    const dsv4q_config *g = &m->cfg;
    const int hc = g->hc_mult;
    {
        const dsv4q_st_tensor *t = need(m, "embed.weight", err, errlen);
        if (!t || check_shape(t, 2, g->vocab_size, g->dim, "embed [vocab_size, dim]", err, errlen)) goto fail;
        if (bind_plain(m, "embed.weight", g->vocab_size, g->dim, "embed [vocab_size, dim]", &m->embed, err, errlen)) goto fail;
    }
    if (bind_plain(m, "head.weight", g->vocab_size, g->dim, "head [vocab_size, dim]", &m->head, err, errlen)) goto fail;
    if (bind_plain(m, "hc_head_fn", hc, (long)hc * g->dim, "hc_head_fn [hc, hc*dim]", &m->hc_head_fn, err, errlen)) goto fail;
    if (bind_vec(m, "hc_head_base", hc, &m->hc_head_base, err, errlen)) goto fail;
    if (bind_vec(m, "hc_head_scale", 1, &m->hc_head_scale, err, errlen)) goto fail;
    if (bind_vec(m, "norm.weight", g->dim, &m->norm, err, errlen)) goto fail;
    int nl = g->n_layers + g->n_mtp_layers;
    m->layers = calloc((size_t)nl, sizeof *m->layers);
    if (own(m, m->layers)) { snprintf(err, errlen, "out of memory"); goto fail; }
    for (int li = 0; li < nl; li++)
        if (bind_layer(m, li, &m->layers[li], err, errlen)) goto fail;
    *out = m;
    return 0;
fail:
    dsv4q_model_close(m);
    return -1;
}

void dsv4q_model_close(dsv4q_model *m)
{
    if (!m) return;
    if (m->engram_hash) {
        dsv4q_engram_hash_free(m->engram_hash);
        free(m->engram_hash);
    }
    for (long i = 0; i < m->nowned; i++) free(m->owned[i]);
    free(m->owned);
    if (m->st) dsv4q_st_close(m->st);
    if (m->gguf) dsv4q_gguf_close(m->gguf);
    free(m);
}
