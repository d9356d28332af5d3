/*
 * cmdtab.h - the dsv4q command table: every command, its modes and the
 * options each mode takes, declared once, and the one parser that reads
 * argv by it. A row binds an option to its kind, the field of the
 * command's options struct it fills (cli/cmdopts.h), its default and its
 * help (git's parse-options shape); `CMD --help`, `help`, `help --markdown`
 * (the README's command table) print the same rows, so what is documented,
 * what is accepted and what the command reads cannot drift apart.
 *
 * A command calls dsv4q_cli_parse(argc, argv, &opts, sizeof opts) first
 * and reads only the struct afterwards; an unknown, irrelevant, duplicated,
 * missing, contradicting or malformed option is refused there with exit 2
 * and one line naming the option and the command.
 *
 * Why a table of our own and not libpopt or getopt_long: modes (qualify
 * --list / --list-ops / --whole-model, golden record|check|list), exclusive
 * pairs, per-mode defaults (qualify --timeout 300, --whole-model 600) and
 * the Markdown table are what the CLI needs; popt has none of them, and
 * getopt keeps global state (the tests call the commands in one process).
 */
#ifndef DSV4Q_CLI_CMDTAB_H
#define DSV4Q_CLI_CMDTAB_H

#include <stddef.h>
#include <stdio.h>

/* What a row's value is, and so how it is stored at its field. */
enum dsv4q_arg_kind {
    DSV4Q_ARG_FLAG,     /* int = 1; takes no value */
    DSV4Q_ARG_STRING,   /* const char * = the value */
    DSV4Q_ARG_OUTPATH,  /* const char *; the file's directory must exist and be writable (dsv4q_cli_check_out) */
    DSV4Q_ARG_INT,      /* long, decimal, in [lo, hi] */
    DSV4Q_ARG_DOUBLE,   /* double > gt */
    DSV4Q_ARG_ENUM,     /* int = values[k] for the k-th '|'-separated word of the metavar */
    DSV4Q_ARG_LIST,     /* repeatable: const char *field[N] plus an int count, at most N */
    DSV4Q_ARG_JOIN,     /* repeatable: the values comma-joined into a char field[N] */
};

enum { DSV4Q_OPT_REQ = 1 };   /* flags: must be given in this mode */

/* One option of one mode. Rows are written with the constructors in
 * cmdtab.c, which type-check the field against the kind. */
typedef struct dsv4q_optspec {
    const char *name, *alias, *metavar, *help;   /* alias: a short spelling ("-x") or NULL */
    int kind, flags;
    size_t off, size;        /* the field: offset into the mode's options struct, its size */
    size_t count_off;        /* LIST: offset of its int count */
    size_t set_off;          /* 1 + offset of an int set to 1 when the option is given; 0: none */
    const char *dflt;        /* the default, as it would be typed: stored before argv is read */
    const char *dflt_doc;    /* help prints "[default: <dflt><dflt_doc>]"; alone (dflt NULL):
                              * what the field's 0/NULL means to the command */
    long lo, hi;             /* INT: the accepted range */
    double gt;               /* DOUBLE: the value must exceed it */
    const char *noun;        /* DOUBLE: what the value is, for the error ("seconds") */
    const int *values;       /* ENUM: one per metavar word */
    int nvalues;
} dsv4q_optspec;

/* Two options of one mode that exclude each other. */
typedef struct dsv4q_optpair {
    const char *a, *b;
} dsv4q_optpair;

/* One mode of a command. select: NULL (the command's default mode), an
 * option that selects the mode ("--list"), or an action word that must be
 * argv[1] ("record"). npos: how many positional words the mode takes
 * besides the action (pos: their metavar for help); they land in
 * dsv4q_cli_opts.pos. action: stored in dsv4q_cli_opts.action. */
typedef struct dsv4q_mode {
    const char *cmd, *select, *pos, *summary, *docs;
    int npos, action;
    const dsv4q_optspec *opts;          /* terminated by a row with name NULL */
    const dsv4q_optpair *conflicts;     /* terminated by {NULL, NULL} */
    size_t opts_size;                   /* sizeof the options struct the rows point into */
    int (*fn)(int argc, char **argv);
} dsv4q_mode;

/* A LIST or JOIN row may be given more than once. */
static inline int dsv4q_opt_repeatable(const dsv4q_optspec *o)
{
    return o->kind == DSV4Q_ARG_LIST || o->kind == DSV4Q_ARG_JOIN;
}

/* The mode is selected by an action word (argv[1]), not by an option. */
static inline int dsv4q_mode_has_action(const dsv4q_mode *m)
{
    return m->select && m->select[0] != '-';
}

/* The table: n modes, grouped by command in table order. */
const dsv4q_mode *dsv4q_cli_modes(int *n);

/* The one parse (cli/optparse.c). argv[0] is the command; opts is its
 * options struct (cli/cmdopts.h; it starts with dsv4q_cli_opts) of `size`
 * bytes, zeroed, then filled with every row's default and the options and
 * positional words of argv. Returns -1 when the command should run, else
 * the exit status to return at once: 0 after printing help (--help, -h),
 * 2 after a one-line error on stderr naming the option and the command. */
int dsv4q_cli_parse(int argc, char **argv, void *opts, size_t size);

/* The table's own consistency (every row's kind, field, default, words;
 * each mode's struct size and pairs): 0, or -1 with the first problem in
 * err. tests/test_cmdtab.c runs it. */
int dsv4q_cli_table_check(char *err, size_t errlen);

/* Help for one command (all its modes, every option with its default;
 * cli/opthelp.c). */
void dsv4q_cli_help(FILE *f, const char *cmd);
/* The overview (`dsv4q help`): one synopsis line + summary per mode. */
void dsv4q_cli_usage(FILE *f);
/* The README command table (`dsv4q help --markdown`). */
void dsv4q_cli_markdown(FILE *f);
/* `dsv4q --version`: version, git commit, compiler and the flags that
 * matter for reproducibility. */
void dsv4q_cli_version(FILE *f);

/* The whole front door: `dsv4q ARGS...` with argv[0] the program. */
int dsv4q_cli_main(int argc, char **argv);

#endif
