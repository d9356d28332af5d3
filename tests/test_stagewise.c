/*
 * test_stagewise.c - the whole-model verdict stage by stage
 * (harness/capture/stagewise.h, qualify --whole-model) on the synthesized FP8/FP4
 * `tiny`, where the logit gate alone cannot tell a defect from rounding
 * (docs/backends.md):
 *
 *  1. S1: judged stage by stage, oracle-f32's operators give every stage
 *     of every layer a value equal to its level, bit for bit (the same
 *     accumulators), and every stage row of the table is judged.
 *  2. cpu-ref (another FP32 implementation: other summation orders, its
 *     own FP8 decoding) passes every stage at three token seeds.
 *  3. A defect fails only the stages that run its operator: the stage
 *     sets below are read off each mutant's description (docs/mutants.md)
 *     and the stage table (docs/captures.md), not from the harness.
 *  4. The issue-19 claim: tests/backends/no_act_fp8.so (an FP32 engine
 *     that skips the FP8 activation simulation, declaring `source`)
 *     passes the logit gate and fails the per-stage verdict, on the attn
 *     and moe stages of every layer and nowhere else.
 */
#include "tests/testutil.h"
#include "tests/tinyfix.h"

#include <jansson.h>
#include <math.h>
#include <sys/wait.h>
#include <omp.h>

#include "cli/common.h"
#include "gates/gates.h"
#include "harness/qualify/qualify_model.h"
#include "io/model.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/stages.h"

#define PLUG(name) DSV4Q_TEST_BUILD "/plugins/" name ".so"

static char root_dir[256], tiny_dir[300];
static dsv4q_gates G;
static dsv4q_model *M;

static int setup(void **state)
{
    (void)state;
    char err[1024];
    omp_set_num_threads(1);
    if (tinyfix_make(root_dir, sizeof root_dir, tiny_dir, sizeof tiny_dir, "stagewise", "tiny", 1)) return -1;
    if (dsv4q_model_open(&M, tiny_dir, err, sizeof err) || dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dsv4q_model_close(M);
    return tinyfix_remove(root_dir);
}

#define NPROMPT 32
#define NDECODE 4

/* The CLI's synthetic tokens of `seed`: prompt ++ teacher. */
static void tokens(uint64_t seed, int32_t *ids)
{
    dsv4q_cli_opts o;
    memset(&o, 0, sizeof o);
    o.prompt_len = NPROMPT;
    o.decode = NDECODE;
    o.seed = seed;
    dsv4q_tokens t;
    char err[256];
    assert_int_equal(dsv4q_cli_tokens(&o, M->cfg.vocab_size, &t, err, sizeof err), 0);
    memcpy(ids, t.prompt, sizeof(int32_t) * NPROMPT);
    memcpy(ids + NPROMPT, t.teacher, sizeof(int32_t) * NDECODE);
    dsv4q_tokens_free(&t);
}

static void qualify(const char *spec, uint64_t seed, dsv4q_wm_result *r)
{
    int32_t ids[NPROMPT + NDECODE];
    char err[1024];
    tokens(seed, ids);
    dsv4q_wm_opts o = {.gates = &G, .iso = {300, 0}, .quiet = 1};
    if (dsv4q_wm_qualify(spec, M, ids, NPROMPT, NDECODE, &o, r, err, sizeof err)) fail_msg("%s: %s", spec, err);
    if (r->verdict == DSV4Q_V_ERROR || r->load_failed) fail_msg("%s: %s", spec, r->msg);
}

/* Bit set of the stage kinds with a FAIL row; *nfail the failing rows. */
static unsigned failing_kinds(const dsv4q_wm_result *r, int *nfail)
{
    unsigned k = 0;
    *nfail = 0;
    for (int i = 0; i < r->stages.nst; i++)
        if (r->stages.st[i].verdict == DSV4Q_RV_FAIL) {
            k |= 1u << r->stages.st[i].stage;
            (*nfail)++;
        }
    return k;
}

#define K(st) (1u << DSV4Q_STAGE_##st)

/* ---- 1. S1 -------------------------------------------------------------- */

static void test_oracle_f32_is_its_level(void **state)
{
    (void)state;
    dsv4q_wm_result r;
    qualify("oracle-f32", 1, &r);
    const int nl = M->cfg.n_layers;
    assert_true(r.stages_pass);
    assert_int_equal(r.verdict, DSV4Q_V_PASS);
    /* every stage of every layer plus embed and head is judged (MTP is not: S3) */
    assert_int_equal(r.stages.npass, 8 * nl + 2);
    assert_int_equal(r.stages.nfail + r.stages.nunc, 0);
    for (int i = 0; i < r.stages.nst; i++) {
        const dsv4q_replay_stage *s = &r.stages.st[i];
        if (s->verdict == DSV4Q_RV_ABSENT) continue;
        assert_int_equal(s->calls_checked, 1 + NDECODE);
        for (int t = 0; t < s->nout; t++) {
            assert_true(s->seen[t]);
            assert_memory_equal(&s->val[t], &s->lvl[t], sizeof s->val[t]);
            assert_true(s->ulp_val[t] == s->ulp_lvl[t]);
        }
    }
    dsv4q_wm_free(&r);
}

/* ---- 2. another correct FP32 implementation ------------------------------ */

static void test_cpu_ref_passes_every_stage(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        dsv4q_wm_result r;
        qualify("cpu-ref", seed, &r);
        int nf;
        failing_kinds(&r, &nf);
        printf("  cpu-ref seed %llu: %d stage rows pass, %d fail; logit nrms %.3e (level %.3e)\n",
               (unsigned long long)seed, r.stages.npass, nf, r.nrms, r.level);
        assert_int_equal(nf, 0);
        assert_true(r.stages_pass);
        dsv4q_wm_free(&r);
    }
}

