/*
 * model_v41.c - the whole DeepSeek V4.1 forward pass at one width.
 *
 * Mirrors V4.1 model.py Transformer.forward / Block.forward /
 * Attention.forward / Indexer.forward and engram.py NgramHashState (Hugging
 * Face deepseek-ai/DeepSeek-V4.1-Flash, revision dba1be0a): prefill of s
 * tokens at position 0, then one-token decode steps. The run instance, the
 * operator provider and the taps are model.c's (oracle/model_internal.h);
 * this file owns what V4.1 changed (docs/v41.md has the list):
 *  - Engram before the listed blocks, from one n-gram hash per call;
 *  - lagged hyper-connections: the attention collapses with the pre-mix the
 *    previous block's FFN computed ([1, 0, ..] before layer 0), the FFN with
 *    this block's attention pre-mix, the final collapse with the last one;
 *    no hc_head;
 *  - attention without a q head norm, window KV FP8 over the whole
 *    post-RoPE vector in blocks of fp8_block (32);
 *  - compressors of ratio 1 / 2 on kv-source layers only; the other layers
 *    read the compressed-KV cache of the nearest source and the top-k the
 *    last index source published (SharedAttentionRuntime's slots);
 *  - indexer keys k_norm(wk(latent)) from the PRE-RoPE latent, FP4 q and
 *    keys without Hadamard, picks ascending with -1 last, the two-level
 *    top-k (candidate blocks of the candidate source, masked picks after);
 *  - the compressed KV as E2M1 with E4M3 scales per 16 (ckv_fp4).
 *
 * Invariants:
 *  J1. Calls are a prefill at position 0 and one-token decodes (M1 of
 *      model.c), or chunks of a declared prefill (J5); the caches are per
 *      layer except the shared slots below.
 *  J2. The shared slots behave as the reference's: compress_kv is the
 *      cache of the last kv source that ran in this call (the nearest at or
 *      before the reader); topk is what the last index source published in
 *      this call; index_k is the key cache published LAST, in any call,
 *      and an owner publishes it only when it produced a latent (the
 *      reference's single slot: on a call that leaves a ratio-2 group
 *      incomplete, the ratio-2 indexers read the keys of whichever owner
 *      published last). The switch idxk_per_source (oracle/boundary.h B4)
 *      makes every owner publish on every call.
 *  J4. One stage at a time (dsv4q_v41_stage, a capture's replay): a call
 *      is known by its position (J1), so the first attn stage at a new
 *      position starts a new call; the caller (oracle/run.c
 *      dsv4q_run_stage) has checked that every source layer before the
 *      reader ran this call, so the slots hold what the whole call would.
 *  J3. The config's roles were validated at load (io/config.c): every
 *      ratio > 0 layer has a kv source and an index source at or before it
 *      with its ratio, and a candidate consumer has the candidate source's
 *      ratio. The pass still checks what it reads and fails (-1) rather
 *      than read a wrong-shaped cache.
 *  J5. A prefill in chunks (dsv4q_run_set_prompt, M4 of model.c) is ONE
 *      logical call for J2's slots, so that it equals the one-call prefill
 *      bit for bit. The reference has no chunks; were each chunk a call,
 *      its single index_k slot would differ from the one call's: a chunk
 *      that leaves a ratio-2 group incomplete (its compressor yields no
 *      latent) would hand its ratio-2 indexers the keys of whichever owner
 *      published last (a later ratio-1 owner, in the previous chunk),
 *      which the one call never does. So within the declared prompt S:
 *      - an owner publishes index_k on every chunk when the one call's
 *        compressor yields latents (S / ratio > 0), whether or not this
 *        chunk completed a group, and a chunk starts with index_k unset,
 *        as the one call does (the prefill is the run's first call);
 *      - the per-call slots (compress_kv, topk, the candidate mask) hold
 *        this chunk's rows of what the one call's would hold: the same
 *        layers publish them, the top-k is [rows, min(S / ratio, k)] (the
 *        one call's width, picks past this chunk's keys -1), the scores
 *        [rows, end / ratio] with the one call's causal mask;
 *      - the window columns are sized for S, the keys are [the window
 *        context before the chunk (from the ring) | the chunk's kv | the
 *        compressed rows so far], and the compressor carries its partial
 *        group (oracle/compressor41.c K1); the n-gram hash reads the
 *        previous chunks' tokens from its position cache (engram_hash.h
 *        E6); the lagged pre-mix is per row.
 *      After the prompt, decode steps follow J2 as after the one call
 *      (the last publisher is the one call's). tests/test_chunked.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/ops41.h"
#include "oracle/engram_hash.h"
#include "oracle/model_run.h"
#include "oracle/model_internal.h"

/* FAIL(fmt, ...): say why in r->err (model_run.inc dsv4q_run_error), then
 * leave through the function's cleanup. */
#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        snprintf(r->err, sizeof r->err, __VA_ARGS__);                                                                  \
        goto oom;                                                                                                      \
    } while (0)

typedef struct l41 {
    int ratio, is_kv, is_idx, owns_k, is_cand, uses_cand;
    int engram;         /* index in engram_layer_ids (its hash columns), -1 */
    X(dsv4q_cmp41) cmp; /* kv sources */
    real *ccache;       /* kv sources: [cap, D] compressed KV (post-RoPE, ckv_fp4) */
    real *lcache;       /* key owners: [cap, D] the compressor latent (before RoPE), the keys' source */
    real *kcache;       /* key owners: [cap, Di] index keys (post-RoPE, idx_k_fp4): the oracle's
                           index41_score entry makes rows nk.. from lcache when first scored */
    long nk;            /* key owners: kcache rows made */
    long cap;           /* rows of the caches: max_pos / ratio + 1 */
} l41;

