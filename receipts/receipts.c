/*
 * receipts.c - the receipt store: schema, canonical serialization, hash,
 * and the one-transaction append that keeps the hash chain linear.
 *
 * Owns: opening and migrating a receipts database, the canonical byte
 * string of a receipt (the only thing that is ever hashed or signed), and
 * dsv4q_receipt_write. It exists so that every measuring command records its
 * result the same way and so that the chain can be re-verified years later
 * by code that reads nothing but the stored row. Verification and export
 * live in verify.c, keys in keys.c, pins in pin.c, sodium's initialisation
 * in util.c, the CLI in cli/cmd_receipts.c. The format is documented
 * byte-for-byte in docs/receipts.md; change neither without the other (and
 * bump R4's "v").
 *
 * DESIGN NOTES - invariants (tests cite them as R1..R14):
 *
 *  R1. Identity. A receipts database has PRAGMA application_id = 0x64737634
 *      ('dsv4') and PRAGMA user_version = its schema version. A database
 *      that has tables but another application_id is refused ("not a dsv4q
 *      receipts database"); a user_version newer than DSV4Q_RCPT_SCHEMA is
 *      refused; a file that is not SQLite is refused ("not an SQLite
 *      database"). Nothing is ever written to a refused file.
 *  R2. Migrations. migrations[v] takes schema v to v+1. They run inside one
 *      BEGIN IMMEDIATE transaction that re-reads user_version first, so two
 *      processes creating the same new database concurrently apply them
 *      exactly once. WAL journal mode is set before the first migration.
 *  R3. Stored == hashed. JSON fields (checkpoint_pin, config, metrics) are
 *      stored in canonical form (sorted keys, compact, ASCII-only; absent =
 *      "null"); text fields are stored as given (absent = ""). Verification
 *      re-canonicalizes the stored JSON, so whitespace/key-order edits that
 *      keep the JSON semantically equal do not change the hash, and any
 *      other edit does.
 *  R4. Canonical serialization: the JSON object
 *      {"v":1,"id":N,"created":..,...,"signer_key_id":..,"prev_hash":..}
 *      with keys in dsv4q_receipt_fields order, no whitespace, strings as
 *      jansson dumps them with JSON_COMPACT|JSON_ENSURE_ASCII, JSON fields
 *      embedded as values. It covers every column except hash and
 *      signature. hash = lowercase hex SHA-256 of those bytes.
 *  R5. Validation before storing: kind in DSV4Q_RECEIPT_KINDS, verdict in
 *      DSV4Q_RECEIPT_VERDICTS, backend_sha256/tokens_pin/gate_sha256 empty
 *      or 64 hex digits (stored lowercase), strings valid UTF-8, JSON
 *      parsable without duplicate keys. Invalid input stores nothing.
 *  R6. Atomicity. One receipt = one BEGIN IMMEDIATE .. COMMIT: read the
 *      head (id, hash), id = head id + 1, prev_hash = head hash (receipt 1:
 *      64 zeros), hash, sign, INSERT. Any error before COMMIT is followed
 *      by ROLLBACK; a writer killed at any instant leaves the receipt
 *      whole or absent (SQLite's WAL guarantees it), never partial.
 *  R7. No forks. BEGIN IMMEDIATE takes the write lock before the head is
 *      read, so concurrent writers (threads or processes) serialize and no
 *      two receipts ever share a prev_hash. Writers wait for the lock for
 *      up to 10 s (a short-sleep busy handler), then fail cleanly.
 *      synchronous=FULL: a receipt that was reported written survives a
 *      crash or power loss.
 *  R8. Hash check. Verification recomputes each receipt's hash from its
 *      stored fields; a mismatch reports "hash mismatch (stored ..,
 *      recomputed ..): a field was edited".
 *  R9. Chain check. Ids are contiguous from 1; receipt 1's prev_hash is
 *      the genesis (64 '0'); receipt N's prev_hash equals the stored hash
 *      of receipt N-1. A gap reports the missing ids as deleted; a link
 *      mismatch reports both hashes. Because id is hashed, moving a row to
 *      another id breaks its hash.
 *  R10. Signatures. signature = Ed25519 detached signature (libsodium
 *      crypto_sign_detached) over the 32 raw bytes of the hash, stored as
 *      128 hex digits; signer_key_id = hex of the first 8 bytes of the
 *      public key, and it is hashed, so a signature cannot be stripped or
 *      re-attributed without breaking the hash. A receipt is signed iff
 *      signer_key_id is non-empty.
 *  R11. Key policy in verification: an explicit public key is strict
 *      (every receipt checked must carry a valid signature by it); the
 *      default .pub is lenient (checks what it signed, counts the rest);
 *      "" checks no signatures.
 *  R12. Damage. SQLITE_CORRUPT anywhere, or a failed PRAGMA quick_check,
 *      makes verification fail (status 1) with "database .. is corrupt";
 *      a missing file / foreign database is an error (status 2).
 *  R13. Keys. Secret key files are created with open(O_CREAT|O_EXCL, 0600)
 *      and never overwritten; a group/other-accessible key is refused for
 *      signing; the seed must reproduce the stored public key; secret
 *      bytes are wiped (sodium_memzero) after use.
 *  R14. Exports verify without the database: they carry every hashed
 *      field; the verifier rebuilds the canonical bytes from the fields and
 *      never trusts the embedded canonical string, hash or public key
 *      unless told to (no --pubkey: it says so in the report).
 */
