/*
 * capture_backend.c - `dsv4q capture --backend B` (capture_backend.h): the
 * glue that runs THE forward pass (oracle/model.c at f32) with B's ABI
 * provider (harness/provider/provider_abi.h, set up as qualify --whole-model sets it
 * up: dsv4q_abi_provider_open) and the capture writer as its stage hook.
 * There is no forward pass here: what a stage computes is whatever the one
 * pass computes with B's operators (oracle-f32 for those B lacks), so the
 * capture shows B's attention, compressors and indexer too.
 *
 * The whole capture is one isolate job (dsv4q_iso_job): in-process for a
 * built-in, in one child for a plugin (isolate.h I1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/capture/capture_backend.h"
#include "harness/provider/provider_abi.h"
#include "oracle/model_run.h"

typedef struct job_arg {
    const dsv4q_model *m;
    uint64_t bs;
    const char *dir;
    const dsv4q_capture_info *info;
    const int32_t *prompt, *decode;
    long nprompt, ndecode;
} job_arg;

/* {"linear":12,...}: the calls of ops that ran on oracle-f32 in one call. */
static void fallbacks_json(const long *now, const long *before, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "{");
    for (int i = 0; i < DSV4Q_OP_COUNT && n < len; i++)
        if (now[i] > before[i])
            n += (size_t)snprintf(buf + n, len - n, "%s\"%s\":%ld", n > 1 ? "," : "", dsv4q_op_get(i)->name,
                                  now[i] - before[i]);
    if (n < len) snprintf(buf + n, len - n, "}");
}

static int job(const dsv4q_backend_v1 *b, void *ctx, void *user, void *out, char *detail, size_t detaillen, char *err,
               size_t errlen)
{
    const job_arg *a = user;
    dsv4q_capture_backend_res *res = out;
    memset(res, 0, sizeof *res);
    const long max_pos = a->nprompt + a->ndecode;
    char perr[1024] = "";
    dsv4q_capture_writer *w = NULL;
    dsv4q_run *r = NULL;
    dsv4q_abi_provider *p = NULL;
    const dsv4q_provider_f32 *table;
    double *logits = malloc(sizeof(double) * (size_t)a->m->cfg.vocab_size);
    int rc = DSV4Q_BACKEND_ERROR;
    if (!logits) { snprintf(err, errlen, "capture: out of memory"); goto out; }
    if (dsv4q_capture_writer_new(&w, a->dir, &a->m->cfg, a->info, err, errlen) ||
        dsv4q_run_open(&r, a->m, 32, a->bs, max_pos, NULL, NULL, err, errlen))
        goto out;
    if (dsv4q_abi_provider_open(&p, &table, b, ctx, a->m, a->bs, max_pos, 0, res->calls, res->fallbacks,
                                &res->decode_op, detail, detaillen, perr, sizeof perr)) {
        snprintf(err, errlen, "capture: %s", perr);
        goto out;
    }
    if (dsv4q_run_set_provider(r, table, p)) { snprintf(err, errlen, "capture: the run is not f32"); goto out; }
    dsv4q_run_set_stage_hook(r, dsv4q_capture_stage_cb, w);
    if (dsv4q_capture_writer_meta(w, DSV4Q_CAPTURE_META_DECODE, dsv4q_op_get(res->decode_op)->name, err, errlen))
        goto out;
    for (long i = -1; i < a->ndecode; i++) {
        const int32_t *ids = i < 0 ? a->prompt : &a->decode[i];
        const long s = i < 0 ? a->nprompt : 1, pos = i < 0 ? 0 : a->nprompt + i;
        long before[DSV4Q_OP_COUNT];
        char fb[1024];
        memcpy(before, res->fallbacks, sizeof before);
        if (dsv4q_run_feed(r, ids, s, logits, err, errlen)) {
            if (dsv4q_abi_provider_status(p) != DSV4Q_BACKEND_OK) {
                rc = dsv4q_abi_provider_status(p);
                snprintf(err, errlen, "%s", perr);
            }
            goto out;
        }
        fallbacks_json(res->fallbacks, before, fb, sizeof fb);
        if (dsv4q_capture_writer_meta(w, DSV4Q_CAPTURE_META_FALLBACKS, fb, err, errlen) ||
            dsv4q_capture_writer_call(w, pos, ids, s, err, errlen))
            goto out;
    }
    res->ncalls = dsv4q_capture_writer_count(w);
    rc = DSV4Q_BACKEND_OK;
out:
    dsv4q_run_close(r);
    dsv4q_abi_provider_free(p);
    dsv4q_capture_writer_free(w);
    free(logits);
    return rc;
}

int dsv4q_capture_backend(const char *spec, const dsv4q_iso_opts *iso, const dsv4q_model *m, uint64_t bs,
                          const char *dir, const dsv4q_capture_info *info, const int32_t *prompt, long nprompt,
                          const int32_t *decode, long ndecode, dsv4q_capture_backend_res *res, char *err, size_t errlen)
{
    if (dsv4q_backend_is_path(spec) && iso->inprocess) {
        snprintf(err, errlen, "--backend %s: a plugin is never loaded into the harness process (isolate.h I1)", spec);
        return -1;
    }
    if (dsv4q_capture_clear(dir, err, errlen)) return -1;
    job_arg a = {m, bs, dir, info, prompt, decode, nprompt, ndecode};
    dsv4q_iso_status st = dsv4q_iso_job(spec, iso, "capture", job, &a, res, sizeof *res, err, errlen);
    if (st == DSV4Q_ISO_OK) return 0;
    char e2[256];
    dsv4q_capture_clear(dir, e2, sizeof e2);   /* no half capture */
    return -1;
}
