/*
 * model.c - the whole DeepSeek V4 forward pass at one width.
 *
 * Mirrors model.py Transformer.forward / Block.forward / Attention.forward /
 * Indexer.forward: prefill of s tokens at position 0, then one-token decode
 * steps, with the caches the reference keeps per layer: the window ring
 * (slot = pos % window), the compressed KV rows, the indexer key rows and
 * both compressors' states. The column layout of the attention index (window
 * columns first, then compressed columns; offset s in prefill, w in decode)
 * is the reference's, because the online softmax's 64-column blocks make
 * the column order matter under attn_p_bf16.
 *
 * Invariants:
 *  M1. A call is a prefill (pos 0, s >= 1 tokens) or a decode (s == 1),
 *      as in the reference; or, once the prompt length is declared
 *      (dsv4q_run_set_prompt), a chunk of that prefill at any position
 *      (V4.1 too: oracle/model_v41.c J5).
 *  M4. A prefill fed in chunks is bit-identical to the one call (every
 *      operator is row-wise but attention, the compressors and the
 *      indexer): the column layout is sized for the whole prompt, a
 *      chunk's keys are its window context + its own kv + the compressed
 *      rows so far, the compressors carry their partial block, and a
 *      chunk's indexer rows are masked as the whole prefill's are. Peak
 *      memory is then the caches plus one chunk (tests/test_chunked.c).
 *  M5. A layer range (dsv4q_run_set_layers) fed the previous range's
 *      output streams Xs is bit-identical to the same blocks of the whole
 *      pass: it is the same block loop on the same values (Xs crosses in
 *      the run's own width, so nothing is rounded), and a layer's caches
 *      depend only on its own inputs. This is what lets ranks split the
 *      model by layers (docs/mpi.md).
 *  M2. Stage taps see the values the next stage consumes (after rounding).
 *  M3. Every stage of the stage table (oracle/stages.h) is one st_* function
 *      (or attention / head) used by BOTH the forward pass and
 *      dsv4q_stage_exec, so a stage replayed on the inputs the forward pass
 *      gave it reproduces its output bit for bit (tests/test_capture.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/model_run.h"
#include "oracle/model_internal.h"
#include "oracle/ops41.h"

void X(dsv4q_run_set_stage_hook)(X(dsv4q_runstate) *r, dsv4q_stage_fn fn, void *user)
{
    r->stage_fn = fn;
    r->stage_user = user;
}

void X(dsv4q_run_set_pick_hook)(X(dsv4q_runstate) *r, dsv4q_pick_fn fn, void *user)
{
    r->pick = fn;
    r->pick_user = user;
}

int X(dsv4q_run_set_last_layer)(X(dsv4q_runstate) *r, int layer)
{
    if (r->pos > 0) return -1;   /* the skipped layers' caches would be missing */
    r->last_layer = layer;
    return 0;
}

/* Free one layer's caches (window ring, compressed and indexer rows, the
 * compressor states). */
static void lstate_free(lstate *l)
{
    free(l->ring);
    free(l->crows);
    free(l->irows);
    X(dsv4q_cmp_state_free)(&l->cst);
    X(dsv4q_cmp_state_free)(&l->ist);
}

int X(dsv4q_run_set_layers)(X(dsv4q_runstate) * r, int first, int last)
{
    const dsv4q_config *g = &r->m->cfg;
    if (r->pos > 0 || r->v41 || first < 0 || last < first || last >= g->n_layers) return -1;
    r->first_layer = first;
    r->last_layer = last;
    /* a rank keeps only its own layers' caches (and MTP's on the last range) */
    for (int li = 0; li < g->n_layers + g->n_mtp_layers; li++) {
        if (li >= first && (li <= last || last == g->n_layers - 1)) continue;
        lstate_free(&r->ls[li]);
        memset(&r->ls[li], 0, sizeof r->ls[li]);
    }
    return 0;
}

static void cmp_view(X(dsv4q_cmp) *c, const dsv4q_cmp_w *w, int ratio, int Dc, int rotate)
{
    c->ratio = ratio;
    c->Dc = Dc;
    c->rotate = rotate;
    c->wkv = w->wkv;
    c->wgate = w->wgate;
    c->ape = V(w->ape);
    c->norm = V(w->norm);
}

/* ---- the oracle as the operator provider (the default) ------------------ */

