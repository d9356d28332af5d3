/*
 * test_v41_whole_model.c - `qualify --whole-model` on DeepSeek V4.1 (issue
 * 24 item 5): the V4.1 forward pass composed of a backend's operators
 * through the ABI (harness/provider/provider41.inc), judged on the logits
 * and stage by stage.
 *
 * On the synthesized tiny-v41 (9 layers, Engram at 1 and 6, ratios 0 2 2 2
 * 1 1 1 0 1), prompt 25 (odd: a ratio-2 group crosses into the first
 * decode) + 3 decodes:
 *  - oracle-f32 and cpu-ref pass, logits and all 76 stages, and every
 *    operator the V4.1 pass needs (dsv4q_wm_required_ops: hc_pre41,
 *    engram_hash, engram41, index41_score, compressor41, kv41_quant, candidate_blocks, topk41,
 *    moe_gate41, ...) is called through the ABI, none of V4's own;
 *  - each V4.1 mutant that the composition reaches fails the per-stage
 *    verdict on its own stages only (the expectation below is this test's
 *    own record, as in test_qualify_mutants): the lagged pre-mix on the two
 *    hc pre stages, the Engram gate and the n-gram shift on engram, the
 *    compressor, the latent index keys, the candidate blocks and the KV
 *    codec on attn, the FP8 32-blocks on attn and moe (the linears of
 *    both); the Engram barrier is not reached (a text run has no DEAD id);
 *  - the V4.1 stage rows are gated with hc_pre41's and engram41's rules;
 *  - a partial engine (good.so: rmsnorm, hc_post, topk) passes, and its
 *    report names the V4.1 stages of each operator that fell back;
 *  - capture --backend writes a V4.1 capture of cpu-ref's run that replays.
 */
#include "tests/testutil.h"
#include "tests/testcli.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "gates/gates.h"
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify_model.h"
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/stages.h"

static char root[256], mdir[300];
static dsv4q_model *M;
static dsv4q_gates G;
enum { NP = 25, ND = 3 };
static int32_t ids[NP + ND];

