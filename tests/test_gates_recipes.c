/*
 * test_gates_recipes.c - the input-space coverage of the case table (issue
 * 19): the recipes that make deviations visible (full FP32 mantissas,
 * whole masked 64-column blocks, crowded BF16 top-k scores), optional key
 * parameters, both suites carrying every recipe, `qualify --seeds`, the
 * row-floored ULP of the attention and rope outputs, and a plugin that
 * keeps its KV cache in F16 failing exactly the full-mantissa attention
 * cases.
 *
 * Expected properties are restated from the recipe descriptions
 * (the case builders of harness/ops/<name>.c and harness/cases/gen.c, docs/gates.md) and counted here
 * independently; the row-floored ULP expectations are hand-computed.
 */
#include "tests/testutil.h"

#include <math.h>

#include "gates/gates.h"
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/cases/cases.h"
#include "harness/qualify/qualify.h"
#include "oracle/formats.h"

#define PLUG(name) DSV4Q_TEST_BUILD "/plugins/" name ".so"

static dsv4q_gates G;

static int setup_gates(void **state)
{
    (void)state;
    char err[1024];
    if (dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int low16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0xFFFF) != 0;
}

/* ---- optional key parameters -------------------------------------------- */

static void test_optional_params(void **state)
{
    (void)state;
    char err[512], k[DSV4Q_CASE_KEY_MAX], k2[DSV4Q_CASE_KEY_MAX];
    /* the default is not written: old keys (and their bytes) are unchanged */
    assert_int_equal(dsv4q_case_canon("rmsnorm(eps=1e-6)", k, sizeof k, err, sizeof err), 0);
    assert_string_equal(k, "rmsnorm(rows=2,d=4096,recipe=normal,seed=1)");
    assert_int_equal(dsv4q_case_canon("rmsnorm(eps=0.000001)", k, sizeof k, err, sizeof err), 0);
    assert_string_equal(k, "rmsnorm(rows=2,d=4096,recipe=normal,seed=1)");
    /* another value is, before recipe and seed; canon is a fixed point */
    assert_int_equal(dsv4q_case_canon("rmsnorm(seed=2,eps=1e-5)", k, sizeof k, err, sizeof err), 0);
    assert_string_equal(k, "rmsnorm(rows=2,d=4096,eps=1e-5,recipe=normal,seed=2)");
    assert_int_equal(dsv4q_case_canon(k, k2, sizeof k2, err, sizeof err), 0);
    assert_string_equal(k, k2);
    dsv4q_case c;
    assert_int_equal(dsv4q_case_build(&c, "rmsnorm(rows=1,d=64,eps=1e-5)", err, sizeof err), 0);
    assert_true(c.param[0] == 1e-5);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "hc_pre(s=1,d=64,iters=3,hceps=1e-5)", err, sizeof err), 0);
    assert_true(c.param[1] == 1e-5 && c.param[2] == 3);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "hc_pre(s=1,d=64)", err, sizeof err), 0);
    assert_true(c.param[1] == 1e-6 && c.param[2] == 20);   /* the published configs */
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "rope(rows=2,factor=40)", err, sizeof err), 0);
    assert_true(c.param[2] == 40);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "hc_pre(s=1,d=64,iters=0)", err, sizeof err), -1);
    assert_non_null(strstr(err, "iters"));
    assert_int_equal(dsv4q_case_build(&c, "rmsnorm(eps=abc)", err, sizeof err), -1);
    assert_non_null(strstr(err, "eps"));
}

/* ---- both suites carry every recipe ----------------------------------- */

