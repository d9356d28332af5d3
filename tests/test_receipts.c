/*
 * test_receipts.c - functional tests of the receipts subsystem.
 *
 * Owns: the checks that each tampering the verifier promises to detect is
 * detected with the documented message (R8..R12), that the canonical
 * serialization is byte-exact (R3, R4: a known-answer test mirrored in
 * docs/receipts.md), that invalid input stores nothing (R5), that keys are
 * created 0600 and never overwritten (R13), that exports verify on their own
 * (R14), pins, and the CLI exit statuses. Concurrency and crash-safety
 * (R6, R7) are in test_receipts_stress.c. Everything runs in a mkdtemp
 * directory that is removed afterwards.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tests/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "cli/cmds.h"
#include "receipts/receipts.h"
#include "receipts/receipts_internal.h"

/* ---- fixture ---------------------------------------------------------------- */

typedef struct fx {
    char dir[64];
    char db[128];
    char key[128];   /* signing key (created by setup) */
    char pub[136];
    char key2[128];  /* a second, unrelated key */
    char pub2[136];
} fx;

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    char err[256];
    assert_non_null(f);
    strcpy(f->dir, "/tmp/dsv4q-rcpt-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof f->db, "%s/r.db", f->dir);
    snprintf(f->key, sizeof f->key, "%s/k1.key", f->dir);
    snprintf(f->pub, sizeof f->pub, "%s.pub", f->key);
    snprintf(f->key2, sizeof f->key2, "%s/k2.key", f->dir);
    snprintf(f->pub2, sizeof f->pub2, "%s.pub", f->key2);
    assert_int_equal(dsv4q_keygen(f->key, NULL, err, sizeof err), 0);
    /* Keep the developer's real key and db out of every test. */
    setenv("DSV4Q_KEY", "/nonexistent/dsv4q-test.key", 1);
    setenv("DSV4Q_DB", f->db, 1);
    setenv("DSV4Q_GIT_COMMIT", "testcommit", 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static dsv4q_receipt sample(const char *metrics)
{
    dsv4q_receipt r;
    memset(&r, 0, sizeof r);
    r.kind = "qualify";
    r.command_line = "dsv4q qualify --backend cuda";
    r.backend_id = "cuda";
    r.backend_version = "12.4";
    r.config_json = "{\"dim\": 64, \"n_layers\": 2}";
    r.profile = "fp8-e4m3";
    r.widths = "32,64";
    r.metrics_json = metrics;
    r.verdict = "pass";
    return r;
}

/* Write n receipts (metrics {"i":k}), signed with key (or "" unsigned). */
static void write_n(const char *db, const char *key, int n)
{
    char err[256], m[64];
    long long id;
    int k;
    for (k = 0; k < n; k++) {
        dsv4q_receipt r;
        snprintf(m, sizeof m, "{\"i\":%d,\"max_err\":0.25}", k);
        r = sample(m);
        if (dsv4q_receipt_write(db, &r, key, &id, err, sizeof err) != 0)
            fail_msg("write: %s", err);
    }
}

static void sql(const char *db, const char *q)
{
    sqlite3 *h = NULL;
    char *e = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    if (sqlite3_exec(h, q, NULL, NULL, &e) != SQLITE_OK)
        fail_msg("sql %s: %s", q, e);
    sqlite3_close(h);
}

static long long sql_int(const char *db, const char *q)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, q, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* Run verify; return its status, the report in *out (caller frees). */
static int verify(const char *db, long long id, const char *pub, char **out,
                  dsv4q_verify_result *res, char *err, size_t errlen)
{
    size_t n = 0;
    FILE *m = open_memstream(out, &n);
    int r;
    assert_non_null(m);
    r = dsv4q_receipt_verify(db, id, pub, m, res, err, errlen);
    fclose(m);
    return r;
}

/* verify under the default key with unsigned receipts allowed. */
static int verify_allow(const char *db, long long id, char **out, dsv4q_verify_result *res)
{
    size_t n = 0;
    char err[256] = "";
    FILE *m = open_memstream(out, &n);
    int r;
    assert_non_null(m);
    r = dsv4q_receipt_verify_opts(db, id, NULL, 1, m, res, err, sizeof err);
    fclose(m);
    return r;
}

static int verify_json(const char *text, const char *pub, char **out)
{
    size_t n = 0;
    char err[256] = "";
    FILE *m = open_memstream(out, &n);
    int r;
    assert_non_null(m);
    r = dsv4q_receipt_verify_json(text, pub, m, err, sizeof err);
    fclose(m);
    if (r < 0)
        fail_msg("verify_json: %s", err);
    return r;
}

static void expect(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, hay);
}

static char *keyid_of(const char *pubpath, char buf[DSV4Q_KEYID_HEX + 1])
{
    unsigned char pk[32];
    char err[256];
    assert_int_equal(dsv4q_receipt_load_pubkey(pubpath, pk, err, sizeof err), 0);
    dsv4q_receipt_keyid(pk, buf);
    return buf;
}

/* ---- canonical form (R3, R4) --------------------------------------------------- */

/* Known-answer test: the exact bytes and hash, mirrored in docs/receipts.md. */
static void test_canonical_known_answer(void **state)
{
    static const char want[] =
        "{\"v\":1,\"id\":1,\"created\":\"2025-01-02T03:04:05Z\",\"tool_version\":\"0.1.0\","
        "\"git_commit\":\"abc1234\",\"command_line\":\"dsv4q qualify --gate g.json\","
        "\"kind\":\"qualify\",\"backend_id\":\"cuda\",\"backend_version\":\"12.4\","
        "\"backend_sha256\":\"\",\"checkpoint_pin\":null,\"tokens_pin\":\"\","
        "\"config\":{\"a\":\"\\u00E9\",\"b\":1},\"profile\":\"fp8\",\"widths\":\"32,64\","
        "\"gate_file\":\"g.json\",\"gate_sha256\":\"\",\"metrics\":{\"max_ulp\":2.5},"
        "\"verdict\":\"pass\",\"signer_key_id\":\"\",\"prev_hash\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\"}";
    dsv4q_receipt_row row;
    char *vals[RF_COUNT] = {
        [RF_CREATED] = "2025-01-02T03:04:05Z", [RF_TOOL_VERSION] = "0.1.0",
        [RF_GIT_COMMIT] = "abc1234", [RF_COMMAND_LINE] = "dsv4q qualify --gate g.json",
        [RF_KIND] = "qualify", [RF_BACKEND_ID] = "cuda", [RF_BACKEND_VERSION] = "12.4",
        [RF_BACKEND_SHA256] = "", [RF_CHECKPOINT_PIN] = "", [RF_TOKENS_PIN] = "",
        [RF_CONFIG] = "{ \"b\": 1, \"a\": \"\xc3\xa9\" }", [RF_PROFILE] = "fp8",
        [RF_WIDTHS] = "32,64", [RF_GATE_FILE] = "g.json", [RF_GATE_SHA256] = "",
        [RF_METRICS] = "{\"max_ulp\": 2.5}", [RF_VERDICT] = "pass", [RF_SIGNER_KEY_ID] = "",
        [RF_PREV_HASH] = DSV4Q_RCPT_GENESIS,
    };
    char err[256], hex[65], *c;
    unsigned char raw[32];
    (void)state;
    memset(&row, 0, sizeof row);
    row.id = 1;
    memcpy(row.f, vals, sizeof vals);
    c = dsv4q_receipt_canonical(&row, err, sizeof err);
    assert_non_null(c);
    assert_string_equal(c, want);
    dsv4q_receipt_hash(c, raw, hex);
    assert_string_equal(hex, "08b036641577335b3dc4125e9f2d295052e2f18c904260ed73cbb31275f72c06");
    free(c);
}

/* R3: stored JSON is canonical; a semantically equal edit keeps the hash. */
static void test_stored_json_is_canonical(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL;
    dsv4q_receipt r = sample("{ \"z\": [1.5, 2], \"a\": {\"y\": null, \"b\": true} }");
    long long id = 0;
    assert_int_equal(dsv4q_receipt_write(f->db, &r, f->key, &id, err, sizeof err), 0);
    assert_int_equal(id, 1);
    assert_int_equal(sql_int(f->db, "SELECT metrics = '{\"a\":{\"b\":true,\"y\":null},"
                                    "\"z\":[1.5,2]}' FROM receipts WHERE id = 1"), 1);
    sql(f->db, "UPDATE receipts SET metrics = '{\"z\":[1.5, 2],  \"a\":{\"y\":null,\"b\":true}}'");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 0);
    expect(out, "OK: 1 receipt(s) checked");
    free(out);
}

