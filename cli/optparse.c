/*
 * optparse.c - the one argv parser of dsv4q (cmdtab.h): picks the mode,
 * checks every word against the mode's rows (unknown, of another mode,
 * given twice, missing its value, stray positional), then the required
 * options and the exclusive pairs, and only then stores: every row's
 * default first, then the values of argv in order, each converted by its
 * row's kind (a malformed value is refused naming the option). So a
 * command sees either a complete options struct or nothing, and the
 * order of the refusals is the order they always had: the words, the
 * required ones, the pairs, the values.
 *
 * Also the table's self-check (dsv4q_cli_table_check), which the parser
 * relies on: each row's field lies inside its mode's struct, each default
 * parses, each ENUM has one value per word.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cmdtab.h"
#include "cli/common.h"

#define MAX_ROWS 64   /* rows per mode (dsv4q_cli_table_check) */

static const dsv4q_optspec *find_opt(const dsv4q_mode *m, const char *a)
{
    for (const dsv4q_optspec *o = m->opts; o->name; o++)
        if (!strcmp(o->name, a) || (o->alias && !strcmp(o->alias, a))) return o;
    return NULL;
}

/* Pick the mode: the action word argv[1], else at most one selector flag,
 * else the default mode. -1 with a message when there is none. */
static int pick_mode(int argc, char **argv, const dsv4q_mode **out)
{
    int n;
    const dsv4q_mode *modes = dsv4q_cli_modes(&n), *def = NULL, *sel = NULL;
    const char *cmd = argv[0];
    for (int i = 0; i < n; i++) {
        const dsv4q_mode *m = &modes[i];
        if (strcmp(m->cmd, cmd)) continue;
        if (!m->select) { def = m; continue; }
        if (dsv4q_mode_has_action(m)) {
            if (argc > 1 && !strcmp(argv[1], m->select)) sel = m;
            continue;
        }
        for (int k = 1; k < argc; k++)
            if (!strcmp(argv[k], m->select)) {
                if (sel && strcmp(sel->select, m->select)) {
                    fprintf(stderr, "dsv4q %s: %s and %s exclude each other (see dsv4q help %s)\n", cmd, sel->select,
                            m->select, cmd);
                    return -1;
                }
                sel = m;
            }
    }
    if (!sel) sel = def;
    if (!sel) {
        fprintf(stderr, "dsv4q %s: %s '%s'; one of:", cmd, argc > 1 ? "unknown action" : "missing action",
                argc > 1 ? argv[1] : "");
        for (int i = 0; i < n; i++)
            if (!strcmp(modes[i].cmd, cmd)) fprintf(stderr, " %s", modes[i].select);
        fprintf(stderr, " (see dsv4q help %s)\n", cmd);
        return -1;
    }
    *out = sel;
    return 0;
}

/* The option is valid in another mode of the same command: say which. */
static const dsv4q_mode *other_mode_with(const dsv4q_mode *m, const char *a)
{
    int n;
    const dsv4q_mode *modes = dsv4q_cli_modes(&n);
    for (int i = 0; i < n; i++)
        if (&modes[i] != m && !strcmp(modes[i].cmd, m->cmd) && find_opt(&modes[i], a)) return &modes[i];
    return NULL;
}

/* "f32|f64" -> the index of word v, or -1. */
static int enum_index(const char *words, const char *v)
{
    size_t len = strlen(v);
    int k = 0;
    for (const char *w = words; *w; k++) {
        size_t wl = strcspn(w, "|");
        if (wl == len && !strncmp(w, v, len)) return k;
        w += wl + (w[wl] == '|');
    }
    return -1;
}

/* "f64|f32|storage" -> "f64, f32 or storage" */
static void enum_words(char *buf, size_t len, const char *words)
{
    size_t n = 0;
    int k = 0, nw = 1;
    for (const char *p = words; *p; p++) nw += *p == '|';
    buf[0] = 0;
    for (const char *w = words; *w && n < len; k++) {
        size_t wl = strcspn(w, "|");
        n += (size_t)snprintf(buf + n, len - n, "%s%.*s", k == 0 ? "" : k == nw - 1 ? " or " : ", ", (int)wl, w);
        w += wl + (w[wl] == '|');
    }
}

