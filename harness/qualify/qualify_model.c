/*
 * qualify_model.c - whole-model qualification: the forward pass composed
 * from a backend's operators (dsv4q_wm_compose), run in one isolated child,
 * judged against oracle-f64 with oracle-f32 as the level (see
 * qualify_model.h for what is an operator call and what is glue, and why
 * decode re-runs the compressor on the layer's history).
 *
 * The composition IS the oracle's forward pass (oracle/model.c) at f32 with
 * the backend as its operator provider (harness/provider/provider_abi.c): there is
 * no second copy of the forward pass to keep in step (W1,
 * qualify_model.h, holds by construction and is still tested).
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness/ops/ops.h"
#include "harness/measure/metrics.h"
#include "harness/provider/provider_abi.h"
#include "harness/qualify/qualify_model.h"
#include "harness/ops/stage_ops.h"
#include "harness/capture/stagewise.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/model_run.h"
#include "oracle/ops.h"
#include "base/util.h"

static int listed(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x) return 1;
    return 0;
}

/* The operators V4.1's forward pass calls (oracle/model_v41.c). */
static uint64_t required41(const dsv4q_config *g, uint64_t bs)
{
    uint64_t ops = DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_ROPE) |
                   DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) | DSV4Q_CAP(DSV4Q_OP_HC_PRE41) | DSV4Q_CAP(DSV4Q_OP_HC_POST) |
                   DSV4Q_CAP(DSV4Q_OP_MOE_GATE41) | DSV4Q_CAP(DSV4Q_OP_EXPERT);
    if ((bs >> DSV4Q_B_KV_FP8) & 1u) ops |= DSV4Q_CAP(DSV4Q_OP_ACT_QUANT);
    if (g->n_engram_layers > 0) ops |= DSV4Q_CAP(DSV4Q_OP_ENGRAM41) | DSV4Q_CAP(DSV4Q_OP_ENGRAM_HASH);
    for (int li = 0; li < g->n_layers; li++) {
        if (!g->compress_ratios[li]) continue;
        if (listed(g->kv_source_layers, g->n_kv_source_layers, li)) {
            ops |= DSV4Q_CAP(DSV4Q_OP_COMPRESSOR41);
            if ((bs >> DSV4Q_B_CKV_FP4) & 1u) ops |= DSV4Q_CAP(DSV4Q_OP_KV41_QUANT);
        }
        if (listed(g->index_source_layers, g->n_index_source_layers, li)) {
            ops |= DSV4Q_CAP(DSV4Q_OP_INDEX41_SCORE) | DSV4Q_CAP(DSV4Q_OP_TOPK41); /* keys and both FP4s inside */
        }
        if (li == g->candidate_source_layer) ops |= DSV4Q_CAP(DSV4Q_OP_CANDIDATE_BLOCKS);
    }
    return ops;
}

uint64_t dsv4q_wm_required_ops(const dsv4q_model *m, uint64_t bs)
{
    const dsv4q_config *g = &m->cfg;
    if (g->arch == DSV4Q_ARCH_V41) return required41(g, bs);
    uint64_t ops = DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_QHEAD_NORM) |
                   DSV4Q_CAP(DSV4Q_OP_ROPE) | DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) | DSV4Q_CAP(DSV4Q_OP_HC_PRE) |
                   DSV4Q_CAP(DSV4Q_OP_HC_POST) | DSV4Q_CAP(DSV4Q_OP_HC_HEAD) | DSV4Q_CAP(DSV4Q_OP_MOE_GATE) |
                   DSV4Q_CAP(DSV4Q_OP_EXPERT);
    if ((bs >> DSV4Q_B_KV_FP8) & 1u) ops |= DSV4Q_CAP(DSV4Q_OP_ACT_QUANT);
    for (int li = 0; li < g->n_layers; li++) {
        const int r = m->layers[li].ratio;
        if (r) ops |= DSV4Q_CAP(DSV4Q_OP_COMPRESSOR);
        if (r == 4) {
            ops |= DSV4Q_CAP(DSV4Q_OP_INDEXER_SCORE) | DSV4Q_CAP(DSV4Q_OP_TOPK);
            if (dsv4q_idx_hadamard_on(bs)) ops |= DSV4Q_CAP(DSV4Q_OP_HADAMARD);
            if ((bs >> DSV4Q_B_IDX_Q_FP4) & 1u) ops |= DSV4Q_CAP(DSV4Q_OP_FP4_QUANT);
        }
    }
    return ops;
}

