/*
 * qualify.c - the qualification loop, the metric set per output and the
 * gate verdicts (see qualify.h for the metric definitions).
 *
 * Order of checks per case (STYLE.md, after llama.cpp test-backend-ops):
 * isolation status (crash / hang / error / overrun), then the sentinels
 * and non-finite values, then the selection rule, then NRMS / max-abs /
 * ULP against the gates. A case's inputs and its two references are built
 * once and shared by every backend under test in the same call.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness/measure/metrics.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "base/util.h"

const char *dsv4q_verdict_name(dsv4q_verdict v)
{
    static const char *const n[] = {"pass", "FAIL", "ERROR", "skip", "not checkable"};
    return (unsigned)v < 5 ? n[v] : "?";
}

int dsv4q_qualify_parse_seeds(const char *s, long *lo, long *hi, char *err, size_t errlen)
{
    char *e;
    long a = strtol(s, &e, 10), b = a;
    if (e != s && *e == '-') {
        const char *t = e + 1;
        b = strtol(t, &e, 10);
        if (e == t) b = -1;
    }
    if (e == s || *e || a < 1 || b < a || b > 0x7fffffffL || b - a >= 10000) {
        snprintf(err, errlen, "--seeds '%s': expected A-B or A with 1 <= A <= B (at most 10000 seeds)", s);
        return -1;
    }
    *lo = a;
    *hi = b;
    return 0;
}

int dsv4q_qualify_parse_ops(const char *list, uint64_t *bits, char *err, size_t errlen)
{
    *bits = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int op = dsv4q_op_find(t);
        if (op < 0) {
            char names[512] = "";
            for (int i = 0; i < DSV4Q_OP_COUNT; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                         dsv4q_op_get(i)->name);
            snprintf(err, errlen, "unknown operator '%s' in --ops (operators: %s)", t, names);
            return -1;
        }
        *bits |= DSV4Q_CAP(op);
    }
    if (!*bits) {
        snprintf(err, errlen, "--ops: empty list");
        return -1;
    }
    return 0;
}

/* ---- references -------------------------------------------------------- */

typedef struct refs {
    uint64_t bs;
    void *f64[DSV4Q_OPS_MAX_T];   /* double or int32_t */
    void *f32[DSV4Q_OPS_MAX_T];   /* float or int32_t */
    char bad[512];                /* "" or why the reference is not finite (dsv4q_ref_finite) */
    unsigned badout;              /* bit i: output i's reference is not finite */
} refs;

static int is_i32(const dsv4q_case *c, int i) { return c->out[i].dtype == DSV4Q_BT_I32; }

static void refs_free(refs *r)
{
    for (int i = 0; i < DSV4Q_OPS_MAX_T; i++) {
        free(r->f64[i]);
        free(r->f32[i]);
        r->f64[i] = r->f32[i] = NULL;
    }
}

static int refs_make(refs *r, const dsv4q_case *c, uint64_t bs, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->bs = bs;
    for (int i = 0; i < c->nout; i++) {
        size_t n = (size_t)dsv4q_bt_numel(&c->out[i]);
        r->f64[i] = malloc((is_i32(c, i) ? 4 : 8) * (n ? n : 1));
        r->f32[i] = malloc(4 * (n ? n : 1));
        if (!r->f64[i] || !r->f32[i]) {
            refs_free(r);
            snprintf(err, errlen, "%s: out of memory", c->key);
            return -1;
        }
    }
    dsv4q_bt out[DSV4Q_OPS_MAX_T];
    dsv4q_bcall call;
    dsv4q_case_call(c, out, bs, &call);
    if (dsv4q_oracle_exec(64, bs, &call, r->f64, err, errlen) || dsv4q_oracle_exec(32, bs, &call, r->f32, err, errlen)) {
        refs_free(r);
        return -1;
    }
    /* a reference that is not finite judges nothing (issue 29: act_q8_0's
     * F16 scale overflowing on the extreme recipe made both widths NaN, and
     * the candidate's NaN scored NRMS 0, a vacuous pass) */
    for (int i = 0; i < c->nout; i++) {
        char why[512];
        if (!is_i32(c, i) &&
            dsv4q_ref_finite(r->f64[i], r->f32[i], 1, (long)dsv4q_bt_numel(&c->out[i]), c->out[i].shape, c->out[i].ndim,
                             c->nout > 1 ? c->out[i].name : NULL, why, sizeof why)) {
            r->badout |= 1u << i;
            if (!r->bad[0]) snprintf(r->bad, sizeof r->bad, "%s", why); /* the first such output */
        }
    }
    return 0;
}

/* Case r judged against reference ref: not checkable when ref is not
 * finite (a backend error stays an error: it says more), unless a gated
 * row fails on an output whose reference IS finite: that FAIL stands (a
 * multi-output case must not hide a real failure behind another output's
 * overflow; the whole model does the same). */
static void mark_uncheckable(dsv4q_qcase *r, const refs *ref)
{
    if (!ref->bad[0] || r->verdict == DSV4Q_V_ERROR) return;
    if (r->verdict == DSV4Q_V_FAIL && (r->failout & ~ref->badout)) return;
    r->verdict = DSV4Q_V_UNCHECKABLE;
    snprintf(r->msg, sizeof r->msg, "%s", ref->bad);
}

