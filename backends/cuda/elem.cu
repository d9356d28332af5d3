/*
 * elem.cu - the row and element-wise operators: RMSNorm, q head norm, RoPE,
 * act_quant / fp4_quant / Hadamard, hyper-connections (hc_pre with
 * Sinkhorn, hc_post, hc_head) and the MoE gate.
 *
 * Layout of the work: a thread block per row where the row needs a
 * reduction (norms, Hadamard, hc per token), a warp per quantization block,
 * a thread per element otherwise. The small serial pieces (Sinkhorn on a
 * 4x4 matrix, the gate's top-k over 256 experts) run on one thread per
 * token in the oracle's operation order: they are a few hundred flops, and
 * order is what decides a tie. The gate's scores and weights are evaluated
 * in FP64 (see moe_gate_kernel).
 */
#define DQC_DEVICE_HELPERS
#include <stdio.h>
#include "backends/cuda/dqc.h"

/* --- norms ------------------------------------------------------------------ */

__global__ void __launch_bounds__(256) rmsnorm_kernel(const float *__restrict__ x, long d,
                                                      const float *__restrict__ w, float eps, uint64_t bs,
                                                      float *__restrict__ y)
{
    const float *v = x + (long)blockIdx.x * d;
    float ss = 0.0f;
    for (long i = threadIdx.x; i < d; i += blockDim.x) ss += v[i] * v[i];
    ss = dqc_block_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (long i = threadIdx.x; i < d; i += blockDim.x)
        y[(long)blockIdx.x * d + i] = dqc_rb(bs, DQC_B_NORM_BF16, (w ? w[i] : 1.0f) * (v[i] * inv));
}

int dqc_rmsnorm(dqc_ctx *c, uint64_t bs, const float *x, long rows, long d, const float *w, double eps, float *y)
{
    if (rows <= 0) return 0;
    DQC_LAUNCH(rmsnorm_kernel, (unsigned)rows, 256, 0, c->stream, x, d, w, (float)eps, bs, y);
    DQC_CK_LAUNCH(c, "rmsnorm_kernel");
    return 0;
}

/* q *= rsqrt(mean(q^2) + eps) per row; with qnorm_bf16 each of the five
 * tensor ops of the source is rounded: q^2, mean, +eps, rsqrt, product. */
__global__ void __launch_bounds__(256) qhead_norm_kernel(const float *__restrict__ q, long D, float eps,
                                                         uint64_t bs, float *__restrict__ y)
{
    const int b = DQC_B_QNORM_BF16;
    const bool on = (bs >> b) & 1u;
    const float *v = q + (long)blockIdx.x * D;
    float ss = 0.0f;
    for (long i = threadIdx.x; i < D; i += blockDim.x) ss += on ? dqc_bf16r(v[i] * v[i]) : v[i] * v[i];
    ss = dqc_block_sum(ss);
    const float mean = dqc_rb(bs, b, ss / (float)D);
    const float t = dqc_rb(bs, b, mean + eps);
    const float inv = dqc_rb(bs, b, 1.0f / sqrtf(t));
    for (long i = threadIdx.x; i < D; i += blockDim.x) y[(long)blockIdx.x * D + i] = dqc_rb(bs, b, v[i] * inv);
}

int dqc_qhead_norm(dqc_ctx *c, uint64_t bs, const float *q, long rows, long D, double eps, float *y)
{
    if (rows <= 0) return 0;
    DQC_LAUNCH(qhead_norm_kernel, (unsigned)rows, 256, 0, c->stream, q, D, (float)eps, bs, y);
    DQC_CK_LAUNCH(c, "qhead_norm_kernel");
    return 0;
}

/* --- quantization simulations, Hadamard ------------------------------------ */

