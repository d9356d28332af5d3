/*
 * engram41.c - ENGRAM41, one V4.1 Engram layer in place on the
 * hyper-connection stream (V4.1 model.py Engram.forward with
 * ParallelEngramEmbedding at world size 1): the table rows of the hash ids
 * (E4M3 codes, one E8M0 scale per 32 of a row; an id outside [0, rows)
 * reads a zero row), kv = wkv e (an FP8 linear with V4.1's 32x32 blocks and
 * 1x32 activation quant, stored BF16), split into key [hc, dim] and value
 * [dim]; per copy c the gate g = sigmoid(copysign(sqrt(max(|dot|, 1e-6)),
 * dot)) of dot = sum(h_c * q_c * k_c * key_c) * rsqrt(mean(h_c^2) + eps) *
 * rsqrt(mean(key_c^2) + eps) / sqrt(dim) (0 for an image token), and
 * h_c += g * value at resid_bf16. The contract is oracle/ops41.inc's.
 */
#include "harness/ops/op.h"
#include "oracle/ops41.h"

DSV4Q_OP_ROW(22, ENGRAM41, engram41, 7, 1, 2)

/* The shapes and stored forms the oracle reads (it indexes the table and
 * wkv's scales by them): 0, or -1 with a message. Run by the adapter too,
 * since dsv4q_oracle_exec does not run .check. */
static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (c->nin < 7 || c->nparam < 2 || !c->in || !c->param) {
        snprintf(err, errlen, "engram41: needs 7 inputs and 2 params");
        return -1;
    }
    const dsv4q_bt *in = c->in;
    if (in[0].ndim != 3 || !in[0].data || in[0].shape[0] < 1 || in[0].shape[1] < 1 || in[0].shape[2] < 1) {
        snprintf(err, errlen, "engram41: h must be a non-empty [s,hc,dim]");
        return -1;
    }
    const int64_t s = in[0].shape[0], hc = in[0].shape[1], dim = in[0].shape[2];
    if (in[1].ndim != 2 || !in[1].data || in[1].dtype != DSV4Q_BT_I32 || in[1].shape[0] != s || in[1].shape[1] < 1) {
        snprintf(err, errlen, "engram41: ids must be I32 [s=%lld,ncols]", (long long)s);
        return -1;
    }
    const int64_t C = in[1].shape[1], rows = in[2].shape[0], hd = in[2].shape[1];
    if (in[2].ndim != 2 || rows < 1 || hd < 32 || hd % 32 || !in[2].raw || in[2].raw_dtype != DSV4Q_BT_F8_E4M3 ||
        !in[2].raw_scale || in[2].scale_dtype != DSV4Q_BT_F8_E8M0 || in[2].scale_shape[0] != rows ||
        in[2].scale_shape[1] != hd / 32) {
        snprintf(err, errlen,
                 "engram41: table must be [rows,hd] (hd a multiple of 32) with its E4M3 codes and E8M0 scales "
                 "[rows,hd/32]");
        return -1;
    }
    const int64_t N = dim * (hc + 1), K = C * hd;
    if (in[3].ndim != 2 || in[3].shape[0] != N || in[3].shape[1] != K || !in[3].raw ||
        in[3].raw_dtype != DSV4Q_BT_F8_E4M3 || !in[3].raw_scale ||
        (in[3].scale_dtype != DSV4Q_BT_F8_E8M0 && in[3].scale_dtype != DSV4Q_BT_F32) ||
        in[3].scale_shape[0] != (N + 31) / 32 || in[3].scale_shape[1] != (K + 31) / 32) {
        snprintf(err, errlen, "engram41: wkv must be FP8 [dim*(hc+1)=%lld,ncols*hd=%lld] with 32x32 block scales",
                 (long long)N, (long long)K);
        return -1;
    }
    for (int i = 4; i < 6; i++)
        if (in[i].ndim != 2 || !in[i].data || in[i].shape[0] != hc || in[i].shape[1] != dim ||
            (in[i].raw && in[i].raw_dtype != DSV4Q_BT_BF16)) {
            snprintf(err, errlen, "engram41: %s must be BF16 [hc=%lld,dim=%lld]", i == 4 ? "q_weight" : "k_weight",
                     (long long)hc, (long long)dim);
            return -1;
        }
    if (in[6].ndim && (in[6].ndim != 1 || !in[6].data || in[6].dtype != DSV4Q_BT_I32 || in[6].shape[0] != s)) {
        snprintf(err, errlen, "engram41: text_mask must be I32 [s=%lld] or empty", (long long)s);
        return -1;
    }
    if (!(c->param[0] > 0) || !isfinite(c->param[0]) || (c->param[1] != 0 && c->param[1] != 1)) {
        snprintf(err, errlen, "engram41: eps = %g must be finite and > 0, ue8m0 = %g 0 or 1", c->param[0], c->param[1]);
        return -1;
    }
    return 0;
}

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    if (check(c, err, errlen)) return -1;
    const dsv4q_bt *in = c->in;
    NEED(0);
    const long s = (long)in[0].shape[0], C = (long)in[1].shape[1], n = (long)dsv4q_bt_numel(&in[0]);
    dsv4q_engram_w w = {.table = in[2].raw,
                        .table_scale = in[2].raw_scale,
                        .rows = in[2].shape[0],
                        .head_dim = (int)in[2].shape[1],
                        .ncols = (int)C,
                        .wkv = dsv4q_op_weight(&in[3]),
                        .q_weight = dsv4q_op_weight(&in[4]),
                        .k_weight = dsv4q_op_weight(&in[5]),
                        .hc = (int)in[0].shape[1],
                        .dim = (int)in[0].shape[2]};
    w.wkv.blk = DSV4Q_FP8_BLOCK_V41;
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(s * C));
    uint8_t *mask = in[6].ndim ? malloc((size_t)s) : NULL;
    int rc = !ids || (in[6].ndim && !mask);
    if (!rc) {
        const int32_t *i32 = in[1].data, *m32 = in[6].data;
        for (long i = 0; i < s * C; i++) ids[i] = i32[i];
        for (long t = 0; mask && t < s; t++) mask[t] = m32[t] != 0;
        memcpy(out[0], a[0], sizeof(real) * (size_t)n); /* in place on the copy */
        rc = X(dsv4q_engram41)(bs, (int)c->param[1], &w, ids, mask, out[0], s, c->param[0]) ? 1 : 0;
    }
    free(ids);
    free(mask);
    return rc;
}
DSV4Q_OP_EXEC(engram41, exec)

