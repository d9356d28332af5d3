/*
 * stages.h - the stage table: the one list of the forward pass's stages.
 *
 * A stage is the unit an engine's dump is judged by: a piece of the forward
 * pass with named input and output tensors whose shapes are functions of the
 * config and of s (the tokens of the call). Per layer, in forward order:
 *
 *   hc_attn_pre  X[s,hc,d]                     -> y[s,d], post[s,hc], comb[s,hc,hc]
 *   attn_norm    x[s,d]                        -> y[s,d]
 *   attn         x[s,d] (normed)               -> y[s,d] (after wo_b)   STATEFUL
 *   hc_attn_post x[s,d], X[s,hc,d], post, comb -> X[s,hc,d]
 *   hc_ffn_pre, ffn_norm                          (as the attention half)
 *   moe          x[s,d] + token ids            -> y[s,d]
 *   hc_ffn_post                                   (as hc_attn_post)
 *
 * plus model-level stages: embed (token ids -> X[s,hc,d]), head (the last
 * row's X[hc,d] -> logits[vocab]) and mtp (the call's X[s,hc,d] after the
 * last layer + the MTP token ids -> the MTP head's logits[vocab] of the last
 * row; stateful: the MTP layer's caches; optional in a capture). Token ids are never a tensor: they
 * come from the call (a capture's __metadata__ "token_ids").
 *
 * Owns: the table (names, tensors, shapes, boundaries, reference, oracle
 * function, which gate op bounds it, which operators it calls), the capture tensor names derived from
 * it, and their parser. The forward pass (oracle/model.c) reports and
 * replays stages by these ids; `dsv4q stages` prints the table and
 * docs/captures.md embeds it. Width-independent.
 *
 * Tensor names (docs/captures.md):
 *   L{layer}.{stage}.{in|out}            when the stage has ONE input/output
 *   L{layer}.{stage}.{in|out}.{name}     when it has several
 *   model.{stage}.{in|out}[.{name}]      for embed and head
 * so every tensor has exactly one spelling.
 *
 * Invariants:
 *  S1. Stage ids are stable; stages are appended, never renumbered.
 *  S2. Within a layer the table order is the forward order, and every input
 *      of a stage is an output of an earlier stage of the same call (or of
 *      the previous layer / embed): a chain of captured stages is complete.
 *  S3. Only `attn` carries state between calls (caches); every other stage is
 *      a pure function of its inputs, the weights and the boundary set.
 */
#ifndef DSV4Q_STAGES_H
#define DSV4Q_STAGES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "oracle/model_types.h"

typedef enum dsv4q_stage {
    DSV4Q_STAGE_EMBED = 0,
    DSV4Q_STAGE_HC_ATTN_PRE,
    DSV4Q_STAGE_ATTN_NORM,
    DSV4Q_STAGE_ATTN,
    DSV4Q_STAGE_HC_ATTN_POST,
    DSV4Q_STAGE_HC_FFN_PRE,
    DSV4Q_STAGE_FFN_NORM,
    DSV4Q_STAGE_MOE,
    DSV4Q_STAGE_HC_FFN_POST,
    DSV4Q_STAGE_HEAD,
    DSV4Q_STAGE_MTP,             /* appended: the MTP block + its head (optional) */
    DSV4Q_STAGE_COUNT
} dsv4q_stage;

/*
 * The DeepSeek V4.1 stage table (docs/v41.md): its own rows and ids, in
 * forward order, selected by the config's arch (the *_arch functions
 * below; the functions without the suffix are V4's table). Per layer:
 *
 *   engram       X[s,hc,d] + token ids          -> X[s,hc,d]   (Engram layers only)
 *   hc_attn_pre  X[s,hc,d], pre[s,hc]           -> y[s,d], pre[s,hc], post[s,hc], comb[s,hc,hc]
 *   attn_norm, attn, hc_attn_post                  (as V4; attn reads the caches and the top-k
 *                                                   its kv / index sources published)
 *   hc_ffn_pre   X[s,hc,d], pre[s,hc]           -> y, pre, post, comb
 *   ffn_norm, moe, hc_ffn_post                     (as V4; no hash-routed layers)
 *
 * pre is V4.1's lagged pre-mix: hc_attn_pre collapses X with the pre-mix
 * the previous block's hc_ffn_pre computed (the identity [1, 0, ..] at
 * layer 0) and hands on its own; hc_ffn_pre collapses with that one and
 * hands on the FFN pre-mix. So the state between layers is (X, pre):
 * L{i}.hc_ffn_post.out and L{i}.hc_ffn_pre.out.pre. The model-level rows
 * are embed and head (X[hc,d] and pre[hc] of the call's last token: the
 * final collapse, norm and logits; no hc_head). No MTP / DSpark row.
 * Same invariants as V4's (S1-S3, S3 with the attention caches shared
 * between a source and the layers that read it, and engram stateful too:
 * its n-gram hash looks back at the tokens of earlier calls).
 */
