/*
 * cpuref_backend.c - cpu-ref and its mutants behind the backend ABI
 * (abi/dsv4q_backend.h): descriptors, argument checks, dispatch.
 *
 * cpu-ref declares the `source` profile and implements every operator in
 * FP32 with BF16 storage where the reference stores BF16. Such outputs are
 * returned as BF16 codes (out->dtype = DSV4Q_BT_BF16, option (b) of the
 * ABI), so the harness counts their ULPs in BF16; FP32 outputs (act-quant
 * simulations, hc post/comb, gate weights) stay F32.
 *
 * A mutant is cpu-ref with one defect (docs/mutants.md). Each descriptor
 * has its own init(), which hands run() a context naming the mutant; the
 * kernels take the id and change exactly that behaviour. The ABI gives a
 * backend no role for a ROPE call, so idx_rope_halfsplit treats every ROPE
 * call as an indexer-query rotation (and COMPRESSOR rotate=1 rows as
 * indexer keys).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backends/cpuref/cpuref.h"
#include "backends/cpuref/kernels.h"

#define M_NAME(E, nm, ops, doc) [CPUREF_M_##E] = #nm,
static const char *const mutant_names[CPUREF_M_COUNT + 1] = {
    [CPUREF_OK] = "",
    CPUREF_MUTANT_LIST(M_NAME)
    [CPUREF_M_COUNT] = NULL,
};
#undef M_NAME

const char *const *dsv4q_cpuref_mutants(void) { return mutant_names + 1; }

int dsv4q_cpuref_mutant_id(const char *name)
{
    if (!name || !name[0]) return CPUREF_OK;
    for (int m = 1; m < CPUREF_M_COUNT; m++)
        if (!strcmp(mutant_names[m], name)) return m;
    return -1;
}

/* ---- argument checks ---------------------------------------------------- */

/* Elements of a tensor (0 for an empty optional input): cpu-ref reads only
 * the ABI header, so it counts for itself. */
static int64_t numel(const dsv4q_bt *t)
{
    int64_t n = t->ndim > 0 ? 1 : 0;
    for (int i = 0; i < t->ndim && i < 6; i++) n *= t->shape[i];
    return n;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return DSV4Q_BACKEND_ERROR;
}

/* Tensor t must be F32 (or I32 when i32) with ndim dims. */
static int want(const dsv4q_bt *t, int ndim, int i32, const char *op, char *err, size_t errlen)
{
    if (t->ndim != ndim || !t->data)
        return fail(err, errlen, "cpu-ref %s: tensor '%s' has ndim %d (want %d)%s", op, t->name ? t->name : "?",
                    (int)t->ndim, ndim, t->data ? "" : " and no data");
    if (t->dtype != (i32 ? DSV4Q_BT_I32 : DSV4Q_BT_F32))
        return fail(err, errlen, "cpu-ref %s: tensor '%s' dtype %d (want %s)", op, t->name ? t->name : "?",
                    (int)t->dtype, i32 ? "I32" : "F32");
    return 0;
}

/* Weight view: the raw stored form when there is one, else the F32 values. */
static int wview(const dsv4q_bt *t, cpuref_w *w, const char *op, char *err, size_t errlen)
{
    if (t->ndim != 2 || !t->data)
        return fail(err, errlen, "cpu-ref %s: weight '%s' must be 2-D", op, t->name ? t->name : "?");
    memset(w, 0, sizeof *w);
    w->out = (long)t->shape[0];
    w->in = (long)t->shape[1];
    w->kind = CPUREF_W_F32;
    w->data = t->data;
    w->blk = 128;
    if (!t->raw) return 0;
    switch (t->raw_dtype) {
    case DSV4Q_BT_BF16:
        w->kind = CPUREF_W_BF16;
        w->data = t->raw;
        return 0;
    case DSV4Q_BT_F8_E4M3:
    case DSV4Q_BT_I8:
        if (!t->raw_scale || (t->scale_dtype != DSV4Q_BT_F8_E8M0 && t->scale_dtype != DSV4Q_BT_F32))
            return fail(err, errlen, "cpu-ref %s: weight '%s' has no usable block scale", op, t->name ? t->name : "?");
        w->kind = t->raw_dtype == DSV4Q_BT_I8 ? CPUREF_W_FP4 : CPUREF_W_FP8;
        if (w->kind == CPUREF_W_FP4 && w->in % 32)
            return fail(err, errlen, "cpu-ref %s: FP4 weight '%s' K=%ld not a multiple of 32", op,
                        t->name ? t->name : "?", w->in);
        w->data = t->raw;
        w->scale = t->raw_scale;
        w->scale_f32 = t->scale_dtype == DSV4Q_BT_F32;
        w->scale_cols = (long)t->scale_shape[1];
        if (w->kind == CPUREF_W_FP8) { /* the tile is what the scale grid implies: 128 (V4) or 32 (V4.1) */
            const int64_t r0 = t->scale_shape[0], r1 = t->scale_shape[1];
            if (r0 == (w->out + 127) / 128 && r1 == (w->in + 127) / 128) w->blk = 128;
            else if (r0 == (w->out + 31) / 32 && r1 == (w->in + 31) / 32) w->blk = 32;
            else
                return fail(err, errlen,
                            "cpu-ref %s: FP8 weight '%s' [%ld,%ld] has a scale grid [%lld,%lld] of neither "
                            "128x128 nor 32x32 tiles",
                            op, t->name ? t->name : "?", w->out, w->in, (long long)r0, (long long)r1);
        }
        return 0;
    default:   /* F32 raw (FP32-math weights): the values are the data */
        return 0;
    }
}