#if DSV4Q_OP_ONCE
/* The V4.1 config's norm_eps (io/config_builtin.c flash41-slice). */
#define ENGRAM_EPS 1e-20

/* The table [rows, hd]: E4M3 codes with magnitudes 2^-3 .. 2^2 (an eighth
 * zero), E8M0 scales 2^(e0-1 .. e0+1) per 32 of a row; rows >= tiny_from
 * use e0 = -20 (keys and values ~1e-6: mean(key^2) ~1e-11, far above 1e-20
 * and far below 1e-6). Decoded values as the F32 data. */
static int gen_table(dsv4q_case *c, dsv4q_rng *r, long rows, long hd, long tiny_from)
{
    float *v = dsv4q_case_input(c, 2, DSV4Q_BT_F32, 2, rows, hd, 0);
    uint8_t *code = dsv4q_case_alloc(c, (size_t)(rows * hd)), *sc = dsv4q_case_alloc(c, (size_t)(rows * hd / 32));
    if (!v || !code || !sc) return -1;
    const double *t8 = dsv4q_e4m3_table();
    for (long i = 0; i < rows; i++)
        for (long g = 0; g < hd / 32; g++) {
            const int e = (i >= tiny_from ? -20 : -2) + (int)dsv4q_rng_below(r, 3) - 1;
            const uint8_t se = sc[i * (hd / 32) + g] = (uint8_t)dsv4q_e8m0_encode_exp(e);
            const double scale = dsv4q_e8m0_decode(se);
            for (long k = g * 32; k < g * 32 + 32; k += 4) {
                uint64_t bits = dsv4q_rng_next(r);
                for (int q = 0; q < 4; q++, bits >>= 16) {
                    const uint32_t u = (uint32_t)(bits & 0xFFFF);
                    /* exponent field 4..9 (2^-3 .. 2^2), any mantissa, random sign */
                    uint8_t cd = (uint8_t)(((4 + u % 6) << 3) | ((u >> 3) & 7));
                    if (((u >> 6) & 7) == 0) cd = 0;
                    if (u & 0x8000) cd |= 0x80;
                    code[i * hd + k + q] = cd;
                    v[i * hd + k + q] = (float)(t8[cd] * scale);
                }
            }
        }
    dsv4q_bt *t = &c->in[2];
    t->raw = code;
    t->raw_dtype = DSV4Q_BT_F8_E4M3;
    t->raw_ndim = 2;
    t->raw_shape[0] = rows;
    t->raw_shape[1] = hd;
    t->raw_scale = sc;
    t->scale_dtype = DSV4Q_BT_F8_E8M0;
    t->scale_shape[0] = rows;
    t->scale_shape[1] = hd / 32;
    return 0;
}

