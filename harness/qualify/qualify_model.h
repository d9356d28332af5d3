/*
 * qualify_model.h - whole-model qualification of a backend that implements
 * every operator: the harness composes the DeepSeek V4 forward pass from
 * the BACKEND'S operators on a checkpoint and judges its logits with the
 * `model` section of the gates (`dsv4q qualify --whole-model`).
 *
 * Composition (dsv4q_wm_compose): prefill of the prompt at position 0, then
 * one-token decode steps of the teacher tokens (teacher forcing: the
 * candidate and the references see the same tokens whatever they predict),
 * exactly as oracle/model.c runs them (dsv4q_run). Every numerical step that
 * is an operator of the ABI is a backend call:
 *   LINEAR (wq_a, wq_b, wkv, indexer wq_b and weights_proj, the wo_a groups,
 *   wo_b, head), RMSNORM, QHEAD_NORM, ROPE (rope dims of q, kv, indexer q;
 *   inverse on the attention output), ACT_QUANT (kv nope dims, block 64, when
 *   the profile has kv_fp8), HADAMARD + FP4_QUANT (indexer queries, when the
 *   profile has them), COMPRESSOR (attention rows and indexer keys),
 *   INDEXER_SCORE, TOPK, SPARSE_ATTN (prefill) and WINDOW_ATTN_DECODE
 *   (decode; SPARSE_ATTN when the backend lacks it), HC_PRE, HC_POST,
 *   HC_HEAD, MOE_GATE, EXPERT (each routed expert on its rows, and the
 *   shared expert with routing weight 1).
 * The composition IS oracle/model.c's forward pass (dsv4q_run at f32) with
 * the backend as its operator provider (harness/provider/provider_abi.h), so the
 * glue the reference does outside those operators is model.c's own: the
 * embedding lookup,
 * reshapes and column slices, the wo_a per-group split, the indexer weight
 * scale (w * Di^-0.5 Hi^-0.5 and its idx_partial_bf16 roundings), the MoE
 * sum (ascending expert id, then + shared, moe_bf16), the caches (window
 * ring, compressed rows, indexer keys, layer input history) and the column
 * layouts (window columns then compressed columns; offset s in prefill, w
 * in decode); the provider adds the FP32 glue of an engine (MoE sum, rope
 * on the rope dims, the decode compressor below).
 *
 * Decode and the compressor. The ABI's COMPRESSOR is a prefill from
 * position 0. The compressor is causal: in oracle/compressor.c the row of
 * block b pools only tokens (b-1)*ratio .. (b+1)*ratio - 1 (overlap) or
 * b*ratio .. (b+1)*ratio - 1, each token's kv/gate row is x_t W^T (row-wise)
 * + ape[t % ratio], and the prefill and decode paths pool the same
 * candidates in the same order (invariant C1), so the row a prefill emits
 * for a complete block does not depend on later tokens and equals the row
 * the decode path emits when that block completes. So at a decode step at
 * position p with (p+1) % ratio == 0 the harness re-runs the backend's
 * COMPRESSOR on the layer's whole input history [0, p] and takes the last
 * row (the other steps emit no row and make no call). Composing decode as a
 * prefill of the extended sequence was rejected: the prefill column layout
 * (window of the last w tokens inside the call, offset s) is not the
 * decode one, so it would not be the computation the reference does.
 *
 * Judgement (dsv4q_wm_qualify): the composed logits (one row per call:
 * the last prompt position, then each decode step) are compared with the
 * oracle-f64 run of the backend's profile (dsv4q_run); the level is the
 * oracle-f32 run of the same profile on the same tokens (the fp32
 * sensitivity floor, `dsv4q sensitivity`). Gates (gates.h `model`):
 *     logit NRMS (all rows) <= factor * level NRMS + floor
 *     greedy agreement (rows whose argmax equals the f64 argmax) >= min
 *         over the DECIDED rows: those whose f64 top-1/top-2 margin
 *         exceeds 2 x factor x the largest |oracle-f32 - oracle-f64| logit
 *         error on that row (factor: the logit NRMS rule's, >= 1). On an
 *         undecided row the logit error the NRMS gate allows can flip the
 *         argmax of a correct backend (measured on tiny: cpu-ref 6/9 vs
 *         oracle-f32 8/9 at token seed 2, logit NRMS 0.7x the level), so
 *         agreement there is reported, not required. Never required above
 *         what the fp32 level reaches on the decided rows: the candidate
 *         needs min(ceil(min * decided), level's agreeing decided rows)
 *         (oracle-f32 passes every model gate by construction)
 *     every stage of every layer within its own bound, judged on the
 *         reference run's inputs (harness/capture/stagewise.h: the per-stage verdict)
 *     no non-finite logit (NRMS is over finite pairs only; G2)
 * A reference that is not finite judges nothing (issue 29): when the
 * oracle-f64 or oracle-f32 logits hold a NaN or an inf the other width does
 * not share, the logits are "not checkable"; a stage whose reference is
 * not finite is not checkable (replay.h rstage.ref_nonfinite). Neither is
 * ever a pass: with nothing else failing the verdict is UNCHECKABLE (exit 1).
 * The whole composed model runs in ONE isolated child (isolate.h
 * dsv4q_iso_job), not a fork per operator; a crash or hang names the
 * operator, layer and position in flight.
 *
 * Invariant W1: composed from oracle-f32's operators, the logits equal
 * dsv4q_run at f32 bit for bit (tests/test_qualify_model.c): one forward
 * pass by construction; the test checks the provider's glue.
 */
