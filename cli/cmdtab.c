/*
 * cmdtab.c - the dsv4q command table (see cmdtab.h) and the front door
 * that dispatches by it; `--version` lives here too because the Makefile
 * passes the reproducibility flags to this file.
 *
 * Each mode lists exactly the options its command reads. A row is one
 * option: its kind and destination field (the constructors below check the
 * field's type), its default (DFLT: stored before argv is read, printed in
 * help from here) and its help. An option shared by several commands is one
 * macro (O_*), so its help and default read the same everywhere; where two
 * modes differ (qualify --timeout 300, --whole-model 600, capture 3600),
 * each mode's row holds its own. Nothing else in cli/ names an option.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "harness/cases/cases.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "receipts/receipts.h"
#include "receipts/version.h"

/* --- row constructors ------------------------------------------------------
 * Written inside a row's braces, then DFLT/DOC/SET/ALIAS/REQ/HELP. T is the
 * mode's options struct (a shared row's is dsv4q_cli_opts, which every
 * options struct starts with); FIELD fails to compile when the field is not
 * of the kind's type (comparison of distinct pointer types). */
#define FIELD(T, f, type) (offsetof(T, f) + 0 * sizeof(&((T *)0)->f == (type *)0))
#define FLAG(nm, T, f) .name = nm, .kind = DSV4Q_ARG_FLAG, .off = FIELD(T, f, int), .size = sizeof(int)
#define STR(nm, mv, T, f) \
    .name = nm, .metavar = mv, .kind = DSV4Q_ARG_STRING, .off = FIELD(T, f, const char *), .size = sizeof(char *)
#define OUTPATH(nm, mv, T, f) \
    .name = nm, .metavar = mv, .kind = DSV4Q_ARG_OUTPATH, .off = FIELD(T, f, const char *), .size = sizeof(char *)
#define INT(nm, mv, T, f, lo_, hi_) \
    .name = nm, .metavar = mv, .kind = DSV4Q_ARG_INT, .off = FIELD(T, f, long), .size = sizeof(long), .lo = lo_, .hi = hi_
#define DBL(nm, mv, T, f, gt_, noun_)                                                                           \
    .name = nm, .metavar = mv, .kind = DSV4Q_ARG_DOUBLE, .off = FIELD(T, f, double), .size = sizeof(double), \
    .gt = gt_, .noun = noun_
#define ENUM(nm, mv, T, f, vals)                                                                         \
    .name = nm, .metavar = mv, .kind = DSV4Q_ARG_ENUM, .off = FIELD(T, f, int), .size = sizeof(int), \
    .values = vals, .nvalues = (int)(sizeof vals / sizeof vals[0])
#define LIST(nm, mv, T, f, n)                                                                                      \
    .name = nm, .metavar = mv, .kind = DSV4Q_ARG_LIST, .off = FIELD(T, f[0], const char *),                        \
    .size = sizeof(((T *)0)->f), .count_off = FIELD(T, n, int)
#define JOIN(nm, mv, T, f) \
    .name = nm, .metavar = mv, .kind = DSV4Q_ARG_JOIN, .off = FIELD(T, f[0], char), .size = sizeof(((T *)0)->f)
#define DFLT(v) .dflt = v
#define DOC(s) .dflt_doc = s
#define SET(T, f) .set_off = 1 + FIELD(T, f, int)
#define ALIAS(s) .alias = s
#define REQ .flags = DSV4Q_OPT_REQ
#define HELP(s) .help = s
#define O_END {.name = NULL}

typedef dsv4q_cli_opts CLI;
typedef dsv4q_qualify_args QUAL;
typedef dsv4q_capture_args CAPT;
typedef dsv4q_replay_args REPL;
typedef dsv4q_golden_args GOLD;
typedef dsv4q_receipts_args RCPT;

/* ENUM values, one per metavar word */
static const int WIDTHS[] = {32, 64};                                   /* f32|f64 */
/* flash|pro|flash41|all|long|long-slice: all = every set but the opt-in
 * long one and its slice */
static const int SHAPES[] = {DSV4Q_CASE_SET_FLASH,   DSV4Q_CASE_SET_PRO,
                             DSV4Q_CASE_SET_FLASH41, DSV4Q_CASE_SET_FLASH | DSV4Q_CASE_SET_PRO | DSV4Q_CASE_SET_FLASH41,
                             DSV4Q_CASE_SET_LONG,    DSV4Q_CASE_SET_LONG_SLICE};
