/*
 * verdict.h - the verdict half of the measure room: the gate rule and
 * gate-set types, the bound and pass evaluator, and the stage -> gate
 * links (the metric ids and the measurements are harness/measure/metrics.h). qualify (harness/qualify/qualify.c),
 * replay (harness/capture/replay.c) and the whole-model gate
 * (harness/qualify/qualify_model.c) all judge through dsv4q_judge(); gates/ only
 * parses the JSON files into these types (gates/gates.h, one layer up).
 *
 * A gate never states an absolute tolerance alone (docs/gates.md):
 *     value <= factor * level + floor + floor_u * u(storage dtype)
 * where level is the same metric for oracle-f32 vs oracle-f64 on the same
 * case. G1: a metric that is not gated is still measured and reported.
 * G2: NaN never passes (a NaN value or bound is a failure).
 */
#ifndef DSV4Q_VERDICT_H
#define DSV4Q_VERDICT_H

#include <stddef.h>
#include <stdint.h>
#include "abi/dsv4q_backend.h"
#include "harness/measure/metrics.h"
#include "oracle/stages.h"


typedef struct dsv4q_gate_rule {
    int on;                  /* 1: gated */
    double factor, floor;
    double floor_u[3];       /* floor in units u of the output's storage
                                precision, per storage dtype: [0] BF16
                                (u = 2^-8), [1] F16 (2^-11), [2] F32
                                (2^-24); I32 outputs: none */
} dsv4q_gate_rule;

typedef struct dsv4q_gates {
    char origin[512];        /* the gate file's path (messages, receipts) */
    char description[256];
    dsv4q_gate_rule op[DSV4Q_OP_COUNT][DSV4Q_M_COUNT];
    /* stage verdicts (replay, the whole-model per-stage verdict): the rules
     * of the stage's gate operator, unless the file's "stages" section sets
     * that stage (stage_set 1: stage[st] is the gate operator's set with the
     * listed metrics replaced) */
    dsv4q_gate_rule stage[DSV4Q_STAGE_COUNT][DSV4Q_M_COUNT];
    int stage_set[DSV4Q_STAGE_COUNT];
    dsv4q_gate_rule model_nrms;
    double greedy_min;       /* fraction in [0,1]; < 0: not gated */
} dsv4q_gates;

/* The rule of metric m for stage st's verdicts (see stage_set); NULL when
 * g is NULL or the stage has no gate operator. */
const dsv4q_gate_rule *dsv4q_stage_rule(const dsv4q_gates *g, int st, int m);
/* The same for stage st of arch's table (dsv4q_arch): a V4.1 stage uses the
 * "stages" section's rules of the V4 stage of its name when the file sets
 * them, else its own gate operator's (oracle/stages.c table41 gate_op). */
const dsv4q_gate_rule *dsv4q_stage_rule_arch(const dsv4q_gates *g, int arch, int st, int m);

/* Stable metric names ("nrms", "max_abs", ...), NULL out of range. */
const char *dsv4q_metric_name(int m);
int dsv4q_metric_find(const char *name);

/* bound = factor * level + floor + floor_u[dtype] * u(dtype) (NaN if level
 * is NaN); dtype is the output's storage dtype (dsv4q_bt_dtype). */
double dsv4q_gate_bound(const dsv4q_gate_rule *r, double level, int dtype);
/* Unit roundoff of a storage dtype (dsv4q_bt_dtype): 2^-8 BF16, 2^-11 F16,
 * 2^-24 F32, 2^-53 F64, 0 otherwise. */
double dsv4q_dtype_unit(int dtype);
/* 1 pass, 0 fail (G2: NaN fails). */
int dsv4q_gate_pass(double value, double bound);

/* One judged metric: the bound the rule gives (computed for an ungated
 * rule too, for the report; NaN without a rule), whether it is gated, and
 * the verdict (1 when not gated: G1 reports without judging). */
typedef struct dsv4q_judgement {
    double bound;
    int gated, pass;
} dsv4q_judgement;
/* Judge value against rule r (NULL or r->on == 0: not gated) at level,
 * for an output stored in dtype (dsv4q_bt_dtype; NONE for model-level
 * metrics). */
dsv4q_judgement dsv4q_judge(const dsv4q_gate_rule *r, double value, double level, int dtype);

/* The stage -> gate link: the operator (enum dsv4q_op) whose gate rules
 * bound stage `stage` of oracle/stages.h, -1 if the stage is unknown or its
 * gate_op names no operator. */
int dsv4q_stage_gate_op(int stage);
/* Check the links once, before judging anything: the stage table itself
 * (dsv4q_stage_table_check: every stage has a tap and a gate), every
 * stage's gate_op resolving to an operator of DSV4Q_OP_LIST, so a typo is
 * an error instead of a silently ungated stage, and the stage -> operators
 * links (harness/ops/stage_ops.h dsv4q_stage_ops_check). 0, or -1 with a
 * message. */
int dsv4q_stage_gates_check(char *err, size_t errlen);

#endif