static int setup(void **state)
{
    (void)state;
    char err[1024], db[300];
    snprintf(root, sizeof root, "/tmp/dsv4q-test-v41-wm-XXXXXX");
    if (!mkdtemp(root)) return -1;
    snprintf(mdir, sizeof mdir, "%s/tiny-v41", root);
    snprintf(db, sizeof db, "%s/r.db", root);
    setenv("DSV4Q_DB", db, 1);
    omp_set_num_threads(1);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny-v41", err, sizeof err) ||
        dsv4q_synth_write(&cfg, 1, mdir, 1, err, sizeof err) || dsv4q_model_open(&M, mdir, err, sizeof err) ||
        dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    for (int i = 0; i < NP + ND; i++) ids[i] = (int32_t)((i * 37 + 11) % M->cfg.vocab_size);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dsv4q_model_close(M);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

static void qualify(const char *spec, dsv4q_wm_result *r)
{
    char err[1024];
    dsv4q_wm_opts o = {.gates = &G, .iso = {300, 0}, .quiet = 1};
    if (dsv4q_wm_qualify(spec, M, ids, NP, ND, &o, r, err, sizeof err)) fail_msg("%s: %s", spec, err);
    if (r->verdict == DSV4Q_V_ERROR) fail_msg("%s: %s", spec, r->msg);
}

static void correct_backends_pass(void **state)
{
    (void)state;
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    const uint64_t need = dsv4q_wm_required_ops(M, bs);
    const int v41_ops[] = {
        DSV4Q_OP_HC_PRE41,         DSV4Q_OP_ENGRAM41,    DSV4Q_OP_COMPRESSOR41, DSV4Q_OP_KV41_QUANT,  DSV4Q_OP_TOPK41,
        DSV4Q_OP_CANDIDATE_BLOCKS, DSV4Q_OP_MOE_GATE41,  DSV4Q_OP_LINEAR,       DSV4Q_OP_SPARSE_ATTN, DSV4Q_OP_HC_POST,
        DSV4Q_OP_EXPERT,           DSV4Q_OP_ENGRAM_HASH, DSV4Q_OP_INDEX41_SCORE};
    for (size_t i = 0; i < sizeof v41_ops / sizeof v41_ops[0]; i++) assert_true(need & DSV4Q_CAP(v41_ops[i]));
    const int v4_only[] = {DSV4Q_OP_HC_PRE, DSV4Q_OP_HC_HEAD,    DSV4Q_OP_MOE_GATE,     DSV4Q_OP_COMPRESSOR,
                           DSV4Q_OP_TOPK,   DSV4Q_OP_QHEAD_NORM, DSV4Q_OP_INDEXER_SCORE};
    for (size_t i = 0; i < sizeof v4_only / sizeof v4_only[0]; i++) assert_false(need & DSV4Q_CAP(v4_only[i]));
    const char *spec[2] = {"oracle-f32", "cpu-ref"};
    for (int b = 0; b < 2; b++) {
        if (b && !dsv4q_backend_builtin("cpu-ref")) skip();
        dsv4q_wm_result r;
        qualify(spec[b], &r);
        assert_int_equal(r.verdict, DSV4Q_V_PASS);
        assert_true(r.stages_pass);
        assert_int_equal(r.stages.npass, 76);
        assert_int_equal(r.stages.nfail + r.stages.nunc, 0);
        for (int o = 0; o < DSV4Q_OP_COUNT; o++) {
            const long n = r.calls[o] + r.fallbacks[o];
            if (need & DSV4Q_CAP(o)) {
                if (n <= 0) fail_msg("%s: operator %s never called", spec[b], dsv4q_op_get(o)->name);
            } else if (n) {
                fail_msg("%s: operator %s called %ld times, not one of V4.1's", spec[b], dsv4q_op_get(o)->name, n);
            }
        }
        assert_int_equal(r.calls[DSV4Q_OP_ENGRAM41], (long)M->cfg.n_engram_layers * (1 + ND));
        /* one hash per Engram layer per call, from the backend (a provider entry, not the oracle's) */
        assert_int_equal(r.calls[DSV4Q_OP_ENGRAM_HASH], (long)M->cfg.n_engram_layers * (1 + ND));
        print_message("%s: logit nrms %.4e (level %.4e), 76/76 stages\n", spec[b], r.nrms, r.level);
        dsv4q_wm_free(&r);
    }
}

static void mutants_fail_their_own_stages(void **state)
{
    (void)state;
    if (!dsv4q_backend_builtin("cpu-ref")) skip();
    static const struct {
        const char *mutant;
        int stages[3]; /* dsv4q_stage41 ids that must FAIL (some layer), -1 ends */
    } expect[] = {
        {"premix_not_lagged", {DSV4Q_S41_HC_ATTN_PRE, DSV4Q_S41_HC_FFN_PRE, -1}},
        {"engram_gate_nosign", {DSV4Q_S41_ENGRAM, -1, -1}},
        {"engram_ngram_shift", {DSV4Q_S41_ENGRAM, -1, -1}},
        /* not reached: the pass feeds no image tokens, so no DEAD id, and
         * the sequence start blocks in the mutant too: every stage passes */
        {"engram_barrier_ignored", {-1, -1, -1}},
        {"cmp41_partial_dropped", {DSV4Q_S41_ATTN, -1, -1}},
        {"idx41_keys_after_rope", {DSV4Q_S41_ATTN, -1, -1}},
        {"cand_newest_unpinned", {DSV4Q_S41_ATTN, -1, -1}},
        {"cand_block_mean", {DSV4Q_S41_ATTN, -1, -1}},
        {"kv41_scale_e8m0", {DSV4Q_S41_ATTN, -1, -1}},
        {"fp8_blk128", {DSV4Q_S41_ATTN, DSV4Q_S41_MOE, -1}},
    };
    for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
        char spec[80];
        snprintf(spec, sizeof spec, "mutant:%s", expect[k].mutant);
        dsv4q_wm_result r;
        qualify(spec, &r);
        int failed[DSV4Q_S41_COUNT] = {0};
        for (int i = 0; i < r.stages.nst; i++) failed[r.stages.st[i].stage] |= r.stages.st[i].verdict == DSV4Q_RV_FAIL;
        for (int st = 0; st < DSV4Q_S41_COUNT; st++) {
            int want = 0;
            for (int j = 0; j < 3 && expect[k].stages[j] >= 0; j++) want |= expect[k].stages[j] == st;
            if (failed[st] != want)
                fail_msg("%s: stage %s %s", spec, dsv4q_stage_get_arch(DSV4Q_ARCH_V41, st)->name,
                         want ? "passed, expected FAIL" : "FAILED, expected pass");
        }
        assert_true(r.stages_pass == (expect[k].stages[0] < 0));
        assert_int_not_equal(r.verdict, DSV4Q_V_ERROR);
        print_message("%s: %s (logit nrms %.3e, level %.3e)\n", spec,
                      expect[k].stages[0] < 0 ? "passes every stage" : "fails its own stages only", r.nrms, r.level);
        dsv4q_wm_free(&r);
    }
}

