/*
 * qreport.h - how `dsv4q qualify` reports operator results for people and
 * for CI: the table, the summary, the failed: list and the JUnit cases.
 * Separate from the harness (which measures and judges) so the report can
 * follow CI conventions without touching the verdicts.
 *
 * Conventions (docs/ci.md):
 *  - every row of the table starts with its case key, so `grep FAIL` on a
 *    log keeps the case of every failing metric;
 *  - after the summary, "failed: KEY: metric value > bound (level L)", one
 *    line per failing case (error and required-skip cases too);
 *  - a skipped case (operator outside the backend's caps) is a third
 *    state: by default it passes with the summary "PASS (partial: N of M
 *    cases; not implemented: ops)"; `require` (operator bits) or
 *    require_all turn those skips into failures.
 */
#ifndef DSV4Q_CLI_QREPORT_H
#define DSV4Q_CLI_QREPORT_H

#include <stdint.h>
#include <stdio.h>
#include "harness/qualify/qualify.h"

typedef struct dsv4q_qreport_opts {
    int all_metrics;     /* print info rows too */
    int failures_only;   /* print only failing rows (summary + failed: stay) */
    int require_all;     /* every skip fails */
    uint64_t require;    /* DSV4Q_CAP bits whose skips fail */
} dsv4q_qreport_opts;

/* Is case r a failure under ro (FAIL, ERROR, or a required skip)? */
int dsv4q_qreport_case_failed(const dsv4q_qcase *r, const dsv4q_qreport_opts *ro);
/* Exit status of one backend under ro: 2 not loaded, 1 a case failed (or
 * nothing ran), 0 otherwise. */
int dsv4q_qreport_status(const dsv4q_qualify_result *q, const dsv4q_qreport_opts *ro);
/* The table, the summary line and the failed: list. */
void dsv4q_qreport_print(FILE *f, const dsv4q_qualify_result *q, const dsv4q_gates *g, const dsv4q_qreport_opts *ro);

struct dsv4q_junit;
/* One JUnit suite "qualify BACKEND" with one testcase per case: classname
 * "qualify.BACKEND.OP", name = the case key; a failing case's message names
 * the first failing metric with its value, level and bound, the body lists
 * every failing metric. */
void dsv4q_qreport_junit(struct dsv4q_junit *j, const dsv4q_qualify_result *q, const dsv4q_qreport_opts *ro);

struct dsv4q_replay;
/* One JUnit suite "replay ENGINE" with one testcase per captured stage row
 * (name "L3.attn" / "model.head", classname "replay.ENGINE"): failure =
 * the first failing gated metric with value, bound and level; a stage that
 * could not be checked is skipped with the reason; the whole-model
 * comparison is one more testcase "model.logits" when it ran. */
void dsv4q_rreport_junit(struct dsv4q_junit *j, const struct dsv4q_replay *res, const char *engine);

#endif
