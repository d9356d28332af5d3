/*
 * test_boundaries.c - boundary control (issue: switch any single rounding
 * point).
 *
 *  - the profiles nest (qat < model < source) and `exact` plus every model
 *    boundary switched on by name equals `model`, as sets and as runs;
 *  - toggling one boundary changes exactly the stages downstream of it:
 *    every stage tap upstream of the rounding point stays bit-identical,
 *    the first stage that contains it differs;
 *  - unknown names fail with the list of valid names;
 *  - docs/boundaries.md holds the table `dsv4q boundaries --markdown` prints.
 */
#include "tests/testutil.h"
#include "tests/tinyfix.h"
#include "cli/taps.h"
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static char root[256], tiny[300];
static dsv4q_model *M;

static int setup(void **state)
{
    (void)state;
    char err[512];
    if (tinyfix_make(root, sizeof root, tiny, sizeof tiny, "bnd", "tiny", 5)) return -1;
    if (dsv4q_model_open(&M, tiny, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dsv4q_model_close(M);
    return tinyfix_remove(root);
}

static void run_taps(uint64_t bs, dsv4q_tapset *ts, double *logits)
{
    char err[512];
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = (i * 53 + 11) % M->cfg.vocab_size;
    ts->quiet = 1;
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, M, 64, bs, 42, dsv4q_tapset_cb, ts, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 40, logits, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, &ids[3], 1, logits, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, &ids[7], 1, logits, err, sizeof err), 0);
    dsv4q_run_close(r);
}

static void profiles_nest_and_compose(void **state)
{
    (void)state;
    uint64_t src, model, qat, exact, composed;
    char err[1024], spec[1024] = "";
    assert_int_equal(dsv4q_profile_set("source", &src), 0);
    assert_int_equal(dsv4q_profile_set("model", &model), 0);
    assert_int_equal(dsv4q_profile_set("qat", &qat), 0);
    assert_int_equal(dsv4q_profile_set("exact", &exact), 0);
    assert_int_equal(exact, 0);
    assert_int_equal(qat & ~model, 0);
    assert_int_equal(model & ~src, 0);
    assert_int_equal(src, (DSV4Q_BIT(DSV4Q_B_COUNT) - 1));
    for (int b = 0; b < DSV4Q_B_COUNT; b++)
        if (dsv4q_boundary_get(b)->kind == DSV4Q_BK_MODEL)
            snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%s=on", spec[0] ? "," : "",
                     dsv4q_boundary_get(b)->name);
    composed = exact;
    assert_int_equal(dsv4q_boundary_apply(&composed, spec, err, sizeof err), 0);
    assert_int_equal(composed, model);
    double a[1024], b[1024];
    dsv4q_tapset t1 = {0}, t2 = {0};
    run_taps(composed, &t1, a);
    run_taps(model, &t2, b);
    assert_memory_equal(a, b, sizeof a);
    dsv4q_tapset_free(&t1);
    dsv4q_tapset_free(&t2);
}

/* Flip `name` in profile `base`; stages listed in `same` (layer, stage)
 * must be bit-identical, `diff` must differ. */
typedef struct { int layer; const char *stage; } tapref;

static void check_toggle(const char *base, const char *name, const tapref *same, int nsame, const tapref *diff)
{
    uint64_t src, tog;
    assert_int_equal(dsv4q_profile_set(base, &src), 0);
    int b = dsv4q_boundary_find(name);
    assert_true(b >= 0);
    tog = src ^ DSV4Q_BIT(b);
    double la[1024], lb[1024];
    dsv4q_tapset ref = {0};
    run_taps(src, &ref, la);
    ref.compare = 1;
    run_taps(tog, &ref, lb);
    for (int i = 0; i < nsame; i++) {
        dsv4q_tap_entry *e = dsv4q_tapset_find(&ref, same[i].layer, same[i].stage);
        assert_non_null(e);
        if (e->acc.se != 0 || e->sel_diff != 0)
            fprintf(stderr, "%s: L%d.%s changed (NRMS %.3e)\n", name, same[i].layer, same[i].stage, dsv4q_acc_nrms(&e->acc));
        assert_true(e->acc.se == 0 && e->sel_diff == 0);
        assert_true(e->acc.n > 0 || e->sel_rows > 0);
    }
    dsv4q_tap_entry *e = dsv4q_tapset_find(&ref, diff->layer, diff->stage);
    assert_non_null(e);
    if (!(e->acc.se > 0 || e->sel_diff > 0)) fprintf(stderr, "%s: L%d.%s unchanged\n", name, diff->layer, diff->stage);
    assert_true(e->acc.se > 0 || e->sel_diff > 0);
    dsv4q_tapset_free(&ref);
}

