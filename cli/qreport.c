/*
 * qreport.c - qualify's report for people and CI (see qreport.h). Reads
 * the harness's results; never changes a verdict, only how skips count
 * when the user requires operators.
 */
#include <stdlib.h>
#include <string.h>
#include "harness/ops/ops.h"
#include "cli/junit.h"
#include "cli/qreport.h"
#include "harness/measure/metrics.h"
#include "harness/capture/replay.h"
#include "oracle/stages.h"
#include "oracle/formats.h"

/* A case that was not judged (skipped, or not checkable: its reference is
 * not finite) of an operator the user requires. */
static int skip_required(const dsv4q_qcase *r, const dsv4q_qreport_opts *ro)
{
    return (r->verdict == DSV4Q_V_SKIP || r->verdict == DSV4Q_V_UNCHECKABLE) &&
           (ro->require_all || (ro->require & DSV4Q_CAP(r->op)));
}

int dsv4q_qreport_case_failed(const dsv4q_qcase *r, const dsv4q_qreport_opts *ro)
{
    return r->verdict == DSV4Q_V_FAIL || r->verdict == DSV4Q_V_ERROR || skip_required(r, ro);
}

int dsv4q_qreport_status(const dsv4q_qualify_result *q, const dsv4q_qreport_opts *ro)
{
    if (q->load_failed) return 2;
    int ran = 0;
    for (int i = 0; i < q->ncases; i++) {
        if (dsv4q_qreport_case_failed(&q->cases[i], ro)) return 1;
        ran += q->cases[i].verdict == DSV4Q_V_PASS;
    }
    return ran ? 0 : 1;
}

static void metric_label(const dsv4q_qcase *r, int m, const dsv4q_qrow *w, char *name, size_t n)
{
    if (r->nout > 1) snprintf(name, n, "%s[%s]", dsv4q_metric_name(m), dsv4q_op_get(r->op)->out[w->out].name);
    else snprintf(name, n, "%s", dsv4q_metric_name(m));
}

/* "metric value > bound (level L)" of the first failing gated metric. */
static void first_failure(const dsv4q_qcase *r, const dsv4q_qreport_opts *ro, char *out, size_t n)
{
    if (r->verdict == DSV4Q_V_ERROR) { snprintf(out, n, "ERROR: %s", r->msg); return; }
    if (skip_required(r, ro) && r->verdict == DSV4Q_V_UNCHECKABLE) {
        snprintf(out, n, "not checkable (required): %s", r->msg);
        return;
    }
    if (skip_required(r, ro)) {
        if (r->status == DSV4Q_ISO_DECLINED)
            snprintf(out, n, "declined (operator %s; required): %s", dsv4q_op_get(r->op)->name, r->msg);
        else
            snprintf(out, n, "not implemented (operator %s outside the backend's caps; required)",
                     dsv4q_op_get(r->op)->name);
        return;
    }
    for (int m = 0; m < DSV4Q_M_COUNT; m++) {
        const dsv4q_qrow *w = &r->row[m];
        if (w->out < 0 || !w->gated || w->pass) continue;
        char name[48];
        metric_label(r, m, w, name, sizeof name);
        snprintf(out, n, "%s %.3e > bound %.3e (level %.3e)%s%s", name, w->value, w->bound, w->level,
                 r->msg[0] && !r->ew ? ": " : "", r->ew ? "" : r->msg);   /* the exact rule's count and index */
        return;
    }
    if (r->msg[0]) { snprintf(out, n, "%s", r->msg); return; }   /* e.g. the format error over --format-gate */
    snprintf(out, n, "failed");
}

/* What happened to each operator with cases not judged, in the operator
 * table's order: "OP partial (J of N)" when J of its N cases were judged
 * (the others declined by supports() or not checkable); then the
 * operators none of whose cases was judged, "not implemented: OP ..."
 * (outside the caps) and "declined: OP ..." (every shape declined); then
 * "not checkable: OP (K) ...", the cases whose reference is not finite. */
