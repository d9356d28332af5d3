/*
 * cmdopts.h - the options struct of every dsv4q command: what the command
 * table (cli/cmdtab.c) parses argv into and the command reads. Each starts
 * with dsv4q_cli_opts (the shared options and the positional words), so
 * the table's shared rows point into any of them. No defaults here: a
 * field's default is its row's, and a field the row leaves 0/NULL means
 * what the row's help says (e.g. gates NULL: the default gate file).
 */
#ifndef DSV4Q_CLI_CMDOPTS_H
#define DSV4Q_CLI_CMDOPTS_H

#include "cli/common.h"

/* sensitivity, run, keygen: dsv4q_cli_opts alone. */

#define DSV4Q_QUALIFY_MAX_BACKENDS 32
#define DSV4Q_QUALIFY_MAX_CASES 64

/* qualify, all four modes (--list, --list-ops and --whole-model set their
 * flag, the rows of each mode the fields it reads). */
typedef struct dsv4q_qualify_args {
    dsv4q_cli_opts c;
    const char *backend[DSV4Q_QUALIFY_MAX_BACKENDS];   /* --backend, in order */
    int nb;
    const char *cases[DSV4Q_QUALIFY_MAX_CASES];        /* --case patterns */
    int nk;
    const char *gates, *ops, *junit, *require, *seeds;
    int sets;                                          /* --shapes: DSV4Q_CASE_SET_* */
    double timeout, format_gate;                       /* format_gate 0: report only */
    int list, list_ops, markdown, header, whole_model;
    int no_isolate, all_metrics, sparse_decode, failures_only, stop_on_fail, require_all;
} dsv4q_qualify_args;

typedef struct dsv4q_margins_args {
    dsv4q_cli_opts c;
    const char *positions, *csv, *svg;
    int score_dt, score_dt_set; /* --score-dtype: DSV4Q_DT_BF16, _F16, _F32 */
} dsv4q_margins_args;

/* ablate: --base is c.profile, --width c.width. */
typedef struct dsv4q_ablate_args {
    dsv4q_cli_opts c;
    const char *svg;
} dsv4q_ablate_args;

typedef struct dsv4q_capture_args {
    dsv4q_cli_opts c;
    const char *engine, *backend, *layers;
    int dtype, dtype_set;          /* --dtype: DSV4Q_DT_F64, _F32, or _BF16 for `storage` */
    double timeout;
    int timeout_set;
} dsv4q_capture_args;

typedef struct dsv4q_replay_args {
    dsv4q_cli_opts c;
    const char *capture[8]; /* several: the same tokens under different schedules */
    int ncap;
    const char *gates, *junit;
    int no_model, all_metrics;
} dsv4q_replay_args;

/* stages: --model is c.model. */
typedef struct dsv4q_stages_args {
    dsv4q_cli_opts c;
    const char *config;
    int markdown, names;
} dsv4q_stages_args;

/* weight: --model is c.model, --out c.out, --width c.width. */
typedef struct dsv4q_weight_args {
    dsv4q_cli_opts c;
    const char *tensor;
    int list;
} dsv4q_weight_args;

/* cache decode|compare|list: the FILE is c.pos[0], --out c.out. */
enum { DSV4Q_CACHE_DECODE = 1, DSV4Q_CACHE_LIST, DSV4Q_CACHE_COMPARE, DSV4Q_CACHE_DS4 };
typedef struct dsv4q_cache_args {
    dsv4q_cli_opts c;
    const char *layout, *scale_out, *ref, *ref_scale;
    long block_size, width, slots;
    long layer; /* ds4: the layer whose rows to print or write (-1: none) */
    int part;   /* ds4: 0 raw, 1 compressed, 2 indexer rows */
} dsv4q_cache_args;

/* synth: --out is c.out, --seed c.seed. */
typedef struct dsv4q_synth_args {
    dsv4q_cli_opts c;
    const char *config;
    long shards;
} dsv4q_synth_args;

typedef struct dsv4q_boundaries_args {
    dsv4q_cli_opts c;
    int markdown;
} dsv4q_boundaries_args;

/* golden: --threads is c.threads. */
enum { DSV4Q_GOLDEN_CHECK, DSV4Q_GOLDEN_RECORD, DSV4Q_GOLDEN_LIST };
typedef struct dsv4q_golden_args {
    dsv4q_cli_opts c;
    const char *ops, *dir;
    int threads_set;
} dsv4q_golden_args;

/* receipts: --db is c.db, --out c.out, the ID or FILE c.pos[0]. */
enum { DSV4Q_RECEIPTS_LIST, DSV4Q_RECEIPTS_SHOW, DSV4Q_RECEIPTS_VERIFY, DSV4Q_RECEIPTS_EXPORT,
       DSV4Q_RECEIPTS_VERIFY_JSON };
typedef struct dsv4q_receipts_args {
    dsv4q_cli_opts c;
    const char *kind, *pubkey;
    long last;                     /* 0: all */
    int all, json;
    int allow_unsigned; /* verify: receipts with no verified signature pass */
} dsv4q_receipts_args;

#endif
