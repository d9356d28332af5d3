/*
 * gemm.cu - linears (BF16 / F32 / FP8 128x128 / FP4 per-32) and the SwiGLU
 * expert.
 *
 * One tiled kernel serves every weight format. A thread block owns a
 * TT x TN tile of y (tokens x outputs) and walks K in 32-wide chunks
 * staged in shared memory; weight codes are decoded while staging (E4M3
 * bytes, packed E2M1 nibbles with the low nibble = even k, BF16 codes).
 *
 * Precision (K2 of dqc.h, kernel.py fp8_gemm_kernel / fp4_gemm_kernel):
 *  - the activation of an FP8/FP4 linear is act_quant'ed per 128 columns
 *    into E4M3 code values + a scale per block (gemm_act_fp8);
 *  - the dot of one K block (128 for FP8, 32 for FP4) is accumulated in
 *    FP64 and rounded once to FP32. E4M3 x E4M3 (and E4M3 x E2M1) code
 *    products are exact in FP64 and 128 of them sum exactly, so this is the
 *    block dot the oracle calls "exact at its width"; the tensor core's
 *    in-block order is unspecified, and this takes its best case;
 *  - the FP32 block result is scaled (FP8: d * (sa*sw); FP4: (d*sa)*sw, the
 *    oracle's association) and added to a second FP32 accumulator in K
 *    order;
 *  - plain (F32/BF16) weights: one FP64-accumulated dot over K, rounded
 *    once to FP32 (the reference accumulates in FP32; FP64 is never less
 *    accurate, and K = 16384 for the hc mixes);
 *  - the output is rounded to BF16 at the boundary the caller names.
 */
#define DQC_DEVICE_HELPERS
#include "backends/cuda/dqc.h"

#define GEMM_BK 32
#define GEMM_THREADS 256

/* act_quant in GEMM mode: xq [s, K] = E4M3 code values, xs [s, nab] scales;
 * one warp per (row, 128-block). */
