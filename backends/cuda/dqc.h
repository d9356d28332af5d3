/*
 * dqc.h - the CUDA kernel set of dsv4q ("dqc"): device-pointer operators
 * behind the backend ABI (plugin.cu) and the benchmark (bench_cuda.cu).
 *
 * Every operator takes device pointers, runs on ctx->stream, returns 0 or
 * -1 with ctx->err set (never aborts), and allocates its temporaries from
 * the context's scratch arena (dqc_alloc; released all at once by
 * dqc_scratch_reset). Semantics are those of the oracle function of the
 * same name (oracle/ops.inc) at FP32 storage, with the boundary set `bs`
 * deciding each BF16/FP8/FP4 rounding point (bit numbers below).
 *
 * Invariants:
 *  K1. One output element is written by one thread, and its value depends
 *      only on the inputs (fixed reduction trees, no atomics): two runs give
 *      the same bits (the harness runs every case twice).
 *  K2. Block structure is the reference's: FP8 GEMMs sum 128-wide K blocks,
 *      FP4 GEMMs 32-wide blocks, each block result scaled and added, in K
 *      order, to a second FP32 accumulator; attention walks idx in 64-column
 *      blocks in column order with BF16 probabilities for P*V.
 *  K3. No kernel reads past the extents it was given (the plugin validates
 *      shapes against the ABI before anything reaches the device).
 */
#ifndef DQC_H
#define DQC_H

#include "backends/cuda/dqc_rt.h"

#include "backends/cuda/dqc_bits.h"

/* Weight formats on the device. */
enum { DQC_WF_F32 = 1, DQC_WF_BF16, DQC_WF_FP8, DQC_WF_FP4 };

typedef struct dqc_weight {
    int fmt;
    int64_t out, in;        /* logical [out, in] */
    const void *codes;      /* F32 values | BF16 codes | E4M3 codes | packed E2M1 [out, in/2] */
    const float *scale;     /* FP8: [ceil(out/128), ceil(in/128)]; FP4: [out, in/32]; decoded to float */
    int64_t scale_cols;     /* columns of scale */
} dqc_weight;

#define DQC_MAX_CHUNKS 32
typedef struct dqc_ctx {
    cudaStream_t stream;
    int device;
    cudaDeviceProp prop;
    struct { char *base; size_t size, used; } chunk[DQC_MAX_CHUNKS];
    int nchunk;
    int gemm_cfg;           /* 0 auto; 1 small-s tile; 2 large-s tile (selftest) */
    char err[512];
} dqc_ctx;