/* Output i: BF16 codes packed at the start of the F32 buffer (in place:
 * code j is written at byte 2j, below every F32 value not yet read). */
static void pack_bf16(dsv4q_bt *o)
{
    int64_t n = numel(o);
    const float *f = o->data;
    uint16_t *c = o->data;
    for (int64_t i = 0; i < n; i++) c[i] = (uint16_t)(cpuref_f_bits(cpuref_bf16(f[i])) >> 16);
    o->dtype = DSV4Q_BT_BF16;
}

/* The arguments of every r_<name>: the call, its tensors and params (the
 * counts already checked against the operator's arity), the operator's
 * name for messages, the mutant id. Not every kernel reads every one. */
#define UNUSED __attribute__((unused))
#define R_ARGS                                                                                                  \
    int mut UNUSED, const dsv4q_bcall *c UNUSED, const dsv4q_bt *in UNUSED, dsv4q_bt *out UNUSED,               \
        const double *p UNUSED, const char *op UNUSED, char *err, size_t errlen

#define CHECK(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)
#define OOM(x) do { if (x) return fail(err, errlen, "cpu-ref %s: out of memory", op); } while (0)

/* ---- one function per operator (r_<name>, after DSV4Q_OP_LIST) -------- */

static int r_linear(R_ARGS)
{
    cpuref_w w;
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    CHECK(wview(&in[1], &w, op, err, errlen));
    if (w.in != in[0].shape[1] || numel(&out[0]) != in[0].shape[0] * w.out)
        return fail(err, errlen, "cpu-ref linear: x [%lld,%lld] vs w [%ld,%ld] vs y", (long long)in[0].shape[0],
                    (long long)in[0].shape[1], w.out, w.in);
    OOM(cpuref_linear(&w, in[0].data, (long)in[0].shape[0], p[0] != 0, p[1] != 0, out[0].data, mut));
    if (p[1] != 0) pack_bf16(&out[0]);
    return 0;
}

static int r_rmsnorm(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    const float *w = NULL;
    if (in[1].ndim) {
        CHECK(want(&in[1], 1, 0, op, err, errlen));
        if (in[1].shape[0] != in[0].shape[1]) return fail(err, errlen, "cpu-ref rmsnorm: w length");
        w = in[1].data;
    }
    cpuref_rmsnorm(in[0].data, (long)in[0].shape[0], (long)in[0].shape[1], w, (float)p[0], out[0].data);
    pack_bf16(&out[0]);
    return 0;
}

static int r_qhead_norm(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    cpuref_qhead_norm(in[0].data, (long)in[0].shape[0], (long)in[0].shape[1], (float)p[0], out[0].data);
    pack_bf16(&out[0]);
    return 0;
}

static int r_rope(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    CHECK(want(&in[1], 1, 1, op, err, errlen));
    const long rows = (long)in[0].shape[0], r = (long)in[0].shape[1];
    if (in[1].shape[0] != rows) return fail(err, errlen, "cpu-ref rope: pos has %lld rows, x %ld",
                                            (long long)in[1].shape[0], rows);
    cpuref_rope rp;
    if (cpuref_rope_init(&rp, (int)r, p[0], (int)p[1], p[2], p[3], p[4], mut))
        return fail(err, errlen, "cpu-ref rope: rope dim %ld unsupported", r);
    float *y = out[0].data;
    const int32_t *pos = in[1].data;
    memcpy(y, in[0].data, sizeof(float) * (size_t)(rows * r));
    for (long i = 0; i < rows; i++)
        cpuref_rope_row(&rp, y + i * r, pos[i], p[5] != 0, mut == CPUREF_M_IDX_ROPE_HALFSPLIT);
    pack_bf16(&out[0]);
    return 0;
}

static int r_quant(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    const long rows = (long)in[0].shape[0], n = (long)in[0].shape[1];
    float *y = out[0].data;
    memcpy(y, in[0].data, sizeof(float) * (size_t)(rows * n));
    if (c->op == DSV4Q_OP_ACT_QUANT) {
        if (p[0] < 1) return fail(err, errlen, "cpu-ref act_quant: block %g", p[0]);
        cpuref_act_quant(y, rows, n, (int)p[0], p[1] != 0, mut);
    } else if (c->op == DSV4Q_OP_FP4_QUANT) {
        cpuref_fp4_quant(y, rows, n);
    } else if (c->op == DSV4Q_OP_KV41_QUANT) {
        if (n % 16) return fail(err, errlen, "cpu-ref kv41_quant: n=%ld not a multiple of 16", n);
        cpuref_kv41_quant(y, rows, n, mut);
    } else {
        if (n < 1 || (n & (n - 1))) return fail(err, errlen, "cpu-ref hadamard: n=%ld not a power of two", n);
        cpuref_hadamard(y, rows, n);
        pack_bf16(&out[0]);
    }
    return 0;
}

