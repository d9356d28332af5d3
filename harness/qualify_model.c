/*
 * qualify_model.c - whole-model qualification: the forward pass composed
 * from a backend's operators (dsv4q_wm_compose), run in one isolated child,
 * judged against oracle-f64 with oracle-f32 as the level (see
 * qualify_model.h for what is an operator call and what is glue, and why
 * decode re-runs the compressor on the layer's history).
 *
 * The glue below follows oracle/model.c function by function (attention,
 * indexer, block, st_moe, head, dsv4q_run_step); where model.c calls an
 * oracle operator, this file calls the backend with the same tensors.
 * Invariant W1 (qualify_model.h) is what keeps the two in step.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness/backend.h"
#include "harness/metrics.h"
#include "harness/qualify_model.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/model_run.h"
#include "oracle/ops.h"
#include "base/util.h"
#define now_s dsv4q_now_s   /* base/util.h */
#define jnum dsv4q_json_num   /* base/util.h */

#define GUARD 64
#define GUARD_BYTE 0x5A
#define SENTINEL 0x7FFFA5A5u   /* a NaN as F32; an out-of-range index as I32 */

/* ---- composition state ------------------------------------------------- */

typedef struct wl {
    float *ring;           /* [window, D] */
    float *crows;          /* [cap, D] compressed attention rows */
    float *irows;          /* [cap, Di] indexer key rows */
    float *hist;           /* [max_pos, dim] the layer's attention input so far (ratio layers) */
    long ncrows, nirows, nhist;
} wl;

typedef struct wm {
    const dsv4q_backend_v1 *b;
    void *ctx;
    const dsv4q_model *m;
    const dsv4q_config *g;
    uint64_t bs;
    int ue8m0, use_window;
    long *calls;
    char *detail;
    size_t detaillen;
    char *err;
    size_t errlen;
    int status;            /* DSV4Q_BACKEND_* of the first failure */
    int layer;
    long p0, s;
    wl *ls;
} wm;

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
        t->scale_shape[0] = (W->out + 127) / 128;
        t->scale_shape[1] = (W->in + 127) / 128;
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
    char e[1024] = "";
    int r = w->b->run(w->ctx, &c, e, sizeof e);
    if (w->calls) w->calls[op]++;
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
    int rc = call(w, DSV4Q_OP_LINEAR, in, par, 1, o);
    free(own);
    return rc;
}

/* RMSNORM y [rows, d] (y may alias x). */
static int rmsnorm(wm *w, const float *x, long rows, long d, const dsv4q_vec *wt, float *y)
{
    const dsv4q_bt in[2] = {bt_f32("x", x, 2, rows, d, 0), bt_vec("w", wt)};
    const double par[1] = {w->g->norm_eps};
    const wout o[1] = {WO("y", y, 2, rows, d, 0)};
    return call(w, DSV4Q_OP_RMSNORM, in, par, 1, o);
}

/* In-place single-input ops on x [rows, n]: QHEAD_NORM, ACT_QUANT (kv nope
 * dims, block 64), FP4_QUANT, HADAMARD. */
static int inplace(wm *w, int op, float *x, long rows, long n)
{
    const dsv4q_bt in[1] = {bt_f32("x", x, 2, rows, n, 0)};
    const double par[2] = {op == DSV4Q_OP_QHEAD_NORM ? w->g->norm_eps : 64, w->ue8m0};
    const wout o[1] = {WO(op == DSV4Q_OP_QHEAD_NORM ? "y" : "y", x, 2, rows, n, 0)};
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
static int compress_rows(wm *w, int li, int rotate, const float *x, long s, long p0)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    wl *l = &w->ls[li];
    const int ratio = rotate ? 4 : L->ratio, Dc = rotate ? g->index_head_dim : g->head_dim;
    const dsv4q_cmp_w *cw = rotate ? &L->idx_cmp : &L->cmp;
    const long coff = ratio == 4 ? 2 : 1;
    const float *src = x;
    long n = s;
    if (p0 > 0) {
        if ((p0 + 1) % ratio) return 0;
        src = l->hist;
        n = l->nhist;
    }
    const long nr = n / ratio;
    if (nr == 0) return 0;
    float *rows = malloc(sizeof(float) * (size_t)(nr * Dc)), *o1 = NULL, *o2 = NULL;
    int rc = -1;
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
    float *dst = rotate ? l->irows + l->nirows * Dc : l->crows + l->ncrows * Dc;
    const long take = p0 > 0 ? 1 : nr;
    memcpy(dst, rows + (nr - take) * Dc, sizeof(float) * (size_t)(take * Dc));
    if (rotate) l->nirows += take;
    else l->ncrows += take;
    rc = 0;
out:
    free(rows);
    free(o1);
    free(o2);
    return rc;
}

/* Indexer of a ratio-4 layer (oracle/model.c indexer): writes k picks per
 * query into cols (offset into the key layout, -1 masked). Returns k or -1. */