/* One warp per (row, block) of x [rows, n]. */
__global__ void __launch_bounds__(256) quant_kernel(const float *__restrict__ x, long rows, long n, int block,
                                                    int fp4, int ue8m0, float *__restrict__ y)
{
    const long nb = (n + block - 1) / block;
    const long wg = (long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (wg >= rows * nb) return;   /* whole warps */
    const long r = wg / nb, b0 = (wg % nb) * block;
    const int len = (int)(n - b0 < block ? n - b0 : block);
    dqc_warp_quant_block(x + r * n + b0, y + r * n + b0, len, fp4, ue8m0);
}

static int quant_launch(dqc_ctx *c, const float *x, long rows, long n, int block, int fp4, int ue8m0, float *y)
{
    if (rows <= 0 || n <= 0) return 0;
    if (block <= 0) return dqc_fail(c, "act_quant: block %d", block);
    const long warps = rows * ((n + block - 1) / block);
    DQC_LAUNCH(quant_kernel, dqc_div_up(warps, 8), 256, 0, c->stream, x, rows, n, block, fp4, ue8m0, y);
    DQC_CK_LAUNCH(c, "quant_kernel");
    return 0;
}

int dqc_act_quant(dqc_ctx *c, const float *x, long rows, long n, int block, int ue8m0, float *y)
{
    return quant_launch(c, x, rows, n, block, 0, ue8m0, y);
}

int dqc_fp4_quant(dqc_ctx *c, const float *x, long rows, long n, float *y)
{
    return quant_launch(c, x, rows, n, 32, 1, 1, y);
}

__global__ void __launch_bounds__(256) hadamard_kernel(const float *__restrict__ x, long n, uint64_t bs,
                                                       float *__restrict__ y)
{
    DQC_DYN_SMEM(float, v);
    const float *src = x + (long)blockIdx.x * n;
    for (long i = threadIdx.x; i < n; i += blockDim.x) v[i] = src[i];
    __syncthreads();
    dqc_block_hadamard(bs, v, (int)n);
    for (long i = threadIdx.x; i < n; i += blockDim.x) y[(long)blockIdx.x * n + i] = v[i];
}

int dqc_hadamard(dqc_ctx *c, uint64_t bs, const float *x, long rows, long n, float *y)
{
    if (rows <= 0) return 0;
    if (n <= 0 || (n & (n - 1))) return dqc_fail(c, "hadamard: n = %ld is not a power of two", n);
    const size_t smem = sizeof(float) * (size_t)n;
    if (dqc_smem_limit(c, (const void *)hadamard_kernel, smem, "hadamard")) return -1;
    DQC_LAUNCH(hadamard_kernel, (unsigned)rows, 256, smem, c->stream, x, n, bs, y);
    DQC_CK_LAUNCH(c, "hadamard_kernel");
    return 0;
}

/* --- RoPE ---------------------------------------------------------------------- */

/* model.py find_correction_range / linear_ramp_factor, in double. */
static void yarn_range(const dqc_rope_params *p, double *lo, double *hi)
{
    const double r = p->rope_dim, two_pi = 6.283185307179586;
    double clo = r * log(p->original_seq_len / (p->beta_fast * two_pi)) / (2 * log(p->base));
    double chi = r * log(p->original_seq_len / (p->beta_slow * two_pi)) / (2 * log(p->base));
    double l = floor(clo), h = ceil(chi);
    if (l < 0) l = 0;
    if (h > r - 1) h = r - 1;
    if (l == h) h += 0.001;
    *lo = l;
    *hi = h;
}

int dqc_rope_prepare(dqc_ctx *c, uint64_t bs, const dqc_rope_params *p, dqc_rope_table *t)
{
    const int r = p->rope_dim, half = r / 2;
    if (r <= 0 || (r & 1) || half > 1024) return dqc_fail(c, "rope: rope_dim %d", r);
    t->half = half;
    t->src = (int)((bs >> DQC_B_ROPE_TABLE_F32) & 1u);
    t->ff = NULL;
    t->fd = NULL;
    float ff[1024];
    double fd[1024];
    double lo = 0, hi = 0;
    if (p->original_seq_len > 0) yarn_range(p, &lo, &hi);
    if (t->src) {
        /* precompute_freqs_cis in FP32: every operation rounded to binary32 */
        for (int i = 0; i < half; i++) {
            float e = (float)(2 * i) / (float)r;
            float pw = (float)pow((double)(float)p->base, (double)e);
            ff[i] = 1.0f / pw;
        }
        if (p->original_seq_len > 0)
            for (int i = 0; i < half; i++) {
                float ramp = ((float)i - (float)lo) / ((float)hi - (float)lo);
                ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
                float smooth = 1.0f - ramp;
                float a = (ff[i] / (float)p->factor) * (1.0f - smooth);
                float b = ff[i] * smooth;
                ff[i] = a + b;
            }
        float *d = (float *)dqc_alloc(c, sizeof(float) * (size_t)half);
        if (!d) return -1;
        DQC_CK(c, cudaMemcpyAsync(d, ff, sizeof(float) * (size_t)half, cudaMemcpyHostToDevice, c->stream));
        t->ff = d;
    } else {
        for (int i = 0; i < half; i++) fd[i] = 1.0 / pow(p->base, (double)(2 * i) / (double)r);
        if (p->original_seq_len > 0)
            for (int i = 0; i < half; i++) {
                double ramp = ((double)i - lo) / (hi - lo);
                ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
                double smooth = 1.0 - ramp;
                fd[i] = (fd[i] / p->factor) * (1.0 - smooth) + fd[i] * smooth;
            }
        double *d = (double *)dqc_alloc(c, sizeof(double) * (size_t)half);
        if (!d) return -1;
        DQC_CK(c, cudaMemcpyAsync(d, fd, sizeof(double) * (size_t)half, cudaMemcpyHostToDevice, c->stream));
        t->fd = d;
    }
    /* the host arrays die with this frame */
    DQC_CK(c, cudaStreamSynchronize(c->stream));
    return 0;
}

__global__ void rope_kernel(const float *__restrict__ x, const int32_t *__restrict__ pos, long rows,
                            dqc_rope_table t, int inverse, uint64_t bs, float *__restrict__ y)
{
    const long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= rows * t.half) return;
    const long row = e / t.half;
    const int i = (int)(e % t.half);
    const long r = 2L * t.half;
    float a = x[row * r + 2 * i], b = x[row * r + 2 * i + 1];
    dqc_rope_pair(bs, t, (long)pos[row], i, inverse, &a, &b);
    y[row * r + 2 * i] = a;
    y[row * r + 2 * i + 1] = b;
}

