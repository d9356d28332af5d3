/*
 * cpuref_moe.c - cpu-ref's MoE gate and SwiGLU expert.
 *
 * Gate (FP32): z = W x on cpu-ref's GEMM; sqrt(softplus(z)) with torch's
 * threshold 20, sigmoid or softmax; selection by k argmax passes over
 * sc + bias (a strictly larger value wins, so ties go to the lower expert
 * id), or the hash table; weights = sc of the chosen experts over their
 * sum (not for softmax), times route_scale; 1/k each when the sum is 0.
 * Expert: g = w1 x, u = w3 x (BF16 GEMM outputs on the stored FP4/FP8
 * bytes), u clamped to [-L, L] and g to (-inf, L] when L > 0,
 * h = BF16(weight * (silu(g) * u)), y = w2 h (BF16).
 *
 * Mutants: swiglu_no_clamp ignores L; fp4_as_int8 decodes the packed
 * expert bytes as signed integers (cpuref_gemm.c); ue8m0_log2f reaches the
 * act-quant of both GEMM inputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/kernels.h"

int cpuref_moe_gate(const float *x, long s, long d, const cpuref_w *W, const float *bias,
                    const int32_t *tid2eid, long vocab, const int32_t *ids, int n_exp, int k,
                    int score_func, float route_scale, float *weights, int32_t *indices)
{
    (void)d;
    float *z = malloc(sizeof(float) * (size_t)(s * n_exp + 1));
    unsigned char *used = malloc((size_t)n_exp + 1);
    if (!z || !used || cpuref_linear(W, x, s, 0, 0, z, CPUREF_OK)) { free(z); free(used); return -1; }
    for (long t = 0; t < s; t++) {
        float *sc = z + t * n_exp;
        if (score_func == 2) {
            float mx = -INFINITY, sum = 0;
            for (int e = 0; e < n_exp; e++) mx = fmaxf(mx, sc[e]);
            for (int e = 0; e < n_exp; e++) { sc[e] = expf(sc[e] - mx); sum += sc[e]; }
            const float inv = 1.0f / sum;
            for (int e = 0; e < n_exp; e++) sc[e] *= inv;
        } else if (score_func == 1) {
            for (int e = 0; e < n_exp; e++) sc[e] = 1.0f / (1.0f + expf(-sc[e]));
        } else {
            for (int e = 0; e < n_exp; e++) sc[e] = sqrtf(sc[e] > 20.0f ? sc[e] : log1pf(expf(sc[e])));
        }
        int32_t *ix = indices + t * k;
        if (tid2eid) {
            long id = ids[t];
            if (id < 0 || id >= vocab) { free(z); free(used); return -1; }
            for (int j = 0; j < k; j++) ix[j] = tid2eid[id * k + j];
        } else {
            memset(used, 0, (size_t)n_exp);
            for (int j = 0; j < k; j++) {
                int best = -1;
                float bv = -INFINITY;
                for (int e = 0; e < n_exp; e++) {
                    if (used[e]) continue;
                    float v = bias ? sc[e] + bias[e] : sc[e];
                    if (best < 0 || v > bv) { best = e; bv = v; }
                }
                used[best] = 1;
                ix[j] = best;
            }
        }
        float *w = weights + t * k, sum = 0;
        for (int j = 0; j < k; j++) {
            int e = ix[j];
            w[j] = (e >= 0 && e < n_exp) ? sc[e] : 0.0f;
            sum += w[j];
        }
        for (int j = 0; j < k; j++) {
            if (score_func != 2) w[j] = sum > 0 ? w[j] / sum : 1.0f / (float)k;
            w[j] *= route_scale;
        }
    }
    free(z);
    free(used);
    return 0;
}

/* V4.1's gate: logits / gate_temp, the score function, the top-k of
 * score + bias by repeated arg-max (the first of equal values wins: the
 * lower id), weights renormalised by sum + 1e-20 only when norm and k > 1
 * (softmax too), then route_scale. */
int cpuref_moe_gate41(const float *x, long s, const cpuref_w *W, const float *bias, int n_exp, int k, int score_func,
                      float gate_temp, int norm, float route_scale, float *weights, int32_t *indices)
{
    float *z = malloc(sizeof(float) * (size_t)(s * n_exp + 1));
    unsigned char *used = malloc((size_t)n_exp + 1);
    if (!z || !used || cpuref_linear(W, x, s, 0, 0, z, CPUREF_OK)) {
        free(z);
        free(used);
        return -1;
    }
    for (long t = 0; t < s; t++) {
        float *sc = z + t * n_exp;
        for (int e = 0; e < n_exp; e++) sc[e] = sc[e] / gate_temp;
        if (score_func == 2) {
            float mx = -INFINITY, sum = 0;
            for (int e = 0; e < n_exp; e++) mx = fmaxf(mx, sc[e]);
            for (int e = 0; e < n_exp; e++) {
                sc[e] = expf(sc[e] - mx);
                sum += sc[e];
            }
            const float inv = 1.0f / sum;
            for (int e = 0; e < n_exp; e++) sc[e] *= inv;
        } else if (score_func == 1) {
            for (int e = 0; e < n_exp; e++) sc[e] = 1.0f / (1.0f + expf(-sc[e]));
        } else {
            for (int e = 0; e < n_exp; e++) sc[e] = sqrtf(sc[e] > 20.0f ? sc[e] : log1pf(expf(sc[e])));
        }
        int32_t *ix = indices + t * k;
        memset(used, 0, (size_t)n_exp);
        for (int j = 0; j < k; j++) {
            int best = -1;
            float bv = -INFINITY;
            for (int e = 0; e < n_exp; e++) {
                if (used[e]) continue;
                const float v = bias ? sc[e] + bias[e] : sc[e];
                if (best < 0 || v > bv) {
                    best = e;
                    bv = v;
                }
            }
            used[best] = 1;
            ix[j] = best;
        }
        float *w = weights + t * k, sum = 0;
        for (int j = 0; j < k; j++) sum += w[j] = sc[ix[j]];
        const float den = sum + 1e-20f;
        for (int j = 0; j < k; j++) w[j] = (norm && k > 1 ? w[j] / den : w[j]) * route_scale;
    }
    free(z);
    free(used);
    return 0;
}

int cpuref_expert(const float *x, long n, const cpuref_w *w1, const cpuref_w *w2, const cpuref_w *w3,
                  const float *weight, float limit, int ue8m0, float *y, int mut)
{
    const long I = w1->out;
    float *g = malloc(sizeof(float) * (size_t)(n * I + 1));
    float *u = malloc(sizeof(float) * (size_t)(n * I + 1));
    int rc = -1;
    if (!g || !u) goto out;
    if (cpuref_linear(w1, x, n, ue8m0, 1, g, mut) || cpuref_linear(w3, x, n, ue8m0, 1, u, mut)) goto out;
    const int clamp = limit > 0 && mut != CPUREF_M_SWIGLU_NO_CLAMP;
    for (long t = 0; t < n; t++) {
        const float wt = weight ? weight[t] : 1.0f;
        for (long i = 0; i < I; i++) {
            float gv = g[t * I + i], uv = u[t * I + i];
            if (clamp) {
                uv = fminf(fmaxf(uv, -limit), limit);
                gv = fminf(gv, limit);
            }
            float h = (gv / (1.0f + expf(-gv))) * uv;
            g[t * I + i] = cpuref_bf16(wt * h);
        }
    }
    rc = cpuref_linear(w2, g, n, ue8m0, 1, y, mut);
out:
    free(g);
    free(u);
    return rc;
}
