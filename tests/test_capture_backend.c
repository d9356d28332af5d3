/*
 * test_capture_backend.c - `dsv4q capture --backend B` (harness/
 * capture_backend.h): THE forward pass run at f32 with B as its operator
 * provider, on a synthesized `tiny` (prefill 18: past the window of 16 and
 * a ratio-4 block; 2 decodes).
 *
 *  - the provider glue: --backend oracle-f32 writes the same tensors, bit
 *    for bit, as the oracle's own f32 capture (--width f32), with no
 *    fallbacks and decode attention through WINDOW_ATTN_DECODE;
 *  - cpu-ref's capture replays with every stage passing; an attention
 *    mutant (attn_sink_missing) fails exactly the attn stages, which the
 *    old splice (attention always the oracle's) could not show; a hc_post
 *    mutant still fails its hc_*_post stages only;
 *  - a partial engine (tests/backends/good.c: rmsnorm, hc_post, topk only)
 *    runs in an isolated child, its oracle-f32 fallbacks named on stderr
 *    and in every call's metadata; a crashing plugin is a clear error and
 *    leaves no call files; --width f64 with --backend is refused.
 * Expected values come from the oracle's own capture, the plugins' declared
 * caps and the mutants' documented defects, not from the glue under test.
 */
#include "tests/testutil.h"
#include <fcntl.h>
#include <jansson.h>
#include <omp.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "gates/gates.h"
#include "harness/capture/capture.h"
#include "harness/capture/capture_backend.h"
#include "harness/capture/replay.h"
#include "io/model.h"
#include "oracle/stages.h"
#include "receipts/capture_pins.h"
#include "tests/tinyfix.h"

static char root[256], tiny[300], dbp[300];
static dsv4q_model *M;
static dsv4q_gates G;
static char csha[65], wsha[65];