struct X(dsv4q_v41) {
    int nl; /* n_layers */
    l41 *L; /* [n_layers] */
    dsv4q_engram_cache ecache;
    int index_k;   /* the layer whose key cache was published last (J2), -1 */
    int ckv;       /* the kv source that ran last in this call, -1 */
    int32_t *topk; /* the top-k published last in this call [rows, k], offsets applied */
    long topk_rows, topk_k, topk_cap;
    uint8_t *cand; /* the candidate mask of this call [rows, T] */
    long cand_rows, cand_T, cand_cap;
    real *score; /* an indexer's scores [rows, T], the largest array of a call: kept for the next
                    layer and prefill chunk, not made per layer (its holes raised the peak 20-25%,
                    docs/v41.md); a decode step lets it go */
    long score_cap;
    long call_p0; /* the call the per-call slots above belong to (J4), -1 */
};

void X(dsv4q_v41_free)(struct X(dsv4q_v41) * v)
{
    if (!v) return;
    for (int li = 0; v->L && li < v->nl; li++) {
        X(dsv4q_cmp41_free)(&v->L[li].cmp);
        free(v->L[li].ccache);
        free(v->L[li].kcache);
        free(v->L[li].lcache);
    }
    free(v->L);
    dsv4q_engram_cache_free(&v->ecache);
    free(v->topk);
    free(v->cand);
    free(v->score);
    free(v);
}

static int in_list(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x) return 1;
    return 0;
}

struct X(dsv4q_v41) * X(dsv4q_v41_new)(X(dsv4q_runstate) * r)
{
    const dsv4q_config *g = &r->m->cfg;
    struct X(dsv4q_v41) *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->index_k = v->ckv = -1;
    v->call_p0 = -1;
    v->L = calloc((size_t)g->n_layers, sizeof *v->L);
    if (!v->L) goto fail;
    v->nl = g->n_layers;
    for (int li = 0; li < g->n_layers; li++) {
        const dsv4q_layer_w *W = &r->m->layers[li];
        l41 *l = &v->L[li];
        l->ratio = g->compress_ratios[li];
        l->engram = -1;
        for (int e = 0; e < g->n_engram_layers; e++)
            if (g->engram_layer_ids[e] == li) l->engram = e;
        if (!l->ratio) continue;
        l->is_kv = in_list(g->kv_source_layers, g->n_kv_source_layers, li);
        l->is_idx = in_list(g->index_source_layers, g->n_index_source_layers, li);
        l->owns_k = l->is_kv && l->is_idx;
        l->is_cand = li == g->candidate_source_layer;
        l->uses_cand = l->is_idx && g->candidate_source_layer >= 0 && g->candidate_source_layer < li;
        l->cap = r->max_pos / l->ratio + 1;
        if (l->is_kv) {
            l->cmp = (X(dsv4q_cmp41)){
                .ratio = l->ratio, .Dc = g->head_dim, .wkv = W->cmp.wkv, .wgate = W->cmp.wgate, .norm = V(W->cmp.norm)};
            l->ccache = calloc((size_t)(l->cap * g->head_dim), sizeof(real));
            if (!l->ccache || X(dsv4q_cmp41_init)(&l->cmp)) goto fail;
        }
        if (l->owns_k) {
            l->kcache = calloc((size_t)(l->cap * g->index_head_dim), sizeof(real));
            l->lcache = calloc((size_t)(l->cap * g->head_dim), sizeof(real));
            if (!l->kcache || !l->lcache) goto fail;
        }
    }
    if (g->n_engram_layers > 0 && (!r->m->engram_hash || dsv4q_engram_cache_init(&v->ecache, r->max_pos))) goto fail;
    return v;
fail:
    X(dsv4q_v41_free)(v);
    return NULL;
}

/* A new call at p0: the per-call shared slots start empty (J2, J4); a
 * chunk of the declared prefill starts as the one call does (J5). */
static void new_call(struct X(dsv4q_v41) * v, long p0, long prompt)
{
    if (p0 > 0 && p0 < prompt) v->index_k = -1;
    v->ckv = -1;
    v->topk_rows = -1;
    v->cand_rows = -1;
    v->call_p0 = p0;
}

/* Publish this call's top-k [rows, k] (J2). */
static int publish_topk(struct X(dsv4q_v41) * v, const int32_t *idx, long rows, long k)
{
    if (rows * k > v->topk_cap) {
        int32_t *p = realloc(v->topk, sizeof(int32_t) * (size_t)(rows * k));
        if (!p) return -1;
        v->topk = p;
        v->topk_cap = rows * k;
    }
    if (rows * k > 0) memcpy(v->topk, idx, sizeof(int32_t) * (size_t)(rows * k));
    v->topk_rows = rows;
    v->topk_k = k;
    return 0;
}

/* RoPE on the tails of latent-like rows x [n, dim] of a call at p0: row j
 * is group p0 / ratio + j ("a latent stands for the first token of its
 * group"): j * ratio in a prefill, p0 + 1 - ratio in a decode that
 * completes a group, any chunk alike (J5). */
static int rope_groups(X(dsv4q_runstate) * r, real *x, long n, long dim, long p0, int ratio)
{
    const int rd = r->m->cfg.rope_head_dim;
    for (long j = 0; j < n; j++) {
        const long pos = (p0 / ratio + j) * ratio;
        if (OP(rope, x + j * dim, 1, dim, dim - rd, pos, 1, 1, 0)) return -1;
    }
    return 0;
}