static long indexer(wm *w, int li, const float *x, const float *qr, long s, long p0, long offset, int32_t *cols,
                    long ncols_stride, long col0)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    wl *l = &w->ls[li];
    const int Hi = g->index_n_heads, Di = g->index_head_dim, rd = g->rope_head_dim;
    float *q = malloc(sizeof(float) * (size_t)(s * Hi * Di)), *wt = malloc(sizeof(float) * (size_t)(s * Hi));
    float *score = NULL;
    int32_t *pick = NULL;
    long k = -1;
    if (!q || !wt) { OOM(w); goto out; }
    if (linear(w, &L->idx_wq_b, qr, s, 1, q)) goto out;
    if (rope(w, q, s * Hi, Di, Di - rd, p0, Hi, 1, 0)) goto out;
    if (dsv4q_idx_hadamard_on(w->bs) && inplace(w, DSV4Q_OP_HADAMARD, q, s * Hi, Di)) goto out;
    if (((w->bs >> DSV4Q_B_IDX_Q_FP4) & 1u) && inplace(w, DSV4Q_OP_FP4_QUANT, q, s * Hi, Di)) goto out;
    if (compress_rows(w, li, 1, x, s, p0)) goto out;
    /* head weights: FP32-math linear, then the reference's two roundings */
    if (linear(w, &L->idx_weights_proj, x, s, 0, wt)) goto out;
    const float wscale = (float)(1.0 / sqrt((double)Di) * (1.0 / sqrt((double)Hi)));
    for (long i = 0; i < s * Hi; i++) wt[i] = rbf(w->bs, DSV4Q_B_IDX_PARTIAL_BF16, wt[i]);
    for (long i = 0; i < s * Hi; i++) wt[i] = rbf(w->bs, DSV4Q_B_IDX_PARTIAL_BF16, wt[i] * wscale);
    const long T = l->nirows;
    k = T < g->index_topk ? T : g->index_topk;
    if (k == 0) goto out;   /* no complete block yet: nothing to score or pick */
    score = malloc(sizeof(float) * (size_t)(s * T));
    pick = malloc(sizeof(int32_t) * (size_t)(s * k));
    if (!score || !pick) { OOM(w); k = -1; goto out; }
    {
        const dsv4q_bt in[3] = {bt_f32("q", q, 3, s, Hi, Di), bt_f32("w", wt, 2, s, Hi, 0),
                                bt_f32("K", l->irows, 2, T, Di, 0)};
        const double par[2] = {(double)p0, 4};
        const wout o[1] = {WO("score", score, 2, s, T, 0)};
        if (call(w, DSV4Q_OP_INDEXER_SCORE, in, par, 1, o)) { k = -1; goto out; }
    }
    {
        const dsv4q_bt in[1] = {bt_f32("score", score, 2, s, T, 0)};
        const double par[1] = {(double)k};
        const wout o[1] = {WOI("idx", pick, 2, s, k)};
        if (call(w, DSV4Q_OP_TOPK, in, par, 1, o)) { k = -1; goto out; }
    }
    for (long i = 0; i < s; i++)
        for (long j = 0; j < k; j++) {
            int32_t v = pick[i * k + j];
            cols[i * ncols_stride + col0 + j] = v < 0 ? -1 : (int32_t)(v + offset);
        }
out:
    free(q);
    free(wt);
    free(score);
    free(pick);
    return k;
}

/* Attention of layer li (oracle/model.c attention). */
static int attention(wm *w, int li, const float *x, long s, long p0, float *out)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    wl *l = &w->ls[li];
    const int H = g->n_heads, D = g->head_dim, rd = g->rope_head_dim, win = g->window_size;
    const int ratio = L->ratio, G = g->o_groups, ol = g->o_lora_rank;
    const long d = g->dim;
    const int cmp = ratio != 0, prefill = p0 == 0;
    float *qr = NULL, *q = NULL, *kv = NULL, *keys = NULL, *o = NULL, *og = NULL, *t = NULL, *tg = NULL;
    int32_t *idx = NULL, *cidx = NULL;
    int rc = -1;
