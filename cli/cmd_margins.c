/*
 * cmd_margins.c - `dsv4q margins`: the indexer's top-k cut, layer by layer.
 *
 * The indexer stores its scores in BF16, so the k-th pick often sits in a
 * run of exactly equal scores and the choice inside it is decided by the
 * tie rule (or, in a kernel, by 1e-7 noise). For every ratio-4 layer and
 * the selected query positions this command measures, at both widths of
 * one profile: the k-th selected score, the margin to the (k+1)-th in BF16
 * quanta, the tie-run at the cut (total / inside / outside), the distinct
 * BF16 values among the picks; the support flips between the fp32 and fp64
 * selections and between the profile and its counterpart (source <->
 * model); and what the fp32-vs-fp64 flips do to the layer's attention
 * output (an f64 rerun with only that layer's flipped picks swapped in).
 * Definitions: harness/measure/margins.h, docs/margins.md.
 *
 * DeepSeek V4.1 (docs/v41.md): the indexed layers are the index sources
 * (ratio 1, 2 or 4); a consumer's scores are masked to its candidate
 * blocks, so its cut is the position cut inside the candidates. The
 * candidate source adds the block cut: block scores = the max of each
 * block of candidate_block_size positions, the kept blocks its
 * cand_blocks; the block holding the row's newest position is pinned
 * (+inf, always kept) and so takes no part in the cut. --score-dtype
 * declares the engine's score dtype: quanta and tie-runs at BF16, F16 or
 * F32 granularity (harness/measure/margins.h dsv4q_margin_row_dt).
 *
 * Runs: (a) f64 and (b) f32 of the profile, (c) f64 of the counterpart
 * profile, (d) per ratio-4 layer with flips, one f64 rerun with a pick
 * hook. Output: a per-layer table (median/p90/max), --csv (every row),
 * --json, --svg (margin histograms per layer) and a receipt "margins".
 */
#include "base/file.h"
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "cli/progress.h"
#include "harness/measure/margins.h"
#include "harness/measure/metrics.h"
#include "io/model.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"
#include "receipts/receipts.h"

enum { RUN_F64, RUN_F32, RUN_CMP, RUN_NPICK, RUN_RERUN = RUN_NPICK };

typedef struct mrow {
    int layer;                 /* model layer */
    long pos;                  /* absolute position */
    long k[RUN_NPICK];         /* picks in this row per run (-1: not seen) */
    dsv4q_margin w[2];         /* figures at f64 [0] and f32 [1] */
    long flips_w;              /* |picks f64 \ picks f32| */
    long flips_p;              /* |picks f64 \ picks f64 of the counterpart profile| */
    double attn_nrms;          /* row NRMS of the layer's attn output, f32 picks swapped in */
    int has_b;                 /* V4.1 candidate source: the block cut below was measured */
    dsv4q_margin b[2];         /* the candidate-block cut at f64 [0] and f32 [1] */
    long flips_b;              /* |blocks f64 \ blocks f32| */
} mrow;

typedef struct ctx {
    const dsv4q_model *m;
    int nidx;                  /* ratio-4 layers */
    int *slot;                 /* [n_layers]: index among them or -1 */
    int *layers;               /* [nidx] model layer */
    long npos;                 /* prompt + decode */
    long *sel;                 /* [npos]: selection index or -1 */
    long nsel;
    long kmax;                 /* index_topk */
    mrow *rows;                /* [nidx * nsel] */
    int32_t *picks[RUN_NPICK]; /* [nidx * nsel, kmax] */
    double *attn;              /* [nidx * nsel, dim] attn rows of run (a) */
    dsv4q_acc *lacc;           /* [nidx] rerun vs (a), over selected rows */
    /* the run in progress */
    int run, rerun_layer;
    long pos0;
    double *score;             /* selected score rows of the current call */
    long score_T, score_cap;
    const char *label;
    long calls, total_calls;
    long chunk, prefill_calls; /* the prompt fed in calls of chunk tokens (oracle/model.c M4): that many */
    dsv4q_eta eta; /* this run's share done and time left */
    int quiet, oom;
    int dt, rounded;   /* score dtype; 1: dsv4q_margin_row_dt (declared or V4.1) */
    int cand, B, topb; /* V4.1: the candidate source layer (-1), block size, kept blocks */
    int32_t *blk[2];   /* its kept blocks per selected row, f64 / f32 runs [nidx * nsel, topb] */
    double *bscore;    /* one row's block scores [ceil(T / B)] */
    long bscore_cap;
} ctx;

static int index_source(const dsv4q_config *g, int L)
{
    for (int i = 0; i < g->n_index_source_layers; i++)
        if (g->index_source_layers[i] == L) return 1;
    return 0;
}

static mrow *row_at(ctx *c, int layer, long pos)
{
    if (layer < 0 || layer >= c->m->cfg.n_layers || c->slot[layer] < 0 || pos < 0 || pos >= c->npos ||
        c->sel[pos] < 0)
        return NULL;
    return &c->rows[c->slot[layer] * c->nsel + c->sel[pos]];
}

static long row_index(ctx *c, const mrow *r) { return (long)(r - c->rows); }

static void on_scores(ctx *c, int layer, const double *data, long n, long rows)
{
    long T = rows ? n / rows : 0;
    long need = 0;
    for (long i = 0; i < rows; i++) need += row_at(c, layer, c->pos0 + i) != NULL;
    if (need * T > c->score_cap) {
        double *d = realloc(c->score, sizeof(double) * (size_t)(need * T));
        if (!d) { c->oom = 1; return; }
        c->score = d;
        c->score_cap = need * T;
    }
    long j = 0;
    for (long i = 0; i < rows; i++)
        if (row_at(c, layer, c->pos0 + i))
            memcpy(c->score + (j++) * T, data + i * T, sizeof(double) * (size_t)T);
    c->score_T = T;
}

static int block_cut(ctx *c, mrow *r, const double *score, long T);

