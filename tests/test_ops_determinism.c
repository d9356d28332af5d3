/*
 * test_ops_determinism.c - the oracle operators are bit-reproducible across
 * OpenMP thread counts and repeated calls (ops.h: "Deterministic: results
 * do not depend on the number of OpenMP threads").
 *
 * Owns that one property. Each case runs an operator chain on fixed seeded
 * inputs at both widths and under two boundary sets (profile source = every
 * rounding point on, and exact = none), with omp_set_num_threads(1), then 2
 * (then 3, an uneven split), twice each, and compares every run with the
 * first byte for byte (memcmp). Shapes are small but chosen so that each
 * parallel loop has many iterations to split (output rows, query-heads,
 * compressed rows, tokens) and the attention case crosses 64-column blocks.
 *
 * The per-width bodies are written once in the vocabulary of oracle/width.h
 * (real, X(name)) and expanded at both widths by including this file into
 * itself through oracle/both.h (the ops.inc pattern of oracle/ops.h).
 */
#ifndef DET_BODY

#include "tests/testutil.h"

#include <omp.h>

#include "oracle/boundary.h"
#include "oracle/ops.h"
#include "tests/mpref.h"

/* ---- shared inputs (binary64 values that are binary32-exact) ----------- */

enum {
    L_IN = 512, L_OUT8 = 384, L_OUT4 = 256, L_S = 3,           /* linears */
    A_H = 4, A_D = 64, A_S = 3, A_N = 200, A_NC = 150,         /* attention */
    C4_D = 64, C4_DC = 32, C4_R = 16, C4_S = 16,               /* compressor ratio 4 */
    C128_D = 32, C128_DC = 16, C128_R = 8, C128_S = 256,       /* compressor ratio 128 */
    H_HC = 4, H_D = 256, H_S = 5, H_NMIX = (2 + H_HC) * H_HC,  /* hc */
    MO_D = 256, MO_I = 128, MO_E = 4, MO_K = 2, MO_S = 5,           /* moe */
};

typedef struct {
    uint8_t *codes, *scale;
    dsv4q_weight w;
} qweight;

static struct {
    double lx[L_S * L_IN];
    qweight l8, l4;
    double aq[A_S * A_H * A_D], akv[A_N * A_D], asink[A_H];
    int32_t aidx[A_S * A_NC];
    float c4wkv[2 * C4_DC * C4_D], c4wg[2 * C4_DC * C4_D];
    double c4ape[4 * 2 * C4_DC], c4norm[C4_DC], c4x[C4_S * C4_D];
    float c128wkv[C128_DC * C128_D], c128wg[C128_DC * C128_D];
    double c128ape[128 * C128_DC], c128norm[C128_DC], c128x[C128_S * C128_D];
    double hX[H_S * H_HC * H_D], hscale[3], hbase[H_NMIX];
    float hfn[H_NMIX * H_HC * H_D];
    double mx[MO_S * MO_D], mbias[MO_E];
    float mgate[MO_E * MO_D];
    qweight me[MO_E][3], ms[3];
    dsv4q_expert_w experts[MO_E], shared;
} g;

static void qweight_fp8(qweight *q, mp_rng *r, long out, long in)
{
    long nob = (out + 127) / 128, nib = (in + 127) / 128;
    q->codes = malloc((size_t)(out * in));
    q->scale = malloc((size_t)(nob * nib));
    assert_non_null(q->codes);
    assert_non_null(q->scale);
    for (long i = 0; i < out * in; i++) {
        uint8_t c;
        do c = (uint8_t)mp_rng_u64(r);
        while ((c & 0x7F) == 0x7F);
        q->codes[i] = c;
    }
    for (long i = 0; i < nob * nib; i++) q->scale[i] = mp_e8m0_byte(-12 + mp_rng_int(r, 4));
    dsv4q_weight w = {"fp8", DSV4Q_WF_FP8, out, in, q->codes, q->scale, DSV4Q_DT_F8_E8M0, 0};
    q->w = w;
}

