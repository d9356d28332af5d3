/*
 * cmdtab.h - the dsv4q command table: every command, its modes and the
 * options each mode takes, declared once. The front door (dsv4q_cli_main)
 * checks argv against it before a command's own parser runs, so an
 * unknown, irrelevant, duplicated, missing or contradicting option is
 * refused with exit 2 naming the option and the command; `CMD --help`,
 * `help CMD`, `help` and `help --markdown` (the README's command table)
 * are printed from it, so the texts cannot drift from what is accepted.
 *
 * Why a table of our own and not libpopt: the commands already share one
 * value parser (common.c); what was missing is the per-command allow-list,
 * modes (qualify --list / --list-ops / --whole-model, golden record|check),
 * conflicts, and Markdown output. popt would give the first (and its own
 * help format) but neither modes, conflicts nor Markdown, and it would
 * replace every command's parser at once; this table is ~60 lines of
 * checking plus the declarations.
 */
#ifndef DSV4Q_CLI_CMDTAB_H
#define DSV4Q_CLI_CMDTAB_H

#include <stdio.h>

enum {
    DSV4Q_OPT_REQ = 1,   /* must be given in this mode */
    DSV4Q_OPT_REP = 2,   /* may be given more than once */
};

/* One option of one mode. metavar NULL: a flag (takes no value). alias: a
 * short spelling ("-x") or NULL. dflt: shown in help ("" or NULL: none). */
typedef struct dsv4q_optspec {
    const char *name, *alias, *metavar, *dflt, *help;
    int flags;
} dsv4q_optspec;

/* One mode of a command. select: NULL (the command's default mode), an
 * option that selects the mode ("--list"), or an action word that must be
 * argv[1] ("record"). npos: how many positional words the mode takes
 * besides the action (pos: their metavar for help). conflicts: pairs of
 * option names that exclude each other, NULL-terminated. */
typedef struct dsv4q_mode {
    const char *cmd, *select, *pos, *summary, *docs;
    int npos;
    const dsv4q_optspec *opts;          /* terminated by a {NULL} row */
    const char *const *conflicts;       /* {"--a", "--b", ..., NULL} */
    int (*fn)(int argc, char **argv);
} dsv4q_mode;

/* The table: n modes, grouped by command in table order. */
const dsv4q_mode *dsv4q_cli_modes(int *n);

/* Check argv (argv[0] = the command name) against the table. Returns -1
 * when the command should run (*mode set), else the exit status to return
 * at once: 0 after printing help (--help/-h), 2 after a one-line error on
 * stderr naming the option and the command. */
int dsv4q_cli_check(int argc, char **argv, const dsv4q_mode **mode);

/* Help for one command (all its modes, every option with its default). */
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
