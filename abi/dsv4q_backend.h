/*
 * dsv4q_backend.h - the versioned C ABI between the qualification harness
 * and a backend under test (a kernel library: CPU, CUDA, Metal, ...).
 *
 * Self-contained: a backend includes only this header (it repeats the dtype
 * values of oracle/formats.h as DSV4Q_BT_* so a plugin needs nothing else).
 *
 * Model. The harness calls one OPERATOR at a time on HOST memory. Every
 * input tensor is given decoded (F32 values, weights decoded exactly with
 * their block scales applied) and, for tensors stored in a narrow format in
 * the checkpoint, also as the raw stored bytes (BF16 codes, F8_E4M3 codes
 * with E8M0/F32 block scales, packed E2M1 with E8M0 scales), so a backend may
 * run its own weight path on the bytes it would load from disk. Outputs are
 * preallocated by the harness; the backend writes them in its storage dtype
 * (F32, or BF16/F16 codes; see dsv4q_bt.dtype below).
 *
 * A backend declares (1) the operators it implements (caps, one bit per
 * dsv4q_op) and (2) the precision profile it implements ("source" by
 * default: every rounding point of DeepSeek's reference; "model", "qat",
 * "exact": see docs/boundaries.md). It is judged against the FP64 oracle of
 * that profile; the rounding level is the FP32 oracle vs the FP64 oracle of
 * the same profile on the same case.
 *
 * ABI v2 (append-only; a v1 descriptor keeps working, docs/engines.md):
 *  - DECLARED DEVIATIONS: `profile` may be a declaration
 *        BASE[:NAME[=on|off],...]      e.g. "qat:act_q8_0,kv_f16"
 *    a base profile plus reference-boundary overrides plus ENGINE storage
 *    points (kv_f16, act_q8_0 replacing gemm_act_fp8, idx_score_f32
 *    replacing idx_score_bf16, act_f16: oracle/boundary.h). The backend is
 *    judged against oracle-f64 honouring exactly that declaration, and the
 *    level is oracle-f32 vs oracle-f64 with the same declaration.
 *  - PER-CASE SUPPORT: dsv4q_backend_v2.supports(call) may decline one case
 *    of an operator in caps (a shape the engine has no kernel for); the case
 *    is SKIPPED with the backend's reason, never an ERROR.
 *  - TENSOR IDENTITY: dsv4q_bcall.role names the weight tensor the call
 *    carries ("layers.3.attn.wq_b", "head", "layers.2.ffn.shared_experts",
 *    "layers.2.ffn.experts.5", ...; NULL for weightless ops), and
 *    in_role[i] the role of input i (NULL for activations). An EXPERT call
 *    with role ...shared_experts has an EMPTY routing weight (ndim 0): the
 *    shared expert's output is not scaled.
 *
 * Loading. A plugin is a shared object exporting
 *     const dsv4q_backend_v1 *dsv4q_backend_entry(void);
 * (`dsv4q qualify --backend ./libx.so`), or a built-in registered by name
 * (harness/backend/backend.h). The harness runs every backend call in a forked child
 * process (harness/backend/isolate.c): a crash, a hang (timeout) or a bad ABI is
 * reported as a clear error and never takes the harness down. Consequences
 * for a backend: init() runs in the child, once per case (a case runs the
 * operator twice, for the determinism check); no state survives between
 * cases; nothing may be initialised by a library constructor that cannot
 * survive fork() (initialise CUDA/Metal in init(), not at load time).
 *
 * Conventions (all operators):
 *  - Row-major, contiguous; a weight W is [out, in] and y = x W^T;
 *    activations are [tokens, features]; hc streams are [tokens, hc, dim].
 *  - Shapes are exact: the harness fills ndim/shape of every input AND of
 *    every output; the backend must not read or write past them.
 *  - Integer tensors (positions, indices, token ids) are I32 (data points to
 *    int32_t); they have no raw form.
 *  - Params are doubles (integers are exact in a double); their meaning per
 *    operator and index is in the summary below and in docs/backends.md.
 *  - An "empty" optional input has ndim 0 and data NULL.
 *  - The case key a call carries (case_key) is for logs: pick a kernel by
 *    the call's op, shapes and role, never by parsing the key (its grammar
 *    is versioned by the harness, harness/cases/key.h).
 *
 * Each operator is defined in one file of the harness, harness/ops/<name>.c
 * (its contract, cases and oracle adapter); docs/backends.md has its full
 * contract, and the summary below is generated from the same files.
 *
 * <!-- generated: dsv4q qualify --list-ops --header (make docs) -->
 * Per-operator contract summary (generated from harness/ops/<name>.c by
 * `make docs`; docs/backends.md has the full table, `dsv4q qualify
 * --list-ops` prints it; '?' marks an optional input, empty = ndim 0):
 *
 * LINEAR         x [s,K], w [N,K]
 *   params       0 ue8m0, 1 bf16_out
 *   out          y [s,N]
 *   oracle       oracle/linear.c dsv4q_linear; model.py linear; kernel.py
 *                act_quant, fp8_gemm_kernel, fp4_gemm_kernel
 * RMSNORM        x [rows,d], w [d]
 *   params       0 eps
 *   out          y [rows,d]
 *   oracle       oracle/norm.c dsv4q_rmsnorm; model.py RMSNorm.forward
 * QHEAD_NORM     q [rows,D]
 *   params       0 eps
 *   out          y [rows,D]
 *   oracle       oracle/norm.c dsv4q_qhead_norm; model.py Attention.forward
 *                (q *= rsqrt(q.square().mean(-1) + eps))
 * ROPE           x [rows,r], pos [rows]
 *   params       0 base, 1 original_seq_len, 2 factor, 3 beta_fast, 4
 *                beta_slow, 5 inverse
 *   out          y [rows,r]
 *   oracle       oracle/rope.c dsv4q_rope_build + dsv4q_rope_apply; model.py
 *                precompute_freqs_cis, apply_rotary_emb
 * ACT_QUANT      x [rows,n]
 *   params       0 block, 1 ue8m0
 *   out          y [rows,n]
 *   oracle       oracle/quant.c dsv4q_act_quant; kernel.py act_quant_kernel
 *                (inplace)
 * FP4_QUANT      x [rows,n]
 *   out          y [rows,n]
 *   oracle       oracle/quant.c dsv4q_fp4_act_quant; kernel.py
 *                fp4_quant_kernel (inplace)
 * HADAMARD       x [rows,n]
 *   out          y [rows,n]
 *   oracle       oracle/quant.c dsv4q_hadamard; model.py rotate_activation
 * SPARSE_ATTN    q [s,H,D], kv [N,D], idx [s,ncols], sink [H]
 *   params       0 scale
 *   out          o [s,H,D]
 *   oracle       oracle/attn.c dsv4q_sparse_attn; kernel.py
 *                sparse_attn_kernel
 * COMPRESSOR     x [s,d], wkv [coff*Dc,d], wgate [coff*Dc,d], ape
 *                [ratio,coff*Dc], norm [Dc]
 *   params       0 ratio, 1 rotate, 2 eps, 3 rope_dim, 4 rope, 5
 *                original_seq_len, 6 factor, 7 beta_fast, 8 beta_slow, 9
 *                ue8m0
 *   out          rows [s/ratio,Dc]
 *   oracle       oracle/compressor.c dsv4q_compressor; model.py
 *                Compressor.forward
 * INDEXER_SCORE  q [s,Hi,Di], w [s,Hi], K [T,Di]
 *   params       0 start_pos, 1 ratio
 *   out          score [s,T]
 *   oracle       oracle/indexer.c dsv4q_indexer_scores; model.py
 *                Indexer.forward
 * TOPK           score [rows,T]
 *   params       0 k
 *   out          idx [rows,k]
 *   oracle       oracle/indexer.c dsv4q_topk; model.py Indexer.forward
 *                (score.topk)
 * HC_PRE         X [s,hc,d], fn [(2+hc)*hc,hc*d], scale [3], base [(2+hc)*hc]
 *   params       0 norm_eps, 1 hc_eps, 2 iters
 *   out          y [s,d], post [s,hc], comb [s,hc,hc]
 *   oracle       oracle/hc.c dsv4q_hc_pre; model.py Block.hc_pre; kernel.py
 *                hc_split_sinkhorn_kernel
 * HC_POST        x [s,d], X [s,hc,d], post [s,hc], comb [s,hc,hc]
 *   out          Y [s,hc,d]
 *   oracle       oracle/hc.c dsv4q_hc_post; model.py Block.hc_post
 * HC_HEAD        X [s,hc,d], fn [hc,hc*d], scale [1], base [hc]
 *   params       0 norm_eps, 1 hc_eps
 *   out          y [s,d]
 *   oracle       oracle/hc.c dsv4q_hc_head; model.py ParallelHead.hc_head
 * MOE_GATE       x [s,d], W [n_exp,d], bias? [n_exp], tid2eid? [vocab,k], ids
 *                [s]
 *   params       0 k, 1 route_scale, 2 score_func
 *   out          weights [s,k], indices [s,k]
 *   oracle       oracle/moe.c dsv4q_moe_gate; model.py Gate.forward
 * EXPERT         x [n,d], w1 [I,d], w2 [d,I], w3 [I,d], weight? [n]
 *   params       0 swiglu_limit, 1 ue8m0
 *   out          y [n,d]
 *   oracle       oracle/moe.c dsv4q_expert; model.py Expert.forward
 * WINDOW_ATTN_DECODE  q [1,H,D], kv_new [1,D], ring [w,D], cmp? [Nc,D], cidx?
 *                [1,nc], sink [H]
 *   params       0 p, 1 w, 2 scale
 *   out          o [1,H,D], ring_out [w,D]
 *   oracle       oracle/attn.c dsv4q_sparse_attn on the keys and columns
 *                oracle/model.c builds in decode; model.py Attention.forward
 *                (decode: kv_cache[start_pos % win] = kv, then sparse_attn)
 * KV41_QUANT     x [rows,n]
 *   out          y [rows,n]
 *   oracle       oracle/kv41.c dsv4q_kv41_quant; V4.1 model.py
 *                Attention._compress_kv (fp4_act_quant, 16, inplace, E4M3
 *                scale); kernel.py fp4_quant_kernel
 * MOE_GATE41     x [s,d], W [n_exp,d], bias? [n_exp]
 *   params       0 k, 1 route_scale, 2 score_func, 3 gate_temp, 4
 *                norm_topk_prob
 *   out          weights [s,k], indices [s,k]
 *   oracle       oracle/moe.c dsv4q_moe_gate41; V4.1 model.py Gate.forward
 * CANDIDATE_BLOCKS  score [rows,T], clen [rows]
 *   params       0 topb, 1 B
 *   out          blocks [rows,topb]
 *   oracle       oracle/index41.c dsv4q_candidate_blocks; V4.1 model.py
 *                select_candidate_blocks
 * TOPK41         score [rows,T], clen [rows], blocks? [rows,topb]
 *   params       0 k, 1 B
 *   out          idx [rows,k]
 *   oracle       oracle/index41.c dsv4q_topk41 (after the consumer's
 *                candidate mask, oracle/model_v41.c); V4.1 model.py
 *                Indexer.forward (masked score.topk, sort, idxs <
 *                compress_lens)
 * ENGRAM_HASH    ids [T], primes [ncols], mult [N]
 *   params       0 start, 1 pad, 2 V
 *   out          bucket [T-N+1,ncols]
 *   oracle       oracle/engram_hash.c dsv4q_engram_hash_ctx; V4.1 engram.py
 *                NgramHashState.forward for one Engram layer (n-gram window
 *                with DEAD / sequence-start blocking, XOR of id * multiplier,
 *                torch's floor %, + offsets)
 * ENGRAM41       h [s,hc,dim], ids [s,ncols], table [rows,hd], wkv
 *                [(hc+1)*dim,ncols*hd], q_weight [hc,dim], k_weight [hc,dim],
 *                text_mask? [s]
 *   params       0 eps, 1 ue8m0
 *   out          h_out [s,hc,dim]
 *   oracle       oracle/engram41.c dsv4q_engram41; V4.1 model.py
 *                Engram.forward, ParallelEngramEmbedding
 * COMPRESSOR41   x [s,d], wkv [Dc,d], wgate? [Dc,d], norm [Dc]
 *   params       0 ratio, 1 p, 2 eps
 *   out          rows [n,Dc]
 *   oracle       oracle/compressor41.c dsv4q_compressor41; V4.1 model.py
 *                Compressor.forward (compress_ratio 1 / 2, kv_state /
 *                score_state)
 * INDEX41_SCORE  q [s,Hi,Di], w [s,Hi], latent [T,D], idx_wk [Di,D],
 *                idx_k_norm [Di]
 *   params       0 start_pos, 1 ratio, 2 k0, 3 rope_dim, 4 rope, 5
 *                original_seq_len, 6 factor, 7 beta_fast, 8 beta_slow, 9 eps
 *   out          score [s,T]
 *   oracle       oracle/linear.c dsv4q_linear + oracle/norm.c dsv4q_rmsnorm +
 *                oracle/rope.c dsv4q_rope_apply + oracle/quant.c
 *                dsv4q_fp4_act_quant + oracle/indexer.c dsv4q_indexer_scores
 *                (as oracle/model_v41.c indexer41 composes them); V4.1
 *                model.py Indexer.forward (owns_k: k_norm(wk(latent)),
 *                apply_rotary_emb, fp4_act_quant, index_score)
 * HC_PRE41       X [s,hc,d], premix [s,hc], fn [(2+hc)*hc,hc*d], scale [3],
 *                base [(2+hc)*hc]
 *   params       0 norm_eps, 1 hc_eps, 2 iters
 *   out          y [s,d], pre [s,hc], post [s,hc], comb [s,hc,hc]
 *   oracle       oracle/hc.c dsv4q_hc_mixes + dsv4q_hc_collapse; V4.1
 *                model.py Block.hc_mixes, Block.hc_pre; kernel.py
 *                hc_split_sinkhorn_kernel
 * <!-- end generated -->
 */
