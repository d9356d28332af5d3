/*
 * gguf.c - strict GGUF v3 reader (see gguf.h for what it accepts).
 *
 * The parse is a cursor over the mapped bytes with one rule: every read
 * first checks that the bytes exist (`need`), so no length field can send
 * it past the end of the file, and every count is compared with what the
 * remaining bytes could possibly hold before anything is allocated for it
 * (a 10-byte file claiming 2^60 tensors fails at once, without a large
 * malloc). Names and keys are copied out NUL-terminated; tensor data and
 * scalar values stay in the map.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/gguf.h"
#include "oracle/ggml_decode.h"

struct dsv4q_gguf {
    char *path;
    const uint8_t *base;
    size_t size;
    int mapped;
    uint32_t alignment;
    uint64_t data_start;
    dsv4q_gguf_kv *kv;
    size_t nkv;
    dsv4q_gguf_tensor *t;
    size_t nt;
    size_t *by_name;        /* tensor indices sorted by name */
    size_t *kv_by_key;
};

typedef struct cur {
    const uint8_t *p;
    size_t pos, size;
    const char *file;
    char *err;
    size_t errlen;
} cur;

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int need(cur *c, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return fail(c->err, c->errlen, "gguf: %s: truncated at byte %zu reading %s (%llu bytes needed, %zu left)",
                    c->file, c->pos, what, (unsigned long long)n, c->size - c->pos);
    return 0;
}

