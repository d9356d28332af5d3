/*
 * store.h - where goldens live on disk, inside goldens/: the zlib container
 * (golden.h's dsv4q_golden_deflate / _inflate), the manifest and the payload
 * files, all read and published through base/file.h. Not for use outside
 * goldens/.
 *
 * Layout of a goldens directory (docs/goldens.md):
 *   DIR/MANIFEST.json          {"version", "generator", "payload",
 *                               "inputs_seed", "cases": [{"key", "file",
 *                               "payload_bytes", "sha256_payload",
 *                               "profiles", "inputs"}, ...]}
 *   DIR/data/{case}.st.zz      zlib(level 9) of the case's safetensors image
 * The manifest pins the SHA-256 of every UNCOMPRESSED payload, so a golden
 * survives a zlib that compresses differently (G3 checks the payload, not
 * the compressed bytes).
 */
#ifndef DSV4Q_GOLDENS_STORE_H
#define DSV4Q_GOLDENS_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Load and validate DIR/MANIFEST.json: version, every entry's fields, no
 * path outside DIR, no key twice. The root (new reference) or NULL with err. */
json_t *dsv4q_golden_manifest_load(const char *dir, char *err, size_t errlen);
/* The entry of `key` in a loaded manifest (borrowed), or NULL. */
json_t *dsv4q_golden_manifest_find(json_t *root, const char *key);
/* Publish DIR/MANIFEST.json holding entries[0..n) (NULL entries skipped),
 * atomically. 0 or -1 with err. */
int dsv4q_golden_manifest_write(const char *dir, json_t *const *entries, int n, char *err, size_t errlen);

/* Compress payload pay[npay] of case `key` and publish it atomically as
 * DIR/data/{key}.st.zz. file[200] receives the manifest's relative name,
 * sha[65] the payload's SHA-256 (hex), *nz the compressed size. 0 or -1. */
int dsv4q_golden_payload_write(const char *dir, const char *key, const uint8_t *pay, size_t npay, char file[200],
                               char sha[65], size_t *nz, char *err, size_t errlen);
/* Integrity of one golden (G3) before any number is looked at: read the
 * file of manifest entry e, inflate, length and SHA-256 against the
 * manifest, safetensors structure, the case key inside. Returns 0 with the
 * payload in *pay (malloc'd), or DSV4Q_GOLDEN_ERROR with the report line
 * (MISSING / CORRUPT ...) in line[n]. */
int dsv4q_golden_payload_load(const char *dir, const char *key, json_t *e, uint8_t **pay, size_t *npay, char *line,
                              size_t n);

#endif