/* --- context (ctx.cu) ---------------------------------------------------- */
int dqc_ctx_init(dqc_ctx *c, int device);
void dqc_ctx_fini(dqc_ctx *c);
/* 256-byte aligned scratch; NULL with c->err set on failure. */
void *dqc_alloc(dqc_ctx *c, size_t bytes);
void dqc_scratch_reset(dqc_ctx *c);
int dqc_fail(dqc_ctx *c, const char *fmt, ...);
/* Checks a CUDA call / the last launch; on error fills c->err, returns -1. */
int dqc_check(dqc_ctx *c, cudaError_t e, const char *what, const char *file, int line);
#define DQC_CK(c, call) \
    do { if (dqc_check((c), (call), #call, __FILE__, __LINE__)) return -1; } while (0)
#define DQC_CK_LAUNCH(c, name) \
    do { if (dqc_check((c), cudaGetLastError(), "launch " name, __FILE__, __LINE__)) return -1; } while (0)
/* Raise a kernel's dynamic shared memory limit when it needs > 48 KB. */
int dqc_smem_limit(dqc_ctx *c, const void *kernel, size_t bytes, const char *name);

/* --- GEMMs (gemm.cu) ------------------------------------------------------ */
/* y [s, w->out] = x [s, w->in] w^T. FP8/FP4 weights: act_quant of x per 128
 * (when gemm_act_fp8 is in bs), block accumulation (K2). Rounded to BF16 at
 * boundary out_b, or not at all when out_b < 0 (FP32-math linears). */
int dqc_linear(dqc_ctx *c, uint64_t bs, int ue8m0, const dqc_weight *w, const float *x, long s, float *y,
               int out_b);
/* y [n, d] = w2(bf16(silu(min(w1 x, L)) * clamp(w3 x, +-L) * weight)); weight may be NULL. */
int dqc_expert(dqc_ctx *c, uint64_t bs, int ue8m0, const dqc_weight *w1, const dqc_weight *w2,
               const dqc_weight *w3, const float *x, long n, const float *weight, double limit, float *y);

/* --- element-wise and row operators (elem.cu) ----------------------------- */
int dqc_rmsnorm(dqc_ctx *c, uint64_t bs, const float *x, long rows, long d, const float *w, double eps, float *y);
int dqc_qhead_norm(dqc_ctx *c, uint64_t bs, const float *q, long rows, long D, double eps, float *y);
int dqc_act_quant(dqc_ctx *c, const float *x, long rows, long n, int block, int ue8m0, float *y);
int dqc_fp4_quant(dqc_ctx *c, const float *x, long rows, long n, float *y);
int dqc_hadamard(dqc_ctx *c, uint64_t bs, const float *x, long rows, long n, float *y);

typedef struct dqc_rope_params {
    int rope_dim;
    double base;
    int original_seq_len;   /* 0: no YaRN */
    double factor, beta_fast, beta_slow;
} dqc_rope_params;
/* Frequencies on the device: the source construction (FP32 steps) when
 * rope_table_f32 is in bs, else double. */
typedef struct dqc_rope_table {
    int half, src;
    const float *ff;        /* [half] FP32 frequencies (src) */
    const double *fd;       /* [half] double frequencies (!src) */
} dqc_rope_table;
int dqc_rope_prepare(dqc_ctx *c, uint64_t bs, const dqc_rope_params *p, dqc_rope_table *t);
/* y [rows, r] = rope(x [rows, r]) at positions pos [rows] (device I32). */
int dqc_rope(dqc_ctx *c, uint64_t bs, const dqc_rope_table *t, const float *x, const int32_t *pos, long rows,
             int inverse, float *y);

int dqc_hc_pre(dqc_ctx *c, uint64_t bs, const float *X, long s, int hc, long d, const dqc_weight *fn,
               const float *scale, const float *base, double norm_eps, double hc_eps, int iters, float *y,
               float *post, float *comb);
int dqc_hc_post(dqc_ctx *c, uint64_t bs, const float *x, const float *X, const float *post, const float *comb,
                long s, int hc, long d, float *out);
int dqc_hc_head(dqc_ctx *c, uint64_t bs, const float *X, long s, int hc, long d, const dqc_weight *fn,
                const float *scale, const float *base, double norm_eps, double hc_eps, float *y);
/* score_func: 0 sqrtsoftplus, 1 sigmoid, 2 softmax. bias / tid2eid may be NULL. */
int dqc_moe_gate(dqc_ctx *c, const float *x, long s, long d, const dqc_weight *W, const float *bias,
                 const int32_t *tid2eid, const int32_t *ids, int n_exp, int k, int score_func, double route_scale,
                 float *weights, int32_t *indices);

/* --- attention, indexer, top-k (attn.cu) ---------------------------------- */
int dqc_sparse_attn(dqc_ctx *c, uint64_t bs, const float *q, long s, int H, int D, const float *kv, long N,
                    const int32_t *idx, long ncols, const float *sink, float scale, float *o);
int dqc_indexer_score(dqc_ctx *c, uint64_t bs, const float *q, const float *w, long s, int Hi, int Di,
                      const float *K, long T, long start_pos, int ratio, float *score);
int dqc_topk(dqc_ctx *c, const float *score, long rows, long T, int k, int32_t *out);

/* --- compressor (compressor.cu) ------------------------------------------- */
typedef struct dqc_cmp {
    int ratio, Dc, rotate;
    dqc_weight wkv, wgate;  /* [coff*Dc, dim] */
    const float *ape;       /* [ratio, coff*Dc] */
    const float *norm;      /* [Dc] */
} dqc_cmp;
/* Per-sequence state on the device (plain cudaMalloc; see compressor.cu). */
typedef struct dqc_cmp_state {
    int ratio, overlap, Dc;
    float *kv, *score;      /* [coff*ratio, coff*Dc] */
} dqc_cmp_state;
int dqc_cmp_state_init(dqc_ctx *c, dqc_cmp_state *st, int ratio, int Dc);
void dqc_cmp_state_free(dqc_cmp_state *st);
/* Feed x [s, dim] at positions start_pos.. (prefill: start_pos 0; decode:
 * s = 1). Writes the emitted rows to rows_out and returns their count
 * (prefill s/ratio; decode 0 or 1), or -1. */
long dqc_compressor(dqc_ctx *c, uint64_t bs, int ue8m0, const dqc_cmp *cm, dqc_cmp_state *st, const float *x,
                    long s, long start_pos, const dqc_rope_table *rope, double eps, float *rows_out);

/* --- self-test (selftest.cu): invariants checkable without the oracle ----- */
int dqc_selftest(dqc_ctx *c);

/* --- device helpers shared by several files ------------------------------ */
#ifdef DQC_DEVICE_HELPERS
#include "backends/cuda/dqc_num.h"

/* cos/sin of one rope pair (i) at position pos, as the table would hold. */
DQC_D void dqc_rope_cs(const dqc_rope_table t, long pos, int i, float *c, float *s)
{
    if (t.src) {
        const float ang = (float)pos * t.ff[i];
        *c = (float)cos((double)ang);
        *s = (float)sin((double)ang);
    } else {
        const double ang = (double)pos * t.fd[i];
        *c = (float)cos(ang);
        *s = (float)sin(ang);
    }
}

/* Rotate the pair (a, b) in place (model.py apply_rotary_emb). */
DQC_D void dqc_rope_pair(uint64_t bs, const dqc_rope_table t, long pos, int i, int inverse, float *a, float *b)
{
    float c, s;
    dqc_rope_cs(t, pos, i, &c, &s);
    const float si = inverse ? -s : s, x0 = *a, x1 = *b;
    *a = dqc_rb(bs, DQC_B_ROPE_BF16, x0 * c - x1 * si);
    *b = dqc_rb(bs, DQC_B_ROPE_BF16, x0 * si + x1 * c);
}

/* One warp quantizes one block v[0..len) (len <= any): FP8 in-place
 * simulation (fp4 = 0) or FP4 (fp4 = 1, block 32). in may equal out. */
DQC_D void dqc_warp_quant_block(const float *in, float *out, int len, int fp4, int ue8m0)
{
    const int lane = threadIdx.x & 31;
    float amax = 0.0f;
    for (int i = lane; i < len; i += 32) amax = fmaxf(amax, fabsf(in[i]));
    amax = dqc_warp_max(amax);
    const float s = fp4 ? dqc_fp4_scale(amax) : dqc_fp8_scale(amax, ue8m0);
    for (int i = lane; i < len; i += 32) {
        const float v = in[i] / s;
        out[i] = (fp4 ? dqc_e2m1r(dqc_clampf(v, -6.0f, 6.0f)) : dqc_e4m3r(dqc_clampf(v, -448.0f, 448.0f))) * s;
    }
}

/* In-place Sylvester Walsh-Hadamard of v [n] (shared memory, n a power of
 * two) by the whole block, times n^-0.5, rounded at hadamard_bf16. The
 * butterflies of one stage are independent, so the result is the oracle's
 * stride-1,2,4,... loop bit for bit. */
DQC_D void dqc_block_hadamard(uint64_t bs, float *v, int n)
{
    for (int h = 1; h < n; h <<= 1) {
        for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
            const int i = (p / h) * 2 * h + (p % h);
            const float a = v[i], b = v[i + h];
            v[i] = a + b;
            v[i + h] = a - b;
        }
        __syncthreads();
    }
    const float norm = (float)(1.0 / sqrt((double)n));
    for (int i = threadIdx.x; i < n; i += blockDim.x) v[i] = dqc_rb(bs, DQC_B_HADAMARD_BF16, v[i] * norm);
    __syncthreads();
}

/* RMS-normalise v [d] in shared memory by the whole block: w * (x * inv),
 * inv = 1 / sqrt(sum(x^2)/d + eps), rounded at norm_bf16. */
DQC_D void dqc_block_rmsnorm(uint64_t bs, float *v, int d, const float *w, float eps)
{
    float ss = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) ss += v[i] * v[i];
    ss = dqc_block_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        v[i] = dqc_rb(bs, DQC_B_NORM_BF16, (w ? w[i] : 1.0f) * (v[i] * inv));
    __syncthreads();
}

static inline unsigned dqc_div_up(long a, long b) { return (unsigned)((a + b - 1) / b); }
#endif

#endif
