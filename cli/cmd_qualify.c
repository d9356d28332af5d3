/*
 * cmd_qualify.c - `dsv4q qualify`: operator qualification of a backend.
 *
 * Modes and options are the command table's (cli/cmdtab.c, `dsv4q help
 * qualify`); this file reads them from dsv4q_qualify_args. Four modes:
 * the operator cases (--seeds A-B: every selected case once per seed A..B,
 * the key's seed replaced: inputs drawn from hash(key, seed)); --list, the
 * case keys; --list-ops, the operator contract; --whole-model, the model
 * composed from B's operators (harness/qualify/qualify_model.h): prefill of
 * the prompt + M teacher-forced decode steps in one isolated child, logits
 * judged with the gates' `model` section against oracle-f64 of B's profile
 * (level: oracle-f32), and every stage on the reference run's inputs.
 *
 * --profile P / --boundary NAME=on|off,...: judge every backend as THIS
 * declaration (a base profile + overrides + engine storage points, e.g.
 * --profile qat --boundary act_q8_0,kv_f16) instead of the one the backend
 * declares; a bad one exits 2. Reports print "judged as declared: ...".
 * --format-gate NRMS: for engine-stored weights (ABI v2 load_weight), FAIL
 * a case whose format error (oracle on the engine's weights vs on the
 * reference weights) exceeds NRMS; by default it is reported only.
 *
 * B is a built-in name (oracle-f32, cpu-ref, mutant:NAME) or a path to a
 * plugin .so (abi/dsv4q_backend.h). Several --backend share one pass
 * over the cases (inputs and references are built once). Prints the table
 * (case, metric, value, level, bound, verdict) per backend, writes one
 * receipt per backend, and exits 0 (all pass), 1 (a case failed or the
 * backend crashed / hung / errored), 2 (usage error, gate file error, or a
 * backend that cannot be loaded: missing symbol, wrong ABI version, entry
 * point crash).
 */
#include <fnmatch.h>
#include "base/file.h"
#include <stdlib.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "cli/junit.h"
#include "cli/qreport.h"
#include "gates/gates.h"
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"
#include "harness/qualify/qualify_model.h"
#include "io/model.h"
#include "oracle/boundary.h"
#include "receipts/receipts.h"

static int write_receipt(const dsv4q_cli_opts *o, const dsv4q_qualify_result *q, const dsv4q_gates *g, const char *gate_path,
                          const char *metrics, int status, int argc, char **argv)
{
    char err[1024], so_sha[DSV4Q_SHA256_HEX + 1] = "", gate_sha[DSV4Q_SHA256_HEX + 1] = "";
    if (q->desc.is_path && dsv4q_sha256_file(q->desc.spec, so_sha, NULL, err, sizeof err)) so_sha[0] = 0;
    if (gate_path && dsv4q_sha256_file(gate_path, gate_sha, NULL, err, sizeof err)) gate_sha[0] = 0;
    dsv4q_receipt r = {.kind = "qualify", .backend_id = q->desc.spec,
                       .backend_version = q->desc.version, .backend_sha256 = so_sha, .profile = q->profile,
                       .widths = "f32,f64", .gate_file = g->origin, .gate_sha256 = gate_sha, .metrics_json = metrics,
                       .verdict = status == 0 ? "pass" : status == 1 ? "fail" : "error"};
    return dsv4q_cli_receipt_store("qualify", o, &r, argc, argv, 0);
}

/* --whole-model: one composed run per backend and token seed, judged with
 * gates.model (the logits) and stage by stage (harness/capture/stagewise.h).
 * --seeds A-B: the synthetic prompt of each seed A..B in turn (one result
 * and one receipt each); without it, the one prompt of --seed/--tokens. */