/* Kernel references of a LINEAR case whose weight the engine stores in its
 * own encoding (ew: decoded exactly, [N, K] F32): the oracle at both widths
 * on ew as an F32 weight, with the declaration's activation quantization of
 * the FP8/FP4 reference weight (every weight with act_q_all) applied to x
 * first (act_q8_0 / act_q8_0_rne / act_q8_k in binary32, gemm_act_fp8 as
 * the in-place simulation: all width-independent in value), so the
 * product is the engine's. */
static int kernel_refs_make(refs *r, const dsv4q_case *c, uint64_t bs, const float *ew, char *err, size_t errlen)
{
    dsv4q_case c2 = *c;
    c2.nbufs = 0;
    const long s = (long)c->in[0].shape[0], K = (long)c->in[0].shape[1];
    const int quant = c->in[1].raw && (c->in[1].raw_dtype == DSV4Q_BT_F8_E4M3 || c->in[1].raw_dtype == DSV4Q_BT_I8);
    float *xq = malloc(sizeof(float) * (size_t)(s * K > 0 ? s * K : 1));
    double *xd = malloc(sizeof(double) * (size_t)(K > 0 ? K : 1));
    if (!xq || !xd) {
        free(xq);
        free(xd);
        snprintf(err, errlen, "%s: out of memory", c->key);
        return -1;
    }
    memcpy(xq, c->in[0].data, sizeof(float) * (size_t)(s * K));
    uint64_t bs2 = bs;
    if (dsv4q_engine_act_q_applies(bs, quant)) {
        for (long t = 0; t < s; t++) dsv4q_engine_act_quant_f32(bs, quant, xq + t * K, K);
    } else if (quant && ((bs >> DSV4Q_B_GEMM_ACT_FP8) & 1u)) {
        for (long t = 0; t < s; t++) {
            for (long k = 0; k < K; k++) xd[k] = xq[t * K + k];
            dsv4q_act_quant_f64(xd, 1, K, 128, (int)c->param[0]);
            for (long k = 0; k < K; k++) xq[t * K + k] = (float)xd[k];
        }
    }
    bs2 &= ~(DSV4Q_ACT_Q_ENGINE | DSV4Q_BIT(DSV4Q_B_ACT_Q_ALL) | DSV4Q_BIT(DSV4Q_B_GEMM_ACT_FP8));
    c2.in[0].data = xq;
    c2.in[1].data = (void *)ew;
    c2.in[1].raw = NULL;
    c2.in[1].raw_scale = NULL;
    int rc = refs_make(r, &c2, bs2, err, errlen);
    r->bs = bs;
    free(xq);
    free(xd);
    return rc;
}

/* ---- metrics ----------------------------------------------------------- */

/* Candidate output buffer -> doubles, by the dtype the backend reported. */
static int decode_out(const void *buf, int32_t dt, long n, double *dst)
{
    if (dt == DSV4Q_BT_F32) {
        const float *f = buf;
        for (long i = 0; i < n; i++) dst[i] = f[i];
    } else if (dt == DSV4Q_BT_BF16 || dt == DSV4Q_BT_F16) {
        const uint16_t *h = buf;
        for (long i = 0; i < n; i++) dst[i] = dt == DSV4Q_BT_BF16 ? dsv4q_bf16_decode(h[i]) : dsv4q_f16_decode(h[i]);
    } else {
        return -1;
    }
    return 0;
}

/* moe_gate weights are compared per expert: reorder the weights w [rows,k]
 * of selection idx to the order of the reference selection ref_idx. */
static void align_weights(double *w, const int32_t *idx, const int32_t *ref_idx, long rows, long k)
{
    double tmp[256];
    int used[256];
    if (k > 256) return;
    for (long r = 0; r < rows; r++) {
        double *wr = w + r * k;
        const int32_t *b = idx + r * k, *a = ref_idx + r * k;
        for (long j = 0; j < k; j++) used[j] = 0;
        for (long j = 0; j < k; j++) {
            tmp[j] = NAN;
            for (long u = 0; u < k; u++)
                if (!used[u] && b[u] == a[j]) { tmp[j] = wr[u]; used[u] = 1; break; }
        }
        for (long j = 0, u = 0; j < k; j++) {   /* flipped experts: remaining weights in order */
            if (!isnan(tmp[j])) continue;
            while (u < k && used[u]) u++;
            if (u < k) { tmp[j] = wr[u]; used[u] = 1; }
        }
        memcpy(wr, tmp, sizeof(double) * (size_t)k);
    }
}

/* The selection output among outs[] when the operator has outputs in the
 * order of its picks (moe_gate: indices, whose order the weights follow),
 * else NULL. */
static const int32_t *per_pick_sel(const dsv4q_case *c, void *const *outs)
{
    const int si = dsv4q_op_sel_slot(c->op);
    return dsv4q_op_get(c->op)->per_pick && si >= 0 ? outs[si] : NULL;
}