static const int DTYPES[] = {DSV4Q_DT_F64, DSV4Q_DT_F32, DSV4Q_DT_BF16}; /* f64|f32|storage */
static const int SCORE_DTYPES[] = {DSV4Q_DT_BF16, DSV4Q_DT_F16, DSV4Q_DT_F32}; /* bf16|f16|f32 */
static const int DS4_PARTS[] = {0, 1, 2};                                      /* raw|comp|index */

/* --- the shared vocabulary ------------------------------------------------ */
#define O_MODEL {STR("--model", "DIR", CLI, model), DOC("synthesized tiny"), \
                 HELP("checkpoint directory (DeepSeek or Hugging Face tensor names)")}
#define O_TOKENS {STR("--tokens", "FILE", CLI, tokens), HELP("tokens.json {\"prompt\": [ids], \"teacher\": [ids]}")}
#define O_PLEN {INT("--prompt-len", "N", CLI, prompt_len, 0, LONG_MAX), DFLT("64"), SET(CLI, prompt_len_set), \
                HELP("synthetic prompt length (excludes --tokens)")}
#define O_DECODE {INT("--decode", "M", CLI, decode, 0, LONG_MAX), DFLT("8"), DOC(", or the teacher length"), \
                  SET(CLI, decode_set), HELP("teacher-forced decode steps after the prefill")}
#define O_CHUNK                                                                                                        \
    {                                                                                                                  \
        INT("--chunk", "N", CLI, chunk, 1, LONG_MAX),                                                                  \
            DOC("the whole prompt in one call when it fits in memory, else the largest chunk that does"),              \
            HELP("feed the prompt in calls of N tokens: bit-identical results, less memory")                           \
    }
#define O_SEED {INT("--seed", "S", CLI, seed, 0, LONG_MAX), DFLT("1"), HELP("seed of the synthetic prompt")}
#define O_PROFILE {STR("--profile", "P", CLI, profile), DFLT("source"), SET(CLI, profile_set), \
                   HELP("precision profile: source, model, qat, exact")}
#define O_BOUNDARY {JOIN("--boundary", "NAME=on|off", CLI, boundary), \
                    HELP("switch one rounding point against the profile")}
#define O_DECLARE {STR("--profile", "DECL", CLI, profile), DOC("the backend's"), SET(CLI, profile_set), \
                   HELP("judge as this declaration: PROFILE[:NAME[=on|off],...] (docs/engines.md)")}
#define O_JSON {OUTPATH("--json", "FILE", CLI, json), HELP("write the results as JSON")}
#define O_DB {OUTPATH("--db", "FILE", CLI, db), DOC("$DSV4Q_DB, else ./dsv4q.db"), HELP("receipts database")}
#define O_KEY {STR("--key", "FILE", CLI, key), DOC("$DSV4Q_KEY, else ~/.config/dsv4q/signing.key"), \
               HELP("Ed25519 key that signs the receipt")}
#define O_THREADS {INT("--threads", "N", CLI, threads, 0, LONG_MAX), DOC("OMP_NUM_THREADS, else all cores"), \
                   HELP("OpenMP threads (results do not depend on it)")}
#define O_QUIET {FLAG("--quiet", CLI, quiet), ALIAS("-q"), HELP("no progress on stderr")}
#define O_GATES(T) {STR("--gates", "FILE", T, gates), DOC("gates/default.json"), HELP("gate file (docs/gates.md)")}
#define O_NOISO {FLAG("--no-isolate", QUAL, no_isolate), \
                 HELP("call the backend in this process (no fork; a crash ends dsv4q)")}
#define O_ALLM(T) {FLAG("--all-metrics", T, all_metrics), HELP("print every metric row, not only the gated ones")}
#define O_MD(T) {FLAG("--markdown", T, markdown), HELP("print as a Markdown table")}
#define O_SELECT(nm, f) {FLAG(nm, QUAL, f), REQ, HELP("select this mode")}
#define O_BACKEND {LIST("--backend", "B", QUAL, backend, nb), REQ, HELP("oracle-f32, cpu-ref, mutant:NAME, or a plugin .so")}
/* clang-format off */
#define O_SHAPES(h) {ENUM("--shapes", "flash|pro|flash41|all|long|long-slice", QUAL, sets, SHAPES), DFLT("flash"), HELP(h)}
/* clang-format on */
#define O_INPUT O_MODEL, O_TOKENS, O_PLEN, O_DECODE, O_SEED
#define O_RECEIPT O_DB, O_KEY
#define O_CI                                                                                                    \
    {OUTPATH("--junit", "FILE", QUAL, junit), HELP("write a JUnit XML report: one testcase per case")},         \
    {FLAG("--failures-only", QUAL, failures_only),                                                              \
     HELP("print only the failing rows (the summary and failed: list stay)")},                                  \
    {FLAG("--stop-on-fail", QUAL, stop_on_fail), ALIAS("-x"), HELP("stop after the first failing case")},       \
    {FLAG("--require-all", QUAL, require_all),                                                                  \
     HELP("a case the backend does not implement fails instead of being skipped")},                             \
    {STR("--require", "OPS", QUAL, require), HELP("these operators (comma-separated) must be implemented: their skips fail")}

