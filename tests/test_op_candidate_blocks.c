/*
 * test_op_candidate_blocks.c - CANDIDATE_BLOCKS (V4.1's level-one top-k)
 * on hand values through dsv4q_oracle_exec at both widths, and its cases.
 *
 * T = 10, B = 4: blocks 0 (positions 0-3), 1 (4-7), 2 (8-9, the partial
 * last block); topb = 2. Per row (worked out by hand):
 *   row 0, clen 10: maxima 5, 4, 0.5; block 2 holds position 9, the newest:
 *     pinned, so it is kept although it scores lowest: {0, 2};
 *   row 1, clen 6: positions 6-9 are -inf; the newest block (6-1)/4 = 1 is
 *     pinned, block 0 (max 2) beats block 2 (-inf): {0, 1};
 *   row 2, clen 10: blocks 0 and 1 tie at 3 at the cut, block 2 pinned: the
 *     lower id wins: {0, 2};
 *   row 3, clen 0: nothing reachable, no newest block: {-1, -1};
 *   row 4, clen 3: only block 0 is reachable (pinned), the others are -inf
 *     and never kept: {0, -1}.
 */
#include "tests/testutil.h"

#include <math.h>
#include "harness/ops/ops.h"

#define R 5
#define TT 10

static void hand_values(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_op_find("candidate_blocks"), DSV4Q_OP_CANDIDATE_BLOCKS);
    const float I = -INFINITY;
    float sc[R][TT] = {
        {1, 5, 2, 0, 3, 3, 4, 1, 0.5f, 0.1f}, {2, 1, 0, 0, 2, 0.5f, I, I, I, I}, {3, 1, 0, 0, 0, 3, 1, 2, 0, 1},
        {I, I, I, I, I, I, I, I, I, I},       {1, 2, 3, I, I, I, I, I, I, I},
    };
    int32_t clen[R] = {10, 6, 10, 0, 3};
    const int32_t want[R][2] = {{0, 2}, {0, 1}, {0, 2}, {-1, -1}, {0, -1}};
    dsv4q_bt in[2] = {
        {.name = "score", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {R, TT}, .data = sc},
        {.name = "clen", .dtype = DSV4Q_BT_I32, .ndim = 1, .shape = {R}, .data = clen},
    };
    dsv4q_bt out = {.name = "blocks", .dtype = DSV4Q_BT_I32, .ndim = 2, .shape = {R, 2}};
    const double p[2] = {2, 4};
    dsv4q_bcall call = {
        .op = DSV4Q_OP_CANDIDATE_BLOCKS, .nin = 2, .nout = 1, .in = in, .out = &out, .param = p, .nparam = 2};
    int32_t b64[R * 2], b32[R * 2];
    char err[256];
    void *o64[1] = {b64}, *o32[1] = {b32};
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, o64, err, sizeof err), 0);
    assert_int_equal(dsv4q_oracle_exec(32, 0, &call, o32, err, sizeof err), 0);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 2; j++) {
            if (b64[r * 2 + j] != want[r][j] || b32[r * 2 + j] != want[r][j])
                print_error("row %d slot %d: f64 %d f32 %d want %d\n", r, j, b64[r * 2 + j], b32[r * 2 + j],
                            want[r][j]);
            assert_int_equal(b64[r * 2 + j], want[r][j]);
            assert_int_equal(b32[r * 2 + j], want[r][j]);
        }
}

/* The recipes: partial rows have a clen that is not a multiple of B and a
 * newest block scoring below every other finite block maximum; clen0 has
 * rows with clen 0 (all -inf); scores at t >= clen are -inf everywhere;
 * the selection scores are the block maxima with the newest pinned. */
static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "candidate_blocks(T=100)", err, sizeof err), 0);
    assert_string_equal(c.key, "candidate_blocks(rows=4,T=100,B=8,topb=64,recipe=normal,seed=1)");
    dsv4q_case_free(&c);
    static const char *const keys[] = {"candidate_blocks(rows=6,T=200,B=8,topb=8,recipe=partial,seed=3)",
                                       "candidate_blocks(rows=6,T=200,B=8,topb=8,recipe=clen0,seed=3)"};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dsv4q_case_build(&c, keys[k], err, sizeof err), 0);
        const float *sc = c.in[0].data;
        const int32_t *cl = c.in[1].data;
        const long nb = 25;
        for (int r = 0; r < 6; r++) {
            for (long t = cl[r]; t < 200; t++) assert_true(sc[r * 200 + t] == -INFINITY);
            if (k == 1 && r % 2 == 0) assert_int_equal(cl[r], 0);
            if (k == 0) {
                assert_true(cl[r] % 8 != 0);
                const long last = (cl[r] - 1) / 8;
                assert_true(c.sel_scores[r * nb + last] == INFINITY);
                double newest = -INFINITY, others = INFINITY;
                for (long t = last * 8; t < cl[r]; t++) newest = fmax(newest, sc[r * 200 + t]);
                for (long b = 0; b < last; b++) others = fmin(others, c.sel_scores[r * nb + b]);
                assert_true(newest < others);
            }
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
