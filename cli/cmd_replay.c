/*
 * cmd_replay.c - `dsv4q replay`: qualify an engine from the tensors it
 * dumped, stage by stage, on its own inputs (harness/capture/replay.h).
 *
 * Options: the command table (cli/cmdtab.c, `dsv4q help replay`), read
 * from dsv4q_replay_args.
 *
 * Validates the capture against the model first (names, shapes, metadata,
 * checkpoint pins: harness/capture/capture.h); any problem there is an error (exit
 * 2) naming the file and the tensor or field. Then prints the per-stage
 * table (value = capture vs oracle-f64 on the captured inputs, level =
 * oracle-f32 vs oracle-f64, bound from the gates), the stages that could
 * not be checked and why, the whole-model comparison when logits were
 * captured, and writes a receipt (kind "replay"). Exit 0 pass, 1 fail.
 */
#include "base/file.h"
#include "base/util.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "cli/junit.h"
#include "cli/qreport.h"
#include "gates/gates.h"
#include "harness/capture/capture.h"
#include "receipts/capture_pins.h"
#include "harness/capture/replay.h"
#include "harness/capture/schedules.h"
#include "io/model.h"
#include "oracle/boundary.h"
#include "receipts/receipts.h"

static void write_receipt(const dsv4q_cli_opts *o, const dsv4q_capture *cap, const dsv4q_gates *g,
                          const char *gate_path, const char *pin, const char *metrics, int status, int argc,
                          char **argv)
{
    char err[1024], gate_sha[DSV4Q_SHA256_HEX + 1] = "", tok[DSV4Q_SHA256_HEX + 1];
    if (gate_path && dsv4q_sha256_file(gate_path, gate_sha, NULL, err, sizeof err)) gate_sha[0] = 0;
    long n = 0;
    for (int i = 0; i < cap->ncalls; i++) n += cap->calls[i].s;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    n = 0;
    for (int i = 0; ids && i < cap->ncalls; i++)
        for (long k = 0; k < cap->calls[i].s; k++) ids[n++] = cap->calls[i].ids[k];
    dsv4q_pin_tokens(ids, ids ? (size_t)n : 0, tok);
    free(ids);
    char prof[700];
    snprintf(prof, sizeof prof, "%s%s%s", cap->profile, cap->boundary[0] ? " + " : "", cap->boundary);
    dsv4q_receipt r = {.kind = "replay", .backend_id = cap->engine,
                       .backend_version = cap->engine_version, .backend_sha256 = "", .checkpoint_pin_json = pin,
                       .tokens_pin = tok, .profile = prof, .widths = "f32,f64", .gate_file = g->origin,
                       .gate_sha256 = gate_sha, .metrics_json = metrics,
                       .verdict = status == 0 ? "pass" : "fail"};
    dsv4q_cli_receipt_store("replay", o, &r, argc, argv, 0);
}

/* One column letter per schedule. */
#define COL(i) ((char)('A' + (i)))

/* The stage rows of the schedules side by side: a row is printed when the
 * verdicts differ between schedules or one is not a pass (every row with
 * all); the other columns give the NRMS of each schedule's captured
 * outputs against schedule A's at the same positions (the largest over
 * the stage's outputs). */
static void print_matrix(const dsv4q_replay *res, int n, dsv4q_schedule_diff *const *d, int all, json_t *jd)
{
    printf("\nstage               ");
    for (int i = 0; i < n; i++) printf(" %-13c", COL(i));
    for (int i = 1; i < n; i++) printf(" %c vs A (NRMS)", COL(i));
    printf("\n");
    long same = 0;
    double worst = 0;
    char wkey[64] = "";
    for (int k = 0; k < res[0].nst; k++) {
        char key[64];
        dsv4q_replay_key(&res[0].st[k], key, sizeof key);
        int differ = 0, bad = 0, judged = 0;
        for (int i = 0; i < n; i++) {
            const dsv4q_replay_verdict v = res[i].st[k].verdict;
            differ |= v != res[0].st[k].verdict;
            const int optional = dsv4q_stage_get_arch(res[i].arch, res[i].st[k].stage)->optional;
            const int expected_absent = v == DSV4Q_RV_ABSENT && (res[i].st[k].not_run || optional);
            bad |= v != DSV4Q_RV_PASS && !expected_absent;
            judged |= !expected_absent;
        }
        if (!judged) continue; /* MTP left out, an engram a layer does not run: in no schedule */
        double nr[8] = {0};
        for (int i = 1; i < n; i++) {
            for (int t = 0; t < res[0].st[k].nout; t++) {
                const double x = dsv4q_acc_nrms(&d[i][k].acc[t]);
                if (d[i][k].rows && x > nr[i]) nr[i] = x;
            }
            if (nr[i] > worst) worst = nr[i], snprintf(wkey, sizeof wkey, "%s", key);
            json_t *e = json_object();
            json_object_set_new(e, "stage", json_string(key));
            json_object_set_new(e, "schedule", json_integer(i));
            json_object_set_new(e, "vs", json_integer(0));
            json_object_set_new(e, "rows", json_integer(d[i][k].rows));
            json_object_set_new(e, "nrms", d[i][k].rows ? dsv4q_json_num(nr[i]) : json_null());
            json_array_append_new(jd, e);
        }
        if (!all && !differ && !bad) {
            same++;
            continue;
        }
        printf("%-20s", key);
        for (int i = 0; i < n; i++) printf(" %-13s", dsv4q_replay_verdict_name(res[i].st[k].verdict));
        for (int i = 1; i < n; i++) {
            if (d[i][k].rows) printf(" %13.3e", nr[i]);
            else printf(" %13s", "-");
        }
        printf("\n");
    }
    if (same)
        printf("%ld stage%s pass on every schedule (not listed; --all-metrics lists them)\n", same,
               same == 1 ? "" : "s");
    if (n > 1)
        printf("largest difference between schedules: %.3e%s%s (captured outputs at the same positions)\n", worst,
               wkey[0] ? " at " : "", wkey);
}

