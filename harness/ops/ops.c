/*
 * backend_ops.c - the per-operator contract of the backend ABI, as ONE
 * table: input tensors by position, params by index, outputs, the oracle
 * function the reference runs and DeepSeek's function it mirrors.
 *
 * The rows are generated from DSV4Q_OP_LIST (abi/dsv4q_backend.h):
 * name, enum name and arity come from the list, the prose from DOC_<name>
 * below, and dsv4q_op_table_check() (run by tests/test_qualify.c) checks
 * that each row documents exactly the arity the list gives.
 *
 * Everything that needs to know an operator's interface reads this table:
 * docs/backends.md (generated: `dsv4q qualify --list-ops --markdown`),
 * the case builder's shape checks (harness/cases/cases.c asserts nin/nout/nparam
 * against it), and the usage messages. The prose comment of
 * abi/dsv4q_backend.h is a summary of it; when they disagree this table
 * wins (tests/test_qualify.c checks counts match what cases build).
 */
#include <stdio.h>
#include <string.h>
#include "harness/ops/ops.h"
#include "harness/ops/stage_ops.h"

#define T(n, s, d, doc) { n, s, d, doc }

/* Per-operator prose, keyed by the operator's name in DSV4Q_OP_LIST
 * (abi/dsv4q_backend.h): inputs, outputs, params, oracle function,
 * DeepSeek reference, rounding points, notes, selection flag. A row of the
 * list without its DOC_<name> here is a compile error. */
#define DOC_linear \
        { T("x", "[s,K]", "F32", "activations"), \
          T("w", "[N,K]", "F32 + raw", "weight; raw BF16, F8_E4M3 + E8M0 scale [ceil(N/128),ceil(K/128)], " \
                                      "or packed E2M1 (I8 [N,K/2]) + E8M0 scale [N,K/32]") }, \
        { T("y", "[s,N]", "F32|BF16", "y = x w^T") }, \
        { "ue8m0: 1 = power-of-two act_quant scales (shipped configs)", \
          "bf16_out: 1 = BF16 activation output (linear_bf16); 0 = FP32-math linear (no output rounding)" }, \
        "oracle/linear.c dsv4q_linear", \
        "model.py linear; kernel.py act_quant, fp8_gemm_kernel, fp4_gemm_kernel", \
        "gemm_act_fp8 (FP8/FP4 weights), linear_bf16 (bf16_out)", \
        "FP8: per 128-wide K block (a.w) * sa * sw summed in block order; FP4: 32-wide blocks, sa per 128.", 0

#define DOC_rmsnorm \
        { T("x", "[rows,d]", "F32", ""), T("w", "[d]", "F32", "norm weight") }, \
        { T("y", "[rows,d]", "F32|BF16", "w * x * rsqrt(mean(x^2) + eps)") }, \
        { "eps" }, \
        "oracle/norm.c dsv4q_rmsnorm", "model.py RMSNorm.forward", "norm_bf16", "", 0

#define DOC_qhead_norm \
        { T("q", "[rows,D]", "F32", "rows = tokens*heads") }, \
        { T("y", "[rows,D]", "F32|BF16", "q * rsqrt(mean(q^2) + eps), no weight") }, \
        { "eps" }, \
        "oracle/norm.c dsv4q_qhead_norm", "model.py Attention.forward (q *= rsqrt(q.square().mean(-1) + eps))", \
        "qnorm_bf16 (five BF16 tensor ops in the source)", "", 0

#define DOC_rope \
        { T("x", "[rows,r]", "F32", "the r rope dims only (interleaved pairs)"), \
          T("pos", "[rows]", "I32", "absolute position of each row") }, \
        { T("y", "[rows,r]", "F32|BF16", "x * e^(i pos f) per pair (conjugate if inverse)") }, \
        { "base: rope_theta (ratio-0 layers) or compress_rope_theta", \
          "original_seq_len: 0 = no YaRN", "factor (YaRN)", "beta_fast", "beta_slow", "inverse: 0|1" }, \
        "oracle/rope.c dsv4q_rope_build + dsv4q_rope_apply", \
        "model.py precompute_freqs_cis, apply_rotary_emb", "rope_table_f32, rope_bf16", "", 0

