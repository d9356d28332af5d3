/*
 * model_run.h - whole-model runs at either width behind one interface.
 *
 * The per-width entry points (dsv4q_run_*_f32 / _f64, oracle/model.c) are
 * wrapped by oracle/run.c so that commands hold a dsv4q_run and never care
 * which instance they talk to. Logits and taps always come out as double
 * (exact for the f32 instance).
 */
#ifndef DSV4Q_MODEL_RUN_H
#define DSV4Q_MODEL_RUN_H

#include <stdint.h>
#include "oracle/model_types.h"
#include "oracle/stages.h"

/* Tap callback: stage output of `layer` (-1: outside the blocks) with n
 * values in `rows` token rows. Called with stage == NULL after each layer
 * as a progress signal. `data` is valid only during the call. */
typedef void (*dsv4q_tap_fn)(void *user, int layer, const char *stage, const double *data, long n, long rows);

/* Indexer pick hook: called at a ratio-4 layer after its top-k with the
 * picks [rows, k] (compressed row indices, -1 = none; rows = tokens of
 * the call starting at position pos0). It may rewrite them in place: the
 * attention of that layer then uses the rewritten set (used by `margins`
 * to measure what a flipped selection does to the layer output). */
typedef void (*dsv4q_pick_fn)(void *user, int layer, long pos0, long rows, long k, int32_t *picks);

/* One stage of the stage table (oracle/stages.h) at one call: its inputs
 * and outputs as double arrays in the table's order and shapes. Used both
 * to REPORT stages from a forward pass (the stage hook) and to RUN one
 * stage on given inputs (dsv4q_run_stage, for replaying a capture). */
typedef struct dsv4q_stage_io {
    int stage;                 /* dsv4q_stage (a V4.1 model: dsv4q_stage41, its own table) */
    int layer;                 /* -1 for model-level stages */
    long s, pos0;              /* tokens of the call and its start position */
    const int32_t *ids;        /* the call's token ids [s] */
    const double *in[DSV4Q_STAGE_MAX_T];
    double *out[DSV4Q_STAGE_MAX_T];
} dsv4q_stage_io;

/* Stage hook: called after every stage of the main forward pass, and
 * after the mtp stage of dsv4q_run_mtp, with its inputs and outputs. It may rewrite the outputs in place and
 * return nonzero: the forward pass then continues from the rewritten values
 * (rounded to the run's width). No command rewrites today (capture
 * --backend now runs the pass on the backend's provider instead); the
 * facility is kept for experiments. Return 0 to leave them. The arrays
 * are valid only during the call. */
typedef int (*dsv4q_stage_fn)(void *user, const dsv4q_stage_io *io);

/* The per-width half: the operator provider dsv4q_provider_f32/_f64 and
 * the run instances dsv4q_runstate_f32/_f64 with their entry points
 * (dsv4q_run_new_f32, ...), declared once in oracle/model_run.inc. */
#define DSV4Q_BOTH "oracle/model_run.inc"
#include "oracle/both.h"

/* ---- width-independent wrapper ---- */
typedef struct dsv4q_run dsv4q_run;

/* The longest context the model takes: original_seq_len x rope_factor (the
 * YaRN-extended length, 1,048,576 for V4), or 1,048,576 with YaRN off. */
long dsv4q_run_max_seq_len(const dsv4q_config *g);
/* Estimated peak bytes of a run of max_pos positions at width 32|64 whose
 * prefill is `prefill` tokens (1: decode steps only) fed in calls of at
 * most `chunk` tokens (< 1 or > prefill: one call), from the forward
 * pass's own allocation plan: the per-layer KV window ring, compressed and
 * indexer rows (positions / ratio; V4.1: on kv sources and key owners,
 * and the n-gram hash's position cache), the RoPE tables, and the larger
 * of the largest prefill call's working set (its activations, the
 * indexer's [chunk, prefill / ratio] scores, the column lists) and a
 * decode step's at position max_pos - 1. Not counted: the caller's own buffers (taps, logits of every
 * position). Mirrors no reference function (a dsv4q resource estimate). */
double dsv4q_run_estimate_bytes(const dsv4q_model *m, int width, long max_pos, long prefill, long chunk);
/* dsv4q_run_estimate_bytes of a run of blocks first..last only
 * (dsv4q_run_set_layers): the caches of those layers (and MTP's when last
 * is the last layer), the same working set of a call. Weights are not
 * counted (they are the checkpoint's, mapped). A dsv4q resource estimate. */
double dsv4q_run_estimate_range_bytes(const dsv4q_model *m, int width, long max_pos, long prefill, long chunk,
                                      int first, int last);