/* Store value v of row o into opts; `as` is the spelling given (for
 * messages). 0, or -1 after a one-line error naming the option. */
static int store(const char *cmd, const dsv4q_optspec *o, const char *as, const char *v, char *opts)
{
    void *p = opts + o->off;
    switch (o->kind) {
    case DSV4Q_ARG_FLAG:
        *(int *)p = 1;
        return 0;
    case DSV4Q_ARG_OUTPATH:
        if (dsv4q_cli_check_out(as, v)) return -1;
        /* fall through */
    case DSV4Q_ARG_STRING:
        *(const char **)p = v;
        return 0;
    case DSV4Q_ARG_INT: {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (!*v || *end || errno || n < o->lo || n > o->hi) {
            if (o->lo == 0 || o->lo == 1)
                fprintf(stderr, "dsv4q %s: %s needs a %s integer, got '%s'\n", cmd, as,
                        o->lo ? "positive" : "non-negative", v);
            else
                fprintf(stderr, "dsv4q %s: %s needs an integer in [%ld, %ld], got '%s'\n", cmd, as, o->lo, o->hi, v);
            return -1;
        }
        *(long *)p = n;
        return 0;
    }
    case DSV4Q_ARG_DOUBLE: {
        char *end;
        double x = strtod(v, &end);
        if (*end || !(x > o->gt)) {
            fprintf(stderr, "dsv4q %s: %s needs %s > %g, got '%s'\n", cmd, as, o->noun, o->gt, v);
            return -1;
        }
        *(double *)p = x;
        return 0;
    }
    case DSV4Q_ARG_ENUM: {
        int k = enum_index(o->metavar, v);
        if (k < 0) {
            char words[256];
            enum_words(words, sizeof words, o->metavar);
            fprintf(stderr, "dsv4q %s: %s must be %s, got '%s'\n", cmd, as, words, v);
            return -1;
        }
        *(int *)p = o->values[k];
        return 0;
    }
    case DSV4Q_ARG_LIST: {
        int *n = (int *)(opts + o->count_off);
        size_t cap = o->size / sizeof(const char *);
        if ((size_t)*n >= cap) {
            fprintf(stderr, "dsv4q %s: at most %zu %s\n", cmd, cap, o->name);
            return -1;
        }
        ((const char **)p)[(*n)++] = v;
        return 0;
    }
    case DSV4Q_ARG_JOIN: {
        char *s = p;
        size_t n = strlen(s);
        if (n + strlen(v) + 2 >= o->size) {
            fprintf(stderr, "dsv4q %s: too many %s\n", cmd, o->name);
            return -1;
        }
        snprintf(s + n, o->size - n, "%s%s", n ? "," : "", v);
        return 0;
    }
    }
    return -1;
}

/* One word of argv that names an option: its row, the spelling, its value. */
typedef struct given {
    const dsv4q_optspec *o;
    const char *as, *v;
} given;

/* The words: every option known to the mode, at most once unless
 * repeatable, with its value; at most npos positional words. */
