/*
 * taps.c - record / compare stage taps (see taps.h). Selection stages
 * (idx_topk, moe_idx) are compared as sets per row, since their order
 * among equal scores is not part of the contract.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/taps.h"
#include "oracle/model_run.h"
#include "oracle/stages.h"

dsv4q_tap_entry *dsv4q_tapset_find(dsv4q_tapset *t, int layer, const char *stage)
{
    for (long i = 0; i < t->n; i++)
        if (t->e[i].layer == layer && strcmp(t->e[i].stage, stage) == 0) return &t->e[i];
    return NULL;
}

static int is_selection(const char *stage)
{
    return dsv4q_tap_is_selection(dsv4q_tap_find(stage));   /* DSV4Q_TAP_LIST */
}

static dsv4q_tap_entry *add_entry(dsv4q_tapset *t, int layer, const char *stage)
{
    if (t->n == t->cap) {
        long cap = t->cap ? 2 * t->cap : 64;
        dsv4q_tap_entry *e = realloc(t->e, sizeof *e * (size_t)cap);
        if (!e) return NULL;
        t->e = e;
        t->cap = cap;
    }
    dsv4q_tap_entry *e = &t->e[t->n++];
    memset(e, 0, sizeof *e);
    e->layer = layer;
    snprintf(e->stage, sizeof e->stage, "%s", stage);
    return e;
}

static void compare_sel(dsv4q_tap_entry *e, const double *a, long n, long rows)
{
    long k = rows ? n / rows : 0;
    for (long r = 0; r < rows; r++) {
        const double *ref = e->data + e->cursor + r * k, *cand = a + r * k;
        int differ = 0;
        for (long i = 0; i < k && !differ; i++) {
            int found = 0;
            for (long j = 0; j < k; j++) if (ref[j] == cand[i]) { found = 1; break; }
            differ = !found;
        }
        e->sel_rows++;
        e->sel_diff += differ;
    }
}

void dsv4q_tapset_cb(void *user, int layer, const char *stage, const double *data, long n, long rows)
{
    dsv4q_tapset *t = user;
    char eta[64] = "";
    if (!stage) {
        if (t->eta) {
            dsv4q_eta_layer(t->eta, layer);
            dsv4q_eta_format(t->eta, dsv4q_now(), eta, sizeof eta);
        }
        if (!t->quiet && isatty(2))
            fprintf(stderr, "\r[%s] call %ld/%ld: layer %d/%d%s%s   ", t->label, t->calls + 1, t->total_calls,
                    layer + 1, t->nlayers, eta[0] ? ", " : "", eta);
        return;
    }
    if (strcmp(stage, "logits") == 0) {
        t->calls++;
        long step = t->total_calls > 10 ? t->total_calls / 10 : 1;
        if (t->eta) dsv4q_eta_format(t->eta, dsv4q_now(), eta, sizeof eta);
        if (!t->quiet && !isatty(2) && (t->calls % step == 0 || t->calls == t->total_calls))
            fprintf(stderr, "[%s] %ld/%ld calls done%s%s\n", t->label, t->calls, t->total_calls, eta[0] ? ", " : "",
                    eta);
    }
    if (t->progress_only) return;
    dsv4q_tap_entry *e = dsv4q_tapset_find(t, layer, stage);
    if (!t->compare) {
        if (!e && !(e = add_entry(t, layer, stage))) { t->oom = 1; return; }
        if (e->n + n > e->cap) {
            long cap = e->cap ? e->cap : 1024;
            while (cap < e->n + n) cap *= 2;
            double *d = realloc(e->data, sizeof(double) * (size_t)cap);
            if (!d) { t->oom = 1; return; }
            e->data = d;
            e->cap = cap;
        }
        if (n) memcpy(e->data + e->n, data, sizeof(double) * (size_t)n);   /* n == 0: data may be NULL */
        e->n += n;
        e->rows += rows;
        return;
    }
    if (!e || e->cursor + n > e->n) return;   /* shape differs: nothing to compare */
    if (is_selection(stage)) compare_sel(e, data, n, rows);
    else dsv4q_acc_add(&e->acc, data, e->data + e->cursor, n);
    e->cursor += n;
}

void dsv4q_tapset_free(dsv4q_tapset *t)
{
    for (long i = 0; i < t->n; i++) free(t->e[i].data);
    free(t->e);
    t->e = NULL;
    t->n = t->cap = 0;
}

