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

static int skip_required(const dsv4q_qcase *r, const dsv4q_qreport_opts *ro)
{
    return r->verdict == DSV4Q_V_SKIP && (ro->require_all || (ro->require & DSV4Q_CAP(r->op)));
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
    if (skip_required(r, ro)) {
        snprintf(out, n, "not implemented (operator %s outside the backend's caps; required)", dsv4q_op_get(r->op)->name);
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

void dsv4q_qreport_print(FILE *f, const dsv4q_qualify_result *q, const dsv4q_gates *g, const dsv4q_qreport_opts *ro)
{
    if (dsv4q_qualify_print_header(f, q, g)) return;
    int nfailed = 0, nskip = 0, nrun = 0;
    for (int i = 0; i < q->ncases; i++) {
        const dsv4q_qcase *r = &q->cases[i];
        int failed = dsv4q_qreport_case_failed(r, ro);
        nfailed += failed;
        nskip += r->verdict == DSV4Q_V_SKIP;
        nrun += r->verdict != DSV4Q_V_SKIP;
        if (r->verdict == DSV4Q_V_SKIP || r->verdict == DSV4Q_V_ERROR) {
            if (ro->failures_only && !failed) continue;
            const char *v = skip_required(r, ro) ? "FAIL (required, not implemented)" : dsv4q_verdict_name(r->verdict);
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
    fprintf(f, "\n%d cases: %d pass, %d fail, %d error, %d skipped -> %s", q->ncases, q->npass, q->nfail, q->nerror,
            q->nskip, st == 0 ? "PASS" : "FAIL");
    if (nskip) {
        /* the operators the backend does not implement, once each */
        uint64_t seen = 0;
        fprintf(f, " (partial: %d of %d cases; not implemented:", nrun, q->ncases);
        for (int i = 0; i < q->ncases; i++) {
            const dsv4q_qcase *r = &q->cases[i];
            if (r->verdict != DSV4Q_V_SKIP || (seen & DSV4Q_CAP(r->op))) continue;
            seen |= DSV4Q_CAP(r->op);
            fprintf(f, " %s", dsv4q_op_get(r->op)->name);
        }
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
        if (!dsv4q_qreport_case_failed(r, ro)) {
            dsv4q_junit_case(j, cls, r->key, r->seconds,
                             r->verdict == DSV4Q_V_SKIP ? DSV4Q_JUNIT_SKIPPED : DSV4Q_JUNIT_PASS, r->msg, NULL);
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
    if (M->verdict == DSV4Q_RV_PASS || M->verdict == DSV4Q_RV_FAIL) {
        char msg[400];
        snprintf(msg, sizeof msg, "logit nrms %.3e (level %.3e, bound %.3e); greedy %ld/%ld (oracle-f32 %ld/%ld)",
                 M->nrms.value, M->nrms.level, M->nrms.bound, M->agree, M->rows, M->agree_lvl, M->rows);
        dsv4q_junit_case(j, cls, "model.logits", -1, M->verdict == DSV4Q_RV_FAIL ? DSV4Q_JUNIT_FAILURE : DSV4Q_JUNIT_PASS,
                         msg, NULL);
    }
}
