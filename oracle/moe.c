/*
 * moe.c - MoE gate, SwiGLU experts, accumulation order.
 *
 * Mirrors model.py:Gate.forward, Expert.forward and MoE.forward.
 * Gate (FP32): z = W_g x; sqrtsoftplus: sc = sqrt(softplus(z)) with softplus
 * = log1p(exp(z)) below the threshold 20 and z above it (torch). Selection:
 * hash layers take tid2eid[token]; others the top-k of sc + bias (ties: lower
 * expert id first). Weights: sc of the chosen experts (no bias), divided by
 * their sum (in pick order), times route_scale. Documented edge case: if
 * every chosen sc underflows to 0 the weights are 1/k each (the reference
 * would divide 0/0).
 * V4.1's gate (dsv4q_moe_gate41, oracle/ops41.inc) shares the score
 * function and the selection: logits / gate_temp first, the renorm
 * w / (sum + 1e-20) only with norm_topk_prob and k > 1, never hash routing.
 * Expert: g = w1 x, u = w3 x (BF16 outputs, linear_bf16); u clamped to
 * [-L, L], g to (-inf, L] when swiglu_limit L > 0; h = silu(g)*u*weight in
 * FP32, stored BF16 (moe_bf16) before w2's act-quant; y_e = w2 h.
 * Output: FP32 sum over the chosen experts in ASCENDING expert id, then
 * + shared_expert(x), stored (moe_bf16).
 */
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/ops.h"
#include "oracle/ops41.h"

static real score_fn(const char *f, real z)
{
    if (f[0] == 's' && f[1] == 'i') return RC(1) / (RC(1) + R_EXP(-z));   /* sigmoid */
    real sp = z > RC(20) ? z : R_LOG1P(R_EXP(z));
    return R_SQRT(sp);
}

/* ix [k] = the top-k of sc + bias (bias NULL: 0), ties to the lower expert
 * id; n_exp <= DSV4Q_MAX_EXPERTS (the gates check). */
static void pick_topk(const real *sc, const real *bias, int n_exp, int k, int32_t *ix)
{
    unsigned char used[DSV4Q_MAX_EXPERTS] = {0};
    for (int j = 0; j < k; j++) {
        int best = -1;
        real bv = 0;
        for (int e = 0; e < n_exp; e++) {
            if (used[e]) continue;
            real v = sc[e] + (bias ? bias[e] : RC(0));
            if (best < 0 || v > bv) {
                best = e;
                bv = v;
            }
        }
        used[best] = 1;
        ix[j] = best;
    }
}

/* The score function over one row of n_exp logits, in place. */
static void scores_row(const char *score_func, real *sc, int n_exp)
{
    if (strcmp(score_func, "softmax") == 0) {
        real m = sc[0], sum = 0;
        for (int e = 1; e < n_exp; e++)
            if (sc[e] > m) m = sc[e];
        for (int e = 0; e < n_exp; e++) {
            sc[e] = R_EXP(sc[e] - m);
            sum += sc[e];
        }
        for (int e = 0; e < n_exp; e++) sc[e] /= sum;
    } else {
        for (int e = 0; e < n_exp; e++) sc[e] = score_fn(score_func, sc[e]);
    }
}

int X(dsv4q_moe_gate)(const real *x, long s, long d, const dsv4q_weight *W, const real *bias,
                      const int32_t *tid2eid, const int32_t *ids, int n_exp, int k,
                      const char *score_func, double route_scale, real *weights, int32_t *indices)
{
    if (n_exp < 1 || n_exp > DSV4Q_MAX_EXPERTS || k < 1 || k > n_exp) return -1;
    real *z = malloc(sizeof(real) * (size_t)(s * n_exp));
    if (!z || X(dsv4q_linear)(0, 0, W, x, s, z, -1)) { free(z); return -1; }
    (void)d;
    int softmax = strcmp(score_func, "softmax") == 0;
    for (long t = 0; t < s; t++) {
        real *sc = z + t * n_exp;
        scores_row(score_func, sc, n_exp);
        int32_t *ix = indices + t * k;
        if (tid2eid) {
            for (int j = 0; j < k; j++) ix[j] = tid2eid[(long)ids[t] * k + j];
        } else {
            pick_topk(sc, bias, n_exp, k, ix);
        }
        real *w = weights + t * k, sum = 0;
        for (int j = 0; j < k; j++) { w[j] = sc[ix[j]]; sum += w[j]; }
        for (int j = 0; j < k; j++) {
            if (!softmax) w[j] = sum > 0 ? w[j] / sum : RC(1) / (real)k;
            w[j] *= RC(route_scale);
        }
    }
    free(z);
    return 0;
}

