/*
 * test_op_engram41.c - ENGRAM41 (V4.1's Engram lookup + gate injection) on
 * hand values through dsv4q_oracle_exec at both widths, hostile calls, and
 * its cases' recipes.
 *
 * Hand values: hc 2, dim 4, one column, head_dim 32, a table of 2 rows,
 * eps 1e-20, ue8m0. Table row 0 = E4M3 codes 0x38 (1.0), 0x40 (2.0), then
 * zeros, scale 2^0: e = [1, 2, 0 ...]. Its act quant per 32: amax 2, the
 * scale 2^ceil(log2(2/448)) = 2^-7, codes 128 and 256 (exact), so
 * kv[o] = w[o][0] * 1 + w[o][1] * 2. wkv [12, 32], one 32x32 block of
 * scale 2^0, nonzero codes: rows 0-3 col 0 = 1 (key copy 0 = [1, 1, 1, 1],
 * mean 1); row 4 col 1 = 1 (key copy 1 = [2, 0, 0, 0], mean 1); value
 * rows 8-11 = [1, -1, 2, 0.5] (cols 0, 0, 1, 0 = 1, -1, 1, 0.5). q_weight =
 * all 1, k_weight = [1 ...] and [0.5 ...]: w = q * k = 1 (copy 0), 0.5
 * (copy 1). Per copy dot = sum(h * w * key) * rsqrt(mean h^2 + eps) *
 * rsqrt(mean key^2 + eps) / sqrt(4), g = sigmoid(copysign(sqrt(max(|dot|,
 * 1e-6)), dot)), h' = BF16(h + g * value):
 *   t0 (id 0) c0: h = [1, 1, 1, 1]: dot = 4 / 2 = 2, z = 1.41421, g =
 *     0.804430: [1.804430, 0.195570, 2.608859, 1.402215] -> BF16
 *     [1.8046875, 0.1953125, 2.609375, 1.3984375];
 *   t0 c1: h = [-1, 2, 0, 0]: mean 1.25, sum = -1 * 0.5 * 2 = -1, dot =
 *     -1 / sqrt(1.25) / 2 = -0.447214, z = -0.668740, g = 0.338779:
 *     [-0.661221, 1.661221, 0.677558, 0.169389] -> [-0.66015625, 1.6640625,
 *     0.67578125, 0.1689453125] (a dropped sign would give g = 0.661221);
 *   t1 (id 0) c0: h = 2^-34 each: mean h^2 = 2^-68 = 3.388e-21, BELOW eps:
 *     rsqrt(3.388e-21 + 1e-20) = 8.6425e9, dot = 4 * 2^-34 * 8.6425e9 / 2 =
 *     1.006121, z = 1.003056, g = 0.731659 (eps 0 would give 0.804430, eps
 *     1e-6 about 0.5): [0.731659, -0.731659, 1.463318, 0.365829] ->
 *     [0.73046875, -0.73046875, 1.4609375, 0.365234375];
 *   t1 c1: h = [0, 0, 0, -3]: sum 0, dot 0, clamped to 1e-6, z = +1e-3, g =
 *     0.500250: [0.500250, -0.500250, 1.000500, -2.749875] -> [0.5, -0.5,
 *     1.0, -2.75];
 *   t2 (id 2 = rows: outside, a zero row): key = value = 0, h' = h;
 *   t3 (id 0, text_mask 0: an image token): g = 0, h' = h.
 */
#include "tests/testutil.h"

#include "harness/cases/cases.h"
#include "harness/ops/ops.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"

#define S 4
#define HC 2
#define DIM 4
#define HD 32
#define ROWS 2
#define NW (DIM * (HC + 1))

typedef struct hand {
    float h[S * HC * DIM], table[ROWS * HD], wkv[NW * HD], qw[HC * DIM], kw[HC * DIM];
    uint8_t tcode[ROWS * HD], tscale[ROWS * HD / 32], wcode[NW * HD], wscale[1];
    uint16_t qraw[HC * DIM], kraw[HC * DIM];
    int32_t ids[S], mask[S];
    dsv4q_bt in[7], out;
    double p[2];
    dsv4q_bcall call;
} hand;

/* A 2-D weight input: F32 values + its stored form (E8M0 scales when sc). */
static dsv4q_bt weight_bt(const char *name, float *v, int64_t r, int64_t k, const void *raw, int32_t raw_dtype,
                          const uint8_t *sc, int64_t sr, int64_t sk)
{
    dsv4q_bt t = {.name = name,
                  .dtype = DSV4Q_BT_F32,
                  .ndim = 2,
                  .shape = {r, k},
                  .data = v,
                  .raw = raw,
                  .raw_dtype = raw_dtype,
                  .raw_ndim = 2,
                  .raw_shape = {r, k},
                  .raw_scale = sc,
                  .scale_dtype = sc ? DSV4Q_BT_F8_E8M0 : DSV4Q_BT_NONE,
                  .scale_shape = {sr, sk}};
    return t;
}

