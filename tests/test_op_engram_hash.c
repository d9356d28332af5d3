/*
 * test_op_engram_hash.c - ENGRAM_HASH (V4.1's Engram n-gram hash of one
 * layer) on hand values through dsv4q_oracle_exec at both widths, the
 * calls it refuses, its cases, and the exact rule that judges it.
 *
 * Hand case A: N = 3 (look-backs 0, 1, 2), 2 heads, primes {5, 7 | 11, 13}
 * (2-gram columns, then 3-gram), so offsets {0, 5, 12, 23}; mult {3, 5,
 * 11}; V = 10, pad = 1, start = 0, n = 5. ids of positions -2 .. 4:
 * {9, 9, 4, 7, -1, 2, 8} (the 9s lie before the sequence: never read; -1 at
 * position 2 is DEAD). tok[s] = the id at p - s unless blocked (E3).
 *   p=0: tok 4, pad, pad -> 12, 5, 11; 12^5 = 9: 9%5 = 4, 9%7 = 2 (+5 = 7);
 *        9^11 = 2: 2%11 = 2 (+12 = 14), 2%13 = 2 (+23 = 25) -> {4, 7, 14, 25}
 *   p=1: tok 7, 4, pad -> 21, 20, 11; 21^20 = 1: 1, 1+5 = 6; 1^11 = 10:
 *        10%11 = 10 (the prime's edge p-1, +12 = 22), 10%13 = 10 (+23 = 33)
 *        -> {1, 6, 22, 33}
 *   p=2: DEAD: every slot pad -> 3, 5, 11; 3^5 = 6: 6%5 = 1, 6%7 = 6
 *        (+5 = 11); 6^11 = 13: 13%11 = 2 (+12 = 14), 13%13 = 0 (the edge 0,
 *        +23 = 23) -> {1, 11, 14, 23}
 *   p=3: tok 2, then DEAD at p-1 blocks 1 and 2: 2, pad, pad -> 6, 5, 11;
 *        6^5 = 3: 3, 3+5 = 8; 3^11 = 8: 8+12 = 20, 8+23 = 31 -> {3, 8, 20, 31}
 *        (a kernel that pads only the DEAD slot reads 7 at p-2)
 *   p=4: tok 8, 2, then DEAD at p-2: pad -> 24, 10, 11; 24^10 = 18: 18%5 = 3,
 *        18%7 = 4 (+5 = 9); 18^11 = 25: 25%11 = 3 (+12 = 15), 25%13 = 12
 *        (+23 = 35) -> {3, 9, 15, 35}
 * Hand case B (negative rolls, the int64 wrap): N = 2, 1 head, prime 7.
 *   mult {-3, 1}, start 5, ids of positions 4..6 {2, 3, 4}:
 *   p=5: 3*-3 = -9, 2*1 = 2; -9 ^ 2 = -11 (...11110111 ^ 10 = ...11110101);
 *        floor_mod(-11, 7) = 3 (C's % gives -4) -> {3}
 *   p=6: -12 ^ 3 = -9 (...11110100 ^ 11 = ...11110111); floor_mod(-9, 7) = 5
 *        (C's %: -2) -> {5}
 *   mult {-3, INT64_MAX}, start 1, ids {2, 3}: 2 * (2^63 - 1) wraps to -2;
 *   -9 ^ -2 = 9 (the high ones cancel); 9 % 7 = 2 -> {2}
 * The Flash layout's primes are checked against the released config
 * (engram_num_embeddings[0] = 384006168, the sum of the first layer's 24
 * primes above 16e6; the first, 16000057, by trial division).
 */
#include "tests/testutil.h"

#include "gates/gates.h"
#include "harness/backend/backend.h"
#include "harness/measure/metrics.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"
#include "oracle/engram_hash.h"

/* One call: ids [T], primes [C], mult [N], params; out [n*C] at both widths
 * (equal), or the refusal's message in err (rc -1 at both widths). */
