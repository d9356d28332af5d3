/*
 * plugin.cu - the CUDA kernel set behind the backend ABI
 * (abi/dsv4q_backend.h): libdsv4q_cuda.so exports dsv4q_backend_entry.
 *
 * What it owns: turning one ABI call (host tensors, decoded + raw) into
 * device buffers, one dqc_* operator, and host outputs. What it refuses:
 * anything that could take the harness down. Every shape the kernels rely
 * on is checked against the call first (K3 of dqc.h); every CUDA call is
 * checked and reported through err; nothing aborts or exits.
 *
 * Loading without a GPU. The CUDA runtime is linked statically
 * (nvcc -cudart static); it dlopens the driver (libcuda.so.1) only at the
 * first runtime call, in init(). So dlopen of this plugin succeeds on a
 * machine without a driver, and init() answers
 *     "no CUDA device (cudaGetDeviceCount: <CUDA's message>)".
 * Nothing touches CUDA at load time (the harness forks after loading).
 *
 * Weights. A weight with a raw form runs on its stored bytes: E4M3 codes +
 * 128x128 scales, packed E2M1 + per-32 scales, BF16 codes (block scales are
 * decoded to float on the host, exactly: a power of two or an F32 value).
 * A weight without one uses the decoded F32 values.
 *
 * Profile. The plugin declares "source" and applies call->boundaries (the
 * declared profile's boundary set, i.e. every rounding point of the
 * reference). Outputs whose last step is a BF16 storage rounding that is
 * on are reported as BF16 codes (ABI option (b)), the others as F32; set
 * DSV4Q_CUDA_OUTPUT=f32 to get F32 values everywhere. DSV4Q_CUDA_DEVICE
 * picks the device (default 0).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "abi/dsv4q_backend.h"
#include "backends/cuda/dsv4q_cuda_debug.h"
#include "backends/cuda/dqc.h"
#include "backends/cuda/dqc_num.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

#ifdef DQC_EMU
#define BUILD_VERSION "dsv4q-cuda 1 (CPU emulation build, dqc_emu)"
#else
#define DQC_STR2(x) #x
#define DQC_STR(x) DQC_STR2(x)
#define BUILD_VERSION "dsv4q-cuda 1 (sm_90 SASS + compute_80 PTX, cudart static " DQC_STR(CUDART_VERSION) ")"
#endif

namespace {

struct pctx {
    dqc_ctx c;
    int f32_out;
};

/* The per-call view: the call, the context, the error sink. */
struct io {
    pctx *p;
    const dsv4q_bcall *call;
    char *err;
    size_t errlen;
    const char *op;
};

