/*
 * cmd_run.c - `dsv4q run`: one oracle run, logits (and optionally every
 * stage tap) written as safetensors so any other implementation can be
 * compared with it. Output tensors: logits_prefill [vocab] (last prompt
 * position), logits_decode [M, vocab], and with --taps one tensor per
 * stage named L{layer}.{stage} (layer -1 is written as "model"), rows of
 * all calls concatenated; dtype F32 or F64 = the run's width. A V4.1
 * checkpoint with DSpark stages also runs the draft after every call on
 * the argmax of its logits (temperature 0; oracle/model_run.h
 * dsv4q_run_dspark) and writes dspark_logits [M, block, vocab],
 * dspark_ids [M, block + 1] and dspark_confidence [M, block] of the M
 * decode calls (the prefill only seeds the stages' caches). Options: the
 * command table (cli/cmdtab.c, `dsv4q help run`).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "cli/common.h"
#include "cli/taps.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static int add(dsv4q_st_writer *w, const char *name, int width, int ndim, const int64_t *shape, const double *v,
               long n, char *err, size_t errlen)
{
    if (width == 64) return dsv4q_st_writer_add(w, name, DSV4Q_DT_F64, ndim, shape, v, sizeof(double) * (size_t)n, err, errlen);
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!f) { snprintf(err, errlen, "out of memory"); return -1; }
    for (long i = 0; i < n; i++) f[i] = (float)v[i];
    int rc = dsv4q_st_writer_add(w, name, DSV4Q_DT_F32, ndim, shape, f, sizeof(float) * (size_t)n, err, errlen);
    free(f);
    return rc;
}

/* The first index of the largest logit (torch argmax: temperature 0). */
static int32_t argmax(const double *x, long n)
{
    long b = 0;
    for (long i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* dsv4q_run_dspark after a feed with logits lg; decode call i (-1: the prefill) fills row i. */
static int dspark_after(dsv4q_run *r, const dsv4q_model *m, const double *lg, long i, double *dl, double *di,
                        double *dc, char *err, size_t errlen)
{
    const long V = m->cfg.vocab_size, B = m->cfg.dspark_block_size;
    double *l = malloc(sizeof(double) * (size_t)(B * V)), *c = malloc(sizeof(double) * (size_t)B);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int rc = -1;
    if (!l || !c || !ids) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    rc = dsv4q_run_dspark(r, argmax(lg, V), l, ids, c, err, errlen);
    if (rc == 0 && i >= 0) {
        memcpy(dl + i * B * V, l, sizeof(double) * (size_t)(B * V));
        for (long k = 0; k <= B; k++) di[i * (B + 1) + k] = ids[k];
        memcpy(dc + i * B, c, sizeof(double) * (size_t)B);
    }
    rc = rc < 0 ? -1 : 0;
out:
    free(l);
    free(c);
    free(ids);
    return rc;
}

int dsv4q_cmd_run(int argc, char **argv)
{
    dsv4q_cli_opts o;
    char err[1024], dir[4096], bnames[1024];
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    dsv4q_cli_threads(&o);
    uint64_t bs;
    if (dsv4q_cli_bset(&o, &bs, err, sizeof err)) {
        fprintf(stderr, "dsv4q run: %s\n", err);
        return 2;
    }
    dsv4q_model *m;
    dsv4q_tokens t;
    if (dsv4q_cli_start("run", &o, dir, sizeof dir, &m, &t)) return 2;
    const long V = m->cfg.vocab_size, M = t.nteacher;
    double *lp = malloc(sizeof(double) * (size_t)V), *ld = malloc(sizeof(double) * (size_t)((M ? M : 1) * V));
    /* without --taps no tap is kept: the prompt may go in chunks, the
     * largest the run's own estimate fits; a --chunk past
     * the prompt is the one call (and keeps the call count below from
     * overflowing) */
    const double have = dsv4q_mem_available();
    const long fit = o.taps || have <= 0 ? t.nprompt : dsv4q_run_chunk_fit(m, o.width, t.nprompt + M, t.nprompt, have);
    const long chunk = o.chunk ? (o.chunk < t.nprompt ? o.chunk : t.nprompt) : fit > 0 ? fit : t.nprompt;
    const long nchunks = (t.nprompt + chunk - 1) / chunk;
    dsv4q_eta eta;
    dsv4q_eta_start(&eta, &m->cfg, dsv4q_plan_work(&m->cfg, t.nprompt, chunk, M, 0, 1), m->cfg.n_layers, 1,
                    dsv4q_now());
    dsv4q_tapset ts = {.label = o.width == 64 ? "f64" : "f32",
                       .eta = &eta,
                       .nlayers = m->cfg.n_layers,
                       .quiet = o.quiet,
                       .total_calls = nchunks + t.nteacher,
                       .progress_only = !o.taps};
    dsv4q_run *r = NULL;
    dsv4q_st_writer *w = NULL;
    double *dl = NULL, *di = NULL, *dc = NULL; /* DSpark outputs of the decode calls */
    int rc = 2;
    dsv4q_boundary_format(bs & dsv4q_boundary_arch_mask(m->cfg.arch), bnames, sizeof bnames);
    fprintf(stderr, "dsv4q run: %s, width f%d, profile %s (%s), prompt %ld, decode %ld\n", dir, o.width,
            o.profile, bnames, t.nprompt, M);
    if (!lp || !ld) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    if (o.taps && nchunks > 1) {
        snprintf(err, sizeof err,
                 "--taps writes the one-call prefill's taps: leave --chunk out (or give the "
                 "prompt's %ld) with --taps",
                 t.nprompt);
        goto fail;
    }
    if (o.taps && dsv4q_taps_fit(m, o.width, t.nprompt, M, chunk, 1, err, sizeof err)) goto fail;
    if (dsv4q_run_open(&r, m, o.width, bs, t.nprompt + M, dsv4q_tapset_cb, &ts, err, sizeof err)) goto fail;
    if (nchunks > 1) {
        if (dsv4q_run_set_prefill(r, t.nprompt, err, sizeof err)) goto fail;
        fprintf(stderr, "dsv4q run: prefill in %ld calls of up to %ld tokens (bit-identical to one call)\n", nchunks,
                chunk);
    }
    const int ds = m->cfg.arch == DSV4Q_ARCH_V41 && m->cfg.n_mtp_layers > 0;
    const long B = m->cfg.dspark_block_size;
    if (ds && (!(dl = malloc(sizeof(double) * (size_t)((M ? M : 1) * B * V))) ||
               !(di = malloc(sizeof(double) * (size_t)((M ? M : 1) * (B + 1)))) ||
               !(dc = malloc(sizeof(double) * (size_t)((M ? M : 1) * B))))) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    for (long p = 0, n; p < t.nprompt; p += n) {
        n = t.nprompt - p < chunk ? t.nprompt - p : chunk;
        dsv4q_eta_call(&eta, p, n);
        if (dsv4q_run_feed(r, t.prompt + p, n, lp, err, sizeof err)) goto fail;
    }
    if (ds && dspark_after(r, m, lp, -1, dl, di, dc, err, sizeof err)) goto fail;
    for (long i = 0; i < M; i++) {
        dsv4q_eta_call(&eta, t.nprompt + i, 1);
        if (dsv4q_run_feed(r, &t.teacher[i], 1, ld + i * V, err, sizeof err)) goto fail;
        if (ds && dspark_after(r, m, ld + i * V, i, dl, di, dc, err, sizeof err)) goto fail;
    }
    if (!o.quiet && isatty(2)) fprintf(stderr, "\n");
    w = dsv4q_st_writer_new();
    if (!w) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    int64_t s1[1] = {V}, s2[2] = {M, V};
    if (add(w, "logits_prefill", o.width, 1, s1, lp, V, err, sizeof err) ||
        add(w, "logits_decode", o.width, 2, s2, ld, M * V, err, sizeof err))
        goto fail;
    if (ds) {
        int64_t s3[3] = {M, B, V}, si[2] = {M, B + 1}, sc[2] = {M, B};
        if (add(w, "dspark_logits", o.width, 3, s3, dl, M * B * V, err, sizeof err) ||
            add(w, "dspark_ids", o.width, 2, si, di, M * (B + 1), err, sizeof err) ||
            add(w, "dspark_confidence", o.width, 2, sc, dc, M * B, err, sizeof err))
            goto fail;
    }
    if (o.taps)
        for (long i = 0; i < ts.n; i++) {
            dsv4q_tap_entry *e = &ts.e[i];
            char name[96];
            if (e->layer < 0) snprintf(name, sizeof name, "model.%s", e->stage);
            else snprintf(name, sizeof name, "L%d.%s", e->layer, e->stage);
            int64_t sh[2] = {e->rows, e->rows ? e->n / e->rows : 0};
            if (e->rows && e->n % e->rows) { sh[0] = e->n; sh[1] = 1; }
            if (add(w, name, o.width, 2, sh, e->data, e->n, err, sizeof err)) goto fail;
        }
    dsv4q_st_writer_meta(w, "producer", "dsv4q run");
    dsv4q_st_writer_meta(w, "width", o.width == 64 ? "f64" : "f32");
    dsv4q_st_writer_meta(w, "profile", o.profile);
    dsv4q_st_writer_meta(w, "boundaries", bnames);
    dsv4q_st_writer_meta(w, "tokens_sha256", t.pin);
    if (dsv4q_st_writer_write(w, o.out, err, sizeof err)) { w = NULL; goto fail; }
    w = NULL;
    printf("wrote %s (logits_prefill [%ld], logits_decode [%ld, %ld]%s)\n", o.out, V, M, V,
           o.taps ? ", stage taps" : "");
    long nonfin = 0;
    for (long i = 0; i < V; i++) nonfin += !isfinite(lp[i]);
    for (long i = 0; i < M * V; i++) nonfin += !isfinite(ld[i]);
    if (nonfin) /* written as computed, but never silently */
        fprintf(stderr,
                "dsv4q run: warning: %ld of %ld logits are not finite (a weight or scale overflows the "
                "width; `run --taps` shows the first stage that does)\n",
                nonfin, (M + 1) * V);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "dsv4q run: %s\n", err);
out:
    if (w) dsv4q_st_writer_free(w);
    dsv4q_run_close(r);
    dsv4q_tapset_free(&ts);
    free(lp);
    free(ld);
    free(dl);
    free(di);
    free(dc);
    dsv4q_tokens_free(&t);
    dsv4q_model_close(m);
    return rc;
}