#define AL(p, n) do { (p) = malloc(sizeof(*(p)) * (size_t)((n) > 0 ? (n) : 1)); if (!(p)) { OOM(w); goto out; } } while (0)
    AL(qr, s * g->q_lora_rank);
    AL(q, s * H * D);
    AL(kv, s * D);
    if (linear(w, &L->wq_a, x, s, 1, qr)) goto out;
    if (rmsnorm(w, qr, s, g->q_lora_rank, &L->q_norm, qr)) goto out;
    if (linear(w, &L->wq_b, qr, s, 1, q)) goto out;
    if (inplace(w, DSV4Q_OP_QHEAD_NORM, q, s * H, D)) goto out;
    if (rope(w, q, s * H, D, D - rd, p0, H, cmp, 0)) goto out;
    if (linear(w, &L->wkv, x, s, 1, kv)) goto out;
    if (rmsnorm(w, kv, s, D, &L->kv_norm, kv)) goto out;
    if (rope(w, kv, s, D, D - rd, p0, 1, cmp, 0)) goto out;
    if ((w->bs >> DSV4Q_B_KV_FP8) & 1u) {   /* act_quant of the nope dims, block 64 */
        float *np;
        AL(np, s * (D - rd));
        for (long i = 0; i < s; i++) memcpy(np + i * (D - rd), kv + i * D, sizeof(float) * (size_t)(D - rd));
        int r = inplace(w, DSV4Q_OP_ACT_QUANT, np, s, D - rd);
        for (long i = 0; i < s && !r; i++) memcpy(kv + i * D, np + i * (D - rd), sizeof(float) * (size_t)(D - rd));
        free(np);
        if (r) goto out;
    }
    if (ratio) {   /* the compressors' input history */
        memcpy(l->hist + l->nhist * d, x, sizeof(float) * (size_t)(s * d));
        l->nhist += s;
    }

    /* column layout: window columns, then compressed columns */
    const long end = p0 + s;
    long nw = prefill ? (s < win ? s : win) : win;
    long nc = 0;
    if (ratio == 128) nc = prefill ? s / ratio : end / ratio;
    else if (ratio == 4) nc = (end / 4) < g->index_topk ? end / 4 : g->index_topk;
    const long ncols = nw + nc;
    AL(idx, s * ncols);
    for (long i = 0; i < s; i++) {
        int32_t *c = idx + i * ncols;
        if (prefill) {
            long base = i - win + 1 < 0 ? 0 : i - win + 1;
            for (long j = 0; j < nw; j++) c[j] = base + j > i ? -1 : (int32_t)(base + j);
        } else if (p0 >= win - 1) {
            long st = p0 % win;
            for (long j = 0; j < win; j++) c[j] = (int32_t)((st + 1 + j) % win);
        } else {
            for (long j = 0; j < win; j++) c[j] = j <= p0 ? (int32_t)j : -1;
        }
    }
    const long offset = prefill ? s : win;
    if (ratio == 128)
        for (long i = 0; i < s; i++)
            for (long j = 0; j < nc; j++)
                idx[i * ncols + nw + j] = (prefill && j >= (i + 1) / ratio) ? -1 : (int32_t)(offset + j);
    if (ratio == 4 && indexer(w, li, x, qr, s, p0, offset, idx, ncols, nw) < 0) goto out;

    /* caches: window ring (the backend's WINDOW_ATTN_DECODE owns it in
     * decode), then the compressor (its row is visible now) */
    const int window_op = !prefill && w->use_window;
    if (!window_op)
        for (long i = (s > win ? s - win : 0); i < s; i++)
            memcpy(l->ring + ((p0 + i) % win) * D, kv + i * D, sizeof(float) * (size_t)D);
    if (ratio && compress_rows(w, li, 0, x, s, p0)) goto out;
    AL(o, s * H * D);
    const double scale = 1.0 / sqrt((double)D);
    if (window_op) {
        AL(cidx, nc);
        for (long j = 0; j < nc; j++) cidx[j] = idx[nw + j] < 0 ? -1 : (int32_t)(idx[nw + j] - win);
        const dsv4q_bt in[6] = {bt_f32("q", q, 3, 1, H, D), bt_f32("kv_new", kv, 2, 1, D, 0),
                                bt_f32("ring", l->ring, 2, win, D, 0),
                                bt_f32("cmp", l->crows, l->ncrows ? 2 : 0, l->ncrows, D, 0),
                                bt_i32("cidx", cidx, nc ? 2 : 0, 1, nc), bt_vec("sink", &L->attn_sink)};
        const double par[3] = {(double)p0, (double)win, scale};
        const wout wo[2] = {WO("o", o, 3, 1, H, D), WO("ring_out", l->ring, 2, win, D, 0)};
        if (call(w, DSV4Q_OP_WINDOW_ATTN_DECODE, in, par, 2, wo)) goto out;
    } else {
        long nkeys;
        if (prefill) {
            nkeys = s + l->ncrows;
            AL(keys, nkeys * D);
            memcpy(keys, kv, sizeof(float) * (size_t)(s * D));
            memcpy(keys + s * D, l->crows, sizeof(float) * (size_t)(l->ncrows * D));
        } else {
            nkeys = win + l->ncrows;
            AL(keys, nkeys * D);
            memcpy(keys, l->ring, sizeof(float) * (size_t)((long)win * D));
            memcpy(keys + (long)win * D, l->crows, sizeof(float) * (size_t)(l->ncrows * D));
        }
        const dsv4q_bt in[4] = {bt_f32("q", q, 3, s, H, D), bt_f32("kv", keys, 2, nkeys, D, 0),
                                bt_i32("idx", idx, 2, s, ncols), bt_vec("sink", &L->attn_sink)};
        const double par[1] = {scale};
        const wout wo[1] = {WO("o", o, 3, s, H, D)};
        if (call(w, DSV4Q_OP_SPARSE_ATTN, in, par, 1, wo)) goto out;
    }
    if (rope(w, o, s * H, D, D - rd, p0, H, cmp, 1)) goto out;

    /* grouped low-rank output: t[g] = wo_a[g] o[g] (BF16), y = wo_b t */
    const long gd = (long)H * D / G;
    AL(og, s * gd);
    AL(tg, s * ol);
    AL(t, s * G * ol);
    for (int gi = 0; gi < G; gi++) {
        dsv4q_weight wg = L->wo_a;
        wg.out = ol;
        if (L->wo_a.fmt == DSV4Q_WF_BF16) wg.data = (const uint16_t *)L->wo_a.data + (long)gi * ol * gd;
        else if (L->wo_a.fmt == DSV4Q_WF_F32) wg.data = (const float *)L->wo_a.data + (long)gi * ol * gd;
        else { fail(w, DSV4Q_BACKEND_ERROR, "glue", "wo_a must be BF16 or F32 to split per group"); goto out; }
        for (long i = 0; i < s; i++) memcpy(og + i * gd, o + i * H * D + gi * gd, sizeof(float) * (size_t)gd);
        if (linear(w, &wg, og, s, 1, tg)) goto out;
        for (long i = 0; i < s; i++) memcpy(t + i * G * ol + (long)gi * ol, tg + i * ol, sizeof(float) * (size_t)ol);
    }
    if (linear(w, &L->wo_b, t, s, 1, out)) goto out;
    rc = 0;
out:
    free(qr); free(q); free(kv); free(keys); free(o); free(og); free(t); free(tg); free(idx); free(cidx);
    return rc;
}

/* EXPERT y [n, d] on rows x with routing weights wt. */
static int expert(wm *w, const dsv4q_expert_w *E, const float *x, long n, const float *wt, float *y)
{
    dsv4q_bt in[5];
    float *o1 = NULL, *o2 = NULL, *o3 = NULL;
    int rc = -1;
    in[0] = bt_f32("x", x, 2, n, w->g->dim, 0);
    if (!bt_weight(w, &in[1], "w1", &E->w1, &o1) && !bt_weight(w, &in[2], "w2", &E->w2, &o2) &&
        !bt_weight(w, &in[3], "w3", &E->w3, &o3)) {
        in[4] = bt_f32("weight", wt, 1, n, 0, 0);
        const double par[2] = {w->g->swiglu_limit, w->ue8m0};
        const wout o[1] = {WO("y", y, 2, n, w->g->dim, 0)};
        rc = call(w, DSV4Q_OP_EXPERT, in, par, 1, o);
    }
    free(o1);
    free(o2);
    free(o3);
    return rc;
}

/* MoE (oracle/model.c st_moe + oracle/moe.c dsv4q_moe): the gate, each
 * routed expert on its rows in ascending expert id, their sum, + shared. */