static int whole_model(const dsv4q_qualify_args *q, const dsv4q_gates *g, int argc, char **argv,
                       const char *declare)
{
    const dsv4q_cli_opts *o = &q->c;
    char err[2048], dir[4096];
    long slo = 0, shi = 0;
    if (q->seeds && dsv4q_qualify_parse_seeds(q->seeds, &slo, &shi, err, sizeof err)) {
        fprintf(stderr, "dsv4q qualify: %s\n", err);
        return 2;
    }
    dsv4q_model *m;
    dsv4q_tokens t0;
    if (dsv4q_cli_start("qualify", o, dir, sizeof dir, &m, &t0)) return 2;
    const int ns = q->seeds ? (int)(shi - slo + 1) : 1, nr = q->nb * ns;
    dsv4q_tokens *ts = calloc((size_t)ns, sizeof *ts);
    int32_t **ids = calloc((size_t)ns, sizeof *ids);
    int worst = 0;
    if (!ts || !ids) {
        fprintf(stderr, "dsv4q qualify: out of memory\n");
        worst = 2;
    }
    for (int k = 0; !worst && k < ns; k++) {
        if (!q->seeds) ts[k] = t0, memset(&t0, 0, sizeof t0);
        else {
            dsv4q_cli_opts ok = *o;
            ok.seed = slo + k;
            if (dsv4q_cli_tokens(&ok, m->cfg.vocab_size, &ts[k], err, sizeof err)) {
                fprintf(stderr, "dsv4q qualify: %s\n", err);
                worst = 2;
                break;
            }
        }
        const dsv4q_tokens *t = &ts[k];
        if (!(ids[k] = malloc(sizeof(int32_t) * (size_t)(t->nprompt + t->nteacher + 1)))) {
            fprintf(stderr, "dsv4q qualify: out of memory\n");
            worst = 2;
            break;
        }
        memcpy(ids[k], t->prompt, sizeof(int32_t) * (size_t)t->nprompt);
        if (t->nteacher) memcpy(ids[k] + t->nprompt, t->teacher, sizeof(int32_t) * (size_t)t->nteacher);
    }
    dsv4q_tokens_free(&t0);
    printf("model %s (%s, %d layers, dim %d, vocab %d); tokens %s%s\n\n", dir,
           m->cfg.name[0] ? m->cfg.name : "config.json", m->cfg.n_layers, m->cfg.dim, m->cfg.vocab_size,
           ts && ts[0].source[0] ? ts[0].source : "-", ns > 1 ? " (and the next seeds, one run each)" : "");
    dsv4q_wm_opts wo = {.gates = g, .iso = {q->timeout, q->no_isolate},
                        .flags = q->sparse_decode ? DSV4Q_WM_SPARSE_DECODE : 0, .quiet = o->quiet,
                        .declare = declare};
    FILE *jf = NULL;
    if (!worst && o->json && !(jf = dsv4q_out_open(o->json, NULL, 0)))
        fprintf(stderr, "dsv4q qualify: cannot write %s\n", o->json);
    if (jf && nr > 1) fputs("[", jf);
    char *pin = NULL, *cfgjson = dsv4q_config_to_json(&m->cfg), *cmdline = dsv4q_command_line(argc, argv);
    if (dsv4q_pin_checkpoint(dir, &pin, err, sizeof err)) fprintf(stderr, "dsv4q qualify: %s\n", err);
    char gate_sha[DSV4Q_SHA256_HEX + 1] = "";
    if (dsv4q_sha256_file(g->origin, gate_sha, NULL, err, sizeof err)) gate_sha[0] = 0;
    /* results are kept until every output is in place: no receipt for a
     * command whose JSON failed (docs/robustness.md) */
    dsv4q_wm_result *rs = calloc((size_t)nr, sizeof *rs);
    char **mets = calloc((size_t)nr, sizeof *mets);
    char *ran = calloc((size_t)nr, 1);   /* 1: run i has a result (a backend that cannot load runs once) */
    int nr_done = 0, harness_err = worst == 2, nwritten = 0;
    if (!harness_err && (!rs || !mets || !ran)) {
        fprintf(stderr, "dsv4q qualify: out of memory\n");
        worst = 2;
        harness_err = 1;
    }
    for (int i = 0; !harness_err && i < nr; i++) {
        const int b = i / ns, k = i % ns;
        dsv4q_wm_result *r = &rs[i];
        if (!o->quiet) fprintf(stderr, "[qualify] whole model: %s, tokens %s\n", q->backend[b], ts[k].source);
        if (ns > 1) printf("tokens %s\n", ts[k].source);
        if (dsv4q_wm_qualify(q->backend[b], m, ids[k], ts[k].nprompt, ts[k].nteacher, &wo, r, err, sizeof err)) {
            fprintf(stderr, "dsv4q qualify: %s\n", err);
            dsv4q_wm_free(r);
            worst = 2;
            harness_err = 1;   /* stop: the runs so far keep their results */
            break;
        }
        ran[i] = 1;
        nr_done = i + 1;
        int st = dsv4q_wm_status(r);
        if (st > worst) worst = st;
        if (r->load_failed) fprintf(stderr, "dsv4q qualify: %s\n", r->msg);
        dsv4q_wm_print(stdout, r, g);
        mets[i] = dsv4q_wm_json(r, g, ts[k].source);
        if (jf && mets[i]) fprintf(jf, "%s%s", nwritten++ ? "," : "", mets[i]);
        if (i + 1 < nr) printf("\n");
        if (r->load_failed) i = (b + 1) * ns - 1;   /* the same failure for every seed: say it once, go on */
    }
    int out_failed = 0;
    if (jf) {
        if (nr > 1) fputs("]", jf);
        fputs("\n", jf);
        if (dsv4q_out_close(jf, NULL, 0)) out_failed = 1;   /* ENOSPC/EIO: exit 2, no file left */
        jf = NULL;
    }
    if (out_failed) {
        fprintf(stderr, "dsv4q qualify: no receipt stored: the JSON output failed\n");
        worst = 2;
    }
    if (nr > 1) {   /* one line for CI logs over every run */
        int np = 0, nran = 0;
        for (int i = 0; i < nr_done; i++) {
            nran += ran[i];
            np += ran[i] && dsv4q_wm_status(&rs[i]) == 0;
        }
        printf("\nwhole model: %d of %d planned runs pass (%d backend(s) x %d token seed(s)); %d ran%s\n", np, nr,
               q->nb, ns, nran, harness_err ? ", then a harness error stopped the rest (exit 2)" : "");
    }
    for (int i = 0; i < nr_done; i++) {
        if (!ran[i]) continue;
        dsv4q_wm_result *r = &rs[i];
        const dsv4q_tokens *t = &ts[i % ns];
        int st = dsv4q_wm_status(r);
        char so_sha[DSV4Q_SHA256_HEX + 1] = "";
        if (r->desc.is_path && dsv4q_sha256_file(r->desc.spec, so_sha, NULL, err, sizeof err)) so_sha[0] = 0;
        dsv4q_receipt rc = {.kind = "qualify", .command_line = cmdline, .backend_id = r->desc.spec,
                            .backend_version = r->desc.version, .backend_sha256 = so_sha, .checkpoint_pin_json = pin,
                            .tokens_pin = t->pin, .config_json = cfgjson, .profile = r->profile, .widths = "f32,f64",
                            .gate_file = g->origin, .gate_sha256 = gate_sha, .metrics_json = mets[i],
                            .verdict = st == 0 ? "pass" : st == 1 ? "fail" : "error"};
        if (!out_failed && !r->load_failed)   /* a backend that cannot load or init here is not a measurement */
            dsv4q_cli_receipt_store("qualify", o, &rc, argc, argv, 0);
        free(mets[i]);
        dsv4q_wm_free(r);
    }
    free(rs);
    free(mets);
    free(ran);
    if (jf) dsv4q_out_discard(jf);
    free(pin);
    free(cfgjson);
    free(cmdline);
    for (int k = 0; ids && ts && k < ns; k++) {
        free(ids[k]);
        dsv4q_tokens_free(&ts[k]);
    }
    free(ids);
    free(ts);
    dsv4q_model_close(m);
    return worst;
}

