/*
 * main.c - the one dsv4q binary. Everything it does is in the command
 * table (cli/cmdtab.c): the front door checks argv against it, then
 * dispatches to the command.
 */
#include "cli/cmdtab.h"

int main(int argc, char **argv) { return dsv4q_cli_main(argc, argv); }