#include "receipts/receipts_internal.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

const dsv4q_receipt_field_info dsv4q_receipt_fields[RF_COUNT] = {
    [RF_CREATED]         = {"created", 0},
    [RF_TOOL_VERSION]    = {"tool_version", 0},
    [RF_GIT_COMMIT]      = {"git_commit", 0},
    [RF_COMMAND_LINE]    = {"command_line", 0},
    [RF_KIND]            = {"kind", 0},
    [RF_BACKEND_ID]      = {"backend_id", 0},
    [RF_BACKEND_VERSION] = {"backend_version", 0},
    [RF_BACKEND_SHA256]  = {"backend_sha256", 0},
    [RF_CHECKPOINT_PIN]  = {"checkpoint_pin", 1},
    [RF_TOKENS_PIN]      = {"tokens_pin", 0},
    [RF_CONFIG]          = {"config", 1},
    [RF_PROFILE]         = {"profile", 0},
    [RF_WIDTHS]          = {"widths", 0},
    [RF_GATE_FILE]       = {"gate_file", 0},
    [RF_GATE_SHA256]     = {"gate_sha256", 0},
    [RF_METRICS]         = {"metrics", 1},
    [RF_VERDICT]         = {"verdict", 0},
    [RF_SIGNER_KEY_ID]   = {"signer_key_id", 0},
    [RF_PREV_HASH]       = {"prev_hash", 0},
};

const char dsv4q_receipt_select_sql[] =
    "SELECT id, created, tool_version, git_commit, command_line, kind, backend_id,"
    " backend_version, backend_sha256, checkpoint_pin, tokens_pin, config, profile,"
    " widths, gate_file, gate_sha256, metrics, verdict, signer_key_id, prev_hash,"
    " hash, signature FROM receipts";

/* migrations[v]: schema v -> v+1 (R2). Append only; never edit a shipped one. */
static const char *const migrations[DSV4Q_RCPT_SCHEMA] = {
    /* 0 -> 1 */
    "CREATE TABLE receipts ("
    " id INTEGER PRIMARY KEY,"
    " created TEXT NOT NULL,"
    " tool_version TEXT NOT NULL,"
    " git_commit TEXT NOT NULL,"
    " command_line TEXT NOT NULL,"
    " kind TEXT NOT NULL CHECK (kind IN"
    "  ('sensitivity','qualify','margins','golden','ablate','replay')),"
    " backend_id TEXT NOT NULL,"
    " backend_version TEXT NOT NULL,"
    " backend_sha256 TEXT NOT NULL,"
    " checkpoint_pin TEXT NOT NULL,"
    " tokens_pin TEXT NOT NULL,"
    " config TEXT NOT NULL,"
    " profile TEXT NOT NULL,"
    " widths TEXT NOT NULL,"
    " gate_file TEXT NOT NULL,"
    " gate_sha256 TEXT NOT NULL,"
    " metrics TEXT NOT NULL,"
    " verdict TEXT NOT NULL CHECK (verdict IN ('pass','fail','info','error')),"
    " signer_key_id TEXT NOT NULL,"
    " prev_hash TEXT NOT NULL,"
    " hash TEXT NOT NULL UNIQUE,"
    " signature TEXT NOT NULL);"
    "CREATE INDEX receipts_by_kind ON receipts(kind, id);",
};

static const char *const kinds[] = {"sensitivity", "qualify", "margins",
                                    "golden", "ablate", "replay"};
static const char *const verdicts[] = {"pass", "fail", "info", "error"};