#define DOC_act_quant \
        { T("x", "[rows,n]", "F32", "") }, \
        { T("y", "[rows,n]", "F32|BF16", "E4M3(clamp(x/s,+-448))*s per block (in-place simulation)") }, \
        { "block: 64 (KV nope dims) or 128 (GEMM inputs)", "ue8m0: 1 = s = 2^ceil(log2(amax/448))" }, \
        "oracle/quant.c dsv4q_act_quant", "kernel.py act_quant_kernel (inplace)", \
        "(the op IS the kv_fp8/ckv_fp8/gemm_act_fp8 simulation; always applied)", "amax floored at 1e-4.", 0

#define DOC_fp4_quant \
        { T("x", "[rows,n]", "F32", "n a multiple of 32") }, \
        { T("y", "[rows,n]", "F32|BF16", "E2M1(clamp(x/s,+-6))*s per 32-block, s = 2^ceil(log2(amax/6))") }, \
        { NULL }, \
        "oracle/quant.c dsv4q_fp4_act_quant", "kernel.py fp4_quant_kernel (inplace)", \
        "(the op IS the idx_q_fp4/idx_k_fp4 simulation; always applied)", "amax floored at 6*2^-126.", 0

#define DOC_hadamard \
        { T("x", "[rows,n]", "F32", "n a power of two") }, \
        { T("y", "[rows,n]", "F32|BF16", "Sylvester Walsh-Hadamard * n^-0.5") }, \
        { NULL }, \
        "oracle/quant.c dsv4q_hadamard", "model.py rotate_activation", "hadamard_bf16", "", 0

#define DOC_sparse_attn \
        { T("q", "[s,H,D]", "F32", "queries"), T("kv", "[N,D]", "F32", "key = value rows"), \
          T("idx", "[s,ncols]", "I32", "selected rows per query, -1 (or >= N) masked"), \
          T("sink", "[H]", "F32", "attn_sink, denominator only") }, \
        { T("o", "[s,H,D]", "F32|BF16", "softmax(scale q.k) v; all columns masked -> 0") }, \
        { "scale: softmax scale (D^-0.5)" }, \
        "oracle/attn.c dsv4q_sparse_attn", "kernel.py sparse_attn_kernel", "attn_p_bf16, attn_out_bf16", \
        "Online softmax over blocks of 64 idx columns in idx order (matters for the source profile).", 0

#define DOC_compressor \
        { T("x", "[s,d]", "F32", "tokens at positions 0..s-1 (prefill)"), \
          T("wkv", "[coff*Dc,d]", "F32 (+ raw)", "coff = 2 if ratio == 4 (overlap) else 1; FP32 math"), \
          T("wgate", "[coff*Dc,d]", "F32 (+ raw)", "FP32 math"), \
          T("ape", "[ratio,coff*Dc]", "F32", "added to the gate rows"), \
          T("norm", "[Dc]", "F32", "RMSNorm weight of the pooled row") }, \
        { T("rows", "[s/ratio,Dc]", "F32|BF16", "compressed rows (norm, RoPE at the block's first position, QAT)") }, \
        { "ratio: 4 (overlap) or 128", "rotate: 1 = indexer keys (Hadamard + FP4), 0 = attention rows (ckv_fp8)", \
          "eps (norm)", "rope_dim r (the last r dims of a row)", "rope base (compress_rope_theta)", \
          "original_seq_len (YaRN; 0 = off)", "factor", "beta_fast", "beta_slow", "ue8m0" }, \
        "oracle/compressor.c dsv4q_compressor", "model.py Compressor.forward", \
        "cmp_bf16, norm_bf16, rope_*, ckv_fp8 | idx_k_fp4 + hadamard_bf16", "", 0

