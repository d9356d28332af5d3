/*
 * test_ops_mpfr.c - MPFR self-qualification of the oracle operators at
 * production inner dimensions.
 *
 * Owns the measured accuracy of the two oracle instances, operator by
 * operator: each case evaluates the formula of OPERATORS.md in MPFR at 200
 * bits (tests/mpref.h) on seeded inputs (splitmix64 from the case name, no
 * OS entropy) with the Flash/Pro inner dimensions - d = 4096, head_dim
 * D = 512, 64 heads, indexer 64 x 128, expert 4096 x 2048, hc = 4 - but
 * only one or two token rows, and measures the NRMS error
 * sqrt(sum (got - ref)^2 / sum ref^2) of the fp64 and the fp32 instance.
 *
 * The boundary set is 0 (profile exact), so each operator is pure math and
 * the error is arithmetic only. Exception: linear_fp8 / linear_fp4 run with
 * gemm_act_fp8 on, on inputs generated on the FP8 grid (each 128-block is
 * E4M3 codes times 2^e with one code at +-448), so the act-quant is exact
 * and the production code path is exercised. Inputs are binary32 values, so
 * both instances see identical inputs and every weight x input product is
 * exact in binary64 (the MPFR dots then sum exact terms).
 *
 * The fp64 NRMS is asserted against a bound stated per case (the `why`
 * text, repeated in docs/precision.md): a worst-case style estimate
 * (accumulation length x unit roundoff x a condition margin), far above the
 * measured value so it fails on a real defect, not on noise. The fp32 NRMS
 * is asserted against the same reasoning at binary32 (a loose guard that the
 * f32 instance is not broken). The table "op fp64_nrms fp32_nrms" is printed
 * at the end; docs/precision.md holds a copy of one run.
 *
 * Runtime: ~100M MPFR operations, split over the OpenMP threads (MPFR is
 * built thread-safe; every output element is computed by one thread in a
 * fixed order, so the reference does not depend on the thread count).
 */
#include "tests/testutil.h"

#include <mpfr.h>

#include "oracle/boundary.h"
#include "oracle/ops.h"
#include "tests/mpref.h"

/* ---- production dimensions (configs/deepseek-v4-flash.json) ----------- */
enum {
    DIM = 4096,     /* dim */
    HEADS = 64,     /* n_heads */
    HD = 512,       /* head_dim */
    RD = 64,        /* rope_head_dim */
    IH = 64,        /* index_n_heads */
    ID = 128,       /* index_head_dim */
    INTER = 2048,   /* moe_inter_dim */
    NEXP = 256,     /* n_routed_experts */
    TOPK = 6,       /* n_activated_experts */
    HCM = 4,        /* hc_mult */
};
#define NORM_EPS 1e-6
#define HC_EPS 1e-6
#define SWIGLU_LIMIT 10.0
#define ROUTE_SCALE 1.5

static const dsv4q_rope_params k_rope = {RD, 160000.0, 65536, 16.0, 32.0, 1.0};

/* ---- results table ------------------------------------------------------ */

typedef struct {
    const char *op, *shape;
    double n64, n32, b64, b32;
} qrow;

static qrow g_rows[32];
static int g_nrows;

/* Record a row and assert its bounds (NaN/inf count as failures). */
static void report(const char *op, const char *shape, const mp_err *e64, const mp_err *e32, double b64,
                   double b32)
{
    qrow *r = &g_rows[g_nrows++];
    r->op = op;
    r->shape = shape;
    r->n64 = mp_err_nrms(e64);
    r->n32 = mp_err_nrms(e32);
    r->b64 = b64;
    r->b32 = b32;
    printf("qualify %-18s fp64_nrms %.3e (bound %.1e)  fp32_nrms %.3e (bound %.1e)  [%s]\n", op, r->n64, b64,
           r->n32, b32, shape);
    if (!(r->n64 <= b64)) {
        print_error("%s: fp64 NRMS %.3e exceeds %.1e\n", op, r->n64, b64);
        fail();
    }
    if (!(r->n32 <= b32)) {
        print_error("%s: fp32 NRMS %.3e exceeds %.1e\n", op, r->n32, b32);
        fail();
    }
}

/* ---- inputs --------------------------------------------------------------- */

static double *dalloc(long n)
{
    double *p = malloc(sizeof(double) * (size_t)n);
    assert_non_null(p);
    return p;
}

static float *falloc(long n)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    assert_non_null(p);
    return p;
}

static float *to_f32(const double *v, long n)
{
    float *f = falloc(n);
    for (long i = 0; i < n; i++) f[i] = (float)v[i]; /* exact: inputs are binary32 values */
    return f;
}

static double *gauss_vec(mp_rng *r, long n, double sd)
{
    double *v = dalloc(n);
    for (long i = 0; i < n; i++) v[i] = mp_rng_gauss_f32(r, sd);
    return v;
}

static double *unif_vec(mp_rng *r, long n, double a, double b)
{
    double *v = dalloc(n);
    for (long i = 0; i < n; i++) v[i] = mp_rng_f32(r, a, b);
    return v;
}

static void err_vec64(mp_err *e, const double *got, mpfr_t *ref, long n)
{
    for (long i = 0; i < n; i++) mp_err_add(e, got[i], ref[i]);
}

static void err_vec32(mp_err *e, const float *got, mpfr_t *ref, long n)
{
    for (long i = 0; i < n; i++) mp_err_add(e, (double)got[i], ref[i]);
}

/* An FP8 activation row [DIM] on the act-quant grid: block b is
 * E4M3 codes * 2^e_b with element 0 at +-448 * 2^e_b, so act_quant(x, 128)
 * picks s = 2^e_b and reproduces the codes exactly. */