static int moe(wm *w, int li, const float *x, long s, const int32_t *ids, float *out)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    const int k = g->n_activated_experts, E = g->n_routed_experts;
    const long d = g->dim;
    float *wts = NULL, *acc = NULL, *xe = NULL, *ye = NULL, *we = NULL, *ones = NULL;
    int32_t *ix = NULL;
    long *rows = NULL;
    int rc = -1;
    float *own = NULL;
    AL(wts, s * k);
    AL(ix, s * k);
    {
        dsv4q_bt in[5];
        in[0] = bt_f32("x", x, 2, s, d, 0);
        if (bt_weight(w, &in[1], "W", &L->gate, &own)) goto out;
        in[2] = L->hash ? bt_f32("bias", NULL, 0, 0, 0, 0) : bt_vec("bias", &L->gate_bias);
        in[3] = L->hash ? bt_i32("tid2eid", L->tid2eid, 2, g->vocab_size, k) : bt_i32("tid2eid", NULL, 0, 0, 0);
        in[4] = bt_i32("ids", ids, 1, s, 0);
        const double par[3] = {k, g->route_scale, dsv4q_score_func_code(g->score_func)};
        const wout o[2] = {WO("weights", wts, 2, s, k, 0), WOI("indices", ix, 2, s, k)};
        if (call(w, DSV4Q_OP_MOE_GATE, in, par, 2, o)) goto out;
    }
    AL(acc, s * d);
    AL(xe, s * k * d);
    AL(ye, s * k * d);
    AL(we, s * k);
    AL(ones, s);
    AL(rows, s * k);
    memset(acc, 0, sizeof(float) * (size_t)(s * d));
    for (int e = 0; e < E; e++) {   /* ascending expert id: the sum order */
        long n = dsv4q_moe_gather(ix, wts, x, s, k, d, e, rows, we, xe);
        if (!n) continue;
        if (expert(w, &L->experts[e], xe, n, we, ye)) goto out;
        for (long r = 0; r < n; r++)
            for (long i = 0; i < d; i++) acc[rows[r] * d + i] += ye[r * d + i];
    }
    for (long t = 0; t < s; t++) ones[t] = 1.0f;
    if (expert(w, &L->shared, x, s, ones, ye)) goto out;
    for (long i = 0; i < s * d; i++) out[i] = rbf(w->bs, DSV4Q_B_MOE_BF16, acc[i] + ye[i]);
    rc = 0;
out:
    free(own); free(wts); free(ix); free(acc); free(xe); free(ye); free(we); free(ones); free(rows);
    return rc;
}

/* hc_attn_pre / hc_ffn_pre */
static int hc_pre(wm *w, int li, int ffn, const float *Xs, long s, float *y, float *post, float *comb)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    const int hc = g->hc_mult;
    dsv4q_bt in[4];
    float *own;
    in[0] = bt_f32("X", Xs, 3, s, hc, g->dim);
    if (bt_weight(w, &in[1], "fn", ffn ? &L->hc_ffn_fn : &L->hc_attn_fn, &own)) return -1;
    in[2] = bt_vec("scale", ffn ? &L->hc_ffn_scale : &L->hc_attn_scale);
    in[3] = bt_vec("base", ffn ? &L->hc_ffn_base : &L->hc_attn_base);
    const double par[3] = {g->norm_eps, g->hc_eps, g->hc_sinkhorn_iters};
    const wout o[3] = {WO("y", y, 2, s, g->dim, 0), WO("post", post, 2, s, hc, 0), WO("comb", comb, 3, s, hc, hc)};
    int rc = call(w, DSV4Q_OP_HC_PRE, in, par, 3, o);
    free(own);
    return rc;
}

static int hc_post(wm *w, const float *x, const float *Xs, const float *post, const float *comb, long s, float *out)
{
    const dsv4q_config *g = w->g;
    const int hc = g->hc_mult;
    const dsv4q_bt in[4] = {bt_f32("x", x, 2, s, g->dim, 0), bt_f32("X", Xs, 3, s, hc, g->dim),
                            bt_f32("post", post, 2, s, hc, 0), bt_f32("comb", comb, 3, s, hc, hc)};
    const wout o[1] = {WO("Y", out, 3, s, hc, g->dim)};
    return call(w, DSV4Q_OP_HC_POST, in, NULL, 1, o);
}

/* One block (oracle/model.c block). */
static int block(wm *w, int li, float *Xs, long s, long p0, const int32_t *ids)
{
    const dsv4q_config *g = w->g;
    const dsv4q_layer_w *L = &w->m->layers[li];
    const int hc = g->hc_mult;
    const long d = g->dim;
    float *y = NULL, *n = NULL, *post = NULL, *comb = NULL, *a = NULL, *X2 = NULL;
    int rc = -1;
    AL(y, s * d);
    AL(n, s * d);
    AL(post, s * hc);
    AL(comb, s * hc * hc);
    AL(a, s * d);
    AL(X2, s * hc * d);
    if (hc_pre(w, li, 0, Xs, s, y, post, comb)) goto out;
    if (rmsnorm(w, y, s, d, &L->attn_norm, n)) goto out;
    if (attention(w, li, n, s, p0, a)) goto out;
    if (hc_post(w, a, Xs, post, comb, s, X2)) goto out;
    if (hc_pre(w, li, 1, X2, s, y, post, comb)) goto out;
    if (rmsnorm(w, y, s, d, &L->ffn_norm, n)) goto out;
    if (moe(w, li, n, s, ids, a)) goto out;
    if (hc_post(w, a, X2, post, comb, s, Xs)) goto out;
    rc = 0;
out:
    free(y); free(n); free(post); free(comb); free(a); free(X2);
    return rc;
}

