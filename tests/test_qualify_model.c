/*
 * test_qualify_model.c - whole-model qualification (harness/qualify/qualify_model.h)
 * on synthesized tiny checkpoints:
 *
 *  1. W1: the model composed from oracle-f32's operators equals dsv4q_run
 *     at f32 BIT FOR BIT (decode attention through WINDOW_ATTN_DECODE and
 *     through SPARSE_ATTN; a run long enough for the ratio-128 compressor
 *     to emit a row at a decode step, so the history re-run of COMPRESSOR
 *     is exercised for both ratios). This is what shows the harness glue
 *     is oracle/model.c's: any difference in a column layout, a cache, a
 *     rounding or a summation order would show.
 *  2. The gates: oracle-f32 passes at ratio 1 (it is the level), cpu-ref
 *     passes, mutant:window_off_by_one (a decode-path bug) fails, each in
 *     one isolated child.
 *  3. Partial engines: operators a backend lacks (or declines) run on
 *     oracle-f32, counted per operator, and the model still composes (also
 *     for an engine without indexer_score / topk); a crash inside the
 *     composed run names the operator, layer and position in flight.
 *  4. Issue 29: a checkpoint whose oracle reference is not finite (one
 *     embedding row at BF16 1.7e38, past sqrt(FLT_MAX)) is NOT CHECKABLE,
 *     never a pass: the logits and the stages after it say why; replay of
 *     the oracle's own capture of it says the same of its logits (exit 1,
 *     JUnit model.logits skipped with the reason).
 *
 * Checkpoints: `tiny` (FP8/FP4, the default model) for W1, `tiny-bf16` for
 * the gate verdicts: the FP8 tiny amplifies a 1e-7 relative difference of
 * one hc_pre call into ~2e-2 of logit NRMS, so an honest FP32 backend with
 * another reduction order lands at 3-5x the fp32 floor with greedy flips
 * there, as a real bug does (docs/backends.md, "Whole-model
 * qualification"); tiny-bf16 at prompt 24 is well conditioned (cpu-ref at
 * 0.98x the level, the mutant at ~16x).
 */
#include "tests/testutil.h"
#include "tests/testcli.h"

#include <omp.h>
#include <signal.h>

#include "cli/cmds.h"
#include "cli/common.h"
#include "gates/gates.h"
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/backend/isolate.h"
#include "harness/qualify/qualify_model.h"
#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static char root_dir[256], tiny_dir[300], bf16_dir[300];
static dsv4q_gates G;