static int o_linear(void *c, const dsv4q_weight *w, const real *x, long s, real *y, int round_at)
{
    const X(dsv4q_runstate) *r = c;
    return X(dsv4q_linear)(r->bs, r->ue8m0, w, x, s, y, round_at);
}
static int o_rmsnorm(void *c, const real *x, long rows, long d, const dsv4q_vec *w, real *y)
{
    X(dsv4q_rmsnorm)(((const X(dsv4q_runstate) *)c)->bs, x, rows, d, V(*w), ((const X(dsv4q_runstate) *)c)->m->cfg.norm_eps, y);
    return 0;
}
static int o_qhead_norm(void *c, real *q, long rows, long D)
{
    const X(dsv4q_runstate) *r = c;
    X(dsv4q_qhead_norm)(r->bs, q, rows, D, r->m->cfg.norm_eps);
    return 0;
}
static int o_rope(void *c, real *x, long rows, long stride, long off, long pos0, long per_pos, int compress,
                  int inverse)
{
    const X(dsv4q_runstate) *r = c;
    X(dsv4q_rope_apply)(r->bs, compress ? &r->ropec : &r->rope0, x, rows, stride, off, pos0, per_pos, inverse);
    return 0;
}
static int o_act_quant(void *c, real *x, long rows, long stride, long n, int block)
{
    const X(dsv4q_runstate) *r = c;
    for (long i = 0; i < rows; i++) X(dsv4q_act_quant)(x + i * stride, 1, n, block, r->ue8m0);
    return 0;
}
static int o_hadamard(void *c, real *x, long rows, long n)
{
    X(dsv4q_hadamard)(((const X(dsv4q_runstate) *)c)->bs, x, rows, n);
    return 0;
}
static int o_fp4_quant(void *c, real *x, long rows, long n)
{
    (void)c;
    X(dsv4q_fp4_act_quant)(x, rows, n);
    return 0;
}
static long o_compress(void *c, int li, int rotate, const real *x, long s, long p0, real *dst)
{
    X(dsv4q_runstate) *r = c;
    lstate *l = &r->ls[li];
    return X(dsv4q_compressor)(r->bs, r->ue8m0, rotate ? &l->icmp : &l->cmp, rotate ? &l->ist : &l->cst, x, s, p0,
                               &r->ropec, r->m->cfg.norm_eps, dst);
}
static int o_indexer_score(void *c, const real *q, const real *w, long s, int Hi, int Di, const real *K, long T,
                           long p0, int ratio, real *score)
{
    X(dsv4q_indexer_scores)(((const X(dsv4q_runstate) *)c)->bs, q, w, s, Hi, Di, K, T, p0, ratio, score);
    return 0;
}
static int o_topk(void *c, const real *score, long rows, long T, int k, int32_t *idx)
{
    (void)c;
    return X(dsv4q_topk)(score, rows, T, k, idx);
}
static int o_sparse_attn(void *c, const real *q, long s, int H, int D, const real *kv, long nkeys, const int32_t *idx,
                         long ncols, const dsv4q_vec *sink, double scale, real *o)
{
    return X(dsv4q_sparse_attn)(((const X(dsv4q_runstate) *)c)->bs, q, s, H, D, kv, nkeys, idx, ncols, V(*sink),
                                (real)scale, o);
}
static int o_hc_pre(void *c, const real *Xs, long s, const dsv4q_weight *fn, const dsv4q_vec *scale,
                    const dsv4q_vec *base, real *y, real *post, real *comb)
{
    const X(dsv4q_runstate) *r = c;
    const dsv4q_config *g = &r->m->cfg;
    return X(dsv4q_hc_pre)(r->bs, Xs, s, g->hc_mult, g->dim, fn, V(*scale), V(*base), g->norm_eps, g->hc_eps,
                           g->hc_sinkhorn_iters, y, post, comb);
}
static int o_hc_post(void *c, const real *x, const real *Xs, const real *post, const real *comb, long s, real *Y)
{
    const X(dsv4q_runstate) *r = c;
    X(dsv4q_hc_post)(r->bs, x, Xs, post, comb, s, r->m->cfg.hc_mult, r->m->cfg.dim, Y);
    return 0;
}
static int o_hc_head(void *c, const real *Xs, const dsv4q_weight *fn, const dsv4q_vec *scale, const dsv4q_vec *base,
                     real *y)
{
    const X(dsv4q_runstate) *r = c;
    const dsv4q_config *g = &r->m->cfg;
    return X(dsv4q_hc_head)(r->bs, Xs, 1, g->hc_mult, g->dim, fn, V(*scale), V(*base), g->norm_eps, g->hc_eps, y);
}
static int o_moe(void *c, int li, const real *x, long s, const int32_t *ids, real *wts, int32_t *ix, real *out)
{
    const X(dsv4q_runstate) *r = c;
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *L = &r->m->layers[li];
    /* a DSpark stage has its own expert counts (ModelArgs.get_moe_config); 0 on every other layer */
    const int k = L->n_activated > 0 ? L->n_activated : g->n_activated_experts;
    const int nr = L->n_routed > 0 ? L->n_routed : g->n_routed_experts;
    if (g->arch == DSV4Q_ARCH_V41) {
        if (X(dsv4q_moe_gate41)(x, s, g->dim, &L->gate, V(L->gate_bias), nr, k, g->score_func, g->gate_temp,
                                g->norm_topk_prob, g->route_scale, wts, ix))
            return -1;
    } else if (X(dsv4q_moe_gate)(x, s, g->dim, &L->gate, L->hash ? NULL : V(L->gate_bias), L->hash ? L->tid2eid : NULL,
                                 ids, g->n_routed_experts, k, g->score_func, g->route_scale, wts, ix)) {
        return -1;
    }
    return X(dsv4q_moe)(r->bs, r->ue8m0, L->experts, nr, &L->shared, x, s, g->dim, wts, ix, k, g->swiglu_limit, out);
}

static const X(dsv4q_provider) oracle_provider = {
    .linear = o_linear,
    .rmsnorm = o_rmsnorm,
    .qhead_norm = o_qhead_norm,
    .rope = o_rope,
    .act_quant = o_act_quant,
    .hadamard = o_hadamard,
    .fp4_quant = o_fp4_quant,
    .compress = o_compress,
    .indexer_score = o_indexer_score,
    .topk = o_topk,
    .sparse_attn = o_sparse_attn,
    .window_decode = NULL,
    .hc_pre = o_hc_pre,
    .hc_post = o_hc_post,
    .hc_head = o_hc_head,
    .moe = o_moe,
    /* V4.1 (oracle/model_v41.c) */
    .hc_pre41 = X(dsv4q_o41_hc_pre41),
    .hc_collapse = X(dsv4q_o41_hc_collapse),
    .engram_hash = X(dsv4q_o41_engram_hash),
    .index41_score = X(dsv4q_o41_index41_score),
    .engram = X(dsv4q_o41_engram),
    .compress41 = X(dsv4q_o41_compress),
    .kv41_quant = X(dsv4q_o41_kv41_quant),
    .candidates = X(dsv4q_o41_candidates),
    .topk41 = X(dsv4q_o41_topk),
};

int X(dsv4q_run_set_provider)(X(dsv4q_runstate) * r, const X(dsv4q_provider) * p, void *ctx)
{
    if (p && r->v41 && !X(dsv4q_v41_provider_ok)(p)) return -1;
    if (p && r->prompt) return -1; /* a provider's ops have no chunks (M4) */
    r->P = p ? p : &oracle_provider;
    r->pctx = p ? ctx : r;
    return 0;
}

int X(dsv4q_run_set_prompt)(X(dsv4q_runstate) * r, long n)
{
    if (r->pos > 0 || n < 1 || n > r->max_pos || r->P != &oracle_provider) return -1;
    r->prompt = n;
    return 0;
}