static int r_sparse_attn(R_ARGS)
{
    CHECK(want(&in[0], 3, 0, op, err, errlen));
    CHECK(want(&in[1], 2, 0, op, err, errlen));
    CHECK(want(&in[2], 2, 1, op, err, errlen));
    CHECK(want(&in[3], 1, 0, op, err, errlen));
    const long s = (long)in[0].shape[0];
    const int H = (int)in[0].shape[1], D = (int)in[0].shape[2];
    if (in[1].shape[1] != D || in[2].shape[0] != s || in[3].shape[0] != H)
        return fail(err, errlen, "cpu-ref sparse_attn: shapes of kv/idx/sink do not match q");
    OOM(cpuref_sparse_attn(in[0].data, s, H, D, in[1].data, (long)in[1].shape[0], in[2].data,
                           (long)in[2].shape[1], in[3].data, (float)p[0], out[0].data, mut));
    pack_bf16(&out[0]);
    return 0;
}

static int r_compressor(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    CHECK(want(&in[3], 2, 0, op, err, errlen));
    CHECK(want(&in[4], 1, 0, op, err, errlen));
    cpuref_w wkv, wg;
    CHECK(wview(&in[1], &wkv, op, err, errlen));
    CHECK(wview(&in[2], &wg, op, err, errlen));
    cpuref_cmp_args a = {0};
    a.ratio = (int)p[0];
    a.rotate = p[1] != 0;
    a.eps = (float)p[2];
    a.rope_dim = (int)p[3];
    a.ue8m0 = p[9] != 0;
    a.Dc = (int)in[4].shape[0];
    a.wkv = &wkv;
    a.wgate = &wg;
    a.ape = in[3].data;
    a.norm = in[4].data;
    const long coff = a.ratio == 4 ? 2 : 1, s = (long)in[0].shape[0];
    if (a.ratio < 1 || a.ratio > 128 || wkv.out != coff * a.Dc || wg.out != coff * a.Dc ||
        wkv.in != in[0].shape[1] || wg.in != in[0].shape[1] || in[3].shape[0] != a.ratio ||
        in[3].shape[1] != coff * a.Dc || a.rope_dim > a.Dc || numel(&out[0]) != (s / a.ratio) * a.Dc)
        return fail(err, errlen, "cpu-ref compressor: shapes do not match ratio %d, Dc %d", a.ratio, a.Dc);
    if (a.rotate && (a.Dc & (a.Dc - 1)))
        return fail(err, errlen, "cpu-ref compressor: rotate needs a power-of-two Dc, got %d", a.Dc);
    cpuref_rope rp;
    if (cpuref_rope_init(&rp, a.rope_dim, p[4], (int)p[5], p[6], p[7], p[8], mut))
        return fail(err, errlen, "cpu-ref compressor: rope dim %d unsupported", a.rope_dim);
    a.rope = &rp;
    OOM(cpuref_compressor(&a, in[0].data, s, out[0].data, mut));
    pack_bf16(&out[0]);
    return 0;
}

static int r_compressor41(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    CHECK(want(&in[3], 1, 0, op, err, errlen));
    const long s = (long)in[0].shape[0], d = (long)in[0].shape[1], Dc = (long)in[3].shape[0];
    if (p[0] != 1 && p[0] != 2) return fail(err, errlen, "cpu-ref compressor41: ratio %g (want 1 or 2)", p[0]);
    const int ratio = (int)p[0];
    cpuref_w wkv, wg;
    CHECK(wview(&in[1], &wkv, op, err, errlen));
    if (ratio == 2) CHECK(wview(&in[2], &wg, op, err, errlen));
    if (wkv.out != Dc || wkv.in != d || (ratio == 2 && (wg.out != Dc || wg.in != d)) ||
        numel(&out[0]) != (ratio == 1 ? s : s / 2) * Dc)
        return fail(err, errlen, "cpu-ref compressor41: shapes do not match x [%ld,%ld], ratio %d, Dc %ld", s, d, ratio,
                    Dc);
    if (!(p[1] >= 1 && p[1] <= (double)s && p[1] == floor(p[1])))
        return fail(err, errlen, "cpu-ref compressor41: prefill %g outside 1..%ld", p[1], s);
    const cpuref_cmp41_args a = {ratio, (int)Dc, (float)p[2], &wkv, ratio == 2 ? &wg : NULL, in[3].data};
    OOM(cpuref_compressor41(&a, in[0].data, s, (long)p[1], out[0].data, mut));
    pack_bf16(&out[0]);
    return 0;
}

static int r_indexer_score(R_ARGS)
{
    CHECK(want(&in[0], 3, 0, op, err, errlen));
    CHECK(want(&in[1], 2, 0, op, err, errlen));
    CHECK(want(&in[2], 2, 0, op, err, errlen));
    const long s = (long)in[0].shape[0], T = (long)in[2].shape[0];
    const int Hi = (int)in[0].shape[1], Di = (int)in[0].shape[2];
    if (in[1].shape[0] != s || in[1].shape[1] != Hi || in[2].shape[1] != Di || p[1] < 1)
        return fail(err, errlen, "cpu-ref indexer_score: shapes of w/K do not match q");
    cpuref_indexer_score(in[0].data, in[1].data, s, Hi, Di, in[2].data, T, (long)p[0], (int)p[1], out[0].data);
    pack_bf16(&out[0]);
    return 0;
}

