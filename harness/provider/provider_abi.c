/*
 * provider_abi.c - a backend as the forward pass's operator provider
 * (harness/provider/provider_abi.h): each entry of the provider table
 * (oracle/model_run.h) becomes one backend-ABI call on F32 tensors, in a
 * harness buffer with a NaN sentinel and a guard zone (isolate.h I2), so a
 * short write, an overrun or a bad output dtype is named with its place
 * ("op X, layer L, position P"). The forward pass itself is oracle/model.c:
 * `qualify --whole-model` runs THE forward pass on this provider.
 *
 * Glue that is not one operator of the ABI lives here, kept FP32 as an
 * engine's would be: rope on the rope dims of each row, act_quant of the kv
 * nope dims, the MoE (MOE_GATE, EXPERT per routed expert in ascending id,
 * their FP32 sum, the shared expert, moe_bf16), and the compressors at
 * decode: the ABI's COMPRESSOR is a prefill from position 0, so at a decode
 * step that completes a block the provider runs it on the layer's whole
 * input history and keeps the last row (causal: harness/qualify/qualify_model.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/ops/ops.h"
#include "harness/provider/provider_abi.h"
#include "oracle/boundary.h"
#include "oracle/engram_hash.h"
#include "oracle/formats.h"
#include "oracle/ops41.h" /* dsv4q_hc_collapse_f32: the final collapse (provider41.inc) */

#define GUARD 64
#define GUARD_BYTE 0x5A
#define SENTINEL 0x7FFFA5A5u   /* a NaN as F32; an out-of-range index as I32 */

/* ---- provider state ---------------------------------------------------- */

typedef struct wl {
    float *hist;           /* [max_pos, dim] the layer's attention input so far (ratio layers) */
    long nhist;
    long prefill; /* V4.1 compressor: the prefill's length */
} wl;

struct dsv4q_abi_provider {
    const dsv4q_backend_v1 *b;
    void *ctx;
    const dsv4q_model *m;
    const dsv4q_config *g;
    uint64_t bs;
    int ue8m0;
    long *calls;
    long *fallbacks;       /* [DSV4Q_OP_COUNT] calls run by oracle-f32 instead (not in caps / declined) */
    char role[128];        /* the weight of the call in flight (checkpoint name less its suffix), or "" */
    char *detail;
    size_t detaillen;
    char *err;
    size_t errlen;
    int status;            /* DSV4Q_BACKEND_* of the first failure */
    int layer;
    long p0, s;
    wl *ls;
    int32_t *eids; /* V4.1 Engram: [max_pos] the compressed id of each position so far (provider41.inc) */
    long neids, eids_cap;
};
typedef struct dsv4q_abi_provider wm;

static float rbf(uint64_t bs, int b, float v)
{
    return ((bs >> b) & 1u) ? dsv4q_bf16_to_f32(dsv4q_bf16_from_f32(v)) : v;
}

/* Where the composition is: "op X, layer L, position P" (or positions). */
static void where(const wm *w, const char *op, char *buf, size_t len)
{
    char lay[32] = "";
    if (w->layer >= 0) snprintf(lay, sizeof lay, "layer %d, ", w->layer);
    else snprintf(lay, sizeof lay, "head, ");
    if (w->s > 1)
        snprintf(buf, len, "op %s, %spositions %ld..%ld (prefill)", op, lay, w->p0, w->p0 + w->s - 1);
    else
        snprintf(buf, len, "op %s, %sposition %ld%s", op, lay, w->p0, w->p0 ? " (decode)" : "");
}

static int fail(wm *w, int status, const char *op, const char *fmt, ...)
{
    char at[160], msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    where(w, op, at, sizeof at);
    if (w->status == DSV4Q_BACKEND_OK) {
        snprintf(w->err, w->errlen, "%s: %s", at, msg);
        w->status = status;
    }
    return -1;
}

#define OOM(w) fail((w), DSV4Q_BACKEND_ERROR, "glue", "out of memory")

/* The role of the next call: the checkpoint tensor name without `suffix`
 * ("layers.3.attn.wq_a.weight" -> "layers.3.attn.wq_a"); NULL clears it. */
static void set_role(wm *w, const char *name, const char *suffix)
{
    w->role[0] = 0;
    if (!name) return;
    size_t n = strlen(name), k = strlen(suffix);
    if (n >= k && !strcmp(name + n - k, suffix)) n -= k;
    snprintf(w->role, sizeof w->role, "%.*s", (int)n, name);
}

/* ---- tensors ----------------------------------------------------------- */

static dsv4q_bt bt_f32(const char *name, const float *d, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    dsv4q_bt t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = DSV4Q_BT_F32;
    t.ndim = ndim;
    t.shape[0] = d0;
    t.shape[1] = d1;
    t.shape[2] = d2;
    t.data = ndim ? (void *)d : NULL;
    return t;
}

static dsv4q_bt bt_i32(const char *name, const int32_t *d, int ndim, int64_t d0, int64_t d1)
{
    dsv4q_bt t = bt_f32(name, NULL, ndim, d0, d1, 0);
    t.dtype = DSV4Q_BT_I32;
    t.data = ndim ? (void *)d : NULL;
    return t;
}

