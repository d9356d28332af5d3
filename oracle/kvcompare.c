/*
 * kvcompare.c - an engine's cache bytes against the oracle's cache rows
 * (dsv4q_kvcache_compare, kvlayout.h): the first differing slot, field and
 * element, and the bug classes that ship (issue 25: an indexer cache written
 * block-planar and read token-interleaved, a packed KV read by flat token
 * id, slot 0 overwritten, a scale in the wrong place) named as such, so a
 * report says "slot 0 overwritten" and not "attention is off".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/kvlayout.h"

/* Bitwise-meaningful equality: NaN equals NaN (a NaN code is a stored byte). */
static int same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static int rows_same(const double *a, const double *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!same(a[i], b[i])) return 0;
    return 1;
}

/* Engine rows (val, scale) of slot t against reference slot u. */
static int slot_same(const dsv4q_kvgeom *g, const double *ev, const double *es, const double *rv, const double *rs,
                     int64_t t, int64_t u)
{
    if (!rows_same(ev + t * g->n_val, rv + u * g->n_val, g->n_val)) return 0;
    return !rs || rows_same(es + t * g->n_scale, rs + u * g->n_scale, g->n_scale);
}

static const char *field_of(const dsv4q_kvgeom *g, int i, int *idx)
{
    if (!g->l->planar) {
        *idx = i;
        return "k";
    }
    const int nope = g->n_val - g->n_rope;
    *idx = i < nope ? i : i - nope;
    return i < nope ? "nope" : "rope";
}

/* The group k of slot t holds the reference's codes under another scale:
 * got/scale_got == want/scale_want for every element of the group. */
static int scale_only(const dsv4q_kvgeom *g, const double *ev, const double *es, const double *rv, const double *rs,
                      int64_t t, int k)
{
    const int grp = g->l->group, nope = g->n_val - g->n_rope;
    const double sg = es[t * g->n_scale + k], sw = rs[t * g->n_scale + k];
    if (same(sg, sw) || !(sg != 0) || !(sw != 0)) return 0;
    for (int i = k * grp; i < (k + 1) * grp && i < nope; i++)
        if (!same(ev[t * g->n_val + i] / sg, rv[t * g->n_val + i] / sw)) return 0;
    return 1;
}

static void diagnose(const dsv4q_kvgeom *g, const uint8_t *bytes, size_t nbytes, const double *ev, const double *es,
                     const double *rv, const double *rs, int64_t ntok, dsv4q_kvdiff *d, double *tv, double *ts)
{
    /* planar/interleaved swap: the bytes decode to the reference when read
     * as adjacent per-token records */
    if (g->l->planar && (size_t)ntok * g->token_bytes <= nbytes) {
        int64_t t = 0;
        for (; t < ntok; t++) {
            dsv4q_kvcache_decode(g, bytes, t, 1, tv, ts);
            if (!rows_same(tv, rv + t * g->n_val, g->n_val) || (rs && !rows_same(ts, rs + t * g->n_scale, g->n_scale)))
                break;
        }
        if (t == ntok) {
            snprintf(d->diagnosis, sizeof d->diagnosis,
                     "planar/interleaved swap: the bytes hold token-interleaved records of %zu B; %s is block-planar "
                     "(%lld tokens' data, then their scales)",
                     g->token_bytes, g->l->name, (long long)g->block_size);
            return;
        }
    }
    /* slot 0 overwritten: nothing else differs */
    if (d->slot == 0 && d->ndiff == 1) {
        int64_t j = 1;
        while (j < ntok && !slot_same(g, ev, es, rv, rs, 0, j)) j++;
        if (j < ntok)
            snprintf(d->diagnosis, sizeof d->diagnosis, "slot 0 overwritten: it holds token %lld's row", (long long)j);
        else snprintf(d->diagnosis, sizeof d->diagnosis, "slot 0 overwritten: only slot 0 differs");
        return;
    }
    /* shift: slot t holds token t + k for every overlapping t */
    const int64_t kmax = g->block_size > 64 ? g->block_size : 64;
    for (int64_t a = 1; a <= kmax && a < ntok; a++)
        for (int sgn = 1; sgn >= -1; sgn -= 2) {
            const int64_t k = a * sgn;
            int64_t t = k > 0 ? 0 : -k, end = k > 0 ? ntok - k : ntok;
            for (; t < end; t++)
                if (!slot_same(g, ev, es, rv, rs, t, t + k)) break;
            if (t == end && end - (k > 0 ? 0 : -k) >= 1) {
                snprintf(d->diagnosis, sizeof d->diagnosis,
                         "tokens shifted by %+lld: slot t holds token t%+lld (a flat-id or offset read)", (long long)k,
                         (long long)k);
                return;
            }
        }
    /* scale in the wrong place: the codes agree, the group's scale does not */
    if (rs && !strcmp(d->field, "scale") && g->l->group && scale_only(g, ev, es, rv, rs, d->slot, d->index))
        snprintf(d->diagnosis, sizeof d->diagnosis,
                 "scale only: slot %lld group %d holds the reference's codes under scale %.17g instead of %.17g",
                 (long long)d->slot, d->index, d->got, d->want);
}

