/*
 * compressor41.c - COMPRESSOR41, the V4.1 compressor of a kv-source layer
 * (V4.1 model.py Compressor.forward) at ratio 1 or 2, BEFORE RoPE: the
 * latent the indexer's keys are made from and attention then rotates and
 * quantizes. The compressor is stateful, so one call is a whole sequence
 * from position 0: a prefill of the first p tokens, then s - p one-token
 * decode steps at positions p..s-1, with the state carried between them;
 * the rows are every latent those calls yield, in order.
 *   ratio 1: latent[t] = norm(wkv x[t]) (wkv BF16, the product at
 *            linear_bf16): s rows, one per token.
 *   ratio 2: kv = wkv x, score = wgate x in FP32 (F32 weights, no ape, no
 *            overlap); the pair of positions 2g, 2g+1 pools sum_t kv_t *
 *            softmax_t(score_t) per feature, cast at cmp_bf16, then the
 *            norm: s/2 rows. An odd prefill leaves its last token in the
 *            state, and the decode at p (odd) completes that group; a
 *            decode at an even position yields nothing.
 * An engine is given x, the weights and (ratio, p, eps), and runs its own
 * prefill and decode steps with its own state; only the rows are compared.
 */
#include "harness/ops/op.h"
#include "oracle/ops41.h"

DSV4Q_OP_ROW(23, COMPRESSOR41, compressor41, 4, 1, 3)

/* The rows a call yields: one per token at ratio 1, one per pair at 2. */
static long nrows41(long s, int ratio) { return ratio == 1 ? s : s / 2; }

/* The call's shapes and params, checked before the oracle runs (it
 * trusts them: a ratio above 2 or a prefill past s would read past x). */
static int bad_call(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const dsv4q_bt *in = c->in;
    const double ratio = c->param[0], p = c->param[1], eps = c->param[2];
    if (ratio != 1 && ratio != 2) {
        snprintf(err, errlen, "compressor41: ratio = %g; V4.1's kv sources compress by 1 or 2", ratio);
        return -1;
    }
    if (in[0].ndim != 2 || in[3].ndim != 1 || in[1].ndim != 2 || in[0].shape[0] < 1 || in[3].shape[0] < 1) {
        snprintf(err, errlen, "compressor41: x must be [s,d] (s >= 1), wkv [Dc,d], norm [Dc]");
        return -1;
    }
    const long long s = in[0].shape[0], d = in[0].shape[1], Dc = in[3].shape[0];
    if (in[1].shape[0] != Dc || in[1].shape[1] != d) {
        snprintf(err, errlen, "compressor41: wkv is [%lld,%lld], want [Dc,d] = [%lld,%lld]", (long long)in[1].shape[0],
                 (long long)in[1].shape[1], Dc, d);
        return -1;
    }
    if (ratio == 2 && (in[2].ndim != 2 || in[2].shape[0] != Dc || in[2].shape[1] != d)) {
        snprintf(err, errlen, "compressor41: ratio 2 needs wgate [Dc,d] = [%lld,%lld]", Dc, d);
        return -1;
    }
    if (ratio == 1 && in[2].ndim != 0) {
        snprintf(err, errlen, "compressor41: ratio 1 has no gate: wgate must be empty");
        return -1;
    }
    if (!(p >= 1 && p <= (double)s && p == floor(p))) {
        snprintf(err, errlen, "compressor41: prefill p = %g must be a whole number in 1..s = %lld", p, s);
        return -1;
    }
    if (!(eps >= 0) || !isfinite(eps)) {
        snprintf(err, errlen, "compressor41: eps = %g must be finite and >= 0", eps);
        return -1;
    }
    const long long n = nrows41((long)s, (int)ratio);
    if (c->out[0].ndim != 2 || c->out[0].shape[0] != n || c->out[0].shape[1] != Dc) {
        snprintf(err, errlen, "compressor41: rows must be [%lld,%lld] (s = %lld at ratio %g)", n, Dc, s, ratio);
        return -1;
    }
    return 0;
}

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    if (bad_call(c, err, errlen)) return -1;
    NEED(0);
    NEED(3);
    const int ratio = (int)c->param[0];
    const long s = (long)in[0].shape[0], d = (long)in[0].shape[1], p = (long)c->param[1];
    const double eps = c->param[2];
    X(dsv4q_cmp41) cm = {.ratio = ratio, .Dc = (int)in[3].shape[0], .wkv = dsv4q_op_weight(&in[1]), .norm = a[3]};
    if (ratio == 2) cm.wgate = dsv4q_op_weight(&in[2]);
    if (X(dsv4q_cmp41_init)(&cm)) return 1;
    real *rows = out[0];
    /* the prefill, then one decode call per remaining position (K1 of
     * oracle/compressor41.c: the state carries the partial group) */
    long n = X(dsv4q_compressor41)(bs, 1, &cm, a[0], p, 0, eps, rows);
    for (long t = p; t < s && n >= 0; t++) {
        const long k = X(dsv4q_compressor41)(bs, 1, &cm, a[0] + t * d, 1, t, eps, rows + n * cm.Dc);
        n = k < 0 ? -1 : n + k;
    }
    X(dsv4q_cmp41_free)(&cm);
    return n < 0 ? 1 : 0;
}
DSV4Q_OP_EXEC(compressor41, exec)