static int call(const int32_t *ids, long T, const int64_t *primes, long C, const int64_t *mult, long N, double start,
                double pad, double V, int32_t *out, char *err, size_t errlen)
{
    dsv4q_bt in[3] = {
        {.name = "ids", .dtype = DSV4Q_BT_I32, .ndim = 1, .shape = {T}, .data = (void *)ids},
        {.name = "primes", .dtype = DSV4Q_BT_I64, .ndim = 1, .shape = {C}, .data = (void *)primes},
        {.name = "mult", .dtype = DSV4Q_BT_I64, .ndim = 1, .shape = {N}, .data = (void *)mult},
    };
    const long n = T - N + 1 > 0 ? T - N + 1 : 0;
    dsv4q_bt o = {.name = "bucket", .dtype = DSV4Q_BT_I32, .ndim = 2, .shape = {n, C}};
    const double p[3] = {start, pad, V};
    dsv4q_bcall c = {.op = DSV4Q_OP_ENGRAM_HASH, .nin = 3, .nout = 1, .in = in, .out = &o, .param = p, .nparam = 3};
    int32_t o64[256], o32[256];
    for (int k = 0; k < 256; k++) o64[k] = o32[k] = -7;
    void *v64[1] = {o64}, *v32[1] = {o32};
    char e32[256] = "";
    const int r64 = dsv4q_oracle_exec(64, 0, &c, v64, err, errlen),
              r32 = dsv4q_oracle_exec(32, 0, &c, v32, e32, sizeof e32);
    assert_int_equal(r64, r32);
    if (r64) {
        assert_string_equal(err, e32);
        /* the check hook (caller tensors, cli/capi.c) refuses it alike */
        char e2[256];
        assert_int_equal(dsv4q_op_get(DSV4Q_OP_ENGRAM_HASH)->check(&c, e2, sizeof e2), -1);
        return -1;
    }
    for (long k = 0; k < n * C; k++) {
        assert_int_equal(o64[k], o32[k]);
        out[k] = o64[k];
    }
    return 0;
}

static void hand_values(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_op_find("engram_hash"), DSV4Q_OP_ENGRAM_HASH);
    char err[256];
    int32_t out[64];
    const int32_t ids[7] = {9, 9, 4, 7, -1, 2, 8};
    const int64_t pr[4] = {5, 7, 11, 13}, m[3] = {3, 5, 11};
    const int32_t want[5][4] = {{4, 7, 14, 25}, {1, 6, 22, 33}, {1, 11, 14, 23}, {3, 8, 20, 31}, {3, 9, 15, 35}};
    assert_int_equal(call(ids, 7, pr, 4, m, 3, 0, 1, 10, out, err, sizeof err), 0);
    for (int r = 0; r < 5; r++)
        for (int k = 0; k < 4; k++) {
            if (out[r * 4 + k] != want[r][k])
                print_error("A row %d col %d: %d want %d\n", r, k, out[r * 4 + k], want[r][k]);
            assert_int_equal(out[r * 4 + k], want[r][k]);
        }
    /* whatever the entries before the sequence start hold */
    const int32_t ids2[7] = {-1, 3, 4, 7, -1, 2, 8};
    assert_int_equal(call(ids2, 7, pr, 4, m, 3, 0, 1, 10, out, err, sizeof err), 0);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[7], 33);

    const int32_t idb[3] = {2, 3, 4};
    const int64_t p7[1] = {7}, mb[2] = {-3, 1}, mw[2] = {-3, INT64_MAX};
    assert_int_equal(call(idb, 3, p7, 1, mb, 2, 5, 0, 10, out, err, sizeof err), 0);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 5);
    assert_int_equal(call(idb, 2, p7, 1, mw, 2, 1, 0, 10, out, err, sizeof err), 0);
    assert_int_equal(out[0], 2);

    /* the oracle's own derivation agrees: case A through dsv4q_engram_hash_ctx */
    int64_t ctx[7], off[4] = {0, 5, 12, 23}, o[20];
    for (int j = 0; j < 7; j++) ctx[j] = ids[j];
    assert_int_equal(dsv4q_engram_hash_ctx(ctx, 0, 5, 3, 2, m, pr, off, 1, o, err, sizeof err), 0);
    for (int k = 0; k < 20; k++) assert_int_equal(o[k], want[k / 4][k % 4]);
}