long X(dsv4q_run_prompt)(const X(dsv4q_runstate) * r, long p0, long s)
{
    return r->prompt ? r->prompt : p0 == 0 ? s : 0;
}

void X(dsv4q_run_free)(X(dsv4q_runstate) *r)
{
    if (!r) return;
    const dsv4q_config *g = &r->m->cfg;
    if (r->ls)
        for (int li = 0; li < g->n_layers + g->n_mtp_layers; li++) lstate_free(&r->ls[li]);
    free(r->ls);
    X(dsv4q_v41_free)(r->v41);
    X(dsv4q_dspark_free)(r->dspark);
    X(dsv4q_rope_free)(&r->rope0);
    X(dsv4q_rope_free)(&r->ropec);
    free(r->lastX);
    free(r);
}

X(dsv4q_runstate) *X(dsv4q_run_new)(const dsv4q_model *m, uint64_t bs, long max_pos, dsv4q_tap_fn tapfn,
                                    void *tap_user)
{
    const dsv4q_config *g = &m->cfg;
    X(dsv4q_runstate) *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->m = m;
    r->last_layer = -1;
    r->P = &oracle_provider;
    r->pctx = r;
    r->bs = bs;
    r->ue8m0 = g->scale_ue8m0;
    r->max_pos = max_pos;
    r->tap = tapfn;
    r->tap_user = tap_user;
    dsv4q_rope_params p0 = {g->rope_head_dim, g->rope_theta, 0, g->rope_factor, g->beta_fast, g->beta_slow};
    /* yarn_gated (B4): YaRN only when the run's context exceeds the training context */
    const int gated = ((bs >> DSV4Q_B_YARN_GATED) & 1u) && max_pos <= g->original_seq_len;
    dsv4q_rope_params pc = {g->rope_head_dim, g->compress_rope_theta, gated ? 0 : g->original_seq_len,
                            g->rope_factor,   g->beta_fast,           g->beta_slow};
    int nl = g->n_layers + g->n_mtp_layers;
    r->ls = calloc((size_t)nl, sizeof *r->ls);
    /* DSpark drafts sit at positions up to max_pos - 1 + dspark_block_size (window RoPE) */
    const long ds_extra = g->arch == DSV4Q_ARCH_V41 && g->n_mtp_layers > 0 ? g->dspark_block_size : 0;
    if (!r->ls || X(dsv4q_rope_build)(&r->rope0, &p0, max_pos + ds_extra, bs) ||
        X(dsv4q_rope_build)(&r->ropec, &pc, max_pos, bs))
        goto fail;
    for (int li = 0; li < nl; li++) {
        const dsv4q_layer_w *L = &m->layers[li];
        lstate *l = &r->ls[li];
        l->ring = calloc((size_t)g->window_size * g->head_dim, sizeof(real));
        if (!l->ring) goto fail;
        if (g->arch == DSV4Q_ARCH_V41) continue; /* its compressed caches are model_v41.c's */
        if (L->ratio) {
            long cap = max_pos / L->ratio + 1;
            l->crows = calloc((size_t)(cap * g->head_dim), sizeof(real));
            if (!l->crows || X(dsv4q_cmp_state_init)(&l->cst, L->ratio, g->head_dim)) goto fail;
            cmp_view(&l->cmp, &L->cmp, L->ratio, g->head_dim, 0);
        }
        if (L->ratio == 4) {
            long cap = max_pos / 4 + 1;
            l->irows = calloc((size_t)(cap * g->index_head_dim), sizeof(real));
            if (!l->irows || X(dsv4q_cmp_state_init)(&l->ist, 4, g->index_head_dim)) goto fail;
            cmp_view(&l->icmp, &L->idx_cmp, 4, g->index_head_dim, 1);
        }
    }
    if (g->arch == DSV4Q_ARCH_V41 && !(r->v41 = X(dsv4q_v41_new)(r))) goto fail;
    if (g->arch == DSV4Q_ARCH_V41 && g->n_mtp_layers > 0 && !(r->dspark = X(dsv4q_dspark_new)(r))) goto fail;
    return r;
fail:
    X(dsv4q_run_free)(r);
    return NULL;
}

/* Indexer of a ratio-4 layer: writes k picks per query into cols (already
 * offset into the key layout, -1 masked). Returns k or -1. */