static void hand_setup(hand *m)
{
    memset(m, 0, sizeof *m);
    const float h[S * HC * DIM] = {1,        1,        1,        1,        -1, 2,    0,  0,  /* t0 */
                                   0x1p-34f, 0x1p-34f, 0x1p-34f, 0x1p-34f, 0,  0,    0,  -3, /* t1 */
                                   0.5f,     -2,       3,        0.25f,    1,  1,    -1, 4,  /* t2 */
                                   1.5f,     0.75f,    -4,       2,        -1, 0.5f, 8,  1}; /* t3 */
    memcpy(m->h, h, sizeof h);
    m->tcode[0] = 0x38;
    m->tcode[1] = 0x40;
    for (int k = 0; k < HD; k++) m->tcode[HD + k] = 0x38; /* row 1: all 1 (unread) */
    m->tscale[0] = m->tscale[1] = 127;
    for (int i = 0; i < ROWS * HD; i++) m->table[i] = (float)dsv4q_e4m3_decode(m->tcode[i]);
    for (int o = 0; o < 4; o++) m->wcode[o * HD + 0] = 0x38;
    m->wcode[4 * HD + 1] = 0x38;
    m->wcode[8 * HD + 0] = 0x38;
    m->wcode[9 * HD + 0] = 0xB8;
    m->wcode[10 * HD + 1] = 0x38;
    m->wcode[11 * HD + 0] = 0x30;
    m->wscale[0] = 127;
    for (int i = 0; i < NW * HD; i++) m->wkv[i] = (float)dsv4q_e4m3_decode(m->wcode[i]);
    for (int i = 0; i < HC * DIM; i++) {
        m->qw[i] = 1;
        m->kw[i] = i < DIM ? 1 : 0.5f;
        m->qraw[i] = dsv4q_bf16_from_f32(m->qw[i]);
        m->kraw[i] = dsv4q_bf16_from_f32(m->kw[i]);
    }
    const int32_t ids[S] = {0, 0, ROWS, 0}, mask[S] = {1, 1, 1, 0};
    memcpy(m->ids, ids, sizeof ids);
    memcpy(m->mask, mask, sizeof mask);
    m->in[0] = (dsv4q_bt){.name = "h", .dtype = DSV4Q_BT_F32, .ndim = 3, .shape = {S, HC, DIM}, .data = m->h};
    m->in[1] = (dsv4q_bt){.name = "ids", .dtype = DSV4Q_BT_I32, .ndim = 2, .shape = {S, 1}, .data = m->ids};
    m->in[2] = weight_bt("table", m->table, ROWS, HD, m->tcode, DSV4Q_BT_F8_E4M3, m->tscale, ROWS, HD / 32);
    m->in[3] = weight_bt("wkv", m->wkv, NW, HD, m->wcode, DSV4Q_BT_F8_E4M3, m->wscale, 1, 1);
    m->in[4] = weight_bt("q_weight", m->qw, HC, DIM, m->qraw, DSV4Q_BT_BF16, NULL, 0, 0);
    m->in[5] = weight_bt("k_weight", m->kw, HC, DIM, m->kraw, DSV4Q_BT_BF16, NULL, 0, 0);
    m->in[6] = (dsv4q_bt){.name = "text_mask", .dtype = DSV4Q_BT_I32, .ndim = 1, .shape = {S}, .data = m->mask};
    m->out = (dsv4q_bt){.name = "h_out", .dtype = DSV4Q_BT_F32, .ndim = 3, .shape = {S, HC, DIM}};
    m->p[0] = 1e-20;
    m->p[1] = 1;
    m->call = (dsv4q_bcall){
        .op = DSV4Q_OP_ENGRAM41, .nin = 7, .nout = 1, .in = m->in, .out = &m->out, .param = m->p, .nparam = 2};
}

