/*
 * verify.c - verification of a receipts database and of exported receipts.
 *
 * Owns: dsv4q_receipt_verify (hash, chain and signature of every receipt,
 * R8..R12), dsv4q_receipt_export_json and dsv4q_receipt_verify_json (R14).
 * Verification is the reason receipts exist, so its messages are precise
 * and stable: each problem is one line "receipt N: <what> (<evidence>):
 * <likely cause>", and the tests match on them. It never modifies the
 * database (beyond SQLite's own WAL recovery).
 */
#include "receipts/receipts_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#define EXPORT_FORMAT "dsv4q-receipt-export/1"

enum key_mode { KEY_NONE, KEY_LENIENT, KEY_STRICT };

typedef struct keyctx {
    enum key_mode mode;
    int have;                        /* pk valid */
    unsigned char pk[32];
    char id[DSV4Q_KEYID_HEX + 1];
    char path[4200];
} keyctx;

static void rpt(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rpt(FILE *f, const char *fmt, ...)
{
    va_list ap;
    if (!f)
        return;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

/* Resolve the public key per R11. Returns 0 or -1 with err. */
static int key_setup(keyctx *k, const char *pubkey_path, FILE *report, char *err, size_t errlen)
{
    char def[4096];
    int r;

    memset(k, 0, sizeof *k);
    if (pubkey_path && !*pubkey_path) {
        k->mode = KEY_NONE;
        return 0;
    }
    if (pubkey_path) {
        k->mode = KEY_STRICT;
        snprintf(k->path, sizeof k->path, "%s", pubkey_path);
        if (dsv4q_receipt_load_pubkey(pubkey_path, k->pk, err, errlen) != 0)
            return -1;
        k->have = 1;
    } else {
        k->mode = KEY_LENIENT;
        if (dsv4q_key_default_path(def, sizeof def) == 0) {
            snprintf(k->path, sizeof k->path, "%s.pub", def);
            r = dsv4q_receipt_load_pubkey(k->path, k->pk, err, errlen);
            if (r < 0)
                rpt(report, "note: ignoring default public key: %s", err ? err : "unreadable");
            k->have = (r == 0);
        }
    }
    if (k->have)
        dsv4q_receipt_keyid(k->pk, k->id);
    return 0;
}

/* Signature check of one receipt (R10, R11) against `hash_hex` (the hash
 * the receipt states). Returns the number of problems reported. */
static int check_sig(long long id, const char *keyid, const char *sighex, const char *hash_hex,
                     const keyctx *k, FILE *report, dsv4q_verify_result *R)
{
    unsigned char sig[64], raw[32];
    size_t bl = 0;

    if (!*keyid) {
        if (*sighex) {
            rpt(report, "receipt %lld: has a signature but no signer_key_id: a field was edited",
                id);
            return 1;
        }
        R->n_unsigned++;
        if (k->mode == KEY_STRICT) {
            rpt(report, "receipt %lld: unsigned, but the given public key %s requires every "
                        "receipt to be signed by it", id, k->id);
            return 1;
        }
        return 0;
    }
    if (!*sighex) {
        rpt(report, "receipt %lld: signature missing (signer_key_id %s): the signature was "
                    "removed", id, keyid);
        return 1;
    }
    if (k->mode == KEY_NONE || !k->have) {
        R->n_sig_unchecked++;
        return 0;
    }
    if (strcmp(keyid, k->id) != 0) {
        if (k->mode == KEY_STRICT) {
            rpt(report, "receipt %lld: signed by key %s, not by the given public key %s (%s)",
                id, keyid, k->id, k->path);
            return 1;
        }
        R->n_sig_unchecked++;
        return 0;
    }
    if (strlen(sighex) != DSV4Q_SIG_HEX ||
        sodium_hex2bin(sig, sizeof sig, sighex, DSV4Q_SIG_HEX, NULL, &bl, NULL) != 0 ||
        bl != sizeof sig) {
        rpt(report, "receipt %lld: bad signature (not %d hex digits): the signature was edited",
            id, DSV4Q_SIG_HEX);
        return 1;
    }
    if (strlen(hash_hex) != DSV4Q_SHA256_HEX ||
        sodium_hex2bin(raw, sizeof raw, hash_hex, DSV4Q_SHA256_HEX, NULL, &bl, NULL) != 0 ||
        bl != sizeof raw) {
        rpt(report, "receipt %lld: bad signature (the stored hash is not 64 hex digits)", id);
        return 1;
    }
    if (crypto_sign_verify_detached(sig, raw, sizeof raw, k->pk) != 0) {
        rpt(report, "receipt %lld: bad signature (signer %s): the signature does not match this "
                    "receipt's hash (altered, or copied from another receipt)", id, keyid);
        return 1;
    }
    R->n_sig_ok++;
    return 0;
}

/* Hash and signature of one row (R8, R10). Returns problems reported. */
static int check_row(const dsv4q_receipt_row *row, const keyctx *k, FILE *report,
                     dsv4q_verify_result *R)
{
    char cerr[256], hex[DSV4Q_SHA256_HEX + 1];
    unsigned char raw[32];
    char *canon;
    int bad = 0;

    R->n_checked++;
    canon = dsv4q_receipt_canonical(row, cerr, sizeof cerr);
    if (!canon) {
        rpt(report, "receipt %lld: cannot be serialized (%s): a field was edited", row->id, cerr);
        bad++;
    } else {
        dsv4q_receipt_hash(canon, raw, hex);
        free(canon);
        if (strcmp(hex, row->hash) != 0) {
            rpt(report, "receipt %lld: hash mismatch (stored %.16s..., recomputed %.16s...): a "
                        "field was edited", row->id, row->hash, hex);
            bad++;
        }
    }
    bad += check_sig(row->id, row->f[RF_SIGNER_KEY_ID], row->signature, row->hash, k, report, R);
    return bad;
}

/* Chain link of `row` to its predecessor (R9). prev_id = 0: none seen
 * (row should be receipt 1). Returns problems reported. */
static int check_link(const dsv4q_receipt_row *row, long long prev_id, const char *prev_hash,
                      FILE *report)
{
    if (prev_id == LLONG_MAX) { /* an edited id: prev_id + 1 would overflow */
        rpt(report, "receipt %lld: out of order after receipt %lld", row->id, prev_id);
        return 1;
    }
    long long want = prev_id + 1;

    if (row->id > want) {
        /* unsigned: ids of an edited database may be far apart (no signed overflow) */
        unsigned long long gap = (unsigned long long)row->id - (unsigned long long)want;
        if (prev_id == 0 && gap == 1)
            rpt(report, "receipt 1: missing (the chain starts at receipt %lld): a receipt was "
                        "deleted", row->id);
        else if (prev_id == 0)
            rpt(report, "receipts 1..%lld: missing (the chain starts at receipt %lld): receipts "
                        "were deleted", row->id - 1, row->id);
        else if (gap == 1)
            rpt(report, "receipt %lld: missing (ids jump from %lld to %lld): a receipt was "
                        "deleted", want, prev_id, row->id);
        else
            rpt(report, "receipts %lld..%lld: missing (ids jump from %lld to %lld): receipts "
                        "were deleted", want, row->id - 1, prev_id, row->id);
        return 1;
    }
    if (row->id < want) { /* cannot happen with ORDER BY id on a PRIMARY KEY; be explicit */
        rpt(report, "receipt %lld: out of order after receipt %lld", row->id, prev_id);
        return 1;
    }
    if (strcmp(row->f[RF_PREV_HASH], prev_hash) != 0) {
        if (prev_id == 0)
            rpt(report, "receipt %lld: chain link broken (prev_hash %.16s..., but the first "
                        "receipt must have the genesis prev_hash %.16s...): the chain was "
                        "rewritten", row->id, row->f[RF_PREV_HASH], DSV4Q_RCPT_GENESIS);
        else
            rpt(report, "receipt %lld: chain link broken (prev_hash %.16s..., but receipt %lld "
                        "has hash %.16s...): receipts were deleted, reordered or rewritten",
                row->id, row->f[RF_PREV_HASH], prev_id, prev_hash);
        return 1;
    }
    return 0;
}

/* First line of PRAGMA quick_check into out ("ok" when healthy). */
static int quick_check(sqlite3 *db, char *out, size_t outlen)
{
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(out, outlen, "%s", t ? (const char *)t : "?");
        src = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return src;
}

/* A failed read while walking the chain: damage is a verification
 * failure (1, R12), anything else an error (-1). */
static int read_failed(sqlite3 *db, int src, const char *db_path, FILE *report,
                       dsv4q_verify_result *R, char *err, size_t errlen)
{
    if ((src & 0xff) == SQLITE_CORRUPT || (src & 0xff) == SQLITE_NOTADB) {
        R->corrupt = 1;
        R->n_problems++;
        rpt(report, "database %s is corrupt (%s while reading receipts)", db_path,
            sqlite3_errmsg(db));
        return 1;
    }
    dsv4q_errf(err, errlen, "database %s: reading receipts failed: %s", db_path, sqlite3_errmsg(db));
    return -1;
}

int dsv4q_receipt_verify(const char *db_path, long long id, const char *pubkey_path,
                          FILE *report, dsv4q_verify_result *res, char *err, size_t errlen)
{
    return dsv4q_receipt_verify_opts(db_path, id, pubkey_path, 0, report, res, err, errlen);
}

int dsv4q_receipt_verify_opts(const char *db_path, long long id, const char *pubkey_path, int allow_unsigned,
                              FILE *report, dsv4q_verify_result *res, char *err, size_t errlen)
{
    dsv4q_verify_result R;
    keyctx k;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    dsv4q_receipt_row row;
    char sql[1024], qc[512], prev_hash[DSV4Q_SHA256_HEX + 8], oerr[512];
    long long prev_id = 0, first_id = 0;
    int rc = -1, src, corrupt = 0, found = 0, have_pred = 0;

    memset(&R, 0, sizeof R);
    memset(&row, 0, sizeof row);
    if (!db_path || !*db_path)
        db_path = dsv4q_receipt_default_db();
    if (id < 0) {
        dsv4q_errf(err, errlen, "receipt id must be positive");
        goto done;
    }
    if (dsv4q_receipt_sodium(err, errlen) || key_setup(&k, pubkey_path, report, err, errlen))
        goto done;
    if (dsv4q_receipt_open(db_path, 0, &db, &corrupt, oerr, sizeof oerr)) {
        if (corrupt) { /* R12: damage is a verification failure, not an I/O error */
            R.corrupt = 1;
            R.n_problems++;
            rpt(report, "%s", oerr);
            rc = 1;
        } else {
            dsv4q_errf(err, errlen, "%s", oerr);
        }
        goto done;
    }
    if (id == 0) {
        src = quick_check(db, qc, sizeof qc);
        if (src != SQLITE_OK || strcmp(qc, "ok") != 0) {
            R.corrupt = 1;
            R.n_problems++;
            rpt(report, "database %s is corrupt (quick_check: %s)", db_path,
                src == SQLITE_OK ? qc : sqlite3_errmsg(db));
            rc = 1;
            goto done;
        }
        snprintf(sql, sizeof sql, "%s ORDER BY id", dsv4q_receipt_select_sql);
    } else {
        snprintf(sql, sizeof sql, "%s WHERE id IN (?1 - 1, ?1) ORDER BY id",
                 dsv4q_receipt_select_sql);
    }
    src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (src != SQLITE_OK) {
        rc = read_failed(db, src, db_path, report, &R, err, errlen);
        goto done;
    }
    if (id > 0)
        sqlite3_bind_int64(st, 1, id);
    snprintf(prev_hash, sizeof prev_hash, "%s", DSV4Q_RCPT_GENESIS);

    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (dsv4q_receipt_row_load(st, &row, oerr, sizeof oerr)) {
            /* A NULL column means the row was tampered with (NOT NULL is schema). */
            R.n_problems++;
            rpt(report, "%s: a field was edited", oerr);
            prev_id = sqlite3_column_int64(st, 0);
            prev_hash[0] = '\0';
            continue;
        }
        if (id > 0 && row.id == id - 1) { /* the predecessor: link target only */
            have_pred = 1;
            prev_id = row.id;
            snprintf(prev_hash, sizeof prev_hash, "%s", row.hash);
            dsv4q_receipt_row_free(&row);
            continue;
        }
        if (!found)
            first_id = row.id;
        found = 1;
        if (id > 0 && row.id > 1 && !have_pred) {
            R.n_problems++;
            rpt(report, "receipt %lld: missing (predecessor of receipt %lld): a receipt was "
                        "deleted", row.id - 1, row.id);
        } else {
            R.n_problems += check_link(&row, id > 0 ? row.id - 1 : prev_id, prev_hash, report);
        }
        R.n_problems += check_row(&row, &k, report, &R);
        prev_id = row.id;
        snprintf(prev_hash, sizeof prev_hash, "%s", row.hash);
        R.head_id = row.id;
        snprintf(R.head_hash, sizeof R.head_hash, "%s", row.hash);
        dsv4q_receipt_row_free(&row);
    }
    if (src != SQLITE_DONE) {
        rc = read_failed(db, src, db_path, report, &R, err, errlen);
        goto done;
    }
    if (id > 0 && !found) {
        dsv4q_errf(err, errlen, "no receipt %lld in %s", id, db_path);
        goto done;
    }

    if (R.n_sig_unchecked)
        rpt(report, "note: %lld signed receipt(s) not checked: %s", R.n_sig_unchecked,
            k.mode == KEY_NONE ? "signature checks disabled"
            : k.have ? "signed by other keys than the default public key (pass --pubkey FILE)"
                     : "no public key (pass --pubkey FILE)");
    /* A receipt without a verified signature (unsigned, or signed by a key
     * not at hand) proves its chain position, not who wrote it: it passes
     * only when the caller says so (a strict key already reports each one
     * as a problem; "" disabled signature checks on purpose). */
    R.not_verified = !R.n_problems && (R.n_unsigned || R.n_sig_unchecked) && k.mode == KEY_LENIENT && !allow_unsigned;
    if (R.not_verified)
        rpt(report,
            "note: %lld receipt(s) without a verified signature (%lld unsigned, %lld signed by a key "
            "not given): nothing shows who wrote them; pass --pubkey FILE of the signing key (sign "
            "new receipts with a key from dsv4q keygen), or accept them with --allow-unsigned",
            R.n_unsigned + R.n_sig_unchecked, R.n_unsigned, R.n_sig_unchecked);
    if (!found)
        rpt(report, "no receipts in %s", db_path);
    else
        rpt(report,
            "%s: %lld receipt(s) checked (ids %lld..%lld), %lld problem(s); %lld "
            "signature(s) valid, %lld unsigned, %lld not checked; head receipt %lld "
            "hash %s",
            R.n_problems     ? "FAILED"
            : R.not_verified ? "NOT VERIFIED"
                             : "OK",
            R.n_checked, first_id, R.head_id, R.n_problems, R.n_sig_ok, R.n_unsigned, R.n_sig_unchecked, R.head_id,
            R.head_hash);
    rc = R.n_problems || R.not_verified ? 1 : 0;
done:
    dsv4q_receipt_row_free(&row);
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (res)
        *res = R;
    return rc;
}

/* ---- export (R14) ----------------------------------------------------------- */

/* The receipt's fields as a JSON object in canonical key order. */
static json_t *row_to_json(const dsv4q_receipt_row *row, char *err, size_t errlen)
{
    json_t *o = json_object(), *v, *ret = NULL;
    json_error_t je;
    int i;

    if (!o || json_object_set_new(o, "v", json_integer(DSV4Q_RCPT_CANON_V)) ||
        json_object_set_new(o, "id", json_integer(row->id))) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    for (i = 0; i < RF_COUNT; i++) {
        if (dsv4q_receipt_fields[i].is_json) {
            v = json_loads(row->f[i], JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
            if (!v) {
                dsv4q_errf(err, errlen, "receipt %lld: stored %s is not valid JSON (%s)", row->id,
                           dsv4q_receipt_fields[i].name, je.text);
                goto done;
            }
        } else {
            v = json_string(row->f[i]);
            if (!v) {
                dsv4q_errf(err, errlen, "receipt %lld: stored %s is not valid UTF-8", row->id,
                           dsv4q_receipt_fields[i].name);
                goto done;
            }
        }
        if (json_object_set_new(o, dsv4q_receipt_fields[i].name, v)) {
            dsv4q_errf(err, errlen, "out of memory");
            goto done;
        }
    }
    ret = o;
    o = NULL;
done:
    json_decref(o);
    return ret;
}

int dsv4q_receipt_export_json(const char *db_path, long long id, const char *pubkey_path,
                              char **json_out, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    dsv4q_receipt_row row;
    json_t *doc = NULL, *rec = NULL;
    keyctx k;
    char pkhex[DSV4Q_PUBKEY_HEX + 1] = "";
    char *canon = NULL;
    int rc = -1;

    memset(&row, 0, sizeof row);
    *json_out = NULL;
    if (!db_path || !*db_path)
        db_path = dsv4q_receipt_default_db();
    if (dsv4q_receipt_sodium(err, errlen) || key_setup(&k, pubkey_path, NULL, err, errlen))
        goto done;
    if (dsv4q_receipt_open(db_path, 0, &db, NULL, err, errlen))
        goto done;
    if (dsv4q_receipt_row_get(db, db_path, id, &row, err, errlen)) goto done;
    if (!(canon = dsv4q_receipt_canonical(&row, err, errlen)) ||
        !(rec = row_to_json(&row, err, errlen)))
        goto done;
    if (*row.f[RF_SIGNER_KEY_ID] && k.have) {
        if (strcmp(k.id, row.f[RF_SIGNER_KEY_ID]) == 0)
            sodium_bin2hex(pkhex, sizeof pkhex, k.pk, sizeof k.pk);
        else if (k.mode == KEY_STRICT) {
            dsv4q_errf(err, errlen, "public key %s (key id %s) did not sign receipt %lld (signer %s)", k.path, k.id, id,
                       row.f[RF_SIGNER_KEY_ID]);
            goto done;
        }
    }
    doc = json_object();
    if (!doc || json_object_set_new(doc, "format", json_string(EXPORT_FORMAT)) ||
        json_object_set(doc, "receipt", rec) ||
        json_object_set_new(doc, "canonical", json_string(canon)) ||
        json_object_set_new(doc, "hash", json_string(row.hash)) ||
        json_object_set_new(doc, "signature", json_string(row.signature)) ||
        json_object_set_new(doc, "signer_key_id", json_string(row.f[RF_SIGNER_KEY_ID])) ||
        json_object_set_new(doc, "public_key", json_string(pkhex))) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    *json_out = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (!*json_out) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    rc = 0;
done:
    json_decref(doc);
    json_decref(rec);
    free(canon);
    dsv4q_receipt_row_free(&row);
    sqlite3_close(db);
    return rc;
}

static const char *jstr(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int dsv4q_receipt_verify_json(const char *json_text, const char *pubkey_path,
                              FILE *report, char *err, size_t errlen)
{
    json_t *doc = NULL, *rec, *v;
    json_error_t je;
    dsv4q_receipt_row row;
    dsv4q_verify_result R;
    keyctx k;
    const char *hash, *sig, *canon_stated, *pkhex, *key, *fmt;
    char *canon = NULL, hex[DSV4Q_SHA256_HEX + 1], embid[DSV4Q_KEYID_HEX + 1] = "";
    unsigned char raw[32], embpk[32];
    size_t bl = 0;
    int rc = -1, i, bad = 0, have_emb = 0;

    memset(&row, 0, sizeof row);
    memset(&R, 0, sizeof R);
    /* --pubkey given: strict; else start with none and fall back to the
     * embedded key below. */
    if (dsv4q_receipt_sodium(err, errlen) ||
        key_setup(&k, (pubkey_path && *pubkey_path) ? pubkey_path : "", report, err, errlen))
        goto done;
    doc = json_loads(json_text ? json_text : "", JSON_REJECT_DUPLICATES, &je);
    if (!doc) {
        dsv4q_errf(err, errlen, "export is not valid JSON (line %d column %d: %s)", je.line, je.column, je.text);
        goto done;
    }
    fmt = jstr(doc, "format");
    if (!fmt || strcmp(fmt, EXPORT_FORMAT) != 0) {
        dsv4q_errf(err, errlen, "not a dsv4q receipt export (format is not \"%s\")", EXPORT_FORMAT);
        goto done;
    }
    rec = json_object_get(doc, "receipt");
    hash = jstr(doc, "hash");
    sig = jstr(doc, "signature");
    canon_stated = jstr(doc, "canonical");
    pkhex = jstr(doc, "public_key");
    if (!json_is_object(rec) || !hash || !sig) {
        dsv4q_errf(err, errlen, "export lacks \"receipt\", \"hash\" or \"signature\"");
        goto done;
    }
    v = json_object_get(rec, "v");
    if (!json_is_integer(v) || json_integer_value(v) != DSV4Q_RCPT_CANON_V) {
        dsv4q_errf(err, errlen, "export has an unsupported canonical version (want %d)", DSV4Q_RCPT_CANON_V);
        goto done;
    }
    v = json_object_get(rec, "id");
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        dsv4q_errf(err, errlen, "export has no positive integer receipt id");
        goto done;
    }
    row.id = (long long)json_integer_value(v);

    /* Rebuild the row from the fields alone (R14). */
    json_object_foreach(rec, key, v) {
        int known = strcmp(key, "v") == 0 || strcmp(key, "id") == 0;
        for (i = 0; i < RF_COUNT && !known; i++)
            known = strcmp(key, dsv4q_receipt_fields[i].name) == 0;
        if (!known) {
            rpt(report, "receipt %lld: unexpected field \"%s\" (not covered by the hash): the "
                        "export was edited", row.id, key);
            bad++;
        }
    }
    for (i = 0; i < RF_COUNT; i++) {
        v = json_object_get(rec, dsv4q_receipt_fields[i].name);
        if (!v || (!dsv4q_receipt_fields[i].is_json && !json_is_string(v))) {
            rpt(report, "receipt %lld: field \"%s\" is %s: the export was edited", row.id,
                dsv4q_receipt_fields[i].name, v ? "not a string" : "missing");
            bad++;
            row.f[i] = strdup("");
        } else if (dsv4q_receipt_fields[i].is_json) {
            row.f[i] = json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII |
                                         JSON_ENCODE_ANY);
        } else {
            row.f[i] = strdup(json_string_value(v));
        }
        if (!row.f[i]) {
            dsv4q_errf(err, errlen, "out of memory");
            goto done;
        }
    }
    if (!(row.hash = strdup(hash)) || !(row.signature = strdup(sig))) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }

    canon = dsv4q_receipt_canonical(&row, err, errlen);
    if (!canon)
        goto done;
    dsv4q_receipt_hash(canon, raw, hex);
    if (strcmp(hex, hash) != 0) {
        rpt(report, "receipt %lld: hash mismatch (stated %.16s..., recomputed %.16s...): a "
                    "field was edited", row.id, hash, hex);
        bad++;
    }
    if (canon_stated && strcmp(canon_stated, canon) != 0) {
        rpt(report, "receipt %lld: the \"canonical\" string does not match the fields: the "
                    "export was edited", row.id);
        bad++;
    }

    /* Key: --pubkey (strict), else the embedded one (noted). */
    if (pkhex && *pkhex) {
        if (strlen(pkhex) != DSV4Q_PUBKEY_HEX ||
            sodium_hex2bin(embpk, sizeof embpk, pkhex, DSV4Q_PUBKEY_HEX, NULL, &bl, NULL) != 0 ||
            bl != sizeof embpk) {
            rpt(report, "receipt %lld: embedded public_key is not 64 hex digits", row.id);
            bad++;
        } else {
            have_emb = 1;
            dsv4q_receipt_keyid(embpk, embid);
            if (*row.f[RF_SIGNER_KEY_ID] && strcmp(embid, row.f[RF_SIGNER_KEY_ID]) != 0) {
                rpt(report, "receipt %lld: embedded public key %s is not the signer's (%s): the "
                            "export was edited", row.id, embid, row.f[RF_SIGNER_KEY_ID]);
                bad++;
            }
        }
    }
    if (k.mode != KEY_STRICT && have_emb && *row.f[RF_SIGNER_KEY_ID]) {
        k.mode = KEY_LENIENT;
        k.have = 1;
        memcpy(k.pk, embpk, sizeof embpk);
        memcpy(k.id, embid, sizeof embid);
        rpt(report, "note: signature checked against the public key embedded in the export "
                    "(key id %s); pass --pubkey FILE to pin the signer", embid);
    } else if (k.mode != KEY_STRICT) {
        k.mode = KEY_LENIENT;
    }
    bad += check_sig(row.id, row.f[RF_SIGNER_KEY_ID], row.signature, hash, &k, report, &R);
    if (R.n_sig_unchecked)
        rpt(report, "note: receipt %lld: signature not checked: no public key (pass --pubkey "
                    "FILE)", row.id);
    rpt(report, "%s: exported receipt %lld, hash %s, %s", bad ? "FAILED" : "OK", row.id, hash,
        R.n_sig_ok ? "signature valid"
        : *row.f[RF_SIGNER_KEY_ID] ? "signature not verified" : "unsigned");
    rc = bad ? 1 : 0;
done:
    free(canon);
    dsv4q_receipt_row_free(&row);
    json_decref(doc);
    return rc;
}