int dsv4q_receipt_is_hex(const char *s, size_t n)
{
    size_t i;
    if (!s || strlen(s) != n)
        return 0;
    for (i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

void dsv4q_receipt_hash(const char *canonical, unsigned char raw[32],
                     char hex[DSV4Q_SHA256_HEX + 1])
{
    crypto_hash_sha256(raw, (const unsigned char *)canonical, strlen(canonical));
    sodium_bin2hex(hex, DSV4Q_SHA256_HEX + 1, raw, 32);
}

const char *dsv4q_receipt_default_db(void)
{
    const char *e = getenv("DSV4Q_DB");
    return (e && *e) ? e : "dsv4q.db";
}

/* ---- growable string ---------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *q;
        while (cap < b->n + n + 1)
            cap *= 2;
        q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* ---- canonical serialization (R3, R4) ------------------------------------ */

char *dsv4q_receipt_canon_json(const char *text, const char *what, char *err, size_t errlen)
{
    char *out = NULL;
    json_t *v = NULL;
    json_error_t je;

    if (!text || !*text) {
        out = strdup("null");
        if (!out) dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        dsv4q_errf(err, errlen, "%s is not valid JSON (line %d column %d: %s)", what, je.line, je.column, je.text);
        goto done;
    }
    out = json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
    if (!out) dsv4q_errf(err, errlen, "%s: cannot serialize JSON", what);
done:
    json_decref(v);
    return out;
}

char *dsv4q_receipt_canonical(const dsv4q_receipt_row *r, char *err, size_t errlen)
{
    sbuf b = {0};
    char num[32];
    char *piece = NULL;
    json_t *s = NULL;
    int i, ok = 0;

    snprintf(num, sizeof num, "%lld", r->id);
    sb_puts(&b, "{\"v\":");
    sb_puts(&b, DSV4Q_RCPT_CANON_V == 1 ? "1" : "?");
    sb_puts(&b, ",\"id\":");
    sb_puts(&b, num);
    for (i = 0; i < RF_COUNT; i++) {
        const char *val = r->f[i] ? r->f[i] : "";
        sb_puts(&b, ",\"");
        sb_puts(&b, dsv4q_receipt_fields[i].name);
        sb_puts(&b, "\":");
        if (dsv4q_receipt_fields[i].is_json) {
            piece = dsv4q_receipt_canon_json(val, dsv4q_receipt_fields[i].name, err, errlen);
            if (!piece)
                goto done;
        } else {
            s = json_string(val);
            if (!s) {
                dsv4q_errf(err, errlen, "%s is not valid UTF-8", dsv4q_receipt_fields[i].name);
                goto done;
            }
            piece = json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
            json_decref(s);
            s = NULL;
            if (!piece) {
                dsv4q_errf(err, errlen, "%s: cannot serialize", dsv4q_receipt_fields[i].name);
                goto done;
            }
        }
        sb_puts(&b, piece);
        free(piece);
        piece = NULL;
    }
    sb_puts(&b, "}");
    if (b.oom) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    ok = 1;
done:
    free(piece);
    json_decref(s);
    if (!ok) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- rows ----------------------------------------------------------------- */

void dsv4q_receipt_row_free(dsv4q_receipt_row *r)
{
    int i;
    if (!r)
        return;
    for (i = 0; i < RF_COUNT; i++)
        free(r->f[i]);
    free(r->hash);
    free(r->signature);
    memset(r, 0, sizeof *r);
}

static char *col_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);
    char *p;
    if (!t)
        return NULL;
    p = malloc((size_t)n + 1);
    if (!p)
        return NULL;
    memcpy(p, t, (size_t)n);
    p[n] = '\0';
    return p;
}

int dsv4q_receipt_row_load(sqlite3_stmt *st, dsv4q_receipt_row *r, char *err, size_t errlen)
{
    int i, rc = -1;

    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    for (i = 0; i < RF_COUNT; i++) {
        const char *cn = sqlite3_column_name(st, i + 1);
        if (!cn || strcmp(cn, dsv4q_receipt_fields[i].name) != 0) {
            dsv4q_errf(err, errlen, "internal: column %d is %s, expected %s", i + 1, cn ? cn : "?",
                       dsv4q_receipt_fields[i].name);
            goto done;
        }
        r->f[i] = col_dup(st, i + 1);
        if (!r->f[i]) {
            dsv4q_errf(err, errlen, "receipt %lld: column %s is NULL", r->id, dsv4q_receipt_fields[i].name);
            goto done;
        }
    }
    r->hash = col_dup(st, RF_COUNT + 1);
    r->signature = col_dup(st, RF_COUNT + 2);
    if (!r->hash || !r->signature) {
        dsv4q_errf(err, errlen, "receipt %lld: hash or signature is NULL", r->id);
        goto done;
    }
    rc = 0;
done:
    if (rc)
        dsv4q_receipt_row_free(r);
    return rc;
}

int dsv4q_receipt_row_get(sqlite3 *db, const char *db_path, long long id, dsv4q_receipt_row *r, char *err, size_t errlen)
{
    char sql[1024];
    sqlite3_stmt *st = NULL;
    memset(r, 0, sizeof *r);
    snprintf(sql, sizeof sql, "%s WHERE id = ?1", dsv4q_receipt_select_sql);
    int src = sqlite3_prepare_v2(db, sql, -1, &st, NULL), rc = -1;
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        src = sqlite3_step(st);
    }
    if (src == SQLITE_DONE) {
        dsv4q_errf(err, errlen, "no receipt %lld in %s", id, db_path);
        rc = 1;
    } else if (src != SQLITE_ROW) {
        dsv4q_errf(err, errlen, "database %s: reading receipt %lld failed: %s", db_path, id, sqlite3_errmsg(db));
    } else {
        rc = dsv4q_receipt_row_load(st, r, err, errlen);
    }
    sqlite3_finalize(st);
    return rc;
}