/* The V4.1 stage rows are gated with the rules of V4.1's own operators: the
 * hc pre stages with hc_pre41's, engram with engram41's (V4's hc pre stages
 * keep hc_pre's, both embeds linear's). Gates that give each of those four
 * operators its own nrms rule (factor, floor) tell the rules apart: the
 * bound of every measured row is factor * level + floor of its operator. */
static void stage_rules_are_v41s(void **state)
{
    (void)state;
    static const char txt[] = "{\"dsv4q_gates\": 1, \"description\": \"test\","
                              " \"defaults\": {\"nrms\": {\"factor\": 4, \"floor_u\": 0.1}},"
                              " \"ops\": {\"hc_pre\": {\"nrms\": {\"factor\": 5, \"floor\": 0.125}},"
                              " \"hc_pre41\": {\"nrms\": {\"factor\": 7, \"floor\": 0.5}},"
                              " \"linear\": {\"nrms\": {\"factor\": 3, \"floor\": 0.0625}},"
                              " \"engram41\": {\"nrms\": {\"factor\": 9, \"floor\": 0.25}}},"
                              " \"model\": {\"nrms\": {\"factor\": 10}, \"greedy_agreement_min\": 0.9}}";
    dsv4q_gates g;
    char err[1024];
    if (dsv4q_gates_parse(&g, txt, "test gates", err, sizeof err)) fail_msg("%s", err);
    const struct {
        int arch, stage;
        double factor, floor;
    } want[] = {
        {DSV4Q_ARCH_V41, DSV4Q_S41_HC_ATTN_PRE, 7, 0.5},    {DSV4Q_ARCH_V41, DSV4Q_S41_HC_FFN_PRE, 7, 0.5},
        {DSV4Q_ARCH_V41, DSV4Q_S41_ENGRAM, 9, 0.25},        {DSV4Q_ARCH_V41, DSV4Q_S41_EMBED, 3, 0.0625},
        {DSV4Q_ARCH_V4, DSV4Q_STAGE_HC_ATTN_PRE, 5, 0.125}, {DSV4Q_ARCH_V4, DSV4Q_STAGE_HC_FFN_PRE, 5, 0.125},
        {DSV4Q_ARCH_V4, DSV4Q_STAGE_EMBED, 3, 0.0625},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const dsv4q_gate_rule *ru = dsv4q_stage_rule_arch(&g, want[i].arch, want[i].stage, DSV4Q_M_NRMS);
        assert_non_null(ru);
        assert_true(ru->on && ru->factor == want[i].factor && ru->floor == want[i].floor);
    }
    if (!dsv4q_backend_builtin("cpu-ref")) skip();
    dsv4q_wm_result r;
    dsv4q_wm_opts o = {.gates = &g, .iso = {300, 0}, .quiet = 1};
    if (dsv4q_wm_qualify("cpu-ref", M, ids, NP, ND, &o, &r, err, sizeof err)) fail_msg("%s", err);
    int seen[3] = {0};
    for (int i = 0; i < r.stages.nst; i++) {
        const dsv4q_replay_stage *st = &r.stages.st[i];
        const dsv4q_replay_row *w = &st->row[DSV4Q_M_NRMS];
        const int k = st->stage == DSV4Q_S41_HC_ATTN_PRE  ? 0
                      : st->stage == DSV4Q_S41_HC_FFN_PRE ? 1
                      : st->stage == DSV4Q_S41_ENGRAM     ? 2
                                                          : -1;
        if (k < 0 || !w->measured) continue;
        const double f = k == 2 ? 9 : 7, fl = k == 2 ? 0.25 : 0.5;
        if (!w->gated || w->bound != f * w->level + fl)
            fail_msg("%s layer %d: nrms bound %.17g at level %.17g, not %g * level + %g",
                     dsv4q_stage_get_arch(DSV4Q_ARCH_V41, st->stage)->name, st->layer, w->bound, w->level, f, fl);
        seen[k]++;
    }
    assert_int_equal(seen[0], M->cfg.n_layers);
    assert_int_equal(seen[1], M->cfg.n_layers);
    assert_int_equal(seen[2], M->cfg.n_engram_layers);
    dsv4q_wm_free(&r);
}

