/*
 * stagewise.c - the whole-model verdict stage by stage (see stagewise.h for
 * the method and invariants S1..S3).
 *
 * One reference run (oracle-f64) drives everything: its stage hook hands
 * each stage's inputs to the candidate run and the oracle-f32 run (both at
 * f32, one stage at a time) and accumulates the comparison in the stage's
 * slot with replay's own metric code. Nothing is stored between stages, so
 * memory is three runs' caches plus one stage's tensors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness/capture/stagewise.h"

typedef struct sw {
    const dsv4q_model *m;
    uint64_t bs;
    dsv4q_replay *res;
    dsv4q_runstate_f32 *cand, *lvl;
    double *buf[2][DSV4Q_STAGE_MAX_T];   /* candidate / level outputs */
    long cap;
    int failed, cand_failed;
    char *err;
    size_t errlen;
} sw;

static int grow(sw *x, long n)
{
    if (n <= x->cap) return 0;
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < DSV4Q_STAGE_MAX_T; t++) {
            double *p = realloc(x->buf[k][t], sizeof(double) * (size_t)n);
            if (!p) return -1;
            x->buf[k][t] = p;
        }
    x->cap = n;
    return 0;
}

/* The reference run's stage hook: never rewrites its outputs (returns 0),
 * so the reference stays the reference. */
static int hook(void *user, const dsv4q_stage_io *io)
{
    sw *x = user;
    const dsv4q_config *g = &x->m->cfg;
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(g->arch, io->stage);
    if (x->failed || !si) return 0;
    long n[DSV4Q_STAGE_MAX_T] = {0}, last[DSV4Q_STAGE_MAX_T] = {0}, nmax = 1;
    int dt[DSV4Q_STAGE_MAX_T] = {0};
    for (int t = 0; t < si->nout; t++) {
        n[t] = (long)dsv4q_stage_numel(&si->out[t], g, io->s);
        if (n[t] > nmax) nmax = n[t];
        last[t] = dsv4q_stage_row_len(&si->out[t], g, io->s);
        dt[t] = dsv4q_replay_dtype(DSV4Q_DT_F32, &si->out[t], x->bs);
    }
    const long slot = dsv4q_stage_slot_of_arch(g->arch, g->n_layers, io->stage, io->layer);
    if (slot < 0 || slot >= x->res->nst) return 0;   /* not a row of the table (MTP layers) */
    char key[48];
    dsv4q_replay_key(&x->res->st[slot], key, sizeof key);
    if (grow(x, nmax)) {
        snprintf(x->err, x->errlen, "stage %s: out of memory", key);
        x->failed = 1;
        return 0;
    }
    dsv4q_stage_io ic = *io, il = *io;
    for (int t = 0; t < si->nout; t++) {
        ic.out[t] = x->buf[0][t];
        il.out[t] = x->buf[1][t];
    }
    if (dsv4q_stage_exec_f32(x->cand, &ic)) {
        snprintf(x->err, x->errlen, "stage %s at position %ld: the candidate's operators failed", key, io->pos0);
        x->failed = x->cand_failed = 1;
        return 0;
    }
    if (dsv4q_stage_exec_f32(x->lvl, &il)) {
        snprintf(x->err, x->errlen, "stage %s at position %ld: oracle-f32 failed (out of memory)", key, io->pos0);
        x->failed = 1;
        return 0;
    }
    const double *cand[DSV4Q_STAGE_MAX_T] = {0}, *lvl[DSV4Q_STAGE_MAX_T] = {0};
    for (int t = 0; t < si->nout; t++) {
        cand[t] = ic.out[t];
        lvl[t] = il.out[t];
    }
    dsv4q_replay_add(&x->res->st[slot], cand, (const double *const *)io->out, lvl, n, last, dt, io->pos0, "candidate",
                     "candidate");
    return 0;
}

int dsv4q_stagewise_run(dsv4q_replay *res, const dsv4q_model *m, uint64_t bs, const dsv4q_provider_f32 *cand,
                        void *cand_ctx, const int32_t *ids, long nprompt, long ndecode, int *cand_fails, char *err,
                        size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    const long max_pos = nprompt + ndecode;
    sw x = {.m = m, .bs = bs, .res = res, .err = err, .errlen = errlen};
    dsv4q_runstate_f64 *ref = NULL;
    double *logits = malloc(sizeof(double) * (size_t)g->vocab_size);
    int rc = -1;
    if (cand_fails) *cand_fails = 0;
    err[0] = 0;
    if (dsv4q_replay_init_arch(res, g->arch, g->n_layers) || !logits ||
        !(ref = dsv4q_run_new_f64(m, bs, max_pos, NULL, NULL)) ||
        !(x.cand = dsv4q_run_new_f32(m, bs, max_pos, NULL, NULL)) ||
        !(x.lvl = dsv4q_run_new_f32(m, bs, max_pos, NULL, NULL))) {
        snprintf(err, errlen, "per-stage verdict: out of memory allocating three runs' caches");
        goto out;
    }
    dsv4q_replay_mark_present(res, g);
    dsv4q_run_set_provider_f32(x.cand, cand, cand_ctx);
    dsv4q_run_set_stage_hook_f64(ref, hook, &x);
    if (dsv4q_run_step_f64(ref, ids, nprompt, logits) && !x.failed)
        snprintf(err, errlen, "per-stage verdict: the oracle-f64 prefill failed (out of memory)");
    for (long i = 0; !x.failed && !err[0] && i < ndecode; i++)
        if (dsv4q_run_step_f64(ref, ids + nprompt + i, 1, logits) && !x.failed)
            snprintf(err, errlen, "per-stage verdict: the oracle-f64 decode step at position %ld failed (out of memory)",
                     nprompt + i);
    rc = x.failed || err[0] ? -1 : 0;
out:
    if (cand_fails) *cand_fails = x.cand_failed;
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < DSV4Q_STAGE_MAX_T; t++) free(x.buf[k][t]);
    dsv4q_run_free_f64(ref);
    dsv4q_run_free_f32(x.cand);
    dsv4q_run_free_f32(x.lvl);
    free(logits);
    if (rc) dsv4q_replay_free(res);
    return rc;
}