void dsv4q_tapset_drop_data(dsv4q_tapset *t)
{
    for (long i = 0; i < t->n; i++) t->e[i].n = t->e[i].cursor = 0;
}

/* Values of every stage tap of one run, from the config: per layer and
 * token the hidden-size rows (hc_attn_pre, attn_norm, attn, hc_ffn_pre,
 * ffn_norm, moe_out), the hc streams (hc_attn_post, block_out), q and
 * attn_out, kv, the MoE weights and ids, and on indexed layers the scores
 * against every compressed row (rows grow with the position: quadratic in
 * the prompt) and the picks; per call the logits. */
static double tap_values(const dsv4q_model *m, double prompt, double decode)
{
    const dsv4q_config *g = &m->cfg;
    const double d = g->dim, hcd = (double)g->hc_mult * g->dim, HD = (double)g->n_heads * g->head_dim;
    const double end = prompt + decode,
                 per_token = 6 * d + 2 * hcd + 2 * HD + g->head_dim + 2.0 * g->n_activated_experts;
    double v = end * (hcd + d) + (1 + decode) * g->vocab_size; /* embed, final_norm; logits */
    for (int li = 0; li < g->n_layers; li++) {
        const int ratio = m->layers[li].ratio;
        v += end * per_token;
        if (ratio == 4 || (g->arch == DSV4Q_ARCH_V41 && ratio > 0))
            v += prompt * (prompt / ratio + 1) + decode * (end / ratio + 1) + end * g->index_topk;
    }
    return v;
}

double dsv4q_taps_bytes(const dsv4q_model *m, int width, long prompt, long decode, long chunk, int all)
{
    const long c = chunk < 1 || chunk > prompt ? prompt : chunk;
    /* one call's taps: the last chunk's rows against the whole prompt's
     * compressed rows, bounded by the prompt's and one decode step's */
    const double mine = all ? tap_values(m, (double)prompt, (double)decode)
                            : tap_values(m, (double)prompt, 0) * ((double)c / prompt) + tap_values(m, 0, 1);
    return dsv4q_run_estimate_bytes(m, width, prompt + decode, prompt, c) + 8 * mine;
}

static double widths_bytes(const dsv4q_model *m, int widths, long prompt, long decode, long chunk, int all)
{
    return (widths & 64 ? dsv4q_taps_bytes(m, 64, prompt, decode, chunk, all) : 0) +
           (widths & 32 ? dsv4q_taps_bytes(m, 32, prompt, decode, chunk, all) : 0);
}

long dsv4q_taps_chunk(const dsv4q_model *m, int widths, long prompt, long decode, int all)
{
    const double have = dsv4q_mem_available();
    if (have <= 0 || widths_bytes(m, widths, prompt, decode, prompt, all) <= have) return prompt;
    long lo = 1, hi = prompt; /* the bytes grow with the chunk: the largest that fits */
    while (lo < hi) {
        const long mid = lo + (hi - lo + 1) / 2;
        if (widths_bytes(m, widths, prompt, decode, mid, all) <= have) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

int dsv4q_taps_fit(const dsv4q_model *m, int widths, long prompt, long decode, long chunk, int all, char *err,
                   size_t errlen)
{
    const double need = widths_bytes(m, widths, prompt, decode, chunk, all);
    const long c = chunk < 1 || chunk > prompt ? prompt : chunk;
    double taps = need; /* less the runs themselves */
    if (widths & 64) taps -= dsv4q_run_estimate_bytes(m, 64, prompt + decode, prompt, c);
    if (widths & 32) taps -= dsv4q_run_estimate_bytes(m, 32, prompt + decode, prompt, c);
    const double have = dsv4q_mem_available();
    if (have > 0 && need > have) {
        const long fit = dsv4q_taps_chunk(m, widths, prompt, decode, all);
        char hint[80] = "";
        /* every tap kept (run --taps) is the one call's: no chunk to suggest */
        if (!all && fit < c && widths_bytes(m, widths, prompt, decode, fit, all) <= have)
            snprintf(hint, sizeof hint, ", or --chunk %ld", fit);
        snprintf(err, errlen,
                 "a run of %ld + %ld tokens (prompt in calls of %ld) that keeps %s needs about %.2f GB "
                 "(%.2f GB of taps: the indexer's scores grow with the square of the prompt), more than the %.2f GB "
                 "of memory available; use a shorter prompt%s",
                 prompt, decode, c, all ? "every stage tap" : "one call's stage taps", need / 1e9, taps / 1e9,
                 have / 1e9, hint);
        return -1;
    }
    return 0;
}