/* ---- open / migrate (R1, R2) ---------------------------------------------- */

/* Short-sleep busy handler (R7): waits up to DSV4Q_RCPT_BUSY_MS per lock
 * attempt, sleeping 0.2..5 ms with jitter so that two writers interleave
 * fairly (SQLite's default handler backs off to 100 ms sleeps). */
static int busy_cb(void *arg, int n)
{
    static _Thread_local struct timespec t0;
    struct timespec now, ts;
    long long el_ms;
    long us;

    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (n == 0)
        t0 = now;
    el_ms = (long long)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    if (el_ms >= DSV4Q_RCPT_BUSY_MS)
        return 0;
    us = n < 8 ? 200 : n < 100 ? 1000 : 5000;
    us += (long)randombytes_uniform((uint32_t)us);
    ts.tv_sec = 0;
    ts.tv_nsec = us * 1000L;
    nanosleep(&ts, NULL);
    return 1;
}

/* Describe a failed SQLite call on `path` (R1, R12). */
static void db_error(sqlite3 *db, int src, const char *path, const char *doing,
                     int *corrupt, char *err, size_t errlen)
{
    const char *m = db ? sqlite3_errmsg(db) : sqlite3_errstr(src);
    switch (src & 0xff) {
    case SQLITE_CORRUPT:
        if (corrupt)
            *corrupt = 1;
        dsv4q_errf(err, errlen, "database %s is corrupt (%s while %s)", path, m, doing);
        break;
    case SQLITE_NOTADB: dsv4q_errf(err, errlen, "%s is not an SQLite database (%s)", path, m); break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        dsv4q_errf(err, errlen,
                   "database %s is locked by another connection (waited up to %d s) "
                   "while %s (%s)",
                   path, DSV4Q_RCPT_BUSY_MS / 1000, doing, m);
        break;
    default: dsv4q_errf(err, errlen, "database %s: %s failed: %s", path, doing, m); break;
    }
}

/* Read application_id, user_version and the number of schema objects in
 * ONE statement - one read snapshot, so a concurrent migration is seen
 * either entirely or not at all - and classify the database (R1, R2).
 * Returns 0 ours, 1 fresh (empty), -1 error. */
static int identify(sqlite3 *db, const char *path, long long *ver, int *corrupt,
                    char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    long long app = 0, nobj = 0;
    int rc = -1, src;

    src = sqlite3_prepare_v2(db,
                             "SELECT (SELECT application_id FROM pragma_application_id),"
                             " (SELECT user_version FROM pragma_user_version),"
                             " (SELECT count(*) FROM sqlite_master)",
                             -1, &st, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        db_error(db, src, path, "reading the schema", corrupt, err, errlen);
        goto done;
    }
    app = sqlite3_column_int64(st, 0);
    *ver = sqlite3_column_int64(st, 1);
    nobj = sqlite3_column_int64(st, 2);
    if (app == DSV4Q_RCPT_APP_ID) {
        if (*ver < 0) {
            dsv4q_errf(err, errlen, "database %s has receipts schema version %lld; expected 0 to %d", path, *ver,
                       DSV4Q_RCPT_SCHEMA);
            goto done;
        }
        if (*ver > DSV4Q_RCPT_SCHEMA) {
            dsv4q_errf(err, errlen,
                       "database %s has receipts schema version %lld, newer than this "
                       "dsv4q %s supports (%d); upgrade dsv4q",
                       path, *ver, DSV4Q_VERSION, DSV4Q_RCPT_SCHEMA);
            goto done;
        }
        rc = 0;
    } else if (app == 0 && nobj == 0) {
        rc = 1;
    } else {
        dsv4q_errf(err, errlen,
                   "%s is not a dsv4q receipts database (application_id 0x%08llx, %lld "
                   "schema objects)",
                   path, (unsigned long long)app & 0xffffffffULL, nobj);
    }
done:
    sqlite3_finalize(st);
    return rc;
}

static int exec_sql(sqlite3 *db, const char *sql, const char *path, const char *doing,
                    int *corrupt, char *err, size_t errlen)
{
    int src = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (src != SQLITE_OK) {
        db_error(db, src, path, doing, corrupt, err, errlen);
        return -1;
    }
    return 0;
}

