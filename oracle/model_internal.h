/*
 * model_internal.h - what the two forward passes of one width share: the
 * run instance (struct dsv4q_runstate_f32/_f64), the per-layer V4 cache
 * state, and the macros the passes are written in (V, OP, AT, TAP, ALLOC)
 * with the tap helpers. Included by oracle/model.c (the run instance, the
 * V4 pass) and oracle/model_v41.c (the V4.1 pass) only, both compiled once
 * per width; nothing outside oracle/ sees these types (model_run.h keeps
 * the instance opaque).
 */
#ifndef DSV4Q_MODEL_INTERNAL_H
#define DSV4Q_MODEL_INTERNAL_H

#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/model_run.h"

/* V, OP and AT (and L2/L3/L4, REPORT's tensor lists) are one or two
 * letters on purpose: they sit inside nearly every line of the pass, where
 * a longer name would bury the arguments that differ. Each is documented
 * where it is defined. */

/* V(vec): a checkpoint vector (dsv4q_vec: norm weights, sinks, scales,
 * biases) at the working width; the loader keeps both copies. */
#if DSV4Q_WIDTH == 32
#define V(v) ((const real *)(v).f)
#else
#define V(v) ((const real *)(v).d)
#endif

typedef struct lstate {
    real *ring;  /* [window, D] */
    real *crows; /* [cap, D] compressed attention rows */
    real *irows; /* [cap, Di] indexer key rows */
    long ncrows, nirows;
    X(dsv4q_cmp_state) cst, ist;
    X(dsv4q_cmp) cmp, icmp;
} lstate;

/* The V4.1 pass's own state (oracle/model_v41.c), NULL for a V4 model. */
struct X(dsv4q_v41);
/* The DSpark stages' state (oracle/dspark41.c), NULL without stages. */
struct X(dsv4q_dspark);

struct X(dsv4q_runstate) {
    const dsv4q_model *m;
    uint64_t bs;
    int ue8m0;
    long max_pos, pos;
    long prompt;                      /* the declared prompt length (dsv4q_run_set_prompt), 0 */
    X(dsv4q_rope_table) rope0, ropec; /* ratio-0 layers / compressed layers */
    lstate *ls;
    dsv4q_tap_fn tap;
    void *tap_user;
    real *lastX; /* hidden streams of the last call */
    long lasts;
    dsv4q_pick_fn pick; /* optional override of indexer picks */
    void *pick_user;
    dsv4q_stage_fn stage_fn; /* optional stage hook (capture) */
    void *stage_user;
    int last_layer;              /* stop after this block (-1: run all + head) */
    int first_layer;             /* start at this block on given hidden streams (0: embed; set_layers) */
    const X(dsv4q_provider) * P; /* the operators (default: the oracle's, model.c) */
    void *pctx;
    struct X(dsv4q_v41) * v41; /* V4.1 checkpoints: that pass's caches */
    struct X(dsv4q_dspark) * dspark; /* V4.1 with DSpark stages loaded: main_hidden */
    char err[256];             /* why a step failed other than by allocation, or "" */
};

/* OP(name, args...): one operator call through the run's provider (the
 * run in scope is `r`); every operator the pass runs is an OP(...).
 * AT(layer, p0, s): tell the provider where the pass is (for its messages;
 * a provider without `at` is fine). */
#define OP(name, ...) r->P->name(r->pctx, __VA_ARGS__)
#define AT(layer, p0, s)                                                                                               \
    do {                                                                                                               \
        if (r->P->at) r->P->at(r->pctx, layer, p0, s);                                                                 \
    } while (0)

/* Taps go by id (DSV4Q_TAP_LIST, oracle/stages.h), never by a bare string. */
#define TAP(E) dsv4q_tap_name(DSV4Q_TAP_##E)

static inline void tap(X(dsv4q_runstate) * r, int layer, const char *stage, const real *x, long n, long rows)
{
    if (!r->tap) return;
#if DSV4Q_WIDTH == 32
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!d) return;
    for (long i = 0; i < n; i++) d[i] = x[i];
    r->tap(r->tap_user, layer, stage, d, n, rows);
    free(d);
#else
    r->tap(r->tap_user, layer, stage, x, n, rows);
#endif
}

static inline void tap_i32(X(dsv4q_runstate) * r, int layer, const char *stage, const int32_t *x, long n, long rows)
{
    if (!r->tap) return;
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!d) return;
    for (long i = 0; i < n; i++) d[i] = x[i];
    r->tap(r->tap_user, layer, stage, d, n, rows);
    free(d);
}

#define ALLOC(p, n)                                                                                                    \
    do {                                                                                                               \
        (p) = malloc(sizeof(*(p)) * (size_t)(n));                                                                      \
        if (!(p)) goto oom;                                                                                            \
    } while (0)

