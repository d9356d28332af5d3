/*
 * taps.h - recording stage taps of a whole-model run and comparing a
 * second run against them, stage by stage (used by sensitivity, run).
 */
#ifndef DSV4Q_CLI_TAPS_H
#define DSV4Q_CLI_TAPS_H

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
    int oom;
} dsv4q_tapset;

/* A dsv4q_tap_fn (oracle/model_run.h) over a dsv4q_tapset. */
void dsv4q_tapset_cb(void *user, int layer, const char *stage, const double *data, long n, long rows);
dsv4q_tap_entry *dsv4q_tapset_find(dsv4q_tapset *t, int layer, const char *stage);
void dsv4q_tapset_free(dsv4q_tapset *t);

/* Refuse (-1, err set) a run whose taps cannot be kept: the memory of a
 * run of `prompt` + `decode` tokens at `width` (dsv4q_run_estimate_bytes)
 * plus every stage tap of every token as doubles (what a tapset keeps:
 * the per-layer rows, the indexer's scores against every compressed row,
 * the logits of every call), against MemAvailable; 0 when it fits or the
 * memory is unknown. The estimate is dsv4q's own (no reference function). */
struct dsv4q_model;
int dsv4q_taps_fit(const struct dsv4q_model *m, int width, long prompt, long decode, char *err, size_t errlen);

#endif
