/*
 * test_cuda_plugin.c - the CUDA backend (backends/cuda/, docs/cuda.md) from
 * the CPU side, plus every kernel's logic on the CPU emulation build.
 *
 * Two shared objects, both built from the same kernel sources:
 *   build/plugins/libdsv4q_cuda.so      nvcc (`make cuda`; skipped when absent)
 *   build/plugins/libdsv4q_cuda_emu.so  g++ -DDQC_EMU (the fiber emulator)
 *
 * Real plugin, on a machine without a GPU (CI):
 *  - dlopen succeeds (the CUDA runtime is static; no libcuda at load time);
 *    the descriptor: ABI version, struct size, name "cuda", profile
 *    "source", caps = the 17 operators it implements (CUDA_CAPS, written
 *    out here: an operator the ABI gains is not the plugin's until it has
 *    a kernel);
 *  - init() fails cleanly with "no CUDA device (...)", run() on a NULL
 *    context returns an error; nothing crashes.
 * Real plugin with a GPU (DSV4Q_HAVE_GPU=1 or init() succeeds): one RMSNORM
 * against the oracle's FP32 result, then everything the emulator gets below.
 *
 * Emulation build (and the real plugin when a GPU is present):
 *  - the rounding rules' host instances vs oracle/formats.c: BF16 on a
 *    sweep of binary32 values, E4M3 / E2M1 on every grid point and midpoint,
 *    the ue8m0 exponent at 448*2^k and its float neighbours;
 *  - the boundary bit numbers vs oracle/boundary.h;
 *  - the self-test (GEMM tile shapes agree bit for bit; compressor prefill
 *    == prefill + decode);
 *  - every operator on small shapes through the ABI, against the FP64
 *    oracle of the source profile: NRMS(backend) <= max(4 NRMS(oracle f32),
 *    floor) where floor is 1e-5 for FP32-only outputs and 1e-2 where a
 *    BF16 rounding decides (a logic bug is O(1)); selections equal as sets;
 *    every output element written. These are sanity bounds for the logic,
 *    not qualification gates (`dsv4q qualify` is).
 */
#include "tests/testutil.h"
#include <dlfcn.h>
#include <unistd.h>
#include "backends/cuda/dqc_bits.h"
#include "backends/cuda/dsv4q_cuda_debug.h"
#include "abi/dsv4q_backend.h"
#include "harness/ops/ops.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/ops.h"

#define REAL_SO DSV4Q_TEST_BUILD "/plugins/libdsv4q_cuda.so"
#define EMU_SO DSV4Q_TEST_BUILD "/plugins/libdsv4q_cuda_emu.so"

typedef struct plugin {
    void *h;
    const dsv4q_backend_v1 *b;
    const dsv4q_cuda_debug_v1 *dbg;
} plugin;

static const char *so_path(int emu)
{
    const char *e = getenv(emu ? "DSV4Q_CUDA_EMU_PLUGIN" : "DSV4Q_CUDA_PLUGIN");
    return e && *e ? e : (emu ? EMU_SO : REAL_SO);
}

/* 0 and *p filled, or 1 (skip: not built) after printing why. */
static int load(int emu, plugin *p)
{
    const char *path = so_path(emu);
    if (access(path, F_OK) != 0) {
        printf("  %s not built (%s): skipped\n", path,
               emu ? "no C++ compiler for the emulation build" : "nvcc not found: `make cuda` skips the plugin");
        return 1;
    }
    p->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->h) fail_msg("dlopen %s: %s", path, dlerror());
    dsv4q_backend_entry_fn f = (dsv4q_backend_entry_fn)dlsym(p->h, DSV4Q_BACKEND_ENTRY_SYMBOL);
    dsv4q_cuda_debug_fn d = (dsv4q_cuda_debug_fn)dlsym(p->h, DSV4Q_CUDA_DEBUG_SYMBOL);
    assert_non_null(f);
    assert_non_null(d);
    p->b = f();
    p->dbg = d();
    assert_non_null(p->b);
    assert_non_null(p->dbg);
    assert_int_equal(p->dbg->struct_size, sizeof(dsv4q_cuda_debug_v1));
    return 0;
}

static int have_gpu_env(void)
{
    const char *e = getenv("DSV4Q_HAVE_GPU");
    return e && !strcmp(e, "1");
}

/* ---- tensors and cases ------------------------------------------------------ */