static long indexer(X(dsv4q_runstate) * r, int li, const real *x, const real *qr, long s, long p0, long offset,
                    int32_t *cols, long ncols_stride, long col0, long nsel)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *L = &r->m->layers[li];
    lstate *l = &r->ls[li];
    const uint64_t bs = r->bs;
    const int Hi = g->index_n_heads, Di = g->index_head_dim, rd = g->rope_head_dim;
    real *q = NULL, *w = NULL, *score = NULL, *newrows = NULL;
    int32_t *pick = NULL;
    long k = -1;
    ALLOC(q, s * Hi * Di);
    ALLOC(w, s * Hi);
    ALLOC(newrows, (s / 4 + 1) * Di);
    if (OP(linear, &L->idx_wq_b, qr, s, q, DSV4Q_B_LINEAR_BF16)) goto oom;
    if (OP(rope, q, s * Hi, Di, Di - rd, p0, Hi, 1, 0)) goto oom;
    if (dsv4q_idx_hadamard_on(bs) && OP(hadamard, q, s * Hi, Di)) goto oom;
    if (((bs >> DSV4Q_B_IDX_Q_FP4) & 1u) && OP(fp4_quant, q, s * Hi, Di)) goto oom;
    long nr = OP(compress, li, 1, x, s, p0, newrows);
    if (nr < 0) goto oom;
    memcpy(l->irows + l->nirows * Di, newrows, sizeof(real) * (size_t)(nr * Di));
    l->nirows += nr;
    if (OP(linear, &L->idx_weights_proj, x, s, w, DSV4Q_B_IDX_PARTIAL_BF16)) goto oom;
    const real wscale = RC(1.0 / sqrt((double)Di) * (1.0 / sqrt((double)Hi)));
    for (long i = 0; i < s * Hi; i++) w[i] = rb(bs, DSV4Q_B_IDX_PARTIAL_BF16, w[i] * wscale);
    long T = l->nirows;
    ALLOC(score, s * (T ? T : 1));
    /* no complete block yet (T = 0): nothing to score or pick */
    if (T && OP(indexer_score, q, w, s, Hi, Di, l->irows, T, p0, 4, score)) goto oom;
    if (p0 > 0 && s > 1) /* a prefill chunk: the causal mask the score op applies at position 0 */
        for (long i = 0; i < s; i++)
            for (long t = (p0 + i + 1) / 4; t < T; t++) score[i * T + t] = -INFINITY;
    tap(r, li, TAP(IDX_SCORE), score, s * T, s);
    /* nsel picks per row, the layout's (M4): a chunk of a prefill has fewer
     * rows to pick from than the whole prompt; the rest are masked (-1) */
    const long kt = T < g->index_topk ? T : g->index_topk;
    k = nsel;
    if (kt > k) { /* a layout narrower than this call's picks: refuse, never overflow */
        snprintf(r->err, sizeof r->err, "layer %d: %ld top-k picks per row, but the column layout holds %ld", li, kt,
                 k);
        k = -1;
        goto oom;
    }
    ALLOC(pick, s * (k ? k : 1));
    if (kt && OP(topk, score, s, T, (int)kt, pick)) {
        k = -1;
        goto oom;
    }
    for (long i = s - 1; kt < k && i >= 0; i--) /* widen [s, kt] to [s, k] in place, last row first */
        for (long j = k - 1; j >= 0; j--) pick[i * k + j] = j < kt ? pick[i * kt + j] : -1;
    if (r->pick) r->pick(r->pick_user, li, p0, s, k, pick);
    tap_i32(r, li, TAP(IDX_TOPK), pick, s * k, s);
    for (long i = 0; i < s; i++)
        for (long j = 0; j < k; j++) {
            int32_t v = pick[i * k + j];
            cols[i * ncols_stride + col0 + j] = v < 0 ? -1 : (int32_t)(v + offset);
        }
oom:
    free(q);
    free(w);
    free(score);
    free(newrows);
    free(pick);
    return k;
}

int X(dsv4q_run_out_proj)(X(dsv4q_runstate) * r, const dsv4q_layer_w *L, const real *o, long s, real *out)
{
    const dsv4q_config *g = &r->m->cfg;
    const int H = g->n_heads, D = g->head_dim, G = g->o_groups, ol = g->o_lora_rank;
    real *og = NULL, *t = NULL, *tg = NULL;
    int rc = -1;
    /* grouped low-rank output: t[g] = wo_a[g] o[g] (BF16), y = wo_b t */
    const long gd = (long)H * D / G;
    ALLOC(og, s * gd);
    ALLOC(tg, s * ol);
    ALLOC(t, s * G * ol);
    /* group gi is rows [gi*ol, (gi+1)*ol) of wo_a, in its stored element
     * size (BF16 from safetensors; F32/F64 from a GGUF or an F32 checkpoint) */
    const size_t wes = L->wo_a.fmt == DSV4Q_WF_F32 ? 4 : L->wo_a.fmt == DSV4Q_WF_F64 ? 8 : 2;
    for (int gi = 0; gi < G; gi++) {
        dsv4q_weight wg = L->wo_a;
        wg.out = ol;
        if (L->wo_a.fmt != DSV4Q_WF_BF16 && L->wo_a.fmt != DSV4Q_WF_F32 && L->wo_a.fmt != DSV4Q_WF_F64)
            goto oom; /* wo_a is split per group: BF16, F32 or F64 only (io/model_load.c, io/gguf_model.c) */
        wg.data = (const char *)L->wo_a.data + (size_t)gi * (size_t)(ol * gd) * wes;
        for (long i = 0; i < s; i++) memcpy(og + i * gd, o + i * H * D + gi * gd, sizeof(real) * (size_t)gd);
        if (OP(linear, &wg, og, s, tg, DSV4Q_B_LINEAR_BF16)) goto oom;
        for (long i = 0; i < s; i++) memcpy(t + i * G * ol + (long)gi * ol, tg + i * ol, sizeof(real) * (size_t)ol);
    }
    if (OP(linear, &L->wo_b, t, s, out, DSV4Q_B_LINEAR_BF16)) goto oom;
    rc = 0;
oom:
    free(og);
    free(t);
    free(tg);
    return rc;
}