/*
 * The indexer of index-source layer li (Indexer.forward): the key owner's
 * keys from this call's latent [nl, D] (nl 0: none), this layer's queries
 * from qr, the scores against the published keys, the candidate blocks
 * (source) or mask (consumer), then the picks per row into cols [s, nsel]
 * with the key-layout offset added (-1 kept). S: the prefill the call
 * belongs to (X(dsv4q_run_prompt)); nsel: the layout's picks per row (a
 * chunk of a prefill has the one call's, J5). Returns nsel, or -1.
 */
static long indexer41(X(dsv4q_runstate) * r, int li, const real *x, const real *qr, const real *latent, long nl, long s,
                      long p0, long S, long nsel, long offset, int32_t **cols_out)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *W = &r->m->layers[li];
    struct X(dsv4q_v41) *v = r->v41;
    l41 *l = &v->L[li];
    const uint64_t bs = r->bs;
    const int Hi = g->index_n_heads, Di = g->index_head_dim, rd = g->rope_head_dim, ratio = l->ratio, D = g->head_dim;
    const long end = p0 + s, T = end / ratio;
    real *q = NULL, *w = NULL, *score = NULL;
    int32_t *pick = NULL, *blocks = NULL;
    long *clen = NULL, k = -1;
    if (s * T + 1 > v->score_cap) {
        free(v->score);
        v->score_cap = 0;
        if (!(v->score = malloc(sizeof(real) * (size_t)(s * T + 1)))) goto oom;
        v->score_cap = s * T + 1;
    }
    score = v->score;
    /* J2, and J5: in a prefill chunk the owner publishes when the one call's compressor yields latents */
    const int publish = nl > 0 || (p0 < S && S / ratio > 0) || ((bs >> DSV4Q_B_IDXK_PER_SOURCE) & 1u);
    if (l->owns_k && publish) {
        if (nl > 0) { /* the keys' source rows; the keys themselves are index41_score's */
            if (p0 / ratio + nl > l->cap) FAIL("layer %d: index-key cache full", li);
            memcpy(l->lcache + (p0 / ratio) * D, latent, sizeof(real) * (size_t)(nl * D));
            if (l->nk > p0 / ratio) l->nk = p0 / ratio; /* rows rewritten: their keys are made again */
        }
        v->index_k = li; /* J2: published */
    }
    ALLOC(q, s * Hi * Di);
    ALLOC(w, s * Hi);
    if (OP(linear, &W->idx_wq_b, qr, s, q, DSV4Q_B_LINEAR_BF16)) goto oom;
    if (OP(rope, q, s * Hi, Di, Di - rd, p0, Hi, 1, 0)) goto oom;
    const int src = v->index_k;
    if (src < 0) FAIL("layer %d: no index keys published before this indexer (index sources need a kv source)", li);
    if (T > v->L[src].cap)
        FAIL("layer %d: reads %ld index keys of layer %d, which holds %ld", li, T, src, v->L[src].cap);
    if (OP(linear, &W->idx_weights_proj, x, s, w, DSV4Q_B_IDX_PARTIAL_BF16)) goto oom;
    const real wscale = RC(1.0 / sqrt((double)Di) * (1.0 / sqrt((double)Hi)));
    for (long i = 0; i < s * Hi; i++) w[i] = rb(bs, DSV4Q_B_IDX_PARTIAL_BF16, w[i] * wscale);
    if (OP(index41_score, li, src, q, w, s, v->L[src].lcache, T, p0, ratio, score)) goto oom;
    ALLOC(clen, s);
    for (long i = 0; i < s; i++) clen[i] = (p0 + i + 1) / ratio; /* T in a decode step */
    if (p0 > 0 && s > 1) /* a prefill chunk: the causal mask the score op applies at position 0 (J5) */
        for (long i = 0; i < s; i++)
            for (long t = clen[i]; t < T; t++) score[i * T + t] = -INFINITY;
    if (l->is_cand) {
        const int tb = g->candidate_topk_blocks;
        if (s * T + 1 > v->cand_cap) { /* + 1: a mask of no keys is still an array */
            uint8_t *p = realloc(v->cand, (size_t)(s * T + 1));
            if (!p) goto oom;
            v->cand = p;
            v->cand_cap = s * T + 1;
        }
        ALLOC(blocks, s * (tb ? tb : 1));
        if (OP(candidates, score, s, T, clen, tb, g->candidate_block_size, blocks, v->cand)) goto oom;
        v->cand_rows = s;
        v->cand_T = T;
        tap_i32(r, li, TAP(CAND_BLOCKS), blocks, s * tb, s);
    } else if (l->uses_cand) {
        if (v->cand_rows != s || v->cand_T != T) /* J3 */
            FAIL("layer %d: the candidate mask of layer %d is [%ld, %ld], the scores [%ld, %ld] (ratios differ?)", li,
                 g->candidate_source_layer, v->cand_rows, v->cand_T, s, T);
        for (long i = 0; i < s * T; i++)
            if (!v->cand[i]) score[i] = -INFINITY;
    }
    tap(r, li, TAP(IDX_SCORE), score, s * T, s);
    /* kk picks from this call's T keys, widened with -1 to the layout's
     * nsel (J5: a chunk has fewer keys than the whole prompt; every pick
     * past them is -1 in the one call too, as topk41 puts -1s last) */
    const long kk = T < g->index_topk ? T : g->index_topk;
    if (kk > nsel) FAIL("layer %d: %ld picks for a layout of %ld", li, kk, nsel);
    ALLOC(pick, s * (nsel ? nsel : 1));
    if (OP(topk41, score, s, T, (int)kk, clen, pick)) goto oom;
    for (long i = s - 1; kk < nsel && i >= 0; i--) /* widen [s, kk] to [s, nsel] in place, last row first */
        for (long j = nsel - 1; j >= 0; j--) pick[i * nsel + j] = j < kk ? pick[i * kk + j] : -1;
    k = nsel; /* k stays -1 on every failure above */
    if (r->pick) r->pick(r->pick_user, li, p0, s, k, pick);
    tap_i32(r, li, TAP(IDX_TOPK), pick, s * k, s);
    for (long i = 0; i < s * k; i++) pick[i] = pick[i] < 0 ? -1 : (int32_t)(pick[i] + offset);
    *cols_out = pick;
    pick = NULL;