int dsv4q_wm_compose(const dsv4q_backend_v1 *b, void *ctx, const dsv4q_model *m, uint64_t bs, const int32_t *ids,
                     long nprompt, long ndecode, int flags, double *logits, long *calls, long *fallbacks,
                     int *decode_op, char *detail,
                     size_t detaillen, char *err, size_t errlen)
{
    const dsv4q_config *g = &m->cfg;
    const long max_pos = nprompt + ndecode, V = g->vocab_size;
    err[0] = 0;
    if (nprompt < 1 || ndecode < 0) {
        snprintf(err, errlen, "whole model: a prompt of >= 1 tokens is needed (got %ld, decode %ld)", nprompt, ndecode);
        return DSV4Q_BACKEND_ERROR;
    }
    for (long i = 0; i < max_pos; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            snprintf(err, errlen, "whole model: token %ld (id %d) is outside the vocabulary [0, %ld)", i, ids[i], V);
            return DSV4Q_BACKEND_ERROR;
        }
    /* THE forward pass (oracle/model.c) at f32, every operator through the
     * backend (harness/provider/provider_abi.c) */
    dsv4q_abi_provider *p = NULL;
    const dsv4q_provider_f32 *table;
    if (dsv4q_abi_provider_open(&p, &table, b, ctx, m, bs, max_pos, flags & DSV4Q_WM_SPARSE_DECODE, calls, fallbacks,
                                decode_op, detail, detaillen, err, errlen))
        return DSV4Q_BACKEND_ERROR;
    dsv4q_runstate_f32 *r = dsv4q_run_new_f32(m, bs, max_pos, NULL, NULL);
    int rc = -1;
    if (!r) {
        snprintf(err, errlen, "whole model: out of memory allocating the caches");
        dsv4q_abi_provider_free(p);
        return DSV4Q_BACKEND_ERROR;
    }
    dsv4q_run_set_provider_f32(r, table, p);
    if (dsv4q_run_step_f32(r, ids, nprompt, logits)) goto done;
    for (long i = 0; i < ndecode; i++)
        if (dsv4q_run_step_f32(r, ids + nprompt + i, 1, logits + (i + 1) * V)) goto done;
    rc = 0;
done:;
    const int st = dsv4q_abi_provider_status(p);
    if (rc && st == DSV4Q_BACKEND_OK && !err[0]) snprintf(err, errlen, "whole model: out of memory in the forward pass");
    dsv4q_run_free_f32(r);
    dsv4q_abi_provider_free(p);
    if (rc == 0) return DSV4Q_BACKEND_OK;
    return st != DSV4Q_BACKEND_OK ? st : DSV4Q_BACKEND_ERROR;
}

int dsv4q_wm_row_decided(const double *ref, const double *lvl, long V, long am, double factor)
{
    double top2 = -INFINITY, lerr = 0;
    if (am < 0 || am >= V) return 0;
    for (long v = 0; v < V; v++) {
        if (v != am && ref[v] > top2) top2 = ref[v];
        double e = fabs(lvl[v] - ref[v]);
        if (e > lerr || isnan(e)) lerr = e;
    }
    return ref[am] - top2 > 2 * factor * lerr;   /* NaN anywhere: not decided */
}

/* ---- qualification ----------------------------------------------------- */

/* The child's results: this header, the composed logits [rows, V], then
 * the per-stage slots (dsv4q_replay_stage [nst], plain data; gated in the
 * parent). */
typedef struct job_hdr {
    long calls[DSV4Q_OP_COUNT];
    long fallbacks[DSV4Q_OP_COUNT];
    int decode_op;
    int nst;                   /* slots written (0: the per-stage run failed, stage_err says why) */
    char stage_err[1024];
} job_hdr;

typedef struct job_arg {
    const dsv4q_model *m;
    uint64_t bs;
    const int32_t *ids;
    long nprompt, ndecode;
    int flags;
} job_arg;

/* The per-stage verdict (harness/capture/stagewise.h) in the same child, on a
 * provider of its own (its calls are not counted with the composition's). */