typedef enum dsv4q_stage41 {
    DSV4Q_S41_EMBED = 0,
    DSV4Q_S41_ENGRAM,
    DSV4Q_S41_HC_ATTN_PRE,
    DSV4Q_S41_ATTN_NORM,
    DSV4Q_S41_ATTN,
    DSV4Q_S41_HC_ATTN_POST,
    DSV4Q_S41_HC_FFN_PRE,
    DSV4Q_S41_FFN_NORM,
    DSV4Q_S41_MOE,
    DSV4Q_S41_HC_FFN_POST,
    DSV4Q_S41_HEAD,
    DSV4Q_S41_COUNT
} dsv4q_stage41;

/* Symbolic dimensions of a stage tensor. */
typedef enum dsv4q_sdim {
    DSV4Q_SD_S = 1,      /* tokens of the call */
    DSV4Q_SD_HC,         /* hc_mult */
    DSV4Q_SD_DIM,        /* dim */
    DSV4Q_SD_VOCAB       /* vocab_size */
} dsv4q_sdim;

#define DSV4Q_STAGE_MAX_T 4     /* tensors per side */
#define DSV4Q_STAGE_MAX_DIM 3
#define DSV4Q_STAGE_NAME_MAX 96 /* longest tensor name + NUL */

typedef struct dsv4q_stage_tensor {
    const char *name;              /* "X", "y", "post", "comb", "x", "logits" */
    int ndim;
    int dims[DSV4Q_STAGE_MAX_DIM]; /* dsv4q_sdim */
    const char *doc;
    int storage;                   /* 1 + the boundary (boundary.h) at which the
                                      reference stores this tensor as BF16
                                      (when on); 0 = kept in FP32 */
    int inner;                     /* FP32 outputs: 1 + the boundary of a BF16
                                      rounding of the vector this output is a
                                      linear map of (head: the normed hidden
                                      state, norm_bf16); 0 = none. When on, the
                                      output carries BF16 rounding noise and is
                                      judged in BF16 (harness/capture/replay.h P6) */
} dsv4q_stage_tensor;

typedef struct dsv4q_stage_info {
    int id;
    const char *name;        /* "hc_attn_pre" */
    int per_layer;           /* 1: L{layer}.{name}; 0: model.{name} */
    int stateful;            /* 1: caches carried between calls (S3) */
    int uses_ids;            /* 1: reads the call's token ids */
    int nin, nout;
    dsv4q_stage_tensor in[DSV4Q_STAGE_MAX_T], out[DSV4Q_STAGE_MAX_T];
    uint64_t boundaries;     /* rounding points inside the stage (DSV4Q_BIT) */
    const char *oracle;      /* the oracle code that computes it */
    const char *reference;   /* DeepSeek's code */
    const char *gate_op;     /* operator of gates/ whose rules bound it */
    const char *tap;         /* the `run --taps` tap of its first output */
    int optional;            /* 1: an engine may leave it out of a capture (MTP);
                                replay does not count it as missing */
    const char *ops;         /* the backend operators (abi/dsv4q_backend.h
                                DSV4Q_OP_LIST names, ", "-separated) its
                                computation may call through the operator
                                provider, over every config and profile; ""
                                for none (embed). The one op <-> stage link:
                                partial-engine marks and a case's stages are
                                derived from it (harness/ops/stage_ops.h), and
                                tests/test_stage_ops.c checks it against the
                                calls of a forward pass */
} dsv4q_stage_info;