/* hc_head + final norm + head for the last row (oracle/model.c head). */
static int head(wm *w, const float *Xlast, float *logits)
{
    const dsv4q_config *g = w->g;
    const dsv4q_model *m = w->m;
    float *y = malloc(sizeof(float) * (size_t)g->dim), *own = NULL;
    int rc = -1;
    if (!y) return OOM(w);
    dsv4q_bt in[4];
    in[0] = bt_f32("X", Xlast, 3, 1, g->hc_mult, g->dim);
    if (bt_weight(w, &in[1], "fn", &m->hc_head_fn, &own)) goto out;
    in[2] = bt_vec("scale", &m->hc_head_scale);
    in[3] = bt_vec("base", &m->hc_head_base);
    {
        const double par[2] = {g->norm_eps, g->hc_eps};
        const wout o[1] = {WO("y", y, 2, 1, g->dim, 0)};
        if (call(w, DSV4Q_OP_HC_HEAD, in, par, 1, o)) goto out;
    }
    if (rmsnorm(w, y, 1, g->dim, &m->norm, y)) goto out;
    if (linear(w, &m->head, y, 1, 0, logits)) goto out;
    rc = 0;
out:
    free(y);
    free(own);
    return rc;
}

/* One call: prefill (p0 = 0) or a one-token decode (dsv4q_run_step). */
static int step(wm *w, const int32_t *ids, long s, long p0, double *logits_out)
{
    const dsv4q_config *g = w->g;
    const int hc = g->hc_mult;
    const long d = g->dim;
    float *Xs = NULL, *logits = NULL;
    int rc = -1;
    w->p0 = p0;
    w->s = s;
    AL(Xs, s * hc * d);
    AL(logits, g->vocab_size);
    for (long t = 0; t < s; t++) {   /* embed */
        float *row = Xs + t * hc * d;
        for (long i = 0; i < d; i++) row[i] = (float)dsv4q_weight_at(&w->m->embed, ids[t], i);
        for (int j = 1; j < hc; j++) memcpy(Xs + (t * hc + j) * d, row, sizeof(float) * (size_t)d);
    }
    for (int li = 0; li < g->n_layers; li++) {
        w->layer = li;
        if (block(w, li, Xs, s, p0, ids)) goto out;
    }
    w->layer = -1;
    if (head(w, Xs + (s - 1) * hc * d, logits)) goto out;
    for (long i = 0; i < g->vocab_size; i++) logits_out[i] = logits[i];
    rc = 0;
out:
    free(Xs);
    free(logits);
    return rc;
}
#undef AL

uint64_t dsv4q_wm_required_ops(const dsv4q_model *m, uint64_t bs)
{
    const dsv4q_config *g = &m->cfg;
    uint64_t ops = DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_QHEAD_NORM) |
                   DSV4Q_CAP(DSV4Q_OP_ROPE) | DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) | DSV4Q_CAP(DSV4Q_OP_HC_PRE) |
                   DSV4Q_CAP(DSV4Q_OP_HC_POST) | DSV4Q_CAP(DSV4Q_OP_HC_HEAD) | DSV4Q_CAP(DSV4Q_OP_MOE_GATE) |
                   DSV4Q_CAP(DSV4Q_OP_EXPERT);
    if ((bs >> DSV4Q_B_KV_FP8) & 1u) ops |= DSV4Q_CAP(DSV4Q_OP_ACT_QUANT);
    for (int li = 0; li < g->n_layers; li++) {
        const int r = m->layers[li].ratio;
        if (r) ops |= DSV4Q_CAP(DSV4Q_OP_COMPRESSOR);
        if (r == 4) {
            ops |= DSV4Q_CAP(DSV4Q_OP_INDEXER_SCORE) | DSV4Q_CAP(DSV4Q_OP_TOPK);
            if (dsv4q_idx_hadamard_on(bs)) ops |= DSV4Q_CAP(DSV4Q_OP_HADAMARD);
            if ((bs >> DSV4Q_B_IDX_Q_FP4) & 1u) ops |= DSV4Q_CAP(DSV4Q_OP_FP4_QUANT);
        }
    }
    return ops;
}

int dsv4q_wm_compose(const dsv4q_backend_v1 *b, void *ctx, const dsv4q_model *m, uint64_t bs, const int32_t *ids,
                     long nprompt, long ndecode, int flags, double *logits, long *calls, int *decode_op, char *detail,
                     size_t detaillen, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    const long max_pos = nprompt + ndecode, V = g->vocab_size;
    wm w;
    memset(&w, 0, sizeof w);
    w.b = b;
    w.ctx = ctx;
    w.m = m;
    w.g = g;
    w.bs = bs;
    w.ue8m0 = g->scale_ue8m0;
    w.use_window = (b->caps & DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE)) && !(flags & DSV4Q_WM_SPARSE_DECODE);
    w.calls = calls;
    w.detail = detail;
    w.detaillen = detaillen;
    w.err = err;
    w.errlen = errlen;
    w.layer = -1;
    err[0] = 0;
    if (decode_op) *decode_op = w.use_window ? DSV4Q_OP_WINDOW_ATTN_DECODE : DSV4Q_OP_SPARSE_ATTN;
    if (nprompt < 1 || ndecode < 0) {
        snprintf(err, errlen, "whole model: a prompt of >= 1 tokens is needed (got %ld, decode %ld)", nprompt, ndecode);
        return DSV4Q_BACKEND_ERROR;
    }
    for (long i = 0; i < max_pos; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            snprintf(err, errlen, "whole model: token %ld (id %d) is outside the vocabulary [0, %ld)", i, ids[i], V);
            return DSV4Q_BACKEND_ERROR;
        }
    int rc = -1;
    w.ls = calloc((size_t)g->n_layers, sizeof *w.ls);
    if (!w.ls) goto oom;
    for (int li = 0; li < g->n_layers; li++) {
        const int ratio = m->layers[li].ratio;
        wl *l = &w.ls[li];
        l->ring = calloc((size_t)g->window_size * (size_t)g->head_dim, sizeof(float));   /* zeros, as model.c */
        if (!l->ring) goto oom;
        if (ratio) {
            l->crows = malloc(sizeof(float) * (size_t)((max_pos / ratio + 1) * g->head_dim));
            l->hist = malloc(sizeof(float) * (size_t)(max_pos * g->dim));
            if (!l->crows || !l->hist) goto oom;
        }
        if (ratio == 4) {
            l->irows = malloc(sizeof(float) * (size_t)((max_pos / 4 + 1) * g->index_head_dim));
            if (!l->irows) goto oom;
        }
    }
    if (step(&w, ids, nprompt, 0, logits)) goto done;
    for (long i = 0; i < ndecode; i++)
        if (step(&w, ids + nprompt + i, 1, nprompt + i, logits + (i + 1) * V)) goto done;
    rc = 0;
    goto done;