int X(dsv4q_moe_gate41)(const real *x, long s, long d, const dsv4q_weight *W, const real *bias, int n_exp, int k,
                        const char *score_func, double gate_temp, int norm_topk_prob, double route_scale, real *weights,
                        int32_t *indices)
{
    if (n_exp < 1 || n_exp > DSV4Q_MAX_EXPERTS || k < 1 || k > n_exp) return -1;
    real *z = malloc(sizeof(real) * (size_t)(s * n_exp > 0 ? s * n_exp : 1));
    if (!z || X(dsv4q_linear)(0, 0, W, x, s, z, -1)) {
        free(z);
        return -1;
    }
    (void)d;
    const real temp = RC(gate_temp);
    for (long t = 0; t < s; t++) {
        real *sc = z + t * n_exp;
        for (int e = 0; e < n_exp; e++) sc[e] = sc[e] / temp;
        scores_row(score_func, sc, n_exp);
        int32_t *ix = indices + t * k;
        pick_topk(sc, bias, n_exp, k, ix);
        real *w = weights + t * k, sum = 0;
        for (int j = 0; j < k; j++) {
            w[j] = sc[ix[j]];
            sum += w[j];
        }
        const real den = sum + RC(1e-20); /* the literal of the reference, not norm_eps */
        for (int j = 0; j < k; j++) {
            if (norm_topk_prob && k > 1) w[j] = w[j] / den;
            w[j] *= RC(route_scale);
        }
    }
    free(z);
    return 0;
}

int X(dsv4q_expert)(uint64_t bs, int ue8m0, const dsv4q_expert_w *E, const real *x, long n,
                    const real *weight, double limit, real *y)
{
    const long I = E->w1.out;
    real *g = malloc(sizeof(real) * (size_t)(n * I));
    real *u = malloc(sizeof(real) * (size_t)(n * I));
    int rc = -1;
    if (!g || !u) goto out;
    if (X(dsv4q_linear)(bs, ue8m0, &E->w1, x, n, g, DSV4Q_B_LINEAR_BF16)) goto out;
    if (X(dsv4q_linear)(bs, ue8m0, &E->w3, x, n, u, DSV4Q_B_LINEAR_BF16)) goto out;
    for (long t = 0; t < n; t++)
        for (long i = 0; i < I; i++) {
            real gv = g[t * I + i], uv = u[t * I + i];
            if (limit > 0) {
                real L = RC(limit);
                uv = uv < -L ? -L : (uv > L ? L : uv);
                gv = gv > L ? L : gv;
            }
            real h = (gv / (RC(1) + R_EXP(-gv))) * uv;
            if (weight) h = weight[t] * h;
            g[t * I + i] = rb(bs, DSV4Q_B_MOE_BF16, h);
        }
    rc = X(dsv4q_linear)(bs, ue8m0, &E->w2, g, n, y, DSV4Q_B_LINEAR_BF16);
out:
    free(g);
    free(u);
    return rc;
}

int X(dsv4q_moe)(uint64_t bs, int ue8m0, const dsv4q_expert_w *experts, int n_exp,
                 const dsv4q_expert_w *shared, const real *x, long s, long d, const real *weights,
                 const int32_t *indices, int k, double limit, real *y)
{
    real *acc = calloc((size_t)(s * d), sizeof(real));
    real *xe = malloc(sizeof(real) * (size_t)(s * d));
    real *ye = malloc(sizeof(real) * (size_t)(s * d));
    real *we = malloc(sizeof(real) * (size_t)s);
    long *rows = malloc(sizeof(long) * (size_t)s);
    int rc = -1;
    if (!acc || !xe || !ye || !we || !rows) goto out;
    for (int e = 0; e < n_exp; e++) {      /* ascending expert id: the sum order */
        long n = 0;
        for (long t = 0; t < s; t++)
            for (int j = 0; j < k; j++)
                if (indices[t * k + j] == e) {
                    rows[n] = t;
                    we[n] = weights[t * k + j];
                    memcpy(xe + n * d, x + t * d, sizeof(real) * (size_t)d);
                    n++;
                }
        if (!n) continue;
        if (X(dsv4q_expert)(bs, ue8m0, &experts[e], xe, n, we, limit, ye)) goto out;
        for (long r = 0; r < n; r++)
            for (long i = 0; i < d; i++) acc[rows[r] * d + i] += ye[r * d + i];
    }
    if (X(dsv4q_expert)(bs, ue8m0, shared, x, s, NULL, limit, ye)) goto out;
    for (long i = 0; i < s * d; i++) y[i] = rb(bs, DSV4Q_B_MOE_BF16, acc[i] + ye[i]);
    rc = 0;
out:
    free(acc);
    free(xe);
    free(ye);
    free(we);
    free(rows);
    return rc;
}
