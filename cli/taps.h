/*
 * taps.h - recording stage taps of a whole-model run and comparing a
 * second run against them, stage by stage (used by sensitivity, run).
 */
#ifndef DSV4Q_CLI_TAPS_H
#define DSV4Q_CLI_TAPS_H

#include "cli/progress.h"
#include "harness/measure/metrics.h"

typedef struct dsv4q_tap_entry {
    int layer;
    char stage[32];
    double *data;     /* recorded values (reference run), all calls appended */
    long n, cap;
    long cursor;      /* compare position (candidate run) */
    dsv4q_acc acc;    /* candidate vs reference */
    long rows;        /* rows recorded */
    long sel_rows, sel_diff;   /* selection stages: rows whose pick set differs */
} dsv4q_tap_entry;

typedef struct dsv4q_tapset {
    dsv4q_tap_entry *e;
    long n, cap;
    int compare;      /* 0: record, 1: compare against recorded */
    const char *label;
    int nlayers;
    long calls;       /* progress: calls finished */
    long total_calls; /* progress: calls planned (prefill + decode steps) */
    int quiet;
    int progress_only; /* count calls and show progress, keep no tap */
    dsv4q_eta *eta;    /* progress: the share done and the time left; NULL: none shown */
    int oom;
} dsv4q_tapset;

/* A dsv4q_tap_fn (oracle/model_run.h) over a dsv4q_tapset. */
void dsv4q_tapset_cb(void *user, int layer, const char *stage, const double *data, long n, long rows);
dsv4q_tap_entry *dsv4q_tapset_find(dsv4q_tapset *t, int layer, const char *stage);
void dsv4q_tapset_free(dsv4q_tapset *t);
/* Drop the recorded values of every entry, keeping its accumulated
 * comparison (acc, rows, selection counts): a run compared call by call
 * (sensitivity) keeps one call's taps, not all of them. */
void dsv4q_tapset_drop_data(dsv4q_tapset *t);

/* Bytes of a run of `prompt` + `decode` tokens at `width` whose prompt is
 * fed in calls of `chunk` tokens (dsv4q_run_estimate_bytes), plus the
 * stage taps it keeps as doubles (the per-layer rows, the indexer's scores
 * against every compressed row, the logits): every tap of every token
 * when `all`, else one call's (the largest chunk; sensitivity compares
 * call by call). A dsv4q estimate (no reference function). */
struct dsv4q_model;
double dsv4q_taps_bytes(const struct dsv4q_model *m, int width, long prompt, long decode, long chunk, int all);
/* Refuse (-1, err set) a run of `widths` (64, 32, or 96: both at once)
 * whose taps cannot be kept: dsv4q_taps_bytes against MemAvailable; 0 when
 * it fits or the memory is unknown. The message says which chunk fits. */
int dsv4q_taps_fit(const struct dsv4q_model *m, int widths, long prompt, long decode, long chunk, int all, char *err,
                   size_t errlen);
/* The chunk a command feeds a prompt in when --chunk is not given: the
 * whole prompt when dsv4q_taps_fit accepts it, else the largest chunk it
 * accepts (1 when none: the fit check then refuses). */
long dsv4q_taps_chunk(const struct dsv4q_model *m, int widths, long prompt, long decode, int all);

#endif