#define DOC_indexer_score \
        { T("q", "[s,Hi,Di]", "F32", "processed queries (RoPE, Hadamard, FP4 applied)"), \
          T("w", "[s,Hi]", "F32", "head weights (already scaled by Di^-0.5 Hi^-0.5)"), \
          T("K", "[T,Di]", "F32", "index key rows") }, \
        { T("score", "[s,T]", "F32|BF16", "sum_h relu(q_h . K_t) w_h; masked = -inf") }, \
        { "start_pos: position of the first query (0 = prefill: t >= (i+1)/ratio masked)", "ratio (4)" }, \
        "oracle/indexer.c dsv4q_indexer_scores", "model.py Indexer.forward", \
        "idx_partial_bf16, idx_score_bf16", "", 0

#define DOC_topk \
        { T("score", "[rows,T]", "F32", "-inf = not selectable") }, \
        { T("idx", "[rows,k]", "I32", "the k largest finite scores; -1 pads") }, \
        { "k" }, \
        "oracle/indexer.c dsv4q_topk", "model.py Indexer.forward (score.topk)", "", \
        "A selection: compared as sets. Swaps inside the tie-run at the cut (scores exactly equal to the k-th) " \
        "are legitimate and counted; others fail.", 1

#define DOC_hc_pre \
        { T("X", "[s,hc,d]", "F32", "hc residual streams"), \
          T("fn", "[(2+hc)*hc,hc*d]", "F32 (+ raw)", "FP32 math"), \
          T("scale", "[3]", "F32", ""), T("base", "[(2+hc)*hc]", "F32", "") }, \
        { T("y", "[s,d]", "F32|BF16", "sum_j pre_j X_j"), T("post", "[s,hc]", "F32", ""), \
          T("comb", "[s,hc,hc]", "F32", "Sinkhorn-normalised mixing, C[j][k]") }, \
        { "norm_eps (mixes RMS)", "hc_eps (Sinkhorn)", "iters (hc_sinkhorn_iters)" }, \
        "oracle/hc.c dsv4q_hc_pre", "model.py Block.hc_pre; kernel.py hc_split_sinkhorn_kernel", "resid_bf16 (y)", "", \
        0

#define DOC_hc_post \
        { T("x", "[s,d]", "F32", "sublayer output"), T("X", "[s,hc,d]", "F32", "residual streams"), \
          T("post", "[s,hc]", "F32", ""), T("comb", "[s,hc,hc]", "F32", "C[j][k], j = source stream") }, \
        { T("Y", "[s,hc,d]", "F32|BF16", "Y_k = post_k x + sum_j C[j][k] X_j") }, \
        { NULL }, \
        "oracle/hc.c dsv4q_hc_post", "model.py Block.hc_post", "resid_bf16", "", 0

#define DOC_hc_head \
        { T("X", "[s,hc,d]", "F32", ""), T("fn", "[hc,hc*d]", "F32 (+ raw)", "FP32 math"), \
          T("scale", "[1]", "F32", ""), T("base", "[hc]", "F32", "") }, \
        { T("y", "[s,d]", "F32|BF16", "sum_j (sigmoid(mix_j scale + base_j) + hc_eps) X_j") }, \
        { "norm_eps", "hc_eps" }, \
        "oracle/hc.c dsv4q_hc_head", "model.py ParallelHead.hc_head", "resid_bf16", "", 0

#define DOC_moe_gate \
        { T("x", "[s,d]", "F32", ""), T("W", "[n_exp,d]", "F32 (+ raw)", "gate weight, FP32 math"), \
          T("bias", "[n_exp]", "F32", "selection bias, or empty"), \
          T("tid2eid", "[vocab,k]", "I32", "hash routing table, or empty"), \
          T("ids", "[s]", "I32", "token ids (hash routing)") }, \
        { T("weights", "[s,k]", "F32", "routing weights, in the order of indices"), \
          T("indices", "[s,k]", "I32", "chosen experts (a selection: compared as sets)") }, \
        { "k (n_activated_experts)", "route_scale", "score_func: 0 sqrtsoftplus, 1 sigmoid, 2 softmax" }, \
        "oracle/moe.c dsv4q_moe_gate", "model.py Gate.forward", "", \
        "Swaps inside the tie-run of sc+bias at the cut are legitimate; weights are compared per expert.", 1