int bad(io &o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int bad(io &o, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(o.err, o.errlen, "%s %s: %s", DQC_BUILD_NAME, o.op, msg);
    return -1;
}

int cuda_bad(io &o)
{
    snprintf(o.err, o.errlen, "%s %s: %s", DQC_BUILD_NAME, o.op, o.p->c.err);
    return -1;
}

/* Name and arity of every operator, from the ABI's list (in enum order, so
 * positional initialisers are right by construction). */
#define OP_NAME_(E, nm, ni, no, np) #nm,
#define OP_NIN_(E, nm, ni, no, np) ni,
#define OP_NOUT_(E, nm, ni, no, np) no,
#define OP_NPAR_(E, nm, ni, no, np) np,
const char *const op_names[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(OP_NAME_)};
const int op_nin[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(OP_NIN_)};
const int op_nout[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(OP_NOUT_)};
const int op_npar[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(OP_NPAR_)};

int64_t numel(const dsv4q_bt *t)
{
    if (t->ndim <= 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim && i < 6; i++) n *= t->shape[i];
    return n;
}

/* Input i: present, of ndim nd, dtype F32 (or I32), non-negative extents. */
const dsv4q_bt *in_t(io &o, int i, int nd, int dtype = DSV4Q_BT_F32)
{
    const dsv4q_bt *t = &o.call->in[i];
    if (t->ndim != nd) {
        bad(o, "input %d (%s): ndim %d, expected %d", i, t->name ? t->name : "?", t->ndim, nd);
        return NULL;
    }
    for (int k = 0; k < nd; k++)
        if (t->shape[k] < 0) {
            bad(o, "input %d: negative extent", i);
            return NULL;
        }
    if (t->dtype != dtype) {
        bad(o, "input %d (%s): dtype %d, expected %d", i, t->name ? t->name : "?", t->dtype, dtype);
        return NULL;
    }
    if (numel(t) > 0 && !t->data) {
        bad(o, "input %d (%s): no data", i, t->name ? t->name : "?");
        return NULL;
    }
    return t;
}

/* Optional input: NULL when empty (ndim 0), else as in_t. ok = 0 on error. */
const dsv4q_bt *opt_t(io &o, int i, int nd, int dtype, int *ok)
{
    const dsv4q_bt *t = &o.call->in[i];
    *ok = 1;
    if (t->ndim == 0 || !t->data) return NULL;
    t = in_t(o, i, nd, dtype);
    if (!t) *ok = 0;
    return t;
}

/* Output i must have exactly the shape the operator produces. */
int out_shape(io &o, int i, int nd, int64_t d0, int64_t d1 = 0, int64_t d2 = 0)
{
    const dsv4q_bt *t = &o.call->out[i];
    const int64_t want[3] = {d0, d1, d2};
    if (t->ndim != nd) return bad(o, "output %d: ndim %d, expected %d", i, t->ndim, nd);
    for (int k = 0; k < nd; k++)
        if (t->shape[k] != want[k])
            return bad(o, "output %d: extent %d is %lld, expected %lld", i, k, (long long)t->shape[k],
                       (long long)want[k]);
    if (numel(t) > 0 && !t->data) return bad(o, "output %d: no buffer", i);
    return 0;
}

template <class T>
T *up_raw(io &o, const void *h, int64_t n)
{
    T *d = (T *)dqc_alloc(&o.p->c, sizeof(T) * (size_t)(n > 0 ? n : 1));
    if (!d) {
        cuda_bad(o);
        return NULL;
    }
    if (n > 0 && dqc_check(&o.p->c, cudaMemcpyAsync(d, h, sizeof(T) * (size_t)n, cudaMemcpyHostToDevice, o.p->c.stream),
                           "upload", __FILE__, __LINE__)) {
        cuda_bad(o);
        return NULL;
    }
    return d;
}

const float *up_f32(io &o, const dsv4q_bt *t) { return t ? up_raw<float>(o, t->data, numel(t)) : NULL; }
const int32_t *up_i32(io &o, const dsv4q_bt *t) { return t ? up_raw<int32_t>(o, t->data, numel(t)) : NULL; }

float *dev_out(io &o, int64_t n)
{
    float *d = (float *)dqc_alloc(&o.p->c, sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!d) cuda_bad(o);
    return d;
}

/* Weight input i, logical [out, in] (the decoded tensor's shape). */
int up_weight(io &o, int i, dqc_weight *w)
{
    const dsv4q_bt *t = in_t(o, i, 2);
    if (!t) return -1;
    const int64_t out = t->shape[0], in = t->shape[1], n = out * in;
    w->out = out;
    w->in = in;
    w->scale = NULL;
    w->scale_cols = 0;
    if (!t->raw) {
        w->fmt = DQC_WF_F32;
        w->codes = up_f32(o, t);
        return w->codes ? 0 : -1;
    }
    const bool fp4 = t->raw_dtype == DSV4Q_BT_I8;
    if (t->raw_ndim != 2 || t->raw_shape[0] != out || t->raw_shape[1] != (fp4 ? in / 2 : in))
        return bad(o, "weight %d (%s): raw shape does not match [%lld, %lld]", i, t->name ? t->name : "?",
                   (long long)out, (long long)in);
    switch (t->raw_dtype) {
    case DSV4Q_BT_F32:
        w->fmt = DQC_WF_F32;
        w->codes = up_raw<float>(o, t->raw, n);
        return w->codes ? 0 : -1;
    case DSV4Q_BT_BF16:
        w->fmt = DQC_WF_BF16;
        w->codes = up_raw<uint16_t>(o, t->raw, n);
        return w->codes ? 0 : -1;
    case DSV4Q_BT_F8_E4M3:
    case DSV4Q_BT_I8: {
        w->fmt = fp4 ? DQC_WF_FP4 : DQC_WF_FP8;
        if (fp4 && in % 32) return bad(o, "weight %d: FP4 with in = %lld, not a multiple of 32", i, (long long)in);
        const int64_t srows = fp4 ? out : (out + 127) / 128, scols = fp4 ? in / 32 : (in + 127) / 128;
        if (!t->raw_scale || t->scale_shape[0] != srows || t->scale_shape[1] != scols)
            return bad(o, "weight %d (%s): scale shape [%lld, %lld], expected [%lld, %lld]", i,
                       t->name ? t->name : "?", (long long)t->scale_shape[0], (long long)t->scale_shape[1],
                       (long long)srows, (long long)scols);
        if (t->scale_dtype != DSV4Q_BT_F8_E8M0 && t->scale_dtype != DSV4Q_BT_F32)
            return bad(o, "weight %d: scale dtype %d (want F8_E8M0 or F32)", i, t->scale_dtype);
        float *sc = (float *)malloc(sizeof(float) * (size_t)(srows * scols));
        if (!sc) return bad(o, "out of host memory");
        for (int64_t k = 0; k < srows * scols; k++) {
            if (t->scale_dtype == DSV4Q_BT_F32) {
                sc[k] = ((const float *)t->raw_scale)[k];
            } else {
                const uint8_t e = ((const uint8_t *)t->raw_scale)[k];
                sc[k] = e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);   /* 2^-127 is a float subnormal: exact */
            }
        }
        w->codes = up_raw<uint8_t>(o, t->raw, fp4 ? n / 2 : n);
        w->scale = up_raw<float>(o, sc, srows * scols);
        /* the copies are asynchronous: wait before the host buffer goes */
        int rc = (w->codes && w->scale) ? 0 : -1;
        if (!rc && dqc_check(&o.p->c, cudaStreamSynchronize(o.p->c.stream), "upload", __FILE__, __LINE__))
            rc = cuda_bad(o);
        free(sc);
        w->scale_cols = scols;
        return rc;
    }
    default:
        return bad(o, "weight %d (%s): raw dtype %d is not BF16, F8_E4M3, I8 (packed E2M1) or F32", i,
                   t->name ? t->name : "?", t->raw_dtype);
    }
}

/* Copy device output d (n floats) into out[i]: BF16 codes when bf16 (the
 * values are already BF16-rounded), else F32. */
