/*
 * golden.h - compressed reference outputs of the oracle ("goldens") and the
 * bit-exact check against them.
 *
 * Owns: the table of golden cases (the operator cases, V4's and V4.1's,
 * plus two whole-model runs on `tiny` and one V4.1 run on
 * tests/data/pub_v41_tiny), the deterministic inputs of each case, the payload format
 * (one safetensors image per case, tensors `{width}.{profile}.{output}`,
 * zlib-compressed to goldens/data/{case}.st.zz), the manifest
 * (goldens/MANIFEST.json: SHA-256 of every UNCOMPRESSED payload and a
 * description of its inputs), recording, and checking. Which file of
 * goldens/ does which: goldens/payload.h.
 *
 * Invariants (docs/goldens.md):
 *  G1. A case's payload is a function of the oracle source and the case key
 *      only (model_tiny_v41: and the checkpoint tests/data/pub_v41_tiny,
 *      whose SHA-256 the payload pins): inputs come from a counter-based generator keyed by the case
 *      key (splitmix64 over FNV-1a, base/rng.h), built with integer
 *      arithmetic, exact power-of-two scaling, oracle/dmath.h and IEEE sqrt
 *      (correctly rounded); no other libm, no OS entropy, no timestamps, no
 *      thread-count dependence. Recording twice gives the same bytes.
 *  G2. Every case runs at both widths (f32, f64) and all four profiles
 *      (source, model, qat, exact), whether or not the operator has a
 *      boundary; the payload metadata says which profiles gave identical
 *      outputs ("dsv4q.golden.distinct.f32/f64").
 *  G3. check verifies the golden's integrity (inflate, length, SHA-256 vs
 *      the manifest, safetensors structure) BEFORE computing anything, so
 *      a damaged file is reported CORRUPT, never as a numeric MISMATCH.
 *  G4. Comparison is bit-exact (bit patterns: -0 != +0, NaN payloads count).
 *
 * Report lines (one per case, then a summary):
 *   ok CASE (N tensors, M values)
 *   MISMATCH CASE TENSOR [FLAT INDEX]: golden %.17g got %.17g (...)
 *   CORRUPT CASE: why          (inflate / length / SHA-256 / not safetensors)
 *   MISSING CASE: why          (no manifest entry, file absent)
 *   STALE CASE: ...            (manifest entry without a case; all cases only)
 *   ERROR ...                  (unknown case name, computation failed)
 *   CORRUPT manifest: why      (MANIFEST.json unreadable or malformed)
 * Result codes: DSV4Q_GOLDEN_OK 0, _MISMATCH 1, _ERROR 2 (corrupt, missing,
 * unknown case name, I/O); the worst over all cases.
 */
#ifndef DSV4Q_GOLDEN_H
#define DSV4Q_GOLDEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DSV4Q_GOLDEN_OK       0
#define DSV4Q_GOLDEN_MISMATCH 1
#define DSV4Q_GOLDEN_ERROR    2

#define DSV4Q_GOLDEN_MANIFEST "MANIFEST.json"
#define DSV4Q_GOLDEN_FORMAT   1   /* "version" of MANIFEST.json */

/* The case table, in its fixed order. */
int dsv4q_golden_count(void);
const char *dsv4q_golden_key(int i);      /* NULL when out of range */
const char *dsv4q_golden_inputs(int i);   /* the description stored in the manifest */

/* Compute the uncompressed payload (a safetensors image) of case `key`:
 * malloc'd into *buf. distinct (may be NULL, >= 160 bytes) receives the
 * profile groups, e.g. "f32: source|model,qat|exact; f64: ...". Returns 0,
 * or -1 with err. */
int dsv4q_golden_compute(const char *key, uint8_t **buf, size_t *len, char *distinct, size_t dlen,
                         char *err, size_t errlen);

/* Recompute the cases named in `ops` (comma-separated keys; NULL, "" or
 * "all" = every case) and write dir/data/{key}.st.zz and dir/MANIFEST.json
 * (each atomically: temporary + rename). With a subset, the manifest
 * entries of the other cases are kept. One line per case to report (may be
 * NULL). Returns 0, or 2 with err (unknown case, I/O, unreadable manifest
 * when recording a subset). */
int dsv4q_golden_record(const char *dir, const char *ops, FILE *report, char *err, size_t errlen);

/* Check the cases named in `ops` (as above) against dir. Writes the report
 * lines to `report` (may be NULL). Returns DSV4Q_GOLDEN_OK / _MISMATCH /
 * _ERROR (the worst case). */
int dsv4q_golden_check(const char *dir, const char *ops, FILE *report);

/* zlib helpers (the payload container): deflate is compress2 level 9;
 * inflate refuses truncated streams, trailing bytes and outputs above
 * max_out bytes. Both malloc *out. Return 0 or -1 with err. */
int dsv4q_golden_deflate(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen, char *err,
                         size_t errlen);
int dsv4q_golden_inflate(const uint8_t *in, size_t n, size_t max_out, uint8_t **out, size_t *outlen,
                         char *err, size_t errlen);

#endif
