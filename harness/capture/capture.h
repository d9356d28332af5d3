/*
 * capture.h - engine captures: the tensors an engine dumps from a real run,
 * one safetensors file per call, named after the stage table.
 *
 * Owns: the capture format (docs/captures.md) - its metadata, its file
 * layout, the checkpoint pins it states - the strict reader that proves a
 * capture well-formed against a model before anything is replayed, and the
 * writer the oracle itself uses (`dsv4q capture`, and `capture --backend`:
 * harness/capture/capture_backend.h), which is also the reference an engine author
 * can diff their own dump against.
 *
 * Refuses (errors naming the file and the tensor or field): a tensor whose
 * name is not a stage tensor of the table (stages.h) or whose layer is out
 * of range, a wrong shape or a non-float dtype, a missing or malformed
 * metadata key, a checkpoint pin that does not match the model, calls that
 * disagree on engine / profile / pins, two calls at one position or two
 * that overlap, a decode call of more than one token (a call past position
 * 0 of several tokens is a chunk of the prompt and must lie inside it), a
 * token id outside the vocabulary. A capture
 * that is merely INCOMPLETE (missing tensors, missing calls) is not an
 * error: replay reports what it cannot check (harness/capture/replay.h).
 *
 * Layout: FILE (one call) or DIR (every *.safetensors in it, one call each,
 * ordered by their "position"). Metadata of every file (all strings):
 *   dsv4q_capture_version  "1"
 *   checkpoint_sha256      SHA-256 of the checkpoint's config.json
 *   weights_sha256         optional: SHA-256 of the `sha256sum` listing
 *                          ("<hex>  <name>\n") of every *.safetensors and
 *                          *.index.json of the checkpoint, sorted by name
 *   position               start position of the call (0 = the prefill)
 *   token_ids              JSON list of the call's token ids
 *   engine, engine_version who wrote it
 *   profile                the precision profile the engine claims
 *                          (source | model | qat | exact)
 *   boundary               optional: overrides on top of the profile,
 *                          "name=on|off,..." as --boundary takes them
 *   prompt_len             optional: the prompt's tokens when the prefill
 *                          is fed in several calls (chunks; default: the
 *                          end of the last call of several tokens; up to
 *                          the model's max_seq_len, and may pass the last
 *                          call: a capture of the first chunks only)
 *   prefix_token_ids       optional: a prefix-cache hit: the ids of the
 *                          cached positions 0..P-1 another request
 *                          computed; the calls start at P (no call below)
 */
#ifndef DSV4Q_CAPTURE_H
#define DSV4Q_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "oracle/model_run.h"
#include "oracle/stages.h"

#define DSV4Q_CAPTURE_VERSION "1"

typedef struct dsv4q_capture_call {
    char file[4096];
    dsv4q_st *st;
    long pos, s;               /* start position, tokens */
    int32_t *ids;              /* [s] */
    int arch;                  /* the stage table its tensor names follow (dsv4q_arch: the model's) */
} dsv4q_capture_call;

typedef struct dsv4q_capture {
    char path[4096];
    char engine[128], engine_version[128], profile[32], boundary[4096];
    char checkpoint_sha256[65], weights_sha256[65];   /* "" if absent */
    uint64_t bs;               /* boundary set of the claimed profile */
    dsv4q_capture_call *calls; /* ascending position */
    int ncalls;
    long max_pos;              /* max pos + s over the calls, at least the chunked prompt */
    long prompt_decl;          /* metadata prompt_len, 0 if absent */
    long prompt;               /* a prefill fed in chunks: the prompt's tokens (the calls below it are
                                  its chunks); 0 when the prefill is one call */
    long prefix_len;           /* a prefix-cache hit: the cached positions 0..prefix_len-1 the calls
                                  continue (metadata prefix_token_ids), 0 for none */
    int32_t *prefix_ids;       /* [prefix_len] */
    char *prefix_meta;         /* its metadata text (every call must carry the same) */
    long ntensors;
    char sha256[65];           /* pin of the capture: SHA-256 of the
                                  sha256sum listing of its files */
} dsv4q_capture;

/* dsv4q_capture_pins (a capture's checkpoint pins): receipts/capture_pins.h,
 * one layer up, since it hashes through receipts/pin.c. */

/* Open and validate a capture (see above) against cfg and the checkpoint
 * pins config_sha / weights_sha (weights_sha NULL or "": the capture's
 * weights_sha256, if any, is not checked). 0, or -1 + message. */
int dsv4q_capture_open(dsv4q_capture **out, const char *path, const dsv4q_config *cfg, const char *config_sha,
                       const char *weights_sha, char *err, size_t errlen);
void dsv4q_capture_close(dsv4q_capture *c);

/* Tensor t of side io of a stage in one call; NULL if not captured. */
const dsv4q_st_tensor *dsv4q_capture_tensor(const dsv4q_capture_call *c, int stage, int layer, int io, int t);
/* Decode a validated capture tensor to double (F64, F32, BF16, F16). */
void dsv4q_capture_values(const dsv4q_st_tensor *t, double *out);

/* ---- writer (`dsv4q capture`) ------------------------------------------ */

typedef struct dsv4q_capture_writer dsv4q_capture_writer;

typedef struct dsv4q_capture_info {
    const char *engine, *engine_version;
    const char *profile, *boundary;   /* boundary may be NULL / "" */
    dsv4q_dtype dtype;                /* F64 or F32: how values are stored; BF16 =
                                         each tensor in its storage dtype under the
                                         profile (stages.h: BF16 or F32), which
                                         holds the values exactly */
    const char *config_sha, *weights_sha;   /* pins (weights_sha may be NULL) */
    const char *extra_meta[8][2];     /* more metadata (NULL-terminated pairs) */
    int layer_lo, layer_hi;           /* record layers [lo, hi) only (0, 0: all) */
} dsv4q_capture_info;

/* Write calls into directory dir (created if needed; existing call files are
 * replaced). 0 or -1 + message. */
int dsv4q_capture_writer_new(dsv4q_capture_writer **out, const char *dir, const dsv4q_config *cfg,
                             const dsv4q_capture_info *info, char *err, size_t errlen);
/* The stage hook (dsv4q_stage_fn) that records every stage of a call;
 * user = the writer. Never rewrites outputs. */
int dsv4q_capture_stage_cb(void *user, const dsv4q_stage_io *io);
/* End of a call (after dsv4q_run_feed): write call-NNNN.safetensors with
 * the stages recorded since the last call. 0 or -1 + message. */
int dsv4q_capture_writer_call(dsv4q_capture_writer *w, long pos, const int32_t *ids, long s, char *err,
                              size_t errlen);
/* Set (or replace) extra metadata key = value for the calls written from
 * now on (capture --backend: each call's oracle-f32 fallbacks). 0, or -1
 * when more than 8 extra keys or a value over 1023 bytes. */
int dsv4q_capture_writer_meta(dsv4q_capture_writer *w, const char *key, const char *value, char *err,
                              size_t errlen);
/* Create dir if needed and remove its call files (call-NNNN.safetensors);
 * refused (-1 + message) when it holds another .safetensors file. The
 * writer does this first; capture --backend also after a failed run. */
int dsv4q_capture_clear(const char *dir, char *err, size_t errlen);
/* Files written so far. */
int dsv4q_capture_writer_count(const dsv4q_capture_writer *w);
void dsv4q_capture_writer_free(dsv4q_capture_writer *w);

#endif
