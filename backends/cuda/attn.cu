/*
 * attn.cu - sparse attention with a sink, lightning-indexer scores, top-k.
 *
 * sparse_attn: a thread block per (query, head), following kernel.py
 * sparse_attn_kernel (K2 of dqc.h): the columns of idx are walked in
 * blocks of 64 in column order; per block the scores q.k * scale (a warp
 * per column, masked column = -inf), the running max, e_j = exp(s_j - m)
 * with the UNROUNDED e_j summed into the denominator and a BF16 copy
 * (attn_p_bf16) multiplying V; the FP32 accumulator is rescaled by
 * exp(m_old - m_new) when the max moves; the sink adds exp(sink - m) to the
 * denominator only after the last block. V = K (the whole D-wide row).
 * A query whose columns are all masked gets o = 0 (the oracle's documented
 * choice; the reference kernel would produce NaN).
 *
 * indexer_score: a block per (query, 64 keys), a warp per key, a lane per
 * head; the head products are summed in head order, with the source's BF16
 * roundings (idx_partial_bf16 on each head dot and each weighted product,
 * idx_score_bf16 on the sum).
 *
 * topk: the rank of each finite score among its row (score descending,
 * equal scores: lower index first - the oracle's documented tie rule) is
 * counted directly; rank < k writes the index to slot `rank`, the other
 * slots stay -1. O(T^2) per row, no sort, no atomics, deterministic.
 * NaN scores are treated as not selectable.
 */
#define DQC_DEVICE_HELPERS
#include "backends/cuda/dqc.h"

#define ATT_BLOCK 64
#define ATT_THREADS 128