#if DSV4Q_OP_ONCE
/* V4.1's norm_eps (config.json rms_norm_eps). */
#define EPS41 1e-20

static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    const long s = dsv4q_kv_int(kv, "s", 1, 1 << 12, &bad), d = dsv4q_kv_int(kv, "d", 1, 1 << 16, &bad),
               ratio = dsv4q_kv_int(kv, "ratio", 1, 2, &bad), Dc = dsv4q_kv_int(kv, "Dc", 1, 4096, &bad),
               p = dsv4q_kv_int(kv, "p", 1, 1 << 12, &bad);
    if (bad || p > s || d < 2) {
        snprintf(err, errlen, "%s: bad s/d/ratio/Dc/p (ratio 1|2, 1 <= p <= s, d >= 2)", c->key);
        return -1;
    }
    RECIPES("normal", "dominant", "nearzero", "f32");
    const char *rc = c->recipe;
    const int full = dsv4q_gen_full(rc), dom = !strcmp(rc, "dominant"), nz = !strcmp(rc, "nearzero");
    if (dom && ratio != 2) {
        snprintf(err, errlen, "%s: recipe dominant needs ratio 2 (ratio 1 has no gate)", c->key);
        return -1;
    }
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    NEEDP(x);
    dsv4q_gen_act(r, full ? "f32" : "normal", x, s, d, 1.0, d);
    if (nz) /* per token: as drawn, all zero, ~2^-33 (mean square ~ eps) or ~2^-40 (eps dominates the norm) */
        for (long t = 0; t < s; t++) {
            const long kind = dsv4q_rng_below(r, 4);
            const double m = kind == 1 ? 0 : kind == 2 ? 0x1p-33 : kind == 3 ? 0x1p-40 : 1;
            for (long i = 0; kind && i < d; i++) x[t * d + i] = dsv4q_gen_bf16(x[t * d + i] * m);
        }
    /* the checkpoint's formats: BF16 wkv at ratio 1, F32 wkv / wgate at 2 */
    if (dsv4q_gen_weight(c, 1, r, ratio == 1 ? "bf16" : "f32", Dc, d, 1.0 / sqrt((double)d), "normal", err, errlen))
        return -1;
    if (ratio == 2) {
        if (dsv4q_gen_weight(c, 2, r, "f32", Dc, d, 2.0 / sqrt((double)d), "normal", err, errlen)) return -1;
    } else {
        dsv4q_case_input(c, 2, DSV4Q_BT_F32, 0, 0, 0, 0); /* empty: no gate (NULL data) */
    }
    if (dom) {
        /* input column 0 drives only the gate (wkv 0, wgate 1 there): x = 96
         * on one token of each pair makes its score ~96 above its partner's
         * on every feature (exp(96) overflows FP32 without the max
         * subtracted; the partner's weight is ~e^-96). The pair that crosses
         * the prefill / decode boundary is led by the carried token, the
         * others alternate. */
        float *wk = c->in[1].data, *wg = c->in[2].data;
        for (long j = 0; j < Dc; j++) {
            wk[j * d] = 0;
            wg[j * d] = 1;
        }
        const long cross = p % 2 ? p / 2 : 0;
        for (long t = 0; t < s; t++) x[t * d] = (t % 2) == ((t / 2 - cross) & 1) ? 96.0f : 0.0f;
    }
    float *nw = dsv4q_case_input(c, 3, DSV4Q_BT_F32, 1, Dc, 0, 0);
    NEEDP(nw);
    for (long i = 0; i < Dc; i++) nw[i] = dsv4q_gen_store(full, 1.0 + 0.25 * dsv4q_rng_gauss(r));
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, nrows41(s, (int)ratio), Dc, 0);
    c->param[0] = (double)ratio;
    c->param[1] = (double)p;
    c->param[2] = EPS41;
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    const int r2 = !strcmp(dsv4q_kv_str(kv, "ratio"), "2");
    dsv4q_case_set_role(c, "layers.0.attn.compressor",
                        (const char *const[]){NULL, ".wkv", r2 ? ".wgate" : NULL, ".norm"});
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen) { return bad_call(c, err, errlen); }

