/*
 * replay.c - stage-by-stage replay of a capture against the oracle (see
 * replay.h for the method and invariants P1..P6).
 *
 * Order of work: calls in ascending position; within a call the stage
 * table's order (embed, layer 0's eight stages, ..., head), so the stateful
 * attn stages of each layer see their calls in order. Per stage and call:
 * presence of every input (else "not checkable"), then the two oracle runs
 * (f64, f32) on the captured inputs, then the metrics of every captured
 * output, accumulated over the calls (NRMS over all rows of all calls, as
 * `sensitivity` does). Gates are applied once, at the end.
 */
#include <assert.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness/ops/ops.h"
#include "harness/measure/metrics.h"
#include "harness/capture/replay.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/model_run.h"
#include "base/util.h"

const char *dsv4q_replay_verdict_name(dsv4q_replay_verdict v)
{
    static const char *const n[] = {"pass", "FAIL", "not checkable", "not captured"};
    return (unsigned)v < 4 ? n[v] : "?";
}

/* The row of a slot's stage in its own table (V4's or V4.1's). */
#define SI(r) dsv4q_stage_get_arch((r)->arch, (r)->stage)
/* The head stage of a table: the logits. */
static int head_of(int arch) { return arch == DSV4Q_ARCH_V41 ? DSV4Q_S41_HEAD : DSV4Q_STAGE_HEAD; }
/* Enough for either table's stage ids (the pooled levels are per stage kind). */
#define STAGES_MAX 16
_Static_assert(DSV4Q_STAGE_COUNT <= STAGES_MAX && DSV4Q_S41_COUNT <= STAGES_MAX, "STAGES_MAX");

const dsv4q_replay_stage *dsv4q_replay_find(const dsv4q_replay *res, int stage, int layer)
{
    const long i = dsv4q_stage_slot_of_arch(res->arch, res->nl, stage, layer);
    return i < 0 || i >= res->nst ? NULL : &res->st[i];
}

/* ---- metrics ----------------------------------------------------------- */

/* The storage dtype an output is judged in (ULPs, the gates' floor_u): the
 * dump's own dtype when it is narrow (BF16, F16), else where the claimed
 * profile keeps that output (stages.h storage: BF16 when its boundary is
 * on, else F32). A BF16 value dumped as F32 is still one BF16 rounding
 * away from its neighbour: a flip is one BF16 ulp, not 65536 F32 ulps. */
int dsv4q_replay_dtype(int dump_dt, const dsv4q_stage_tensor *t, uint64_t bs)
{
    if (dump_dt == DSV4Q_DT_BF16 || dump_dt == DSV4Q_DT_F16) return dump_dt;
    if (t->inner > 0 && ((bs >> (t->inner - 1)) & 1u)) return DSV4Q_DT_BF16;   /* P6 */
    const int dt = dsv4q_stage_storage(t, bs);
    assert(dt == DSV4Q_DT_BF16 || dt == DSV4Q_DT_F32);   /* P5/P6: ULPs count in a storage dtype */
    return dt;
}
static int gate_dtype(int dt) { return dt == DSV4Q_DT_F64 ? DSV4Q_DT_F32 : dt; }

/* ULPs are row-floored (qualify.h dsv4q_op_ulp_rowfloor) for every
 * stage output, rows of `last` values (P5): an output near a cancellation
 * zero is counted at its row's magnitude, not in the ordinals between
 * +tiny and -tiny that one flipped FP8 code upstream walks across. */
static void compare_out(dsv4q_replay_stage *r, int t, int dt, const double *cap, const double *f64, const double *f32,
                        long n, long last)
{
    if (!r->seen[t]) r->dtype[t] = dt;
    r->seen[t] = 1;
    dsv4q_acc_add(&r->val[t], cap, f64, n);
    dsv4q_acc_add(&r->lvl[t], f32, f64, n);
    double u = 0, l = 0;
    if (n > 0) {
        dsv4q_metrics_ulp_argmax(cap, f64, n, last, r->dtype[t], 1, &u);
        dsv4q_metrics_ulp_argmax(f32, f64, n, last, r->dtype[t], 1, &l);
    }
    if (u > r->ulp_val[t]) r->ulp_val[t] = u;
    if (l > r->ulp_lvl[t]) r->ulp_lvl[t] = l;
    if (r->stage == head_of(r->arch)) {
        long a = dsv4q_argmax(f64, n);
        r->amiss_val += dsv4q_argmax(cap, n) != a;
        r->amiss_lvl += dsv4q_argmax(f32, n) != a;
    }
}

/* value / level of metric m at output t; NaN if not measured. */
static void metric_at(const dsv4q_replay_stage *r, int m, int t, double *v, double *l)
{
    const dsv4q_acc *a = &r->val[t], *b = &r->lvl[t];
    *v = *l = NAN;
    switch (m) {
    case DSV4Q_M_NRMS: *v = dsv4q_acc_nrms(a); *l = dsv4q_acc_nrms(b); break;
    case DSV4Q_M_MAX_ABS: *v = a->max_abs; *l = b->max_abs; break;
    case DSV4Q_M_MAX_REL: *v = a->max_rel; *l = b->max_rel; break;
    case DSV4Q_M_ULP_MAX: *v = r->ulp_val[t]; *l = r->ulp_lvl[t]; break;
    case DSV4Q_M_COS_DIST:
        *v = fmax(0, 1 - dsv4q_acc_cosine(a));
        *l = fmax(0, 1 - dsv4q_acc_cosine(b));
        break;
    case DSV4Q_M_NONFINITE: *v = (double)a->nonfinite_a; *l = (double)b->nonfinite_a; break;
    case DSV4Q_M_ARGMAX_MISS:
        if (r->stage == head_of(r->arch)) {
            *v = (double)r->amiss_val;
            *l = (double)r->amiss_lvl;
        }
        break;
    default: break;   /* selections and rerun: not measured by replay */
    }
}

