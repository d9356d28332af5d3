/* cmds.h - the dsv4q subcommands; each takes argv with argv[0] = its name,
 * parses it by the command table first (dsv4q_cli_parse, cli/cmdtab.h) and
 * returns the process exit status (0 ok, 1 verdict fail, 2 error). The
 * table (cli/cmdtab.c) names the entry point of each command's modes. */
#ifndef DSV4Q_CMDS_H
#define DSV4Q_CMDS_H
int dsv4q_cmd_sensitivity(int argc, char **argv);
int dsv4q_cmd_run(int argc, char **argv);
int dsv4q_cmd_synth(int argc, char **argv);
int dsv4q_cmd_boundaries(int argc, char **argv);
int dsv4q_cmd_ablate(int argc, char **argv);
int dsv4q_cmd_golden(int argc, char **argv);
int dsv4q_cmd_margins(int argc, char **argv);
int dsv4q_cmd_qualify(int argc, char **argv);
int dsv4q_cmd_stages(int argc, char **argv);
int dsv4q_cmd_weight(int argc, char **argv);
/* cli/cmd_cache.c: `cache decode FILE` and `cache list` (docs/caches.md). */
int dsv4q_cmd_cache(int argc, char **argv);
int dsv4q_cmd_capture(int argc, char **argv);
int dsv4q_cmd_replay(int argc, char **argv);
/* cli/cmd_receipts.c: `keygen` (1 when it refuses to overwrite a key) and
 * `receipts list|show|verify|export|verify-json` (1: verification failed). */
int dsv4q_cmd_keygen(int argc, char **argv);
int dsv4q_cmd_receipts(int argc, char **argv);
#endif