DSV4Q_OP_DESC(
    compressor41,
    .in = {T("x", "[s,d]", "F32", "tokens at positions 0..s-1: the first p a prefill, the rest one decode call each"),
           T("wkv", "[Dc,d]", "F32 (+ raw)", "BF16 at ratio 1 (product at linear_bf16), F32 at ratio 2 (FP32 math)"),
           T("wgate", "[Dc,d]", "F32", "ratio 2: the gate (FP32 math); empty at ratio 1"),
           T("norm", "[Dc]", "F32", "RMSNorm weight of the latent")},
    .out = {T("rows", "[n,Dc]", "F32|BF16",
              "every latent the calls yield, in order (n = s at ratio 1, s/2 at ratio 2); before RoPE")},
    .param = {"ratio: 1 (projection + norm) or 2 (softmax pooling of pairs)",
              "p: tokens in the prefill call (1..s); positions p..s-1 are decode calls",
              "eps (norm_eps, 1e-20 in V4.1)"},
    .oracle = "oracle/compressor41.c dsv4q_compressor41",
    .reference = "V4.1 model.py Compressor.forward (compress_ratio 1 / 2, kv_state / score_state)",
    .boundaries = "linear_bf16 (ratio 1) | cmp_bf16 (ratio 2), norm_bf16",
    .notes = "A stateful operator expressed as one call: the engine runs the prefill and the decode steps itself. At "
             "ratio 2 an odd prefill's last token waits in the state (score slot 1 still -inf) and the decode at p "
             "completes its pair; decodes at even positions yield no row.",
    .keys = {{"s", "12"}, {"d", "5120"}, {"ratio", "2"}, {"Dc", "512"}, {"p", "7"}},
    .cases =
        (const dsv4q_case_entry[]){{"compressor41(s=8,d=5120,ratio=1,Dc=512,p=5,recipe=normal,seed=1)", SET_FLASH41},
                                   {"compressor41(s=12,d=5120,ratio=2,Dc=512,p=7,recipe=normal,seed=1)", SET_FLASH41},
                                   {"compressor41(s=12,d=5120,ratio=2,Dc=512,p=8,recipe=normal,seed=1)", SET_FLASH41},
                                   {"compressor41(s=6,d=5120,ratio=2,Dc=512,p=1,recipe=normal,seed=1)", SET_FLASH41},
                                   {"compressor41(s=12,d=5120,ratio=2,Dc=512,p=7,recipe=dominant,seed=1)", SET_FLASH41},
                                   {"compressor41(s=12,d=5120,ratio=2,Dc=512,p=7,recipe=nearzero,seed=1)", SET_FLASH41},
                                   {"compressor41(s=8,d=5120,ratio=1,Dc=512,p=5,recipe=nearzero,seed=1)", SET_FLASH41},
                                   {"compressor41(s=12,d=5120,ratio=2,Dc=512,p=7,recipe=f32,seed=1)", SET_FLASH41},
                                   {"compressor41(s=8,d=5120,ratio=1,Dc=512,p=5,recipe=f32,seed=1)", SET_FLASH41},
                                   {NULL, 0}},
    .build = build, .role = role, .check = check)
#endif