/* The level a stage row is gated at: per stage kind, metric and output,
 * the largest oracle-f32 level over the layers (P4 in replay.h). */
typedef double pooled_lvl[STAGES_MAX][DSV4Q_M_COUNT][DSV4Q_STAGE_MAX_T];

/* Gate every measured metric of a stage (P3) and set its verdict. */
static void judge(dsv4q_replay_stage *r, const dsv4q_gates *g, const pooled_lvl *pool)
{
    if (r->calls_checked == 0 || r->nonfinite) {   /* a NaN drops out of every metric: never a PASS */
        r->verdict = DSV4Q_RV_UNCHECKABLE;
        return;
    }
    int ok = 1;
    for (int m = 0; m < DSV4Q_M_COUNT; m++) {
        dsv4q_replay_row *w = &r->row[m];
        const dsv4q_gate_rule *rule = dsv4q_stage_rule_arch(g, r->arch, r->stage, m); /* no gates: ungated */
        double worst = -INFINITY;
        memset(w, 0, sizeof *w);
        w->out = -1;
        for (int t = 0; t < r->nout; t++) {
            if (!r->seen[t]) continue;
            double v, l;
            metric_at(r, m, t, &v, &l);
            if (isnan(v) && isnan(l)) continue;
            const double pl = (*pool)[r->stage][m][t];
            if (pl > l || (isnan(l) && !isnan(pl))) l = pl;
            assert(isnan(pl) || l >= pl);   /* P4: gated at the largest level over the layers */
            const dsv4q_judgement j = dsv4q_judge(rule, v, l, gate_dtype(r->dtype[t]));
            const int gated = j.gated;
            const double b = gated ? j.bound : NAN;
            double score = gated ? (j.pass ? (b > 0 ? v / b : 0) : INFINITY) : v;
            if (w->out < 0 || score > worst) {
                worst = score;
                *w = (dsv4q_replay_row){1, gated, j.pass, t, v, l, b};
            }
        }
        if (w->measured && w->gated && !w->pass) ok = 0;
    }
    r->verdict = ok ? DSV4Q_RV_PASS : DSV4Q_RV_FAIL;
}

/* ---- the replay loop --------------------------------------------------- */

typedef struct rctx {
    const dsv4q_model *m;
    const dsv4q_capture *cap;
    dsv4q_replay *res;
    dsv4q_run *r64, *r32;
    long *attn_next;              /* per layer: the position its caches are at */
    double *buf[3][2 * DSV4Q_STAGE_MAX_T];   /* captured / f64 / f32 per tensor */
    long cap_n;                   /* elements each buffer holds */
} rctx;

static void set_why(dsv4q_replay_stage *r, const char *fmt, const char *a, long p)
{
    r->calls_unchecked++;
    if (!r->why[0]) snprintf(r->why, sizeof r->why, fmt, a, p);
}

/* Record the first non-finite finding of a stage as its reason (it
 * overrides a milder earlier one: it decides the verdict). */
static void set_nonfinite(dsv4q_replay_stage *r, const char *what, const char *name, long i, double v, long pos)
{
    if (!r->nonfinite)
        snprintf(r->why, sizeof r->why, "%s %s[%ld] = %g (call at position %ld)", what, name, i, v, pos);
    r->nonfinite = 1;
}

static long first_nonfinite(const double *v, long n)
{
    for (long i = 0; i < n; i++)
        if (!isfinite(v[i])) return i;
    return -1;
}

static int grow(rctx *x, long n)
{
    if (n <= x->cap_n) return 0;
    for (int k = 0; k < 3; k++)
        for (int t = 0; t < 2 * DSV4Q_STAGE_MAX_T; t++) {
            double *p = realloc(x->buf[k][t], sizeof(double) * (size_t)n);
            if (!p) return -1;
            x->buf[k][t] = p;
        }
    x->cap_n = n;
    return 0;
}

