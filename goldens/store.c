/*
 * store.c - goldens on disk (see store.h): the zlib container, the manifest
 * and the payload files, read and published through base/file.h only.
 *
 * Strict for the reason the gate parser is: a damaged golden must be
 * reported CORRUPT or MISSING before any comparison (G3), never as a
 * numeric mismatch, so every field of the manifest and every byte count is
 * checked here and a path is never allowed to leave the directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/file.h"
#include "base/util.h"
#include "goldens/golden.h"
#include "goldens/store.h"
#include "io/safetensors.h"
#include "io/sha256.h"

/* ---- the zlib container ------------------------------------------------- */

int dsv4q_golden_deflate(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen, char *err, size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    uLongf cap = compressBound((uLong)n);
    uint8_t *b = malloc(cap ? cap : 1);
    if (!b) return dsv4q_errf(err, errlen, "deflate: out of memory");
    int z = compress2(b, &cap, in, (uLong)n, 9);
    if (z != Z_OK) {
        free(b);
        return dsv4q_errf(err, errlen, "deflate: zlib error %d", z);
    }
    *out = b;
    *outlen = cap;
    return 0;
}

int dsv4q_golden_inflate(const uint8_t *in, size_t n, size_t max_out, uint8_t **out, size_t *outlen, char *err,
                         size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit(&zs) != Z_OK) return dsv4q_errf(err, errlen, "inflate: zlib init failed");
    size_t cap = max_out < 65536 ? max_out + 1 : 65536, used = 0;
    uint8_t *b = malloc(cap);
    int z = Z_OK;
    if (!b) {
        inflateEnd(&zs);
        return dsv4q_errf(err, errlen, "inflate: out of memory");
    }
    zs.next_in = (Bytef *)in;
    zs.avail_in = 0;
    size_t fed = 0;
    for (;;) {
        if (zs.avail_in == 0 && fed < n) {
            size_t chunk = n - fed > (1u << 30) ? (1u << 30) : n - fed;
            zs.next_in = (Bytef *)(in + fed);
            zs.avail_in = (uInt)chunk;
            fed += chunk;
        }
        if (used == cap) {
            if (cap > max_out) break;   /* output longer than allowed */
            size_t nc = cap * 2 > max_out + 1 ? max_out + 1 : cap * 2;
            uint8_t *nb = realloc(b, nc);
            if (!nb) {
                free(b);
                inflateEnd(&zs);
                return dsv4q_errf(err, errlen, "inflate: out of memory");
            }
            b = nb;
            cap = nc;
        }
        zs.next_out = b + used;
        zs.avail_out = (uInt)(cap - used);
        z = inflate(&zs, Z_NO_FLUSH);
        used = cap - zs.avail_out;
        if (z == Z_STREAM_END) break;
        if (z == Z_BUF_ERROR && zs.avail_in == 0 && fed == n) break;   /* input ended early */
        if (z != Z_OK && z != Z_BUF_ERROR) break;
    }
    size_t trailing = zs.avail_in + (n - fed);
    const char *msg = zs.msg;
    inflateEnd(&zs);
    if (z == Z_STREAM_END && used > max_out) z = Z_BUF_ERROR;
    if (z != Z_STREAM_END) {
        free(b);
        if (used > max_out) return dsv4q_errf(err, errlen, "inflate: payload longer than %zu bytes", max_out);
        if (z == Z_OK || z == Z_BUF_ERROR) return dsv4q_errf(err, errlen, "inflate: truncated compressed stream");
        return dsv4q_errf(err, errlen, "inflate: %s (zlib %d)", msg ? msg : "invalid stream", z);
    }
    if (trailing) {
        free(b);
        return dsv4q_errf(err, errlen, "inflate: %zu trailing bytes after the compressed stream", trailing);
    }
    *out = b;
    *outlen = used;
    return 0;
}

/* ---- the manifest ----------------------------------------------------------- */

static int is_hex64(const char *s)
{
    if (!s || strlen(s) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

json_t *dsv4q_golden_manifest_load(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DSV4Q_GOLDEN_MANIFEST);
    json_error_t je;
    char *text;
    size_t tlen;
    char ferr[600];
    if (dsv4q_file_read_all(path, "goldens manifest", DSV4Q_LIMIT_JSON, &text, &tlen, ferr, sizeof ferr)) {
        dsv4q_errf(err, errlen, "%s", ferr);
        return NULL;
    }
    json_t *root = json_loadb(text, tlen, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        dsv4q_errf(err, errlen, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
        return NULL;
    }
    json_t *v = json_object_get(root, "version"), *cs = json_object_get(root, "cases");
    if (!json_is_integer(v) || json_integer_value(v) != DSV4Q_GOLDEN_FORMAT) {
        dsv4q_errf(err, errlen, "%s: \"version\" must be %d", path, DSV4Q_GOLDEN_FORMAT);
        goto bad;
    }
    if (!json_is_array(cs)) {
        dsv4q_errf(err, errlen, "%s: \"cases\" must be an array", path);
        goto bad;
    }
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *e = json_array_get(cs, i);
        const char *key = json_string_value(json_object_get(e, "key"));
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *sha = json_string_value(json_object_get(e, "sha256_payload"));
        json_t *nb = json_object_get(e, "payload_bytes");
        if (!json_is_object(e) || !key || !*key || !file || !*file || !is_hex64(sha) || !json_is_integer(nb) ||
            json_integer_value(nb) < 0) {
            dsv4q_errf(err, errlen,
                       "%s: cases[%zu] needs \"key\", \"file\", \"payload_bytes\" and a 64-hex-digit "
                       "\"sha256_payload\"",
                       path, i);
            goto bad;
        }
        if (file[0] == '/' || strstr(file, "..")) {
            dsv4q_errf(err, errlen, "%s: cases[%zu] (%s): file '%s' must be a relative path inside the directory", path,
                       i, key, file);
            goto bad;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(key, json_string_value(json_object_get(json_array_get(cs, j), "key")))) {
                dsv4q_errf(err, errlen, "%s: case '%s' listed twice", path, key);
                goto bad;
            }
    }
    return root;
bad:
    json_decref(root);
    return NULL;
}

json_t *dsv4q_golden_manifest_find(json_t *root, const char *key)
{
    json_t *cs = json_object_get(root, "cases");
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *e = json_array_get(cs, i);
        if (!strcmp(json_string_value(json_object_get(e, "key")), key)) return e;
    }
    return NULL;
}

