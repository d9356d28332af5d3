/*
 * linear.c - y = W x for every weight format, with the reference's block
 * accumulation structure.
 *
 * Mirrors model.py:linear and kernel.py fp8_gemm_kernel / fp4_gemm_kernel:
 *  - BF16 / F32 / F64 weights: one dot over K (FP32 accumulation in the
 *    source; here the working width in the fixed rdot order).
 *  - FP8 weights: the activation is act_quant'ed per 128 (boundary
 *    gemm_act_fp8); per 128-wide K block the block dot (exact at the working
 *    width, the tensor core's in-block order is unspecified) is scaled by
 *    sa[kb]*sw[n/128][kb] and added to a second accumulator, in kb order.
 *  - FP4 weights: the same with 32-wide blocks, scale sa[kb/4] * sw[n][kb].
 * Weight rows are decoded on the fly (no dequantized copy); the output is
 * rounded at boundary `out_b` (-1: no rounding, the FP32-math linears).
 * OpenMP splits output rows only, so each y element has one fixed order.
 */
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"

static double w_scale(const dsv4q_weight *w, int64_t i)
{
    if (w->scale_dtype == DSV4Q_DT_F32) return ((const float *)w->scale)[i];
    return dsv4q_e8m0_decode(((const uint8_t *)w->scale)[i]);
}

/* Decode row o of W into wrow (codes only; block scales are applied by the
 * caller). */
static void decode_row(const dsv4q_weight *w, int64_t o, real *wrow)
{
    const int64_t K = w->in;
    switch (w->fmt) {
    case DSV4Q_WF_F32: {
        const float *p = (const float *)w->data + o * K;
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)p[k];
        break;
    }
    case DSV4Q_WF_F64: {
        const double *p = (const double *)w->data + o * K;
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)p[k];
        break;
    }
    case DSV4Q_WF_BF16: {
        const uint16_t *p = (const uint16_t *)w->data + o * K;
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)dsv4q_bf16_to_f32(p[k]);
        break;
    }
    case DSV4Q_WF_FP8: {
        const uint8_t *p = (const uint8_t *)w->data + o * K;
        const double *t = dsv4q_e4m3_table();
        for (int64_t k = 0; k < K; k++) wrow[k] = (real)t[p[k]];
        break;
    }
    case DSV4Q_WF_FP4: {
        const uint8_t *p = (const uint8_t *)w->data + o * (K / 2);
        const double *t = dsv4q_e2m1_pair_table();
        for (int64_t b = 0; b < K / 2; b++) {
            wrow[2 * b] = (real)t[2 * p[b]];
            wrow[2 * b + 1] = (real)t[2 * p[b] + 1];
        }
        break;
    }
    default:
        for (int64_t k = 0; k < K; k++) wrow[k] = NAN;
    }
}

int X(dsv4q_linear)(uint64_t bs, int ue8m0, const dsv4q_weight *W, const real *x, long s,
                    real *y, int out_b)
{
    const int64_t K = W->in, N = W->out;
    const int quant = W->fmt == DSV4Q_WF_FP8 || W->fmt == DSV4Q_WF_FP4;
    const int act_q = quant && ((bs >> DSV4Q_B_GEMM_ACT_FP8) & 1u);
    const int64_t nab = (K + 127) / 128;     /* activation blocks of 128 */
    real *xq = NULL, *xs = NULL;
    int rc = 0;

    if (act_q) {
        xq = malloc(sizeof(real) * (size_t)(s * K));
        xs = malloc(sizeof(real) * (size_t)(s * nab));
        if (!xq || !xs) { free(xq); free(xs); return -1; }
        for (long t = 0; t < s; t++)
            X(dsv4q_act_quant_codes)(x + t * K, K, 128, ue8m0, xq + t * K, xs + t * nab);
    }
    const real *xa = act_q ? xq : x;

    #pragma omp parallel
    {
        real *wrow = malloc(sizeof(real) * (size_t)K);
        real *srow = malloc(sizeof(real) * (size_t)(K / 32 + 1));
        if (!wrow || !srow) {
            #pragma omp atomic write
            rc = -1;
        }
        #pragma omp for schedule(static)
        for (int64_t o = 0; o < N; o++) {
            if (!wrow || !srow) continue;
            decode_row(W, o, wrow);
            /* block scales of this row, decoded once for all tokens */
            if (W->fmt == DSV4Q_WF_FP8)
                for (int64_t kb = 0; kb < nab; kb++) srow[kb] = (real)w_scale(W, (o / 128) * nab + kb);
            else if (W->fmt == DSV4Q_WF_FP4)
                for (int64_t kb = 0; kb < K / 32; kb++) srow[kb] = (real)w_scale(W, o * (K / 32) + kb);
            /* tokens in pairs: rdot2 loads the weight row once for both
             * and gives each token exactly rdot's result */
            for (long t = 0; t < s; t += 2) {
                const int two = t + 1 < s;
                const real *x0 = xa + t * K, *x1 = two ? xa + (t + 1) * K : x0;
                real acc0 = 0, acc1 = 0;
                if (W->fmt == DSV4Q_WF_FP8) {
                    for (int64_t kb = 0; kb * 128 < K; kb++) {
                        int64_t k0 = kb * 128, len = K - k0 < 128 ? K - k0 : 128;
                        real d0, d1 = 0;
                        if (two) rdot2(wrow + k0, x0 + k0, x1 + k0, len, &d0, &d1);
                        else d0 = rdot(wrow + k0, x0 + k0, len);
                        real sc0 = srow[kb], sc1 = srow[kb];
                        if (act_q) {
                            sc0 = xs[t * nab + kb] * sc0;
                            if (two) sc1 = xs[(t + 1) * nab + kb] * sc1;
                        }
                        acc0 += d0 * sc0;
                        acc1 += d1 * sc1;
                    }
                } else if (W->fmt == DSV4Q_WF_FP4) {
                    for (int64_t kb = 0; kb * 32 < K; kb++) {
                        int64_t k0 = kb * 32;
                        real d0, d1 = 0, sw = srow[kb];
                        if (two) rdot2(wrow + k0, x0 + k0, x1 + k0, 32, &d0, &d1);
                        else d0 = rdot(wrow + k0, x0 + k0, 32);
                        acc0 += act_q ? (d0 * xs[t * nab + kb / 4]) * sw : d0 * sw;
                        if (two) acc1 += act_q ? (d1 * xs[(t + 1) * nab + kb / 4]) * sw : d1 * sw;
                    }
                } else if (two) {
                    rdot2(wrow, x0, x1, K, &acc0, &acc1);
                } else {
                    acc0 = rdot(wrow, x0, K);
                }
                y[t * N + o] = out_b >= 0 ? rb(bs, out_b, acc0) : acc0;
                if (two) y[(t + 1) * N + o] = out_b >= 0 ? rb(bs, out_b, acc1) : acc1;
            }
        }
        free(wrow);
        free(srow);
    }
    free(xq);
    free(xs);
    return rc;
}