static double *fp8_grid_row(mp_rng *r, long n)
{
    double *x = dalloc(n);
    for (long b = 0; b < n / 128; b++) {
        double s = mp_pow2i(-2 - mp_rng_int(r, 7));
        for (long i = 0; i < 128; i++) {
            unsigned c;
            do c = (unsigned)mp_rng_u64(r) & 0xFF;
            while ((c & 0x7F) == 0x7F);
            x[b * 128 + i] = mp_e4m3_value(c) * s;
        }
        x[b * 128] = (mp_rng_u64(r) & 1 ? -448.0 : 448.0) * s;
    }
    return x;
}

/* FP8 128x128 weight: random finite codes, E8M0 scales 2^-10 .. 2^-6. */
typedef struct {
    uint8_t *codes, *scale;
    long out, in;
    dsv4q_weight w;
} fp8w;

static void fp8w_make(fp8w *f, mp_rng *r, long out, long in)
{
    long nob = (out + 127) / 128, nib = (in + 127) / 128;
    f->out = out;
    f->in = in;
    f->codes = malloc((size_t)(out * in));
    f->scale = malloc((size_t)(nob * nib));
    assert_non_null(f->codes);
    assert_non_null(f->scale);
    for (long i = 0; i < out * in; i++) {
        uint8_t c;
        do c = (uint8_t)mp_rng_u64(r);
        while ((c & 0x7F) == 0x7F);
        f->codes[i] = c;
    }
    for (long i = 0; i < nob * nib; i++) f->scale[i] = mp_e8m0_byte(-10 + mp_rng_int(r, 5));
    dsv4q_weight w = {"fp8", DSV4Q_WF_FP8, out, in, f->codes, f->scale, DSV4Q_DT_F8_E8M0, 0};
    f->w = w;
}

/* Row o of the FP8 weight decoded from the bit layout, scales applied. */
static void fp8w_row(const fp8w *f, long o, double *row)
{
    long nib = (f->in + 127) / 128;
    for (long k = 0; k < f->in; k++)
        row[k] = mp_e4m3_value(f->codes[o * f->in + k]) * mp_pow2i(f->scale[(o / 128) * nib + k / 128] - 127);
}

/* FP4 weight [out, in]: packed E2M1 (low nibble = even k), E8M0 scales per
 * 32 along `in`, 2^(e0-1) .. 2^e0. */
typedef struct {
    uint8_t *packed, *scale;
    long out, in;
    dsv4q_weight w;
} fp4w;

static void fp4w_make(fp4w *f, mp_rng *r, long out, long in, int e0)
{
    f->out = out;
    f->in = in;
    f->packed = malloc((size_t)(out * in / 2));
    f->scale = malloc((size_t)(out * in / 32));
    assert_non_null(f->packed);
    assert_non_null(f->scale);
    for (long i = 0; i < out * in / 2; i++) f->packed[i] = (uint8_t)mp_rng_u64(r);
    for (long i = 0; i < out * in / 32; i++) f->scale[i] = mp_e8m0_byte(e0 - mp_rng_int(r, 2));
    dsv4q_weight w = {"fp4", DSV4Q_WF_FP4, out, in, f->packed, f->scale, DSV4Q_DT_F8_E8M0, 0};
    f->w = w;
}

static void fp4w_row(const fp4w *f, long o, double *row)
{
    for (long k = 0; k < f->in; k++) {
        uint8_t b = f->packed[(o * f->in + k) / 2];
        unsigned nib = (k & 1) ? (unsigned)(b >> 4) : (unsigned)(b & 0xF);
        row[k] = mp_e2m1_value(nib) * mp_pow2i(f->scale[o * (f->in / 32) + k / 32] - 127);
    }
}

typedef void (*row_fn)(const void *w, long o, double *row);
static void fp8_rowfn(const void *w, long o, double *row) { fp8w_row(w, o, row); }
static void fp4_rowfn(const void *w, long o, double *row) { fp4w_row(w, o, row); }
static void f32_rowfn(const void *w, long o, double *row)
{
    const dsv4q_weight *W = w;
    for (long k = 0; k < W->in; k++) row[k] = ((const float *)W->data)[o * W->in + k];
}

/* ref[t*out + o] = W_o . x_t exactly (weight rows decoded by rf), over
 * OpenMP threads. */
static void mp_gemv(const void *w, row_fn rf, long out, long in, const double *x, long s, mpfr_t *ref)
{
    #pragma omp parallel
    {
        double *row = malloc(sizeof(double) * (size_t)in);
        mpfr_t t;
        mpfr_init2(t, MP_PREC);
        #pragma omp for schedule(dynamic, 8)
        for (long o = 0; o < out; o++) {
            rf(w, o, row);
            for (long tk = 0; tk < s; tk++) mp_dot_d(ref[tk * out + o], row, x + tk * in, in, 1, t);
        }
        mpfr_clear(t);
        free(row);
    }
}

/* ======================================================================== *
 * Cases
 * ======================================================================== */