int dsv4q_golden_manifest_write(const char *dir, json_t *const *entries, int n, char *err, size_t errlen)
{
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/%s", dir, DSV4Q_GOLDEN_MANIFEST);
    json_t *arr = json_array(), *root;
    for (int i = 0; i < n; i++)
        if (entries[i]) json_array_append(arr, entries[i]);
    root = json_pack(
        "{s:i, s:s, s:s, s:s, s:o}", "version", DSV4Q_GOLDEN_FORMAT, "generator", "dsv4q golden record", "payload",
        "zlib(safetensors); tensors {f32|f64}.{source|model|qat|exact}.{output}; see docs/goldens.md", "inputs_seed",
        "per case key and stream name: splitmix64 over FNV-1a (goldens/payload.h rng_of); "
        "values binary32-exact",
        "cases", arr);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text) return dsv4q_errf(err, errlen, "out of memory (manifest)");
    size_t tl = strlen(text);
    char *t2 = realloc(text, tl + 2);
    if (!t2) {
        free(text);
        return dsv4q_errf(err, errlen, "out of memory (manifest)");
    }
    t2[tl] = '\n';
    t2[tl + 1] = 0;
    int w = dsv4q_file_write_atomic(mpath, t2, tl + 1, err, errlen);
    free(t2);
    return w;
}

/* ---- payload files ------------------------------------------------------------ */

int dsv4q_golden_payload_write(const char *dir, const char *key, const uint8_t *pay, size_t npay, char file[200],
                               char sha[65], size_t *nz, char *err, size_t errlen)
{
    uint8_t *z = NULL;
    char path[4400];
    if (dsv4q_golden_deflate(pay, npay, &z, nz, err, errlen)) return -1;
    dsv4q_sha256_hex(pay, npay, sha);
    snprintf(file, 200, "data/%s.st.zz", key);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int w = dsv4q_file_write_atomic(path, z, *nz, err, errlen);
    free(z);
    return w;
}

int dsv4q_golden_payload_load(const char *dir, const char *key, json_t *e, uint8_t **pay, size_t *npay, char *line,
                              size_t n)
{
    *pay = NULL;
    *npay = 0;
    const char *file = json_string_value(json_object_get(e, "file"));
    const char *sha = json_string_value(json_object_get(e, "sha256_payload"));
    json_int_t want = json_integer_value(json_object_get(e, "payload_bytes"));
    char path[4400], zerr[512], got[65];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *z;
    size_t nz;
    char ferr[600];
    if (dsv4q_file_read_all(path, "golden payload", DSV4Q_LIMIT_JSON, &z, &nz, ferr, sizeof ferr)) {
        snprintf(line, n, "%s %s: %s", access(path, F_OK) ? "MISSING" : "CORRUPT", key, ferr);
        return DSV4Q_GOLDEN_ERROR;
    }
    int r = dsv4q_golden_inflate((const uint8_t *)z, nz, (size_t)want, pay, npay, zerr, sizeof zerr);
    free(z);
    if (r) {
        snprintf(line, n, "CORRUPT %s: %s: %s", key, path, zerr);
        return DSV4Q_GOLDEN_ERROR;
    }
    if ((json_int_t)*npay != want) {
        snprintf(line, n, "CORRUPT %s: %s: payload is %zu bytes, the manifest says %lld (truncated)", key, path, *npay,
                 (long long)want);
        goto bad;
    }
    dsv4q_sha256_hex(*pay, *npay, got);
    if (strcmp(got, sha)) {
        snprintf(line, n, "CORRUPT %s: %s: SHA-256 of the payload is %s, the manifest says %s", key, path, got, sha);
        goto bad;
    }
    dsv4q_st *st;
    if (dsv4q_st_open_buffer(&st, *pay, *npay, path, zerr, sizeof zerr)) {
        snprintf(line, n, "CORRUPT %s: not a safetensors payload: %s", key, zerr);
        goto bad;
    }
    const char *mk = dsv4q_st_meta(st, "dsv4q.golden.case");
    int wrong = !mk || strcmp(mk, key);
    if (wrong) snprintf(line, n, "CORRUPT %s: %s holds case '%s'", key, path, mk ? mk : "(none)");
    dsv4q_st_close(st);
    if (wrong) goto bad;
    return DSV4Q_GOLDEN_OK;
bad:
    free(*pay);
    *pay = NULL;
    return DSV4Q_GOLDEN_ERROR;
}