/* One stage of one call. */
static int replay_stage(rctx *x, const dsv4q_capture_call *c, int stage, int layer, char *err, size_t errlen)
{
    const dsv4q_config *g = &x->m->cfg;
    const int arch = g->arch;
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(arch, stage);
    dsv4q_replay_stage *r = &x->res->st[dsv4q_stage_slot_of_arch(arch, g->n_layers, stage, layer)];
    const dsv4q_st_tensor *tin[DSV4Q_STAGE_MAX_T] = {0}, *tout[DSV4Q_STAGE_MAX_T] = {0};
    int nin = 0, nout = 0, missing_in = -1;
    for (int t = 0; t < si->nin; t++) {
        if ((tin[t] = dsv4q_capture_tensor(c, stage, layer, 0, t))) nin++;
        else if (missing_in < 0) missing_in = t;
    }
    for (int t = 0; t < si->nout; t++) nout += (tout[t] = dsv4q_capture_tensor(c, stage, layer, 1, t)) != NULL;
    if (!nin && !nout) return 0;   /* this stage is not in this call */
    if (r->verdict == DSV4Q_RV_ABSENT) r->verdict = DSV4Q_RV_UNCHECKABLE;   /* judged at the end */
    char name[DSV4Q_STAGE_NAME_MAX];
    const int ci = dsv4q_stage_cache_index(stage, layer, g);   /* -1: stateless */
    if (ci >= 0 && x->attn_next[ci] != c->pos) {
        dsv4q_stage_tensor_name_arch(arch, name, sizeof name, stage, layer, 0, 0);
        set_why(r, "missing earlier call: %s at position %ld is not in the capture (the layer's caches need every "
                "earlier call)", name, x->attn_next[ci]);
        return 0;
    }
    const int src = arch == DSV4Q_ARCH_V41 && stage == DSV4Q_S41_ATTN
                        ? dsv4q_v41_unready_source(g, layer, x->attn_next, c->pos + c->s)
                        : -1;
    if (src >= 0) { /* V4.1: a reader needs its sources' attn of the same call (oracle/model_v41.c J4) */
        dsv4q_stage_tensor_name_arch(arch, name, sizeof name, stage, src, 0, 0);
        set_why(r, "missing source layer: %s at position %ld (whose caches this layer reads) was not replayed", name,
                c->pos);
        return 0;
    }
    if (missing_in >= 0) {
        dsv4q_stage_tensor_name_arch(arch, name, sizeof name, stage, layer, 0, missing_in);
        set_why(r, "missing input %s (call at position %ld)", name, c->pos);
        return 0;
    }
    long nmax = 1;
    for (int side = 0; side < 2; side++)
        for (int t = 0; t < (side ? si->nout : si->nin); t++) {
            long n = (long)dsv4q_stage_numel(side ? &si->out[t] : &si->in[t], g, c->s);
            if (n > nmax) nmax = n;
        }
    if (grow(x, nmax)) { snprintf(err, errlen, "out of memory"); return -1; }
    dsv4q_stage_io io64 = {stage, si->per_layer ? layer : -1, c->s, c->pos, c->ids, {0}, {0}}, io32 = io64;
    for (int t = 0; t < si->nin; t++) {
        dsv4q_capture_values(tin[t], x->buf[0][t]);
        io64.in[t] = io32.in[t] = x->buf[0][t];
    }
    for (int t = 0; t < si->nin; t++) {
        long bad = first_nonfinite(x->buf[0][t], (long)tin[t]->numel);
        if (bad >= 0) {
            set_nonfinite(r, "non-finite captured input", tin[t]->name, bad, x->buf[0][t][bad], c->pos);
            r->calls_unchecked++;
            return 0;
        }
    }
    for (int t = 0; t < si->nout; t++) {
        io64.out[t] = x->buf[1][DSV4Q_STAGE_MAX_T + t];
        io32.out[t] = x->buf[2][DSV4Q_STAGE_MAX_T + t];
    }
    char e2[512];
    if (dsv4q_run_stage(x->r64, &io64, e2, sizeof e2) || dsv4q_run_stage(x->r32, &io32, e2, sizeof e2)) {
        snprintf(err, errlen, "replaying %s at position %ld: %s", si->name, c->pos, e2);
        return -1;
    }
    if (ci >= 0) x->attn_next[ci] = c->pos + c->s;
    if (!nout) {
        dsv4q_stage_tensor_name_arch(arch, name, sizeof name, stage, layer, 1, 0);
        set_why(r, "no output captured (%s, call at position %ld)", name, c->pos);
        return 0;
    }
    const double *cand[DSV4Q_STAGE_MAX_T] = {0};
    long n[DSV4Q_STAGE_MAX_T] = {0}, last[DSV4Q_STAGE_MAX_T] = {0};
    int dt[DSV4Q_STAGE_MAX_T] = {0};
    for (int t = 0; t < si->nout; t++) {
        if (!tout[t]) continue;
        last[t] = dsv4q_stage_row_len(&si->out[t], g, c->s);
        double *cv = x->buf[0][DSV4Q_STAGE_MAX_T + t];
        dsv4q_capture_values(tout[t], cv);
        cand[t] = cv;
        n[t] = (long)tout[t]->numel;
        dt[t] = dsv4q_replay_dtype(tout[t]->dtype, &si->out[t], x->cap->bs);
    }
    dsv4q_replay_add(r, cand, (const double *const *)io64.out, (const double *const *)io32.out, n, last, dt, c->pos,
                     "capture", "captured");
    return 0;
}