oom:
    free(q);
    free(w);
    free(pick);
    free(blocks);
    free(clen);
    return k;
}

/* Attention of layer li on the attention-normed x [s, dim] -> out [s, dim]. */
static int attention41(X(dsv4q_runstate) * r, int li, const real *x, long s, long p0, real *out)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *W = &r->m->layers[li];
    struct X(dsv4q_v41) *v = r->v41;
    l41 *l = &v->L[li];
    lstate *ring = &r->ls[li];
    const uint64_t bs = r->bs;
    const int H = g->n_heads, D = g->head_dim, rd = g->rope_head_dim, win = g->window_size, ratio = l->ratio;
    const int cmp = ratio != 0;
    const long S = X(dsv4q_run_prompt)(r, p0, s);
    const int prefill = p0 < S;                       /* the prefill, or one chunk of it (J5) */
    const long end = p0 + s, lay = prefill ? S : end; /* the positions the layout is sized for */
    /* a chunk's window context: positions cs..p0-1, from the ring (none in one call) */
    const long cs = prefill && p0 - win + 1 > 0 ? p0 - win + 1 : 0, nctx = prefill ? p0 - cs : 0;
    real *qr = NULL, *q = NULL, *kv = NULL, *latent = NULL, *keys = NULL, *o = NULL;
    int32_t *idx = NULL, *cidx = NULL;
    int rc = -1;

    ALLOC(qr, s * g->q_lora_rank);
    ALLOC(q, s * H * D);
    ALLOC(kv, s * D);
    if (OP(linear, &W->wq_a, x, s, qr, DSV4Q_B_LINEAR_BF16) || OP(rmsnorm, qr, s, g->q_lora_rank, &W->q_norm, qr) ||
        OP(linear, &W->wq_b, qr, s, q, DSV4Q_B_LINEAR_BF16) || OP(rope, q, s * H, D, D - rd, p0, H, cmp, 0))
        goto oom;
    tap(r, li, TAP(Q), q, s * H * D, s);
    /* window KV (_window_kv): FP8 over the whole post-RoPE vector */
    if (OP(linear, &W->wkv, x, s, kv, DSV4Q_B_LINEAR_BF16) || OP(rmsnorm, kv, s, D, &W->kv_norm, kv) ||
        OP(rope, kv, s, D, D - rd, p0, 1, cmp, 0))
        goto oom;
    if (((bs >> DSV4Q_B_KV_FP8) & 1u) && OP(act_quant, kv, s, D, D, g->fp8_block)) goto oom;
    tap(r, li, TAP(KV), kv, s * D, s);
    /* keys [window rows | compressed rows]: a prefill's window rows are
     * [its context | its kv] (the context leaves the ring before this call
     * overwrites it), a decode's the ring */
    const long nwin = prefill ? nctx + s : win;
    const long clen = ratio ? end / ratio : 0;
    ALLOC(keys, (nwin + clen) * D);
    for (long j = 0; j < nctx; j++) memcpy(keys + j * D, ring->ring + ((cs + j) % win) * D, sizeof(real) * (size_t)D);
    if (prefill) memcpy(keys + nctx * D, kv, sizeof(real) * (size_t)(s * D));
    for (long i = (s > win ? s - win : 0); i < s; i++)
        memcpy(ring->ring + ((p0 + i) % win) * D, kv + i * D, sizeof(real) * (size_t)D);
    if (!prefill) memcpy(keys, ring->ring, sizeof(real) * (size_t)(win * D));

    /* compressed part (_compress_kv, _compress_topk_idxs); the picks per
     * row are sized for the layout's positions (J5) */
    const long offset = nwin;
    long nc = 0, nl = 0;
    if (ratio) {
        if (l->is_kv) {
            ALLOC(latent, (ratio == 1 ? s : s / ratio + 1) * D);
            nl = OP(compress41, li, x, s, p0, latent);
            if (nl < 0) goto oom;
            v->ckv = li; /* published (J2) */
        }
        if (l->is_idx) {
            const long nsel = lay / ratio < g->index_topk ? lay / ratio : g->index_topk;
            if (lay / ratio > 0) {
                nc = indexer41(r, li, x, qr, latent, nl, s, p0, S, nsel, offset, &cidx);
                if (nc < 0) goto oom;
            }
            if (publish_topk(v, cidx, s, nc)) goto oom;
        } else {
            if (v->topk_rows != s) FAIL("layer %d: no index source before it published a top-k", li); /* J3 */
            nc = v->topk_k;
            ALLOC(cidx, s * (nc ? nc : 1));
            if (s * nc > 0) memcpy(cidx, v->topk, sizeof(int32_t) * (size_t)(s * nc));
        }
        if (nl > 0) { /* the latent becomes this source's cache rows */
            if (rope_groups(r, latent, nl, D, p0, ratio)) goto oom;
            if (((bs >> DSV4Q_B_CKV_FP4) & 1u) && OP(kv41_quant, latent, nl, D)) goto oom;
            tap(r, li, TAP(CKV), latent, nl * D, nl);
            if (p0 / ratio + nl > l->cap) FAIL("layer %d: compressed-KV cache full", li);
            memcpy(l->ccache + (p0 / ratio) * D, latent, sizeof(real) * (size_t)(nl * D));
        }
        if (v->ckv < 0) FAIL("layer %d: no kv source before it compressed its KV", li); /* J3 */
        if (clen > v->L[v->ckv].cap)
            FAIL("layer %d: reads %ld compressed rows of layer %d, which holds %ld", li, clen, v->ckv,
                 v->L[v->ckv].cap);
        if (clen) memcpy(keys + nwin * D, v->L[v->ckv].ccache, sizeof(real) * (size_t)(clen * D));
    }

    /* columns [window | compressed]: a prefill's window columns are sized
     * for the whole prompt (every chunk alike, J5), a decode's the ring */
    const long nw = prefill ? (S < win ? S : win) : win, ncols = nw + nc;
    ALLOC(idx, s * (ncols ? ncols : 1));
    for (long i = 0; i < s; i++) {
        int32_t *c = idx + i * ncols;
        if (prefill) {
            const long t = p0 + i, base = t - win + 1 < 0 ? 0 : t - win + 1;
            for (long j = 0; j < nw; j++) c[j] = base + j > t ? -1 : (int32_t)(base + j - cs);
        } else { /* the ring oldest first; slots not yet written -1 */
            const long oldest = p0 % win + 1;
            for (long j = 0; j < win; j++) {
                const long slot = (oldest + j) % win;
                c[j] = slot > p0 ? -1 : (int32_t)slot;
            }
        }
        for (long j = 0; j < nc; j++) c[nw + j] = cidx[i * nc + j];
    }
    ALLOC(o, s * H * D);
    if (OP(sparse_attn, q, s, H, D, keys, nwin + clen, idx, ncols, &W->attn_sink, 1.0 / sqrt((double)D), o)) goto oom;
    if (OP(rope, o, s * H, D, D - rd, p0, H, cmp, 1)) goto oom;
    tap(r, li, TAP(ATTN_OUT), o, s * H * D, s);
    rc = X(dsv4q_run_out_proj)(r, W, o, s, out);
