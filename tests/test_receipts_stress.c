/*
 * test_receipts_stress.c - concurrency and crash-safety of the receipt store.
 *
 * Owns: the multi-process tests of R2 (concurrent creation of a new
 * database migrates once), R6 (a writer killed with SIGKILL at random
 * instants never leaves a partial receipt, and the database stays
 * integrity_check "ok") and R7 (two processes appending concurrently never
 * fork the chain and lose nothing). Separate from test_receipts.c because
 * these tests fork and take seconds rather than milliseconds. The random
 * kill instants are seeded, so a failure reproduces.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tests/testutil.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "receipts/receipts.h"

#ifndef WRITERS
#define WRITERS 2
#endif
#ifndef PER_WRITER
#define PER_WRITER 200
#endif
#define KILLS 60
#define KILL_SEED 20250611u

typedef struct fx {
    char dir[64];
    char db[128];
    char key[128];
    char pub[136];
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
    strcpy(f->dir, "/tmp/dsv4q-rcpt-stress-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof f->db, "%s/r.db", f->dir);
    snprintf(f->key, sizeof f->key, "%s/k.key", f->dir);
    snprintf(f->pub, sizeof f->pub, "%s.pub", f->key);
    assert_int_equal(dsv4q_keygen(f->key, NULL, err, sizeof err), 0);
    setenv("DSV4Q_GIT_COMMIT", "stresstest", 1);
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

static int write_one(const fx *f, const char *who, int k, char *err, size_t errlen)
{
    char m[96];
    dsv4q_receipt r;
    memset(&r, 0, sizeof r);
    snprintf(m, sizeof m, "{\"writer\":\"%s\",\"k\":%d,\"max_ulp\":1.5}", who, k);
    r.kind = "sensitivity";
    r.command_line = who;
    r.config_json = "{\"dim\":64}";
    r.metrics_json = m;
    r.widths = "64";
    r.verdict = "info";
    return dsv4q_receipt_write(f->db, &r, f->key, NULL, err, errlen);
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

static void integrity_ok(const char *db)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    sqlite3_close(h);
}

static void verify_all_ok(const fx *f, long long want_n)
{
    dsv4q_verify_result res;
    char err[256] = "", *out = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&out, &n);
    int r = dsv4q_receipt_verify(f->db, 0, f->pub, m, &res, err, sizeof err);
    fclose(m);
    if (r != 0)
        fail_msg("verify returned %d (%s):\n%s", r, err, out);
    assert_int_equal(res.n_checked, want_n);
    assert_int_equal(res.n_sig_ok, want_n);
    free(out);
}

/* R2, R7: WRITERS processes start together on a database that does not
 * exist yet and append PER_WRITER receipts each; all land, the chain is
 * linear (every prev_hash distinct) and verifies. */
static void test_concurrent_writers(void **state)
{
    fx *f = *state;
    pid_t pids[WRITERS];
    int gate[2], w, st, bad = 0;
    char q[160];
    struct timespec t0, t1;

    assert_int_equal(pipe(gate), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w] == 0) {
            char who[32], err[512], c;
            int k;
            close(gate[1]);
            if (read(gate[0], &c, 1) < 0) /* EOF when the parent opens the gate */
                _exit(4);
            snprintf(who, sizeof who, "writer-%d", w);
            for (k = 0; k < PER_WRITER; k++)
                if (write_one(f, who, k, err, sizeof err) != 0) {
                    fprintf(stderr, "%s receipt %d: %s\n", who, k, err);
                    _exit(3);
                }
            _exit(0);
        }
    }
    close(gate[0]);
    close(gate[1]); /* open the gate: all writers start at once */
    /* reap every writer before asserting: teardown must not pull the
     * directory from under a writer that is still running */
    for (w = 0; w < WRITERS; w++) {
        assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
    assert_int_equal(bad, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    assert_int_equal(sql_int(f->db, "SELECT count(*) FROM receipts"), WRITERS * PER_WRITER);
    for (w = 0; w < WRITERS; w++) {
        snprintf(q, sizeof q, "SELECT count(*) FROM receipts WHERE command_line = 'writer-%d'", w);
        assert_int_equal(sql_int(f->db, q), PER_WRITER);
    }
    assert_int_equal(sql_int(f->db, "SELECT count(DISTINCT prev_hash) FROM receipts"),
                     WRITERS * PER_WRITER);
    assert_int_equal(sql_int(f->db, "SELECT max(id) FROM receipts"), WRITERS * PER_WRITER);
    integrity_ok(f->db);
    verify_all_ok(f, WRITERS * PER_WRITER);
    print_message("      %d writers x %d receipts in %.2f s, %lld writer switches\n", WRITERS,
                  PER_WRITER,
                  (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
                  sql_int(f->db, "SELECT count(*) FROM receipts a JOIN receipts b ON "
                                 "b.id = a.id + 1 WHERE a.command_line <> b.command_line"));
}

/* R6: SIGKILL a writer at seeded-random instants KILLS times; afterwards
 * every row has every field, the database passes integrity_check and the
 * whole chain (hashes, links, signatures) verifies. */
static void test_sigkill_never_partial(void **state)
{
    fx *f = *state;
    char err[512] = "";
    unsigned seed = KILL_SEED;
    long long n, before;
    int k, st, killed_mid = 0;

    assert_int_equal(write_one(f, "parent", 0, err, sizeof err), 0);
    for (k = 0; k < KILLS; k++) {
        struct timespec d;
        pid_t pid;
        before = sql_int(f->db, "SELECT count(*) FROM receipts");
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int i;
            for (i = 0;; i++)
                if (write_one(f, "victim", i, err, sizeof err) != 0) {
                    fprintf(stderr, "victim: %s\n", err);
                    _exit(3);
                }
        }
        d.tv_sec = 0;
        d.tv_nsec = (long)(500 + rand_r(&seed) % 7500) * 1000L; /* 0.5 .. 8 ms */
        nanosleep(&d, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
            fail_msg("victim %d exited on its own (status 0x%x) instead of being killed", k, st);
        if (sql_int(f->db, "SELECT count(*) FROM receipts") == before)
            killed_mid++; /* killed before its first commit: opening, or mid-transaction */
    }
    n = sql_int(f->db, "SELECT count(*) FROM receipts");
    if (n < 2)
        fail_msg("no victim ever committed a receipt in %d tries", KILLS);
    /* no row lacks a field: NOT NULL is schema, but emptiness is ours */
    assert_int_equal(sql_int(f->db, "SELECT count(*) FROM receipts WHERE created = '' OR "
                                    "tool_version = '' OR git_commit = '' OR kind = '' OR "
                                    "verdict = '' OR metrics = '' OR metrics = 'null' OR "
                                    "config = 'null' OR length(hash) <> 64 OR "
                                    "length(prev_hash) <> 64 OR length(signature) <> 128 OR "
                                    "length(signer_key_id) <> 16"), 0);
    assert_int_equal(sql_int(f->db, "SELECT max(id) FROM receipts"), n);
    integrity_ok(f->db);
    verify_all_ok(f, n);
    /* and the store is still writable and the chain continues */
    assert_int_equal(write_one(f, "after", 0, err, sizeof err), 0);
    verify_all_ok(f, n + 1);
    print_message("      %d kills, %lld receipts survived, %d kills before a commit\n", KILLS, n,
                  killed_mid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_never_partial, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
