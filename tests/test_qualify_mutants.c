/*
 * test_qualify_mutants.c - the default gates separate a correct independent
 * backend from broken ones: cpu-ref passes every Flash case, and every
 * mutant (cpu-ref with one realistic defect, backends/cpuref/cpuref.h) fails, each
 * only on the operator(s) it breaks. One qualification pass runs all of
 * them (inputs and references are built once per case).
 *
 * The expected operators per mutant are the table below (docs/gates.md
 * shows the gate and case that catch each). A mutant not in the table
 * must still fail somewhere. Skipped (with a message) when cpu-ref is not
 * built into this tree.
 */
#include "tests/testutil.h"

#include "gates/gates.h"
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"

static const struct {
    const char *mutant;
    const char *ops;   /* comma-separated: where it must fail, and only there */
} expect[] = {
    {"idx_rope_halfsplit", "rope,compressor"},
    {"idx_k_no_hadamard", "compressor"},
    {"attn_sink_missing", "sparse_attn,window_attn_decode"},
    {"cmp_block0_zeros", "compressor"},
    {"hc_post_transposed", "hc_post"},
    {"swiglu_no_clamp", "expert"},
    {"ue8m0_log2f", "act_quant"},
    {"fp4_as_int8", "expert"},
    {"topk_tie_unstable", "topk"},
    {"yarn_on_ratio0", "rope"},
    {"cmp_rope_last_pos", "compressor"},
    {"window_off_by_one", "window_attn_decode"},
    {"engram_ngram_shift", "engram_hash"},
    {"engram_barrier_ignored", "engram_hash"},
    {"engram_gate_nosign", "engram41"},
    {"norm_eps_1e6", "engram41"},
    {"cmp41_partial_dropped", "compressor41"},
    {"idx41_keys_after_rope", "index41_score"},
    {"premix_not_lagged", "hc_pre41"},
    {"fp8_blk128", "linear"},
    {"kv41_scale_e8m0", "kv41_quant"},
    {"cand_newest_unpinned", "candidate_blocks"},
    {"cand_block_mean", "candidate_blocks"},
};

static int listed(const char *ops, const char *op)
{
    size_t n = strlen(op);
    for (const char *p = ops; (p = strstr(p, op)); p += n)
        if ((p == ops || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

static void test_cpuref_passes_mutants_fail(void **state)
{
    (void)state;
    if (!dsv4q_backend_builtin("cpu-ref")) {
        print_message("cpu-ref is not built into this tree; skipping\n");
        skip();
    }
    char err[1024];
    dsv4q_gates g;
    if (dsv4q_gates_load(&g, "gates/default.json", err, sizeof err)) fail_msg("%s", err);
    const char *const *mut = dsv4q_backend_mutants();
    static char names[64][64];
    const char *spec[64];
    int n = 0;
    spec[n++] = "cpu-ref";
    for (int i = 0; mut && mut[i] && n < 64; i++) {
        snprintf(names[n], sizeof names[n], "mutant:%s", mut[i]);
        spec[n] = names[n];
        n++;
    }
    dsv4q_qualify_result *q = calloc((size_t)n, sizeof *q);
    assert_non_null(q);
    dsv4q_qualify_opts o = {.gates = &g, .sets = DSV4Q_CASE_SET_FLASH | DSV4Q_CASE_SET_FLASH41, .iso = {300, 0}, .quiet = 1};
    assert_int_equal(dsv4q_qualify(spec, n, &o, q, err, sizeof err), 0);

    /* cpu-ref: every case passes */
    for (int i = 0; i < q[0].ncases; i++)
        if (q[0].cases[i].verdict != DSV4Q_V_PASS)
            fail_msg("cpu-ref: %s: %s %s", q[0].cases[i].key, dsv4q_verdict_name(q[0].cases[i].verdict),
                     q[0].cases[i].msg);
    assert_int_equal(dsv4q_qualify_status(&q[0]), 0);

    for (int b = 1; b < n; b++) {
        const char *m = spec[b] + strlen("mutant:");
        const char *ops = NULL;
        for (size_t e = 0; e < sizeof expect / sizeof expect[0]; e++)
            if (!strcmp(expect[e].mutant, m)) ops = expect[e].ops;
        assert_false(q[b].load_failed);
        int caught = 0;
        for (int i = 0; i < q[b].ncases; i++) {
            const dsv4q_qcase *r = &q[b].cases[i];
            const char *op = dsv4q_op_get(r->op)->name;
            if (r->verdict == DSV4Q_V_ERROR) fail_msg("%s: %s: error %s", spec[b], r->key, r->msg);
            if (r->verdict != DSV4Q_V_FAIL) continue;
            if (ops && !listed(ops, op)) fail_msg("%s fails on %s, which it does not break (%s)", spec[b], r->key, ops);
            caught++;
        }
        if (!caught) fail_msg("%s passes the default gates: no case catches it", spec[b]);
        if (!ops) print_message("%s: not in the expectation table; caught by %d case(s)\n", spec[b], caught);
        else {   /* and it fails on every operator listed for it */
            char buf[128];
            snprintf(buf, sizeof buf, "%s", ops);
            for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
                int hit = 0;
                for (int i = 0; i < q[b].ncases; i++)
                    hit |= q[b].cases[i].verdict == DSV4Q_V_FAIL && !strcmp(dsv4q_op_get(q[b].cases[i].op)->name, t);
                if (!hit) fail_msg("%s: expected a failure on %s", spec[b], t);
            }
        }
        assert_int_equal(dsv4q_qualify_status(&q[b]), 1);
    }
    for (int b = 0; b < n; b++) dsv4q_qualify_free(&q[b]);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpuref_passes_mutants_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