static int r_topk(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    if (p[0] < 0 || numel(&out[0]) != in[0].shape[0] * (int64_t)p[0])
        return fail(err, errlen, "cpu-ref topk: k=%g does not match the output", p[0]);
    OOM(cpuref_topk(in[0].data, (long)in[0].shape[0], (long)in[0].shape[1], (int)p[0], out[0].data, mut));
    return 0;
}

static int r_candidate_blocks(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    CHECK(want(&in[1], 1, 1, op, err, errlen));
    const long rows = (long)in[0].shape[0], T = (long)in[0].shape[1];
    const int32_t *clen = in[1].data;
    if (in[1].shape[0] != rows || p[0] < 1 || p[1] < 1 || numel(&out[0]) != rows * (int64_t)p[0])
        return fail(err, errlen, "cpu-ref candidate_blocks: clen / topb / B do not match score [%ld,%ld]", rows, T);
    for (long i = 0; i < rows; i++)
        if (clen[i] < 0 || clen[i] > T)
            return fail(err, errlen, "cpu-ref candidate_blocks: clen[%ld] = %d", i, clen[i]);
    OOM(cpuref_candidate_blocks(in[0].data, rows, T, clen, (int)p[0], (int)p[1], out[0].data, mut));
    return 0;
}

static int r_topk41(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    CHECK(want(&in[1], 1, 1, op, err, errlen));
    const long rows = (long)in[0].shape[0], T = (long)in[0].shape[1];
    const int32_t *clen = in[1].data, *blocks = NULL;
    long topb = 0;
    if (in[2].ndim) {
        CHECK(want(&in[2], 2, 1, op, err, errlen));
        if (in[2].shape[0] != rows)
            return fail(err, errlen, "cpu-ref topk41: blocks has %lld rows, score %ld", (long long)in[2].shape[0],
                        rows);
        blocks = in[2].data;
        topb = (long)in[2].shape[1];
    }
    if (in[1].shape[0] != rows || p[0] < 1 || p[1] < 1 || numel(&out[0]) != rows * (int64_t)p[0])
        return fail(err, errlen, "cpu-ref topk41: clen / k / B do not match score [%ld,%ld]", rows, T);
    for (long i = 0; i < rows; i++)
        if (clen[i] < 0 || clen[i] > T) return fail(err, errlen, "cpu-ref topk41: clen[%ld] = %d", i, clen[i]);
    OOM(cpuref_topk41(in[0].data, rows, T, clen, blocks, topb, (int)p[1], (int)p[0], out[0].data));
    return 0;
}

static int r_engram_hash(R_ARGS)
{
    CHECK(want(&in[0], 1, 1, op, err, errlen));
    for (int i = 1; i < 3; i++)
        if (in[i].ndim != 1 || in[i].dtype != DSV4Q_BT_I64 || !in[i].data)
            return fail(err, errlen, "cpu-ref engram_hash: tensor '%s' must be 1-D I64", in[i].name ? in[i].name : "?");
    const long T = (long)in[0].shape[0], C = (long)in[1].shape[0], N = (long)in[2].shape[0];
    if (N < 2 || N > 64 || C < N - 1 || C % (N - 1) || T < N - 1 || numel(&out[0]) != (T - N + 1) * C)
        return fail(err, errlen,
                    "cpu-ref engram_hash: ids [%ld], primes [%ld], mult [%ld] and the output do not fit "
                    "(ids n+N-1, primes (N-1)*heads, out [n, ncols])",
                    T, C, N);
    if (!(p[0] >= 0 && p[0] == (double)(long)p[0]) || !(p[2] >= 1 && p[2] < 2147483648.0) ||
        !(p[1] >= 0 && p[1] < p[2] && p[1] == (double)(int32_t)p[1]))
        return fail(err, errlen, "cpu-ref engram_hash: start %g, pad %g or V %g out of range", p[0], p[1], p[2]);
    const int64_t *pr = in[1].data;
    int64_t sum = 0;
    for (long k = 0; k < C; k++) {
        if (pr[k] < 1 || pr[k] > INT32_MAX)
            return fail(err, errlen, "cpu-ref engram_hash: prime %ld is %lld", k, (long long)pr[k]);
        if ((sum += pr[k]) > (int64_t)INT32_MAX + 1)
            return fail(err, errlen, "cpu-ref engram_hash: bucket ids past 2^31 - 1 (column %ld)", k);
    }
    const int32_t *ids = in[0].data;
    for (long j = 0; j < T; j++)
        if (ids[j] < -1 || ids[j] >= p[2]) return fail(err, errlen, "cpu-ref engram_hash: id %ld is %d", j, ids[j]);
    OOM(cpuref_engram_hash(ids, T - N + 1, (int)N, (int)(C / (N - 1)), in[2].data, pr, (long)p[0], (int32_t)p[1],
                           out[0].data, mut));
    return 0;
}

