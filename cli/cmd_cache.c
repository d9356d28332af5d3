/*
 * cmd_cache.c - `dsv4q cache decode FILE --layout NAME`: an engine's cache
 * bytes decoded exactly to per-slot rows (oracle/kvlayout.h), and `dsv4q
 * cache compare FILE --layout NAME --ref VALS.f64`: those bytes against the
 * oracle's rows (dsv4q_kvcache_compare), and `dsv4q cache list`: the layout
 * catalog (docs/caches.md), and `dsv4q cache ds4 FILE`: a ds4 KV checkpoint
 * file (io/ds4_session.h).
 *
 * Options: the command table (cli/cmdtab.c, `dsv4q help cache`), read from
 * dsv4q_cache_args.
 *
 * Output: without --out, a '#' line naming the file, layout, slots and
 * geometry, then per slot one "slot S scale ..." line (when the layout has
 * scales) and one "slot S val ..." line, shortest round-trip f64 digits
 * (%.17g). With --out: the values as raw little-endian binary64, slot-major
 * (slots x n_val), and with --scale-out the scales (slots x n_scale).
 * Every check (layout, file size, slot count) runs before an output is
 * opened and a failed write removes the outputs, so an error never leaves a
 * partial file. Errors exit 2 with one line naming the file, the layout and
 * the expected size.
 *
 * compare prints one line: "FILE (LAYOUT): N slot(s) identical" (exit 0),
 * or the first differing slot, field[element], the engine's and the
 * oracle's values, how many slots differ and the bug class when one is
 * recognised (exit 1). The reference files must hold whole rows
 * (8 x n_val bytes per slot; scales 8 x n_scale), at most as many slots as
 * the cache; else exit 2 naming the file and the expected size.
 *
 * ds4 prints a '#' line with the file's geometry, one line per layer (ratio
 * and row counts), the findings (row counts that are not tokens / ratio,
 * non-finite values: exit 1) and whether every row value is an F16 value
 * (ds4's CPU path stores them so; information, not a verdict). With
 * --layer: that layer's rows of --part, as "row R val ..." lines or (with
 * --out) raw f64. A malformed file exits 2 with one line naming the field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "io/ds4_session.h"
#include "oracle/kvlayout.h"

static int list(void)
{
    int n;
    const dsv4q_kvlayout *l = dsv4q_kvlayout_all(&n);
    printf("%-20s %-10s %-32s %-12s %s\n", "layout", "engine", "cache", "B/token", "fields");
    for (int i = 0; i < n; i++) {
        char bpt[32];
        if (l[i].planar) snprintf(bpt, sizeof bpt, "%d", l[i].data_bytes + l[i].scale_bytes);
        else snprintf(bpt, sizeof bpt, "%s", l[i].group ? "34*width/32" : "2*width");
        printf("%-20s %-10s %-32s %-12s %s\n", l[i].name, l[i].engine, l[i].cache, bpt, l[i].fields);
    }
    return 0;
}

/* The whole file into *buf (*len bytes); NULL buf for an empty file. */
static int slurp(const char *path, unsigned char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    *buf = NULL;
    *len = 0;
    if (!f) return -1;
    size_t cap = 0;
    for (;;) {
        if (*len == cap) {
            const size_t nc = cap ? cap * 2 : 65536;
            unsigned char *nb = realloc(*buf, nc);
            if (!nb) break;
            *buf = nb, cap = nc;
        }
        const size_t got = fread(*buf + *len, 1, cap - *len, f);
        *len += got;
        if (got == 0) break;
    }
    const int bad = ferror(f) || (*len == cap && cap);
    fclose(f);
    if (bad) {
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

static int write_f64(FILE *f, const double *v, size_t n) { return fwrite(v, sizeof(double), n, f) == n ? 0 : -1; }

static int decode(const dsv4q_cache_args *o, const char *path)
{
    char err[512];
    dsv4q_kvgeom g;
    if (dsv4q_kvgeom_init(&g, o->layout, o->block_size, o->width, err, sizeof err)) {
        fprintf(stderr, "dsv4q cache: %s: %s\n", path, err);
        return 2;
    }
    if (o->scale_out && !o->c.out) {
        fprintf(stderr, "dsv4q cache: --scale-out needs --out (the values file)\n");
        return 2;
    }
    unsigned char *buf;
    size_t len;
    if (slurp(path, &buf, &len)) {
        fprintf(stderr, "dsv4q cache: cannot read %s\n", path);
        return 2;
    }
    int64_t n = dsv4q_kvcache_slots(&g, len, path, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "dsv4q cache: %s\n", err);
        free(buf);
        return 2;
    }
    if (o->slots > n) {
        fprintf(stderr, "dsv4q cache: %s: --slots %ld, the %s cache holds %lld slot(s) (%zu B)\n", path, o->slots,
                g.l->name, (long long)n, len);
        free(buf);
        return 2;
    }
    if (o->slots) n = o->slots;
    const int ns = g.n_scale ? g.n_scale : 1;
    double *v = malloc(sizeof(double) * (size_t)g.n_val), *s = malloc(sizeof(double) * (size_t)ns);
    FILE *fv = NULL, *fs = NULL;
    int rc = 0;
    if (!v || !s) {
        fprintf(stderr, "dsv4q cache: out of memory\n");
        rc = 2;
    } else if (o->c.out && !(fv = fopen(o->c.out, "wb"))) {
        fprintf(stderr, "dsv4q cache: cannot write %s\n", o->c.out);
        rc = 2;
    } else if (o->scale_out && !(fs = fopen(o->scale_out, "wb"))) {
        fprintf(stderr, "dsv4q cache: cannot write %s\n", o->scale_out);
        rc = 2;
    }
    if (!rc && !fv)
        printf("# %s layout=%s slots=%lld block_size=%lld block_stride=%zu token_bytes=%zu n_val=%d n_rope=%d "
               "n_scale=%d\n",
               path, g.l->name, (long long)n, (long long)g.block_size, g.block_stride, g.token_bytes, g.n_val, g.n_rope,
               g.n_scale);
    for (int64_t t = 0; t < n && !rc; t++) {
        dsv4q_kvcache_decode(&g, buf, t, 0, v, s);
        if (fv) {
            if (write_f64(fv, v, (size_t)g.n_val) || (fs && g.n_scale && write_f64(fs, s, (size_t)g.n_scale))) {
                fprintf(stderr, "dsv4q cache: %s: write failed\n", o->c.out);
                rc = 2;
            }
            continue;
        }
        if (g.n_scale) {
            printf("slot %lld scale", (long long)t);
            for (int k = 0; k < g.n_scale; k++) printf(" %.17g", s[k]);
            printf("\n");
        }
        printf("slot %lld val", (long long)t);
        for (int i = 0; i < g.n_val; i++) printf(" %.17g", v[i]);
        printf("\n");
    }
    if (fv && fclose(fv) != 0 && !rc) {
        fprintf(stderr, "dsv4q cache: %s: write failed\n", o->c.out);
        rc = 2;
    }
    if (fs && fclose(fs) != 0 && !rc) {
        fprintf(stderr, "dsv4q cache: %s: write failed\n", o->scale_out);
        rc = 2;
    }
    if (rc && fv) unlink(o->c.out);
    if (rc && fs) unlink(o->scale_out);
    free(v);
    free(s);
    free(buf);
    return rc;
}

/* A raw little-endian f64 file of whole rows of n into *v (*rows rows). */
static int read_rows(const char *path, int n, double **v, int64_t *rows, char *err, size_t errlen)
{
    unsigned char *buf;
    size_t len;
    *v = NULL;
    if (slurp(path, &buf, &len)) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    const size_t row = sizeof(double) * (size_t)n;
    if (len == 0 || len % row) {
        snprintf(err, errlen, "%s: %zu bytes, expected a multiple of %zu (rows of %d little-endian f64)", path, len,
                 row, n);
        free(buf);
        return -1;
    }
    *v = (double *)(void *)buf; /* malloc'd memory is aligned for double; little-endian hosts only (as the ABI) */
    *rows = (int64_t)(len / row);
    return 0;
}

static int compare(const dsv4q_cache_args *o, const char *path)
{
    char err[512];
    dsv4q_kvgeom g;
    if (dsv4q_kvgeom_init(&g, o->layout, o->block_size, o->width, err, sizeof err)) {
        fprintf(stderr, "dsv4q cache: %s: %s\n", path, err);
        return 2;
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    double *rv = NULL, *rs = NULL;
    int64_t nv = 0, nsc = 0;
    int rc = 2;
    if (slurp(path, &buf, &len)) snprintf(err, sizeof err, "cannot read %s", path);
    else if (dsv4q_kvcache_slots(&g, len, path, err, sizeof err) < 0) {
    } else if (read_rows(o->ref, g.n_val, &rv, &nv, err, sizeof err)) {
    } else if (o->ref_scale && !g.n_scale)
        snprintf(err, sizeof err, "%s: layout %s has no scales", o->ref_scale, g.l->name);
    else if (o->ref_scale && read_rows(o->ref_scale, g.n_scale, &rs, &nsc, err, sizeof err)) {
    } else if (rs && nsc != nv)
        snprintf(err, sizeof err, "%s: %lld row(s) of scales, %s has %lld row(s) of values", o->ref_scale,
                 (long long)nsc, o->ref, (long long)nv);
    else {
        dsv4q_kvdiff d;
        if (dsv4q_kvcache_compare(&g, buf, len, rv, rs, nv, &d, err, sizeof err) == 0) {
            if (!d.differ) printf("%s (%s): %lld slot(s) identical\n", path, g.l->name, (long long)nv);
            else
                printf("%s (%s): slot %lld %s[%d]: engine %.17g, oracle %.17g; %lld of %lld slot(s) differ%s%s\n", path,
                       g.l->name, (long long)d.slot, d.field, d.index, d.got, d.want, (long long)d.ndiff, (long long)nv,
                       d.diagnosis[0] ? "; " : "", d.diagnosis);
            rc = d.differ ? 1 : 0;
        }
    }
    if (rc == 2) fprintf(stderr, "dsv4q cache: %s\n", err);
    free(buf);
    free(rv);
    free(rs);
    return rc;
}

static int ds4_rows(const dsv4q_ds4_session *s, const dsv4q_cache_args *o, const char *path)
{
    static const char *const part[] = {"raw", "comp", "index"};
    uint32_t rows, w;
    size_t off;
    if (o->layer >= (long)s->n_layer || dsv4q_ds4_part(s, (uint32_t)o->layer, o->part, &rows, &w, &off)) {
        fprintf(stderr, "dsv4q cache: %s: layer %ld has no %s rows (%u layers; ratio %u)\n", path, o->layer,
                part[o->part], s->n_layer, o->layer < (long)s->n_layer ? s->layer[o->layer].ratio : 0);
        return 2;
    }
    FILE *f = o->c.out ? fopen(o->c.out, "wb") : stdout;
    if (!f) {
        fprintf(stderr, "dsv4q cache: cannot write %s\n", o->c.out);
        return 2;
    }
    int rc = 0;
    for (uint64_t r = 0; r < rows && !rc; r++) {
        if (!o->c.out) printf("row %llu val", (unsigned long long)r);
        for (uint64_t i = 0; i < w; i++) {
            const double v = dsv4q_ds4_value(s, off, r * w + i);
            if (o->c.out) rc = write_f64(f, &v, 1);
            else printf(" %.17g", v);
        }
        if (!o->c.out) printf("\n");
    }
    if (o->c.out && (fclose(f) != 0 || rc)) {
        fprintf(stderr, "dsv4q cache: %s: write failed\n", o->c.out);
        unlink(o->c.out);
        return 2;
    }
    return 0;
}

static int ds4(const dsv4q_cache_args *o, const char *path)
{
    char err[512];
    unsigned char *buf;
    size_t len;
    if (o->c.out && o->layer < 0) {
        fprintf(stderr, "dsv4q cache: --out needs --layer (the rows to write)\n");
        return 2;
    }
    if (slurp(path, &buf, &len)) {
        fprintf(stderr, "dsv4q cache: cannot read %s\n", path);
        return 2;
    }
    dsv4q_ds4_session s;
    if (dsv4q_ds4_session_parse(&s, buf, len, path, err, sizeof err)) {
        fprintf(stderr, "dsv4q cache: %s\n", err);
        free(buf);
        return 2;
    }
    int rc;
    if (o->layer >= 0) {
        rc = ds4_rows(&s, o, path);
    } else {
        printf("# %s: ds4 %s, %u tokens, ctx %u, %u layers, head_dim %u, indexer head_dim %u, vocab %u, "
               "%u raw rows (raw cap %u, window %u)\n",
               path, s.kvc ? "KVC file (session payload v1)" : "session payload v1", s.n_tokens, s.ctx, s.n_layer,
               s.head_dim, s.index_dim, s.vocab, s.raw_live, s.raw_cap, s.raw_window);
        for (uint32_t l = 0; l < s.n_layer; l++) {
            const dsv4q_ds4_layer *y = &s.layer[l];
            printf("layer %u ratio %u: raw %u", l, y->ratio, y->n_raw);
            if (y->ratio) printf(", compressed %u", y->n_comp);
            if (y->ratio == 4) printf(", indexer %u", y->n_index);
            printf("\n");
        }
        char find[4096], first[160];
        uint64_t nf;
        const long n = dsv4q_ds4_session_check(&s, find, sizeof find, &nf, first, sizeof first);
        if (nf) printf("values: %llu are not F16 values, the first %s\n", (unsigned long long)nf, first);
        else printf("values: every row value is an F16 value (as ds4's CPU path stores them)\n");
        if (n) printf("FINDINGS: %ld\n%s", n, find);
        else printf("consistent: compressed and indexer rows = tokens / ratio, every value finite\n");
        rc = n ? 1 : 0;
    }
    dsv4q_ds4_session_free(&s);
    free(buf);
    return rc;
}

int dsv4q_cmd_cache(int argc, char **argv)
{
    dsv4q_cache_args o;
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    if (o.c.action == DSV4Q_CACHE_LIST) return list();
    if (o.c.action == DSV4Q_CACHE_COMPARE) return compare(&o, o.c.pos[0]);
    if (o.c.action == DSV4Q_CACHE_DS4) return ds4(&o, o.c.pos[0]);
    return decode(&o, o.c.pos[0]);
}
