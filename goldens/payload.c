/*
 * payload.c - the payload builder: one golden case run at both widths and
 * all four profiles (G2) into one safetensors image (see payload.h).
 *
 * Owns the case context (gctx: arena, error buffer, the payload writer),
 * the output collector dsv4q_golden_emit and the metadata every payload
 * carries (case key, inputs, format, which profiles gave identical outputs).
 * Refuses nothing of its own: a case that fails fails the build with its
 * message. Everything here is deterministic (G1): the only inputs are the
 * case key and the oracle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "goldens/golden.h"
#include "goldens/payload.h"
#include "oracle/boundary.h"

/* ---- the arena ---------------------------------------------------------- */

void *dsv4q_golden_alloc(gctx *g, size_t n)
{
    ablk *b = malloc(sizeof(ablk) + (n ? n : 1));
    if (!b) {
        dsv4q_errf(g->err, g->errlen, "%s: out of memory (%zu bytes)", g->key, n);
        return NULL;
    }
    b->next = g->arena;
    g->arena = b;
    return b + 1;
}

static void arena_free(gctx *g)
{
    while (g->arena) {
        ablk *n = g->arena->next;
        free(g->arena);
        g->arena = n;
    }
}

/* ---- outputs ------------------------------------------------------------ */

static int combo_append(gctx *g, const void *p, size_t n)
{
    if (g->ncombo + n > g->capcombo) {
        size_t nc = g->capcombo ? g->capcombo : 4096;
        while (nc < g->ncombo + n) nc *= 2;
        uint8_t *b = realloc(g->combo, nc);
        if (!b) return dsv4q_errf(g->err, g->errlen, "%s: out of memory", g->key);
        g->combo = b;
        g->capcombo = nc;
    }
    memcpy(g->combo + g->ncombo, p, n);
    g->ncombo += n;
    return 0;
}

int dsv4q_golden_emit(gctx *g, const char *out, dsv4q_dtype dt, int ndim, const int64_t *shape, const void *data)
{
    char name[160];
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    if (!data) return dsv4q_errf(g->err, g->errlen, "%s: output %s missing", g->key, out);
    snprintf(name, sizeof name, "f%d.%s.%s", g->width, g->profile, out);
    size_t nb = (size_t)n * dsv4q_dtype_size(dt);
    if (dsv4q_st_writer_add(g->w, name, dt, ndim, shape, data, nb, g->err, g->errlen)) return -1;
    g->ntensors++;
    g->nvalues += (long)n;
    if (combo_append(g, out, strlen(out) + 1) || combo_append(g, shape, sizeof(int64_t) * (size_t)ndim) ||
        combo_append(g, data, nb))
        return -1;
    return 0;
}

/* ---- the builder ----------------------------------------------------------- */

static const char *const gprofiles[4] = {"source", "model", "qat", "exact"};

/* "source|model,qat|exact": groups of profiles with identical outputs. */
static void distinct_groups(uint8_t *const *b, const size_t *n, char *out, size_t len)
{
    int grp[4], ng = 0;
    for (int p = 0; p < 4; p++) {
        grp[p] = -1;
        for (int q = 0; q < p; q++)
            if (n[q] == n[p] && !memcmp(b[q], b[p], n[p])) {
                grp[p] = grp[q];
                break;
            }
        if (grp[p] < 0) grp[p] = ng++;
    }
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < ng; k++) {
        int first = 1;
        for (int p = 0; p < 4; p++)
            if (grp[p] == k) {
                o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s", first ? (k ? "|" : "") : ",",
                                      gprofiles[p]);
                first = 0;
            }
    }
}

int dsv4q_golden_build(const gcase *c, const char *dir, uint8_t **buf, size_t *len, char *distinct, size_t dlen,
                       long *nvalues, char *err, size_t errlen)
{
    gctx g;
    memset(&g, 0, sizeof g);
    g.key = c->key;
    g.dir = dir;
    g.err = err;
    g.errlen = errlen;
    *buf = NULL;
    *len = 0;
    uint8_t *pb[4] = {0};
    size_t pn[4] = {0};
    char groups[2][96];
    int rc = -1;
    g.w = dsv4q_st_writer_new();
    if (!g.w) return dsv4q_errf(err, errlen, "%s: out of memory", c->key);
    if (c->setup && c->setup(&g)) goto out;
    for (int wi = 0; wi < 2; wi++) {
        g.width = wi ? 64 : 32;
        for (int p = 0; p < 4; p++) {
            g.profile = gprofiles[p];
            if (dsv4q_profile_set(g.profile, &g.bs)) {
                dsv4q_errf(err, errlen, "unknown profile %s", g.profile);
                goto out;
            }
            g.ncombo = 0;
            int r = (wi ? c->f64 : c->f32)(&g);
            arena_free(&g);
            if (r) goto out;
            pb[p] = malloc(g.ncombo ? g.ncombo : 1);
            if (!pb[p]) {
                dsv4q_errf(err, errlen, "%s: out of memory", c->key);
                goto out;
            }
            memcpy(pb[p], g.combo, g.ncombo);
            pn[p] = g.ncombo;
        }
        distinct_groups(pb, pn, groups[wi], sizeof groups[wi]);
        for (int p = 0; p < 4; p++) {
            free(pb[p]);
            pb[p] = NULL;
        }
    }
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%d", DSV4Q_GOLDEN_FORMAT);
    if (dsv4q_st_writer_meta(g.w, "dsv4q.golden.case", c->key) || dsv4q_st_writer_meta(g.w, "dsv4q.golden.inputs", c->inputs) ||
        dsv4q_st_writer_meta(g.w, "dsv4q.golden.format", fmt) ||
        dsv4q_st_writer_meta(g.w, "dsv4q.golden.distinct.f32", groups[0]) ||
        dsv4q_st_writer_meta(g.w, "dsv4q.golden.distinct.f64", groups[1]) ||
        dsv4q_st_writer_meta(g.w, "producer", "dsv4q golden") ||
        (g.meta[0][0] && dsv4q_st_writer_meta(g.w, g.meta[0][0], g.meta[0][1])) ||
        (g.meta[1][0] && dsv4q_st_writer_meta(g.w, g.meta[1][0], g.meta[1][1])) ||
        (g.meta[2][0] && dsv4q_st_writer_meta(g.w, g.meta[2][0], g.meta[2][1])) ||
        (g.meta[3][0] && dsv4q_st_writer_meta(g.w, g.meta[3][0], g.meta[3][1]))) {
        dsv4q_errf(err, errlen, "%s: out of memory (metadata)", c->key);
        goto out;
    }
    if (distinct) snprintf(distinct, dlen, "f32: %s; f64: %s", groups[0], groups[1]);
    if (nvalues) *nvalues = g.nvalues;
    rc = dsv4q_st_writer_to_buffer(g.w, buf, len, err, errlen);
    g.w = NULL;   /* freed by to_buffer */
out:
    arena_free(&g);
    if (c->teardown) c->teardown(&g);
    for (int p = 0; p < 4; p++) free(pb[p]);
    free(g.combo);
    if (g.w) dsv4q_st_writer_free(g.w);
    return rc;
}

int dsv4q_golden_compute(const char *key, uint8_t **buf, size_t *len, char *distinct, size_t dlen, char *err,
                         size_t errlen)
{
    const gcase *c = dsv4q_golden_case(key ? key : "");
    if (!c) return dsv4q_errf(err, errlen, "unknown golden case '%s'", key ? key : "(null)");
    return dsv4q_golden_build(c, NULL, buf, len, distinct, dlen, NULL, err, errlen);
}
