/*
 * safetensors_write.c - the deterministic safetensors writer (dsv4q_st_writer_*):
 * the one way dsv4q produces a safetensors file or image (synthetic
 * checkpoints, captures, `run --out`, golden payloads).
 *
 * Owns the layout of S6 (io/safetensors.h): same tensors and metadata give
 * the same bytes, so a file can be pinned by its SHA-256; and S7: the file
 * is published through base/file.h's atomic writer, never half-written.
 * Refuses: a tensor whose byte count does not match its dtype and shape,
 * an empty, reserved ("__metadata__") or non-UTF-8 name, a duplicate name:
 * what the reader would refuse, so every file written here reads back.
 */
#include "io/safetensors.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/util.h"

typedef struct stw_ent {
    char *name;
    dsv4q_dtype dt;
    int ndim;
    int64_t shape[DSV4Q_ST_MAX_DIMS];
    uint8_t *data;
    size_t nbytes;
    uint64_t begin;        /* filled by the layout */
} stw_ent;

struct dsv4q_st_writer {
    stw_ent *v;
    size_t n, cap;
    json_t *meta;          /* object of strings */
};

dsv4q_st_writer *dsv4q_st_writer_new(void)
{
    dsv4q_st_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->meta = json_object();
    if (!w->meta) {
        free(w);
        return NULL;
    }
    return w;
}

void dsv4q_st_writer_free(dsv4q_st_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].name);
        free(w->v[i].data);
    }
    free(w->v);
    json_decref(w->meta);
    free(w);
}

/* An I8 tensor given with its logical E2M1 shape [.., k] and ceil(numel/2)
 * packed bytes is stored with the byte shape [.., k/2] (the layout DeepSeek
 * ships), so the file obeys S2 and reads back as bytes. */
int dsv4q_st_writer_add(dsv4q_st_writer *w, const char *name, dsv4q_dtype dt, int ndim, const int64_t *shape, const void *data,
                  size_t nbytes, char *err, size_t errlen)
{
    if (!w) return dsv4q_errf(err, errlen, "safetensors writer: NULL writer");
    if (!name || !name[0]) return dsv4q_errf(err, errlen, "safetensors writer: empty tensor name");
    if (strcmp(name, "__metadata__") == 0)
        return dsv4q_errf(err, errlen, "safetensors writer: tensor name '__metadata__' is reserved");
    json_t *probe = json_string(name);
    if (!probe) return dsv4q_errf(err, errlen, "safetensors writer: tensor name is not valid UTF-8");
    json_decref(probe);
    size_t esz = dsv4q_dtype_size(dt);
    if (dt == DSV4Q_DT_INVALID || esz == 0)
        return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': invalid dtype %d", name, (int)dt);
    if (ndim < 0 || ndim > DSV4Q_ST_MAX_DIMS || (ndim > 0 && !shape))
        return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': ndim %d out of [0, %d]", name, ndim,
                          DSV4Q_ST_MAX_DIMS);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': negative dimension %lld at axis %d", name,
                              (long long)shape[d], d);
        if (shape[d] != 0 && numel > INT64_MAX / shape[d])
            return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': element count overflows", name);
        numel *= shape[d];
    }
    if (nbytes > 0 && !data) return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': NULL data", name);

    int64_t sh[DSV4Q_ST_MAX_DIMS];
    for (int d = 0; d < ndim; d++) sh[d] = shape[d];
    if ((uint64_t)numel > SIZE_MAX / esz)
        return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': byte size overflows", name);
    size_t want = (size_t)numel * esz;
    if (nbytes != want) {
        size_t packed = ((size_t)numel + 1) / 2;
        if (dt == DSV4Q_DT_I8 && nbytes == packed && ndim >= 1 && sh[ndim - 1] % 2 == 0) {
            sh[ndim - 1] /= 2;   /* logical E2M1 shape -> byte shape */
        } else {
            return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': %zu bytes given, shape x %s needs %zu",
                              name, nbytes, dsv4q_dtype_name(dt), want);
        }
    }

    if (w->n == w->cap) {
        size_t nc = w->cap ? 2 * w->cap : 32;
        stw_ent *nv = realloc(w->v, nc * sizeof *nv);
        if (!nv) return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': out of memory", name);
        w->v = nv;
        w->cap = nc;
    }
    stw_ent *e = &w->v[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->data = nbytes ? malloc(nbytes) : NULL;
    if (!e->name || (nbytes && !e->data)) {
        free(e->name);
        free(e->data);
        return dsv4q_errf(err, errlen, "safetensors writer: tensor '%s': out of memory", name);
    }
    if (nbytes) memcpy(e->data, data, nbytes);
    e->dt = dt;
    e->ndim = ndim;
    for (int d = 0; d < ndim; d++) e->shape[d] = sh[d];
    e->nbytes = nbytes;
    w->n++;
    return 0;
}

