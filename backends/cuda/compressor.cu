/*
 * compressor.cu - gated pooling of `ratio` tokens into one KV row, prefill
 * and decode (model.py Compressor.forward; the oracle's compressor.c).
 *
 * FP32 math: kv = wkv x, g = wgate x + ape[pos % ratio] (two linears with
 * no output rounding). A row exists once its block of `ratio` positions is
 * complete; one thread block builds it:
 *   pool   per dim j, softmax over the candidates' gates, weighted sum of
 *          their kv values, in candidate order (overlap, ratio 4: the
 *          previous block's positions on dims [0,Dc), then the current
 *          block's on dims [Dc,2Dc); the first block has no previous
 *          candidates: kv 0, gate -inf);
 *   finish cast (cmp_bf16), RMSNorm (norm_bf16), RoPE on the last r dims at
 *          the block's FIRST position (rope_bf16), then indexer rows:
 *          Hadamard + FP4 (idx_k_fp4), or attention rows: act_quant block
 *          64 on the nope dims (ckv_fp8).
 *
 * State (device, per sequence), as the reference's kv_state / score_state:
 *   rows [0, ratio)          previous complete block (overlap only)
 *   rows [off, off+ratio)    current partial block; off = ratio if overlap
 * Prefill leaves exactly the state that one-token decode calls would
 * (checked by dqc_selftest: prefill(s) == prefill(s-k) + k decodes).
 */
#define DQC_DEVICE_HELPERS
#include "backends/cuda/dqc.h"

__global__ void fill_kernel(float *p, long n, float v)
{
    const long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) p[e] = v;
}

int dqc_cmp_state_init(dqc_ctx *c, dqc_cmp_state *st, int ratio, int Dc)
{
    st->ratio = ratio;
    st->overlap = ratio == 4;
    st->Dc = Dc;
    st->kv = st->score = NULL;
    const int coff = st->overlap ? 2 : 1;
    const long n = (long)coff * ratio * coff * Dc;
    DQC_CK(c, cudaMalloc((void **)&st->kv, sizeof(float) * (size_t)n));
    DQC_CK(c, cudaMalloc((void **)&st->score, sizeof(float) * (size_t)n));
    DQC_LAUNCH(fill_kernel, dqc_div_up(n, 256), 256, 0, c->stream, st->kv, n, 0.0f);
    DQC_LAUNCH(fill_kernel, dqc_div_up(n, 256), 256, 0, c->stream, st->score, n, -INFINITY);
    DQC_CK_LAUNCH(c, "fill_kernel");
    return 0;
}

void dqc_cmp_state_free(dqc_cmp_state *st)
{
    cudaFree(st->kv);
    cudaFree(st->score);
    st->kv = st->score = NULL;
}

/* g [s, W] += ape[((pos0 + t) % ratio), :] */
__global__ void ape_add_kernel(float *__restrict__ g, long s, int W, const float *__restrict__ ape, int ratio,
                               long pos0)
{
    const long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= s * W) return;
    const long t = e / W;
    const int j = (int)(e % W);
    g[e] += ape[((pos0 + t) % ratio) * W + j];
}

/* Candidate n of dim j (see the file comment for the order). */
DQC_D void cmp_cand(const float *kv, const float *g, int W, int Dc, int ratio, int ov, long prev0, long cur0,
                    int have_prev, int j, int n, float *kvv, float *gv)
{
    if (ov && n < ratio) {
        if (!have_prev) {
            *kvv = 0.0f;
            *gv = -INFINITY;
            return;
        }
        const long r = prev0 + n;
        *kvv = kv[r * W + j];
        *gv = g[r * W + j];
        return;
    }
    const long r = cur0 + (ov ? n - ratio : n);
    const int col = ov ? Dc + j : j;
    *kvv = kv[r * W + col];
    *gv = g[r * W + col];
}

/* One emitted row per block. mode 0 (prefill): row b pools positions of
 * block b (and b-1) of kv/g [s, W]; mode 1 (decode): kv/g are the state. */
