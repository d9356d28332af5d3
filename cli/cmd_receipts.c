/*
 * cmd_receipts.c - the `dsv4q keygen` and `dsv4q receipts ...` commands.
 *
 * Owns: argument parsing, human-readable output and exit statuses of the
 * receipts CLI. It is a thin layer over receipts.h (all checking lives in
 * verify.c) so that what the CLI reports is exactly what the library
 * decides. The command table (cli/cmdtab.c) dispatches to dsv4q_cmd_keygen /
 * dsv4q_cmd_receipts with argv[0] = the subcommand name. Exit status: 0 ok, 1 verification
 * failed (or keygen refused / failed), 2 usage or I/O error. Parsing is
 * hand-written (no getopt global state) so the entry points can be called
 * repeatedly in one process (tests).
 */
#include "base/file.h"
#include "cli/cmds.h"
#include "receipts/receipts_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_VERIFY_FAILED 1
#define EXIT_USAGE 2

static const char receipts_usage[] =
    "usage: dsv4q receipts list [--db FILE] [--kind K] [--last N]\n"
    "       dsv4q receipts show ID [--db FILE]\n"
    "       dsv4q receipts verify [ID|--all] [--pubkey FILE] [--db FILE]\n"
    "       dsv4q receipts export ID [--json] [--pubkey FILE] [--out FILE] [--db FILE]\n"
    "       dsv4q receipts verify-json FILE [--pubkey FILE]\n"
    "The default database is $DSV4Q_DB, else ./dsv4q.db. Exit status: 0 ok,\n"
    "1 verification failed, 2 usage or I/O error.\n";

typedef struct opts {
    const char *db, *kind, *pubkey, *out;
    long long last;
    int all, json, help;
    const char *pos[4];
    int npos;
} opts;

/* Parse a positive decimal id/count; -1 if not one. */
static long long parse_pos(const char *s)
{
    char *end;
    long long v;
    if (!s || !*s)
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end || v <= 0)
        return -1;
    return v;
}

/* Options may appear anywhere; "--opt=VALUE" and "--opt VALUE" both work.
 * Returns 0 or -1 (message printed). */
static int parse_opts(int argc, char **argv, int start, opts *o)
{
    int i;
    memset(o, 0, sizeof *o);
    o->last = -1;
    for (i = start; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        const char *names[] = {"--db", "--kind", "--last", "--pubkey", "--out"};
        size_t j, nl;
        int matched = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
            continue;
        }
        if (strcmp(a, "--all") == 0) {
            o->all = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        for (j = 0; j < sizeof names / sizeof *names && !matched; j++) {
            nl = strlen(names[j]);
            if (strncmp(a, names[j], nl) != 0 || (a[nl] != '\0' && a[nl] != '='))
                continue;
            matched = 1;
            if (a[nl] == '=')
                val = a + nl + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                fprintf(stderr, "dsv4q: %s needs a value\n", names[j]);
                return -1;
            }
            switch (j) {
            case 0: o->db = val; break;
            case 1: o->kind = val; break;
            case 2:
                if ((o->last = parse_pos(val)) < 0) {
                    fprintf(stderr, "dsv4q: --last needs a positive number, got \"%s\"\n", val);
                    return -1;
                }
                break;
            case 3: o->pubkey = val; break;
            default: o->out = val; break;
            }
        }
        if (matched)
            continue;
        if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "dsv4q: unknown option %s\n", a);
            return -1;
        }
        if (o->npos == (int)(sizeof o->pos / sizeof *o->pos)) {
            fprintf(stderr, "dsv4q: too many arguments\n");
            return -1;
        }
        o->pos[o->npos++] = a;
    }
    return 0;
}