static void on_picks(ctx *c, int layer, const double *data, long n, long rows)
{
    long k = rows ? n / rows : 0, j = 0;
    if (k > c->kmax) { c->oom = 1; return; }
    int32_t *p = malloc(sizeof(int32_t) * (size_t)(k ? k : 1));
    if (!p) { c->oom = 1; return; }
    for (long i = 0; i < rows; i++) {
        mrow *r = row_at(c, layer, c->pos0 + i);
        if (!r) continue;
        int32_t *dst = c->picks[c->run] + row_index(c, r) * c->kmax;
        for (long x = 0; x < k; x++) dst[x] = p[x] = (int32_t)data[i * k + x];
        r->k[c->run] = k;
        if (c->run == RUN_F64 || c->run == RUN_F32) {
            const double *sc = c->score + j * c->score_T;
            if (c->rounded ? dsv4q_margin_row_dt(sc, c->score_T, p, k, c->dt, &r->w[c->run == RUN_F32])
                           : dsv4q_margin_row(sc, c->score_T, p, k, &r->w[c->run == RUN_F32]))
                c->oom = 1;
            if (layer == c->cand && block_cut(c, r, sc, c->score_T)) c->oom = 1;
        }
        j++;
    }
    free(p);
}

/* The candidate source's kept blocks of this call (tapped before its scores). */
static void on_blocks(ctx *c, int layer, const double *data, long n, long rows)
{
    if (layer != c->cand || rows <= 0 || n != rows * c->topb) return;
    for (long i = 0; i < rows; i++) {
        mrow *r = row_at(c, layer, c->pos0 + i);
        if (!r) continue;
        int32_t *dst = c->blk[c->run == RUN_F32] + row_index(c, r) * c->topb;
        for (long x = 0; x < c->topb; x++) dst[x] = (int32_t)data[i * c->topb + x];
    }
}

/* The block cut of one row of the candidate source (score [T] unmasked,
 * -inf from the row's compress length on): block b scores the max of its
 * positions, the newest block (holding the last finite position) is
 * pinned at +inf and so is neither the k-th nor the next. 0, -1 (memory). */
static int block_cut(ctx *c, mrow *r, const double *score, long T)
{
    const long nb = (T + c->B - 1) / c->B;
    if (nb > c->bscore_cap) {
        double *d = realloc(c->bscore, sizeof(double) * (size_t)(nb ? nb : 1));
        if (!d) return -1;
        c->bscore = d;
        c->bscore_cap = nb;
    }
    long last = -1;
    for (long b = 0; b < nb; b++) {
        double mx = -INFINITY;
        for (long t = b * c->B; t < (b + 1) * c->B && t < T; t++) {
            if (score[t] > mx) mx = score[t];
            if (isfinite(score[t])) last = t;
        }
        c->bscore[b] = mx;
    }
    if (last >= 0) c->bscore[last / c->B] = INFINITY;
    const int w = c->run == RUN_F32;
    r->has_b = 1;
    return dsv4q_margin_row_dt(c->bscore, nb, c->blk[w] + row_index(c, r) * c->topb, c->topb, c->dt, &r->b[w]);
}

static void on_attn(ctx *c, int layer, const double *data, long n, long rows)
{
    const long d = c->m->cfg.dim;
    if (rows <= 0 || n != rows * d) return;
    for (long i = 0; i < rows; i++) {
        mrow *r = row_at(c, layer, c->pos0 + i);
        if (!r) continue;
        double *ref = c->attn + row_index(c, r) * d;
        if (c->run == RUN_F64) {
            memcpy(ref, data + i * d, sizeof(double) * (size_t)d);
        } else if (c->run == RUN_RERUN && layer == c->rerun_layer) {
            dsv4q_acc a = {0};
            dsv4q_acc_add(&a, data + i * d, ref, d);
            r->attn_nrms = dsv4q_acc_nrms(&a);
            dsv4q_acc_add(&c->lacc[c->slot[layer]], data + i * d, ref, d);
        }
    }
}