#ifndef DSV4Q_BACKEND_H_ABI
#define DSV4Q_BACKEND_H_ABI

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header describes. A descriptor says 1 (the first
 * release: no v2 fields) or 2; with 2, the v2 fields exist when
 * struct_size covers them (so a v1 struct rebuilt against this header,
 * struct_size = sizeof(dsv4q_backend_v1), still loads as v1). */
#define DSV4Q_BACKEND_ABI_VERSION 2u
#define DSV4Q_BACKEND_ABI_V1 1u
/* The symbol a plugin exports. */
#define DSV4Q_BACKEND_ENTRY_SYMBOL "dsv4q_backend_entry"

/*
 * THE operator list (append-only). One row per operator, in enum order:
 *     X(ENUM, name, nin, nout, nparam)
 * ENUM gives DSV4Q_OP_<ENUM>; name is the stable lower-case name (case
 * keys, gate files, docs); nin/nout/nparam the exact arity of a call. The
 * rows are written by scripts/gen-ops.sh from the operator descriptors
 * (harness/ops/<name>.c, one DSV4Q_OP_ROW line each); everything else that
 * lists operators is generated from this list. Rows above
 * WINDOW_ATTN_DECODE are the first ABI v1 release; values never move, new
 * rows only go at the end. Backends are never forced to implement a new
 * row: it is outside their caps, and the harness skips it.
 */