void dsv4q_replay_add(dsv4q_replay_stage *r, const double *const *cand, const double *const *f64, const double *const *f32,
                      const long *n, const long *last, const int *dtype, long pos, const char *noun,
                      const char *adj)
{
    char name[DSV4Q_STAGE_NAME_MAX], what[128];
    for (int t = 0; t < r->nout; t++) { /* the reference first: if it is not finite, nothing is judged */
        if (!cand[t]) continue;
        const int64_t rows_last[2] = {last[t] > 0 ? n[t] / last[t] : n[t], last[t] > 0 ? last[t] : 1};
        char why[sizeof r->why - 40];
        dsv4q_stage_tensor_name_arch(r->arch, name, sizeof name, r->stage, r->layer, 1, t);
        if (!dsv4q_ref_finite(f64[t], f32[t], 0, n[t], rows_last, 2, name, why, sizeof why)) continue;
        if (!r->ref_nonfinite) snprintf(r->why, sizeof r->why, "%s (call at position %ld)", why, pos);
        r->nonfinite = r->ref_nonfinite = 1;
        r->calls_unchecked++;
        if (r->verdict == DSV4Q_RV_ABSENT) r->verdict = DSV4Q_RV_UNCHECKABLE;
        return;
    }
    for (int t = 0; t < r->nout; t++) {
        if (!cand[t]) continue;
        for (long i = 0; i < n[t]; i++)
            if (isfinite(cand[t][i]) != isfinite(f64[t][i])) {
                dsv4q_stage_tensor_name_arch(r->arch, name, sizeof name, r->stage, r->layer, 1, t);
                if (isfinite(cand[t][i])) {
                    snprintf(what, sizeof what, "the oracle's output is non-finite where the %s is finite:", noun);
                    set_nonfinite(r, what, name, i, f64[t][i], pos);
                } else {
                    snprintf(what, sizeof what, "non-finite %s output where the oracle is finite:", adj);
                    set_nonfinite(r, what, name, i, cand[t][i], pos);
                }
                break;
            }
        compare_out(r, t, dtype[t], cand[t], f64[t], f32[t], n[t], last[t]);
    }
    if (r->verdict == DSV4Q_RV_ABSENT) r->verdict = DSV4Q_RV_UNCHECKABLE;   /* judged at the end */
    r->calls_checked++;
}

/* Whole model: captured logits vs whole oracle runs on the token ids. */
static int whole_model(rctx *x, const dsv4q_gates *gt, char *err, size_t errlen)
{
    const dsv4q_capture *cap = x->cap;
    dsv4q_rmodel *M = &x->res->model;
    const long V = x->m->cfg.vocab_size;
    const int arch = x->m->cfg.arch, H = head_of(arch);
    long have = 0;
    for (int i = 0; i < cap->ncalls; i++) have += dsv4q_capture_tensor(&cap->calls[i], H, -1, 1, 0) != NULL;
    if (!have) {
        M->verdict = DSV4Q_RV_ABSENT;
        return 0;
    }
    M->verdict = DSV4Q_RV_UNCHECKABLE;
    long expect = cap->prefix_len; /* a cached prefix: the calls continue it */
    for (int i = 0; i < cap->ncalls; i++) {
        const dsv4q_capture_call *c = &cap->calls[i];
        if (c->pos != expect) {
            snprintf(M->why, sizeof M->why, "the calls do not run from position 0 without a gap (next expected "
                     "position %ld, next call at %ld)", expect, c->pos);
            return 0;
        }
        if (!dsv4q_capture_tensor(c, H, -1, 1, 0)) {
            snprintf(M->why, sizeof M->why, "model.head.out missing in the call at position %ld", c->pos);
            return 0;
        }
        expect = c->pos + c->s;
    }
    double *l64 = malloc(sizeof(double) * (size_t)V), *l32 = malloc(sizeof(double) * (size_t)V),
           *lc = malloc(sizeof(double) * (size_t)V);
    dsv4q_run *a = NULL, *b = NULL;
    int rc = -1, dt = DSV4Q_DT_F32;
    if (!l64 || !l32 || !lc) { snprintf(err, errlen, "out of memory"); goto out; }
    if (dsv4q_run_open(&a, x->m, 64, cap->bs, cap->max_pos, NULL, NULL, err, errlen) ||
        dsv4q_run_open(&b, x->m, 32, cap->bs, cap->max_pos, NULL, NULL, err, errlen))
        goto out;
    /* a prefill in chunks: the oracle's chunks equal its one call (model.c M4) */
    if (cap->prompt &&
        (dsv4q_run_set_prefill(a, cap->prompt, err, errlen) || dsv4q_run_set_prefill(b, cap->prompt, err, errlen)))
        goto out;
    if (cap->prefix_len && (dsv4q_run_feed(a, cap->prefix_ids, cap->prefix_len, l64, err, errlen) ||
                            dsv4q_run_feed(b, cap->prefix_ids, cap->prefix_len, l32, err, errlen)))
        goto out;
    for (int i = 0; i < cap->ncalls; i++) {
        const dsv4q_capture_call *c = &cap->calls[i];
        const dsv4q_st_tensor *t = dsv4q_capture_tensor(c, H, -1, 1, 0);
        if (dsv4q_run_feed(a, c->ids, c->s, l64, err, errlen) || dsv4q_run_feed(b, c->ids, c->s, l32, err, errlen))
            goto out;
        dsv4q_capture_values(t, lc);
        const int64_t shape[1] = {V};
        char why[sizeof M->why - 40];
        if (dsv4q_ref_finite(l64, l32, 0, V, shape, 1, "logits", why, sizeof why)) {
            /* the whole oracle run overflowed: no logit comparison proves anything */
            snprintf(M->why, sizeof M->why, "%s (call at position %ld)", why, c->pos);
            M->ref_nonfinite = 1;
            M->verdict = DSV4Q_RV_UNCHECKABLE;
            rc = 0;
            goto out;
        }
        /* the logit gate keeps the logits' own storage (not P6, a stage rule) */
        dt = t->dtype == DSV4Q_DT_BF16 || t->dtype == DSV4Q_DT_F16
                 ? (int)t->dtype
                 : dsv4q_stage_storage(&dsv4q_stage_get_arch(arch, H)->out[0], cap->bs);
        dsv4q_acc_add(&M->val, lc, l64, V);
        dsv4q_acc_add(&M->lvl, l32, l64, V);
        long am = dsv4q_argmax(l64, V);
        M->agree += dsv4q_argmax(lc, V) == am;
        M->agree_lvl += dsv4q_argmax(l32, V) == am;
        M->rows++;
    }
    double v = dsv4q_acc_nrms(&M->val), l = dsv4q_acc_nrms(&M->lvl);
    M->nrms = (dsv4q_replay_row){1, gt->model_nrms.on, 1, 0, v, l, NAN};
    if (M->nrms.gated) {
        const dsv4q_judgement j = dsv4q_judge(&gt->model_nrms, v, l, gate_dtype(dt));
        M->nrms.bound = j.bound;
        M->nrms.pass = j.pass;
    }
    M->greedy_min = gt->greedy_min;
    M->greedy_gated = gt->greedy_min >= 0;
    /* the level rule for greedy agreement too: agreeing as often as the
     * FP32 oracle on the same tokens is never a failure */
    M->greedy_pass = !M->greedy_gated || (double)M->agree >= gt->greedy_min * (double)M->rows ||
                     M->agree >= M->agree_lvl;
    M->verdict = (M->nrms.gated && !M->nrms.pass) || !M->greedy_pass ? DSV4Q_RV_FAIL : DSV4Q_RV_PASS;
    rc = 0;
out:
    dsv4q_run_close(a);
    dsv4q_run_close(b);
    free(l64);
    free(l32);
    free(lc);
    return rc;
}