static void tap_cb(void *user, int layer, const char *stage, const double *data, long n, long rows)
{
    ctx *c = user;
    if (!stage) {                        /* progress: layer `layer` of a call done */
        int stop = c->nidx > 0 ? c->layers[c->nidx - 1] : c->m->cfg.n_layers - 1;
        const int nl = c->m->cfg.n_layers;
        const char *cut = layer == stop && stop < nl - 1 ? " (the run stops here: later layers are not observed)" : "";
        char eta[64];
        dsv4q_eta_layer(&c->eta, layer);
        dsv4q_eta_format(&c->eta, dsv4q_now(), eta, sizeof eta);
        if (!c->quiet && isatty(2))
            fprintf(stderr, "\r[%s] call %ld/%ld: layer %d/%d, %s   ", c->label, c->calls + 1, c->total_calls,
                    layer + 1, nl, eta);
        else if (!c->quiet && c->calls < c->prefill_calls) /* the prefill is the long call */
            fprintf(stderr, "[%s] prefill: layer %d/%d done, %s%s\n", c->label, layer + 1, nl, eta, cut);
        if (layer != stop) return;
        c->calls++;
        long step = c->total_calls > 10 ? c->total_calls / 10 : 1;
        if (!c->quiet && !isatty(2) && (c->calls % step == 0 || c->calls == c->total_calls))
            fprintf(stderr, "[%s] %ld/%ld calls done, %s\n", c->label, c->calls, c->total_calls, eta);
        return;
    }
    if (layer < 0 || layer >= c->m->cfg.n_layers || c->slot[layer] < 0) return;
    if (!strcmp(stage, "idx_score")) {
        if (c->run == RUN_F64 || c->run == RUN_F32) on_scores(c, layer, data, n, rows);
    } else if (!strcmp(stage, "cand_blocks")) {
        if (c->run == RUN_F64 || c->run == RUN_F32) on_blocks(c, layer, data, n, rows);
    } else if (!strcmp(stage, "idx_topk")) {
        if (c->run < RUN_NPICK) on_picks(c, layer, data, n, rows);
    } else if (!strcmp(stage, "attn")) {
        if (c->run == RUN_F64 || c->run == RUN_RERUN) on_attn(c, layer, data, n, rows);
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int in_sorted(const int32_t *s, long n, int32_t v)
{
    return v >= 0 && bsearch(&v, s, (size_t)n, sizeof *s, cmp_i32) != NULL;
}

/* Pick hook of the rerun: at the rerun layer, in every selected row, the
 * picks the f64 selection has and the f32 one does not are replaced in
 * place by those the f32 selection has and the f64 one does not (in the
 * f32 order). The set becomes the f32 set; the positions of the common
 * picks (and so the attention's column order) stay the f64 ones, so the
 * output change is that of the flips alone. */
static void pick_hook(void *user, int layer, long pos0, long rows, long k, int32_t *picks)
{
    ctx *c = user;
    if (layer != c->rerun_layer) return;
    int32_t *s64 = malloc(sizeof(int32_t) * (size_t)(k ? k : 1)), *s32 = malloc(sizeof(int32_t) * (size_t)(k ? k : 1));
    int32_t *add = malloc(sizeof(int32_t) * (size_t)(k ? k : 1));
    if (!s64 || !s32 || !add) { c->oom = 1; goto out; }
    for (long i = 0; i < rows; i++) {
        mrow *r = row_at(c, layer, pos0 + i);
        if (!r || !r->flips_w) continue;
        if (r->k[RUN_F32] != k || r->k[RUN_F64] != k) { c->oom = 1; continue; }
        const int32_t *f32 = c->picks[RUN_F32] + row_index(c, r) * c->kmax;
        int32_t *row = picks + i * k;
        memcpy(s64, row, sizeof(int32_t) * (size_t)k);
        memcpy(s32, f32, sizeof(int32_t) * (size_t)k);
        qsort(s64, (size_t)k, sizeof *s64, cmp_i32);
        qsort(s32, (size_t)k, sizeof *s32, cmp_i32);
        long na = 0, ai = 0;
        for (long j = 0; j < k; j++)
            if (f32[j] >= 0 && !in_sorted(s64, k, f32[j])) add[na++] = f32[j];
        for (long j = 0; j < k; j++)
            if (row[j] >= 0 && !in_sorted(s32, k, row[j])) row[j] = ai < na ? add[ai++] : -1;
        for (long j = 0; j < k && ai < na; j++)
            if (row[j] < 0) row[j] = add[ai++];
    }
out:
    free(s64);
    free(s32);
    free(add);
}

static int run_one(ctx *c, int width, uint64_t bs, const dsv4q_tokens *t, int run, int rerun_layer,
                   const char *label, char *err, size_t errlen)
{
    dsv4q_run *r;
    c->run = run;
    c->rerun_layer = rerun_layer;
    c->label = label;
    const long S = t->nprompt, chunk = c->chunk > 0 && c->chunk < S ? c->chunk : S;
    c->calls = 0;
    c->prefill_calls = (S + chunk - 1) / chunk;
    c->total_calls = c->prefill_calls + t->nteacher;
    double *logits = malloc(sizeof(double) * (size_t)c->m->cfg.vocab_size);
    if (!logits) { snprintf(err, errlen, "out of memory"); return -1; }
    if (dsv4q_run_open(&r, c->m, width, bs, t->nprompt + t->nteacher, tap_cb, c, err, errlen)) {
        free(logits);
        return -1;
    }
    /* Nothing after the last ratio-4 layer is observed: skip it and the head. */
    if (c->nidx > 0 && dsv4q_run_set_last_layer(r, c->layers[c->nidx - 1])) {
        snprintf(err, errlen, "internal: last layer set after the first call");
        dsv4q_run_close(r);
        free(logits);
        return -1;
    }
    if (run == RUN_RERUN) dsv4q_run_set_pick_hook(r, pick_hook, c);
    /* the run's calls stop after the last observed layer */
    const dsv4q_config *g = &c->m->cfg;
    const int nl = c->nidx > 0 ? c->layers[c->nidx - 1] + 1 : g->n_layers, head = nl == g->n_layers;
    dsv4q_eta_start(&c->eta, g, dsv4q_plan_work(g, S, chunk, t->nteacher, nl, head), nl, head, dsv4q_now());
    /* in chunks: each chunk's rows are the one call's (model.c M4), so
     * are their scores, picks and margins */
    int rc = chunk < S ? dsv4q_run_set_prefill(r, S, err, errlen) : 0;
    for (long p = 0, n; !rc && p < S; p += n) {
        n = S - p < chunk ? S - p : chunk;
        c->pos0 = p;
        dsv4q_eta_call(&c->eta, p, n);
        rc = dsv4q_run_feed(r, t->prompt + p, n, logits, err, errlen);
    }
    for (long i = 0; !rc && i < t->nteacher; i++) {
        c->pos0 = t->nprompt + i;
        dsv4q_eta_call(&c->eta, c->pos0, 1);
        rc = dsv4q_run_feed(r, &t->teacher[i], 1, logits, err, errlen);
    }
    dsv4q_run_close(r);
    free(logits);
    if (!c->quiet && isatty(2)) fprintf(stderr, "\n");
    if (!rc && c->oom) {
        snprintf(err, errlen, "out of memory (or inconsistent pick shapes) while recording the indexer");
        rc = -1;
    }
    return rc;
}

/* --positions: "last" (last prompt position + every decode step), "all",
 * or a comma-separated list of positions and ranges A-B. */
static int parse_positions(const char *spec, long nprompt, long npos, long *sel, char *err, size_t errlen)
{
    for (long p = 0; p < npos; p++) sel[p] = -1;
    if (!strcmp(spec, "all")) {
        for (long p = 0; p < npos; p++) sel[p] = 1;
    } else if (!strcmp(spec, "last")) {
        for (long p = nprompt - 1; p < npos; p++) sel[p] = 1;
    } else {
        const char *s = spec;
        while (*s) {
            char *end;
            errno = 0;
            long a = strtol(s, &end, 10), b = a;
            if (end == s || a < 0 || *s == '-' || *s == '+' || errno) goto bad;
            if (*end == '-') {
                const char *s2 = end + 1;
                b = strtol(s2, &end, 10);
                if (end == s2 || b < a || *s2 == '-' || *s2 == '+' || errno) goto bad;
            }
            if (b >= npos) {
                snprintf(err, errlen, "--positions: position %ld is past the last position %ld", b, npos - 1);
                return -1;
            }
            for (long p = a; p <= b; p++) sel[p] = 1;
            if (*end == ',' && end[1]) end++;   /* a trailing comma is malformed */
            else if (*end) goto bad;
            s = end;
        }
    }
    long n = 0;
    for (long p = 0; p < npos; p++)
        if (sel[p] > 0) sel[p] = n++;
    if (!n) { snprintf(err, errlen, "--positions '%s' selects no position", spec); return -1; }
    return 0;
bad:
    snprintf(err, errlen, "--positions must be last, all or a list like 5,17,100-120; got '%s'", spec);
    return -1;
}

typedef struct stat3 { double med, p90, max; long n; } stat3;

static stat3 stats(const double *v, long n, double *tmp)
{
    stat3 s = {NAN, NAN, NAN, n};
    if (n > 0) {
        s.med = dsv4q_percentile(v, n, 0.5, tmp);
        s.p90 = dsv4q_percentile(v, n, 0.9, tmp);
        s.max = dsv4q_percentile(v, n, 1.0, tmp);
    }
    return s;
}

static json_t *jstat(stat3 s)
{
    json_t *j = json_object();
    json_object_set_new(j, "median", s.n ? json_real(s.med) : json_null());
    json_object_set_new(j, "p90", s.n ? json_real(s.p90) : json_null());
    json_object_set_new(j, "max", s.n ? json_real(s.max) : json_null());
    json_object_set_new(j, "n", json_integer(s.n));
    return j;
}

static const char *cell(char *buf, size_t len, stat3 s)
{
    if (!s.n) snprintf(buf, len, "n/a");
    else snprintf(buf, len, "%.0f/%.0f/%.0f", s.med, s.p90, s.max);
    return buf;
}

/* figure f of row r at width w, or NAN if not applicable */
enum { F_MARGIN, F_TIE, F_IN, F_OUT, F_DISTINCT, F_VISIBLE, F_FLIPS_W, F_FLIPS_P, F_COUNT };
static const char *const fig_name[F_COUNT] = {"margin_quanta", "tie_total", "tie_inside", "tie_outside",
                                              "distinct", "visible", "flips_f32_f64", "flips_src_model"};

static double figure(const mrow *r, int w, int f)
{
    const dsv4q_margin *m = &r->w[w];
    switch (f) {
    case F_MARGIN: return m->has_next ? (double)m->margin : NAN;
    case F_TIE: return (double)m->tie_total;
    case F_IN: return (double)m->tie_inside;
    case F_OUT: return (double)m->tie_outside;
    case F_DISTINCT: return (double)m->distinct;
    case F_VISIBLE: return (double)m->visible;
    case F_FLIPS_W: return (double)r->flips_w;
    default: return (double)r->flips_p;
    }
}

static stat3 layer_stat(const ctx *c, int li, int w, int f, double *v, double *tmp)
{
    long n = 0;
    for (long s = 0; s < c->nsel; s++) {
        double x = figure(&c->rows[li * c->nsel + s], w, f);
        if (!isnan(x)) v[n++] = x;
    }
    return stats(v, n, tmp);
}

/* The same figure of the block cut (V4.1 candidate source; rows with one). */
static stat3 block_stat(const ctx *c, int li, int w, int f, double *v, double *tmp)
{
    long n = 0;
    for (long s = 0; s < c->nsel; s++) {
        const mrow *r = &c->rows[li * c->nsel + s];
        if (!r->has_b) continue;
        mrow b = *r;
        b.w[w] = r->b[w];
        b.flips_w = r->flips_b;
        const double x = figure(&b, w, f);
        if (!isnan(x)) v[n++] = x;
    }
    return stats(v, n, tmp);
}

/* One width's line of the table and its JSON object under parent ("f64" or
 * "f32"): the columns the position cut and the block cut (blk) share, up to
 * cut-in-tie; st gets every figure, for the caller's flips columns. */
static void print_cut(const ctx *c, int li, int w, int blk, const char *label, long rows, long k, stat3 st[F_COUNT],
                      json_t *parent, double *v, double *tmp)
{
    char b[5][40];
    json_t *jw = json_object();
    for (int f = 0; f < F_COUNT; f++) {
        st[f] = blk ? block_stat(c, li, w, f, v, tmp) : layer_stat(c, li, w, f, v, tmp);
        if (f < F_FLIPS_W) json_object_set_new(jw, fig_name[f], jstat(st[f]));
    }
    long intie = 0;
    for (long s = 0; s < c->nsel; s++) {
        const mrow *r = &c->rows[li * c->nsel + s];
        intie += blk ? r->has_b && r->b[w].tie_outside > 0 : r->w[w].tie_outside > 0;
    }
    json_object_set_new(jw, "rows_cut_in_tie", json_integer(intie));
    json_object_set_new(parent, w ? "f32" : "f64", jw);
    printf("  %5s %5s %5ld %5ld %16s %12s %12s %12s %13s %5ld/%-4ld", label, w ? "f32" : "f64", rows, k,
           cell(b[0], 40, st[F_MARGIN]), cell(b[1], 40, st[F_TIE]), cell(b[2], 40, st[F_IN]),
           cell(b[3], 40, st[F_OUT]), cell(b[4], 40, st[F_DISTINCT]), intie, rows);
}

static json_t *jmargin(const dsv4q_margin *m)
{
    json_t *x = json_object();
    json_object_set_new(x, "kth_score", m->npicks ? json_real(m->kth) : json_null());
    json_object_set_new(x, "next_score", m->has_next ? json_real(m->next) : json_null());
    json_object_set_new(x, "margin_quanta", m->has_next ? json_integer(m->margin) : json_null());
    json_object_set_new(x, "tie_total", json_integer(m->tie_total));
    json_object_set_new(x, "tie_inside", json_integer(m->tie_inside));
    json_object_set_new(x, "tie_outside", json_integer(m->tie_outside));
    json_object_set_new(x, "distinct", json_integer(m->distinct));
    json_object_set_new(x, "visible", json_integer(m->visible));
    return x;
}

/* margin histogram bins */
#define NBINS 11
static const char *const bin_label[NBINS] = {"0", "1", "2", "3", "4-7", "8-15", "16-31", "32-63", "64-127",
                                             "128+", "n/a"};
static int bin_of(const dsv4q_margin *m)
{
    if (!m->has_next) return NBINS - 1;
    long q = m->margin;
    if (q < 4) return q < 0 ? 0 : (int)q;
    int b = 4;
    for (long lo = 4; b < NBINS - 2 && q >= 2 * lo; lo *= 2) b++;
    return b;
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static int write_svg(const char *path, const ctx *c, const char *profile)
{
    FILE *f = dsv4q_out_open(path, NULL, 0);
    if (!f) return -1;
    const int W = 760, left = 60, top = 50, ph = 170, gap = 40, bw = 24, slotw = (W - left - 20) / NBINS;
    const int H = top + c->nidx * (ph + gap) + 20;
    const char *colour[2] = {"#4a7bd0", "#e08a2c"};
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n", W, H);
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"14\">indexer top-k margins in BF16 quanta (k-th vs (k+1)-th "
               "score), profile ");
    xml_text(f, profile);
    fprintf(f, "</text>\n");
    fprintf(f, "<rect x=\"%d\" y=\"28\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"37\">f64</text>\n",
            W - 150, colour[0], W - 136);
    fprintf(f, "<rect x=\"%d\" y=\"28\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"37\">f32</text>\n",
            W - 90, colour[1], W - 76);
    for (int li = 0; li < c->nidx; li++) {
        long cnt[2][NBINS] = {{0}};
        long maxc = 1;
        for (long s = 0; s < c->nsel; s++)
            for (int w = 0; w < 2; w++) {
                long *x = &cnt[w][bin_of(&c->rows[li * c->nsel + s].w[w])];
                if (++*x > maxc) maxc = *x;
            }
        int y0 = top + li * (ph + gap);
        fprintf(f, "<g id=\"layer%d\">\n", c->layers[li]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">layer %d: %ld rows (max count %ld)</text>\n", left, y0 - 6,
                c->layers[li], c->nsel, maxc);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", left, y0 + ph, W - 20,
                y0 + ph);
        for (int b = 0; b < NBINS; b++) {
            int x = left + b * slotw + (slotw - 2 * bw) / 2;
            for (int w = 0; w < 2; w++) {
                double h = (double)cnt[w][b] / (double)maxc * (ph - 10);
                fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>layer %d "
                           "%s margin %s: %ld rows</title></rect>\n",
                        x + w * bw, y0 + ph - h, bw, h, colour[w], c->layers[li], w ? "f32" : "f64", bin_label[b],
                        cnt[w][b]);
            }
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x + bw, y0 + ph + 14,
                    bin_label[b]);
        }
        fprintf(f, "</g>\n");
    }
    fprintf(f, "</svg>\n");
    return dsv4q_out_close(f, NULL, 0) ? -1 : 0;
}