static int r_index41_score(R_ARGS)
{
    CHECK(want(&in[0], 3, 0, op, err, errlen));
    CHECK(want(&in[1], 2, 0, op, err, errlen));
    CHECK(want(&in[2], 2, 0, op, err, errlen));
    CHECK(want(&in[4], 1, 0, op, err, errlen));
    cpuref_w wk;
    CHECK(wview(&in[3], &wk, op, err, errlen));
    cpuref_idx41_args a = {.s = (long)in[0].shape[0],
                           .T = (long)in[2].shape[0],
                           .k0 = (long)p[2],
                           .start_pos = (long)p[0],
                           .Hi = (int)in[0].shape[1],
                           .Di = (int)in[0].shape[2],
                           .ratio = (int)p[1],
                           .eps = (float)p[9],
                           .w = in[1].data,
                           .knorm = in[4].data,
                           .wk = &wk};
    if (in[1].shape[0] != a.s || in[1].shape[1] != a.Hi || wk.out != a.Di || wk.in != in[2].shape[1] ||
        in[4].shape[0] != a.Di || numel(&out[0]) != a.s * a.T)
        return fail(err, errlen,
                    "cpu-ref index41_score: w / latent / idx_wk / idx_k_norm / score do not match q [%ld,%d,%d]", a.s,
                    a.Hi, a.Di);
    if ((a.ratio != 1 && a.ratio != 2 && a.ratio != 4) || a.T < 1 || p[2] < 0 || p[0] < 0 || (p[0] == 0 && p[2] != 0) ||
        !(p[3] >= 2 && p[3] <= a.Di) || (p[2] + (double)a.T) * a.ratio > 16777216.0)
        return fail(err, errlen, "cpu-ref index41_score: ratio %g, k0 %g, rope_dim %g, start_pos %g unsupported", p[1],
                    p[2], p[3], p[0]);
    cpuref_rope rp;
    if (cpuref_rope_init(&rp, (int)p[3], p[4], (int)p[5], p[6], p[7], p[8], mut))
        return fail(err, errlen, "cpu-ref index41_score: rope dim %g unsupported", p[3]);
    a.rope = &rp;
    OOM(cpuref_index41_score(&a, in[0].data, in[2].data, out[0].data, mut));
    pack_bf16(&out[0]);
    return 0;
}

static int r_hc_pre_head(R_ARGS)
{
    const int pre = c->op == DSV4Q_OP_HC_PRE;
    CHECK(want(&in[0], 3, 0, op, err, errlen));
    CHECK(want(&in[1], 2, 0, op, err, errlen));
    CHECK(want(&in[2], 1, 0, op, err, errlen));
    CHECK(want(&in[3], 1, 0, op, err, errlen));
    const long s = (long)in[0].shape[0], d = (long)in[0].shape[2];
    const int hc = (int)in[0].shape[1], nmix = pre ? (2 + hc) * hc : hc;
    if (hc < 1 || hc > 16 || in[1].shape[0] != nmix || in[1].shape[1] != hc * d || in[3].shape[0] != nmix ||
        in[2].shape[0] < (pre ? 3 : 1))
        return fail(err, errlen, "cpu-ref %s: fn/scale/base shapes do not match X [%ld,%d,%ld]", op, s, hc, d);
    int rc = pre ? cpuref_hc_pre(in[0].data, s, hc, d, in[1].data, in[2].data, in[3].data, (float)p[0],
                                 (float)p[1], (int)p[2], out[0].data, out[1].data, out[2].data)
                 : cpuref_hc_head(in[0].data, s, hc, d, in[1].data, in[2].data, in[3].data, (float)p[0],
                                  (float)p[1], out[0].data);
    OOM(rc);
    pack_bf16(&out[0]);
    return 0;
}

static int r_hc_pre41(R_ARGS)
{
    CHECK(want(&in[0], 3, 0, op, err, errlen));
    CHECK(want(&in[1], 2, 0, op, err, errlen));
    CHECK(want(&in[2], 2, 0, op, err, errlen));
    CHECK(want(&in[3], 1, 0, op, err, errlen));
    CHECK(want(&in[4], 1, 0, op, err, errlen));
    const long s = (long)in[0].shape[0], d = (long)in[0].shape[2];
    const int hc = (int)in[0].shape[1], nmix = (2 + hc) * hc;
    if (hc < 1 || hc > 16 || in[1].shape[0] != s || in[1].shape[1] != hc || in[2].shape[0] != nmix ||
        in[2].shape[1] != hc * d || in[3].shape[0] < 3 || in[4].shape[0] != nmix)
        return fail(err, errlen, "cpu-ref hc_pre41: premix/fn/scale/base shapes do not match X [%ld,%d,%ld]", s, hc, d);
    if (!(p[0] > 0) || !(p[1] >= 0) || !(p[2] >= 1 && p[2] <= 1000))
        return fail(err, errlen, "cpu-ref hc_pre41: norm_eps %g, hc_eps %g, iters %g out of range", p[0], p[1], p[2]);
    if (numel(&out[0]) != s * d || numel(&out[1]) != s * hc || numel(&out[2]) != s * hc ||
        numel(&out[3]) != s * hc * hc)
        return fail(err, errlen, "cpu-ref hc_pre41: outputs do not match X [%ld,%d,%ld]", s, hc, d);
    OOM(cpuref_hc_pre41(in[0].data, in[1].data, s, hc, d, in[2].data, in[3].data, in[4].data, (float)p[0], (float)p[1],
                        (int)p[2], out[0].data, out[1].data, out[2].data, out[3].data, mut));
    pack_bf16(&out[0]);
    return 0;
}

