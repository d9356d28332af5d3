/*
 * receipts_internal.h - shared internals of the receipts subsystem.
 *
 * Owns: the receipt field table (column names == canonical keys, in
 * canonical order), the in-memory row, database open + schema migration,
 * the canonical serializer and hash, and signing-key loading. Shared by
 * receipts.c (store), verify.c (verify/export), keys.c, pin.c, util.c,
 * cli/cmd_receipts.c and the receipts tests; not part of the public API (receipts.h). Every
 * external symbol carries the dsv4q_receipt_ prefix so that it cannot collide
 * with other subsystems linked into libdsv4q.a.
 */
#ifndef DSV4Q_RECEIPTS_INTERNAL_H
#define DSV4Q_RECEIPTS_INTERNAL_H

#include <stddef.h>
#include <sqlite3.h>

#include "base/util.h"
#include "receipts/receipts.h"

/* 'dsv4' - PRAGMA application_id of a receipts database (R1). */
#define DSV4Q_RCPT_APP_ID       0x64737634
/* Latest schema version (PRAGMA user_version) this code writes (R1, R2). */
#define DSV4Q_RCPT_SCHEMA       1
/* Version tag inside the canonical serialization (R4). */
#define DSV4Q_RCPT_CANON_V      1
#define DSV4Q_RCPT_BUSY_MS      10000
/* prev_hash of receipt 1 (R9). */
#define DSV4Q_RCPT_GENESIS \
    "0000000000000000000000000000000000000000000000000000000000000000"

/* Receipt fields, in canonical order (R4). id, hash and signature are not
 * in this table: id is serialized first, hash and signature never. */
enum {
    RF_CREATED, RF_TOOL_VERSION, RF_GIT_COMMIT, RF_COMMAND_LINE, RF_KIND,
    RF_BACKEND_ID, RF_BACKEND_VERSION, RF_BACKEND_SHA256, RF_CHECKPOINT_PIN,
    RF_TOKENS_PIN, RF_CONFIG, RF_PROFILE, RF_WIDTHS, RF_GATE_FILE,
    RF_GATE_SHA256, RF_METRICS, RF_VERDICT, RF_SIGNER_KEY_ID, RF_PREV_HASH,
    RF_COUNT
};

typedef struct dsv4q_receipt_field_info {
    const char *name;  /* column name and canonical key */
    int is_json;       /* 1: value is JSON text, embedded as a JSON value */
} dsv4q_receipt_field_info;

extern const dsv4q_receipt_field_info dsv4q_receipt_fields[RF_COUNT];

/* One stored receipt; every string malloc'd, never NULL once loaded. */
typedef struct dsv4q_receipt_row {
    long long id;
    char *f[RF_COUNT];
    char *hash;       /* 64 hex, as stored */
    char *signature;  /* 128 hex or "" */
} dsv4q_receipt_row;

/* "SELECT id, <fields in table order>, hash, signature FROM receipts" -
 * the column order dsv4q_receipt_row_load expects. */
extern const char dsv4q_receipt_select_sql[];

/* Open the receipts database at path. create = 1: create the file if
 * missing, set WAL, and create/migrate the schema (R1, R2); create = 0:
 * the file must exist and be a dsv4q receipts database (an older schema is
 * migrated). Sets the busy timeout and synchronous=FULL. *corrupt (may be
 * NULL) is set to 1 when the failure is SQLITE_CORRUPT. Returns 0 with
 * *out open, or -1 with err set and *out NULL. */
int dsv4q_receipt_open(const char *path, int create, sqlite3 **out, int *corrupt,
                    char *err, size_t errlen);

/* Load the current row of a statement prepared from dsv4q_receipt_select_sql
 * (optionally with a WHERE/ORDER suffix). Returns 0 or -1 (OOM / NULL
 * column) with err set; the caller frees with dsv4q_receipt_row_free. */
int dsv4q_receipt_row_load(sqlite3_stmt *st, dsv4q_receipt_row *r, char *err, size_t errlen);
void dsv4q_receipt_row_free(dsv4q_receipt_row *r);
/* Receipt `id` of an open database (db_path names it in messages): 0 with
 * *r loaded, 1 if there is no such receipt ("no receipt N in PATH"), -1 on
 * any other error; err set unless 0. The caller frees *r (also after 1). */
int dsv4q_receipt_row_get(sqlite3 *db, const char *db_path, long long id, dsv4q_receipt_row *r, char *err, size_t errlen);

/* Canonical re-serialization of a JSON text (R3): NULL or "" -> "null",
 * else parse (any value, duplicate keys rejected) and dump with
 * JSON_SORT_KEYS|JSON_COMPACT|JSON_ENSURE_ASCII|JSON_ENCODE_ANY. `what`
 * names the field in messages. Malloc'd; NULL with err set on error. */
char *dsv4q_receipt_canon_json(const char *text, const char *what, char *err, size_t errlen);

/* The canonical serialization of a row (R4): malloc'd, NUL-terminated;
 * NULL with err set when a field is not valid UTF-8 / not valid JSON. */
char *dsv4q_receipt_canonical(const dsv4q_receipt_row *r, char *err, size_t errlen);

/* SHA-256 of a NUL-terminated string: raw bytes and lowercase hex. */
void dsv4q_receipt_hash(const char *canonical, unsigned char raw[32],
                     char hex[DSV4Q_SHA256_HEX + 1]);

/* sodium_init() once; -1 with err if libsodium cannot initialize
 * (receipts/util.c). */
int dsv4q_receipt_sodium(char *err, size_t errlen);

/* Load a secret key file (R13): refuses group/other-accessible files and
 * checks that the seed reproduces the stored public key. Returns 0 (sk,
 * pk filled; caller wipes sk), 1 if the file does not exist, -1 on any
 * other error with err set. */
int dsv4q_receipt_load_secret(const char *path, unsigned char sk[64], unsigned char pk[32],
                           char *err, size_t errlen);

/* Load a public key from a .pub file (64 hex digits) or from a secret key
 * file (its pub= line). Returns 0, 1 if the file does not exist, -1 with
 * err set. */
int dsv4q_receipt_load_pubkey(const char *path, unsigned char pk[32], char *err, size_t errlen);

/* Key id: lowercase hex of the first 8 bytes of a public key. */
void dsv4q_receipt_keyid(const unsigned char pk[32], char out[DSV4Q_KEYID_HEX + 1]);

/* 1 if s is exactly n lowercase-or-uppercase hex digits. */
int dsv4q_receipt_is_hex(const char *s, size_t n);

#endif