static int stagewise(const dsv4q_backend_v1 *b, void *ctx, const job_arg *a, job_hdr *h, dsv4q_replay_stage *slots,
                     char *detail, size_t detaillen, char *err, size_t errlen)
{
    char perr[1024] = "";
    dsv4q_abi_provider *p = NULL;
    const dsv4q_provider_f32 *table = NULL;
    dsv4q_replay res;
    int cand_failed = 0;
    if (dsv4q_abi_provider_open(&p, &table, b, ctx, a->m, a->bs, a->nprompt + a->ndecode,
                                (a->flags & DSV4Q_WM_SPARSE_DECODE) != 0, NULL, NULL, NULL, detail, detaillen, perr,
                                sizeof perr)) {
        snprintf(h->stage_err, sizeof h->stage_err, "per-stage verdict: %s", perr);
        return DSV4Q_BACKEND_OK;
    }
    if (dsv4q_stagewise_run(&res, a->m, a->bs, table, p, a->ids, a->nprompt, a->ndecode, &cand_failed, h->stage_err,
                            sizeof h->stage_err)) {
        int st = dsv4q_abi_provider_status(p);
        dsv4q_abi_provider_free(p);
        if (!cand_failed) return DSV4Q_BACKEND_OK;   /* the harness ran short (h->nst 0 says so) */
        snprintf(err, errlen, "%s: %s", h->stage_err, perr);
        return st != DSV4Q_BACKEND_OK ? st : DSV4Q_BACKEND_ERROR;
    }
    dsv4q_abi_provider_free(p);
    memcpy(slots, res.st, sizeof *slots * (size_t)res.nst);
    h->nst = res.nst;
    dsv4q_replay_free(&res);
    return DSV4Q_BACKEND_OK;
}

static int job(const dsv4q_backend_v1 *b, void *ctx, void *user, void *out, char *detail, size_t detaillen, char *err,
               size_t errlen)
{
    const job_arg *a = user;
    job_hdr *h = out;
    double *logits = (double *)((char *)out + sizeof(job_hdr));
    memset(h, 0, sizeof *h);
    int st = dsv4q_wm_compose(b, ctx, a->m, a->bs, a->ids, a->nprompt, a->ndecode, a->flags, logits, h->calls,
                              h->fallbacks, &h->decode_op, detail, detaillen, err, errlen);
    if (st != DSV4Q_BACKEND_OK) return st;
    return stagewise(b, ctx, a, h, (dsv4q_replay_stage *)(logits + (a->ndecode + 1) * a->m->cfg.vocab_size), detail,
                     detaillen, err, errlen);
}

static int oracle_logits(const dsv4q_model *m, int width, uint64_t bs, const int32_t *ids, long nprompt, long ndecode,
                         double *logits, char *err, size_t errlen)
{
    dsv4q_run *r;
    const long V = m->cfg.vocab_size;
    if (dsv4q_run_open(&r, m, width, bs, nprompt + ndecode, NULL, NULL, err, errlen)) return -1;
    int rc = dsv4q_run_feed(r, ids, nprompt, logits, err, errlen);
    for (long i = 0; !rc && i < ndecode; i++) rc = dsv4q_run_feed(r, ids + nprompt + i, 1, logits + (i + 1) * V, err, errlen);
    dsv4q_run_close(r);
    return rc;
}

static void names_of(uint64_t ops, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < DSV4Q_OP_COUNT && at < len; i++)
        if (ops & DSV4Q_CAP(i)) at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", dsv4q_op_get(i)->name);
}