oom:
    snprintf(err, errlen, "whole model: out of memory allocating the caches");
    w.status = DSV4Q_BACKEND_ERROR;
done:
    if (w.ls)
        for (int li = 0; li < g->n_layers; li++) {
            free(w.ls[li].ring);
            free(w.ls[li].crows);
            free(w.ls[li].irows);
            free(w.ls[li].hist);
        }
    free(w.ls);
    if (rc == 0) return DSV4Q_BACKEND_OK;
    return w.status != DSV4Q_BACKEND_OK ? w.status : DSV4Q_BACKEND_ERROR;
}

/* ---- qualification ----------------------------------------------------- */

typedef struct job_hdr {
    long calls[DSV4Q_OP_COUNT];
    int decode_op;
} job_hdr;

typedef struct job_arg {
    const dsv4q_model *m;
    uint64_t bs;
    const int32_t *ids;
    long nprompt, ndecode;
    int flags;
} job_arg;

static int job(const dsv4q_backend_v1 *b, void *ctx, void *user, void *out, char *detail, size_t detaillen, char *err,
               size_t errlen)
{
    const job_arg *a = user;
    job_hdr *h = out;
    double *logits = (double *)((char *)out + sizeof(job_hdr));
    memset(h, 0, sizeof *h);
    return dsv4q_wm_compose(b, ctx, a->m, a->bs, a->ids, a->nprompt, a->ndecode, a->flags, logits, h->calls,
                            &h->decode_op, detail, detaillen, err, errlen);
}

static int oracle_logits(const dsv4q_model *m, int width, uint64_t bs, const int32_t *ids, long nprompt, long ndecode,
                         double *logits, char *err, size_t errlen)
{
    dsv4q_run *r;
    const long V = m->cfg.vocab_size;
    if (dsv4q_run_open(&r, m, width, bs, nprompt + ndecode, NULL, NULL, err, errlen)) return -1;
    int rc = dsv4q_run_feed(r, ids, nprompt, logits, err, errlen);
    for (long i = 0; !rc && i < ndecode; i++) rc = dsv4q_run_feed(r, ids + nprompt + i, 1, logits + (i + 1) * V, err, errlen);
    dsv4q_run_close(r);
    return rc;
}

static void names_of(uint64_t ops, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < DSV4Q_OP_COUNT && at < len; i++)
        if (ops & DSV4Q_CAP(i)) at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", dsv4q_op_get(i)->name);
}