/* R6, R9, R10: a clean chain verifies, signed, linked from the genesis. */
static void test_clean_chain_verifies(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL;
    dsv4q_verify_result res;
    write_n(f->db, f->key, 5);
    assert_int_equal(sql_int(f->db, "SELECT count(*) FROM receipts WHERE prev_hash = "
                                    "'" DSV4Q_RCPT_GENESIS "'"), 1);
    assert_int_equal(verify(f->db, 0, f->pub, &out, &res, err, sizeof err), 0);
    expect(out, "OK: 5 receipt(s) checked (ids 1..5), 0 problem(s); 5 signature(s) valid");
    assert_int_equal(res.n_sig_ok, 5);
    assert_int_equal(res.head_id, 5);
    free(out);
    /* single-receipt mode */
    assert_int_equal(verify(f->db, 3, f->pub, &out, &res, err, sizeof err), 0);
    assert_int_equal(res.n_checked, 1);
    free(out);
    assert_int_equal(verify(f->db, 9, f->pub, &out, &res, err, sizeof err), -1);
    expect(err, "no receipt 9");
    free(out);
}

/* (a) R8: an edited metric is a hash mismatch on exactly that receipt. */
static void test_detects_edited_metric(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL;
    write_n(f->db, f->key, 5);
    sql(f->db, "UPDATE receipts SET metrics = '{\"i\":2,\"max_err\":0.0001}' WHERE id = 3");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 3: hash mismatch (stored ");
    expect(out, ", recomputed ");
    expect(out, "): a field was edited");
    assert_null(strstr(out, "receipt 4:"));
    assert_null(strstr(out, "receipt 2:"));
    expect(out, "FAILED: 5 receipt(s) checked");
    free(out);
    /* the attacker also rewrites the stored hash: the next link and the signature catch it */
    sql(f->db, "UPDATE receipts SET hash = '0123456789abcdef0123456789abcdef0123456789abcdef"
               "0123456789abcdef' WHERE id = 3");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 4: chain link broken (prev_hash ");
    expect(out, "but receipt 3 has hash 0123456789abcdef...");
    expect(out, "receipt 3: bad signature");
    free(out);
}

/* (b) R9: a deleted middle receipt is reported as a gap; renumbering to
 * close the gap breaks hashes (id is hashed) and the chain link. */
static void test_detects_deleted_middle(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL;
    write_n(f->db, f->key, 5);
    sql(f->db, "DELETE FROM receipts WHERE id = 3");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 3: missing (ids jump from 2 to 4): a receipt was deleted");
    free(out);
    assert_int_equal(verify(f->db, 4, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 3: missing (predecessor of receipt 4): a receipt was deleted");
    free(out);
    sql(f->db, "UPDATE receipts SET id = id - 1 WHERE id > 3");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 3: chain link broken (prev_hash ");
    expect(out, "but receipt 2 has hash ");
    expect(out, "receipt 3: hash mismatch");
    expect(out, "receipt 4: hash mismatch");
    free(out);
}

/* R9: swapping two receipts' contents (reordering) breaks both hashes. */
static void test_detects_reordering(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL;
    write_n(f->db, f->key, 4);
    sql(f->db, "UPDATE receipts SET id = 100 WHERE id = 2;"
               "UPDATE receipts SET id = 2 WHERE id = 3;"
               "UPDATE receipts SET id = 3 WHERE id = 100;");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 2: chain link broken");
    expect(out, "receipt 2: hash mismatch");
    expect(out, "receipt 3: hash mismatch");
    free(out);
}

/* (c) R10: a signature copied from another receipt is rejected. */
static void test_detects_swapped_signature(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL, kid[17];
    write_n(f->db, f->key, 5);
    sql(f->db, "UPDATE receipts SET signature = (SELECT signature FROM receipts WHERE id = 2)"
               " WHERE id = 4");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    keyid_of(f->pub, kid);
    expect(out, "receipt 4: bad signature (signer ");
    expect(out, kid);
    expect(out, "the signature does not match this receipt's hash (altered, or copied from "
                "another receipt)");
    assert_null(strstr(out, "receipt 2:"));
    free(out);
    /* a stripped signature is caught too: signer_key_id is hashed */
    sql(f->db, "UPDATE receipts SET signature = '' WHERE id = 5");
    assert_int_equal(verify(f->db, 5, NULL, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 5: signature missing (signer_key_id ");
    free(out);
}

/* (d) R11: a wrong public key fails every signed receipt, naming both ids. */
static void test_detects_wrong_pubkey(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL, k1[17], k2[17], want[128];
    write_n(f->db, f->key, 3);
    assert_int_equal(dsv4q_keygen(f->key2, NULL, err, sizeof err), 0);
    keyid_of(f->pub, k1);
    keyid_of(f->pub2, k2);
    assert_int_equal(verify(f->db, 0, f->pub2, &out, NULL, err, sizeof err), 1);
    snprintf(want, sizeof want, "receipt 1: signed by key %s, not by the given public key %s",
             k1, k2);
    expect(out, want);
    expect(out, "receipt 3: signed by key");
    free(out);
    /* no key at all: hash+chain only, with a note; signatures counted unchecked */
    assert_int_equal(verify(f->db, 0, "", &out, NULL, err, sizeof err), 0);
    expect(out, "note: 3 signed receipt(s) not checked");
    free(out);
    /* a missing --pubkey file is an error, not a failed verification */
    assert_int_equal(verify(f->db, 0, "/nonexistent.pub", &out, NULL, err, sizeof err), -1);
    expect(err, "no public key file /nonexistent.pub");
    free(out);
}

/* (e) R12: a truncated database is reported as corrupt (status 1). */
static void test_detects_truncated_db(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL, wal[160];
    struct stat st;
    dsv4q_verify_result res;
    dsv4q_receipt r = sample("{}");
    write_n(f->db, f->key, 60);
    snprintf(wal, sizeof wal, "%s-wal", f->db);
    assert_int_not_equal(stat(wal, &st), 0); /* last close checkpointed the WAL */
    assert_int_equal(stat(f->db, &st), 0);
    assert_true(st.st_size > 8192);
    assert_int_equal(truncate(f->db, st.st_size / 2), 0);
    assert_int_equal(verify(f->db, 0, f->pub, &out, &res, err, sizeof err), 1);
    expect(out, "database ");
    expect(out, " is corrupt (");
    assert_int_equal(res.corrupt, 1);
    free(out);
    /* the writer refuses it too, and says why */
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "", NULL, err, sizeof err), -1);
    expect(err, "is corrupt");
}

/* R1: foreign files are refused with a clear message and left untouched. */
static void test_refuses_foreign_files(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL, path[160];
    dsv4q_receipt r = sample(NULL);
    FILE *t;
    snprintf(path, sizeof path, "%s/notes.txt", f->dir);
    t = fopen(path, "w");
    assert_non_null(t);
    for (int i = 0; i < 100; i++)
        fputs("this is not a database, it is a text file of notes\n", t);
    fclose(t);
    assert_int_equal(verify(path, 0, "", &out, NULL, err, sizeof err), -1);
    expect(err, "is not an SQLite database");
    free(out);
    assert_int_equal(dsv4q_receipt_write(path, &r, "", NULL, err, sizeof err), -1);
    expect(err, "is not an SQLite database");

    snprintf(path, sizeof path, "%s/other.db", f->dir);
    sql(path, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    assert_int_equal(dsv4q_receipt_write(path, &r, "", NULL, err, sizeof err), -1);
    expect(err, "is not a dsv4q receipts database (application_id 0x00000000");
    assert_int_equal(sql_int(path, "SELECT count(*) FROM sqlite_master"), 1);
    assert_int_equal(verify(path, 0, "", &out, NULL, err, sizeof err), -1);
    expect(err, "is not a dsv4q receipts database");
    free(out);

    sql(path, "DROP TABLE t; PRAGMA application_id = 1685288500; PRAGMA user_version = 99;");
    assert_int_equal(verify(path, 0, "", &out, NULL, err, sizeof err), -1);
    expect(err, "has receipts schema version 99, newer than this dsv4q");
    free(out);
    /* fuzz_receipts_db found this: a negative version indexed the migration list. */
    sql(path, "PRAGMA user_version = -285212671;");
    assert_int_equal(dsv4q_receipt_write(path, &r, "", NULL, err, sizeof err), -1);
    expect(err, "has receipts schema version -285212671; expected 0 to");
    assert_int_equal(verify(path, 0, "", &out, NULL, err, sizeof err), -1);
    expect(err, "has receipts schema version -285212671; expected 0 to");
    free(out);

    snprintf(path, sizeof path, "%s/missing.db", f->dir);
    assert_int_equal(verify(path, 0, "", &out, NULL, err, sizeof err), -1);
    expect(err, "cannot open receipts database");
    free(out);
    assert_int_not_equal(access(path, F_OK), 0); /* reading never creates */
}

/* R5: invalid input is rejected before anything is stored. */
static void test_rejects_invalid_input(void **state)
{
    fx *f = *state;
    char err[256] = "";
    dsv4q_receipt r = sample("{\"a\":1}");
    r.kind = "benchmark";
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "", NULL, err, sizeof err), -1);
    expect(err, "receipt kind \"benchmark\" is not one of: sensitivity");
    r = sample("{\"a\":1}");
    r.verdict = "maybe";
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "", NULL, err, sizeof err), -1);
    expect(err, "verdict \"maybe\"");
    r = sample("{\"a\":1,");
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "", NULL, err, sizeof err), -1);
    expect(err, "metrics is not valid JSON");
    r = sample("{\"a\":1,\"a\":2}");
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "", NULL, err, sizeof err), -1);
    expect(err, "duplicate");
    r = sample(NULL);
    r.gate_sha256 = "abc";
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "", NULL, err, sizeof err), -1);
    expect(err, "gate_sha256 must be empty or 64 hex digits");
    r = sample(NULL);
    r.command_line = "dsv4q \xff\xfe";
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "", NULL, err, sizeof err), -1);
    expect(err, "command_line is not valid UTF-8");
    assert_int_not_equal(access(f->db, F_OK), 0); /* nothing was even created */
    /* an explicit key path that does not exist is an error, not a silent unsigned write */
    r = sample(NULL);
    assert_int_equal(dsv4q_receipt_write(f->db, &r, "/nonexistent/k", NULL, err, sizeof err), -1);
    expect(err, "no signing key at /nonexistent/k");
}

