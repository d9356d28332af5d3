/*
 * main.c - the one dsv4q binary: dispatch to subcommands.
 */
#include <stdio.h>
#include <string.h>
#include "cli/cmds.h"
#include "receipts/receipts.h"

static void usage(FILE *f)
{
    fprintf(f,
            "dsv4q - FP64 reference oracle and qualification harness for DeepSeek V4 kernels\n\n"
            "usage: dsv4q COMMAND [options]\n\n"
            "  sensitivity [--model DIR] [--tokens FILE | --prompt-len N] [--decode M] [--profile P]\n"
            "              [--boundary NAME=on|off]... [--json FILE] [--db FILE] [--threads N]\n"
            "        fp32 vs fp64 oracle on identical inputs: the fp32 sensitivity floor, per layer\n"
            "        and stage; no --model: synthesizes the embedded default `tiny` and runs on it\n"
            "  run --model DIR [--tokens FILE | --prompt-len N] [--decode M] --width f32|f64\n"
            "      --profile P --out FILE.safetensors [--taps]\n"
            "        one oracle run; logits (and stage taps) as safetensors\n"
            "  synth --config tiny|tiny-bf16|flash-slice|FILE.json --out DIR [--seed S] [--shards N]\n"
            "        write a deterministic checkpoint in DeepSeek's format\n"
            "  ablate [--model DIR] [--tokens FILE | --prompt-len N] [--decode M] [--width f32|f64]\n"
            "         [--base PROFILE] [--json FILE] [--svg FILE]\n"
            "        toggle each boundary (and family) against the base profile: logit NRMS,\n"
            "        greedy agreement and share of the fp32 floor\n"
            "  margins [--model DIR] [--tokens FILE | --prompt-len N] [--decode M] [--profile P]\n"
            "          [--positions last|all|LIST] [--csv FILE] [--json FILE] [--svg FILE]\n"
            "        the indexer's top-k cut per ratio-4 layer: margins in BF16 quanta, tie-runs,\n"
            "        fp32/fp64 and source/model support flips and their attention-output effect\n"
            "  qualify --backend B [--backend B2]... [--gates FILE] [--ops LIST] [--shapes flash|pro|all|long]\n"
            "          [--case KEY]... [--seeds A-B] [--timeout S] [--no-isolate] [--all-metrics] [--json FILE]\n"
            "        qualify a kernel backend (built-in oracle-f32, cpu-ref, mutant:NAME, or a plugin .so)\n"
            "        operator by operator against oracle-f64; exit 0 pass, 1 fail, 2 error\n"
            "        (--list: case keys; --list-ops [--markdown]: the backend ABI's operator table)\n"
            "  qualify --whole-model --backend B [--model DIR] [--prompt-len N] [--decode M]\n"
            "        compose the whole model from the backend's operators and gate its logits\n"
            "        against the fp64 oracle, relative to the measured fp32 sensitivity floor\n"
            "  stages [--model DIR | --config NAME] [--markdown] [--names]\n"
            "        the stage table: what an engine capture holds (tensor names, shapes, boundaries)\n"
            "  capture --model DIR [--tokens FILE | --prompt-len N] [--decode M] --out DIR [--width f64|f32]\n"
            "          [--profile P] [--dtype f64|f32|storage] [--engine NAME] [--backend B] [--layers A:B]\n"
            "        the oracle writes a capture of its own run in the engine capture format (--backend:\n"
            "        a built-in backend computes the stages it has operators for)\n"
            "  replay --model DIR --capture FILE|DIR [--gates FILE] [--no-model] [--all-metrics] [--json FILE]\n"
            "        qualify an engine from its capture, stage by stage on its own inputs; exit 0 pass,\n"
            "        1 fail, 2 error (docs/captures.md)\n"
            "  boundaries [--markdown]   list the named rounding points and profiles\n"
            "  golden record|check|list [--ops CASE,...] [--dir DIR]   bit-exact reference outputs (goldens/)\n"
            "  keygen [--out FILE]       make an Ed25519 signing key for receipts\n"
            "  receipts list|show|verify|export|verify-json ...   inspect and verify receipts\n\n"
            "profiles: source (every rounding of the reference), model, qat, exact\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *c = argv[1];
    argc--;
    argv++;
    if (!strcmp(c, "sensitivity")) return dsv4q_cmd_sensitivity(argc, argv);
    if (!strcmp(c, "run")) return dsv4q_cmd_run(argc, argv);
    if (!strcmp(c, "synth")) return dsv4q_cmd_synth(argc, argv);
    if (!strcmp(c, "boundaries")) return dsv4q_cmd_boundaries(argc, argv);
    if (!strcmp(c, "ablate")) return dsv4q_cmd_ablate(argc, argv);
    if (!strcmp(c, "keygen")) return dsv4q_cmd_keygen(argc, argv);
    if (!strcmp(c, "receipts")) return dsv4q_cmd_receipts(argc, argv);
    if (!strcmp(c, "golden")) return dsv4q_cmd_golden(argc, argv);
    if (!strcmp(c, "margins")) return dsv4q_cmd_margins(argc, argv);
    if (!strcmp(c, "qualify")) return dsv4q_cmd_qualify(argc, argv);
    if (!strcmp(c, "stages")) return dsv4q_cmd_stages(argc, argv);
    if (!strcmp(c, "capture")) return dsv4q_cmd_capture(argc, argv);
    if (!strcmp(c, "replay")) return dsv4q_cmd_replay(argc, argv);
    fprintf(stderr, "dsv4q: unknown command '%s'\n\n", c);
    usage(stderr);
    return 2;
}
