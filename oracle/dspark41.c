/*
 * dspark41.c - DeepSeek V4.1's DSpark draft stages at one width.
 *
 * Mirrors V4.1 model.py Transformer.forward_spec with DSparkBlock,
 * DSparkAttention, DSparkMarkovHead, DSparkConfidenceHead and
 * get_dspark_topk_idxs (Hugging Face deepseek-ai/DeepSeek-V4.1-Flash,
 * revision dba1be0a), and the main_hiddens of Transformer.forward: the
 * mean over the hc copies of the stream entering each
 * dspark_target_layer_ids layer (after its Engram), concatenated in layer
 * order. Driven like V4's MTP (oracle/model.c dsv4q_run_mtp): after a
 * main-model call, on the call's sampled token and main_hidden.
 *
 * Invariants:
 *  K1. A prefill call (the main call started at position 0, or a chunk of
 *      a declared prefill: every chunk seeds its positions, a chunk
 *      before the last at the next call when dsv4q_run_dspark did not run
 *      after it) only seeds
 *      each stage's window ring with main_kv = kv_norm(wkv(main_x)) (RoPE
 *      at the call's positions, FP8 per fp8_block over the whole vector),
 *      main_x = main_norm(main_proj(main_hidden)); the last `window` rows
 *      land at slot position % window. Nothing is drafted.
 *  K2. A decode call at position p (the main call's one token) writes its
 *      main_kv into slot p % window of every stage, then drafts a block of
 *      block_size tokens [sampled, noise, ..., noise] at positions
 *      p+1 .. p+block_size. Every block query attends to the ring slots
 *      0 .. min(window, p+1) - 1 and to all block_size block keys
 *      (columns window + j): no causal mask inside the block. The block's
 *      own keys never enter the ring.
 *  K3. Each stage is a window-only Block with lagged hyper-connections
 *      (the pre-mix the previous stage's FFN made; identity before stage
 *      0), its MoE with the stage's expert counts. The head collapses with
 *      the last pre-mix, normalises with the last stage's norm and projects
 *      with the main head; the Markov bias markov_head(markov_embed(id_i))
 *      is added to row i and id_{i+1} = argmax (temperature 0, first of
 *      equal maxima), sequentially; confidence_i = proj . [collapsed row
 *      i, markov_embed(id_i)] (the collapsed row before the norm).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/model_run.h"
#include "oracle/model_internal.h"

struct X(dsv4q_dspark) {
    int nt;                     /* target layers */
    int slot[DSV4Q_MAX_LAYERS]; /* layer -> its block in main_hidden (layer order), -1 */
    real *hidden;               /* [rows, nt * dim] main_hidden of the last main call */
    long rows, cap;             /* its rows (the call's s) and capacity */
    int got;                    /* target layers captured in that call */
    int seeded;                 /* that call's main_kv is in the stages' rings (K1) */
};

struct X(dsv4q_dspark) * X(dsv4q_dspark_new)(X(dsv4q_runstate) * r)
{
    const dsv4q_config *g = &r->m->cfg;
    struct X(dsv4q_dspark) *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    for (int li = 0; li < DSV4Q_MAX_LAYERS; li++) v->slot[li] = -1;
    for (int li = 0; li < g->n_layers; li++)
        for (int k = 0; k < g->n_dspark_target_layer_ids; k++)
            if (g->dspark_target_layer_ids[k] == li) v->slot[li] = v->nt++;
    return v;
}

void X(dsv4q_dspark_free)(struct X(dsv4q_dspark) * v)
{
    if (!v) return;
    free(v->hidden);
    free(v);
}

static int seed(X(dsv4q_runstate) * r, struct X(dsv4q_dspark) * v);

int X(dsv4q_dspark_begin)(X(dsv4q_runstate) * r, long s)
{
    struct X(dsv4q_dspark) *v = r->dspark;
    if (!v) return 0;
    /* a chunk before the last of a declared prefill that nobody ran DSpark
     * after (a caller that calls it once, after the whole prompt, as after
     * the one call): its positions seed the rings now (K1) */
    const int early_chunk = r->pos > 0 && r->pos < X(dsv4q_run_prompt)(r, r->pos, 0);
    if (early_chunk && v->rows > 0 && !v->seeded && v->got == v->nt && seed(r, v)) return -1;
    const long n = s * v->nt * r->m->cfg.dim;
    if (n > v->cap) {
        real *h = realloc(v->hidden, sizeof(real) * (size_t)n);
        if (!h) return -1;
        v->hidden = h;
        v->cap = n;
    }
    v->rows = s;
    v->got = 0;
    v->seeded = 0;
    return 0;
}

