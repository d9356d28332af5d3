/*
 * gates.h - declarative pass/fail rules (gates/ JSON files) and their evaluator.
 *
 * A gate never states an absolute tolerance alone. Per operator and metric
 * it says
 *     value <= factor * level + floor
 * where `level` is the same metric measured for oracle-f32 against
 * oracle-f64 of the backend's profile on the same case (the rounding
 * level: what an honest FP32 implementation of the same contract gets),
 * `factor` allows a different but legitimate order of operations, and
 * `floor` covers metrics whose level is 0 (exact operators, ties) by a
 * stated amount (absolute, and/or floor_u units of the storage precision,
 * so one rule means the same for BF16 and F32 outputs). Whole-model gates say logit NRMS <= factor * sensitivity
 * floor + floor, and greedy agreement >= a minimum. docs/gates.md explains
 * each number of gates/default.json.
 *
 * File format (JSON, duplicate keys rejected):
 *   { "dsv4q_gates": 1,
 *     "description": "...",
 *     "defaults": { METRIC: RULE, ... },
 *     "ops": { OP: { METRIC: RULE | null, ... }, ... },
 *     where RULE = {"factor": F, "floor": G, "floor_u": U | {"BF16": U1,
 *                   "F16": U2, "F32": U3}, "why": "..."} (floor, floor_u
 *                   optional, 0 by default)
 *     "model": { "nrms": {"factor": F, "floor": G}, "greedy_agreement_min": A } }
 * An op inherits every default metric it does not name; `null` removes a
 * metric from that op (reported, not gated). Unknown ops, metrics or keys,
 * negative or non-finite numbers are errors with the JSON path named.
 *
 * Invariants:
 *  G1. A metric that is not gated is still measured and reported.
 *  G2. NaN never passes: a NaN value or bound is a failure.
 */
#ifndef DSV4Q_GATES_H
#define DSV4Q_GATES_H

#include <stddef.h>
#include "harness/dsv4q_backend.h"

typedef enum dsv4q_metric {
    DSV4Q_M_NRMS = 0,        /* ||a-b|| / ||b|| */
    DSV4Q_M_MAX_ABS,         /* max |a-b| */
    DSV4Q_M_MAX_REL,         /* max |a-b|/|b| over b != 0 */
    DSV4Q_M_ULP_MAX,         /* max ULP distance in the backend's storage dtype */
    DSV4Q_M_COS_DIST,        /* 1 - cosine */
    DSV4Q_M_ARGMAX_MISS,     /* rows whose argmax (last dim) differs */
    DSV4Q_M_NONFINITE,       /* non-finite values not matched by the reference */
    DSV4Q_M_JACCARD_DIST,    /* selections: 1 - mean Jaccard index */
    DSV4Q_M_FLIPS,           /* selections: elements outside the tie-run at the cut */
    DSV4Q_M_RERUN,           /* max |run1 - run2| / (max |ref| or 1): run-to-run */
    DSV4Q_M_COUNT
} dsv4q_metric;

typedef struct dsv4q_gate_rule {
    int on;                  /* 1: gated */
    double factor, floor;
    double floor_u[3];       /* floor in units u of the output's storage
                                precision, per storage dtype: [0] BF16
                                (u = 2^-8), [1] F16 (2^-11), [2] F32
                                (2^-24); I32 outputs: none */
} dsv4q_gate_rule;

typedef struct dsv4q_gates {
    char origin[512];        /* file path or "<builtin default>" */
    char description[256];
    dsv4q_gate_rule op[DSV4Q_OP_COUNT][DSV4Q_M_COUNT];
    dsv4q_gate_rule model_nrms;
    double greedy_min;       /* fraction in [0,1]; < 0: not gated */
} dsv4q_gates;

/* Stable metric names ("nrms", "max_abs", ...), NULL out of range. */
const char *dsv4q_metric_name(int m);
int dsv4q_metric_find(const char *name);

/* Parse gate JSON text. origin names it in messages. 0 or -1 + message. */
int dsv4q_gates_parse(dsv4q_gates *g, const char *text, const char *origin, char *err, size_t errlen);
/* Read and parse a gate file. */
int dsv4q_gates_load(dsv4q_gates *g, const char *path, char *err, size_t errlen);
/* Path of the default gate file: $DSV4Q_GATES, else gates/default.json
 * next to the working directory, else the copy compiled into the binary. */
int dsv4q_gates_default(dsv4q_gates *g, char *err, size_t errlen);

/* bound = factor * level + floor + floor_u[dtype] * u(dtype) (NaN if level
 * is NaN); dtype is the output's storage dtype (dsv4q_bt_dtype). */
double dsv4q_gate_bound(const dsv4q_gate_rule *r, double level, int dtype);
/* Unit roundoff of a storage dtype (dsv4q_bt_dtype): 2^-8 BF16, 2^-11 F16,
 * 2^-24 F32, 2^-53 F64, 0 otherwise. */
double dsv4q_dtype_unit(int dtype);
/* 1 pass, 0 fail (G2: NaN fails). */
int dsv4q_gate_pass(double value, double bound);

#endif
