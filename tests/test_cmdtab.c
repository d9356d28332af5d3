/*
 * test_cmdtab.c - the command table's front door (cli/cmdtab.c), driven
 * through dsv4q_cli_main exactly as the binary is:
 *
 *  - every command and mode: `CMD [MODE] --help` and `help CMD` exit 0,
 *    `CMD [MODE] --no-such-option` exits 2;
 *  - the refusals the table exists for, each an exit 2 before any work:
 *    an option of another command (qualify --profile), of another mode
 *    (qualify --list --backend), two modes at once, a missing required
 *    option (run without --width), a duplicated single-valued option, two
 *    exclusive options (--tokens with --prompt-len), a stray positional;
 *  - `--version` names the compiler and the reproducibility flags, and
 *    they include -ffp-contract=off;
 *  - the README's command table is byte-identical to `help --markdown`
 *    (stale README = failure; `make docs` regenerates it);
 *  - the table is consistent (dsv4q_cli_table_check), and a default
 *    printed in help is the value the parser stores: giving it explicitly
 *    changes nothing (qualify --timeout 300, --whole-model 600, capture
 *    3600, --prompt-len 64 pinned), and a default that is only described
 *    ("[default: synthesized tiny]") leaves the field 0/NULL;
 *  - the parser fills the struct: positional words, the action, repeated
 *    options, the "given" flags;
 *  - no file of cli/ but the table (cmdtab.c) and its parser
 *    (optparse.c) holds an option name as a string literal or indexes
 *    argv: the commands read their options struct only.
 * Expected statuses come from the contract (0 help, 2 usage), not from
 * running the code.
 */
#include "tests/testutil.h"
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include "cli/cmdopts.h"
#include "cli/cmdtab.h"
#include "harness/cases/cases.h"

/* Run the front door with stdout and stderr sent to `cap` (NULL: dropped). */
static int front(char *cap, size_t caplen, const char *a1, ...)
{
    char *argv[16] = {"dsv4q"};
    int argc = 1;
    va_list ap;
    va_start(ap, a1);
    for (const char *a = a1; a && argc < 15; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    char path[] = "/tmp/dsv4q-cmdtab-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int so = dup(1), se = dup(2);
    dup2(fd, 1);
    dup2(fd, 2);
    int rc = dsv4q_cli_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    if (cap) {
        ssize_t n = pread(fd, cap, caplen - 1, 0);
        cap[n > 0 ? n : 0] = 0;
    }
    close(fd);
    unlink(path);
    return rc;
}

static const char *mode_word(const dsv4q_mode *m) { return m->select ? m->select : NULL; }

static void every_command_has_help(void **state)
{
    (void)state;
    int n;
    const dsv4q_mode *t = dsv4q_cli_modes(&n);
    assert_true(n >= 15);
    static char out[65536];
    for (int i = 0; i < n; i++) {
        const char *w = mode_word(&t[i]);
        int rc = w ? front(out, sizeof out, t[i].cmd, w, "--help", NULL) : front(out, sizeof out, t[i].cmd, "--help", NULL);
        if (rc != 0) fail_msg("%s %s --help: exit %d", t[i].cmd, w ? w : "", rc);
        /* the help names every option of the mode */
        for (const dsv4q_optspec *o = t[i].opts; o->name; o++)
            if (!strstr(out, o->name)) fail_msg("%s --help does not mention %s", t[i].cmd, o->name);
        assert_int_equal(front(out, sizeof out, "help", t[i].cmd, NULL), 0);
        assert_non_null(strstr(out, t[i].summary));
    }
    assert_int_equal(front(NULL, 0, "help", NULL), 0);
    assert_int_equal(front(NULL, 0, "help", "no-such-command", NULL), 2);
    assert_int_equal(front(NULL, 0, "no-such-command", NULL), 2);
}

static void every_command_refuses_a_bogus_option(void **state)
{
    (void)state;
    int n;
    const dsv4q_mode *t = dsv4q_cli_modes(&n);
    static char out[4096];
    for (int i = 0; i < n; i++) {
        const char *w = mode_word(&t[i]);
        int rc = w ? front(out, sizeof out, t[i].cmd, w, "--bogus-opt", NULL)
                   : front(out, sizeof out, t[i].cmd, "--bogus-opt", NULL);
        if (rc != 2) fail_msg("%s %s --bogus-opt: exit %d, want 2", t[i].cmd, w ? w : "", rc);
        /* one line naming the option and the command */
        if (!strstr(out, "--bogus-opt") || !strstr(out, t[i].cmd)) fail_msg("message does not name them: %s", out);
    }
}

static void contradictions_are_refused(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(front(out, sizeof out, "boundaries", "--frob", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--taps", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--boundary", "gemm_act_fp8=off", NULL), 2);
    /* qualify honours --profile as a declaration (issue 16); a bad one is refused */
    assert_int_equal(front(out, sizeof out, "qualify", "--backend", "cpu-ref", "--profile", "exact:bogus", NULL), 2);
    assert_non_null(strstr(out, "--profile"));
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--backend", "cpu-ref", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--whole-model", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list-ops", "--shapes", "pro", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--ops", "rmsnorm", NULL), 2);   /* no --backend */
    assert_non_null(strstr(out, "--backend"));
    assert_int_equal(front(out, sizeof out, "run", "--out", "/tmp/x.safetensors", NULL), 2);
    assert_non_null(strstr(out, "--width"));
    assert_int_equal(front(out, sizeof out, "run", "--width", "f32", "--width", "f64", "--out", "/tmp/x", NULL), 2);
    assert_int_equal(front(out, sizeof out, "sensitivity", "--tokens", "t.json", "--prompt-len", "4", NULL), 2);
    assert_int_equal(front(out, sizeof out, "sensitivity", "stray", NULL), 2);
    assert_int_equal(front(out, sizeof out, "sensitivity", "--width", "f32", NULL), 2);
    assert_int_equal(front(out, sizeof out, "margins", "--width", "f32", NULL), 2);
    assert_int_equal(front(out, sizeof out, "capture", "--out", "/tmp", "--backend", "cpu-ref", "--profile", "exact",
                           NULL), 2);
    assert_int_equal(front(out, sizeof out, "synth", "--seed", NULL), 2);   /* value missing */
    assert_int_equal(front(out, sizeof out, "golden", NULL), 2);
    assert_int_equal(front(out, sizeof out, "golden", "verify", NULL), 2);
    assert_int_equal(front(out, sizeof out, "golden", "list", "--frob", NULL), 2);
    /* accepted: list with its own options runs (exit 0) */
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--shapes", "flash", NULL), 0);
    assert_non_null(strstr(out, "("));
}

