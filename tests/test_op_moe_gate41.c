/*
 * test_op_moe_gate41.c - MOE_GATE41 (the V4.1 router) on hand values
 * through dsv4q_oracle_exec at both widths, and its cases' keys.
 *
 * x is one-hot (token t reads column t of W), so the logits are W's
 * entries; with sqrtsoftplus and z / gate_temp > 20 the score is
 * sqrt(z / gate_temp) exactly (softplus's threshold), so every expected
 * weight below is worked out by hand:
 *   gate_temp 2, route_scale 1.5;
 *   token 0: z/T = 25, 36, 21, 36 -> scores 5, 6, 4.58, 6: experts 1 and 3
 *     tie; k = 2 takes both, w = 6/12 * 1.5 = 0.75 each (norm); k = 1 takes
 *     expert 1 (the lower id), w = 6 * 1.5 = 9 (no renorm at k = 1);
 *   token 1: z/T = 49, 25, 30.25, 21 -> 7, 5, 5.5, 4.58: k = 2 takes 0 and
 *     2, w = 7/12.5 * 1.5 = 0.84 and 5.5/12.5 * 1.5 = 0.66 (norm), 10.5 and
 *     8.25 (norm 0);
 *   token 1 with bias 2.1 on expert 1: 5 + 2.1 > 7, so experts 1 and 0,
 *     with UNBIASED weights 5/12 * 1.5 = 0.625 and 7/12 * 1.5 = 0.875.
 *   sigmoid, z = -50, -50, -60, -70: s = 1/(1+e^50) = 1.93e-22 for both
 *     picks, w = s / (2 s + 1e-20) * 1.5 = 0.0279 (the literal 1e-20 of
 *     the reference: without it 0.75).
 *   softmax, z = 5, 5, 0, 0, k = 2: renormalised (V4.1 does, V4 does not):
 *     0.75 each, not V4's 1.5 e^5 / (2 e^5 + 2) = 0.745.
 */
#include "tests/testutil.h"

#include <math.h>
#include "harness/ops/ops.h"

#define E 4
#define D 2

typedef struct {
    int func, k, norm;
    double temp;
    float W[E][D]; /* W[e][t]: expert e's logit for token t */
    const float *bias;
} gate_call;

/* Run the oracle at width 64 and 32; the picks of both widths must agree;
 * returns the weights by expert (0 where not picked) of token t. */
static void run(const gate_call *g, int t, double w64[E], double w32[E])
{
    float x[D][D] = {{1, 0}, {0, 1}};
    dsv4q_bt in[3] = {
        {.name = "x", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {D, D}, .data = x},
        {.name = "W", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {E, D}, .data = (void *)g->W},
        {.name = "bias", .dtype = DSV4Q_BT_F32, .ndim = g->bias ? 1 : 0, .shape = {E}, .data = (void *)g->bias},
    };
    dsv4q_bt out[2] = {
        {.name = "weights", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {D, g->k}},
        {.name = "indices", .dtype = DSV4Q_BT_I32, .ndim = 2, .shape = {D, g->k}},
    };
    const double p[5] = {g->k, 1.5, g->func, g->temp, g->norm};
    dsv4q_bcall call = {.op = DSV4Q_OP_MOE_GATE41, .nin = 3, .nout = 2, .in = in, .out = out, .param = p, .nparam = 5};
    double wd[D * E];
    float wf[D * E];
    int32_t i64[D * E], i32[D * E];
    char err[256];
    void *o64[2] = {wd, i64}, *o32[2] = {wf, i32};
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, o64, err, sizeof err), 0);
    assert_int_equal(dsv4q_oracle_exec(32, 0, &call, o32, err, sizeof err), 0);
    for (int e = 0; e < E; e++) w64[e] = w32[e] = 0;
    for (int j = 0; j < g->k; j++) {
        assert_int_equal(i64[t * g->k + j], i32[t * g->k + j]);
        w64[i64[t * g->k + j]] = wd[t * g->k + j];
        w32[i32[t * g->k + j]] = wf[t * g->k + j];
    }
}