static void test_suites_carry_every_recipe(void **state)
{
    (void)state;
    char seen[2][DSV4Q_OP_COUNT][8][16];
    int nseen[2][DSV4Q_OP_COUNT] = {{0}};
    int scaletrap[2][3] = {{0}};   /* act_quant block 32, 64, 128 */
    for (int i = 0; i < dsv4q_case_count(); i++) {
        const dsv4q_case_entry *e = dsv4q_case_at(i);
        char op[32], rec[16];
        snprintf(op, sizeof op, "%.*s", (int)strcspn(e->key, "("), e->key);
        const char *r = strstr(e->key, "recipe=");
        assert_non_null(r);
        snprintf(rec, sizeof rec, "%.*s", (int)strcspn(r + 7, ",)"), r + 7);
        int o = dsv4q_op_find(op);
        for (int s = 0; s < 2; s++) {
            if (!(e->sets & (s ? DSV4Q_CASE_SET_PRO : DSV4Q_CASE_SET_FLASH))) continue;
            int have = 0;
            for (int j = 0; j < nseen[s][o]; j++) have |= !strcmp(seen[s][o][j], rec);
            if (!have && nseen[s][o] < 8) snprintf(seen[s][o][nseen[s][o]++], 16, "%s", rec);
            if (o == DSV4Q_OP_ACT_QUANT && !strcmp(rec, "scaletrap"))
                for (int b = 0; b < 3; b++) {
                    char bs[16];
                    snprintf(bs, sizeof bs, "block=%d,", 32 << b);
                    scaletrap[s][b] |= strstr(e->key, bs) != NULL;
                }
        }
    }
    for (int o = 0; o < DSV4Q_OP_COUNT; o++)
        for (int s = 0; s < 2; s++)
            for (int j = 0; j < nseen[s][o]; j++) {
                int other = 0;
                for (int u = 0; u < nseen[!s][o]; u++) other |= !strcmp(seen[!s][o][u], seen[s][o][j]);
                if (!other)
                    fail_msg("%s recipe=%s is in the %s suite only", dsv4q_op_get(o)->name, seen[s][o][j],
                             s ? "Pro" : "Flash");
            }
    for (int s = 0; s < 2; s++)
        for (int b = 0; b < 3; b++)
            if (!scaletrap[s][b]) fail_msg("act_quant block %d has no scaletrap case in suite %d", 32 << b, s);
}

/* ---- recipes ------------------------------------------------------------ */

/* f32: KV rows, queries and sinks carry bits BF16 drops; normal: none. */
static void test_recipe_f32(void **state)
{
    (void)state;
    char err[512];
    static const char *const keys[2] = {"sparse_attn(s=1,H=4,D=64,win=64,sel=64,recipe=f32)",
                                        "window_attn_decode(H=4,D=64,win=64,p=100,sel=64,recipe=f32)"};
    for (int k = 0; k < 2; k++) {
        dsv4q_case c;
        assert_int_equal(dsv4q_case_build(&c, keys[k], err, sizeof err), 0);
        for (int t = 0; t < c.nin; t++) {
            if (c.in[t].dtype != DSV4Q_BT_F32 || !c.in[t].ndim) continue;
            long n = (long)dsv4q_bt_numel(&c.in[t]), wide = 0;
            for (long i = 0; i < n; i++) wide += low16(((const float *)c.in[t].data)[i]);
            if (wide * 2 < n) fail_msg("%s: input %s: only %ld of %ld values carry F32 bits", keys[k], c.in[t].name, wide, n);
        }
        dsv4q_case_free(&c);
    }
    dsv4q_case c;
    assert_int_equal(dsv4q_case_build(&c, "sparse_attn(s=1,H=4,D=64,win=64,sel=64,recipe=normal)", err, sizeof err), 0);
    for (long i = 0; i < (long)dsv4q_bt_numel(&c.in[1]); i++) assert_false(low16(((const float *)c.in[1].data)[i]));
    dsv4q_case_free(&c);
}

static int col_masked(int32_t v, long N) { return v < 0 || v >= N; }

/* blocks: query 0 loses the first (ring) block and the last, query 1 the
 * middle block, query 2 all blocks but one; the other columns live. */
