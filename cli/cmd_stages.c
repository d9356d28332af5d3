/*
 * cmd_stages.c - `dsv4q stages`: the stage table (oracle/stages.h), the
 * contract an engine's capture is written against.
 *
 * Options: the command table (cli/cmdtab.c, `dsv4q help stages`), read
 * from dsv4q_stages_args.
 *
 * Without a config the shapes are symbolic ([s, hc, d]); with one they are
 * concrete except s, the tokens of a call. --names lists every tensor name
 * of every layer (what a complete capture of one call holds).
 * docs/captures.md embeds `dsv4q stages --markdown`.
 */
#include <stdio.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "io/config.h"
#include "io/gguf_model.h"
#include "oracle/stages.h"

int dsv4q_cmd_stages(int argc, char **argv)
{
    dsv4q_stages_args o;
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    const char *model = o.c.model, *config = o.config;
    const int md = o.markdown, names = o.names;
    dsv4q_config cfg;
    char err[1024];
    int have = 0;
    if (model) {
        char p[4200];
        snprintf(p, sizeof p, "%s/config.json", model);
        const int kind = dsv4q_model_path_kind(model, err, sizeof err);
        if (kind < 0 || (kind == 1 ? dsv4q_gguf_load_config(model, &cfg, err, sizeof err)
                                   : dsv4q_config_load(&cfg, p, err, sizeof err))) {
            fprintf(stderr, "dsv4q stages: %s\n", err);
            return 2;
        }
        have = 1;
    } else if (config) {
        if (strstr(config, ".json") ? dsv4q_config_load(&cfg, config, err, sizeof err)
                                    : dsv4q_config_builtin(&cfg, config, err, sizeof err)) {
            fprintf(stderr, "dsv4q stages: %s\n", err);
            return 2;
        }
        have = 1;
    }
    if (names) {
        if (!have) {
            fprintf(stderr, "dsv4q stages: --names needs --model or --config (the number of layers)\n");
            return 2;
        }
        /* the forward order of the model's stage table (oracle/stages.h dsv4q_stage_slot_arch) */
        for (long k = 0; k < dsv4q_stage_nslots_arch(cfg.arch, cfg.n_layers); k++) {
            int st, l;
            dsv4q_stage_slot_arch(cfg.arch, cfg.n_layers, k, &st, &l);
            const dsv4q_stage_info *si = dsv4q_stage_get_arch(cfg.arch, st);
            if (!dsv4q_stage_present(&cfg, st, l)) continue;
            for (int io = 0; io < 2; io++)
                for (int t = 0; t < (io ? si->nout : si->nin); t++) {
                    char nm[DSV4Q_STAGE_NAME_MAX], sh[64];
                    dsv4q_stage_tensor_name_arch(cfg.arch, nm, sizeof nm, st, l < 0 ? 0 : l, io, t);
                    dsv4q_stage_shape_str(io ? &si->out[t] : &si->in[t], &cfg, sh, sizeof sh);
                    printf("%-36s %s\n", nm, sh);
                }
        }
        return 0;
    }
    if (!md) {
        if (have)
            printf("%sstage table for %s (%d layers, hc %d, dim %d, vocab %d); s = tokens of the call\n\n",
                   cfg.arch == DSV4Q_ARCH_V41 ? "DeepSeek V4.1 " : "",
                   cfg.name[0] ? cfg.name : (model ? model : config), cfg.n_layers, cfg.hc_mult, cfg.dim,
                   cfg.vocab_size);
        else
            printf("stage table (per layer in forward order, plus model.embed and model.head); s = tokens of the "
                   "call\n\n");
    }
    dsv4q_stage_print(stdout, have ? &cfg : NULL, md);
    if (!md)
        printf("\nnames: L{layer}.{stage}.{in|out} for a stage with one input/output, L{layer}.{stage}.{in|out}.{name}"
               "\nwith several; model.{stage}... for embed and head. Capture format: docs/captures.md\n");
    return 0;
}