static dsv4q_bt bt_vec(const char *name, const dsv4q_vec *v) { return bt_f32(name, v->f, 1, v->n, 0, 0); }

/* A weight as the ABI gives it: decoded F32 values (+ the raw stored form).
 * *owned receives the decoded buffer to free after the call (NULL when the
 * stored form already is F32). */
static int bt_weight(wm *w, dsv4q_bt *t, const char *name, const dsv4q_weight *W, float **owned)
{
    *t = bt_f32(name, NULL, 2, W->out, W->in, 0);
    *owned = NULL;
    if (W->fmt == DSV4Q_WF_F32) {
        t->data = (void *)W->data;
        return 0;
    }
    const int64_t n = W->out * W->in;
    float *d = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!d) return OOM(w);
    for (int64_t o = 0; o < W->out; o++) dsv4q_weight_row_f32(W, o, d + o * W->in);
    t->data = d;
    *owned = d;
    switch (W->fmt) {
    case DSV4Q_WF_BF16:
        t->raw = W->data;
        t->raw_dtype = DSV4Q_BT_BF16;
        t->raw_ndim = 2;
        t->raw_shape[0] = W->out;
        t->raw_shape[1] = W->in;
        break;
    case DSV4Q_WF_FP8:
        t->raw = W->data;
        t->raw_dtype = DSV4Q_BT_F8_E4M3;
        t->raw_ndim = 2;
        t->raw_shape[0] = W->out;
        t->raw_shape[1] = W->in;
        t->raw_scale = W->scale;
        t->scale_dtype = (int32_t)W->scale_dtype;
        t->scale_shape[0] = (W->out + dsv4q_weight_blk(W) - 1) / dsv4q_weight_blk(W); /* 128 (V4) or 32 (V4.1) tiles */
        t->scale_shape[1] = (W->in + dsv4q_weight_blk(W) - 1) / dsv4q_weight_blk(W);
        break;
    case DSV4Q_WF_FP4:
        t->raw = W->data;
        t->raw_dtype = DSV4Q_BT_I8;
        t->raw_ndim = 2;
        t->raw_shape[0] = W->out;
        t->raw_shape[1] = W->in / 2;
        t->raw_scale = W->scale;
        t->scale_dtype = (int32_t)W->scale_dtype;
        t->scale_shape[0] = W->out;
        t->scale_shape[1] = W->in / 32;
        break;
    default:   /* F64 (synthetic): decoded values only */
        break;
    }
    return 0;
}

/* One output: shape, and where its values go (float, or int32_t for I32). */
typedef struct wout {
    const char *name;
    int i32, ndim;
    int64_t d[3];
    void *dst;
} wout;

/* One backend call. Outputs go to harness buffers (NaN sentinel + guard
 * zone, as in isolate.h I2) and are copied to wout.dst afterwards, so dst
 * may alias an input. BF16/F16 outputs are decoded to F32 values. */