/* The largest chunk (tokens, 1..prompt) a prefill of `prompt` tokens can
 * be fed in within `budget` bytes by dsv4q_run_estimate_bytes, or 0 when
 * not even one-token chunks fit. A dsv4q resource estimate. */
long dsv4q_run_chunk_fit(const dsv4q_model *m, int width, long max_pos, long prompt, double budget);
/* MemAvailable from /proc/meminfo in bytes, or -1 when unknown. */
double dsv4q_mem_available(void);

/* Start a run of model m at width 32|64 with boundary set bs, for at most
 * max_pos positions (prompt + decode steps). Refused (-1, exit 2 at the
 * CLI) when max_pos exceeds dsv4q_run_max_seq_len or the estimate for
 * decode steps (dsv4q_run_estimate_bytes(.., 1)) exceeds the available
 * memory; dsv4q_run_feed checks a prefill's own estimate the same way. The
 * message gives both numbers. */
int dsv4q_run_open(dsv4q_run **out, const dsv4q_model *m, int width, uint64_t bs, long max_pos,
                   dsv4q_tap_fn tap, void *user, char *err, size_t errlen);
/* Whether token ids [n] (positions pos0..) can be fed to m: each in
 * [0, vocab_size); for V4.1 none is image_token_id (text only) and each is
 * covered by the Engram token map. 0, or -1 with a message naming the
 * first bad token. dsv4q_run_feed checks every call; a command checks its
 * whole token list before it writes anything. */
int dsv4q_model_check_ids(const dsv4q_model *m, const int32_t *ids, long n, long pos0, char *err, size_t errlen);
/* Declare, before the first feed, that the prompt is `prompt` tokens: the
 * feeds at positions < prompt are then chunks of that one prefill, of any
 * sizes (s >= 1, not past the prompt), and the result is bit-identical to
 * feeding the prompt in one call (oracle/model.c M4) at a peak memory of
 * the caches plus one chunk (dsv4q_run_estimate_bytes(.., prompt, chunk)).
 * The reference has no chunked prefill; this is the oracle's own schedule
 * of the reference's one-call prefill, not an engine's chunked prefill.
 * Stage taps, the pick hook and dsv4q_run_mtp then see each chunk as a
 * call (rows = its tokens, pos0 = its position); V4.1's DSpark seeds its
 * windows from every chunk and drafts from the first decode step. Errors
 * (-1 + message): prompt outside [1, max_pos], a run already fed or given
 * a stateful stage call (dsv4q_run_stage), a provider other than the
 * oracle (dsv4q_run_set_provider). */
int dsv4q_run_set_prefill(dsv4q_run *r, long prompt, char *err, size_t errlen);
/* Feed tokens: the first call is the prefill (s >= 1 tokens at position 0,
 * or its first chunk, see dsv4q_run_set_prefill), later calls decode one
 * token each (s == 1). logits [vocab] of the last token. Errors (-1 +
 * message): s out of range, a bad token id (dsv4q_model_check_ids), past
 * max_pos, a prefill call whose estimate exceeds the memory available (the
 * message names a chunk size that fits), a V4.1 pass that fails (the
 * message says why), allocation failure. */
int dsv4q_run_feed(dsv4q_run *r, const int32_t *ids, long s, double *logits, char *err, size_t errlen);
/* MTP logits from the last call's hidden streams and the given ids (one per
 * row of that call). -1 if the model has no MTP layer. */
int dsv4q_run_mtp(dsv4q_run *r, const int32_t *ids, double *logits, char *err, size_t errlen);
/* DeepSeek V4.1 DSpark (oracle/dspark41.c, model.py Transformer.forward_spec)
 * after the last feed, on the token sampled from its logits (tok; the CLI
 * uses the argmax, temperature 0). A prefill (the first feed, or each
 * chunk of a declared prefill) only seeds the stages' window caches:
 * returns 1, outputs untouched. After a decode
 * feed at position p: 0, logits [dspark_block_size, vocab] of the draft
 * positions p+1.. (Markov bias added), ids [dspark_block_size + 1] (tok,
 * then the argmax drafts), conf [dspark_block_size] (confidence_head).
 * Call it after every feed: each call writes that feed's main_kv into the
 * stages' caches (the chunks before the last of a declared prefill
 * write theirs at the next feed when it was not called after them). -1 + message: no DSpark stage, tok out of range, a run
 * that stops early, allocation. */