/* clang-format off */
/* generated by scripts/gen-ops.sh from the DSV4Q_OP_ROW lines of harness/ops: do not edit */
#define DSV4Q_OP_LIST(X) \
    X(LINEAR, linear, 2, 1, 2) \
    X(RMSNORM, rmsnorm, 2, 1, 1) \
    X(QHEAD_NORM, qhead_norm, 1, 1, 1) \
    X(ROPE, rope, 2, 1, 6) \
    X(ACT_QUANT, act_quant, 1, 1, 2) \
    X(FP4_QUANT, fp4_quant, 1, 1, 0) \
    X(HADAMARD, hadamard, 1, 1, 0) \
    X(SPARSE_ATTN, sparse_attn, 4, 1, 1) \
    X(COMPRESSOR, compressor, 5, 1, 10) \
    X(INDEXER_SCORE, indexer_score, 3, 1, 2) \
    X(TOPK, topk, 1, 1, 1) \
    X(HC_PRE, hc_pre, 4, 3, 3) \
    X(HC_POST, hc_post, 4, 1, 0) \
    X(HC_HEAD, hc_head, 4, 1, 2) \
    X(MOE_GATE, moe_gate, 5, 2, 3) \
    X(EXPERT, expert, 5, 1, 2) \
    X(WINDOW_ATTN_DECODE, window_attn_decode, 6, 2, 3) \
    X(KV41_QUANT, kv41_quant, 1, 1, 0) \
    X(MOE_GATE41, moe_gate41, 3, 2, 5) \
    X(CANDIDATE_BLOCKS, candidate_blocks, 2, 1, 2) \
    X(TOPK41, topk41, 3, 1, 2) \
    X(ENGRAM_HASH, engram_hash, 3, 1, 3) \
    X(ENGRAM41, engram41, 7, 1, 2) \
    X(COMPRESSOR41, compressor41, 4, 1, 3) \
    X(INDEX41_SCORE, index41_score, 5, 1, 10) \
    X(HC_PRE41, hc_pre41, 5, 4, 3) \
    /* end of the list */
