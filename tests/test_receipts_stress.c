/*
 * test_receipts_stress.c - concurrency and crash-safety of the receipt store.
 *
 * Owns: the multi-process tests of R2 (concurrent creation of a new
 * database migrates once), R6 (a writer killed with SIGKILL at every point
 * between its file operations, or while recovering from such a kill, never
 * leaves a partial receipt nor loses a committed one, and the database stays
 * integrity_check "ok") and R7 (two processes appending concurrently never
 * fork the chain and lose nothing). Separate from test_receipts.c because
 * these tests fork and take seconds rather than milliseconds. The kill
 * instants are counted in SQLite file operations of the victim, not in
 * time, and every victim starts from the same file bytes, so every run on
 * any machine kills at the same points.
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

static void shim_remove(void);

static int teardown(void **state)
{
    fx *f = *state;
    shim_remove();
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

/* ---- kill points (R6) ------------------------------------------------------
 * A SIGKILL can only land between two system calls, so the instants that
 * differ for the files are the points between SQLite's file operations. The
 * victim runs SQLite over a VFS that forwards to the default one and counts
 * every call it makes (open, delete, access, and every method of every open
 * file, locks and the WAL index included); at call number kill_at it kills
 * itself before the call runs. Kill point k is then the same instant of the
 * same write on any machine, however loaded. */
typedef struct shim_file {
    sqlite3_file base;
    sqlite3_file *real; /* the default VFS's file, allocated just after this */
} shim_file;

static sqlite3_vfs *real_vfs;
static long shim_calls, shim_kill_at;

static void shim_tick(void)
{
    if (++shim_calls == shim_kill_at) kill(getpid(), SIGKILL);
}

#define REAL(f) (((shim_file *)(f))->real)

static int shim_close(sqlite3_file *f)
{
    shim_tick();
    return REAL(f)->pMethods->xClose(REAL(f));
}
static int shim_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off)
{
    shim_tick();
    return REAL(f)->pMethods->xRead(REAL(f), b, n, off);
}
static int shim_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 off)
{
    shim_tick();
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, off);
}
static int shim_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    shim_tick();
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
/* A kill point, but no fsync: a SIGKILL loses nothing the kernel already
 * holds (fsync guards against power loss, which this test does not model),
 * and a test of ~300 writers must not wait on the disk. */
static int shim_sync(sqlite3_file *f, int flags)
{
    (void)f;
    (void)flags;
    shim_tick();
    return SQLITE_OK;
}
static int shim_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    shim_tick();
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int shim_lock(sqlite3_file *f, int lk)
{
    shim_tick();
    return REAL(f)->pMethods->xLock(REAL(f), lk);
}
static int shim_unlock(sqlite3_file *f, int lk)
{
    shim_tick();
    return REAL(f)->pMethods->xUnlock(REAL(f), lk);
}
static int shim_check_reserved(sqlite3_file *f, int *out)
{
    shim_tick();
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int shim_file_control(sqlite3_file *f, int op, void *arg)
{
    shim_tick();
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int shim_sector_size(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f)); /* a constant: no kill point */
}
static int shim_device_chars(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); /* a constant */
}
static int shim_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
    shim_tick();
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}
static int shim_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    shim_tick();
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void shim_shm_barrier(sqlite3_file *f)
{
    shim_tick(); /* the WAL index is written through memory; barriers delimit it */
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int shim_shm_unmap(sqlite3_file *f, int del)
{
    shim_tick();
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int shim_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    shim_tick();
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}
static int shim_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    shim_tick();
    return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static const sqlite3_io_methods shim_io = {
    3,
    shim_close,
    shim_read,
    shim_write,
    shim_truncate,
    shim_sync,
    shim_file_size,
    shim_lock,
    shim_unlock,
    shim_check_reserved,
    shim_file_control,
    shim_sector_size,
    shim_device_chars,
    shim_shm_map,
    shim_shm_lock,
    shim_shm_barrier,
    shim_shm_unmap,
    shim_fetch,
    shim_unfetch,
};

static int shim_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out)
{
    shim_file *s = (shim_file *)f;
    int rc;
    (void)v;
    shim_tick();
    s->real = (sqlite3_file *)&s[1];
    rc = real_vfs->xOpen(real_vfs, name, s->real, flags, out);
    /* every method is forwarded, so the real file must have them all */
    if (s->real->pMethods && s->real->pMethods->iVersion < 3) {
        fprintf(stderr, "victim: the default VFS's files are version %d, need 3\n", s->real->pMethods->iVersion);
        _exit(5);
    }
    s->base.pMethods = s->real->pMethods ? &shim_io : NULL;
    return rc;
}
static int shim_delete(sqlite3_vfs *v, const char *name, int sync)
{
    (void)v;
    (void)sync; /* no directory fsync either (see shim_sync) */
    shim_tick();
    return real_vfs->xDelete(real_vfs, name, 0);
}
static int shim_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    shim_tick();
    return real_vfs->xAccess(real_vfs, name, flags, out);
}
static int shim_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return real_vfs->xFullPathname(real_vfs, name, n, out);
}
static int shim_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return real_vfs->xRandomness(real_vfs, n, out);
}
static int shim_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return real_vfs->xSleep(real_vfs, us);
}
static int shim_current_time(sqlite3_vfs *v, double *t)
{
    (void)v;
    return real_vfs->xCurrentTime(real_vfs, t);
}
static int shim_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return real_vfs->xGetLastError(real_vfs, n, out);
}

