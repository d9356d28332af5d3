/*
 * capture_backend.c - `dsv4q capture --backend B`: a capture of a run in
 * which a built-in backend (cpu-ref, its mutants, oracle-f32) computes the
 * stages it has operators for (see capture.h, dsv4q_capture_splice_*).
 *
 * A backend is a set of operators, not an engine: it has no forward pass
 * of its own. This file is the glue an engine would be: for each stage the
 * oracle's forward pass reports (the stage hook), it recomputes the stage
 * from the stage's inputs with the backend's operators through the backend
 * ABI, writes the results back into the forward pass (so every later stage
 * runs on the backend's outputs, as in a real engine run) and records the
 * stage in the capture. The glue's own arithmetic is FP32 (the MoE sum over
 * experts, ascending expert id, then BF16 storage when the profile has
 * moe_bf16), as an FP32 engine's would be.
 *
 *   hc_*_pre  HC_PRE            *_norm  RMSNORM       hc_*_post  HC_POST
 *   moe       MOE_GATE + EXPERT per routed expert + EXPERT (shared)
 *   head      HC_HEAD + RMSNORM + LINEAR (FP32 logits)
 *   embed, attn: the oracle's (a table lookup; attention has no single
 *   operator in the ABI - its operators are qualified by `qualify`)
 *
 * Built-ins only, called in-process (isolate.h I1: the harness never
 * dlopens a plugin); a plugin engine writes its capture itself.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "harness/backend.h"
#include "harness/capture.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"

typedef struct wcache {
    const dsv4q_weight *key;
    float *f;
} wcache;

struct dsv4q_capture_splice {
    const dsv4q_backend_v1 *b;
    void *ctx;
    int inited;
    const dsv4q_model *m;
    uint64_t bs;
    dsv4q_capture_writer *w;
    wcache *wc;
    int nwc, capwc;
    int failed;
    char err[1024];
};

static int sfail(dsv4q_capture_splice *sp, const char *fmt, ...)
{
    if (sp->failed) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sp->err, sizeof sp->err, fmt, ap);
    va_end(ap);
    sp->failed = 1;
    return -1;
}

int dsv4q_capture_splice_new(dsv4q_capture_splice **out, const char *spec, const dsv4q_model *m, uint64_t bs,
                             dsv4q_capture_writer *w, char *err, size_t errlen)
{
    *out = NULL;
    const dsv4q_backend_v1 *b = dsv4q_backend_builtin(spec);
    if (!b) {
        char list[1024];
        dsv4q_backend_builtin_list(list, sizeof list);
        snprintf(err, errlen, "--backend %s: not a built-in backend (%s); a plugin engine writes its capture "
                 "itself (docs/captures.md)", spec, list);
        return -1;
    }
    if (dsv4q_backend_validate(b, spec, err, errlen)) return -1;
    dsv4q_capture_splice *sp = calloc(1, sizeof *sp);
    if (!sp) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    sp->b = b;
    sp->m = m;
    sp->bs = bs;
    sp->w = w;
    if (b->init && b->init(&sp->ctx, err, errlen)) {
        free(sp);
        return -1;
    }
    sp->inited = 1;
    *out = sp;
    return 0;
}

void dsv4q_capture_splice_free(dsv4q_capture_splice *sp)
{
    if (!sp) return;
    if (sp->inited && sp->b->fini) sp->b->fini(sp->ctx);
    for (int i = 0; i < sp->nwc; i++) free(sp->wc[i].f);
    free(sp->wc);
    free(sp);
}

const char *dsv4q_capture_splice_error(const dsv4q_capture_splice *sp) { return sp->failed ? sp->err : NULL; }
const char *dsv4q_capture_splice_profile(const dsv4q_capture_splice *sp)
{
    return sp->b->profile ? sp->b->profile : "source";
}
const char *dsv4q_capture_splice_name(const dsv4q_capture_splice *sp) { return sp->b->name; }
const char *dsv4q_capture_splice_version(const dsv4q_capture_splice *sp) { return sp->b->version; }

/* ---- ABI tensors -------------------------------------------------------- */