int put_f32(io &o, int i, const float *d, int64_t n, bool bf16)
{
    dsv4q_bt *t = &o.call->out[i];
    if (n <= 0) return 0;
    float *h = (float *)malloc(sizeof(float) * (size_t)n);
    if (!h) return bad(o, "out of host memory");
    if (dqc_check(&o.p->c, cudaMemcpy(h, d, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost), "download", __FILE__,
                  __LINE__)) {
        free(h);
        return cuda_bad(o);
    }
    if (bf16 && !o.p->f32_out) {
        uint16_t *c = (uint16_t *)t->data;
        for (int64_t k = 0; k < n; k++) c[k] = dqc_bf16_code(h[k]);
        t->dtype = DSV4Q_BT_BF16;
    } else {
        memcpy(t->data, h, sizeof(float) * (size_t)n);
        t->dtype = DSV4Q_BT_F32;
    }
    free(h);
    return 0;
}

int put_i32(io &o, int i, const int32_t *d, int64_t n)
{
    dsv4q_bt *t = &o.call->out[i];
    if (n <= 0) return 0;
    if (dqc_check(&o.p->c, cudaMemcpy(t->data, d, sizeof(int32_t) * (size_t)n, cudaMemcpyDeviceToHost), "download",
                  __FILE__, __LINE__))
        return cuda_bad(o);
    t->dtype = DSV4Q_BT_I32;
    return 0;
}

bool on(uint64_t bs, int b) { return (bs >> b) & 1u; }
/* v is an integer that fits int64_t (checked before the cast: a NaN or
 * out-of-range cast is undefined). */
bool is_int(double v) { return v > -0x1p62 && v < 0x1p62 && v == (double)(int64_t)v; }

/* --- the operators ---------------------------------------------------------- */

int op_linear(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *x = in_t(o, 0, 2);
    if (!x) return -1;
    dqc_weight w;
    if (up_weight(o, 1, &w)) return -1;
    const int64_t s = x->shape[0], K = x->shape[1];
    if (w.in != K) return bad(o, "w is [%lld, %lld], x has K = %lld", (long long)w.out, (long long)w.in, (long long)K);
    if (out_shape(o, 0, 2, s, w.out)) return -1;
    const float *dx = up_f32(o, x);
    float *y = dev_out(o, s * w.out);
    if (!dx || !y) return -1;
    const bool bf = p[1] != 0;
    if (dqc_linear(&o.p->c, bs, p[0] != 0, &w, dx, (long)s, y, bf ? DQC_B_LINEAR_BF16 : -1)) return cuda_bad(o);
    return put_f32(o, 0, y, s * w.out, bf && on(bs, DQC_B_LINEAR_BF16));
}

int op_rmsnorm(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *x = in_t(o, 0, 2), *w = x ? in_t(o, 1, 1) : NULL;
    if (!x || !w) return -1;
    const int64_t rows = x->shape[0], d = x->shape[1];
    if (w->shape[0] != d) return bad(o, "w has %lld elements, x rows %lld", (long long)w->shape[0], (long long)d);
    if (out_shape(o, 0, 2, rows, d)) return -1;
    const float *dx = up_f32(o, x), *dw = up_f32(o, w);
    float *y = dev_out(o, rows * d);
    if (!dx || !dw || !y) return -1;
    if (dqc_rmsnorm(&o.p->c, bs, dx, (long)rows, (long)d, dw, p[0], y)) return cuda_bad(o);
    return put_f32(o, 0, y, rows * d, on(bs, DQC_B_NORM_BF16));
}

int op_qhead_norm(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *q = in_t(o, 0, 2);
    if (!q) return -1;
    const int64_t rows = q->shape[0], D = q->shape[1];
    if (out_shape(o, 0, 2, rows, D)) return -1;
    const float *dq = up_f32(o, q);
    float *y = dev_out(o, rows * D);
    if (!dq || !y) return -1;
    if (dqc_qhead_norm(&o.p->c, bs, dq, (long)rows, (long)D, p[0], y)) return cuda_bad(o);
    return put_f32(o, 0, y, rows * D, on(bs, DQC_B_QNORM_BF16));
}

int op_rope(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *x = in_t(o, 0, 2), *pos = x ? in_t(o, 1, 1, DSV4Q_BT_I32) : NULL;
    if (!x || !pos) return -1;
    const int64_t rows = x->shape[0], r = x->shape[1];
    if (pos->shape[0] != rows) return bad(o, "pos has %lld rows, x %lld", (long long)pos->shape[0], (long long)rows);
    if (r <= 0 || r % 2 || r > 2048) return bad(o, "rope width %lld (even, <= 2048)", (long long)r);
    for (int64_t i = 0; i < rows; i++)
        if (((const int32_t *)pos->data)[i] < 0) return bad(o, "pos[%lld] is negative", (long long)i);
    if (out_shape(o, 0, 2, rows, r)) return -1;
    dqc_rope_params rp = {(int)r, p[0], (int)p[1], p[2], p[3], p[4]};
    dqc_rope_table tab;
    const float *dx = up_f32(o, x);
    const int32_t *dp = up_i32(o, pos);
    float *y = dev_out(o, rows * r);
    if (!dx || !dp || !y) return -1;
    if (dqc_rope_prepare(&o.p->c, bs, &rp, &tab) || dqc_rope(&o.p->c, bs, &tab, dx, dp, (long)rows, p[5] != 0, y))
        return cuda_bad(o);
    return put_f32(o, 0, y, rows * r, on(bs, DQC_B_ROPE_BF16));
}