__global__ void __launch_bounds__(256) act_quant_codes_kernel(const float *__restrict__ x, long s, long K, long nab,
                                                              int ue8m0, float *__restrict__ xq,
                                                              float *__restrict__ xs)
{
    const long wg = (long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (wg >= s * nab) return;   /* whole warps only: no barrier below */
    const long t = wg / nab, kb = wg % nab, k0 = kb * 128;
    const int len = (int)(K - k0 < 128 ? K - k0 : 128);
    const int lane = threadIdx.x & 31;
    const float *v = x + t * K + k0;
    float amax = 0.0f;
    for (int i = lane; i < len; i += 32) amax = fmaxf(amax, fabsf(v[i]));
    amax = dqc_warp_max(amax);
    const float sc = dqc_fp8_scale(amax, ue8m0);
    for (int i = lane; i < len; i += 32) xq[t * K + k0 + i] = dqc_e4m3r(dqc_clampf(v[i] / sc, -448.0f, 448.0f));
    if (lane == 0) xs[t * nab + kb] = sc;
}

template <int FMT>
DQC_D float w_decode(const void *__restrict__ w, long n, long k, long K)
{
    if (FMT == DQC_WF_F32) return ((const float *)w)[n * K + k];
    if (FMT == DQC_WF_BF16) return dqc_bf16_decode(((const uint16_t *)w)[n * K + k]);
    if (FMT == DQC_WF_FP8) return dqc_e4m3_decode(((const uint8_t *)w)[n * K + k]);
    const uint8_t b = ((const uint8_t *)w)[n * (K / 2) + k / 2];
    return dqc_e2m1_decode((k & 1) ? (uint32_t)(b >> 4) : (uint32_t)(b & 15u));
}

/*
 * y tile [TT tokens x TN outputs]; each thread owns RT x RN outputs at
 * tokens ty + TY*i, outputs tx + TX*j (strided, so the shared-memory reads
 * of one warp hit distinct banks: row stride BK+1).
 */
template <int TT, int TN, int RT, int RN, int FMT>
__global__ void __launch_bounds__(GEMM_THREADS)
    gemm_kernel(const float *__restrict__ x, const float *__restrict__ xs, long s, long K, long nab,
                const void *__restrict__ wc, const float *__restrict__ wsc, long N, long scols, int act_q,
                int round_out, float *__restrict__ y)
{
    constexpr int BK = GEMM_BK, TY = TT / RT, TX = TN / RN, LD = BK + 1;
    static_assert(TY * TX == GEMM_THREADS, "tile shape");
    DQC_SHARED(float, xt, TT * LD);
    DQC_SHARED(float, wt, TN * LD);
    const int tid = threadIdx.x, ty = tid / TX, tx = tid % TX;
    const long t0 = (long)blockIdx.y * TT, n0 = (long)blockIdx.x * TN;
    const bool quant = FMT == DQC_WF_FP8 || FMT == DQC_WF_FP4;
    double part[RT][RN];
    float acc[RT][RN];
    for (int i = 0; i < RT; i++)
        for (int j = 0; j < RN; j++) part[i][j] = 0.0, acc[i][j] = 0.0f;

    const long nchunk = (K + BK - 1) / BK;
    for (long kc = 0; kc < nchunk; kc++) {
        const long k0 = kc * BK;
        for (int e = tid; e < TT * BK; e += GEMM_THREADS) {
            const int tt = e / BK, kk = e % BK;
            const long t = t0 + tt, k = k0 + kk;
            xt[tt * LD + kk] = (t < s && k < K) ? x[t * K + k] : 0.0f;
        }
        for (int e = tid; e < TN * BK; e += GEMM_THREADS) {
            const int nn = e / BK, kk = e % BK;
            const long n = n0 + nn, k = k0 + kk;
            wt[nn * LD + kk] = (n < N && k < K) ? w_decode<FMT>(wc, n, k, K) : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < BK; kk++) {
            double xv[RT], wv[RN];
            for (int i = 0; i < RT; i++) xv[i] = (double)xt[(ty + TY * i) * LD + kk];
            for (int j = 0; j < RN; j++) wv[j] = (double)wt[(tx + TX * j) * LD + kk];
            for (int i = 0; i < RT; i++)
                for (int j = 0; j < RN; j++) part[i][j] = fma(xv[i], wv[j], part[i][j]);
        }
        __syncthreads();
        /* end of a scale block: FP8 every 4 chunks (128) or at the end of K;
         * FP4 every chunk (32) */
        const bool blk_end = FMT == DQC_WF_FP4 || (FMT == DQC_WF_FP8 && ((kc + 1) % 4 == 0 || kc + 1 == nchunk));
        if (quant && blk_end) {
            const long kb = FMT == DQC_WF_FP8 ? kc / 4 : kc;
            for (int i = 0; i < RT; i++)
                for (int j = 0; j < RN; j++) {
                    const long t = t0 + ty + TY * i, n = n0 + tx + TX * j;
                    const float d = (float)part[i][j];
                    part[i][j] = 0.0;
                    if (t >= s || n >= N) continue;
                    if (FMT == DQC_WF_FP8) {
                        float sc = wsc[(n / 128) * scols + kb];
                        if (act_q) sc = xs[t * nab + kb] * sc;
                        acc[i][j] += d * sc;
                    } else {
                        const float sw = wsc[n * scols + kb];
                        acc[i][j] += act_q ? (d * xs[t * nab + kb / 4]) * sw : d * sw;
                    }
                }
        }
    }
    for (int i = 0; i < RT; i++)
        for (int j = 0; j < RN; j++) {
            const long t = t0 + ty + TY * i, n = n0 + tx + TX * j;
            if (t >= s || n >= N) continue;
            float v = quant ? acc[i][j] : (float)part[i][j];
            y[t * N + n] = round_out ? dqc_bf16r(v) : v;
        }
}

template <int TT, int TN, int RT, int RN, int FMT>
static int gemm_launch(dqc_ctx *c, const float *x, const float *xs, long s, long K, long nab, const dqc_weight *w,
                       int act_q, int round_out, float *y)
{
    dim3 grid(dqc_div_up(w->out, TN), dqc_div_up(s, TT));
    if (grid.y > 65535) return dqc_fail(c, "linear: %ld tokens exceed the grid", s);
    auto kern = gemm_kernel<TT, TN, RT, RN, FMT>;
    DQC_LAUNCH(kern, grid, GEMM_THREADS, 0, c->stream, x, xs, s, K, nab, w->codes, w->scale, (long)w->out,
               (long)w->scale_cols, act_q, round_out, y);
    DQC_CK_LAUNCH(c, "gemm_kernel");
    return 0;
}

template <int FMT>
static int gemm_dispatch(dqc_ctx *c, const float *x, const float *xs, long s, long K, long nab,
                         const dqc_weight *w, int act_q, int round_out, float *y)
{
    const int cfg = c->gemm_cfg ? c->gemm_cfg : (s <= 16 ? 1 : 2);
    if (cfg == 1) return gemm_launch<8, 32, 1, 1, FMT>(c, x, xs, s, K, nab, w, act_q, round_out, y);
    return gemm_launch<32, 64, 2, 4, FMT>(c, x, xs, s, K, nab, w, act_q, round_out, y);
}

int dqc_linear(dqc_ctx *c, uint64_t bs, int ue8m0, const dqc_weight *w, const float *x, long s, float *y, int out_b)
{
    const long K = (long)w->in, nab = (K + 127) / 128;
    const int quant = w->fmt == DQC_WF_FP8 || w->fmt == DQC_WF_FP4;
    const int act_q = quant && ((bs >> DQC_B_GEMM_ACT_FP8) & 1u);
    const int round_out = out_b >= 0 && ((bs >> out_b) & 1u);
    if (s <= 0 || w->out <= 0) return 0;
    if (w->fmt == DQC_WF_FP4 && K % 32) return dqc_fail(c, "linear: FP4 weight with in = %ld (not a multiple of 32)", K);
    const float *xa = x;
    float *xs = NULL;
    if (act_q) {
        float *xq = (float *)dqc_alloc(c, sizeof(float) * (size_t)(s * K));
        xs = (float *)dqc_alloc(c, sizeof(float) * (size_t)(s * nab));
        if (!xq || !xs) return -1;
        const long warps = s * nab;
        DQC_LAUNCH(act_quant_codes_kernel, dqc_div_up(warps, 8), 256, 0, c->stream, x, s, K, nab, ue8m0, xq, xs);
        DQC_CK_LAUNCH(c, "act_quant_codes_kernel");
        xa = xq;
    }
    switch (w->fmt) {
    case DQC_WF_F32: return gemm_dispatch<DQC_WF_F32>(c, xa, xs, s, K, nab, w, act_q, round_out, y);
    case DQC_WF_BF16: return gemm_dispatch<DQC_WF_BF16>(c, xa, xs, s, K, nab, w, act_q, round_out, y);
    case DQC_WF_FP8: return gemm_dispatch<DQC_WF_FP8>(c, xa, xs, s, K, nab, w, act_q, round_out, y);
    case DQC_WF_FP4: return gemm_dispatch<DQC_WF_FP4>(c, xa, xs, s, K, nab, w, act_q, round_out, y);
    default: return dqc_fail(c, "linear: unknown weight format %d", w->fmt);
    }
}

/* h = bf16(weight * (silu(min(g, L)) * clamp(u, -L, L))) in FP32, in place
 * on g (model.py Expert.forward; the oracle's operation order). */
__global__ void swiglu_kernel(float *__restrict__ g, const float *__restrict__ u, long n, long I,
                              const float *__restrict__ weight, float L, int has_limit, uint64_t bs)
{
    const long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n * I) return;
    float gv = g[e], uv = u[e];
    if (has_limit) {
        uv = uv < -L ? -L : (uv > L ? L : uv);
        gv = gv > L ? L : gv;
    }
    float h = (gv / (1.0f + dqc_expf(-gv))) * uv;
    if (weight) h = weight[e / I] * h;
    g[e] = dqc_rb(bs, DQC_B_MOE_BF16, h);
}

int dqc_expert(dqc_ctx *c, uint64_t bs, int ue8m0, const dqc_weight *w1, const dqc_weight *w2,
               const dqc_weight *w3, const float *x, long n, const float *weight, double limit, float *y)
{
    const long I = (long)w1->out;
    if (n <= 0) return 0;
    float *g = (float *)dqc_alloc(c, sizeof(float) * (size_t)(n * I));
    float *u = (float *)dqc_alloc(c, sizeof(float) * (size_t)(n * I));
    if (!g || !u) return -1;
    if (dqc_linear(c, bs, ue8m0, w1, x, n, g, DQC_B_LINEAR_BF16)) return -1;
    if (dqc_linear(c, bs, ue8m0, w3, x, n, u, DQC_B_LINEAR_BF16)) return -1;
    DQC_LAUNCH(swiglu_kernel, dqc_div_up(n * I, 256), 256, 0, c->stream, g, u, n, I, weight, (float)limit,
               limit > 0 ? 1 : 0, bs);
    DQC_CK_LAUNCH(c, "swiglu_kernel");
    return dqc_linear(c, bs, ue8m0, w2, g, n, y, DQC_B_LINEAR_BF16);
}