/* ---- 3. a defect fails the stages of its own operator only --------------- */

static void test_mutants_fail_their_own_stages(void **state)
{
    (void)state;
    /* mutant -> the stages whose computation calls its operator:
     * hc_post: the two hc_*_post stages; sparse_attn / window_attn_decode,
     * compressor, rope, topk: inside attn (the indexer and the compressed
     * rows are part of the attention block); expert: moe */
    static const struct { const char *spec; unsigned own; } cases[] = {
        {"mutant:hc_post_transposed", K(HC_ATTN_POST) | K(HC_FFN_POST)},
        {"mutant:attn_sink_missing", K(ATTN)},
        {"mutant:window_off_by_one", K(ATTN)},
        {"mutant:idx_rope_halfsplit", K(ATTN)},
        {"mutant:cmp_rope_last_pos", K(ATTN)},
        {"mutant:fp4_as_int8", K(MOE)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dsv4q_wm_result r;
        qualify(cases[i].spec, 1, &r);
        int nf;
        const unsigned k = failing_kinds(&r, &nf);
        printf("  %-28s %2d stage rows fail (kinds 0x%03x, own 0x%03x); logits %s\n", cases[i].spec, nf, k,
               cases[i].own, r.nrms_pass && r.greedy_pass ? "pass" : "FAIL");
        assert_true(nf > 0);
        assert_int_equal(k & ~cases[i].own, 0);
        assert_int_equal(r.verdict, DSV4Q_V_FAIL);
        dsv4q_wm_free(&r);
    }
}

/* ---- 4. skipping the FP8 activation simulation --------------------------- */

static void test_no_act_fp8_fails_per_stage(void **state)
{
    (void)state;
    dsv4q_wm_result r;
    qualify(PLUG("no_act_fp8"), 1, &r);
    int nf;
    const unsigned k = failing_kinds(&r, &nf);
    printf("  no_act_fp8: logit nrms %.3e = %.2fx the level (bound %.3e), greedy %s; %d stage rows fail\n", r.nrms,
           r.nrms / r.level, r.bound, r.greedy_pass ? "pass" : "FAIL", nf);
    assert_true(r.nrms_pass && r.greedy_pass && r.nonfinite == 0);   /* the logit gate does not see it */
    assert_false(r.stages_pass);
    assert_int_equal(r.verdict, DSV4Q_V_FAIL);
    assert_int_equal(k, K(ATTN) | K(MOE));
    assert_int_equal(nf, 2 * M->cfg.n_layers);   /* every layer's attn and moe */
    dsv4q_wm_free(&r);
}

/* ---- 5. P6: FP32 logits of a BF16-rounded hidden state judged in BF16 --- */

static void test_head_logits_judged_in_bf16(void **state)
{
    (void)state;
    uint64_t bs;
    const dsv4q_stage_tensor *lg = &dsv4q_stage_get(DSV4Q_STAGE_HEAD)->out[0];
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);   /* norm_bf16 on */
    assert_int_equal(dsv4q_replay_dtype(DSV4Q_DT_F32, lg, bs), DSV4Q_DT_BF16);
    assert_int_equal(dsv4q_replay_dtype(DSV4Q_DT_F32, lg, bs & ~(1ull << DSV4Q_B_NORM_BF16)), DSV4Q_DT_F32);
    /* a stage output that is not a map of a rounded vector keeps its storage */
    const dsv4q_stage_tensor *comb = &dsv4q_stage_get(DSV4Q_STAGE_HC_ATTN_PRE)->out[2];
    assert_int_equal(dsv4q_replay_dtype(DSV4Q_DT_F32, comb, bs), DSV4Q_DT_F32);
}