/* Decoded F32 values of a weight (cached; F32 weights are used in place). */
static float *decoded(dsv4q_capture_splice *sp, const dsv4q_weight *w)
{
    if (w->fmt == DSV4Q_WF_F32) return (float *)w->data;
    for (int i = 0; i < sp->nwc; i++)
        if (sp->wc[i].key == w) return sp->wc[i].f;
    if (sp->nwc == sp->capwc) {
        int cap = sp->capwc ? 2 * sp->capwc : 64;
        wcache *n = realloc(sp->wc, sizeof *n * (size_t)cap);
        if (!n) return NULL;
        sp->wc = n;
        sp->capwc = cap;
    }
    float *f = malloc(sizeof(float) * (size_t)(w->out * w->in));
    if (!f) return NULL;
    for (int64_t o = 0; o < w->out; o++) dsv4q_weight_row_f32(w, o, f + o * w->in);
    sp->wc[sp->nwc++] = (wcache){w, f};
    return f;
}

static int wbt(dsv4q_capture_splice *sp, dsv4q_bt *t, const char *name, const dsv4q_weight *w)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = DSV4Q_BT_F32;
    t->ndim = 2;
    t->shape[0] = w->out;
    t->shape[1] = w->in;
    if (!(t->data = decoded(sp, w))) return sfail(sp, "out of memory decoding %s", w->name ? w->name : name);
    switch (w->fmt) {
    case DSV4Q_WF_BF16:
        t->raw = w->data;
        t->raw_dtype = DSV4Q_BT_BF16;
        t->raw_ndim = 2;
        t->raw_shape[0] = w->out;
        t->raw_shape[1] = w->in;
        break;
    case DSV4Q_WF_FP8:
    case DSV4Q_WF_FP4: {
        int fp8 = w->fmt == DSV4Q_WF_FP8;
        t->raw = w->data;
        t->raw_dtype = fp8 ? DSV4Q_BT_F8_E4M3 : DSV4Q_BT_I8;
        t->raw_ndim = 2;
        t->raw_shape[0] = w->out;
        t->raw_shape[1] = fp8 ? w->in : w->in / 2;
        t->raw_scale = w->scale;
        t->scale_dtype = (int32_t)w->scale_dtype;
        t->scale_shape[0] = fp8 ? (w->out + 127) / 128 : w->out;
        t->scale_shape[1] = fp8 ? (w->in + 127) / 128 : w->in / 32;
        break;
    }
    default: break;   /* FP32-math weights: the values are the data */
    }
    return 0;
}

static dsv4q_bt fbt(const char *name, const void *data, int i32, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    dsv4q_bt t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = i32 ? DSV4Q_BT_I32 : DSV4Q_BT_F32;
    t.ndim = ndim;
    t.shape[0] = d0;
    t.shape[1] = d1;
    t.shape[2] = d2;
    t.data = (void *)data;
    return t;
}

/* One ABI call; narrow outputs (BF16 / F16 codes) are widened in place. */
static int brun(dsv4q_capture_splice *sp, int op, const dsv4q_bt *in, int nin, dsv4q_bt *out, int nout,
                const double *par, int npar)
{
    if (!(sp->b->caps & DSV4Q_CAP(op)))
        return sfail(sp, "backend %s does not implement %s", sp->b->name, dsv4q_op_get(op)->name);
    dsv4q_bcall c = {op, nin, nout, in, out, par, npar, sp->bs, "capture", NULL, NULL};
    char e[512] = "";
    int rc = sp->b->run(sp->ctx, &c, e, sizeof e);
    if (rc != DSV4Q_BACKEND_OK)
        return sfail(sp, "backend %s, op %s: %s", sp->b->name, dsv4q_op_get(op)->name,
                     rc == DSV4Q_BACKEND_UNSUPPORTED ? "unsupported" : e);
    for (int i = 0; i < nout; i++) {
        if (out[i].dtype != DSV4Q_BT_BF16 && out[i].dtype != DSV4Q_BT_F16) continue;
        int64_t n = dsv4q_bt_numel(&out[i]);
        const uint16_t *code = out[i].data;
        float *f = out[i].data;
        for (int64_t k = n - 1; k >= 0; k--)   /* back to front: f[k] lies above code[k] */
            f[k] = (float)(out[i].dtype == DSV4Q_BT_BF16 ? dsv4q_bf16_decode(code[k]) : dsv4q_f16_decode(code[k]));
        out[i].dtype = DSV4Q_BT_F32;
    }
    return 0;
}