static void q_linear_fp8(void **state)
{
    (void)state;
    enum { S = 2, OUT = 256 };
    mp_rng r;
    mp_rng_seed(&r, "qualify_linear_fp8");
    fp8w W;
    fp8w_make(&W, &r, OUT, DIM);
    double *x = dalloc(S * DIM), *y = dalloc(S * OUT);
    for (int t = 0; t < S; t++) {
        double *row = fp8_grid_row(&r, DIM);
        memcpy(x + t * DIM, row, sizeof(double) * DIM);
        free(row);
    }
    float *xf = to_f32(x, S * DIM), *yf = falloc(S * OUT);
    uint64_t bs = DSV4Q_BIT(DSV4Q_B_GEMM_ACT_FP8);
    assert_int_equal(dsv4q_linear_f64(bs, 1, &W.w, x, S, y, -1), 0);
    assert_int_equal(dsv4q_linear_f32(bs, 1, &W.w, xf, S, yf, -1), 0);
    mpfr_t *ref = mp_vec_new(S * OUT);
    mp_gemv(&W, fp8_rowfn, OUT, DIM, x, S, ref);
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, y, ref, S * OUT);
    err_vec32(&e32, yf, ref, S * OUT);
    /* fp64: every 128-block dot is exact (E4M3 x E4M3 code products lie on
     * a 2^-18 grid below 2^18: 128 of them fit in 43 bits); 32 block terms
     * summed: <= 32u * cond, cond ~ 10:
     * 3.5e-14 -> 1e-13. fp32: 128-term block dots in 8 lanes, ~19u32 *
     * cond(~10) per block -> 1e-5. */
    report("linear_fp8", "x[2,4096] W[256,4096] FP8 128x128, act fp8 (grid)", &e64, &e32, 1e-13, 1e-5);

    /* The same weight, profile exact, inputs off the grid (binary32
     * Gaussian): no act-quant, the block dots now round. */
    for (long i = 0; i < S * DIM; i++) xf[i] = (float)(x[i] = mp_rng_gauss_f32(&r, 1.0));
    assert_int_equal(dsv4q_linear_f64(0, 1, &W.w, x, S, y, -1), 0);
    assert_int_equal(dsv4q_linear_f32(0, 1, &W.w, xf, S, yf, -1), 0);
    mp_gemv(&W, fp8_rowfn, OUT, DIM, x, S, ref);
    mp_err o64 = {0}, o32 = {0};
    err_vec64(&o64, y, ref, S * OUT);
    err_vec32(&o32, yf, ref, S * OUT);
    /* 128-term block dots (8 lanes of 16 + 3: 19u * cond) and 32 block
     * terms: ~51u * cond(~64 for a random-sign 4096-term dot) = 3.6e-13 ->
     * 1e-12; fp32 the same at u32 -> 1e-4. */
    report("linear_fp8.offgrid", "x[2,4096] Gaussian, W[256,4096] FP8, profile exact", &o64, &o32, 1e-12, 1e-4);
    mp_vec_free(ref, S * OUT);
    free(W.codes);
    free(W.scale);
    free(x);
    free(y);
    free(xf);
    free(yf);
}

static void q_linear_fp4(void **state)
{
    (void)state;
    enum { OUT = INTER };
    mp_rng r;
    mp_rng_seed(&r, "qualify_linear_fp4");
    fp4w W;
    fp4w_make(&W, &r, OUT, DIM, -6);
    double *x = fp8_grid_row(&r, DIM), *y = dalloc(OUT);
    float *xf = to_f32(x, DIM), *yf = falloc(OUT);
    uint64_t bs = DSV4Q_BIT(DSV4Q_B_GEMM_ACT_FP8);
    assert_int_equal(dsv4q_linear_f64(bs, 1, &W.w, x, 1, y, -1), 0);
    assert_int_equal(dsv4q_linear_f32(bs, 1, &W.w, xf, 1, yf, -1), 0);
    mpfr_t *ref = mp_vec_new(OUT);
    mp_gemv(&W, fp4_rowfn, OUT, DIM, x, 1, ref);
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, y, ref, OUT);
    err_vec32(&e32, yf, ref, OUT);
    /* fp64: 32-blocks exact, 128 block terms summed: 128u * cond(10) ->
     * 1.4e-13 -> 1e-12 (measured ~1e-16). fp32: 1e-5 as for FP8. */
    report("linear_fp4", "x[1,4096] W[2048,4096] FP4 1x32, act fp8 (grid)", &e64, &e32, 1e-12, 1e-5);
    mp_vec_free(ref, OUT);
    free(W.packed);
    free(W.scale);
    free(x);
    free(y);
    free(xf);
    free(yf);
}

static void q_rmsnorm(void **state)
{
    (void)state;
    enum { S = 2 };
    mp_rng r;
    mp_rng_seed(&r, "qualify_rmsnorm");
    double *x = gauss_vec(&r, S * DIM, 1.0), *w = unif_vec(&r, DIM, 0.5, 1.5), *y = dalloc(S * DIM);
    float *xf = to_f32(x, S * DIM), *wf = to_f32(w, DIM), *yf = falloc(S * DIM);
    dsv4q_rmsnorm_f64(0, x, S, DIM, w, NORM_EPS, y);
    dsv4q_rmsnorm_f32(0, xf, S, DIM, wf, NORM_EPS, yf);
    mpfr_t *ref = mp_vec_new(S * DIM);
    for (long i = 0; i < S * DIM; i++) mpfr_set_d(ref[i], x[i], MPFR_RNDN);
    for (int t = 0; t < S; t++) mp_rmsnorm(ref + t * DIM, DIM, w, NORM_EPS);
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, y, ref, S * DIM);
    err_vec32(&e32, yf, ref, S * DIM);
    /* sum of squares (positive terms: <= (n/8+3)u relative, halved by the
     * sqrt), division, sqrt, two products: <= ~300u -> 1e-13; fp32 1e-5. */
    report("rmsnorm", "x[2,4096] w[4096] eps 1e-6", &e64, &e32, 1e-13, 1e-5);
    mp_vec_free(ref, S * DIM);
    free(x); free(w); free(y); free(xf); free(wf); free(yf);
}