__global__ void __launch_bounds__(256)
    cmp_row_kernel(const float *__restrict__ kv, const float *__restrict__ g, int W, int Dc, int ratio, int mode,
                   long pos0, dqc_rope_table rope, int rotate, int ue8m0, float eps, const float *__restrict__ norm,
                   uint64_t bs, float *__restrict__ rows_out)
{
    DQC_DYN_SMEM(float, row);
    const long b = blockIdx.x;
    const int ov = ratio == 4, ncand = ov ? 2 * ratio : ratio;
    long prev0, cur0;
    int have_prev;
    if (mode == 0) {
        cur0 = b * ratio;
        prev0 = (b - 1) * ratio;
        have_prev = b > 0;
    } else {
        cur0 = ov ? ratio : 0;
        prev0 = 0;
        have_prev = 1;
    }
    for (int j = threadIdx.x; j < Dc; j += blockDim.x) {
        float kvv, gv, m = -INFINITY, sum = 0.0f, acc = 0.0f;
        for (int n = 0; n < ncand; n++) {
            cmp_cand(kv, g, W, Dc, ratio, ov, prev0, cur0, have_prev, j, n, &kvv, &gv);
            if (gv > m) m = gv;
        }
        for (int n = 0; n < ncand; n++) {
            cmp_cand(kv, g, W, Dc, ratio, ov, prev0, cur0, have_prev, j, n, &kvv, &gv);
            sum += gv == -INFINITY ? 0.0f : dqc_expf(gv - m);
        }
        for (int n = 0; n < ncand; n++) {
            cmp_cand(kv, g, W, Dc, ratio, ov, prev0, cur0, have_prev, j, n, &kvv, &gv);
            const float e = gv == -INFINITY ? 0.0f : dqc_expf(gv - m);
            acc += kvv * (e / sum);
        }
        row[j] = dqc_rb(bs, DQC_B_CMP_BF16, acc);
    }
    __syncthreads();
    dqc_block_rmsnorm(bs, row, Dc, norm, eps);
    const int r = 2 * rope.half;
    const long pos = pos0 + b * ratio;
    for (int i = threadIdx.x; i < rope.half; i += blockDim.x) {
        float a = row[Dc - r + 2 * i], bb = row[Dc - r + 2 * i + 1];
        dqc_rope_pair(bs, rope, pos, i, 0, &a, &bb);
        row[Dc - r + 2 * i] = a;
        row[Dc - r + 2 * i + 1] = bb;
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
    if (rotate) {
        if (((bs >> DQC_B_IDX_Q_FP4) | (bs >> DQC_B_IDX_K_FP4)) & 1u) dqc_block_hadamard(bs, row, Dc);
        if ((bs >> DQC_B_IDX_K_FP4) & 1u)
            for (int b0 = warp * 32; b0 < Dc; b0 += nwarp * 32)
                dqc_warp_quant_block(row + b0, row + b0, Dc - b0 < 32 ? Dc - b0 : 32, 1, 1);
    } else if ((bs >> DQC_B_CKV_FP8) & 1u) {
        const int nn = Dc - r;
        for (int b0 = warp * 64; b0 < nn; b0 += nwarp * 64)
            dqc_warp_quant_block(row + b0, row + b0, nn - b0 < 64 ? nn - b0 : 64, 0, ue8m0);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < Dc; j += blockDim.x) rows_out[b * Dc + j] = row[j];
}

long dqc_compressor(dqc_ctx *c, uint64_t bs, int ue8m0, const dqc_cmp *cm, dqc_cmp_state *st, const float *x,
                    long s, long start_pos, const dqc_rope_table *rope, double eps, float *rows_out)
{
    const int ratio = cm->ratio, Dc = cm->Dc, ov = ratio == 4;
    const int W = (ov ? 2 : 1) * Dc;
    if (ratio <= 0 || Dc <= 0 || 2 * rope->half > Dc || st->ratio != ratio || st->Dc != Dc)
        return dqc_fail(c, "compressor: ratio %d, Dc %d, rope_dim %d, state (%d, %d) inconsistent", ratio, Dc,
                        2 * rope->half, st->ratio, st->Dc);
    if (cm->rotate && (Dc & (Dc - 1))) return dqc_fail(c, "compressor: rotate needs a power-of-two Dc, got %d", Dc);
    if (start_pos > 0 && s != 1) return dqc_fail(c, "compressor: decode takes one token, got %ld", s);
    if (s <= 0) return 0;
    float *kv = (float *)dqc_alloc(c, sizeof(float) * (size_t)(s * W));
    float *g = (float *)dqc_alloc(c, sizeof(float) * (size_t)(s * W));
    if (!kv || !g) return -1;
    if (dqc_linear(c, bs, ue8m0, &cm->wkv, x, s, kv, -1) || dqc_linear(c, bs, ue8m0, &cm->wgate, x, s, g, -1))
        return -1;
    DQC_LAUNCH(ape_add_kernel, dqc_div_up(s * W, 256), 256, 0, c->stream, g, s, W, cm->ape, ratio, start_pos);
    DQC_CK_LAUNCH(c, "ape_add_kernel");
    const size_t smem = sizeof(float) * (size_t)Dc;
    if (dqc_smem_limit(c, (const void *)cmp_row_kernel, smem, "compressor")) return -1;
    const size_t rowb = sizeof(float) * (size_t)W;
    long nrows = 0;
    if (start_pos == 0) {
        const long cutoff = s - s % ratio, rem = s % ratio, off = ov ? ratio : 0;
        if (ov && cutoff >= ratio) {
            DQC_CK(c, cudaMemcpyAsync(st->kv, kv + (cutoff - ratio) * W, rowb * ratio, cudaMemcpyDeviceToDevice,
                                      c->stream));
            DQC_CK(c, cudaMemcpyAsync(st->score, g + (cutoff - ratio) * W, rowb * ratio, cudaMemcpyDeviceToDevice,
                                      c->stream));
        }
        if (rem) {
            DQC_CK(c, cudaMemcpyAsync(st->kv + off * W, kv + cutoff * W, rowb * rem, cudaMemcpyDeviceToDevice,
                                      c->stream));
            DQC_CK(c, cudaMemcpyAsync(st->score + off * W, g + cutoff * W, rowb * rem, cudaMemcpyDeviceToDevice,
                                      c->stream));
        }
        nrows = cutoff / ratio;
        if (nrows) {
            DQC_LAUNCH(cmp_row_kernel, (unsigned)nrows, 256, smem, c->stream, kv, g, W, Dc, ratio, 0, 0L, *rope,
                       cm->rotate, ue8m0, (float)eps, cm->norm, bs, rows_out);
            DQC_CK_LAUNCH(c, "cmp_row_kernel");
        }
    } else {
        const long at = (ov ? ratio : 0) + start_pos % ratio;
        DQC_CK(c, cudaMemcpyAsync(st->kv + at * W, kv, rowb, cudaMemcpyDeviceToDevice, c->stream));
        DQC_CK(c, cudaMemcpyAsync(st->score + at * W, g, rowb, cudaMemcpyDeviceToDevice, c->stream));
        if ((start_pos + 1) % ratio == 0) {
            DQC_LAUNCH(cmp_row_kernel, 1u, 256, smem, c->stream, st->kv, st->score, W, Dc, ratio, 1,
                       start_pos + 1 - ratio, *rope, cm->rotate, ue8m0, (float)eps, cm->norm, bs, rows_out);
            DQC_CK_LAUNCH(c, "cmp_row_kernel");
            if (ov) {   /* the whole current block becomes the previous one */
                DQC_CK(c, cudaMemcpyAsync(st->kv, st->kv + ratio * W, rowb * ratio, cudaMemcpyDeviceToDevice,
                                          c->stream));
                DQC_CK(c, cudaMemcpyAsync(st->score, st->score + ratio * W, rowb * ratio, cudaMemcpyDeviceToDevice,
                                          c->stream));
            }
            nrows = 1;
        }
    }
    return nrows;
}
