/*
 * test_op_index41_score.c - INDEX41_SCORE (the V4.1 indexer score with keys
 * made from the compressor latent) through dsv4q_oracle_exec at both
 * widths, against an independent double-precision composition written
 * here from V4.1 model.py (not from the oracle's source):
 *
 *   k    = wk latent[t]                         Linear (no rounding: exact)
 *   k    = k_norm * k * rsqrt(mean(k^2) + eps)  RMSNorm
 *   k    = k with its last rd dims rotated by   precompute_freqs_cis with
 *          pos = (k0 + t) * ratio, interleaved   YaRN (find_correction_range,
 *          pairs, f_i = base^(-2i/rd) blended    linear_ramp_factor) and
 *          by YaRN                               apply_rotary_emb
 *   k, q = FP4 (blocks of 32: s = 2^ceil(log2(amax/6)), E2M1 RNE, ties to
 *          the even code) when idx_k_fp4 / idx_q_fp4 are on
 *   score[i,t] = sum_h relu(q_ih . k_t) w_ih, -inf at t >= (i+1)/ratio in a
 *          prefill (start_pos 0)
 *
 * Tiny dims: s <= 2, Hi 2, Di 8, D 6, rd 4. The YaRN ramp at rd 4, base
 * 10000, original_seq_len 64, beta 32 / 1: lo = floor(4 ln(64/(64 pi)) /
 * (2 ln 1e4)) = floor(-0.25) -> 0, hi = ceil(4 ln(64/(2 pi)) / (2 ln 1e4)) =
 * ceil(0.504) = 1, so pair 0 keeps f_0 = 1 and pair 1 gets f_1 / factor =
 * 0.01 / 4: both branches of the blend are used. Inputs are small dyadic
 * values (exact in BF16, idx_wk also given as raw BF16 codes). The FP4 runs
 * include exact E2M1 ties on the queries (q = 7/8 in a block of amax 7/8:
 * s = 1/4, 3.5 -> 4).
 *
 * Also: hostile calls refused with a message (dsv4q_capi_shapes runs the
 * contract's shape unification and the descriptor's check), and the cases'
 * keys.
 */
#include "tests/testutil.h"

#include <math.h>
#include "cli/dsv4q_capi.h"
#include "harness/ops/ops.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"

#define S 2
#define HI 2
#define DI 8
#define DD 6
#define RD 4
#define TMAX 3

typedef struct {
    long s, T, start, k0;
    int ratio;
} shape;

static float q_in[S][HI][DI], w_in[S][HI], lat_in[TMAX][DD], wk_in[DI][DD], kn_in[DI];
static uint16_t wk_raw[DI][DD];
static const double base = 10000, osl = 64, factor = 4, beta_fast = 32, beta_slow = 1, eps = 1e-6;

static void fill(void)
{
    for (int i = 0; i < S; i++)
        for (int h = 0; h < HI; h++) {
            for (int j = 0; j < DI; j++) q_in[i][h][j] = (float)(((i * 13 + h * 7 + j * 5 + 2) % 15) - 7) / 8.0f;
            w_in[i][h] = (float)(((i + 2 * h) % 3) - 1) / 4.0f + 0.125f;
        }
    for (int t = 0; t < TMAX; t++)
        for (int k = 0; k < DD; k++) lat_in[t][k] = (float)(((t * 7 + k * 3) % 11) - 5) / 4.0f;
    for (int j = 0; j < DI; j++) {
        for (int k = 0; k < DD; k++) {
            wk_in[j][k] = (float)(((j * 5 + k * 2) % 9) - 4) / 8.0f;
            wk_raw[j][k] = dsv4q_bf16_from_f32(wk_in[j][k]);
        }
        kn_in[j] = 1.0f + (float)(j % 3) / 4.0f;
    }
}