static void version_names_the_build(void **state)
{
    (void)state;
    static char out[4096];
    assert_int_equal(front(out, sizeof out, "--version", NULL), 0);
    assert_non_null(strstr(out, "dsv4q "));
    assert_non_null(strstr(out, "compiler: "));
    assert_non_null(strstr(out, "-ffp-contract=off"));
    assert_null(strstr(out, "fast-math: results"));
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void readme_table_is_generated(void **state)
{
    (void)state;
    char *readme = slurp("README.md");
    assert_non_null(readme);
    const char *mark = "<!-- generated: dsv4q help --markdown (make docs) -->\n", *end = "<!-- end generated -->";
    char *a = strstr(readme, mark), *b = a ? strstr(a, end) : NULL;
    assert_non_null(a);
    assert_non_null(b);
    a += strlen(mark);
    char *gen = NULL;
    size_t glen = 0;
    FILE *f = open_memstream(&gen, &glen);
    dsv4q_cli_markdown(f);
    fclose(f);
    if (glen != (size_t)(b - a) || memcmp(gen, a, glen))
        fail_msg("README.md's command table is stale: run `make docs` (generated %zu bytes, README has %zu)", glen,
                 (size_t)(b - a));
    free(gen);
}

static void table_is_consistent(void **state)
{
    (void)state;
    char err[512] = "";
    if (dsv4q_cli_table_check(err, sizeof err)) fail_msg("command table: %s", err);
}

/* argv of the mode with its action word or selector and every required
 * option with a value of its kind; extra words appended. */
static int mode_argv(const dsv4q_mode *m, char **argv, int cap, const char *x1, const char *x2)
{
    int n = 0;
    argv[n++] = (char *)m->cmd;
    if (m->select) argv[n++] = (char *)m->select;
    for (const dsv4q_optspec *o = m->opts; o->name && n + 2 < cap; o++) {
        if (!(o->flags & DSV4Q_OPT_REQ) || (m->select && !strcmp(o->name, m->select))) continue;
        argv[n++] = (char *)o->name;
        if (o->kind == DSV4Q_ARG_FLAG) continue;
        static char word[64];   /* one ENUM row among the required ones */
        if (o->kind == DSV4Q_ARG_ENUM) snprintf(word, sizeof word, "%.*s", (int)strcspn(o->metavar, "|"), o->metavar);
        argv[n++] = o->kind == DSV4Q_ARG_OUTPATH ? "/tmp/dsv4q-cmdtab-out"
                    : o->kind == DSV4Q_ARG_INT || o->kind == DSV4Q_ARG_DOUBLE ? "1"
                    : o->kind == DSV4Q_ARG_ENUM ? word : "x";
    }
    if (x1) argv[n++] = (char *)x1;
    if (x2) argv[n++] = (char *)x2;
    argv[n] = NULL;
    return n;
}

/* The [default: ...] text of row o in the help of mode number `which` of
 * its command (help prints the modes in table order). */
static int printed_default(const dsv4q_mode *modes, int nmodes, const dsv4q_mode *m, const dsv4q_optspec *o,
                           char *out, size_t len)
{
    int which = 0;
    for (int i = 0; i < nmodes && &modes[i] != m; i++) which += !strcmp(modes[i].cmd, m->cmd);
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    dsv4q_cli_help(f, m->cmd);
    fclose(f);
    char *blk = text;
    for (int k = 0; k <= which && blk; k++) blk = strstr(k ? blk + 1 : blk, "usage: dsv4q ");
    assert_non_null(blk);
    char *next = strstr(blk + 1, "usage: dsv4q "), key[128];
    if (next) *next = 0;
    snprintf(key, sizeof key, " %s%s%s ", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    char *line = strstr(blk, key), *d = line ? strstr(line, "[default: ") : NULL, *eol = line ? strchr(line, '\n') : NULL;
    int found = d && (!eol || d < eol);
    if (found) snprintf(out, len, "%.*s", (int)strcspn(d + 10, "]\n"), d + 10);
    free(text);
    return found;
}

static int field_equal(const dsv4q_optspec *o, const char *a, const char *b)
{
    if (o->kind == DSV4Q_ARG_STRING || o->kind == DSV4Q_ARG_OUTPATH) {
        const char *x = *(const char *const *)(a + o->off), *y = *(const char *const *)(b + o->off);
        return x == y || (x && y && !strcmp(x, y));
    }
    return !memcmp(a + o->off, b + o->off, o->size);
}

static int field_zero(const dsv4q_optspec *o, const char *a)
{
    for (size_t i = 0; i < o->size; i++)
        if (a[o->off + i]) return 0;
    return 1;
}

static void help_defaults_are_the_values_parsed(void **state)
{
    (void)state;
    int n, checked = 0;
    const dsv4q_mode *t = dsv4q_cli_modes(&n);
    for (int i = 0; i < n; i++) {
        const dsv4q_mode *m = &t[i];
        char *a = calloc(1, m->opts_size), *b = calloc(1, m->opts_size), *argv[64];
        assert_true(a && b);
        int argc = mode_argv(m, argv, 60, NULL, NULL);
        if (dsv4q_cli_parse(argc, argv, a, m->opts_size) != -1) fail_msg("%s %s: minimal argv refused", m->cmd, m->select);
        for (const dsv4q_optspec *o = m->opts; o->name; o++) {
            char shown[256];
            if (!printed_default(t, n, m, o, shown, sizeof shown)) {
                if (o->dflt) fail_msg("%s: %s has a default the help does not print", m->cmd, o->name);
                continue;
            }
            if (!o->dflt) {   /* a described default: the command resolves the unset field */
                if (!field_zero(o, a)) fail_msg("%s: %s [default: %s] but the field is set", m->cmd, o->name, shown);
                if (isdigit((unsigned char)shown[0]))   /* a number shown is a value: the row's DFLT */
                    fail_msg("%s: %s [default: %s] is a value the parser does not store", m->cmd, o->name, shown);
                continue;
            }
            /* the value is what help prints before any description */
            char value[256];
            snprintf(value, sizeof value, "%.*s", (int)strcspn(shown, ", ("), shown);
            argc = mode_argv(m, argv, 60, o->name, value);
            if (dsv4q_cli_parse(argc, argv, b, m->opts_size) != -1)
                fail_msg("%s %s: %s %s (its printed default) refused", m->cmd, m->select ? m->select : "", o->name, value);
            if (!field_equal(o, a, b))
                fail_msg("%s %s: %s: help says [default: %s], the parser stores something else", m->cmd,
                         m->select ? m->select : "", o->name, shown);
            checked++;
        }
        free(a);
        free(b);
    }
    assert_true(checked >= 20);
    /* pinned: the per-mode --timeout and the prompt length, from the help text and the struct */
    char *argv[8] = {"qualify", "--backend", "cpu-ref", NULL}, shown[64];
    dsv4q_qualify_args q;
    assert_int_equal(dsv4q_cli_parse(3, argv, &q, sizeof q), -1);
    assert_true(q.timeout == 300 && q.sets == (int)DSV4Q_CASE_SET_FLASH && q.c.profile == NULL);
    char *wm[] = {"qualify", "--whole-model", "--backend", "cpu-ref", NULL};
    assert_int_equal(dsv4q_cli_parse(4, wm, &q, sizeof q), -1);
    assert_true(q.timeout == 600 && q.whole_model && q.c.prompt_len == 64 && q.c.decode == 8 && q.c.seed == 1);
    dsv4q_capture_args c;
    char *cap[] = {"capture", "--out", "/tmp/dsv4q-cmdtab-cap", NULL};
    assert_int_equal(dsv4q_cli_parse(3, cap, &c, sizeof c), -1);
    assert_true(c.timeout == 3600 && c.c.width == 64 && !c.c.width_set && !c.timeout_set);
    dsv4q_cli_opts o;
    char *sens[] = {"sensitivity", NULL};
    assert_int_equal(dsv4q_cli_parse(1, sens, &o, sizeof o), -1);
    assert_true(o.prompt_len == 64 && !o.prompt_len_set && !strcmp(o.profile, "source"));
    int nm;
    const dsv4q_mode *modes = dsv4q_cli_modes(&nm);
    const struct { int mode; const char *opt, *want; } pins[] = {
        {1, "--timeout", "300"}, {2, "--timeout", "600"}, {0, "--prompt-len", "64"}, {2, "--prompt-len", "64"}};
    for (size_t k = 0; k < sizeof pins / sizeof pins[0]; k++) {
        const dsv4q_mode *m = &modes[pins[k].mode];
        const dsv4q_optspec *row = NULL;
        for (const dsv4q_optspec *r = m->opts; r->name; r++)
            if (!strcmp(r->name, pins[k].opt)) row = r;
        assert_non_null(row);
        assert_true(printed_default(modes, nm, m, row, shown, sizeof shown));
        assert_string_equal(shown, pins[k].want);
    }
    for (int i = 0; i < nm; i++)
        if (!strcmp(modes[i].cmd, "capture"))
            for (const dsv4q_optspec *r = modes[i].opts; r->name; r++)
                if (!strcmp(r->name, "--timeout")) {
                    assert_true(printed_default(modes, nm, &modes[i], r, shown, sizeof shown));
                    assert_string_equal(shown, "3600");
                }
}

static void parser_fills_the_struct(void **state)
{
    (void)state;
    dsv4q_receipts_args r;
    char *show[] = {"receipts", "show", "7", "--db", "x.db", NULL};
    assert_int_equal(dsv4q_cli_parse(5, show, &r, sizeof r), -1);
    assert_int_equal(r.c.action, DSV4Q_RECEIPTS_SHOW);
    assert_int_equal(r.c.npos, 1);
    assert_string_equal(r.c.pos[0], "7");
    assert_string_equal(r.c.db, "x.db");
    char *two[] = {"receipts", "show", "7", "8", NULL};
    assert_int_equal(dsv4q_cli_parse(4, two, &r, sizeof r), 2);
    char *eq[] = {"receipts", "list", "--db=x.db", NULL};   /* one spelling: --opt VALUE */
    assert_int_equal(dsv4q_cli_parse(3, eq, &r, sizeof r), 2);
    dsv4q_qualify_args q;
    char *rep[] = {"qualify", "--backend", "a", "-x", "--backend", "b", "--case", "rmsnorm(", "--boundary", "kv_fp8=on",
                   "--boundary", "gemm_act_fp8=off", "-q", "--shapes", "all", NULL};
    assert_int_equal(dsv4q_cli_parse(15, rep, &q, sizeof q), -1);
    assert_int_equal(q.nb, 2);
    assert_string_equal(q.backend[1], "b");
    assert_int_equal(q.nk, 1);
    assert_string_equal(q.c.boundary, "kv_fp8=on,gemm_act_fp8=off");
    assert_true(q.stop_on_fail && q.c.quiet && !q.c.profile_set);
    assert_int_equal(q.sets, (int)(DSV4Q_CASE_SET_FLASH | DSV4Q_CASE_SET_PRO | DSV4Q_CASE_SET_FLASH41));
    char *bad[] = {"qualify", "--backend", "a", "--timeout", "0", NULL};
    assert_int_equal(dsv4q_cli_parse(5, bad, &q, sizeof q), 2);
    dsv4q_cli_opts o;
    char *wrong[] = {"qualify", "--backend", "a", NULL};   /* another command's struct: refused, not overrun */
    assert_int_equal(dsv4q_cli_parse(3, wrong, &o, sizeof o), 2);
    char *run[] = {"run", "--width", "f32", "--out", "/tmp/x.st", "--decode", "3", NULL};
    assert_int_equal(dsv4q_cli_parse(7, run, &o, sizeof o), -1);
    assert_true(o.width == 32 && o.decode == 3 && o.decode_set && !o.prompt_len_set);
    dsv4q_golden_args g;
    char *gl[] = {"golden", "list", NULL};
    assert_int_equal(dsv4q_cli_parse(2, gl, &g, sizeof g), -1);
    assert_true(g.c.action == DSV4Q_GOLDEN_LIST && g.c.threads == 1 && !g.threads_set);
}

/* String literals of a C file, and whether it indexes argv, outside
 * comments. Returns a malloc'd text of the literals, one per line. */
static char *literals_of(const char *path, int *indexes_argv)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char src[1 << 20];
    size_t n = fread(src, 1, sizeof src - 1, f);
    fclose(f);
    src[n] = 0;
    char *lit = NULL;
    size_t llen = 0;
    FILE *out = open_memstream(&lit, &llen);
    *indexes_argv = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '/' && src[i + 1] == '*') {
            char *e = strstr(src + i + 2, "*/");
            i = e ? (size_t)(e - src) + 1 : n;
        } else if (src[i] == '/' && src[i + 1] == '/') {
            while (i < n && src[i] != '\n') i++;
        } else if (src[i] == '\'') {
            for (i++; i < n && src[i] != '\''; i++) i += src[i] == '\\';
        } else if (src[i] == '"') {
            for (i++; i < n && src[i] != '"'; i++) {
                if (src[i] == '\\') fputc(src[i++], out);
                fputc(src[i], out);
            }
            fputc('\n', out);
        } else if (!strncmp(src + i, "argv[", 5) &&
                   (i == 0 || !(isalnum((unsigned char)src[i - 1]) || src[i - 1] == '_'))) {
            *indexes_argv = 1;
        }
    }
    fclose(out);
    return lit;
}

