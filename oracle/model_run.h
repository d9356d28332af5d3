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
    int stage;                 /* dsv4q_stage */
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

/*
 * The operator provider: every operator the forward pass (oracle/model.c)
 * calls goes through this table, so ONE forward pass runs on the oracle at
 * either width (the default table, oracle/model.c), on a backend through
 * the ABI (harness/provider/provider_abi.c, f32 only: the ABI is F32), or on a mix.
 * ctx is the provider's own (the oracle's is the run itself). Every entry
 * returns 0, or nonzero on failure (the provider keeps its own message);
 * shapes are those of the oracle function each mirrors (oracle/ops.inc):
 *   at           where the pass is now (layer, -1 = embed/head; the call's
 *                first position and tokens), for messages; may be NULL
 *   linear       y[s, w.out] = x[s, w.in] w^T; round_at: the boundary of
 *                the output rounding (DSV4Q_B_LINEAR_BF16, _IDX_PARTIAL_BF16)
 *                or -1 (FP32 math)                       dsv4q_linear
 *   rmsnorm      y[rows, d] (may alias x) with weight w    dsv4q_rmsnorm
 *   qhead_norm   in place on q[rows, D]                  dsv4q_qhead_norm
 *   rope         in place: row i of x (stride, dims off..off+r) at position
 *                pos0 + i / per_pos; compress: the compressed layers' table
 *                (compress_rope_theta + YaRN), else rope_theta   dsv4q_rope_apply
 *   act_quant    in place, rows of n at stride, block (kv_fp8: 64)  dsv4q_act_quant
 *   hadamard, fp4_quant   in place on x[rows, n]
 *   compress     layer's compressor (rotate 0: attention rows, 1: indexer
 *                keys) on this call's x[s, dim] at p0; writes the rows it
 *                completes to dst, returns their count (< 0: failure)
 *                                                         dsv4q_compressor
 *   indexer_score score[s, T]                             dsv4q_indexer_scores
 *   topk         idx[rows, k]                             dsv4q_topk
 *   sparse_attn  o[s, H, D]                               dsv4q_sparse_attn
 *   window_decode optional (NULL: the pass builds keys and columns and calls
 *                sparse_attn): one decode step that writes kv_new into the
 *                ring itself (the ABI's WINDOW_ATTN_DECODE)
 *   hc_pre, hc_post, hc_head                              oracle/hc.c
 *   moe          the gate (weights, indices [s, k] out, for the taps) and the
 *                experts' sum into out[s, d]   dsv4q_moe_gate + dsv4q_moe
 */
#define DSV4Q_PROVIDER_DECL(R, SUF)                                                                              \
    typedef struct dsv4q_provider_##SUF {                                                                        \
        void (*at)(void *ctx, int layer, long p0, long s);                                                       \
        int (*linear)(void *ctx, const dsv4q_weight *w, const R *x, long s, R *y, int round_at);                 \
        int (*rmsnorm)(void *ctx, const R *x, long rows, long d, const dsv4q_vec *w, R *y);                      \
        int (*qhead_norm)(void *ctx, R *q, long rows, long D);                                                   \
        int (*rope)(void *ctx, R *x, long rows, long stride, long off, long pos0, long per_pos, int compress,    \
                    int inverse);                                                                                \
        int (*act_quant)(void *ctx, R *x, long rows, long stride, long n, int block);                            \
        int (*hadamard)(void *ctx, R *x, long rows, long n);                                                     \
        int (*fp4_quant)(void *ctx, R *x, long rows, long n);                                                    \
        long (*compress)(void *ctx, int layer, int rotate, const R *x, long s, long p0, R *dst);                 \
        int (*indexer_score)(void *ctx, const R *q, const R *w, long s, int Hi, int Di, const R *K, long T,       \
                             long p0, R *score);                                                                 \
        int (*topk)(void *ctx, const R *score, long rows, long T, int k, int32_t *idx);                          \
        int (*sparse_attn)(void *ctx, const R *q, long s, int H, int D, const R *kv, long nkeys,                 \
                           const int32_t *idx, long ncols, const dsv4q_vec *sink, double scale, R *o);           \
        int (*window_decode)(void *ctx, const R *q, int H, int D, const R *kv_new, R *ring, long win,            \
                             const R *crows, long ncrows, const int32_t *cidx, long nc, const dsv4q_vec *sink,   \
                             double scale, long p, R *o);                                                        \
        int (*hc_pre)(void *ctx, const R *X, long s, const dsv4q_weight *fn, const dsv4q_vec *scale,             \
                      const dsv4q_vec *base, R *y, R *post, R *comb);                                            \
        int (*hc_post)(void *ctx, const R *x, const R *X, const R *post, const R *comb, long s, R *Y);           \
        int (*hc_head)(void *ctx, const R *X, const dsv4q_weight *fn, const dsv4q_vec *scale,                    \
                       const dsv4q_vec *base, R *y);                                                             \
        int (*moe)(void *ctx, int layer, const R *x, long s, const int32_t *ids, R *wts, int32_t *ix, R *out);   \
    } dsv4q_provider_##SUF;
DSV4Q_PROVIDER_DECL(float, f32)
DSV4Q_PROVIDER_DECL(double, f64)