/* Metrics of output i for a candidate (buf, dt) against ref->f64. cand_idx
 * and ref_idx: the selection outputs of the same call (moe_gate weights). */
static int output_metrics(dsv4q_mset *m, const dsv4q_case *c, int i, const void *buf, int32_t dt, const refs *ref,
                          const int32_t *cand_sel, char *err, size_t errlen)
{
    dsv4q_mset_init(m);
    long n = (long)dsv4q_bt_numel(&c->out[i]);
    const dsv4q_bt *t = &c->out[i];
    long last = t->ndim > 0 ? (long)t->shape[t->ndim - 1] : 1;
    if (is_i32(c, i)) {
        if (dt != DSV4Q_BT_I32) {
            snprintf(err, errlen, "output %s must stay I32 (the backend set dtype %d)", t->name, dt);
            return -1;
        }
        if (dsv4q_op_exact(c->op, i)) {   /* hash ids: element for element */
            dsv4q_metrics_exact(m, buf, ref->f64[i], n);
            return 0;
        }
        int sel = c->sel_scores && c->sel_out == i;
        dsv4q_metrics_sel(m, buf, ref->f64[i], n / last, last, sel ? c->sel_scores : NULL, sel ? c->sel_T : 0);
        return 0;
    }
    double *a = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (decode_out(buf, dt, n, a)) {
        free(a);
        snprintf(err, errlen, "output %s: dtype %d is not allowed (F32, BF16 or F16)", t->name, dt);
        return -1;
    }
    const int si = dsv4q_op_sel_slot(c->op);
    if (((dsv4q_op_get(c->op)->per_pick >> i) & 1u) && cand_sel && si >= 0)   /* moe_gate weights */
        align_weights(a, cand_sel, ref->f64[si], n / last, last);
    dsv4q_metrics_float(m, a, ref->f64[i], n, last, dt, dsv4q_op_ulp_rowfloor(c->op, i));
    free(a);
    return 0;
}

/* rerun metric between the two runs of output i (the candidate's buffers
 * in its storage dtype, decoded here; harness/measure/metrics.h). */
static double rerun_metric(const dsv4q_case *c, int i, const void *r1, const void *r2, int32_t dt, const refs *ref)
{
    long n = (long)dsv4q_bt_numel(&c->out[i]);
    if (is_i32(c, i) && dsv4q_op_exact(c->op, i)) {   /* the fraction of elements that differ */
        dsv4q_mset d;
        dsv4q_metrics_exact(&d, r2, r1, n);
        return n ? d.v[DSV4Q_M_FLIPS] / (double)n : 0;
    }
    if (is_i32(c, i)) {
        /* selections are sets: the fraction of run-2 picks (per row) that
         * run 1 did not make; order within a row is not compared */
        const dsv4q_bt *t = &c->out[i];
        const long k = t->ndim > 0 ? (long)t->shape[t->ndim - 1] : 1;
        return dsv4q_metrics_rerun_sel(r1, r2, k ? n / k : 0, k);
    }
    size_t es = dt == DSV4Q_BT_F32 ? 4 : 2;
    if (!memcmp(r1, r2, es * (size_t)n)) return 0;
    double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
    double v = INFINITY;
    if (a && b && !decode_out(r1, dt, n, a) && !decode_out(r2, dt, n, b))
        v = dsv4q_metrics_rerun(a, b, ref->f64[i], n);
    free(a);
    free(b);
    return v;
}

/* The level: oracle-f32 vs oracle-f64, measured in the candidate's dtype. */
static void level_metrics(dsv4q_mset *m, const dsv4q_case *c, int i, int32_t dt, const refs *ref)
{
    char err[256];
    long n = (long)dsv4q_bt_numel(&c->out[i]);
    if (is_i32(c, i)) {
        output_metrics(m, c, i, ref->f32[i], DSV4Q_BT_I32, ref, NULL, err, sizeof err);
    } else if (dt == DSV4Q_BT_BF16 || dt == DSV4Q_BT_F16) {
        /* the f32 oracle's values stored in the candidate's dtype */
        uint16_t *h = malloc(2 * (size_t)(n ? n : 1));
        if (!h) { dsv4q_mset_init(m); return; }
        const float *f = ref->f32[i];
        for (long k = 0; k < n; k++) h[k] = dt == DSV4Q_BT_BF16 ? dsv4q_bf16_from_f32(f[k]) : dsv4q_f16_encode(f[k]);
        output_metrics(m, c, i, h, dt, ref, per_pick_sel(c, ref->f32), err, sizeof err);
        free(h);
    } else {
        output_metrics(m, c, i, ref->f32[i], DSV4Q_BT_F32, ref, per_pick_sel(c, ref->f32), err, sizeof err);
    }
    m->v[DSV4Q_M_RERUN] = 0;   /* the oracle is deterministic */
}

