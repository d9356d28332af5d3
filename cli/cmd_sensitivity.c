/*
 * cmd_sensitivity.c - `dsv4q sensitivity`: the fp32 sensitivity floor.
 *
 * Runs the same checkpoint and tokens through the f64 and the f32 oracle
 * (same profile, same decoded inputs), records every stage tap of the f64
 * run and compares the f32 run against it as it goes, so the per-layer,
 * per-stage table shows where the gap appears and how it grows. The
 * whole-model numbers (logit NRMS over all rows, max abs, greedy agreement)
 * are the floor a whole-model kernel gate is set against. Writes a receipt.
 */
#include "base/file.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "cli/common.h"
#include "cli/taps.h"
#include "harness/measure/metrics.h"
#include "io/model.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static const char *const table_stages[] = {"hc_attn_pre", "q", "kv", "attn_out", "attn", "hc_attn_post",
                                           "moe_out", "block_out", NULL};
/* V4.1 (docs/v41.md): the Engram output, the compressed-KV rows of the kv
 * sources (ratio 1 / 2) and the pre-mix a block hands on join them */
static const char *const table_stages41[] = {
    "engram_out", "hc_attn_pre",  "q",       "kv",        "ckv",          "attn_out",
    "attn",       "hc_attn_post", "moe_out", "block_out", "block_premix", NULL};

/* Both widths call by call: each call (a chunk of the prompt, then each
 * decode step) runs at f64, its taps recorded, then at f32, compared
 * against them, and the values are dropped: the taps of one call are kept,
 * not of the whole run. logits [1 + nteacher, vocab] per width (the last
 * prompt token's, then each step's). */
static int run_both(const dsv4q_model *m, uint64_t bs, const dsv4q_tokens *t, long chunk, dsv4q_tapset *ts, double *l64,
                    double *l32, char *err, size_t errlen)
{
    dsv4q_run *r64 = NULL, *r32 = NULL;
    const long V = m->cfg.vocab_size, S = t->nprompt, end = S + t->nteacher;
    int rc = -1;
    if (dsv4q_run_open(&r64, m, 64, bs, end, dsv4q_tapset_cb, ts, err, errlen) ||
        dsv4q_run_open(&r32, m, 32, bs, end, dsv4q_tapset_cb, ts, err, errlen))
        goto out;
    if (chunk < S && (dsv4q_run_set_prefill(r64, S, err, errlen) || dsv4q_run_set_prefill(r32, S, err, errlen)))
        goto out;
    for (long p = 0, n; p < end; p += n) {
        n = p < S ? (S - p < chunk ? S - p : chunk) : 1;
        const int32_t *ids = p < S ? t->prompt + p : &t->teacher[p - S];
        const long row = p < S ? 0 : p - S + 1; /* earlier chunks' logits are overwritten */
        if (ts->eta) dsv4q_eta_call(ts->eta, p, n), ts->eta->weight = 1;
        ts->compare = 0;
        ts->label = "f64";
        if (dsv4q_run_feed(r64, ids, n, l64 + row * V, err, errlen)) goto out;
        ts->compare = 1;
        ts->label = "f32";
        if (ts->eta) dsv4q_eta_call(ts->eta, p, n), ts->eta->weight = DSV4Q_ETA_F32;
        if (dsv4q_run_feed(r32, ids, n, l32 + row * V, err, errlen)) goto out;
        dsv4q_tapset_drop_data(ts);
        if (ts->oom) {
            snprintf(err, errlen, "out of memory recording stage taps");
            goto out;
        }
    }
    rc = 0;
out:
    dsv4q_run_close(r64);
    dsv4q_run_close(r32);
    if (!ts->quiet && isatty(2)) fprintf(stderr, "\n");
    return rc;
}