void dsv4q_replay_free(dsv4q_replay *res)
{
    free(res->st);
    memset(res, 0, sizeof *res);
}

long dsv4q_stage_row_len(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, long s)
{
    int64_t shape[DSV4Q_STAGE_MAX_DIM];
    const int nd = dsv4q_stage_shape(t, cfg, s, shape);
    return nd > 0 ? (long)shape[nd - 1] : 1;
}

int dsv4q_replay_init_arch(dsv4q_replay *res, int arch, int nl)
{
    memset(res, 0, sizeof *res);
    res->arch = arch;
    res->nl = nl;
    res->nst = (int)dsv4q_stage_nslots_arch(arch, nl);
    res->st = calloc((size_t)res->nst, sizeof *res->st);
    if (!res->st) return -1;
    for (int st = 0; st < dsv4q_stage_count_arch(arch); st++) {
        const dsv4q_stage_info *si = dsv4q_stage_get_arch(arch, st);
        for (int l = 0; l < (si->per_layer ? nl : 1); l++) {
            dsv4q_replay_stage *r = &res->st[dsv4q_stage_slot_of_arch(arch, nl, st, l)];
            r->arch = arch;
            r->stage = st;
            r->layer = si->per_layer ? l : -1;
            r->nout = si->nout;
            r->verdict = DSV4Q_RV_ABSENT;
        }
    }
    return 0;
}

int dsv4q_replay_init(dsv4q_replay *res, int nl) { return dsv4q_replay_init_arch(res, DSV4Q_ARCH_V4, nl); }

void dsv4q_replay_mark_present(dsv4q_replay *res, const dsv4q_config *cfg)
{
    for (int i = 0; i < res->nst; i++)
        res->st[i].not_run = !dsv4q_stage_present(cfg, res->st[i].stage, res->st[i].layer);
}

void dsv4q_replay_finish(dsv4q_replay *res, const dsv4q_gates *g)
{
    res->npass = res->nfail = res->nunc = res->nabsent = res->npartial = 0;
    int nabsent_optional = 0;
    pooled_lvl pool_, *pool = &pool_;   /* a few KB */
    for (int st = 0; st < STAGES_MAX; st++)
        for (int m = 0; m < DSV4Q_M_COUNT; m++)
            for (int t = 0; t < DSV4Q_STAGE_MAX_T; t++) (*pool)[st][m][t] = NAN;
    for (int i = 0; i < res->nst; i++) {
        const dsv4q_replay_stage *r = &res->st[i];
        if (r->verdict == DSV4Q_RV_ABSENT || !r->calls_checked || r->nonfinite) continue;
        for (int m = 0; m < DSV4Q_M_COUNT; m++)
            for (int t = 0; t < r->nout; t++) {
                double v, l, *p = &(*pool)[r->stage][m][t];
                if (!r->seen[t]) continue;
                metric_at(r, m, t, &v, &l);
                if (!isnan(l) && (isnan(*p) || l > *p)) *p = l;
            }
    }
    for (int i = 0; i < res->nst; i++) {
        dsv4q_replay_stage *r = &res->st[i];
        if (r->verdict == DSV4Q_RV_ABSENT) {
            const int may = SI(r)->optional || r->not_run; /* an optional stage (mtp) may be left out */
            res->nabsent += !may;
            nabsent_optional += may;
            continue;
        }
        judge(r, g, (const pooled_lvl *)pool);
        assert(r->verdict != DSV4Q_RV_ABSENT);   /* P1: a captured stage is compared or not checkable */
        char miss[160] = "";
        for (int t = 0; t < r->nout; t++)
            if (!r->seen[t] && r->calls_checked)
                snprintf(miss + strlen(miss), sizeof miss - strlen(miss), "%s%s", miss[0] ? ", " : "",
                         SI(r)->out[t].name);
        if (miss[0]) snprintf(r->note, sizeof r->note, "outputs never captured: %s", miss);
        res->npass += r->verdict == DSV4Q_RV_PASS;
        res->nfail += r->verdict == DSV4Q_RV_FAIL;
        res->nunc += r->verdict == DSV4Q_RV_UNCHECKABLE;
        res->npartial += (r->verdict == DSV4Q_RV_PASS || r->verdict == DSV4Q_RV_FAIL) && r->calls_unchecked > 0;
    }
    /* P1: nothing silently skipped - every slot is counted exactly once */
    assert(res->npass + res->nfail + res->nunc + res->nabsent + nabsent_optional == res->nst);
}