/* Verdict rows: per metric, the output with the worst value/bound. */
static void judge(dsv4q_qcase *r, const dsv4q_gates *g)
{
    r->verdict = DSV4Q_V_PASS;
    r->failout = 0;
    for (int mi = 0; mi < DSV4Q_M_COUNT; mi++) {
        const dsv4q_gate_rule *rule = &g->op[r->op][mi];
        dsv4q_qrow best = {0, 1, -1, NAN, NAN, NAN};
        double worst = -INFINITY;
        for (int i = 0; i < r->nout; i++) {
            double v = r->m[i].v[mi], l = r->lvl[i].v[mi];
            if (isnan(v) && isnan(l)) continue;   /* n/a for this output */
            const dsv4q_judgement j = dsv4q_judge(rule, v, l, r->dtype[i]);
            const double b = j.bound;
            const int pass = j.pass;
            if (rule->on && !pass) r->failout |= 1u << i;
            double score = !pass ? INFINITY : (b > 0 ? v / b : (v > 0 ? 1e300 : 0));
            if (isnan(score)) score = INFINITY;
            if (best.out < 0 || score > worst) {
                worst = score;
                best = (dsv4q_qrow){rule->on, pass, i, v, l, b};
            }
        }
        r->row[mi] = best;
        if (best.out >= 0 && best.gated && !best.pass) r->verdict = DSV4Q_V_FAIL;
    }
}

/* The exact rule (ops.h .exact) on top of the gates: an exact output with
 * any element unlike the reference FAILs the case, whatever the gate file
 * allows, with the count and the first differing index (and its
 * coordinates) in r->msg. */
static void judge_exact(dsv4q_qcase *r, const dsv4q_case *c, const refs *ref, void *const *out)
{
    for (int i = 0; i < c->nout; i++) {
        if (!is_i32(c, i) || !dsv4q_op_exact(c->op, i)) continue;
        const dsv4q_bt *t = &c->out[i];
        const long n = (long)dsv4q_bt_numel(t);
        dsv4q_mset d;
        const long at = dsv4q_metrics_exact(&d, out[i], ref->f64[i], n);
        if (at < 0) continue;
        char co[96] = "";
        size_t w = 0;
        for (int k = 0; k < t->ndim && w < sizeof co; k++) {
            long st = 1;
            for (int u = k + 1; u < t->ndim; u++) st *= (long)t->shape[u];
            w += (size_t)snprintf(co + w, sizeof co - w, "%s%ld", k ? "," : "", (at / st) % (long)t->shape[k]);
        }
        r->verdict = DSV4Q_V_FAIL;
        snprintf(r->msg, sizeof r->msg,
                 "output %s: %.0f of %ld elements differ (an exact match is required); the first at index %ld [%s]: "
                 "%d, reference %d",
                 t->name, d.v[DSV4Q_M_FLIPS], n, at, co, (int)((const int32_t *)out[i])[at],
                 (int)((const int32_t *)ref->f64[i])[at]);
        return;
    }
}

static void eval_backend(dsv4q_qcase *r, const dsv4q_case *c, const refs *ref, void *out[2][DSV4Q_OPS_MAX_T],
                         int32_t dt[2][DSV4Q_OPS_MAX_T], const dsv4q_gates *g)
{
    char err[512];
    const int32_t *cand_sel = per_pick_sel(c, out[0]);
    for (int i = 0; i < c->nout; i++) {
        r->dtype[i] = dt[0][i];
        if (output_metrics(&r->m[i], c, i, out[0][i], dt[0][i], ref, cand_sel, err, sizeof err)) {
            r->verdict = DSV4Q_V_ERROR;
            snprintf(r->msg, sizeof r->msg, "%s", err);
            return;
        }
        r->m[i].v[DSV4Q_M_RERUN] = dt[1][i] != dt[0][i] ? INFINITY : rerun_metric(c, i, out[0][i], out[1][i], dt[0][i], ref);
        level_metrics(&r->lvl[i], c, i, dt[0][i], ref);
        r->tie_flips += r->m[i].tie_flips;
    }
    judge(r, g);
    judge_exact(r, c, ref, out[0]);
}

/* ---- the loop ---------------------------------------------------------- */

typedef struct sel_case {
    char key[DSV4Q_CASE_KEY_MAX];
} sel_case;

/* key with its seed replaced by seed (canonical in, canonical out: the
 * seed is the last parameter of every canonical key). */
static int with_seed(const char *key, long seed, char *out, size_t len, char *err, size_t errlen)
{
    char tmp[DSV4Q_CASE_KEY_MAX + 32];
    const char *at = strstr(key, ",seed=");
    if (!at) at = strstr(key, "(seed=");
    if (!at) { snprintf(err, errlen, "case key '%s' has no seed", key); return -1; }
    snprintf(tmp, sizeof tmp, "%.*s%cseed=%ld)", (int)(at - key), key, *at, seed);
    return dsv4q_case_canon(tmp, out, len, err, errlen);
}

