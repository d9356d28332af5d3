/*
 * cmdtab.c - the dsv4q command table and the front door that enforces it
 * (see cmdtab.h for why a table of our own rather than libpopt). Each
 * mode lists exactly the options its code reads; a shared option is
 * declared once as a macro below so its help and default read the same in
 * every command. The table only accepts or refuses: values are still
 * parsed by common.c and each command's own parser, so option parsing and
 * output writing stay separate.
 */
#include <stdlib.h>
#include <string.h>
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "receipts/receipts.h"
#include "receipts/version.h"

/* --- the shared vocabulary ------------------------------------------------ */
#define O_MODEL {"--model", NULL, "DIR", "synthesized tiny", "checkpoint directory (DeepSeek or Hugging Face tensor names)", 0}
#define O_TOKENS {"--tokens", NULL, "FILE", "", "tokens.json {\"prompt\": [ids], \"teacher\": [ids]}", 0}
#define O_PLEN {"--prompt-len", NULL, "N", "64", "synthetic prompt length (excludes --tokens)", 0}
#define O_DECODE {"--decode", NULL, "M", "8, or the teacher length", "teacher-forced decode steps after the prefill", 0}
#define O_SEED {"--seed", NULL, "S", "1", "seed of the synthetic prompt", 0}
#define O_PROFILE {"--profile", NULL, "P", "source", "precision profile: source, model, qat, exact", 0}
#define O_BOUNDARY {"--boundary", NULL, "NAME=on|off", "", "switch one rounding point against the profile", DSV4Q_OPT_REP}
#define O_DECLARE {"--profile", NULL, "DECL", "the backend's", "judge as this declaration: PROFILE[:NAME[=on|off],...] (docs/engines.md)", 0}
#define O_JSON {"--json", NULL, "FILE", "", "write the results as JSON", 0}
#define O_DB {"--db", NULL, "FILE", "$DSV4Q_DB, else ./dsv4q.db", "receipts database", 0}
#define O_KEY {"--key", NULL, "FILE", "$DSV4Q_KEY, else ~/.config/dsv4q/signing.key", "Ed25519 key that signs the receipt", 0}
#define O_THREADS {"--threads", NULL, "N", "OMP_NUM_THREADS, else all cores", "OpenMP threads (results do not depend on it)", 0}
#define O_QUIET {"--quiet", "-q", NULL, "", "no progress on stderr", 0}
#define O_GATES {"--gates", NULL, "FILE", "gates/default.json", "gate file (docs/gates.md)", 0}
#define O_TIMEOUT(d) {"--timeout", NULL, "S", d, "seconds before an isolated backend call counts as hung", 0}
#define O_NOISO {"--no-isolate", NULL, NULL, "", "call the backend in this process (no fork; a crash ends dsv4q)", 0}
#define O_ALLM {"--all-metrics", NULL, NULL, "", "print every metric row, not only the gated ones", 0}
#define O_MD {"--markdown", NULL, NULL, "", "print as a Markdown table", 0}
#define O_BACKEND {"--backend", NULL, "B", "", "oracle-f32, cpu-ref, mutant:NAME, or a plugin .so", DSV4Q_OPT_REQ | DSV4Q_OPT_REP}
#define O_INPUT O_MODEL, O_TOKENS, O_PLEN, O_DECODE, O_SEED
#define O_RECEIPT O_DB, O_KEY
#define O_END {NULL, NULL, NULL, NULL, NULL, 0}
#define O_CI                                                                                                      \
    {"--junit", NULL, "FILE", "", "write a JUnit XML report: one testcase per case", 0},                          \
    {"--failures-only", NULL, NULL, "", "print only the failing rows (the summary and failed: list stay)", 0},     \
    {"--stop-on-fail", "-x", NULL, "", "stop after the first failing case", 0},                                   \
    {"--require-all", NULL, NULL, "", "a case the backend does not implement fails instead of being skipped", 0}, \
    {"--require", NULL, "OPS", "", "these operators (comma-separated) must be implemented: their skips fail", 0}