/* The V4.1 pass (oracle/model_v41.c) as model.c calls it: its state for
 * run r (after r's common fields and RoPE tables are set; NULL on
 * allocation failure), one call of it, and its release. */
struct X(dsv4q_v41) * X(dsv4q_v41_new)(X(dsv4q_runstate) * r);
int X(dsv4q_v41_step)(X(dsv4q_runstate) * r, const int32_t *ids, long s, double *logits);
/* One V4.1 stage (dsv4q_stage41 st, layer li or -1) of the call (s, p0,
 * ids) on in / out at the working width (oracle/model_v41.c J4). 0, -1. */
int X(dsv4q_v41_stage)(X(dsv4q_runstate) * r, int st, int li, real *const *in, real *const *out, long s, long p0,
                       const int32_t *ids);
void X(dsv4q_v41_free)(struct X(dsv4q_v41) * v);
/* The DSpark state for run r (a V4.1 model with n_mtp_layers > 0 stages;
 * its rings are r->ls[n_layers + j]), NULL on allocation failure; its
 * release. */
struct X(dsv4q_dspark) * X(dsv4q_dspark_new)(X(dsv4q_runstate) * r);
void X(dsv4q_dspark_free)(struct X(dsv4q_dspark) * v);
/* Called by the V4.1 pass: at the start of a call of s tokens (0, or -1 on
 * allocation), and with the stream Xs [s, hc, dim] entering layer li
 * (after its Engram), kept as main_hidden when li is a target layer
 * (model.py Transformer.forward's main_hiddens: h.mean over the hc
 * copies). No-ops when r has no DSpark state. */
int X(dsv4q_dspark_begin)(X(dsv4q_runstate) * r, long s);
void X(dsv4q_dspark_capture)(X(dsv4q_runstate) * r, int li, const real *Xs, long s);
/* 1 if provider p has every entry the V4.1 pass calls. */
int X(dsv4q_v41_provider_ok)(const X(dsv4q_provider) * p);
/* The oracle's V4.1 provider entries (model_v41.c), for model.c's table. */
int X(dsv4q_o41_hc_pre41)(void *c, const real *Xs, const real *pre_in, long s, const dsv4q_weight *fn,
                          const dsv4q_vec *scale, const dsv4q_vec *base, real *y, real *pre, real *post, real *comb);
int X(dsv4q_o41_hc_collapse)(void *c, const real *Xs, const real *pre, long s, real *y);
int X(dsv4q_o41_engram_hash)(void *c, const int32_t *ids, long s, long p0, int64_t *hash);
int X(dsv4q_o41_index41_score)(void *c, int li, int owner, real *q, const real *w, long s, const real *latent, long T,
                               long p0, int ratio, real *score);
int X(dsv4q_o41_engram)(void *c, int li, const int64_t *ids, real *h, long s);
long X(dsv4q_o41_compress)(void *c, int li, const real *x, long s, long p0, real *out);
int X(dsv4q_o41_kv41_quant)(void *c, real *x, long rows, long n);
int X(dsv4q_o41_candidates)(void *c, const real *score, long rows, long T, const long *clen, int topb, int B,
                            int32_t *blocks, uint8_t *mask);
int X(dsv4q_o41_topk)(void *c, const real *score, long rows, long T, int k, const long *clen, int32_t *out);
/* Report a stage to the stage hook (main-model layers and model-level
 * stages only; MTP layers are not in the stage table): st is an id of the
 * model's table (oracle/stages.h; dsv4q_stage41 for V4.1), in / out its
 * tensors in table order; the hook may rewrite the outputs, which then
 * flow on (at f32 rounded back to float). 0, or -1 on allocation. */
int X(dsv4q_run_report)(X(dsv4q_runstate) * r, int st, int li, long s, long p0, const int32_t *ids,
                        const real *const *in, real *const *out);

/* REPORT(stage, ins, outs): report a stage of the call in scope (r, li, s,
 * p0, ids) to the stage hook. ins / outs are one macro argument each, so a
 * list of three or four tensors is written L3(a, b, c) / L4(a, b, c, d). */
#define REPORT(st, ins, outs)                                                                                          \
    do {                                                                                                               \
        const real *in_[] = {ins};                                                                                     \
        real *out_[] = {outs};                                                                                         \
        if (X(dsv4q_run_report)(r, st, li, s, p0, ids, in_, out_)) goto oom;                                           \
    } while (0)
#define L2(a, b) a, b
#define L3(a, b, c) a, b, c
#define L4(a, b, c, d) a, b, c, d

/* The attention's grouped low-rank output (model.py Attention.forward's
 * wo_a einsum, then wo_b), shared by both passes: o [s, H, D] -> out
 * [s, dim]. 0 or -1. */
int X(dsv4q_run_out_proj)(X(dsv4q_runstate) * r, const dsv4q_layer_w *L, const real *o, long s, real *out);

#endif
