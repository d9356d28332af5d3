/*
 * cmd_receipts.c - the `dsv4q keygen` and `dsv4q receipts ...` commands.
 *
 * Owns: human-readable output and exit statuses of the receipts CLI. It is
 * a thin layer over receipts.h (all checking lives in verify.c) so that
 * what the CLI reports is exactly what the library decides. Modes,
 * options and positional words are the command table's (cli/cmdtab.c,
 * `dsv4q help receipts`), read from dsv4q_receipts_args; this file only
 * checks what the table cannot: that an ID is a positive integer. Exit
 * status: 0 ok, 1 verification failed (or keygen refused / failed), 2
 * usage or I/O error.
 */
#include "base/file.h"
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "receipts/receipts_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_VERIFY_FAILED 1
#define EXIT_USAGE 2

static const char *const SUB[] = {[DSV4Q_RECEIPTS_LIST] = "list", [DSV4Q_RECEIPTS_SHOW] = "show",
                                  [DSV4Q_RECEIPTS_VERIFY] = "verify", [DSV4Q_RECEIPTS_EXPORT] = "export",
                                  [DSV4Q_RECEIPTS_VERIFY_JSON] = "verify-json"};

/* The receipt ID (the mode's positional word): a positive decimal, or -1
 * after a one-line error. */
static long long receipt_id(const dsv4q_receipts_args *o)
{
    const char *s = o->c.npos ? o->c.pos[0] : NULL;
    char *end;
    long long v = -1;
    if (s && *s) {
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || *end || v <= 0) v = -1;
    }
    if (v < 0)
        fprintf(stderr, "dsv4q receipts %s: %s (see dsv4q help receipts)\n", SUB[o->c.action],
                s ? "the receipt ID must be a positive integer" : "the receipt ID is missing");
    return v;
}

int dsv4q_cmd_keygen(int argc, char **argv)
{
    dsv4q_cli_opts o;
    char err[512], keyid[DSV4Q_KEYID_HEX + 1], path[4096];
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    if (!o.out && dsv4q_key_default_path(path, sizeof path)) {
        fprintf(stderr, "dsv4q keygen: no default key location (set DSV4Q_KEY or HOME)\n");
        return EXIT_USAGE;
    }
    if (o.out)
        snprintf(path, sizeof path, "%s", o.out);
    if (dsv4q_keygen(path, keyid, err, sizeof err)) {
        fprintf(stderr, "dsv4q keygen: %s\n", err);
        return EXIT_USAGE;   /* an existing key or an unwritable path: bad input, not a verdict */
    }
    printf("wrote signing key %s (mode 0600) and public key %s.pub; key id %s\n", path, path,
           keyid);
    return 0;
}

static int cmd_list(const dsv4q_receipts_args *o)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char err[512];
    int rc = EXIT_USAGE, src, n = 0;
    const char *sql =
        "SELECT id, created, kind, verdict, backend_id, signer_key_id, hash FROM ("
        " SELECT * FROM receipts WHERE (?1 IS NULL OR kind = ?1) ORDER BY id DESC LIMIT ?2"
        ") ORDER BY id";

    if (dsv4q_receipt_open(o->c.db, 0, &db, NULL, err, sizeof err)) {
        fprintf(stderr, "dsv4q receipts list: %s\n", err);
        goto done;
    }
    src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (src != SQLITE_OK) {
        fprintf(stderr, "dsv4q receipts list: %s\n", sqlite3_errmsg(db));
        goto done;
    }
    if (o->kind)
        sqlite3_bind_text(st, 1, o->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, o->last > 0 ? o->last : -1);
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        const char *signer = (const char *)sqlite3_column_text(st, 5);
        const char *backend = (const char *)sqlite3_column_text(st, 4);
        if (n++ == 0)
            printf("%6s  %-20s  %-11s  %-7s  %-16s  %-16s  %s\n", "ID", "CREATED", "KIND",
                   "VERDICT", "BACKEND", "SIGNER", "HASH");
        printf("%6lld  %-20s  %-11s  %-7s  %-16s  %-16s  %.16s\n",
               (long long)sqlite3_column_int64(st, 0), sqlite3_column_text(st, 1),
               sqlite3_column_text(st, 2), sqlite3_column_text(st, 3),
               backend && *backend ? backend : "-", signer && *signer ? signer : "(unsigned)",
               sqlite3_column_text(st, 6));
    }
    if (src != SQLITE_DONE) {
        fprintf(stderr, "dsv4q receipts list: %s\n", sqlite3_errmsg(db));
        goto done;
    }
    if (n == 0)
        printf("no receipts%s%s\n", o->kind ? " of kind " : "", o->kind ? o->kind : "");
    rc = 0;
done:
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

