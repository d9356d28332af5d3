/*
 * opthelp.c - every text printed from the command table (cmdtab.h):
 * `CMD --help` / `help CMD` (each mode, each row with its default and
 * whether it is required or repeatable, the exclusive pairs), `help` (one
 * synopsis per mode) and `help --markdown` (the README's command table,
 * which tests/test_cmdtab.c compares byte for byte). A default is printed
 * from the row's DFLT (the value the parser stores) followed by its DOC,
 * so help cannot name a default the command does not use.
 */
#include <string.h>
#include "cli/cmdtab.h"

/* s, with '|' escaped for a Markdown table when md */
static void put(FILE *f, const char *s, int md)
{
    for (; *s; s++) {
        if (*s == '|' && md) fputs("\\|", f);
        else fputc(*s, f);
    }
}

/* "cmd [action] [POS] --req V [--opt V]..." (all: the optional ones too) */
static void synopsis(FILE *f, const dsv4q_mode *m, int md, int all)
{
    put(f, m->cmd, md);
    if (dsv4q_mode_has_action(m)) { fputc(' ', f); put(f, m->select, md); }
    if (m->pos) { fputc(' ', f); put(f, m->pos, md); }
    for (int pass = 0; pass < 2; pass++)
        for (const dsv4q_optspec *o = m->opts; o->name; o++) {
            int req = (o->flags & DSV4Q_OPT_REQ) != 0;
            if (req != (pass == 0) || (!all && !req)) continue;
            fputs(req ? " " : " [", f);
            put(f, o->name, md);
            if (o->metavar) { fputc(' ', f); put(f, o->metavar, md); }
            if (!req) fputc(']', f);
            if (dsv4q_opt_repeatable(o)) fputs("...", f);
        }
}

void dsv4q_cli_help(FILE *f, const char *cmd)
{
    int n, any = 0;
    const dsv4q_mode *modes = dsv4q_cli_modes(&n);
    for (int i = 0; i < n; i++) {
        const dsv4q_mode *m = &modes[i];
        if (strcmp(m->cmd, cmd)) continue;
        fprintf(f, "%susage: dsv4q ", any++ ? "\n" : "");
        synopsis(f, m, 0, 1);
        fprintf(f, "\n  %s\n  docs: %s\n", m->summary, m->docs);
        for (const dsv4q_optspec *o = m->opts; o->name; o++) {
            char lhs[96];
            snprintf(lhs, sizeof lhs, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
                     o->metavar ? " " : "", o->metavar ? o->metavar : "");
            fprintf(f, "    %-30s %s", lhs, o->help);
            if (o->flags & DSV4Q_OPT_REQ) fputs(" (required)", f);
            if (dsv4q_opt_repeatable(o)) fputs(" (repeatable)", f);
            if (o->dflt || o->dflt_doc)
                fprintf(f, " [default: %s%s]", o->dflt ? o->dflt : "", o->dflt_doc ? o->dflt_doc : "");
            fputc('\n', f);
        }
        if (m->conflicts[0].a) {
            fputs("  exclusive:", f);
            for (const dsv4q_optpair *c = m->conflicts; c->a; c++) fprintf(f, " %s/%s", c->a, c->b);
            fputc('\n', f);
        }
    }
    if (!any) fprintf(f, "dsv4q: unknown command '%s' (see dsv4q help)\n", cmd);
}

void dsv4q_cli_usage(FILE *f)
{
    int n;
    const dsv4q_mode *modes = dsv4q_cli_modes(&n);
    fprintf(f, "dsv4q - FP64 reference oracle and qualification harness for DeepSeek V4 kernels\n\n"
               "usage: dsv4q COMMAND [options]    (dsv4q help COMMAND, dsv4q COMMAND --help: its options)\n"
               "       dsv4q --version\n\n");
    for (int i = 0; i < n; i++) {
        fputs("  ", f);
        synopsis(f, &modes[i], 0, 0);
        if (modes[i].select && !dsv4q_mode_has_action(&modes[i])) fprintf(f, " (%s)", modes[i].select);
        fprintf(f, "\n      %s\n", modes[i].summary);
    }
    fprintf(f, "\nprofiles: source (every rounding of the reference), model, qat, exact\n"
               "exit status: 0 ok / pass, 1 a verdict failed, 2 bad input or error\n");
}

void dsv4q_cli_markdown(FILE *f)
{
    int n;
    const dsv4q_mode *modes = dsv4q_cli_modes(&n);
    fputs("| command | what it does | docs |\n|---|---|---|\n", f);
    for (int i = 0; i < n; i++) {
        fputs("| `", f);
        synopsis(f, &modes[i], 1, 1);
        fprintf(f, "` | %s | %s |\n", modes[i].summary, modes[i].docs);
    }
}