/* ---- the stages --------------------------------------------------------- */

static float *tof(const double *v, int64_t n)
{
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (f)
        for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    return f;
}

static void tod(const float *f, double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) v[i] = f[i];
}

static int st_hc_pre(dsv4q_capture_splice *sp, const dsv4q_stage_io *io, int ffn)
{
    const dsv4q_config *g = &sp->m->cfg;
    const dsv4q_layer_w *L = &sp->m->layers[io->layer];
    const long s = io->s, d = g->dim;
    const int hc = g->hc_mult, nmix = (2 + hc) * hc;
    float *X = tof(io->in[0], s * hc * d), *y = malloc(sizeof(float) * (size_t)(s * d)),
          *post = malloc(sizeof(float) * (size_t)(s * hc)), *comb = malloc(sizeof(float) * (size_t)(s * hc * hc));
    int rc = -1;
    dsv4q_bt in[4], out[3];
    if (!X || !y || !post || !comb) { sfail(sp, "out of memory"); goto out; }
    in[0] = fbt("X", X, 0, 3, s, hc, d);
    if (wbt(sp, &in[1], "fn", ffn ? &L->hc_ffn_fn : &L->hc_attn_fn)) goto out;
    in[2] = fbt("scale", (ffn ? L->hc_ffn_scale : L->hc_attn_scale).f, 0, 1, 3, 0, 0);
    in[3] = fbt("base", (ffn ? L->hc_ffn_base : L->hc_attn_base).f, 0, 1, nmix, 0, 0);
    out[0] = fbt("y", y, 0, 2, s, d, 0);
    out[1] = fbt("post", post, 0, 2, s, hc, 0);
    out[2] = fbt("comb", comb, 0, 3, s, hc, hc);
    double par[3] = {g->norm_eps, g->hc_eps, g->hc_sinkhorn_iters};
    if (brun(sp, DSV4Q_OP_HC_PRE, in, 4, out, 3, par, 3)) goto out;
    tod(y, io->out[0], s * d);
    tod(post, io->out[1], s * hc);
    tod(comb, io->out[2], s * hc * hc);
    rc = 0;
out:
    free(X); free(y); free(post); free(comb);
    return rc;
}

static int rmsnorm(dsv4q_capture_splice *sp, const float *x, long rows, long d, const float *w, float *y)
{
    dsv4q_bt in[2] = {fbt("x", x, 0, 2, rows, d, 0), fbt("w", w, 0, 1, d, 0, 0)}, out[1] = {fbt("y", y, 0, 2, rows, d, 0)};
    double par[1] = {sp->m->cfg.norm_eps};
    return brun(sp, DSV4Q_OP_RMSNORM, in, 2, out, 1, par, 1);
}

static int st_norm(dsv4q_capture_splice *sp, const dsv4q_stage_io *io, int ffn)
{
    const dsv4q_layer_w *L = &sp->m->layers[io->layer];
    const long n = io->s * sp->m->cfg.dim;
    float *x = tof(io->in[0], n), *y = malloc(sizeof(float) * (size_t)n);
    int rc = -1;
    if (!x || !y) sfail(sp, "out of memory");
    else if (!rmsnorm(sp, x, io->s, sp->m->cfg.dim, (ffn ? L->ffn_norm : L->attn_norm).f, y)) {
        tod(y, io->out[0], n);
        rc = 0;
    }
    free(x);
    free(y);
    return rc;
}