/* ---- 6. the decided-rows greedy rule, by hand ---------------------------- */

static void test_decided_rows(void **state)
{
    (void)state;
    /* margin 1.0 (3.0 over 2.0); level error 0.04 at most: 2 x 10 x 0.04 =
     * 0.8 < 1.0 decided; with an error of 0.06: 1.2 > 1.0 not decided */
    const double ref[4] = {1.0, 3.0, 2.0, -1.0};
    const double lvl_a[4] = {1.04, 2.99, 2.0, -1.0}, lvl_b[4] = {1.0, 3.0, 2.06, -1.0};
    assert_int_equal(dsv4q_wm_row_decided(ref, lvl_a, 4, 1, 10), 1);
    assert_int_equal(dsv4q_wm_row_decided(ref, lvl_b, 4, 1, 10), 0);
    assert_int_equal(dsv4q_wm_row_decided(ref, lvl_b, 4, 1, 1), 1);    /* 2 x 1 x 0.06 = 0.12 */
    const double lvl_nan[4] = {1.0, 3.0, NAN, -1.0};
    assert_int_equal(dsv4q_wm_row_decided(ref, lvl_nan, 4, 1, 1), 0);
    assert_int_equal(dsv4q_wm_row_decided(ref, lvl_a, 4, 4, 1), 0);   /* argmax out of range */
    /* the exact boundary is not decided: margin 1.0 = 2 x 10 x 0.05 */
    const double lvl_edge[4] = {1.0, 3.0, 2.0, -0.95};
    assert_int_equal(dsv4q_wm_row_decided(ref, lvl_edge, 4, 1, 10), 0);
}

/* ---- 7. the CLI: --seeds runs one judgement per token seed -------------- */

static void test_cli_seeds(void **state)
{
    (void)state;
    char cmd[1024], js[400];
    snprintf(js, sizeof js, "%s/wm.json", root_dir);
    snprintf(cmd, sizeof cmd, DSV4Q_TEST_BUILD "/dsv4q qualify --whole-model --model %s --backend cpu-ref "
             "--backend /nonexistent/x.so --seeds 2-3 --prompt-len 8 --decode 1 --json %s --db %s/wm.db -q "
             ">/dev/null 2>&1", tiny_dir, js, root_dir);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);   /* a backend that cannot load: exit 2, the others still run */
    json_error_t je;
    json_t *a = json_load_file(js, 0, &je);
    assert_non_null(a);
    /* cpu-ref at seeds 2 and 3, then the missing plugin once (not once per seed) */
    assert_int_equal(json_array_size(a), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "tokens")),
                        "synthetic:seed=2,prompt=8,decode=1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 1), "tokens")),
                        "synthetic:seed=3,prompt=8,decode=1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 2), "verdict")), "not loaded");
    for (int i = 0; i < 2; i++) {
        json_t *r = json_array_get(a, (size_t)i);
        assert_true(json_array_size(json_object_get(r, "stages")) == (size_t)(8 * M->cfg.n_layers + 2));
        assert_true(json_is_true(json_object_get(r, "stages_pass")));
    }
    json_decref(a);
    /* --seed and --seeds exclude each other */
    snprintf(cmd, sizeof cmd, DSV4Q_TEST_BUILD "/dsv4q qualify --whole-model --model %s --backend cpu-ref --seed 1 "
             "--seeds 1-2 >/dev/null 2>&1", tiny_dir);
    st = system(cmd);
    assert_int_equal(WEXITSTATUS(st), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_f32_is_its_level),
        cmocka_unit_test(test_cpu_ref_passes_every_stage),
        cmocka_unit_test(test_mutants_fail_their_own_stages),
        cmocka_unit_test(test_no_act_fp8_fails_per_stage),
        cmocka_unit_test(test_head_logits_judged_in_bf16),
        cmocka_unit_test(test_decided_rows),
        cmocka_unit_test(test_cli_seeds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