static void expect_refused(int rc, const char *err, const char *part)
{
    assert_int_equal(rc, -1);
    if (!strstr(err, part)) fail_msg("message '%s' lacks '%s'", err, part);
}

/* Hostile calls: each refused with a message, never a crash. */
static void refusals(void **state)
{
    (void)state;
    char err[256];
    int32_t out[64];
    const int32_t ids[7] = {9, 9, 4, 7, -1, 2, 8};
    const int64_t pr[4] = {5, 7, 11, 13}, m[3] = {3, 5, 11};
    const int64_t pz[4] = {5, 0, 11, 13}, pn[4] = {5, 7, -11, 13}, big[4] = {INT32_MAX, 2, 3, 5};
    expect_refused(call(ids, 7, pz, 4, m, 3, 0, 1, 10, out, err, sizeof err), err, "primes[1] = 0");
    expect_refused(call(ids, 7, pn, 4, m, 3, 0, 1, 10, out, err, sizeof err), err, "primes[2] = -11");
    expect_refused(call(ids, 7, big, 4, m, 3, 0, 1, 10, out, err, sizeof err), err, "do not fit the I32");
    const int32_t far[7] = {9, 9, 4, 10, -1, 2, 8}, low[7] = {9, 9, 4, 7, -2, 2, 8};
    expect_refused(call(far, 7, pr, 4, m, 3, 0, 1, 10, out, err, sizeof err), err, "ids[3] = 10 outside");
    expect_refused(call(low, 7, pr, 4, m, 3, 0, 1, 10, out, err, sizeof err), err, "ids[4] = -2 outside");
    expect_refused(call(ids, 7, pr, 3, m, 3, 0, 1, 10, out, err, sizeof err), err, "primes has 3 entries");
    expect_refused(call(ids, 7, pr, 4, m, 1, 0, 1, 10, out, err, sizeof err), err, "max_ngram must be 2..");
    expect_refused(call(ids, 1, pr, 4, m, 3, 0, 1, 10, out, err, sizeof err), err, "fewer than the N-1");
    expect_refused(call(ids, 7, pr, 4, m, 3, -1, 1, 10, out, err, sizeof err), err, "start = -1");
    expect_refused(call(ids, 7, pr, 4, m, 3, 0.5, 1, 10, out, err, sizeof err), err, "start = 0.5");
    expect_refused(call(ids, 7, pr, 4, m, 3, 0, 10, 10, out, err, sizeof err), err, "pad = 10");
    expect_refused(call(ids, 7, pr, 4, m, 3, 0, 1, 0, out, err, sizeof err), err, "V = 0");
    expect_refused(call(ids, 7, pr, 4, m, 3, 0, 1, 3e9, out, err, sizeof err), err, "V = 3e+09");

    /* a wrong dtype or output shape */
    dsv4q_bt in[3] = {
        {.name = "ids", .dtype = DSV4Q_BT_I32, .ndim = 1, .shape = {7}, .data = (void *)ids},
        {.name = "primes", .dtype = DSV4Q_BT_I32, .ndim = 1, .shape = {4}, .data = (void *)pr},
        {.name = "mult", .dtype = DSV4Q_BT_I64, .ndim = 1, .shape = {3}, .data = (void *)m},
    };
    dsv4q_bt o = {.name = "bucket", .dtype = DSV4Q_BT_I32, .ndim = 2, .shape = {5, 4}};
    const double p[3] = {0, 1, 10};
    dsv4q_bcall c = {.op = DSV4Q_OP_ENGRAM_HASH, .nin = 3, .nout = 1, .in = in, .out = &o, .param = p, .nparam = 3};
    void *v[1] = {out};
    expect_refused(dsv4q_oracle_exec(64, 0, &c, v, err, sizeof err), err, "must be 1-D I64");
    in[1].dtype = DSV4Q_BT_I64;
    o.shape[0] = 4;
    expect_refused(dsv4q_oracle_exec(64, 0, &c, v, err, sizeof err), err, "bucket must be [5, 4]");
    o.shape[0] = 5;
    in[0].dtype = DSV4Q_BT_F32;
    expect_refused(dsv4q_oracle_exec(32, 0, &c, v, err, sizeof err), err, "ids must be a 1-D I32");
    in[0].dtype = DSV4Q_BT_I32;
    c.nparam = 2;
    expect_refused(dsv4q_oracle_exec(64, 0, &c, v, err, sizeof err), err, "3 params");
    c.nparam = 3;
    assert_int_equal(dsv4q_oracle_exec(64, 0, &c, v, err, sizeof err), 0);
    /* cpu-ref refuses the same bad call through the ABI */
    const dsv4q_backend_v1 *b = dsv4q_backend_builtin("cpu-ref");
    if (b) {
        void *ctx = NULL;
        assert_int_equal(b->init(&ctx, err, sizeof err), 0);
        o.data = out;
        assert_int_equal(b->run(ctx, &c, err, sizeof err), DSV4Q_BACKEND_OK);
        in[1].data = (void *)pz;
        assert_int_equal(b->run(ctx, &c, err, sizeof err), DSV4Q_BACKEND_ERROR);
        assert_non_null(strstr(err, "prime 1 is 0"));
        in[1].data = (void *)pr;
        in[0].data = (void *)far;
        assert_int_equal(b->run(ctx, &c, err, sizeof err), DSV4Q_BACKEND_ERROR);
        assert_non_null(strstr(err, "id 3 is 10"));
        if (b->fini) b->fini(ctx);
    }
}