static int r_hc_post(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    CHECK(want(&in[1], 3, 0, op, err, errlen));
    CHECK(want(&in[2], 2, 0, op, err, errlen));
    CHECK(want(&in[3], 3, 0, op, err, errlen));
    const long s = (long)in[1].shape[0], d = (long)in[1].shape[2];
    const int hc = (int)in[1].shape[1];
    if (hc < 1 || hc > 16 || in[0].shape[0] != s || in[0].shape[1] != d || in[2].shape[1] != hc ||
        in[3].shape[1] != hc || in[3].shape[2] != hc)
        return fail(err, errlen, "cpu-ref hc_post: shapes do not match X [%ld,%d,%ld]", s, hc, d);
    cpuref_hc_post(in[0].data, in[1].data, in[2].data, in[3].data, s, hc, d, out[0].data, mut);
    pack_bf16(&out[0]);
    return 0;
}

static int r_moe_gate(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    cpuref_w W;
    CHECK(wview(&in[1], &W, op, err, errlen));
    const float *bias = NULL;
    const int32_t *t2e = NULL, *ids = NULL;
    long vocab = 0;
    const int k = (int)p[0], n_exp = (int)W.out;
    if (in[2].ndim) { CHECK(want(&in[2], 1, 0, op, err, errlen)); bias = in[2].data; }
    if (in[3].ndim) {
        CHECK(want(&in[3], 2, 1, op, err, errlen));
        CHECK(want(&in[4], 1, 1, op, err, errlen));
        t2e = in[3].data;
        vocab = (long)in[3].shape[0];
        ids = in[4].data;
        if (in[3].shape[1] != k) return fail(err, errlen, "cpu-ref moe_gate: tid2eid has %lld columns, k=%d",
                                             (long long)in[3].shape[1], k);
    }
    if (k < 1 || k > n_exp || W.in != in[0].shape[1] || (bias && in[2].shape[0] != n_exp) ||
        (int)p[2] < 0 || (int)p[2] > 2)
        return fail(err, errlen, "cpu-ref moe_gate: bad k / shapes / score_func");
    int rc = cpuref_moe_gate(in[0].data, (long)in[0].shape[0], (long)in[0].shape[1], &W, bias, t2e, vocab, ids,
                             n_exp, k, (int)p[2], (float)p[1], out[0].data, out[1].data);
    if (rc) return fail(err, errlen, "cpu-ref moe_gate: out of memory or token id outside tid2eid");
    return 0;
}

static int r_moe_gate41(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    cpuref_w W;
    CHECK(wview(&in[1], &W, op, err, errlen));
    const float *bias = NULL;
    const int k = (int)p[0], n_exp = (int)W.out;
    if (in[2].ndim) {
        CHECK(want(&in[2], 1, 0, op, err, errlen));
        bias = in[2].data;
    }
    if (k < 1 || k > n_exp || W.in != in[0].shape[1] || (bias && in[2].shape[0] != n_exp) || (int)p[2] < 0 ||
        (int)p[2] > 2 || !(p[3] > 0) || numel(&out[0]) != in[0].shape[0] * k)
        return fail(err, errlen, "cpu-ref moe_gate41: bad k / shapes / score_func / gate_temp");
    OOM(cpuref_moe_gate41(in[0].data, (long)in[0].shape[0], &W, bias, n_exp, k, (int)p[2], (float)p[3], p[4] != 0,
                          (float)p[1], out[0].data, out[1].data));
    return 0;
}

static int r_expert(R_ARGS)
{
    CHECK(want(&in[0], 2, 0, op, err, errlen));
    cpuref_w w1, w2, w3;
    CHECK(wview(&in[1], &w1, op, err, errlen));
    CHECK(wview(&in[2], &w2, op, err, errlen));
    CHECK(wview(&in[3], &w3, op, err, errlen));
    const float *wt = NULL;
    if (in[4].ndim) { CHECK(want(&in[4], 1, 0, op, err, errlen)); wt = in[4].data; }
    const long n = (long)in[0].shape[0], d = (long)in[0].shape[1];
    if (w1.in != d || w3.in != d || w3.out != w1.out || w2.in != w1.out || w2.out != d ||
        (wt && in[4].shape[0] != n))
        return fail(err, errlen, "cpu-ref expert: w1/w2/w3 shapes do not match x [%ld,%ld]", n, d);
    OOM(cpuref_expert(in[0].data, n, &w1, &w2, &w3, wt, (float)p[0], p[1] != 0, out[0].data, mut));
    pack_bf16(&out[0]);
    return 0;
}