static int select_cases(const dsv4q_qualify_opts *o, sel_case **out, int *n, char *err, size_t errlen)
{
    unsigned sets = o->sets ? o->sets : DSV4Q_CASE_SET_FLASH;
    const long s0 = o->seed_lo > 0 ? o->seed_lo : 0, s1 = o->seed_lo > 0 ? o->seed_hi : 0;
    const long nseed = s1 - s0 + 1;
    int nkeys = 0;
    if (o->keys)
        while (o->keys[nkeys]) nkeys++;
    long cap = (long)(o->keys ? nkeys : dsv4q_case_count()) * nseed;
    int k = 0;
    sel_case *s = calloc((size_t)(cap > 0 ? cap : 1), sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return -1; }
    for (long sd = s0; sd <= s1; sd++) {
        if (o->keys) {
            for (int i = 0; i < nkeys; i++) {
                if (dsv4q_case_canon(o->keys[i], s[k].key, sizeof s[k].key, err, errlen) ||
                    (sd && with_seed(s[k].key, sd, s[k].key, sizeof s[k].key, err, errlen))) {
                    free(s);
                    return -1;
                }
                k++;
            }
            continue;
        }
        for (int i = 0; i < dsv4q_case_count(); i++) {
            const dsv4q_case_entry *e = dsv4q_case_at(i);
            if (!(e->sets & sets)) continue;
            char op[32];
            size_t on = strcspn(e->key, "(");
            snprintf(op, sizeof op, "%.*s", (int)on, e->key);
            if (o->ops && !(o->ops & DSV4Q_CAP(dsv4q_op_find(op)))) continue;
            if (sd) {
                if (with_seed(e->key, sd, s[k].key, sizeof s[k].key, err, errlen)) { free(s); return -1; }
                k++;
            } else {
                snprintf(s[k++].key, sizeof s[0].key, "%s", e->key);
            }
        }
    }
    if (!k) {
        free(s);
        snprintf(err, errlen, "no case selected (check --ops / --shapes / --case)");
        return -1;
    }
    *out = s;
    *n = k;
    return 0;
}