static int setup(void **state)
{
    (void)state;
    char err[1024];
    dsv4q_config cfg;
    omp_set_num_threads(1);   /* small runs: threads only cost time on a shared machine */
    snprintf(root_dir, sizeof root_dir, "/tmp/dsv4q-test-qmodel-XXXXXX");
    if (!mkdtemp(root_dir)) return -1;
    snprintf(tiny_dir, sizeof tiny_dir, "%s/tiny", root_dir);
    snprintf(bf16_dir, sizeof bf16_dir, "%s/tiny-bf16", root_dir);
    if (dsv4q_config_builtin(&cfg, "tiny", err, sizeof err) || dsv4q_synth_write(&cfg, 1, tiny_dir, 1, err, sizeof err) ||
        dsv4q_config_builtin(&cfg, "tiny-bf16", err, sizeof err) ||
        dsv4q_synth_write(&cfg, 1, bf16_dir, 1, err, sizeof err) ||
        dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The CLI's tokens (synthetic, seed 1): prompt ++ teacher. */
static int32_t *tokens(int vocab, long nprompt, long ndecode)
{
    dsv4q_cli_opts o;
    memset(&o, 0, sizeof o);
    o.prompt_len = nprompt;
    o.decode = ndecode;
    o.seed = 1;
    dsv4q_tokens t;
    char err[256];
    assert_int_equal(dsv4q_cli_tokens(&o, vocab, &t, err, sizeof err), 0);
    assert_int_equal(t.nteacher, ndecode);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(nprompt + ndecode));
    assert_non_null(ids);
    memcpy(ids, t.prompt, sizeof(int32_t) * (size_t)nprompt);
    memcpy(ids + nprompt, t.teacher, sizeof(int32_t) * (size_t)ndecode);
    dsv4q_tokens_free(&t);
    return ids;
}

/* ---- 1. W1: composition == dsv4q_run at f32, bit for bit --------------- */

static void bitexact(const char *dir, long nprompt, long ndecode)
{
    char err[1024];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    const long V = m->cfg.vocab_size, rows = 1 + ndecode;
    int32_t *ids = tokens((int)V, nprompt, ndecode);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    double *ref = malloc(sizeof(double) * (size_t)(rows * V)), *got = malloc(sizeof(double) * (size_t)(rows * V));
    assert_true(ref && got);
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, 32, bs, nprompt + ndecode, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, nprompt, ref, err, sizeof err), 0);
    for (long i = 0; i < ndecode; i++) assert_int_equal(dsv4q_run_feed(r, ids + nprompt + i, 1, ref + (i + 1) * V, err, sizeof err), 0);
    dsv4q_run_close(r);

    const dsv4q_backend_v1 *b = dsv4q_backend_builtin("oracle-f32");
    void *ctx = NULL;
    assert_int_equal(b->init(&ctx, err, sizeof err), 0);
    for (int pass = 0; pass < 2; pass++) {
        long calls[DSV4Q_OP_COUNT] = {0};
        int dop = -1;
        int flags = pass ? DSV4Q_WM_SPARSE_DECODE : 0;
        int rc = dsv4q_wm_compose(b, ctx, m, bs, ids, nprompt, ndecode, flags, got, calls, NULL, &dop, NULL, 0, err,
                                  sizeof err);
        if (rc != DSV4Q_BACKEND_OK) fail_msg("compose: %s", err);
        long diff = 0;
        for (long i = 0; i < rows * V; i++) diff += memcmp(&got[i], &ref[i], sizeof(double)) != 0;
        long total = 0;
        for (int o = 0; o < DSV4Q_OP_COUNT; o++) total += calls[o];
        printf("  %s prompt %ld decode %ld, decode attention %-18s: %ld backend calls (compressor %ld), "
               "%ld/%ld logits differ from dsv4q_run f32\n", m->cfg.name, nprompt, ndecode, dsv4q_op_get(dop)->name,
               total, calls[DSV4Q_OP_COMPRESSOR], diff, rows * V);
        assert_int_equal(diff, 0);
        assert_int_equal(dop, pass ? DSV4Q_OP_SPARSE_ATTN : DSV4Q_OP_WINDOW_ATTN_DECODE);
        assert_int_equal(calls[DSV4Q_OP_WINDOW_ATTN_DECODE], pass ? 0 : (long)m->cfg.n_layers * ndecode);
        /* every operator the model needs was called */
        for (int o = 0; o < DSV4Q_OP_COUNT; o++)
            if (dsv4q_wm_required_ops(m, bs) & DSV4Q_CAP(o)) assert_true(calls[o] > 0);
    }
    if (b->fini) b->fini(ctx);
    free(ref);
    free(got);
    free(ids);
    dsv4q_model_close(m);
}

static void test_compose_bitexact(void **state)
{
    (void)state;
    /* ring wrapped (w = 16); the ratio-4 compressors emit a row at the
     * decode step at position 43 */
    bitexact(tiny_dir, 42, 2);
    /* the ratio-128 compressor emits its first row at the decode step at
     * position 127 (history re-run of COMPRESSOR over 128 tokens) */
    bitexact(tiny_dir, 126, 3);
    bitexact(bf16_dir, 24, 8);
}

/* ---- 2. the gates ------------------------------------------------------ */

static void qualify_one(const char *spec, dsv4q_wm_result *r)
{
    char err[1024];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, bf16_dir, err, sizeof err), 0);
    const long np = 24, nd = 8;
    int32_t *ids = tokens(m->cfg.vocab_size, np, nd);
    dsv4q_wm_opts o = {.gates = &G, .iso = {300, 0}, .quiet = 1};
    assert_int_equal(dsv4q_wm_qualify(spec, m, ids, np, nd, &o, r, err, sizeof err), 0);
    dsv4q_wm_print(stdout, r, &G);
    printf("\n");
    free(ids);
    dsv4q_model_close(m);
}