/* act_quant (kind 0), fp4_quant (1), hadamard (2). */
int op_rowwise(io &o, uint64_t bs, const double *p, int kind)
{
    const dsv4q_bt *x = in_t(o, 0, 2);
    if (!x) return -1;
    const int64_t rows = x->shape[0], n = x->shape[1];
    if (out_shape(o, 0, 2, rows, n)) return -1;
    if (kind == 0 && (!is_int(p[0]) || p[0] < 1 || p[0] > 1 << 20)) return bad(o, "block %g", p[0]);
    if (kind == 2 && (n <= 0 || (n & (n - 1)))) return bad(o, "n = %lld is not a power of two", (long long)n);
    const float *dx = up_f32(o, x);
    float *y = dev_out(o, rows * n);
    if (!dx || !y) return -1;
    dqc_ctx *c = &o.p->c;
    int rc = kind == 0   ? dqc_act_quant(c, dx, (long)rows, (long)n, (int)p[0], p[1] != 0, y)
             : kind == 1 ? dqc_fp4_quant(c, dx, (long)rows, (long)n, y)
                         : dqc_hadamard(c, bs, dx, (long)rows, (long)n, y);
    if (rc) return cuda_bad(o);
    return put_f32(o, 0, y, rows * n, kind == 2 && on(bs, DQC_B_HADAMARD_BF16));
}

int op_sparse_attn(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *q = in_t(o, 0, 3), *kv = q ? in_t(o, 1, 2) : NULL;
    const dsv4q_bt *idx = kv ? in_t(o, 2, 2, DSV4Q_BT_I32) : NULL, *sink = idx ? in_t(o, 3, 1) : NULL;
    if (!sink) return -1;
    const int64_t s = q->shape[0], H = q->shape[1], D = q->shape[2], N = kv->shape[0];
    if (kv->shape[1] != D || idx->shape[0] != s || sink->shape[0] != H)
        return bad(o, "shapes q [%lld,%lld,%lld], kv [%lld,%lld], idx [%lld,%lld], sink [%lld] do not agree",
                   (long long)s, (long long)H, (long long)D, (long long)N, (long long)kv->shape[1],
                   (long long)idx->shape[0], (long long)idx->shape[1], (long long)sink->shape[0]);
    if (D > 8192 || H > 0x7fff) return bad(o, "D %lld / H %lld too large", (long long)D, (long long)H);
    if (out_shape(o, 0, 3, s, H, D)) return -1;
    const float *dq = up_f32(o, q), *dkv = up_f32(o, kv), *dsink = up_f32(o, sink);
    const int32_t *didx = up_i32(o, idx);
    float *y = dev_out(o, s * H * D);
    if (!dq || !dkv || !dsink || !didx || !y) return -1;
    if (dqc_sparse_attn(&o.p->c, bs, dq, (long)s, (int)H, (int)D, dkv, (long)N, didx, (long)idx->shape[1], dsink,
                        (float)p[0], y))
        return cuda_bad(o);
    return put_f32(o, 0, y, s * H * D, on(bs, DQC_B_ATTN_OUT_BF16));
}

/* WINDOW_ATTN_DECODE: the ring update and the decode column layout
 * (harness/ops/ops.c) are bookkeeping done on the host; the attention
 * itself is the SPARSE_ATTN kernel over the key rows [ring_out | cmp]. */
int op_window_attn_decode(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *q = in_t(o, 0, 3), *kvn = q ? in_t(o, 1, 2) : NULL, *ring = kvn ? in_t(o, 2, 2) : NULL;
    const dsv4q_bt *sink = ring ? in_t(o, 5, 1) : NULL;
    if (!sink) return -1;
    const dsv4q_bt *cmp = &o.call->in[3], *cidx = &o.call->in[4];
    if ((cmp->ndim && !in_t(o, 3, 2)) || (cidx->ndim && !in_t(o, 4, 2, DSV4Q_BT_I32))) return -1;
    if (!is_int(p[0]) || !is_int(p[1]) || p[0] < 0 || p[1] < 1 || p[1] > 1 << 20)
        return bad(o, "position %g / window %g (need p >= 0, 1 <= w <= 2^20)", p[0], p[1]);
    const int64_t H = q->shape[1], D = q->shape[2], pos = (int64_t)p[0], w = (int64_t)p[1];
    const int64_t Nc = cmp->ndim ? cmp->shape[0] : 0, nc = cidx->ndim ? cidx->shape[1] : 0;
    if (q->shape[0] != 1 || kvn->shape[0] != 1 || kvn->shape[1] != D || ring->shape[0] != w ||
        ring->shape[1] != D || (Nc && cmp->shape[1] != D) || (cidx->ndim && cidx->shape[0] != 1) ||
        sink->shape[0] != H)
        return bad(o, "shapes do not match q [1,%lld,%lld] and window %lld", (long long)H, (long long)D,
                   (long long)w);
    if (D > 8192 || H > 0x7fff) return bad(o, "D %lld / H %lld too large", (long long)D, (long long)H);
    if (out_shape(o, 0, 3, 1, H, D) || out_shape(o, 1, 2, w, D)) return -1;
    float *keys = (float *)malloc(sizeof(float) * (size_t)((w + Nc) * D));
    int32_t *cols = (int32_t *)malloc(sizeof(int32_t) * (size_t)(w + nc));
    int rc = -1;
    if (!keys || !cols) {
        rc = bad(o, "out of host memory");
        goto out;
    }
    /* kv_new goes into slot p % w first; then the window slots oldest first */
    memcpy(keys, ring->data, sizeof(float) * (size_t)(w * D));
    memcpy(keys + (pos % w) * D, kvn->data, sizeof(float) * (size_t)D);
    if (Nc) memcpy(keys + w * D, cmp->data, sizeof(float) * (size_t)(Nc * D));
    for (int64_t j = 0; j < w; j++)
        cols[j] = (int32_t)(pos >= w - 1 ? (pos % w + 1 + j) % w : (j <= pos ? j : -1));
    for (int64_t j = 0; j < nc; j++) {
        const int32_t ci = ((const int32_t *)cidx->data)[j];
        cols[w + j] = ci >= 0 && ci < Nc ? (int32_t)(w + ci) : -1;
    }
    {
        const float *dq = up_f32(o, q), *dsink = up_f32(o, sink);
        const float *dk = up_raw<float>(o, keys, (w + Nc) * D);
        const int32_t *dcols = up_raw<int32_t>(o, cols, w + nc);
        float *y = dev_out(o, H * D);
        if (!dq || !dsink || !dk || !dcols || !y) goto out;
        if (dqc_sparse_attn(&o.p->c, bs, dq, 1, (int)H, (int)D, dk, (long)(w + Nc), dcols, (long)(w + nc), dsink,
                            (float)p[2], y) ||
            dqc_check(&o.p->c, cudaStreamSynchronize(o.p->c.stream), "window decode", __FILE__, __LINE__)) {
            rc = cuda_bad(o);
            goto out;
        }
        rc = put_f32(o, 0, y, H * D, on(bs, DQC_B_ATTN_OUT_BF16));
    }
    if (!rc) {   /* ring_out: F32, a copy of the updated ring */
        memcpy(o.call->out[1].data, keys, sizeof(float) * (size_t)(w * D));
        o.call->out[1].dtype = DSV4Q_BT_F32;
    }
out:
    free(keys);
    free(cols);
    return rc;
}