static int call(wm *w, int op, const dsv4q_bt *in, const double *par, int nout, const wout *wo)
{
    const dsv4q_op_info *oi = dsv4q_op_get(op);
    char at[160];
    where(w, oi->name, at, sizeof at);
    if (w->detail) snprintf(w->detail, w->detaillen, "%s", at);
    dsv4q_bt out[DSV4Q_OPS_MAX_T];
    unsigned char *buf[DSV4Q_OPS_MAX_T] = {0};
    int64_t n[DSV4Q_OPS_MAX_T];
    int rc = -1;
    for (int i = 0; i < nout; i++) {
        n[i] = 1;
        for (int k = 0; k < wo[i].ndim; k++) n[i] *= wo[i].d[k];
        buf[i] = malloc(4 * (size_t)n[i] + GUARD);
        if (!buf[i]) { OOM(w); goto out; }
        uint32_t sv = SENTINEL;
        for (int64_t k = 0; k < n[i]; k++) memcpy(buf[i] + 4 * k, &sv, 4);
        memset(buf[i] + 4 * n[i], GUARD_BYTE, GUARD);
        memset(&out[i], 0, sizeof out[i]);
        out[i].name = wo[i].name;
        out[i].dtype = wo[i].i32 ? DSV4Q_BT_I32 : DSV4Q_BT_F32;
        out[i].ndim = wo[i].ndim;
        for (int k = 0; k < wo[i].ndim; k++) out[i].shape[k] = wo[i].d[k];
        out[i].data = buf[i];
    }
    dsv4q_bcall c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.nin = oi->nin;
    c.nout = oi->nout;
    c.in = in;
    c.out = out;
    c.param = par;
    c.nparam = oi->nparam;
    c.boundaries = w->bs;
    c.case_key = at;
    c.role = w->role[0] ? w->role : NULL;   /* tensor identity (ABI v2); in_role stays NULL here */
    char e[1024] = "";
    /* Partial engines (issue 16): an operator outside caps, or a call the
     * backend's supports() declines, runs on oracle-f32 (the level's own
     * arithmetic, at the same declaration) and is counted as a fallback. */
    int fallback = !(w->b->caps & DSV4Q_CAP(op));
    const dsv4q_backend_v2 *b2 = dsv4q_backend_v2_of(w->b);
    if (!fallback && b2 && b2->supports) fallback = !b2->supports(&c, e, sizeof e);
    int r;
    if (fallback) {
        void *o[DSV4Q_OPS_MAX_T];
        for (int i = 0; i < nout; i++) o[i] = buf[i];
        char oe[512];
        if (dsv4q_oracle_exec(32, w->bs, &c, o, oe, sizeof oe)) {
            fail(w, DSV4Q_BACKEND_ERROR, oi->name, "oracle-f32 fallback failed: %s", oe);
            goto out;
        }
        if (w->fallbacks) w->fallbacks[op]++;
        r = DSV4Q_BACKEND_OK;
    } else {
        e[0] = 0;
        r = w->b->run(w->ctx, &c, e, sizeof e);
        if (w->calls) w->calls[op]++;
    }
    if (r == DSV4Q_BACKEND_UNSUPPORTED) {
        fail(w, DSV4Q_BACKEND_UNSUPPORTED, oi->name, "run() returned UNSUPPORTED%s%s", e[0] ? ": " : "", e);
        goto out;
    }
    if (r != DSV4Q_BACKEND_OK) {
        fail(w, DSV4Q_BACKEND_ERROR, oi->name, "run failed (rc %d): %s", r, e[0] ? e : "(no message)");
        goto out;
    }
    for (int i = 0; i < nout; i++) {
        for (int g = 0; g < GUARD; g++)
            if (buf[i][4 * n[i] + g] != GUARD_BYTE) {
                fail(w, DSV4Q_BACKEND_ERROR, oi->name, "wrote past the end of output %s (%lld bytes)", wo[i].name,
                     (long long)(4 * n[i]));
                goto out;
            }
        const int32_t dt = out[i].dtype;
        if (wo[i].i32) {
            if (dt != DSV4Q_BT_I32) {
                fail(w, DSV4Q_BACKEND_ERROR, oi->name, "output %s must stay I32 (dtype %d)", wo[i].name, dt);
                goto out;
            }
            memcpy(wo[i].dst, buf[i], 4 * (size_t)n[i]);
        } else if (dt == DSV4Q_BT_F32) {
            memcpy(wo[i].dst, buf[i], 4 * (size_t)n[i]);
        } else if (dt == DSV4Q_BT_BF16 || dt == DSV4Q_BT_F16) {
            const uint16_t *h = (const uint16_t *)buf[i];
            float *f = wo[i].dst;
            for (int64_t k = 0; k < n[i]; k++)
                f[k] = dt == DSV4Q_BT_BF16 ? dsv4q_bf16_to_f32(h[k]) : (float)dsv4q_f16_decode(h[k]);
        } else {
            fail(w, DSV4Q_BACKEND_ERROR, oi->name, "output %s: dtype %d is not allowed (F32, BF16 or F16)",
                 wo[i].name, dt);
            goto out;
        }
    }
    rc = 0;
out:
    for (int i = 0; i < nout; i++) free(buf[i]);
    return rc;
}

#define WO(nm, dst_, nd, a0, a1, a2) { nm, 0, nd, {a0, a1, a2}, dst_ }
#define WOI(nm, dst_, nd, a0, a1) { nm, 1, nd, {a0, a1, 0}, dst_ }


/* LINEAR y [s, W.out] = x [s, W.in] W^T. */
static int linear(wm *w, const dsv4q_weight *W, const float *x, long s, int bf16_out, float *y)
{
    dsv4q_bt in[2];
    float *own;
    in[0] = bt_f32("x", x, 2, s, W->in, 0);
    if (bt_weight(w, &in[1], "w", W, &own)) return -1;
    const double par[2] = {w->ue8m0, bf16_out};
    const wout o[1] = {WO("y", y, 2, s, W->out, 0)};
    set_role(w, W->name, ".weight");
    int rc = call(w, DSV4Q_OP_LINEAR, in, par, 1, o);
    set_role(w, NULL, "");
    free(own);
    return rc;
}

/* RMSNORM y [rows, d] (y may alias x). */
static int rmsnorm(wm *w, const float *x, long rows, long d, const dsv4q_vec *wt, float *y)
{
    const dsv4q_bt in[2] = {bt_f32("x", x, 2, rows, d, 0), bt_vec("w", wt)};
    const double par[1] = {w->g->norm_eps};
    const wout o[1] = {WO("y", y, 2, rows, d, 0)};
    /* vectors carry no name: the role from where the weight sits */
    char nm[96] = "";
    const dsv4q_layer_w *L = w->layer >= 0 ? &w->m->layers[w->layer] : NULL;
    if (L && wt == &L->attn_norm) snprintf(nm, sizeof nm, "layers.%d.attn_norm", w->layer);
    else if (L && wt == &L->ffn_norm) snprintf(nm, sizeof nm, "layers.%d.ffn_norm", w->layer);
    else if (L && wt == &L->q_norm) snprintf(nm, sizeof nm, "layers.%d.attn.q_norm", w->layer);
    else if (L && wt == &L->kv_norm) snprintf(nm, sizeof nm, "layers.%d.attn.kv_norm", w->layer);
    else if (L && wt == &L->enorm) snprintf(nm, sizeof nm, "layers.%d.enorm", w->layer);
    else if (L && wt == &L->hnorm) snprintf(nm, sizeof nm, "layers.%d.hnorm", w->layer);
    else if (L && wt == &L->norm) snprintf(nm, sizeof nm, "layers.%d.norm", w->layer);
    else if (wt == &w->m->norm) snprintf(nm, sizeof nm, "norm");
    set_role(w, nm[0] ? nm : NULL, "");
    int rc = call(w, DSV4Q_OP_RMSNORM, in, par, 1, o);
    set_role(w, NULL, "");
    return rc;
}