typedef struct dsv4q_runstate_f32 dsv4q_runstate_f32;
typedef struct dsv4q_runstate_f64 dsv4q_runstate_f64;
dsv4q_runstate_f32 *dsv4q_run_new_f32(const dsv4q_model *m, uint64_t bs, long max_pos, dsv4q_tap_fn tap, void *user);
dsv4q_runstate_f64 *dsv4q_run_new_f64(const dsv4q_model *m, uint64_t bs, long max_pos, dsv4q_tap_fn tap, void *user);
int dsv4q_run_step_f32(dsv4q_runstate_f32 *r, const int32_t *ids, long s, double *logits);
int dsv4q_run_step_f64(dsv4q_runstate_f64 *r, const int32_t *ids, long s, double *logits);
int dsv4q_run_mtp_f32(dsv4q_runstate_f32 *r, const int32_t *ids, double *logits);
int dsv4q_run_mtp_f64(dsv4q_runstate_f64 *r, const int32_t *ids, double *logits);
long dsv4q_run_pos_f32(const dsv4q_runstate_f32 *r);
long dsv4q_run_pos_f64(const dsv4q_runstate_f64 *r);
void dsv4q_run_set_pick_hook_f32(dsv4q_runstate_f32 *r, dsv4q_pick_fn fn, void *user);
void dsv4q_run_set_pick_hook_f64(dsv4q_runstate_f64 *r, dsv4q_pick_fn fn, void *user);
int dsv4q_run_set_last_layer_f32(dsv4q_runstate_f32 *r, int layer);
int dsv4q_run_set_last_layer_f64(dsv4q_runstate_f64 *r, int layer);
void dsv4q_run_set_stage_hook_f32(dsv4q_runstate_f32 *r, dsv4q_stage_fn fn, void *user);
void dsv4q_run_set_stage_hook_f64(dsv4q_runstate_f64 *r, dsv4q_stage_fn fn, void *user);
int dsv4q_stage_exec_f32(dsv4q_runstate_f32 *r, const dsv4q_stage_io *io);
int dsv4q_stage_exec_f64(dsv4q_runstate_f64 *r, const dsv4q_stage_io *io);
/* Run the forward pass on provider p (with its ctx) instead of the oracle;
 * before the first step. p must outlive the run. NULL restores the oracle. */
void dsv4q_run_set_provider_f32(dsv4q_runstate_f32 *r, const dsv4q_provider_f32 *p, void *ctx);
void dsv4q_run_set_provider_f64(dsv4q_runstate_f64 *r, const dsv4q_provider_f64 *p, void *ctx);
void dsv4q_run_free_f32(dsv4q_runstate_f32 *r);
void dsv4q_run_free_f64(dsv4q_runstate_f64 *r);

/* ---- width-independent wrapper ---- */
typedef struct dsv4q_run dsv4q_run;

/* The longest context the model takes: original_seq_len x rope_factor (the
 * YaRN-extended length, 1,048,576 for V4), or 1,048,576 with YaRN off. */
long dsv4q_run_max_seq_len(const dsv4q_config *g);
/* Estimated peak bytes of a run of max_pos positions at width 32|64: the
 * per-layer KV window ring, compressed and indexer rows, RoPE tables and the
 * prefill's activations (q, kv, hc streams, the indexer's [s, s/4] scores
 * and the sparse column lists) for a prefill of max_pos tokens. An upper
 * estimate: the real peak is within it for prefills, smaller for decode. */
double dsv4q_run_estimate_bytes(const dsv4q_model *m, int width, long max_pos);
/* MemAvailable from /proc/meminfo in bytes, or -1 when unknown. */
double dsv4q_mem_available(void);

/* Start a run of model m at width 32|64 with boundary set bs, for at most
 * max_pos positions (prompt + decode steps). Refused (-1, exit 2 at the
 * CLI) when max_pos exceeds dsv4q_run_max_seq_len or the estimate exceeds
 * the available memory; the message gives both numbers. */
int dsv4q_run_open(dsv4q_run **out, const dsv4q_model *m, int width, uint64_t bs, long max_pos,
                   dsv4q_tap_fn tap, void *user, char *err, size_t errlen);
/* Feed tokens: the first call is the prefill (s >= 1 tokens at position 0),
 * later calls decode one token each (s == 1). logits [vocab] of the last
 * token. Errors (-1 + message): s out of range, a token id >= vocab or < 0,
 * past max_pos, allocation failure. */
int dsv4q_run_feed(dsv4q_run *r, const int32_t *ids, long s, double *logits, char *err, size_t errlen);
/* MTP logits from the last call's hidden streams and the given ids (one per
 * row of that call). -1 if the model has no MTP layer. */
int dsv4q_run_mtp(dsv4q_run *r, const int32_t *ids, double *logits, char *err, size_t errlen);
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
/* Install a stage hook (see dsv4q_stage_fn) before the first feed. */
void dsv4q_run_set_stage_hook(dsv4q_run *r, dsv4q_stage_fn fn, void *user);
/* Run the forward pass of an f32 run on operator provider p (with its ctx,
 * see dsv4q_provider_f32) instead of the oracle, before the first feed; p
 * must outlive the run, NULL restores the oracle. -1 (nothing changed) for
 * an f64 run (providers other than the oracle are F32: the backend ABI is)
 * or once a call has been fed. */
int dsv4q_run_set_provider(dsv4q_run *r, const dsv4q_provider_f32 *p, void *ctx);
/* Run ONE stage on the given inputs instead of a whole call (replay of a
 * capture). io->in holds the stage's inputs, io->out receives its outputs
 * (shapes from the stage table for io->s). Stateless stages may come in any
 * order. The stateful `attn` stage of a layer must be fed that layer's
 * calls in order from position 0 (prefill, then one-token decodes): it
 * keeps the layer's caches in this run, exactly as the forward pass does.
 * A run used for stages must not also be fed whole calls. Errors (-1 +
 * message): unknown stage or layer, s/pos0 out of order or past max_pos, a
 * token id outside the vocabulary, allocation failure. */
int dsv4q_run_stage(dsv4q_run *r, const dsv4q_stage_io *io, char *err, size_t errlen);
void dsv4q_run_close(dsv4q_run *r);

#endif