static int setup(void **state)
{
    (void)state;
    char err[1024];
    if (tinyfix_make(root, sizeof root, tiny, sizeof tiny, "capture-backend", "tiny", 1)) return -1;
    snprintf(dbp, sizeof dbp, "%s/r.db", root);
    setenv("DSV4Q_DB", dbp, 1);
    omp_set_num_threads(1);   /* results do not depend on it; tiny is too small to pay */
    if (dsv4q_model_open(&M, tiny, err, sizeof err) || dsv4q_capture_pins(tiny, csha, wsha, NULL, err, sizeof err) ||
        dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
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

/* dsv4q capture of tiny (prefill 18, 2 decodes) into root/NAME with the
 * extra options (at most 4, NULL-terminated); its stderr into errbuf (may
 * be NULL). Returns the exit code. */
static int capture(const char *name, char *errbuf, size_t errlen, const char *a1, const char *a2, const char *a3,
                   const char *a4)
{
    char dir[400], ef[400];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(ef, sizeof ef, "%s/stderr.txt", root);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    int nul = open("/dev/null", O_WRONLY), efd = open(ef, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(nul, 1);
    dup2(efd, 2);
    int rc = tinyfix_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "18", "--decode", "2", "--out",
                          dir, "-q", a1, a2, a3, a4, NULL);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    close(nul);
    close(efd);
    if (errbuf) {
        FILE *f = fopen(ef, "r");
        size_t n = f ? fread(errbuf, 1, errlen - 1, f) : 0;
        errbuf[n] = 0;
        if (f) fclose(f);
    }
    return rc;
}

static dsv4q_capture *open_cap(const char *name)
{
    char dir[400], err[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    dsv4q_capture *cap = NULL;
    if (dsv4q_capture_open(&cap, dir, &M->cfg, csha, wsha, err, sizeof err)) fprintf(stderr, "open: %s\n", err);
    assert_non_null(cap);
    return cap;
}

static void replay(const char *name, dsv4q_replay *res, int whole)
{
    char err[1024];
    dsv4q_capture *cap = open_cap(name);
    dsv4q_replay_opts o = {.gates = &G, .whole_model = whole, .quiet = 1};
    int rc = dsv4q_replay_run(res, M, cap, &o, err, sizeof err);
    if (rc) fprintf(stderr, "replay: %s\n", err);
    assert_int_equal(rc, 0);
    dsv4q_capture_close(cap);
}

/* The mtp stage is optional in a capture (capture does not run MTP). */
static int optional_absent(const dsv4q_replay_stage *s)
{
    return dsv4q_stage_get(s->stage)->optional && s->verdict == DSV4Q_RV_ABSENT;
}

/* 1. the provider glue: oracle-f32 through the ABI == the f32 oracle */
static void oracle_f32_backend_is_bit_identical(void **state)
{
    (void)state;
    assert_int_equal(capture("o32", NULL, 0, "--width", "f32", NULL, NULL), 0);
    assert_int_equal(capture("of32", NULL, 0, "--backend", "oracle-f32", NULL, NULL), 0);
    dsv4q_capture *a = open_cap("o32"), *b = open_cap("of32");
    assert_int_equal(a->ncalls, 3);
    assert_int_equal(b->ncalls, a->ncalls);
    long ncmp = 0;
    for (int c = 0; c < a->ncalls; c++) {
        const dsv4q_st *sa = a->calls[c].st, *sb = b->calls[c].st;
        assert_int_equal(dsv4q_st_count(sb), dsv4q_st_count(sa));
        for (size_t i = 0; i < dsv4q_st_count(sa); i++) {
            const dsv4q_st_tensor *ta = dsv4q_st_at(sa, i), *tb = dsv4q_st_find(sb, ta->name);
            assert_non_null(tb);
            assert_int_equal(tb->dtype, ta->dtype);
            assert_int_equal(tb->nbytes, ta->nbytes);
            if (memcmp(ta->data, tb->data, ta->nbytes)) fprintf(stderr, "call %d: %s differs\n", c, ta->name);
            assert_memory_equal(ta->data, tb->data, ta->nbytes);
            ncmp++;
        }
        assert_string_equal(dsv4q_st_meta(sb, DSV4Q_CAPTURE_META_FALLBACKS), "{}");
        assert_string_equal(dsv4q_st_meta(sb, DSV4Q_CAPTURE_META_DECODE), "window_attn_decode");
        assert_string_equal(dsv4q_st_meta(sb, "backend"), "oracle-f32");
        assert_null(dsv4q_st_meta(sa, DSV4Q_CAPTURE_META_FALLBACKS));   /* the oracle's own capture: no backend */
    }
    assert_int_equal(ncmp, 3 * 133);   /* every stage tensor of tiny's 5 layers, 3 calls */
    assert_string_equal(b->engine, "oracle-f32");
    dsv4q_capture_close(a);
    dsv4q_capture_close(b);
}

/* 2. cpu-ref passes; each mutant fails its own stages only */
static void mutants_fail_their_stages(void **state)
{
    (void)state;
    dsv4q_replay r;
    assert_int_equal(capture("cpuref", NULL, 0, "--backend", "cpu-ref", NULL, NULL), 0);
    replay("cpuref", &r, 1);
    if (dsv4q_replay_status(&r)) dsv4q_replay_print(stderr, &r, &G, 0);
    assert_int_equal(r.nfail, 0);
    assert_int_equal(r.nunc, 0);
    double se = 0;   /* cpu-ref's own arithmetic: not bit-identical to the oracle */
    for (int i = 0; i < r.nst; i++) se += r.st[i].val[0].se;
    assert_true(se > 0);
    assert_int_equal(dsv4q_replay_status(&r), 0);
    dsv4q_replay_free(&r);

    /* attention is B's: the missing sink fails every layer's attn stage
     * (the old splice kept the oracle's attention and passed them all) */
    assert_int_equal(capture("sink", NULL, 0, "--backend", "mutant:attn_sink_missing", NULL, NULL), 0);
    replay("sink", &r, 0);
    int nattn = 0;
    for (int i = 0; i < r.nst; i++) {
        const dsv4q_replay_stage *s = &r.st[i];
        if (optional_absent(s)) continue;
        if (s->stage == DSV4Q_STAGE_ATTN) nattn += s->verdict == DSV4Q_RV_FAIL;
        else assert_int_equal(s->verdict, DSV4Q_RV_PASS);
    }
    assert_int_equal(nattn, M->cfg.n_layers);
    assert_int_equal(dsv4q_replay_status(&r), 1);
    dsv4q_replay_free(&r);

    assert_int_equal(capture("hcpost", NULL, 0, "--backend", "mutant:hc_post_transposed", NULL, NULL), 0);
    replay("hcpost", &r, 0);
    int nhc = 0;
    for (int i = 0; i < r.nst; i++) {
        const dsv4q_replay_stage *s = &r.st[i];
        if (optional_absent(s)) continue;
        int hcpost = s->stage == DSV4Q_STAGE_HC_ATTN_POST || s->stage == DSV4Q_STAGE_HC_FFN_POST;
        if (!hcpost) assert_int_equal(s->verdict, DSV4Q_RV_PASS);
        nhc += hcpost && s->verdict == DSV4Q_RV_FAIL;
    }
    /* every hc_post but layer 0's attention one, whose hc streams are four
     * copies of the embedding: a transposed comb mixes equal rows */
    assert_int_equal(nhc, 2 * M->cfg.n_layers - 1);
    assert_int_equal(dsv4q_replay_find(&r, DSV4Q_STAGE_HC_ATTN_POST, 0)->verdict, DSV4Q_RV_PASS);
    dsv4q_replay_free(&r);
}

/* 3. a partial plugin: fallbacks reported; a crash is an error, no files */
static void partial_plugin_reports_fallbacks(void **state)
{
    (void)state;
    char err[8192];
    const char *good = DSV4Q_TEST_BUILD "/plugins/good.so";   /* rmsnorm, hc_post, topk only (ABI v1) */
    assert_int_equal(capture("good", err, sizeof err, "--backend", good, NULL, NULL), 0);
    if (!strstr(err, "ran on oracle-f32")) fprintf(stderr, "stderr was: %s\n", err);
    assert_non_null(strstr(err, "ran on oracle-f32"));
    assert_non_null(strstr(err, "linear "));
    assert_non_null(strstr(err, "sparse_attn "));
    dsv4q_capture *cap = open_cap("good");
    for (int c = 0; c < cap->ncalls; c++) {
        const dsv4q_st *st = cap->calls[c].st;
        json_error_t je;
        json_t *fb = json_loads(dsv4q_st_meta(st, DSV4Q_CAPTURE_META_FALLBACKS), 0, &je);
        assert_non_null(fb);
        assert_true(json_integer_value(json_object_get(fb, "linear")) > 0);
        assert_true(json_integer_value(json_object_get(fb, "hc_pre")) > 0);
        assert_true(json_integer_value(json_object_get(fb, "sparse_attn")) > 0);
        assert_null(json_object_get(fb, "rmsnorm"));   /* in its caps: the plugin's */
        assert_null(json_object_get(fb, "hc_post"));
        json_decref(fb);
        assert_string_equal(dsv4q_st_meta(st, DSV4Q_CAPTURE_META_DECODE), "sparse_attn");   /* no window op */
    }
    assert_string_equal(cap->engine, "test-good");
    dsv4q_capture_close(cap);
    dsv4q_replay r;
    replay("good", &r, 1);
    assert_int_equal(r.nfail + r.nunc, 0);
    dsv4q_replay_free(&r);

    /* a crash in the child: exit 2 naming the op, and no call files left
     * behind in a directory that held a capture */
    assert_int_equal(capture("good", err, sizeof err, "--backend", DSV4Q_TEST_BUILD "/plugins/crash.so", NULL, NULL),
                     2);
    assert_non_null(strstr(err, "SIGSEGV"));
    assert_non_null(strstr(err, "op rmsnorm, layer 0"));
    char f[500];
    snprintf(f, sizeof f, "%s/good/call-0000.safetensors", root);
    assert_int_not_equal(access(f, F_OK), 0);

    assert_int_equal(capture("f64", err, sizeof err, "--backend", "cpu-ref", "--width", "f64"), 2);
    assert_non_null(strstr(err, "F32"));
    assert_int_equal(capture("nope", err, sizeof err, "--backend", "no-such-backend", NULL, NULL), 2);
    assert_non_null(strstr(err, "not a built-in backend"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(oracle_f32_backend_is_bit_identical),
        cmocka_unit_test(mutants_fail_their_stages),
        cmocka_unit_test(partial_plugin_reports_fallbacks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