static void hand_values(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_op_find("engram41"), DSV4Q_OP_ENGRAM41);
    static hand m;
    hand_setup(&m);
    const double want[S * HC * DIM] = {
        1.8046875,  0.1953125,   2.609375,  1.3984375,   -0.66015625, 1.6640625, 0.67578125, 0.1689453125,
        0.73046875, -0.73046875, 1.4609375, 0.365234375, 0.5,         -0.5,      1.0,        -2.75,
        0.5,        -2,          3,         0.25,        1,           1,         -1,         4, /* t2 = h */
        1.5,        0.75,        -4,        2,           -1,          0.5,       8,          1, /* t3 = h */
    };
    double o64[S * HC * DIM];
    float o32[S * HC * DIM];
    char err[256];
    void *v64[1] = {o64}, *v32[1] = {o32};
    uint64_t bs; /* the source profile: kv at linear_bf16, h' at resid_bf16 */
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    if (dsv4q_oracle_exec(64, bs, &m.call, v64, err, sizeof err)) fail_msg("%s", err);
    if (dsv4q_oracle_exec(32, bs, &m.call, v32, err, sizeof err)) fail_msg("%s", err);
    for (int i = 0; i < S * HC * DIM; i++) {
        if (o64[i] != want[i] || (double)o32[i] != want[i])
            print_error("element %d (t%d c%d d%d): f64 %.9g f32 %.9g want %.9g\n", i, i / (HC * DIM), i / DIM % HC,
                        i % DIM, o64[i], (double)o32[i], want[i]);
        assert_true(o64[i] == want[i]);
        assert_true((double)o32[i] == want[i]);
    }
    /* without the mask t3 is a text token like t0's copy 0 (same h but
     * copy 0 = [1.5, 0.75, -4, 2]: at least one element must move) */
    m.in[6].ndim = 0;
    if (dsv4q_oracle_exec(64, bs, &m.call, v64, err, sizeof err)) fail_msg("%s", err);
    int moved = 0;
    for (int d = 0; d < DIM; d++) moved += o64[3 * HC * DIM + d] != want[3 * HC * DIM + d];
    assert_true(moved > 0);
}

/* Refused with a message naming what is wrong, at both widths and by the
 * descriptor's check (cli/capi.c runs it on caller tensors). */
static void hostile(void **state)
{
    (void)state;
    static hand m;
    const dsv4q_op_info *o = dsv4q_op_get(DSV4Q_OP_ENGRAM41);
    assert_non_null(o->check);
    static const char *const what[] = {"wkv", "table", "ids", "eps", "text_mask", "q_weight", "7 inputs", "h must"};
    for (int q = 0; q < 8; q++) {
        hand_setup(&m);
        switch (q) {
        case 0: m.in[3].raw = NULL; break;         /* wkv without its FP8 codes */
        case 1: m.in[2].scale_shape[1] = 2; break; /* table scales not one per 32 */
        case 2: m.in[1].shape[0] = S - 1; break;   /* ids of another s */
        case 3: m.p[0] = 0; break;                 /* eps 0: rsqrt(0) on a zero key */
        case 4: m.in[6].shape[0] = S + 1; break;   /* mask of another s */
        case 5: m.in[4].shape[1] = DIM + 1; break; /* q_weight of another dim */
        case 6: m.call.nin = 6; break;             /* a call short of inputs */
        case 7: m.in[0].ndim = 2; break;           /* h not [s,hc,dim] */
        }
        char err[256] = "";
        double o64[S * HC * DIM];
        float o32[S * HC * DIM];
        void *v64[1] = {o64}, *v32[1] = {o32};
        assert_int_equal(dsv4q_oracle_exec(64, 0, &m.call, v64, err, sizeof err), -1);
        if (!strstr(err, what[q])) fail_msg("case %d: '%s' does not name %s", q, err, what[q]);
        err[0] = 0;
        assert_int_equal(dsv4q_oracle_exec(32, 0, &m.call, v32, err, sizeof err), -1);
        assert_non_null(strstr(err, what[q]));
        err[0] = 0;
        assert_int_equal(o->check(&m.call, err, sizeof err), -1);
        assert_non_null(strstr(err, what[q]));
    }
}

/* The gate dot of copy c of token t of a built case, recomputed here from
 * the case's decoded values (FP64; key BF16 as linear_bf16 stores it; the
 * act quant of e is exact, see the builder). */
static double case_dot(const dsv4q_case *c, long t, long cp)
{
    const long hc = c->in[0].shape[1], dim = c->in[0].shape[2], C = c->in[1].shape[1], hd = c->in[2].shape[1],
               rows = c->in[2].shape[0], K = C * hd;
    const float *h = (const float *)c->in[0].data + (t * hc + cp) * dim, *tab = c->in[2].data, *w = c->in[3].data,
                *qw = c->in[4].data, *kw = c->in[5].data;
    const int32_t *ids = c->in[1].data;
    double hu = 0, hh = 0, kk = 0;
    for (long d = 0; d < dim; d++) {
        double acc = 0;
        for (long k = 0; k < K; k++) {
            const long id = ids[t * C + k / hd];
            acc += (id >= 0 && id < rows ? tab[id * hd + k % hd] : 0) * (double)w[(cp * dim + d) * K + k];
        }
        const double key = dsv4q_bf16_to_f32(dsv4q_bf16_from_f32((float)acc));
        hu += (double)h[d] * qw[cp * dim + d] * kw[cp * dim + d] * key;
        hh += (double)h[d] * h[d];
        kk += key * key;
    }
    return hu / sqrt(hh / dim + 1e-20) / sqrt(kk / dim + 1e-20) / sqrt((double)dim);
}