static int attention(X(dsv4q_runstate) *r, int li, const real *x, long s, long p0, real *out)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *L = &r->m->layers[li];
    lstate *l = &r->ls[li];
    const uint64_t bs = r->bs;
    const int H = g->n_heads, D = g->head_dim, rd = g->rope_head_dim, win = g->window_size;
    const int ratio = L->ratio;
    const int cmp = ratio != 0;   /* the compressed layers' RoPE table */
    const long S = X(dsv4q_run_prompt)(r, p0, s);
    const int prefill = p0 < S; /* the prefill, or one chunk of it (M4) */
    real *qr = NULL, *q = NULL, *kv = NULL, *keys = NULL, *o = NULL, *ctx = NULL;
    int32_t *idx = NULL, *cidx = NULL;
    int rc = -1;

    ALLOC(qr, s * g->q_lora_rank);
    ALLOC(q, s * H * D);
    ALLOC(kv, s * D);
    if (OP(linear, &L->wq_a, x, s, qr, DSV4Q_B_LINEAR_BF16)) goto oom;
    if (OP(rmsnorm, qr, s, g->q_lora_rank, &L->q_norm, qr)) goto oom;
    if (OP(linear, &L->wq_b, qr, s, q, DSV4Q_B_LINEAR_BF16)) goto oom;
    if (OP(qhead_norm, q, s * H, D)) goto oom;
    if (OP(rope, q, s * H, D, D - rd, p0, H, cmp, 0)) goto oom;
    tap(r, li, TAP(Q), q, s * H * D, s);
    if (OP(linear, &L->wkv, x, s, kv, DSV4Q_B_LINEAR_BF16)) goto oom;
    if (OP(rmsnorm, kv, s, D, &L->kv_norm, kv)) goto oom;
    if (OP(rope, kv, s, D, D - rd, p0, 1, cmp, 0)) goto oom;
    if (((bs >> DSV4Q_B_KV_FP8) & 1u) && OP(act_quant, kv, s, D, D - rd, 64)) goto oom;
    tap(r, li, TAP(KV), kv, s * D, s);

    /* column layout (M4): window columns, then compressed columns, sized
     * for the whole prompt in a prefill (every chunk of it alike) and for
     * the positions so far in a decode step. A prefill's keys are [the
     * window context before the chunk (positions cs..p0-1, from the ring) |
     * the chunk's kv | the compressed rows]; one call at 0 has no context. */
    const long end = p0 + s, lay = prefill ? S : end;
    const long cs = prefill && p0 - win + 1 > 0 ? p0 - win + 1 : 0, nctx = prefill ? p0 - cs : 0;
    long nw = prefill ? (S < win ? S : win) : win;
    long nc = 0;
    if (ratio == 128) nc = lay / ratio;
    else if (ratio == 4) nc = (lay / 4) < g->index_topk ? lay / 4 : g->index_topk;
    long ncols = nw + nc;
    ALLOC(idx, s * (ncols ? ncols : 1));
    for (long i = 0; i < s; i++) {
        int32_t *c = idx + i * ncols;
        if (prefill) {
            const long t = p0 + i, base = t - win + 1 < 0 ? 0 : t - win + 1;
            for (long j = 0; j < nw; j++) c[j] = base + j > t ? -1 : (int32_t)(base + j - cs);
        } else if (p0 >= win - 1) {
            long st = p0 % win;
            for (long j = 0; j < win; j++) c[j] = (int32_t)((st + 1 + j) % win);
        } else {
            for (long j = 0; j < win; j++) c[j] = j <= p0 ? (int32_t)j : -1;
        }
    }
    long offset = prefill ? nctx + s : win;
    if (ratio == 128)
        for (long i = 0; i < s; i++)
            for (long j = 0; j < nc; j++)
                idx[i * ncols + nw + j] = (prefill && j >= (p0 + i + 1) / ratio) ? -1 : (int32_t)(offset + j);
    if (ratio == 4 && indexer(r, li, x, qr, s, p0, offset, idx, ncols, nw, nc) < 0) goto oom;

    /* caches: window ring (a provider's window_decode owns it in decode),
     * then the compressor (its row is visible now); a chunk's window
     * context leaves the ring before the chunk overwrites it */
    if (nctx) {
        ALLOC(ctx, nctx * D);
        for (long j = 0; j < nctx; j++) memcpy(ctx + j * D, l->ring + ((cs + j) % win) * D, sizeof(real) * (size_t)D);
    }
    const int window_op = !prefill && r->P->window_decode;
    if (!window_op)
        for (long i = (s > win ? s - win : 0); i < s; i++)
            memcpy(l->ring + ((p0 + i) % win) * D, kv + i * D, sizeof(real) * (size_t)D);
    if (ratio) {
        long nr = OP(compress, li, 0, x, s, p0, l->crows + l->ncrows * D);
        if (nr < 0) goto oom;
        l->ncrows += nr;
    }
    ALLOC(o, s * H * D);
    const double scale = 1.0 / sqrt((double)D);
    if (window_op) {
        ALLOC(cidx, nc ? nc : 1);
        for (long j = 0; j < nc; j++) cidx[j] = idx[nw + j] < 0 ? -1 : (int32_t)(idx[nw + j] - win);
        if (OP(window_decode, q, H, D, kv, l->ring, win, l->crows, l->ncrows, cidx, nc, &L->attn_sink, scale, p0, o))
            goto oom;
    } else {
        long nkeys;
        if (prefill) {
            nkeys = nctx + s + l->ncrows;
            ALLOC(keys, nkeys * D);
            if (nctx) memcpy(keys, ctx, sizeof(real) * (size_t)(nctx * D));
            memcpy(keys + nctx * D, kv, sizeof(real) * (size_t)(s * D));
            /* ratio 0: no rows, crows NULL */
            if (l->ncrows) memcpy(keys + offset * D, l->crows, sizeof(real) * (size_t)(l->ncrows * D));
        } else {
            nkeys = win + l->ncrows;
            ALLOC(keys, nkeys * D);
            memcpy(keys, l->ring, sizeof(real) * (size_t)(win * D));
            if (l->ncrows) memcpy(keys + (long)win * D, l->crows, sizeof(real) * (size_t)(l->ncrows * D));
        }
        if (OP(sparse_attn, q, s, H, D, keys, nkeys, idx, ncols, &L->attn_sink, scale, o)) goto oom;
    }
    if (OP(rope, o, s * H, D, D - rd, p0, H, cmp, 1)) goto oom;
    tap(r, li, TAP(ATTN_OUT), o, s * H * D, s);

    if (X(dsv4q_run_out_proj)(r, L, o, s, out)) goto oom;
    rc = 0;
oom:
    free(qr);
    free(q);
    free(kv);
    free(keys);
    free(ctx);
    free(o);
    free(idx);
    free(cidx);
    return rc;
}

/* ---- stages (oracle/stages.h, M3) ------------------------------------ */

