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
    char csha[65], wsha[65];
    char *pin = NULL, *metrics = NULL;
    dsv4q_capture *cap = NULL;
    dsv4q_replay res = {0};
    int rc = 2;
    if (dsv4q_capture_pins(dir, csha, wsha, &pin, err, sizeof err) ||
        dsv4q_capture_open(&cap, q.capture, &m->cfg, csha, wsha, err, sizeof err))
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