static void no_option_name_outside_the_table(void **state)
{
    (void)state;
    int n, files = 0;
    const dsv4q_mode *t = dsv4q_cli_modes(&n);
    DIR *d = opendir("cli");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 3 || (strcmp(e->d_name + len - 2, ".c") && strcmp(e->d_name + len - 2, ".h"))) continue;
        if (!strcmp(e->d_name, "cmdtab.c") || !strcmp(e->d_name, "optparse.c")) continue;   /* the table, its parser */
        char path[300];
        snprintf(path, sizeof path, "cli/%s", e->d_name);
        int argv_indexed;
        char *lit = literals_of(path, &argv_indexed);
        files++;
        if (argv_indexed && strcmp(e->d_name, "main.c"))
            fail_msg("%s indexes argv: a command reads its options struct (cli/cmdopts.h)", path);
        for (char *l = lit; *l; l = strchr(l, '\n') + 1) {
            *strchr(l, '\n') = 0;
            int optlike = l[0] == '-' && l[1] == '-' && isalpha((unsigned char)l[2]) &&
                          !l[strspn(l, "-abcdefghijklmnopqrstuvwxyz0123456789")];
            for (int i = 0; i < n && !optlike; i++)
                for (const dsv4q_optspec *o = t[i].opts; o->name && !optlike; o++)
                    optlike = !strcmp(l, o->name) || (o->alias && !strcmp(l, o->alias));
            optlike |= !strcmp(l, "-h");
            if (optlike)
                fail_msg("%s: the option name \"%s\" as a string literal outside the table (cli/cmdtab.c)", path, l);
            l[strlen(l)] = '\n';
        }
        free(lit);
    }
    closedir(d);
    assert_true(files >= 15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_command_has_help),
        cmocka_unit_test(every_command_refuses_a_bogus_option),
        cmocka_unit_test(contradictions_are_refused),
        cmocka_unit_test(version_names_the_build),
        cmocka_unit_test(readme_table_is_generated),
        cmocka_unit_test(table_is_consistent),
        cmocka_unit_test(help_defaults_are_the_values_parsed),
        cmocka_unit_test(parser_fills_the_struct),
        cmocka_unit_test(no_option_name_outside_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