__global__ void __launch_bounds__(ATT_THREADS)
    sparse_attn_kernel(const float *__restrict__ q, int H, int D, const float *__restrict__ kv, long N,
                       const int32_t *__restrict__ idx, long ncols, const float *__restrict__ sink, float scale,
                       uint64_t bs, float *__restrict__ o)
{
    DQC_DYN_SMEM(float, sm);
    DQC_SHARED(float, sc, ATT_BLOCK);
    DQC_SHARED(float, p, ATT_BLOCK);
    DQC_SHARED(int, ids, ATT_BLOCK);
    float *qs = sm, *acc = sm + D;
    const long t = (long)blockIdx.x / H;
    const int h = (int)(blockIdx.x % H);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarp = blockDim.x >> 5;
    const bool pb = (bs >> DQC_B_ATTN_P_BF16) & 1u;
    const float *qv = q + ((long)t * H + h) * D;
    const int32_t *row = idx + t * ncols;
    for (int d = tid; d < D; d += blockDim.x) {
        qs[d] = qv[d];
        acc[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;   /* every thread holds the same copy */
    __syncthreads();
    for (long b0 = 0; b0 < ncols; b0 += ATT_BLOCK) {
        const int nb = (int)(ncols - b0 < ATT_BLOCK ? ncols - b0 : ATT_BLOCK);
        for (int j = tid; j < nb; j += blockDim.x) {
            const int32_t id = row[b0 + j];
            ids[j] = (id < 0 || id >= N) ? -1 : id;
        }
        __syncthreads();
        for (int j = warp; j < nb; j += nwarp) {   /* j, and so ids[j], is warp-uniform */
            const int id = ids[j];
            float sum = 0.0f;
            if (id >= 0) {
                const float *kr = kv + (long)id * D;
                for (int d = lane; d < D; d += 32) sum += qs[d] * kr[d];
            }
            sum = dqc_warp_sum(sum);
            if (lane == 0) sc[j] = id >= 0 ? sum * scale : -INFINITY;
        }
        __syncthreads();
        float mb = m;
        for (int j = 0; j < nb; j++)
            if (sc[j] > mb) mb = sc[j];
        if (mb == -INFINITY) {   /* nothing visible yet: state unchanged (uniform branch) */
            __syncthreads();
            continue;
        }
        const float alpha = m == -INFINITY ? 0.0f : dqc_expf(m - mb);
        for (int j = tid; j < nb; j += blockDim.x) p[j] = sc[j] == -INFINITY ? 0.0f : dqc_expf(sc[j] - mb);
        __syncthreads();
        float bsum = 0.0f;   /* the unrounded e_j, in column order */
        for (int j = 0; j < nb; j++) bsum += p[j];
        l = l * alpha + bsum;
        __syncthreads();
        if (pb)
            for (int j = tid; j < nb; j += blockDim.x) p[j] = dqc_bf16r(p[j]);
        __syncthreads();
        for (int d = tid; d < D; d += blockDim.x) {
            float a = acc[d] * alpha;
            for (int j = 0; j < nb; j++)
                if (p[j] != 0.0f) a += p[j] * kv[(long)ids[j] * D + d];
            acc[d] = a;
        }
        m = mb;
        __syncthreads();
    }
    float *ov = o + ((long)t * H + h) * D;
    if (m == -INFINITY) {
        for (int d = tid; d < D; d += blockDim.x) ov[d] = 0.0f;
        return;
    }
    l += dqc_expf(sink[h] - m);
    for (int d = tid; d < D; d += blockDim.x) ov[d] = dqc_rb(bs, DQC_B_ATTN_OUT_BF16, acc[d] / l);
}

int dqc_sparse_attn(dqc_ctx *c, uint64_t bs, const float *q, long s, int H, int D, const float *kv, long N,
                    const int32_t *idx, long ncols, const float *sink, float scale, float *o)
{
    if (s <= 0 || H <= 0) return 0;
    const size_t smem = sizeof(float) * 2 * (size_t)D;
    if (dqc_smem_limit(c, (const void *)sparse_attn_kernel, smem, "sparse_attn")) return -1;
    DQC_LAUNCH(sparse_attn_kernel, (unsigned)(s * H), ATT_THREADS, smem, c->stream, q, H, D, kv, N, idx, ncols, sink,
               scale, bs, o);
    DQC_CK_LAUNCH(c, "sparse_attn_kernel");
    return 0;
}

#define IDX_KEYS 64

/* Shared memory: q of this query [Hi][Di+1] (padded: lane h reads row h
 * without bank conflicts), w [Hi], then per warp one key row [Di] and the
 * Hi head products. A lane owns heads lane, lane+32, ...: it forms the
 * whole head dot, so the only warp traffic per key is one exchange of the
 * products, which lane 0 sums in head order (the oracle's order). */
__global__ void __launch_bounds__(256)
    indexer_kernel(const float *__restrict__ q, const float *__restrict__ w, int Hi, int Di,
                   const float *__restrict__ K, long T, long start_pos, int ratio, uint64_t bs,
                   float *__restrict__ score)
{
    DQC_DYN_SMEM(float, sm);
    const long ntile = (T + IDX_KEYS - 1) / IDX_KEYS;
    const long i = (long)blockIdx.x / ntile, t0 = ((long)blockIdx.x % ntile) * IDX_KEYS;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarp = blockDim.x >> 5;
    const int pb = DQC_B_IDX_PARTIAL_BF16, LD = Di + 1;
    float *qs = sm, *ws = qs + (long)Hi * LD, *ks = ws + Hi + (long)warp * (Di + Hi), *prod = ks + Di;
    for (long e = tid; e < (long)Hi * Di; e += blockDim.x) qs[(e / Di) * LD + e % Di] = q[i * Hi * Di + e];
    for (int h = tid; h < Hi; h += blockDim.x) ws[h] = w[i * Hi + h];
    __syncthreads();
    for (int kk = warp; kk < IDX_KEYS; kk += nwarp) {   /* warp-uniform key */
        const long t = t0 + kk;
        if (t >= T) break;
        if (start_pos == 0 && t >= (i + 1) / ratio) {
            if (lane == 0) score[i * T + t] = -INFINITY;
            continue;
        }
        for (int k = lane; k < Di; k += 32) ks[k] = K[t * Di + k];
        __syncwarp();
        for (int h = lane; h < Hi; h += 32) {
            const float *qh = qs + (long)h * LD;
            float dsum = 0.0f;
            for (int k = 0; k < Di; k++) dsum += qh[k] * ks[k];
            float d = dqc_rb(bs, pb, dsum);
            if (d < 0.0f) d = 0.0f;
            prod[h] = dqc_rb(bs, pb, d * ws[h]);
        }
        __syncwarp();
        if (lane == 0) {
            float acc = 0.0f;
            for (int h = 0; h < Hi; h++) acc += prod[h];
            score[i * T + t] = dqc_rb(bs, DQC_B_IDX_SCORE_BF16, acc);
        }
        __syncwarp();   /* ks and prod are rewritten for the next key */
    }
}

int dqc_indexer_score(dqc_ctx *c, uint64_t bs, const float *q, const float *w, long s, int Hi, int Di,
                      const float *K, long T, long start_pos, int ratio, float *score)
{
    if (s <= 0 || T <= 0) return 0;
    if (ratio <= 0) return dqc_fail(c, "indexer_score: ratio %d", ratio);
    const size_t smem = sizeof(float) * ((size_t)Hi * (Di + 1) + (size_t)Hi + 8 * ((size_t)Di + Hi));
    if (dqc_smem_limit(c, (const void *)indexer_kernel, smem, "indexer_score")) return -1;
    const long blocks = s * ((T + IDX_KEYS - 1) / IDX_KEYS);
    if (blocks > 0x7fffffffL) return dqc_fail(c, "indexer_score: grid too large");
    DQC_LAUNCH(indexer_kernel, (unsigned)blocks, 256, smem, c->stream, q, w, Hi, Di, K, T, start_pos, ratio, bs, score);
    DQC_CK_LAUNCH(c, "indexer_kernel");
    return 0;
}

#define TOPK_TILE 256

__global__ void __launch_bounds__(TOPK_TILE)
    topk_kernel(const float *__restrict__ score, long T, int k, int32_t *__restrict__ out)
{
    DQC_SHARED(float, tv, TOPK_TILE);
    const long ntile = (T + TOPK_TILE - 1) / TOPK_TILE;
    const long row = (long)blockIdx.x / ntile, t = ((long)blockIdx.x % ntile) * TOPK_TILE + threadIdx.x;
    const float *sr = score + row * T;
    const float v = t < T ? sr[t] : -INFINITY;
    const bool sel = t < T && v != -INFINITY && v == v;
    long rank = 0;
    for (long u0 = 0; u0 < T; u0 += TOPK_TILE) {
        __syncthreads();
        tv[threadIdx.x] = u0 + threadIdx.x < T ? sr[u0 + threadIdx.x] : -INFINITY;
        __syncthreads();
        if (!sel) continue;
        const int n = (int)(T - u0 < TOPK_TILE ? T - u0 : TOPK_TILE);
        for (int uu = 0; uu < n; uu++) {
            const float wv = tv[uu];
            if (wv > v || (wv == v && u0 + uu < t)) rank++;
        }
    }
    if (sel && rank < k) out[row * k + rank] = (int32_t)t;
}

int dqc_topk(dqc_ctx *c, const float *score, long rows, long T, int k, int32_t *out)
{
    if (rows <= 0 || k <= 0) return 0;
    DQC_CK(c, cudaMemsetAsync(out, 0xFF, sizeof(int32_t) * (size_t)(rows * k), c->stream));   /* -1 pads */
    if (T <= 0) return 0;
    const long blocks = rows * ((T + TOPK_TILE - 1) / TOPK_TILE);
    if (blocks > 0x7fffffffL) return dqc_fail(c, "topk: grid too large");
    DQC_LAUNCH(topk_kernel, (unsigned)blocks, TOPK_TILE, 0, c->stream, score, T, k, out);
    DQC_CK_LAUNCH(c, "topk_kernel");
    return 0;
}