/* In-place single-input ops on x [rows, n]: QHEAD_NORM, ACT_QUANT (block:
 * 64 for the kv nope dims), FP4_QUANT, HADAMARD. */
static int inplace(wm *w, int op, float *x, long rows, long n, int block)
{
    const dsv4q_bt in[1] = {bt_f32("x", x, 2, rows, n, 0)};
    const double par[2] = {op == DSV4Q_OP_QHEAD_NORM ? w->g->norm_eps : block, w->ue8m0};
    const wout o[1] = {WO("y", x, 2, rows, n, 0)};
    return call(w, op, in, par, 1, o);
}

/* ROPE on the r rope dims at column `off` of `rows` rows of x (stride
 * `stride`); row i at position pos0 + i / rows_per_pos (oracle/rope.c
 * dsv4q_rope_apply). compress: compress_rope_theta + YaRN (ratio layers),
 * else rope_theta without YaRN (oracle/model.c rope0 / ropec). */
static int rope(wm *w, float *x, long rows, long stride, long off, long pos0, long rows_per_pos, int compress,
                int inverse)
{
    const dsv4q_config *g = w->g;
    const long r = g->rope_head_dim;
    float *t = malloc(sizeof(float) * (size_t)(rows * r + 1));
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(rows + 1));
    int rc = -1;
    if (!t || !pos) { OOM(w); goto out; }
    for (long i = 0; i < rows; i++) {
        memcpy(t + i * r, x + i * stride + off, sizeof(float) * (size_t)r);
        pos[i] = (int32_t)(pos0 + i / rows_per_pos);
    }
    const dsv4q_bt in[2] = {bt_f32("x", t, 2, rows, r, 0), bt_i32("pos", pos, 1, rows, 0)};
    const double par[6] = {compress ? g->compress_rope_theta : g->rope_theta, compress ? g->original_seq_len : 0,
                           g->rope_factor, g->beta_fast, g->beta_slow, inverse};
    const wout o[1] = {WO("y", t, 2, rows, r, 0)};
    if (call(w, DSV4Q_OP_ROPE, in, par, 1, o)) goto out;
    for (long i = 0; i < rows; i++) memcpy(x + i * stride + off, t + i * r, sizeof(float) * (size_t)r);
    rc = 0;
out:
    free(t);
    free(pos);
    return rc;
}

/* The compressor of layer li (rotate 0: attention rows -> crows; 1: the
 * indexer's keys -> irows) for this call: prefill from position 0 on the
 * call's tokens; at a decode step that completes a block, the backend's
 * COMPRESSOR on the layer's whole input history, keeping its last row
 * (causal: qualify_model.h). Other decode steps emit nothing. */
static long compress_rows(wm *w, int li, int rotate, const float *x, long s, long p0, float *dst)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    wl *l = &w->ls[li];
    const int ratio = rotate ? 4 : L->ratio, Dc = rotate ? g->index_head_dim : g->head_dim;
    const dsv4q_cmp_w *cw = rotate ? &L->idx_cmp : &L->cmp;
    const long coff = ratio == 4 ? 2 : 1;
    const float *src = x;
    long n = s;
    if (l->nhist < p0 + s) {   /* the first compressor of this call: extend the history */
        memcpy(l->hist + l->nhist * g->dim, x, sizeof(float) * (size_t)(s * g->dim));
        l->nhist += s;
    }
    if (p0 > 0) {
        if ((p0 + 1) % ratio) return 0;
        src = l->hist;
        n = l->nhist;
    }
    const long nr = n / ratio;
    if (nr == 0) return 0;
    float *rows = malloc(sizeof(float) * (size_t)(nr * Dc)), *o1 = NULL, *o2 = NULL;
    long rc = -1;
    if (!rows) return OOM(w);
    dsv4q_bt in[5];
    in[0] = bt_f32("x", src, 2, n, g->dim, 0);
    if (bt_weight(w, &in[1], "wkv", &cw->wkv, &o1) || bt_weight(w, &in[2], "wgate", &cw->wgate, &o2)) goto out;
    in[3] = bt_f32("ape", cw->ape.f, 2, ratio, coff * Dc, 0);
    in[4] = bt_vec("norm", &cw->norm);
    const double par[10] = {ratio, rotate, g->norm_eps, g->rope_head_dim, g->compress_rope_theta, g->original_seq_len,
                            g->rope_factor, g->beta_fast, g->beta_slow, w->ue8m0};
    const wout o[1] = {WO("rows", rows, 2, nr, Dc, 0)};
    if (call(w, DSV4Q_OP_COMPRESSOR, in, par, 1, o)) goto out;
    const long take = p0 > 0 ? 1 : nr;
    memcpy(dst, rows + (nr - take) * Dc, sizeof(float) * (size_t)(take * Dc));
    rc = take;
