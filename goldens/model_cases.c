/*
 * model_cases.c - the whole-model golden cases, on a checkpoint synthesized
 * for the occasion: `tiny` (io/config_builtin.c) at seed 1, written into a
 * temporary directory by io/synth.c and removed after the case.
 *
 * model_tiny pins the logits of a prefill and four decode steps plus the
 * MTP logits; stages_tiny pins a digest of every stage output of the stage
 * table (oracle/stages.h), so a change anywhere in the forward pass is named
 * by the first stage it moves. The checkpoint's SHA-256 rides in the
 * payload's metadata: a mismatch then says whether synth itself changed.
 *
 * model_tiny_v41 runs the DeepSeek V4.1 forward pass (oracle/model_v41.c)
 * on the repository's copy of DeepSeek's reference checkpoint,
 * tests/data/pub_v41_tiny (never ../shared): a short prompt and two decode
 * steps, the logits of every call and a digest of every layer's block
 * output (and the Engram layers' outputs) per call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "goldens/payload.h"
#include "io/config.h"
#include "io/model.h"
#include "io/sha256.h"
#include "io/synth.h"
#include "oracle/model_run.h"
#include "oracle/stages.h"

/* ---- the fixture, and model_tiny: prompt of 40 synthetic ids + 4 decode
 *      steps, logits of every call and the MTP logits after the last call. */

#define TINY_PROMPT 40
#define TINY_DECODE 4

typedef struct tiny_state {
    char sha[65];             /* SHA-256 of the synthesized model.safetensors */
    char dir[512];            /* .../tiny inside a mkdtemp directory */
    char top[512];
    dsv4q_model *m;
    int32_t ids[TINY_PROMPT + TINY_DECODE + 1];
} tiny_state;

static void rm_tree_shallow(const char *dir)
{
    /* synth writes config.json and model.safetensors (one shard) */
    static const char *const files[] = {"config.json", "model.safetensors", NULL};
    char p[1024];
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

void dsv4q_golden_tiny_teardown(gctx *g)
{
    tiny_state *t = g->user;
    if (!t) return;
    if (t->m) dsv4q_model_close(t->m);
    if (t->dir[0]) rm_tree_shallow(t->dir);
    if (t->top[0]) rmdir(t->top);
    free(t);
    g->user = NULL;
}

int dsv4q_golden_tiny_setup(gctx *g)
{
    tiny_state *t = calloc(1, sizeof *t);
    if (!t) return dsv4q_errf(g->err, g->errlen, "model_tiny: out of memory");
    g->user = t;
    const char *tmp = getenv("TMPDIR");
    snprintf(t->top, sizeof t->top, "%s/dsv4q-golden-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(t->top)) {
        int e = errno;
        t->top[0] = 0;
        return dsv4q_errf(g->err, g->errlen, "model_tiny: mkdtemp: %s", strerror(e));
    }
    snprintf(t->dir, sizeof t->dir, "%s/tiny", t->top);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny", g->err, g->errlen) ||
        dsv4q_synth_write(&cfg, 1, t->dir, 1, g->err, g->errlen) || dsv4q_model_open(&t->m, t->dir, g->err, g->errlen))
        return -1;
    /* pinned in the payload: a model_tiny mismatch can then say whether the
     * synthesized checkpoint itself changed (io/synth.c) */
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", t->dir);
    if (dsv4q_sha256_hex_file(path, t->sha, g->err, g->errlen)) return -1;
    g->meta[0][0] = "dsv4q.golden.checkpoint_sha256";
    g->meta[0][1] = t->sha;
    g->meta[1][0] = "dsv4q.golden.synth_version";
    g->meta[1][1] = DSV4Q_SYNTH_VERSION;
    grng r = rng_of(g, "ids");
    for (int i = 0; i < TINY_PROMPT + TINY_DECODE + 1; i++)
        t->ids[i] = (int32_t)(rbits(&r) % (uint64_t)t->m->cfg.vocab_size);
    return 0;
}

