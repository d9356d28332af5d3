/*
 * linear41.c - V4.1's quantized linears: 32x32 FP8 weight blocks and 1x32
 * activation blocks (model.py linear with fp8_block_size = 32; kernel.py
 * fp8_gemm(block_size=32), fp4_gemm(act_block_size=32)).
 *
 * Owns only the block geometry V4.1 changed; the arithmetic is V4's
 * (oracle/linear.c): act_quant codes per block, the in-block dot in rdot's
 * fixed 8-lane order at the working width, the block-scaled second
 * accumulation in kb order, one rounding at out_b. So a V4 FP8 linear with
 * 128-blocks and this one differ in exactly three places: the activation
 * block (32, not 128), the weight scale index ([o/32][k/32], not
 * [o/128][k/128]) and, for FP4 weights, the activation scale per weight
 * block (sa[kb], not sa[kb/4]).
 *
 * Deliberately simple (one decoded row, rdot per block, OpenMP over output
 * rows): it exists so the V4.1 numerics can be tested before the forward
 * pass is restructured, not to be fast. rdot gives the same bits as the
 * lanes kernel of linear.c (test_linear_kernels checks ldot == rdot), so
 * folding the block size into dsv4q_linear later changes no result.
 * Non-quantized weights go to dsv4q_linear unchanged (they have no blocks).
 */
#include <stdlib.h>
#include "base/unaligned.h"
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/kv41.h"

#define B41 DSV4Q_V41_FP8_BLOCK

static real scale_at(const dsv4q_weight *w, int64_t i)
{
    if (w->scale_dtype == DSV4Q_DT_F32) return (real)dsv4q_ld_f32(w->scale, i);
    return (real)dsv4q_e8m0_decode(((const uint8_t *)w->scale)[i]);
}

/* Codes of row o (E4M3 / E2M1 values, no scale) and its block scales. */
static void decode_row(const dsv4q_weight *W, int64_t o, int64_t nab, real *wrow, real *srow)
{
    const int64_t K = W->in;
    if (W->fmt == DSV4Q_WF_FP8) {
        const uint8_t *c = (const uint8_t *)W->data + o * K;
        const double *t = dsv4q_e4m3_table();
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)t[c[k]];
        for (int64_t kb = 0; kb < nab; kb++) srow[kb] = scale_at(W, (o / B41) * nab + kb);
    } else {
        const uint8_t *c = (const uint8_t *)W->data + o * (K / 2);
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)dsv4q_e2m1_decode(dsv4q_e2m1_nibble(c, (size_t)k));
        for (int64_t kb = 0; kb < K / 32; kb++) srow[kb] = scale_at(W, o * (K / 32) + kb);
    }
}

int X(dsv4q_linear41)(uint64_t bs, int ue8m0, const dsv4q_weight *W, const real *x, long s, real *y, int out_b)
{
    if (W->fmt != DSV4Q_WF_FP8 && W->fmt != DSV4Q_WF_FP4) return X(dsv4q_linear)(bs, ue8m0, W, x, s, y, out_b);
    const int64_t K = W->in, N = W->out, nab = (K + B41 - 1) / B41;
    const int act_q = (int)((bs >> DSV4Q_B_GEMM_ACT_FP8) & 1u);
    real *xq = NULL, *xs = NULL;
    if (act_q) {
        xq = malloc(sizeof(real) * (size_t)(s * K > 0 ? s * K : 1));
        xs = malloc(sizeof(real) * (size_t)(s * nab > 0 ? s * nab : 1));
        if (!xq || !xs) {
            free(xq);
            free(xs);
            return -1;
        }
        for (long t = 0; t < s; t++) X(dsv4q_act_quant_codes)(x + t * K, K, B41, ue8m0, xq + t * K, xs + t * nab);
    }
    const real *xa = act_q ? xq : x;
    int rc = 0;
    #pragma omp parallel
    {
        real *wrow = malloc(sizeof(real) * (size_t)(K > 0 ? K : 1));
        real *srow = malloc(sizeof(real) * (size_t)(nab > 0 ? nab : 1));
        if (!wrow || !srow) {
            #pragma omp atomic write
            rc = -1;
        }
        #pragma omp for schedule(static)
        for (int64_t o = 0; o < N; o++) {
            if (!wrow || !srow) continue;
            decode_row(W, o, nab, wrow, srow);
            for (long t = 0; t < s; t++) {
                const real *xt = xa + t * K;
                real acc = 0;
                for (int64_t kb = 0; kb < nab; kb++) {
                    const int64_t k0 = kb * B41, len = K - k0 < B41 ? K - k0 : B41;
                    const real d = rdot(wrow + k0, xt + k0, (long)len);
                    if (W->fmt == DSV4Q_WF_FP8) {
                        const real sc = act_q ? xs[t * nab + kb] * srow[kb] : srow[kb];
                        acc += d * sc;
                    } else {
                        acc += act_q ? (d * xs[t * nab + kb]) * srow[kb] : d * srow[kb];
                    }
                }
                y[t * N + o] = out_b >= 0 ? rb(bs, out_b, acc) : acc;
            }
        }
        free(wrow);
        free(srow);
    }
    free(xq);
    free(xs);
    return rc;
}