out:
    free(rows);
    free(o1);
    free(o2);
    return rc;
}

#define AL(p, n) do { (p) = malloc(sizeof(*(p)) * (size_t)((n) > 0 ? (n) : 1)); if (!(p)) { OOM(w); goto out; } } while (0)

/* EXPERT y [n, d] on rows x with routing weights wt. */
static int expert(wm *w, const dsv4q_expert_w *E, const float *x, long n, const float *wt, float *y)
{
    dsv4q_bt in[5];
    float *o1 = NULL, *o2 = NULL, *o3 = NULL;
    int rc = -1;
    in[0] = bt_f32("x", x, 2, n, w->g->dim, 0);
    if (!bt_weight(w, &in[1], "w1", &E->w1, &o1) && !bt_weight(w, &in[2], "w2", &E->w2, &o2) &&
        !bt_weight(w, &in[3], "w3", &E->w3, &o3)) {
        /* wt NULL: the shared expert's form, an EMPTY routing weight (ABI) */
        in[4] = wt ? bt_f32("weight", wt, 1, n, 0, 0) : bt_f32("weight", NULL, 0, 0, 0, 0);
        const double par[2] = {w->g->swiglu_limit, w->ue8m0};
        const wout o[1] = {WO("y", y, 2, n, w->g->dim, 0)};
        set_role(w, E->w1.name, ".w1.weight");
        rc = call(w, DSV4Q_OP_EXPERT, in, par, 1, o);
        set_role(w, NULL, "");
    }
    free(o1);
    free(o2);
    free(o3);
    return rc;
}

/* DSV4Q_SCORE_* code of a config score_func name (sqrtsoftplus default). */
static int score_func_code(const char *f)
{
    return !strcmp(f, "sigmoid") ? DSV4Q_SCORE_SIGMOID : !strcmp(f, "softmax") ? DSV4Q_SCORE_SOFTMAX
                                                                           : DSV4Q_SCORE_SQRTSOFTPLUS;
}

#include "harness/provider/provider41.inc"

/* Gather the rows routed to expert e: for token t and pick j with
 * ix[t*k+j] == e (t ascending), rows[n] = t, we[n] = wts[t*k+j] and
 * xe[n] = x[t] ([d] floats). Returns n. Shapes: ix, wts [s,k]; x [s,d];
 * rows, we [>= s*k]; xe [>= s*k, d]. Mirrors oracle/moe.c dsv4q_moe. */
static long moe_gather(const int32_t *ix, const float *wts, const float *x, long s, int k, long d, int e,
                      long *rows, float *we, float *xe)
{
    long n = 0;
    for (long t = 0; t < s; t++)
        for (int j = 0; j < k; j++)
            if (ix[t * k + j] == e) {
                rows[n] = t;
                we[n] = wts[t * k + j];
                memcpy(xe + n * d, x + t * d, sizeof(float) * (size_t)d);
                n++;
            }
    return n;
}

/* MoE (oracle/model.c st_moe + oracle/moe.c dsv4q_moe): the gate, each
 * routed expert on its rows in ascending expert id, their sum, + shared. */
static int moe(wm *w, int li, const float *x, long s, const int32_t *ids, float *wts, int32_t *ix, float *out)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    const int k = g->n_activated_experts, E = g->n_routed_experts;
    const long d = g->dim;
    float *acc = NULL, *xe = NULL, *ye = NULL, *we = NULL;
    long *rows = NULL;
    int rc = -1;
    float *own = NULL;
    if (g->arch == DSV4Q_ARCH_V41) {
        if (gate41(w, L, x, s, wts, ix)) goto out;
    } else {
        dsv4q_bt in[5];
        in[0] = bt_f32("x", x, 2, s, d, 0);
        if (bt_weight(w, &in[1], "W", &L->gate, &own)) goto out;
        in[2] = L->hash ? bt_f32("bias", NULL, 0, 0, 0, 0) : bt_vec("bias", &L->gate_bias);
        in[3] = L->hash ? bt_i32("tid2eid", L->tid2eid, 2, g->vocab_size, k) : bt_i32("tid2eid", NULL, 0, 0, 0);
        in[4] = bt_i32("ids", ids, 1, s, 0);
        const double par[3] = {k, g->route_scale, score_func_code(g->score_func)};
        const wout o[2] = {WO("weights", wts, 2, s, k, 0), WOI("indices", ix, 2, s, k)};
        set_role(w, L->gate.name, ".weight");
        int grc = call(w, DSV4Q_OP_MOE_GATE, in, par, 2, o);
        set_role(w, NULL, "");
        if (grc) goto out;
    }
    AL(acc, s * d);
    AL(xe, s * k * d);
    AL(ye, s * k * d);
    AL(we, s * k);
    AL(rows, s * k);
    memset(acc, 0, sizeof(float) * (size_t)(s * d));
    for (int e = 0; e < E; e++) {   /* ascending expert id: the sum order */
        long n = moe_gather(ix, wts, x, s, k, d, e, rows, we, xe);
        if (!n) continue;
        if (expert(w, &L->experts[e], xe, n, we, ye)) goto out;
        for (long r = 0; r < n; r++)
            for (long i = 0; i < d; i++) acc[rows[r] * d + i] += ye[r * d + i];
    }
    if (expert(w, &L->shared, x, s, NULL, ye)) goto out;   /* no routing weight: the shared expert */
    for (long i = 0; i < s * d; i++) out[i] = rbf(w->bs, DSV4Q_B_MOE_BF16, acc[i] + ye[i]);
    rc = 0;