#ifndef DSV4Q_QUALIFY_MODEL_H
#define DSV4Q_QUALIFY_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include "harness/measure/verdict.h"
#include "harness/backend/isolate.h"
#include "harness/qualify/qualify.h"
#include "harness/capture/replay.h"
#include "io/model.h"

/* dsv4q_wm_compose flags */
#define DSV4Q_WM_SPARSE_DECODE 1   /* decode through SPARSE_ATTN even if WINDOW_ATTN_DECODE is in caps */

/* The operators the composition needs for model m under boundary set bs
 * (WINDOW_ATTN_DECODE is optional and not included). */
uint64_t dsv4q_wm_required_ops(const dsv4q_model *m, uint64_t bs);

/* Compose the forward pass from backend b (already init()ed, context ctx)
 * in the calling process: prefill of ids[0, nprompt), then ndecode one-token
 * steps of ids[nprompt, nprompt + ndecode). logits [(1 + ndecode), vocab].
 * calls[DSV4Q_OP_COUNT] (may be NULL) counts the backend calls per op;
 * fallbacks[DSV4Q_OP_COUNT] (may be NULL) the calls run by oracle-f32
 * instead (operators outside caps or declined by supports(), issue 16);
 * *decode_op (may be NULL) receives the operator decode attention used.
 * detail (may be NULL) is kept naming the call in flight. Returns
 * DSV4Q_BACKEND_OK, or _UNSUPPORTED / _ERROR with err naming the op, layer
 * and position. */
int dsv4q_wm_compose(const dsv4q_backend_v1 *b, void *ctx, const dsv4q_model *m, uint64_t bs, const int32_t *ids,
                     long nprompt, long ndecode, int flags, double *logits, long *calls, long *fallbacks,
                     int *decode_op, char *detail,
                     size_t detaillen, char *err, size_t errlen);

/* 1 when the argmax am of reference logits ref[V] is decided (the greedy
 * rule above): its margin over the runner-up exceeds 2 x factor x the
 * largest |lvl - ref| (the fp32 level's logits lvl[V]); 0 otherwise, also
 * for a NaN anywhere or am outside [0, V). */
int dsv4q_wm_row_decided(const double *ref, const double *lvl, long V, long am, double factor);

typedef struct dsv4q_wm_opts {
    const dsv4q_gates *gates;
    dsv4q_iso_opts iso;
    int flags;                 /* DSV4Q_WM_* */
    int quiet;
    const char *declare;       /* declaration replacing the backend's (--profile/--boundary), or NULL */
} dsv4q_wm_opts;

typedef struct dsv4q_wm_result {
    dsv4q_backend_desc desc;
    char profile[256];               /* the declaration as given */
    char declared[512];              /* canonical (dsv4q_declaration_format) */
    uint64_t bs;
    long nprompt, ndecode, rows, vocab;
    double *cand, *ref, *lvl;        /* logits [rows, vocab]: composed, oracle-f64, oracle-f32 */
    double *step_nrms, *step_level;  /* per row */
    long *am_cand, *am_ref, *am_lvl; /* argmax per row */
    double nrms, level, bound;       /* logit NRMS over all rows; level = f32 vs f64 */
    double max_abs, level_max_abs, cosine;
    long agree, level_agree, nonfinite;
    long greedy_required;            /* decided rows that must agree (see the greedy rule above) */
    long decided, agree_decided;     /* decided rows; of them, rows whose argmax agrees */
    double greedy, greedy_min;
    int nrms_pass, greedy_pass;
    /* PASS, FAIL, ERROR (crash, missing op, ...), or UNCHECKABLE: nothing
     * failed, but the oracle's logits (ref_nonfinite) or a stage's reference
     * (stages_ref_nonfinite) are not finite */
    dsv4q_verdict verdict;
    /* the oracle-f64 or oracle-f32 logits are not finite (dsv4q_ref_finite):
     * the logit gates judge nothing; ref_why: "reference not finite: logits: ..." */
    int ref_nonfinite;
    char ref_why[320];
    int stages_ref_nonfinite; /* stage rows whose reference is not finite */
    dsv4q_iso_status status;
    int load_failed;
    char msg[1024];
    long calls[DSV4Q_OP_COUNT];
    long fallbacks[DSV4Q_OP_COUNT];  /* calls run by oracle-f32 (not in caps / declined) */
    int decode_op;
    double seconds, oracle_seconds;
    dsv4q_replay stages;             /* the per-stage verdict (harness/capture/stagewise.h), gated */
    int stages_pass;                 /* dsv4q_replay_status(&stages) == 0 */
} dsv4q_wm_result;

/* Qualify backend `spec` on model m with tokens ids (nprompt + ndecode).
 * Returns 0 when the harness worked (whatever the verdict), -1 with a
 * message when it could not (out of memory, oracle failure). */
int dsv4q_wm_qualify(const char *spec, const dsv4q_model *m, const int32_t *ids, long nprompt, long ndecode,
                     const dsv4q_wm_opts *o, dsv4q_wm_result *r, char *err, size_t errlen);
void dsv4q_wm_free(dsv4q_wm_result *r);
/* 0 pass, 1 fail / error, 2 the backend could not be loaded. */
int dsv4q_wm_status(const dsv4q_wm_result *r);
void dsv4q_wm_print(FILE *f, const dsv4q_wm_result *r, const dsv4q_gates *g);
/* JSON of one run; tokens (may be NULL): where its token ids came from. */
char *dsv4q_wm_json(const dsv4q_wm_result *r, const dsv4q_gates *g, const char *tokens);

#endif