int dsv4q_wm_qualify(const char *spec, const dsv4q_model *m, const int32_t *ids, long nprompt, long ndecode,
                     const dsv4q_wm_opts *o, dsv4q_wm_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->nprompt = nprompt;
    r->ndecode = ndecode;
    r->rows = 1 + ndecode;
    r->vocab = m->cfg.vocab_size;
    r->verdict = DSV4Q_V_ERROR;
    r->greedy_min = o->gates ? o->gates->greedy_min : -1;
    r->decode_op = -1;
    const long rows = r->rows, V = r->vocab;
    dsv4q_iso_status st;
    if (dsv4q_iso_probe(spec, &o->iso, &r->desc, &st, r->msg, sizeof r->msg)) {
        r->load_failed = 1;
        r->status = st;
        snprintf(r->desc.spec, sizeof r->desc.spec, "%s", spec);
        return 0;
    }
    snprintf(r->profile, sizeof r->profile, "%s", o->declare ? o->declare : r->desc.profile[0] ? r->desc.profile : "source");
    char why[768];
    if (dsv4q_declaration_parse(r->profile, &r->bs, why, sizeof why)) {   /* honoured or refused, never ignored */
        r->load_failed = 1;
        snprintf(r->msg, sizeof r->msg, "%s: %s", o->declare ? "--profile/--boundary" : "declared profile", why);
        return 0;
    }
    dsv4q_declaration_format(r->bs, r->declared, sizeof r->declared);
    const uint64_t need = dsv4q_wm_required_ops(m, r->bs), missing = need & ~r->desc.caps;
    if (missing) {
        char names[512];
        names_of(missing, names, sizeof names);
        snprintf(r->msg, sizeof r->msg, "the backend does not implement %s (not in caps): whole-model "
                 "qualification composes the model from the backend's operators and needs every one it uses", names);
        return 0;
    }
    const size_t nl = (size_t)(rows * V);
    r->cand = malloc(sizeof(double) * nl);
    r->ref = malloc(sizeof(double) * nl);
    r->lvl = malloc(sizeof(double) * nl);
    r->step_nrms = malloc(sizeof(double) * (size_t)rows);
    r->step_level = malloc(sizeof(double) * (size_t)rows);
    r->am_cand = malloc(sizeof(long) * (size_t)rows);
    r->am_ref = malloc(sizeof(long) * (size_t)rows);
    r->am_lvl = malloc(sizeof(long) * (size_t)rows);
    const size_t bytes = sizeof(job_hdr) + sizeof(double) * nl;
    void *buf = malloc(bytes);
    if (!r->cand || !r->ref || !r->lvl || !r->step_nrms || !r->step_level || !r->am_cand || !r->am_ref || !r->am_lvl ||
        !buf) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    job_arg a = {m, r->bs, ids, nprompt, ndecode, o->flags};
    double t0 = now_s();
    r->status = dsv4q_iso_job(spec, &o->iso, "whole model", job, &a, buf, bytes, r->msg, sizeof r->msg);
    r->seconds = now_s() - t0;
    if (r->status == DSV4Q_ISO_HARNESS_ERROR) {
        snprintf(err, errlen, "%s", r->msg);
        free(buf);
        return -1;
    }
    if (r->status != DSV4Q_ISO_OK) {
        free(buf);
        r->load_failed = r->status == DSV4Q_ISO_INIT_ERROR;   /* cannot run here: exit 2, no receipt */
        return 0;   /* verdict ERROR, r->msg says why */
    }
    const job_hdr *h = buf;
    memcpy(r->calls, h->calls, sizeof r->calls);
    r->decode_op = h->decode_op;
    memcpy(r->cand, (const char *)buf + sizeof(job_hdr), sizeof(double) * nl);
    free(buf);

    t0 = now_s();
    if (oracle_logits(m, 64, r->bs, ids, nprompt, ndecode, r->ref, err, errlen) ||
        oracle_logits(m, 32, r->bs, ids, nprompt, ndecode, r->lvl, err, errlen))
        return -1;
    r->oracle_seconds = now_s() - t0;

    dsv4q_acc ac = {0}, al = {0};
    dsv4q_acc_add(&ac, r->cand, r->ref, rows * V);
    dsv4q_acc_add(&al, r->lvl, r->ref, rows * V);
    r->nrms = dsv4q_acc_nrms(&ac);
    r->level = dsv4q_acc_nrms(&al);
    r->max_abs = ac.max_abs;
    r->level_max_abs = al.max_abs;
    r->cosine = dsv4q_acc_cosine(&ac);
    r->nonfinite = ac.nonfinite_a;
    for (long i = 0; i < rows; i++) {
        dsv4q_acc s1 = {0}, s2 = {0};
        dsv4q_acc_add(&s1, r->cand + i * V, r->ref + i * V, V);
        dsv4q_acc_add(&s2, r->lvl + i * V, r->ref + i * V, V);
        r->step_nrms[i] = dsv4q_acc_nrms(&s1);
        r->step_level[i] = dsv4q_acc_nrms(&s2);
        r->am_cand[i] = dsv4q_argmax(r->cand + i * V, V);
        r->am_ref[i] = dsv4q_argmax(r->ref + i * V, V);
        r->am_lvl[i] = dsv4q_argmax(r->lvl + i * V, V);
        r->agree += r->am_cand[i] == r->am_ref[i];
        r->level_agree += r->am_lvl[i] == r->am_ref[i];
    }
    r->greedy = (double)r->agree / (double)rows;
    const dsv4q_gate_rule *rule = o->gates ? &o->gates->model_nrms : NULL;
    const dsv4q_judgement j = dsv4q_judge(rule, r->nrms, r->level, DSV4Q_BT_NONE);
    r->bound = j.gated ? j.bound : INFINITY;
    r->nrms_pass = dsv4q_gate_pass(r->nrms, r->bound);   /* ungated: NaN still fails (G2) */
    if (r->greedy_min >= 0) {
        long need = (long)ceil(r->greedy_min * (double)rows - 1e-9);
        r->greedy_required = need < r->level_agree ? need : r->level_agree;
    }
    r->greedy_pass = r->agree >= r->greedy_required;
    r->verdict = r->nrms_pass && r->greedy_pass && r->nonfinite == 0 ? DSV4Q_V_PASS : DSV4Q_V_FAIL;
    return 0;
}

void dsv4q_wm_free(dsv4q_wm_result *r)
{
    free(r->cand);
    free(r->ref);
    free(r->lvl);
    free(r->step_nrms);
    free(r->step_level);
    free(r->am_cand);
    free(r->am_ref);
    free(r->am_lvl);
    r->cand = r->ref = r->lvl = r->step_nrms = r->step_level = NULL;
    r->am_cand = r->am_ref = r->am_lvl = NULL;
}

int dsv4q_wm_status(const dsv4q_wm_result *r)
{
    if (r->load_failed) return 2;
    return r->verdict == DSV4Q_V_PASS ? 0 : 1;
}