static sqlite3_vfs shim_vfs;

/* Make the counting VFS the default (the receipt store opens with the
 * default VFS) and arm it: the process kills itself before its file
 * operation number kill_at from now (0: never). The test's parent installs
 * it unarmed, so its own reads skip fsync too; a forked victim re-arms it. */
static void shim_install(long kill_at)
{
    if (!real_vfs) {
        real_vfs = sqlite3_vfs_find(NULL);
        assert_non_null(real_vfs);
        memset(&shim_vfs, 0, sizeof shim_vfs);
        shim_vfs.iVersion = 1;
        shim_vfs.szOsFile = (int)sizeof(shim_file) + real_vfs->szOsFile;
        shim_vfs.mxPathname = real_vfs->mxPathname;
        shim_vfs.zName = "dsv4q-killpoint";
        shim_vfs.xOpen = shim_open;
        shim_vfs.xDelete = shim_delete;
        shim_vfs.xAccess = shim_access;
        shim_vfs.xFullPathname = shim_full_pathname;
        shim_vfs.xRandomness = shim_randomness;
        shim_vfs.xSleep = shim_sleep;
        shim_vfs.xCurrentTime = shim_current_time;
        shim_vfs.xGetLastError = shim_last_error;
        assert_int_equal(sqlite3_vfs_register(&shim_vfs, 1), SQLITE_OK);
    }
    shim_calls = 0;
    shim_kill_at = kill_at;
}

/* The default VFS back as it was. */
static void shim_remove(void)
{
    if (real_vfs) {
        sqlite3_vfs_unregister(&shim_vfs);
        sqlite3_vfs_register(real_vfs, 1);
        real_vfs = NULL;
    }
}

#define MAX_KILL_POINTS 5000

/* Fork a writer of one receipt that SIGKILLs itself before its file
 * operation kill_at. 1: it was killed; 0: it finished (kill_at is past its
 * last operation). Anything else fails the test. */
static int victim(const fx *f, long kill_at)
{
    char err[512];
    int st;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        shim_install(kill_at);
        if (write_one(f, "victim", 0, err, sizeof err) != 0) {
            fprintf(stderr, "victim (kill point %ld): %s\n", kill_at, err);
            _exit(3);
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) return 1;
    fail_msg("victim at kill point %ld failed (status 0x%x)", kill_at, st);
    return -1;
}

static long long receipts_count(const fx *f) { return sql_int(f->db, "SELECT count(*) FROM receipts"); }

/* Every row has every field, ids are dense, integrity_check is "ok" and the
 * whole chain (hashes, links, signatures) verifies. */
static void store_whole(const fx *f, long long n)
{
    /* NOT NULL is schema, but emptiness is ours */
    assert_int_equal(sql_int(f->db, "SELECT count(*) FROM receipts WHERE created = '' OR "
                                    "tool_version = '' OR git_commit = '' OR kind = '' OR "
                                    "verdict = '' OR metrics = '' OR metrics = 'null' OR "
                                    "config = 'null' OR length(hash) <> 64 OR "
                                    "length(prev_hash) <> 64 OR length(signature) <> 128 OR "
                                    "length(signer_key_id) <> 16"),
                     0);
    assert_int_equal(receipts_count(f), n);
    assert_int_equal(sql_int(f->db, "SELECT max(id) FROM receipts"), n);
    integrity_ok(f->db);
    verify_all_ok(f, n);
}

/* Copy a whole small file; 0 when `from` does not exist. */
static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out;
    char buf[65536];
    size_t n;
    if (!in) return 0;
    out = fopen(to, "wb");
    assert_non_null(out);
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
    assert_int_equal(ferror(in), 0);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    return 1;
}