/* R6: an error inside the transaction (here: a trigger that aborts the
 * INSERT of receipt 3) rolls back; nothing partial is stored and the next
 * write continues the chain. */
/* Issue 15: ids edited to the ends of the int64 range are reported as a
 * broken chain, without signed overflow in the link check (UBSan in
 * `make asan` halts on one). */
static void test_extreme_ids_reported(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL;
    write_n(f->db, f->key, 3);
    sql(f->db, "UPDATE receipts SET id = -9000000000000000000 WHERE id = 1");
    sql(f->db, "UPDATE receipts SET id = 9000000000000000000 WHERE id = 2");
    sql(f->db, "UPDATE receipts SET id = 9223372036854775807 WHERE id = 3");
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "out of order");
    free(out);
}

static void test_error_in_transaction_rolls_back(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL;
    dsv4q_receipt r = sample("{\"x\":1}");
    long long id = 0;
    write_n(f->db, f->key, 2);
    sql(f->db, "CREATE TRIGGER boom BEFORE INSERT ON receipts WHEN NEW.id = 3 "
               "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;");
    /* an extra trigger is a foreign schema (issue 15): refused at open,
     * before any write, so nothing is inserted */
    assert_int_equal(dsv4q_receipt_write(f->db, &r, f->key, &id, err, sizeof err), -1);
    expect(err, "unexpected receipts schema");
    expect(err, "trigger boom on receipts");
    assert_int_equal(sql_int(f->db, "SELECT count(*) FROM receipts"), 2);
    sql(f->db, "DROP TRIGGER boom");
    assert_int_equal(dsv4q_receipt_write(f->db, &r, f->key, &id, err, sizeof err), 0);
    assert_int_equal(id, 3);
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 0);
    free(out);
}