static int cmd_show(const dsv4q_receipts_args *o)
{
    sqlite3 *db = NULL;
    dsv4q_receipt_row row;
    char err[512];
    long long id = receipt_id(o);
    int rc = EXIT_USAGE, i;

    memset(&row, 0, sizeof row);
    if (id < 0)
        goto done;
    if (dsv4q_receipt_open(o->c.db, 0, &db, NULL, err, sizeof err)) {
        fprintf(stderr, "dsv4q receipts show: %s\n", err);
        goto done;
    }
    if (dsv4q_receipt_row_get(db, o->c.db, id, &row, err, sizeof err)) {   /* "no receipt N in PATH" */
        fprintf(stderr, "dsv4q receipts show: %s\n", err);
        goto done;
    }
    printf("%-16s %lld\n", "id", row.id);
    for (i = 0; i < RF_COUNT; i++)
        printf("%-16s %s\n", dsv4q_receipt_fields[i].name, row.f[i]);
    printf("%-16s %s\n%-16s %s\n", "hash", row.hash, "signature",
           *row.signature ? row.signature : "(unsigned)");
    rc = 0;
done:
    dsv4q_receipt_row_free(&row);
    sqlite3_close(db);
    return rc;
}

static int cmd_verify(const dsv4q_receipts_args *o)
{
    dsv4q_verify_result res;
    char err[512];
    long long id = 0;
    int r;

    if (o->c.npos && o->all) {
        fprintf(stderr, "dsv4q receipts verify: an ID and --all exclude each other (see dsv4q help receipts)\n");
        return EXIT_USAGE;
    }
    if (o->c.npos && (id = receipt_id(o)) < 0)
        return EXIT_USAGE;
    r = dsv4q_receipt_verify_opts(o->c.db, id, o->pubkey, o->allow_unsigned, stdout, &res, err, sizeof err);
    fflush(stdout);
    if (r < 0) {
        fprintf(stderr, "dsv4q receipts verify: %s\n", err);
        return EXIT_USAGE;
    }
    return r ? EXIT_VERIFY_FAILED : 0;
}

static int cmd_export(const dsv4q_receipts_args *o)
{
    char err[512], *json = NULL;
    long long id = receipt_id(o);
    FILE *f = NULL;
    int rc = EXIT_USAGE;

    if (id < 0)
        goto done;
    if (dsv4q_receipt_export_json(o->c.db, id, o->pubkey, &json, err, sizeof err)) {
        fprintf(stderr, "dsv4q receipts export: %s\n", err);
        goto done;
    }
    f = o->c.out ? dsv4q_out_open(o->c.out, err, sizeof err) : stdout;   /* atomic: temp + fsync + rename */
    if (!f) {
        fprintf(stderr, "dsv4q receipts export: %s\n", err);
        goto done;
    }
    if (fputs(json, f) == EOF || fputc('\n', f) == EOF || fflush(f) != 0) {
        fprintf(stderr, "dsv4q receipts export: write failed: %s\n", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (f && f != stdout) {
        if (rc != 0)
            dsv4q_out_discard(f);
        else if (dsv4q_out_close(f, err, sizeof err) != 0) {
            fprintf(stderr, "dsv4q receipts export: %s\n", err);
            rc = EXIT_USAGE;
        }
    }
    free(json);
    return rc;
}

/* Read a whole file ("-" = stdin); malloc'd, NULL with err. */
static char *slurp(const char *path, char *err, size_t errlen)
{
    char ferr[400];
    FILE *f = strcmp(path, "-") == 0 ? stdin : dsv4q_file_fopen_read(path, "receipts file", ferr, sizeof ferr);
    char *buf = NULL, *q;
    size_t n = 0, cap = 0, k;

    if (!f) {
        dsv4q_errf(err, errlen, "%s", ferr);
        return NULL;
    }
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 65536;
            if (cap > (64u << 20) || !(q = realloc(buf, cap + 1))) {
                dsv4q_errf(err, errlen, "%s: too large or out of memory", path);
                free(buf);
                buf = NULL;
                goto done;
            }
            buf = q;
        }
        k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
    }
    if (ferror(f)) {
        dsv4q_errf(err, errlen, "cannot read %s", path);
        free(buf);
        buf = NULL;
        goto done;
    }
    buf[n] = '\0';
done:
    if (f != stdin)
        fclose(f);
    return buf;
}

static int cmd_verify_json(const dsv4q_receipts_args *o)
{
    char err[512], *text;
    int r;

    if (o->c.npos != 1) {
        fprintf(stderr, "dsv4q receipts verify-json: the FILE is missing (see dsv4q help receipts)\n");
        return EXIT_USAGE;
    }
    text = slurp(o->c.pos[0], err, sizeof err);
    if (!text) {
        fprintf(stderr, "dsv4q receipts verify-json: %s\n", err);
        return EXIT_USAGE;
    }
    r = dsv4q_receipt_verify_json(text, o->pubkey, stdout, err, sizeof err);
    fflush(stdout);
    free(text);
    if (r < 0) {
        fprintf(stderr, "dsv4q receipts verify-json: %s\n", err);
        return EXIT_USAGE;
    }
    return r ? EXIT_VERIFY_FAILED : 0;
}

int dsv4q_cmd_receipts(int argc, char **argv)
{
    dsv4q_receipts_args o;
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0)
        return prc;
    switch (o.c.action) {
    case DSV4Q_RECEIPTS_LIST: return cmd_list(&o);
    case DSV4Q_RECEIPTS_SHOW: return cmd_show(&o);
    case DSV4Q_RECEIPTS_VERIFY: return cmd_verify(&o);
    case DSV4Q_RECEIPTS_EXPORT: return cmd_export(&o);
    default: return cmd_verify_json(&o);
    }
}