static void print_partial_ops(FILE *f, const dsv4q_qualify_result *q)
{
    int total[DSV4Q_OP_COUNT] = {0}, judged[DSV4Q_OP_COUNT] = {0}, unc[DSV4Q_OP_COUNT] = {0};
    for (int i = 0; i < q->ncases; i++) {
        const dsv4q_qcase *r = &q->cases[i];
        if (r->op < 0 || r->op >= DSV4Q_OP_COUNT) continue;
        total[r->op]++;
        judged[r->op] += r->verdict != DSV4Q_V_SKIP && r->verdict != DSV4Q_V_UNCHECKABLE;
        unc[r->op] += r->verdict == DSV4Q_V_UNCHECKABLE;
    }
    int k = 0;
    for (int op = 0; op < DSV4Q_OP_COUNT; op++)
        if (judged[op] && judged[op] < total[op])
            fprintf(f, "%s %s partial (%d of %d)", k++ ? "," : ";", dsv4q_op_get(op)->name, judged[op], total[op]);
    static const char *const label[3] = {"not implemented", "declined", "not checkable"};
    for (int g = 0; g < 3; g++) {
        k = 0;
        for (int op = 0; op < DSV4Q_OP_COUNT; op++) {
            const int in_caps = (q->desc.caps & DSV4Q_CAP(op)) != 0, none = total[op] && !judged[op];
            const int in_group = g == 0 ? none && !in_caps : g == 1 ? none && in_caps && !unc[op] : unc[op] > 0;
            if (!in_group) continue;
            if (k++) fputc(' ', f);
            else fprintf(f, "; %s: ", label[g]);
            fputs(dsv4q_op_get(op)->name, f);
            if (g == 2) fprintf(f, " (%d)", unc[op]);
        }
    }
}