/* end generated */
/* clang-format on */

#define DSV4Q_OP_ENUM_(E, name, nin, nout, npar) DSV4Q_OP_##E,
enum dsv4q_op {
    /* DSV4Q_OP_LINEAR = 0, DSV4Q_OP_RMSNORM, ... in DSV4Q_OP_LIST order */
    DSV4Q_OP_LIST(DSV4Q_OP_ENUM_)
    DSV4Q_OP_COUNT
};
#undef DSV4Q_OP_ENUM_
#ifndef __cplusplus
/* Frozen values: a reordered list would break every built plugin. */
_Static_assert(DSV4Q_OP_LINEAR == 0 && DSV4Q_OP_EXPERT == 15 && DSV4Q_OP_WINDOW_ATTN_DECODE == 16,
               "DSV4Q_OP_LIST is append-only");
#endif

#define DSV4Q_CAP(op) ((uint64_t)1 << (op))
/* The sixteen operators of the first ABI v1 release (LINEAR .. EXPERT).
 * FROZEN: a plugin that declares DSV4Q_CAP_ALL keeps exactly this claim when
 * it is rebuilt against a later header, so appending an operator never makes
 * an existing backend claim something it does not implement. A backend that
 * implements later operators adds their bits: DSV4Q_CAP_ALL |
 * DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE) (= DSV4Q_CAP_KNOWN today). */