/* --case patterns -> explicit keys. A full key "op(...)" is taken as
 * given (the harness canonicalises it, whatever --shapes says); a pattern
 * with * ? or [ is a glob over the case keys of the selected shapes and
 * ops; anything else is a substring of those keys. A pattern that selects
 * nothing is a usage error naming it. Returns a malloc'd NULL-terminated
 * list (strings point into the case table or argv), or NULL (message
 * printed). */
static const char **expand_cases(const dsv4q_qualify_args *q, unsigned sets, uint64_t ops)
{
    int cap = dsv4q_case_count() * q->nk + q->nk + 1, n = 0;
    const char **keys = calloc((size_t)cap, sizeof *keys);
    if (!keys) { fprintf(stderr, "dsv4q qualify: out of memory\n"); return NULL; }
    for (int p = 0; p < q->nk; p++) {
        const char *pat = q->cases[p];
        size_t len = strlen(pat);
        int glob = strpbrk(pat, "*?[") != NULL, full = !glob && len && strchr(pat, '(') && pat[len - 1] == ')';
        if (full) { keys[n++] = pat; continue; }
        int hits = 0;
        for (int i = 0; i < dsv4q_case_count(); i++) {
            const dsv4q_case_entry *e = dsv4q_case_at(i);
            char op[32];
            snprintf(op, sizeof op, "%.*s", (int)strcspn(e->key, "("), e->key);
            if (!(e->sets & sets) || (ops && !(ops & DSV4Q_CAP(dsv4q_op_find(op))))) continue;
            if (glob ? fnmatch(pat, e->key, 0) != 0 : !strstr(e->key, pat)) continue;
            hits++;
            int dup = 0;
            for (int k = 0; k < n; k++) dup |= !strcmp(keys[k], e->key);
            if (!dup) keys[n++] = e->key;
        }
        if (!hits) {
            fprintf(stderr, "dsv4q qualify: --case %s matches no case of the selected shapes/ops (see dsv4q qualify --list)\n", pat);
            free(keys);
            return NULL;
        }
    }
    keys[n] = NULL;
    return keys;
}

