/*
 * test_progress.c - the progress lines' cost model and time left
 * (cli/progress.h). Every expected value is worked by hand below from the
 * formulas in progress.h's comment, on a config small enough to add up.
 */
#include "tests/testutil.h"

#include <string.h>

#include "cli/progress.h"
#include "oracle/model_types.h"

/* dim 2, H 1, D 2, q_lora 1, o_lora 1, G 1, index 1 x 1, top-k 1, window 3,
 * one routed + one shared expert of inter 1, vocab 5; layer 0 window only,
 * layer 1 ratio 4. Linears per token and layer: 2 (wq_a) + 2 (wq_b) + 4
 * (wkv) + 2 (wo_a) + 2 (wo_b) + 2 x 3 x 2 (experts) = 24. */
static dsv4q_config small(void)
{
    dsv4q_config g;
    memset(&g, 0, sizeof g);
    g.dim = 2, g.n_heads = 1, g.head_dim = 2, g.q_lora_rank = 1, g.o_lora_rank = 1, g.o_groups = 1;
    g.index_n_heads = 1, g.index_head_dim = 1, g.index_topk = 1, g.window_size = 3;
    g.n_activated_experts = 1, g.n_shared_experts = 1, g.moe_inter_dim = 1, g.vocab_size = 5;
    g.n_layers = 2, g.compress_ratios[0] = 0, g.compress_ratios[1] = 4, g.arch = DSV4Q_ARCH_V4;
    return g;
}

static void test_call_work(void **st)
{
    (void)st;
    const dsv4q_config g = small();
    /* s 1 at 0: layer 0: 24 + 2*1*2 x 1 key = 28; layer 1: 0.25 rows, keys
     * 1 + 0.25, compressor 2*2*2 = 8, scores 0.25: 8 + 24 + 4*1.25 + 0.25
     * = 37.25; head 5*2 = 10 -> 75.25 */
    assert_true(dsv4q_layer_work(&g, 0, 0, 1) == 28);
    assert_true(dsv4q_layer_work(&g, 1, 0, 1) == 37.25);
    assert_true(dsv4q_head_work(&g) == 10);
    assert_true(dsv4q_call_work(&g, 0, 1) == 75.25);
    /* s 5 at 10: middle row at 12; layer 0: window 3: 24 + 12 = 36; layer 1:
     * 13/4 = 3.25 rows, top-k 1 of them: keys 3 + 1 = 4, scores 3.25:
     * 8 + 24 + 16 + 3.25 = 51.25; 5 x 87.25 + 10 = 446.25 */
    assert_true(dsv4q_call_work(&g, 10, 5) == 446.25);
    assert_true(dsv4q_call_work(&g, 0, 0) == 0);
    assert_true(dsv4q_call_work(&g, -1, 1) == 0);
    assert_true(dsv4q_call_work(NULL, 0, 1) == 0);
    assert_true(dsv4q_layer_work(&g, 2, 0, 1) == 0); /* no layer 2 */
}

static void test_plan_work(void **st)
{
    (void)st;
    const dsv4q_config g = small();
    /* 3 tokens in chunks of 2, then 1 step: calls (0,2) (2,1) (3,1):
     * (0,2): middle 0.5: 2 x (24 + 4*1.5) = 60; 0.375 rows: 2 x (8 + 24 +
     *        4*1.875 + 0.375) = 79.75; + 10 = 149.75
     * (2,1): 24 + 12 = 36; 0.75 rows: 8 + 24 + 4*3.75 + 0.75 = 47.75 -> 93.75
     * (3,1): 36; 1 row: 8 + 24 + 16 + 1 = 49 -> 95 */
    assert_true(dsv4q_plan_work(&g, 3, 2, 1, 0, 1) == 149.75 + 93.75 + 95);
    /* layer 0 only, no head (a run stopped early): 60 + 36 + 36 */
    assert_true(dsv4q_plan_work(&g, 3, 2, 1, 1, 0) == 132);
    /* a chunk of 0 or past the prompt: one call (0,3): middle 1: 3 x (24 +
     * 8) = 96; 0.5 rows: 3 x (8 + 24 + 4*2.5 + 0.5) = 127.5; + 10 = 233.5 */
    assert_true(dsv4q_plan_work(&g, 3, 0, 0, 0, 1) == 233.5);
    assert_true(dsv4q_plan_work(&g, 3, 9, 0, 0, 1) == 233.5);
}

static void test_eta(void **st)
{
    (void)st;
    assert_true(dsv4q_eta_left(25, 100, 10) == 30);
    assert_true(dsv4q_eta_left(0, 100, 10) == -1);
    assert_true(dsv4q_eta_left(10, 0, 10) == -1);
    assert_true(dsv4q_eta_left(100, 100, 10) == 0);
    assert_true(dsv4q_eta_left(120, 100, 10) == 0);
    const dsv4q_config g = small();
    dsv4q_eta e;
    char buf[64];
    /* one call (0,1) of 75.25, counted per layer: 28, then 37.25 + the head */
    dsv4q_eta_start(&e, &g, 75.25, 2, 1, 50);
    dsv4q_eta_format(&e, 51, buf, sizeof buf);
    assert_string_equal(buf, "0%");
    dsv4q_eta_call(&e, 0, 1);
    dsv4q_eta_layer(&e, 0);
    assert_true(e.done == 28);
    dsv4q_eta_layer(&e, 1);
    assert_true(e.done == 75.25);
    dsv4q_eta_format(&e, 60, buf, sizeof buf);
    assert_string_equal(buf, "100%, 0 s left");
    /* 20 of 100 done: 10 s -> 40 s left, 31.25 s -> 125 s, 1005 s -> 4020 s */
    e = (dsv4q_eta){.t0 = 50, .total = 100, .done = 20};
    dsv4q_eta_format(&e, 60, buf, sizeof buf);
    assert_string_equal(buf, "20%, 40 s left");
    dsv4q_eta_format(&e, 81.25, buf, sizeof buf);
    assert_string_equal(buf, "20%, 2 min 05 s left");
    dsv4q_eta_format(&e, 1055, buf, sizeof buf);
    assert_string_equal(buf, "20%, 1 h 07 min left");
    char small_buf[4];
    dsv4q_eta_format(&e, 60, small_buf, sizeof small_buf);
    assert_string_equal(small_buf, "20%"); /* truncated, terminated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_work),
        cmocka_unit_test(test_plan_work),
        cmocka_unit_test(test_eta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