int dsv4q_wm_qualify(const char *spec, const dsv4q_model *m, const int32_t *ids, long nprompt, long ndecode,
                     const dsv4q_wm_opts *o, dsv4q_wm_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->nprompt = nprompt;
    r->ndecode = ndecode;
    r->rows = 1 + ndecode;
    r->vocab = m->cfg.vocab_size;
    r->verdict = DSV4Q_V_ERROR;
    r->greedy_min = o->gates ? o->gates->greedy_min : -1;
    r->decode_op = -1;
    const long rows = r->rows, V = r->vocab;
    dsv4q_iso_status st;
    if (dsv4q_iso_probe(spec, &o->iso, &r->desc, &st, r->msg, sizeof r->msg)) {
        r->load_failed = 1;
        r->status = st;
        snprintf(r->desc.spec, sizeof r->desc.spec, "%s", spec);
        return 0;
    }
    snprintf(r->profile, sizeof r->profile, "%s", o->declare ? o->declare : r->desc.profile[0] ? r->desc.profile : "source");
    char why[768];
    if (dsv4q_declaration_parse(r->profile, &r->bs, why, sizeof why)) {   /* honoured or refused, never ignored */
        r->load_failed = 1;
        snprintf(r->msg, sizeof r->msg, "%s: %s", o->declare ? "--profile/--boundary" : "declared profile", why);
        return 0;
    }
    dsv4q_declaration_format(r->bs, r->declared, sizeof r->declared);
    /* Partial engines (issue 16): the operators outside caps run on
     * oracle-f32 (provider_abi.h) and are marked in the report; a backend
     * that implements none of the model's operators cannot qualify it. */
    const uint64_t need = dsv4q_wm_required_ops(m, r->bs);
    if (!(need & r->desc.caps)) {
        char names[512];
        names_of(need, names, sizeof names);
        r->load_failed = 1;
        snprintf(r->msg, sizeof r->msg, "the backend implements none of the operators this model uses (%s): "
                 "nothing to qualify", names);
        return 0;
    }
    const size_t nl = (size_t)(rows * V);
    r->cand = malloc(sizeof(double) * nl);
    r->ref = malloc(sizeof(double) * nl);
    r->lvl = malloc(sizeof(double) * nl);
    r->step_nrms = malloc(sizeof(double) * (size_t)rows);
    r->step_level = malloc(sizeof(double) * (size_t)rows);
    r->am_cand = malloc(sizeof(long) * (size_t)rows);
    r->am_ref = malloc(sizeof(long) * (size_t)rows);
    r->am_lvl = malloc(sizeof(long) * (size_t)rows);
    const long nst = dsv4q_stage_nslots_arch(m->cfg.arch, m->cfg.n_layers);
    const size_t bytes = sizeof(job_hdr) + sizeof(double) * nl + sizeof(dsv4q_replay_stage) * (size_t)nst;
    void *buf = malloc(bytes);
    if (!r->cand || !r->ref || !r->lvl || !r->step_nrms || !r->step_level || !r->am_cand || !r->am_ref || !r->am_lvl ||
        !buf) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    job_arg a = {m, r->bs, ids, nprompt, ndecode, o->flags};
    double t0 = dsv4q_now_s();
    r->status = dsv4q_iso_job(spec, &o->iso, "whole model", job, &a, buf, bytes, r->msg, sizeof r->msg);
    r->seconds = dsv4q_now_s() - t0;
    if (r->status == DSV4Q_ISO_HARNESS_ERROR) {
        snprintf(err, errlen, "%s", r->msg);
        free(buf);
        return -1;
    }
    if (r->status != DSV4Q_ISO_OK) {
        free(buf);
        r->load_failed = r->status == DSV4Q_ISO_INIT_ERROR;   /* cannot run here: exit 2, no receipt */
        return 0;   /* verdict ERROR, r->msg says why */
    }
    const job_hdr *h = buf;
    memcpy(r->calls, h->calls, sizeof r->calls);
    memcpy(r->fallbacks, h->fallbacks, sizeof r->fallbacks);
    r->decode_op = h->decode_op;
    memcpy(r->cand, (const char *)buf + sizeof(job_hdr), sizeof(double) * nl);
    if (h->nst != nst) {
        snprintf(err, errlen, "%s", h->stage_err[0] ? h->stage_err : "per-stage verdict: no result from the child");
        free(buf);
        return -1;
    }
    if (dsv4q_replay_init_arch(&r->stages, m->cfg.arch, m->cfg.n_layers)) {
        snprintf(err, errlen, "out of memory");
        free(buf);
        return -1;
    }
    memcpy(r->stages.st, (const char *)buf + sizeof(job_hdr) + sizeof(double) * nl, sizeof(dsv4q_replay_stage) * (size_t)nst);
    free(buf);
    dsv4q_replay_finish(&r->stages, o->gates);
    r->stages_pass = dsv4q_replay_status(&r->stages) == 0;

    t0 = dsv4q_now_s();
    if (oracle_logits(m, 64, r->bs, ids, nprompt, ndecode, r->ref, err, errlen) ||
        oracle_logits(m, 32, r->bs, ids, nprompt, ndecode, r->lvl, err, errlen))
        return -1;
    r->oracle_seconds = dsv4q_now_s() - t0;
    const int64_t lshape[2] = {rows, V};
    r->ref_nonfinite =
        dsv4q_ref_finite(r->ref, r->lvl, 0, rows * V, lshape, 2, "logits", r->ref_why, sizeof r->ref_why);

    dsv4q_acc ac = {0}, al = {0};
    dsv4q_acc_add(&ac, r->cand, r->ref, rows * V);
    dsv4q_acc_add(&al, r->lvl, r->ref, rows * V);
    r->nrms = dsv4q_acc_nrms(&ac);
    r->level = dsv4q_acc_nrms(&al);
    r->max_abs = ac.max_abs;
    r->level_max_abs = al.max_abs;
    r->cosine = dsv4q_acc_cosine(&ac);
    r->nonfinite = ac.nonfinite_a;
    for (long i = 0; i < rows; i++) {
        dsv4q_acc s1 = {0}, s2 = {0};
        dsv4q_acc_add(&s1, r->cand + i * V, r->ref + i * V, V);
        dsv4q_acc_add(&s2, r->lvl + i * V, r->ref + i * V, V);
        r->step_nrms[i] = dsv4q_acc_nrms(&s1);
        r->step_level[i] = dsv4q_acc_nrms(&s2);
        r->am_cand[i] = dsv4q_argmax(r->cand + i * V, V);
        r->am_ref[i] = dsv4q_argmax(r->ref + i * V, V);
        r->am_lvl[i] = dsv4q_argmax(r->lvl + i * V, V);
        r->agree += r->am_cand[i] == r->am_ref[i];
        r->level_agree += r->am_lvl[i] == r->am_ref[i];
    }
    r->greedy = (double)r->agree / (double)rows;
    const dsv4q_gate_rule *rule = o->gates ? &o->gates->model_nrms : NULL;
    const dsv4q_judgement j = dsv4q_judge(rule, r->nrms, r->level, DSV4Q_BT_NONE);
    r->bound = j.gated ? j.bound : INFINITY;
    r->nrms_pass = dsv4q_gate_pass(r->nrms, r->bound);   /* ungated: NaN still fails (G2) */
    /* decided rows (the greedy rule in qualify_model.h) */
    const double factor = rule && rule->on && rule->factor > 1 ? rule->factor : 1;
    long lvl_dec = 0;
    for (long i = 0; i < rows; i++) {
        if (!dsv4q_wm_row_decided(r->ref + i * V, r->lvl + i * V, V, r->am_ref[i], factor)) continue;
        r->decided++;
        r->agree_decided += r->am_cand[i] == r->am_ref[i];
        lvl_dec += r->am_lvl[i] == r->am_ref[i];
    }
    if (r->greedy_min >= 0) {
        long need = (long)ceil(r->greedy_min * (double)r->decided - 1e-9);
        r->greedy_required = need < lvl_dec ? need : lvl_dec;
    }
    r->greedy_pass = r->agree_decided >= r->greedy_required;
    /* a stage (or the logits) whose reference is not finite is not a failure
     * of the backend, nor a pass: UNCHECKABLE, unless something failed */
    int cand_nonfinite = 0;
    for (int i = 0; i < r->stages.nst; i++) {
        r->stages_ref_nonfinite += r->stages.st[i].ref_nonfinite;
        cand_nonfinite += r->stages.st[i].nonfinite && !r->stages.st[i].ref_nonfinite;
    }
    const int stages_fail = r->stages.nfail || cand_nonfinite || (!r->stages.npass && !r->stages_ref_nonfinite);
    const int logits_fail = !r->ref_nonfinite && !(r->nrms_pass && r->greedy_pass && r->nonfinite == 0);
    r->verdict = logits_fail || stages_fail                    ? DSV4Q_V_FAIL
                 : r->ref_nonfinite || r->stages_ref_nonfinite ? DSV4Q_V_UNCHECKABLE
                                                               : DSV4Q_V_PASS;
    return 0;
}