int op_compressor(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *x = in_t(o, 0, 2), *ape = x ? in_t(o, 3, 2) : NULL, *norm = ape ? in_t(o, 4, 1) : NULL;
    if (!norm) return -1;
    if (!is_int(p[0]) || p[0] < 1 || p[0] > 128) return bad(o, "ratio %g (1..128)", p[0]);
    const int ratio = (int)p[0], coff = ratio == 4 ? 2 : 1, rotate = p[1] != 0, rdim = (int)p[3];
    const int64_t s = x->shape[0], d = x->shape[1], Dc = norm->shape[0], W = coff * Dc;
    dqc_cmp cm;
    if (up_weight(o, 1, &cm.wkv) || up_weight(o, 2, &cm.wgate)) return -1;
    if (cm.wkv.out != W || cm.wkv.in != d || cm.wgate.out != W || cm.wgate.in != d)
        return bad(o, "wkv/wgate must be [%lld, %lld]", (long long)W, (long long)d);
    if (ape->shape[0] != ratio || ape->shape[1] != W) return bad(o, "ape must be [%d, %lld]", ratio, (long long)W);
    if (rdim <= 0 || rdim % 2 || rdim > Dc) return bad(o, "rope_dim %d with Dc %lld", rdim, (long long)Dc);
    if (rotate && (Dc & (Dc - 1))) return bad(o, "rotate needs a power-of-two Dc, got %lld", (long long)Dc);
    if (out_shape(o, 0, 2, s / ratio, Dc)) return -1;
    cm.ratio = ratio;
    cm.Dc = (int)Dc;
    cm.rotate = rotate;
    cm.ape = up_f32(o, ape);
    cm.norm = up_f32(o, norm);
    const float *dx = up_f32(o, x);
    float *rows = dev_out(o, (s / ratio) * Dc);
    if (!cm.ape || !cm.norm || !dx || !rows) return -1;
    dqc_rope_params rp = {rdim, p[4], (int)p[5], p[6], p[7], p[8]};
    dqc_rope_table tab;
    if (dqc_rope_prepare(&o.p->c, bs, &rp, &tab)) return cuda_bad(o);
    dqc_cmp_state st;
    if (dqc_cmp_state_init(&o.p->c, &st, ratio, (int)Dc)) return cuda_bad(o);
    long n = dqc_compressor(&o.p->c, bs, p[9] != 0, &cm, &st, dx, (long)s, 0, &tab, p[2], rows);
    if (n >= 0 && dqc_check(&o.p->c, cudaStreamSynchronize(o.p->c.stream), "compressor", __FILE__, __LINE__)) n = -1;
    dqc_cmp_state_free(&st);
    if (n < 0) return cuda_bad(o);
    /* mixed row: RoPE dims BF16, nope dims FP8/FP4 values times a scale */
    return put_f32(o, 0, rows, (s / ratio) * Dc, false);
}

int op_indexer_score(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *q = in_t(o, 0, 3), *w = q ? in_t(o, 1, 2) : NULL, *K = w ? in_t(o, 2, 2) : NULL;
    if (!K) return -1;
    const int64_t s = q->shape[0], Hi = q->shape[1], Di = q->shape[2], T = K->shape[0];
    if (w->shape[0] != s || w->shape[1] != Hi || K->shape[1] != Di) return bad(o, "q, w, K shapes do not agree");
    if (!is_int(p[0]) || p[0] < 0 || !is_int(p[1]) || p[1] < 1) return bad(o, "start_pos %g, ratio %g", p[0], p[1]);
    if (out_shape(o, 0, 2, s, T)) return -1;
    const float *dq = up_f32(o, q), *dw = up_f32(o, w), *dK = up_f32(o, K);
    float *y = dev_out(o, s * T);
    if (!dq || !dw || !dK || !y) return -1;
    if (dqc_indexer_score(&o.p->c, bs, dq, dw, (long)s, (int)Hi, (int)Di, dK, (long)T, (long)p[0], (int)p[1], y))
        return cuda_bad(o);
    return put_f32(o, 0, y, s * T, on(bs, DQC_B_IDX_SCORE_BF16));
}