/* The gate's dot of copy hv [dim] against u = q * k * key [dim] (FP64,
 * from the case's values): the oracle's formula, eps included. */
static double gate_dot(const float *hv, const double *u, double rk, long dim)
{
    double hu = 0, hh = 0;
    for (long d = 0; d < dim; d++) {
        hu += (double)hv[d] * u[d];
        hh += (double)hv[d] * hv[d];
    }
    return hu / sqrt(hh / (double)dim + ENGRAM_EPS) * rk / sqrt((double)dim);
}

/* Recipe signzero: move each copy of h so its gate's dot is +-(1.5 .. 4) *
 * 1e-3 (random sign): g = 0.5 +- 0.01 .. 0.016, where the sign is all
 * that separates g from 1 - g. key is wkv e in FP64 from the decoded
 * values, rounded to BF16: the act quant of e is exact (e is an E4M3 code
 * times a power of two per 32 and the quant block is those 32), so this is
 * the oracle's key up to the order of the sum. h loses the projection on u,
 * takes the target share of u, is stored, then the largest-|u| elements
 * absorb the storage rounding (a few passes). */
static int sign_zero(dsv4q_case *c, dsv4q_rng *r, float *h, long s, long hc, long dim, long K, int full)
{
    const float *e_all = c->in[2].data, *wkv = c->in[3].data, *qw = c->in[4].data, *kw = c->in[5].data;
    const int32_t *ids = c->in[1].data;
    const long C = c->in[1].shape[1], hd = c->in[2].shape[1], rows = c->in[2].shape[0];
    double *e = malloc(sizeof(double) * (size_t)K), *u = malloc(sizeof(double) * (size_t)dim),
           *hp = malloc(sizeof(double) * (size_t)dim);
    if (!e || !u || !hp) {
        free(e), free(u), free(hp);
        return -1;
    }
    for (long t = 0; t < s; t++) {
        for (long j = 0; j < C; j++) {
            const long id = ids[t * C + j];
            for (long k = 0; k < hd; k++) e[j * hd + k] = id >= 0 && id < rows ? e_all[id * hd + k] : 0;
        }
        for (long cp = 0; cp < hc; cp++) {
            float *hv = h + (t * hc + cp) * dim;
            double kk = 0, uu = 0, hu = 0, hh = 0;
            for (long d = 0; d < dim; d++) {
                const float *wr = wkv + (cp * dim + d) * K;
                double acc = 0;
                for (long k = 0; k < K; k++) acc += e[k] * wr[k];
                const double key = dsv4q_gen_bf16(acc);
                kk += key * key;
                u[d] = (double)qw[cp * dim + d] * kw[cp * dim + d] * key;
                uu += u[d] * u[d];
                hu += (double)hv[d] * u[d];
            }
            if (uu == 0) continue;
            const double rk = 1 / sqrt(kk / (double)dim + ENGRAM_EPS);
            const double tau = (1.5e-3 + 2.5e-3 * dsv4q_rng_u01(r)) * (dsv4q_rng_below(r, 2) ? 1 : -1);
            for (long d = 0; d < dim; d++) {
                hp[d] = hv[d] - hu / uu * u[d];
                hh += hp[d] * hp[d];
            }
            const double beta = tau * sqrt((double)dim) * sqrt(hh / (double)dim) / (rk * uu);
            for (long d = 0; d < dim; d++) hv[d] = dsv4q_gen_store(full, hp[d] + beta * u[d]);
            for (int pass = 0; pass < 4; pass++) {
                const double dot = gate_dot(hv, u, rk, dim);
                if (fabs(dot - tau) < 1e-4) break;
                /* the element whose stored correction lands closest to tau */
                long best = -1;
                float bestv = 0;
                double bestr = fabs(dot - tau), rh = sqrt(hh / (double)dim);
                for (long d = 0; d < dim; d++) {
                    if (u[d] * u[d] * (double)dim < uu) continue; /* only |u| above its RMS */
                    const float nv = dsv4q_gen_store(full, hv[d] + (tau - dot) * sqrt((double)dim) * rh / (rk * u[d]));
                    const double nd = dot + ((double)nv - hv[d]) * u[d] * rk / (rh * sqrt((double)dim));
                    if (fabs(nd - tau) < bestr) bestr = fabs(nd - tau), best = d, bestv = nv;
                }
                if (best < 0) break;
                hv[best] = bestv;
            }
        }
    }
    free(e), free(u), free(hp);
    return 0;
}