int dqc_rope(dqc_ctx *c, uint64_t bs, const dqc_rope_table *t, const float *x, const int32_t *pos, long rows,
             int inverse, float *y)
{
    if (rows <= 0) return 0;
    DQC_LAUNCH(rope_kernel, dqc_div_up(rows * t->half, 256), 256, 0, c->stream, x, pos, rows, *t, inverse, bs, y);
    DQC_CK_LAUNCH(c, "rope_kernel");
    return 0;
}

/* --- hyper-connections ---------------------------------------------------------- */

#define HC_MAX 16

/* Sinkhorn of one token (kernel.py hc_split_sinkhorn_kernel), the oracle's
 * dsv4q_hc_sinkhorn operation by operation. */
__device__ void hc_sinkhorn(const float *mixes, int hc, const float *scale, const float *base, float eps,
                            int iters, float *pre, float *post, float *comb)
{
    for (int j = 0; j < hc; j++) pre[j] = dqc_sigmoid(mixes[j] * scale[0] + base[j]) + eps;
    for (int j = 0; j < hc; j++) post[j] = 2.0f * dqc_sigmoid(mixes[hc + j] * scale[1] + base[hc + j]);
    for (int j = 0; j < hc; j++)
        for (int k = 0; k < hc; k++)
            comb[j * hc + k] = mixes[2 * hc + j * hc + k] * scale[2] + base[2 * hc + j * hc + k];
    for (int j = 0; j < hc; j++) {
        float m = comb[j * hc], sum = 0.0f;
        for (int k = 1; k < hc; k++) if (comb[j * hc + k] > m) m = comb[j * hc + k];
        for (int k = 0; k < hc; k++) { comb[j * hc + k] = dqc_expf(comb[j * hc + k] - m); sum += comb[j * hc + k]; }
        for (int k = 0; k < hc; k++) comb[j * hc + k] = comb[j * hc + k] / sum + eps;
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int j = 0; j < hc; j++) {
                float rs = 0.0f;
                for (int k = 0; k < hc; k++) rs += comb[j * hc + k];
                for (int k = 0; k < hc; k++) comb[j * hc + k] /= rs + eps;
            }
        for (int k = 0; k < hc; k++) {
            float cs = 0.0f;
            for (int j = 0; j < hc; j++) cs += comb[j * hc + k];
            for (int j = 0; j < hc; j++) comb[j * hc + k] /= cs + eps;
        }
    }
}

/* One block per token: mixes *= rsqrt(mean(X^2) + norm_eps); then (pre
 * only, head) or (Sinkhorn, pre) on thread 0; then y = sum_j pre_j X_j. */