/*
 * THE tap list (append-only): the named values `run --taps`, sensitivity
 * and margins observe in a forward pass, X(ENUM, name, selection). The
 * forward pass (oracle/model.c) taps by DSV4Q_TAP_<ENUM>, never by a bare
 * string; a stage row's `tap` must be one of these names (checked by
 * dsv4q_stage_table_check). selection = 1: an index set per row (compared
 * as sets, cli/taps.c). V4.1 (oracle/model_v41.c) adds: engram_out (the
 * stream after a layer's Engram, [s, hc, d]), block_premix (the FFN pre-mix
 * a block hands on, [s, hc]: with block_out the state between layers),
 * cand_blocks (the candidate source's blocks per row) and final_collapse
 * ([s, d] before the final norm; V4.1's final_norm has s rows, V4's one)
 * and ckv (a kv source's new compressed-KV rows of the call, after RoPE
 * and the ckv_fp4 codec, [rows, head_dim]). DSpark (oracle/dspark41.c):
 * dspark_logits [block, vocab] (Markov bias added), dspark_ids
 * [block + 1] (the sampled token, then the drafts), dspark_confidence
 * [block], model-level (layer -1), one set per decode call.
 */
#define DSV4Q_TAP_LIST(X)                                                                                              \
    X(EMBED, embed, 0)                                                                                                 \
    X(HC_ATTN_PRE, hc_attn_pre, 0)                                                                                     \
    X(ATTN_NORM, attn_norm, 0)                                                                                         \
    X(Q, q, 0)                                                                                                         \
    X(KV, kv, 0)                                                                                                       \
    X(IDX_SCORE, idx_score, 0)                                                                                         \
    X(IDX_TOPK, idx_topk, 1)                                                                                           \
    X(ATTN_OUT, attn_out, 0)                                                                                           \
    X(ATTN, attn, 0)                                                                                                   \
    X(HC_ATTN_POST, hc_attn_post, 0)                                                                                   \
    X(HC_FFN_PRE, hc_ffn_pre, 0)                                                                                       \
    X(FFN_NORM, ffn_norm, 0)                                                                                           \
    X(MOE_WEIGHTS, moe_weights, 0)                                                                                     \
    X(MOE_IDX, moe_idx, 1)                                                                                             \
    X(MOE_OUT, moe_out, 0)                                                                                             \
    X(BLOCK_OUT, block_out, 0)                                                                                         \
    X(FINAL_NORM, final_norm, 0)                                                                                       \
    X(LOGITS, logits, 0)                                                                                               \
    X(MTP_LOGITS, mtp_logits, 0)                                                                                       \
    X(ENGRAM_OUT, engram_out, 0)                                                                                       \
    X(BLOCK_PREMIX, block_premix, 0)                                                                                   \
    X(CAND_BLOCKS, cand_blocks, 1)                                                                                     \
    X(FINAL_COLLAPSE, final_collapse, 0)                                                                               \
    X(CKV, ckv, 0)                                                                                                     \
    X(DSPARK_LOGITS, dspark_logits, 0)                                                                                 \
    X(DSPARK_IDS, dspark_ids, 0)                                                                                       \
    X(DSPARK_CONFIDENCE, dspark_confidence, 0)

#define DSV4Q_TAP_ENUM_(E, name, sel) DSV4Q_TAP_##E,
typedef enum dsv4q_tap { DSV4Q_TAP_LIST(DSV4Q_TAP_ENUM_) DSV4Q_TAP_COUNT } dsv4q_tap;
#undef DSV4Q_TAP_ENUM_

const char *dsv4q_tap_name(int tap);               /* NULL if out of range */
int dsv4q_tap_find(const char *name);              /* -1 if unknown */
int dsv4q_tap_is_selection(int tap);               /* 0 out of range */

/* Check the stage table when it is used: every stage names a known tap
 * and a gate operator (gate_op non-empty; the harness resolves it against
 * the operator list: harness/measure/verdict.h dsv4q_stage_gates_check), names are
 * unique, and per-layer stages come in forward order between embed and
 * head (S2). 0, or -1 with a message naming the row. */
int dsv4q_stage_table_check(char *err, size_t errlen);

/* Which layer's caches a stateful stage of cfg's table carries: its own
 * layer for a per-layer stage (attn), the first MTP layer (n_layers) for
 * mtp, n_layers + e for V4.1's engram of the e-th Engram layer (the n-gram
 * look-back); -1 for a stateless stage. Callers that track "the next
 * position of each cache" size their arrays dsv4q_stage_cache_count(cfg). */