static void test_recipe_blocks(void **state)
{
    (void)state;
    char err[512];
    dsv4q_case c;
    assert_int_equal(dsv4q_case_build(&c, "sparse_attn(s=3,H=2,D=64,win=128,sel=512,recipe=blocks)", err, sizeof err), 0);
    const long ncols = 640, N = 128 + 1024, nb = 10;
    assert_int_equal(c.in[2].shape[1], ncols);
    const int32_t *idx = c.in[2].data;
    for (long q = 0; q < 3; q++) {
        int full_masked[10] = {0}, nfull = 0;
        for (long b = 0; b < nb; b++) {
            long m = 0;
            for (long j = b * 64; j < b * 64 + 64; j++) m += col_masked(idx[q * ncols + j], N);
            assert_true(m == 0 || m == 64);   /* whole blocks or nothing */
            full_masked[b] = m == 64;
            nfull += m == 64;
        }
        if (q == 0) assert_true(full_masked[0] && full_masked[9] && nfull == 2);
        if (q == 1) assert_true(full_masked[5] && nfull == 1);
        if (q == 2) assert_true(nfull == 9 && full_masked[0]);   /* the live block is never the first */
    }
    dsv4q_case_free(&c);
    /* window decode: whole cidx blocks (the first and the last) */
    assert_int_equal(dsv4q_case_build(&c, "window_attn_decode(H=2,D=64,win=128,p=63,sel=512,recipe=blocks)", err,
                                      sizeof err), 0);
    const int32_t *ci = c.in[4].data;
    for (long j = 0; j < 512; j++) {
        int want = j < 64 || j >= 448;
        assert_int_equal(col_masked(ci[j], 1024), want);
    }
    dsv4q_case_free(&c);
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* crowd: row 0 in one binade on the BF16 grid (<= 128 codes), the k-th
 * score inside a run of exact ties of hundreds; row 1 the cut inside the
 * exact zeros, the causal eighth -inf. */
static void test_recipe_crowd(void **state)
{
    (void)state;
    char err[512];
    dsv4q_case c;
    const long T = 65536, k = 512;
    assert_int_equal(dsv4q_case_build(&c, "topk(rows=2,T=65536,k=512,recipe=crowd)", err, sizeof err), 0);
    float *v = malloc(sizeof(float) * (size_t)T);
    assert_non_null(v);
    memcpy(v, c.in[0].data, sizeof(float) * (size_t)T);
    qsort(v, (size_t)T, sizeof *v, cmp_desc);
    long distinct = 1, run = 0;
    for (long t = 1; t < T; t++) distinct += v[t] != v[t - 1];
    for (long t = 0; t < T; t++) run += v[t] == v[k - 1];
    assert_true(v[0] < 4 && v[T - 1] >= 2);
    assert_true(distinct <= 128);
    assert_true(v[k] == v[k - 1] && run >= 100);
    memcpy(v, (const float *)c.in[0].data + T, sizeof(float) * (size_t)T);
    long pos = 0, zero = 0, ninf = 0;
    for (long t = 0; t < T; t++) {
        pos += v[t] > 0;
        zero += v[t] == 0;
        ninf += v[t] == -INFINITY;
    }
    assert_true(pos > 0 && pos < k && zero > 10 * k);
    assert_int_equal(ninf, T / 8);
    free(v);
    dsv4q_case_free(&c);
}

/* ---- seeds -------------------------------------------------------------- */

static void test_seeds(void **state)
{
    (void)state;
    char err[512];
    long lo, hi;
    assert_int_equal(dsv4q_qualify_parse_seeds("1-8", &lo, &hi, err, sizeof err), 0);
    assert_true(lo == 1 && hi == 8);
    assert_int_equal(dsv4q_qualify_parse_seeds("5", &lo, &hi, err, sizeof err), 0);
    assert_true(lo == 5 && hi == 5);
    static const char *const bad[] = {"0-3", "5-3", "x", "1-", "-2", "1-2x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dsv4q_qualify_parse_seeds(bad[i], &lo, &hi, err, sizeof err), -1);
        assert_non_null(strstr(err, "--seeds"));
    }
    /* a case once per seed, each with its own inputs */
    const char *keys[] = {"rmsnorm(rows=1,d=64,eps=1e-5)", NULL};
    const char *spec[1] = {"oracle-f32"};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = {.gates = &G, .keys = keys, .seed_lo = 3, .seed_hi = 5, .iso = {60, 0}, .quiet = 1};
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_int_equal(q.ncases, 3);
    assert_string_equal(q.cases[0].key, "rmsnorm(rows=1,d=64,eps=1e-5,recipe=normal,seed=3)");
    assert_string_equal(q.cases[2].key, "rmsnorm(rows=1,d=64,eps=1e-5,recipe=normal,seed=5)");
    assert_int_equal(dsv4q_qualify_status(&q), 0);
    dsv4q_qualify_free(&q);
    /* over the table: count x seeds */
    o.keys = NULL;
    o.sets = DSV4Q_CASE_SET_FLASH;
    o.ops = DSV4Q_CAP(DSV4Q_OP_HADAMARD);
    o.seed_lo = 1;
    o.seed_hi = 2;
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    int nh = 0;
    for (int i = 0; i < dsv4q_case_count(); i++)
        nh += (dsv4q_case_at(i)->sets & DSV4Q_CASE_SET_FLASH) && !strncmp(dsv4q_case_at(i)->key, "hadamard(", 9);
    assert_int_equal(q.ncases, 2 * nh);
    assert_non_null(strstr(q.cases[nh].key, ",seed=2)"));
    dsv4q_qualify_free(&q);
}

/* ---- row-floored ULP ---------------------------------------------------- */

/* A reference row of 256 values of size ~1.5 with one element near a
 * cancellation zero (3e-6). The correct kernel stores every value in BF16
 * and lands on the other side of zero there (-2e-6: an absolute error of
 * 5e-6, a few FP32 roundings of the row's terms): plain BF16 ULPs count
 * the ~2e4 codes between, the row floor counts 5e-6 / ulp(1.5) = 5e-6 /
 * 2^-7 ~ 6e-4. Its level (the FP32 instance, no flip) is 0.5 ulp: the
 * gates (rope and hc_pre 4 * 0.5 + 2 = 4, sparse_attn 8 * 0.5 + 4 = 8)
 * pass it. A
 * wrong kernel (0.15 at that element: 19 ulps of the row, or 16 ulps off
 * at an ordinary element) still fails both. */
static void test_rowfloor_ulp(void **state)
{
    (void)state;
    assert_true(dsv4q_op_ulp_rowfloor(DSV4Q_OP_SPARSE_ATTN, 0));
    assert_true(dsv4q_op_ulp_rowfloor(DSV4Q_OP_WINDOW_ATTN_DECODE, 0));
    assert_false(dsv4q_op_ulp_rowfloor(DSV4Q_OP_WINDOW_ATTN_DECODE, 1));   /* ring_out: a copy */
    assert_true(dsv4q_op_ulp_rowfloor(DSV4Q_OP_ROPE, 0));
    assert_true(dsv4q_op_ulp_rowfloor(DSV4Q_OP_HC_PRE, 0));       /* y = sum_j pre_j X_j */
    assert_true(dsv4q_op_ulp_rowfloor(DSV4Q_OP_HC_PRE41, 0));
    assert_false(dsv4q_op_ulp_rowfloor(DSV4Q_OP_HC_PRE, 1));      /* post: no cancellation */
    assert_false(dsv4q_op_ulp_rowfloor(DSV4Q_OP_ACT_QUANT, 0));           /* never the quantizers */
    assert_false(dsv4q_op_ulp_rowfloor(DSV4Q_OP_FP4_QUANT, 0));
    enum { n = 256 };
    double b[n], lvl[n], good[n], bad1[n], bad2[n];
    for (int i = 0; i < n; i++) b[i] = 1 + i / 256.0 + 1.0 / 3000.0;   /* off the BF16 grid */
    b[7] = 3e-6;
    for (int i = 0; i < n; i++) lvl[i] = good[i] = bad1[i] = bad2[i] = dsv4q_bf16_decode(dsv4q_bf16_encode(b[i]));
    good[7] = dsv4q_bf16_decode(dsv4q_bf16_encode(-2e-6));
    bad1[7] = 0.15;
    bad2[100] += 16 * 0x1p-7;
    const int ops[3] = {DSV4Q_OP_SPARSE_ATTN, DSV4Q_OP_ROPE, DSV4Q_OP_HC_PRE};
    for (int k = 0; k < 3; k++) {
        const dsv4q_gate_rule *rule = &G.op[ops[k]][DSV4Q_M_ULP_MAX];
        assert_true(rule->on);
        dsv4q_mset ml, mg, m1, m2, plain;
        dsv4q_metrics_float(&ml, lvl, b, n, n, DSV4Q_BT_BF16, 1);
        dsv4q_metrics_float(&mg, good, b, n, n, DSV4Q_BT_BF16, 1);
        dsv4q_metrics_float(&m1, bad1, b, n, n, DSV4Q_BT_BF16, 1);
        dsv4q_metrics_float(&m2, bad2, b, n, n, DSV4Q_BT_BF16, 1);
        dsv4q_metrics_float(&plain, good, b, n, n, DSV4Q_BT_BF16, 0);
        double L = ml.v[DSV4Q_M_ULP_MAX];
        assert_true(L <= 0.5);
        assert_true(plain.v[DSV4Q_M_ULP_MAX] > 1e4);   /* what the plain count would say */
        assert_true(mg.v[DSV4Q_M_ULP_MAX] <= 0.5);
        assert_true(dsv4q_judge(rule, mg.v[DSV4Q_M_ULP_MAX], L, DSV4Q_BT_BF16).pass);
        assert_true(m1.v[DSV4Q_M_ULP_MAX] > 19);
        assert_false(dsv4q_judge(rule, m1.v[DSV4Q_M_ULP_MAX], L, DSV4Q_BT_BF16).pass);
        assert_true(m2.v[DSV4Q_M_ULP_MAX] >= 15.5);
        assert_false(dsv4q_judge(rule, m2.v[DSV4Q_M_ULP_MAX], L, DSV4Q_BT_BF16).pass);
    }
}

/* ---- the F16 KV cache plugin -------------------------------------------- */

/* tests/backends/kv_f16.c: correct attention with an undeclared F16 KV
 * cache. It passes every BF16-valued attention case (F16 holds those
 * values exactly) and fails every full-mantissa one, on nrms. */
static void test_kv_f16_fails_f32_attention(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("kv_f16")};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = {.gates = &G, .sets = DSV4Q_CASE_SET_FLASH,
                         .ops = DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) | DSV4Q_CAP(DSV4Q_OP_WINDOW_ATTN_DECODE),
                         .iso = {120, 0}, .quiet = 1};
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_false(q.load_failed);
    int fails = 0;
    for (int i = 0; i < q.ncases; i++) {
        const dsv4q_qcase *r = &q.cases[i];
        const int full = strstr(r->key, "recipe=f32") != NULL;
        if (full) {
            if (r->verdict != DSV4Q_V_FAIL) fail_msg("%s: %s, expected FAIL", r->key, dsv4q_verdict_name(r->verdict));
            assert_false(r->row[DSV4Q_M_NRMS].pass);
            fails++;
        } else if (r->verdict != DSV4Q_V_PASS) {
            fail_msg("%s: %s %s, expected pass", r->key, dsv4q_verdict_name(r->verdict), r->msg);
        }
    }
    assert_true(fails >= 3);
    dsv4q_qualify_free(&q);
}