int dsv4q_replay_run(dsv4q_replay *res, const dsv4q_model *m, const dsv4q_capture *cap, const dsv4q_replay_opts *o,
                     char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    const int nl = g->n_layers;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(res, 0, sizeof *res);
    if (dsv4q_stage_gates_check(err, errlen)) return -1;   /* no stage judged without its gate */
    rctx x = {.m = m, .cap = cap, .res = res};
    int rc = -1;
    x.attn_next = calloc((size_t)dsv4q_stage_cache_count(g), sizeof(long));
    if (dsv4q_replay_init_arch(res, g->arch, nl) || !x.attn_next) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    dsv4q_replay_mark_present(res, g);
    if (dsv4q_run_open(&x.r64, m, 64, cap->bs, cap->max_pos, NULL, NULL, err, errlen) ||
        dsv4q_run_open(&x.r32, m, 32, cap->bs, cap->max_pos, NULL, NULL, err, errlen))
        goto out;
    /* the engine fed its prefill in chunks: each layer's attention takes
     * them as the chunks of one prefill (model.c M4), so a chunk is judged
     * against what the one call gives its rows */
    if (cap->prompt && (dsv4q_run_set_prefill(x.r64, cap->prompt, err, errlen) ||
                        dsv4q_run_set_prefill(x.r32, cap->prompt, err, errlen)))
        goto out;
    /* a prefix-cache hit: the caches of the cached positions are the
     * oracle's own, so an engine's wrong prefix cache is its attn error */
    if (cap->prefix_len) {
        char e2[1024];
        if (dsv4q_run_seed_prefix(x.r64, cap->prefix_ids, cap->prefix_len, e2, sizeof e2) ||
            dsv4q_run_seed_prefix(x.r32, cap->prefix_ids, cap->prefix_len, e2, sizeof e2)) {
            snprintf(err, errlen, "the cached prefix of %s (prefix_token_ids, %ld tokens) cannot be seeded: %s",
                     cap->path, cap->prefix_len, e2);
            goto out;
        }
        for (int li = 0; li < nl; li++) x.attn_next[li] = cap->prefix_len;
    }
    for (int i = 0; i < cap->ncalls; i++) {
        const dsv4q_capture_call *c = &cap->calls[i];
        if (!o->quiet) fprintf(stderr, "[replay] call %d/%d (position %ld, %ld tokens)\n", i + 1, cap->ncalls, c->pos, c->s);
        for (long k = 0; k < res->nst; k++) {   /* the forward order of the stage table */
            int st, l;
            dsv4q_stage_slot_arch(g->arch, nl, k, &st, &l);
            if (replay_stage(&x, c, st, l, err, errlen)) goto out;
        }
    }
    dsv4q_replay_finish(res, o->gates);
    res->model.verdict = DSV4Q_RV_ABSENT;
    if (o->whole_model && whole_model(&x, o->gates, err, errlen)) goto out;
    if (!o->whole_model) {
        res->model.verdict = DSV4Q_RV_UNCHECKABLE;
        snprintf(res->model.why, sizeof res->model.why, "skipped (--no-model)");
    }
    rc = 0;
out:
    dsv4q_run_close(x.r64);
    dsv4q_run_close(x.r32);
    for (int k = 0; k < 3; k++)
        for (int t = 0; t < 2 * DSV4Q_STAGE_MAX_T; t++) free(x.buf[k][t]);
    free(x.attn_next);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (rc) dsv4q_replay_free(res);
    return rc;
}

int dsv4q_replay_status(const dsv4q_replay *res)
{
    if (res->nfail || res->model.verdict == DSV4Q_RV_FAIL || res->model.ref_nonfinite) return 1;
    for (int i = 0; i < res->nst; i++)   /* a non-finite stage is never part of a pass */
        if (res->st[i].nonfinite) return 1;
    return res->npass > 0 ? 0 : 1;
}

/* ---- output ------------------------------------------------------------ */

void dsv4q_replay_key(const dsv4q_replay_stage *r, char *buf, size_t len)
{
    const dsv4q_stage_info *si = SI(r);
    if (si->per_layer) snprintf(buf, len, "L%d.%s", r->layer, si->name);
    else snprintf(buf, len, "model.%s", si->name);
}