int dsv4q_stage_cache_index(int stage, int layer, const dsv4q_config *cfg);
int dsv4q_stage_cache_count(const dsv4q_config *cfg);
/* V4.1, one stage at a time: the attn of a compressed layer reads the
 * caches and top-k that the source layers before it (kv, index and
 * candidate sources) published in the same call, so those must have run
 * it. next [dsv4q_stage_cache_count]: each cache's next position; end: the
 * call's end position. Returns the first source layer before `layer` whose
 * attn has not reached end, or -1 (none, or not a compressed V4.1 layer). */
int dsv4q_v41_unready_source(const dsv4q_config *cfg, int layer, const long *next, long end);

/* The forward order of one call for n_layers layers, as slots 0..n-1: the
 * model-level stages that precede the per-layer rows in the table (embed),
 * then every layer's per-layer stages in table order, then the model-level
 * stages after them (head). replay, `dsv4q stages --names` and goldens
 * iterate this instead of spelling the order out. */
long dsv4q_stage_nslots(int n_layers);
/* Slot i -> stage id and layer (-1 for model-level). -1 if i is out of range. */
int dsv4q_stage_slot(int n_layers, long i, int *stage, int *layer);
/* (stage, layer) -> slot, -1 if there is none. */
long dsv4q_stage_slot_of(int n_layers, int stage, int layer);

const dsv4q_stage_info *dsv4q_stage_get(int id);   /* NULL if out of range */
int dsv4q_stage_find(const char *name);            /* -1 if unknown */

/* The same, for the table of arch (dsv4q_arch: DSV4Q_ARCH_V4 is the table
 * above, DSV4Q_ARCH_V41 the dsv4q_stage41 rows). */
int dsv4q_stage_count_arch(int arch);
const dsv4q_stage_info *dsv4q_stage_get_arch(int arch, int id); /* NULL if out of range */
long dsv4q_stage_nslots_arch(int arch, int n_layers);
int dsv4q_stage_slot_arch(int arch, int n_layers, long i, int *stage, int *layer);
long dsv4q_stage_slot_of_arch(int arch, int n_layers, int stage, int layer);
int dsv4q_stage_tensor_name_arch(int arch, char *buf, size_t len, int stage, int layer, int io, int t);
int dsv4q_stage_parse_name_arch(int arch, const char *name, int *stage, int *layer, int *io, int *t, char *err,
                                size_t errlen);
/* Whether (stage, layer) of cfg's table runs in cfg's forward pass: 0 for
 * V4's mtp without MTP layers and V4.1's engram on a layer without one;
 * 1 otherwise (layer ignored for model-level stages). */
int dsv4q_stage_present(const dsv4q_config *cfg, int stage, int layer);

/* The storage dtype (dsv4q_dtype: BF16 or F32) of a stage tensor under
 * boundary set bs: where the reference keeps it, so where a rounding flip
 * is one storage ulp, and the narrowest dtype that holds it exactly. */
int dsv4q_stage_storage(const dsv4q_stage_tensor *t, uint64_t bs);

/* Concrete shape of a stage tensor for cfg and s tokens; returns ndim. */
int dsv4q_stage_shape(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, long s, int64_t *shape);
/* Elements of that shape. */
int64_t dsv4q_stage_numel(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, long s);
/* Symbolic shape "[s, hc, d]" (cfg NULL) or "[s, 4, 256]" (cfg given). */
void dsv4q_stage_shape_str(const dsv4q_stage_tensor *t, const dsv4q_config *cfg, char *buf, size_t len);

/* The capture name of tensor t of side io (0 in, 1 out) of stage at layer
 * (ignored for model-level stages). Returns 0, or -1 if out of range. */
int dsv4q_stage_tensor_name(char *buf, size_t len, int stage, int layer, int io, int t);
/* Parse a capture name. Returns 0 and the four fields, or -1 with a message
 * saying what is wrong with it (unknown stage, bad layer, in/out, tensor). */
int dsv4q_stage_parse_name(const char *name, int *stage, int *layer, int *io, int *t, char *err, size_t errlen);

/* The table as text (cfg NULL: symbolic shapes, V4's table; else cfg's
 * arch's table with its shapes) or markdown. */
void dsv4q_stage_print(FILE *f, const dsv4q_config *cfg, int markdown);

#endif