#define DOC_expert \
        { T("x", "[n,d]", "F32", "rows routed to this expert"), \
          T("w1", "[I,d]", "F32 + raw", "gate proj; raw packed E2M1 + E8M0 [I,d/32] or F8_E4M3 + 128x128 scales"), \
          T("w2", "[d,I]", "F32 + raw", "down proj"), T("w3", "[I,d]", "F32 + raw", "up proj"), \
          T("weight", "[n]", "F32", "routing weight per row; empty (ndim 0) = 1, the shared expert") }, \
        { T("y", "[n,d]", "F32|BF16", "w2(bf16(silu(min(w1 x,L)) * clamp(w3 x,+-L) * weight))") }, \
        { "swiglu_limit L (0 = none)", "ue8m0" }, \
        "oracle/moe.c dsv4q_expert", "model.py Expert.forward", \
        "gemm_act_fp8, linear_bf16, moe_bf16", "", 0

#define DOC_window_attn_decode \
        { T("q", "[1,H,D]", "F32", "the query at position p"), \
          T("kv_new", "[1,D]", "F32", "the current token's processed KV row (key = value)"), \
          T("ring", "[w,D]", "F32", "window ring BEFORE this step: slot pos % w holds position pos; " \
                                    "slots of positions < 0 hold anything"), \
          T("cmp", "[Nc,D]", "F32", "compressed KV rows, or empty (ndim 0)"), \
          T("cidx", "[1,nc]", "I32", "compressed columns (rows of cmp), -1 (or >= Nc) masked; or empty"), \
          T("sink", "[H]", "F32", "attn_sink, denominator only") }, \
        { T("o", "[1,H,D]", "F32|BF16", "SPARSE_ATTN over [ring_out | cmp] with the decode column layout"), \
          T("ring_out", "[w,D]", "F32", "ring with kv_new written at slot p % w (every other slot unchanged)") }, \
        { "p: position of the query (the token being decoded)", "w: window size (ring slots)", \
          "scale: softmax scale (D^-0.5)" }, \
        "oracle/attn.c dsv4q_sparse_attn on the keys and columns oracle/model.c builds in decode", \
        "model.py Attention.forward (decode: kv_cache[start_pos % win] = kv, then sparse_attn)", \
        "attn_p_bf16, attn_out_bf16", \
        "Order: write kv_new into slot p % w FIRST, then attend. Columns: window slots oldest first " \
        "(p >= w-1: p%w+1 .. w-1, 0 .. p%w; else 0..p, then -1 up to w columns), then cidx + w. " \
        "Reading the ring before the write (the stale slot of position p-w) is the window_off_by_one bug.", 0

#define OP_ROW(E, nm, ni, no, np) [DSV4Q_OP_##E] = {DSV4Q_OP_##E, #nm, ni, no, np, DOC_##nm, "DSV4Q_OP_" #E},
static const dsv4q_op_info ops[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(OP_ROW)};
#undef OP_ROW

const dsv4q_op_info *dsv4q_op_get(int op)
{
    return op >= 0 && op < DSV4Q_OP_COUNT ? &ops[op] : NULL;
}

int dsv4q_op_table_check(char *err, size_t errlen)
{
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) {
        const dsv4q_op_info *o = &ops[i];
        int ni = 0, no = 0, np = 0;
        while (ni < DSV4Q_OPS_MAX_T && o->in[ni].name) ni++;
        while (no < DSV4Q_OPS_MAX_T && o->out[no].name) no++;
        while (np < DSV4Q_OPS_MAX_P && o->param[np]) np++;
        if (o->op != i || ni != o->nin || no != o->nout || np != o->nparam) {
            snprintf(err, errlen, "operator %d (%s): DSV4Q_OP_LIST says %d in / %d out / %d params, "
                     "its DOC_ row documents %d / %d / %d", i, o->name, o->nin, o->nout, o->nparam, ni, no, np);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(ops[j].name, o->name)) {
                snprintf(err, errlen, "operator name '%s' appears twice in DSV4Q_OP_LIST", o->name);
                return -1;
            }
    }
    return 0;
}