void dsv4q_replay_print_failed(FILE *f, const dsv4q_replay *res)
{
    for (int i = 0; i < res->nst; i++) {
        const dsv4q_replay_stage *r = &res->st[i];
        if (r->verdict != DSV4Q_RV_FAIL) continue;
        char key[48];
        dsv4q_replay_key(r, key, sizeof key);
        for (int m = 0; m < DSV4Q_M_COUNT; m++) {
            const dsv4q_replay_row *w = &r->row[m];
            if (!w->measured || !w->gated || w->pass) continue;
            fprintf(f, "failed: %s: %s %.3e > bound %.3e (level %.3e)\n", key, dsv4q_metric_name(m), w->value,
                    w->bound, w->level);
            break;
        }
    }
}

void dsv4q_replay_print(FILE *f, const dsv4q_replay *res, const dsv4q_gates *g, int all)
{
    fprintf(f, "gates %s; bound = factor * level + floor (+ floor_u * u(storage dtype))\n\n", g->origin);
    fprintf(f, "%-18s %-9s %-16s %11s %11s %11s  %s\n", "stage", "calls", "metric", "value", "level", "bound",
            "verdict");
    for (int i = 0; i < res->nst; i++) {
        const dsv4q_replay_stage *r = &res->st[i];
        if (r->verdict == DSV4Q_RV_ABSENT) continue;
        char key[48], calls[24];
        dsv4q_replay_key(r, key, sizeof key);
        snprintf(calls, sizeof calls, "%ld/%ld", r->calls_checked, r->calls_checked + r->calls_unchecked);
        if (r->verdict == DSV4Q_RV_UNCHECKABLE) {
            fprintf(f, "%-18s %-9s %-16s %11s %11s %11s  not checkable: %s\n", key, calls, "-", "-", "-", "-", r->why);
            continue;
        }
        int first = 1;
        for (int m = 0; m < DSV4Q_M_COUNT; m++) {
            const dsv4q_replay_row *w = &r->row[m];
            if (!w->measured || (!all && !w->gated)) continue;
            char name[48], bound[24];
            if (r->nout > 1) snprintf(name, sizeof name, "%s[%s]", dsv4q_metric_name(m), SI(r)->out[w->out].name);
            else snprintf(name, sizeof name, "%s", dsv4q_metric_name(m));
            if (w->gated) snprintf(bound, sizeof bound, "%11.3e", w->bound);
            else snprintf(bound, sizeof bound, "%11s", "-");
            /* every row carries its stage key: `grep FAIL` keeps it */
            fprintf(f, "%-18s %-9s %-16s %11.3e %11.3e %s  %s\n", key, first ? calls : "", name, w->value,
                    w->level, bound, !w->gated ? "info" : w->pass ? "pass" : "FAIL");
            first = 0;
        }
        if (first)
            fprintf(f, "%-18s %-9s %-16s %11s %11s %11s  %s\n", key, calls, "(no gated metric)", "", "", "",
                    dsv4q_replay_verdict_name(r->verdict));
        if (r->calls_unchecked) fprintf(f, "%-18s %-9s   %ld call(s) not checkable: %s\n", "", "", r->calls_unchecked, r->why);
        if (r->note[0]) fprintf(f, "%-18s %-9s   %s\n", "", "", r->note);
    }
    if (res->nabsent) {
        fprintf(f, "\nnot captured (no tensor in any call):");
        int k = 0;
        for (int i = 0; i < res->nst; i++) {
            const dsv4q_replay_stage *r = &res->st[i];
            if (r->verdict != DSV4Q_RV_ABSENT || (SI(r)->optional || r->not_run)) continue;
            char key[48];
            dsv4q_replay_key(r, key, sizeof key);
            if (k < 24) fprintf(f, "%s %s", k ? "," : "", key);
            k++;
        }
        if (k > 24) fprintf(f, ", ... (%d in all)", k);
        fprintf(f, "\n");
    }
    const dsv4q_rmodel *M = &res->model;
    fprintf(f, "\nwhole model (captured logits vs an oracle-f64 run on the captured token ids): ");
    if (M->verdict == DSV4Q_RV_ABSENT) fprintf(f, "not captured (no model.head.out)\n");
    else if (M->verdict == DSV4Q_RV_UNCHECKABLE) fprintf(f, "not checkable: %s\n", M->why);
    else {
        fprintf(f, "%ld calls\n", M->rows);
        char bound[32] = "not gated";
        if (M->nrms.gated) snprintf(bound, sizeof bound, "%.4e", M->nrms.bound);
        fprintf(f, "  logit NRMS         %.4e  (level %.4e, bound %s)  %s\n", M->nrms.value, M->nrms.level, bound,
                !M->nrms.gated ? "info" : M->nrms.pass ? "pass" : "FAIL");
        fprintf(f, "  max abs error      %.4e\n", M->val.max_abs);
        fprintf(f, "  greedy agreement   %ld/%ld (oracle-f32: %ld/%ld)", M->agree, M->rows, M->agree_lvl, M->rows);
        if (M->greedy_gated) {
            /* the rule of qualify --whole-model: min(ceil(min * rows), oracle-f32's agreeing rows) */
            long need = (long)ceil(M->greedy_min * (double)M->rows - 1e-9);
            if (need > M->agree_lvl) need = M->agree_lvl;
            fprintf(f, ", min %.3g: needs >= %ld/%ld  %s\n", M->greedy_min, need, M->rows, M->greedy_pass ? "pass" : "FAIL");
        }
        else fprintf(f, "  info\n");
    }
    fprintf(f, "\n%d stages compared: %d pass, %d FAIL", res->npass + res->nfail, res->npass, res->nfail);
    if (res->npartial) fprintf(f, " (%d of them judged on part of their calls only)", res->npartial);
    fprintf(f, "; %d not checkable; %d not captured; %.1f s -> %s\n", res->nunc, res->nabsent, res->seconds,
            dsv4q_replay_status(res) == 0 ? "PASS" : "FAIL");
    /* one line per failing stage (and the whole model), for CI logs */
    dsv4q_replay_print_failed(f, res);
    if (M->verdict == DSV4Q_RV_FAIL)
        fprintf(f, "failed: model.logits: nrms %.3e (bound %.3e), greedy %ld/%ld (oracle-f32 %ld/%ld)\n", M->nrms.value,
                M->nrms.bound, M->agree, M->rows, M->agree_lvl, M->rows);
}

