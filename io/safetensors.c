/*
 * safetensors.c - the strict reader (mmap) of the safetensors container;
 * its invariants S1..S7 are io/safetensors.h's, the writer is
 * io/safetensors_write.c.
 *
 * Owns: mapping checkpoint files, proving their headers well-formed, the
 * sorted tensor table every loader reads, and sharded checkpoints
 * (model.safetensors.index.json).
 * Refuses: to hand out a pointer it has not bounds-checked. Every byte range
 * is checked against the mapped size before any byte of it is touched, so a
 * corrupt or hostile file yields -1 and a message naming the file and the
 * tensor, never a read past the mapping. It also refuses anything the
 * reference implementation (the Rust `safetensors` crate) refuses: holes or
 * trailing bytes in the data section, overlapping ranges, header length past
 * the file, size != numel * dtype size. An oracle that loads a file the
 * ecosystem would reject (or vice versa) qualifies nothing.
 *
 * Lifecycle of a reader:
 *     open -> [map files] -> [parse + validate headers] -> sorted table
 *          \-> any failure: unmap everything, *out = NULL, return -1
 *     close -> unmap, free (data pointers die here)
 *
 * A file truncated by another process while mapped still raises SIGBUS on
 * access; no user-space reader can prevent that, and we do not try.
 */
#include "base/file.h"
#include "io/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/util.h"

#define ST_MAX_HEADER   100000000u   /* the crate's MAX_HEADER_SIZE */
#define ST_INDEX_NAME   "model.safetensors.index.json"
#define ST_SUFFIX       ".safetensors"

/* ------------------------------------------------------------------------ */
/* reader state                                                              */

typedef struct st_file {
    char *path;            /* as opened (or the buffer's origin) */
    const uint8_t *base;   /* the whole image */
    size_t size;
    int mapped;            /* 1: munmap(base, size) at close */
    json_t *meta;          /* "__metadata__" object, or NULL */
} st_file;

struct dsv4q_st {
    st_file *files;
    size_t nfiles, capfiles;
    dsv4q_st_tensor *t;    /* sorted by name after open (S4) */
    size_t n, cap;
};

/* Offsets of a tensor inside its file's data section, kept while a file's
 * header is checked for S3. */
typedef struct st_range {
    uint64_t begin, end;
    const char *name;
} st_range;

static dsv4q_st *st_new(void)
{
    return calloc(1, sizeof(dsv4q_st));
}

void dsv4q_st_close(dsv4q_st *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        free((char *)st->t[i].name);
    for (size_t i = 0; i < st->nfiles; i++) {
        st_file *f = &st->files[i];
        if (f->mapped && f->base)
            munmap((void *)f->base, f->size);
        json_decref(f->meta);
        free(f->path);
    }
    free(st->t);
    free(st->files);
    free(st);
}

/* Append a file slot; returns its index or -1 (out of memory). */
static long st_add_file(dsv4q_st *st, const char *path)
{
    if (st->nfiles == st->capfiles) {
        size_t nc = st->capfiles ? 2 * st->capfiles : 4;
        st_file *nf = realloc(st->files, nc * sizeof *nf);
        if (!nf)
            return -1;
        st->files = nf;
        st->capfiles = nc;
    }
    st_file *f = &st->files[st->nfiles];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path)
        return -1;
    return (long)st->nfiles++;
}

static dsv4q_st_tensor *st_push_tensor(dsv4q_st *st)
{
    if (st->n == st->cap) {
        size_t nc = st->cap ? 2 * st->cap : 64;
        dsv4q_st_tensor *nt = realloc(st->t, nc * sizeof *nt);
        if (!nt)
            return NULL;
        st->t = nt;
        st->cap = nc;
    }
    dsv4q_st_tensor *t = &st->t[st->n];
    memset(t, 0, sizeof *t);
    return t;
}

