/*
 * cmd_synth.c - `dsv4q synth --config NAME|FILE --out DIR [--seed S]
 * [--shards N]`: write a deterministic checkpoint in DeepSeek's format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cmds.h"
#include "io/config.h"
#include "io/synth.h"

int dsv4q_cmd_synth(int argc, char **argv)
{
    const char *cfgname = "tiny", *out = NULL;
    unsigned long long seed = 1;
    int shards = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) { fprintf(stderr, "dsv4q synth: option %s needs a value\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--config")) cfgname = argv[++i];
        else if (!strcmp(argv[i], "--out")) out = argv[++i];
        else if (!strcmp(argv[i], "--seed") || !strcmp(argv[i], "--shards")) {
            const char *v = argv[++i];
            char *end;
            long long n = strtoll(v, &end, 10);
            if (*end || n < 0 || (n == 0 && !strcmp(argv[i - 1], "--shards"))) {
                fprintf(stderr, "dsv4q synth: %s needs a %s integer, got '%s'\n", argv[i - 1],
                        strcmp(argv[i - 1], "--shards") ? "non-negative" : "positive", v);
                return 2;
            }
            if (!strcmp(argv[i - 1], "--seed")) seed = (unsigned long long)n;
            else shards = (int)n;
        }
        else { fprintf(stderr, "dsv4q synth: unknown option '%s'\n", argv[i]); return 2; }
    }
    if (!out) { fprintf(stderr, "dsv4q synth: --out DIR is required\n"); return 2; }
    dsv4q_config cfg;
    char err[1024];
    int rc = strchr(cfgname, '/') || strstr(cfgname, ".json") ? dsv4q_config_load(&cfg, cfgname, err, sizeof err)
                                                               : dsv4q_config_builtin(&cfg, cfgname, err, sizeof err);
    if (rc || dsv4q_synth_write(&cfg, seed, out, shards, err, sizeof err)) {
        fprintf(stderr, "dsv4q synth: %s\n", err);
        return 2;
    }
    printf("wrote %s (config %s, seed %llu, %d shard%s)\n", out, cfgname, seed, shards, shards == 1 ? "" : "s");
    return 0;
}
