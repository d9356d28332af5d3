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
 * Loading. A plugin is a shared object exporting
 *     const dsv4q_backend_v1 *dsv4q_backend_entry(void);
 * (`dsv4q qualify --backend ./libx.so`), or a built-in registered by name
 * (harness/backend.h). The harness runs every backend call in a forked child
 * process (harness/isolate.c): a crash, a hang (timeout) or a bad ABI is
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
 *    operator and index is in the table below and in docs/backends.md.
 *  - An "empty" optional input has ndim 0 and data NULL.
 *
 * Per-operator contract (generated table: harness/backend_ops.c,
 * docs/backends.md; "oracle" is the function of oracle/ops.inc the harness
 * runs as the reference at both widths; "reference" is DeepSeek's code):
 *
 * LINEAR         in  x[s,K] F32, w[N,K] (decoded F32 + raw BF16 | F8_E4M3
 *                    with scale[ceil(N/128),ceil(K/128)] | packed E2M1 I8
 *                    [N,K/2] with E8M0 scale[N,K/32])
 *                par 0 ue8m0 (act_quant scale rounding), 1 bf16_out (1: the
 *                    output is a BF16 activation (linear_bf16); 0: FP32-math
 *                    linear)
 *                out y[s,N]
 *                oracle dsv4q_linear (oracle/linear.c); reference
 *                model.py linear, kernel.py act_quant + fp8_gemm/fp4_gemm
 *                The profile decides the FP8 activation quant of the input
 *                (gemm_act_fp8) and the BF16 rounding of y (linear_bf16).
 * RMSNORM        in  x[rows,d], w[d]        par 0 eps     out y[rows,d]
 *                oracle dsv4q_rmsnorm (oracle/norm.c); model.py RMSNorm
 * QHEAD_NORM     in  q[rows,D] (rows = tokens*heads)  par 0 eps  out q'[rows,D]
 *                oracle dsv4q_qhead_norm; model.py Attention.forward q norm
 * ROPE           in  x[rows,r] (the rope dims only), pos[rows] I32
 *                par 0 base, 1 original_seq_len (0: no YaRN), 2 factor,
 *                    3 beta_fast, 4 beta_slow, 5 inverse (0|1)
 *                out y[rows,r]
 *                oracle dsv4q_rope_build + dsv4q_rope_apply (oracle/rope.c);
 *                model.py precompute_freqs_cis, apply_rotary_emb
 * ACT_QUANT      in  x[rows,n]   par 0 block, 1 ue8m0   out y[rows,n] = q*s
 *                oracle dsv4q_act_quant (oracle/quant.c); kernel.py
 *                act_quant_kernel (in-place simulation mode)
 * FP4_QUANT      in  x[rows,n]   (block 32)             out y[rows,n] = q*s
 *                oracle dsv4q_fp4_act_quant; kernel.py fp4_quant_kernel
 * HADAMARD       in  x[rows,n]   (n a power of two)      out y[rows,n]
 *                oracle dsv4q_hadamard; model.py rotate_activation
 * SPARSE_ATTN    in  q[s,H,D], kv[N,D], idx[s,ncols] I32 (-1 or >= N:
 *                    masked), sink[H]
 *                par 0 scale (softmax scale, D^-0.5)     out o[s,H,D]
 *                oracle dsv4q_sparse_attn (oracle/attn.c); kernel.py
 *                sparse_attn_kernel
 * COMPRESSOR     prefill from position 0.
 *                in  x[s,d], wkv[coff*Dc,d], wgate[coff*Dc,d] (F32 math;
 *                    decoded + raw), ape[ratio,coff*Dc], norm[Dc]
 *                    (coff = 2 if ratio == 4 (overlap) else 1)
 *                par 0 ratio, 1 rotate (1: indexer keys, Hadamard + FP4;
 *                    0: attention rows, ckv_fp8 on the nope dims), 2 eps,
 *                    3 rope_dim, 4 rope base, 5 original_seq_len, 6 factor,
 *                    7 beta_fast, 8 beta_slow, 9 ue8m0
 *                out rows[s/ratio, Dc]
 *                oracle dsv4q_compressor (oracle/compressor.c); model.py
 *                Compressor.forward
 * INDEXER_SCORE  in  q[s,Hi,Di] (processed queries), w[s,Hi] (head weights,
 *                    already scaled), K[T,Di]
 *                par 0 start_pos, 1 ratio                out score[s,T]
 *                (prefill start_pos 0: t >= (i+1)/ratio is -inf)
 *                oracle dsv4q_indexer_scores (oracle/indexer.c); model.py
 *                Indexer.forward
 * TOPK           in  score[rows,T]   par 0 k             out idx[rows,k] I32
 *                (-1 pads when fewer than k finite scores). A SELECTION:
 *                compared as sets; ties at the cut are legitimate.
 *                oracle dsv4q_topk; model.py Indexer.forward topk
 * HC_PRE         in  X[s,hc,d], fn[(2+hc)*hc, hc*d], scale[3],
 *                    base[(2+hc)*hc]
 *                par 0 norm_eps, 1 hc_eps, 2 sinkhorn iters
 *                out y[s,d], post[s,hc], comb[s,hc,hc]
 *                oracle dsv4q_hc_pre (oracle/hc.c); model.py Block.hc_pre,
 *                kernel.py hc_split_sinkhorn_kernel
 * HC_POST        in  x[s,d], X[s,hc,d], post[s,hc], comb[s,hc,hc]
 *                out Y[s,hc,d]
 *                oracle dsv4q_hc_post; model.py Block.hc_post
 * HC_HEAD        in  X[s,hc,d], fn[hc, hc*d], scale[1], base[hc]
 *                par 0 norm_eps, 1 hc_eps                out y[s,d]
 *                oracle dsv4q_hc_head; model.py ParallelHead.hc_head
 * MOE_GATE       in  x[s,d], W[n_exp,d], bias[n_exp] (or empty),
 *                    tid2eid[vocab,k] I32 (or empty), ids[s] I32
 *                par 0 k, 1 route_scale, 2 score_func (0 sqrtsoftplus,
 *                    1 sigmoid, 2 softmax)
 *                out weights[s,k], indices[s,k] I32 (indices: a selection,
 *                    compared as sets)
 *                oracle dsv4q_moe_gate (oracle/moe.c); model.py Gate.forward
 * EXPERT         in  x[n,d], w1[I,d], w2[d,I], w3[I,d] (decoded + raw; FP4
 *                    or FP8), weight[n] (routing weight per row)
 *                par 0 swiglu_limit (0: none), 1 ue8m0   out y[n,d]
 *                oracle dsv4q_expert; model.py Expert.forward
 *
 * Added in ABI v1 after the first sixteen (appended to enum dsv4q_op, so
 * the values above never move; a plugin built before it simply lacks the
 * cap bit and is never called with it):
 * WINDOW_ATTN_DECODE  one decode step of attention that owns the window
 *                ring update.
 *                in  q[1,H,D] (the query at position p), kv_new[1,D] (the
 *                    current token's processed KV row), ring[w,D] (the
 *                    window ring BEFORE this step: slot pos % w holds
 *                    position pos; slots of positions < 0 hold anything),
 *                    cmp[Nc,D] (compressed rows, or empty), cidx[1,nc] I32
 *                    (compressed columns into cmp, -1 or >= Nc masked; or
 *                    empty), sink[H]
 *                par 0 p (position), 1 w (window), 2 scale (D^-0.5)
 *                out o[1,H,D], ring_out[w,D] (ring with kv_new in slot p % w)
 *                Semantics (oracle/model.c decode): write kv_new into slot
 *                p % w FIRST; then the columns are the window slots oldest
 *                first (p >= w-1: slots p%w+1 .. w-1, 0 .. p%w; else 0..p
 *                then -1 padding to w), then cidx offset by w, over the key
 *                rows [ring_out | cmp]; then exactly SPARSE_ATTN.
 *                oracle dsv4q_sparse_attn on the key buffer and columns built
 *                as oracle/model.c does; model.py Attention.forward (decode:
 *                kv_cache[:, start_pos % win] = kv, then sparse_attn)
 */
#ifndef DSV4Q_BACKEND_H_ABI
#define DSV4Q_BACKEND_H_ABI

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4Q_BACKEND_ABI_VERSION 1u
/* The symbol a plugin exports. */
#define DSV4Q_BACKEND_ENTRY_SYMBOL "dsv4q_backend_entry"

enum dsv4q_op {
    DSV4Q_OP_LINEAR = 0,
    DSV4Q_OP_RMSNORM,
    DSV4Q_OP_QHEAD_NORM,
    DSV4Q_OP_ROPE,
    DSV4Q_OP_ACT_QUANT,
    DSV4Q_OP_FP4_QUANT,
    DSV4Q_OP_HADAMARD,
    DSV4Q_OP_SPARSE_ATTN,
    DSV4Q_OP_COMPRESSOR,
    DSV4Q_OP_INDEXER_SCORE,
    DSV4Q_OP_TOPK,
    DSV4Q_OP_HC_PRE,
    DSV4Q_OP_HC_POST,
    DSV4Q_OP_HC_HEAD,
    DSV4Q_OP_MOE_GATE,
    DSV4Q_OP_EXPERT,
    /* --- appended after the first release of ABI v1 (values above are
     * frozen; new operators only ever go here, before COUNT) --- */
    DSV4Q_OP_WINDOW_ATTN_DECODE,
    DSV4Q_OP_COUNT
};

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
    int32_t dtype;          /* of data: F32 (activations, decoded weights) or I32.
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
    int64_t scale_shape[2]; /* FP8: [ceil(out/128), ceil(in/128)]; FP4: [out, in/32] */
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
    const char *profile;    /* "source" (NULL = source), "model", "qat", "exact" */
    uint64_t caps;          /* DSV4Q_CAP(op) bits */
    /* Once per case, in the child. Returns 0, or nonzero with err set. ctx
     * may be left NULL. */
    int (*init)(void **ctx, char *err, size_t errlen);
    /* One operator call (DSV4Q_BACKEND_OK / UNSUPPORTED / ERROR). */
    int (*run)(void *ctx, const dsv4q_bcall *call, char *err, size_t errlen);
    void (*fini)(void *ctx);   /* may be NULL */
} dsv4q_backend_v1;

/* What a plugin exports (C linkage). */
typedef const dsv4q_backend_v1 *(*dsv4q_backend_entry_fn)(void);
const dsv4q_backend_v1 *dsv4q_backend_entry(void);

#ifdef __cplusplus
}
#endif

#endif