int dsv4q_cmd_sensitivity(int argc, char **argv)
{
    dsv4q_cli_opts o;
    char err[1024], dir[4096], bnames[1024];
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    if (dsv4q_cli_db_check(&o, "sensitivity")) return 2;   /* before any work */
    dsv4q_cli_threads(&o);
    uint64_t bs;
    if (dsv4q_cli_bset(&o, &bs, err, sizeof err)) {
        fprintf(stderr, "dsv4q sensitivity: %s\n", err);
        return 2;
    }
    dsv4q_model *m;
    dsv4q_tokens t;
    if (dsv4q_cli_start("sensitivity", &o, dir, sizeof dir, &m, &t)) return 2;
    const long V = m->cfg.vocab_size, rows = 1 + t.nteacher;
    dsv4q_boundary_format(bs & dsv4q_boundary_arch_mask(m->cfg.arch), bnames, sizeof bnames);
    printf("dsv4q sensitivity: fp32 vs fp64 oracle on identical decoded inputs\n");
    printf("  model      %s (%s, %d layers, dim %d)\n", dir, m->cfg.name[0] ? m->cfg.name : "config.json",
           m->cfg.n_layers, m->cfg.dim);
    printf("  tokens     %s (prompt %ld, decode %ld; sha256 %.16s...)\n", t.source, t.nprompt, t.nteacher, t.pin);
    printf("  profile    %s%s%s; effective boundaries: %s\n", o.profile, o.boundary[0] ? " + " : "", o.boundary, bnames);

    /* both runs at once, one call's taps kept: refuse before any work */
    /* a --chunk past the prompt is the one call (and keeps the call count below from overflowing) */
    const long chunk =
        o.chunk ? (o.chunk < t.nprompt ? o.chunk : t.nprompt) : dsv4q_taps_chunk(m, 96, t.nprompt, t.nteacher, 0);
    const long ncalls = (t.nprompt + chunk - 1) / chunk + t.nteacher;
    printf("  prefill    %ld call%s of up to %ld tokens%s\n", (t.nprompt + chunk - 1) / chunk,
           chunk < t.nprompt ? "s" : "", chunk < t.nprompt ? chunk : t.nprompt,
           chunk < t.nprompt ? " (bit-identical to one call)" : "");
    double *l64 = malloc(sizeof(double) * (size_t)(rows * V)), *l32 = malloc(sizeof(double) * (size_t)(rows * V));
    dsv4q_eta eta; /* both widths: each call's work at f64, then at f32 (DSV4Q_ETA_F32) */
    dsv4q_eta_start(&eta, &m->cfg, (1 + DSV4Q_ETA_F32) * dsv4q_plan_work(&m->cfg, t.nprompt, chunk, t.nteacher, 0, 1),
                    m->cfg.n_layers, 1, dsv4q_now());
    dsv4q_tapset ts = {
        .label = "f64", .nlayers = m->cfg.n_layers, .quiet = o.quiet, .total_calls = 2 * ncalls, .eta = &eta};
    int rc = 2;
    if (!l64 || !l32) { fprintf(stderr, "dsv4q sensitivity: out of memory\n"); goto out; }
    if (dsv4q_taps_fit(m, 96, t.nprompt, t.nteacher, chunk, 0, err, sizeof err)) goto fail;
    if (run_both(m, bs, &t, chunk, &ts, l64, l32, err, sizeof err)) goto fail;

    dsv4q_acc whole = {0};
    dsv4q_acc_add(&whole, l32, l64, rows * V);
    long agree = 0;
    for (long r = 0; r < rows; r++) agree += dsv4q_argmax(l32 + r * V, V) == dsv4q_argmax(l64 + r * V, V);
    printf("\nwhole model (logits, %ld rows: last prompt position + %ld decode steps)\n", rows, t.nteacher);
    printf("  NRMS               %.4e\n", dsv4q_acc_nrms(&whole));
    printf("  max abs error      %.4e\n", whole.max_abs);
    printf("  cosine             %.12f\n", dsv4q_acc_cosine(&whole));
    printf("  greedy agreement   %ld/%ld\n", agree, rows);
    printf("  non-finite         f32 %ld, f64 %ld\n", whole.nonfinite_a, whole.nonfinite_b);

    const int v41 = m->cfg.arch == DSV4Q_ARCH_V41;
    const char *const *cols = v41 ? table_stages41 : table_stages;
    if (v41)
        printf("\nper-layer stage NRMS (f32 vs f64, all rows of all calls; ratio = the layer's compress ratio,\n"
               "0 window only, 1 one compressed row per token, 2 pairs pooled; role: k kv source, i index source,\n"
               "c candidate source, m masked by its blocks; idx_flips = query rows whose top-k set differs)\n"
               "  layer ratio role");
    else
        printf("\nper-layer stage NRMS (f32 vs f64, all rows of all calls; ratio = the layer's compress ratio,\n"
               "0 window only, 4 indexed, 128; idx_flips = query rows whose top-k set differs)\n  layer ratio");
    for (int s = 0; cols[s]; s++) printf(" %12s", cols[s]);
    printf(" %9s\n", "idx_flips");
    json_t *jl = json_array();
    for (int L = 0; L < m->cfg.n_layers; L++) {
        const dsv4q_layer_w *lw = &m->layers[L];
        printf("  %5d %5d", L, lw->ratio);
        json_t *row = json_object();
        json_object_set_new(row, "layer", json_integer(L));
        json_object_set_new(row, "ratio", json_integer(lw->ratio));
        if (v41) {
            char role[8];
            snprintf(role, sizeof role, "%s%s%s%s", lw->kv_source ? "k" : "", lw->index_source ? "i" : "",
                     lw->candidate_source ? "c" : "", lw->candidate_consumer ? "m" : "");
            printf(" %4s", role[0] ? role : "-");
            json_object_set_new(row, "role", json_string(role));
        }
        for (int s = 0; cols[s]; s++) {
            dsv4q_tap_entry *e = dsv4q_tapset_find(&ts, L, cols[s]);
            if (e) {
                printf(" %12.3e", dsv4q_acc_nrms(&e->acc));
                json_object_set_new(row, cols[s], json_real(dsv4q_acc_nrms(&e->acc)));
            } else {
                printf(" %12s", "-");
            }
        }
        dsv4q_tap_entry *e = dsv4q_tapset_find(&ts, L, "idx_topk");
        if (e) {
            printf(" %4ld/%-4ld", e->sel_diff, e->sel_rows);
            json_object_set_new(row, "idx_rows_with_flips", json_integer(e->sel_diff));
            json_object_set_new(row, "idx_rows", json_integer(e->sel_rows));
        } else {
            printf(" %9s", "-");
        }
        printf("\n");
        json_array_append_new(jl, row);
    }
    long nonfin = 0;
    /* idx_score holds -inf for masked columns by convention: where f32 and f64
     * masked different columns (another candidate block) that is a selection
     * flip, counted by idx_flips, not a non-finite value */
    for (long i = 0; i < ts.n; i++) nonfin += strcmp(ts.e[i].stage, "idx_score") ? ts.e[i].acc.nonfinite_a : 0;
    printf("  non-finite values in f32 stage taps: %ld\n", nonfin);

    json_t *jm = json_object();
    json_object_set_new(jm, "logit_nrms", json_real(dsv4q_acc_nrms(&whole)));
    json_object_set_new(jm, "logit_max_abs", json_real(whole.max_abs));
    json_object_set_new(jm, "logit_cosine", json_real(dsv4q_acc_cosine(&whole)));
    json_object_set_new(jm, "greedy_agree", json_integer(agree));
    json_object_set_new(jm, "rows", json_integer(rows));
    json_object_set_new(jm, "prefill_chunk", json_integer(chunk < t.nprompt ? chunk : t.nprompt));
    json_object_set_new(jm, "nonfinite_f32", json_integer(whole.nonfinite_a + nonfin));
    json_object_set_new(jm, "layers", jl);
    json_object_set_new(jm, "boundaries", json_string(bnames));
    char *metrics = json_dumps(jm, JSON_COMPACT | JSON_SORT_KEYS);
    if (o.json) {
        FILE *f = dsv4q_out_open(o.json, NULL, 0);
        if (!f || fputs(metrics, f) < 0 || dsv4q_out_close(f, NULL, 0)) {
            dsv4q_out_discard(f);   /* no-op once closed */
            fprintf(stderr, "dsv4q sensitivity: cannot write %s\n", o.json);
            free(metrics);
            json_decref(jm);
            goto out;   /* rc 2, no receipt for a run whose output failed */
        }
    }
    int rrc = dsv4q_cli_receipt(&o, "sensitivity", argc, argv, dir, &m->cfg, &t, "f32,f64", metrics, "info");
    free(metrics);
    json_decref(jm);
    rc = rrc ? 2 : 0;
    goto out;
fail:
    fprintf(stderr, "dsv4q sensitivity: %s\n", err);
out:
    dsv4q_tapset_free(&ts);
    free(l64);
    free(l32);
    dsv4q_tokens_free(&t);
    dsv4q_model_close(m);
    return rc;
}