int dsv4q_qualify(const char *const *specs, int n, const dsv4q_qualify_opts *o, dsv4q_qualify_result *q, char *err, size_t errlen)
{
    sel_case *sel = NULL;
    int ns = 0, rc = -1;
    memset(q, 0, sizeof *q * (size_t)n);
    if (select_cases(o, &sel, &ns, err, errlen)) return -1;
    for (int b = 0; b < n; b++) {
        dsv4q_iso_status st;
        if (dsv4q_iso_probe(specs[b], &o->iso, &q[b].desc, &st, q[b].msg, sizeof q[b].msg)) {
            q[b].load_failed = 1;
            snprintf(q[b].desc.spec, sizeof q[b].desc.spec, "%s", specs[b]);
            continue;
        }
        const char *decl = o->declare ? o->declare : q[b].desc.profile[0] ? q[b].desc.profile : "source";
        char why[768];
        if (dsv4q_declaration_parse(decl, &q[b].bs, why, sizeof why)) {
            q[b].load_failed = 1;
            snprintf(q[b].msg, sizeof q[b].msg, "%s: %s", o->declare ? "--profile/--boundary" : "declared profile", why);
            continue;
        }
        snprintf(q[b].profile, sizeof q[b].profile, "%s", decl);
        dsv4q_declaration_format(q[b].bs, q[b].declared, sizeof q[b].declared);
        q[b].declared_by = o->declare ? "the command line" : "the backend";
        q[b].cases = calloc((size_t)ns, sizeof(dsv4q_qcase));
        if (!q[b].cases) { snprintf(err, errlen, "out of memory"); goto out; }
        q[b].ncases = ns;
    }
    int nloaded = 0;
    for (int b = 0; b < n; b++) nloaded += !q[b].load_failed;
    for (int ci = 0; ci < ns && nloaded; ci++) {
        dsv4q_case c;
        if (dsv4q_case_build(&c, sel[ci].key, err, errlen)) goto out;
        if (!o->quiet) fprintf(stderr, "[qualify] %d/%d %s\n", ci + 1, ns, c.key);
        refs ref[4];
        int nref = 0;
        void *bufs[2][DSV4Q_OPS_MAX_T] = {{0}};
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < c.nout; i++)
                if (!(bufs[r][i] = malloc(dsv4q_case_out_bytes(&c, i) + 4))) {
                    snprintf(err, errlen, "out of memory");
                    goto case_fail;
                }
        for (int b = 0; b < n; b++) {
            if (q[b].load_failed) continue;
            dsv4q_qcase *r = &q[b].cases[ci];
            snprintf(r->key, sizeof r->key, "%s", c.key);
            r->op = c.op;
            r->nout = c.nout;
            for (int i = 0; i < c.nout; i++) { dsv4q_mset_init(&r->m[i]); dsv4q_mset_init(&r->lvl[i]); }
            for (int m = 0; m < DSV4Q_M_COUNT; m++) r->row[m] = (dsv4q_qrow){0, 1, -1, NAN, NAN, NAN};
            if (!(q[b].desc.caps & DSV4Q_CAP(c.op))) {
                r->verdict = DSV4Q_V_SKIP;
                snprintf(r->msg, sizeof r->msg, "op not in the backend's caps");
                continue;
            }
            const refs *rf = NULL;
            for (int k = 0; k < nref; k++)
                if (ref[k].bs == q[b].bs) rf = &ref[k];
            if (!rf) {
                if (nref == 4 || refs_make(&ref[nref], &c, q[b].bs, err, errlen)) goto case_fail;
                rf = &ref[nref++];
            }
            int32_t dt[2][DSV4Q_OPS_MAX_T];
            double t0 = dsv4q_now_s();
            float *ew = NULL;
            const int wi = dsv4q_op_weight_slot(c.op);   /* LINEAR: w (kernel_refs_make) */
            if (wi >= 0 && q[b].desc.has_load_weight &&
                !(ew = malloc(sizeof(float) * (size_t)dsv4q_bt_numel(&c.in[wi])))) {
                snprintf(err, errlen, "out of memory");
                goto case_fail;
            }
            r->status = dsv4q_iso_run_ew(specs[b], &o->iso, &c, q[b].bs, 2, bufs, dt, ew, &r->ew, r->ew_name,
                                         sizeof r->ew_name, r->msg, sizeof r->msg);
            r->seconds = dsv4q_now_s() - t0;
            if (r->status == DSV4Q_ISO_OK && r->ew) {
                /* kernel error (gated) vs the oracle on the engine's weights,
                 * format error (reported) between the two f64 oracles */
                refs kref;
                if (kernel_refs_make(&kref, &c, q[b].bs, ew, err, errlen)) { free(ew); goto case_fail; }
                free(ew);
                eval_backend(r, &c, &kref, bufs, dt, o->gates);
                dsv4q_acc fa = {0};
                dsv4q_acc_add(&fa, kref.f64[0], rf->f64[0], (long)dsv4q_bt_numel(&c.out[0]));
                r->fmt_nrms = dsv4q_acc_nrms(&fa);
                r->fmt_max_abs = fa.max_abs;
                if (o->format_gate > 0 && !(r->fmt_nrms <= o->format_gate)) {
                    r->verdict = DSV4Q_V_FAIL;
                    snprintf(r->msg, sizeof r->msg, "format error nrms %.3e over --format-gate %.3e", r->fmt_nrms,
                             o->format_gate);
                }
                mark_uncheckable(r, &kref); /* the judged reference, then the format's */
                mark_uncheckable(r, rf);
                refs_free(&kref);
                continue;
            }
            free(ew);
            if (r->status == DSV4Q_ISO_HARNESS_ERROR) {
                snprintf(err, errlen, "%s", r->msg);
                goto case_fail;
            }
            if (r->status == DSV4Q_ISO_INIT_ERROR) {
                /* cannot run here (e.g. no GPU): not a verdict on its kernels */
                q[b].load_failed = 1;
                snprintf(q[b].msg, sizeof q[b].msg, "%s", r->msg);
                nloaded--;
                continue;
            }
            if (r->status == DSV4Q_ISO_DECLINED) {   /* ABI v2 supports(): skipped with its reason */
                r->verdict = DSV4Q_V_SKIP;
                continue;
            }
            if (r->status == DSV4Q_ISO_UNSUPPORTED) {
                /* the op is in caps: declining it is a failure (dsv4q_backend.h) */
                r->verdict = DSV4Q_V_ERROR;
                char m2[1024];
                snprintf(m2, sizeof m2, "run() returned UNSUPPORTED for an op in caps: %s", r->msg);
                snprintf(r->msg, sizeof r->msg, "%s", m2);
                continue;
            }
            if (r->status != DSV4Q_ISO_OK) {
                r->verdict = DSV4Q_V_ERROR;
                if (!o->quiet) fprintf(stderr, "[qualify] %s\n", r->msg);
                continue;
            }
            eval_backend(r, &c, rf, bufs, dt, o->gates);
            mark_uncheckable(r, rf);
        }
        for (int k = 0; k < nref; k++) refs_free(&ref[k]);
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < c.nout; i++) free(bufs[r][i]);
        dsv4q_case_free(&c);
        if (o->stop_on_fail) {
            int stop = 0;
            for (int b = 0; b < n; b++)
                if (!q[b].load_failed &&
                    (q[b].cases[ci].verdict == DSV4Q_V_FAIL || q[b].cases[ci].verdict == DSV4Q_V_ERROR))
                    stop = 1;
            if (stop) {
                for (int b = 0; b < n; b++)
                    if (q[b].cases) q[b].ncases = ci + 1;
                break;
            }
        }
        continue;
case_fail:
        for (int k = 0; k < nref; k++) refs_free(&ref[k]);
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < c.nout; i++) free(bufs[r][i]);
        dsv4q_case_free(&c);
        goto out;
    }
    for (int b = 0; b < n; b++)
        for (int i = 0; i < q[b].ncases; i++) {
            dsv4q_verdict v = q[b].cases[i].verdict;
            q[b].npass += v == DSV4Q_V_PASS;
            q[b].nfail += v == DSV4Q_V_FAIL;
            q[b].nerror += v == DSV4Q_V_ERROR;
            q[b].nskip += v == DSV4Q_V_SKIP;
            q[b].nunc += v == DSV4Q_V_UNCHECKABLE;
        }
    rc = 0;