oom:
    free(qr);
    free(q);
    free(kv);
    free(latent);
    free(keys);
    free(o);
    free(idx);
    free(cidx);
    return rc;
}

/* One block (Block.forward): Xs [s, hc, d] in and out, premix [s, hc] the
 * incoming pre-mix in and this block's FFN pre-mix out. */
static int block41(X(dsv4q_runstate) * r, int li, real *Xs, real *premix, long s, long p0, const int32_t *ids)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *W = &r->m->layers[li];
    const int hc = g->hc_mult;
    const long d = g->dim;
    real *y = NULL, *n = NULL, *apre = NULL, *post = NULL, *comb = NULL, *a = NULL, *X2 = NULL, *wts = NULL;
    int32_t *ix = NULL;
    const int k = g->n_activated_experts;
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
    /* attention half: this block's mixes from its input, the collapse with the incoming pre-mix */
    if (OP(hc_pre41, Xs, premix, s, &W->hc_attn_fn, &W->hc_attn_scale, &W->hc_attn_base, y, apre, post, comb)) goto oom;
    tap(r, li, TAP(HC_ATTN_PRE), y, s * d, s);
    REPORT(DSV4Q_S41_HC_ATTN_PRE, L2(Xs, premix), L4(y, apre, post, comb));
    if (OP(rmsnorm, y, s, d, &W->attn_norm, n)) goto oom;
    tap(r, li, TAP(ATTN_NORM), n, s * d, s);
    REPORT(DSV4Q_S41_ATTN_NORM, y, n);
    if (attention41(r, li, n, s, p0, a)) goto oom;
    tap(r, li, TAP(ATTN), a, s * d, s);
    REPORT(DSV4Q_S41_ATTN, n, a);
    if (OP(hc_post, a, Xs, post, comb, s, X2)) goto oom;
    tap(r, li, TAP(HC_ATTN_POST), X2, s * hc * d, s);
    REPORT(DSV4Q_S41_HC_ATTN_POST, L4(a, Xs, post, comb), X2);
    /* FFN half: its mixes from X2 (premix becomes the FFN pre-mix), the collapse with the attention pre-mix */
    if (OP(hc_pre41, X2, apre, s, &W->hc_ffn_fn, &W->hc_ffn_scale, &W->hc_ffn_base, y, premix, post, comb)) goto oom;
    tap(r, li, TAP(HC_FFN_PRE), y, s * d, s);
    REPORT(DSV4Q_S41_HC_FFN_PRE, L2(X2, apre), L4(y, premix, post, comb));
    if (OP(rmsnorm, y, s, d, &W->ffn_norm, n)) goto oom;
    tap(r, li, TAP(FFN_NORM), n, s * d, s);
    REPORT(DSV4Q_S41_FFN_NORM, y, n);
    if (OP(moe, li, n, s, ids, wts, ix, a)) goto oom;
    tap(r, li, TAP(MOE_WEIGHTS), wts, s * k, s);
    tap_i32(r, li, TAP(MOE_IDX), ix, s * k, s);
    tap(r, li, TAP(MOE_OUT), a, s * d, s);
    REPORT(DSV4Q_S41_MOE, n, a);
    if (OP(hc_post, a, X2, post, comb, s, Xs)) goto oom;
    tap(r, li, TAP(BLOCK_OUT), Xs, s * hc * d, s);
    REPORT(DSV4Q_S41_HC_FFN_POST, L4(a, X2, post, comb), Xs);
    tap(r, li, TAP(BLOCK_PREMIX), premix, s * hc, s);
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