static void qweight_fp4(qweight *q, mp_rng *r, long out, long in)
{
    q->codes = malloc((size_t)(out * in / 2));
    q->scale = malloc((size_t)(out * in / 32));
    assert_non_null(q->codes);
    assert_non_null(q->scale);
    for (long i = 0; i < out * in / 2; i++) q->codes[i] = (uint8_t)mp_rng_u64(r);
    for (long i = 0; i < out * in / 32; i++) q->scale[i] = mp_e8m0_byte(-5 - mp_rng_int(r, 2));
    dsv4q_weight w = {"fp4", DSV4Q_WF_FP4, out, in, q->codes, q->scale, DSV4Q_DT_F8_E8M0, 0};
    q->w = w;
}

static void qweight_free(qweight *q)
{
    free(q->codes);
    free(q->scale);
}

static void fill(mp_rng *r, double *v, long n, double sd)
{
    for (long i = 0; i < n; i++) v[i] = mp_rng_gauss_f32(r, sd);
}

static void fillf(mp_rng *r, float *v, long n, double sd)
{
    for (long i = 0; i < n; i++) v[i] = (float)mp_rng_gauss_f32(r, sd);
}

static int setup(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, "determinism");
    fill(&r, g.lx, L_S * L_IN, 1.0);
    qweight_fp8(&g.l8, &r, L_OUT8, L_IN);
    qweight_fp4(&g.l4, &r, L_OUT4, L_IN);

    fill(&r, g.aq, A_S * A_H * A_D, 1.0);
    fill(&r, g.akv, A_N * A_D, 1.0);
    for (int h = 0; h < A_H; h++) g.asink[h] = mp_rng_f32(&r, -2, 2);
    for (int i = 0; i < A_S * A_NC; i++) g.aidx[i] = mp_rng_int(&r, 8) == 0 ? -1 : mp_rng_int(&r, A_N);

    fillf(&r, g.c4wkv, 2 * C4_DC * C4_D, 0.125);
    fillf(&r, g.c4wg, 2 * C4_DC * C4_D, 0.125);
    fill(&r, g.c4ape, 4 * 2 * C4_DC, 0.5);
    for (int i = 0; i < C4_DC; i++) g.c4norm[i] = mp_rng_f32(&r, 0.5, 1.5);
    fill(&r, g.c4x, C4_S * C4_D, 1.0);
    fillf(&r, g.c128wkv, C128_DC * C128_D, 0.18);
    fillf(&r, g.c128wg, C128_DC * C128_D, 0.18);
    fill(&r, g.c128ape, 128 * C128_DC, 0.5);
    for (int i = 0; i < C128_DC; i++) g.c128norm[i] = mp_rng_f32(&r, 0.5, 1.5);
    fill(&r, g.c128x, C128_S * C128_D, 1.0);

    fill(&r, g.hX, H_S * H_HC * H_D, 1.0);
    fillf(&r, g.hfn, H_NMIX * H_HC * H_D, 1.0 / 32);
    g.hscale[0] = 0.5;
    g.hscale[1] = 0.8;
    g.hscale[2] = 1.25;
    fill(&r, g.hbase, H_NMIX, 0.5);

    fill(&r, g.mx, MO_S * MO_D, 1.0);
    fillf(&r, g.mgate, MO_E * MO_D, 1.0 / 16);
    for (int e = 0; e < MO_E; e++) g.mbias[e] = mp_rng_f32(&r, -0.05, 0.05);
    for (int e = 0; e < MO_E; e++) {
        qweight_fp4(&g.me[e][0], &r, MO_I, MO_D);
        qweight_fp4(&g.me[e][1], &r, MO_D, MO_I);
        qweight_fp4(&g.me[e][2], &r, MO_I, MO_D);
        dsv4q_expert_w E = {g.me[e][0].w, g.me[e][1].w, g.me[e][2].w};
        g.experts[e] = E;
    }
    qweight_fp8(&g.ms[0], &r, MO_I, MO_D);
    qweight_fp8(&g.ms[1], &r, MO_D, MO_I);
    qweight_fp8(&g.ms[2], &r, MO_I, MO_D);
    /* shared-expert scales: larger, so its FP8 weights matter (2^-9..2^-6) */
    for (int j = 0; j < 3; j++) {
        long n = ((g.ms[j].w.out + 127) / 128) * ((g.ms[j].w.in + 127) / 128);
        for (long i = 0; i < n; i++) g.ms[j].scale[i] = mp_e8m0_byte(-9 + mp_rng_int(&r, 4));
    }
    dsv4q_expert_w sh = {g.ms[0].w, g.ms[1].w, g.ms[2].w};
    g.shared = sh;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    qweight_free(&g.l8);
    qweight_free(&g.l4);
    for (int e = 0; e < MO_E; e++)
        for (int j = 0; j < 3; j++) qweight_free(&g.me[e][j]);
    for (int j = 0; j < 3; j++) qweight_free(&g.ms[j]);
    return 0;
}