static void csv_num(FILE *f, double v, int valid)
{
    if (valid) fprintf(f, ",%.17g", v);
    else fprintf(f, ",NA");
}

static int write_csv(const char *path, const ctx *c)
{
    FILE *f = dsv4q_out_open(path, NULL, 0);
    if (!f) return -1;
    fprintf(f, "layer,position,k,kth_score,next_score,margin_quanta,tie_total,tie_inside,tie_outside,distinct,visible,"
               "kth_score_f32,next_score_f32,margin_quanta_f32,tie_total_f32,tie_inside_f32,tie_outside_f32,"
               "distinct_f32,flips_f32_f64,flips_src_model,attn_nrms\n");
    for (int li = 0; li < c->nidx; li++)
        for (long s = 0; s < c->nsel; s++) {
            const mrow *r = &c->rows[li * c->nsel + s];
            fprintf(f, "%d,%ld,%ld", r->layer, r->pos, r->w[0].k);
            for (int w = 0; w < 2; w++) {
                const dsv4q_margin *m = &r->w[w];
                csv_num(f, m->kth, m->npicks > 0);
                csv_num(f, m->next, m->has_next);
                if (m->has_next) fprintf(f, ",%ld", m->margin);
                else fprintf(f, ",NA");
                fprintf(f, ",%ld,%ld,%ld,%ld", m->tie_total, m->tie_inside, m->tie_outside, m->distinct);
                if (!w) fprintf(f, ",%ld", m->visible);
            }
            fprintf(f, ",%ld,%ld,%.6e\n", r->flips_w, r->flips_p, r->attn_nrms);
        }
    return dsv4q_out_close(f, NULL, 0) ? -1 : 0;
}