/* The recipes do what their names say. */
static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "engram_hash(n=16)", err, sizeof err), 0);
    assert_string_equal(c.key, "engram_hash(n=16,N=4,H=8,evs=16000000,V=129280,layer=1,start=0,recipe=normal,seed=1)");
    /* E1: the first primes above 16e6 (16000057 is the first: 16e6 + 57) */
    const int64_t *pr = c.in[1].data;
    assert_int_equal(c.in[1].shape[0], 24);
    assert_int_equal(pr[0], 16000057);
    for (int k = 1; k < 8; k++) assert_true(pr[k] > pr[k - 1]);
    int64_t sum = 0;   /* the released Flash config's engram_num_embeddings[0] */
    for (int k = 0; k < 24; k++) sum += pr[k];
    assert_int_equal(sum, 384006168);
    const int32_t *ids = c.in[0].data;
    for (int j = 0; j < 3; j++) assert_true(ids[j] >= 0);   /* before the start: valid ids, never DEAD */
    dsv4q_case_free(&c);

    struct {
        const char *key;
        int dead, edge, neg, big;
    } want[] = {
        {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=1,start=2,recipe=barrier,seed=4)", 1, 0, 0, 0},
        {"engram_hash(n=128,N=4,H=8,evs=50,V=129280,layer=1,start=0,recipe=edge,seed=4)", 0, 1, 0, 0},
        {"engram_hash(n=16,N=4,H=8,evs=16000000,V=129280,layer=1,start=1000,recipe=edge,seed=4)", 0, 1, 0, 0},
        {"engram_hash(n=128,N=4,H=8,evs=50,V=129280,layer=1,start=7,recipe=negroll,seed=4)", 0, 0, 1, 0},
        {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=1,start=1000,recipe=bigids,seed=4)", 0, 0, 0, 1},
    };
    for (size_t q = 0; q < sizeof want / sizeof want[0]; q++) {
        assert_int_equal(dsv4q_case_build(&c, want[q].key, err, sizeof err), 0);
        const long T = (long)c.in[0].shape[0], C = (long)c.in[1].shape[0], n = T - 3;
        ids = c.in[0].data;
        pr = c.in[1].data;
        const int64_t *m = c.in[2].data;
        int32_t out[128 * 24];
        void *v[1] = {out};
        dsv4q_bt o[1];
        dsv4q_bcall call;
        dsv4q_case_call(&c, o, 0, &call);
        assert_int_equal(dsv4q_oracle_exec(64, 0, &call, v, err, sizeof err), 0);
        long dead = 0, edge = 0, neg = 0, big = 0;
        for (long j = 1; j < T; j++)
            dead += ids[j] == -1 && ids[j - 1] >= 0 && j < T - 2;   /* a barrier to look through */
        for (long i = 0; i < n; i++)
            for (long k = 0, off = 0; k < C; off += (long)pr[k], k++)
                edge += out[i * C + k] - off == 0 || out[i * C + k] - off == pr[k] - 1;
        for (int s = 0; s < 4; s++) neg += m[s] < 0;
        for (long j = 0; j < T; j++) big += ids[j] >= 129280 - 16;
        printf("  %-92s DEAD barriers %ld, edge ids %ld, negative multipliers %ld, ids near V %ld\n", c.key, dead, edge,
               neg, big);
        if (want[q].dead) assert_true(dead >= 3 && ids[2] == -1);   /* one just before the call */
        if (want[q].edge) assert_true(edge >= n / 8);
        if (want[q].neg) assert_true(neg >= 1);
        if (want[q].big) assert_int_equal(big, T);
        dsv4q_case_free(&c);
    }
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