/* Map `path` read-only into file slot `fi` (S1). */
static int st_map(st_file *f, char *err, size_t errlen)
{
    /* non-blocking open + fstat: a FIFO or device is refused before it can block */
    struct stat sb;
    char ferr[400];
    int fd = dsv4q_file_open_read(f->path, "safetensors file", &sb, ferr, sizeof ferr);
    if (fd < 0) return dsv4q_errf(err, errlen, "safetensors: %s", ferr);
    if (sb.st_size < 8) {
        close(fd);
        return dsv4q_errf(err, errlen, "safetensors: %s: file is %lld bytes, shorter than the 8-byte header length",
                          f->path, (long long)sb.st_size);
    }
    if ((unsigned long long)sb.st_size > (unsigned long long)SIZE_MAX) {
        close(fd);
        return dsv4q_errf(err, errlen, "safetensors: %s: file too large to map", f->path);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);   /* the mapping keeps the file alive */
    if (p == MAP_FAILED) return dsv4q_errf(err, errlen, "safetensors: %s: mmap failed: %s", f->path, strerror(e));
    f->base = p;
    f->size = (size_t)sb.st_size;
    f->mapped = 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* duplicate top-level keys                                                  */
/*
 * jansson can reject duplicate keys but does not say which key; a message
 * that names the tensor is the point of this file, so on a duplicate-key
 * error we re-scan the (otherwise valid) header text for the top-level keys
 * ourselves. The scanner is bounds-checked at every step and gives up
 * (returns 0 = "not found") on anything it does not understand.
 */

static size_t js_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* s[i] == '"'; returns the index just past the closing quote, or n. */
static size_t js_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n;
}

/* Skip one JSON value starting at s[i] (after whitespace). */
static size_t js_value(const char *s, size_t n, size_t i)
{
    i = js_ws(s, n, i);
    if (i >= n)
        return n;
    if (s[i] == '"')
        return js_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = js_string(s, n, i);
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if (c == '}' || c == ']') {
                if (--depth == 0)
                    return i + 1;
            }
            i++;
        }
        return n;
    }
    while (i < n && !strchr(",}] \t\r\n", s[i]))
        i++;
    return i;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Find a duplicated top-level key of the JSON object text s[0..n). Writes
 * it to out (truncated to outlen) and returns 1; 0 if none is found. */
static int js_find_dup_key(const char *s, size_t n, char *out, size_t outlen)
{
    size_t cap = 64, cnt = 0;
    char **keys = malloc(cap * sizeof *keys);
    int found = 0;
    if (!keys)
        return 0;
    size_t i = js_ws(s, n, 0);
    if (i >= n || s[i] != '{')
        goto done;
    i++;
    for (;;) {
        i = js_ws(s, n, i);
        if (i >= n || s[i] != '"')
            break;
        size_t k0 = i;
        i = js_string(s, n, i);
        if (i >= n)
            break;
        json_error_t je;
        json_t *k = json_loadb(s + k0, i - k0, JSON_DECODE_ANY, &je);
        if (!k)
            break;
        if (json_is_string(k)) {
            if (cnt == cap) {
                char **nk = realloc(keys, 2 * cap * sizeof *nk);
                if (!nk) {
                    json_decref(k);
                    break;
                }
                keys = nk;
                cap *= 2;
            }
            keys[cnt] = strdup(json_string_value(k));
            if (keys[cnt])
                cnt++;
        }
        json_decref(k);
        i = js_ws(s, n, i);
        if (i >= n || s[i] != ':')
            break;
        i = js_value(s, n, i + 1);
        i = js_ws(s, n, i);
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        break;
    }
    qsort(keys, cnt, sizeof *keys, cmp_str_ptr);
    for (size_t j = 1; j < cnt; j++) {
        if (strcmp(keys[j - 1], keys[j]) == 0) {
            snprintf(out, outlen, "%s", keys[j]);
            found = 1;
            break;
        }
    }
done:
    for (size_t j = 0; j < cnt; j++)
        free(keys[j]);
    free(keys);
    return found;
}

/* Parse a JSON object text, naming duplicate keys. `what` and `file` go
 * into messages. Returns the object or NULL with err. */