int op_topk(io &o, const double *p)
{
    const dsv4q_bt *sc = in_t(o, 0, 2);
    if (!sc) return -1;
    if (!is_int(p[0]) || p[0] < 0 || p[0] > 1 << 24) return bad(o, "k %g", p[0]);
    const int64_t rows = sc->shape[0], T = sc->shape[1], k = (int64_t)p[0];
    if (out_shape(o, 0, 2, rows, k)) return -1;
    const float *ds = up_f32(o, sc);
    int32_t *y = (int32_t *)dev_out(o, rows * k);
    if (!ds || !y) return -1;
    if (dqc_topk(&o.p->c, ds, (long)rows, (long)T, (int)k, y)) return cuda_bad(o);
    return put_i32(o, 0, y, rows * k);
}

int op_hc(io &o, uint64_t bs, const double *p, bool head)
{
    const dsv4q_bt *X = in_t(o, 0, 3), *scale = X ? in_t(o, 2, 1) : NULL, *base = scale ? in_t(o, 3, 1) : NULL;
    if (!base) return -1;
    const int64_t s = X->shape[0], hc = X->shape[1], d = X->shape[2], nmix = head ? hc : (2 + hc) * hc;
    if (hc < 1 || hc > 16) return bad(o, "hc %lld (1..16)", (long long)hc);
    dqc_weight fn;
    if (up_weight(o, 1, &fn)) return -1;
    if (fn.out != nmix || fn.in != hc * d) return bad(o, "fn must be [%lld, %lld]", (long long)nmix, (long long)(hc * d));
    if (scale->shape[0] != (head ? 1 : 3) || base->shape[0] != nmix) return bad(o, "scale / base sizes");
    if (out_shape(o, 0, 2, s, d)) return -1;
    if (!head && (out_shape(o, 1, 2, s, hc) || out_shape(o, 2, 3, s, hc, hc))) return -1;
    if (!head && (!is_int(p[2]) || p[2] < 0 || p[2] > 1000)) return bad(o, "iters %g", p[2]);
    const float *dX = up_f32(o, X), *dscale = up_f32(o, scale), *dbase = up_f32(o, base);
    float *y = dev_out(o, s * d), *post = head ? NULL : dev_out(o, s * hc), *comb = head ? NULL : dev_out(o, s * hc * hc);
    if (!dX || !dscale || !dbase || !y || (!head && (!post || !comb))) return -1;
    int rc = head ? dqc_hc_head(&o.p->c, bs, dX, (long)s, (int)hc, (long)d, &fn, dscale, dbase, p[0], p[1], y)
                  : dqc_hc_pre(&o.p->c, bs, dX, (long)s, (int)hc, (long)d, &fn, dscale, dbase, p[0], p[1], (int)p[2],
                               y, post, comb);
    if (rc) return cuda_bad(o);
    if (put_f32(o, 0, y, s * d, on(bs, DQC_B_RESID_BF16))) return -1;
    if (!head && (put_f32(o, 1, post, s * hc, false) || put_f32(o, 2, comb, s * hc * hc, false))) return -1;
    return 0;
}

int op_hc_post(io &o, uint64_t bs)
{
    const dsv4q_bt *x = in_t(o, 0, 2), *X = x ? in_t(o, 1, 3) : NULL, *post = X ? in_t(o, 2, 2) : NULL;
    const dsv4q_bt *comb = post ? in_t(o, 3, 3) : NULL;
    if (!comb) return -1;
    const int64_t s = X->shape[0], hc = X->shape[1], d = X->shape[2];
    if (x->shape[0] != s || x->shape[1] != d || post->shape[0] != s || post->shape[1] != hc || comb->shape[0] != s ||
        comb->shape[1] != hc || comb->shape[2] != hc)
        return bad(o, "x, X, post, comb shapes do not agree");
    if (out_shape(o, 0, 3, s, hc, d)) return -1;
    const float *dx = up_f32(o, x), *dX = up_f32(o, X), *dp = up_f32(o, post), *dc = up_f32(o, comb);
    float *y = dev_out(o, s * hc * d);
    if (!dx || !dX || !dp || !dc || !y) return -1;
    if (dqc_hc_post(&o.p->c, bs, dx, dX, dp, dc, (long)s, (int)hc, (long)d, y)) return cuda_bad(o);
    return put_f32(o, 0, y, s * hc * d, on(bs, DQC_B_RESID_BF16));
}