static const char *const NO_CONFLICTS[] = {NULL};
static const char *const QUALIFY_CONFLICTS[] = {"--require-all", "--require", NULL};
static const char *const INPUT_CONFLICTS[] = {"--tokens", "--prompt-len", "--tokens", "--seed", NULL};
static const char *const WM_CONFLICTS[] = {"--tokens", "--prompt-len", "--tokens", "--seed", "--tokens", "--seeds",
                                           "--seed", "--seeds", NULL};

static const dsv4q_mode MODES[] = {
    {"sensitivity", NULL, NULL,
     "fp32 vs fp64 oracle on identical decoded inputs: the sensitivity floor, per layer and stage", "docs/model.md", 0,
     (const dsv4q_optspec[]){O_INPUT, O_PROFILE, O_BOUNDARY, O_JSON, O_RECEIPT, O_THREADS, O_QUIET, O_END},
     INPUT_CONFLICTS, dsv4q_cmd_sensitivity},
    {"qualify", NULL, NULL,
     "gate a kernel backend operator by operator against the fp64 oracle, bounds set by the fp32 level of the "
     "same case; exit 0 pass, 1 fail, 2 error",
     "docs/backends.md, docs/engines.md, docs/gates.md, docs/mutants.md, docs/ci.md", 0,
     (const dsv4q_optspec[]){O_BACKEND,
                             O_GATES,
                             {"--ops", NULL, "LIST", "all", "operators to qualify (comma-separated)", 0},
                             {"--shapes", NULL, "flash|pro|all|long", "flash",
                              "which shape sets (long: opt-in 1M-context sizes, docs/gates.md)", 0},
                             {"--case", NULL, "KEY|GLOB", "all", "only cases whose key contains KEY or matches GLOB",
                              DSV4Q_OPT_REP},
                             {"--seeds", NULL, "A-B", "the key's seed", "every selected case once per seed A..B", 0},
                             O_TIMEOUT("300"),
                             O_NOISO,
                             O_ALLM,
                             O_CI,
                             O_DECLARE, O_BOUNDARY,
                             {"--format-gate", NULL, "NRMS", "", "engine-stored weights: fail a case whose format error exceeds NRMS (docs/engines.md)", 0},
                             O_JSON,
                             O_RECEIPT,
                             O_THREADS,
                             O_QUIET,
                             O_END},
     QUALIFY_CONFLICTS, dsv4q_cmd_qualify},
    {"qualify", "--whole-model", NULL,
     "compose the whole model from the backend's operators; logit NRMS vs the fp64 oracle against a factor x the "
     "fp32 floor, greedy agreement, and every stage of every layer judged on the reference run's own inputs",
     "docs/gates.md", 0,
     (const dsv4q_optspec[]){{"--whole-model", NULL, NULL, "", "select this mode", DSV4Q_OPT_REQ},
                             O_BACKEND, O_INPUT,
                             {"--seeds", NULL, "A-B", "--seed", "one run per synthetic prompt seed A..B", 0},
                             O_GATES,
                             {"--timeout", NULL, "S", "600", "seconds before the isolated child (composition + per-stage "
                              "verdict) counts as hung", 0},
                             O_DECLARE, O_BOUNDARY,
                             {"--sparse-decode", NULL, NULL, "", "decode attention from SPARSE_ATTN even with WINDOW_ATTN_DECODE", 0},
                             O_NOISO, O_JSON, O_RECEIPT, O_THREADS, O_QUIET, O_END},
     WM_CONFLICTS, dsv4q_cmd_qualify},
    {"qualify", "--list", NULL, "print the case keys", "docs/backends.md", 0,
     (const dsv4q_optspec[]){{"--list", NULL, NULL, "", "select this mode", DSV4Q_OPT_REQ},
                             {"--ops", NULL, "LIST", "all", "operators to list (comma-separated)", 0},
                             {"--shapes", NULL, "flash|pro|all|long", "flash", "which shape sets", 0},
                             O_END},
     NO_CONFLICTS, dsv4q_cmd_qualify},
    {"qualify", "--list-ops", NULL, "print the backend ABI's operator table", "docs/backends.md", 0,
     (const dsv4q_optspec[]){{"--list-ops", NULL, NULL, "", "select this mode", DSV4Q_OPT_REQ}, O_MD, O_END},
     NO_CONFLICTS, dsv4q_cmd_qualify},
    {"margins", NULL, NULL,
     "the indexer's top-k cut per ratio-4 layer: margins in BF16 quanta, tie-runs, support flips and their effect",
     "docs/margins.md", 0,
     (const dsv4q_optspec[]){O_INPUT, O_PROFILE, O_BOUNDARY,
                             {"--positions", NULL, "last|all|LIST", "last", "query positions (LIST: 5,17,100-120)", 0},
                             {"--csv", NULL, "FILE", "", "write every row as CSV", 0},
                             {"--svg", NULL, "FILE", "", "margin histograms per layer", 0},
                             O_JSON, O_RECEIPT, O_THREADS, O_QUIET, O_END},
     INPUT_CONFLICTS, dsv4q_cmd_margins},
    {"ablate", NULL, NULL,
     "toggle each rounding point against the base profile: logit NRMS, greedy agreement, share of the fp32 floor",
     "docs/boundaries.md", 0,
     (const dsv4q_optspec[]){O_INPUT,
                             {"--width", NULL, "f32|f64", "f64", "width of the toggled runs", 0},
                             {"--base", NULL, "PROFILE", "source", "the profile each boundary is toggled against", 0},
                             {"--svg", NULL, "FILE", "", "bar chart of the effects", 0},
                             O_JSON, O_RECEIPT, O_THREADS, O_QUIET, O_END},
     INPUT_CONFLICTS, dsv4q_cmd_ablate},
    {"capture", NULL, NULL,
     "the oracle (or the forward pass on a backend's operators) writes a capture of its run in the engine capture format",
     "docs/captures.md", 0,
     (const dsv4q_optspec[]){O_MODEL, O_TOKENS, O_PLEN, O_DECODE, O_SEED,
                             {"--out", NULL, "DIR", "", "capture directory (one call-NNNN.safetensors per call)", DSV4Q_OPT_REQ},
                             {"--width", NULL, "f32|f64", "f64 (f32 with --backend)", "oracle width (--backend: f32 only, the ABI is F32)", 0},
                             O_PROFILE, O_BOUNDARY,
                             {"--dtype", NULL, "f64|f32|storage", "the run's width", "stored dtype of the tensors", 0},
                             {"--engine", NULL, "NAME", "dsv4q-oracle-fW or the backend", "engine name in the metadata", 0},
                             {"--backend", NULL, "B", "",
                              "built-in or plugin .so: the forward pass runs on its operators (oracle-f32 for those it lacks)", 0},
                             {"--timeout", NULL, "S", "3600", "--backend with a plugin: limit of its isolated child", 0},
                             {"--layers", NULL, "A:B", "all", "record layers A..B-1 only (plus embed and head)", 0},
                             O_THREADS, O_QUIET, O_END},
     (const char *const[]){"--tokens", "--prompt-len", "--tokens", "--seed", "--backend", "--profile", "--backend",
                           "--boundary", NULL},
     dsv4q_cmd_capture},
    {"replay", NULL, NULL,
     "qualify an engine from its capture, stage by stage on its own inputs; exit 0 pass, 1 fail, 2 error",
     "docs/captures.md, docs/ci.md", 0,
     (const dsv4q_optspec[]){O_MODEL,
                             {"--capture", NULL, "FILE|DIR", "", "the engine's capture", DSV4Q_OPT_REQ},
                             O_GATES,
                             {"--no-model", NULL, NULL, "", "skip the whole-model comparison of captured logits", 0},
                             {"--junit", NULL, "FILE", "", "write a JUnit XML report: one testcase per stage", 0},
                             O_ALLM, O_JSON, O_RECEIPT, O_THREADS, O_QUIET, O_END},
     NO_CONFLICTS, dsv4q_cmd_replay},
    {"stages", NULL, NULL, "the stage table: what an engine capture holds (tensor names, shapes, boundaries)",
     "docs/captures.md", 0,
     (const dsv4q_optspec[]){{"--model", NULL, "DIR", "", "shapes of this checkpoint", 0},
                             {"--config", NULL, "NAME|FILE", "tiny", "shapes of a built-in or JSON config", 0},
                             O_MD,
                             {"--names", NULL, NULL, "", "print the tensor names only", 0},
                             O_END},
     (const char *const[]){"--model", "--config", "--markdown", "--names", NULL}, dsv4q_cmd_stages},
    {"run", NULL, NULL, "one oracle run; logits (and every stage tap) as safetensors", "docs/model.md", 0,
     (const dsv4q_optspec[]){O_MODEL, O_TOKENS, O_PLEN, O_DECODE, O_SEED,
                             {"--width", NULL, "f32|f64", "", "oracle width", DSV4Q_OPT_REQ},
                             O_PROFILE, O_BOUNDARY,
                             {"--out", NULL, "FILE.safetensors", "", "output file", DSV4Q_OPT_REQ},
                             {"--taps", NULL, NULL, "", "also write every stage tap (L{layer}.{stage})", 0},
                             O_THREADS, O_QUIET, O_END},
     INPUT_CONFLICTS, dsv4q_cmd_run},
    {"synth", NULL, NULL, "write a deterministic checkpoint in DeepSeek's format", "docs/synth.md", 0,
     (const dsv4q_optspec[]){{"--config", NULL, "tiny|tiny-bf16|flash-slice|FILE.json", "tiny", "model config", 0},
                             {"--out", NULL, "DIR", "", "checkpoint directory", DSV4Q_OPT_REQ},
                             {"--seed", NULL, "S", "1", "weight seed", 0},
                             {"--shards", NULL, "N", "1", "number of safetensors shards", 0},
                             O_END},
     NO_CONFLICTS, dsv4q_cmd_synth},
    {"boundaries", NULL, NULL, "list the named rounding points and the profiles", "docs/boundaries.md", 0,
     (const dsv4q_optspec[]){O_MD, O_END}, NO_CONFLICTS, dsv4q_cmd_boundaries},
#define GOLDEN_OPTS                                                                                         \
    (const dsv4q_optspec[]){{"--ops", NULL, "CASE,...", "all", "only these golden cases", 0},               \
                            {"--dir", NULL, "DIR", "goldens", "golden directory", 0},                       \
                            {"--threads", NULL, "N", "1", "OpenMP threads (results do not depend on it)", 0}, \
                            O_END}
    {"golden", "check", NULL,
     "recompute every golden and compare bit-exactly (CI runs it on x86-64 and, under qemu, aarch64)",
     "docs/goldens.md", 0, GOLDEN_OPTS, NO_CONFLICTS, dsv4q_cmd_golden},
    {"golden", "record", NULL, "record the bit-exact reference outputs into goldens/", "docs/goldens.md", 0,
     GOLDEN_OPTS, NO_CONFLICTS, dsv4q_cmd_golden},
    {"golden", "list", NULL, "list the golden cases", "docs/goldens.md", 0, GOLDEN_OPTS, NO_CONFLICTS,
     dsv4q_cmd_golden},
    {"keygen", NULL, NULL, "make an Ed25519 signing key for receipts (never overwrites one)", "docs/receipts.md", 0,
     (const dsv4q_optspec[]){{"--out", NULL, "FILE", "$DSV4Q_KEY, else ~/.config/dsv4q/signing.key", "key file", 0},
                             O_END},
     NO_CONFLICTS, dsv4q_cmd_keygen},
#define R_DB {"--db", NULL, "FILE", "$DSV4Q_DB, else ./dsv4q.db", "receipts database", 0}
#define R_PUB {"--pubkey", NULL, "FILE", "the key's .pub", "public key to verify against", 0}
    {"receipts", "list", NULL, "list the stored receipts", "docs/receipts.md", 0,
     (const dsv4q_optspec[]){R_DB,
                             {"--kind", NULL, "K", "all", "only receipts of this kind (qualify, sensitivity, ...)", 0},
                             {"--last", NULL, "N", "all", "only the last N", 0},
                             O_END},
     NO_CONFLICTS, dsv4q_cmd_receipts},
    {"receipts", "show", "ID", "print one receipt", "docs/receipts.md", 1, (const dsv4q_optspec[]){R_DB, O_END},
     NO_CONFLICTS, dsv4q_cmd_receipts},
    {"receipts", "verify", "[ID]", "verify the hash chain and signatures", "docs/receipts.md", 1,
     (const dsv4q_optspec[]){{"--all", NULL, NULL, "", "every receipt", 0}, R_PUB, R_DB, O_END}, NO_CONFLICTS,
     dsv4q_cmd_receipts},
    {"receipts", "export", "ID", "export one receipt (with its signature) for verification elsewhere",
     "docs/receipts.md", 1,
     (const dsv4q_optspec[]){{"--json", NULL, NULL, "", "as JSON", 0}, R_PUB,
                             {"--out", NULL, "FILE", "stdout", "output file", 0}, R_DB, O_END},
     NO_CONFLICTS, dsv4q_cmd_receipts},
    {"receipts", "verify-json", "FILE", "verify an exported receipt", "docs/receipts.md", 1,
     (const dsv4q_optspec[]){R_PUB, O_END}, NO_CONFLICTS, dsv4q_cmd_receipts},
};