/* The forward-pass stages (oracle/stages.h) an operator's calls belong to,
 * for the fallback marks of a partial engine: derived from the stage
 * table of the model's arch (its ops column, harness/ops/stage_ops.h), not
 * kept here; the main pass's stages only, as the composition runs no MTP.
 * The buffer is used by one print at a time (print_fallbacks). */
static const char *op_stages(int arch, int op)
{
    static char buf[DSV4Q_STAGE_COUNT * (DSV4Q_STAGE_NAME_MAX / 4)];
    return dsv4q_op_stage_names_arch(arch, op, dsv4q_stage_mask_main_arch(arch), buf, sizeof buf);
}

static void print_fallbacks(FILE *f, const dsv4q_wm_result *r)
{
    long total = 0;
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) total += r->fallbacks[i];
    if (!total) return;
    fprintf(f, "\nPARTIAL ENGINE: %ld calls ran on oracle-f32 instead of the backend (not in caps, or declined):", total);
    for (int i = 0; i < DSV4Q_OP_COUNT; i++)
        if (r->fallbacks[i])
            fprintf(f, "\n  %-18s %6ld calls on oracle-f32 (stages: %s)", dsv4q_op_get(i)->name, r->fallbacks[i],
                    op_stages(r->stages.arch, i));
}