static json_t *jrow(const mrow *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "layer", json_integer(r->layer));
    json_object_set_new(j, "position", json_integer(r->pos));
    json_object_set_new(j, "k", json_integer(r->w[0].k));
    json_object_set_new(j, "visible", json_integer(r->w[0].visible));
    for (int w = 0; w < 2; w++) {
        const dsv4q_margin *m = &r->w[w];
        json_t *x = json_object();
        json_object_set_new(x, "kth_score", m->npicks ? json_real(m->kth) : json_null());
        json_object_set_new(x, "next_score", m->has_next ? json_real(m->next) : json_null());
        json_object_set_new(x, "margin_quanta", m->has_next ? json_integer(m->margin) : json_null());
        json_object_set_new(x, "tie_total", json_integer(m->tie_total));
        json_object_set_new(x, "tie_inside", json_integer(m->tie_inside));
        json_object_set_new(x, "tie_outside", json_integer(m->tie_outside));
        json_object_set_new(x, "distinct", json_integer(m->distinct));
        json_object_set_new(j, w ? "f32" : "f64", x);
    }
    json_object_set_new(j, "flips_f32_f64", json_integer(r->flips_w));
    json_object_set_new(j, "flips_src_model", json_integer(r->flips_p));
    json_object_set_new(j, "attn_nrms", json_real(r->attn_nrms));
    if (r->has_b) {
        json_t *b = json_object();
        json_object_set_new(b, "f64", jmargin(&r->b[0]));
        json_object_set_new(b, "f32", jmargin(&r->b[1]));
        json_object_set_new(b, "flips_f32_f64", json_integer(r->flips_b));
        json_object_set_new(j, "block_cut", b);
    }
    return j;
}

/* Every selected row of every indexed layer got a selection in this run. */
static int check_rows(const ctx *c, int run, char *err, size_t errlen)
{
    for (long i = 0; i < c->nidx * c->nsel; i++)
        if (c->rows[i].k[run] < 0) {
            snprintf(err, errlen, "no indexer selection recorded at layer %d position %ld", c->rows[i].layer,
                     c->rows[i].pos);
            return -1;
        }
    return 0;
}