static int st_hc_post(dsv4q_capture_splice *sp, const dsv4q_stage_io *io)
{
    const long s = io->s, d = sp->m->cfg.dim;
    const int hc = sp->m->cfg.hc_mult;
    float *x = tof(io->in[0], s * d), *X = tof(io->in[1], s * hc * d), *post = tof(io->in[2], s * hc),
          *comb = tof(io->in[3], s * hc * hc), *Y = malloc(sizeof(float) * (size_t)(s * hc * d));
    int rc = -1;
    if (!x || !X || !post || !comb || !Y) { sfail(sp, "out of memory"); goto out; }
    dsv4q_bt in[4] = {fbt("x", x, 0, 2, s, d, 0), fbt("X", X, 0, 3, s, hc, d), fbt("post", post, 0, 2, s, hc, 0),
                      fbt("comb", comb, 0, 3, s, hc, hc)};
    dsv4q_bt out[1] = {fbt("Y", Y, 0, 3, s, hc, d)};
    if (brun(sp, DSV4Q_OP_HC_POST, in, 4, out, 1, NULL, 0)) goto out;
    tod(Y, io->out[0], s * hc * d);
    rc = 0;
out:
    free(x); free(X); free(post); free(comb); free(Y);
    return rc;
}

static int expert(dsv4q_capture_splice *sp, const dsv4q_expert_w *E, const float *x, long n, const float *wt,
                  float *y)
{
    const dsv4q_config *g = &sp->m->cfg;
    dsv4q_bt in[5];
    in[0] = fbt("x", x, 0, 2, n, g->dim, 0);
    if (wbt(sp, &in[1], "w1", &E->w1) || wbt(sp, &in[2], "w2", &E->w2) || wbt(sp, &in[3], "w3", &E->w3)) return -1;
    in[4] = wt ? fbt("weight", wt, 0, 1, n, 0, 0) : fbt("weight", NULL, 0, 0, 0, 0, 0);
    dsv4q_bt out[1] = {fbt("y", y, 0, 2, n, g->dim, 0)};
    double par[2] = {g->swiglu_limit, g->scale_ue8m0};
    return brun(sp, DSV4Q_OP_EXPERT, in, 5, out, 1, par, 2);
}

static int st_moe(dsv4q_capture_splice *sp, const dsv4q_stage_io *io)
{
    const dsv4q_config *g = &sp->m->cfg;
    const dsv4q_layer_w *L = &sp->m->layers[io->layer];
    const long s = io->s, d = g->dim;
    const int k = g->n_activated_experts, ne = g->n_routed_experts;
    float *x = tof(io->in[0], s * d), *wts = malloc(sizeof(float) * (size_t)(s * k));
    float *acc = calloc((size_t)(s * d), sizeof(float)), *xe = malloc(sizeof(float) * (size_t)(s * d));
    float *ye = malloc(sizeof(float) * (size_t)(s * d)), *we = malloc(sizeof(float) * (size_t)s);
    int32_t *ix = malloc(sizeof(int32_t) * (size_t)(s * k));
    long *rows = malloc(sizeof(long) * (size_t)s);
    int rc = -1;
    if (!x || !wts || !acc || !xe || !ye || !we || !ix || !rows) { sfail(sp, "out of memory"); goto out; }
    dsv4q_bt in[5];
    in[0] = fbt("x", x, 0, 2, s, d, 0);
    if (wbt(sp, &in[1], "W", &L->gate)) goto out;
    in[2] = L->hash ? fbt("bias", NULL, 0, 0, 0, 0, 0) : fbt("bias", L->gate_bias.f, 0, 1, ne, 0, 0);
    in[3] = L->hash ? fbt("tid2eid", L->tid2eid, 1, 2, g->vocab_size, k, 0) : fbt("tid2eid", NULL, 1, 0, 0, 0, 0);
    in[4] = fbt("ids", io->ids, 1, 1, s, 0, 0);
    dsv4q_bt out[2] = {fbt("weights", wts, 0, 2, s, k, 0), fbt("indices", ix, 1, 2, s, k, 0)};
    double par[3] = {k, g->route_scale, dsv4q_score_func_code(g->score_func)};
    if (brun(sp, DSV4Q_OP_MOE_GATE, in, 5, out, 2, par, 3)) goto out;
    for (int e = 0; e < ne; e++) {   /* the engine's sum: ascending expert id, FP32 */
        long n = dsv4q_moe_gather(ix, wts, x, s, k, d, e, rows, we, xe);
        if (!n) continue;
        if (expert(sp, &L->experts[e], xe, n, we, ye)) goto out;
        for (long r = 0; r < n; r++)
            for (long i = 0; i < d; i++) acc[rows[r] * d + i] += ye[r * d + i];
    }
    if (expert(sp, &L->shared, x, s, NULL, ye)) goto out;
    const int bf = (int)((sp->bs >> DSV4Q_B_MOE_BF16) & 1u);
    for (long i = 0; i < s * d; i++) {
        float v = acc[i] + ye[i];
        io->out[0][i] = bf ? dsv4q_bf16_decode(dsv4q_bf16_from_f32(v)) : v;
    }
    rc = 0;
out:
    free(x); free(wts); free(acc); free(xe); free(ye); free(we); free(ix); free(rows);
    return rc;
}