static void q_qhead_norm(void **state)
{
    (void)state;
    const long n = HEADS * HD;
    mp_rng r;
    mp_rng_seed(&r, "qualify_qhead_norm");
    double *q = gauss_vec(&r, n, 1.0), *y = dalloc(n);
    float *yf = to_f32(q, n);
    memcpy(y, q, sizeof(double) * (size_t)n);
    dsv4q_qhead_norm_f64(0, y, HEADS, HD, NORM_EPS);
    dsv4q_qhead_norm_f32(0, yf, HEADS, HD, NORM_EPS);
    mpfr_t *ref = mp_vec_new(n);
    for (long i = 0; i < n; i++) mpfr_set_d(ref[i], q[i], MPFR_RNDN);
    for (int h = 0; h < HEADS; h++) mp_rmsnorm(ref + h * HD, HD, NULL, NORM_EPS);
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, y, ref, n);
    err_vec32(&e32, yf, ref, n);
    /* as rmsnorm with n = 512 per head */
    report("qhead_norm", "q[64 heads,512] eps 1e-6", &e64, &e32, 1e-13, 1e-5);
    mp_vec_free(ref, n);
    free(q); free(y); free(yf);
}

/* RoPE on the last 64 dims of q [2 tokens x 64 heads, 512] at p0, p0+1,
 * against exact cos/sin of the exact angle t * f_i (YaRN f_i in MPFR): the
 * error includes the table. NRMS over the rotated dims. */
static void rope_case(long p0, const char *op, const char *shape, double b64, double b32)
{
    const long rows = 2 * HEADS, n = rows * HD;
    mp_rng r;
    mp_rng_seed(&r, op);
    double *x = gauss_vec(&r, n, 1.0), *y = dalloc(n);
    float *yf = to_f32(x, n);
    memcpy(y, x, sizeof(double) * (size_t)n);
    dsv4q_rope_table_f64 t64;
    dsv4q_rope_table_f32 t32;
    assert_int_equal(dsv4q_rope_build_f64(&t64, &k_rope, p0 + 2, 0), 0);
    assert_int_equal(dsv4q_rope_build_f32(&t32, &k_rope, p0 + 2, 0), 0);
    dsv4q_rope_apply_f64(0, &t64, y, rows, HD, HD - RD, p0, HEADS, 0);
    dsv4q_rope_apply_f32(0, &t32, yf, rows, HD, HD - RD, p0, HEADS, 0);
    mp_err e64 = {0}, e32 = {0};
    mpfr_t *ref = mp_vec_new(RD);
    for (long row = 0; row < rows; row++) {
        for (int i = 0; i < RD; i++) mpfr_set_d(ref[i], x[row * HD + HD - RD + i], MPFR_RNDN);
        mp_rope(ref, RD, p0 + row / HEADS, k_rope.base, k_rope.original_seq_len, k_rope.factor);
        err_vec64(&e64, y + row * HD + HD - RD, ref, RD);
        err_vec32(&e32, yf + row * HD + HD - RD, ref, RD);
        /* the other 448 dims are untouched */
        for (int i = 0; i < HD - RD; i++) assert_true(y[row * HD + i] == x[row * HD + i]);
    }
    report(op, shape, &e64, &e32, b64, b32);
    mp_vec_free(ref, RD);
    dsv4q_rope_free_f64(&t64);
    dsv4q_rope_free_f32(&t32);
    free(x); free(y); free(yf);
}

static void q_rope_100(void **state)
{
    (void)state;
    /* angle error <= |t f| * 8u (f: pow, 1/x, YaRN blend; t*f), plus ~4u
     * for cos/sin and the rotation: (8*101 + 4)u = 9e-14 -> 1e-12 (NRMS is
     * lower: f_0 = 1 is exact and f_i < 1 for i > 0). fp32: (8*101+4)u32 =
     * 4.8e-5 -> 1e-4. */
    rope_case(100, "rope_apply@100", "x[2x64 heads,512] last 64 dims, YaRN table, t=100,101", 1e-12, 1e-4);
}

static void q_rope_65535(void **state)
{
    (void)state;
    /* same bound at t = 65536: (8*65536 + 4)u = 5.8e-11; fp32 the same at
     * u32: 3.1e-2 (the ideal fp32 table is useless this far out; the
     * source's own FP32 table has the same problem, spec section 4). */
    rope_case(65535, "rope_apply@65535", "x[2x64 heads,512] last 64 dims, YaRN table, t=65535,65536", 6e-11,
              3.2e-2);
}

static void q_hadamard(void **state)
{
    (void)state;
    const long n = IH * ID;
    mp_rng r;
    mp_rng_seed(&r, "qualify_hadamard");
    double *x = gauss_vec(&r, n, 1.0), *y = dalloc(n);
    float *yf = to_f32(x, n);
    memcpy(y, x, sizeof(double) * (size_t)n);
    dsv4q_hadamard_f64(0, y, IH, ID);
    dsv4q_hadamard_f32(0, yf, IH, ID);
    /* y_i = 128^-1/2 sum_j (-1)^popcount(i&j) x_j: the matrix, not the
     * butterfly */
    mpfr_t *ref = mp_vec_new(n);
    mpfr_t nrm;
    mpfr_init2(nrm, MP_PREC);
    mpfr_set_ui(nrm, ID, MPFR_RNDN);
    mpfr_rec_sqrt(nrm, nrm, MPFR_RNDN);
    for (long row = 0; row < IH; row++)
        for (int i = 0; i < ID; i++) {
            mpfr_set_zero(ref[row * ID + i], 1);
            for (int j = 0; j < ID; j++) {
                double v = x[row * ID + j];
                if (__builtin_popcount((unsigned)(i & j)) & 1) v = -v;
                mpfr_add_d(ref[row * ID + i], ref[row * ID + i], v, MPFR_RNDN);
            }
            mpfr_mul(ref[row * ID + i], ref[row * ID + i], nrm, MPFR_RNDN);
        }
    mpfr_clear(nrm);
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, y, ref, n);
    err_vec32(&e32, yf, ref, n);
    /* 7 butterfly levels (each output a sum of 128 values in a binary tree:
     * <= 7u * sum|x| ~ 7u*sqrt(128)*|y|) + scale: 8u*12 = 1e-14 -> 1e-13;
     * fp32 ~6e-6 -> 1e-5. */
    report("hadamard", "x[64,128]", &e64, &e32, 1e-13, 1e-5);
    mp_vec_free(ref, n);
    free(x); free(y); free(yf);
}