out:
    free(sel);
    return rc;
}

void dsv4q_qualify_free(dsv4q_qualify_result *q)
{
    free(q->cases);
    q->cases = NULL;
    q->ncases = 0;
}

int dsv4q_qualify_status(const dsv4q_qualify_result *q)
{
    if (q->load_failed) return 2;
    if (q->nfail || q->nerror) return 1;
    return q->npass ? 0 : 1;
}

/* ---- output ------------------------------------------------------------ */

static const char *dtype_name(int32_t dt)
{
    const char *n = dsv4q_dtype_name((dsv4q_dtype)dt);
    return n ? n : "?";
}

int dsv4q_qualify_print_header(FILE *f, const dsv4q_qualify_result *q, const dsv4q_gates *g)
{
    if (q->load_failed) {
        fprintf(f, "backend %s: NOT LOADED: %s\n", q->desc.spec, q->msg);
        return -1;
    }
    fprintf(f, "backend %s (%s %s), profile %s, judged against oracle-f64/%s; level = oracle-f32 vs oracle-f64\n",
            q->desc.spec, q->desc.name, q->desc.version, q->profile, q->profile);
    fprintf(f, "judged as declared: %s (declared by %s; both oracle widths honour it)\n", q->declared,
            q->declared_by ? q->declared_by : "the backend");
    fprintf(f, "gates %s; bound = factor * level + floor (+ floor_u ulps of the storage dtype)\n\n", g->origin);
    fprintf(f, "%-78s %-12s %11s %11s %11s  %s\n", "case", "metric", "value", "level", "bound", "verdict");
    return 0;
}

void dsv4q_qualify_print(FILE *f, const dsv4q_qualify_result *q, const dsv4q_gates *g, int all)
{
    if (dsv4q_qualify_print_header(f, q, g)) return;
    for (int i = 0; i < q->ncases; i++) {
        const dsv4q_qcase *r = &q->cases[i];
        if (r->verdict == DSV4Q_V_SKIP || r->verdict == DSV4Q_V_ERROR || r->verdict == DSV4Q_V_UNCHECKABLE) {
            fprintf(f, "%-78s %-12s %11s %11s %11s  %s%s%s\n", r->key, "-", "-", "-", "-", dsv4q_verdict_name(r->verdict),
                    r->msg[0] ? ": " : "", r->msg);
            continue;
        }
        int first = 1;
        for (int m = 0; m < DSV4Q_M_COUNT; m++) {
            const dsv4q_qrow *w = &r->row[m];
            if (w->out < 0 || (!all && !w->gated)) continue;
            char name[40];
            if (r->nout > 1) snprintf(name, sizeof name, "%s[%s]", dsv4q_metric_name(m), dsv4q_op_get(r->op)->out[w->out].name);
            else snprintf(name, sizeof name, "%s", dsv4q_metric_name(m));
            char bound[32];
            if (w->gated) snprintf(bound, sizeof bound, "%11.3e", w->bound);
            else snprintf(bound, sizeof bound, "%11s", "-");
            fprintf(f, "%-78s %-12s %11.3e %11.3e %s  %s\n", first ? r->key : "", name, w->value, w->level, bound,
                    !w->gated ? "info" : w->pass ? "pass" : "FAIL");
            first = 0;
        }
        if (r->verdict == DSV4Q_V_FAIL && r->msg[0] && !r->ew) fprintf(f, "%-78s %-12s %s\n", "", "message", r->msg);
        if (r->tie_flips) fprintf(f, "%-78s %-12s %11ld %11s %11s  %s\n", "", "tie_flips", r->tie_flips, "", "", "legitimate (tie-run at the cut)");
        if (r->ew)
            fprintf(f, "%-78s %-12s %11.3e %11s %11s  %s (engine weights %s: the rows above are the KERNEL error, vs "
                    "oracle on them; format = oracle on %s vs on the reference weights, max_abs %.3e)%s%s\n",
                    "", "format_nrms", r->fmt_nrms, "", "", r->verdict == DSV4Q_V_FAIL && r->msg[0] ? "FAIL" : "info",
                    r->ew_name, r->ew_name, r->fmt_max_abs, r->msg[0] ? ": " : "", r->msg);
        for (int o = 0; o < r->nout; o++)
            if (r->dtype[o] != DSV4Q_BT_F32 && r->dtype[o] != DSV4Q_BT_I32)
                fprintf(f, "%-78s %-12s %11s  (ULPs counted in %s)\n", "", "storage", dtype_name(r->dtype[o]),
                        dtype_name(r->dtype[o]));
    }
    fprintf(f, "\n%d cases: %d pass, %d fail, %d error, %d skipped", q->ncases, q->npass, q->nfail, q->nerror,
            q->nskip);
    if (q->nunc) fprintf(f, ", %d not checkable", q->nunc);
    fprintf(f, " -> %s\n", dsv4q_qualify_status(q) == 0 ? "PASS" : "FAIL");
}