static json_t *st_parse_json(const char *text, size_t n, const char *file, const char *what,
                             char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (json_error_code(&je) == json_error_duplicate_key) {
            char key[256];
            if (js_find_dup_key(text, n, key, sizeof key))
                dsv4q_errf(err, errlen, "safetensors: %s: duplicate tensor name '%s' in %s", file, key, what);
            else
                dsv4q_errf(err, errlen, "safetensors: %s: duplicate key in %s (line %d, column %d): %s", file, what,
                           je.line, je.column, je.text);
        } else {
            dsv4q_errf(err, errlen, "safetensors: %s: %s is not valid UTF-8 JSON (line %d, column %d, byte %d): %s",
                       file, what, je.line, je.column, je.position, je.text);
        }
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        dsv4q_errf(err, errlen, "safetensors: %s: %s is not a JSON object", file, what);
        return NULL;
    }
    return root;
}

/* ------------------------------------------------------------------------ */
/* header validation                                                         */

/* A JSON integer >= 0 (jansson refuses integers past int64 as invalid JSON). */
static int js_nonneg_int(const json_t *v, int64_t *out)
{
    if (!json_is_integer(v))
        return 0;
    json_int_t x = json_integer_value(v);
    if (x < 0)
        return 0;
    *out = (int64_t)x;
    return 1;
}

/* Validate one tensor entry (S2) and append it to st. */
static int st_parse_entry(dsv4q_st *st, size_t fi, const char *name, const json_t *e,
                          uint64_t data_len, st_range *rg, char *err, size_t errlen)
{
    const char *file = st->files[fi].path;
    if (!json_is_object(e))
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': entry is not an object", file, name);

    const json_t *jdt = json_object_get(e, "dtype");
    const json_t *jsh = json_object_get(e, "shape");
    const json_t *jof = json_object_get(e, "data_offsets");
    if (!jdt) return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': missing \"dtype\"", file, name);
    if (!jsh) return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': missing \"shape\"", file, name);
    if (!jof) return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': missing \"data_offsets\"", file, name);

    if (!json_is_string(jdt))
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': \"dtype\" is not a string", file, name);
    dsv4q_dtype dt = dsv4q_dtype_from_name(json_string_value(jdt));
    size_t esz = dsv4q_dtype_size(dt);
    if (dt == DSV4Q_DT_INVALID || esz == 0)
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': unknown dtype '%s'", file, name,
                          json_string_value(jdt));

    if (!json_is_array(jsh))
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': \"shape\" is not an array", file, name);
    size_t nd = json_array_size(jsh);
    if (nd > DSV4Q_ST_MAX_DIMS)
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': %zu dimensions, at most %d supported", file, name,
                          nd, DSV4Q_ST_MAX_DIMS);
    int64_t shape[DSV4Q_ST_MAX_DIMS];
    int64_t numel = 1;
    for (size_t d = 0; d < nd; d++) {
        const json_t *v = json_array_get(jsh, d);
        if (json_is_integer(v) && json_integer_value(v) < 0)
            return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': negative dimension %lld at axis %zu", file,
                              name, (long long)json_integer_value(v), d);
        if (!js_nonneg_int(v, &shape[d]))
            return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': shape[%zu] is not an integer", file, name, d);
        if (shape[d] != 0 && numel > INT64_MAX / shape[d])
            return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': element count overflows", file, name);
        numel *= shape[d];
    }

    if (!json_is_array(jof) || json_array_size(jof) != 2)
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': \"data_offsets\" is not a [begin, end] pair",
                          file, name);
    int64_t b, en;
    if (!js_nonneg_int(json_array_get(jof, 0), &b) || !js_nonneg_int(json_array_get(jof, 1), &en))
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': data_offsets must be non-negative integers", file,
                          name);
    if (en < b)
        return dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s': data_offsets [%lld, %lld] end before begin", file,
                          name, (long long)b, (long long)en);
    if ((uint64_t)en > data_len)
        return dsv4q_errf(err, errlen,
                          "safetensors: %s: tensor '%s': data_offsets [%lld, %lld] out of the file "
                          "(data section is %llu bytes; truncated file?)",
                          file, name, (long long)b, (long long)en, (unsigned long long)data_len);
    if ((uint64_t)numel > UINT64_MAX / esz || (uint64_t)(en - b) != (uint64_t)numel * esz)
        return dsv4q_errf(
            err, errlen, "safetensors: %s: tensor '%s': %lld bytes in data_offsets but shape x %s needs %llu", file,
            name, (long long)(en - b), json_string_value(jdt), (unsigned long long)((uint64_t)numel * esz));

    dsv4q_st_tensor *t = st_push_tensor(st);
    if (!t) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", file);
    t->name = strdup(name);
    if (!t->name) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", file);
    st->n++;
    t->dtype = dt;
    t->ndim = (int)nd;
    for (size_t d = 0; d < nd; d++)
        t->shape[d] = shape[d];
    t->numel = numel;
    t->nbytes = (size_t)(en - b);
    /* data pointer is filled after S3 holds; keep the offset for now */
    t->data = (const void *)(uintptr_t)b;
    t->file = st->files[fi].path;
    rg->begin = (uint64_t)b;
    rg->end = (uint64_t)en;
    rg->name = t->name;
    return 0;
}