static int rd(cur *c, void *out, size_t n, const char *what)
{
    if (need(c, n, what)) return -1;
    memcpy(out, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

static size_t scalar_size(dsv4q_gguf_vtype t)
{
    switch (t) {
    case DSV4Q_GGUF_U8: case DSV4Q_GGUF_I8: case DSV4Q_GGUF_BOOL: return 1;
    case DSV4Q_GGUF_U16: case DSV4Q_GGUF_I16: return 2;
    case DSV4Q_GGUF_U32: case DSV4Q_GGUF_I32: case DSV4Q_GGUF_F32: return 4;
    case DSV4Q_GGUF_U64: case DSV4Q_GGUF_I64: case DSV4Q_GGUF_F64: return 8;
    default: return 0;
    }
}

static const char *vtype_name(uint32_t t)
{
    static const char *n[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                              "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
    return t < DSV4Q_GGUF_VTYPE_COUNT ? n[t] : "unknown";
}

/* A GGUF string (u64 length + bytes) copied out NUL-terminated. */
static int rd_str(cur *c, uint64_t maxlen, char **out, uint64_t *len, const char *what)
{
    uint64_t n;
    if (rd(c, &n, 8, what)) return -1;
    if (n > maxlen)
        return fail(c->err, c->errlen, "gguf: %s: %s at byte %zu has length %llu, more than the %llu accepted",
                    c->file, what, c->pos - 8, (unsigned long long)n, (unsigned long long)maxlen);
    if (need(c, n, what)) return -1;
    char *s = malloc((size_t)n + 1);
    if (!s) return fail(c->err, c->errlen, "gguf: %s: out of memory", c->file);
    memcpy(s, c->p + c->pos, (size_t)n);
    s[n] = 0;
    c->pos += (size_t)n;
    *out = s;
    if (len) *len = n;
    return 0;
}

static int parse_kv(cur *c, dsv4q_gguf_kv *kv)
{
    uint64_t klen;
    char *key;
    if (rd_str(c, DSV4Q_GGUF_MAX_KEY, &key, &klen, "metadata key")) return -1;
    kv->key = key;
    if (klen == 0 || strlen(key) != klen)
        return fail(c->err, c->errlen, "gguf: %s: metadata key at byte %zu is empty or holds a NUL byte", c->file,
                    c->pos - (size_t)klen);
    uint32_t t;
    if (rd(c, &t, 4, "metadata value type")) return -1;
    if (t >= DSV4Q_GGUF_VTYPE_COUNT)
        return fail(c->err, c->errlen, "gguf: %s: key '%s' has unknown value type %u", c->file, key, t);
    kv->type = (dsv4q_gguf_vtype)t;
    kv->n = 1;
    char what[96];
    snprintf(what, sizeof what, "the value of key '%.60s'", key);
    if (t == DSV4Q_GGUF_STRING) {
        char *s;
        if (rd_str(c, c->size, &s, &kv->len, what)) return -1;
        kv->str = s;
        kv->data = s;
        return 0;
    }
    if (t != DSV4Q_GGUF_ARRAY) {
        size_t sz = scalar_size(kv->type);
        if (need(c, sz, key)) return -1;
        kv->data = c->p + c->pos;
        if (t == DSV4Q_GGUF_BOOL && c->p[c->pos] > 1)
            return fail(c->err, c->errlen, "gguf: %s: key '%s' is a BOOL holding %u (0 or 1 expected)", c->file, key,
                        c->p[c->pos]);
        c->pos += sz;
        return 0;
    }
    uint32_t at;
    uint64_t n;
    if (rd(c, &at, 4, "array element type") || rd(c, &n, 8, "array length")) return -1;
    if (at >= DSV4Q_GGUF_VTYPE_COUNT || at == DSV4Q_GGUF_ARRAY)
        return fail(c->err, c->errlen, "gguf: %s: key '%s' is an array of %s (nested or unknown element types "
                    "are refused)", c->file, key, vtype_name(at));
    kv->atype = (dsv4q_gguf_vtype)at;
    kv->n = n;
    if (at == DSV4Q_GGUF_STRING) {
        /* each element takes at least its 8-byte length */
        if (n > (c->size - c->pos) / 8)
            return fail(c->err, c->errlen, "gguf: %s: key '%s' claims %llu strings, more than the %zu bytes left can "
                        "hold", c->file, key, (unsigned long long)n, c->size - c->pos);
        kv->strs = calloc((size_t)n ? (size_t)n : 1, sizeof *kv->strs);
        if (!kv->strs) return fail(c->err, c->errlen, "gguf: %s: out of memory", c->file);
        kv->data = c->p + c->pos;
        for (uint64_t i = 0; i < n; i++)
            if (rd_str(c, c->size, &kv->strs[i], NULL, what)) return -1;
        return 0;
    }
    size_t es = scalar_size(kv->atype);
    if (n > (c->size - c->pos) / es)
        return fail(c->err, c->errlen, "gguf: %s: key '%s' claims %llu elements of %s, more than the %zu bytes left",
                    c->file, key, (unsigned long long)n, vtype_name(at), c->size - c->pos);
    kv->data = c->p + c->pos;
    if (at == DSV4Q_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (c->p[c->pos + i] > 1)
                return fail(c->err, c->errlen, "gguf: %s: key '%s' element %llu is a BOOL holding %u", c->file, key,
                            (unsigned long long)i, c->p[c->pos + i]);
    c->pos += (size_t)(n * es);
    return 0;
}

static const dsv4q_gguf *g_sort;
static int cmp_tname(const void *a, const void *b)
{
    return strcmp(g_sort->t[*(const size_t *)a].name, g_sort->t[*(const size_t *)b].name);
}
static int cmp_kvkey(const void *a, const void *b)
{
    return strcmp(g_sort->kv[*(const size_t *)a].key, g_sort->kv[*(const size_t *)b].key);
}
static int cmp_toff(const void *a, const void *b)
{
    uint64_t x = g_sort->t[*(const size_t *)a].offset, y = g_sort->t[*(const size_t *)b].offset;
    return x < y ? -1 : x > y;
}

static int parse_tensor(cur *c, dsv4q_gguf_tensor *t)
{
    char *name;
    uint64_t nlen;
    if (rd_str(c, 1u << 20, &name, &nlen, "tensor name")) return -1;
    t->name = name;
    if (nlen == 0 || nlen > DSV4Q_GGUF_MAX_NAME || strlen(name) != nlen)
        return fail(c->err, c->errlen, "gguf: %s: tensor name '%.80s' is empty, longer than %d bytes or holds a NUL",
                    c->file, name, DSV4Q_GGUF_MAX_NAME);
    uint32_t nd;
    if (rd(c, &nd, 4, "tensor n_dims")) return -1;
    if (nd < 1 || nd > DSV4Q_GGUF_MAX_DIMS)
        return fail(c->err, c->errlen, "gguf: %s: tensor '%s' has %u dimensions (1..%d accepted)", c->file, name, nd,
                    DSV4Q_GGUF_MAX_DIMS);
    t->ndim = (int)nd;
    int64_t numel = 1;
    for (int i = 0; i < DSV4Q_GGUF_MAX_DIMS; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t ne;
        if (rd(c, &ne, 8, "tensor dimension")) return -1;
        if (ne == 0 || ne > (uint64_t)INT64_MAX / (uint64_t)numel)
            return fail(c->err, c->errlen, "gguf: %s: tensor '%s' dimension %u is %llu (zero, or the element count "
                        "overflows)", c->file, name, i, (unsigned long long)ne);
        t->ne[i] = (int64_t)ne;
        numel *= (int64_t)ne;
    }
    t->numel = numel;
    uint32_t ty;
    if (rd(c, &ty, 4, "tensor type") || rd(c, &t->offset, 8, "tensor offset")) return -1;
    const size_t bb = dsv4q_ggml_block_bytes((int)ty);
    if (!bb)
        return fail(c->err, c->errlen, "gguf: %s: tensor '%s' has unknown GGML type %u", c->file, name, ty);
    t->type = (int)ty;
    const int64_t be = dsv4q_ggml_block_elems(t->type);
    if (t->ne[0] % be)
        return fail(c->err, c->errlen, "gguf: %s: tensor '%s' of type %s has ne[0] = %lld, not a multiple of its "
                    "block of %lld", c->file, name, dsv4q_ggml_type_name(t->type), (long long)t->ne[0], (long long)be);
    /* bytes = numel / be * bb, checked for overflow against the file size */
    const uint64_t nblk = (uint64_t)(numel / be);
    if (nblk > (uint64_t)c->size / bb + 1)
        return fail(c->err, c->errlen, "gguf: %s: tensor '%s' needs %llu blocks of %zu bytes, more than the file holds",
                    c->file, name, (unsigned long long)nblk, bb);
    t->nbytes = (size_t)nblk * bb;
    return 0;
}

static int parse(dsv4q_gguf *g, char *err, size_t errlen)
{
    cur c = {g->base, 0, g->size, g->path, err, errlen};
    char magic[4];
    uint32_t version;
    uint64_t nt, nkv;
    if (rd(&c, magic, 4, "magic")) return -1;
    if (memcmp(magic, "GGUF", 4))
        return fail(err, errlen, "gguf: %s: bad magic (not a GGUF file)", g->path);
    if (rd(&c, &version, 4, "version")) return -1;
    if (version != 3)
        return fail(err, errlen, "gguf: %s: version %u, only GGUF v3 is read", g->path, version);
    if (rd(&c, &nt, 8, "tensor count") || rd(&c, &nkv, 8, "metadata count")) return -1;
    /* a metadata pair takes >= 8 + 1 + 4 + 1 bytes, a tensor info >= 8 + 1 + 4 + 8 + 4 + 8 */
    if (nkv > DSV4Q_GGUF_MAX_KV || nkv > (c.size - c.pos) / 14)
        return fail(err, errlen, "gguf: %s: metadata count %llu cannot fit in the file (or exceeds %d)", g->path,
                    (unsigned long long)nkv, DSV4Q_GGUF_MAX_KV);
    if (nt > DSV4Q_GGUF_MAX_TENSORS || nt > (c.size - c.pos) / 33)
        return fail(err, errlen, "gguf: %s: tensor count %llu cannot fit in the file (or exceeds %d)", g->path,
                    (unsigned long long)nt, DSV4Q_GGUF_MAX_TENSORS);
    g->kv = calloc((size_t)nkv + 1, sizeof *g->kv);
    g->t = calloc((size_t)nt + 1, sizeof *g->t);
    g->kv_by_key = calloc((size_t)nkv + 1, sizeof(size_t));
    g->by_name = calloc((size_t)nt + 1, sizeof(size_t));
    if (!g->kv || !g->t || !g->kv_by_key || !g->by_name) return fail(err, errlen, "gguf: %s: out of memory", g->path);
    for (uint64_t i = 0; i < nkv; i++) {
        g->nkv++;
        if (parse_kv(&c, &g->kv[i])) return -1;
    }
    for (size_t i = 0; i < g->nkv; i++) g->kv_by_key[i] = i;
    g_sort = g;
    qsort(g->kv_by_key, g->nkv, sizeof(size_t), cmp_kvkey);
    for (size_t i = 1; i < g->nkv; i++)
        if (!strcmp(g->kv[g->kv_by_key[i]].key, g->kv[g->kv_by_key[i - 1]].key))
            return fail(err, errlen, "gguf: %s: duplicate metadata key '%s'", g->path, g->kv[g->kv_by_key[i]].key);
    g->alignment = 32;   /* GGUF_DEFAULT_ALIGNMENT */
    const dsv4q_gguf_kv *al = dsv4q_gguf_kv_find(g, "general.alignment");
    if (al) {
        uint32_t a;
        if (al->type != DSV4Q_GGUF_U32)
            return fail(err, errlen, "gguf: %s: key 'general.alignment' is %s, expected UINT32", g->path,
                        vtype_name(al->type));
        memcpy(&a, al->data, 4);
        if (a == 0 || (a & (a - 1)))
            return fail(err, errlen, "gguf: %s: key 'general.alignment' is %u, not a power of two", g->path, a);
        g->alignment = a;
    }
    for (uint64_t i = 0; i < nt; i++) {
        g->nt++;
        if (parse_tensor(&c, &g->t[i])) return -1;
    }
    for (size_t i = 0; i < g->nt; i++) g->by_name[i] = i;
    qsort(g->by_name, g->nt, sizeof(size_t), cmp_tname);
    for (size_t i = 1; i < g->nt; i++)
        if (!strcmp(g->t[g->by_name[i]].name, g->t[g->by_name[i - 1]].name))
            return fail(err, errlen, "gguf: %s: duplicate tensor name '%s'", g->path, g->t[g->by_name[i]].name);
    /* data section: align_up(end of infos, alignment), from the file start */
    uint64_t ds = ((uint64_t)c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->nt && ds > g->size)
        return fail(err, errlen, "gguf: %s: data section would start at byte %llu, past the end (%zu bytes)", g->path,
                    (unsigned long long)ds, g->size);
    g->data_start = ds;
    const uint64_t avail = g->nt ? g->size - ds : 0;
    size_t *ord = malloc(sizeof(size_t) * (g->nt + 1));
    if (!ord) return fail(err, errlen, "gguf: %s: out of memory", g->path);
    for (size_t i = 0; i < g->nt; i++) {
        dsv4q_gguf_tensor *t = &g->t[i];
        ord[i] = i;
        if (t->offset % g->alignment) {
            free(ord);
            return fail(err, errlen, "gguf: %s: tensor '%s' data offset %llu is not a multiple of the alignment %u",
                        g->path, t->name, (unsigned long long)t->offset, g->alignment);
        }
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            free(ord);
            return fail(err, errlen, "gguf: %s: tensor '%s' data [%llu, +%zu) lies outside the %llu-byte data section",
                        g->path, t->name, (unsigned long long)t->offset, t->nbytes, (unsigned long long)avail);
        }
        t->data = g->base + ds + t->offset;
    }
    qsort(ord, g->nt, sizeof(size_t), cmp_toff);
    for (size_t i = 1; i < g->nt; i++) {
        const dsv4q_gguf_tensor *a = &g->t[ord[i - 1]], *b = &g->t[ord[i]];
        if (a->offset + a->nbytes > b->offset) {
            int r = fail(err, errlen, "gguf: %s: data of tensors '%s' and '%s' overlap", g->path, a->name, b->name);
            free(ord);
            return r;
        }
    }
    free(ord);
    return 0;
}

static int open_common(dsv4q_gguf *g, char *err, size_t errlen)
{
    if (parse(g, err, errlen)) return -1;
    return 0;
}

int dsv4q_gguf_open_buffer(dsv4q_gguf **out, const uint8_t *buf, size_t len, const char *origin, char *err,
                           size_t errlen)
{
    *out = NULL;
    dsv4q_gguf *g = calloc(1, sizeof *g);
    if (!g) return fail(err, errlen, "gguf: out of memory");
    g->path = strdup(origin ? origin : "buffer");
    g->base = buf;
    g->size = len;
    if (!g->path || open_common(g, err, errlen)) { dsv4q_gguf_close(g); return -1; }
    *out = g;
    return 0;
}

int dsv4q_gguf_open(dsv4q_gguf **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(err, errlen, "gguf: %s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(err, errlen, "gguf: %s: not a regular file", path);
    }
    if (sb.st_size < 24) {
        close(fd);
        return fail(err, errlen, "gguf: %s: %lld bytes, too short for a GGUF header (24)", path, (long long)sb.st_size);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return fail(err, errlen, "gguf: %s: mmap failed: %s", path, strerror(e));
    dsv4q_gguf *g = calloc(1, sizeof *g);
    if (!g) { munmap(p, (size_t)sb.st_size); return fail(err, errlen, "gguf: out of memory"); }
    g->path = strdup(path);
    g->base = p;
    g->size = (size_t)sb.st_size;
    g->mapped = 1;
    if (!g->path || open_common(g, err, errlen)) { dsv4q_gguf_close(g); return -1; }
    *out = g;
    return 0;
}

void dsv4q_gguf_close(dsv4q_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->nkv; i++) {
        free((char *)g->kv[i].key);
        if (g->kv[i].type == DSV4Q_GGUF_STRING) free((char *)g->kv[i].str);
        if (g->kv[i].strs) {
            for (uint64_t j = 0; j < g->kv[i].n; j++) free(g->kv[i].strs[j]);
            free(g->kv[i].strs);
        }
    }
    for (size_t i = 0; i < g->nt; i++) free((char *)g->t[i].name);
    free(g->kv);
    free(g->t);
    free(g->by_name);
    free(g->kv_by_key);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->path);
    free(g);
}

const char *dsv4q_gguf_path(const dsv4q_gguf *g) { return g->path; }
uint32_t dsv4q_gguf_alignment(const dsv4q_gguf *g) { return g->alignment; }
size_t dsv4q_gguf_count(const dsv4q_gguf *g) { return g->nt; }
const dsv4q_gguf_tensor *dsv4q_gguf_at(const dsv4q_gguf *g, size_t i) { return i < g->nt ? &g->t[i] : NULL; }
size_t dsv4q_gguf_nkv(const dsv4q_gguf *g) { return g->nkv; }
const dsv4q_gguf_kv *dsv4q_gguf_kv_at(const dsv4q_gguf *g, size_t i) { return i < g->nkv ? &g->kv[i] : NULL; }

const dsv4q_gguf_tensor *dsv4q_gguf_find(const dsv4q_gguf *g, const char *name)
{
    size_t lo = 0, hi = g->nt;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(g->t[g->by_name[mid]].name, name);
        if (!c) return &g->t[g->by_name[mid]];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

const dsv4q_gguf_kv *dsv4q_gguf_kv_find(const dsv4q_gguf *g, const char *key)
{
    size_t lo = 0, hi = g->nkv;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(g->kv[g->kv_by_key[mid]].key, key);
        if (!c) return &g->kv[g->kv_by_key[mid]];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

/* Scalar of integer type t at p as int64 (U64 beyond INT64_MAX fails). */
static int int_at(dsv4q_gguf_vtype t, const uint8_t *p, int64_t *v)
{
    switch (t) {
    case DSV4Q_GGUF_U8: case DSV4Q_GGUF_BOOL: *v = p[0]; return 0;
    case DSV4Q_GGUF_I8: *v = (int8_t)p[0]; return 0;
    case DSV4Q_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); *v = x; return 0; }
    case DSV4Q_GGUF_I16: { int16_t x; memcpy(&x, p, 2); *v = x; return 0; }
    case DSV4Q_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); *v = x; return 0; }
    case DSV4Q_GGUF_I32: { int32_t x; memcpy(&x, p, 4); *v = x; return 0; }
    case DSV4Q_GGUF_U64: { uint64_t x; memcpy(&x, p, 8); if (x > INT64_MAX) return -1; *v = (int64_t)x; return 0; }
    case DSV4Q_GGUF_I64: { int64_t x; memcpy(&x, p, 8); *v = x; return 0; }
    default: return -1;
    }
}