int dsv4q_st_writer_meta(dsv4q_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value) return -1;
    json_t *s = json_string(value);
    if (!s) return -1;
    return json_object_set_new(w->meta, key, s) == 0 ? 0 : -1;
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_ent_name(const void *pa, const void *pb)
{
    const stw_ent *a = *(const stw_ent *const *)pa, *b = *(const stw_ent *const *)pb;
    return strcmp(a->name, b->name);
}

static int cmp_ent_layout(const void *pa, const void *pb)
{
    const stw_ent *a = *(const stw_ent *const *)pa, *b = *(const stw_ent *const *)pb;
    size_t sa = dsv4q_dtype_size(a->dt), sb = dsv4q_dtype_size(b->dt);
    if (sa != sb) return sa > sb ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The layout of S6. On success *hdr is the padded header text (hlen bytes,
 * malloc'd), *order the entries in data order (malloc'd), *dlen the data
 * section size. */
static int stw_layout(dsv4q_st_writer *w, char **hdr, size_t *hlen, stw_ent ***order, uint64_t *dlen, const char *path,
                      char *err, size_t errlen)
{
    *hdr = NULL;
    *order = NULL;
    stw_ent **byname = malloc((w->n + 1) * sizeof *byname);
    stw_ent **bylay = malloc((w->n + 1) * sizeof *bylay);
    json_t *root = json_object();
    char *text = NULL;
    int rc = -1;
    if (!byname || !bylay || !root) {
        dsv4q_errf(err, errlen, "safetensors writer: %s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < w->n; i++) byname[i] = bylay[i] = &w->v[i];
    qsort(byname, w->n, sizeof *byname, cmp_ent_name);
    for (size_t i = 1; i < w->n; i++) {
        if (strcmp(byname[i - 1]->name, byname[i]->name) == 0) {
            dsv4q_errf(err, errlen, "safetensors writer: %s: duplicate tensor name '%s'", path, byname[i]->name);
            goto done;
        }
    }
    qsort(bylay, w->n, sizeof *bylay, cmp_ent_layout);
    uint64_t pos = 0;
    for (size_t i = 0; i < w->n; i++) {
        assert(pos % dsv4q_dtype_size(bylay[i]->dt) == 0);   /* S6: aligned to its element size */
        bylay[i]->begin = pos;
        pos += bylay[i]->nbytes;
    }
    int bad = 0;
    if (json_object_size(w->meta) > 0) {
        /* metadata keys in strcmp order too, whatever order they were set in */
        size_t nm = json_object_size(w->meta), k = 0;
        const char **mk = malloc(nm * sizeof *mk);
        json_t *meta = json_object();
        const char *key;
        json_t *val;
        if (!mk || !meta) {
            free((void *)mk);
            json_decref(meta);
            dsv4q_errf(err, errlen, "safetensors writer: %s: out of memory", path);
            goto done;
        }
        json_object_foreach(w->meta, key, val) mk[k++] = key;
        qsort(mk, nm, sizeof *mk, cmp_str_ptr);
        for (k = 0; k < nm; k++) bad |= json_object_set(meta, mk[k], json_object_get(w->meta, mk[k]));
        bad |= json_object_set_new(root, "__metadata__", meta);
        free((void *)mk);
    }
    for (size_t i = 0; i < w->n && !bad; i++) {
        const stw_ent *e = byname[i];
        json_t *ent = json_object(), *shp = json_array(), *off = json_array();
        if (!ent || !shp || !off) {
            json_decref(ent);
            json_decref(shp);
            json_decref(off);
            bad = 1;
            break;
        }
        for (int d = 0; d < e->ndim; d++) bad |= json_array_append_new(shp, json_integer((json_int_t)e->shape[d]));
        bad |= json_array_append_new(off, json_integer((json_int_t)e->begin));
        bad |= json_array_append_new(off, json_integer((json_int_t)(e->begin + e->nbytes)));
        bad |= json_object_set_new(ent, "dtype", json_string(dsv4q_dtype_name(e->dt)));
        bad |= json_object_set_new(ent, "shape", shp);
        bad |= json_object_set_new(ent, "data_offsets", off);
        bad |= json_object_set_new(root, e->name, ent);
    }
    if (bad) {
        dsv4q_errf(err, errlen, "safetensors writer: %s: out of memory building the header", path);
        goto done;
    }
    text = json_dumps(root, JSON_COMPACT);
    if (!text) {
        dsv4q_errf(err, errlen, "safetensors writer: %s: out of memory serialising the header", path);
        goto done;
    }
    size_t n = strlen(text);
    size_t pad = (8 - (8 + n) % 8) % 8;
    char *padded = realloc(text, n + pad + 1);
    if (!padded) {
        dsv4q_errf(err, errlen, "safetensors writer: %s: out of memory", path);
        goto done;
    }
    text = padded;
    memset(text + n, ' ', pad);
    text[n + pad] = '\0';
    *hdr = text;
    text = NULL;
    *hlen = n + pad;
    assert((8 + *hlen) % 8 == 0);   /* S6: the data section starts at a multiple of 8 */
    *order = bylay;
    bylay = NULL;
    *dlen = pos;
    rc = 0;
done:
    free(text);
    free(byname);
    free(bylay);
    json_decref(root);
    return rc;
}

static void le64(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(v >> (8 * i));
}

int dsv4q_st_writer_to_buffer(dsv4q_st_writer *w, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    *buf = NULL;
    *len = 0;
    if (!w) return dsv4q_errf(err, errlen, "safetensors writer: NULL writer");
    char *hdr;
    size_t hlen;
    stw_ent **order;
    uint64_t dlen;
    if (stw_layout(w, &hdr, &hlen, &order, &dlen, "<buffer>", err, errlen) != 0) {
        dsv4q_st_writer_free(w);
        return -1;
    }
    int rc = -1;
    size_t total = 8 + hlen + (size_t)dlen;
    uint8_t *b = malloc(total ? total : 1);
    if (!b) {
        dsv4q_errf(err, errlen, "safetensors writer: <buffer>: out of memory (%zu bytes)", total);
        goto done;
    }
    le64(b, hlen);
    memcpy(b + 8, hdr, hlen);
    for (size_t i = 0; i < w->n; i++)
        if (order[i]->nbytes) memcpy(b + 8 + hlen + order[i]->begin, order[i]->data, order[i]->nbytes);
    *buf = b;
    *len = total;
    rc = 0;
done:
    free(hdr);
    free(order);
    dsv4q_st_writer_free(w);
    return rc;
}

int dsv4q_st_writer_write(dsv4q_st_writer *w, const char *path, char *err, size_t errlen)
{
    if (!w) return dsv4q_errf(err, errlen, "safetensors writer: NULL writer");
    if (!path || !path[0]) {
        dsv4q_st_writer_free(w);
        return dsv4q_errf(err, errlen, "safetensors writer: empty path");
    }
    char *hdr = NULL;
    size_t hlen;
    stw_ent **order = NULL;
    uint64_t dlen;
    int rc = -1;
    char ferr[600];
    dsv4q_aout out;
    if (stw_layout(w, &hdr, &hlen, &order, &dlen, path, err, errlen) != 0) goto done;
    /* S7 through base/file.h: a temporary beside path, fsync, rename. "-"
     * is a file named "-" here, never standard output (binary data). */
    FILE *f = dsv4q_aout_open(&out, strcmp(path, "-") ? path : "./-", ferr, sizeof ferr);
    if (!f) {
        dsv4q_errf(err, errlen, "safetensors writer: %s", ferr);
        goto done;
    }
    uint8_t lb[8];
    le64(lb, hlen);
    int bad = fwrite(lb, 1, 8, f) != 8 || fwrite(hdr, 1, hlen, f) != hlen;
    for (size_t i = 0; i < w->n && !bad; i++)
        if (order[i]->nbytes && fwrite(order[i]->data, 1, order[i]->nbytes, f) != order[i]->nbytes) bad = 1;
    if (bad) {
        int e = errno;
        dsv4q_aout_abort(&out);
        dsv4q_errf(err, errlen, "safetensors writer: %s: cannot write the output: %s (nothing written)", path,
                   strerror(e));
        goto done;
    }
    if (dsv4q_aout_commit(&out, ferr, sizeof ferr) != 0) {
        dsv4q_errf(err, errlen, "safetensors writer: %s", ferr);
        goto done;
    }
    rc = 0;
done:
    free(hdr);
    free(order);
    dsv4q_st_writer_free(w);
    return rc;
}