/* The exact rule: the count and first index (dsv4q_metrics_exact), and a
 * qualify verdict that fails on one differing id even where the gate file
 * leaves flips ungated. */
static void exact_rule(void **state)
{
    (void)state;
    const int32_t a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 2, 9, 4, 0, 6};
    dsv4q_mset m;
    assert_int_equal(dsv4q_metrics_exact(&m, a, a, 6), -1);
    assert_true(m.v[DSV4Q_M_FLIPS] == 0);
    assert_int_equal(dsv4q_metrics_exact(&m, b, a, 6), 2);
    assert_true(m.v[DSV4Q_M_FLIPS] == 2);
    assert_true(isnan(m.v[DSV4Q_M_JACCARD_DIST]));
    assert_true(dsv4q_op_exact(DSV4Q_OP_ENGRAM_HASH, 0));
    assert_false(dsv4q_op_exact(DSV4Q_OP_TOPK41, 0));

    char err[1024];
    dsv4q_gates g;
    if (dsv4q_gates_load(&g, "gates/default.json", err, sizeof err)) fail_msg("%s", err);
    dsv4q_case c;
    assert_int_equal(dsv4q_case_build(&c, "engram_hash(n=8,evs=50,recipe=barrier)", err, sizeof err), 0);
    int32_t cand[8 * 24];
    void *v[1] = {cand};
    dsv4q_bt o[1];
    dsv4q_bcall call;
    dsv4q_case_call(&c, o, 0, &call);
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, v, err, sizeof err), 0);
    void *out[2][DSV4Q_OPS_MAX_T] = {{cand}, {cand}};
    int32_t dt[2][DSV4Q_OPS_MAX_T] = {{DSV4Q_BT_I32}, {DSV4Q_BT_I32}};
    dsv4q_qcase *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(dsv4q_qualify_measure(&c, 0, out, dt, &g, r, NULL, err, sizeof err), 0);
    assert_int_equal(r->verdict, DSV4Q_V_PASS);
    cand[3 * 24 + 5] ^= 1;   /* one id off: row 3, column 5 */
    cand[7 * 24 + 1] += 1;
    g.op[DSV4Q_OP_ENGRAM_HASH][DSV4Q_M_FLIPS].on = 0;
    g.op[DSV4Q_OP_ENGRAM_HASH][DSV4Q_M_RERUN].on = 0;
    assert_int_equal(dsv4q_qualify_measure(&c, 0, out, dt, &g, r, NULL, err, sizeof err), 0);
    assert_int_equal(r->verdict, DSV4Q_V_FAIL);
    assert_true(r->m[0].v[DSV4Q_M_FLIPS] == 2);
    print_message("%s\n", r->msg);
    assert_non_null(strstr(r->msg, "2 of 192 elements differ"));
    assert_non_null(strstr(r->msg, "first at index 77 [3,5]"));
    free(r);
    dsv4q_case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(refusals),
                                       cmocka_unit_test(cases_build), cmocka_unit_test(exact_rule)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