typedef struct rng { uint64_t s; } rng;
static uint64_t rnext(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float runi(rng *r) { return (float)((double)(rnext(r) >> 11) * 0x1p-53 * 2.0 - 1.0); }
static rng rseed(const char *name)
{
    rng r = {1469598103934665603ull};
    for (const char *c = name; *c; c++) r.s = (r.s ^ (uint8_t)*c) * 1099511628211ull;
    return r;
}

#define MAXT 8
typedef struct tcase {
    const char *name;
    int op, nin, nout, npar;
    dsv4q_bt in[MAXT], out[3];
    double par[12];
    double floor;        /* NRMS floor (see the file comment) */
    void *mem[64];       /* allocations to free */
    int nmem;
} tcase;

static void *tc_alloc(tcase *tc, size_t n)
{
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    assert_true(tc->nmem < 64);
    tc->mem[tc->nmem++] = p;
    return p;
}

static void tc_free(tcase *tc)
{
    for (int i = 0; i < tc->nmem; i++) free(tc->mem[i]);
    tc->nmem = 0;
}

static void set_shape(dsv4q_bt *t, int nd, int64_t a, int64_t b, int64_t c)
{
    t->ndim = nd;
    t->shape[0] = a;
    t->shape[1] = b;
    t->shape[2] = c;
}

static int64_t nel(const dsv4q_bt *t) { return dsv4q_bt_numel(t); }

/* F32 input with uniform values in [-amp, amp) (+ offset). */
static float *in_f32(tcase *tc, rng *r, int i, const char *name, int nd, int64_t a, int64_t b, int64_t c, float amp,
                     float off)
{
    dsv4q_bt *t = &tc->in[i];
    t->name = name;
    t->dtype = DSV4Q_BT_F32;
    set_shape(t, nd, a, b, c);
    float *v = tc_alloc(tc, sizeof(float) * (size_t)nel(t));
    for (int64_t k = 0; k < nel(t); k++) v[k] = off + amp * runi(r);
    t->data = v;
    return v;
}

static int32_t *in_i32(tcase *tc, int i, const char *name, int nd, int64_t a, int64_t b)
{
    dsv4q_bt *t = &tc->in[i];
    t->name = name;
    t->dtype = DSV4Q_BT_I32;
    set_shape(t, nd, a, b, 0);
    int32_t *v = tc_alloc(tc, sizeof(int32_t) * (size_t)nel(t));
    t->data = v;
    return v;
}

enum { W_F32, W_BF16, W_FP8, W_FP4 };

/* A weight [out, in] with its raw stored form (codes + block scales) and
 * the decoded F32 values, as the harness hands them over. */
static void in_weight(tcase *tc, rng *r, int i, const char *name, int fmt, int64_t out, int64_t in, float amp)
{
    dsv4q_bt *t = &tc->in[i];
    t->name = name;
    t->dtype = DSV4Q_BT_F32;
    set_shape(t, 2, out, in, 0);
    float *dec = tc_alloc(tc, sizeof(float) * (size_t)(out * in));
    t->data = dec;
    if (fmt == W_F32) {
        for (int64_t k = 0; k < out * in; k++) dec[k] = amp * runi(r);
        return;
    }
    t->raw_ndim = 2;
    t->raw_shape[0] = out;
    t->raw_shape[1] = fmt == W_FP4 ? in / 2 : in;
    if (fmt == W_BF16) {
        uint16_t *c = tc_alloc(tc, 2 * (size_t)(out * in));
        for (int64_t k = 0; k < out * in; k++) {
            c[k] = dsv4q_bf16_from_f32(amp * runi(r));
            dec[k] = dsv4q_bf16_to_f32(c[k]);
        }
        t->raw = c;
        t->raw_dtype = DSV4Q_BT_BF16;
        return;
    }
    const int64_t sr = fmt == W_FP8 ? (out + 127) / 128 : out, scn = fmt == W_FP8 ? (in + 127) / 128 : in / 32;
    uint8_t *sc = tc_alloc(tc, (size_t)(sr * scn));
    for (int64_t k = 0; k < sr * scn; k++) sc[k] = (uint8_t)(127 - 7 - (int)(rnext(r) % 3));   /* 2^-7..2^-9 */
    t->raw_scale = sc;
    t->scale_dtype = DSV4Q_BT_F8_E8M0;
    t->scale_shape[0] = sr;
    t->scale_shape[1] = scn;
    if (fmt == W_FP8) {
        uint8_t *c = tc_alloc(tc, (size_t)(out * in));
        for (int64_t o = 0; o < out; o++)
            for (int64_t k = 0; k < in; k++) {
                uint8_t b = (uint8_t)rnext(r);
                if ((b & 0x7F) == 0x7F) b ^= 1;
                c[o * in + k] = b;
                dec[o * in + k] = (float)(dsv4q_e4m3_decode(b) * dsv4q_e8m0_decode(sc[(o / 128) * scn + k / 128]));
            }
        t->raw = c;
        t->raw_dtype = DSV4Q_BT_F8_E4M3;
    } else {
        uint8_t *c = tc_alloc(tc, (size_t)(out * in / 2));
        for (int64_t k = 0; k < out * in / 2; k++) c[k] = (uint8_t)rnext(r);
        for (int64_t o = 0; o < out; o++)
            for (int64_t k = 0; k < in; k++)
                dec[o * in + k] = (float)(dsv4q_e2m1_decode(dsv4q_e2m1_nibble(c, (size_t)(o * in + k))) *
                                          dsv4q_e8m0_decode(sc[o * (in / 32) + k / 32]));
        t->raw = c;
        t->raw_dtype = DSV4Q_BT_I8;
    }
}

static void out_t(tcase *tc, int i, const char *name, int nd, int64_t a, int64_t b, int64_t c, int i32)
{
    dsv4q_bt *t = &tc->out[i];
    t->name = name;
    t->dtype = i32 ? DSV4Q_BT_I32 : DSV4Q_BT_F32;
    set_shape(t, nd, a, b, c);
}

/* The operators the plugin implements: the V4 set, listed by hand (not
 * "every operator the ABI knows": the ABI grows before its kernels do). */
static const uint64_t CUDA_CAPS =
    DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_QHEAD_NORM) | DSV4Q_CAP(DSV4Q_OP_ROPE) |
    DSV4Q_CAP(DSV4Q_OP_ACT_QUANT) | DSV4Q_CAP(DSV4Q_OP_FP4_QUANT) | DSV4Q_CAP(DSV4Q_OP_HADAMARD) |
    DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) | DSV4Q_CAP(DSV4Q_OP_COMPRESSOR) | DSV4Q_CAP(DSV4Q_OP_INDEXER_SCORE) |
    DSV4Q_CAP(DSV4Q_OP_TOPK) | DSV4Q_CAP(DSV4Q_OP_HC_PRE) | DSV4Q_CAP(DSV4Q_OP_HC_POST) | DSV4Q_CAP(DSV4Q_OP_HC_HEAD) |
    DSV4Q_CAP(DSV4Q_OP_MOE_GATE) | DSV4Q_CAP(DSV4Q_OP_EXPERT) | DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE);