void dsv4q_qreport_print(FILE *f, const dsv4q_qualify_result *q, const dsv4q_gates *g, const dsv4q_qreport_opts *ro)
{
    if (dsv4q_qualify_print_header(f, q, g)) return;
    int nfailed = 0, njudged = 0;
    for (int i = 0; i < q->ncases; i++) {
        const dsv4q_qcase *r = &q->cases[i];
        int failed = dsv4q_qreport_case_failed(r, ro);
        nfailed += failed;
        njudged += r->verdict != DSV4Q_V_SKIP && r->verdict != DSV4Q_V_UNCHECKABLE;
        if (r->verdict == DSV4Q_V_SKIP || r->verdict == DSV4Q_V_ERROR || r->verdict == DSV4Q_V_UNCHECKABLE) {
            if (ro->failures_only && !failed) continue;
            const char *v = !skip_required(r, ro)               ? dsv4q_verdict_name(r->verdict)
                            : r->verdict == DSV4Q_V_UNCHECKABLE ? "FAIL (required, not checkable)"
                            : r->status == DSV4Q_ISO_DECLINED   ? "FAIL (required, declined)"
                                                                : "FAIL (required, not implemented)";
            fprintf(f, "%-78s %-12s %11s %11s %11s  %s%s%s\n", r->key, "-", "-", "-", "-", v, r->msg[0] ? ": " : "",
                    r->msg);
            continue;
        }
        for (int m = 0; m < DSV4Q_M_COUNT; m++) {
            const dsv4q_qrow *w = &r->row[m];
            if (w->out < 0 || (!ro->all_metrics && !w->gated)) continue;
            if (ro->failures_only && (!w->gated || w->pass)) continue;
            char name[48], bound[32];
            metric_label(r, m, w, name, sizeof name);
            if (w->gated) snprintf(bound, sizeof bound, "%11.3e", w->bound);
            else snprintf(bound, sizeof bound, "%11s", "-");
            fprintf(f, "%-78s %-12s %11.3e %11.3e %s  %s\n", r->key, name, w->value, w->level, bound,
                    !w->gated ? "info" : w->pass ? "pass" : "FAIL");
        }
        if (r->ew && (!ro->failures_only || failed))   /* engine-stored weight (ABI v2 load_weight) */
            fprintf(f, "%-78s %-12s %11.3e %11s %11s  %s (engine weights %s: the rows above are the KERNEL error, vs "
                    "oracle on them; format = oracle on %s vs on the reference weights, max_abs %.3e)%s%s\n",
                    r->key, "format_nrms", r->fmt_nrms, "", "", r->verdict == DSV4Q_V_FAIL && r->msg[0] ? "FAIL" : "info",
                    r->ew_name, r->ew_name, r->fmt_max_abs, r->msg[0] ? ": " : "", r->msg);
        if (r->verdict == DSV4Q_V_FAIL && r->msg[0] && !r->ew)   /* the exact rule (harness/ops/ops.h .exact) */
            fprintf(f, "%-78s %-12s %s\n", r->key, "message", r->msg);
        if (ro->failures_only) continue;
        if (r->tie_flips)
            fprintf(f, "%-78s %-12s %11ld %11s %11s  %s\n", r->key, "tie_flips", r->tie_flips, "", "",
                    "legitimate (tie-run at the cut)");
        for (int o = 0; o < r->nout; o++)
            if (r->dtype[o] != DSV4Q_BT_F32 && r->dtype[o] != DSV4Q_BT_I32) {
                const char *dn = dsv4q_dtype_name((dsv4q_dtype)r->dtype[o]);
                fprintf(f, "%-78s %-12s %11s  (ULPs counted in %s)\n", r->key, "storage", dn ? dn : "?", dn ? dn : "?");
            }
    }
    int st = dsv4q_qreport_status(q, ro);
    fprintf(f, "\n%d cases: %d pass, %d fail, %d error, %d skipped", q->ncases, q->npass, q->nfail, q->nerror,
            q->nskip);
    if (q->nunc) fprintf(f, ", %d not checkable", q->nunc);
    fprintf(f, " -> %s", st == 0 ? "PASS" : "FAIL");
    if (q->nskip || q->nunc) {
        fprintf(f, " (partial: %d of %d cases judged", njudged, q->ncases);
        print_partial_ops(f, q);
        fprintf(f, "%s)", ro->require_all || ro->require ? "; required skips fail" : "");
    }
    fputc('\n', f);
    if (nfailed) {
        fprintf(f, "failed: %d case%s of %s\n", nfailed, nfailed == 1 ? "" : "s", q->desc.spec);
        for (int i = 0; i < q->ncases; i++) {
            const dsv4q_qcase *r = &q->cases[i];
            if (!dsv4q_qreport_case_failed(r, ro)) continue;
            char why[1200];
            first_failure(r, ro, why, sizeof why);
            fprintf(f, "failed: %s: %s\n", r->key, why);
        }
    }
}