void dsv4q_wm_print(FILE *f, const dsv4q_wm_result *r, const dsv4q_gates *g)
{
    if (r->load_failed) {
        fprintf(f, "backend %s: NOT LOADED: %s\n", r->desc.spec, r->msg);
        return;
    }
    fprintf(f, "whole-model qualification: backend %s (%s %s), profile %s, judged against oracle-f64/%s; "
            "level = oracle-f32 vs oracle-f64 (the fp32 sensitivity floor)\n",
            r->desc.spec, r->desc.name, r->desc.version, r->profile, r->profile);
    fprintf(f, "judged as declared: %s (both oracle widths honour it)\n", r->declared);
    fprintf(f, "tokens: prompt %ld + %ld teacher-forced decode steps -> %ld logit rows of %ld\n", r->nprompt,
            r->ndecode, r->rows, r->vocab);
    if (r->verdict == DSV4Q_V_ERROR) {
        fprintf(f, "\nERROR: %s\n-> FAIL\n", r->msg);
        return;
    }
    long total = 0;
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) total += r->calls[i];
    fprintf(f, "composed from %ld backend calls in one isolated child (%.2f s; decode attention: %s):\n ", total,
            r->seconds, r->decode_op >= 0 ? dsv4q_op_get(r->decode_op)->name : "-");
    for (int i = 0; i < DSV4Q_OP_COUNT; i++)
        if (r->calls[i]) fprintf(f, " %s %ld", dsv4q_op_get(i)->name, r->calls[i]);
    fprintf(f, "\ngates %s: logit nrms <= factor * level + floor; greedy agreement >= minimum; no non-finite logit\n\n",
            g ? g->origin : "-");
    fprintf(f, "%4s %9s %12s %12s %8s %8s %8s\n", "row", "position", "nrms", "level", "argmax", "f64", "f32");
    for (long i = 0; i < r->rows; i++)
        fprintf(f, "%4ld %9ld %12.4e %12.4e %8ld %8ld %8ld%s\n", i, r->nprompt - 1 + i, r->step_nrms[i],
                r->step_level[i], r->am_cand[i], r->am_ref[i], r->am_lvl[i], r->am_cand[i] != r->am_ref[i] ? "  differs" : "");
    fprintf(f, "\n%-20s %14s %14s %14s  %s\n", "metric", "value", "level", "bound", "verdict");
    char b[32];
    if (isfinite(r->bound)) snprintf(b, sizeof b, "%14.4e", r->bound);
    else snprintf(b, sizeof b, "%14s", "-");
    double ratio = r->level > 0 ? r->nrms / r->level : (r->nrms > 0 ? INFINITY : 0);
    fprintf(f, "%-20s %14.4e %14.4e %s  %s (%.2fx the level)\n", "logit nrms", r->nrms, r->level, b,
            r->nrms_pass ? "pass" : "FAIL", ratio);
    char v1[32], v2[32], v3[32];
    snprintf(v1, sizeof v1, "%ld/%ld", r->agree, r->rows);
    snprintf(v2, sizeof v2, "%ld/%ld", r->level_agree, r->rows);
    if (r->greedy_min >= 0) snprintf(v3, sizeof v3, ">= %ld/%ld", r->greedy_required, r->rows);
    else snprintf(v3, sizeof v3, "-");
    fprintf(f, "%-20s %14s %14s %14s  %s\n", "greedy agreement", v1, v2, v3, r->greedy_pass ? "pass" : "FAIL");
    if (r->greedy_min >= 0 && r->greedy_required < (long)ceil(r->greedy_min * (double)r->rows - 1e-9))
        fprintf(f, "%-20s (minimum %.3f of %ld rows, lowered to the %ld rows the fp32 level agrees on)\n", "",
                r->greedy_min, r->rows, r->level_agree);
    fprintf(f, "%-20s %14ld %14s %14s  %s\n", "non-finite", r->nonfinite, "", "0", r->nonfinite ? "FAIL" : "pass");
    fprintf(f, "%-20s %14.4e %14.4e %14s  info\n", "max abs", r->max_abs, r->level_max_abs, "-");
    fprintf(f, "%-20s %14.10f %14s %14s  info\n", "cosine", r->cosine, "", "-");
    fprintf(f, "(oracle f64 + f32 runs: %.2f s)\n-> %s\n", r->oracle_seconds, r->verdict == DSV4Q_V_PASS ? "PASS" : "FAIL");
}

char *dsv4q_wm_json(const dsv4q_wm_result *r, const dsv4q_gates *g)
{
    json_t *root = json_object();
    json_object_set_new(root, "mode", json_string("whole-model"));
    json_object_set_new(root, "backend", json_string(r->desc.spec));
    json_object_set_new(root, "backend_name", json_string(r->desc.name));
    json_object_set_new(root, "backend_version", json_string(r->desc.version));
    json_object_set_new(root, "profile", json_string(r->profile));
    json_object_set_new(root, "gates", json_string(g ? g->origin : ""));
    json_object_set_new(root, "verdict", json_string(r->load_failed ? "not loaded" : dsv4q_verdict_name(r->verdict)));
    if (r->msg[0]) json_object_set_new(root, "message", json_string(r->msg));
    json_object_set_new(root, "prompt", json_integer(r->nprompt));
    json_object_set_new(root, "decode", json_integer(r->ndecode));
    if (r->verdict == DSV4Q_V_PASS || r->verdict == DSV4Q_V_FAIL) {
        json_object_set_new(root, "logit_nrms", jnum(r->nrms));
        json_object_set_new(root, "logit_nrms_level", jnum(r->level));
        json_object_set_new(root, "logit_nrms_bound", jnum(r->bound));
        json_object_set_new(root, "logit_nrms_pass", json_boolean(r->nrms_pass));
        json_object_set_new(root, "greedy_agree", json_integer(r->agree));
        json_object_set_new(root, "greedy_agree_level", json_integer(r->level_agree));
        json_object_set_new(root, "rows", json_integer(r->rows));
        json_object_set_new(root, "greedy_min", jnum(r->greedy_min));
        json_object_set_new(root, "greedy_required", json_integer(r->greedy_required));
        json_object_set_new(root, "greedy_pass", json_boolean(r->greedy_pass));
        json_object_set_new(root, "nonfinite", json_integer(r->nonfinite));
        json_object_set_new(root, "logit_max_abs", jnum(r->max_abs));
        json_object_set_new(root, "logit_max_abs_level", jnum(r->level_max_abs));
        json_object_set_new(root, "logit_cosine", jnum(r->cosine));
        json_t *steps = json_array();
        for (long i = 0; i < r->rows; i++) {
            json_t *s = json_object();
            json_object_set_new(s, "position", json_integer(r->nprompt - 1 + i));
            json_object_set_new(s, "nrms", jnum(r->step_nrms[i]));
            json_object_set_new(s, "level", jnum(r->step_level[i]));
            json_object_set_new(s, "argmax", json_integer(r->am_cand[i]));
            json_object_set_new(s, "argmax_f64", json_integer(r->am_ref[i]));
            json_object_set_new(s, "argmax_f32", json_integer(r->am_lvl[i]));
            json_array_append_new(steps, s);
        }
        json_object_set_new(root, "steps", steps);
        json_t *calls = json_object();
        for (int i = 0; i < DSV4Q_OP_COUNT; i++)
            if (r->calls[i]) json_object_set_new(calls, dsv4q_op_get(i)->name, json_integer(r->calls[i]));
        json_object_set_new(root, "calls", calls);
        json_object_set_new(root, "decode_attention",
                            json_string(r->decode_op >= 0 ? dsv4q_op_get(r->decode_op)->name : ""));
        json_object_set_new(root, "seconds", json_real(r->seconds));
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    return s;
}