#define NMODES ((int)(sizeof MODES / sizeof MODES[0]))

const dsv4q_mode *dsv4q_cli_modes(int *n)
{
    *n = NMODES;
    return MODES;
}

static int is_action(const char *s) { return s && s[0] != '-'; }

static const dsv4q_optspec *find_opt(const dsv4q_mode *m, const char *a)
{
    for (const dsv4q_optspec *o = m->opts; o->name; o++)
        if (!strcmp(o->name, a) || (o->alias && !strcmp(o->alias, a))) return o;
    return NULL;
}

static int known_cmd(const char *c)
{
    for (int i = 0; i < NMODES; i++)
        if (!strcmp(MODES[i].cmd, c)) return 1;
    return 0;
}

/* Pick the mode: the action word argv[1], else at most one selector flag,
 * else the default mode. -1 with a message when there is none. */
static int pick_mode(int argc, char **argv, const dsv4q_mode **out)
{
    const char *cmd = argv[0];
    const dsv4q_mode *def = NULL, *sel = NULL;
    for (int i = 0; i < NMODES; i++) {
        const dsv4q_mode *m = &MODES[i];
        if (strcmp(m->cmd, cmd)) continue;
        if (!m->select) { def = m; continue; }
        if (is_action(m->select)) {
            if (argc > 1 && !strcmp(argv[1], m->select)) sel = m;
            continue;
        }
        for (int k = 1; k < argc; k++)
            if (!strcmp(argv[k], m->select)) {
                if (sel && strcmp(sel->select, m->select)) {
                    fprintf(stderr, "dsv4q %s: %s and %s exclude each other (see dsv4q help %s)\n", cmd, sel->select,
                            m->select, cmd);
                    return -1;
                }
                sel = m;
            }
    }
    if (!sel) sel = def;
    if (!sel) {
        fprintf(stderr, "dsv4q %s: %s '%s'; one of:", cmd, argc > 1 ? "unknown action" : "missing action",
                argc > 1 ? argv[1] : "");
        for (int i = 0; i < NMODES; i++)
            if (!strcmp(MODES[i].cmd, cmd)) fprintf(stderr, " %s", MODES[i].select);
        fprintf(stderr, " (see dsv4q help %s)\n", cmd);
        return -1;
    }
    *out = sel;
    return 0;
}