int dsv4q_kvcache_compare(const dsv4q_kvgeom *g, const uint8_t *bytes, size_t nbytes, const double *ref_val,
                          const double *ref_scale, int64_t ntok, dsv4q_kvdiff *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->slot = -1;
    d->field = "";
    const int64_t have = dsv4q_kvcache_slots(g, nbytes, "engine cache", err, errlen);
    if (have < 0) return -1;
    if (ntok <= 0 || ntok > have) {
        snprintf(err, errlen, "engine cache (%s): holds %lld slot(s), the reference has %lld", g->l->name,
                 (long long)have, (long long)ntok);
        return -1;
    }
    const int ns = g->n_scale ? g->n_scale : 1;
    double *ev = malloc(sizeof(double) * (size_t)ntok * (size_t)g->n_val);
    double *es = malloc(sizeof(double) * (size_t)ntok * (size_t)ns);
    double *tv = malloc(sizeof(double) * (size_t)g->n_val), *ts = malloc(sizeof(double) * (size_t)ns);
    if (!ev || !es || !tv || !ts) {
        free(ev), free(es), free(tv), free(ts);
        snprintf(err, errlen, "engine cache (%s): out of memory for %lld rows", g->l->name, (long long)ntok);
        return -1;
    }
    const double *rs = g->n_scale ? ref_scale : NULL;
    for (int64_t t = 0; t < ntok; t++) {
        dsv4q_kvcache_decode(g, bytes, t, 0, ev + t * g->n_val, es + t * ns);
        int bad = 0;
        for (int k = 0; rs && k < g->n_scale && !bad; k++)
            if (!same(es[t * ns + k], rs[t * g->n_scale + k])) {
                bad = 1;
                if (!d->differ) {
                    d->field = "scale", d->index = k;
                    d->got = es[t * ns + k], d->want = rs[t * g->n_scale + k];
                }
            }
        for (int i = 0; i < g->n_val && !bad; i++)
            if (!same(ev[t * g->n_val + i], ref_val[t * g->n_val + i])) {
                bad = 1;
                if (!d->differ) {
                    d->field = field_of(g, i, &d->index);
                    d->got = ev[t * g->n_val + i], d->want = ref_val[t * g->n_val + i];
                }
            }
        if (bad) {
            if (!d->differ) d->slot = t;
            d->differ = 1;
            d->ndiff++;
        }
    }
    if (d->differ) diagnose(g, bytes, nbytes, ev, g->n_scale ? es : NULL, ref_val, rs, ntok, d, tv, ts);
    free(ev), free(es), free(tv), free(ts);
    return 0;
}