static int real_at(dsv4q_gguf_vtype t, const uint8_t *p, double *v)
{
    if (t == DSV4Q_GGUF_F32) { float x; memcpy(&x, p, 4); *v = x; return 0; }
    if (t == DSV4Q_GGUF_F64) { memcpy(v, p, 8); return 0; }
    int64_t i;
    if (int_at(t, p, &i)) return -1;
    *v = (double)i;
    return 0;
}

int dsv4q_gguf_get_int(const dsv4q_gguf *g, const char *key, int64_t *v, char *err, size_t errlen)
{
    const dsv4q_gguf_kv *kv = dsv4q_gguf_kv_find(g, key);
    if (!kv) return 1;
    if (kv->type == DSV4Q_GGUF_ARRAY || int_at(kv->type, kv->data, v))
        return fail(err, errlen, "gguf: %s: key '%s' is %s, expected an integer", g->path, key, vtype_name(kv->type));
    return 0;
}

int dsv4q_gguf_get_real(const dsv4q_gguf *g, const char *key, double *v, char *err, size_t errlen)
{
    const dsv4q_gguf_kv *kv = dsv4q_gguf_kv_find(g, key);
    if (!kv) return 1;
    if (kv->type == DSV4Q_GGUF_ARRAY || kv->type == DSV4Q_GGUF_STRING || real_at(kv->type, kv->data, v))
        return fail(err, errlen, "gguf: %s: key '%s' is %s, expected a number", g->path, key, vtype_name(kv->type));
    return 0;
}

int dsv4q_gguf_get_str(const dsv4q_gguf *g, const char *key, const char **v, char *err, size_t errlen)
{
    const dsv4q_gguf_kv *kv = dsv4q_gguf_kv_find(g, key);
    if (!kv) return 1;
    if (kv->type != DSV4Q_GGUF_STRING)
        return fail(err, errlen, "gguf: %s: key '%s' is %s, expected STRING", g->path, key, vtype_name(kv->type));
    *v = kv->str;
    return 0;
}

int dsv4q_gguf_arr_int(const dsv4q_gguf_kv *kv, uint64_t i, int64_t *v)
{
    if (kv->type != DSV4Q_GGUF_ARRAY || i >= kv->n || kv->atype == DSV4Q_GGUF_STRING) return -1;
    return int_at(kv->atype, (const uint8_t *)kv->data + i * scalar_size(kv->atype), v);
}

int dsv4q_gguf_arr_real(const dsv4q_gguf_kv *kv, uint64_t i, double *v)
{
    if (kv->type != DSV4Q_GGUF_ARRAY || i >= kv->n || kv->atype == DSV4Q_GGUF_STRING) return -1;
    return real_at(kv->atype, (const uint8_t *)kv->data + i * scalar_size(kv->atype), v);
}