int dsv4q_golden_model_tiny(gctx *g)
{
    tiny_state *t = g->user;
    const long V = t->m->cfg.vocab_size;
    double *lg = NEW(double, (TINY_DECODE + 1) * V), *mtp = NEW(double, V);
    if (!lg || !mtp) return -1;
    dsv4q_run *r = NULL;
    int rc = -1;
    if (dsv4q_run_open(&r, t->m, g->width, g->bs, TINY_PROMPT + TINY_DECODE, NULL, NULL, g->err, g->errlen)) return -1;
    if (dsv4q_run_feed(r, t->ids, TINY_PROMPT, lg, g->err, g->errlen)) goto out;
    for (int i = 0; i < TINY_DECODE; i++)
        if (dsv4q_run_feed(r, &t->ids[TINY_PROMPT + i], 1, lg + (i + 1) * V, g->err, g->errlen)) goto out;
    if (dsv4q_run_mtp(r, &t->ids[TINY_PROMPT + TINY_DECODE], mtp, g->err, g->errlen)) goto out;
    if (g->width == 64) {
        rc = -(dsv4q_golden_emit(g, "logits", DSV4Q_DT_F64, 2, (int64_t[]){TINY_DECODE + 1, V}, lg) ||
               dsv4q_golden_emit(g, "mtp_logits", DSV4Q_DT_F64, 2, (int64_t[]){1, V}, mtp));
    } else {   /* the f32 instance's values are floats carried in doubles: exact */
        float *f = NEW(float, (TINY_DECODE + 2) * V);
        if (!f) goto out;
        for (long i = 0; i < (TINY_DECODE + 1) * V; i++) f[i] = (float)lg[i];
        for (long i = 0; i < V; i++) f[(TINY_DECODE + 1) * V + i] = (float)mtp[i];
        rc = -(dsv4q_golden_emit(g, "logits", DSV4Q_DT_F32, 2, (int64_t[]){TINY_DECODE + 1, V}, f) ||
               dsv4q_golden_emit(g, "mtp_logits", DSV4Q_DT_F32, 2, (int64_t[]){1, V}, f + (TINY_DECODE + 1) * V));
    }
out:
    dsv4q_run_close(r);
    return rc;
}

/* ---- stages_tiny: the same checkpoint, two short calls (prompt 4, one
 *     decode step), and the SHA-256 of every stage output of the stage
 *     table (oracle/stages.h) at the run's width, in forward order: the
 *     stage list is the table's, so a new stage row is recorded with no
 *     edit here, and a moved stage is named by the first differing tensor
 *     (names sort in forward order: c{call}.s{slot}.{capture name}).
 *     Digests, not values: all outputs of both calls at 8 combinations
 *     would be megabytes of incompressible floats. */

#define STAGES_PROMPT 4
#define STAGES_CALLS 2   /* the prompt, then one decode step */

typedef struct stages_rec {
    gctx *g;
    const dsv4q_config *cfg;
    int call, rc;
} stages_rec;

/* Emit the digest of out[t] of stage st at layer (values rounded to the
 * run's width: exact, the f32 instance's values are floats in doubles). */
static int emit_stage_digest(stages_rec *sr, int st, int layer, long s, int t, const double *v)
{
    gctx *g = sr->g;
    const dsv4q_stage_info *si = dsv4q_stage_get(st);
    const int64_t n = dsv4q_stage_numel(&si->out[t], sr->cfg, s);
    char cap[DSV4Q_STAGE_NAME_MAX], name[DSV4Q_STAGE_NAME_MAX + 24], hex[65];
    const long slot = dsv4q_stage_slot_of(sr->cfg->n_layers, st, layer);
    if (slot < 0 || dsv4q_stage_tensor_name(cap, sizeof cap, st, layer, 1, t))
        return dsv4q_errf(g->err, g->errlen, "%s: stage %s layer %d is not in the stage table's slots", g->key,
                          si->name, layer);
    if (g->width == 32) {
        float *f = NEW(float, n);
        if (!f) return -1;
        for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
        dsv4q_sha256_hex(f, sizeof(float) * (size_t)n, hex);
    } else {
        dsv4q_sha256_hex(v, sizeof(double) * (size_t)n, hex);
    }
    uint8_t d[32];
    for (int i = 0; i < 32; i++) {
        unsigned x;
        sscanf(hex + 2 * i, "%2x", &x);
        d[i] = (uint8_t)x;
    }
    snprintf(name, sizeof name, "c%d.s%03ld.%s", sr->call, slot, cap);
    return dsv4q_golden_emit(g, name, DSV4Q_DT_U8, 1, (int64_t[]){32}, d);
}