/* E2M1 of y in [-6, 6], RNE with ties to the even code. */
static double e2m1(double y)
{
    static const double g[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    const double a = fabs(y);
    int best = 0;
    for (int k = 1; k < 8; k++) {
        const double d = fabs(a - g[k]), db = fabs(a - g[best]);
        if (d < db || (d == db && k % 2 == 0)) best = k;
    }
    return y < 0 ? -g[best] : g[best];
}

/* FP4 simulation of one row of n <= 32 (one block). */
static void fp4_row(double *v, int n)
{
    double amax = 0;
    for (int i = 0; i < n; i++) amax = fmax(amax, fabs(v[i]));
    amax = fmax(amax, 6.0 * ldexp(1.0, -126));
    int e = -140;
    while (6.0 * ldexp(1.0, e) < amax) e++;
    const double sc = ldexp(1.0, e);
    for (int i = 0; i < n; i++) v[i] = e2m1(fmin(6, fmax(-6, v[i] / sc))) * sc;
}

static void expected(const shape *sh, int fp4, double *want)
{
    double K[TMAX][DI], q[S][HI][DI], f[RD / 2];
    /* YaRN frequencies (model.py precompute_freqs_cis) */
    const double lb = 2 * log(base);
    double lo = floor(RD * log(osl / (beta_fast * 2 * M_PI)) / lb),
           hi = ceil(RD * log(osl / (beta_slow * 2 * M_PI)) / lb);
    lo = fmax(lo, 0);
    hi = fmin(hi, RD - 1);
    if (lo == hi) hi += 0.001;
    for (int i = 0; i < RD / 2; i++) {
        const double f0 = 1.0 / pow(base, 2.0 * i / RD), ramp = fmin(1, fmax(0, (i - lo) / (hi - lo)));
        const double smooth = 1 - ramp;
        f[i] = f0 / factor * (1 - smooth) + f0 * smooth;
    }
    for (long t = 0; t < sh->T; t++) {
        double ss = 0;
        for (int j = 0; j < DI; j++) {
            double acc = 0;
            for (int k = 0; k < DD; k++) acc += (double)wk_in[j][k] * lat_in[t][k];
            K[t][j] = acc;
            ss += acc * acc;
        }
        const double inv = 1 / sqrt(ss / DI + eps);
        for (int j = 0; j < DI; j++) K[t][j] = kn_in[j] * K[t][j] * inv;
        const double pos = (double)((sh->k0 + t) * sh->ratio);
        for (int i = 0; i < RD / 2; i++) {
            double *a = &K[t][DI - RD + 2 * i], *b = a + 1, c = cos(pos * f[i]), sn = sin(pos * f[i]);
            const double re = *a * c - *b * sn, im = *a * sn + *b * c;
            *a = re;
            *b = im;
        }
        if (fp4) fp4_row(K[t], DI);
    }
    for (long i = 0; i < sh->s; i++)
        for (int h = 0; h < HI; h++) {
            for (int j = 0; j < DI; j++) q[i][h][j] = q_in[i][h][j];
            if (fp4) fp4_row(q[i][h], DI);
        }
    for (long i = 0; i < sh->s; i++)
        for (long t = 0; t < sh->T; t++) {
            if (sh->start == 0 && t >= (i + 1) / sh->ratio) {
                want[i * sh->T + t] = -INFINITY;
                continue;
            }
            double sc = 0;
            for (int h = 0; h < HI; h++) {
                double d = 0;
                for (int j = 0; j < DI; j++) d += q[i][h][j] * K[t][j];
                sc += fmax(d, 0) * w_in[i][h];
            }
            want[i * sh->T + t] = sc;
        }
}

/* The call's tensors; T rows of the latent, s queries. */
static void make_call(const shape *sh, dsv4q_bt in[5], dsv4q_bt *out, double p[10], dsv4q_bcall *call)
{
    memset(in, 0, 5 * sizeof *in);
    in[0] = (dsv4q_bt){.name = "q", .dtype = DSV4Q_BT_F32, .ndim = 3, .shape = {sh->s, HI, DI}, .data = q_in};
    in[1] = (dsv4q_bt){.name = "w", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {sh->s, HI}, .data = w_in};
    in[2] = (dsv4q_bt){.name = "latent", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {sh->T, DD}, .data = lat_in};
    in[3] = (dsv4q_bt){.name = "idx_wk", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {DI, DD}, .data = wk_in};
    in[3].raw = wk_raw;
    in[3].raw_dtype = DSV4Q_BT_BF16;
    in[3].raw_ndim = 2;
    in[3].raw_shape[0] = DI;
    in[3].raw_shape[1] = DD;
    in[4] = (dsv4q_bt){.name = "idx_k_norm", .dtype = DSV4Q_BT_F32, .ndim = 1, .shape = {DI}, .data = kn_in};
    *out = (dsv4q_bt){.name = "score", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {sh->s, sh->T}};
    const double pv[10] = {(double)sh->start, sh->ratio, (double)sh->k0, RD, base, osl, factor, beta_fast,
                           beta_slow,         eps};
    memcpy(p, pv, sizeof pv);
    *call = (dsv4q_bcall){
        .op = DSV4Q_OP_INDEX41_SCORE, .nin = 5, .nout = 1, .in = in, .out = out, .param = p, .nparam = 10};
}

/* f64 within tol64 and f32 within tol32 (relative to the largest |want|);
 * -inf exactly where want is; width 32 skipped when tol32 < 0. */
static void run(const shape *sh, uint64_t bs, int fp4, double tol64, double tol32)
{
    dsv4q_bt in[5], out;
    double p[10], want[S * TMAX], o64[S * TMAX];
    float o32[S * TMAX];
    dsv4q_bcall call;
    char err[256];
    make_call(sh, in, &out, p, &call);
    expected(sh, fp4, want);
    void *v64[1] = {o64}, *v32[1] = {o32};
    if (dsv4q_oracle_exec(64, bs, &call, v64, err, sizeof err)) fail_msg("%s", err);
    if (tol32 >= 0 && dsv4q_oracle_exec(32, bs, &call, v32, err, sizeof err)) fail_msg("%s", err);
    double scale = 0;
    int finite = 0;
    for (long i = 0; i < sh->s * sh->T; i++)
        if (isfinite(want[i])) scale = fmax(scale, fabs(want[i])), finite += want[i] != 0;
    if (!finite) fail_msg("start %ld ratio %d: every score is 0 or -inf", sh->start, sh->ratio); /* not vacuous */
    for (long i = 0; i < sh->s * sh->T; i++) {
        if (!isfinite(want[i])) {
            assert_true(o64[i] == -INFINITY);
            if (tol32 >= 0) assert_true(o32[i] == -INFINITY);
            continue;
        }
        if (fabs(o64[i] - want[i]) > tol64 * scale || (tol32 >= 0 && fabs(o32[i] - want[i]) > tol32 * scale))
            fail_msg("start %ld ratio %d k0 %ld fp4 %d: score[%ld] f64 %.17g f32 %.9g want %.17g", sh->start, sh->ratio,
                     sh->k0, fp4, i, o64[i], tol32 >= 0 ? o32[i] : 0.0f, want[i]);
    }
}

static const shape shapes[] = {
    {2, 3, 5, 0, 2}, /* decode-like: keys at positions 0, 2, 4; no mask */
    {2, 2, 0, 0, 1}, /* prefill at ratio 1: row 0 sees key 0 only */
    {2, 1, 0, 0, 2}, /* prefill at ratio 2: row 0 sees nothing, row 1 key 0 */
    {1, 3, 9, 2, 2}, /* a chunk: cache rows 2..4 at positions 4, 6, 8 */
};

static void hand_values(void **state)
{
    (void)state;
    fill();
    assert_int_equal(dsv4q_op_find("index41_score"), DSV4Q_OP_INDEX41_SCORE);
    const uint64_t fp4 = DSV4Q_BIT(DSV4Q_B_IDX_K_FP4) | DSV4Q_BIT(DSV4Q_B_IDX_Q_FP4);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        shape sh = shapes[k];
        if (sh.start == 0) sh.T = (sh.start + sh.s) / sh.ratio;
        /* exact profile: the composition itself, both widths */
        run(&sh, 0, 0, 1e-13, 2e-6);
        /* the two FP4 boundaries of V4.1 (no Hadamard): f64 only, since an
         * f32 rounding next to an E2M1 decision may legitimately move a code */
        run(&sh, fp4, 1, 1e-13, -1);
    }
}