static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "engram41(s=2,hc=2,dim=64,hd=32,ncols=2,rows=40)", err, sizeof err), 0);
    assert_string_equal(c.key, "engram41(s=2,hc=2,dim=64,hd=32,ncols=2,rows=40,recipe=normal,seed=1)");
    assert_int_equal(c.in[6].ndim, 0); /* all text */
    assert_true(c.param[0] == 1e-20 && c.param[1] == 1);
    assert_true(c.in[3].scale_shape[0] == 64 * 3 / 32 && c.in[3].scale_shape[1] == 2); /* 32x32 blocks */
    dsv4q_case_free(&c);
    assert_int_not_equal(dsv4q_case_build(&c, "engram41(hd=48)", err, sizeof err), 0);

    /* signzero: every copy's dot is +-(0.5 .. 6) * 1e-3, both signs seen */
    int pos = 0, neg = 0;
    for (int seed = 1; seed <= 3; seed++) {
        char key[160];
        snprintf(key, sizeof key, "engram41(s=2,hc=2,dim=1024,hd=32,ncols=2,rows=40,recipe=signzero,seed=%d)", seed);
        assert_int_equal(dsv4q_case_build(&c, key, err, sizeof err), 0);
        for (long t = 0; t < 2; t++)
            for (long cp = 0; cp < 2; cp++) {
                const double dot = case_dot(&c, t, cp);
                if (!(fabs(dot) > 5e-4 && fabs(dot) < 6e-3)) fail_msg("%s t%ld c%ld: dot %g", key, t, cp, dot);
                pos += dot > 0, neg += dot < 0;
            }
        dsv4q_case_free(&c);
    }
    assert_true(pos > 0 && neg > 0);

    /* nearzero: h tiny (mean h^2 < 1e-8 < 1e-6), odd tokens read tiny rows */
    assert_int_equal(
        dsv4q_case_build(&c, "engram41(s=2,hc=2,dim=64,hd=32,ncols=2,rows=40,recipe=nearzero,seed=2)", err, sizeof err),
        0);
    const float *h = c.in[0].data, *tab = c.in[2].data;
    const int32_t *ids = c.in[1].data;
    for (long t = 0; t < 2; t++) {
        double ms = 0, mt = 0;
        for (long i = 0; i < 2 * 64; i++) ms += (double)h[t * 128 + i] * h[t * 128 + i] / 128;
        assert_true(ms < 1e-8 && ms > 1e-18);
        for (long j = 0; j < 2; j++) {
            assert_true(t % 2 ? ids[t * 2 + j] >= 20 : ids[t * 2 + j] < 20);
            for (long k = 0; k < 32; k++) mt = fmax(mt, fabs(tab[ids[t * 2 + j] * 32 + k]));
        }
        assert_true(t % 2 ? mt < 1e-4 : mt > 1e-2);
    }
    dsv4q_case_free(&c);

    /* image: even tokens masked, their stream passes through unchanged */
    assert_int_equal(
        dsv4q_case_build(&c, "engram41(s=3,hc=2,dim=64,hd=32,ncols=2,rows=40,recipe=image,seed=1)", err, sizeof err),
        0);
    const int32_t *mk = c.in[6].data;
    assert_true(c.in[6].ndim == 1 && mk[0] == 0 && mk[1] == 1 && mk[2] == 0);
    double *y = malloc(sizeof(double) * 3 * 2 * 64);
    void *v[1] = {y};
    dsv4q_bcall call = {
        .op = DSV4Q_OP_ENGRAM41, .nin = 7, .nout = 1, .in = c.in, .out = c.out, .param = c.param, .nparam = 2};
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, v, err, sizeof err), 0);
    int moved = 0;
    for (long i = 0; i < 3 * 128; i++) {
        if (i / 128 != 1) assert_true(y[i] == (double)((const float *)c.in[0].data)[i]);
        else moved += y[i] != (double)((const float *)c.in[0].data)[i];
    }
    assert_true(moved > 0);
    free(y);
    dsv4q_case_free(&c);

    /* edges: the first token reads the table's edges and outside ids, the
     * last only outside ids */
    assert_int_equal(
        dsv4q_case_build(&c, "engram41(s=2,hc=2,dim=64,hd=32,ncols=8,rows=40,recipe=edges,seed=1)", err, sizeof err),
        0);
    ids = c.in[1].data;
    assert_true(ids[0] == 0 && ids[2] == 39 && ids[4] == -1 && ids[6] == 40);
    for (long j = 0; j < 8; j++) assert_true(ids[8 + j] < 0 || ids[8 + j] >= 40);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(hostile),
                                       cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