static void tc_init(tcase *tc, const char *name, int op, double floor)
{
    memset(tc, 0, sizeof *tc);
    tc->name = name;
    tc->op = op;
    tc->nin = dsv4q_op_get(op)->nin;   /* the operator's arity, from its descriptor */
    tc->nout = dsv4q_op_get(op)->nout;
    tc->floor = floor;
}

static void par(tcase *tc, int n, const double *v)
{
    tc->npar = n;
    for (int i = 0; i < n; i++) tc->par[i] = v[i];
}

/* ---- running and comparing -------------------------------------------------- */

static double out_val(const dsv4q_bt *t, const void *buf, int64_t k)
{
    if (t->dtype == DSV4Q_BT_BF16) return dsv4q_bf16_decode(((const uint16_t *)buf)[k]);
    return ((const float *)buf)[k];
}

static int set_contains(const int32_t *s, int k, int32_t v)
{
    for (int j = 0; j < k; j++)
        if (s[j] == v) return 1;
    return 0;
}

/* Run tc on backend b (ctx) and on the oracle at both widths; assert. */
static void run_case(const dsv4q_backend_v1 *b, void *ctx, tcase *tc, const char *label)
{
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    void *bo[3], *o32[3], *o64[3];
    for (int i = 0; i < tc->nout; i++) {
        const int64_t n = nel(&tc->out[i]);
        bo[i] = tc_alloc(tc, 4 * (size_t)n);
        memset(bo[i], 0xFF, 4 * (size_t)n);   /* NaN / -1: unwritten outputs show */
        o32[i] = tc_alloc(tc, 4 * (size_t)n);
        o64[i] = tc_alloc(tc, 8 * (size_t)n);
        tc->out[i].data = bo[i];
    }
    dsv4q_bcall call = {tc->op, tc->nin, tc->nout, tc->in, tc->out, tc->par, tc->npar, bs, tc->name, NULL, NULL};
    char err[512] = "";
    int rc = b->run(ctx, &call, err, sizeof err);
    if (rc != DSV4Q_BACKEND_OK) fail_msg("%s %s: run returned %d: %s", label, tc->name, rc, err);
    /* the oracle reads only inputs, params and output shapes of the call */
    dsv4q_bt oshape[3];
    memcpy(oshape, tc->out, sizeof oshape);
    dsv4q_bcall oc = call;
    oc.out = oshape;
    assert_int_equal(dsv4q_oracle_exec(32, bs, &oc, o32, err, sizeof err), 0);
    assert_int_equal(dsv4q_oracle_exec(64, bs, &oc, o64, err, sizeof err), 0);
    for (int i = 0; i < tc->nout; i++) {
        const dsv4q_bt *t = &tc->out[i];
        const int64_t n = nel(t);
        if (oshape[i].dtype == DSV4Q_BT_I32) {   /* a selection: equal as sets, row by row */
            assert_int_equal(t->dtype, DSV4Q_BT_I32);
            const int k = (int)t->shape[t->ndim - 1];
            const int32_t *g = bo[i], *e = o64[i];
            for (int64_t r = 0; r < n / k; r++)
                for (int j = 0; j < k; j++)
                    if (!set_contains(e + r * k, k, g[r * k + j]))
                        fail_msg("%s %s: output %d row %lld picks %d, not in the oracle's set", label, tc->name, i,
                                 (long long)r, g[r * k + j]);
            printf("  %-6s %-30s out %d  selection == oracle (%lld rows)\n", label, tc->name, i, (long long)(n / k));
            continue;
        }
        assert_true(t->dtype == DSV4Q_BT_F32 || t->dtype == DSV4Q_BT_BF16);
        double se_b = 0, se_32 = 0, ref = 0, maxd = 0;
        int64_t same32 = 0;
        for (int64_t k = 0; k < n; k++) {
            const double e = ((const double *)o64[i])[k], g = out_val(t, bo[i], k), f = ((const float *)o32[i])[k];
            if (isnan(g) && !isnan(e)) fail_msg("%s %s: output %d element %lld not written (NaN)", label, tc->name, i,
                                                (long long)k);
            if (isinf(e) || isinf(g)) {   /* masked scores: must agree exactly */
                if (e != g) fail_msg("%s %s: element %lld: %g vs oracle %g", label, tc->name, (long long)k, g, e);
                same32++;
                continue;
            }
            se_b += (g - e) * (g - e);
            se_32 += (f - e) * (f - e);
            ref += e * e;
            if (fabs(g - e) > maxd) maxd = fabs(g - e);
            if ((float)g == f) same32++;
        }
        const double nb = ref > 0 ? sqrt(se_b / ref) : sqrt(se_b), n32 = ref > 0 ? sqrt(se_32 / ref) : sqrt(se_32);
        const double bound = fmax(4 * n32, tc->floor);
        printf("  %-6s %-30s out %d  nrms %.3e (oracle f32 %.3e)  max|d| %.2e  ==f32 %5.1f%%  %s\n", label, tc->name,
               i, nb, n32, maxd, n ? 100.0 * same32 / n : 100.0, t->dtype == DSV4Q_BT_BF16 ? "BF16" : "F32");
        if (!(nb <= bound)) fail_msg("%s %s: output %d NRMS %.3e > bound %.3e", label, tc->name, i, nb, bound);
    }
}

/* ---- the cases: every operator, small shapes ------------------------------- */

#define LO 1e-5    /* FP32-only outputs */
#define HI 1e-2    /* a BF16 / FP8 / FP4 rounding decides some elements */

static void case_linear(tcase *tc, const char *name, int fmt, int64_t s, int64_t K, int64_t N, int bf16_out)
{
    rng r = rseed(name);
    tc_init(tc, name, DSV4Q_OP_LINEAR, HI);
    in_f32(tc, &r, 0, "x", 2, s, K, 0, 3.0f, 0);
    in_weight(tc, &r, 1, "w", fmt, N, K, 0.1f);
    out_t(tc, 0, "y", 2, s, N, 0, 0);
    par(tc, 2, (double[]){1, bf16_out});
}