__global__ void __launch_bounds__(256) hc_token_kernel(const float *__restrict__ X, int hc, long d,
                                                       float *__restrict__ mixes, int nmix,
                                                       const float *__restrict__ scale,
                                                       const float *__restrict__ base, float norm_eps,
                                                       float hc_eps, int iters, int head, uint64_t bs,
                                                       float *__restrict__ y, float *__restrict__ post,
                                                       float *__restrict__ comb)
{
    DQC_SHARED(float, pre, HC_MAX);
    const long t = blockIdx.x, hcd = (long)hc * d;
    const float *Xt = X + t * hcd;
    float ss = 0.0f;
    for (long i = threadIdx.x; i < hcd; i += blockDim.x) ss += Xt[i] * Xt[i];
    ss = dqc_block_sum(ss);
    if (threadIdx.x == 0) {
        const float rsq = 1.0f / sqrtf(ss / (float)hcd + norm_eps);
        float *m = mixes + t * nmix;
        for (int k = 0; k < nmix; k++) m[k] *= rsq;
        if (head) {
            for (int j = 0; j < hc; j++) pre[j] = dqc_sigmoid(m[j] * scale[0] + base[j]) + hc_eps;
        } else {
            hc_sinkhorn(m, hc, scale, base, hc_eps, iters, pre, post + t * hc, comb + t * hc * hc);
        }
    }
    __syncthreads();
    for (long i = threadIdx.x; i < d; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < hc; j++) acc += pre[j] * Xt[j * d + i];
        y[t * d + i] = dqc_rb(bs, DQC_B_RESID_BF16, acc);
    }
}

static int hc_common(dqc_ctx *c, uint64_t bs, const float *X, long s, int hc, long d, const dqc_weight *fn,
                     const float *scale, const float *base, double norm_eps, double hc_eps, int iters, int head,
                     float *y, float *post, float *comb)
{
    if (s <= 0) return 0;
    if (hc <= 0 || hc > HC_MAX) return dqc_fail(c, "hc: hc_mult %d out of range (1..%d)", hc, HC_MAX);
    const int nmix = (int)fn->out;
    float *mixes = (float *)dqc_alloc(c, sizeof(float) * (size_t)(s * nmix));
    if (!mixes) return -1;
    /* the oracle's hc_mixes: an FP32-math linear, ue8m0 off */
    if (dqc_linear(c, bs, 0, fn, X, s, mixes, -1)) return -1;
    DQC_LAUNCH(hc_token_kernel, (unsigned)s, 256, 0, c->stream, X, hc, d, mixes, nmix, scale, base, (float)norm_eps,
               (float)hc_eps, iters, head, bs, y, post, comb);
    DQC_CK_LAUNCH(c, "hc_token_kernel");
    return 0;
}

int dqc_hc_pre(dqc_ctx *c, uint64_t bs, const float *X, long s, int hc, long d, const dqc_weight *fn,
               const float *scale, const float *base, double norm_eps, double hc_eps, int iters, float *y,
               float *post, float *comb)
{
    if (fn->out != (int64_t)(2 + hc) * hc) return dqc_fail(c, "hc_pre: fn has %lld rows, want (2+hc)*hc", (long long)fn->out);
    return hc_common(c, bs, X, s, hc, d, fn, scale, base, norm_eps, hc_eps, iters, 0, y, post, comb);
}

int dqc_hc_head(dqc_ctx *c, uint64_t bs, const float *X, long s, int hc, long d, const dqc_weight *fn,
                const float *scale, const float *base, double norm_eps, double hc_eps, float *y)
{
    if (fn->out != hc) return dqc_fail(c, "hc_head: fn has %lld rows, want hc", (long long)fn->out);
    return hc_common(c, bs, X, s, hc, d, fn, scale, base, norm_eps, hc_eps, 0, 1, y, NULL, NULL);
}

/* out_k = post_k x + sum_j C[j][k] X_j (C's row index is the source stream). */
__global__ void hc_post_kernel(const float *__restrict__ x, const float *__restrict__ X,
                               const float *__restrict__ post, const float *__restrict__ comb, long s, int hc, long d,
                               uint64_t bs, float *__restrict__ out)
{
    const long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= s * hc * d) return;
    const long t = e / ((long)hc * d), i = e % d;
    const int k = (int)((e / d) % hc);
    const float *C = comb + t * hc * hc;
    float mix = 0.0f;
    for (int j = 0; j < hc; j++) mix += C[j * hc + k] * X[(t * hc + j) * d + i];
    out[e] = dqc_rb(bs, DQC_B_RESID_BF16, post[t * hc + k] * x[t * d + i] + mix);
}