/* Switch a database to WAL (R2). Changing the journal mode needs an
 * exclusive lock and SQLite reports SQLITE_BUSY for it without calling the
 * busy handler, so a fresh database opened by several processes at once
 * retries here, for up to the same 10 s. */
static int ensure_wal(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    struct timespec t0, now, nap = {0, 1000000L};
    int rc = -1, src;
    const unsigned char *mode;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        src = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW || (src & 0xff) != SQLITE_BUSY)
            break;
        sqlite3_finalize(st);
        st = NULL;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000LL + (now.tv_nsec - t0.tv_nsec) / 1000000 >=
            DSV4Q_RCPT_BUSY_MS)
            break;
        nap.tv_nsec = 500000L + (long)randombytes_uniform(1000000);
        nanosleep(&nap, NULL);
    }
    if (src != SQLITE_ROW) {
        db_error(db, src, path, "setting WAL mode", NULL, err, errlen);
        goto done;
    }
    mode = sqlite3_column_text(st, 0);
    if (!mode || strcmp((const char *)mode, "wal") != 0) {
        dsv4q_errf(err, errlen, "database %s: cannot use WAL journal mode (got %s)", path,
                   mode ? (const char *)mode : "?");
        goto done;
    }
    rc = 0;
done:
    sqlite3_finalize(st);
    return rc;
}

static int migrate(sqlite3 *db, const char *path, int *corrupt, char *err, size_t errlen)
{
    long long ver = 0;
    int rc = -1, in_txn = 0, kind;
    char sql[128];

    if (exec_sql(db, "BEGIN IMMEDIATE", path, "starting the schema migration", corrupt, err,
                 errlen))
        goto done;
    in_txn = 1;
    kind = identify(db, path, &ver, corrupt, err, errlen); /* re-read under the lock (R2) */
    if (kind < 0)
        goto done;
    for (; ver < DSV4Q_RCPT_SCHEMA; ver++)
        if (exec_sql(db, migrations[ver], path, "migrating the schema", corrupt, err, errlen))
            goto done;
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d;",
             DSV4Q_RCPT_APP_ID, DSV4Q_RCPT_SCHEMA);
    if (exec_sql(db, sql, path, "stamping the schema version", corrupt, err, errlen))
        goto done;
    if (exec_sql(db, "COMMIT", path, "committing the schema migration", corrupt, err, errlen))
        goto done;
    in_txn = 0;
    rc = 0;