static void case_rope(tcase *tc, const char *name, double base, int osl, int inverse)
{
    rng r = rseed(name);
    tc_init(tc, name, DSV4Q_OP_ROPE, HI);
    in_f32(tc, &r, 0, "x", 2, 6, 64, 0, 2.0f, 0);
    int32_t *pos = in_i32(tc, 1, "pos", 1, 6, 0);
    const int32_t p[6] = {0, 1, 100, 4000, 65535, 7};
    memcpy(pos, p, sizeof p);
    out_t(tc, 0, "y", 2, 6, 64, 0, 0);
    par(tc, 6, (double[]){base, osl, 16, 32, 1, inverse});
}

static void case_attn(tcase *tc)
{
    rng r = rseed("sparse_attn");
    const int s = 3, H = 4, D = 64, N = 150, nc = 150;
    tc_init(tc, "sparse_attn 3 blocks, masks", DSV4Q_OP_SPARSE_ATTN, HI);
    in_f32(tc, &r, 0, "q", 3, s, H, D, 1.0f, 0);
    in_f32(tc, &r, 1, "kv", 2, N, D, 0, 1.0f, 0);
    int32_t *idx = in_i32(tc, 2, "idx", 2, s, nc);
    for (int t = 0; t < s; t++)
        for (int j = 0; j < nc; j++) idx[t * nc + j] = (int32_t)((j * 37 + t * 11) % N);
    for (int j = 0; j < nc; j += 7) idx[j] = -1;          /* masked columns */
    idx[nc + 3] = N + 5;                                  /* out of range = masked */
    for (int j = 0; j < nc; j++) idx[2 * nc + j] = j < 70 ? -1 : idx[2 * nc + j];   /* first block all masked */
    float *sink = in_f32(tc, &r, 3, "sink", 1, H, 0, 0, 1.0f, 0);
    sink[1] = 20.0f;
    out_t(tc, 0, "o", 3, s, H, D, 0);
    par(tc, 1, (double[]){1.0 / 8.0});
}

/* One window decode step at position p with a ring of w slots; nc > 0 adds
 * Nc = 6 compressed rows with nc columns, two of them masked (-1, >= Nc). */
static void case_window(tcase *tc, const char *name, int p, int w, int nc)
{
    rng r = rseed(name);
    const int H = 4, D = 64, Nc = nc ? 6 : 0;
    tc_init(tc, name, DSV4Q_OP_WINDOW_ATTN_DECODE, HI);
    in_f32(tc, &r, 0, "q", 3, 1, H, D, 1.0f, 0);
    in_f32(tc, &r, 1, "kv_new", 2, 1, D, 0, 1.0f, 0);
    in_f32(tc, &r, 2, "ring", 2, w, D, 0, 1.0f, 0);
    if (nc) {
        in_f32(tc, &r, 3, "cmp", 2, Nc, D, 0, 1.0f, 0);
        int32_t *ci = in_i32(tc, 4, "cidx", 2, 1, nc);
        for (int j = 0; j < nc; j++) ci[j] = (int32_t)((j * 5) % Nc);
        ci[1] = -1;
        ci[nc - 1] = Nc + 2;
    }
    in_f32(tc, &r, 5, "sink", 1, H, 0, 0, 1.0f, 0);
    out_t(tc, 0, "o", 3, 1, H, D, 0);
    out_t(tc, 1, "ring_out", 2, w, D, 0, 0);
    par(tc, 3, (double[]){p, w, 1.0 / 8.0});
}

static void case_compressor(tcase *tc, const char *name, int ratio, int rotate, int64_t s)
{
    rng r = rseed(name);
    const int64_t d = 48, Dc = 64, W = (ratio == 4 ? 2 : 1) * Dc;
    tc_init(tc, name, DSV4Q_OP_COMPRESSOR, HI);
    in_f32(tc, &r, 0, "x", 2, s, d, 0, 2.0f, 0);
    in_weight(tc, &r, 1, "wkv", W_BF16, W, d, 0.2f);
    in_weight(tc, &r, 2, "wgate", W_BF16, W, d, 0.2f);
    in_f32(tc, &r, 3, "ape", 2, ratio, W, 0, 0.5f, 0);
    in_f32(tc, &r, 4, "norm", 1, Dc, 0, 0, 0.25f, 1.0f);
    out_t(tc, 0, "rows", 2, s / ratio, Dc, 0, 0);
    par(tc, 10, (double[]){ratio, rotate, 1e-6, 16, 160000, 65536, 16, 32, 1, 1});
}

static void case_gate(tcase *tc, const char *name, int func, int hash)
{
    rng r = rseed(name);
    const int64_t s = 5, d = 64, E = 16, k = 4, vocab = 10;
    tc_init(tc, name, DSV4Q_OP_MOE_GATE, LO);
    in_f32(tc, &r, 0, "x", 2, s, d, 0, 1.0f, 0);
    in_weight(tc, &r, 1, "W", W_F32, E, d, 0.2f);
    if (!hash) in_f32(tc, &r, 2, "bias", 1, E, 0, 0, 0.3f, 0);
    if (hash) {
        int32_t *t2e = in_i32(tc, 3, "tid2eid", 2, vocab, k);
        for (int64_t v = 0; v < vocab; v++)
            for (int64_t j = 0; j < k; j++) t2e[v * k + j] = (int32_t)((v * 3 + j * 5) % E);
    }
    int32_t *ids = in_i32(tc, 4, "ids", 1, s, 0);
    for (int64_t t = 0; t < s; t++) ids[t] = (int32_t)((t * 7) % vocab);
    out_t(tc, 0, "weights", 2, s, k, 0, 0);
    out_t(tc, 1, "indices", 2, s, k, 0, 1);
    par(tc, 3, (double[]){k, 1.5, func});
}