static int cmp_range(const void *pa, const void *pb)
{
    const st_range *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return 0;
}

/* S3: the ranges tile the data section exactly. */
static int st_check_tiling(const char *file, st_range *rg, size_t n, uint64_t data_len,
                           char *err, size_t errlen)
{
    qsort(rg, n, sizeof *rg, cmp_range);
    uint64_t pos = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        if (rg[i].begin < pos)
            return dsv4q_errf(
                err, errlen,
                "safetensors: %s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' (ends at %llu)", file,
                rg[i].name, (unsigned long long)rg[i].begin, (unsigned long long)rg[i].end, prev ? prev : "?",
                (unsigned long long)pos);
        if (rg[i].begin > pos)
            return dsv4q_errf(err, errlen,
                              "safetensors: %s: tensor '%s': data_offsets begin at %llu, leaving bytes [%llu, %llu) "
                              "of the data section to no tensor",
                              file, rg[i].name, (unsigned long long)rg[i].begin, (unsigned long long)pos,
                              (unsigned long long)rg[i].begin);
        pos = rg[i].end;
        prev = rg[i].name;
    }
    if (pos != data_len)
        return dsv4q_errf(err, errlen,
                          "safetensors: %s: data section is %llu bytes but tensors cover %llu (trailing bytes)", file,
                          (unsigned long long)data_len, (unsigned long long)pos);
    return 0;
}

/* Parse + validate the header of file slot fi; append its tensors. */
static int st_parse_file(dsv4q_st *st, size_t fi, char *err, size_t errlen)
{
    st_file *f = &st->files[fi];
    const char *file = f->path;
    if (f->size < 8)
        return dsv4q_errf(err, errlen, "safetensors: %s: image is %zu bytes, shorter than the 8-byte header length",
                          file, f->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | f->base[i];
    if (hlen > (uint64_t)(f->size - 8))
        return dsv4q_errf(err, errlen,
                          "safetensors: %s: header length %llu exceeds the %zu bytes after it "
                          "(file size %zu; truncated file?)",
                          file, (unsigned long long)hlen, f->size - 8, f->size);
    if (hlen > ST_MAX_HEADER)
        return dsv4q_errf(err, errlen, "safetensors: %s: header length %llu exceeds the %u-byte limit", file,
                          (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen < 2 || f->base[8] != '{')
        return dsv4q_errf(err, errlen, "safetensors: %s: header does not start with '{'", file);

    json_t *root = st_parse_json((const char *)f->base + 8, (size_t)hlen, file, "header", err, errlen);
    if (!root)
        return -1;

    uint64_t data_len = (uint64_t)(f->size - 8) - hlen;
    size_t first = st->n;
    size_t nrg = 0;
    st_range *rg = malloc((json_object_size(root) + 1) * sizeof *rg);
    int rc = -1;
    if (!rg) {
        dsv4q_errf(err, errlen, "safetensors: %s: out of memory", file);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val) && !json_is_null(val)) {
                dsv4q_errf(err, errlen, "safetensors: %s: \"__metadata__\" is not an object", file);
                goto done;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    dsv4q_errf(err, errlen, "safetensors: %s: \"__metadata__\" value of '%s' is not a string", file,
                               mk);
                    goto done;
                }
            }
            if (json_is_object(val))
                f->meta = json_incref(val);
            continue;
        }
        if (st_parse_entry(st, fi, key, val, data_len, &rg[nrg], err, errlen) != 0)
            goto done;
        nrg++;
    }
    if (st_check_tiling(file, rg, nrg, data_len, err, errlen) != 0)
        goto done;
    /* S2/S3 hold: turn offsets into pointers. */
    for (size_t i = first; i < st->n; i++)
        st->t[i].data = f->base + 8 + hlen + (uintptr_t)st->t[i].data;
    rc = 0;
