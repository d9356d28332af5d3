/*
 * kernels.h - internal interface of cpu-ref, the independent FP32 CPU
 * kernel set behind the backend ABI (abi/dsv4q_backend.h), and of its
 * mutants (docs/mutants.md). Not part of the ABI; only the sources of
 * backends/cpuref/ and tests/test_cpuref.c include it.
 *
 * cpu-ref implements the `source` profile: FP32 arithmetic everywhere,
 * rounded to BF16 exactly where DeepSeek's reference stores BF16
 * (docs/boundaries.md), with its own reduction orders (16-lane dots with a
 * pairwise lane tree, pairwise head sums, online softmax in 64-column
 * blocks, one fused pass for hc_pre) and lookup-table weight decode. It
 * shares NO arithmetic with oracle/: only the format definitions of
 * oracle/formats.h are used, to build its lookup tables at start-up.
 *
 * Every kernel takes the mutant id `mut` (CPUREF_OK for cpu-ref itself);
 * a mutant changes exactly one behaviour, listed with the enum below.
 */
#ifndef DSV4Q_CPUREF_KERNELS_H
#define DSV4Q_CPUREF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* THE mutant list (append-only): each is cpu-ref with one defect seen in a
 * real engine.
 *     X(ENUM, name, ops it must fail, what is wrong)
 * Generated from it: the ids below (CPUREF_M_<ENUM>, 1..), the names and
 * backend descriptors of backends/cpuref/backend.c ("mutant:<name>"), and
 * through dsv4q_backend_mutants() every usage list. The kernels test
 * `mut == CPUREF_M_<ENUM>` where the defect lives. tests/test_qualify_mutants.c
 * keeps its own expectation of where each fails (an independent record). */
/* clang-format off */
#define CPUREF_MUTANT_LIST(X)                                                                              \
    X(IDX_ROPE_HALFSPLIT, idx_rope_halfsplit, "rope,compressor",                                           \
      "indexer RoPE half-split (GPT-NeoX) instead of interleaved")                                         \
    X(IDX_K_NO_HADAMARD, idx_k_no_hadamard, "compressor", "Hadamard on indexer queries but not on the keys") \
    X(ATTN_SINK_MISSING, attn_sink_missing, "sparse_attn,window_attn_decode",                             \
      "attention sink left out of the softmax denominator")                                                \
    X(CMP_BLOCK0_ZEROS, cmp_block0_zeros, "compressor",                                                    \
      "overlap block 0 averaged with zero rows instead of masked")                                         \
    X(HC_POST_TRANSPOSED, hc_post_transposed, "hc_post", "hc_post mixes with C^T")                          \
    X(SWIGLU_NO_CLAMP, swiglu_no_clamp, "expert", "swiglu_limit ignored")                                   \
    X(UE8M0_LOG2F, ue8m0_log2f, "act_quant", "ue8m0 FP8 scale from ceilf(log2f(amax/448))")                 \
    X(FP4_AS_INT8, fp4_as_int8, "expert", "packed FP4 expert bytes read as signed integers")                \
    X(TOPK_TIE_UNSTABLE, topk_tie_unstable, "topk", "tie order among equal scores varies between calls")    \
    X(YARN_ON_RATIO0, yarn_on_ratio0, "rope", "YaRN applied although original_seq_len == 0")                \
    X(CMP_ROPE_LAST_POS, cmp_rope_last_pos, "compressor", "compressed row RoPE'd at the block's last position") \
    X(WINDOW_OFF_BY_ONE, window_off_by_one, "window_attn_decode",                                          \
      "decode attention reads the ring before writing the current token: slot p % w still holds "          \
      "position p - w (stale)")                                                                            \
    X(ENGRAM_NGRAM_SHIFT, engram_ngram_shift, "engram_hash",                                               \
      "the n-gram window shifted by one position: look-back distances 1..N instead of 0..N-1")             \
    X(ENGRAM_BARRIER_IGNORED, engram_barrier_ignored, "engram_hash",                                       \
      "a DEAD id does not block the longer look-backs: only its own slot gets the pad")                    \
    X(ENGRAM_GATE_NOSIGN, engram_gate_nosign, "engram41",                                                  \
      "Engram gate sigmoid(sqrt(max(|dot|, 1e-6))) without the sign of the dot")                           \
    X(NORM_EPS_1E6, norm_eps_1e6, "engram41",                                                              \
      "Engram per-copy normalisation with eps 1e-6 instead of the config's norm_eps (1e-20 in V4.1)")      \
    X(CMP41_PARTIAL_DROPPED, cmp41_partial_dropped, "compressor41",                                        \
      "ratio-2 compressor drops the prefill's trailing partial group instead of carrying it in the "       \
      "state: the first decode pools with a fresh slot")                                                   \
    X(IDX41_KEYS_AFTER_ROPE, idx41_keys_after_rope, "index41_score",                                       \
      "V4.1 index keys made from the latent after attention's RoPE (the rotated KV latent reused)")        \
    X(PREMIX_NOT_LAGGED, premix_not_lagged, "hc_pre41",                                                    \
      "V4.1 hc pre step collapses with the pre-mix it just computed instead of the previous sub-block's")  \
    X(FP8_BLK128, fp8_blk128, "linear",                                                                    \
      "FP8 weights read as 128x128 tiles with act-quant per 128 whatever the scale grid says (V4.1: 32)")  \
    X(KV41_SCALE_E8M0, kv41_scale_e8m0, "kv41_quant",                                                      \
      "V4.1 KV codec scale rounded up to a power of two (E8M0) instead of onto the E4M3 grid")             \
    X(CAND_NEWEST_UNPINNED, cand_newest_unpinned, "candidate_blocks",                                      \
      "the block holding the row's newest position is not forced to +inf")                                 \
    X(CAND_BLOCK_MEAN, cand_block_mean, "candidate_blocks", "candidate block score = mean instead of max")
