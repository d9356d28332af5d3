/*
 * replay.h - qualify an engine from its capture, stage by stage, on the
 * engine's own inputs.
 *
 * For every call of a capture (harness/capture/capture.h) and every stage of the
 * stage table (oracle/stages.h) whose tensors it holds, replay feeds the
 * CAPTURED inputs to the oracle at f64 (the reference) and at f32 (the
 * rounding level), both at the engine's claimed profile, and compares
 *     value = captured output  vs  oracle-f64(captured inputs)
 *     level = oracle-f32(same) vs  oracle-f64(captured inputs)
 * with the metric set and the gates of `qualify`:
 *     value <= factor * level + floor (+ floor_u * u(dtype))    (gates/gates.h)
 * Because each stage starts from the engine's own inputs, a stage's error
 * is its own: drift accumulated upstream never reaches it.
 *
 * Stateful attention: layer l's caches depend only on layer l's attention
 * inputs at earlier positions, so replay feeds `attn` stages to a per-layer
 * oracle attention in call order (dsv4q_run_stage). If a call's attn input
 * is missing, that layer's later attn stages are not checkable.
 *
 * Whole model: when every call holds model.head.out and the calls run from
 * position 0 without a gap, the logits are also compared with a whole
 * oracle-f64 run on the capture's token ids (level: the oracle-f32 run),
 * gated by the gate file's "model" rules (logit NRMS, greedy agreement).
 *
 * Invariants:
 *  P1. Nothing is silently skipped: a stage with any tensor in the capture
 *      is either compared or reported "not checkable" with the reason (and
 *      the stage slots with no tensor at all are listed as not captured).
 *  P2. A stage replayed on the inputs the oracle itself produced, at the
 *      width it ran at, reproduces the captured output bit for bit (model.c
 *      M3): an f64 oracle capture replays at zero error.
 *  P3. Stage gates use the rules of the operator the stage table names
 *      (gate_op); docs/captures.md gives the mapping.
 *  P4. The level a stage row is gated at is, per metric and output, the
 *      largest oracle-f32 level of that stage over the model's layers.
 *      Rounding flips are discrete: a layer where oracle-f32 happens to
 *      round every BF16 value and FP8 code as oracle-f64 does (level 0)
 *      says nothing about how far a correct FP32 kernel with another
 *      summation order may land there, while the same stage in the next
 *      layer shows it (docs/captures.md gives measured levels).
 *  P5. ULPs are row-floored (harness/measure/metrics.h, ulp_max) for every
 *      stage output.
 *  P6. An FP32 output that is a linear map of a BF16-rounded vector (the
 *      head's logits of the normed hidden state, stages.h `inner`) is judged
 *      in BF16: one BF16 rounding of that vector landing on the other side
 *      (oracle-f32 at token seed 1 on tiny: logit NRMS 3.9e-4 from it; the
 *      CUDA kernels at seed 3: 4.1e-5) is rounding, not a defect, however
 *      far above FP32 resolution it moves the logits.
 */
#ifndef DSV4Q_REPLAY_H
#define DSV4Q_REPLAY_H

#include <jansson.h>
#include <stdio.h>
#include "harness/measure/verdict.h"
#include "harness/capture/capture.h"
#include "harness/measure/metrics.h"
#include "io/model.h"

typedef enum dsv4q_replay_verdict {
    DSV4Q_RV_PASS = 0,
    DSV4Q_RV_FAIL,
    DSV4Q_RV_UNCHECKABLE,     /* captured, but no call could be compared */
    DSV4Q_RV_ABSENT           /* no tensor of this stage in the capture */
} dsv4q_replay_verdict;

/* One metric of one stage: at the output where value/bound is worst. */
typedef struct dsv4q_replay_row {
    int measured, gated, pass, out;
    double value, level, bound;
} dsv4q_replay_row;

typedef struct dsv4q_replay_stage {
    int arch;         /* the stage table: dsv4q_arch (V4's, V4.1's) */
    int stage, layer; /* an id of that table; layer -1: model-level */
    int not_run;      /* 1: the forward pass has no such stage (V4.1's engram of a layer without
                         Engram): absent is expected, as for an optional stage */
    dsv4q_replay_verdict verdict;
    long calls_checked, calls_unchecked;
    char why[320];                    /* first reason a call was not checkable */
    char note[160];                   /* outputs never captured, if some were */
    int nout;
    int seen[DSV4Q_STAGE_MAX_T];      /* output compared at least once */
    int dtype[DSV4Q_STAGE_MAX_T];     /* its captured dtype (dsv4q_dtype) */
    dsv4q_acc val[DSV4Q_STAGE_MAX_T], lvl[DSV4Q_STAGE_MAX_T];
    double ulp_val[DSV4Q_STAGE_MAX_T], ulp_lvl[DSV4Q_STAGE_MAX_T];
    long amiss_val, amiss_lvl;        /* head: calls whose argmax differs */
    dsv4q_replay_row row[DSV4Q_M_COUNT];
    int nonfinite;                    /* a non-finite input, or an output finite on one side only
                                         (capture vs oracle-f64): the stage is not checkable, never
                                         PASS; why names the tensor and element */
    int ref_nonfinite;                /* of those, the reference itself: oracle-f64 or oracle-f32
                                         has a NaN or an inf the other width does not share
                                         (dsv4q_ref_finite); why: "reference not finite: ..." */
} dsv4q_replay_stage;