static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    const long s = dsv4q_kv_int(kv, "s", 1, 64, &bad), hc = dsv4q_kv_int(kv, "hc", 1, 16, &bad),
               dim = dsv4q_kv_int(kv, "dim", 1, 1 << 14, &bad), hd = dsv4q_kv_int(kv, "hd", 32, 4096, &bad),
               C = dsv4q_kv_int(kv, "ncols", 1, 64, &bad), rows = dsv4q_kv_int(kv, "rows", 2, 1 << 22, &bad);
    if (bad || hd % 32) {
        snprintf(err, errlen, "%s: bad s/hc/dim/hd/ncols/rows (hd a multiple of 32)", c->key);
        return -1;
    }
    RECIPES("normal", "signzero", "nearzero", "image", "edges", "f32");
    const char *rc = c->recipe;
    const int nz = !strcmp(rc, "nearzero"), full = dsv4q_gen_full(rc);
    const long K = C * hd, N = dim * (hc + 1), half = rows / 2;
    /* ids: uniform rows; nearzero: even tokens read the lower half of the
     * table, odd tokens the upper half, whose scales are tiny; edges: the
     * first token cycles through the edges and outside ids (a zero row),
     * the last one reads only outside ids (e = 0: key and value 0) */
    int32_t *ids = dsv4q_case_input(c, 1, DSV4Q_BT_I32, 2, s, C, 0);
    NEEDP(ids);
    const int32_t edge[] = {0, (int32_t)(rows - 1), -1, (int32_t)rows, INT32_MIN, INT32_MAX, 1, (int32_t)(rows - 2)};
    for (long t = 0; t < s; t++)
        for (long j = 0; j < C; j++) {
            int32_t id = (int32_t)dsv4q_rng_below(r, nz ? half : rows);
            if (nz && t % 2) id += (int32_t)half;
            if (!strcmp(rc, "edges") && t == 0 && j % 2 == 0) id = edge[(j / 2) % 8];
            if (!strcmp(rc, "edges") && t == s - 1 && s > 1) id = j % 2 ? -1 - (int32_t)j : (int32_t)(rows + j);
            ids[t * C + j] = id;
        }
    if (gen_table(c, r, rows, hd, nz ? half : rows)) return dsv4q_case_oom(c, err, errlen);
    if (dsv4q_gen_weight(c, 3, r, "fp8b32", N, K, 1.0 / sqrt((double)K), "normal", err, errlen)) return -1;
    if (dsv4q_gen_weight(c, 4, r, "bf16", hc, dim, 1.0, "normal", err, errlen) ||
        dsv4q_gen_weight(c, 5, r, "bf16", hc, dim, 1.0, "normal", err, errlen))
        return -1;
    /* h: BF16 gaussians (full mantissas for f32); nearzero: rms 2^-14 on
     * even tokens (mean(h^2) ~4e-9: eps 1e-6 would shrink the dot 16x),
     * 2^-24 on odd ones (below the tiny values they add) */
    float *h = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, s, hc, dim);
    NEEDP(h);
    for (long t = 0; t < s; t++)
        dsv4q_gen_act(r, full ? "f32" : "normal", h + t * hc * dim, hc, dim, nz ? ldexp(1, t % 2 ? -24 : -14) : 1.0,
                      dim);
    if (!strcmp(rc, "signzero") && sign_zero(c, r, h, s, hc, dim, K, full)) return dsv4q_case_oom(c, err, errlen);
    /* text_mask: image tokens at even positions (image); else empty */
    if (!strcmp(rc, "image")) {
        int32_t *m = dsv4q_case_input(c, 6, DSV4Q_BT_I32, 1, s, 0, 0);
        NEEDP(m);
        for (long t = 0; t < s; t++) m[t] = t % 2;
    } else dsv4q_case_input(c, 6, DSV4Q_BT_I32, 0, 0, 0, 0);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 3, s, hc, dim);
    c->param[0] = ENGRAM_EPS;
    c->param[1] = 1;
    return 0;
}