out:
    free(own); free(acc); free(xe); free(ye); free(we); free(rows);
    return rc;
}

/* hc_attn_pre / hc_ffn_pre */
static int hc_pre(wm *w, const float *Xs, long s, const dsv4q_weight *fn, const dsv4q_vec *scale,
                  const dsv4q_vec *base, float *y, float *post, float *comb)
{
    const dsv4q_config *g = w->g;
    const int hc = g->hc_mult;
    dsv4q_bt in[4];
    float *own;
    in[0] = bt_f32("X", Xs, 3, s, hc, g->dim);
    if (bt_weight(w, &in[1], "fn", fn, &own)) return -1;
    in[2] = bt_vec("scale", scale);
    in[3] = bt_vec("base", base);
    const double par[3] = {g->norm_eps, g->hc_eps, g->hc_sinkhorn_iters};
    const wout o[3] = {WO("y", y, 2, s, g->dim, 0), WO("post", post, 2, s, hc, 0), WO("comb", comb, 3, s, hc, hc)};
    set_role(w, fn->name, "");
    int rc = call(w, DSV4Q_OP_HC_PRE, in, par, 3, o);
    set_role(w, NULL, "");
    free(own);
    return rc;
}

#undef AL

static int hc_post(wm *w, const float *x, const float *Xs, const float *post, const float *comb, long s, float *out)
{
    const dsv4q_config *g = w->g;
    const int hc = g->hc_mult;
    const dsv4q_bt in[4] = {bt_f32("x", x, 2, s, g->dim, 0), bt_f32("X", Xs, 3, s, hc, g->dim),
                            bt_f32("post", post, 2, s, hc, 0), bt_f32("comb", comb, 3, s, hc, hc)};
    const wout o[1] = {WO("Y", out, 3, s, hc, g->dim)};
    return call(w, DSV4Q_OP_HC_POST, in, NULL, 1, o);
}


/* ---- the provider table ------------------------------------------------ */

static void p_at(void *c, int layer, long p0, long s)
{
    wm *w = c;
    w->layer = layer;
    w->p0 = p0;
    w->s = s;
}

static int p_linear(void *c, const dsv4q_weight *W, const float *x, long s, float *y, int round_at)
{
    wm *w = c;
    /* the ABI knows two outputs: BF16 activation (linear_bf16) or FP32 math;
     * any other rounding point of the output is applied here */
    const int bf16 = round_at == DSV4Q_B_LINEAR_BF16;
    if (linear(w, W, x, s, bf16, y)) return -1;
    if (round_at >= 0 && !bf16)
        for (long i = 0; i < s * W->out; i++) y[i] = rbf(w->bs, round_at, y[i]);
    return 0;
}

static int p_rmsnorm(void *c, const float *x, long rows, long d, const dsv4q_vec *wt, float *y)
{
    return rmsnorm(c, x, rows, d, wt, y);
}

static int p_qhead_norm(void *c, float *q, long rows, long D) { return inplace(c, DSV4Q_OP_QHEAD_NORM, q, rows, D, 0); }
static int p_hadamard(void *c, float *x, long rows, long n) { return inplace(c, DSV4Q_OP_HADAMARD, x, rows, n, 0); }
static int p_fp4_quant(void *c, float *x, long rows, long n) { return inplace(c, DSV4Q_OP_FP4_QUANT, x, rows, n, 0); }

static int p_rope(void *c, float *x, long rows, long stride, long off, long pos0, long per_pos, int compress, int inverse)
{
    return rope(c, x, rows, stride, off, pos0, per_pos, compress, inverse);
}

/* ACT_QUANT of n values at the start of each row (stride apart): the kv
 * nope dims, gathered into one [rows, n] tensor and written back. */