int dqc_hc_post(dqc_ctx *c, uint64_t bs, const float *x, const float *X, const float *post, const float *comb,
                long s, int hc, long d, float *out)
{
    const long n = s * hc * d;
    if (n <= 0) return 0;
    DQC_LAUNCH(hc_post_kernel, dqc_div_up(n, 256), 256, 0, c->stream, x, X, post, comb, s, hc, d, bs, out);
    DQC_CK_LAUNCH(c, "hc_post_kernel");
    return 0;
}

/* --- MoE gate ------------------------------------------------------------------ */

#define GATE_MAX_EXP 4096

/* One thread per token, the oracle's dsv4q_moe_gate order: scores,
 * selection (hash table or top-k of sc + bias, ties to the lower expert id),
 * weights normalised in pick order. The scores and the normalisation are
 * evaluated in FP64 from the FP32 logits z (the reference: FP32): never less
 * accurate, and k equal scores normalise to exactly 1/k. */
__global__ void moe_gate_kernel(const float *__restrict__ z, double *__restrict__ scd, long s, int n_exp, int k,
                                const float *__restrict__ bias, const int32_t *__restrict__ tid2eid,
                                const int32_t *__restrict__ ids, int score_func, double route_scale,
                                float *__restrict__ weights, int32_t *__restrict__ indices)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= s) return;
    const float *zt = z + t * n_exp;
    double *sc = scd + t * n_exp;
    const bool softmax = score_func == 2;
    if (softmax) {
        double m = zt[0], sum = 0.0;
        for (int e = 1; e < n_exp; e++) if (zt[e] > m) m = zt[e];
        for (int e = 0; e < n_exp; e++) { sc[e] = exp((double)zt[e] - m); sum += sc[e]; }
        for (int e = 0; e < n_exp; e++) sc[e] /= sum;
    } else if (score_func == 1) {
        for (int e = 0; e < n_exp; e++) sc[e] = 1.0 / (1.0 + exp(-(double)zt[e]));
    } else {
        for (int e = 0; e < n_exp; e++) {
            const double zv = zt[e];
            sc[e] = sqrt(zv > 20.0 ? zv : log1p(exp(zv)));   /* torch softplus threshold 20 */
        }
    }
    int32_t *ix = indices + t * k;
    if (tid2eid) {
        for (int j = 0; j < k; j++) ix[j] = tid2eid[(long)ids[t] * k + j];
    } else {
        uint32_t used[GATE_MAX_EXP / 32];
        for (int w = 0; w < (n_exp + 31) / 32; w++) used[w] = 0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            double bv = 0.0;
            for (int e = 0; e < n_exp; e++) {
                if ((used[e >> 5] >> (e & 31)) & 1u) continue;
                const double v = sc[e] + (bias ? (double)bias[e] : 0.0);
                if (best < 0 || v > bv) { best = e; bv = v; }
            }
            used[best >> 5] |= 1u << (best & 31);
            ix[j] = best;
        }
    }
    float *w = weights + t * k;
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += sc[ix[j]];
    for (int j = 0; j < k; j++) {
        double v = sc[ix[j]];
        if (!softmax) v = sum > 0.0 ? v / sum : 1.0 / (double)k;
        w[j] = (float)(v * route_scale);
    }
}

int dqc_moe_gate(dqc_ctx *c, const float *x, long s, long d, const dqc_weight *W, const float *bias,
                 const int32_t *tid2eid, const int32_t *ids, int n_exp, int k, int score_func, double route_scale,
                 float *weights, int32_t *indices)
{
    (void)d;
    if (s <= 0) return 0;
    if (n_exp <= 0 || n_exp > GATE_MAX_EXP || k <= 0 || k > n_exp)
        return dqc_fail(c, "moe_gate: n_exp %d, k %d out of range (1 <= k <= n_exp <= %d)", n_exp, k, GATE_MAX_EXP);
    float *z = (float *)dqc_alloc(c, sizeof(float) * (size_t)(s * n_exp));
    double *scd = (double *)dqc_alloc(c, sizeof(double) * (size_t)(s * n_exp));
    if (!z || !scd) return -1;
    /* FP32 gate: the oracle passes the empty boundary set to this linear */
    if (dqc_linear(c, 0, 0, W, x, s, z, -1)) return -1;
    DQC_LAUNCH(moe_gate_kernel, dqc_div_up(s, 128), 128, 0, c->stream, z, scd, s, n_exp, k, bias, tid2eid, ids,
               score_func, route_scale, weights, indices);
    DQC_CK_LAUNCH(c, "moe_gate_kernel");
    return 0;
}