/* `replay --capture A --capture B ...`: the same tokens under several
 * schedules. Each capture is replayed and judged on its own (one receipt
 * each), then the verdicts side by side and the schedules' differences
 * (harness/capture/schedules.h). Exit 0 when every schedule passes, 1 when
 * one fails, 2 when a capture cannot be read or the tokens differ. */
static int schedules(const dsv4q_replay_args *q, const dsv4q_model *m, const char *dir, const dsv4q_gates *g, int argc,
                     char **argv)
{
    const dsv4q_cli_opts *o = &q->c;
    const int n = q->ncap;
    char err[2048], csha[65], wsha[65], label[160];
    char *pin = NULL;
    dsv4q_capture *cap[8] = {0};
    dsv4q_replay res[8] = {{0}};
    dsv4q_schedule_diff *d[8] = {0};
    char *metrics[8] = {0};
    json_t *root = json_object(), *js = json_array(), *jd = json_array();
    int rc = 2, status = 0;
    if (dsv4q_capture_pins(dir, csha, wsha, &pin, err, sizeof err)) goto fail;
    for (int i = 0; i < n; i++) {
        if (dsv4q_capture_open(&cap[i], q->capture[i], &m->cfg, csha, wsha, err, sizeof err)) goto fail;
        if (i && dsv4q_schedule_same_tokens(cap[0], cap[i], err, sizeof err)) goto fail;
    }
    printf("dsv4q replay: %d schedules of the same tokens, each judged on its own inputs, then compared\n", n);
    const long nslot = dsv4q_stage_nslots_arch(m->cfg.arch, m->cfg.n_layers);
    for (int i = 0; i < n; i++) {
        dsv4q_schedule_label(cap[i], label, sizeof label);
        dsv4q_replay_opts ro = {.gates = g, .whole_model = !q->no_model, .quiet = o->quiet};
        if (!o->quiet) fprintf(stderr, "[replay] schedule %c: %s\n", COL(i), cap[i]->path);
        if (dsv4q_replay_run(&res[i], m, cap[i], &ro, err, sizeof err)) goto fail;
        const int st = dsv4q_replay_status(&res[i]);
        status |= st;
        printf("  %c  %s: %s; engine %s; %d pass, %d FAIL, %d not checkable -> %s\n", COL(i), cap[i]->path, label,
               cap[i]->engine, res[i].npass, res[i].nfail, res[i].nunc, st ? "FAIL" : "PASS");
        if (!(d[i] = calloc((size_t)nslot, sizeof *d[i]))) {
            snprintf(err, sizeof err, "out of memory");
            goto fail;
        }
        if (i && dsv4q_schedule_diff_run(cap[0], cap[i], &m->cfg, d[i], err, sizeof err)) goto fail;
        metrics[i] = dsv4q_replay_json(&res[i], cap[i], g);
        json_t *e = json_object();
        json_object_set_new(e, "schedule", json_string(label));
        json_object_set_new(e, "replay", metrics[i] ? json_loads(metrics[i], 0, NULL) : json_null());
        json_array_append_new(js, e);
    }
    print_matrix(res, n, d, q->all_metrics, jd);
    printf("\nwhole model         ");
    for (int i = 0; i < n; i++) printf(" %-13s", dsv4q_replay_verdict_name(res[i].model.verdict));
    printf("\n");
    for (int i = 0; i < n; i++)
        if (res[i].nfail) {
            printf("\nschedule %c fails:\n", COL(i));
            dsv4q_replay_print_failed(stdout, &res[i]);
        }
    json_object_set_new(root, "schedules", js);
    json_object_set_new(root, "differences", jd);
    js = jd = NULL;
    if (o->json && json_dump_file(root, o->json, JSON_INDENT(1))) {
        fprintf(stderr, "dsv4q replay: cannot write %s\n", o->json);
        goto out;
    }
    if (q->junit) {
        dsv4q_junit *ju = NULL;
        if (dsv4q_junit_open(&ju, q->junit, err, sizeof err)) goto fail;
        for (int i = 0; i < n; i++) {
            char suite[300];
            dsv4q_schedule_label(cap[i], label, sizeof label);
            snprintf(suite, sizeof suite, "%s [%c: %s]", cap[i]->engine, COL(i), label);
            dsv4q_rreport_junit(ju, &res[i], suite);
        }
        if (dsv4q_junit_close(ju, err, sizeof err)) goto fail;
    }
    /* the outputs are written: a receipt per schedule (none for a run whose output failed) */
    for (int i = 0; i < n; i++)
        write_receipt(o, cap[i], g, q->gates ? q->gates : g->origin, pin, metrics[i], dsv4q_replay_status(&res[i]),
                      argc, argv);
    rc = status ? 1 : 0;
    goto out;
fail:
    fprintf(stderr, "dsv4q replay: %s\n", err);
out:
    json_decref(root);
    json_decref(js);
    json_decref(jd);
    for (int i = 0; i < n; i++) {
        dsv4q_replay_free(&res[i]);
        dsv4q_capture_close(cap[i]);
        free(d[i]);
        free(metrics[i]);
    }
    free(pin);
    return rc;
}

