/*
 * test_op_topk41.c - TOPK41 (V4.1's masked position top-k) on hand values
 * through dsv4q_oracle_exec at both widths, and its cases.
 *
 * T = 10, k = 3, B = 4 (blocks 0: positions 0-3, 1: 4-7, 2: 8-9). Scores
 * and the expected picks (ascending, -1 last), worked out by hand:
 *   row 0, clen 10: 1 5 2 0 3 3 4 1 0.5 6; no mask: 6, 5, 4 at 9, 1, 6 ->
 *     {1, 6, 9}; blocks {0, 2}: 6, 5, 2 at 9, 1, 2 -> {1, 2, 9};
 *   row 1, clen 6: 2 1 0 0 2 0.5 (then -inf): no mask 0, 4 (both 2), 1 ->
 *     {0, 1, 4}; blocks {1}: only 4 and 5 are finite -> {4, 5, -1};
 *   row 2, clen 6: 3 1 1 0 0 1: a tie-run of 1 at the cut (1, 2, 5): the
 *     lower positions -> {0, 1, 2}, with or without blocks {0, 1};
 *   row 3, clen 0: nothing -> {-1, -1, -1};
 *   row 4, clen 2: 4 3 -> {0, 1, -1} (blocks {0}).
 */
#include "tests/testutil.h"

#include <math.h>
#include "harness/ops/ops.h"

#define R 5
#define TT 10
#define K 3

static void run(int with_blocks, const int32_t want[R][K])
{
    const float I = -INFINITY;
    float sc[R][TT] = {
        {1, 5, 2, 0, 3, 3, 4, 1, 0.5f, 6}, {2, 1, 0, 0, 2, 0.5f, I, I, I, I}, {3, 1, 1, 0, 0, 1, I, I, I, I},
        {I, I, I, I, I, I, I, I, I, I},    {4, 3, I, I, I, I, I, I, I, I},
    };
    int32_t clen[R] = {10, 6, 6, 0, 2};
    int32_t blocks[R][2] = {{0, 2}, {1, -1}, {0, 1}, {-1, -1}, {0, -1}};
    dsv4q_bt in[3] = {
        {.name = "score", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {R, TT}, .data = sc},
        {.name = "clen", .dtype = DSV4Q_BT_I32, .ndim = 1, .shape = {R}, .data = clen},
        {.name = "blocks",
         .dtype = DSV4Q_BT_I32,
         .ndim = with_blocks ? 2 : 0,
         .shape = {R, 2},
         .data = with_blocks ? blocks : NULL},
    };
    dsv4q_bt out = {.name = "idx", .dtype = DSV4Q_BT_I32, .ndim = 2, .shape = {R, K}};
    const double p[2] = {K, 4};
    dsv4q_bcall call = {.op = DSV4Q_OP_TOPK41, .nin = 3, .nout = 1, .in = in, .out = &out, .param = p, .nparam = 2};
    int32_t o64[R * K], o32[R * K];
    char err[256];
    void *v64[1] = {o64}, *v32[1] = {o32};
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, v64, err, sizeof err), 0);
    assert_int_equal(dsv4q_oracle_exec(32, 0, &call, v32, err, sizeof err), 0);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < K; j++) {
            if (o64[r * K + j] != want[r][j] || o32[r * K + j] != want[r][j])
                print_error("blocks %d row %d slot %d: f64 %d f32 %d want %d\n", with_blocks, r, j, o64[r * K + j],
                            o32[r * K + j], want[r][j]);
            assert_int_equal(o64[r * K + j], want[r][j]);
            assert_int_equal(o32[r * K + j], want[r][j]);
        }
}

static void hand_values(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_op_find("topk41"), DSV4Q_OP_TOPK41);
    const int32_t plain[R][K] = {{1, 6, 9}, {0, 1, 4}, {0, 1, 2}, {-1, -1, -1}, {0, 1, -1}};
    const int32_t masked[R][K] = {{1, 2, 9}, {4, 5, -1}, {0, 1, 2}, {-1, -1, -1}, {0, 1, -1}};
    run(0, plain);
    run(1, masked);
}

/* The recipes: scores -inf at t >= clen; the candidate blocks hold the
 * newest block, ascending, -1 padded; the selection scores are the scores
 * masked by them; neginf leaves odd rows fewer than k finite positions. */
static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "topk41(T=100,k=20,topb=4)", err, sizeof err), 0);
    assert_string_equal(c.key, "topk41(rows=4,T=100,k=20,B=8,topb=4,recipe=normal,seed=1)");
    dsv4q_case_free(&c);
    static const char *const keys[] = {"topk41(rows=6,T=400,k=64,B=8,topb=16,recipe=partial,seed=3)",
                                       "topk41(rows=6,T=400,k=64,B=8,topb=16,recipe=neginf,seed=3)",
                                       "topk41(rows=6,T=400,k=64,B=8,topb=16,recipe=clen0,seed=3)"};
    for (int q = 0; q < 3; q++) {
        assert_int_equal(dsv4q_case_build(&c, keys[q], err, sizeof err), 0);
        const float *sc = c.in[0].data;
        const int32_t *cl = c.in[1].data, *bl = c.in[2].data;
        for (int r = 0; r < 6; r++) {
            for (long t = cl[r]; t < 400; t++) assert_true(sc[r * 400 + t] == -INFINITY);
            int newest = cl[r] == 0, finite = 0;
            for (int j = 0; j < 16; j++) {
                newest |= cl[r] > 0 && bl[r * 16 + j] == (cl[r] - 1) / 8;
                if (j && bl[r * 16 + j] >= 0) assert_true(bl[r * 16 + j] > bl[r * 16 + j - 1]);
            }
            assert_true(newest);
            for (long t = 0; t < 400; t++) finite += c.sel_scores[r * 400 + t] > -INFINITY;
            if (q == 0) assert_true(cl[r] % 8 != 0);
            if (q == 1 && r % 2) assert_true(finite < 64);
            if (q == 2 && r % 2 == 0) assert_int_equal(finite, 0);
        }
        dsv4q_case_free(&c);
    }
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