done:
    if (rc != 0) {
        /* offsets are not pointers: clear them so nothing dereferences them */
        for (size_t i = first; i < st->n; i++)
            st->t[i].data = NULL;
    }
    free(rg);
    json_decref(root);
    return rc;
}

static int cmp_tensor(const void *pa, const void *pb)
{
    const dsv4q_st_tensor *a = pa, *b = pb;
    return strcmp(a->name, b->name);
}

/* S4: sort the table and refuse duplicate names (across shards too). */
static int st_finish(dsv4q_st *st, char *err, size_t errlen)
{
    if (st->n)   /* a metadata-only file has no table (st->t NULL) */
        qsort(st->t, st->n, sizeof *st->t, cmp_tensor);
    for (size_t i = 1; i < st->n; i++) {
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
            return dsv4q_errf(err, errlen, "safetensors: %s: duplicate tensor name '%s' (also in %s)", st->t[i].file,
                              st->t[i].name, st->t[i - 1].file);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* opening                                                                   */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir), m = strlen(name);
    char *p = malloc(n + m + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, n);
    size_t k = n;
    if (k > 0 && p[k - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, m + 1);
    return p;
}

/* Directory part of a path ("." when it has none). malloc'd. */
static char *path_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static int st_open_one(dsv4q_st *st, const char *path, char *err, size_t errlen)
{
    long fi = st_add_file(st, path);
    if (fi < 0) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", path);
    if (st_map(&st->files[fi], err, errlen) != 0)
        return -1;
    return st_parse_file(st, (size_t)fi, err, errlen);
}

/* An index entry with a ".." path component could name any file on the
 * machine (../../outside/x.safetensors); refused outright. */
static int name_has_dotdot(const char *fn)
{
    for (const char *c = fn; *c;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return 1;
        if (!e)
            break;
        c = e + 1;
    }
    return 0;
}

/* 1 when `p` (an existing path) resolves, symlinks followed, to a file below
 * the resolved directory `dir`. */
static int inside_dir(const char *dir, const char *p)
{
    char *rd = realpath(dir, NULL), *rp = realpath(p, NULL);
    int ok = 0;
    if (rd && rp) {
        size_t n = strlen(rd);
        ok = strncmp(rp, rd, n) == 0 && (rp[n] == '/' || (n == 1 && rd[0] == '/'));
    }
    free(rd);
    free(rp);
    return ok;
}

static int st_open_index(dsv4q_st *st, const char *ipath, char *err, size_t errlen)
{
    int rc = -1;
    char *dir = path_dir(ipath);
    char *text = NULL;
    const char **fnames = NULL;
    json_t *root = NULL;
    if (!dir) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", ipath);

    size_t len = 0;
    char ferr[400];
    if (dsv4q_file_read_all(ipath, "index", DSV4Q_LIMIT_INDEX, &text, &len, ferr, sizeof ferr) != 0) {
        dsv4q_errf(err, errlen, "safetensors: %s", ferr);
        goto done;
    }
    root = st_parse_json(text, len, ipath, "index", err, errlen);
    if (!root)
        goto done;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm)) {
        dsv4q_errf(err, errlen, "safetensors: %s: index has no \"weight_map\" object", ipath);
        goto done;
    }
    size_t nmap = json_object_size(wm);
    if (nmap == 0) {
        dsv4q_errf(err, errlen, "safetensors: %s: index \"weight_map\" is empty", ipath);
        goto done;
    }
    /* the distinct shard names, opened in name order */
    fnames = malloc(nmap * sizeof *fnames);
    if (!fnames) {
        dsv4q_errf(err, errlen, "safetensors: %s: out of memory", ipath);
        goto done;
    }
    size_t nf = 0;
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        const char *fn = json_string_value(val);
        if (!fn || !fn[0] || fn[0] == '/') {
            dsv4q_errf(err, errlen, "safetensors: %s: weight_map entry for tensor '%s' is not a relative file name",
                       ipath, key);
            goto done;
        }
        if (name_has_dotdot(fn)) {
            dsv4q_errf(err, errlen,
                       "safetensors: %s: weight_map entry '%s' for tensor '%s' leaves the checkpoint "
                       "directory (a '..' component); shard files must be inside %s",
                       ipath, fn, key, dir);
            goto done;
        }
        fnames[nf++] = fn;
    }
    qsort(fnames, nf, sizeof *fnames, cmp_str_ptr);
    size_t uniq = 0;
    for (size_t i = 0; i < nf; i++)
        if (uniq == 0 || strcmp(fnames[uniq - 1], fnames[i]) != 0)
            fnames[uniq++] = fnames[i];
    for (size_t i = 0; i < uniq; i++) {
        char *p = path_join(dir, fnames[i]);
        if (!p) {
            dsv4q_errf(err, errlen, "safetensors: %s: out of memory", ipath);
            goto done;
        }
        struct stat sb;
        if (stat(p, &sb) != 0) {
            /* name a tensor that lives there, so the message is actionable */
            const char *who = "?";
            json_object_foreach(wm, key, val) {
                if (strcmp(json_string_value(val), fnames[i]) == 0) {
                    who = key;
                    break;
                }
            }
            dsv4q_errf(err, errlen,
                       "safetensors: %s: weight_map names file '%s' (tensor '%s'), "
                       "which cannot be opened: %s",
                       ipath, p, who, strerror(errno));
            free(p);
            goto done;
        }
        if (!inside_dir(dir, p)) {   /* a symlink pointing out of the checkpoint */
            dsv4q_errf(err, errlen,
                       "safetensors: %s: weight_map file '%s' resolves outside the checkpoint "
                       "directory %s (a symlink escape); shard files must be inside it",
                       ipath, fnames[i], dir);
            free(p);
            goto done;
        }
        int r = st_open_one(st, p, err, errlen);
        free(p);
        if (r != 0)
            goto done;
    }
    if (st_finish(st, err, errlen) != 0)
        goto done;
    /* S5: every mapped tensor is in its shard, and nothing else is there. */
    json_object_foreach(wm, key, val) {
        const dsv4q_st_tensor *t = dsv4q_st_find(st, key);
        const char *fn = json_string_value(val);
        char *want = path_join(dir, fn);
        if (!want) {
            dsv4q_errf(err, errlen, "safetensors: %s: out of memory", ipath);
            goto done;
        }
        int ok = t && strcmp(t->file, want) == 0;
        if (!ok)
            dsv4q_errf(err, errlen,
                       "safetensors: %s: weight_map puts tensor '%s' in %s, but that file has "
                       "no such tensor%s%s",
                       ipath, key, want, t ? "; it is in " : "", t ? t->file : "");
        free(want);
        if (!ok)
            goto done;
    }
    if (st->n != nmap) {
        for (size_t i = 0; i < st->n; i++) {
            if (!json_object_get(wm, st->t[i].name)) {
                dsv4q_errf(err, errlen, "safetensors: %s: tensor '%s' in %s is not listed in the index weight_map",
                           ipath, st->t[i].name, st->t[i].file);
                goto done;
            }
        }
    }
    rc = 0;