void X(dsv4q_dspark_capture)(X(dsv4q_runstate) * r, int li, const real *Xs, long s)
{
    struct X(dsv4q_dspark) *v = r->dspark;
    if (!v || li < 0 || li >= DSV4Q_MAX_LAYERS || v->slot[li] < 0 || s != v->rows) return;
    const int hc = r->m->cfg.hc_mult;
    const long d = r->m->cfg.dim, w = (long)v->nt * d;
    for (long t = 0; t < s; t++)
        for (long i = 0; i < d; i++) {
            real acc = 0;
            for (int j = 0; j < hc; j++) acc += Xs[(t * hc + j) * d + i];
            /* h.mean(dim=2): an FP32-accumulated mean stored back to the stream's BF16 */
            v->hidden[t * w + v->slot[li] * d + i] = rb(r->bs, DSV4Q_B_RESID_BF16, acc / (real)hc);
        }
    v->got++;
}

void X(dsv4q_dspark_cols)(int window, long p, int block, int32_t *cols)
{
    const long nw = p + 1 < window ? p + 1 : window;
    for (long j = 0; j < nw; j++) cols[j] = (int32_t)j;
    for (int j = 0; j < block; j++) cols[nw + j] = window + j;
}

int X(dsv4q_dspark_markov)(const dsv4q_weight *embed, const dsv4q_weight *head, const dsv4q_weight *proj,
                           const real *hidden, long dim, int block, int32_t first, real *logits, int32_t *ids,
                           real *conf)
{
    const long V = head->out, R = head->in;
    real *e = malloc(sizeof(real) * (size_t)(dim + R)), *bias = malloc(sizeof(real) * (size_t)V);
    int rc = -1;
    if (!e || !bias) goto out;
    ids[0] = first;
    for (int i = 0; i < block; i++) {
        real *row = logits + (long)i * V;
        for (long k = 0; k < dim; k++) e[k] = hidden[(long)i * dim + k];
        for (long k = 0; k < R; k++) e[dim + k] = (real)dsv4q_weight_at(embed, ids[i], k);
        for (long o = 0; o < V; o++) {
            real acc = 0;
            for (long k = 0; k < R; k++) acc += (real)dsv4q_weight_at(head, o, k) * e[dim + k];
            bias[o] = acc;
        }
        long best = 0;
        for (long o = 0; o < V; o++) {
            row[o] += bias[o];
            if (row[o] > row[best]) best = o;
        }
        ids[i + 1] = (int32_t)best;
        real c = 0;
        for (long k = 0; k < dim + R; k++) c += (real)dsv4q_weight_at(proj, 0, k) * e[k];
        conf[i] = c;
    }
    rc = 0;
out:
    free(e);
    free(bias);
    return rc;
}

/* main_kv of stage layer li from main_x [s, d] at positions p0..: into kv [s, D]. */
static int main_kv(X(dsv4q_runstate) * r, const dsv4q_layer_w *W, const real *mx, long s, long p0, real *kv)
{
    const dsv4q_config *g = &r->m->cfg;
    const int D = g->head_dim, rd = g->rope_head_dim;
    if (OP(linear, &W->wkv, mx, s, kv, DSV4Q_B_LINEAR_BF16) || OP(rmsnorm, kv, s, D, &W->kv_norm, kv) ||
        OP(rope, kv, s, D, D - rd, p0, 1, 0, 0))
        return -1;
    if (((r->bs >> DSV4Q_B_KV_FP8) & 1u) && OP(act_quant, kv, s, D, D, g->fp8_block)) return -1;
    return 0;
}

/* K1 / K2: every stage's ring gets the last main call's main_kv, from
 * main_x = main_norm(main_proj(main_hidden)) (forward_embed). 0, or -1. */
