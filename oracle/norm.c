/*
 * norm.c - RMSNorm and the attention q head norm.
 *
 * Mirrors model.py:RMSNorm.forward (FP32 inside, y = w * (x * rsqrt(mean(x^2)
 * + eps)), cast to storage: boundary norm_bf16) and the per-head
 * `q *= torch.rsqrt(q.square().mean(-1, keepdim=True) + eps)` of
 * Attention.forward, which in the source is five BF16 tensor ops
 * (boundary qnorm_bf16: q^2, mean, +eps, rsqrt, product each rounded).
 */
#include "oracle/real.h"
#include "oracle/ops.h"

void X(dsv4q_rmsnorm)(uint64_t bs, const real *x, long rows, long d, const real *w,
                      double eps, real *y)
{
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const real *v = x + r * d;
        real var = rsumsq(v, d) / (real)d;
        real inv = RC(1) / R_SQRT(var + RC(eps));
        for (long i = 0; i < d; i++)
            y[r * d + i] = rb(bs, DSV4Q_B_NORM_BF16, (w ? w[i] : RC(1)) * (v[i] * inv));
    }
}

void X(dsv4q_qhead_norm)(uint64_t bs, real *q, long rows, long D, double eps)
{
    const int b = DSV4Q_B_QNORM_BF16;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        real *v = q + r * D;
        real sum;
        if ((bs >> b) & 1u) {
            /* q.square() is a BF16 tensor; the mean accumulates those. */
            real s8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            const long nb = D / 8;
            for (long blk = 0; blk < nb; blk++)
                for (int l = 0; l < 8; l++) s8[l] += rbf16(v[blk * 8 + l] * v[blk * 8 + l]);
            sum = ((s8[0] + s8[4]) + (s8[2] + s8[6])) + ((s8[1] + s8[5]) + (s8[3] + s8[7]));
            for (long i = nb * 8; i < D; i++) sum += rbf16(v[i] * v[i]);
        } else {
            sum = rsumsq(v, D);
        }
        real mean = rb(bs, b, sum / (real)D);
        real t = rb(bs, b, mean + RC(eps));
        real inv = rb(bs, b, RC(1) / R_SQRT(t));
        for (long i = 0; i < D; i++) v[i] = rb(bs, b, v[i] * inv);
    }
}