int dsv4q_run_dspark(dsv4q_run *r, int32_t tok, double *logits, int32_t *ids, double *conf, char *err, size_t errlen);
/* Install an indexer pick hook (see dsv4q_pick_fn) before the first feed. */
void dsv4q_run_set_pick_hook(dsv4q_run *r, dsv4q_pick_fn fn, void *user);
/* Stop every call after layer `layer`'s block (0-based): the later layers
 * and the head are not run, and the logits come back as NaN. For runs that
 * only observe layers up to `layer` (dsv4q margins). -1 (the default) runs
 * the whole model; a layer >= n_layers - 1 runs the whole model too.
 * Returns 0, or -1 (nothing changed) once a call has been fed: the
 * skipped layers' caches would be missing. dsv4q_run_mtp refuses a run
 * that stops early (its hidden streams are not the last layer's). */
int dsv4q_run_set_last_layer(dsv4q_run *r, int layer);
/* Run only blocks first..last (0-based, inclusive) of every call, before
 * the first feed: one rank's share of a model split by layers.
 * The caches of the other layers are freed (MTP's is kept only when last is
 * the model's last layer). Then feed with dsv4q_run_feed_xs: the range
 * that starts at 0 embeds the tokens, the one that ends at the last layer
 * runs the head; the others give NaN logits, and dsv4q_run_mtp refuses
 * them. Bit-identical to the same blocks of the whole pass (oracle/model.c
 * M5). Errors (-1 + message, nothing changed): a V4.1 model ("V4 only so
 * far"), a range outside [0, n_layers), a run already fed. */
int dsv4q_run_set_layers(dsv4q_run *r, int first, int last, char *err, size_t errlen);
/* Values in the hidden streams of a call of s tokens: s x hc_mult x dim
 * (the Xs a range takes and gives; times width/8 bytes). */
long dsv4q_run_xs_count(const dsv4q_run *r, long s);
/* dsv4q_run_feed on hidden streams: xs [s, hc_mult, dim] of float (f32
 * run) or double (f64 run) holds the output of the previous range's last
 * block (ignored when the run's range starts at layer 0) and receives the
 * output of this range's last block. Checks and errors as dsv4q_run_feed;
 * xs NULL is refused. */
int dsv4q_run_feed_xs(dsv4q_run *r, const int32_t *ids, long s, void *xs, double *logits, char *err, size_t errlen);
/* Install a stage hook (see dsv4q_stage_fn) before the first feed. */
void dsv4q_run_set_stage_hook(dsv4q_run *r, dsv4q_stage_fn fn, void *user);
/* Run the forward pass of an f32 run on operator provider p (with its ctx,
 * see dsv4q_provider_f32) instead of the oracle, before the first feed; p
 * must outlive the run, NULL restores the oracle. -1 (nothing changed) for
 * an f64 run (providers other than the oracle are F32: the backend ABI is),
 * once a call has been fed, or for a V4.1 model when p lacks the V4.1
 * entries (model_run.inc; a backend provider has none yet). */
int dsv4q_run_set_provider(dsv4q_run *r, const dsv4q_provider_f32 *p, void *ctx);
/* Run ONE stage on the given inputs instead of a whole call (replay of a
 * capture). io->in holds the stage's inputs, io->out receives its outputs
 * (shapes from the stage table for io->s). Stateless stages may come in any
 * order. The stateful `attn` stage of a layer must be fed that layer's
 * calls in order from position 0 (prefill, or its chunks when the run has
 * a declared prefill (dsv4q_run_set_prefill), then one-token decodes): it
 * keeps the layer's caches in this run, exactly as the forward pass does.
 * A run used for stages must not also be fed whole calls. Errors (-1 +
 * message): unknown stage or layer, s/pos0 out of order or past max_pos, a
 * token id outside the vocabulary, allocation failure, a V4.1 model (its
 * stages are reported by the forward pass but not run one at a time yet),
 * on a run with a declared prompt (dsv4q_run_set_prefill) a call that
 * crosses the prompt's end (its column layout is the prompt's). */
int dsv4q_run_stage(dsv4q_run *r, const dsv4q_stage_io *io, char *err, size_t errlen);
/* A prefix-cache hit, for the replay of a capture whose calls continue a
 * prefix another request computed: the oracle's own forward pass over the
 * prefix ids[n] (one call, or the first chunk of a declared prefill that
 * holds it) fills every layer's caches as the engine's cache would hold
 * them, and the stage calls of each layer's attn (dsv4q_run_stage) then
 * continue at position n; the MTP layer's caches stay empty. Before any
 * stage call or feed. Errors (-1 + message): a V4.1 model, a run already
 * used, those of dsv4q_run_feed. The reference has no prefix cache: this
 * is a schedule of its one-call prefill (oracle/model.c M4). */
int dsv4q_run_seed_prefix(dsv4q_run *r, const int32_t *ids, long n, char *err, size_t errlen);
void dsv4q_run_close(dsv4q_run *r);

#endif