static int read_words(const dsv4q_mode *m, int argc, char **argv, given *g, int *ng, dsv4q_cli_opts *c, int *seen)
{
    const char *cmd = argv[0];
    for (int i = dsv4q_mode_has_action(m) ? 2 : 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (c->npos >= m->npos) {
                fprintf(stderr, "dsv4q %s: unexpected argument '%s' (see dsv4q help %s)\n", cmd, a, cmd);
                return -1;
            }
            c->pos[c->npos++] = a;
            continue;
        }
        const dsv4q_optspec *o = find_opt(m, a);
        if (!o) {
            const dsv4q_mode *other = other_mode_with(m, a);
            if (other)
                fprintf(stderr, "dsv4q %s: option %s is not an option of %s%s%s; it belongs to %s %s (see dsv4q help %s)\n",
                        cmd, a, cmd, m->select ? " " : "", m->select ? m->select : "", cmd,
                        other->select ? other->select : "without a mode option", cmd);
            else
                fprintf(stderr, "dsv4q %s: unknown option '%s' for %s (see dsv4q help %s)\n", cmd, a, cmd, cmd);
            return -1;
        }
        assert(o - m->opts < MAX_ROWS);   /* dsv4q_cli_table_check */
        if (seen[o - m->opts]++ && !dsv4q_opt_repeatable(o)) {
            fprintf(stderr, "dsv4q %s: option %s given twice (it takes one value)\n", cmd, o->name);
            return -1;
        }
        const char *v = NULL;
        if (o->kind != DSV4Q_ARG_FLAG) {
            if (i + 1 >= argc) {
                fprintf(stderr, "dsv4q %s: option %s needs a value (%s)\n", cmd, a, o->metavar);
                return -1;
            }
            v = argv[++i];
        }
        g[(*ng)++] = (given){o, a, v};
    }
    return 0;
}

/* Required options present, no exclusive pair given together. */
static int check_words(const dsv4q_mode *m, const char *cmd, const int *seen)
{
    for (const dsv4q_optspec *o = m->opts; o->name; o++)
        if ((o->flags & DSV4Q_OPT_REQ) && !seen[o - m->opts]) {
            fprintf(stderr, "dsv4q %s: %s %s is required (see dsv4q help %s)\n", cmd, o->name,
                    o->metavar ? o->metavar : "", cmd);
            return -1;
        }
    for (const dsv4q_optpair *c = m->conflicts; c->a; c++) {
        const dsv4q_optspec *x = find_opt(m, c->a), *y = find_opt(m, c->b);
        if (x && y && seen[x - m->opts] && seen[y - m->opts]) {
            fprintf(stderr, "dsv4q %s: %s and %s exclude each other\n", cmd, c->a, c->b);
            return -1;
        }
    }
    return 0;
}

int dsv4q_cli_parse(int argc, char **argv, void *opts, size_t size)
{
    const char *cmd = argv[0];
    memset(opts, 0, size);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            dsv4q_cli_help(stdout, cmd);
            return 0;
        }
    const dsv4q_mode *m;
    if (pick_mode(argc, argv, &m)) return 2;
    if (m->opts_size != size) {   /* a command passing another command's struct: a bug, not input */
        fprintf(stderr, "dsv4q %s: internal error: options struct of %zu bytes, the table's is %zu\n", cmd, size,
                m->opts_size);
        return 2;
    }
    dsv4q_cli_opts *c = opts;
    c->action = m->action;
    int seen[MAX_ROWS] = {0}, ng = 0, rc = 2;
    given *g = malloc(sizeof *g * (size_t)(argc > 0 ? argc : 1));
    if (!g) {
        fprintf(stderr, "dsv4q %s: out of memory\n", cmd);
        return 2;
    }
    if (read_words(m, argc, argv, g, &ng, c, seen) || check_words(m, cmd, seen)) goto out;
    for (const dsv4q_optspec *o = m->opts; o->name; o++)
        if (o->dflt && store(cmd, o, o->name, o->dflt, opts)) goto out;
    for (int k = 0; k < ng; k++) {
        if (store(cmd, g[k].o, g[k].as, g[k].v, opts)) goto out;
        if (g[k].o->set_off) *(int *)((char *)opts + g[k].o->set_off - 1) = 1;
    }
    rc = -1;
out:
    free(g);
    return rc;
}

/* --- the table's self-check ---------------------------------------------- */