/* The option is valid in another mode of the same command: say which. */
static const dsv4q_mode *other_mode_with(const dsv4q_mode *m, const char *a)
{
    for (int i = 0; i < NMODES; i++)
        if (&MODES[i] != m && !strcmp(MODES[i].cmd, m->cmd) && find_opt(&MODES[i], a)) return &MODES[i];
    return NULL;
}

int dsv4q_cli_check(int argc, char **argv, const dsv4q_mode **mode)
{
    const char *cmd = argv[0];
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            dsv4q_cli_help(stdout, cmd);
            return 0;
        }
    const dsv4q_mode *m;
    if (pick_mode(argc, argv, &m)) return 2;
    int first = is_action(m->select) ? 2 : 1, npos = 0;
    int seen[64] = {0};
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (++npos > m->npos) {
                fprintf(stderr, "dsv4q %s: unexpected argument '%s' (see dsv4q help %s)\n", cmd, a, cmd);
                return 2;
            }
            continue;
        }
        const dsv4q_optspec *o = find_opt(m, a);
        if (!o) {
            const dsv4q_mode *other = other_mode_with(m, a);
            if (other)
                fprintf(stderr, "dsv4q %s: option %s is not an option of %s%s%s; it belongs to %s %s (see dsv4q help %s)\n",
                        cmd, a, cmd, m->select ? " " : "", m->select ? m->select : "", cmd,
                        other->select ? other->select : "without a mode option", cmd);
            else
                fprintf(stderr, "dsv4q %s: unknown option '%s' for %s (see dsv4q help %s)\n", cmd, a, cmd, cmd);
            return 2;
        }
        int idx = (int)(o - m->opts);
        if (idx < 64 && seen[idx]++ && !(o->flags & DSV4Q_OPT_REP)) {
            fprintf(stderr, "dsv4q %s: option %s given twice (it takes one value)\n", cmd, o->name);
            return 2;
        }
        if (o->metavar) {
            if (i + 1 >= argc) {
                fprintf(stderr, "dsv4q %s: option %s needs a value (%s)\n", cmd, a, o->metavar);
                return 2;
            }
            i++;
        }
    }
    for (const dsv4q_optspec *o = m->opts; o->name; o++)
        if ((o->flags & DSV4Q_OPT_REQ) && !seen[o - m->opts]) {
            fprintf(stderr, "dsv4q %s: %s %s is required (see dsv4q help %s)\n", cmd, o->name, o->metavar ? o->metavar : "",
                    cmd);
            return 2;
        }
    for (const char *const *c = m->conflicts; c[0] && c[1]; c += 2) {
        const dsv4q_optspec *x = find_opt(m, c[0]), *y = find_opt(m, c[1]);
        if (x && y && seen[x - m->opts] && seen[y - m->opts]) {
            fprintf(stderr, "dsv4q %s: %s and %s exclude each other\n", cmd, c[0], c[1]);
            return 2;
        }
    }
    *mode = m;
    return -1;
}