static const dsv4q_optpair NO_CONFLICTS[] = {{NULL, NULL}};
static const dsv4q_optpair QUALIFY_CONFLICTS[] = {{"--require-all", "--require"}, {NULL, NULL}};
static const dsv4q_optpair INPUT_CONFLICTS[] = {{"--tokens", "--prompt-len"}, {"--tokens", "--seed"}, {NULL, NULL}};
static const dsv4q_optpair WM_CONFLICTS[] = {{"--tokens", "--prompt-len"}, {"--tokens", "--seed"},
                                             {"--tokens", "--seeds"}, {"--seed", "--seeds"}, {NULL, NULL}};
static const dsv4q_optpair CAPTURE_CONFLICTS[] = {{"--tokens", "--prompt-len"}, {"--tokens", "--seed"},
                                                  {"--backend", "--profile"}, {"--backend", "--boundary"},
                                                  {NULL, NULL}};
static const dsv4q_optpair STAGES_CONFLICTS[] = {{"--model", "--config"}, {"--markdown", "--names"}, {NULL, NULL}};

/* A mode: command, selector (NULL, "--flag" or "action"), positional words,
 * options struct, action value, entry point, summary, docs. */
#define MODE(c, sel, pos_, npos_, T, act, fn_, sum, doc)                                                   \
    .cmd = c, .select = sel, .pos = pos_, .npos = npos_, .opts_size = sizeof(T), .action = act, .fn = fn_, \
    .summary = sum, .docs = doc
/* cache: the rows its decode and compare modes share */
/* clang-format off */
#define C_LAYOUT {STR("--layout", "NAME", dsv4q_cache_args, layout), REQ, \
                  HELP("the cache layout (dsv4q cache list shows them)")}
#define C_BLOCK {INT("--block-size", "B", dsv4q_cache_args, block_size, 0, 1L << 20), \
                 DOC("the layout's: 64 for the vLLM layouts"), HELP("tokens per cache block (planar layouts)")}
#define C_WIDTH {INT("--width", "N", dsv4q_cache_args, width, 0, 1L << 24), \
                 HELP("elements per row (llama.cpp layouts: n_embd_k_gqa; required there)")}
/* clang-format on */
#define GOLDEN_OPTS                                                                                            \
    (const dsv4q_optspec[]){{STR("--ops", "CASE,...", GOLD, ops), DOC("all"), HELP("only these golden cases")},  \
                            {STR("--dir", "DIR", GOLD, dir), DOC("goldens"), HELP("golden directory")},          \
                            {INT("--threads", "N", GOLD, c.threads, 1, LONG_MAX), DFLT("1"),                     \
                             DOC(", or OMP_NUM_THREADS when set"), SET(GOLD, threads_set),                      \
                             HELP("OpenMP threads (results do not depend on it)")},                              \
                            O_END}
#define R_DB {STR("--db", "FILE", CLI, db), DOC("$DSV4Q_DB, else ./dsv4q.db"), HELP("receipts database")}
#define R_PUB {STR("--pubkey", "FILE", RCPT, pubkey), DOC("the key's .pub"), HELP("public key to verify against")}