int dsv4q_cmd_keygen(int argc, char **argv)
{
    opts o;
    char err[512], keyid[DSV4Q_KEYID_HEX + 1], path[4096];

    if (parse_opts(argc, argv, 1, &o) || o.help || o.npos || o.db || o.kind || o.pubkey ||
        o.last > 0 || o.all || o.json) {
        fprintf(stderr, "usage: dsv4q keygen [--out FILE]\n"
                        "Creates an Ed25519 signing key (mode 0600) and FILE.pub. Default FILE:\n"
                        "$DSV4Q_KEY, else $XDG_CONFIG_HOME/dsv4q/signing.key, else\n"
                        "~/.config/dsv4q/signing.key. Never overwrites a key.\n");
        return o.help ? 0 : EXIT_USAGE;
    }
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

static int cmd_list(const opts *o)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char err[512];
    int rc = EXIT_USAGE, src, n = 0;
    const char *sql =
        "SELECT id, created, kind, verdict, backend_id, signer_key_id, hash FROM ("
        " SELECT * FROM receipts WHERE (?1 IS NULL OR kind = ?1) ORDER BY id DESC LIMIT ?2"
        ") ORDER BY id";

    if (o->npos || o->pubkey || o->all || o->json || o->out) {
        fputs(receipts_usage, stderr);
        goto done;
    }
    if (dsv4q_rcpt_open(o->db, 0, &db, NULL, err, sizeof err)) {
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

static int cmd_show(const opts *o)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    dsv4q_rcpt_row row;
    char err[512], sql[1024];
    long long id = o->npos == 1 ? parse_pos(o->pos[0]) : -1;
    int rc = EXIT_USAGE, src, i;

    memset(&row, 0, sizeof row);
    if (id < 0 || o->pubkey || o->all || o->json || o->out || o->kind || o->last > 0) {
        fputs(receipts_usage, stderr);
        goto done;
    }
    if (dsv4q_rcpt_open(o->db, 0, &db, NULL, err, sizeof err)) {
        fprintf(stderr, "dsv4q receipts show: %s\n", err);
        goto done;
    }
    snprintf(sql, sizeof sql, "%s WHERE id = ?1", dsv4q_rcpt_select_sql);
    src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        src = sqlite3_step(st);
    }
    if (src == SQLITE_DONE) {
        fprintf(stderr, "dsv4q receipts show: no receipt %lld\n", id);
        goto done;
    }
    if (src != SQLITE_ROW || dsv4q_rcpt_row_load(st, &row, err, sizeof err)) {
        fprintf(stderr, "dsv4q receipts show: %s\n",
                src != SQLITE_ROW ? sqlite3_errmsg(db) : err);
        goto done;
    }
    printf("%-16s %lld\n", "id", row.id);
    for (i = 0; i < RF_COUNT; i++)
        printf("%-16s %s\n", dsv4q_rcpt_fields[i].name, row.f[i]);
    printf("%-16s %s\n%-16s %s\n", "hash", row.hash, "signature",
           *row.signature ? row.signature : "(unsigned)");
    rc = 0;
done:
    dsv4q_rcpt_row_free(&row);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

static int cmd_verify(const opts *o)
{
    dsv4q_verify_result res;
    char err[512];
    long long id = 0;
    int r;

    if (o->npos > 1 || (o->npos == 1 && o->all) || o->json || o->out || o->kind ||
        o->last > 0 || (o->npos == 1 && (id = parse_pos(o->pos[0])) < 0)) {
        fputs(receipts_usage, stderr);
        return EXIT_USAGE;
    }
    r = dsv4q_receipts_verify(o->db, id, o->pubkey, stdout, &res, err, sizeof err);
    fflush(stdout);
    if (r < 0) {
        fprintf(stderr, "dsv4q receipts verify: %s\n", err);
        return EXIT_USAGE;
    }
    return r ? EXIT_VERIFY_FAILED : 0;
}

static int cmd_export(const opts *o)
{
    char err[512], *json = NULL;
    long long id = o->npos == 1 ? parse_pos(o->pos[0]) : -1;
    FILE *f = NULL;
    int rc = EXIT_USAGE;

    if (id < 0 || o->all || o->kind || o->last > 0) {
        fputs(receipts_usage, stderr);
        goto done;
    }
    if (dsv4q_receipt_export_json(o->db, id, o->pubkey, &json, err, sizeof err)) {
        fprintf(stderr, "dsv4q receipts export: %s\n", err);
        goto done;
    }
    f = o->out ? dsv4q_out_open(o->out, err, sizeof err) : stdout;   /* atomic: temp + fsync + rename */
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
        dsv4q_rcpt_err(err, errlen, "%s", ferr);
        return NULL;
    }
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 65536;
            if (cap > (64u << 20) || !(q = realloc(buf, cap + 1))) {
                dsv4q_rcpt_err(err, errlen, "%s: too large or out of memory", path);
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
        dsv4q_rcpt_err(err, errlen, "cannot read %s", path);
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

static int cmd_verify_json(const opts *o)
{
    char err[512], *text;
    int r;

    if (o->npos != 1 || o->all || o->kind || o->last > 0 || o->out || o->db) {
        fputs(receipts_usage, stderr);
        return EXIT_USAGE;
    }
    text = slurp(o->pos[0], err, sizeof err);
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
    opts o;
    const char *sub = argc > 1 ? argv[1] : NULL;

    if (!sub || strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 ||
        strcmp(sub, "help") == 0) {
        fputs(receipts_usage, sub ? stdout : stderr);
        return sub ? 0 : EXIT_USAGE;
    }
    if (parse_opts(argc, argv, 2, &o))
        return EXIT_USAGE;
    if (o.help) {
        fputs(receipts_usage, stdout);
        return 0;
    }
    if (strcmp(sub, "list") == 0)
        return cmd_list(&o);
    if (strcmp(sub, "show") == 0)
        return cmd_show(&o);
    if (strcmp(sub, "verify") == 0)
        return cmd_verify(&o);
    if (strcmp(sub, "export") == 0)
        return cmd_export(&o);
    if (strcmp(sub, "verify-json") == 0)
        return cmd_verify_json(&o);
    fprintf(stderr, "dsv4q receipts: unknown subcommand \"%s\"\n%s", sub, receipts_usage);
    return EXIT_USAGE;
}