typedef struct dsv4q_rmodel {
    dsv4q_replay_verdict verdict;           /* ABSENT: no logits captured */
    char why[320];
    /* UNCHECKABLE because the oracle's logits are not finite (dsv4q_ref_finite) */
    int ref_nonfinite;
    long rows;
    dsv4q_acc val, lvl;
    long agree, agree_lvl;            /* greedy agreement with oracle-f64 */
    dsv4q_replay_row nrms;
    int greedy_gated, greedy_pass;
    double greedy_min;
} dsv4q_rmodel;

typedef struct dsv4q_replay {
    dsv4q_replay_stage *st;                 /* forward order (dsv4q_stage_slot): embed, L0 .. L{n-1}, head */
    int nst;
    int arch, nl; /* the model's stage table (dsv4q_arch) and layers */
    int npass, nfail, nunc, nabsent;
    int npartial;                 /* judged stages with some calls not checkable */
    dsv4q_rmodel model;
    double seconds;
} dsv4q_replay;

typedef struct dsv4q_replay_opts {
    const dsv4q_gates *gates;
    int whole_model;                  /* 1: also the whole-model comparison */
    int quiet;                        /* no progress on stderr */
} dsv4q_replay_opts;

/* Replay every call of cap against model m. Returns 0 when the replay ran
 * (whatever the verdicts), -1 + message when it could not (allocation, an
 * oracle error). Free res with dsv4q_replay_free. */
int dsv4q_replay_run(dsv4q_replay *res, const dsv4q_model *m, const dsv4q_capture *cap, const dsv4q_replay_opts *o,
                     char *err, size_t errlen);
void dsv4q_replay_free(dsv4q_replay *res);

/* 0: every compared stage (and the whole model, if compared) passed, at
 * least one stage was compared and no stage met a non-finite value
 * (rstage.nonfinite, the reference's own included) nor were the oracle's
 * logits non-finite (rmodel.ref_nonfinite); 1 otherwise. */
int dsv4q_replay_status(const dsv4q_replay *res);
/* The row of (stage, layer) (layer ignored for model-level stages). */
const dsv4q_replay_stage *dsv4q_replay_find(const dsv4q_replay *res, int stage, int layer);

/* ---- the pieces of a stage-by-stage verdict (also used by qualify
 * --whole-model, harness/capture/stagewise.h) ---- */

/* Slots for a model of nl layers in forward order, every one ABSENT.
 * 0, or -1 when out of memory. */
int dsv4q_replay_init(dsv4q_replay *res, int nl);
/* The same for the stage table of arch (dsv4q_arch: V4's or V4.1's). */
int dsv4q_replay_init_arch(dsv4q_replay *res, int arch, int nl);
/* Mark the slots cfg's forward pass never runs (not_run: V4.1's engram on
 * a layer without Engram), so their absence is not counted. */
void dsv4q_replay_mark_present(dsv4q_replay *res, const dsv4q_config *cfg);
/* The dtype an output is judged in (ULPs, floor_u): a BF16/F16 dump's own,
 * else BF16 for an FP32 output with its `inner` BF16 rounding on (P6), else
 * the storage the profile bs gives the stage tensor t (stages.h). */
int dsv4q_replay_dtype(int dump_dt, const dsv4q_stage_tensor *t, uint64_t bs);
/* One call of stage r: per output t (r->nout of them; cand[t] NULL = not
 * available) the candidate's n[t] values, the oracle-f64 reference's and
 * oracle-f32's on the same inputs, judged in dtype[t]. An output finite on
 * one side only (candidate vs reference) makes the stage not checkable,
 * last[t]: the row length ULPs are floored over (P5),
 * with a reason naming the tensor, element and position pos ("the oracle's
 * output is non-finite where the NOUN is finite", "non-finite ADJ output
 * where the oracle is finite"). Accumulates NRMS, max abs/rel, ULP and the
 * head's argmax agreement over the calls. */
void dsv4q_replay_add(dsv4q_replay_stage *r, const double *const *cand, const double *const *f64, const double *const *f32,
                      const long *n, const long *last, const int *dtype, long pos, const char *noun,
                      const char *adj);
/* The row length of stage tensor t for s tokens (its last dimension): the
 * rows ULPs are floored over. */
long dsv4q_stage_row_len(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, long s);
/* After the last call: gate every stage (P3) with g and count the
 * verdicts into res (g NULL: every metric reported, none gated). Idempotent. */
void dsv4q_replay_finish(dsv4q_replay *res, const dsv4q_gates *g);

/* "L3.attn" / "model.head": the key of a stage row in tables and JSON. */
void dsv4q_replay_key(const dsv4q_replay_stage *r, char *buf, size_t len);

/* The judged stage rows as a JSON array: {stage, verdict, calls_checked,
 * calls_not_checkable, why, note, metrics: {NAME: {value, level, bound,
 * gated, pass, output}}}; the keys of ABSENT rows are appended to absent
 * (may be NULL). */
json_t *dsv4q_replay_stages_json(const dsv4q_replay *res, json_t *absent);

/* One "failed: KEY: METRIC VALUE > bound BOUND (level LEVEL)" line per
 * failing stage row (its first failing gated metric), for CI logs. */
void dsv4q_replay_print_failed(FILE *f, const dsv4q_replay *res);

/* Human table; all = every measured metric, not only the gated ones. */
void dsv4q_replay_print(FILE *f, const dsv4q_replay *res, const dsv4q_gates *g, int all);
/* Machine form (malloc'd JSON text). */
char *dsv4q_replay_json(const dsv4q_replay *res, const dsv4q_capture *cap, const dsv4q_gates *g);
const char *dsv4q_replay_verdict_name(dsv4q_replay_verdict v);

#endif