char *dsv4q_qualify_json(const dsv4q_qualify_result *q, const dsv4q_gates *g)
{
    json_t *root = json_object();
    json_object_set_new(root, "backend", json_string(q->desc.spec));
    json_object_set_new(root, "backend_name", json_string(q->desc.name));
    json_object_set_new(root, "backend_version", json_string(q->desc.version));
    json_object_set_new(root, "profile", json_string(q->profile));
    json_object_set_new(root, "declared", json_string(q->declared));
    json_object_set_new(root, "declared_by", json_string(q->declared_by ? q->declared_by : "the backend"));
    json_object_set_new(root, "gates", json_string(g->origin));
    json_object_set_new(root, "load_error", q->load_failed ? json_string(q->msg) : json_null());
    json_t *cases = json_array();
    for (int i = 0; i < q->ncases; i++) {
        const dsv4q_qcase *r = &q->cases[i];
        json_t *c = json_object();
        json_object_set_new(c, "case", json_string(r->key));
        json_object_set_new(c, "op", json_string(dsv4q_op_get(r->op)->name));
        json_object_set_new(c, "verdict", json_string(dsv4q_verdict_name(r->verdict)));
        if (r->msg[0]) json_object_set_new(c, "message", json_string(r->msg));
        if (r->verdict == DSV4Q_V_PASS || r->verdict == DSV4Q_V_FAIL) {
            json_t *ms = json_object();
            for (int m = 0; m < DSV4Q_M_COUNT; m++) {
                const dsv4q_qrow *w = &r->row[m];
                if (w->out < 0) continue;
                json_t *j = json_object();
                json_object_set_new(j, "output", json_string(dsv4q_op_get(r->op)->out[w->out].name));
                json_object_set_new(j, "value", dsv4q_json_num(w->value));
                json_object_set_new(j, "level", dsv4q_json_num(w->level));
                json_object_set_new(j, "bound", w->gated ? dsv4q_json_num(w->bound) : json_null());
                json_object_set_new(j, "verdict", json_string(!w->gated ? "info" : w->pass ? "pass" : "fail"));
                json_object_set_new(ms, dsv4q_metric_name(m), j);
            }
            json_object_set_new(c, "metrics", ms);
            json_t *outs = json_array();
            for (int o = 0; o < r->nout; o++) {
                json_t *jo = json_object();
                json_object_set_new(jo, "name", json_string(dsv4q_op_get(r->op)->out[o].name));
                json_object_set_new(jo, "dtype", json_string(dtype_name(r->dtype[o])));
                json_t *h = json_array();
                for (int k = 0; k < DSV4Q_ULP_BUCKETS; k++) json_array_append_new(h, json_integer(r->m[o].ulp_hist[k]));
                json_object_set_new(jo, "ulp_hist", h);
                json_object_set_new(jo, "tie_flips", json_integer(r->m[o].tie_flips));
                json_array_append_new(outs, jo);
            }
            json_object_set_new(c, "outputs", outs);
            json_object_set_new(c, "seconds", json_real(r->seconds));
            if (r->ew) {
                json_object_set_new(c, "engine_weight", json_string(r->ew_name));
                json_object_set_new(c, "format_nrms", dsv4q_json_num(r->fmt_nrms));
                json_object_set_new(c, "format_max_abs", dsv4q_json_num(r->fmt_max_abs));
            }
        }
        json_array_append_new(cases, c);
    }
    json_object_set_new(root, "cases", cases);
    json_t *sum = json_object();
    json_object_set_new(sum, "pass", json_integer(q->npass));
    json_object_set_new(sum, "fail", json_integer(q->nfail));
    json_object_set_new(sum, "error", json_integer(q->nerror));
    json_object_set_new(sum, "skip", json_integer(q->nskip));
    json_object_set_new(sum, "not_checkable", json_integer(q->nunc));
    json_object_set_new(root, "summary", sum);
    json_object_set_new(root, "ulp_buckets", json_string("0,1,2,<=4,<=8,<=16,<=64,<=256,<=4096,>4096"));
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    return s;
}

/* ---- one case, outputs given (cli/capi.c, dsv4q.check) ------------- */

int dsv4q_qualify_measure(const dsv4q_case *c, uint64_t bs, void *out[2][DSV4Q_OPS_MAX_T],
                          int32_t dt[2][DSV4Q_OPS_MAX_T], const dsv4q_gates *g, dsv4q_qcase *r, void **ref_f64,
                          char *err, size_t errlen)
{
    refs ref;
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", c->key);
    r->op = c->op;
    r->nout = c->nout;
    for (int i = 0; i < c->nout; i++) { dsv4q_mset_init(&r->m[i]); dsv4q_mset_init(&r->lvl[i]); }
    for (int m = 0; m < DSV4Q_M_COUNT; m++) r->row[m] = (dsv4q_qrow){0, 1, -1, NAN, NAN, NAN};
    if (refs_make(&ref, c, bs, err, errlen)) return -1;
    eval_backend(r, c, &ref, out, dt, g);
    mark_uncheckable(r, &ref);
    if (ref_f64)
        for (int i = 0; i < c->nout; i++) { ref_f64[i] = ref.f64[i]; ref.f64[i] = NULL; }
    refs_free(&ref);
    return 0;
}