void dsv4q_wm_free(dsv4q_wm_result *r)
{
    free(r->cand);
    free(r->ref);
    free(r->lvl);
    free(r->step_nrms);
    free(r->step_level);
    free(r->am_cand);
    free(r->am_ref);
    free(r->am_lvl);
    dsv4q_replay_free(&r->stages);
    r->cand = r->ref = r->lvl = r->step_nrms = r->step_level = NULL;
    r->am_cand = r->am_ref = r->am_lvl = NULL;
}

int dsv4q_wm_status(const dsv4q_wm_result *r)
{
    if (r->load_failed) return 2;
    return r->verdict == DSV4Q_V_PASS ? 0 : 1;
}

void dsv4q_wm_print(FILE *f, const dsv4q_wm_result *r, const dsv4q_gates *g)
{
    if (r->load_failed) {
        fprintf(f, "backend %s: NOT LOADED: %s\n", r->desc.spec, r->msg);
        return;
    }
    fprintf(f, "whole-model qualification: backend %s (%s %s), profile %s, judged against oracle-f64/%s; "
            "level = oracle-f32 vs oracle-f64 (the fp32 sensitivity floor)\n",
            r->desc.spec, r->desc.name, r->desc.version, r->profile, r->profile);
    fprintf(f, "judged as declared: %s (both oracle widths honour it)\n", r->declared);
    fprintf(f, "tokens: prompt %ld + %ld teacher-forced decode steps -> %ld logit rows of %ld\n", r->nprompt,
            r->ndecode, r->rows, r->vocab);
    if (r->verdict == DSV4Q_V_ERROR) {
        fprintf(f, "\nERROR: %s\n-> FAIL\n", r->msg);
        return;
    }
    long total = 0;
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) total += r->calls[i];
    fprintf(f, "composed from %ld backend calls in one isolated child (%.2f s with the per-stage verdict; decode "
            "attention: %s):\n ", total,
            r->seconds, r->decode_op >= 0 ? dsv4q_op_get(r->decode_op)->name : "-");
    for (int i = 0; i < DSV4Q_OP_COUNT; i++)
        if (r->calls[i]) fprintf(f, " %s %ld", dsv4q_op_get(i)->name, r->calls[i]);
    print_fallbacks(f, r);
    fprintf(f, "\ngates %s: logit nrms <= factor * level + floor; greedy agreement >= minimum; no non-finite logit\n\n",
            g ? g->origin : "-");
    fprintf(f, "%4s %9s %12s %12s %8s %8s %8s\n", "row", "position", "nrms", "level", "argmax", "f64", "f32");
    for (long i = 0; i < r->rows; i++)
        fprintf(f, "%4ld %9ld %12.4e %12.4e %8ld %8ld %8ld%s\n", i, r->nprompt - 1 + i, r->step_nrms[i],
                r->step_level[i], r->am_cand[i], r->am_ref[i], r->am_lvl[i], r->am_cand[i] != r->am_ref[i] ? "  differs" : "");
    fprintf(f, "\n%-20s %14s %14s %14s  %s\n", "metric", "value", "level", "bound", "verdict");
    char b[32];
    if (isfinite(r->bound)) snprintf(b, sizeof b, "%14.4e", r->bound);
    else snprintf(b, sizeof b, "%14s", "-");
    double ratio = r->level > 0 ? r->nrms / r->level : (r->nrms > 0 ? INFINITY : 0);
    fprintf(f, "%-20s %14.4e %14.4e %s  %s (%.2fx the level)\n", "logit nrms", r->nrms, r->level, b,
            r->nrms_pass ? "pass" : "FAIL", ratio);
    char v1[32], v2[32], v3[32];
    snprintf(v1, sizeof v1, "%ld/%ld", r->agree, r->rows);
    snprintf(v2, sizeof v2, "%ld/%ld", r->level_agree, r->rows);
    const int ggated = r->greedy_min >= 0 && r->decided > 0;
    if (ggated) snprintf(v3, sizeof v3, ">= %ld/%ld", r->greedy_required, r->decided);
    else snprintf(v3, sizeof v3, "-");
    fprintf(f, "%-20s %14s %14s %14s  %s\n", "greedy agreement", v1, v2, v3,
            !ggated ? "info" : r->greedy_pass ? "pass" : "FAIL");
    if (r->greedy_min >= 0 && !r->decided)
        fprintf(f, "%-20s (not required: no decided row, i.e. none whose f64 top-2 margin exceeds 2 x factor x the "
                "fp32 level's largest logit error on it)\n", "");
    else if (ggated)
        fprintf(f, "%-20s (required on the %ld decided rows, f64 top-2 margin > 2 x factor x the fp32 level's max "
                "error on the row; %ld/%ld of them agree)\n", "", r->decided, r->agree_decided, r->decided);
    if (ggated && r->greedy_required < (long)ceil(r->greedy_min * (double)r->decided - 1e-9))
        fprintf(f, "%-20s (minimum %.3f of %ld, lowered to the %ld decided rows the fp32 level agrees on)\n", "",
                r->greedy_min, r->decided, r->greedy_required);
    fprintf(f, "%-20s %14ld %14s %14s  %s\n", "non-finite", r->nonfinite, "", "0", r->nonfinite ? "FAIL" : "pass");
    fprintf(f, "%-20s %14.4e %14.4e %14s  info\n", "max abs", r->max_abs, r->level_max_abs, "-");
    fprintf(f, "%-20s %14.10f %14s %14s  info\n", "cosine", r->cosine, "", "-");
    if (r->ref_nonfinite) fprintf(f, "logits not checkable (the rows above judge nothing): %s\n", r->ref_why);
    fprintf(f, "(oracle f64 + f32 runs: %.2f s)\n\n", r->oracle_seconds);
    dsv4q_stagewise_print(f, &r->stages);
    char sv[48];
    if (r->stages_pass) snprintf(sv, sizeof sv, "pass");
    else if (r->verdict == DSV4Q_V_UNCHECKABLE && r->stages_ref_nonfinite)
        snprintf(sv, sizeof sv, "%d not checkable", r->stages_ref_nonfinite);
    else snprintf(sv, sizeof sv, "FAIL");
    fprintf(f, "-> %s (logits %s, stages %s)\n",
            r->verdict == DSV4Q_V_PASS          ? "PASS"
            : r->verdict == DSV4Q_V_UNCHECKABLE ? "NOT CHECKABLE"
                                                : "FAIL",
            r->ref_nonfinite                                      ? "not checkable"
            : r->nrms_pass && r->greedy_pass && r->nonfinite == 0 ? "pass"
                                                                  : "FAIL",
            sv);
}