json_t *dsv4q_replay_stages_json(const dsv4q_replay *res, json_t *absent)
{
    json_t *stages = json_array();
    for (int i = 0; i < res->nst; i++) {
        const dsv4q_replay_stage *r = &res->st[i];
        char key[48];
        dsv4q_replay_key(r, key, sizeof key);
        if (r->verdict == DSV4Q_RV_ABSENT) {
            if (absent && !(SI(r)->optional || r->not_run)) json_array_append_new(absent, json_string(key));
            continue;
        }
        json_t *s = json_object(), *ms = json_object();
        json_object_set_new(s, "stage", json_string(key));
        json_object_set_new(s, "verdict", json_string(dsv4q_replay_verdict_name(r->verdict)));
        json_object_set_new(s, "calls_checked", json_integer(r->calls_checked));
        json_object_set_new(s, "calls_not_checkable", json_integer(r->calls_unchecked));
        if (r->why[0]) json_object_set_new(s, "why", json_string(r->why));
        if (r->note[0]) json_object_set_new(s, "note", json_string(r->note));
        for (int m = 0; m < DSV4Q_M_COUNT; m++) {
            const dsv4q_replay_row *w = &r->row[m];
            if (!w->measured) continue;
            json_t *j = json_object();
            json_object_set_new(j, "value", dsv4q_json_num(w->value));
            json_object_set_new(j, "level", dsv4q_json_num(w->level));
            json_object_set_new(j, "bound", w->gated ? dsv4q_json_num(w->bound) : json_null());
            json_object_set_new(j, "gated", json_boolean(w->gated));
            json_object_set_new(j, "pass", json_boolean(w->pass));
            json_object_set_new(j, "output", json_string(SI(r)->out[w->out].name));
            json_object_set_new(ms, dsv4q_metric_name(m), j);
        }
        json_object_set_new(s, "metrics", ms);
        json_array_append_new(stages, s);
    }
    return stages;
}

char *dsv4q_replay_json(const dsv4q_replay *res, const dsv4q_capture *cap, const dsv4q_gates *g)
{
    json_t *root = json_object(), *absent = json_array();
    json_object_set_new(root, "capture", json_string(cap->path));
    json_object_set_new(root, "capture_sha256", json_string(cap->sha256));
    json_object_set_new(root, "calls", json_integer(cap->ncalls));
    json_object_set_new(root, "engine", json_string(cap->engine));
    json_object_set_new(root, "engine_version", json_string(cap->engine_version));
    json_object_set_new(root, "profile", json_string(cap->profile));
    json_object_set_new(root, "boundary", json_string(cap->boundary));
    json_object_set_new(root, "gates", json_string(g->origin));
    json_object_set_new(root, "stages", dsv4q_replay_stages_json(res, absent));
    json_object_set_new(root, "not_captured", absent);
    const dsv4q_rmodel *M = &res->model;
    json_t *jm = json_object();
    json_object_set_new(jm, "verdict", json_string(dsv4q_replay_verdict_name(M->verdict)));
    if (M->why[0]) json_object_set_new(jm, "why", json_string(M->why));
    if (M->verdict == DSV4Q_RV_PASS || M->verdict == DSV4Q_RV_FAIL) {
        json_object_set_new(jm, "rows", json_integer(M->rows));
        json_object_set_new(jm, "logit_nrms", dsv4q_json_num(M->nrms.value));
        json_object_set_new(jm, "logit_nrms_level", dsv4q_json_num(M->nrms.level));
        json_object_set_new(jm, "logit_nrms_bound", M->nrms.gated ? dsv4q_json_num(M->nrms.bound) : json_null());
        json_object_set_new(jm, "logit_max_abs", dsv4q_json_num(M->val.max_abs));
        json_object_set_new(jm, "greedy_agree", json_integer(M->agree));
        json_object_set_new(jm, "greedy_agree_level", json_integer(M->agree_lvl));
        json_object_set_new(jm, "greedy_min", M->greedy_gated ? dsv4q_json_num(M->greedy_min) : json_null());
    }
    json_object_set_new(root, "whole_model", jm);
    json_object_set_new(root, "pass", json_integer(res->npass));
    json_object_set_new(root, "fail", json_integer(res->nfail));
    json_object_set_new(root, "not_checkable", json_integer(res->nunc));
    json_object_set_new(root, "partially_checked", json_integer(res->npartial));
    json_object_set_new(root, "verdict", json_string(dsv4q_replay_status(res) == 0 ? "pass" : "fail"));
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    return s;
}