static void expect(const gate_call *g, int t, const double want[E])
{
    double w64[E], w32[E];
    run(g, t, w64, w32);
    for (int e = 0; e < E; e++) {
        if (!(fabs(w64[e] - want[e]) <= 1e-14 * fabs(want[e]) && fabs(w32[e] - want[e]) <= 2e-6 * fabs(want[e])))
            print_error("func %d k %d norm %d token %d expert %d: f64 %.17g f32 %.9g want %.17g\n", g->func, g->k,
                        g->norm, t, e, w64[e], w32[e], want[e]);
        assert_true(fabs(w64[e] - want[e]) <= 1e-14 * fabs(want[e]));
        assert_true(fabs(w32[e] - want[e]) <= 2e-6 * fabs(want[e]));
    }
}

static void hand_values(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_op_find("moe_gate41"), DSV4Q_OP_MOE_GATE41);
    gate_call g = {.func = 0, .k = 2, .norm = 1, .temp = 2, .W = {{50, 98}, {72, 50}, {42, 60.5f}, {72, 42}}};
    expect(&g, 0, (const double[E]){0, 0.75, 0, 0.75});
    expect(&g, 1, (const double[E]){0.84, 0, 0.66, 0});
    g.norm = 0;
    expect(&g, 0, (const double[E]){0, 9, 0, 9});
    expect(&g, 1, (const double[E]){10.5, 0, 8.25, 0});
    g.norm = 1;
    g.k = 1; /* no renormalisation at k = 1, ties to the lower id */
    expect(&g, 0, (const double[E]){0, 9, 0, 0});
    expect(&g, 1, (const double[E]){10.5, 0, 0, 0});
    g.k = 2;
    g.bias = (const float[E]){0, 2.1f, 0, 0}; /* selects, does not weigh */
    expect(&g, 1, (const double[E]){0.875, 0.625, 0, 0});

    /* sigmoid: the 1e-20 of the renormalisation */
    gate_call s = {.func = 1, .k = 2, .norm = 1, .temp = 1, .W = {{-50, 0}, {-50, 0}, {-60, 0}, {-70, 0}}};
    const double sg = 1 / (1 + exp(50.0)), ws = sg / (2 * sg + 1e-20) * 1.5;
    assert_true(ws > 0.027 && ws < 0.028);
    expect(&s, 0, (const double[E]){ws, ws, 0, 0});

    /* softmax: renormalised in V4.1 */
    gate_call m = {.func = 2, .k = 2, .norm = 1, .temp = 1, .W = {{5, 0}, {5, 0}, {0, 0}, {0, 0}}};
    expect(&m, 0, (const double[E]){0.75, 0.75, 0, 0});
}

static void cases_build(void **state)
{
    (void)state;
    dsv4q_case c;
    char err[256];
    assert_int_equal(dsv4q_case_build(&c, "moe_gate41(E=64,d=256)", err, sizeof err), 0);
    assert_string_equal(c.key, "moe_gate41(s=4,d=256,E=64,k=6,func=sqrtsoftplus,temp=1,norm=1,recipe=normal,seed=1)");
    assert_true(c.param[0] == 6 && c.param[2] == 0 && c.param[3] == 1 && c.param[4] == 1);
    assert_non_null(c.sel_scores);
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "moe_gate41(E=64,d=256,temp=1.25,norm=0,k=1)", err, sizeof err), 0);
    assert_true(c.param[0] == 1 && c.param[3] == 1.25 && c.param[4] == 0);
    dsv4q_case_free(&c);
    /* near: odd experts are their even neighbour scaled by 1 + 2^-10, same bias */
    assert_int_equal(dsv4q_case_build(&c, "moe_gate41(E=8,d=64,recipe=near)", err, sizeof err), 0);
    const float *W = c.in[1].data, *b = c.in[2].data;
    for (int e = 1; e < 8; e += 2) {
        assert_true(b[e] == b[e - 1]);
        for (int i = 0; i < 64; i++) assert_true(W[e * 64 + i] == (float)((double)W[(e - 1) * 64 + i] * (1 + 0x1p-10)));
    }
    dsv4q_case_free(&c);
    /* tiny: every logit far below zero (the selection scores are sigmoid ~ 1e-22) */
    assert_int_equal(dsv4q_case_build(&c, "moe_gate41(E=16,d=512,func=sigmoid,recipe=tiny)", err, sizeof err), 0);
    for (int i = 0; i < 4 * 16; i++) assert_true(c.sel_scores[i] > 0 && c.sel_scores[i] < 1e-19);
    dsv4q_case_free(&c);
    assert_int_not_equal(dsv4q_case_build(&c, "moe_gate41(E=4,k=6)", err, sizeof err), 0);
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hand_values), cmocka_unit_test(cases_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