int X(dsv4q_v41_step)(X(dsv4q_runstate) * r, const int32_t *ids, long s, double *logits_out)
{
    const dsv4q_config *g = &r->m->cfg;
    struct X(dsv4q_v41) *v = r->v41;
    const int hc = g->hc_mult, ne = g->n_engram_layers;
    const long d = g->dim, p0 = r->pos;
    real *Xs = NULL, *premix = NULL, *y = NULL, *logits = NULL;
    int64_t *hash = NULL;
    int rc = -1, li = -1;
    r->err[0] = 0;
    ALLOC(Xs, s * hc * d);
    ALLOC(premix, s * hc);
    ALLOC(y, s * d);
    ALLOC(logits, g->vocab_size);
    if (X(dsv4q_dspark_begin)(r, s)) goto oom;
    if (ne > 0) { /* one n-gram hash per call, every Engram layer at once */
        ALLOC(hash, s * ne * r->m->engram_hash->ncols);
        if (OP(engram_hash, ids, s, p0, hash)) goto oom; /* the entry says why (r->err for the oracle's) */
    }
    const long S = X(dsv4q_run_prompt)(r, p0, s);
    new_call(v, p0, S);
    if (p0 >= S && v->score_cap > s * (p0 + s) + 1) { /* a decode step: the prefill's scores go */
        free(v->score);
        v->score = NULL;
        v->score_cap = 0;
    }
    AT(-1, p0, s);
    for (long t = 0; t < s; t++) { /* embed, copied to the hc streams; the identity pre-mix */
        for (long i = 0; i < d; i++) Xs[t * hc * d + i] = (real)dsv4q_weight_at(&r->m->embed, ids[t], i);
        for (int j = 1; j < hc; j++) memcpy(Xs + (t * hc + j) * d, Xs + t * hc * d, sizeof(real) * (size_t)d);
        for (int j = 0; j < hc; j++) premix[t * hc + j] = j == 0 ? RC(1) : RC(0);
    }
    tap(r, -1, TAP(EMBED), Xs, s * hc * d, s);
    REPORT(DSV4Q_S41_EMBED, NULL, Xs);
    const int nl = r->last_layer >= 0 && r->last_layer < g->n_layers ? r->last_layer + 1 : g->n_layers;
    for (li = 0; li < nl; li++) {
        const int e = v->L[li].engram;
        AT(li, p0, s);
        if (e >= 0) {
            const int C = r->m->engram_hash->ncols;
            int64_t *ids_l = NULL;
            real *Xin = NULL; /* the stage's input, kept only for the stage hook (in place below) */
            ALLOC(ids_l, s * C);
            for (long t = 0; t < s; t++) memcpy(ids_l + t * C, hash + (t * ne + e) * C, sizeof(int64_t) * (size_t)C);
            if (r->stage_fn && !(Xin = malloc(sizeof(real) * (size_t)(s * hc * d)))) {
                free(ids_l);
                goto oom;
            }
            if (Xin) memcpy(Xin, Xs, sizeof(real) * (size_t)(s * hc * d));
            const int erc = OP(engram, li, ids_l, Xs, s);
            free(ids_l);
            const int rrc = erc || !Xin ? 0
                                        : X(dsv4q_run_report)(r, DSV4Q_S41_ENGRAM, li, s, p0, ids,
                                                              (const real *const[]){Xin}, (real *const[]){Xs});
            free(Xin);
            if (erc || rrc) goto oom;
            tap(r, li, TAP(ENGRAM_OUT), Xs, s * hc * d, s);
        }
        X(dsv4q_dspark_capture)(r, li, Xs, s); /* main_hidden: the input of a target layer, after its Engram */
        if (block41(r, li, Xs, premix, s, p0, ids)) goto oom;
        if (r->tap) r->tap(r->tap_user, li, NULL, NULL, 0, 0); /* progress */
    }
    li = -1;
    AT(-1, p0, s);
    if (nl < g->n_layers) { /* stopped early: no head, no logits */
        for (long i = 0; i < g->vocab_size; i++) logits[i] = (real)NAN;
    } else { /* the final collapse with the last pre-mix, the norm, the head of the last row */
        if (OP(hc_collapse, Xs, premix, s, y)) goto oom;
        tap(r, -1, TAP(FINAL_COLLAPSE), y, s * d, s);
        if (OP(rmsnorm, y, s, d, &r->m->norm, y)) goto oom;
        tap(r, -1, TAP(FINAL_NORM), y, s * d, s);
        if (OP(linear, &r->m->head, y + (s - 1) * d, 1, logits, -1)) goto oom;
        tap(r, -1, TAP(LOGITS), logits, g->vocab_size, 1);
        REPORT(DSV4Q_S41_HEAD, L2(Xs + (s - 1) * hc * d, premix + (s - 1) * hc), logits);
    }
    for (long i = 0; i < g->vocab_size; i++) logits_out[i] = (double)logits[i];
    free(r->lastX);
    r->lastX = Xs;
    r->lasts = s;
    Xs = NULL;
    r->pos += s;
    rc = 0;
oom:
    free(Xs);
    free(premix);
    free(y);
    free(logits);
    free(hash);
    return rc;
}