static int stages_hook(void *user, const dsv4q_stage_io *io)
{
    stages_rec *sr = user;
    const dsv4q_stage_info *si = dsv4q_stage_get(io->stage);
    for (int t = 0; !sr->rc && si && t < si->nout; t++)
        if (emit_stage_digest(sr, io->stage, io->layer, io->s, t, io->out[t])) sr->rc = -1;
    return 0;   /* observe only */
}

int dsv4q_golden_stages_tiny(gctx *g)
{
    tiny_state *t = g->user;
    const long V = t->m->cfg.vocab_size;
    double *lg = NEW(double, V);
    if (!lg) return -1;
    stages_rec sr = {g, &t->m->cfg, 0, 0};
    dsv4q_run *r = NULL;
    int rc = -1;
    if (dsv4q_run_open(&r, t->m, g->width, g->bs, STAGES_PROMPT + STAGES_CALLS - 1, NULL, NULL, g->err, g->errlen))
        return -1;
    dsv4q_run_set_stage_hook(r, stages_hook, &sr);
    for (long pos = 0; sr.call < STAGES_CALLS; sr.call++) {
        const long s = sr.call ? 1 : STAGES_PROMPT;
        if (dsv4q_run_feed(r, t->ids + pos, s, lg, g->err, g->errlen) || sr.rc) goto out;
        pos += s;
        /* the mtp stage (reported to the hook too): the next token of each row */
        if (dsv4q_run_mtp(r, t->ids + pos - s + 1, lg, g->err, g->errlen) || sr.rc) goto out;
    }
    rc = 0;
out:
    dsv4q_run_close(r);
    return rc;
}

/* ---- model_tiny_v41: tests/data/pub_v41_tiny (8 layers: ratios 0/1/2,
 *      Engram at layers 2 and 5, the two-level top-k), a prompt of 16
 *      synthetic ids + 2 decode steps: the logits of every call [3, V],
 *      and the SHA-256 of block_out of every layer and of engram_out of the
 *      Engram layers, per call, at the run's width
 *      (c{call}.L{layer}.{tap}): values would be ~1 MB of incompressible
 *      floats; the logits carry the magnitudes. */

#define V41_CASE "tests/data/pub_v41_tiny"
#define V41_PROMPT 16
#define V41_DECODE 2

typedef struct v41_state {
    char sha[65]; /* SHA-256 of the checkpoint's model.safetensors */
    dsv4q_model *m;
    int32_t ids[V41_PROMPT + V41_DECODE];
} v41_state;

typedef struct v41_taps {
    gctx *g;
    int call, rc;
} v41_taps;

void dsv4q_golden_v41_teardown(gctx *g)
{
    v41_state *t = g->user;
    if (!t) return;
    if (t->m) dsv4q_model_close(t->m);
    free(t);
    g->user = NULL;
}