static int r_window_attn_decode(R_ARGS)
{
    CHECK(want(&in[0], 3, 0, op, err, errlen));
    CHECK(want(&in[1], 2, 0, op, err, errlen));
    CHECK(want(&in[2], 2, 0, op, err, errlen));
    CHECK(want(&in[5], 1, 0, op, err, errlen));
    const int H = (int)in[0].shape[1], D = (int)in[0].shape[2];
    const long w = (long)p[1], pos = (long)p[0];
    long Nc = 0, nc = 0;
    if (in[3].ndim) { CHECK(want(&in[3], 2, 0, op, err, errlen)); Nc = (long)in[3].shape[0]; }
    if (in[4].ndim) { CHECK(want(&in[4], 2, 1, op, err, errlen)); nc = (long)in[4].shape[1]; }
    if (in[0].shape[0] != 1 || in[1].shape[0] != 1 || in[1].shape[1] != D || w < 1 || pos < 0 ||
        in[2].shape[0] != w || in[2].shape[1] != D || (Nc && in[3].shape[1] != D) || in[5].shape[0] != H ||
        (in[4].ndim && in[4].shape[0] != 1) || numel(&out[1]) != w * D)
        return fail(err, errlen, "cpu-ref window_attn_decode: shapes do not match q [1,%d,%d], w %ld", H, D, w);
    OOM(cpuref_window_attn_decode(in[0].data, H, D, in[1].data, in[2].data, w, Nc ? in[3].data : NULL, Nc,
                                  nc ? in[4].data : NULL, nc, in[5].data, (float)p[2], pos, out[0].data,
                                  out[1].data, mut));
    pack_bf16(&out[0]);   /* o at attn_out_bf16; ring_out stays F32 (a copy) */
    return 0;
}

static int r_engram41(R_ARGS)
{
    cpuref_w wkv, qw, kw;
    CHECK(want(&in[0], 3, 0, op, err, errlen));
    CHECK(want(&in[1], 2, 1, op, err, errlen));
    CHECK(wview(&in[3], &wkv, op, err, errlen));
    CHECK(wview(&in[4], &qw, op, err, errlen));
    CHECK(wview(&in[5], &kw, op, err, errlen));
    const long s = (long)in[0].shape[0], dim = (long)in[0].shape[2];
    const int hc = (int)in[0].shape[1], C = (int)in[1].shape[1];
    const dsv4q_bt *tb = &in[2];
    const long rows = tb->ndim == 2 ? (long)tb->shape[0] : 0, hd = tb->ndim == 2 ? (long)tb->shape[1] : 0;
    if (in[1].shape[0] != s || C < 1 || rows < 1 || hd < 32 || hd % 32 || !tb->raw ||
        tb->raw_dtype != DSV4Q_BT_F8_E4M3 || !tb->raw_scale || tb->scale_dtype != DSV4Q_BT_F8_E8M0 ||
        tb->scale_shape[0] != rows || tb->scale_shape[1] != hd / 32)
        return fail(err, errlen,
                    "cpu-ref engram41: ids [s,ncols] / table [rows,hd] E4M3 + E8M0 [rows,hd/32] "
                    "do not match h [%ld,%d,%ld]",
                    s, hc, dim);
    if (wkv.kind != CPUREF_W_FP8 || wkv.out != dim * (hc + 1) || wkv.in != (long)C * hd ||
        wkv.scale_cols != (wkv.in + 31) / 32 || in[3].scale_shape[0] != (wkv.out + 31) / 32)
        return fail(err, errlen, "cpu-ref engram41: wkv must be FP8 [%ld,%ld] with 32x32 block scales", dim * (hc + 1),
                    (long)C * hd);
    if (qw.kind > CPUREF_W_BF16 || kw.kind > CPUREF_W_BF16 || qw.out != hc || kw.out != hc || qw.in != dim ||
        kw.in != dim)
        return fail(err, errlen, "cpu-ref engram41: q_weight / k_weight must be BF16 [%d,%ld]", hc, dim);
    if (in[6].ndim) CHECK(want(&in[6], 1, 1, op, err, errlen));
    if ((in[6].ndim && in[6].shape[0] != s) || numel(&out[0]) != s * hc * dim)
        return fail(err, errlen, "cpu-ref engram41: text_mask / output do not match h [%ld,%d,%ld]", s, hc, dim);
    if (!(p[0] > 0) || !isfinite(p[0]) || (p[1] != 0 && p[1] != 1))
        return fail(err, errlen, "cpu-ref engram41: eps %g (want > 0) / ue8m0 %g (want 0 or 1)", p[0], p[1]);
    const cpuref_engram_args a = {hc,      (int)hd,       C,    (int)p[1], dim, rows, (float)p[0],
                                  tb->raw, tb->raw_scale, &wkv, &qw,       &kw};
    OOM(cpuref_engram41(&a, in[0].data, s, in[1].data, in[6].ndim ? in[6].data : NULL, out[0].data, mut));
    pack_bf16(&out[0]); /* h_out at resid_bf16 */
    return 0;
}

/* Operators that share a body. */

/* THE operators cpu-ref implements (its caps), each with its kernel: an
 * operator the ABI gains is not cpu-ref's until it has a kernel and a row
 * here (its cases are skipped for cpu-ref meanwhile).
 *     X(ENUM, kernel) */
