/*
 * engram_map.c - read the Engram compressed-token map (io/engram_map.h).
 *
 * Owns only the JSON shape checks; the map's meaning (what the hash does
 * with it) is oracle/engram_hash.c's. Duplicated keys are refused, as for
 * config.json, so a file cannot say two things.
 */
#include "io/engram_map.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/util.h"

#define em_fail dsv4q_errf

void dsv4q_engram_map_free(dsv4q_engram_map *m)
{
    if (!m) return;
    free(m->token_map);
    memset(m, 0, sizeof *m);
}

static int parse_root(dsv4q_engram_map *m, const json_t *root, const char *o, char *err, size_t errlen)
{
    if (!json_is_object(root)) return em_fail(err, errlen, "%s: top level is not a JSON object", o);
    const json_t *v = json_object_get(root, "compressed_vocab_size");
    if (!v) return em_fail(err, errlen, "%s: missing field 'compressed_vocab_size'", o);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
        return em_fail(err, errlen, "%s: field 'compressed_vocab_size' must be an integer in [1, 2^31)", o);
    const int64_t V = (int64_t)json_integer_value(v);
    const json_t *a = json_object_get(root, "token_map");
    if (!a) return em_fail(err, errlen, "%s: missing field 'token_map'", o);
    if (!json_is_array(a) || json_array_size(a) == 0)
        return em_fail(err, errlen, "%s: field 'token_map' must be a non-empty array of integers", o);
    const size_t n = json_array_size(a);
    m->token_map = malloc(sizeof(int32_t) * n);
    if (!m->token_map) return em_fail(err, errlen, "%s: out of memory", o);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= V) {
            free(m->token_map);
            m->token_map = NULL;
            return em_fail(err, errlen, "%s: field 'token_map' entry %zu must be an integer in [0, %lld) "
                           "(compressed_vocab_size)", o, i, (long long)V);
        }
        m->token_map[i] = (int32_t)json_integer_value(e);
    }
    m->vocab = (int64_t)n;
    m->compressed_vocab_size = V;
    return 0;
}

int dsv4q_engram_map_parse(dsv4q_engram_map *m, const char *json, const char *origin, char *err, size_t errlen)
{
    const char *o = origin && origin[0] ? origin : "engram token map";
    memset(m, 0, sizeof *m);
    if (!json) return em_fail(err, errlen, "%s: no JSON text", o);
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return em_fail(err, errlen, "%s: invalid JSON (line %d, column %d): %s", o, je.line, je.column, je.text);
    int rc = parse_root(m, root, o, err, errlen);
    json_decref(root);
    if (rc != 0) dsv4q_engram_map_free(m);
    return rc;
}

int dsv4q_engram_map_load(dsv4q_engram_map *m, const char *path, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!path) return em_fail(err, errlen, "engram token map: NULL path");
    char *text;
    size_t len;
    if (dsv4q_file_read_all(path, "engram token map", DSV4Q_LIMIT_JSON, &text, &len, err, errlen) != 0) return -1;
    int rc = dsv4q_engram_map_parse(m, memchr(text, '\0', len) ? "" : text, path, err, errlen);
    free(text);
    return rc;
}