static void test_gates(void **state)
{
    (void)state;
    dsv4q_wm_result r;
    /* oracle-f32 is the level: ratio exactly 1, same argmaxes */
    qualify_one("oracle-f32", &r);
    assert_int_equal(r.verdict, DSV4Q_V_PASS);
    assert_true(r.nrms == r.level);
    assert_int_equal(r.agree, r.level_agree);
    assert_int_equal(dsv4q_wm_status(&r), 0);
    assert_int_equal(r.decode_op, DSV4Q_OP_WINDOW_ATTN_DECODE);
    dsv4q_wm_free(&r);

    qualify_one("cpu-ref", &r);
    assert_int_equal(r.verdict, DSV4Q_V_PASS);
    assert_true(r.nrms < 2 * r.level);   /* an honest FP32 backend sits at the level here */
    assert_int_equal(r.nonfinite, 0);
    dsv4q_wm_free(&r);

    /* the decode step reads the stale ring slot: caught by the whole model */
    qualify_one("mutant:window_off_by_one", &r);
    assert_int_equal(r.verdict, DSV4Q_V_FAIL);
    assert_false(r.nrms_pass);
    assert_true(r.nrms > r.bound);
    assert_int_equal(dsv4q_wm_status(&r), 1);
    char *js = dsv4q_wm_json(&r, &G, NULL);
    assert_non_null(js);
    assert_non_null(strstr(js, "\"verdict\":\"FAIL\""));
    free(js);
    dsv4q_wm_free(&r);
}

/* ---- 3. errors ----------------------------------------------------------- */

/* Partial engines (issue 16): operators outside caps (or declined by an
 * ABI v2 supports()) run on oracle-f32 and are counted per operator; the
 * composition no longer refuses them. */
static void test_partial_engines(void **state)
{
    (void)state;
    dsv4q_wm_result r;
    qualify_one(DSV4Q_TEST_BUILD "/plugins/good.so", &r);   /* rmsnorm, hc_post, topk only (ABI v1) */
    assert_int_equal(r.verdict, DSV4Q_V_PASS);
    assert_true(r.calls[DSV4Q_OP_RMSNORM] > 0 && r.calls[DSV4Q_OP_HC_POST] > 0);
    assert_true(r.fallbacks[DSV4Q_OP_LINEAR] > 0 && r.calls[DSV4Q_OP_LINEAR] == 0);
    assert_int_equal(r.fallbacks[DSV4Q_OP_RMSNORM], 0);
    assert_int_equal(dsv4q_wm_status(&r), 0);
    dsv4q_wm_free(&r);
    /* an engine without indexer_score / topk (engine_v2: linear + rmsnorm),
     * its head declined by supports() (role "head"): composes and passes */
    qualify_one(DSV4Q_TEST_BUILD "/plugins/engine_v2.so", &r);
    assert_int_equal(r.verdict, DSV4Q_V_PASS);
    assert_true(r.fallbacks[DSV4Q_OP_INDEXER_SCORE] > 0 && r.fallbacks[DSV4Q_OP_TOPK] > 0);
    assert_int_equal(r.calls[DSV4Q_OP_INDEXER_SCORE] + r.calls[DSV4Q_OP_TOPK], 0);
    assert_true(r.calls[DSV4Q_OP_LINEAR] > 0);
    assert_true(r.fallbacks[DSV4Q_OP_LINEAR] >= r.rows);   /* the head, once per call */
    char *js = dsv4q_wm_json(&r, &G, NULL);
    assert_non_null(strstr(js, "\"oracle_f32_fallbacks\""));
    assert_non_null(strstr(js, "\"declared\":\"source:gemm_act_fp8=off,kv_f16=on,act_q8_0=on\""));
    free(js);
    dsv4q_wm_free(&r);
    qualify_one(DSV4Q_TEST_BUILD "/plugins/no_such.so", &r);
    assert_true(r.load_failed);
    assert_int_equal(dsv4q_wm_status(&r), 2);
    dsv4q_wm_free(&r);
}

static int crash_job(const dsv4q_backend_v1 *b, void *ctx, void *user, void *out, char *detail, size_t detaillen,
                     char *err, size_t errlen)
{
    (void)b; (void)ctx; (void)user; (void)out; (void)err; (void)errlen;
    snprintf(detail, detaillen, "op expert, layer 3, position 41 (decode)");
    raise(SIGSEGV);
    return DSV4Q_BACKEND_OK;
}

static void test_job_crash(void **state)
{
    (void)state;
    char msg[1024];
    double out[4];
    dsv4q_iso_opts o = {30, 0};
    dsv4q_iso_status st = dsv4q_iso_job("cpu-ref", &o, "whole model", crash_job, NULL, out, sizeof out, msg, sizeof msg);
    printf("  %s\n", msg);
    assert_int_equal(st, DSV4Q_ISO_CRASH);
    assert_non_null(strstr(msg, "SIGSEGV"));
    assert_non_null(strstr(msg, "whole model: op expert, layer 3, position 41"));
}