/* clang-format off */
#define CPUREF_OPS(X)                                                                                           \
    X(LINEAR, r_linear) X(RMSNORM, r_rmsnorm) X(QHEAD_NORM, r_qhead_norm) X(ROPE, r_rope)                      \
    X(ACT_QUANT, r_quant) X(FP4_QUANT, r_quant) X(HADAMARD, r_quant) X(SPARSE_ATTN, r_sparse_attn)             \
    X(COMPRESSOR, r_compressor) X(INDEXER_SCORE, r_indexer_score) X(TOPK, r_topk) X(HC_PRE, r_hc_pre_head)     \
    X(HC_POST, r_hc_post) X(HC_HEAD, r_hc_pre_head) X(MOE_GATE, r_moe_gate) X(EXPERT, r_expert)                \
    X(WINDOW_ATTN_DECODE, r_window_attn_decode) X(KV41_QUANT, r_quant) X(MOE_GATE41, r_moe_gate41)             \
    X(CANDIDATE_BLOCKS, r_candidate_blocks) X(TOPK41, r_topk41) X(ENGRAM_HASH, r_engram_hash)                   \
    X(ENGRAM41, r_engram41)                                                                                    \
    X(COMPRESSOR41, r_compressor41)                                                                            \
    X(INDEX41_SCORE, r_index41_score)                                                                          \
    X(HC_PRE41, r_hc_pre41)
/* clang-format on */

typedef int (*run_fn)(R_ARGS);
#define R_ROW(E, fn) [DSV4Q_OP_##E] = fn,
static const run_fn run_table[DSV4Q_OP_COUNT] = {CPUREF_OPS(R_ROW)};
#undef R_ROW
#define R_CAP(E, fn) | DSV4Q_CAP(DSV4Q_OP_##E)
#define CPUREF_CAPS (0 CPUREF_OPS(R_CAP))

/* Name and arity of every ABI operator, from its list. */
#define A_ROW(E, nm, ni, no, np) [DSV4Q_OP_##E] = {#nm, ni, no, np},
static const struct { const char *name; int nin, nout, npar; } arity[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(A_ROW)};
#undef A_ROW

static int run_op(int mut, const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (c->op < 0 || c->op >= DSV4Q_OP_COUNT || !run_table[c->op]) return DSV4Q_BACKEND_UNSUPPORTED;
    const char *op = arity[c->op].name;
    const int nin = arity[c->op].nin, nout = arity[c->op].nout, npar = arity[c->op].npar;
    if (c->nin < nin || c->nout < nout || c->nparam < npar || !c->in || !c->out || (npar && !c->param))
        return fail(err, errlen, "cpu-ref %s: got %d inputs / %d outputs / %d params, want %d / %d / %d", op,
                    (int)c->nin, (int)c->nout, (int)c->nparam, nin, nout, npar);
    return run_table[c->op](mut, c, c->in, c->out, c->param, op, err, errlen);
}

/* ---- descriptors -------------------------------------------------------- */

#define M_ID(E, nm, ops, doc) CPUREF_M_##E,
static const int mutant_ids[CPUREF_M_COUNT] = {CPUREF_OK, CPUREF_MUTANT_LIST(M_ID)};
#undef M_ID

static int run(void *ctx, const dsv4q_bcall *call, char *err, size_t errlen)
{
    cpuref_tables_init();
    if (!call) return fail(err, errlen, "cpu-ref: NULL call");
    return run_op(ctx ? *(const int *)ctx : CPUREF_OK, call, err, errlen);
}

/* init() hands run() the mutant id; one per descriptor, generated. */
#define INIT(E)                                                                                  \
    static int init_##E(void **ctx, char *err, size_t errlen)                                    \
    {                                                                                            \
        (void)err; (void)errlen;                                                                 \
        cpuref_tables_init();                                                                    \
        *ctx = (void *)&mutant_ids[E];                                                           \
        return 0;                                                                                \
    }
#define M_INIT(E, nm, ops, doc) INIT(CPUREF_M_##E)
INIT(CPUREF_OK)
CPUREF_MUTANT_LIST(M_INIT)
#undef M_INIT
#undef INIT

#define DESC(E, nm)                                                                              \
    [E] = { DSV4Q_BACKEND_ABI_VERSION, sizeof(dsv4q_backend_v1), nm,                             \
      "cpu-ref 1 (FP32, BF16 storage at the source boundaries)", "source", CPUREF_CAPS,        \
      init_##E, run, NULL },
#define M_DESC(E, nm, ops, doc) DESC(CPUREF_M_##E, "mutant:" #nm)
static const dsv4q_backend_v1 descs[CPUREF_M_COUNT] = {
    DESC(CPUREF_OK, "cpu-ref")
    CPUREF_MUTANT_LIST(M_DESC)
};
#undef M_DESC
#undef DESC

const dsv4q_backend_v1 *dsv4q_cpuref_backend(const char *mutant_or_null)
{
    int m = dsv4q_cpuref_mutant_id(mutant_or_null);
    return m < 0 ? NULL : &descs[m];
}