/* model_internal.h: the stage hook's call, for either table. */
int X(dsv4q_run_report)(X(dsv4q_runstate) * r, int st, int li, long s, long p0, const int32_t *ids,
                        const real *const *in, real *const *out)
{
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(r->m->cfg.arch, st);
    if (!r->stage_fn || (si->per_layer && li >= r->m->cfg.n_layers)) return 0;
    dsv4q_stage_io io = {st, si->per_layer ? li : -1, s, p0, ids, {0}, {0}};
#if DSV4Q_WIDTH == 64
    for (int t = 0; t < si->nin; t++) io.in[t] = in[t];
    for (int t = 0; t < si->nout; t++) io.out[t] = out[t];
    r->stage_fn(r->stage_user, &io);
    return 0;
#else
    double *buf[2 * DSV4Q_STAGE_MAX_T] = {0};
    int rc = -1;
    for (int side = 0; side < 2; side++)
        for (int t = 0; t < (side ? si->nout : si->nin); t++) {
            const dsv4q_stage_tensor *ts = side ? &si->out[t] : &si->in[t];
            const real *src = side ? out[t] : in[t];
            long n = (long)dsv4q_stage_numel(ts, &r->m->cfg, s);
            double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
            if (!d) goto oom;
            for (long i = 0; i < n; i++) d[i] = src[i];
            buf[side * DSV4Q_STAGE_MAX_T + t] = d;
            if (side) io.out[t] = d;
            else io.in[t] = d;
        }
    if (r->stage_fn(r->stage_user, &io))
        for (int t = 0; t < si->nout; t++) {
            long n = (long)dsv4q_stage_numel(&si->out[t], &r->m->cfg, s);
            for (long i = 0; i < n; i++) out[t][i] = (real)io.out[t][i];
        }
    rc = 0;
oom:
    for (int i = 0; i < 2 * DSV4Q_STAGE_MAX_T; i++) free(buf[i]);
    return rc;
#endif
}

/* embed: the embedding row of each token, copied to the hc streams. */
static void st_embed(X(dsv4q_runstate) *r, const int32_t *ids, long s, real *Xs)
{
    const dsv4q_config *g = &r->m->cfg;
    const int hc = g->hc_mult;
    const long d = g->dim;
    for (long t = 0; t < s; t++) {
        real *row = Xs + t * hc * d;
        for (long i = 0; i < d; i++) row[i] = (real)dsv4q_weight_at(&r->m->embed, ids[t], i);
        for (int j = 1; j < hc; j++) memcpy(Xs + (t * hc + j) * d, row, sizeof(real) * (size_t)d);
    }
}

/* hc_attn_pre (ffn = 0) / hc_ffn_pre (ffn = 1). */
static int st_hc_pre(X(dsv4q_runstate) *r, int li, int ffn, const real *Xs, long s, real *y, real *post, real *comb)
{
    const dsv4q_layer_w *L = &r->m->layers[li];
    return OP(hc_pre, Xs, s, ffn ? &L->hc_ffn_fn : &L->hc_attn_fn, ffn ? &L->hc_ffn_scale : &L->hc_attn_scale,
              ffn ? &L->hc_ffn_base : &L->hc_attn_base, y, post, comb);
}

/* attn_norm (ffn = 0) / ffn_norm (ffn = 1); y may alias x. */
static int st_norm(X(dsv4q_runstate) *r, int li, int ffn, const real *x, long s, real *y)
{
    const dsv4q_layer_w *L = &r->m->layers[li];
    return OP(rmsnorm, x, s, r->m->cfg.dim, ffn ? &L->ffn_norm : &L->attn_norm, y);
}

/* hc_attn_post / hc_ffn_post; out must not alias X. */
static int st_hc_post(X(dsv4q_runstate) *r, const real *x, const real *Xs, const real *post, const real *comb,
                      long s, real *out)
{
    return OP(hc_post, x, Xs, post, comb, s, out);
}

/* moe: gate (hash routing by the token ids on hash layers) + experts. */
static int st_moe(X(dsv4q_runstate) *r, int li, const real *x, long s, const int32_t *ids, real *out)
{
    const int k = r->m->cfg.n_activated_experts;
    real *wts = NULL;
    int32_t *ix = NULL;
    int rc = -1;
    ALLOC(wts, s * k);
    ALLOC(ix, s * k);
    if (OP(moe, li, x, s, ids, wts, ix, out)) goto oom;
    tap(r, li, TAP(MOE_WEIGHTS), wts, s * k, s);
    tap_i32(r, li, TAP(MOE_IDX), ix, s * k, s);
    rc = 0;
oom:
    free(wts);
    free(ix);
    return rc;
}

/* One block: Xs [s, hc, d] in, out. The stages in table order (S2). */
static int block(X(dsv4q_runstate) *r, int li, real *Xs, long s, long p0, const int32_t *ids)
{
    const dsv4q_config *g = &r->m->cfg;
    const int hc = g->hc_mult;
    const long d = g->dim;
    real *y = NULL, *n = NULL, *post = NULL, *comb = NULL, *a = NULL, *X2 = NULL;
    int rc = -1;
    ALLOC(y, s * d);
    ALLOC(n, s * d);
    ALLOC(post, s * hc);
    ALLOC(comb, s * hc * hc);
    ALLOC(a, s * d);
    ALLOC(X2, s * hc * d);
    if (st_hc_pre(r, li, 0, Xs, s, y, post, comb)) goto oom;
    tap(r, li, TAP(HC_ATTN_PRE), y, s * d, s);
    REPORT(DSV4Q_STAGE_HC_ATTN_PRE, Xs, L3(y, post, comb));
    if (st_norm(r, li, 0, y, s, n)) goto oom;
    tap(r, li, TAP(ATTN_NORM), n, s * d, s);
    REPORT(DSV4Q_STAGE_ATTN_NORM, y, n);
    if (attention(r, li, n, s, p0, a)) goto oom;
    tap(r, li, TAP(ATTN), a, s * d, s);
    REPORT(DSV4Q_STAGE_ATTN, n, a);
    if (st_hc_post(r, a, Xs, post, comb, s, X2)) goto oom;
    tap(r, li, TAP(HC_ATTN_POST), X2, s * hc * d, s);
    REPORT(DSV4Q_STAGE_HC_ATTN_POST, L4(a, Xs, post, comb), X2);
    if (st_hc_pre(r, li, 1, X2, s, y, post, comb)) goto oom;
    tap(r, li, TAP(HC_FFN_PRE), y, s * d, s);
    REPORT(DSV4Q_STAGE_HC_FFN_PRE, X2, L3(y, post, comb));
    if (st_norm(r, li, 1, y, s, n)) goto oom;
    tap(r, li, TAP(FFN_NORM), n, s * d, s);
    REPORT(DSV4Q_STAGE_FFN_NORM, y, n);
    if (st_moe(r, li, n, s, ids, a)) goto oom;
    tap(r, li, TAP(MOE_OUT), a, s * d, s);
    REPORT(DSV4Q_STAGE_MOE, n, a);
    if (st_hc_post(r, a, X2, post, comb, s, Xs)) goto oom;
    tap(r, li, TAP(BLOCK_OUT), Xs, s * hc * d, s);
    REPORT(DSV4Q_STAGE_HC_FFN_POST, L4(a, X2, post, comb), Xs);
    rc = 0;
oom:
    free(y); free(n); free(post); free(comb); free(a); free(X2);
    return rc;
}