char *dsv4q_wm_json(const dsv4q_wm_result *r, const dsv4q_gates *g, const char *tokens)
{
    json_t *root = json_object();
    json_object_set_new(root, "mode", json_string("whole-model"));
    if (tokens) json_object_set_new(root, "tokens", json_string(tokens));
    json_object_set_new(root, "backend", json_string(r->desc.spec));
    json_object_set_new(root, "backend_name", json_string(r->desc.name));
    json_object_set_new(root, "backend_version", json_string(r->desc.version));
    json_object_set_new(root, "profile", json_string(r->profile));
    json_object_set_new(root, "declared", json_string(r->declared));
    json_object_set_new(root, "gates", json_string(g ? g->origin : ""));
    json_object_set_new(root, "verdict", json_string(r->load_failed ? "not loaded" : dsv4q_verdict_name(r->verdict)));
    if (r->msg[0]) json_object_set_new(root, "message", json_string(r->msg));
    json_object_set_new(root, "prompt", json_integer(r->nprompt));
    json_object_set_new(root, "decode", json_integer(r->ndecode));
    if (r->verdict == DSV4Q_V_PASS || r->verdict == DSV4Q_V_FAIL || r->verdict == DSV4Q_V_UNCHECKABLE) {
        if (r->ref_nonfinite) json_object_set_new(root, "logits_not_checkable", json_string(r->ref_why));
        json_object_set_new(root, "stages_not_checkable_reference", json_integer(r->stages_ref_nonfinite));
        json_object_set_new(root, "logit_nrms", dsv4q_json_num(r->nrms));
        json_object_set_new(root, "logit_nrms_level", dsv4q_json_num(r->level));
        json_object_set_new(root, "logit_nrms_bound", dsv4q_json_num(r->bound));
        json_object_set_new(root, "logit_nrms_pass", json_boolean(r->nrms_pass));
        json_object_set_new(root, "greedy_agree", json_integer(r->agree));
        json_object_set_new(root, "greedy_agree_level", json_integer(r->level_agree));
        json_object_set_new(root, "rows", json_integer(r->rows));
        json_object_set_new(root, "greedy_min", dsv4q_json_num(r->greedy_min));
        json_object_set_new(root, "greedy_required", json_integer(r->greedy_required));
        json_object_set_new(root, "greedy_decided_rows", json_integer(r->decided));
        json_object_set_new(root, "greedy_gated", json_boolean(r->greedy_min >= 0 && r->decided > 0));
        json_object_set_new(root, "greedy_agree_decided", json_integer(r->agree_decided));
        json_object_set_new(root, "greedy_pass", json_boolean(r->greedy_pass));
        json_object_set_new(root, "nonfinite", json_integer(r->nonfinite));
        json_object_set_new(root, "logit_max_abs", dsv4q_json_num(r->max_abs));
        json_object_set_new(root, "logit_max_abs_level", dsv4q_json_num(r->level_max_abs));
        json_object_set_new(root, "logit_cosine", dsv4q_json_num(r->cosine));
        json_t *steps = json_array();
        for (long i = 0; i < r->rows; i++) {
            json_t *s = json_object();
            json_object_set_new(s, "position", json_integer(r->nprompt - 1 + i));
            json_object_set_new(s, "nrms", dsv4q_json_num(r->step_nrms[i]));
            json_object_set_new(s, "level", dsv4q_json_num(r->step_level[i]));
            json_object_set_new(s, "argmax", json_integer(r->am_cand[i]));
            json_object_set_new(s, "argmax_f64", json_integer(r->am_ref[i]));
            json_object_set_new(s, "argmax_f32", json_integer(r->am_lvl[i]));
            json_array_append_new(steps, s);
        }
        json_object_set_new(root, "steps", steps);
        json_t *calls = json_object();
        for (int i = 0; i < DSV4Q_OP_COUNT; i++)
            if (r->calls[i]) json_object_set_new(calls, dsv4q_op_get(i)->name, json_integer(r->calls[i]));
        json_object_set_new(root, "calls", calls);
        json_t *fb = json_object();
        for (int i = 0; i < DSV4Q_OP_COUNT; i++)
            if (r->fallbacks[i]) json_object_set_new(fb, dsv4q_op_get(i)->name, json_integer(r->fallbacks[i]));
        json_object_set_new(root, "oracle_f32_fallbacks", fb);
        json_object_set_new(root, "decode_attention",
                            json_string(r->decode_op >= 0 ? dsv4q_op_get(r->decode_op)->name : ""));
        json_object_set_new(root, "seconds", json_real(r->seconds));
        json_object_set_new(root, "stages", dsv4q_replay_stages_json(&r->stages, NULL));
        json_object_set_new(root, "stages_pass", json_boolean(r->stages_pass));
        json_object_set_new(root, "stages_failed", json_integer(r->stages.nfail));
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    return s;
}