static int seed(X(dsv4q_runstate) * r, struct X(dsv4q_dspark) * v)
{
    const dsv4q_config *g = &r->m->cfg;
    const long s = v->rows, p0 = r->pos - s, d = g->dim;
    const int D = g->head_dim, win = g->window_size, nl = g->n_layers;
    const dsv4q_layer_w *S0 = &r->m->layers[nl];
    real *mx = NULL, *kv = NULL;
    int rc = -1;
    ALLOC(mx, s * d);
    ALLOC(kv, s * D);
    if (OP(linear, &S0->main_proj, v->hidden, s, mx, DSV4Q_B_LINEAR_BF16) || OP(rmsnorm, mx, s, d, &S0->main_norm, mx))
        goto oom;
    for (int j = 0; j < g->n_mtp_layers; j++) {
        const int li = nl + j;
        AT(li, p0, s);
        if (main_kv(r, &r->m->layers[li], mx, s, p0, kv)) goto oom;
        for (long i = (s > win ? s - win : 0); i < s; i++)
            memcpy(r->ls[li].ring + ((p0 + i) % win) * D, kv + i * D, sizeof(real) * (size_t)D);
    }
    v->seeded = 1;
    rc = 0;
oom:
    free(mx);
    free(kv);
    return rc;
}

/* DSparkAttention.forward of a decode call: x [B, d] the normed block at
 * positions p+1.., mkv [D] this call's main_kv (already in the ring). */
static int dspark_attn(X(dsv4q_runstate) * r, int li, const real *x, int B, long p, real *out)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *W = &r->m->layers[li];
    const int H = g->n_heads, D = g->head_dim, rd = g->rope_head_dim, win = g->window_size;
    real *qr = NULL, *q = NULL, *keys = NULL, *o = NULL;
    int32_t *idx = NULL;
    int rc = -1;
    const long nw = p + 1 < win ? p + 1 : win, ncols = nw + B;
    ALLOC(qr, B * g->q_lora_rank);
    ALLOC(q, B * H * D);
    ALLOC(keys, (win + B) * D);
    ALLOC(o, B * H * D);
    ALLOC(idx, B * ncols);
    if (OP(linear, &W->wq_a, x, B, qr, DSV4Q_B_LINEAR_BF16) || OP(rmsnorm, qr, B, g->q_lora_rank, &W->q_norm, qr) ||
        OP(linear, &W->wq_b, qr, B, q, DSV4Q_B_LINEAR_BF16) || OP(rope, q, B * H, D, D - rd, p + 1, H, 0, 0))
        goto oom;
    memcpy(keys, r->ls[li].ring, sizeof(real) * (size_t)(win * D));
    if (main_kv(r, W, x, B, p + 1, keys + win * D)) goto oom; /* the block's own keys (not kept) */
    for (int i = 0; i < B; i++) X(dsv4q_dspark_cols)(win, p, B, idx + i * ncols);
    if (OP(sparse_attn, q, B, H, D, keys, win + B, idx, ncols, &W->attn_sink, 1.0 / sqrt((double)D), o)) goto oom;
    if (OP(rope, o, B * H, D, D - rd, p + 1, H, 0, 1)) goto oom;
    rc = X(dsv4q_run_out_proj)(r, W, o, B, out);
oom:
    free(qr);
    free(q);
    free(keys);
    free(o);
    free(idx);
    return rc;
}

/* DSparkBlock.forward of a decode call (Block.forward with DSparkAttention). */
static int dspark_block(X(dsv4q_runstate) * r, int li, real *Xs, real *premix, int B, long p, const int32_t *ids)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *W = &r->m->layers[li];
    const int hc = g->hc_mult, k = W->n_activated;
    const long d = g->dim, s = B;
    real *y = NULL, *n = NULL, *apre = NULL, *post = NULL, *comb = NULL, *a = NULL, *X2 = NULL, *wts = NULL;
    int32_t *ix = NULL;
    int rc = -1;
    ALLOC(y, s * d);
    ALLOC(n, s * d);
    ALLOC(apre, s * hc);
    ALLOC(post, s * hc);
    ALLOC(comb, s * hc * hc);
    ALLOC(a, s * d);
    ALLOC(X2, s * hc * d);
    ALLOC(wts, s * k);
    ALLOC(ix, s * k);
    if (OP(hc_pre41, Xs, premix, s, &W->hc_attn_fn, &W->hc_attn_scale, &W->hc_attn_base, y, apre, post, comb) ||
        OP(rmsnorm, y, s, d, &W->attn_norm, n) || dspark_attn(r, li, n, B, p, a) ||
        OP(hc_post, a, Xs, post, comb, s, X2))
        goto oom;
    if (OP(hc_pre41, X2, apre, s, &W->hc_ffn_fn, &W->hc_ffn_scale, &W->hc_ffn_base, y, premix, post, comb) ||
        OP(rmsnorm, y, s, d, &W->ffn_norm, n) || OP(moe, li, n, s, ids, wts, ix, a) ||
        OP(hc_post, a, X2, post, comb, s, Xs))
        goto oom;
    tap(r, li, TAP(BLOCK_OUT), Xs, s * hc * d, s);
    rc = 0;