int dsv4q_cmd_replay(int argc, char **argv)
{
    dsv4q_replay_args q;
    const dsv4q_cli_opts *o = &q.c;
    char err[2048], dir[4096], bnames[1024];
    int prc = dsv4q_cli_parse(argc, argv, &q, sizeof q);
    if (prc >= 0) return prc;
    if (dsv4q_cli_db_check(o, "replay")) return 2;   /* before any work */
    dsv4q_cli_threads(o);
    dsv4q_gates g;
    if (q.gates ? dsv4q_gates_load(&g, q.gates, err, sizeof err) : dsv4q_gates_default(&g, err, sizeof err)) {
        fprintf(stderr, "dsv4q replay: %s\n", err);
        return 2;
    }
    dsv4q_model *m;
    if (dsv4q_cli_start("replay", o, dir, sizeof dir, &m, NULL)) return 2;
    if (q.ncap > 1) {
        const int src = schedules(&q, m, dir, &g, argc, argv);
        dsv4q_model_close(m);
        return src;
    }
    char csha[65], wsha[65];
    char *pin = NULL, *metrics = NULL;
    dsv4q_capture *cap = NULL;
    dsv4q_replay res = {0};
    int rc = 2;
    if (dsv4q_capture_pins(dir, csha, wsha, &pin, err, sizeof err) ||
        dsv4q_capture_open(&cap, q.capture[0], &m->cfg, csha, wsha, err, sizeof err))
        goto fail;
    dsv4q_boundary_format(cap->bs & dsv4q_boundary_arch_mask(m->cfg.arch), bnames, sizeof bnames);
    printf("dsv4q replay: per-stage qualification of an engine capture on its own inputs\n");
    printf("  capture    %s (%d calls, positions %ld..%ld, %ld tensors; sha256 %.16s...)\n", cap->path, cap->ncalls,
           cap->calls[0].pos, cap->max_pos - 1, cap->ntensors, cap->sha256);
    printf("  engine     %s %s\n", cap->engine, cap->engine_version);
    printf("  profile    %s%s%s (claimed); effective boundaries: %s\n", cap->profile, cap->boundary[0] ? " + " : "",
           cap->boundary, bnames);
    printf("  model      %s (%s; config.json sha256 %.16s... %s; weights %s)\n", dir,
           m->cfg.name[0] ? m->cfg.name : "config.json", csha, "matches",
           cap->weights_sha256[0] ? "match" : "not pinned by the capture");
    printf("  reference  oracle-f64/%s on the captured inputs; level = oracle-f32 vs oracle-f64 on the same inputs\n",
           cap->profile);
    dsv4q_replay_opts ro = {.gates = &g, .whole_model = !q.no_model, .quiet = o->quiet};
    if (dsv4q_replay_run(&res, m, cap, &ro, err, sizeof err)) goto fail;
    dsv4q_replay_print(stdout, &res, &g, q.all_metrics);
    int st = dsv4q_replay_status(&res);
    metrics = dsv4q_replay_json(&res, cap, &g);
    if (o->json) {
        FILE *f = dsv4q_out_open(o->json, NULL, 0);
        if (!f || !metrics || fputs(metrics, f) < 0 || fputs("\n", f) < 0 || dsv4q_out_close(f, NULL, 0)) {
            fprintf(stderr, "dsv4q replay: cannot write %s\n", o->json);
            rc = 2;   /* no receipt for a run whose output failed */
            goto out;
        }
    }
    dsv4q_junit *ju = NULL;
    if (q.junit) {
        if (dsv4q_junit_open(&ju, q.junit, err, sizeof err)) goto fail;
        dsv4q_rreport_junit(ju, &res, cap->engine);
        if (dsv4q_junit_close(ju, err, sizeof err)) { fprintf(stderr, "dsv4q replay: %s\n", err); st = 2; }
    }
    write_receipt(o, cap, &g, q.gates ? q.gates : g.origin, pin,
                  metrics, st, argc, argv);
    rc = st;
    goto out;
fail:
    fprintf(stderr, "dsv4q replay: %s\n", err);
out:
    free(metrics);
    free(pin);
    dsv4q_replay_free(&res);
    dsv4q_capture_close(cap);
    dsv4q_model_close(m);
    return rc;
}