/* ---- output ------------------------------------------------------------ */

/* value/bound of the worst gated metric of a stage row (its metric in *m);
 * -1 when nothing is gated. A failing row with a zero bound is +inf. */
static double worst_ratio(const dsv4q_replay_stage *r, int *m)
{
    double w = -1;
    *m = -1;
    for (int k = 0; k < DSV4Q_M_COUNT; k++) {
        const dsv4q_replay_row *row = &r->row[k];
        if (!row->measured || !row->gated) continue;
        double q = row->bound > 0 ? row->value / row->bound : (row->pass ? 0 : INFINITY);
        if (!row->pass && !(q > 1)) q = INFINITY;   /* NaN value: a failure */
        if (q > w) {
            w = q;
            *m = k;
        }
    }
    return w;
}

void dsv4q_stagewise_print(FILE *f, const dsv4q_replay *res)
{
    fprintf(f, "per-stage verdict: each stage fed the oracle-f64 run's own inputs; value = candidate vs oracle-f64, "
            "level = oracle-f32 vs oracle-f64 on the same inputs\n");
    fprintf(f, "%-14s %-11s %10s  %-7s %-22s %11s %11s %11s\n", "stage", "layers", "worst v/b", "at", "metric",
            "value", "level", "bound");
    for (int st = 0; st < dsv4q_stage_count_arch(res->arch); st++) {
        const dsv4q_stage_info *si = dsv4q_stage_get_arch(res->arch, st);
        const dsv4q_replay_stage *worst = NULL;
        double wq = -1;
        int wm = -1, nj = 0, nf = 0, nu = 0;
        for (int i = 0; i < res->nst; i++) {
            const dsv4q_replay_stage *r = &res->st[i];
            if (r->stage != st || r->verdict == DSV4Q_RV_ABSENT) continue;
            if (r->verdict == DSV4Q_RV_UNCHECKABLE) { nu++; continue; }
            nj++;
            nf += r->verdict == DSV4Q_RV_FAIL;
            int m;
            double q = worst_ratio(r, &m);
            if (!worst || q > wq) {
                worst = r;
                wq = q;
                wm = m;
            }
        }
        if (!nj && !nu) continue;
        char lay[32], at[16] = "-", metric[48] = "(no gated metric)", v[16] = "", l[16] = "", b[16] = "";
        if (nf) snprintf(lay, sizeof lay, "%d/%d FAIL", nf, nj);
        else snprintf(lay, sizeof lay, "%d pass", nj);
        if (nu) snprintf(lay + strlen(lay), sizeof lay - strlen(lay), " +%d n/c", nu);
        if (worst && wm >= 0) {
            const dsv4q_replay_row *w = &worst->row[wm];
            if (si->per_layer) snprintf(at, sizeof at, "L%d", worst->layer);
            if (worst->nout > 1) snprintf(metric, sizeof metric, "%s[%s]", dsv4q_metric_name(wm), si->out[w->out].name);
            else snprintf(metric, sizeof metric, "%s", dsv4q_metric_name(wm));
            snprintf(v, sizeof v, "%.3e", w->value);
            snprintf(l, sizeof l, "%.3e", w->level);
            snprintf(b, sizeof b, "%.3e", w->bound);
        }
        char q[16] = "-";
        if (worst && wm >= 0) snprintf(q, sizeof q, isinf(wq) ? "inf" : "%.3g", wq);
        fprintf(f, "%-14s %-11s %10s  %-7s %-22s %11s %11s %11s\n", si->name, lay, q, at, metric, v, l, b);
    }
    for (int i = 0; i < res->nst; i++) {
        const dsv4q_replay_stage *r = &res->st[i];
        char key[48];
        if (r->verdict != DSV4Q_RV_UNCHECKABLE) continue;
        dsv4q_replay_key(r, key, sizeof key);
        fprintf(f, "not checkable: %s: %s\n", key, r->why);
    }
    dsv4q_replay_print_failed(f, res);
    fprintf(f, "%d stage rows judged: %d pass, %d FAIL, %d not checkable\n", res->npass + res->nfail, res->npass,
            res->nfail, res->nunc);
}