/* ---- 4. a reference that is not finite ------------------------------------ */

/* tiny-bf16 with token 5's embedding row set to BF16 0x7F00 = 2^127 (1.7e38):
 * its square is past FLT_MAX, so the f32 oracle's norms of that position are
 * inf/NaN and attention carries them to every later position: the
 * oracle-f32 logits cannot be finite, and the run judges nothing. */
static void test_reference_not_finite(void **state)
{
    (void)state;
    char err[1024], dir[400], src[500], dst[500], cmd[1000];
    snprintf(dir, sizeof dir, "%s/huge", root_dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dir, bf16_dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(src, sizeof src, "%s/model.safetensors", bf16_dir);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    dsv4q_st *st;
    assert_int_equal(dsv4q_st_open(&st, src, err, sizeof err), 0);
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    assert_non_null(w);
    int edited = 0;
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        uint16_t *buf = malloc(t->nbytes);
        assert_non_null(buf);
        memcpy(buf, t->data, t->nbytes);
        if (!strcmp(t->name, "embed.weight")) {
            assert_int_equal(t->dtype, DSV4Q_DT_BF16);
            for (int64_t k = 0; k < t->shape[1]; k++) buf[5 * t->shape[1] + k] = 0x7F00;
            edited = 1;
        }
        assert_int_equal(dsv4q_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, buf, t->nbytes, err, sizeof err),
                         0);
        free(buf);
    }
    assert_true(edited);
    assert_int_equal(dsv4q_st_writer_write(w, dst, err, sizeof err), 0);
    dsv4q_st_close(st);
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    const int32_t ids[9] = {5, 1, 2, 3, 4, 6, 7, 8, 9};
    dsv4q_wm_opts o = {.gates = &G, .iso = {300, 0}, .quiet = 1};
    dsv4q_wm_result r;
    assert_int_equal(dsv4q_wm_qualify("cpu-ref", m, ids, 8, 1, &o, &r, err, sizeof err), 0);
    if (r.verdict != DSV4Q_V_UNCHECKABLE || !r.ref_nonfinite) {
        dsv4q_wm_print(stdout, &r, &G);
        fail_msg("verdict %s, logits ref_nonfinite %d", dsv4q_verdict_name(r.verdict), r.ref_nonfinite);
    }
    assert_non_null(strstr(r.ref_why, "reference not finite: logits: "));
    assert_non_null(strstr(r.ref_why, "oracle-f32 has "));
    assert_true(r.stages_ref_nonfinite > 0);
    assert_int_equal(dsv4q_wm_status(&r), 1);
    char *js = dsv4q_wm_json(&r, &G, NULL);
    assert_non_null(js);
    assert_non_null(strstr(js, "\"verdict\":\"not checkable\""));
    assert_non_null(strstr(js, "\"logits_not_checkable\":\"reference not finite: logits: "));
    free(js);
    dsv4q_wm_free(&r);
    dsv4q_model_close(m);
    /* replay: the oracle-f64 capture of the same tokens */
    char tok[500], cap[500], xml[500], db[500];
    snprintf(tok, sizeof tok, "%s/tokens.json", dir);
    snprintf(cap, sizeof cap, "%s/cap", dir);
    snprintf(xml, sizeof xml, "%s/replay.xml", dir);
    snprintf(db, sizeof db, "%s/r.db", dir);
    FILE *f = fopen(tok, "w");
    assert_non_null(f);
    fprintf(f, "{\"prompt\": [5, 1, 2, 3, 4, 6, 7, 8], \"teacher\": [9]}\n");
    fclose(f);
    assert_int_equal(
        dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", dir, "--tokens", tok, "--out", cap, "-q", NULL), 0);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", dir, "--capture", cap, "--junit", xml,
                                      "--db", db, "-q", NULL),
                     1);
    f = fopen(xml, "rb");
    assert_non_null(f);
    static char x[1 << 17];
    size_t n = fread(x, 1, sizeof x - 1, f);
    x[n] = 0;
    fclose(f);
    const char *tc = strstr(x, "name=\"model.logits\"");
    assert_non_null(tc);
    assert_non_null(strstr(tc, "<skipped message=\"reference not finite: logits: oracle-"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compose_bitexact),     cmocka_unit_test(test_gates),
        cmocka_unit_test(test_partial_engines),      cmocka_unit_test(test_job_crash),
        cmocka_unit_test(test_reference_not_finite),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