static void case_expert(tcase *tc, const char *name, int fmt, int weighted)
{
    rng r = rseed(name);
    const int64_t n = 3, d = 128, I = 256;
    tc_init(tc, name, DSV4Q_OP_EXPERT, HI);
    in_f32(tc, &r, 0, "x", 2, n, d, 0, 2.0f, 0);
    in_weight(tc, &r, 1, "w1", fmt, I, d, 0);
    in_weight(tc, &r, 2, "w2", fmt, d, I, 0);
    in_weight(tc, &r, 3, "w3", fmt, I, d, 0);
    /* routing weights, or 1 for the shared expert (the table's contract) */
    in_f32(tc, &r, 4, "weight", 1, n, 0, 0, weighted ? 0.3f : 0.0f, weighted ? 0.5f : 1.0f);
    out_t(tc, 0, "y", 2, n, d, 0, 0);
    par(tc, 2, (double[]){10, 1});
}

#define NCASES 33

/* Case number `which` (0..NCASES-1). */
static void make_case(tcase *tc, int which)
{
    rng r;
    switch (which) {
    case 0: case_linear(tc, "linear fp8 s5 K320 N96", W_FP8, 5, 320, 96, 1); break;
    case 1: case_linear(tc, "linear fp8 s40 K256 N130", W_FP8, 40, 256, 130, 1); break;
    case 2: case_linear(tc, "linear fp4 s3 K256 N80", W_FP4, 3, 256, 80, 1); break;
    case 3: case_linear(tc, "linear bf16 s4 K200 N72", W_BF16, 4, 200, 72, 1); break;
    case 4: case_linear(tc, "linear f32 s2 K100 N30 fp32", W_F32, 2, 100, 30, 0); tc->floor = LO; break;
    case 5:
        r = rseed("rmsnorm");
        tc_init(tc, "rmsnorm 6x300", DSV4Q_OP_RMSNORM, HI);
        in_f32(tc, &r, 0, "x", 2, 6, 300, 0, 3.0f, 0);
        in_f32(tc, &r, 1, "w", 1, 300, 0, 0, 0.5f, 1.0f);
        out_t(tc, 0, "y", 2, 6, 300, 0, 0);
        par(tc, 1, (double[]){1e-6});
        break;
    case 6:
        r = rseed("qhead_norm");
        tc_init(tc, "qhead_norm 8x128", DSV4Q_OP_QHEAD_NORM, HI);
        in_f32(tc, &r, 0, "q", 2, 8, 128, 0, 0.05f, 0);
        out_t(tc, 0, "y", 2, 8, 128, 0, 0);
        par(tc, 1, (double[]){1e-6});
        break;
    case 7: case_rope(tc, "rope yarn", 160000, 65536, 0); break;
    case 8: case_rope(tc, "rope yarn inverse", 160000, 65536, 1); break;
    case 9: case_rope(tc, "rope plain", 10000, 0, 0); break;
    case 10:
        r = rseed("act_quant64");
        tc_init(tc, "act_quant block 64 ue8m0", DSV4Q_OP_ACT_QUANT, HI);
        in_f32(tc, &r, 0, "x", 2, 4, 200, 0, 5.0f, 0);
        out_t(tc, 0, "y", 2, 4, 200, 0, 0);
        par(tc, 2, (double[]){64, 1});
        break;
    case 11:
        r = rseed("act_quant128");
        tc_init(tc, "act_quant block 128 fp32 scale", DSV4Q_OP_ACT_QUANT, HI);
        in_f32(tc, &r, 0, "x", 2, 3, 256, 0, 5.0f, 0);
        ((float *)tc->in[0].data)[5] = 448.0f * 0.25f * (1.0f + 0x1p-23f);   /* just above 448*2^-2 */
        out_t(tc, 0, "y", 2, 3, 256, 0, 0);
        par(tc, 2, (double[]){128, 0});
        break;
    case 12:
        r = rseed("fp4_quant");
        tc_init(tc, "fp4_quant 4x128", DSV4Q_OP_FP4_QUANT, HI);
        in_f32(tc, &r, 0, "x", 2, 4, 128, 0, 5.0f, 0);
        out_t(tc, 0, "y", 2, 4, 128, 0, 0);
        tc->npar = 0;
        break;
    case 13:
        r = rseed("hadamard");
        tc_init(tc, "hadamard 5x128", DSV4Q_OP_HADAMARD, HI);
        in_f32(tc, &r, 0, "x", 2, 5, 128, 0, 1.0f, 0);
        out_t(tc, 0, "y", 2, 5, 128, 0, 0);
        tc->npar = 0;
        break;
    case 14: case_attn(tc); break;
    case 15: case_compressor(tc, "compressor r4 attention rows", 4, 0, 13); break;
    case 16: case_compressor(tc, "compressor r4 indexer rows", 4, 1, 12); break;
    case 17: case_compressor(tc, "compressor r128", 128, 0, 260); break;
    case 18:
    case 19: {
        const int prefill = which == 18;
        r = rseed(prefill ? "indexer prefill" : "indexer decode");
        tc_init(tc, prefill ? "indexer_score prefill" : "indexer_score decode", DSV4Q_OP_INDEXER_SCORE, HI);
        in_f32(tc, &r, 0, "q", 3, 5, 8, 32, 1.0f, 0);
        in_f32(tc, &r, 1, "w", 2, 5, 8, 0, 0.2f, 0);
        in_f32(tc, &r, 2, "K", 2, 70, 32, 0, 1.0f, 0);
        out_t(tc, 0, "score", 2, 5, 70, 0, 0);
        par(tc, 2, (double[]){prefill ? 0 : 300, 4});
        if (prefill) {   /* 5 queries see (i+1)/4 rows: make T small enough to matter */
            tc->in[2].shape[0] = 3;
            tc->out[0].shape[1] = 3;
        }
        break;
    }
    case 20: {
        r = rseed("topk");
        tc_init(tc, "topk ties, -inf, short rows", DSV4Q_OP_TOPK, LO);
        float *sc = in_f32(tc, &r, 0, "score", 2, 4, 50, 0, 1.0f, 0);
        for (int k = 0; k < 200; k++) sc[k] = dsv4q_bf16_to_f32(dsv4q_bf16_from_f32(roundf(sc[k] * 8) / 8));
        for (int k = 150; k < 200; k++)
            if (k % 50 > 6) sc[k] = -INFINITY;   /* row 3: 7 finite scores < k */
        out_t(tc, 0, "idx", 2, 4, 10, 0, 1);
        par(tc, 1, (double[]){10});
        break;
    }
    case 21:
        r = rseed("hc_pre");
        tc_init(tc, "hc_pre hc4 d64 sinkhorn 20", DSV4Q_OP_HC_PRE, LO);
        in_f32(tc, &r, 0, "X", 3, 3, 4, 64, 1.0f, 0);
        in_weight(tc, &r, 1, "fn", W_F32, 24, 256, 0.05f);
        in_f32(tc, &r, 2, "scale", 1, 3, 0, 0, 0.2f, 1.0f);
        in_f32(tc, &r, 3, "base", 1, 24, 0, 0, 0.5f, 0);
        out_t(tc, 0, "y", 2, 3, 64, 0, 0);
        out_t(tc, 1, "post", 2, 3, 4, 0, 0);
        out_t(tc, 2, "comb", 3, 3, 4, 4, 0);
        par(tc, 3, (double[]){1e-6, 1e-6, 20});
        tc->floor = HI;
        break;
    case 22:
        r = rseed("hc_post");
        tc_init(tc, "hc_post hc4 d64", DSV4Q_OP_HC_POST, HI);
        in_f32(tc, &r, 0, "x", 2, 3, 64, 0, 1.0f, 0);
        in_f32(tc, &r, 1, "X", 3, 3, 4, 64, 1.0f, 0);
        in_f32(tc, &r, 2, "post", 2, 3, 4, 0, 0.5f, 1.0f);
        in_f32(tc, &r, 3, "comb", 3, 3, 4, 4, 0.25f, 0.25f);
        out_t(tc, 0, "Y", 3, 3, 4, 64, 0);
        tc->npar = 0;
        break;
    case 23:
        r = rseed("hc_head");
        tc_init(tc, "hc_head hc4 d64", DSV4Q_OP_HC_HEAD, HI);
        in_f32(tc, &r, 0, "X", 3, 3, 4, 64, 1.0f, 0);
        in_weight(tc, &r, 1, "fn", W_F32, 4, 256, 0.05f);
        in_f32(tc, &r, 2, "scale", 1, 1, 0, 0, 0.2f, 1.0f);
        in_f32(tc, &r, 3, "base", 1, 4, 0, 0, 0.5f, 0);
        out_t(tc, 0, "y", 2, 3, 64, 0, 0);
        par(tc, 2, (double[]){1e-6, 1e-6});
        break;
    case 24: case_gate(tc, "moe_gate sqrtsoftplus bias", 0, 0); break;
    case 25: case_gate(tc, "moe_gate hash routing", 0, 1); break;
    case 26: case_gate(tc, "moe_gate sigmoid", 1, 0); break;
    case 27: case_gate(tc, "moe_gate softmax", 2, 0); break;
    case 28: case_expert(tc, "expert fp4 weighted", W_FP4, 1); break;
    case 29: case_expert(tc, "expert fp8 shared (weight 1)", W_FP8, 0); break;
    case 30: case_linear(tc, "linear bf16 s1 K64 N8 fp32", W_BF16, 1, 64, 8, 0); tc->floor = LO; break;
    case 31: case_window(tc, "window decode p5 w16 (ring filling)", 5, 16, 0); break;
    case 32: case_window(tc, "window decode p40 w16 + 6 compressed", 40, 16, 5); break;
    default: fail_msg("no case %d", which);
    }
}