int op_moe_gate(io &o, const double *p)
{
    const dsv4q_bt *x = in_t(o, 0, 2);
    if (!x) return -1;
    int ok1, ok2, ok3;
    const dsv4q_bt *bias = opt_t(o, 2, 1, DSV4Q_BT_F32, &ok1), *t2e = opt_t(o, 3, 2, DSV4Q_BT_I32, &ok2);
    const dsv4q_bt *ids = opt_t(o, 4, 1, DSV4Q_BT_I32, &ok3);
    if (!ok1 || !ok2 || !ok3) return -1;
    dqc_weight W;
    if (up_weight(o, 1, &W)) return -1;
    const int64_t s = x->shape[0], d = x->shape[1], n_exp = W.out;
    if (!is_int(p[0]) || p[0] < 1 || p[0] > n_exp) return bad(o, "k %g with %lld experts", p[0], (long long)n_exp);
    const int k = (int)p[0], f = (int)p[2];
    if (W.in != d) return bad(o, "W is [%lld, %lld], x has d = %lld", (long long)n_exp, (long long)W.in, (long long)d);
    if (n_exp > 4096) return bad(o, "%lld experts (at most 4096)", (long long)n_exp);
    if (f < 0 || f > 2 || p[2] != f) return bad(o, "score_func %g", p[2]);
    if (bias && bias->shape[0] != n_exp) return bad(o, "bias has %lld entries", (long long)bias->shape[0]);
    if (t2e) {
        if (t2e->shape[1] != k) return bad(o, "tid2eid is [%lld, %lld], k = %d", (long long)t2e->shape[0],
                                           (long long)t2e->shape[1], k);
        if (!ids || ids->shape[0] != s) return bad(o, "hash routing needs ids [%lld]", (long long)s);
        const int32_t *id = (const int32_t *)ids->data, *tab = (const int32_t *)t2e->data;
        for (int64_t t = 0; t < s; t++) {
            if (id[t] < 0 || id[t] >= t2e->shape[0]) return bad(o, "ids[%lld] = %d outside the table", (long long)t, id[t]);
            for (int j = 0; j < k; j++) {
                const int32_t e = tab[(int64_t)id[t] * k + j];
                if (e < 0 || e >= n_exp) return bad(o, "tid2eid[%d][%d] = %d is not an expert", id[t], j, e);
            }
        }
    }
    if (out_shape(o, 0, 2, s, k) || out_shape(o, 1, 2, s, k)) return -1;
    const float *dx = up_f32(o, x), *db = up_f32(o, bias);
    const int32_t *dt = up_i32(o, t2e), *di = t2e ? up_i32(o, ids) : NULL;
    float *wts = dev_out(o, s * k);
    int32_t *ix = (int32_t *)dev_out(o, s * k);
    if (!dx || (bias && !db) || (t2e && (!dt || !di)) || !wts || !ix) return -1;
    if (dqc_moe_gate(&o.p->c, dx, (long)s, (long)d, &W, db, dt, di, (int)n_exp, k, f, p[1], wts, ix))
        return cuda_bad(o);
    if (put_f32(o, 0, wts, s * k, false)) return -1;
    return put_i32(o, 1, ix, s * k);
}

int op_expert(io &o, uint64_t bs, const double *p)
{
    const dsv4q_bt *x = in_t(o, 0, 2);
    if (!x) return -1;
    int ok;
    const dsv4q_bt *wt = opt_t(o, 4, 1, DSV4Q_BT_F32, &ok);
    if (!ok) return -1;
    dqc_weight w1, w2, w3;
    if (up_weight(o, 1, &w1) || up_weight(o, 2, &w2) || up_weight(o, 3, &w3)) return -1;
    const int64_t n = x->shape[0], d = x->shape[1], I = w1.out;
    if (w1.in != d || w3.out != I || w3.in != d || w2.out != d || w2.in != I)
        return bad(o, "w1 [%lld,%lld], w2 [%lld,%lld], w3 [%lld,%lld] do not fit x [%lld,%lld]", (long long)w1.out,
                   (long long)w1.in, (long long)w2.out, (long long)w2.in, (long long)w3.out, (long long)w3.in,
                   (long long)n, (long long)d);
    if (wt && wt->shape[0] != n) return bad(o, "weight has %lld entries, x %lld rows", (long long)wt->shape[0], (long long)n);
    if (out_shape(o, 0, 2, n, d)) return -1;
    const float *dx = up_f32(o, x), *dw = up_f32(o, wt);
    float *y = dev_out(o, n * d);
    if (!dx || (wt && !dw) || !y) return -1;
    if (dqc_expert(&o.p->c, bs, p[1] != 0, &w1, &w2, &w3, dx, (long)n, dw, p[0], y)) return cuda_bad(o);
    return put_f32(o, 0, y, n * d, on(bs, DQC_B_LINEAR_BF16));
}

/* --- the ABI ----------------------------------------------------------------- */

int cu_init(void **ctx, char *err, size_t errlen)
{
    *ctx = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        return -1;
    }
    if (n <= 0) {
        snprintf(err, errlen, "no CUDA device (cudaGetDeviceCount: 0 devices)");
        return -1;
    }
    int dev = 0;
    const char *env = getenv("DSV4Q_CUDA_DEVICE");
    if (env && *env) dev = atoi(env);
    if (dev < 0 || dev >= n) {
        snprintf(err, errlen, "DSV4Q_CUDA_DEVICE=%s: the machine has %d CUDA device(s)", env, n);
        return -1;
    }
    pctx *p = (pctx *)calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "%s: out of host memory", DQC_BUILD_NAME);
        return -1;
    }
    if (dqc_ctx_init(&p->c, dev)) {
        snprintf(err, errlen, "%s init on device %d: %s", DQC_BUILD_NAME, dev, p->c.err);
        dqc_ctx_fini(&p->c);
        free(p);
        return -1;
    }
    const char *of = getenv("DSV4Q_CUDA_OUTPUT");
    p->f32_out = of && !strcmp(of, "f32");
    *ctx = p;
    return 0;
}