static void q_sparse_attn(void **state)
{
    (void)state;
    enum { N = 256, NC = 192 };
    mp_rng r;
    mp_rng_seed(&r, "qualify_sparse_attn");
    double *q = gauss_vec(&r, HEADS * HD, 1.0), *kv = gauss_vec(&r, (long)N * HD, 1.0);
    double *sink = unif_vec(&r, HEADS, -2, 2), *o = dalloc(HEADS * HD);
    float *qf = to_f32(q, HEADS * HD), *kvf = to_f32(kv, (long)N * HD), *sinkf = to_f32(sink, HEADS);
    float *of = falloc(HEADS * HD);
    int32_t perm[N], idx[NC];
    for (int i = 0; i < N; i++) perm[i] = i;
    for (int i = N - 1; i > 0; i--) {
        int j = mp_rng_int(&r, i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int c = 0; c < NC; c++) idx[c] = c % 37 == 5 ? -1 : perm[c]; /* 6 masked */
    const double scale = 1.0 / sqrt((double)HD);
    assert_int_equal(dsv4q_sparse_attn_f64(0, q, 1, HEADS, HD, kv, N, idx, NC, sink, scale, o), 0);
    assert_int_equal(dsv4q_sparse_attn_f32(0, qf, 1, HEADS, HD, kvf, N, idx, NC, sinkf, (float)scale, of), 0);
    mpfr_t *ref = mp_vec_new(HEADS * HD);
    mpfr_t sc;
    mpfr_init2(sc, MP_PREC);
    mpfr_set_ui(sc, HD, MPFR_RNDN);
    mpfr_rec_sqrt(sc, sc, MPFR_RNDN); /* exact D^-0.5 */
    #pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < HEADS; h++) mp_attn_ref(q + h * HD, HD, kv, N, idx, NC, sink[h], sc, ref + h * HD);
    mpfr_clear(sc);
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, o, ref, HEADS * HD);
    err_vec32(&e32, of, ref, HEADS * HD);
    /* scores: 512-term dots (~67u * cond) times |s| ~ 3 enter exp as
     * absolute error; 186 exps; P*V sums of 186 terms with cancellation
     * (cond ~ 14): ~(200 + 186) u * 14 -> 1e-12 worst case; measured ~1e-15.
     * fp32 the same at u32 -> 1e-4. */
    report("sparse_attn", "q[1,64,512] kv[256,512] 192 cols (6 masked), sink", &e64, &e32, 1e-12, 1e-4);
    mp_vec_free(ref, HEADS * HD);
    free(q); free(kv); free(sink); free(o); free(qf); free(kvf); free(sinkf); free(of);
}

static void q_compressor(void **state)
{
    (void)state;
    enum { S = 8, R4 = 4, W = 2 * HD };
    mp_rng r;
    mp_rng_seed(&r, "qualify_compressor");
    double *wkv = gauss_vec(&r, (long)W * DIM, 1.0 / 64), *wg = gauss_vec(&r, (long)W * DIM, 1.0 / 64);
    double *ape = gauss_vec(&r, R4 * W, 0.5), *nrm = unif_vec(&r, HD, 0.5, 1.5);
    double *x = gauss_vec(&r, S * DIM, 1.0);
    float *wkvf = to_f32(wkv, (long)W * DIM), *wgf = to_f32(wg, (long)W * DIM), *apef = to_f32(ape, R4 * W);
    float *nrmf = to_f32(nrm, HD), *xf = to_f32(x, S * DIM);
    dsv4q_weight Wkv = {"wkv", DSV4Q_WF_F32, W, DIM, wkvf, NULL, DSV4Q_DT_INVALID, 0};
    dsv4q_weight Wg = {"wgate", DSV4Q_WF_F32, W, DIM, wgf, NULL, DSV4Q_DT_INVALID, 0};
    dsv4q_cmp_f64 c64 = {R4, HD, 0, Wkv, Wg, ape, nrm};
    dsv4q_cmp_f32 c32 = {R4, HD, 0, Wkv, Wg, apef, nrmf};
    dsv4q_rope_table_f64 t64;
    dsv4q_rope_table_f32 t32;
    assert_int_equal(dsv4q_rope_build_f64(&t64, &k_rope, S, 0), 0);
    assert_int_equal(dsv4q_rope_build_f32(&t32, &k_rope, S, 0), 0);
    dsv4q_cmp_state_f64 s64;
    dsv4q_cmp_state_f32 s32;
    assert_int_equal(dsv4q_cmp_state_init_f64(&s64, R4, HD), 0);
    assert_int_equal(dsv4q_cmp_state_init_f32(&s32, R4, HD), 0);
    double rows[2 * HD];
    float rowsf[2 * HD];
    assert_int_equal(dsv4q_compressor_f64(0, 1, &c64, &s64, x, S, 0, &t64, NORM_EPS, rows), 2);
    assert_int_equal(dsv4q_compressor_f32(0, 1, &c32, &s32, xf, S, 0, &t32, NORM_EPS, rowsf), 2);
    const mp_cmp_spec spec = {R4, HD, DIM, RD, wkv, wg, ape, nrm, NORM_EPS, k_rope.base, k_rope.factor,
                              k_rope.original_seq_len};
    mpfr_t *ref = mp_vec_new(HD);
    mp_err e64 = {0}, e32 = {0};
    for (int b = 0; b < 2; b++) {
        mp_cmp_row_ref(&spec, x, b, 0, ref);
        err_vec64(&e64, rows + b * HD, ref, HD);
        err_vec32(&e32, rowsf + b * HD, ref, HD);
    }
    /* projections 4096-term dots (~515u * cond 10), gate error enters the
     * softmax as absolute error (|g| ~ 1), 8-term pooling, RMSNorm ~300u,
     * RoPE at t <= 4: ~5000u -> 1e-12; fp32 the same at u32 -> 1e-3
     * (measured ~1e-7). */
    report("compressor", "ratio 4 overlap, x[8,4096] wkv,wgate[1024,4096] -> 2 rows of 512", &e64, &e32, 1e-12,
           1e-4);
    mp_vec_free(ref, HD);
    dsv4q_cmp_state_free_f64(&s64);
    dsv4q_cmp_state_free_f32(&s32);
    dsv4q_rope_free_f64(&t64);
    dsv4q_rope_free_f32(&t32);
    free(wkv); free(wg); free(ape); free(nrm); free(x);
    free(wkvf); free(wgf); free(apef); free(nrmf); free(xf);
}