done:
    free((void *)fnames);
    json_decref(root);
    free(text);
    free(dir);
    return rc;
}

static int st_open_dir(dsv4q_st *st, const char *dir, char *err, size_t errlen)
{
    char *ipath = path_join(dir, ST_INDEX_NAME);
    if (!ipath) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", dir);
    struct stat sb;
    if (stat(ipath, &sb) == 0 && S_ISREG(sb.st_mode)) {
        int r = st_open_index(st, ipath, err, errlen);
        free(ipath);
        return r;
    }
    free(ipath);

    DIR *d = opendir(dir);
    if (!d) return dsv4q_errf(err, errlen, "safetensors: %s: cannot open directory: %s", dir, strerror(errno));
    size_t cap = 16, n = 0;
    char **names = malloc(cap * sizeof *names);
    int rc = -1;
    struct dirent *de;
    while (names && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || !ends_with(de->d_name, ST_SUFFIX))
            continue;
        if (n == cap) {
            char **nn = realloc(names, 2 * cap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap *= 2;
        }
        names[n] = strdup(de->d_name);
        if (names[n])
            n++;
    }
    closedir(d);
    if (!names) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", dir);
    qsort(names, n, sizeof *names, cmp_str_ptr);
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = path_join(dir, names[i]);
        if (!p) {
            dsv4q_errf(err, errlen, "safetensors: %s: out of memory", dir);
            goto done;
        }
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            free(p);
            continue;
        }
        int r = st_open_one(st, p, err, errlen);
        free(p);
        if (r != 0)
            goto done;
        used++;
    }
    if (used == 0) {
        dsv4q_errf(err, errlen, "safetensors: %s: directory holds neither %s nor any *%s file", dir, ST_INDEX_NAME,
                   ST_SUFFIX);
        goto done;
    }
    rc = st_finish(st, err, errlen);
done:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int dsv4q_st_open(dsv4q_st **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    if (!path || !path[0]) return dsv4q_errf(err, errlen, "safetensors: empty path");
    dsv4q_st *st = st_new();
    if (!st) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", path);
    struct stat sb;
    int r;
    if (stat(path, &sb) != 0) r = dsv4q_errf(err, errlen, "safetensors: %s: cannot open: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        r = st_open_dir(st, path, err, errlen);
    else if (ends_with(path, ".json"))
        r = st_open_index(st, path, err, errlen);
    else {
        r = st_open_one(st, path, err, errlen);
        if (r == 0)
            r = st_finish(st, err, errlen);
    }
    if (r != 0) {
        dsv4q_st_close(st);
        return -1;
    }
    *out = st;
    return 0;
}

int dsv4q_st_open_buffer(dsv4q_st **out, const uint8_t *buf, size_t len, const char *origin,
                         char *err, size_t errlen)
{
    *out = NULL;
    const char *name = origin && origin[0] ? origin : "<buffer>";
    if (!buf && len > 0) return dsv4q_errf(err, errlen, "safetensors: %s: NULL buffer", name);
    dsv4q_st *st = st_new();
    if (!st) return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", name);
    long fi = st_add_file(st, name);
    if (fi < 0) {
        dsv4q_st_close(st);
        return dsv4q_errf(err, errlen, "safetensors: %s: out of memory", name);
    }
    st->files[fi].base = buf;
    st->files[fi].size = len;
    st->files[fi].mapped = 0;
    if (st_parse_file(st, (size_t)fi, err, errlen) != 0 || st_finish(st, err, errlen) != 0) {
        dsv4q_st_close(st);
        return -1;
    }
    *out = st;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* queries                                                                   */

const dsv4q_st_tensor *dsv4q_st_find(const dsv4q_st *st, const char *name)
{
    if (!st || !name)
        return NULL;
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->t[mid].name, name);
        if (c == 0)
            return &st->t[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t dsv4q_st_count(const dsv4q_st *st)
{
    return st ? st->n : 0;
}

const dsv4q_st_tensor *dsv4q_st_at(const dsv4q_st *st, size_t i)
{
    return st && i < st->n ? &st->t[i] : NULL;
}

const char *dsv4q_st_meta(const dsv4q_st *st, const char *key)
{
    if (!st || !key)
        return NULL;
    for (size_t i = 0; i < st->nfiles; i++) {
        const json_t *v = st->files[i].meta ? json_object_get(st->files[i].meta, key) : NULL;
        if (json_is_string(v))
            return json_string_value(v);
    }
    return NULL;
}

size_t dsv4q_st_nfiles(const dsv4q_st *st)
{
    return st ? st->nfiles : 0;
}

const char *dsv4q_st_file(const dsv4q_st *st, size_t i) { return st && i < st->nfiles ? st->files[i].path : NULL; }