int cu_run(void *ctx, const dsv4q_bcall *call, char *err, size_t errlen)
{
    if (!call) {
        snprintf(err, errlen, "%s: no call", DQC_BUILD_NAME);
        return DSV4Q_BACKEND_ERROR;
    }
    if (call->op < 0 || call->op >= DSV4Q_OP_COUNT) return DSV4Q_BACKEND_UNSUPPORTED;
    io o = {(pctx *)ctx, call, err, errlen, op_names[call->op]};
    if (!ctx) {
        bad(o, "backend not initialised (init() failed or was not called)");
        return DSV4Q_BACKEND_ERROR;
    }
    if (call->nin != op_nin[call->op] || call->nout != op_nout[call->op] || call->nparam < op_npar[call->op] ||
        (call->nin && !call->in) || (call->nout && !call->out) || (op_npar[call->op] && !call->param)) {
        bad(o, "call has %d inputs, %d outputs, %d params; the operator takes %d, %d, %d", call->nin, call->nout,
            call->nparam, op_nin[call->op], op_nout[call->op], op_npar[call->op]);
        return DSV4Q_BACKEND_ERROR;
    }
    const uint64_t bs = call->boundaries;
    const double *p = call->param;
    dqc_ctx *c = &o.p->c;
    dqc_scratch_reset(c);
    int rc;
    switch (call->op) {
    case DSV4Q_OP_LINEAR: rc = op_linear(o, bs, p); break;
    case DSV4Q_OP_RMSNORM: rc = op_rmsnorm(o, bs, p); break;
    case DSV4Q_OP_QHEAD_NORM: rc = op_qhead_norm(o, bs, p); break;
    case DSV4Q_OP_ROPE: rc = op_rope(o, bs, p); break;
    case DSV4Q_OP_ACT_QUANT: rc = op_rowwise(o, bs, p, 0); break;
    case DSV4Q_OP_FP4_QUANT: rc = op_rowwise(o, bs, p, 1); break;
    case DSV4Q_OP_HADAMARD: rc = op_rowwise(o, bs, p, 2); break;
    case DSV4Q_OP_SPARSE_ATTN: rc = op_sparse_attn(o, bs, p); break;
    case DSV4Q_OP_COMPRESSOR: rc = op_compressor(o, bs, p); break;
    case DSV4Q_OP_INDEXER_SCORE: rc = op_indexer_score(o, bs, p); break;
    case DSV4Q_OP_TOPK: rc = op_topk(o, p); break;
    case DSV4Q_OP_HC_PRE: rc = op_hc(o, bs, p, false); break;
    case DSV4Q_OP_HC_POST: rc = op_hc_post(o, bs); break;
    case DSV4Q_OP_HC_HEAD: rc = op_hc(o, bs, p, true); break;
    case DSV4Q_OP_MOE_GATE: rc = op_moe_gate(o, p); break;
    case DSV4Q_OP_EXPERT: rc = op_expert(o, bs, p); break;
    case DSV4Q_OP_WINDOW_ATTN_DECODE: rc = op_window_attn_decode(o, bs, p); break;
    default: return DSV4Q_BACKEND_UNSUPPORTED;
    }
    /* a kernel fault surfaces at the next synchronisation at the latest */
    if (!rc && dqc_check(c, cudaStreamSynchronize(c->stream), "end of call", __FILE__, __LINE__)) rc = cuda_bad(o);
    dqc_scratch_reset(c);
    return rc ? DSV4Q_BACKEND_ERROR : DSV4Q_BACKEND_OK;
}

void cu_fini(void *ctx)
{
    pctx *p = (pctx *)ctx;
    if (!p) return;
    dqc_ctx_fini(&p->c);
    free(p);
}

const dsv4q_backend_v1 backend = {
    DSV4Q_BACKEND_ABI_VERSION,
    (uint32_t)sizeof(dsv4q_backend_v1),
    DQC_BUILD_NAME,
    BUILD_VERSION,
    "source",
    DSV4Q_CAP_ALL | DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE),
    cu_init,
    cu_run,
    cu_fini,
};

/* --- the debug table ----------------------------------------------------------- */

float dbg_bf16(float v) { return dqc_bf16r(v); }
float dbg_e4m3(float v) { return dqc_e4m3r(v); }
float dbg_e2m1(float v) { return dqc_e2m1r(v); }
int dbg_ceil_log2(double a, double f) { return dqc_ceil_log2_ratio(a, f); }
float dbg_fp8_scale(float a, int u) { return dqc_fp8_scale(a, u); }
float dbg_fp4_scale(float a) { return dqc_fp4_scale(a); }

int dbg_selftest(char *err, size_t errlen)
{
    void *ctx = NULL;
    if (cu_init(&ctx, err, errlen)) return -1;
    pctx *p = (pctx *)ctx;
    int rc = dqc_selftest(&p->c);
    if (rc) snprintf(err, errlen, "%s selftest: %s", DQC_BUILD_NAME, p->c.err);
    cu_fini(ctx);
    return rc;
}

const dsv4q_cuda_debug_v1 debug_table = {
    (uint32_t)sizeof(dsv4q_cuda_debug_v1),
    DQC_BUILD_NAME,
    dbg_bf16,
    dbg_e4m3,
    dbg_e2m1,
    dbg_ceil_log2,
    dbg_fp8_scale,
    dbg_fp4_scale,
    dbg_selftest,
};

} // namespace

EXPORT const dsv4q_backend_v1 *dsv4q_backend_entry(void) { return &backend; }
EXPORT const dsv4q_cuda_debug_v1 *dsv4q_cuda_debug(void) { return &debug_table; }