/* Progress with numbers: what is known after run (a) (stage 0), (b) (1)
 * and (c) (2), on stderr, so a long run shows its figures early. */
static void partial(const ctx *c, int stage, double *v, double *tmp)
{
    if (c->quiet) return;
    for (int li = 0; li < c->nidx; li++) {
        char b[4][40];
        if (stage < 2) {
            long intie = 0;
            for (long s = 0; s < c->nsel; s++) intie += c->rows[li * c->nsel + s].w[stage].tie_outside > 0;
            fprintf(stderr, "[margins] %s layer %d: margin %s, tie-run %s, out %s, distinct %s, cut-in-tie %ld/%ld",
                    stage ? "f32" : "f64", c->layers[li], cell(b[0], 40, layer_stat(c, li, stage, F_MARGIN, v, tmp)),
                    cell(b[1], 40, layer_stat(c, li, stage, F_TIE, v, tmp)),
                    cell(b[2], 40, layer_stat(c, li, stage, F_OUT, v, tmp)),
                    cell(b[3], 40, layer_stat(c, li, stage, F_DISTINCT, v, tmp)), intie, c->nsel);
            if (stage == 1)
                fprintf(stderr, ", flips f32/f64 %s", cell(b[0], 40, layer_stat(c, li, 0, F_FLIPS_W, v, tmp)));
        } else {
            fprintf(stderr, "[margins] layer %d: flips between the profiles %s",  c->layers[li],
                    cell(b[0], 40, layer_stat(c, li, 0, F_FLIPS_P, v, tmp)));
        }
        fprintf(stderr, "\n");
    }
}