static void run_all_cases(const plugin *p, void *ctx, const char *label)
{
    uint64_t covered = 0;
    for (int w = 0; w < NCASES; w++) {
        tcase tc;
        make_case(&tc, w);
        covered |= DSV4Q_CAP(tc.op);
        run_case(p->b, ctx, &tc, label);
        tc_free(&tc);
    }
    assert_true(covered == CUDA_CAPS);   /* every operator the plugin claims has a case here */
}

/* ---- the rounding rules' host instances ------------------------------------- */

static void check_helpers(const dsv4q_cuda_debug_v1 *d)
{
    /* BF16: a sweep of binary32 bit patterns (every 2^-11 of the space),
     * plus ties */
    for (uint64_t u = 0; u < 0x100000000ull; u += 0x801) {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        if (isnan(f)) continue;
        const float want = dsv4q_bf16_to_f32(dsv4q_bf16_from_f32(f));
        const float got = d->bf16_round(f);
        if (memcmp(&want, &got, 4)) fail_msg("bf16_round(%a) = %a, oracle %a", f, got, want);
    }
    /* E4M3: every grid point, midpoint and near-midpoint in [-448, 448] */
    for (int c = 0; c < 256; c++) {
        const double v = dsv4q_e4m3_decode((uint8_t)c);
        if (isnan(v) || v < 0) continue;
        const double nx = c + 1 < 127 ? dsv4q_e4m3_decode((uint8_t)(c + 1)) : v;
        const double cand[5] = {v, (v + nx) / 2, nextafter((v + nx) / 2, 0), nextafter((v + nx) / 2, 1e9), nx};
        for (int k = 0; k < 5; k++)
            for (int sg = -1; sg <= 1; sg += 2) {
                const float f = (float)(sg * cand[k]);
                const float want = (float)dsv4q_e4m3_decode(dsv4q_e4m3_encode(f, 1));
                if (d->e4m3_round(f) != want) fail_msg("e4m3_round(%a) = %a, oracle %a", f, d->e4m3_round(f), want);
            }
    }
    /* E2M1 */
    for (int i = -600; i <= 600; i++) {
        const float f = (float)i / 100.0f;
        const float want = (float)dsv4q_e2m1_decode(dsv4q_e2m1_encode(f));
        if (d->e2m1_round(f) != want) fail_msg("e2m1_round(%g) = %g, oracle %g", f, d->e2m1_round(f), want);
    }
    static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const float tie_want[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
    for (int i = 0; i < 7; i++) assert_true(d->e2m1_round(ties[i]) == tie_want[i]);
    /* ue8m0: at 448*2^k and the float just above it */
    for (int k = -20; k <= 20; k++) {
        const float a = ldexpf(448.0f, k), up = nextafterf(a, INFINITY), dn = nextafterf(a, 0);
        assert_int_equal(d->ceil_log2_ratio(a, 448.0), dsv4q_ceil_log2_ratio(a, 448.0));
        assert_int_equal(d->ceil_log2_ratio(up, 448.0), dsv4q_ceil_log2_ratio(up, 448.0));
        assert_int_equal(d->ceil_log2_ratio(dn, 448.0), dsv4q_ceil_log2_ratio(dn, 448.0));
        assert_int_equal(d->ceil_log2_ratio(up, 448.0), k + 1);
        assert_true(d->fp8_scale(a, 1) == ldexpf(1.0f, k));
        assert_true(d->fp8_scale(up, 1) == ldexpf(1.0f, k + 1));
        assert_true(d->fp4_scale(ldexpf(6.0f, k)) == ldexpf(1.0f, k));
    }
    assert_true(d->fp8_scale(0.0f, 1) == ldexpf(1.0f, -22));    /* amax floored at 1e-4 */
    assert_true(d->fp8_scale(1.0f, 0) == 1.0f * (float)(1.0 / 448.0));
    assert_true(d->fp4_scale(0.0f) == ldexpf(1.0f, -126));
}

/* ---- the tests ----------------------------------------------------------------- */

static void real_descriptor(void **state)
{
    (void)state;
    plugin p;
    if (load(0, &p)) { skip(); return; }
    assert_int_equal(p.b->abi_version, DSV4Q_BACKEND_ABI_VERSION);
    assert_int_equal(p.b->struct_size, sizeof(dsv4q_backend_v1));
    assert_string_equal(p.b->name, "cuda");
    assert_string_equal(p.b->profile, "source");
    assert_true(p.b->caps == CUDA_CAPS);
    assert_non_null(p.b->version);
    assert_non_null(p.b->init);
    assert_non_null(p.b->run);
    assert_non_null(p.b->fini);
    assert_string_equal(p.dbg->build, "cuda");
    printf("  %s: %s\n", so_path(0), p.b->version);
    dlclose(p.h);
}

/* No device: init fails with the documented message, never crashes; run on
 * a NULL context is an error. With a device: RMSNORM vs the oracle, the
 * self-test, and every operator case. */
static void real_init(void **state)
{
    (void)state;
    plugin p;
    if (load(0, &p)) { skip(); return; }
    char err[512] = "";
    void *ctx = (void *)1;
    int rc = p.b->init(&ctx, err, sizeof err);
    if (rc != 0) {
        printf("  init: %s\n", err);
        if (have_gpu_env()) fail_msg("DSV4Q_HAVE_GPU=1 but init failed: %s", err);
        assert_non_null(strstr(err, "no CUDA device"));
        assert_null(ctx);
        char e2[512] = "";
        assert_int_not_equal(p.dbg->selftest(e2, sizeof e2), 0);
        assert_non_null(strstr(e2, "no CUDA device"));
        dlclose(p.h);
        return;
    }
    /* a device is present: one RMSNORM against the oracle's f32 result */
    tcase tc;
    make_case(&tc, 5);
    uint64_t bs;
    dsv4q_profile_set("source", &bs);
    float *y = tc_alloc(&tc, 4 * 6 * 300), *yo = tc_alloc(&tc, 4 * 6 * 300);
    tc.out[0].data = y;
    dsv4q_bcall call = {tc.op, tc.nin, tc.nout, tc.in, tc.out, tc.par, tc.npar, bs, tc.name, NULL, NULL};
    assert_int_equal(p.b->run(ctx, &call, err, sizeof err), DSV4Q_BACKEND_OK);
    void *o32[1] = {yo};
    assert_int_equal(dsv4q_oracle_exec(32, bs, &call, o32, err, sizeof err), 0);
    int64_t flips = 0;
    for (int k = 0; k < 6 * 300; k++) {
        const double g = out_val(&tc.out[0], y, k), f = yo[k];
        assert_true(fabs(g - f) <= 0x1p-7 * fabs(f) + 1e-30);   /* at most one BF16 step */
        flips += g != f;
    }
    printf("  rmsnorm on the GPU: %lld of 1800 elements differ from oracle-f32 by one BF16 step\n", (long long)flips);
    tc_free(&tc);
    rc = p.dbg->selftest(err, sizeof err);
    if (rc) fail_msg("selftest on the GPU: %s", err);
    run_all_cases(&p, ctx, "gpu");
    p.b->fini(ctx);
    dlclose(p.h);
}

static void run_without_context(void **state)
{
    (void)state;
    for (int emu = 0; emu <= 1; emu++) {
        plugin p;
        if (load(emu, &p)) continue;
        tcase tc;
        make_case(&tc, 5);
        float *y = tc_alloc(&tc, 4 * 6 * 300);
        tc.out[0].data = y;
        dsv4q_bcall call = {tc.op, tc.nin, tc.nout, tc.in, tc.out, tc.par, tc.npar, 0, tc.name, NULL, NULL};
        char err[512] = "";
        assert_int_equal(p.b->run(NULL, &call, err, sizeof err), DSV4Q_BACKEND_ERROR);
        assert_non_null(strstr(err, "not initialised"));
        call.op = DSV4Q_OP_COUNT;   /* an operator this ABI version does not know */
        assert_int_equal(p.b->run(NULL, &call, err, sizeof err), DSV4Q_BACKEND_UNSUPPORTED);
        tc_free(&tc);
        dlclose(p.h);
    }
}

static void boundary_bits(void **state)
{
    (void)state;
    assert_int_equal(DQC_B_COUNT, DSV4Q_B_COUNT);
    assert_int_equal(DQC_B_GEMM_ACT_FP8, DSV4Q_B_GEMM_ACT_FP8);
    assert_int_equal(DQC_B_KV_FP8, DSV4Q_B_KV_FP8);
    assert_int_equal(DQC_B_CKV_FP8, DSV4Q_B_CKV_FP8);
    assert_int_equal(DQC_B_IDX_Q_FP4, DSV4Q_B_IDX_Q_FP4);
    assert_int_equal(DQC_B_IDX_K_FP4, DSV4Q_B_IDX_K_FP4);
    assert_int_equal(DQC_B_IDX_SCORE_BF16, DSV4Q_B_IDX_SCORE_BF16);
    assert_int_equal(DQC_B_ATTN_P_BF16, DSV4Q_B_ATTN_P_BF16);
    assert_int_equal(DQC_B_RESID_BF16, DSV4Q_B_RESID_BF16);
    assert_int_equal(DQC_B_NORM_BF16, DSV4Q_B_NORM_BF16);
    assert_int_equal(DQC_B_LINEAR_BF16, DSV4Q_B_LINEAR_BF16);
    assert_int_equal(DQC_B_QNORM_BF16, DSV4Q_B_QNORM_BF16);
    assert_int_equal(DQC_B_ROPE_BF16, DSV4Q_B_ROPE_BF16);
    assert_int_equal(DQC_B_ROPE_TABLE_F32, DSV4Q_B_ROPE_TABLE_F32);
    assert_int_equal(DQC_B_ATTN_OUT_BF16, DSV4Q_B_ATTN_OUT_BF16);
    assert_int_equal(DQC_B_HADAMARD_BF16, DSV4Q_B_HADAMARD_BF16);
    assert_int_equal(DQC_B_CMP_BF16, DSV4Q_B_CMP_BF16);
    assert_int_equal(DQC_B_IDX_PARTIAL_BF16, DSV4Q_B_IDX_PARTIAL_BF16);
    assert_int_equal(DQC_B_MOE_BF16, DSV4Q_B_MOE_BF16);
    uint64_t src;
    assert_int_equal(dsv4q_profile_set("source", &src), 0);
    assert_true(src == DQC_SOURCE_SET);
}

static void helpers_vs_formats(void **state)
{
    (void)state;
    int ran = 0;
    for (int emu = 0; emu <= 1; emu++) {
        plugin p;
        if (load(emu, &p)) continue;
        check_helpers(p.dbg);
        ran++;
        dlclose(p.h);
    }
    if (!ran) skip();
}

static void emu_descriptor_and_selftest(void **state)
{
    (void)state;
    plugin p;
    if (load(1, &p)) { skip(); return; }
    assert_int_equal(p.b->abi_version, DSV4Q_BACKEND_ABI_VERSION);
    assert_int_equal(p.b->struct_size, sizeof(dsv4q_backend_v1));
    assert_string_equal(p.b->name, "cuda-emu");
    assert_string_equal(p.b->profile, "source");
    assert_true(p.b->caps == CUDA_CAPS);
    char err[512] = "";
    if (p.dbg->selftest(err, sizeof err)) fail_msg("%s", err);
    dlclose(p.h);
}

static void emu_every_operator(void **state)
{
    (void)state;
    plugin p;
    if (load(1, &p)) { skip(); return; }
    char err[512] = "";
    void *ctx = NULL;
    if (p.b->init(&ctx, err, sizeof err)) fail_msg("emulator init: %s", err);
    run_all_cases(&p, ctx, "emu");
    /* a bad call is an error with a message, not a crash */
    tcase tc;
    make_case(&tc, 0);
    tc.in[1].scale_shape[1] = 7;   /* wrong FP8 scale grid */
    void *y = tc_alloc(&tc, 4 * 5 * 96);
    tc.out[0].data = y;
    dsv4q_bcall call = {tc.op, tc.nin, tc.nout, tc.in, tc.out, tc.par, tc.npar, 0, tc.name, NULL, NULL};
    assert_int_equal(p.b->run(ctx, &call, err, sizeof err), DSV4Q_BACKEND_ERROR);
    assert_non_null(strstr(err, "scale shape"));
    tc.in[1].scale_shape[1] = 3;
    tc.out[0].shape[1] = 95;       /* output shape the operator does not produce */
    assert_int_equal(p.b->run(ctx, &call, err, sizeof err), DSV4Q_BACKEND_ERROR);
    assert_non_null(strstr(err, "output 0"));
    tc_free(&tc);
    p.b->fini(ctx);
    dlclose(p.h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_descriptor),
        cmocka_unit_test(real_init),
        cmocka_unit_test(run_without_context),
        cmocka_unit_test(boundary_bits),
        cmocka_unit_test(helpers_vs_formats),
        cmocka_unit_test(emu_descriptor_and_selftest),
        cmocka_unit_test(emu_every_operator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