/* CI runs the Flash and V4.1 Flash suites at 3 seeds: seed 1 is
 * tests/test_qualify.c (oracle-f32) and tests/test_qualify_mutants.c
 * (cpu-ref and the mutants); here cpu-ref and oracle-f32 pass every case
 * of both at seeds 2 and 3 (one pass: inputs and references built once for
 * both). */
static void test_flash_seeds_2_3(void **state)
{
    (void)state;
    if (!dsv4q_backend_builtin("cpu-ref")) skip();
    char err[1024];
    const char *spec[2] = {"oracle-f32", "cpu-ref"};
    dsv4q_qualify_result q[2];
    const unsigned sets = DSV4Q_CASE_SET_FLASH | DSV4Q_CASE_SET_FLASH41;
    dsv4q_qualify_opts o = {.gates = &G, .sets = sets, .seed_lo = 2, .seed_hi = 3, .iso = {300, 0}, .quiet = 1};
    assert_int_equal(dsv4q_qualify(spec, 2, &o, q, err, sizeof err), 0);
    int nflash = 0;
    for (int i = 0; i < dsv4q_case_count(); i++) nflash += (dsv4q_case_at(i)->sets & sets) != 0;
    for (int b = 0; b < 2; b++) {
        assert_false(q[b].load_failed);
        assert_int_equal(q[b].ncases, 2 * nflash);
        for (int i = 0; i < q[b].ncases; i++)
            if (q[b].cases[i].verdict != DSV4Q_V_PASS)
                fail_msg("%s: %s: %s %s", spec[b], q[b].cases[i].key, dsv4q_verdict_name(q[b].cases[i].verdict),
                         q[b].cases[i].msg);
        dsv4q_qualify_free(&q[b]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optional_params),
        cmocka_unit_test(test_suites_carry_every_recipe),
        cmocka_unit_test(test_recipe_f32),
        cmocka_unit_test(test_recipe_blocks),
        cmocka_unit_test(test_recipe_crowd),
        cmocka_unit_test(test_seeds),
        cmocka_unit_test(test_rowfloor_ulp),
        cmocka_unit_test(test_kv_f16_fails_f32_attention),
        cmocka_unit_test(test_flash_seeds_2_3),
    };
    return cmocka_run_group_tests(tests, setup_gates, NULL);
}