/* hc_head + final norm + head for the last row of Xs. */
static int head(X(dsv4q_runstate) *r, const real *Xlast, const dsv4q_weight *fn, const dsv4q_vec *scale,
                const dsv4q_vec *base, const dsv4q_vec *normw, real *logits)
{
    const dsv4q_config *g = &r->m->cfg;
    real *y = malloc(sizeof(real) * (size_t)g->dim);
    int rc = -1;
    if (!y) return -1;
    if (OP(hc_head, Xlast, fn, scale, base, y)) goto out;
    if (OP(rmsnorm, y, 1, g->dim, normw, y)) goto out;
    tap(r, -1, TAP(FINAL_NORM), y, g->dim, 1);
    rc = OP(linear, &r->m->head, y, 1, logits, -1);
    if (!rc) tap(r, -1, TAP(LOGITS), logits, g->vocab_size, 1);
out:
    free(y);
    return rc;
}

/* One call over blocks first_layer..: from the embedding (first_layer 0)
 * or from xs; xs (when not NULL) receives the last block's output. */
static int step(X(dsv4q_runstate) * r, const int32_t *ids, long s, real *xs, double *logits_out)
{
    const dsv4q_config *g = &r->m->cfg;
    const int hc = g->hc_mult;
    const long d = g->dim, p0 = r->pos;
    real *Xs = NULL, *logits = NULL;
    int rc = -1, li = -1;
    ALLOC(Xs, s * hc * d);
    ALLOC(logits, g->vocab_size);
    AT(-1, p0, s);
    if (r->first_layer == 0) {
        st_embed(r, ids, s, Xs);
        tap(r, -1, TAP(EMBED), Xs, s * hc * d, s);
        REPORT(DSV4Q_STAGE_EMBED, NULL, Xs);
    } else {
        memcpy(Xs, xs, sizeof(real) * (size_t)(s * hc * d));
    }
    const int nl = r->last_layer >= 0 && r->last_layer < g->n_layers ? r->last_layer + 1 : g->n_layers;
    for (li = r->first_layer; li < nl; li++) {
        AT(li, p0, s);
        if (block(r, li, Xs, s, p0, ids)) goto oom;
        if (r->tap) r->tap(r->tap_user, li, NULL, NULL, 0, 0);   /* progress */
    }
    li = -1;
    AT(-1, p0, s);
    if (nl < g->n_layers) {             /* stopped early: no head, no logits */
        for (long i = 0; i < g->vocab_size; i++) logits[i] = (real)NAN;
    } else if (head(r, Xs + (s - 1) * hc * d, &r->m->hc_head_fn, &r->m->hc_head_scale, &r->m->hc_head_base,
                    &r->m->norm, logits)) goto oom;
    if (nl == g->n_layers) REPORT(DSV4Q_STAGE_HEAD, Xs + (s - 1) * hc * d, logits);
    for (long i = 0; i < g->vocab_size; i++) logits_out[i] = (double)logits[i];
    if (xs) memcpy(xs, Xs, sizeof(real) * (size_t)(s * hc * d));
    free(r->lastX);
    r->lastX = Xs;
    r->lasts = s;
    Xs = NULL;
    r->pos += s;
    rc = 0;
oom:
    free(Xs); free(logits);
    return rc;
}

int X(dsv4q_run_step)(X(dsv4q_runstate) * r, const int32_t *ids, long s, double *logits_out)
{
    if (r->v41) return X(dsv4q_v41_step)(r, ids, s, logits_out);
    return step(r, ids, s, NULL, logits_out);
}

int X(dsv4q_run_step_xs)(X(dsv4q_runstate) * r, const int32_t *ids, long s, real *xs, double *logits_out)
{
    if (r->v41) return -1; /* set_layers refuses V4.1: its carried state is more than Xs */
    return step(r, ids, s, xs, logits_out);
}

long X(dsv4q_run_pos)(const X(dsv4q_runstate) *r) { return r->pos; }

const char *X(dsv4q_run_error)(const X(dsv4q_runstate) * r) { return r->err; }

/* The mtp stage, defined with dsv4q_run_mtp below. */
static int mtp(X(dsv4q_runstate) *r, const real *Xin, long s, long p0, const int32_t *ids, real *logits);

/* One stage on given inputs, for the replay of a capture (M3): the inputs
 * arrive as double and are converted to the working width (exact at f64),
 * the outputs go back as double. `attn` uses and advances the layer's
 * caches in r, so the caller feeds a layer's calls in order; the wrapper in
 * run.c checks that, and has validated the stage, layer, s, pos0 and ids.
 * A V4.1 model's stages (dsv4q_stage41) are oracle/model_v41.c's. */