void dsv4q_qreport_junit(dsv4q_junit *j, const dsv4q_qualify_result *q, const dsv4q_qreport_opts *ro)
{
    char suite[600], cls[600];
    snprintf(suite, sizeof suite, "qualify %s", q->desc.spec);
    dsv4q_junit_suite(j, suite);
    if (q->load_failed) {
        snprintf(cls, sizeof cls, "qualify.%s", q->desc.spec);
        dsv4q_junit_case(j, cls, "load", -1, DSV4Q_JUNIT_ERROR, q->msg, NULL);
        return;
    }
    for (int i = 0; i < q->ncases; i++) {
        const dsv4q_qcase *r = &q->cases[i];
        snprintf(cls, sizeof cls, "qualify.%s.%s", q->desc.spec, dsv4q_op_get(r->op)->name);
        if (!dsv4q_qreport_case_failed(r, ro)) { /* not checkable: skipped with its reason */
            const int skipped = r->verdict == DSV4Q_V_SKIP || r->verdict == DSV4Q_V_UNCHECKABLE;
            dsv4q_junit_case(j, cls, r->key, r->seconds, skipped ? DSV4Q_JUNIT_SKIPPED : DSV4Q_JUNIT_PASS, r->msg,
                             NULL);
            continue;
        }
        char msg[1200], *body = NULL;
        size_t blen = 0;
        first_failure(r, ro, msg, sizeof msg);
        FILE *bf = open_memstream(&body, &blen);
        for (int m = 0; bf && m < DSV4Q_M_COUNT; m++) {
            const dsv4q_qrow *w = &r->row[m];
            if (w->out < 0 || !w->gated) continue;
            char name[48];
            metric_label(r, m, w, name, sizeof name);
            fprintf(bf, "%s value=%.6e level=%.6e bound=%.6e %s\n", name, w->value, w->level, w->bound,
                    w->pass ? "pass" : "FAIL");
        }
        if (bf) fclose(bf);
        dsv4q_junit_case(j, cls, r->key, r->seconds,
                         r->verdict == DSV4Q_V_ERROR ? DSV4Q_JUNIT_ERROR : DSV4Q_JUNIT_FAILURE, msg, body);
        free(body);
    }
}

void dsv4q_rreport_junit(dsv4q_junit *j, const dsv4q_replay *res, const char *engine)
{
    char suite[300], cls[300];
    snprintf(suite, sizeof suite, "replay %s", engine);
    snprintf(cls, sizeof cls, "replay.%s", engine);
    dsv4q_junit_suite(j, suite);
    for (int i = 0; i < res->nst; i++) {
        const dsv4q_replay_stage *r = &res->st[i];
        if (r->verdict == DSV4Q_RV_ABSENT) continue;
        const dsv4q_stage_info *si = dsv4q_stage_get(r->stage);
        char key[64], msg[600] = "";
        if (si->per_layer) snprintf(key, sizeof key, "L%d.%s", r->layer, si->name);
        else snprintf(key, sizeof key, "model.%s", si->name);
        if (r->verdict == DSV4Q_RV_UNCHECKABLE) {
            dsv4q_junit_case(j, cls, key, -1, DSV4Q_JUNIT_SKIPPED, r->why, NULL);
            continue;
        }
        if (r->verdict != DSV4Q_RV_FAIL) {
            dsv4q_junit_case(j, cls, key, -1, DSV4Q_JUNIT_PASS, NULL, NULL);
            continue;
        }
        for (int m = 0; m < DSV4Q_M_COUNT && !msg[0]; m++) {
            const dsv4q_replay_row *w = &r->row[m];
            if (w->measured && w->gated && !w->pass)
                snprintf(msg, sizeof msg, "%s %.3e > bound %.3e (level %.3e)", dsv4q_metric_name(m), w->value, w->bound,
                         w->level);
        }
        dsv4q_junit_case(j, cls, key, -1, DSV4Q_JUNIT_FAILURE, msg[0] ? msg : "failed", NULL);
    }
    const dsv4q_rmodel *M = &res->model;
    if (M->ref_nonfinite) dsv4q_junit_case(j, cls, "model.logits", -1, DSV4Q_JUNIT_SKIPPED, M->why, NULL);
    if (M->verdict == DSV4Q_RV_PASS || M->verdict == DSV4Q_RV_FAIL) {
        char msg[400];
        snprintf(msg, sizeof msg, "logit nrms %.3e (level %.3e, bound %.3e); greedy %ld/%ld (oracle-f32 %ld/%ld)",
                 M->nrms.value, M->nrms.level, M->nrms.bound, M->agree, M->rows, M->agree_lvl, M->rows);
        dsv4q_junit_case(j, cls, "model.logits", -1, M->verdict == DSV4Q_RV_FAIL ? DSV4Q_JUNIT_FAILURE : DSV4Q_JUNIT_PASS,
                         msg, NULL);
    }
}