int dsv4q_golden_v41_setup(gctx *g)
{
    v41_state *t = calloc(1, sizeof *t);
    if (!t) return dsv4q_errf(g->err, g->errlen, "%s: out of memory", g->key);
    g->user = t;
    /* the repository's copy: beside the goldens directory, else below the
     * working directory (the tests and scripts run from the root) */
    char dir[4200] = "", path[4300];
    if (g->dir) {
        snprintf(dir, sizeof dir, "%s/../%s", g->dir, V41_CASE);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (access(path, R_OK)) dir[0] = 0;
    }
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", V41_CASE);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, R_OK))
        return dsv4q_errf(g->err, g->errlen,
                          "%s: no %s/model.safetensors beside the goldens directory or below the "
                          "working directory",
                          g->key, V41_CASE);
    if (dsv4q_model_open(&t->m, dir, g->err, g->errlen) || dsv4q_sha256_hex_file(path, t->sha, g->err, g->errlen))
        return -1;
    if (t->m->cfg.arch != DSV4Q_ARCH_V41)
        return dsv4q_errf(g->err, g->errlen, "%s: %s is not a DeepSeek V4.1 checkpoint", g->key, dir);
    g->meta[0][0] = "dsv4q.golden.checkpoint_sha256";
    g->meta[0][1] = t->sha;
    g->meta[1][0] = "dsv4q.golden.checkpoint";
    g->meta[1][1] = V41_CASE;
    grng r = rng_of(g, "ids");
    for (int i = 0; i < V41_PROMPT + V41_DECODE; i++) t->ids[i] = (int32_t)(rbits(&r) % (uint64_t)t->m->cfg.vocab_size);
    return 0;
}

/* The SHA-256 of a tap's n values at the run's width, as U8 [32]. */
static int emit_digest(gctx *g, const char *name, const double *v, long n)
{
    char hex[65];
    if (g->width == 32) {
        float *f = NEW(float, n > 0 ? n : 1);
        if (!f) return -1;
        for (long i = 0; i < n; i++) f[i] = (float)v[i];
        dsv4q_sha256_hex(f, sizeof(float) * (size_t)n, hex);
    } else {
        dsv4q_sha256_hex(v, sizeof(double) * (size_t)n, hex);
    }
    uint8_t d[32];
    for (int i = 0; i < 32; i++) {
        unsigned x;
        sscanf(hex + 2 * i, "%2x", &x);
        d[i] = (uint8_t)x;
    }
    return dsv4q_golden_emit(g, name, DSV4Q_DT_U8, 1, (int64_t[]){32}, d);
}

static void v41_tap(void *user, int layer, const char *stage, const double *data, long n, long rows)
{
    v41_taps *vt = user;
    (void)rows;
    if (vt->rc || !stage || layer < 0 || (strcmp(stage, "block_out") && strcmp(stage, "engram_out"))) return;
    char name[64];
    snprintf(name, sizeof name, "c%d.L%d.%s", vt->call, layer, stage);
    if (emit_digest(vt->g, name, data, n)) vt->rc = -1;
}

int dsv4q_golden_model_tiny_v41(gctx *g)
{
    v41_state *t = g->user;
    const long V = t->m->cfg.vocab_size;
    double *lg = NEW(double, (V41_DECODE + 1) * V);
    if (!lg) return -1;
    v41_taps vt = {g, 0, 0};
    dsv4q_run *r = NULL;
    int rc = -1;
    if (dsv4q_run_open(&r, t->m, g->width, g->bs, V41_PROMPT + V41_DECODE, v41_tap, &vt, g->err, g->errlen)) return -1;
    if (dsv4q_run_feed(r, t->ids, V41_PROMPT, lg, g->err, g->errlen) || vt.rc) goto out;
    for (int i = 0; i < V41_DECODE; i++) {
        vt.call = i + 1;
        if (dsv4q_run_feed(r, &t->ids[V41_PROMPT + i], 1, lg + (i + 1) * V, g->err, g->errlen) || vt.rc) goto out;
    }
    if (g->width == 64) {
        rc = -dsv4q_golden_emit(g, "logits", DSV4Q_DT_F64, 2, (int64_t[]){V41_DECODE + 1, V}, lg);
    } else { /* the f32 instance's values are floats carried in doubles: exact */
        float *f = NEW(float, (V41_DECODE + 1) * V);
        if (!f) goto out;
        for (long i = 0; i < (V41_DECODE + 1) * V; i++) f[i] = (float)lg[i];
        rc = -dsv4q_golden_emit(g, "logits", DSV4Q_DT_F32, 2, (int64_t[]){V41_DECODE + 1, V}, f);
    }
out:
    dsv4q_run_close(r);
    return rc;
}
