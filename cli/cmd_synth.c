/*
 * cmd_synth.c - `dsv4q synth`: write a deterministic checkpoint in
 * DeepSeek's format (io/synth.h, docs/synth.md). Options: the command
 * table (cli/cmdtab.c, `dsv4q help synth`), read from dsv4q_synth_args.
 */
#include <stdio.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "io/config.h"
#include "io/synth.h"

int dsv4q_cmd_synth(int argc, char **argv)
{
    dsv4q_synth_args o;
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    dsv4q_config cfg;
    char err[1024];
    const char *name = o.config;
    int rc = strchr(name, '/') || strstr(name, ".json") ? dsv4q_config_load(&cfg, name, err, sizeof err)
                                                         : dsv4q_config_builtin(&cfg, name, err, sizeof err);
    if (rc || dsv4q_synth_write(&cfg, (uint64_t)o.c.seed, o.c.out, (int)o.shards, err, sizeof err)) {
        fprintf(stderr, "dsv4q synth: %s\n", err);
        return 2;
    }
    printf("wrote %s (config %s, seed %llu, %ld shard%s)\n", o.c.out, name, (unsigned long long)o.c.seed, o.shards,
           o.shards == 1 ? "" : "s");
    return 0;
}