static int p_act_quant(void *c, float *x, long rows, long stride, long n, int block)
{
    wm *w = c;
    float *np = malloc(sizeof(float) * (size_t)(rows * n + 1));
    if (!np) return OOM(w);
    for (long i = 0; i < rows; i++) memcpy(np + i * n, x + i * stride, sizeof(float) * (size_t)n);
    int r = inplace(w, DSV4Q_OP_ACT_QUANT, np, rows, n, block);
    for (long i = 0; i < rows && !r; i++) memcpy(x + i * stride, np + i * n, sizeof(float) * (size_t)n);
    free(np);
    return r;
}

static long p_compress(void *c, int li, int rotate, const float *x, long s, long p0, float *dst)
{
    return compress_rows(c, li, rotate, x, s, p0, dst);
}

static int p_indexer_score(void *c, const float *q, const float *wt, long s, int Hi, int Di, const float *K, long T,
                           long p0, int ratio, float *score)
{
    const dsv4q_bt in[3] = {bt_f32("q", q, 3, s, Hi, Di), bt_f32("w", wt, 2, s, Hi, 0), bt_f32("K", K, 2, T, Di, 0)};
    const double par[2] = {(double)p0, (double)ratio};
    const wout o[1] = {WO("score", score, 2, s, T, 0)};
    return call(c, DSV4Q_OP_INDEXER_SCORE, in, par, 1, o);
}

static int p_topk(void *c, const float *score, long rows, long T, int k, int32_t *pick)
{
    const dsv4q_bt in[1] = {bt_f32("score", score, 2, rows, T, 0)};
    const double par[1] = {(double)k};
    const wout o[1] = {WOI("idx", pick, 2, rows, k)};
    return call(c, DSV4Q_OP_TOPK, in, par, 1, o);
}

static int p_sparse_attn(void *c, const float *q, long s, int H, int D, const float *keys, long nkeys,
                         const int32_t *idx, long ncols, const dsv4q_vec *sink, double scale, float *o)
{
    const dsv4q_bt in[4] = {bt_f32("q", q, 3, s, H, D), bt_f32("kv", keys, 2, nkeys, D, 0),
                            bt_i32("idx", idx, 2, s, ncols), bt_vec("sink", sink)};
    const double par[1] = {scale};
    const wout wo[1] = {WO("o", o, 3, s, H, D)};
    return call(c, DSV4Q_OP_SPARSE_ATTN, in, par, 1, wo);
}

static int p_window_decode(void *c, const float *q, int H, int D, const float *kv, float *ring, long win,
                           const float *crows, long ncrows, const int32_t *cidx, long nc, const dsv4q_vec *sink,
                           double scale, long p, float *o)
{
    const dsv4q_bt in[6] = {bt_f32("q", q, 3, 1, H, D), bt_f32("kv_new", kv, 2, 1, D, 0),
                            bt_f32("ring", ring, 2, win, D, 0), bt_f32("cmp", crows, ncrows ? 2 : 0, ncrows, D, 0),
                            bt_i32("cidx", cidx, nc ? 2 : 0, 1, nc), bt_vec("sink", sink)};
    const double par[3] = {(double)p, (double)win, scale};
    const wout wo[2] = {WO("o", o, 3, 1, H, D), WO("ring_out", ring, 2, win, D, 0)};
    return call(c, DSV4Q_OP_WINDOW_ATTN_DECODE, in, par, 2, wo);
}

static int p_hc_pre(void *c, const float *Xs, long s, const dsv4q_weight *fn, const dsv4q_vec *scale,
                    const dsv4q_vec *base, float *y, float *post, float *comb)
{
    return hc_pre(c, Xs, s, fn, scale, base, y, post, comb);
}

static int p_hc_post(void *c, const float *x, const float *Xs, const float *post, const float *comb, long s, float *Y)
{
    return hc_post(c, x, Xs, post, comb, s, Y);
}

static int p_hc_head(void *c, const float *Xs, const dsv4q_weight *fn, const dsv4q_vec *scale, const dsv4q_vec *base,
                     float *y)
{
    wm *w = c;
    const dsv4q_config *g = w->g;
    dsv4q_bt in[4];
    float *own = NULL;
    in[0] = bt_f32("X", Xs, 3, 1, g->hc_mult, g->dim);
    if (bt_weight(w, &in[1], "fn", fn, &own)) return -1;
    in[2] = bt_vec("scale", scale);
    in[3] = bt_vec("base", base);
    const double par[2] = {g->norm_eps, g->hc_eps};
    const wout o[1] = {WO("y", y, 2, 1, g->dim, 0)};
    set_role(w, fn->name, "");
    int rc = call(w, DSV4Q_OP_HC_HEAD, in, par, 1, o);
    set_role(w, NULL, "");
    free(own);
    return rc;
}

static int p_moe(void *c, int li, const float *x, long s, const int32_t *ids, float *wts, int32_t *ix, float *out)
{
    return moe(c, li, x, s, ids, wts, ix, out);
}