/* Every hostile call gets a message naming what is wrong. */
static void expect_refused(const dsv4q_bt *in, const double *p, const char *needle)
{
    dsv4q_bt tmpl[1];
    char err[512] = "";
    assert_int_equal(dsv4q_capi_shapes(DSV4Q_OP_INDEX41_SCORE, in, 5, p, 10, tmpl, 1, err, sizeof err), -1);
    if (!strstr(err, needle)) fail_msg("message '%s' lacks '%s'", err, needle);
}

static void hostile(void **state)
{
    (void)state;
    fill();
    const shape sh = {2, 3, 5, 0, 2};
    dsv4q_bt in[5], out, tmpl[1];
    double p[10], q[10];
    dsv4q_bcall call;
    char err[512];
    make_call(&sh, in, &out, p, &call);
    assert_int_equal(dsv4q_capi_shapes(DSV4Q_OP_INDEX41_SCORE, in, 5, p, 10, tmpl, 1, err, sizeof err), 0);
    assert_int_equal(tmpl[0].shape[0], 2);
    assert_int_equal(tmpl[0].shape[1], 3);
    struct {
        int param;
        double v;
        const char *needle;
    } bad[] = {
        {1, 3, "ratio must be 1, 2 or 4"},
        {1, 0, "ratio must be 1, 2 or 4"},
        {3, 3, "rope_dim must be even"},
        {3, 16, "rope_dim must be even"},
        {3, 0, "rope_dim must be even"},
        {2, -1, "k0 must be an integer"},
        {2, 1e7, "key positions"},
        {0, -4, "start_pos must be an integer"},
        {0, 2.5, "start_pos must be an integer"},
        {4, 0, "theta and factor must be positive"},
        {6, -1, "theta and factor must be positive"},
        {5, -1, "original_seq_len"},
        {9, -1e-6, "eps must be >= 0"},
        {0, NAN, "not finite"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memcpy(q, p, sizeof q);
        q[bad[k].param] = bad[k].v;
        expect_refused(in, q, bad[k].needle);
    }
    /* a chunk in a prefill */
    memcpy(q, p, sizeof q);
    q[0] = 0;
    q[2] = 1;
    expect_refused(in, q, "k0 must be 0");
    /* shapes: idx_wk's Di against q's, its D against the latent's, the norm, w */
    dsv4q_bt b[5];
    memcpy(b, in, sizeof b);
    b[3].shape[0] = DI - 1;
    b[3].raw = NULL;
    expect_refused(b, p, "idx_wk");
    memcpy(b, in, sizeof b);
    b[2].shape[1] = DD - 1;
    expect_refused(b, p, "idx_wk");
    memcpy(b, in, sizeof b);
    b[4].shape[0] = DI + 1;
    expect_refused(b, p, "idx_k_norm");
    memcpy(b, in, sizeof b);
    b[1].shape[1] = HI + 1;
    expect_refused(b, p, "input w");
    /* no key row; an FP8-stored idx_wk */
    memcpy(b, in, sizeof b);
    b[2].shape[0] = 0;
    expect_refused(b, p, "at least one row");
    memcpy(b, in, sizeof b);
    uint8_t scale[1] = {127};
    b[3].raw_dtype = DSV4Q_BT_F8_E4M3;
    b[3].raw_scale = scale;
    b[3].scale_dtype = DSV4Q_BT_F8_E8M0;
    b[3].scale_shape[0] = b[3].scale_shape[1] = 1;
    expect_refused(b, p, "stored BF16");
}

/* The case keys: defaults, the T / k0 consistency the builder demands, the
 * V4.1 Flash params. */
static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "index41_score(T=512,start=1023)", err, sizeof err), 0);
    assert_string_equal(c.key, "index41_score(s=1,Hi=32,Di=128,D=512,T=512,ratio=2,start=1023,recipe=normal,seed=1)");
    assert_true(c.param[1] == 2 && c.param[2] == 0 && c.param[3] == 64 && c.param[4] == 160000 && c.param[5] == 65536 &&
                c.param[6] == 16 && c.param[9] == 1e-20);
    assert_int_equal(c.in[3].raw_dtype, DSV4Q_BT_BF16);
    assert_int_equal((int)c.out[0].shape[1], 512);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "index41_score(T=16,ratio=1,start=4095,k0=4080)", err, sizeof err), 0);
    assert_true(c.param[2] == 4080);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "index41_score(T=100,start=1023)", err, sizeof err), -1);
    assert_non_null(strstr(err, "k0 + T = (start+s)/ratio"));
    assert_int_equal(dsv4q_case_build(&c, "index41_score(s=4,T=2,start=0,k0=1)", err, sizeof err), -1);
    assert_int_equal(dsv4q_case_build(&c, "index41_score(ratio=3,T=1365,start=4095)", err, sizeof err), -1);
    assert_int_equal(dsv4q_case_build(&c, "index41_score(recipe=ties)", err, sizeof err), -1);
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(hostile),
                                       cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