oom:
    free(y);
    free(n);
    free(apre);
    free(post);
    free(comb);
    free(a);
    free(X2);
    free(wts);
    free(ix);
    return rc;
}

int X(dsv4q_run_dspark)(X(dsv4q_runstate) * r, int32_t tok, double *logits_out, int32_t *ids_out, double *conf_out)
{
    const dsv4q_config *g = &r->m->cfg;
    struct X(dsv4q_dspark) *v = r->dspark;
    if (!v || g->n_mtp_layers < 1 || v->got != v->nt || v->rows < 1) return -1;
    if (tok < 0 || tok >= g->vocab_size) return -1;
    const long s = v->rows, p0 = r->pos - s, d = g->dim, V = g->vocab_size;
    const int hc = g->hc_mult, B = g->dspark_block_size;
    const int nl = g->n_layers, ns = g->n_mtp_layers;
    const dsv4q_layer_w *SL = &r->m->layers[nl + ns - 1];
    real *Xs = NULL, *premix = NULL, *y = NULL, *n = NULL, *logits = NULL, *conf = NULL;
    int32_t *ids = NULL;
    int rc = -1;
    if (!v->seeded && seed(r, v)) goto oom;
    if (p0 < X(dsv4q_run_prompt)(r, p0, s)) { /* the prefill, or a chunk of it: seeded only */
        rc = 1;
        goto oom;
    }
    if (s != 1) goto oom; /* decode calls are one token (M1) */
    const long p = p0;
    ALLOC(Xs, B * hc * d);
    ALLOC(premix, B * hc);
    ALLOC(y, B * d);
    ALLOC(n, B * d);
    ALLOC(logits, B * V);
    ALLOC(conf, B);
    ALLOC(ids, B + 1);
    ids[0] = tok;
    for (int t = 0; t < B; t++) { /* [sampled, noise...] embedded, copied to the hc streams; identity pre-mix */
        const int32_t id = t == 0 ? tok : g->dspark_noise_token_id;
        for (long i = 0; i < d; i++) Xs[t * hc * d + i] = (real)dsv4q_weight_at(&r->m->embed, id, i);
        for (int j = 1; j < hc; j++) memcpy(Xs + (t * hc + j) * d, Xs + t * hc * d, sizeof(real) * (size_t)d);
        for (int j = 0; j < hc; j++) premix[t * hc + j] = j == 0 ? RC(1) : RC(0);
        ids[t + 1] = id; /* the block's ids for the MoE (no hash routing in V4.1) */
    }
    for (int j = 0; j < ns; j++) {
        AT(nl + j, p + 1, B);
        if (dspark_block(r, nl + j, Xs, premix, B, p, ids + 1)) goto oom;
    }
    AT(-1, p + 1, B);
    /* forward_head */
    if (OP(hc_collapse, Xs, premix, B, y) || OP(rmsnorm, y, B, d, &SL->norm, n) ||
        OP(linear, &r->m->head, n, B, logits, -1))
        goto oom;
    if (X(dsv4q_dspark_markov)(&SL->markov_embed, &SL->markov_head, &SL->conf_proj, y, d, B, tok, logits, ids, conf))
        goto oom;
    tap(r, -1, TAP(DSPARK_LOGITS), logits, B * V, B);
    tap_i32(r, -1, TAP(DSPARK_IDS), ids, B + 1, 1);
    tap(r, -1, TAP(DSPARK_CONFIDENCE), conf, B, B);
    for (long i = 0; i < B * V; i++) logits_out[i] = (double)logits[i];
    for (int i = 0; i <= B; i++) ids_out[i] = ids[i];
    for (int i = 0; i < B; i++) conf_out[i] = (double)conf[i];
    rc = 0;
oom:
    free(Xs);
    free(premix);
    free(y);
    free(n);
    free(logits);
    free(conf);
    free(ids);
    return rc;
}