static const dsv4q_provider_f32 table_sparse = {
    .at = p_at, .linear = p_linear, .rmsnorm = p_rmsnorm, .qhead_norm = p_qhead_norm, .rope = p_rope,
    .act_quant = p_act_quant, .hadamard = p_hadamard, .fp4_quant = p_fp4_quant, .compress = p_compress,
    .indexer_score = p_indexer_score, .topk = p_topk, .sparse_attn = p_sparse_attn, .window_decode = NULL,
    .hc_pre = p_hc_pre, .hc_post = p_hc_post, .hc_head = p_hc_head, .moe = p_moe,
};
/* V4.1: no q head norm, Hadamard, V4 compressor, hc_pre or hc_head; its own entries (provider41.inc) */
/* clang-format off */
static const dsv4q_provider_f32 table41 = {
    .at = p_at, .linear = p_linear, .rmsnorm = p_rmsnorm, .rope = p_rope, .act_quant = p_act_quant,
    .sparse_attn = p_sparse_attn, .hc_post = p_hc_post, .index41_score = p41_index41_score,
    .moe = p_moe, .hc_pre41 = p41_hc_pre41, .hc_collapse = p41_hc_collapse,
    .engram_hash = p41_engram_hash, .engram = p41_engram,
    .compress41 = p41_compress41, .kv41_quant = p41_kv41_quant, .candidates = p41_candidates, .topk41 = p41_topk41,
};
/* clang-format on */
static const dsv4q_provider_f32 table_window = {
    .at = p_at, .linear = p_linear, .rmsnorm = p_rmsnorm, .qhead_norm = p_qhead_norm, .rope = p_rope,
    .act_quant = p_act_quant, .hadamard = p_hadamard, .fp4_quant = p_fp4_quant, .compress = p_compress,
    .indexer_score = p_indexer_score, .topk = p_topk, .sparse_attn = p_sparse_attn, .window_decode = p_window_decode,
    .hc_pre = p_hc_pre, .hc_post = p_hc_post, .hc_head = p_hc_head, .moe = p_moe,
};

int dsv4q_abi_provider_new(dsv4q_abi_provider **out, const dsv4q_backend_v1 *b, void *ctx, const dsv4q_model *m,
                           uint64_t bs, long max_pos, long *calls, char *detail, size_t detaillen, char *err,
                           size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    wm *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w || !(w->ls = calloc((size_t)(g->n_layers + g->n_mtp_layers), sizeof *w->ls))) goto oom;
    w->b = b;
    w->ctx = ctx;
    w->m = m;
    w->g = g;
    w->bs = bs;
    w->ue8m0 = g->scale_ue8m0;
    w->calls = calls;
    w->detail = detail;
    w->detaillen = detaillen;
    w->err = err;
    w->errlen = errlen;
    w->layer = -1;
    for (int li = 0; li < g->n_layers + g->n_mtp_layers; li++)
        if (m->layers[li].ratio && !(w->ls[li].hist = malloc(sizeof(float) * (size_t)(max_pos * g->dim + 1))))
            goto oom;
    if (g->arch == DSV4Q_ARCH_V41 && g->n_engram_layers > 0) {
        if (!(w->eids = malloc(sizeof(int32_t) * (size_t)(max_pos > 0 ? max_pos : 1)))) goto oom;
        w->eids_cap = max_pos;
    }
    *out = w;
    return 0;
oom:
    dsv4q_abi_provider_free(w);
    snprintf(err, errlen, "whole model: out of memory allocating the caches");
    return -1;
}

const dsv4q_provider_f32 *dsv4q_abi_provider_table(const dsv4q_abi_provider *p, int window_decode)
{
    if (p && p->g->arch == DSV4Q_ARCH_V41) return &table41;
    return window_decode ? &table_window : &table_sparse;
}

int dsv4q_abi_provider_open(dsv4q_abi_provider **out, const dsv4q_provider_f32 **table, const dsv4q_backend_v1 *b,
                            void *ctx, const dsv4q_model *m, uint64_t bs, long max_pos, int sparse_decode, long *calls,
                            long *fallbacks, int *decode_op, char *detail, size_t detaillen, char *err, size_t errlen)
{
    /* V4.1's pass builds its decode keys and calls sparse_attn (no window_decode entry) */
    const int use_window =
        (b->caps & DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE)) && !sparse_decode && m->cfg.arch != DSV4Q_ARCH_V41;
    if (decode_op) *decode_op = use_window ? DSV4Q_OP_WINDOW_ATTN_DECODE : DSV4Q_OP_SPARSE_ATTN;
    *table = NULL;
    if (dsv4q_abi_provider_new(out, b, ctx, m, bs, max_pos, calls, detail, detaillen, err, errlen)) return -1;
    dsv4q_abi_provider_set_fallbacks(*out, fallbacks);
    *table = dsv4q_abi_provider_table(*out, use_window);
    return 0;
}

int dsv4q_abi_provider_status(const dsv4q_abi_provider *p) { return p->status; }

void dsv4q_abi_provider_set_fallbacks(dsv4q_abi_provider *p, long *fallbacks) { p->fallbacks = fallbacks; }

void dsv4q_abi_provider_free(dsv4q_abi_provider *p)
{
    if (!p) return;
    if (p->ls)
        for (int li = 0; li < p->g->n_layers + p->g->n_mtp_layers; li++) free(p->ls[li].hist);
    free(p->ls);
    free(p->eids);
    free(p);
}
