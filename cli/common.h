/*
 * common.h - what every measuring subcommand shares after the command
 * table has parsed its options (cli/cmdtab.h): the shared options struct,
 * model resolution (including the embedded default: a synthesized `tiny`
 * in the cache directory), token input, the boundary set of --profile and
 * --boundary, the receipt write, and the output-path check the table's
 * OUTPATH rows run. One vocabulary for all commands.
 */
#ifndef DSV4Q_CLI_COMMON_H
#define DSV4Q_CLI_COMMON_H

#include <stdint.h>
#include <stdio.h>

typedef struct dsv4q_tokens {
    int32_t *prompt;
    long nprompt;
    int32_t *teacher;
    long nteacher;
    char pin[65];          /* SHA-256 of prompt ++ teacher (int32 LE) */
    char source[256];      /* file name or "synthetic:N+M" */
} dsv4q_tokens;

/* The options every measuring command shares, and the words of argv the
 * parser (cli/cmdtab.h) hands every command. Each command's options
 * struct (cli/cmdopts.h) starts with one; the table's shared rows
 * (cli/cmdtab.c) fill it. Defaults are the table's, not written here. */
typedef struct dsv4q_cli_opts {
    const char *model;     /* --model DIR (NULL: synthesized default) */
    const char *tokens;    /* --tokens FILE */
    long prompt_len;       /* --prompt-len N */
    int prompt_len_set;    /* --prompt-len given (excludes --tokens) */
    long chunk;            /* --chunk N: the prompt fed in chunks of N (0: chosen from memory) */
    long decode;           /* --decode M */
    int decode_set;        /* --decode given (else a --tokens file's teacher length) */
    int width;             /* --width f32|f64: 32 or 64 */
    int width_set;         /* --width given */
    const char *profile;   /* --profile P */
    int profile_set;       /* --profile given */
    char boundary[1024];   /* --boundary specs, comma-joined */
    const char *out;       /* --out FILE */
    const char *json;      /* --json FILE */
    const char *db;        /* --db FILE */
    const char *key;       /* --key FILE */
    int taps;              /* --taps */
    long threads;          /* --threads N (0: OpenMP's default) */
    int quiet;             /* --quiet, -q */
    long seed;             /* --seed (synthetic prompt, synth) */
    int action;            /* the mode's action (cli/cmdopts.h enums), from the table */
    const char *pos[4];    /* the mode's positional words (receipt ID, file) */
    int npos;
} dsv4q_cli_opts;

/* Check that an output path's directory exists and is writable, before
 * any work is done (so a run never ends in "cannot write"). 0 or -1 with a
 * message on stderr naming the option. */
int dsv4q_cli_check_out(const char *opt, const char *path);

/* Resolve the model directory: --model, else synthesize `tiny` (seed 1)
 * into $DSV4Q_CACHE or $XDG_CACHE_HOME/dsv4q or ~/.cache/dsv4q. */
int dsv4q_cli_model_dir(const dsv4q_cli_opts *o, char *dir, size_t len, char *err, size_t errlen);

/* Say on stderr what the loader accepted leniently (BF16 weights where
 * the config's quantization says FP8/FP4): "dsv4q CMD: note: ...". */
struct dsv4q_model;
void dsv4q_cli_model_notes(const char *cmd, const struct dsv4q_model *m);

/* Load tokens.json {"prompt": [...], "teacher": [...]} (all its teacher
 * ids, or the first `decode` when decode_set) or make a seeded synthetic
 * prompt of prompt_len and `decode` teacher tokens. */
int dsv4q_cli_tokens(const dsv4q_cli_opts *o, int vocab, dsv4q_tokens *t, char *err, size_t errlen);
void dsv4q_tokens_free(dsv4q_tokens *t);

/* Profile + boundary overrides -> boundary set. */
int dsv4q_cli_bset(const dsv4q_cli_opts *o, uint64_t *bs, char *err, size_t errlen);

/* Store the receipt of a measuring command (kind: sensitivity, ablate, ...)
 * run on checkpoint `dir` with tokens t: pins the checkpoint, records the
 * command line, config, profile (+ --boundary overrides), widths, metrics
 * JSON and verdict, into --db (default dsv4q.db) signed with --key (default
 * location). Prints "receipt N written to DB" on stdout, or a note on
 * stderr naming what failed; a measurement is never lost to a receipt
 * error. Returns 0 or -1. */
struct dsv4q_config;
/* Validate the receipts database (--db, DSV4Q_DB or ./dsv4q.db) before a
 * measuring command does any work (dsv4q_receipt_precheck): prints
 * "dsv4q CMD: <problem>" and returns -1 when it is corrupt, foreign,
 * read-only or cannot be created, so a run never ends in "PASS, then exit 2". */
int dsv4q_cli_db_check(const dsv4q_cli_opts *o, const char *cmd);
int dsv4q_cli_receipt(const dsv4q_cli_opts *o, const char *kind, int argc, char **argv, const char *dir,
                      const struct dsv4q_config *cfg, const dsv4q_tokens *t, const char *widths,
                      const char *metrics_json, const char *verdict);

/* The start-up every measuring command shares, in one place: resolve the
 * model directory (--model or the synthesized default) into dir, open it
 * (*m), say what the loader accepted leniently, and, when t is not NULL,
 * read or synthesize the tokens against its vocabulary. On any error it
 * prints "dsv4q CMD: message" on stderr, releases what it opened and
 * returns 2; else 0 and the caller owns *m (dsv4q_model_close) and *t
 * (dsv4q_tokens_free). */
int dsv4q_cli_start(const char *cmd, const dsv4q_cli_opts *o, char *dir, size_t dirlen, struct dsv4q_model **m,
                    dsv4q_tokens *t);

/* The receipt write every command shares: fills r->command_line from argv
 * when unset, writes r into --db (default: dsv4q_receipt_default_db())
 * signed with --key, prints "receipt N written to DB" on stdout (after a
 * blank line when blank_line; not with --quiet), or "dsv4q CMD: receipt not
 * written: ..." on stderr. A measurement is never lost to a receipt error:
 * the caller decides what a -1 means. Returns 0 or -1. */
struct dsv4q_receipt;
int dsv4q_cli_receipt_store(const char *cmd, const dsv4q_cli_opts *o, struct dsv4q_receipt *r, int argc,
                            char **argv, int blank_line);

/* Apply --threads (OpenMP). */
void dsv4q_cli_threads(const dsv4q_cli_opts *o);

#endif