static void q_indexer_score(void **state)
{
    (void)state;
    enum { T = 512 };
    mp_rng r;
    mp_rng_seed(&r, "qualify_indexer_score");
    double *q = gauss_vec(&r, IH * ID, 1.0), *w = gauss_vec(&r, IH, 0.02), *K = gauss_vec(&r, (long)T * ID, 1.0);
    double *sc = dalloc(T);
    float *qf = to_f32(q, IH * ID), *wf = to_f32(w, IH), *Kf = to_f32(K, (long)T * ID), *scf = falloc(T);
    dsv4q_indexer_scores_f64(0, q, w, 1, IH, ID, K, T, 2000, 4, sc);
    dsv4q_indexer_scores_f32(0, qf, wf, 1, IH, ID, Kf, T, 2000, 4, scf);
    mpfr_t *ref = mp_vec_new(T);
    #pragma omp parallel
    {
        mpfr_t d, t;
        mpfr_inits2(MP_PREC, d, t, (mpfr_ptr)0);
        #pragma omp for schedule(dynamic, 8)
        for (long tk = 0; tk < T; tk++) {
            mpfr_set_zero(ref[tk], 1);
            for (int h = 0; h < IH; h++) {
                mp_dot_d(d, q + h * ID, K + tk * ID, ID, 1, t);
                if (mpfr_sgn(d) <= 0) continue; /* relu */
                mpfr_mul_d(d, d, w[h], MPFR_RNDN);
                mpfr_add(ref[tk], ref[tk], d, MPFR_RNDN);
            }
        }
        mpfr_clears(d, t, (mpfr_ptr)0);
    }
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, sc, ref, T);
    err_vec32(&e32, scf, ref, T);
    /* 128-term dots (~19u * cond 10), 64 weighted terms with cancellation
     * (cond ~ 8): ~(19*10 + 64) u * 8 -> 1e-13; fp32 -> 1e-5. */
    report("indexer_score", "q[1,64,128] w[64] K[512,128]", &e64, &e32, 1e-13, 1e-5);
    mp_vec_free(ref, T);
    free(q); free(w); free(K); free(sc); free(qf); free(wf); free(Kf); free(scf);
}

static void q_hc_pre(void **state)
{
    (void)state;
    enum { NMIX = (2 + HCM) * HCM, N = HCM * DIM };
    mp_rng r;
    mp_rng_seed(&r, "qualify_hc_pre");
    double *X = gauss_vec(&r, N, 1.0), *fn = gauss_vec(&r, (long)NMIX * N, 1.0 / 128);
    double scale[3] = {0.5, 0.8, 1.25}, *base = gauss_vec(&r, NMIX, 0.5);
    float *Xf = to_f32(X, N), *fnf = to_f32(fn, (long)NMIX * N), scalef[3] = {0.5f, 0.8f, 1.25f};
    float *basef = to_f32(base, NMIX);
    dsv4q_weight Wfn = {"hc_fn", DSV4Q_WF_F32, NMIX, N, fnf, NULL, DSV4Q_DT_INVALID, 0};
    double *y = dalloc(DIM), post[HCM], comb[HCM * HCM];
    float *yf = falloc(DIM), postf[HCM], combf[HCM * HCM];
    assert_int_equal(dsv4q_hc_pre_f64(0, X, 1, HCM, DIM, &Wfn, scale, base, NORM_EPS, HC_EPS, 20, y, post, comb), 0);
    assert_int_equal(
        dsv4q_hc_pre_f32(0, Xf, 1, HCM, DIM, &Wfn, scalef, basef, NORM_EPS, HC_EPS, 20, yf, postf, combf), 0);
    mpfr_t *ry = mp_vec_new(DIM), *rp = mp_vec_new(HCM), *rc = mp_vec_new(HCM * HCM);
    mp_hc_pre_ref(X, HCM, DIM, fn, scale, base, NORM_EPS, HC_EPS, 20, ry, rp, rc);
    mp_err y64 = {0}, y32 = {0}, p64 = {0}, p32 = {0}, c64 = {0}, c32 = {0};
    err_vec64(&y64, y, ry, DIM);
    err_vec32(&y32, yf, ry, DIM);
    err_vec64(&p64, post, rp, HCM);
    err_vec32(&p32, postf, rp, HCM);
    err_vec64(&c64, comb, rc, HCM * HCM);
    err_vec32(&c32, combf, rc, HCM * HCM);
    /* mixes: 16384-term dots (~2000u * cond 10) then sigmoid / exp
     * (|arg| ~ 1); Sinkhorn: 39 normalisations of a positive 4x4 (each
     * ~3u, contracting); y: 4-term sum: 2e4 u -> 1e-11 bound for all three
     * outputs (measured ~1e-16..1e-15). fp32 -> 1e-3 (measured ~1e-7). */
    report("hc_pre.y", "X[1,4,4096] fn[24,16384] -> y[4096]", &y64, &y32, 1e-11, 1e-3);
    report("hc_pre.post", "X[1,4,4096] fn[24,16384] -> post[4]", &p64, &p32, 1e-11, 1e-3);
    report("hc_pre.comb", "X[1,4,4096] fn[24,16384] -> Sinkhorn comb[4,4], 20 iters", &c64, &c32, 1e-11, 1e-3);
    mp_vec_free(ry, DIM);
    mp_vec_free(rp, HCM);
    mp_vec_free(rc, HCM * HCM);
    free(X); free(fn); free(base); free(Xf); free(fnf); free(basef); free(y); free(yf);
}

