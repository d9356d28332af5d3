/*
 * gates.h - declarative pass/fail rules (gates/ JSON files): parsing and the
 * default file. The rule types and the evaluator (bound, pass) are in
 * harness/measure/verdict.h, so harness/ never includes gates/ (layering).
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
#include "harness/measure/verdict.h"   /* the rule types and their evaluator */

/* Parse gate JSON text. origin names it in messages. 0 or -1 + message. */
int dsv4q_gates_parse(dsv4q_gates *g, const char *text, const char *origin, char *err, size_t errlen);
/* Read and parse a gate file. */
int dsv4q_gates_load(dsv4q_gates *g, const char *path, char *err, size_t errlen);
/* Load the default gate file: $DSV4Q_GATES, else gates/default.json in the
 * working directory, else ../gates/default.json beside the binary (a
 * build/dsv4q run from anywhere). No copy is compiled in: with none of the
 * three, -1 and a message asking for --gates FILE. */
int dsv4q_gates_default(dsv4q_gates *g, char *err, size_t errlen);

#endif