#define DSV4Q_CAP_ALL (DSV4Q_CAP(DSV4Q_OP_EXPERT + 1) - 1)
/* Every operator this header defines (what the harness accepts in caps). */
#define DSV4Q_CAP_KNOWN (DSV4Q_CAP(DSV4Q_OP_COUNT) - 1)

/* Dtype values: identical to enum dsv4q_dtype of oracle/formats.h. */
enum dsv4q_bt_dtype {
    DSV4Q_BT_NONE = 0,
    DSV4Q_BT_F64 = 1,
    DSV4Q_BT_F32 = 2,
    DSV4Q_BT_F16 = 3,
    DSV4Q_BT_BF16 = 4,
    DSV4Q_BT_F8_E4M3 = 5,
    DSV4Q_BT_F8_E8M0 = 6,
    DSV4Q_BT_I8 = 7,      /* packed E2M1 pairs, low nibble = even element */
    DSV4Q_BT_U8 = 8,
    DSV4Q_BT_I32 = 9,
    DSV4Q_BT_I64 = 10
};

/* Params of MOE_GATE score_func. */
enum { DSV4Q_SCORE_SQRTSOFTPLUS = 0, DSV4Q_SCORE_SIGMOID = 1, DSV4Q_SCORE_SOFTMAX = 2 };