/* "cmd [select] [POS] --req V [--opt V]..." ; md escapes '|' for tables. */
static void synopsis(FILE *f, const dsv4q_mode *m, int md, int all)
{
    const char *bar = md ? "\\|" : "|";
#define PUT(s)                                                       \
    for (const char *p_ = (s); *p_; p_++) {                          \
        if (*p_ == '|') fputs(bar, f);                               \
        else fputc(*p_, f);                                          \
    }
    PUT(m->cmd);
    if (m->select && is_action(m->select)) { fputc(' ', f); PUT(m->select); }
    if (m->pos) { fputc(' ', f); PUT(m->pos); }
    for (int pass = 0; pass < 2; pass++)
        for (const dsv4q_optspec *o = m->opts; o->name; o++) {
            int req = (o->flags & DSV4Q_OPT_REQ) != 0;
            if (req != (pass == 0) || (!all && !req)) continue;
            fputs(req ? " " : " [", f);
            PUT(o->name);
            if (o->metavar) { fputc(' ', f); PUT(o->metavar); }
            if (!req) fputc(']', f);
            if (o->flags & DSV4Q_OPT_REP) fputs("...", f);
        }
#undef PUT
}

void dsv4q_cli_help(FILE *f, const char *cmd)
{
    int any = 0;
    for (int i = 0; i < NMODES; i++) {
        const dsv4q_mode *m = &MODES[i];
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
            if (o->flags & DSV4Q_OPT_REP) fputs(" (repeatable)", f);
            if (o->dflt && o->dflt[0]) fprintf(f, " [default: %s]", o->dflt);
            fputc('\n', f);
        }
        if (m->conflicts[0]) {
            fputs("  exclusive:", f);
            for (const char *const *c = m->conflicts; c[0] && c[1]; c += 2) fprintf(f, " %s/%s", c[0], c[1]);
            fputc('\n', f);
        }
    }
    if (!any) fprintf(f, "dsv4q: unknown command '%s' (see dsv4q help)\n", cmd);
}