static void q_hc_post(void **state)
{
    (void)state;
    enum { N = HCM * DIM };
    mp_rng r;
    mp_rng_seed(&r, "qualify_hc_post");
    double *x = gauss_vec(&r, DIM, 1.0), *X = gauss_vec(&r, N, 1.0), *post = unif_vec(&r, HCM, 0, 2);
    double *comb = unif_vec(&r, HCM * HCM, 0, 0.5), *out = dalloc(N);
    float *xf = to_f32(x, DIM), *Xf = to_f32(X, N), *postf = to_f32(post, HCM), *combf = to_f32(comb, HCM * HCM);
    float *outf = falloc(N);
    dsv4q_hc_post_f64(0, x, X, post, comb, 1, HCM, DIM, out);
    dsv4q_hc_post_f32(0, xf, Xf, postf, combf, 1, HCM, DIM, outf);
    mpfr_t *ref = mp_vec_new(N);
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    for (int k = 0; k < HCM; k++)
        for (long i = 0; i < DIM; i++) {
            mpfr_t *o = &ref[k * DIM + i];
            mpfr_set_zero(*o, 1);
            mp_addmul_dd(*o, post[k], x[i], t);
            for (int j = 0; j < HCM; j++) mp_addmul_dd(*o, comb[j * HCM + k], X[j * DIM + i], t);
        }
    mpfr_clear(t);
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, out, ref, N);
    err_vec32(&e32, outf, ref, N);
    /* 5 products + 4 sums per element: <= 9u * cond(~3) -> 1e-14; fp32 1e-6 */
    report("hc_post", "x[4096] X[4,4096] post[4] comb[4,4] -> [4,4096]", &e64, &e32, 1e-14, 1e-6);
    mp_vec_free(ref, N);
    free(x); free(X); free(post); free(comb); free(out); free(xf); free(Xf); free(postf); free(combf); free(outf);
}

static void q_moe_gate(void **state)
{
    (void)state;
    enum { S = 2 };
    mp_rng r;
    mp_rng_seed(&r, "qualify_moe_gate");
    double *x = gauss_vec(&r, S * DIM, 1.0), *W = gauss_vec(&r, (long)NEXP * DIM, 1.0 / 64);
    double *bias = unif_vec(&r, NEXP, -0.05, 0.05), w64[S * TOPK];
    float *xf = to_f32(x, S * DIM), *Wf = to_f32(W, (long)NEXP * DIM), *biasf = to_f32(bias, NEXP), w32[S * TOPK];
    int32_t i64[S * TOPK], i32[S * TOPK];
    dsv4q_weight G = {"gate", DSV4Q_WF_F32, NEXP, DIM, Wf, NULL, DSV4Q_DT_INVALID, 0};
    assert_int_equal(
        dsv4q_moe_gate_f64(x, S, DIM, &G, bias, NULL, NULL, NEXP, TOPK, "sqrtsoftplus", ROUTE_SCALE, w64, i64), 0);
    assert_int_equal(
        dsv4q_moe_gate_f32(xf, S, DIM, &G, biasf, NULL, NULL, NEXP, TOPK, "sqrtsoftplus", ROUTE_SCALE, w32, i32), 0);
    mpfr_t *z = mp_vec_new(S * NEXP);
    mp_gemv(&G, f32_rowfn, NEXP, DIM, x, S, z);
    mp_err e64 = {0}, e32 = {0};
    mpfr_t v, best, sum, t;
    mpfr_inits2(MP_PREC, v, best, sum, t, (mpfr_ptr)0);
    for (int tk = 0; tk < S; tk++) {
        mpfr_t *sc = z + tk * NEXP;
        for (int e = 0; e < NEXP; e++) mp_sqrtsoftplus(sc[e], sc[e]); /* z ~ N(0,1): below the threshold */
        int sel[TOPK], used[NEXP] = {0};
        mpfr_set_zero(sum, 1);
        for (int j = 0; j < TOPK; j++) { /* top-k of sc + bias, ties to the lower id */
            sel[j] = -1;
            for (int e = 0; e < NEXP; e++) {
                if (used[e]) continue;
                mpfr_add_d(v, sc[e], bias[e], MPFR_RNDN);
                if (sel[j] < 0 || mpfr_cmp(v, best) > 0) {
                    sel[j] = e;
                    mpfr_set(best, v, MPFR_RNDN);
                }
            }
            used[sel[j]] = 1;
            mpfr_add(sum, sum, sc[sel[j]], MPFR_RNDN);
        }
        for (int j = 0; j < TOPK; j++) {
            assert_int_equal(i64[tk * TOPK + j], sel[j]);
            assert_int_equal(i32[tk * TOPK + j], sel[j]);
            mpfr_div(t, sc[sel[j]], sum, MPFR_RNDN);
            mpfr_mul_d(t, t, ROUTE_SCALE, MPFR_RNDN);
            mp_err_add(&e64, w64[tk * TOPK + j], t);
            mp_err_add(&e32, (double)w32[tk * TOPK + j], t);
        }
    }
    mpfr_clears(v, best, sum, t, (mpfr_ptr)0);
    /* z: 4096-term dot (~515u * cond 10) enters sqrt(softplus) damped
     * (derivative / value < 1 for |z| ~ 1); normalisation ~10u: 1e-12;
     * fp32 1e-4. */
    report("moe_gate", "x[2,4096] W[256,4096] bias, sqrtsoftplus top-6, weights", &e64, &e32, 1e-12, 1e-4);
    mp_vec_free(z, S * NEXP);
    free(x); free(W); free(bias); free(xf); free(Wf); free(biasf);
}