/* clang-format on */

#define CPUREF_M_ENUM_(E, name, ops, doc) CPUREF_M_##E,
enum cpuref_mutant {
    CPUREF_OK = 0,
    CPUREF_MUTANT_LIST(CPUREF_M_ENUM_)
    CPUREF_M_COUNT
};
#undef CPUREF_M_ENUM_

/* ---- formats (cpuref_formats.c) --------------------------------------- */

void cpuref_tables_init(void);          /* idempotent; called by every entry */
extern float cpuref_e4m3_lut[256];      /* E4M3fn code -> value */
extern float cpuref_e2m1_lut[256][2];   /* packed byte -> (low, high) value */
extern float cpuref_int4_lut[256][2];   /* mutant fp4_as_int8: signed nibbles */

static inline float cpuref_bits_f(uint32_t u) { union { uint32_t u; float f; } x = { u }; return x.f; }
static inline uint32_t cpuref_f_bits(float f) { union { float f; uint32_t u; } x = { f }; return x.u; }
/* BF16 RNE rounding of a binary32 value (NaN stays NaN). */
static inline float cpuref_bf16(float v)
{
    uint32_t u = cpuref_f_bits(v);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return cpuref_bits_f(u | 0x400000u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return cpuref_bits_f(u & 0xFFFF0000u);
}
/* RNE onto the E4M3 grid for |v| <= 448 (callers clamp first). */
float cpuref_e4m3_round(float v);
/* RNE onto the E2M1 grid for |v| <= 6 (ties to the even mantissa). */
float cpuref_e2m1_round(float v);
/* Power-of-two scale 2^e with e the smallest such that fmax * 2^e >= amax,
 * from amax's bits (fmax_mant = fmax's 23 mantissa bits, fmax_exp its
 * exponent: 448 = 1.75*2^8, 6 = 1.5*2^2). amax must be a normal float. */
float cpuref_pow2_scale(float amax, uint32_t fmax_mant, int fmax_exp);
/* The FP8 act_quant scale of a block (ue8m0 or amax*fp32(1/448)); the
 * mutant ue8m0_log2f uses ceilf(log2f(amax/448)) instead of the bits. */
float cpuref_fp8_scale(float amax, int ue8m0, int mut);

/* ---- dots / GEMM / QAT (cpuref_gemm.c) --------------------------------- */

/* FP32 dot: 256-wide chunks on 16 lanes (lane l takes i % 16 == l, folded
 * pairwise), chunk sums accumulated in order. */
float cpuref_dot(const float *a, const float *b, long n);

/* A weight as the backend sees it: either raw bytes (BF16 / FP8 + scales /
 * packed FP4 + scales) or plain F32 values. */
typedef enum { CPUREF_W_F32 = 0, CPUREF_W_BF16, CPUREF_W_FP8, CPUREF_W_FP4 } cpuref_wkind;
typedef struct cpuref_w {
    cpuref_wkind kind;
    long out, in;
    const void *data;        /* F32 values, BF16 codes, E4M3 codes, packed E2M1 */
    const void *scale;       /* FP8: [ceil(out/blk), ceil(in/blk)]; FP4: [out, in/32] */
    int scale_f32;           /* 1: F32 scales, 0: E8M0 bytes */
    long scale_cols;         /* row stride of the scale array */
    long blk;                /* FP8 tile and act-quant block: 128 (V4) or 32 (V4.1); else 128 */
} cpuref_w;

/* y [s, W.out] = x [s, W.in] W^T. FP8 weights: FP8 act-quant of x per
 * W.blk (ue8m0 or not) and the blk x blk block-scaled accumulation; FP4:
 * act-quant per 128, weight blocks of 32. bf16_out rounds y. The mutant
 * fp8_blk128 reads every FP8 weight as 128 tiles. Returns 0 or -1. */
int cpuref_linear(const cpuref_w *W, const float *x, long s, int ue8m0, int bf16_out, float *y, int mut);
/* In-place FP8 act_quant simulation of x [rows, n], blocks of `block`. */
void cpuref_act_quant(float *x, long rows, long n, int block, int ue8m0, int mut);
/* In-place FP4 act_quant simulation (blocks of 32). */
void cpuref_fp4_quant(float *x, long rows, long n);
/* In-place V4.1 compressed-KV simulation (blocks of 16, E4M3 scales; the
 * mutant kv41_scale_e8m0 rounds the scale up to a power of two). */
void cpuref_kv41_quant(float *x, long rows, long n, int mut);
/* In-place normalised Walsh-Hadamard (n a power of two), BF16 output. */
void cpuref_hadamard(float *x, long rows, long n);

/* ---- norms and RoPE (cpuref_norm.c) ------------------------------------ */

void cpuref_rmsnorm(const float *x, long rows, long d, const float *w, float eps, float *y);
void cpuref_qhead_norm(const float *q, long rows, long D, float eps, float *y);

typedef struct cpuref_rope {
    int half;                /* r/2 */
    float f[256];            /* FP32 frequencies after the YaRN blend */
} cpuref_rope;
/* Frequencies as the source computes them (FP32). orig_seq_len 0 = no YaRN
 * (the mutant yarn_on_ratio0 applies YaRN anyway, see cpuref_norm.c). */
int cpuref_rope_init(cpuref_rope *rp, int r, double base, int orig_seq_len, double factor,
                     double beta_fast, double beta_slow, int mut);
/* Rotate the r = 2*half values at v (interleaved pairs; the mutant
 * idx_rope_halfsplit pairs i with i+half when halfsplit != 0) by
 * position pos; BF16 results. */
void cpuref_rope_row(const cpuref_rope *rp, float *v, long pos, int inverse, int halfsplit);

/* ---- attention (cpuref_attn.c) ----------------------------------------- */

int cpuref_sparse_attn(const float *q, long s, int H, int D, const float *kv, long N, const int32_t *idx,
                       long ncols, const float *sink, float scale, float *o, int mut);
/* One decode step at position p over the window ring [w, D] (before the
 * step) and the compressed rows cmp [Nc, D] picked by cidx [nc] (-1 / >= Nc
 * masked): ring_out = ring with kv_new [D] in slot p % w, o [H, D] =
 * attention over [ring_out | cmp] with the decode column layout. The
 * mutant window_off_by_one attends BEFORE writing the slot. 0 or -1. */
int cpuref_window_attn_decode(const float *q, int H, int D, const float *kv_new, const float *ring, long w,
                              const float *cmp, long Nc, const int32_t *cidx, long nc, const float *sink,
                              float scale, long p, float *o, float *ring_out, int mut);

/* ---- compressor (cpuref_cmp.c) ----------------------------------------- */

typedef struct cpuref_cmp_args {
    int ratio, rotate, Dc, rope_dim, ue8m0;
    float eps;
    const cpuref_w *wkv, *wgate;
    const float *ape, *norm;
    const cpuref_rope *rope;
} cpuref_cmp_args;
/* Prefill of x [s, d] from position 0: rows [s/ratio, Dc]. 0 or -1. */
int cpuref_compressor(const cpuref_cmp_args *a, const float *x, long s, float *rows, int mut);

/* V4.1's compressor (cmp41.c), before RoPE: ratio 1 (wkv BF16, no gate)
 * or 2 (wkv, wgate F32), weights [Dc, d]. */
typedef struct cpuref_cmp41_args {
    int ratio, Dc;
    float eps;
    const cpuref_w *wkv, *wgate; /* wgate: ratio 2 only */
    const float *norm;           /* [Dc] */
} cpuref_cmp41_args;
/* x [s, d] at positions 0..s-1 as a prefill of p tokens (1 <= p <= s) and
 * s - p one-token decode calls: rows [s (ratio 1) or s/2 (ratio 2), Dc],
 * the latents in the order the calls yield them. 0 or -1 (allocation). */
int cpuref_compressor41(const cpuref_cmp41_args *a, const float *x, long s, long p, float *rows, int mut);

/* ---- indexer (cpuref_index.c) ------------------------------------------ */

void cpuref_indexer_score(const float *q, const float *w, long s, int Hi, int Di, const float *K, long T,
                          long start_pos, int ratio, float *score);
/* V4.1's indexer score with latent keys (INDEX41_SCORE): keys K [T, Di] =
 * FP4(RoPE_{(k0+t)*ratio}(rmsnorm(wk latent[t]))) on the last rope dims,
 * queries q [s, Hi, Di] FP4'd (on a copy), then cpuref_indexer_score.
 * latent [T, wk->in]; score [s, T]. 0 or -1 (allocation). */
typedef struct cpuref_idx41_args {
    long s, T, k0, start_pos;
    int Hi, Di, ratio;
    float eps;
    const float *w, *knorm;  /* [s, Hi] head weights, [Di] k_norm weight */
    const cpuref_w *wk;      /* [Di, D] */
    const cpuref_rope *rope; /* rope_dim = 2 * half */
} cpuref_idx41_args;
int cpuref_index41_score(const cpuref_idx41_args *a, const float *q, const float *latent, float *score, int mut);
int cpuref_topk(const float *score, long rows, long T, int k, int32_t *out, int mut);
/* V4.1's candidate blocks: out [rows, topb] the kept block ids ascending,
 * -1 padded (block score = max, the block of clen-1 pinned, ties to the
 * lower id, -inf blocks never kept; mutants cand_newest_unpinned and
 * cand_block_mean drop the pin, score by the mean). 0 or -1 (allocation). */
int cpuref_candidate_blocks(const float *score, long rows, long T, const int32_t *clen, int topb, int B, int32_t *out,
                            int mut);
/* V4.1's position top-k: out [rows, k] the k best finite positions inside
 * the listed blocks [rows, topb] of B (NULL: every position), ties to the
 * lower position, those >= clen dropped, ascending, -1 padded. 0 or -1. */
int cpuref_topk41(const float *score, long rows, long T, const int32_t *clen, const int32_t *blocks, long topb, int B,
                  int k, int32_t *out);

/* ---- Engram (engram.c) ------------------------------------------------ */

/* V4.1's Engram n-gram hash of one layer: out [n, (N-1)*H] the bucket ids
 * (floor remainder by the column's prime + the sum of the primes before
 * it) of positions start .. start+n-1, from ids [n+N-1] (positions
 * start-(N-1) .. start+n-1; -1 = DEAD; positions < 0 never read), mult [N]
 * by look-back distance, primes [(N-1)*H] (each >= 1, sum <= 2^31), pad the
 * pad's compressed id. Products wrap in 64 bits. 0 or -1 (allocation). */
int cpuref_engram_hash(const int32_t *ids, long n, int N, int H, const int64_t *mult, const int64_t *primes, long start,
                       int32_t pad, int32_t *out, int mut);

/* ---- hyper-connections (cpuref_hc.c) ----------------------------------- */

int cpuref_hc_pre(const float *X, long s, int hc, long d, const float *fn, const float *scale,
                  const float *base, float norm_eps, float hc_eps, int iters, float *y, float *post,
                  float *comb);
void cpuref_hc_post(const float *x, const float *X, const float *post, const float *comb, long s, int hc,
                    long d, float *Y, int mut);
int cpuref_hc_head(const float *X, long s, int hc, long d, const float *fn, const float *scale,
                   const float *base, float norm_eps, float hc_eps, float *y);
/* V4.1's lagged pre step: pre / post [s, hc], comb [s, hc, hc] from X [s,
 * hc, d] as cpuref_hc_pre computes them; y [s, d] = BF16(sum_j premix_j
 * X_j) with the incoming premix [s, hc] (the mutant premix_not_lagged:
 * with pre). hc <= 16. 0 or -1 (allocation, hc). */
int cpuref_hc_pre41(const float *X, const float *premix, long s, int hc, long d, const float *fn, const float *scale,
                    const float *base, float norm_eps, float hc_eps, int iters, float *y, float *pre, float *post,
                    float *comb, int mut);

/* ---- Engram (cpuref_engram.c) ------------------------------------------ */

/* One V4.1 Engram layer's weights and shapes: the table [rows, hd] as E4M3
 * codes + E8M0 scales [rows, hd/32]; wkv FP8 [dim*(hc+1), ncols*hd] with
 * 32x32 block scales; q/k weights BF16 or F32 [hc, dim]. */
typedef struct cpuref_engram_args {
    int hc, hd, ncols, ue8m0;
    long dim, rows;
    float eps;
    const uint8_t *table, *table_scale;
    const cpuref_w *wkv, *qw, *kw;
} cpuref_engram_args;
/* y [s, hc, dim] (BF16 values) = h + g * value per copy, the gate of the
 * hash ids [s, ncols] (outside [0, rows): a zero row); mask [s] or NULL
 * (0: an image token, g = 0). The mutants engram_gate_nosign and
 * norm_eps_1e6 live here. 0 or -1 (allocation). */
int cpuref_engram41(const cpuref_engram_args *a, const float *h, long s, const int32_t *ids, const int32_t *mask,
                    float *y, int mut);

/* ---- MoE (cpuref_moe.c) ------------------------------------------------- */

int cpuref_moe_gate(const float *x, long s, long d, const cpuref_w *W, const float *bias,
                    const int32_t *tid2eid, long vocab, const int32_t *ids, int n_exp, int k,
                    int score_func, float route_scale, float *weights, int32_t *indices);
/* V4.1's gate (no hash routing): logits / gate_temp, weights / (sum +
 * 1e-20) when norm and k > 1. 0 or -1 (allocation). */
int cpuref_moe_gate41(const float *x, long s, const cpuref_w *W, const float *bias, int n_exp, int k, int score_func,
                      float gate_temp, int norm, float route_scale, float *weights, int32_t *indices);
int cpuref_expert(const float *x, long n, const cpuref_w *w1, const cpuref_w *w2, const cpuref_w *w3,
                  const float *weight, float limit, int ue8m0, float *y, int mut);

#endif