/* One tensor. */
typedef struct dsv4q_bt {
    const char *name;       /* "x", "w", ... (the table's names) */
    int32_t dtype;          /* of data: F32 (activations, decoded weights), I32,
                               or I64 (ENGRAM_HASH's primes and multipliers).
                               Outputs: preset F32 (I32 for index outputs);
                               the backend may change it, see below */
    int32_t ndim;           /* 0 = empty optional input */
    int64_t shape[6];
    void *data;             /* inputs: read-only; outputs: preallocated */

    /* Raw stored form of a weight (NULL when the tensor has none). */
    const void *raw;
    int32_t raw_dtype;      /* BF16 | F8_E4M3 | I8 (packed E2M1) | F32 */
    int32_t raw_ndim;
    int64_t raw_shape[6];   /* FP4: [out, in/2] bytes */
    const void *raw_scale;  /* block scales, or NULL */
    int32_t scale_dtype;    /* F8_E8M0 (ue8m0) or F32 */
    int64_t scale_shape[2]; /* FP8: [ceil(out/b), ceil(in/b)], b = 128 (V4) or 32 (V4.1,
                               whose linears also act-quantize per 32): the grid says which;
                               FP4: [out, in/32] */
} dsv4q_bt;

/*
 * Outputs. out[i].data is preallocated by the harness with room for the
 * documented shape as F32 (4 bytes per element; I32 for index outputs) and
 * out[i].dtype is preset to DSV4Q_BT_F32 (DSV4Q_BT_I32). A backend whose
 * storage dtype is narrower either
 *  (a) writes F32 values that are representable in its storage dtype, or
 *  (b) sets out[i].dtype = DSV4Q_BT_BF16 (or DSV4Q_BT_F16) and writes the
 *      uint16 codes, densely packed, at the start of the same buffer.
 * ULP distances are counted in the dtype the backend reports (BF16/F16 when
 * (b), else F32). Index outputs stay I32.
 */
typedef struct dsv4q_bcall {
    int32_t op;             /* enum dsv4q_op */
    int32_t nin, nout;
    const dsv4q_bt *in;     /* [nin], in table order */
    dsv4q_bt *out;          /* [nout] */
    const double *param;    /* [nparam], in table order */
    int32_t nparam;
    /* Informational: the boundary set (bit b = rounding point b of
     * oracle/boundary.h) of the profile the backend declared, i.e. what the
     * FP64 reference applies for this call. A backend implementing exactly
     * one profile may ignore it. */
    uint64_t boundaries;
    const char *case_key;   /* canonical case key, for the backend's logs */
    /* ABI v2 (appended; a v1 backend never reads them). The weight role of
     * the call ("head", "layers.L.attn.wq_b", "layers.L.ffn.shared_experts",
     * "layers.L.ffn.experts.E", ...) or NULL when it carries no weight;
     * in_role[i]: role of input i (NULL entries for activations), or the
     * whole array NULL. A backend may pick its kernel by role. */
    const char *role;
    const char *const *in_role;
} dsv4q_bcall;

/* run() return values. */
#define DSV4Q_BACKEND_OK 0
#define DSV4Q_BACKEND_UNSUPPORTED 1   /* this op/shape is not implemented:
                                         reported "unsupported", not a failure
                                         unless the op is in caps */
#define DSV4Q_BACKEND_ERROR (-1)      /* err holds a message; the case fails */