/* A case body writes its outputs to `out` (at most OUT_CAP bytes) and
 * returns how many bytes it wrote, or 0 on an oracle error. */
#define OUT_CAP (1 << 20)
typedef size_t (*det_body)(uint64_t bs, unsigned char *out);

/* Append n elements of size sz to out at *pos. */
static void put(unsigned char *out, size_t *pos, const void *p, size_t sz, long n)
{
    assert_true(*pos + sz * (size_t)n <= OUT_CAP);
    memcpy(out + *pos, p, sz * (size_t)n);
    *pos += sz * (size_t)n;
}

#define DET_BODY
#define DSV4Q_BOTH "tests/test_ops_determinism.c"
#include "oracle/both.h"

/* ---- the driver ------------------------------------------------------------ */

/* Runs body at `threads` threads into a fresh buffer. */
static unsigned char *run_at(det_body body, uint64_t bs, int threads, size_t *len)
{
    unsigned char *out = calloc(1, OUT_CAP);
    assert_non_null(out);
    omp_set_num_threads(threads);
    *len = body(bs, out);
    assert_true(*len > 0);
    return out;
}

/* Width `w` of case `name`: 1 thread twice, 2 threads twice, 3 threads
 * twice, under profile source and profile exact; every run equals the
 * first bit for bit. The first run must also hold finite, non-trivial
 * values (so the comparison is about real numbers). */
static void check_case(const char *name, det_body body, int w, size_t elem)
{
    static const char *const profiles[2] = {"source", "exact"};
    static const int threads[6] = {1, 1, 2, 2, 3, 3};
    omp_set_dynamic(0);
    for (int p = 0; p < 2; p++) {
        uint64_t bs;
        assert_int_equal(dsv4q_profile_set(profiles[p], &bs), 0);
        size_t len0;
        unsigned char *first = run_at(body, bs, threads[0], &len0);
        long nonzero = 0;
        for (size_t i = 0; i + elem <= len0; i += elem) {
            double v;
            if (elem == 4) {
                float f;
                memcpy(&f, first + i, 4);
                v = f;
            } else {
                memcpy(&v, first + i, 8);
            }
            /* int32 indices are packed as real too (see bodies): all finite */
            assert_true(isfinite(v) || v == -INFINITY);
            nonzero += v != 0;
        }
        assert_true(nonzero > (long)(len0 / elem) / 4);
        for (int k = 1; k < 6; k++) {
            size_t len;
            unsigned char *again = run_at(body, bs, threads[k], &len);
            assert_int_equal(len, len0);
            if (memcmp(first, again, len0) != 0) {
                print_error("%s f%d profile %s: run %d (%d threads) differs from run 0 (1 thread)\n", name, w,
                            profiles[p], k, threads[k]);
                fail();
            }
            free(again);
        }
        free(first);
    }
    omp_set_num_threads(1);
}