static void q_expert(void **state)
{
    (void)state;
    const double weight = 0.37109375; /* a route weight, binary32 */
    mp_rng r;
    mp_rng_seed(&r, "qualify_expert");
    fp4w w1, w2, w3;
    fp4w_make(&w1, &r, INTER, DIM, -5); /* |w1 x|, |w3 x| ~ 4: some beyond the limit */
    fp4w_make(&w3, &r, INTER, DIM, -5);
    fp4w_make(&w2, &r, DIM, INTER, -6);
    dsv4q_expert_w E = {w1.w, w2.w, w3.w};
    double *x = gauss_vec(&r, DIM, 1.0), *y = dalloc(DIM), wt = weight;
    float *xf = to_f32(x, DIM), *yf = falloc(DIM), wtf = (float)weight;
    assert_int_equal(dsv4q_expert_f64(0, 1, &E, x, 1, &wt, SWIGLU_LIMIT, y), 0);
    assert_int_equal(dsv4q_expert_f32(0, 1, &E, xf, 1, &wtf, SWIGLU_LIMIT, yf), 0);
    mpfr_t *g = mp_vec_new(INTER), *u = mp_vec_new(INTER), *ref = mp_vec_new(DIM);
    mp_gemv(&w1, fp4_rowfn, INTER, DIM, x, 1, g);
    mp_gemv(&w3, fp4_rowfn, INTER, DIM, x, 1, u);
    int clamped = 0;
    for (long i = 0; i < INTER; i++) { /* h = silu(min(g, L)) * clamp(u, -L, L) * weight */
        if (mpfr_cmp_d(g[i], SWIGLU_LIMIT) > 0) mpfr_set_d(g[i], SWIGLU_LIMIT, MPFR_RNDN), clamped++;
        if (mpfr_cmp_d(u[i], SWIGLU_LIMIT) > 0) mpfr_set_d(u[i], SWIGLU_LIMIT, MPFR_RNDN), clamped++;
        if (mpfr_cmp_d(u[i], -SWIGLU_LIMIT) < 0) mpfr_set_d(u[i], -SWIGLU_LIMIT, MPFR_RNDN), clamped++;
        mp_silu(g[i], g[i]);
        mpfr_mul(g[i], g[i], u[i], MPFR_RNDN);
        mpfr_mul_d(g[i], g[i], weight, MPFR_RNDN);
    }
    #pragma omp parallel
    {
        double *row = malloc(sizeof(double) * INTER);
        mpfr_t t;
        mpfr_init2(t, MP_PREC);
        #pragma omp for schedule(dynamic, 8)
        for (long o = 0; o < DIM; o++) {
            fp4w_row(&w2, o, row);
            mp_dot_md(ref[o], g, row, INTER, t);
        }
        mpfr_clear(t);
        free(row);
    }
    mp_err e64 = {0}, e32 = {0};
    err_vec64(&e64, y, ref, DIM);
    err_vec32(&e32, yf, ref, DIM);
    printf("expert: %d of %d gate/up values clamped at the swiglu limit\n", clamped, 2 * INTER);
    assert_true(clamped > 0); /* the clamp is part of what is qualified */
    /* w1/w3: 4096-term dots (~515u * cond 10); silu, products ~5u (the
     * clamp is continuous); w2: 2048-term dot (~260u * cond 10): ~1e4 u ->
     * 1e-12; fp32 1e-4. */
    report("expert_swiglu", "x[1,4096] FP4 w1,w3[2048,4096] w2[4096,2048], limit 10", &e64, &e32, 1e-12, 1e-4);
    mp_vec_free(g, INTER);
    mp_vec_free(u, INTER);
    mp_vec_free(ref, DIM);
    free(w1.packed); free(w1.scale); free(w2.packed); free(w2.scale); free(w3.packed); free(w3.scale);
    free(x); free(y); free(xf); free(yf);
}

/* Prints the table (all cases must have reported). */
static void q_table(void **state)
{
    (void)state;
    printf("\n%-18s %-11s %-11s  %s\n", "op", "fp64_nrms", "fp32_nrms", "shape");
    for (int i = 0; i < g_nrows; i++)
        printf("%-18s %-11.3e %-11.3e  %s\n", g_rows[i].op, g_rows[i].n64, g_rows[i].n32, g_rows[i].shape);
    printf("\n");
    assert_int_equal(g_nrows, 17);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(q_linear_fp8),  cmocka_unit_test(q_linear_fp4),   cmocka_unit_test(q_rmsnorm),
        cmocka_unit_test(q_qhead_norm),  cmocka_unit_test(q_rope_100),     cmocka_unit_test(q_rope_65535),
        cmocka_unit_test(q_hadamard),    cmocka_unit_test(q_sparse_attn),  cmocka_unit_test(q_compressor),
        cmocka_unit_test(q_indexer_score), cmocka_unit_test(q_hc_pre),     cmocka_unit_test(q_hc_post),
        cmocka_unit_test(q_moe_gate),    cmocka_unit_test(q_expert),       cmocka_unit_test(q_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