/* The call's n-gram hash ids of Engram layer li [s, ncols] (hashing every
 * Engram layer, as the step does, and keeping li's columns). */
static int64_t *hash_layer(X(dsv4q_runstate) * r, int li, const int32_t *ids, long s, long p0)
{
    const dsv4q_engram_hash *eh = r->m->engram_hash;
    const int ne = r->m->cfg.n_engram_layers, e = r->v41->L[li].engram, C = eh ? eh->ncols : 0;
    int64_t *all = NULL, *one = NULL;
    if (e < 0 || !eh) {
        snprintf(r->err, sizeof r->err, "layer %d has no Engram", li);
        return NULL;
    }
    all = malloc(sizeof(int64_t) * (size_t)(s * ne * C));
    one = malloc(sizeof(int64_t) * (size_t)(s * C));
    if (!all || !one || OP(engram_hash, ids, s, p0, all)) {
        free(one);
        one = NULL;
    } else {
        for (long t = 0; t < s; t++) memcpy(one + t * C, all + (t * ne + e) * C, sizeof(int64_t) * (size_t)C);
    }
    free(all);
    return one;
}

/* One V4.1 stage (dsv4q_stage41) on given inputs at the working width, for
 * dsv4q_stage_exec (model.c converts and checks): the same operator calls
 * as the step makes for it, in the same order (J4 for attn). 0, or -1. */
int X(dsv4q_v41_stage)(X(dsv4q_runstate) * r, int st, int li, real *const *in, real *const *out, long s, long p0,
                       const int32_t *ids)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_layer_w *W = li >= 0 ? &r->m->layers[li] : NULL;
    const int hc = g->hc_mult, ffn = st == DSV4Q_S41_HC_FFN_PRE || st == DSV4Q_S41_FFN_NORM;
    const long d = g->dim;
    real *y = NULL;
    int rc = -1;
    switch (st) {
    case DSV4Q_S41_EMBED:
        for (long t = 0; t < s; t++)
            for (int j = 0; j < hc; j++)
                for (long i = 0; i < d; i++)
                    out[0][(t * hc + j) * d + i] = (real)dsv4q_weight_at(&r->m->embed, ids[t], i);
        return 0;
    case DSV4Q_S41_ENGRAM: {
        int64_t *h = hash_layer(r, li, ids, s, p0);
        if (!h) return -1;
        memcpy(out[0], in[0], sizeof(real) * (size_t)(s * hc * d));
        rc = OP(engram, li, h, out[0], s);
        free(h);
        return rc ? -1 : 0;
    }
    case DSV4Q_S41_HC_ATTN_PRE:
    case DSV4Q_S41_HC_FFN_PRE:
        /* mixes from X, the collapse with the incoming pre-mix in[1] */
        return OP(hc_pre41, in[0], in[1], s, ffn ? &W->hc_ffn_fn : &W->hc_attn_fn,
                  ffn ? &W->hc_ffn_scale : &W->hc_attn_scale, ffn ? &W->hc_ffn_base : &W->hc_attn_base, out[0], out[1],
                  out[2], out[3])
                   ? -1
                   : 0;
    case DSV4Q_S41_ATTN_NORM:
    case DSV4Q_S41_FFN_NORM: return OP(rmsnorm, in[0], s, d, ffn ? &W->ffn_norm : &W->attn_norm, out[0]) ? -1 : 0;
    case DSV4Q_S41_ATTN:
        if (p0 != r->v41->call_p0) new_call(r->v41, p0, X(dsv4q_run_prompt)(r, p0, s));
        return attention41(r, li, in[0], s, p0, out[0]) ? -1 : 0;
    case DSV4Q_S41_HC_ATTN_POST:
    case DSV4Q_S41_HC_FFN_POST: return OP(hc_post, in[0], in[1], in[2], in[3], s, out[0]) ? -1 : 0;
    case DSV4Q_S41_MOE: {
        const int k = g->n_activated_experts;
        real *wts = malloc(sizeof(real) * (size_t)(s * k));
        int32_t *ix = malloc(sizeof(int32_t) * (size_t)(s * k));
        rc = !wts || !ix || OP(moe, li, in[0], s, ids, wts, ix, out[0]) ? -1 : 0;
        free(wts);
        free(ix);
        return rc;
    }
    case DSV4Q_S41_HEAD: /* the last token's final collapse, norm and logits */
        ALLOC(y, d);
        if (OP(hc_collapse, in[0], in[1], 1, y) || OP(rmsnorm, y, 1, d, &r->m->norm, y) ||
            OP(linear, &r->m->head, y, 1, out[0], -1))
            goto oom;
        rc = 0;
        break;
    default: snprintf(r->err, sizeof r->err, "unknown V4.1 stage %d", st);
    }
oom:
    free(y);
    return rc;
}

/* ---- the oracle's V4.1 provider entries (model.c's table) ------------- */

int X(dsv4q_o41_hc_pre41)(void *c, const real *Xs, const real *pre_in, long s, const dsv4q_weight *fn,
                          const dsv4q_vec *scale, const dsv4q_vec *base, real *y, real *pre, real *post, real *comb)
{
    const X(dsv4q_runstate) *r = c;
    const dsv4q_config *g = &r->m->cfg;
    if (X(dsv4q_hc_mixes)(r->bs, Xs, s, g->hc_mult, g->dim, fn, V(*scale), V(*base), g->norm_eps, g->hc_eps,
                          g->hc_sinkhorn_iters, pre, post, comb))
        return -1;
    X(dsv4q_hc_collapse)(r->bs, Xs, pre_in, s, g->hc_mult, g->dim, y);
    return 0;
}