/* Run fn with fd `which` redirected into a temp file; return its text. */
static char *capture_fd(int which, const char *dir, int (*fn)(void *), void *arg, int *rc)
{
    char path[160];
    int fd, saved;
    FILE *f;
    long n;
    char *buf;
    snprintf(path, sizeof path, "%s/capture.txt", dir);
    fflush(stdout);
    fflush(stderr);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    saved = dup(which);
    dup2(fd, which);
    *rc = fn(arg);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, which);
    close(saved);
    close(fd);
    f = fopen(path, "r");
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    buf = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static int write_default_key(void *arg)
{
    fx *f = arg;
    char err[256];
    dsv4q_receipt r = sample("{}");
    return dsv4q_receipt_write(f->db, &r, NULL, NULL, err, sizeof err);
}

/* Requirement 3 / R11: no key -> one-line note, stored unsigned but chained;
 * a strict verifier then refuses the unsigned receipt. */
static void test_unsigned_note_and_default_key(void **state)
{
    fx *f = *state;
    char err[256] = "", *out = NULL, *cap;
    dsv4q_verify_result res;
    int rc;
    setenv("DSV4Q_KEY", "/nonexistent/dsv4q-test.key", 1);
    cap = capture_fd(2, f->dir, write_default_key, f, &rc);
    assert_int_equal(rc, 0);
    expect(cap, "no signing key at /nonexistent/dsv4q-test.key; receipt stored unsigned but "
                "chained");
    assert_int_equal(strchr(cap, '\n') - cap + 1, (long)strlen(cap)); /* one line */
    free(cap);
    /* an unsigned receipt shows no writer: NOT VERIFIED unless allowed */
    assert_int_equal(verify(f->db, 0, NULL, &out, &res, err, sizeof err), 1);
    assert_int_equal(res.n_unsigned, 1);
    assert_int_equal(res.n_problems, 0);
    assert_int_equal(res.not_verified, 1);
    expect(out, "NOT VERIFIED: 1 receipt(s) checked");
    expect(out, "--allow-unsigned");
    free(out);
    assert_int_equal(verify_allow(f->db, 0, &out, &res), 0);
    assert_int_equal(res.not_verified, 0);
    expect(out, "OK: 1 receipt(s) checked");
    free(out);
    assert_int_equal(verify(f->db, 0, f->pub, &out, NULL, err, sizeof err), 1);
    expect(out, "receipt 1: unsigned, but the given public key");
    free(out);
    /* with DSV4Q_KEY pointing at a key, the default location signs */
    setenv("DSV4Q_KEY", f->key, 1);
    cap = capture_fd(2, f->dir, write_default_key, f, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(cap, "");
    free(cap);
    assert_int_equal(verify(f->db, 2, f->pub, &out, &res, err, sizeof err), 0);
    assert_int_equal(res.n_sig_ok, 1);
    free(out);
    /* lenient default: the .pub beside $DSV4Q_KEY checks what it signed;
     * receipt 1 stays unsigned */
    assert_int_equal(verify(f->db, 0, NULL, &out, &res, err, sizeof err), 1);
    assert_int_equal(res.n_sig_ok, 1);
    assert_int_equal(res.n_unsigned, 1);
    free(out);
    assert_int_equal(verify_allow(f->db, 0, &out, &res), 0);
    assert_int_equal(res.n_sig_ok, 1);
    free(out);
    setenv("DSV4Q_KEY", "/nonexistent/dsv4q-test.key", 1);
}

/* R13: keygen makes a 0600 key + .pub, refuses to overwrite; loose
 * permissions and a corrupted key are refused for signing. */
static void test_keygen(void **state)
{
    fx *f = *state;
    char err[256] = "", path[160], kid[17], kid2[17], sub[200];
    struct stat st;
    unsigned char sk[64], pk[32];
    dsv4q_receipt r = sample(NULL);
    FILE *t;
    snprintf(path, sizeof path, "%s/sub/dir/new.key", f->dir);
    mode_t old_umask = umask(0); /* the key must still come out 0600 */
    assert_int_equal(dsv4q_keygen(path, kid, err, sizeof err), 0);
    umask(old_umask);
    assert_int_equal(strlen(kid), 16);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(sub, sizeof sub, "%s/sub", f->dir);
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(sub, sizeof sub, "%s.pub", path);
    assert_int_equal(stat(sub, &st), 0);
    assert_string_equal(keyid_of(sub, kid2), kid);
    assert_int_equal(dsv4q_receipt_load_secret(path, sk, pk, err, sizeof err), 0);

    assert_int_equal(dsv4q_keygen(path, NULL, err, sizeof err), -1);
    expect(err, "refusing to overwrite existing");
    assert_int_equal(dsv4q_receipt_load_secret(path, sk, pk, err, sizeof err), 0);
    unlink(path);
    assert_int_equal(dsv4q_keygen(path, NULL, err, sizeof err), -1); /* .pub still there */
    expect(err, "refusing to overwrite existing public key");
    assert_int_not_equal(access(path, F_OK), 0);

    chmod(f->key, 0640);
    assert_int_equal(dsv4q_receipt_write(f->db, &r, f->key, NULL, err, sizeof err), -1);
    expect(err, "is accessible by group/others (mode 0640)");
    chmod(f->key, 0600);
    snprintf(path, sizeof path, "%s/bad.key", f->dir);
    t = fopen(path, "w");
    fprintf(t, "seed: %064d\npublic: %064d\n", 1, 2);
    fclose(t);
    chmod(path, 0600);
    assert_int_equal(dsv4q_receipt_write(f->db, &r, path, NULL, err, sizeof err), -1);
    expect(err, "its seed does not produce its public key");
}

/* Default locations (requirement 3, 4). */
static void test_default_paths(void **state)
{
    char buf[512];
    const char *home = getenv("HOME");
    char *saved_home = home ? strdup(home) : NULL;
    (void)state;
    setenv("DSV4Q_KEY", "/k/x.key", 1);
    assert_int_equal(dsv4q_key_default_path(buf, sizeof buf), 0);
    assert_string_equal(buf, "/k/x.key");
    unsetenv("DSV4Q_KEY");
    setenv("XDG_CONFIG_HOME", "/xdg", 1);
    assert_int_equal(dsv4q_key_default_path(buf, sizeof buf), 0);
    assert_string_equal(buf, "/xdg/dsv4q/signing.key");
    unsetenv("XDG_CONFIG_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(dsv4q_key_default_path(buf, sizeof buf), 0);
    assert_string_equal(buf, "/home/u/.config/dsv4q/signing.key");
    assert_int_equal(dsv4q_key_default_path(buf, 8), -1);
    if (saved_home)
        setenv("HOME", saved_home, 1);
    free(saved_home);
    setenv("DSV4Q_DB", "/d/x.db", 1);
    assert_string_equal(dsv4q_receipt_default_db(), "/d/x.db");
    unsetenv("DSV4Q_DB");
    assert_string_equal(dsv4q_receipt_default_db(), "dsv4q.db");
    setenv("DSV4Q_KEY", "/nonexistent/dsv4q-test.key", 1);
}

/* R14: an export verifies alone with the right key, fails with a wrong
 * one, and fails when edited. */
static void test_export_verify_json(void **state)
{
    fx *f = *state;
    char err[256] = "", *json = NULL, *out = NULL, *p, k1[17], k2[17], want[160];
    write_n(f->db, f->key, 3);
    assert_int_equal(dsv4q_keygen(f->key2, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_receipt_export_json(f->db, 2, f->pub, &json, err, sizeof err), 0);
    expect(json, "\"format\": \"dsv4q-receipt-export/1\"");
    expect(json, "\"canonical\": \"{\\\"v\\\":1,\\\"id\\\":2,");
    expect(json, "\"public_key\": \"");

    assert_int_equal(verify_json(json, f->pub, &out), 0);
    expect(out, "OK: exported receipt 2");
    expect(out, "signature valid");
    free(out);
    assert_int_equal(verify_json(json, NULL, &out), 0);
    expect(out, "note: signature checked against the public key embedded in the export");
    free(out);
    assert_int_equal(verify_json(json, f->pub2, &out), 1);
    keyid_of(f->pub, k1);
    keyid_of(f->pub2, k2);
    snprintf(want, sizeof want, "receipt 2: signed by key %s, not by the given public key %s",
             k1, k2);
    expect(out, want);
    free(out);

    /* edit a metric inside the export */
    p = strstr(json, "\"max_err\": 0.25");
    assert_non_null(p);
    memcpy(p, "\"max_err\": 0.01", 15);
    assert_int_equal(verify_json(json, f->pub, &out), 1);
    expect(out, "receipt 2: hash mismatch (stated ");
    expect(out, "a field was edited");
    free(out);
    free(json);

    /* a public key that did not sign it cannot be attached */
    assert_int_equal(dsv4q_receipt_export_json(f->db, 2, f->pub2, &json, err, sizeof err), -1);
    expect(err, "did not sign receipt 2");
    /* without a key the export still carries everything but the public key */
    assert_int_equal(dsv4q_receipt_export_json(f->db, 1, "", &json, err, sizeof err), 0);
    expect(json, "\"public_key\": \"\"");
    assert_int_equal(verify_json(json, NULL, &out), 0);
    expect(out, "signature not checked: no public key");
    free(out);
    assert_int_equal(verify_json(json, f->pub, &out), 0);
    free(out);
    free(json);
}

/* Pins: file hash, checkpoint directory, token list. */
static void test_pins(void **state)
{
    fx *f = *state;
    char err[256] = "", path[200], hex[65], *json = NULL, md[160];
    long long bytes = 0;
    int32_t toks[2] = {1, -1};
    FILE *t;
    snprintf(path, sizeof path, "%s/abc.txt", f->dir);
    t = fopen(path, "w");
    fputs("abc", t);
    fclose(t);
    assert_int_equal(dsv4q_sha256_file(path, hex, &bytes, err, sizeof err), 0);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal(bytes, 3);

    dsv4q_pin_tokens(NULL, 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    dsv4q_pin_tokens(toks, 2, hex); /* little-endian int32: 01 00 00 00 ff ff ff ff */
    {
        unsigned char le[8] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, raw[32];
        char want[65];
        crypto_hash_sha256(raw, le, sizeof le);
        sodium_bin2hex(want, sizeof want, raw, sizeof raw);
        assert_string_equal(hex, want);
    }

    snprintf(md, sizeof md, "%s/model", f->dir);
    mkdir(md, 0700);
    assert_int_equal(dsv4q_pin_checkpoint(md, &json, err, sizeof err), -1);
    expect(err, "has no config.json");
    snprintf(path, sizeof path, "%s/config.json", md);
    t = fopen(path, "w"); fputs("{}", t); fclose(t);
    snprintf(path, sizeof path, "%s/model-00002.safetensors", md);
    t = fopen(path, "w"); fputs("abc", t); fclose(t);
    snprintf(path, sizeof path, "%s/model-00001.safetensors", md);
    t = fopen(path, "w"); fputs("abcd", t); fclose(t);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", md);
    t = fopen(path, "w"); fputs("{\"weight_map\":{}}", t); fclose(t);
    snprintf(path, sizeof path, "%s/README.md", md);
    t = fopen(path, "w"); fputs("ignored", t); fclose(t);
    assert_int_equal(dsv4q_pin_checkpoint(md, &json, err, sizeof err), 0);
    expect(json, "{\"config_sha256\":\"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\","
                 "\"files\":[{\"bytes\":2,\"name\":\"config.json\",");
    expect(json, "{\"bytes\":4,\"name\":\"model-00001.safetensors\",\"sha256\":"
                 "\"88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589\"},"
                 "{\"bytes\":3,\"name\":\"model-00002.safetensors\",\"sha256\":"
                 "\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"},"
                 "{\"bytes\":17,\"name\":\"model.safetensors.index.json\"");
    expect(json, "\"total_bytes\":26}");
    assert_null(strstr(json, "README"));
    free(json);
}

static void test_command_line(void **state)
{
    char *argv[] = {"dsv4q", "qualify", "--gate", "my gates/g.json", "it's", "", "\xc3\xa9",
                    "bad\xff"};
    char *c = dsv4q_command_line(8, argv);
    (void)state;
    assert_string_equal(c, "dsv4q qualify --gate 'my gates/g.json' 'it'\\''s' '' '\xc3\xa9' "
                           "'bad\\xFF'");
    free(c);
}

/* ---- CLI exit statuses -------------------------------------------------------- */

typedef struct cli_call {
    int (*fn)(int, char **);
    int argc;
    char **argv;
} cli_call;

static int run_cli(void *arg)
{
    cli_call *c = arg;
    return c->fn(c->argc, c->argv);
}

/* Run a CLI entry point, capturing its stdout (stderr is silenced). */
static char *cli(fx *f, int *rc, int (*fn)(int, char **), int argc, char **argv)
{
    cli_call c = {fn, argc, argv};
    int null = open("/dev/null", O_WRONLY), saved;
    char *out;
    fflush(stderr);
    saved = dup(2);
    dup2(null, 2);
    out = capture_fd(1, f->dir, run_cli, &c, rc);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(null);
    return out;
}

static void test_cli(void **state)
{
    fx *f = *state;
    char *out, exp[160];
    int rc;
    write_n(f->db, f->key, 4);
    {
        char *a[] = {"receipts", "verify", "--db", f->db, "--pubkey", f->pub};
        out = cli(f, &rc, dsv4q_cmd_receipts, 6, a);
        assert_int_equal(rc, 0);
        expect(out, "OK: 4 receipt(s) checked");
        free(out);
    }
    {
        char *a[] = {"receipts", "list", "--last", "2", "--kind", "qualify"};
        out = cli(f, &rc, dsv4q_cmd_receipts, 6, a); /* --db from $DSV4Q_DB */
        assert_int_equal(rc, 0);
        expect(out, "     3  ");
        expect(out, "     4  ");
        assert_null(strstr(out, "     2  "));
        free(out);
    }
    {
        char *a[] = {"receipts", "show", "2", "--db", f->db};
        out = cli(f, &rc, dsv4q_cmd_receipts, 5, a);
        assert_int_equal(rc, 0);
        expect(out, "metrics          {\"i\":1,\"max_err\":0.25}");
        free(out);
    }
    snprintf(exp, sizeof exp, "%s/r2.json", f->dir);
    {
        char *a[] = {"receipts", "export", "2", "--json", "--pubkey", f->pub, "--out", exp};
        out = cli(f, &rc, dsv4q_cmd_receipts, 8, a);
        assert_int_equal(rc, 0);
        free(out);
    }
    {
        char *a[] = {"receipts", "verify-json", exp, "--pubkey", f->pub};
        out = cli(f, &rc, dsv4q_cmd_receipts, 5, a);
        assert_int_equal(rc, 0);
        free(out);
    }
    sql(f->db, "UPDATE receipts SET verdict = 'fail' WHERE id = 2");
    {
        char *a[] = {"receipts", "verify", "--all", "--pubkey", f->pub};
        out = cli(f, &rc, dsv4q_cmd_receipts, 5, a);
        assert_int_equal(rc, 1);
        expect(out, "receipt 2: hash mismatch");
        free(out);
    }
    {
        char un[4200];
        snprintf(un, sizeof un, "%s/unsigned.db", f->dir);
        write_n(un, "", 2);
        char *a[] = {"receipts", "verify", "--db", un}, *b[] = {"receipts", "verify", "--allow-unsigned", "--db", un};
        out = cli(f, &rc, dsv4q_cmd_receipts, 4, a);
        assert_int_equal(rc, 1);
        expect(out, "NOT VERIFIED: 2 receipt(s) checked");
        free(out);
        out = cli(f, &rc, dsv4q_cmd_receipts, 5, b);
        assert_int_equal(rc, 0);
        expect(out, "OK: 2 receipt(s) checked");
        free(out);
    }
    {
        /* signed, but by a key the verifier was not given: not verified either */
        char k3[4200], s3[4200], e3[256];
        snprintf(k3, sizeof k3, "%s/k3.key", f->dir);
        snprintf(s3, sizeof s3, "%s/other-signer.db", f->dir);
        assert_int_equal(dsv4q_keygen(k3, NULL, e3, sizeof e3), 0);
        write_n(s3, k3, 1);
        char *a[] = {"receipts", "verify", "--db", s3}, *b[] = {"receipts", "verify", "--allow-unsigned", "--db", s3};
        out = cli(f, &rc, dsv4q_cmd_receipts, 4, a);
        assert_int_equal(rc, 1);
        expect(out, "(0 unsigned, 1 signed by a key not given)");
        expect(out, "NOT VERIFIED: 1 receipt(s) checked");
        free(out);
        out = cli(f, &rc, dsv4q_cmd_receipts, 5, b);
        assert_int_equal(rc, 0);
        free(out);
    }
    {
        char *a[] = {"receipts", "verify", "--db", "/nonexistent/x.db"};
        out = cli(f, &rc, dsv4q_cmd_receipts, 4, a);
        assert_int_equal(rc, 2);
        free(out);
    }
    {
        char *a[] = {"receipts", "verify", "abc"};
        out = cli(f, &rc, dsv4q_cmd_receipts, 3, a);
        assert_int_equal(rc, 2);
        free(out);
    }
    {
        char *a[] = {"receipts", "frobnicate"};
        out = cli(f, &rc, dsv4q_cmd_receipts, 2, a);
        assert_int_equal(rc, 2);
        free(out);
    }
    {
        char *a[] = {"keygen", "--out", f->key};
        out = cli(f, &rc, dsv4q_cmd_keygen, 3, a);
        assert_int_equal(rc, 2); /* refuses to overwrite: bad input, exit 2 */
        free(out);
    }
    {
        char path[160];
        char *a[] = {"keygen", "--out", path};
        snprintf(path, sizeof path, "%s/cli.key", f->dir);
        out = cli(f, &rc, dsv4q_cmd_keygen, 3, a);
        assert_int_equal(rc, 0);
        expect(out, "(mode 0600)");
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_known_answer),
        cmocka_unit_test_setup_teardown(test_stored_json_is_canonical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clean_chain_verifies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detects_edited_metric, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detects_deleted_middle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detects_reordering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detects_swapped_signature, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detects_wrong_pubkey, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detects_truncated_db, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_foreign_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_invalid_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extreme_ids_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_in_transaction_rolls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsigned_note_and_default_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keygen, setup, teardown),
        cmocka_unit_test(test_default_paths),
        cmocka_unit_test_setup_teardown(test_export_verify_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pins, setup, teardown),
        cmocka_unit_test(test_command_line),
        cmocka_unit_test_setup_teardown(test_cli, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