static const dsv4q_mode MODES[] = {
    {MODE("sensitivity", NULL, NULL, 0, dsv4q_cli_opts, 0, dsv4q_cmd_sensitivity,
          "fp32 vs fp64 oracle on identical decoded inputs: the sensitivity floor, per layer and stage",
          "docs/model.md"),
     .opts =
         (const dsv4q_optspec[]){O_INPUT, O_CHUNK, O_PROFILE, O_BOUNDARY, O_JSON, O_RECEIPT, O_THREADS, O_QUIET, O_END},
     .conflicts = INPUT_CONFLICTS},
    {MODE("qualify", NULL, NULL, 0, QUAL, 0, dsv4q_cmd_qualify,
          "gate a kernel backend operator by operator against the fp64 oracle, bounds set by the fp32 level of "
          "the same case; exit 0 pass, 1 fail, 2 error",
          "docs/backends.md, docs/engines.md, docs/gates.md, docs/mutants.md, docs/ci.md"),
     .opts =
         (const dsv4q_optspec[]){
             O_BACKEND,
             O_GATES(QUAL),
             {STR("--ops", "LIST", QUAL, ops), DOC("all"), HELP("operators to qualify (comma-separated)")},
             O_SHAPES("which shape sets (flash41: DeepSeek V4.1 Flash; long: opt-in 1M-context sizes; long-slice: its "
                      "cheap int32-offset cases, docs/gates.md)"),
             {LIST("--case", "KEY|GLOB", QUAL, cases, nk), DOC("all"),
              HELP("only cases whose key contains KEY or matches GLOB")},
             {STR("--seeds", "A-B", QUAL, seeds), DOC("the key's seed"),
              HELP("every selected case once per seed A..B")},
             {DBL("--timeout", "S", QUAL, timeout, 0, "seconds"), DFLT("300"),
              HELP("seconds before an isolated backend call counts as hung")},
             O_NOISO,
             O_ALLM(QUAL),
             O_CI,
             O_DECLARE,
             O_BOUNDARY,
             {DBL("--format-gate", "NRMS", QUAL, format_gate, 0, "an NRMS"),
              HELP("engine-stored weights: fail a case whose format error exceeds NRMS (docs/engines.md)")},
             O_JSON,
             O_RECEIPT,
             O_THREADS,
             O_QUIET,
             O_END},
     .conflicts = QUALIFY_CONFLICTS},
    {MODE("qualify", "--whole-model", NULL, 0, QUAL, 0, dsv4q_cmd_qualify,
          "compose the whole model from the backend's operators; logit NRMS vs the fp64 oracle against a factor x "
          "the fp32 floor, greedy agreement, and every stage of every layer judged on the reference run's own inputs",
          "docs/gates.md"),
     .opts =
         (const dsv4q_optspec[]){
             O_SELECT("--whole-model", whole_model),
             O_BACKEND,
             O_INPUT,
             {STR("--seeds", "A-B", QUAL, seeds), DOC("--seed"), HELP("one run per synthetic prompt seed A..B")},
             O_GATES(QUAL),
             {DBL("--timeout", "S", QUAL, timeout, 0, "seconds"), DFLT("600"),
              HELP("seconds before the isolated child (composition + per-stage verdict) counts as hung")},
             O_DECLARE,
             O_BOUNDARY,
             {FLAG("--sparse-decode", QUAL, sparse_decode),
              HELP("decode attention from SPARSE_ATTN even with WINDOW_ATTN_DECODE")},
             O_NOISO,
             O_JSON,
             O_RECEIPT,
             O_THREADS,
             O_QUIET,
             O_END},
     .conflicts = WM_CONFLICTS},
    {MODE("qualify", "--list", NULL, 0, QUAL, 0, dsv4q_cmd_qualify, "print the case keys", "docs/backends.md"),
     .opts = (const dsv4q_optspec[]){O_SELECT("--list", list),
                                     {STR("--ops", "LIST", QUAL, ops), DOC("all"),
                                      HELP("operators to list (comma-separated)")},
                                     O_SHAPES("which shape sets"),
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("qualify", "--list-ops", NULL, 0, QUAL, 0, dsv4q_cmd_qualify, "print the backend ABI's operator table",
          "docs/backends.md"),
     .opts = (const dsv4q_optspec[]){O_SELECT("--list-ops", list_ops),
                                     O_MD(QUAL),
                                     {FLAG("--header", QUAL, header),
                                      HELP("print the contract summary of abi/dsv4q_backend.h (a C comment body)")},
                                     O_END},
     .conflicts = (const dsv4q_optpair[]){{"--markdown", "--header"}, {NULL, NULL}}},
    {MODE("margins", NULL, NULL, 0, dsv4q_margins_args, 0, dsv4q_cmd_margins,
          "the indexer's top-k cut per indexed layer (V4.1: and the candidate-block cut): margins in the score "
          "dtype's quanta, tie-runs, support flips and their effect",
          "docs/margins.md"),
     .opts =
         (const dsv4q_optspec[]){
             O_INPUT,
             O_PROFILE,
             O_BOUNDARY,
             {STR("--positions", "last|all|LIST", dsv4q_margins_args, positions), DFLT("last"),
              HELP("query positions (LIST: 5,17,100-120)")},
             {ENUM("--score-dtype", "bf16|f16|f32", dsv4q_margins_args, score_dt, SCORE_DTYPES), DFLT("bf16"),
              SET(dsv4q_margins_args, score_dt_set),
              HELP("the engine's indexer score dtype: quanta and tie-runs at its granularity (f16, f32: "
                   "idx_score_bf16 off)")},
             {STR("--csv", "FILE", dsv4q_margins_args, csv), HELP("write every row as CSV")},
             {STR("--svg", "FILE", dsv4q_margins_args, svg), HELP("margin histograms per layer")},
             O_CHUNK,
             O_JSON,
             O_RECEIPT,
             O_THREADS,
             O_QUIET,
             O_END},
     .conflicts = INPUT_CONFLICTS},
    {MODE("ablate", NULL, NULL, 0, dsv4q_ablate_args, 0, dsv4q_cmd_ablate,
          "toggle each rounding point against the base profile: logit NRMS, greedy agreement, share of the fp32 "
          "floor",
          "docs/boundaries.md"),
     .opts =
         (const dsv4q_optspec[]){
             O_INPUT,
             {ENUM("--width", "f32|f64", CLI, width, WIDTHS), DFLT("f64"), HELP("width of the toggled runs")},
             {STR("--base", "PROFILE", CLI, profile), DFLT("source"),
              HELP("the profile each boundary is toggled against")},
             {OUTPATH("--svg", "FILE", dsv4q_ablate_args, svg), HELP("bar chart of the effects")},
             O_JSON,
             O_RECEIPT,
             O_THREADS,
             O_QUIET,
             O_END},
     .conflicts = INPUT_CONFLICTS},
    {MODE("capture", NULL, NULL, 0, CAPT, 0, dsv4q_cmd_capture,
          "the oracle (or the forward pass on a backend's operators) writes a capture of its run in the engine "
          "capture format",
          "docs/captures.md"),
     .opts =
         (const dsv4q_optspec[]){
             O_MODEL,
             O_TOKENS,
             O_PLEN,
             O_DECODE,
             O_SEED,
             {INT("--chunk", "N", CLI, chunk, 1, LONG_MAX), DOC("the whole prompt in one call"),
              HELP("write the prefill as calls of N tokens, as a chunked-prefill engine does")},
             {OUTPATH("--out", "DIR", CLI, out), REQ, HELP("capture directory (one call-NNNN.safetensors per call)")},
             {ENUM("--width", "f32|f64", CLI, width, WIDTHS), DFLT("f64"), DOC(" (f32 with --backend)"),
              SET(CLI, width_set), HELP("oracle width (--backend: f32 only, the ABI is F32)")},
             O_PROFILE,
             O_BOUNDARY,
             {ENUM("--dtype", "f64|f32|storage", CAPT, dtype, DTYPES), DOC("the run's width"), SET(CAPT, dtype_set),
              HELP("stored dtype of the tensors")},
             {STR("--engine", "NAME", CAPT, engine), DOC("dsv4q-oracle-fW or the backend"),
              HELP("engine name in the metadata")},
             {STR("--backend", "B", CAPT, backend),
              HELP("built-in or plugin .so: the forward pass runs on its operators (oracle-f32 for those it lacks)")},
             {DBL("--timeout", "S", CAPT, timeout, 0, "seconds"), DFLT("3600"), SET(CAPT, timeout_set),
              HELP("--backend with a plugin: limit of its isolated child")},
             {STR("--layers", "A:B", CAPT, layers), DOC("all"),
              HELP("record layers A..B-1 only (plus embed and head)")},
             O_THREADS,
             O_QUIET,
             O_END},
     .conflicts = CAPTURE_CONFLICTS},
    {MODE("replay", NULL, NULL, 0, REPL, 0, dsv4q_cmd_replay,
          "qualify an engine from its capture, stage by stage on its own inputs; exit 0 pass, 1 fail, 2 error",
          "docs/captures.md, docs/ci.md"),
     .opts =
         (const dsv4q_optspec[]){
             O_MODEL,
             {LIST("--capture", "FILE|DIR", REPL, capture, ncap), REQ,
              HELP("the engine's capture; repeated (up to 8): the same tokens under different schedules, each "
                   "judged and compared")},
             O_GATES(REPL),
             {FLAG("--no-model", REPL, no_model), HELP("skip the whole-model comparison of captured logits")},
             {OUTPATH("--junit", "FILE", REPL, junit), HELP("write a JUnit XML report: one testcase per stage")},
             O_ALLM(REPL),
             O_JSON,
             O_RECEIPT,
             O_THREADS,
             O_QUIET,
             O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("stages", NULL, NULL, 0, dsv4q_stages_args, 0, dsv4q_cmd_stages,
          "the stage table: what an engine capture holds (tensor names, shapes, boundaries)", "docs/captures.md"),
     .opts = (const dsv4q_optspec[]){{STR("--model", "DIR", CLI, model), HELP("shapes of this checkpoint")},
                                     {STR("--config", "NAME|FILE", dsv4q_stages_args, config), DOC("symbolic shapes"),
                                      HELP("shapes of a built-in or JSON config")},
                                     O_MD(dsv4q_stages_args),
                                     {FLAG("--names", dsv4q_stages_args, names), HELP("print the tensor names only")},
                                     O_END},
     .conflicts = STAGES_CONFLICTS},
    {MODE("weight", NULL, NULL, 0, dsv4q_weight_args, 0, dsv4q_cmd_weight,
          "the values one GGUF tensor decodes to (bit for bit ggml's dequantization), as text or raw f32/f64",
          "docs/gguf.md"),
     .opts = (const dsv4q_optspec[]){{STR("--model", "FILE.gguf", CLI, model), REQ, HELP("the GGUF file")},
                                     {STR("--tensor", "NAME", dsv4q_weight_args, tensor), REQ,
                                      HELP("its GGUF name (blk.0.attn_q_a.weight; --list shows them)")},
                                     {ENUM("--width", "f32|f64", CLI, width, WIDTHS), DFLT("f64"),
                                      HELP("value width (f32 is exact for every type but F64, which it rounds "
                                           "to nearest)")},
                                     {OUTPATH("--out", "FILE", CLI, out), DOC("text on stdout"),
                                      HELP("write raw little-endian values instead (numpy.fromfile '<f4'/'<f8')")},
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("weight", "--list", NULL, 0, dsv4q_weight_args, 0, dsv4q_cmd_weight,
          "list a GGUF file's tensors: name, type, shape (ggml order), elements", "docs/gguf.md"),
     .opts = (const dsv4q_optspec[]){{FLAG("--list", dsv4q_weight_args, list), REQ, HELP("select this mode")},
                                     {STR("--model", "FILE.gguf", CLI, model), REQ, HELP("the GGUF file")},
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("cache", "decode", "FILE", 1, dsv4q_cache_args, DSV4Q_CACHE_DECODE, dsv4q_cmd_cache,
          "decode an engine's KV / indexer cache bytes to per-slot rows (values and scales, exact f64)",
          "docs/caches.md"),
     .opts =
         (const dsv4q_optspec[]){C_LAYOUT,
                                 C_BLOCK,
                                 C_WIDTH,
                                 {INT("--slots", "N", dsv4q_cache_args, slots, 0, LONG_MAX), DOC("all"),
                                  HELP("decode only the first N slots")},
                                 {OUTPATH("--out", "FILE", CLI, out), DOC("text on stdout"),
                                  HELP("write the values as raw little-endian f64, slot-major (numpy '<f8')")},
                                 {OUTPATH("--scale-out", "FILE", dsv4q_cache_args, scale_out),
                                  HELP("with --out: write the scales as raw little-endian f64 here")},
                                 O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("cache", "compare", "FILE", 1, dsv4q_cache_args, DSV4Q_CACHE_COMPARE, dsv4q_cmd_cache,
          "compare an engine's cache bytes with reference rows; name the first differing slot, field and bug class",
          "docs/caches.md"),
     .opts = (const dsv4q_optspec[]){C_LAYOUT,
                                     {STR("--ref", "VALS.f64", dsv4q_cache_args, ref), REQ,
                                      HELP("the reference values: raw little-endian f64, slots x n_val")},
                                     {STR("--ref-scale", "SCALES.f64", dsv4q_cache_args, ref_scale),
                                      DOC("scales not compared"),
                                      HELP("the reference scales: raw little-endian f64, slots x n_scale")},
                                     C_BLOCK,
                                     C_WIDTH,
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("cache", "ds4", "FILE", 1, dsv4q_cache_args, DSV4Q_CACHE_DS4, dsv4q_cmd_cache,
          "read a ds4 KV checkpoint (<sha1>.kv or a session payload): geometry, per-layer rows, consistency",
          "docs/caches.md"),
     .opts = (const dsv4q_optspec[]){{INT("--layer", "L", dsv4q_cache_args, layer, -1, 4095), DFLT("-1"),
                                      HELP("print (or --out) this layer's rows; -1: the summary only")},
                                     {ENUM("--part", "raw|comp|index", dsv4q_cache_args, part, DS4_PARTS), DFLT("raw"),
                                      HELP("which rows of --layer: sliding-window, compressed, indexer")},
                                     {OUTPATH("--out", "FILE", CLI, out), DOC("text on stdout"),
                                      HELP("with --layer: write the rows as raw little-endian f64, row-major")},
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("cache", "list", NULL, 0, dsv4q_cache_args, DSV4Q_CACHE_LIST, dsv4q_cmd_cache,
          "the cache layout catalog: name, engine, bytes per token, fields, source file", "docs/caches.md"),
     .opts = (const dsv4q_optspec[]){O_END}, .conflicts = NO_CONFLICTS},
    {MODE("run", NULL, NULL, 0, dsv4q_cli_opts, 0, dsv4q_cmd_run,
          "one oracle run; logits (and every stage tap) as safetensors", "docs/model.md"),
     .opts = (const dsv4q_optspec[]){O_MODEL,
                                     O_TOKENS,
                                     O_PLEN,
                                     O_DECODE,
                                     O_SEED,
                                     O_CHUNK,
                                     {ENUM("--width", "f32|f64", CLI, width, WIDTHS), REQ, HELP("oracle width")},
                                     O_PROFILE,
                                     O_BOUNDARY,
                                     {OUTPATH("--out", "FILE.safetensors", CLI, out), REQ, HELP("output file")},
                                     {FLAG("--taps", CLI, taps), HELP("also write every stage tap (L{layer}.{stage})")},
                                     O_THREADS,
                                     O_QUIET,
                                     O_END},
     .conflicts = INPUT_CONFLICTS},
    {MODE("synth", NULL, NULL, 0, dsv4q_synth_args, 0, dsv4q_cmd_synth,
          "write a deterministic checkpoint in DeepSeek's format", "docs/synth.md"),
     .opts = (const dsv4q_optspec[]){{STR("--config", "tiny|tiny-bf16|flash-slice|tiny-v41|flash41-slice|FILE.json",
                                          dsv4q_synth_args, config),
                                      DFLT("tiny"), HELP("model config")},
                                     {STR("--out", "DIR", CLI, out), REQ, HELP("checkpoint directory")},
                                     {INT("--seed", "S", CLI, seed, 0, LONG_MAX), DFLT("1"), HELP("weight seed")},
                                     {INT("--shards", "N", dsv4q_synth_args, shards, 1, INT_MAX), DFLT("1"),
                                      HELP("number of safetensors shards")},
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("boundaries", NULL, NULL, 0, dsv4q_boundaries_args, 0, dsv4q_cmd_boundaries,
          "list the named rounding points and the profiles", "docs/boundaries.md"),
     .opts = (const dsv4q_optspec[]){O_MD(dsv4q_boundaries_args), O_END}, .conflicts = NO_CONFLICTS},
    {MODE("golden", "check", NULL, 0, GOLD, DSV4Q_GOLDEN_CHECK, dsv4q_cmd_golden,
          "recompute every golden and compare bit-exactly (CI runs it on x86-64 and, under qemu, aarch64)",
          "docs/goldens.md"),
     .opts = GOLDEN_OPTS, .conflicts = NO_CONFLICTS},
    {MODE("golden", "record", NULL, 0, GOLD, DSV4Q_GOLDEN_RECORD, dsv4q_cmd_golden,
          "record the bit-exact reference outputs into goldens/", "docs/goldens.md"),
     .opts = GOLDEN_OPTS, .conflicts = NO_CONFLICTS},
    {MODE("golden", "list", NULL, 0, GOLD, DSV4Q_GOLDEN_LIST, dsv4q_cmd_golden, "list the golden cases",
          "docs/goldens.md"),
     .opts = GOLDEN_OPTS, .conflicts = NO_CONFLICTS},
    {MODE("keygen", NULL, NULL, 0, dsv4q_cli_opts, 0, dsv4q_cmd_keygen,
          "make an Ed25519 signing key for receipts (never overwrites one)", "docs/receipts.md"),
     .opts = (const dsv4q_optspec[]){{STR("--out", "FILE", CLI, out),
                                      DOC("$DSV4Q_KEY, else ~/.config/dsv4q/signing.key"), HELP("key file")},
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("receipts", "list", NULL, 0, RCPT, DSV4Q_RECEIPTS_LIST, dsv4q_cmd_receipts, "list the stored receipts",
          "docs/receipts.md"),
     .opts = (const dsv4q_optspec[]){R_DB,
                                     {STR("--kind", "K", RCPT, kind), DOC("all"),
                                      HELP("only receipts of this kind (qualify, sensitivity, ...)")},
                                     {INT("--last", "N", RCPT, last, 1, LONG_MAX), DOC("all"), HELP("only the last N")},
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("receipts", "show", "ID", 1, RCPT, DSV4Q_RECEIPTS_SHOW, dsv4q_cmd_receipts, "print one receipt",
          "docs/receipts.md"),
     .opts = (const dsv4q_optspec[]){R_DB, O_END}, .conflicts = NO_CONFLICTS},
    {MODE("receipts", "verify", "[ID]", 1, RCPT, DSV4Q_RECEIPTS_VERIFY, dsv4q_cmd_receipts,
          "verify the hash chain and signatures", "docs/receipts.md"),
     .opts = (const dsv4q_optspec[]){{FLAG("--all", RCPT, all), HELP("every receipt")},
                                     R_PUB,
                                     {FLAG("--allow-unsigned", RCPT, allow_unsigned),
                                      HELP("pass receipts with no verified signature (else NOT VERIFIED, exit 1)")},
                                     R_DB,
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("receipts", "export", "ID", 1, RCPT, DSV4Q_RECEIPTS_EXPORT, dsv4q_cmd_receipts,
          "export one receipt (with its signature) for verification elsewhere", "docs/receipts.md"),
     .opts = (const dsv4q_optspec[]){{FLAG("--json", RCPT, json), HELP("as JSON")},
                                     R_PUB,
                                     {STR("--out", "FILE", CLI, out), DOC("stdout"), HELP("output file")},
                                     R_DB,
                                     O_END},
     .conflicts = NO_CONFLICTS},
    {MODE("receipts", "verify-json", "FILE", 1, RCPT, DSV4Q_RECEIPTS_VERIFY_JSON, dsv4q_cmd_receipts,
          "verify an exported receipt", "docs/receipts.md"),
     .opts = (const dsv4q_optspec[]){R_PUB, O_END}, .conflicts = NO_CONFLICTS},
};

#define NMODES ((int)(sizeof MODES / sizeof MODES[0]))

const dsv4q_mode *dsv4q_cli_modes(int *n)
{
    *n = NMODES;
    return MODES;
}

static const dsv4q_mode *first_mode(const char *cmd)
{
    for (int i = 0; i < NMODES; i++)
        if (!strcmp(MODES[i].cmd, cmd)) return &MODES[i];
    return NULL;
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
    const char *env = getenv("DSV4Q_KERNEL");
    fprintf(f, "linear kernel: %s (this CPU runs:", dsv4q_linear_kernel_f64(NULL));
    for (int i = 0; dsv4q_linear_kernel_at_f64(i); i++) fprintf(f, " %s", dsv4q_linear_kernel_at_f64(i));
    if (env && *env) {
        int ok = 0;
        for (int i = 0; dsv4q_linear_kernel_at_f64(i); i++) ok |= !strcmp(env, dsv4q_linear_kernel_at_f64(i));
        fprintf(f, "; DSV4Q_KERNEL=%s%s)\n", env, ok ? "" : ", not one of them: refused by every command");
    } else {
        fputs("; DSV4Q_KERNEL unset)\n", f);
    }
#ifdef __FAST_MATH__
    fputs("WARNING: built with -ffast-math: results are not reproducible\n", f);
#endif
}

/* DSV4Q_KERNEL naming a linear kernel this CPU cannot run: refuse before
 * any work (the library alone would warn and use the default). */
static int kernel_env_refused(void)
{
    const char *env = getenv("DSV4Q_KERNEL");
    if (!env || !*env) return 0;
    for (int i = 0; dsv4q_linear_kernel_at_f64(i); i++)
        if (!strcmp(env, dsv4q_linear_kernel_at_f64(i))) return 0;
    fprintf(stderr, "dsv4q: DSV4Q_KERNEL=%s: not a linear kernel this CPU runs (it runs:", env);
    for (int i = 0; dsv4q_linear_kernel_at_f64(i); i++) fprintf(stderr, " %s", dsv4q_linear_kernel_at_f64(i));
    fputs(")\n", stderr);
    return 1;
}

/* `dsv4q COMMAND ...`: the command parses its own argv by the table
 * (dsv4q_cli_parse), so a test that calls it directly is refused and
 * helped exactly as the binary is. */
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
        else if (first_mode(argv[2])) dsv4q_cli_help(stdout, argv[2]);
        else {
            fprintf(stderr, "dsv4q help: unknown command '%s' (see dsv4q help)\n", argv[2]);
            return 2;
        }
        return 0;
    }
    const dsv4q_mode *m = first_mode(c);
    if (!m) {
        fprintf(stderr, "dsv4q: unknown command '%s' (see dsv4q help)\n", c);
        return 2;
    }
    if (kernel_env_refused()) return 2;
    return m->fn(argc - 1, argv + 1);
}