static void toggles_change_only_downstream(void **state)
{
    (void)state;
    /* tiny: layer 0 ratio 0, layer 1 ratio 4 (indexer), layer 2 ratio 128 */
    const tapref up_moe[] = {{0, "hc_attn_pre"}, {0, "attn_norm"}, {0, "q"}, {0, "kv"}, {0, "attn_out"},
                             {0, "attn"}, {0, "hc_attn_post"}, {0, "hc_ffn_pre"}, {0, "ffn_norm"}, {0, "moe_weights"}};
    const tapref moe = {0, "moe_out"};
    check_toggle("source", "moe_bf16", up_moe, 10, &moe);

    const tapref up_idx[] = {{-1, "embed"}, {0, "block_out"}, {1, "hc_attn_pre"}, {1, "attn_norm"}, {1, "q"}, {1, "kv"}};
    const tapref idx = {1, "idx_score"};
    check_toggle("source", "idx_q_fp4", up_idx, 6, &idx);

    const tapref up_rope[] = {{-1, "embed"}, {0, "hc_attn_pre"}, {0, "attn_norm"}};
    const tapref q = {0, "q"};
    /* at f64 width and short positions the FP32 table's error is below
     * BF16 resolution, so flip it in the exact profile, where q is not
     * rounded after RoPE */
    check_toggle("exact", "rope_table_f32", up_rope, 3, &q);

    const tapref up_kv[] = {{0, "hc_attn_pre"}, {0, "attn_norm"}, {0, "q"}};
    const tapref kv = {0, "kv"};
    check_toggle("source", "kv_fp8", up_kv, 3, &kv);

    const tapref up_attnp[] = {{0, "q"}, {0, "kv"}};
    const tapref ao = {0, "attn_out"};
    check_toggle("source", "attn_p_bf16", up_attnp, 2, &ao);
}

static void unknown_names_list_valid_ones(void **state)
{
    (void)state;
    uint64_t bs = 0;
    char err[1024];
    assert_int_equal(dsv4q_boundary_apply(&bs, "kv_fp8=on,bogus=off", err, sizeof err), -1);
    assert_non_null(strstr(err, "bogus"));
    for (int b = 0; b < DSV4Q_B_COUNT; b++) assert_non_null(strstr(err, dsv4q_boundary_get(b)->name));
    assert_int_equal(dsv4q_boundary_apply(&bs, "kv_fp8=maybe", err, sizeof err), -1);
    assert_int_equal(bs, 0);   /* nothing applied on error */
    assert_int_equal(dsv4q_profile_set("fast", &bs), -1);
}

static void docs_table_is_generated(void **state)
{
    (void)state;
    FILE *p = popen("./" DSV4Q_TEST_BUILD "/dsv4q boundaries --markdown", "r");
    assert_non_null(p);
    static char gen[32768], doc[65536];
    size_t n = fread(gen, 1, sizeof gen - 1, p);
    gen[n] = 0;
    assert_int_equal(pclose(p), 0);
    FILE *f = fopen("docs/boundaries.md", "r");
    assert_non_null(f);
    size_t m = fread(doc, 1, sizeof doc - 1, f);
    doc[m] = 0;
    fclose(f);
    assert_true(n > 100);
    if (!strstr(doc, gen)) fprintf(stderr, "docs/boundaries.md is stale: regenerate with `make docs`\n");
    assert_non_null(strstr(doc, gen));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(profiles_nest_and_compose),
        cmocka_unit_test(toggles_change_only_downstream),
        cmocka_unit_test(unknown_names_list_valid_ones),
        cmocka_unit_test(docs_table_is_generated),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