/* Outputs whose ulp_max is row-floored (harness/measure/metrics.h): the attention outputs
 * (sparse_attn and the window decode step), sums of ~w + nc BF16-weighted
 * rows per head whose elements near a cancellation zero otherwise count a
 * few 1e-5 of absolute error as ~3e4 BF16 ordinals when the sign flips (a
 * correct FP32 sparse_attn failed 1 seed in 322 that way), and rope's
 * rotated pairs (x0 cos - x1 sin cancels the same way). Never the
 * quantizers: their outputs lie on a grid and one grid step is the defect
 * the ULP gate is there to see. */
int dsv4q_op_ulp_rowfloor(int op, int out)
{
    return out == 0 && (op == DSV4Q_OP_WINDOW_ATTN_DECODE || op == DSV4Q_OP_SPARSE_ATTN || op == DSV4Q_OP_ROPE);
}

int dsv4q_op_find(const char *name)
{
    for (int i = 0; i < DSV4Q_OP_COUNT; i++)
        if (!strcmp(ops[i].name, name)) return i;
    return -1;
}

/* A table cell: '|' escaped. */
static void cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

static void md_tensors(FILE *f, const char *what, const dsv4q_op_tensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        fprintf(f, "| %s %d | `%s` | `%s` | ", what, i, t[i].name, t[i].shape);
        cell(f, t[i].dtype);
        fprintf(f, " | ");
        cell(f, t[i].doc);
        fprintf(f, " |\n");
    }
}

void dsv4q_op_markdown(FILE *f)
{
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) {
        const dsv4q_op_info *o = &ops[i];
        fprintf(f, "### `%s` (`%s` = %d)\n\n", o->name, o->ename, i);
        fprintf(f, "| slot | name | shape | dtype | meaning |\n|---|---|---|---|---|\n");
        md_tensors(f, "in", o->in, o->nin);
        md_tensors(f, "out", o->out, o->nout);
        for (int p = 0; p < o->nparam; p++) {
            fprintf(f, "| param %d | | | double | ", p);
            cell(f, o->param[p]);
            fprintf(f, " |\n");
        }
        fprintf(f, "\n- oracle: `%s`\n- reference: %s\n", o->oracle, o->reference);
        if (o->boundaries[0]) fprintf(f, "- rounding points (decided by the declared profile): %s\n", o->boundaries);
        if (o->notes[0]) fprintf(f, "- %s\n", o->notes);
        char st[256];   /* derived from the stage table: what a case of this operator stands for */
        fprintf(f, "- forward-pass stages that call it (so what a failing case or a fallback affects): %s\n",
                dsv4q_op_stage_names(i, DSV4Q_STAGE_MASK_ALL, st, sizeof st));
        fprintf(f, "\n");
    }
}

int64_t dsv4q_bt_numel(const dsv4q_bt *t)
{
    if (t->ndim <= 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim && i < 6; i++) n *= t->shape[i];
    return n;
}

int dsv4q_score_func_code(const char *f)
{
    return !strcmp(f, "sigmoid") ? DSV4Q_SCORE_SIGMOID : !strcmp(f, "softmax") ? DSV4Q_SCORE_SOFTMAX
                                                                           : DSV4Q_SCORE_SQRTSOFTPLUS;
}

long dsv4q_moe_gather(const int32_t *ix, const float *wts, const float *x, long s, int k, long d, int e,
                      long *rows, float *we, float *xe)
{
    long n = 0;
    for (long t = 0; t < s; t++)
        for (int j = 0; j < k; j++)
            if (ix[t * k + j] == e) {
                rows[n] = t;
                we[n] = wts[t * k + j];
                memcpy(xe + n * d, x + t * d, sizeof(float) * (size_t)d);
                n++;
            }
    return n;
}