int X(dsv4q_o41_hc_collapse)(void *c, const real *Xs, const real *pre, long s, real *y)
{
    const X(dsv4q_runstate) *r = c;
    X(dsv4q_hc_collapse)(r->bs, Xs, pre, s, r->m->cfg.hc_mult, r->m->cfg.dim, y);
    return 0;
}

int X(dsv4q_o41_engram_hash)(void *c, const int32_t *ids, long s, long p0, int64_t *hash)
{
    X(dsv4q_runstate) *r = c;
    if (!r->v41 || !r->m->engram_hash) {
        snprintf(r->err, sizeof r->err, "engram hash: the model has no Engram layers");
        return -1;
    }
    char err[200];
    if (dsv4q_engram_hash_ids(r->m->engram_hash, &r->v41->ecache, p0, ids, NULL, s, hash, err, sizeof err)) {
        snprintf(r->err, sizeof r->err, "%s", err); /* the hash names itself */
        return -1;
    }
    return 0;
}

/* The keys are made once per latent row (kcache rows nk..T-1), with the
 * calls the step made for them before index41_score was an entry (linear,
 * rmsnorm, RoPE at row * the owner's ratio, idx_k_fp4), so the oracle's
 * pass is unchanged bit for bit. ratio is the reader's (the prefill mask):
 * J2's single slot can hand a ratio-2 reader a ratio-1 owner's keys. */
int X(dsv4q_o41_index41_score)(void *c, int li, int owner, real *q, const real *w, long s, const real *latent, long T,
                               long p0, int ratio, real *score)
{
    X(dsv4q_runstate) *r = c;
    const dsv4q_config *g = &r->m->cfg;
    const uint64_t bs = r->bs;
    const int Hi = g->index_n_heads, Di = g->index_head_dim, rd = g->rope_head_dim;
    l41 *l = r->v41 && owner >= 0 && owner < r->v41->nl ? &r->v41->L[owner] : NULL;
    if (!l || !l->kcache || T > l->cap) {
        snprintf(r->err, sizeof r->err, "layer %d: index keys of layer %d: not a key owner with %ld rows", li, owner,
                 T);
        return -1;
    }
    const dsv4q_layer_w *W = &r->m->layers[owner];
    if (l->nk < T) {
        const long n = T - l->nk;
        real *kn = l->kcache + l->nk * Di;
        if (X(dsv4q_linear)(bs, r->ue8m0, &W->idx_wk, latent + l->nk * g->head_dim, n, kn, DSV4Q_B_LINEAR_BF16))
            return -1;
        X(dsv4q_rmsnorm)(bs, kn, n, Di, V(W->idx_k_norm), g->norm_eps, kn);
        for (long j = 0; j < n; j++) /* a latent row stands for the first token of its group (the owner's ratio) */
            X(dsv4q_rope_apply)(bs, &r->ropec, kn + j * Di, 1, Di, Di - rd, (l->nk + j) * l->ratio, 1, 0);
        if ((bs >> DSV4Q_B_IDX_K_FP4) & 1u) X(dsv4q_fp4_act_quant)(kn, n, Di);
        l->nk = T;
    }
    if ((bs >> DSV4Q_B_IDX_Q_FP4) & 1u) X(dsv4q_fp4_act_quant)(q, s * Hi, Di);
    X(dsv4q_indexer_scores)(bs, q, w, s, Hi, Di, l->kcache, T, p0, ratio, score);
    return 0;
}

int X(dsv4q_o41_engram)(void *c, int li, const int64_t *ids, real *h, long s)
{
    const X(dsv4q_runstate) *r = c;
    return X(dsv4q_engram41)(r->bs, r->ue8m0, &r->m->layers[li].engram, ids, NULL, h, s, r->m->cfg.norm_eps);
}

long X(dsv4q_o41_compress)(void *c, int li, const real *x, long s, long p0, real *out)
{
    X(dsv4q_runstate) *r = c;
    if (!r->v41 || !r->v41->L[li].is_kv) return -1;
    return X(dsv4q_compressor41)(r->bs, r->ue8m0, &r->v41->L[li].cmp, x, s, p0, r->m->cfg.norm_eps, out);
}

int X(dsv4q_o41_kv41_quant)(void *c, real *x, long rows, long n)
{
    (void)c;
    X(dsv4q_kv41_quant)(x, rows, n);
    return 0;
}

int X(dsv4q_o41_candidates)(void *c, const real *score, long rows, long T, const long *clen, int topb, int B,
                            int32_t *blocks, uint8_t *mask)
{
    (void)c;
    return X(dsv4q_candidate_blocks)(score, rows, T, clen, topb, B, blocks, mask);
}

int X(dsv4q_o41_topk)(void *c, const real *score, long rows, long T, int k, const long *clen, int32_t *out)
{
    (void)c;
    return X(dsv4q_topk41)(score, rows, T, k, clen, out);
}

int X(dsv4q_v41_provider_ok)(const X(dsv4q_provider) * p)
{
    return p->linear && p->rmsnorm && p->rope && p->act_quant && p->sparse_attn && p->hc_post && p->moe &&
           p->hc_pre41 && p->hc_collapse && p->engram_hash && p->index41_score && p->engram && p->compress41 &&
           p->kv41_quant && p->candidates && p->topk41;
}