static int st_head(dsv4q_capture_splice *sp, const dsv4q_stage_io *io)
{
    const dsv4q_model *m = sp->m;
    const dsv4q_config *g = &m->cfg;
    const int hc = g->hc_mult;
    const long d = g->dim, V = g->vocab_size;
    float *X = tof(io->in[0], hc * d), *y = malloc(sizeof(float) * (size_t)d), *yn = malloc(sizeof(float) * (size_t)d);
    float *lg = malloc(sizeof(float) * (size_t)V);
    int rc = -1;
    if (!X || !y || !yn || !lg) { sfail(sp, "out of memory"); goto out; }
    dsv4q_bt in[4];
    in[0] = fbt("X", X, 0, 3, 1, hc, d);
    if (wbt(sp, &in[1], "fn", &m->hc_head_fn)) goto out;
    in[2] = fbt("scale", m->hc_head_scale.f, 0, 1, m->hc_head_scale.n, 0, 0);
    in[3] = fbt("base", m->hc_head_base.f, 0, 1, hc, 0, 0);
    dsv4q_bt out[1] = {fbt("y", y, 0, 2, 1, d, 0)};
    double par[2] = {g->norm_eps, g->hc_eps};
    if (brun(sp, DSV4Q_OP_HC_HEAD, in, 4, out, 1, par, 2) || rmsnorm(sp, y, 1, d, m->norm.f, yn)) goto out;
    dsv4q_bt lin[2];
    lin[0] = fbt("x", yn, 0, 2, 1, d, 0);
    if (wbt(sp, &lin[1], "w", &m->head)) goto out;
    dsv4q_bt lout[1] = {fbt("y", lg, 0, 2, 1, V, 0)};
    double lpar[2] = {g->scale_ue8m0, 0};
    if (brun(sp, DSV4Q_OP_LINEAR, lin, 2, lout, 1, lpar, 2)) goto out;
    tod(lg, io->out[0], V);
    rc = 0;
out:
    free(X); free(y); free(yn); free(lg);
    return rc;
}

int dsv4q_capture_splice_cb(void *user, const dsv4q_stage_io *io)
{
    dsv4q_capture_splice *sp = user;
    int rewritten = 0;
    if (!sp->failed) {
        int rc = 0;
        switch (io->stage) {
        case DSV4Q_STAGE_HC_ATTN_PRE:
        case DSV4Q_STAGE_HC_FFN_PRE: rc = st_hc_pre(sp, io, io->stage == DSV4Q_STAGE_HC_FFN_PRE); rewritten = 1; break;
        case DSV4Q_STAGE_ATTN_NORM:
        case DSV4Q_STAGE_FFN_NORM: rc = st_norm(sp, io, io->stage == DSV4Q_STAGE_FFN_NORM); rewritten = 1; break;
        case DSV4Q_STAGE_HC_ATTN_POST:
        case DSV4Q_STAGE_HC_FFN_POST: rc = st_hc_post(sp, io); rewritten = 1; break;
        case DSV4Q_STAGE_MOE: rc = st_moe(sp, io); rewritten = 1; break;
        case DSV4Q_STAGE_HEAD: rc = st_head(sp, io); rewritten = 1; break;
        default: break;   /* embed, attn: the oracle's */
        }
        if (rc) rewritten = 0;
    }
    dsv4q_capture_stage_cb(sp->w, io);
    return rewritten;
}