#define DET_TEST(name)                                                   \
    static void test_##name(void **state)                                \
    {                                                                    \
        (void)state;                                                     \
        check_case(#name, det_##name##_f32, 32, sizeof(float));          \
        check_case(#name, det_##name##_f64, 64, sizeof(double));         \
    }

DET_TEST(linear)
DET_TEST(attention)
DET_TEST(compressor)
DET_TEST(hc_pre)
DET_TEST(moe)
DET_TEST(norm_rope)
DET_TEST(indexer)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),     cmocka_unit_test(test_attention), cmocka_unit_test(test_compressor),
        cmocka_unit_test(test_hc_pre),     cmocka_unit_test(test_moe),       cmocka_unit_test(test_norm_rope),
        cmocka_unit_test(test_indexer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#else /* DET_BODY: one width, real = float|double, X(name) = name_f32|name_f64 */

static real *X(cvt)(const double *v, long n)
{
    real *p = malloc(sizeof(real) * (size_t)(n ? n : 1));
    assert_non_null(p);
    for (long i = 0; i < n; i++) p[i] = (real)v[i];
    return p;
}

/* FP8 (384 rows) and FP4 (256 rows) linears on 3 tokens, BF16 output. */
static size_t X(det_linear)(uint64_t bs, unsigned char *out)
{
    size_t pos = 0;
    real *x = X(cvt)(g.lx, L_S * L_IN), y8[L_S * L_OUT8], y4[L_S * L_OUT4];
    int rc = X(dsv4q_linear)(bs, 1, &g.l8.w, x, L_S, y8, DSV4Q_B_LINEAR_BF16) |
             X(dsv4q_linear)(bs, 1, &g.l4.w, x, L_S, y4, DSV4Q_B_LINEAR_BF16);
    free(x);
    if (rc) return 0;
    put(out, &pos, y8, sizeof(real), L_S * L_OUT8);
    put(out, &pos, y4, sizeof(real), L_S * L_OUT4);
    return pos;
}

/* 3 queries x 4 heads over 150 columns (blocks 64, 64, 22), ~1/8 masked. */
static size_t X(det_attention)(uint64_t bs, unsigned char *out)
{
    size_t pos = 0;
    real *q = X(cvt)(g.aq, A_S * A_H * A_D), *kv = X(cvt)(g.akv, A_N * A_D), *sink = X(cvt)(g.asink, A_H);
    real o[A_S * A_H * A_D];
    int rc = X(dsv4q_sparse_attn)(bs, q, A_S, A_H, A_D, kv, A_N, g.aidx, A_NC, sink, (real)0.125, o);
    free(q);
    free(kv);
    free(sink);
    if (rc) return 0;
    put(out, &pos, o, sizeof(real), A_S * A_H * A_D);
    return pos;
}

/* Ratio 4 (prefill 16 tokens = 4 rows in parallel, then 4 decode steps)
 * for attention rows and for indexer rows (rotate: Hadamard + FP4 under
 * source), and ratio 128 (prefill 256 tokens = 2 rows). */
static size_t X(det_compressor)(uint64_t bs, unsigned char *out)
{
    size_t pos = 0;
    const dsv4q_rope_params p4 = {C4_R, 160000.0, 65536, 16.0, 32.0, 1.0};
    const dsv4q_rope_params p128 = {C128_R, 160000.0, 65536, 16.0, 32.0, 1.0};
    X(dsv4q_rope_table) t4, t128;
    if (X(dsv4q_rope_build)(&t4, &p4, C4_S + 8, bs) || X(dsv4q_rope_build)(&t128, &p128, C128_S, bs)) return 0;
    real *ape4 = X(cvt)(g.c4ape, 4 * 2 * C4_DC), *nrm4 = X(cvt)(g.c4norm, C4_DC), *x4 = X(cvt)(g.c4x, C4_S * C4_D);
    real *ape128 = X(cvt)(g.c128ape, 128 * C128_DC), *nrm128 = X(cvt)(g.c128norm, C128_DC);
    real *x128 = X(cvt)(g.c128x, C128_S * C128_D);
    dsv4q_weight wkv4 = {"wkv", DSV4Q_WF_F32, 2 * C4_DC, C4_D, g.c4wkv, NULL, DSV4Q_DT_INVALID, 0};
    dsv4q_weight wg4 = {"wgate", DSV4Q_WF_F32, 2 * C4_DC, C4_D, g.c4wg, NULL, DSV4Q_DT_INVALID, 0};
    dsv4q_weight wkv128 = {"wkv", DSV4Q_WF_F32, C128_DC, C128_D, g.c128wkv, NULL, DSV4Q_DT_INVALID, 0};
    dsv4q_weight wg128 = {"wgate", DSV4Q_WF_F32, C128_DC, C128_D, g.c128wg, NULL, DSV4Q_DT_INVALID, 0};
    size_t ok = 1;
    for (int rot = 0; rot < 2 && ok; rot++) {
        X(dsv4q_cmp) c = {4, C4_DC, rot, wkv4, wg4, ape4, nrm4};
        X(dsv4q_cmp_state) st;
        real rows[C4_S / 4 * C4_DC];
        if (X(dsv4q_cmp_state_init)(&st, 4, C4_DC)) {
            ok = 0;
            break;
        }
        if (X(dsv4q_compressor)(bs, 1, &c, &st, x4, C4_S, 0, &t4, 1e-6, rows) != C4_S / 4) ok = 0;
        put(out, &pos, rows, sizeof(real), C4_S / 4 * C4_DC);
        for (long p = C4_S; p < C4_S + 4 && ok; p++) { /* decode, reusing the prompt tokens */
            long n = X(dsv4q_compressor)(bs, 1, &c, &st, x4 + (p - C4_S) * C4_D, 1, p, &t4, 1e-6, rows);
            if (n < 0) ok = 0;
            if (n == 1) put(out, &pos, rows, sizeof(real), C4_DC);
        }
        put(out, &pos, st.kv, sizeof(real), 2 * 4 * 2 * C4_DC);
        put(out, &pos, st.score, sizeof(real), 2 * 4 * 2 * C4_DC);
        X(dsv4q_cmp_state_free)(&st);
    }
    if (ok) {
        X(dsv4q_cmp) c = {128, C128_DC, 0, wkv128, wg128, ape128, nrm128};
        X(dsv4q_cmp_state) st;
        real rows[2 * C128_DC];
        if (X(dsv4q_cmp_state_init)(&st, 128, C128_DC)) ok = 0;
        else {
            if (X(dsv4q_compressor)(bs, 1, &c, &st, x128, C128_S, 0, &t128, 1e-6, rows) != 2) ok = 0;
            put(out, &pos, rows, sizeof(real), 2 * C128_DC);
            X(dsv4q_cmp_state_free)(&st);
        }
    }
    X(dsv4q_rope_free)(&t4);
    X(dsv4q_rope_free)(&t128);
    free(ape4); free(nrm4); free(x4); free(ape128); free(nrm128); free(x128);
    return ok ? pos : 0;
}

/* hc_pre on 5 tokens (Sinkhorn 20 iterations), then hc_post of its own
 * outputs. */
static size_t X(det_hc_pre)(uint64_t bs, unsigned char *out)
{
    size_t pos = 0;
    real *Xs = X(cvt)(g.hX, H_S * H_HC * H_D), *scale = X(cvt)(g.hscale, 3), *base = X(cvt)(g.hbase, H_NMIX);
    real y[H_S * H_D], post[H_S * H_HC], comb[H_S * H_HC * H_HC], X2[H_S * H_HC * H_D];
    dsv4q_weight fn = {"hc_fn", DSV4Q_WF_F32, H_NMIX, H_HC * H_D, g.hfn, NULL, DSV4Q_DT_INVALID, 0};
    int rc = X(dsv4q_hc_pre)(bs, Xs, H_S, H_HC, H_D, &fn, scale, base, 1e-6, 1e-6, 20, y, post, comb);
    if (!rc) X(dsv4q_hc_post)(bs, y, Xs, post, comb, H_S, H_HC, H_D, X2);
    free(Xs);
    free(scale);
    free(base);
    if (rc) return 0;
    put(out, &pos, y, sizeof(real), H_S * H_D);
    put(out, &pos, post, sizeof(real), H_S * H_HC);
    put(out, &pos, comb, sizeof(real), H_S * H_HC * H_HC);
    put(out, &pos, X2, sizeof(real), H_S * H_HC * H_D);
    return pos;
}

/* Gate (sqrtsoftplus, bias, top-2 of 4) then the MoE: FP4 routed experts
 * in ascending id, FP8 shared expert, on 5 tokens. Indices are appended
 * as real values so the finiteness check applies to every byte. */
static size_t X(det_moe)(uint64_t bs, unsigned char *out)
{
    size_t pos = 0;
    real *x = X(cvt)(g.mx, MO_S * MO_D), *bias = X(cvt)(g.mbias, MO_E), w[MO_S * MO_K], y[MO_S * MO_D],
         ixr[MO_S * MO_K];
    int32_t ix[MO_S * MO_K];
    dsv4q_weight G = {"gate", DSV4Q_WF_F32, MO_E, MO_D, g.mgate, NULL, DSV4Q_DT_INVALID, 0};
    int rc = X(dsv4q_moe_gate)(x, MO_S, MO_D, &G, bias, NULL, NULL, MO_E, MO_K, "sqrtsoftplus", 1.5, w, ix);
    if (!rc) rc = X(dsv4q_moe)(bs, 1, g.experts, MO_E, &g.shared, x, MO_S, MO_D, w, ix, MO_K, 10.0, y);
    free(x);
    free(bias);
    if (rc) return 0;
    for (int i = 0; i < MO_S * MO_K; i++) ixr[i] = (real)(ix[i] + 1);
    put(out, &pos, w, sizeof(real), MO_S * MO_K);
    put(out, &pos, ixr, sizeof(real), MO_S * MO_K);
    put(out, &pos, y, sizeof(real), MO_S * MO_D);
    return pos;
}

/* RMSNorm, q head norm, RoPE table (YaRN) and apply/inverse, Hadamard. */
static size_t X(det_norm_rope)(uint64_t bs, unsigned char *out)
{
    size_t pos = 0;
    enum { ROWS = 48, D = 128 };
    real *x = X(cvt)(g.akv, ROWS * D), y[ROWS * D];
    const dsv4q_rope_params p = {64, 160000.0, 65536, 16.0, 32.0, 1.0};
    X(dsv4q_rope_table) t;
    if (X(dsv4q_rope_build)(&t, &p, 4096, bs)) {
        free(x);
        return 0;
    }
    X(dsv4q_rmsnorm)(bs, x, ROWS, D, NULL, 1e-6, y);
    put(out, &pos, y, sizeof(real), ROWS * D);
    X(dsv4q_qhead_norm)(bs, y, ROWS, D, 1e-6);
    put(out, &pos, y, sizeof(real), ROWS * D);
    X(dsv4q_rope_apply)(bs, &t, y, ROWS, D, D - 64, 4000, 8, 0);
    put(out, &pos, y, sizeof(real), ROWS * D);
    X(dsv4q_rope_apply)(bs, &t, y, ROWS, D, D - 64, 4000, 8, 1);
    put(out, &pos, y, sizeof(real), ROWS * D);
    X(dsv4q_hadamard)(bs, y, ROWS, D);
    put(out, &pos, y, sizeof(real), ROWS * D);
    put(out, &pos, t.cos + 4000 * 32, sizeof(real), 32 * 4);
    X(dsv4q_rope_free)(&t);
    free(x);
    return pos;
}

/* Indexer scores (prefill mask, 16 queries x 24 keys) and the top-k. */
static size_t X(det_indexer)(uint64_t bs, unsigned char *out)
{
    size_t pos = 0;
    enum { SQ = 16, HI = 8, DI = 64, T = 24, K = 6 };
    real *q = X(cvt)(g.c128x, SQ * HI * DI), *w = X(cvt)(g.c128ape, SQ * HI), *Kt = X(cvt)(g.akv, T * DI);
    real sc[SQ * T], pick[SQ * K];
    int32_t top[SQ * K];
    X(dsv4q_indexer_scores)(bs, q, w, SQ, HI, DI, Kt, T, 0, 1, sc);
    int rc = X(dsv4q_topk)(sc, SQ, T, K, top);
    free(q);
    free(w);
    free(Kt);
    if (rc) return 0;
    for (int i = 0; i < SQ * K; i++) pick[i] = (real)(top[i] + 2);
    put(out, &pos, sc, sizeof(real), SQ * T);
    put(out, &pos, pick, sizeof(real), SQ * K);
    return pos;
}

#endif /* DET_BODY */