void dsv4q_cli_usage(FILE *f)
{
    fprintf(f, "dsv4q - FP64 reference oracle and qualification harness for DeepSeek V4 kernels\n\n"
               "usage: dsv4q COMMAND [options]    (dsv4q help COMMAND, dsv4q COMMAND --help: its options)\n"
               "       dsv4q --version\n\n");
    for (int i = 0; i < NMODES; i++) {
        fputs("  ", f);
        synopsis(f, &MODES[i], 0, 0);
        if (MODES[i].select && !is_action(MODES[i].select)) fprintf(f, " (%s)", MODES[i].select);
        fprintf(f, "\n      %s\n", MODES[i].summary);
    }
    fprintf(f, "\nprofiles: source (every rounding of the reference), model, qat, exact\n"
               "exit status: 0 ok / pass, 1 a verdict failed, 2 bad input or error\n");
}

void dsv4q_cli_markdown(FILE *f)
{
    fputs("| command | what it does | docs |\n|---|---|---|\n", f);
    for (int i = 0; i < NMODES; i++) {
        const dsv4q_mode *m = &MODES[i];
        fputs("| `", f);
        synopsis(f, m, 1, 1);
        fprintf(f, "` | %s | %s |\n", m->summary, m->docs);
    }
}

#ifndef DSV4Q_REPRO_FLAGS
#define DSV4Q_REPRO_FLAGS "unknown"
#endif
#ifndef __VERSION__
#define __VERSION__ "unknown compiler"
#endif