static const char *const db_files[] = {"", "-wal", "-shm"};

/* Snapshot the database's files as they lie (a crashed writer's WAL and WAL
 * index included) under the suffix `tag`. */
static void snapshot(const fx *f, const char *tag)
{
    char a[160], b[176];
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s%s", f->db, db_files[i]);
        snprintf(b, sizeof b, "%s.%s", a, tag);
        unlink(b);
        copy_file(a, b);
    }
}

/* Put the database's files back to snapshot `tag`: the same bytes every
 * time, so a writer's sequence of file operations is the same every time. */
static void restore(const fx *f, const char *tag)
{
    char a[160], b[176];
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s%s", f->db, db_files[i]);
        snprintf(b, sizeof b, "%s.%s", a, tag);
        unlink(a);
        copy_file(b, a);
    }
}

/* R6: from the same one-receipt database each time, a victim writes one
 * receipt and is SIGKILLed at file operation k, for k = 1, 2, ... until a
 * victim finishes untouched (k passed its last operation): every point of
 * opening, the transaction, the commit and the checkpoint on close is hit
 * once. After each kill the receipt is whole or absent, the store is whole
 * (store_whole), and the kills that lost the receipt all come before those
 * that kept it (the commit is one instant). Then a writer that finds the
 * files of a writer killed just before the commit (its WAL frames not
 * committed) or just after it (committed, not checkpointed) is itself killed
 * at each of its operations, recovery included: the committed receipt is
 * never lost and the uncommitted one never appears. */
static void test_sigkill_never_partial(void **state)
{
    fx *f = *state;
    char err[512] = "", tag[16];
    long long got;
    long k, last_before = 0, first_after = 0, n_rec = 0;
    int uncommitted = 0, committed = 0, done = 0, c;

    shim_install(0);
    assert_int_equal(write_one(f, "parent", 0, err, sizeof err), 0);
    snapshot(f, "one"); /* the parent's close checkpointed: no WAL */
    for (k = 1; k <= MAX_KILL_POINTS && !done; k++) {
        restore(f, "one");
        done = !victim(f, k);
        /* reading the database recovers it (WAL) as the next writer would */
        got = receipts_count(f) - 1;
        if (got < 0 || got > 1) fail_msg("kill point %ld: %lld receipts appeared", k, got);
        store_whole(f, 1 + got);
        if (done) { /* k is past the victim's last file operation */
            if (got != 1) fail_msg("the victim that was not killed (k = %ld) stored no receipt", k);
        } else if (got == 0) {
            if (first_after) fail_msg("kill point %ld lost the receipt that kill point %ld kept", k, first_after);
            uncommitted++;
            last_before = k;
        } else {
            committed++;
            if (!first_after) first_after = k;
        }
    }
    if (!done) fail_msg("a victim was still killed at file operation %d", MAX_KILL_POINTS);
    /* both sides of the commit point were hit */
    if (uncommitted == 0 || committed == 0)
        fail_msg("kills before the commit: %d, after it: %d (need both)", uncommitted, committed);

    /* recovery: crash at the last point before the commit (c = 0) or the
     * first after it (c = 1), then kill the next writer at each point */
    for (c = 0; c < 2; c++) {
        long crash = c ? first_after : last_before;
        snprintf(tag, sizeof tag, "crash%d", c);
        restore(f, "one");
        assert_int_equal(victim(f, crash), 1);
        snapshot(f, tag); /* the files as the killed writer left them */
        for (k = 1, done = 0; k <= MAX_KILL_POINTS && !done; k++, n_rec++) {
            restore(f, tag);
            done = !victim(f, k);
            got = receipts_count(f) - 1 - c; /* the recovering writer's own: 0 or 1 */
            if (got < 0)
                fail_msg("a writer killed at point %ld lost the receipt committed by one killed at point %ld", k,
                         crash);
            if (got > 1 || (done && got != 1))
                fail_msg("recovery from kill point %ld, killed at %ld: %lld receipts of its own", crash, k, got);
            store_whole(f, 1 + c + got);
        }
        if (!done) fail_msg("a recovering writer was still killed at file operation %d", MAX_KILL_POINTS);
    }

    /* and the store is still writable and the chain continues */
    got = receipts_count(f);
    assert_int_equal(write_one(f, "after", 0, err, sizeof err), 0);
    store_whole(f, got + 1);
    shim_remove();
    print_message("      %d kill points: %d before the commit, %d after it; %ld of a recovering writer\n",
                  uncommitted + committed, uncommitted, committed, n_rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_never_partial, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
