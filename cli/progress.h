/*
 * progress.h - how far a long whole-model run is, and when it will end:
 * the work of each forward call from the config (a cost model, not a
 * measurement), the share of it done layer by layer, and the time left
 * extrapolated from the time taken so far. Used by the progress lines of
 * sensitivity, run and margins (cli/taps.c, cli/cmd_margins.c). A dsv4q
 * estimate: no reference function.
 */
#ifndef DSV4Q_CLI_PROGRESS_H
#define DSV4Q_CLI_PROGRESS_H

#include <stddef.h>

struct dsv4q_config;

/* Multiply-adds of layer li (of the config's n_layers blocks) in one
 * forward call of `s` tokens at positions p0..p0+s-1 (s >= 1, p0 >= 0):
 * per token the attention linears (wq_a, wq_b, wkv, wo_a, wo_b), the
 * active experts (n_activated + n_shared, three dim x moe_inter_dim
 * matrices each), the compressor of a ratio > 0 layer, and the attention
 * over its keys (window + compressed rows, or index_topk of them when the
 * layer is indexed; H x D per key for the scores and as many for the
 * values), plus the indexer's scores against every compressed row of a
 * ratio-4 (V4) or index-source (V4.1) layer (Hi x Di per row). Positions
 * enter at the call's middle row, p0 + (s - 1) / 2, where the per-row key
 * count is linear in the position (exact then, else close). The norms
 * and hyper-connections are left out (a few percent of a block). Units:
 * multiply-adds; 0 for a bad argument. */
double dsv4q_layer_work(const struct dsv4q_config *g, int li, long p0, long s);
/* The head of a call (its last row): vocab x dim. */
double dsv4q_head_work(const struct dsv4q_config *g);
/* A whole call: every layer plus the head. */
double dsv4q_call_work(const struct dsv4q_config *g, long p0, long s);
/* A run: a prompt of `prompt` tokens fed in calls of `chunk` (< 1: one
 * call), then `decode` one-token steps, each call over its first
 * `nlayers` layers (< 1: all; a run stopped early, margins) plus the head
 * when `head`. */
double dsv4q_plan_work(const struct dsv4q_config *g, long prompt, long chunk, long decode, int nlayers, int head);

/* A run's progress: the planned work (dsv4q_plan_work, counted once per
 * width for a run at both), the work done, and the current call. Times
 * are seconds on the monotonic clock (dsv4q_now). */
typedef struct dsv4q_eta {
    double t0;                    /* when the run started */
    double total;                 /* planned work */
    double done;                  /* work of the finished layers of every call */
    const struct dsv4q_config *g; /* the cost model's config */
    long p0, s;                   /* the current call */
    int nlayers, head;            /* layers per call; 1: the head ends each call */
    double weight;                /* the current call's work counts this much (1; a run at both widths
                                     sets DSV4Q_ETA_F32 for its f32 calls) */
} dsv4q_eta;

/* The time of an f32 call relative to the same f64 call, for a run at both
 * widths (sensitivity): 0.53 measured on flash-slice (300 tokens: 26 s vs
 * 49 s), 0.7 on tiny (4000 tokens: 14 s vs 20 s). */
#define DSV4Q_ETA_F32 0.6

/* Seconds on the monotonic clock (CLOCK_MONOTONIC). */
double dsv4q_now(void);
/* Start at `now` with `total` work over calls of `nlayers` layers (and the
 * head when `head`). */
void dsv4q_eta_start(dsv4q_eta *e, const struct dsv4q_config *g, double total, int nlayers, int head, double now);
/* A call of s tokens at p0 begins; each dsv4q_eta_layer(li) then adds that
 * layer's work (and the head's after the last layer), times e->weight. */
void dsv4q_eta_call(dsv4q_eta *e, long p0, long s);
void dsv4q_eta_layer(dsv4q_eta *e, int li);
/* Seconds left: elapsed x (total - done) / done, the rate so far held for
 * the rest; -1 when nothing is done yet or the plan is empty, 0 at or past
 * the end. Pure (no clock). */
double dsv4q_eta_left(double done, double total, double elapsed);
/* "37%, 2 min 05 s left" at `now` into buf (always NUL-terminated);
 * "0%" with no time before the first layer ends. Times of an hour or more
 * as "1 h 07 min". */
void dsv4q_eta_format(const dsv4q_eta *e, double now, char *buf, size_t len);

#endif