int dsv4q_cmd_margins(int argc, char **argv)
{
    dsv4q_margins_args x;
    dsv4q_cli_opts o;
    char err[1024], dir[4096], bnames[1024];
    int prc = dsv4q_cli_parse(argc, argv, &x, sizeof x);
    if (prc >= 0) return prc;
    o = x.c;
    if (dsv4q_cli_db_check(&o, "margins")) return 2;   /* before any work */
    dsv4q_cli_threads(&o);
    dsv4q_cli_opts oc = o;
    oc.profile = strcmp(o.profile, "source") ? "source" : "model";
    uint64_t bs, bsc;
    if (dsv4q_cli_bset(&o, &bs, err, sizeof err) || dsv4q_cli_bset(&oc, &bsc, err, sizeof err)) {
        fprintf(stderr, "dsv4q margins: %s\n", err);
        return 2;
    }
    dsv4q_model *m;
    dsv4q_tokens t;
    if (dsv4q_cli_start("margins", &o, dir, sizeof dir, &m, &t)) return 2;
    const int v41 = m->cfg.arch == DSV4Q_ARCH_V41;
    ctx c = {.m = m,
             .npos = t.nprompt + t.nteacher,
             .kmax = m->cfg.index_topk,
             .quiet = o.quiet,
             .dt = x.score_dt,
             .rounded = x.score_dt_set || v41,
             .cand = -1};
    if (x.score_dt != DSV4Q_DT_BF16) { /* the engine's scores are not BF16: neither are the oracle's */
        bs &= ~DSV4Q_BIT(DSV4Q_B_IDX_SCORE_BF16);
        bsc &= ~DSV4Q_BIT(DSV4Q_B_IDX_SCORE_BF16);
    }
    if (v41 && m->cfg.candidate_source_layer >= 0 && m->cfg.candidate_topk_blocks > 0) {
        c.cand = m->cfg.candidate_source_layer;
        c.B = m->cfg.candidate_block_size;
        c.topb = m->cfg.candidate_topk_blocks;
    }
    int rc = 2;
    const long d = m->cfg.dim;
    double *v = NULL, *tmp = NULL;
    json_t *jm = NULL, *jrows = NULL;
    char *metrics = NULL;
    c.slot = malloc(sizeof(int) * (size_t)m->cfg.n_layers);
    c.layers = malloc(sizeof(int) * (size_t)m->cfg.n_layers);
    c.sel = malloc(sizeof(long) * (size_t)c.npos);
    if (!c.slot || !c.layers || !c.sel) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    for (int L = 0; L < m->cfg.n_layers; L++) {
        const int idx = v41 ? m->cfg.compress_ratios[L] != 0 && index_source(&m->cfg, L) : m->layers[L].ratio == 4;
        c.slot[L] = idx ? c.nidx : -1;
        if (idx) c.layers[c.nidx++] = L;
    }
    if (!c.nidx) {
        snprintf(err, sizeof err, "%s has no %s layer", dir, v41 ? "index-source (indexed)" : "ratio-4 (indexed)");
        goto fail;
    }
    if (parse_positions(x.positions, t.nprompt, c.npos, c.sel, err, sizeof err)) goto fail;
    for (long p = 0; p < c.npos; p++) c.nsel += c.sel[p] >= 0;
    const long nrows = c.nidx * c.nsel;
    c.rows = calloc((size_t)nrows, sizeof *c.rows);
    c.attn = malloc(sizeof(double) * (size_t)(nrows * d));
    c.lacc = calloc((size_t)c.nidx, sizeof *c.lacc);
    v = malloc(sizeof(double) * (size_t)c.nsel);
    tmp = malloc(sizeof(double) * (size_t)c.nsel);
    for (int r = 0; r < RUN_NPICK; r++) c.picks[r] = malloc(sizeof(int32_t) * (size_t)(nrows * (c.kmax ? c.kmax : 1)));
    for (int w = 0; w < 2; w++) c.blk[w] = calloc((size_t)(nrows * (c.topb ? c.topb : 1)), sizeof(int32_t));
    if (!c.rows || !c.attn || !c.lacc || !v || !tmp || !c.picks[0] || !c.picks[1] || !c.picks[2] || !c.blk[0] ||
        !c.blk[1]) {
        snprintf(err, sizeof err, "out of memory (%ld selected rows x %d layers)", c.nsel, c.nidx);
        goto fail;
    }
    for (int li = 0; li < c.nidx; li++)
        for (long p = 0; p < c.npos; p++)
            if (c.sel[p] >= 0) {
                mrow *r = &c.rows[li * c.nsel + c.sel[p]];
                r->layer = c.layers[li];
                r->pos = p;
                for (int k = 0; k < RUN_NPICK; k++) r->k[k] = -1;
            }

    dsv4q_boundary_format(bs & dsv4q_boundary_arch_mask(m->cfg.arch), bnames, sizeof bnames);
    static const char *const dtn[] = {[DSV4Q_DT_BF16] = "BF16", [DSV4Q_DT_F16] = "F16", [DSV4Q_DT_F32] = "F32"};
    const char *dname = dtn[c.dt];
    if (v41)
        printf("dsv4q margins: the V4.1 indexer's cuts at every index-source layer (the position cut inside the "
               "candidates; the candidate-block cut at layer %d), fp32 and fp64\n",
               c.cand);
    else printf("dsv4q margins: the indexer's top-k cut at every ratio-4 layer, fp32 and fp64\n");
    printf("  model      %s (%s, %d layers, %d indexed, index_topk %d)\n", dir,
           m->cfg.name[0] ? m->cfg.name : "config.json", m->cfg.n_layers, c.nidx, m->cfg.index_topk);
    printf("  tokens     %s (prompt %ld, decode %ld; sha256 %.16s...)\n", t.source, t.nprompt, t.nteacher, t.pin);
    printf("  profile    %s%s%s (flips compared against %s); effective boundaries: %s\n", o.profile,
           o.boundary[0] ? " + " : "", o.boundary, oc.profile, bnames);
    printf("  positions  %s: %ld of %ld\n", x.positions, c.nsel, c.npos);
    /* --chunk, else the prompt in one call when it fits in memory, else the
     * largest chunk that does */
    const double have = dsv4q_mem_available();
    const long fit = have <= 0 ? t.nprompt : dsv4q_run_chunk_fit(m, 64, c.npos, t.nprompt, have);
    c.chunk = o.chunk ? (o.chunk < t.nprompt ? o.chunk : t.nprompt) : fit > 0 ? fit : t.nprompt;
    if (c.chunk < t.nprompt)
        printf("  prefill    %ld calls of up to %ld tokens (bit-identical to one call)\n",
               (t.nprompt + c.chunk - 1) / c.chunk, c.chunk);
    if (c.rounded)
        printf("  scores     declared %s: quanta and tie-runs at %s granularity%s\n", dname, dname,
               c.dt == DSV4Q_DT_BF16 ? "" : " (idx_score_bf16 off in every run)");
    fflush(stdout);

    char lab[64];
    snprintf(lab, sizeof lab, "f64 %s", o.profile);
    if (run_one(&c, 64, bs, &t, RUN_F64, -1, lab, err, sizeof err) || check_rows(&c, RUN_F64, err, sizeof err))
        goto fail;
    partial(&c, 0, v, tmp);
    snprintf(lab, sizeof lab, "f32 %s", o.profile);
    if (run_one(&c, 32, bs, &t, RUN_F32, -1, lab, err, sizeof err) || check_rows(&c, RUN_F32, err, sizeof err))
        goto fail;
    for (long i = 0; i < nrows; i++) {
        mrow *r = &c.rows[i];
        r->flips_w = dsv4q_pick_flips(c.picks[RUN_F64] + i * c.kmax, r->k[RUN_F64], c.picks[RUN_F32] + i * c.kmax,
                                      r->k[RUN_F32]);
        r->flips_b = r->has_b ? dsv4q_pick_flips(c.blk[0] + i * c.topb, c.topb, c.blk[1] + i * c.topb, c.topb) : 0;
        if (r->flips_w < 0 || r->flips_b < 0) {
            snprintf(err, sizeof err, "out of memory");
            goto fail;
        }
    }
    partial(&c, 1, v, tmp);
    snprintf(lab, sizeof lab, "f64 %s", oc.profile);
    if (run_one(&c, 64, bsc, &t, RUN_CMP, -1, lab, err, sizeof err) || check_rows(&c, RUN_CMP, err, sizeof err))
        goto fail;
    for (long i = 0; i < nrows; i++) {
        mrow *r = &c.rows[i];
        r->flips_p = dsv4q_pick_flips(c.picks[RUN_F64] + i * c.kmax, r->k[RUN_F64], c.picks[RUN_CMP] + i * c.kmax,
                                      r->k[RUN_CMP]);
        if (r->flips_p < 0) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    }
    partial(&c, 2, v, tmp);
    for (int li = 0; li < c.nidx; li++) {
        long flipped = 0;
        for (long s = 0; s < c.nsel; s++) flipped += c.rows[li * c.nsel + s].flips_w > 0;
        if (!flipped) continue;
        if (!o.quiet)
            fprintf(stderr, "[margins] layer %d: %ld of %ld rows flipped between f32 and f64; rerunning f64 with the "
                            "f32 picks at that layer\n", c.layers[li], flipped, c.nsel);
        snprintf(lab, sizeof lab, "f64 %s, layer %d f32 picks", o.profile, c.layers[li]);
        if (run_one(&c, 64, bs, &t, RUN_RERUN, c.layers[li], lab, err, sizeof err)) goto fail;
    }

    /* table */
    printf("\nper-layer figures over the selected rows: median/p90/max (nearest rank); margins in %s quanta\n"
           "between the k-th and (k+1)-th score (rows without a (k+1)-th score excluded); tie-run = scores equal\n"
           "to the k-th, in/out = of them inside/outside the cut; cut-in-tie = rows with out > 0; flips = picks\n"
           "of the f64 %s selection missing from the other; attn NRMS = layer attention output with the f32\n"
           "picks swapped in vs the f64 run, over the selected rows\n\n",
           dname, o.profile);
    printf("  %5s %5s %5s %5s %16s %12s %12s %12s %13s %10s %12s %12s %9s %10s\n", "layer", "width", "rows", "k",
           "margin", "tie-run", "in", "out", "distinct", "cut-in-tie", "flips32/64", "flips s/m", "rows-flip",
           "attn NRMS");
    jm = json_object();
    json_t *jl = json_array();
    jrows = json_array();
    for (int li = 0; li < c.nidx; li++) {
        json_t *jlay = json_object();
        json_object_set_new(jlay, "layer", json_integer(c.layers[li]));
        json_object_set_new(jlay, "rows", json_integer(c.nsel));
        long kmax = 0, rows_w = 0, rows_p = 0;
        for (long s = 0; s < c.nsel; s++) {
            const mrow *r = &c.rows[li * c.nsel + s];
            if (r->w[0].k > kmax) kmax = r->w[0].k;
            rows_w += r->flips_w > 0;
            rows_p += r->flips_p > 0;
        }
        double nrms = dsv4q_acc_nrms(&c.lacc[li]);
        json_object_set_new(jlay, "k", json_integer(kmax));
        char lname[16];
        snprintf(lname, sizeof lname, "%d", c.layers[li]);
        for (int w = 0; w < 2; w++) {
            char b[2][40];
            stat3 st[F_COUNT];
            print_cut(&c, li, w, 0, lname, c.nsel, kmax, st, jlay, v, tmp);
            if (!w) {
                printf(" %12s %12s %4ld/%-4ld %10.3e\n", cell(b[0], 40, st[F_FLIPS_W]), cell(b[1], 40, st[F_FLIPS_P]),
                       rows_w, rows_p, nrms);
                json_object_set_new(jlay, "flips_f32_f64", jstat(st[F_FLIPS_W]));
                json_object_set_new(jlay, "flips_src_model", jstat(st[F_FLIPS_P]));
            } else {
                printf("\n");
            }
        }
        if (c.layers[li] == c.cand) { /* the block cut, same columns */
            json_t *jb = json_object();
            long rows_b = 0, nb = 0;
            for (long s = 0; s < c.nsel; s++) {
                rows_b += c.rows[li * c.nsel + s].flips_b > 0;
                nb += c.rows[li * c.nsel + s].has_b;
            }
            for (int w = 0; w < 2; w++) {
                char b[40];
                stat3 st[F_COUNT];
                print_cut(&c, li, w, 1, "block", nb, c.topb, st, jb, v, tmp);
                if (!w) {
                    printf(" %12s %12s %4ld/%-4s\n", cell(b, 40, st[F_FLIPS_W]), "-", rows_b, "-");
                    json_object_set_new(jb, "flips_f32_f64", jstat(st[F_FLIPS_W]));
                } else {
                    printf("\n");
                }
            }
            json_object_set_new(jb, "rows", json_integer(nb));
            json_object_set_new(jb, "rows_flipped_f32_f64", json_integer(rows_b));
            json_object_set_new(jb, "blocks", json_integer(c.topb));
            json_object_set_new(jb, "block_size", json_integer(c.B));
            json_object_set_new(jlay, "block_cut", jb);
        }
        json_object_set_new(jlay, "rows_flipped_f32_f64", json_integer(rows_w));
        json_object_set_new(jlay, "rows_flipped_src_model", json_integer(rows_p));
        json_object_set_new(jlay, "attn_nrms", json_real(nrms));
        json_array_append_new(jl, jlay);
        for (long s = 0; s < c.nsel; s++) json_array_append_new(jrows, jrow(&c.rows[li * c.nsel + s]));
    }
    printf("  (rows-flip: rows with any f32/f64 flip / rows with any %s/%s flip)\n", o.profile, oc.profile);
    json_object_set_new(jm, "profile", json_string(o.profile));
    json_object_set_new(jm, "compare_profile", json_string(oc.profile));
    json_object_set_new(jm, "boundaries", json_string(bnames));
    json_object_set_new(jm, "positions", json_string(x.positions));
    json_object_set_new(jm, "prefill_chunk", json_integer(c.chunk));
    json_object_set_new(jm, "selected_positions", json_integer(c.nsel));
    json_object_set_new(jm, "index_topk", json_integer(m->cfg.index_topk));
    if (c.rounded) json_object_set_new(jm, "score_dtype", json_string(dname));
    json_object_set_new(jm, "layers", jl);
    metrics = json_dumps(jm, JSON_COMPACT | JSON_SORT_KEYS);   /* receipt: summaries only */
    if (!metrics) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    rc = 0;
    if (o.json) {
        json_object_set(jm, "rows", jrows);
        FILE *jf = dsv4q_out_open(o.json, NULL, 0);
        if (!jf || json_dumpf(jm, jf, JSON_COMPACT | JSON_SORT_KEYS) || dsv4q_out_close(jf, NULL, 0)) {
            dsv4q_out_discard(jf);   /* no-op once closed */
            fprintf(stderr, "dsv4q margins: cannot write %s\n", o.json);
            rc = 2;
        }
    }
    if (x.csv && write_csv(x.csv, &c)) { fprintf(stderr, "dsv4q margins: cannot write %s\n", x.csv); rc = 2; }
    if (x.svg && write_svg(x.svg, &c, o.profile)) { fprintf(stderr, "dsv4q margins: cannot write %s\n", x.svg); rc = 2; }
    if (rc) {   /* no receipt for a run whose output failed */
        fprintf(stderr, "dsv4q margins: no receipt stored: an output failed\n");
        goto out;
    }

    char *pin = NULL, *cfgjson = dsv4q_config_to_json(&m->cfg);
    if (dsv4q_pin_checkpoint(dir, &pin, err, sizeof err)) fprintf(stderr, "dsv4q margins: %s\n", err);
    char prof[1300];
    snprintf(prof, sizeof prof, "%s%s%s (vs %s)", o.profile, o.boundary[0] ? " + " : "", o.boundary, oc.profile);
    dsv4q_receipt rcpt = {.kind = "margins", .checkpoint_pin_json = pin,
                          .tokens_pin = t.pin, .config_json = cfgjson, .profile = prof,
                          .widths = "f32,f64", .metrics_json = metrics, .verdict = "info"};
    dsv4q_cli_receipt_store("margins", &o, &rcpt, argc, argv, 1);
    free(pin);
    free(cfgjson);
    goto out;
fail:
    fprintf(stderr, "dsv4q margins: %s\n", err);
    rc = 2;
out:
    free(metrics);
    json_decref(jm);
    json_decref(jrows);
    free(v);
    free(tmp);
    free(c.slot);
    free(c.layers);
    free(c.sel);
    free(c.rows);
    free(c.attn);
    free(c.lacc);
    free(c.score);
    free(c.bscore);
    for (int w = 0; w < 2; w++) free(c.blk[w]);
    for (int r = 0; r < RUN_NPICK; r++) free(c.picks[r]);
    dsv4q_tokens_free(&t);
    dsv4q_model_close(m);
    return rc;
}