/* A partial engine: the V4 plugin good.so claims rmsnorm, hc_post and topk
 * (ABI v1); every V4.1 operator falls back to oracle-f32 and the report
 * says which V4.1 stages each one's calls belong to. The stage lists are
 * by hand from DeepSeek's V4.1 model.py: Block.forward runs the lagged
 * hc pre step before attention and before the FFN, Engram.forward (hash +
 * lookup) only in the engram row, the Gate in the MoE. */
static void partial_engine_names_v41_stages(void **state)
{
    (void)state;
    dsv4q_wm_result r;
    qualify(DSV4Q_TEST_BUILD "/plugins/good.so", &r);
    assert_int_equal(r.verdict, DSV4Q_V_PASS);
    assert_true(r.calls[DSV4Q_OP_RMSNORM] > 0 && r.calls[DSV4Q_OP_HC_POST] > 0);
    assert_true(r.fallbacks[DSV4Q_OP_HC_PRE41] > 0 && r.calls[DSV4Q_OP_HC_PRE41] == 0);
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    assert_non_null(f);
    dsv4q_wm_print(f, &r, &G);
    fclose(f);
    static const struct {
        const char *op, *stages;
    } want[] = {
        {"hc_pre41", "(stages: hc_attn_pre, hc_ffn_pre)"},
        {"engram_hash", "(stages: engram)"},
        {"engram41", "(stages: engram)"},
        {"moe_gate41", "(stages: moe)"},
        {"topk41", "(stages: attn)"}, /* good.so's topk is V4's, not V4.1's */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *at = strstr(txt, "PARTIAL ENGINE");
        assert_non_null(at);
        char key[64];
        snprintf(key, sizeof key, "\n  %-18s", want[i].op);
        const char *line = strstr(at, key);
        if (!line) fail_msg("no fallback line for %s in:\n%s", want[i].op, at);
        size_t n = 1; /* the line's length, by index (GCC's ASan build misreads strchr(line + 1) here) */
        while (line[n] && line[n] != '\n') n++;
        if (!memmem(line, n, want[i].stages, strlen(want[i].stages)))
            fail_msg("%s: line '%.*s' lacks %s", want[i].op, (int)n, line, want[i].stages);
    }
    free(txt);
    dsv4q_wm_free(&r);
}

static void capture_backend_replays(void **state)
{
    (void)state;
    if (!dsv4q_backend_builtin("cpu-ref")) skip();
    char cap[400];
    snprintf(cap, sizeof cap, "%s/cap-cpuref", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", mdir, "--backend", "cpu-ref",
                                      "--prompt-len", "12", "--decode", "2", "--out", cap, "-q", NULL),
                     0);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--capture", cap, "--model", mdir, "-q", NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(correct_backends_pass),
        cmocka_unit_test(mutants_fail_their_own_stages),
        cmocka_unit_test(stage_rules_are_v41s),
        cmocka_unit_test(partial_engine_names_v41_stages), /* good.so: V4.1 fallback lines */
        cmocka_unit_test(capture_backend_replays),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