static int row_check(const dsv4q_mode *m, const dsv4q_optspec *o, char *err, size_t errlen)
{
    const char *why = NULL;
    static const size_t sizes[] = {
        [DSV4Q_ARG_FLAG] = sizeof(int),     [DSV4Q_ARG_STRING] = sizeof(char *), [DSV4Q_ARG_OUTPATH] = sizeof(char *),
        [DSV4Q_ARG_INT] = sizeof(long),     [DSV4Q_ARG_DOUBLE] = sizeof(double), [DSV4Q_ARG_ENUM] = sizeof(int),
    };
    int nw = 1;
    for (const char *p = o->metavar ? o->metavar : ""; *p; p++) nw += *p == '|';
    if (o->kind < DSV4Q_ARG_FLAG || o->kind > DSV4Q_ARG_JOIN) why = "unknown kind";
    else if (o->off + o->size > m->opts_size) why = "field outside the options struct";
    else if (o->kind <= DSV4Q_ARG_ENUM && o->size != sizes[o->kind]) why = "field size does not match the kind";
    else if ((o->kind == DSV4Q_ARG_FLAG) != (o->metavar == NULL)) why = "a flag has no metavar, a value one";
    else if (o->kind == DSV4Q_ARG_ENUM && nw != o->nvalues) why = "ENUM: not one value per metavar word";
    else if (o->kind == DSV4Q_ARG_LIST && (o->count_off + sizeof(int) > m->opts_size || o->dflt))
        why = "LIST: count outside the struct, or a default";
    else if (o->set_off && o->set_off - 1 + sizeof(int) > m->opts_size) why = "set flag outside the options struct";
    else if (!o->help || !o->help[0]) why = "no help";
    else if (o->dflt && dsv4q_opt_repeatable(o)) why = "a repeatable option has no default";
    if (why) {
        snprintf(err, errlen, "%s %s: %s: %s", m->cmd, m->select ? m->select : "", o->name, why);
        return -1;
    }
    return 0;
}

int dsv4q_cli_table_check(char *err, size_t errlen)
{
    int n;
    const dsv4q_mode *modes = dsv4q_cli_modes(&n);
    for (int i = 0; i < n; i++) {
        const dsv4q_mode *m = &modes[i];
        int nrows = 0;
        if (m->opts_size < sizeof(dsv4q_cli_opts) || m->npos > (int)(sizeof ((dsv4q_cli_opts *)0)->pos /
                                                                         sizeof(const char *))) {
            snprintf(err, errlen, "%s: options struct smaller than dsv4q_cli_opts, or too many positional words", m->cmd);
            return -1;
        }
        for (int k = 0; k < n; k++)
            if (!strcmp(modes[k].cmd, m->cmd) && modes[k].fn != m->fn) {
                snprintf(err, errlen, "%s: its modes have different entry points", m->cmd);
                return -1;
            }
        for (const dsv4q_optspec *o = m->opts; o->name; o++, nrows++) {
            if (row_check(m, o, err, errlen)) return -1;
            for (const dsv4q_optspec *p = m->opts; p < o; p++)
                if (!strcmp(p->name, o->name) || (o->alias && p->alias && !strcmp(p->alias, o->alias))) {
                    snprintf(err, errlen, "%s: %s twice in one mode", m->cmd, o->name);
                    return -1;
                }
        }
        if (nrows > MAX_ROWS) {
            snprintf(err, errlen, "%s: more than %d rows", m->cmd, MAX_ROWS);
            return -1;
        }
        for (const dsv4q_optpair *c = m->conflicts; c->a; c++)
            if (!find_opt(m, c->a) || !find_opt(m, c->b)) {
                snprintf(err, errlen, "%s: exclusive pair %s/%s names an option the mode does not take", m->cmd, c->a,
                         c->b);
                return -1;
            }
        /* every default parses: store it into a scratch struct */
        char *scratch = calloc(1, m->opts_size);
        if (!scratch) { snprintf(err, errlen, "out of memory"); return -1; }
        for (const dsv4q_optspec *o = m->opts; o->name; o++)
            if (o->dflt && store(m->cmd, o, o->name, o->dflt, scratch)) {
                snprintf(err, errlen, "%s: %s: the default '%s' does not parse", m->cmd, o->name, o->dflt);
                free(scratch);
                return -1;
            }
        free(scratch);
    }
    return 0;
}
