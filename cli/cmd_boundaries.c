/*
 * cmd_boundaries.c - `dsv4q boundaries`: every named rounding
 * point, its kind and format, where it sits, the reference line it comes
 * from, which model family has it (V4, V4.1, both) and which profiles
 * enable it; then the behaviour switches (never in a profile).
 * docs/boundaries.md is this output.
 */
#include <stdio.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "oracle/boundary.h"

int dsv4q_cmd_boundaries(int argc, char **argv)
{
    dsv4q_boundaries_args o;
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    const int md = o.markdown;
    uint64_t prof[4];
    for (int p = 0; p < 4; p++) dsv4q_profile_set(dsv4q_profile_names[p], &prof[p]);
    if (md) {
        printf("| boundary | kind | models | format | where | reference | source | model | qat | exact |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|\n");
    } else {
        printf("%-17s %-8s %-6s %-36s %s\n", "boundary", "kind", "models", "format",
               "profiles (source model qat exact)");
    }
    /* the reference boundaries, then the behaviour switches (B4) */
    for (int b = 0; b < DSV4Q_B_SWITCH_END; b = b + 1 == DSV4Q_B_COUNT ? DSV4Q_B_SWITCH_FIRST : b + 1) {
        const dsv4q_boundary_info *i = dsv4q_boundary_get(b);
        const char *kind = i->kind == DSV4Q_BK_MODEL ? "model" : i->kind == DSV4Q_BK_SWITCH ? "switch" : "storage";
        const char *models = i->arch == DSV4Q_BA_V4 ? "V4" : i->arch == DSV4Q_BA_V41 ? "V4.1" : "both";
        char on[4][4];
        for (int p = 0; p < 4; p++) snprintf(on[p], sizeof on[p], "%s", (prof[p] >> b) & 1 ? "on" : "-");
        if (md)
            printf("| `%s` | %s | %s | %s | %s | `%s` | %s | %s | %s | %s |\n", i->name, kind, models, i->format,
                   i->where, i->reference, on[0], on[1], on[2], on[3]);
        else
            printf("%-17s %-8s %-6s %-36s %-3s %-3s %-3s %-3s\n  where: %s\n  from:  %s\n", i->name, kind, models,
                   i->format, on[0], on[1], on[2], on[3], i->where, i->reference);
    }
    return 0;
}