typedef struct dsv4q_backend_v1 {
    uint32_t abi_version;   /* DSV4Q_BACKEND_ABI_VERSION */
    uint32_t struct_size;   /* sizeof(dsv4q_backend_v1) */
    const char *name;       /* short, e.g. "metal" */
    const char *version;    /* free text, recorded in the receipt */
    const char *profile;    /* "source" (NULL = source), "model", "qat", "exact";
                               v2 harness: a declaration "qat:act_q8_0,kv_f16" */
    uint64_t caps;          /* DSV4Q_CAP(op) bits */
    /* Once per case, in the child. Returns 0, or nonzero with err set. ctx
     * may be left NULL. */
    int (*init)(void **ctx, char *err, size_t errlen);
    /* One operator call (DSV4Q_BACKEND_OK / UNSUPPORTED / ERROR). */
    int (*run)(void *ctx, const dsv4q_bcall *call, char *err, size_t errlen);
    void (*fini)(void *ctx);   /* may be NULL */
} dsv4q_backend_v1;

/*
 * ABI v2 engine-stored weights. A backend that keeps a weight in its own
 * encoding returns it from load_weight(); dsv4q decodes it EXACTLY and
 * judges the backend's kernel against the oracle run on those decoded
 * weights (kernel error, gated), and reports the oracle on the engine's
 * weights vs the oracle on the reference weights (format error, gated only
 * on request). Encodings (dtype), row-major [out, in], blocks along `in`:
 *   DSV4Q_BT_F32 | DSV4Q_BT_F16 | DSV4Q_BT_BF16     plain values / codes
 *   DSV4Q_BT_F8_E4M3 + scale (E8M0 or F32) per block[0] x block[1]
 *   DSV4Q_BT_I8 (packed E2M1, low nibble = even k) + scale per block
 *   DSV4Q_BW_GGML(t): GGML block type t (ggml_type id, e.g. Q4_0 2,
 *       Q8_0 8, Q4_K 12, IQ2_XXS 16, MXFP4 39; every type docs/gguf.md
 *       lists as decoded), rows of in/block_elems blocks, decoded as
 *       ggml's dequantize_row_*
 */
#define DSV4Q_BW_GGML(t) (0x100 + (t))
typedef struct dsv4q_bweight {
    int32_t dtype;          /* see above */
    const void *data;       /* the engine's bytes; owned by the backend, valid until fini() */
    const void *scale;      /* F8_E4M3 / E2M1 block scales, else NULL */
    int32_t scale_dtype;    /* DSV4Q_BT_F8_E8M0 or DSV4Q_BT_F32 */
    int32_t block[2];       /* scale block [rows, cols], e.g. {128,128}, {1,32} */
} dsv4q_bweight;

/*
 * ABI v2 descriptor: the v1 descriptor first (base.abi_version =
 * DSV4Q_BACKEND_ABI_VERSION, base.struct_size = sizeof(dsv4q_backend_v2)),
 * then the appended hooks. The entry point returns &desc.base.
 */
typedef struct dsv4q_backend_v2 {
    dsv4q_backend_v1 base;
    /* Per-case support (may be NULL: every case of an op in caps runs).
     * Called in the isolated child before init(), with the call the case
     * will make (inputs filled, outputs preallocated: do not write them).
     * Returns 1 to run the case, 0 to decline it with a one-line reason
     * ("act_quant block 128: only block 64 kernels"); the case is then
     * SKIPPED with that reason. Declining is the only way to refuse a case
     * of an op in caps: run() returning UNSUPPORTED stays an ERROR. */
    int (*supports)(const dsv4q_bcall *call, char *reason, size_t reasonlen);
    /* Engine-stored weights (may be NULL: the reference weights are used).
     * Called in the child after init(), ONCE per weight tensor before the
     * calls that use it (per case for operator cases), with the weight's
     * role and its reference form (decoded F32 + raw). Returns 1 with *enc
     * describing the backend's own encoding (which its run() then uses), 0
     * to use the reference weight, -1 with err set on failure. Called for
     * LINEAR weights (this release). */
    int (*load_weight)(void *ctx, const char *role, const dsv4q_bt *ref, dsv4q_bweight *enc, char *err,
                       size_t errlen);
} dsv4q_backend_v2;

/* What a plugin exports (C linkage). */
typedef const dsv4q_backend_v1 *(*dsv4q_backend_entry_fn)(void);
const dsv4q_backend_v1 *dsv4q_backend_entry(void);

#ifdef __cplusplus
}
#endif

#endif
