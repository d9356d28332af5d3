/*
 * main.c - the one dsv4q binary. Everything it does is in the command
 * table (cli/cmdtab.c): the front door dispatches to the command, which
 * parses its argv by the table.
 */
#include <stdio.h>
#include "cli/cmdtab.h"

int main(int argc, char **argv)
{
    /* line-buffered stdout: in a CI log (stdout and stderr into one pipe)
     * warnings and progress on stderr fall between table lines, never
     * inside one and never ahead of the rows they follow */
    setvbuf(stdout, NULL, _IOLBF, 0);
    return dsv4q_cli_main(argc, argv);
}