done:
    if (in_txn)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* The schema objects of db, one "type name on tbl_name: sql" line each,
 * sorted (malloc'd; NULL on error). Reads sqlite_master only: bounded by
 * the number of objects, whatever the database defines. */
static char *schema_listing(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    size_t n = 0, cap = 0;
    if (sqlite3_prepare_v2(db, "SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || ifnull(sql, '')"
                           " FROM sqlite_master ORDER BY 1 LIMIT 1000", -1, &st, NULL) != SQLITE_OK)
        return NULL;
    for (;;) {
        int src = sqlite3_step(st);
        if (src == SQLITE_DONE) break;
        if (src != SQLITE_ROW) { free(out); out = NULL; break; }
        const char *t = (const char *)sqlite3_column_text(st, 0);
        size_t k = t ? strlen(t) : 0;
        if (n + k + 2 > cap) {
            cap = (n + k + 2) * 2;
            char *nb = realloc(out, cap);
            if (!nb) { free(out); out = NULL; break; }
            out = nb;
        }
        memcpy(out + n, t ? t : "", k);
        n += k;
        out[n++] = '\n';
        out[n] = 0;
    }
    sqlite3_finalize(st);
    if (!out && n == 0) out = calloc(1, 1);
    return out;
}

/* R1 (schema): a database that claims to be ours must hold exactly the
 * objects the migrations create - no view standing in for the table (a
 * recursive-CTE view makes every query unbounded), no extra trigger, no
 * column of another type. Compared against a fresh in-memory database. */
static int check_schema(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3 *ref = NULL;
    char *want = NULL, *got = NULL;
    int rc = -1;
    if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        goto done;
    for (int v = 0; v < DSV4Q_RCPT_SCHEMA; v++)
        if (sqlite3_exec(ref, migrations[v], NULL, NULL, NULL) != SQLITE_OK)
            goto done;
    want = schema_listing(ref);
    got = schema_listing(db);
    if (!want || !got) {
        dsv4q_errf(err, errlen, "database %s: cannot read its schema (%s)", path, sqlite3_errmsg(db));
        goto done;
    }
    if (strcmp(want, got) != 0) {
        /* name the first line that differs */
        const char *a = want, *b = got;
        while (*a && *a == *b)
            a++, b++;
        while (b > got && b[-1] != '\n') b--;
        while (a > want && a[-1] != '\n') a--;
        const char *be = strchr(b, '\n'), *ae = strchr(a, '\n');
        dsv4q_errf(err, errlen,
                   "%s has an unexpected receipts schema (refused: it could run unbounded queries "
                   "or store what dsv4q does not check): found \"%.*s\" where \"%.*s\" was expected",
                   path, be ? (int)(be - b) : (int)strlen(b), b, ae ? (int)(ae - a) : (int)strlen(a), a);
        goto done;
    }
    rc = 0;
done:
    if (rc && err && errlen && !err[0]) dsv4q_errf(err, errlen, "database %s: cannot check its schema", path);
    free(want);
    free(got);
    sqlite3_close(ref);
    return rc;
}

int dsv4q_receipt_open(const char *path, int create, sqlite3 **out, int *corrupt,
                    char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    long long ver = 0;
    int rc = -1, src, kind;
    struct stat sb;

    *out = NULL;
    if (corrupt)
        *corrupt = 0;
    if (!path || !*path)
        path = dsv4q_receipt_default_db();
    if (!create && stat(path, &sb) != 0) {
        dsv4q_errf(err, errlen, "cannot open receipts database %s: %s", path, strerror(errno));
        goto done;
    }
    src = sqlite3_open_v2(path, &db,
                          SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0), NULL);
    if (src != SQLITE_OK) {
        dsv4q_errf(err, errlen, "cannot open receipts database %s: %s", path,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(src));
        goto done;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_handler(db, busy_cb, NULL);
    kind = identify(db, path, &ver, corrupt, err, errlen);
    if (kind < 0)
        goto done;
    if (kind == 1 && !create) {
        dsv4q_errf(err, errlen, "%s is not a dsv4q receipts database (it is empty)", path);
        goto done;
    }
    if (create && ensure_wal(db, path, err, errlen))
        goto done;
    if (exec_sql(db, "PRAGMA synchronous=FULL", path, "setting synchronous", corrupt, err,
                 errlen))
        goto done;
    if ((kind == 1 || ver < DSV4Q_RCPT_SCHEMA) && migrate(db, path, corrupt, err, errlen))
        goto done;
    if (err && errlen) err[0] = 0;
    if (check_schema(db, path, err, errlen))
        goto done;
    *out = db;
    db = NULL;
    rc = 0;
done:
    sqlite3_close(db);
    return rc;
}

int dsv4q_receipt_precheck(const char *db_path, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    int corrupt = 0;
    if (!db_path || !*db_path)
        db_path = dsv4q_receipt_default_db();
    struct stat sb;
    if (stat(db_path, &sb) != 0 && errno == ENOENT) {
        /* not created here: a command that fails before measuring records nothing;
         * only the directory must take the new file */
        char dir[4096];
        const char *sl = strrchr(db_path, '/');
        if (!sl) snprintf(dir, sizeof dir, ".");
        else if (sl == db_path) snprintf(dir, sizeof dir, "/");
        else snprintf(dir, sizeof dir, "%.*s", (int)(sl - db_path), db_path);
        if (access(dir, W_OK | X_OK) != 0) {
            dsv4q_errf(err, errlen, "cannot create receipts database %s: directory %s: %s", db_path, dir,
                       strerror(errno));
            return -1;
        }
        return 0;
    }
    if (dsv4q_receipt_open(db_path, 0, &db, &corrupt, err, errlen))
        return -1;
    int rc = 0;
    if (sqlite3_db_readonly(db, "main") == 1) {
        dsv4q_errf(err, errlen,
                   "receipts database %s is read-only: no receipt could be stored "
                   "(use --db or DSV4Q_DB for a writable one)",
                   db_path);
        rc = -1;
    }
    sqlite3_close(db);
    return rc;
}

/* ---- write (R5, R6, R7) ------------------------------------------------------ */

static int in_list(const char *s, const char *const *list, size_t n)
{
    size_t i;
    for (i = 0; s && i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

/* Empty or 64 hex digits -> malloc'd lowercase copy; else NULL + err. */
static char *hex_field(const char *v, const char *what, char *err, size_t errlen)
{
    char *p;
    size_t i;
    if (!v)
        v = "";
    if (*v && !dsv4q_receipt_is_hex(v, DSV4Q_SHA256_HEX)) {
        dsv4q_errf(err, errlen, "%s must be empty or 64 hex digits (SHA-256), got \"%.80s\"", what, v);
        return NULL;
    }
    p = strdup(v);
    if (!p) {
        dsv4q_errf(err, errlen, "out of memory");
        return NULL;
    }
    for (i = 0; p[i]; i++)
        p[i] = (char)tolower((unsigned char)p[i]);
    return p;
}

static char *text_field(const char *v, char *err, size_t errlen)
{
    char *p = strdup(v ? v : "");
    if (!p) dsv4q_errf(err, errlen, "out of memory");
    return p;
}

/* Fill every row field except id and prev_hash from r (R3, R5). */
static int fill_row(dsv4q_receipt_row *row, const dsv4q_receipt *r, const char *keyid,
                    char *err, size_t errlen)
{
    char created[32];
    time_t now = time(NULL);
    struct tm tm;
    int i, rc = -1;

    if (!in_list(r->kind, kinds, sizeof kinds / sizeof *kinds)) {
        dsv4q_errf(err, errlen, "receipt kind \"%s\" is not one of: %s", r->kind ? r->kind : "(null)",
                   DSV4Q_RECEIPT_KINDS);
        goto done;
    }
    if (!in_list(r->verdict, verdicts, sizeof verdicts / sizeof *verdicts)) {
        dsv4q_errf(err, errlen, "receipt verdict \"%s\" is not one of: %s", r->verdict ? r->verdict : "(null)",
                   DSV4Q_RECEIPT_VERDICTS);
        goto done;
    }
    gmtime_r(&now, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);

    if (!(row->f[RF_CREATED] = text_field(created, err, errlen)) ||
        !(row->f[RF_TOOL_VERSION] = text_field(DSV4Q_VERSION, err, errlen)) ||
        !(row->f[RF_GIT_COMMIT] = text_field(dsv4q_git_commit(), err, errlen)) ||
        !(row->f[RF_COMMAND_LINE] = text_field(r->command_line, err, errlen)) ||
        !(row->f[RF_KIND] = text_field(r->kind, err, errlen)) ||
        !(row->f[RF_BACKEND_ID] = text_field(r->backend_id, err, errlen)) ||
        !(row->f[RF_BACKEND_VERSION] = text_field(r->backend_version, err, errlen)) ||
        !(row->f[RF_BACKEND_SHA256] = hex_field(r->backend_sha256, "backend_sha256", err, errlen)) ||
        !(row->f[RF_CHECKPOINT_PIN] =
              dsv4q_receipt_canon_json(r->checkpoint_pin_json, "checkpoint_pin", err, errlen)) ||
        !(row->f[RF_TOKENS_PIN] = hex_field(r->tokens_pin, "tokens_pin", err, errlen)) ||
        !(row->f[RF_CONFIG] = dsv4q_receipt_canon_json(r->config_json, "config", err, errlen)) ||
        !(row->f[RF_PROFILE] = text_field(r->profile, err, errlen)) ||
        !(row->f[RF_WIDTHS] = text_field(r->widths, err, errlen)) ||
        !(row->f[RF_GATE_FILE] = text_field(r->gate_file, err, errlen)) ||
        !(row->f[RF_GATE_SHA256] = hex_field(r->gate_sha256, "gate_sha256", err, errlen)) ||
        !(row->f[RF_METRICS] = dsv4q_receipt_canon_json(r->metrics_json, "metrics", err, errlen)) ||
        !(row->f[RF_VERDICT] = text_field(r->verdict, err, errlen)) ||
        !(row->f[RF_SIGNER_KEY_ID] = text_field(keyid, err, errlen)))
        goto done;
    /* UTF-8 check of every text field, before touching the database (R5). */
    for (i = 0; i < RF_COUNT; i++) {
        json_t *s;
        if (i == RF_PREV_HASH || dsv4q_receipt_fields[i].is_json)
            continue;
        s = json_string(row->f[i]);
        if (!s) {
            dsv4q_errf(err, errlen, "%s is not valid UTF-8", dsv4q_receipt_fields[i].name);
            goto done;
        }
        json_decref(s);
    }
    rc = 0;
done:
    return rc;
}

/* "INSERT INTO receipts(id, <fields>, hash, signature) VALUES(?, ...)". */
static char *insert_sql(void)
{
    sbuf b = {0};
    int i;
    sb_puts(&b, "INSERT INTO receipts(id");
    for (i = 0; i < RF_COUNT; i++) {
        sb_puts(&b, ", ");
        sb_puts(&b, dsv4q_receipt_fields[i].name);
    }
    sb_puts(&b, ", hash, signature) VALUES(?");
    for (i = 0; i < RF_COUNT + 2; i++)
        sb_puts(&b, ", ?");
    sb_puts(&b, ")");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int dsv4q_receipt_write(const char *db_path, const dsv4q_receipt *r, const char *key_path,
                        long long *id_out, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    dsv4q_receipt_row row;
    unsigned char sk[64], pk[32], raw[32], sig[64];
    char keyid[DSV4Q_KEYID_HEX + 1] = "", hash[DSV4Q_SHA256_HEX + 1];
    char sighex[DSV4Q_SIG_HEX + 1] = "", defkey[4096];
    char *canon = NULL, *sql = NULL;
    long long last_id = 0;
    int rc = -1, in_txn = 0, have_key = 0, src, i, lr;

    memset(&row, 0, sizeof row);
    if (!db_path || !*db_path)
        db_path = dsv4q_receipt_default_db();
    if (!r) {
        dsv4q_errf(err, errlen, "no receipt given");
        goto done;
    }
    if (dsv4q_receipt_sodium(err, errlen))
        goto done;

    /* The key is read before the transaction: no file I/O under the lock. */
    if (!key_path) {
        if (dsv4q_key_default_path(defkey, sizeof defkey)) {
            fprintf(stderr, "dsv4q: no signing key location (no home directory); "
                            "receipt stored unsigned but chained\n");
        } else {
            lr = dsv4q_receipt_load_secret(defkey, sk, pk, err, errlen);
            if (lr < 0)
                goto done;
            if (lr == 1)
                fprintf(stderr, "dsv4q: no signing key at %s; receipt stored unsigned but "
                                "chained (create one with `dsv4q keygen`)\n", defkey);
            have_key = (lr == 0);
        }
    } else if (*key_path) {
        lr = dsv4q_receipt_load_secret(key_path, sk, pk, err, errlen);
        if (lr == 1) dsv4q_errf(err, errlen, "no signing key at %s", key_path);
        if (lr != 0)
            goto done;
        have_key = 1;
    }
    if (have_key)
        dsv4q_receipt_keyid(pk, keyid);
    if (fill_row(&row, r, keyid, err, errlen))
        goto done;
    if (!(sql = insert_sql())) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }

    if (dsv4q_receipt_open(db_path, 1, &db, NULL, err, errlen))
        goto done;
    if (exec_sql(db, "BEGIN IMMEDIATE", db_path, "starting the receipt transaction", NULL,
                 err, errlen))
        goto done;
    in_txn = 1;

    /* Head of the chain, read under the write lock (R6, R7). */
    src = sqlite3_prepare_v2(db, "SELECT id, hash FROM receipts ORDER BY id DESC LIMIT 1", -1,
                             &st, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
        const unsigned char *h = sqlite3_column_text(st, 1);
        last_id = sqlite3_column_int64(st, 0);
        row.f[RF_PREV_HASH] = h ? strdup((const char *)h) : NULL;
    } else if (src == SQLITE_DONE) {
        row.f[RF_PREV_HASH] = strdup(DSV4Q_RCPT_GENESIS);
    } else {
        db_error(db, src, db_path, "reading the chain head", NULL, err, errlen);
        goto done;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!row.f[RF_PREV_HASH]) {
        dsv4q_errf(err, errlen, "database %s: receipt %lld has no hash", db_path, last_id);
        goto done;
    }
    row.id = last_id + 1;
    assert(src == SQLITE_ROW || !strcmp(row.f[RF_PREV_HASH], DSV4Q_RCPT_GENESIS));   /* R9: receipt 1 */

    if (!(canon = dsv4q_receipt_canonical(&row, err, errlen)))
        goto done;
    assert(!strncmp(canon, "{\"v\":1,\"id\":", 12));   /* R4: the version tag, then the id */
    dsv4q_receipt_hash(canon, raw, hash);
    assert(strlen(hash) == DSV4Q_SHA256_HEX);   /* R4: lowercase hex SHA-256 */
    if (have_key) {
        crypto_sign_detached(sig, NULL, raw, sizeof raw, sk);
        sodium_bin2hex(sighex, sizeof sighex, sig, sizeof sig);
    }
    /* R10: signed iff signer_key_id is non-empty, and the signature is 128 hex */
    assert(have_key == (row.f[RF_SIGNER_KEY_ID][0] != 0) && strlen(sighex) == (have_key ? 128u : 0u));

    src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (src != SQLITE_OK) {
        db_error(db, src, db_path, "preparing the insert", NULL, err, errlen);
        goto done;
    }
    sqlite3_bind_int64(st, 1, row.id);
    for (i = 0; i < RF_COUNT; i++)
        sqlite3_bind_text(st, i + 2, row.f[i], -1, SQLITE_STATIC);
    sqlite3_bind_text(st, RF_COUNT + 2, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, RF_COUNT + 3, sighex, -1, SQLITE_STATIC);
    src = sqlite3_step(st);
    if (src != SQLITE_DONE) {
        db_error(db, src, db_path, "inserting the receipt", NULL, err, errlen);
        goto done;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (exec_sql(db, "COMMIT", db_path, "committing the receipt", NULL, err, errlen))
        goto done;
    in_txn = 0;
    if (id_out)
        *id_out = row.id;
    rc = 0;
done:
    sqlite3_finalize(st);
    if (in_txn)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    sodium_memzero(sk, sizeof sk);
    free(canon);
    free(sql);
    dsv4q_receipt_row_free(&row);
    return rc;
}