int X(dsv4q_stage_exec)(X(dsv4q_runstate) *r, const dsv4q_stage_io *io)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(g->arch, io->stage);
    const long s = io->s, p0 = io->pos0;
    const int li = io->layer;
    real *in[DSV4Q_STAGE_MAX_T] = {0}, *out[DSV4Q_STAGE_MAX_T] = {0};
    int rc = -1;
    if (!si) return -1;
    for (int t = 0; t < si->nin; t++) {
        long n = (long)dsv4q_stage_numel(&si->in[t], g, s);
        ALLOC(in[t], n ? n : 1);
        for (long i = 0; i < n; i++) in[t][i] = (real)io->in[t][i];
    }
    for (int t = 0; t < si->nout; t++) {
        long n = (long)dsv4q_stage_numel(&si->out[t], g, s);
        ALLOC(out[t], n ? n : 1);
    }
    AT(si->per_layer ? li : -1, p0, s);   /* a provider names the place of its calls */
    if (r->v41) {
        rc = X(dsv4q_v41_stage)(r, io->stage, si->per_layer ? li : -1, in, out, s, p0, io->ids);
        goto done;
    }
    switch (io->stage) {
    case DSV4Q_STAGE_EMBED: st_embed(r, io->ids, s, out[0]); rc = 0; break;
    case DSV4Q_STAGE_HC_ATTN_PRE:
    case DSV4Q_STAGE_HC_FFN_PRE:
        rc = st_hc_pre(r, li, io->stage == DSV4Q_STAGE_HC_FFN_PRE, in[0], s, out[0], out[1], out[2]);
        break;
    case DSV4Q_STAGE_ATTN_NORM:
    case DSV4Q_STAGE_FFN_NORM:
        rc = st_norm(r, li, io->stage == DSV4Q_STAGE_FFN_NORM, in[0], s, out[0]);
        break;
    case DSV4Q_STAGE_ATTN: rc = attention(r, li, in[0], s, p0, out[0]); break;
    case DSV4Q_STAGE_HC_ATTN_POST:
    case DSV4Q_STAGE_HC_FFN_POST: rc = st_hc_post(r, in[0], in[1], in[2], in[3], s, out[0]); break;
    case DSV4Q_STAGE_MOE: rc = st_moe(r, li, in[0], s, io->ids, out[0]); break;
    case DSV4Q_STAGE_HEAD:
        rc = head(r, in[0], &r->m->hc_head_fn, &r->m->hc_head_scale, &r->m->hc_head_base, &r->m->norm, out[0]);
        break;
    case DSV4Q_STAGE_MTP: rc = g->n_mtp_layers < 1 ? -1 : mtp(r, in[0], s, p0, io->ids, out[0]); break;
    default: break;
    }
done:
    if (!rc)
        for (int t = 0; t < si->nout; t++) {
            long n = (long)dsv4q_stage_numel(&si->out[t], g, s);
            for (long i = 0; i < n; i++) io->out[t][i] = (double)out[t][i];
        }
oom:
    for (int t = 0; t < DSV4Q_STAGE_MAX_T; t++) {
        free(in[t]);
        free(out[t]);
    }
    return rc;
}

/*
 * The MTP block and its head (model.py MTPBlock.forward) on given hidden
 * streams Xin [s, hc, d] of the call at p0: e = enorm(embed(ids)), h =
 * hnorm(Xin) per hc copy, X' = e_proj e + h_proj h (broadcast over hc; the
 * sum stored at resid_bf16), one Block with the MTP layer's own caches,
 * then its own hc head + norm and the shared head; logits of the last row.
 * The inputs are the hidden streams of the main model's last call (the
 * reference does not fix which; we take those) and `ids` for the same
 * positions. The mtp stage: used by dsv4q_run_mtp and dsv4q_stage_exec.
 */
static int mtp(X(dsv4q_runstate) *r, const real *Xin, long s, long p0, const int32_t *ids, real *logits)
{
    const dsv4q_config *g = &r->m->cfg;
    const int li = g->n_layers, hc = g->hc_mult;
    const dsv4q_layer_w *L = &r->m->layers[li];
    const long d = g->dim;
    const uint64_t bs = r->bs;
    real *e = NULL, *pe = NULL, *h = NULL, *ph = NULL, *Xs = NULL;
    int rc = -1;
    ALLOC(e, s * d);
    ALLOC(pe, s * d);
    ALLOC(h, s * hc * d);
    ALLOC(ph, s * hc * d);
    ALLOC(Xs, s * hc * d);
    for (long t = 0; t < s; t++)
        for (long i = 0; i < d; i++) e[t * d + i] = (real)dsv4q_weight_at(&r->m->embed, ids[t], i);
    AT(li, p0, s);
    if (OP(rmsnorm, e, s, d, &L->enorm, e) || OP(rmsnorm, Xin, s * hc, d, &L->hnorm, h) ||
        OP(linear, &L->e_proj, e, s, pe, DSV4Q_B_LINEAR_BF16) ||
        OP(linear, &L->h_proj, h, s * hc, ph, DSV4Q_B_LINEAR_BF16)) goto oom;
    for (long t = 0; t < s; t++)
        for (int j = 0; j < hc; j++)
            for (long i = 0; i < d; i++)
                Xs[(t * hc + j) * d + i] = rb(bs, DSV4Q_B_RESID_BF16, pe[t * d + i] + ph[(t * hc + j) * d + i]);
    if (block(r, li, Xs, s, p0, ids)) goto oom;
    AT(-1, p0, s);
    if (head(r, Xs + (s - 1) * hc * d, &L->hc_head_fn, &L->hc_head_scale, &L->hc_head_base, &L->norm, logits))
        goto oom;
    rc = 0;
oom:
    free(e); free(pe); free(h); free(ph); free(Xs);
    return rc;
}

int X(dsv4q_run_mtp)(X(dsv4q_runstate) *r, const int32_t *ids, double *logits_out)
{
    const dsv4q_config *g = &r->m->cfg;
    if (g->n_mtp_layers < 1 || !r->lastX) return -1;
    if (r->last_layer >= 0 && r->last_layer < g->n_layers - 1) return -1;   /* lastX is not the last layer's */
    const long s = r->lasts, p0 = r->pos - s;
    const int li = -1;   /* a model-level stage (REPORT) */
    real *logits = NULL;
    int rc = -1;
    ALLOC(logits, g->vocab_size);
    if (mtp(r, r->lastX, s, p0, ids, logits)) goto oom;
    tap(r, -1, TAP(MTP_LOGITS), logits, g->vocab_size, 1);
    REPORT(DSV4Q_STAGE_MTP, r->lastX, logits);
    for (long i = 0; i < g->vocab_size; i++) logits_out[i] = (double)logits[i];
    rc = 0;
oom:
    free(logits);
    return rc;
}