void dsv4q_cli_version(FILE *f)
{
    fprintf(f, "dsv4q %s (commit %s)\n", DSV4Q_VERSION, dsv4q_git_commit());
    fprintf(f, "compiler: %s %s\n",
#if defined(__clang__)
            "clang",
#elif defined(__GNUC__)
            "gcc",
#else
            "cc",
#endif
            __VERSION__);
    fprintf(f, "flags: %s\n", DSV4Q_REPRO_FLAGS);
#ifdef __FAST_MATH__
    fputs("WARNING: built with -ffast-math: results are not reproducible\n", f);
#endif
}

int dsv4q_cli_main(int argc, char **argv)
{
    if (argc < 2) {
        dsv4q_cli_usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--version") || !strcmp(c, "version")) {
        dsv4q_cli_version(stdout);
        return 0;
    }
    if (!strcmp(c, "help") || !strcmp(c, "--help") || !strcmp(c, "-h")) {
        if (argc == 2) dsv4q_cli_usage(stdout);
        else if (!strcmp(argv[2], "--markdown")) dsv4q_cli_markdown(stdout);
        else if (known_cmd(argv[2])) dsv4q_cli_help(stdout, argv[2]);
        else {
            fprintf(stderr, "dsv4q help: unknown command '%s' (see dsv4q help)\n", argv[2]);
            return 2;
        }
        return 0;
    }
    if (!known_cmd(c)) {
        fprintf(stderr, "dsv4q: unknown command '%s' (see dsv4q help)\n", c);
        return 2;
    }
    const dsv4q_mode *m = NULL;
    int rc = dsv4q_cli_check(argc - 1, argv + 1, &m);
    if (rc >= 0) return rc;
    return m->fn(argc - 1, argv + 1);
}