DSV4Q_OP_DESC(
    engram41,
    .in = {T("h", "[s,hc,dim]", "F32", "the hyper-connection stream entering the block"),
           T("ids", "[s,ncols]", "I32", "hash ids (table rows, layer offsets included); outside [0,rows): a zero row"),
           T("table", "[rows,hd]", "F32 + raw",
             "embed: raw E4M3 codes + E8M0 scale [rows,hd/32] (one per 32 of a row)"),
           T("wkv", "[(hc+1)*dim,ncols*hd]", "F32 + raw",
             "F8_E4M3 + E8M0 scale [ceil(N/32),ceil(K/32)] (32x32 blocks); rows: key copies 0..hc-1, then value"),
           T("q_weight", "[hc,dim]", "F32 + raw", "BF16"), T("k_weight", "[hc,dim]", "F32 + raw", "BF16"),
           T("text_mask", "[s]", "I32", "0 = image token (gate 0, h passes through), or empty: all text")},
    .out = {T("h_out", "[s,hc,dim]", "F32|BF16", "h + g * value per copy")},
    .param = {"eps: norm_eps of the per-copy normalisation (1e-20 in V4.1)",
              "ue8m0: 1 = power-of-two act_quant scales of wkv's input (shipped configs)"},
    .oracle = "oracle/engram41.c dsv4q_engram41", .reference = "V4.1 model.py Engram.forward, ParallelEngramEmbedding",
    .boundaries = "gemm_act_fp8 (wkv's input, per 32), linear_bf16 (kv), resid_bf16 (h_out)",
    .notes = "The gate math in FP32: per copy rsqrt(mean(h_c^2)+eps)*rsqrt(mean(key_c^2)+eps) (not over the flattened "
             "stream), dot/sqrt(dim), g = sigmoid(copysign(sqrt(max(|dot|,1e-6)),dot)). text_mask is I32 (the ABI's "
             "inputs are F32 or I32).",
    .keys = {{"s", "2"}, {"hc", "4"}, {"dim", "5120"}, {"hd", "256"}, {"ncols", "24"}, {"rows", "25874"}},
    .cases =
        (const dsv4q_case_entry[]){
            {"engram41(s=2,hc=4,dim=5120,hd=256,ncols=24,rows=25874,recipe=normal,seed=1)", SET_FLASH41},
            {"engram41(s=2,hc=4,dim=5120,hd=256,ncols=24,rows=25874,recipe=signzero,seed=1)", SET_FLASH41},
            {"engram41(s=2,hc=4,dim=5120,hd=256,ncols=24,rows=25874,recipe=nearzero,seed=1)", SET_FLASH41},
            {"engram41(s=3,hc=4,dim=5120,hd=256,ncols=24,rows=25874,recipe=image,seed=1)", SET_FLASH41},
            {"engram41(s=2,hc=4,dim=5120,hd=256,ncols=24,rows=25874,recipe=edges,seed=1)", SET_FLASH41},
            {"engram41(s=2,hc=4,dim=5120,hd=256,ncols=24,rows=25874,recipe=f32,seed=1)", SET_FLASH41},
            {NULL, 0}},
    .build = build, .check = check)
#endif
