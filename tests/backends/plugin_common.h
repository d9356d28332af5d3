/*
 * plugin_common.h - shared bits of the test plugins (tests/backends/):
 * each plugin is one self-contained .so built by `make test` into
 * build/plugins/, including only the ABI header, as a real engine would.
 */
#ifndef DSV4Q_TEST_PLUGIN_COMMON_H
#define DSV4Q_TEST_PLUGIN_COMMON_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "harness/dsv4q_backend.h"   /* the forwarding header (old plugins), or the v1 copy (tests/backends/v1) */

/* RNE float -> BF16 code (finite inputs). */
static inline uint16_t tp_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float tp_bf16_f(uint16_t c)
{
    uint32_t u = (uint32_t)c << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline int64_t tp_numel(const dsv4q_bt *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return t->ndim ? n : 0;
}

/* RMSNORM, source profile: FP32 math (double accumulation here), output
 * stored as BF16 codes (ABI option b). */
static inline void tp_rmsnorm(const dsv4q_bcall *c, double gain)
{
    const float *x = c->in[0].data, *w = c->in[1].data;
    const int64_t rows = c->in[0].shape[0], d = c->in[0].shape[1];
    uint16_t *y = c->out[0].data;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
        double inv = 1.0 / sqrt(ss / (double)d + c->param[0]);
        for (int64_t i = 0; i < d; i++) y[r * d + i] = tp_bf16((float)(gain * w[i] * (x[r * d + i] * inv)));
    }
    c->out[0].dtype = DSV4Q_BT_BF16;
}

/* HC_POST: Y_k = post_k x + sum_j C[j][k] X_j, BF16-representable F32
 * values (ABI option a). */
static inline void tp_hc_post(const dsv4q_bcall *c)
{
    const float *x = c->in[0].data, *X = c->in[1].data, *post = c->in[2].data, *comb = c->in[3].data;
    const int64_t s = c->in[1].shape[0], hc = c->in[1].shape[1], d = c->in[1].shape[2];
    float *Y = c->out[0].data;
    for (int64_t t = 0; t < s; t++)
        for (int64_t k = 0; k < hc; k++)
            for (int64_t i = 0; i < d; i++) {
                double acc = (double)post[t * hc + k] * x[t * d + i];
                for (int64_t j = 0; j < hc; j++) acc += (double)comb[(t * hc + j) * hc + k] * X[(t * hc + j) * d + i];
                Y[(t * hc + k) * d + i] = tp_bf16_f(tp_bf16((float)acc));
            }
}

#endif