/* --profile / --boundary: a declaration that replaces the backends' own
 * (honoured, or refused with exit 2; never ignored). NULL when neither was
 * given; decl receives "PROFILE[:BOUNDARIES]" (--boundary alone amends the
 * source profile). */
static const char *cli_declaration(const dsv4q_cli_opts *o, char *decl, size_t len)
{
    if (!o->profile_set && !o->boundary[0]) return NULL;
    const char *p = o->profile_set ? o->profile : "source";
    int has_colon = strchr(p, ':') != NULL;
    snprintf(decl, len, "%s%s%s", p, o->boundary[0] ? (has_colon ? "," : ":") : "", o->boundary);
    return decl;
}

int dsv4q_cmd_qualify(int argc, char **argv)
{
    dsv4q_qualify_args q;
    const dsv4q_cli_opts *o = &q.c;
    char err[2048];
    int prc = dsv4q_cli_parse(argc, argv, &q, sizeof q);
    if (prc >= 0) return prc;
    if (q.list_ops) {
        if (q.markdown) dsv4q_op_markdown(stdout);
        else if (q.header) dsv4q_op_header_summary(stdout);
        else
            for (int i = 0; i < DSV4Q_OP_COUNT; i++) {
                const dsv4q_op_info *oi = dsv4q_op_get(i);
                printf("%-14s in %d, out %d, params %d   %s\n", oi->name, oi->nin, oi->nout, oi->nparam, oi->oracle);
            }
        return 0;
    }
    const unsigned sets = (unsigned)q.sets;
    uint64_t ops = 0;
    if (q.ops && dsv4q_qualify_parse_ops(q.ops, &ops, err, sizeof err)) {
        fprintf(stderr, "dsv4q qualify: %s\n", err);
        return 2;
    }
    if (q.list) {
        for (int i = 0; i < dsv4q_case_count(); i++) {
            const dsv4q_case_entry *e = dsv4q_case_at(i);
            char op[32];
            snprintf(op, sizeof op, "%.*s", (int)strcspn(e->key, "("), e->key);
            if ((e->sets & sets) && (!ops || (ops & DSV4Q_CAP(dsv4q_op_find(op))))) printf("%s\n", e->key);
        }
        return 0;
    }
    if (dsv4q_cli_db_check(o, "qualify")) return 2;   /* before any work */
    dsv4q_gates g;
    if ((q.gates ? dsv4q_gates_load(&g, q.gates, err, sizeof err) : dsv4q_gates_default(&g, err, sizeof err))) {
        fprintf(stderr, "dsv4q qualify: %s\n", err);
        return 2;
    }
    char decl[1400];
    const char *declare = cli_declaration(o, decl, sizeof decl);
    uint64_t dset;
    if (declare && dsv4q_declaration_parse(declare, &dset, err, sizeof err)) {
        fprintf(stderr, "dsv4q qualify: --profile/--boundary: %s\n", err);
        return 2;
    }
    if (q.whole_model) {
        dsv4q_cli_threads(o);
        return whole_model(&q, &g, argc, argv, declare);
    }
    dsv4q_qreport_opts ro = {.all_metrics = q.all_metrics, .failures_only = q.failures_only,
                             .require_all = q.require_all};
    if (q.require && dsv4q_qualify_parse_ops(q.require, &ro.require, err, sizeof err)) {
        fprintf(stderr, "dsv4q qualify: --require: %s\n", err);
        return 2;
    }
    const char **keys = NULL;
    if (q.nk && !(keys = expand_cases(&q, sets, ops))) return 2;
    dsv4q_qualify_opts qo = {.gates = &g, .sets = sets, .ops = ops, .keys = keys,
                          .iso = {q.timeout, q.no_isolate}, .quiet = o->quiet,
                          .stop_on_fail = q.stop_on_fail, .declare = declare, .format_gate = q.format_gate};
    if (q.seeds && dsv4q_qualify_parse_seeds(q.seeds, &qo.seed_lo, &qo.seed_hi, err, sizeof err)) {
        fprintf(stderr, "dsv4q qualify: %s\n", err);
        return 2;
    }
    dsv4q_qualify_result res[DSV4Q_QUALIFY_MAX_BACKENDS];
    dsv4q_cli_threads(o);
    int qrc = dsv4q_qualify(q.backend, q.nb, &qo, res, err, sizeof err);
    free(keys);
    if (qrc) {
        fprintf(stderr, "dsv4q qualify: %s\n", err);
        return 2;
    }
    dsv4q_junit *ju = NULL;
    if (q.junit && dsv4q_junit_open(&ju, q.junit, err, sizeof err)) {
        fprintf(stderr, "dsv4q qualify: %s\n", err);
        return 2;
    }
    int worst = 0;
    FILE *jf = NULL;
    if (o->json && !(jf = dsv4q_out_open(o->json, NULL, 0))) {
        fprintf(stderr, "dsv4q qualify: cannot write %s\n", o->json);
        return 2;
    }
    if (jf && q.nb > 1) fputs("[", jf);
    for (int b = 0; b < q.nb; b++) {
        int st = dsv4q_qreport_status(&res[b], &ro);
        if (st > worst) worst = st;
        if (res[b].load_failed) fprintf(stderr, "dsv4q qualify: %s\n", res[b].msg);
        dsv4q_qreport_print(stdout, &res[b], &g, &ro);
        if (ju) dsv4q_qreport_junit(ju, &res[b], &ro);
        char *metrics = dsv4q_qualify_json(&res[b], &g);
        if (jf && metrics) fprintf(jf, "%s%s", b ? "," : "", metrics);
        free(metrics);
        if (b + 1 < q.nb) printf("\n");
    }
    int out_failed = 0;
    if (jf) {
        if (q.nb > 1) fputs("]", jf);
        fputs("\n", jf);
        if (dsv4q_out_close(jf, NULL, 0)) out_failed = 1;   /* ENOSPC/EIO: exit 2, no file left */
    }
    /* receipts only after every output of the command is in place */
    for (int b = 0; b < q.nb; b++) {
        int st = dsv4q_qualify_status(&res[b]);
        char *metrics = out_failed ? NULL : dsv4q_qualify_json(&res[b], &g);
        /* a failed load is not a measurement: no receipt for it */
        if (!out_failed && !res[b].load_failed && write_receipt(o, &res[b], &g, g.origin, metrics, st, argc, argv))
            worst = 2;
        free(metrics);
        dsv4q_qualify_free(&res[b]);
    }
    if (out_failed) {
        fprintf(stderr, "dsv4q qualify: no receipt stored: the JSON output failed\n");
        worst = 2;
    }
    if (ju && dsv4q_junit_close(ju, err, sizeof err)) {
        fprintf(stderr, "dsv4q qualify: %s\n", err);
        worst = 2;
    }
    return worst;
}
