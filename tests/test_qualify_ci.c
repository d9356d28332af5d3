/*
 * test_qualify_ci.c - `dsv4q qualify` as a CI step (cli/qreport.c,
 * cli/junit.c), through the front door as the binary runs it:
 *
 *  - mutant:attn_sink_missing (attention without its sink logit) exits 1;
 *    every stdout line with FAIL carries a case key of an attention
 *    operator, the failed: list names exactly the failing cases, and the
 *    JUnit report read by junitparser (PyPI, tests/py/check_junit.py) has
 *    one testcase per case (the count comes from the case table) with
 *    failures only in sparse_attn / window_attn_decode, each naming
 *    metric, value, bound and level;
 *  - cpu-ref's report has the same case count and no failure;
 *  - -x stops after the first failing case; --case GLOB / substring pick
 *    the cases the pattern names (counted here with strncmp on the table);
 *    a pattern that matches nothing is exit 2; --failures-only prints no
 *    pass row;
 *  - a plugin implementing 3 operators (tests/backends/good.c) passes as
 *    "PASS (partial: ...)" by default, fails with --require-all and with
 *    --require of an operator it lacks, passes with --require of its own;
 *  - an operator some of whose shapes the backend declines (the worked
 *    engine, examples/engine_v2.c) is "partial (J of N)", not "not
 *    implemented", and the operators are listed in the operator table's
 *    order whatever the order of --case;
 *  - issue 29: act_q8_0 declared on the FP8 extreme linear case overflows
 *    the Q8_0 F16 scale, so the reference is NaN at both widths: the case
 *    is "not checkable" with the reason (table, summary, JSON, JUnit
 *    skipped), never a pass, and fails --require-all / --require linear.
 * Expected failing operators come from what the mutant breaks (the sink
 * only enters attention), not from a previous run.
 */
#include "tests/testutil.h"
#include "harness/ops/ops.h"
#include <fcntl.h>
#include <unistd.h>
#include "cli/cmdtab.h"
#include "harness/cases/cases.h"

static char out[1 << 20];
static char dir[] = "/tmp/dsv4q-qci-XXXXXX", db[300], junit[300];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir)) return -1;
    snprintf(db, sizeof db, "%s/r.db", dir);
    snprintf(junit, sizeof junit, "%s/report.xml", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* dsv4q ARGS (NULL-terminated) with stdout captured into out; stderr kept. */
static int dsv4q(const char *a1, ...)
{
    char *argv[32] = {"dsv4q"};
    int argc = 1;
    va_list ap;
    va_start(ap, a1);
    for (const char *a = a1; a && argc < 31; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    fflush(stdout);
    char path[400];
    snprintf(path, sizeof path, "%s/stdout", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    int so = dup(1);
    dup2(fd, 1);
    int rc = dsv4q_cli_main(argc, argv);
    fflush(stdout);
    dup2(so, 1);
    close(so);
    ssize_t n = pread(fd, out, sizeof out - 1, 0);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    return rc;
}

static int flash_cases(const char *prefix)
{
    int n = 0;
    for (int i = 0; i < dsv4q_case_count(); i++)
        n += (dsv4q_case_at(i)->sets & DSV4Q_CASE_SET_FLASH) && !strncmp(dsv4q_case_at(i)->key, prefix, strlen(prefix));
    return n;
}

static int is_attn(const char *line)
{
    return !strncmp(line, "sparse_attn(", 12) || !strncmp(line, "window_attn_decode(", 19);
}

static void mutant_fails_with_case_keys(void **state)
{
    (void)state;
    assert_int_equal(dsv4q("qualify", "--backend", "mutant:attn_sink_missing", "-q", "--db", db, "--junit", junit, NULL), 1);
    int fails = 0, listed = 0;
    for (char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        size_t len = strcspn(l, "\n");
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)len, l);
        if (!strncmp(line, "failed: ", 8)) {
            if (!strchr(line, '(')) continue;                       /* "failed: N cases of B" */
            listed++;
            assert_true(is_attn(line + 8));
            continue;
        }
        if (!strstr(line, "FAIL")) continue;
        if (strstr(line, "-> FAIL")) continue;                        /* the summary */
        fails++;
        if (!is_attn(line)) fail_msg("FAIL row without an attention case key: %s", line);
    }
    assert_true(fails >= 1);
    assert_true(listed >= 1 && listed <= flash_cases("sparse_attn(") + flash_cases("window_attn_decode("));
    assert_non_null(strstr(out, "-> FAIL"));
    assert_int_equal(access(junit, R_OK), 0);
}

/* A transposed hc_post output fails more than one metric of one case: the
 * second FAIL row must carry the key too (`grep FAIL` keeps it). */
static void second_metric_row_has_its_key(void **state)
{
    (void)state;
    assert_int_equal(dsv4q("qualify", "--backend", "mutant:hc_post_transposed", "-q", "--db", db, "--case", "hc_post(",
                           "--failures-only", NULL), 1);
    int rows = 0, cases = 0;
    for (char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        size_t len = strcspn(l, "\n");
        if (len >= 4 && !strncmp(l + len - 4, "FAIL", 4) && !(l[0] >= '0' && l[0] <= '9')) {   /* not the summary */
            rows++;
            if (strncmp(l, "hc_post(", 8)) fail_msg("FAIL row without its case key: %.*s", (int)len, l);
        }
        cases += !strncmp(l, "failed: hc_post(", 16);
    }
    assert_true(cases >= 1);
    assert_true(rows > cases);
}

static int have_junitparser(void)
{
    return system("python3 -c 'import junitparser' >/dev/null 2>&1") == 0;
}

static void junit_reads_with_junitparser(void **state)
{
    (void)state;
    if (!have_junitparser()) {
        print_message("python3 junitparser not installed (make pydeps): skipped\n");
        skip();
    }
    char cmd[800];
    int n = flash_cases("");
    assert_int_equal(dsv4q("qualify", "--backend", "mutant:attn_sink_missing", "-q", "--db", db, "--junit", junit, NULL), 1);
    snprintf(cmd, sizeof cmd, "python3 tests/py/check_junit.py '%s' %d sparse_attn,window_attn_decode 1", junit, n);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(dsv4q("qualify", "--backend", "cpu-ref", "-q", "--db", db, "--junit", junit, NULL), 0);
    snprintf(cmd, sizeof cmd, "python3 tests/py/check_junit.py '%s' %d - 0", junit, n);
    assert_int_equal(system(cmd), 0);
    /* the checker can fail: the mutant's report with no failure allowed */
    assert_int_equal(dsv4q("qualify", "--backend", "mutant:attn_sink_missing", "-q", "--db", db, "--junit", junit, NULL), 1);
    snprintf(cmd, sizeof cmd, "python3 tests/py/check_junit.py '%s' %d - 0 >/dev/null 2>&1", junit, n);
    assert_int_not_equal(system(cmd), 0);
}

static void stop_filters_failures_only(void **state)
{
    (void)state;
    /* -x: the first attention case fails, nothing after it runs */
    assert_int_equal(dsv4q("qualify", "--backend", "mutant:attn_sink_missing", "-q", "--db", db, "-x", "--case",
                           "*attn*", NULL), 1);
    assert_non_null(strstr(out, "\n1 cases: 0 pass, 1 fail"));
    char want[64];
    snprintf(want, sizeof want, "\n%d cases: %d pass", flash_cases("rmsnorm("), flash_cases("rmsnorm("));
    assert_int_equal(dsv4q("qualify", "--backend", "cpu-ref", "-q", "--db", db, "--case", "rmsnorm*", NULL), 0);
    assert_non_null(strstr(out, want));
    assert_int_equal(dsv4q("qualify", "--backend", "cpu-ref", "-q", "--db", db, "--case", "rmsnorm", NULL), 0);
    assert_non_null(strstr(out, want));
    assert_int_equal(dsv4q("qualify", "--backend", "cpu-ref", "-q", "--db", db, "--case", "no-such-case", NULL), 2);
    assert_int_equal(dsv4q("qualify", "--backend", "mutant:attn_sink_missing", "-q", "--db", db, "--failures-only",
                           "--case", "attn", NULL), 1);
    assert_null(strstr(out, " pass\n"));
    assert_non_null(strstr(out, "FAIL\n"));
}

static void skips_are_a_third_state(void **state)
{
    (void)state;
    const char *so = DSV4Q_TEST_BUILD "/plugins/good.so";
    if (access(so, R_OK)) {
        print_message("%s not built: skipped\n", so);
        skip();
    }
    assert_int_equal(dsv4q("qualify", "--backend", so, "-q", "--db", db, NULL), 0);
    assert_non_null(strstr(out, "-> PASS (partial: "));
    assert_non_null(strstr(out, "not implemented: linear"));
    assert_int_equal(dsv4q("qualify", "--backend", so, "-q", "--db", db, "--require-all", NULL), 1);
    assert_non_null(strstr(out, "failed: linear("));
    assert_int_equal(dsv4q("qualify", "--backend", so, "-q", "--db", db, "--require", "linear", NULL), 1);
    assert_int_equal(dsv4q("qualify", "--backend", so, "-q", "--db", db, "--require", "rmsnorm", NULL), 0);
}

/* An operator with some shapes declined is "partial (J of N)". engine_v2
 * declines the head linears (role head: the fmt=f32 cases) and an FP8
 * linear whose input overflows a Q8_0 F16 scale (the extreme recipe), and
 * implements neither rope nor qhead_norm; J and N come from the case
 * table's keys. */
static void partial_operators_say_so(void **state)
{
    (void)state;
    const char *so = DSV4Q_TEST_BUILD "/plugins/engine_v2.so";
    if (access(so, R_OK)) {
        print_message("%s not built: skipped\n", so);
        skip();
    }
    int n = 0, declined = 0;
    for (int i = 0; i < dsv4q_case_count(); i++) {
        const char *k = dsv4q_case_at(i)->key;
        if (!(dsv4q_case_at(i)->sets & DSV4Q_CASE_SET_FLASH) || strncmp(k, "linear(", 7)) continue;
        n++;
        declined += strstr(k, "fmt=f32") || (strstr(k, "fmt=fp8") && strstr(k, "recipe=extreme"));
    }
    assert_true(declined > 0 && declined < n);
    /* patterns in reverse table order: the summary keeps the table's */
    assert_int_equal(dsv4q("qualify", "--backend", so, "-q", "--db", db, "--case", "rope(*", "--case", "qhead_norm(*",
                           "--case", "linear(*", NULL),
                     0);
    char want[128];
    snprintf(want, sizeof want, "; linear partial (%d of %d); not implemented: qhead_norm rope)", n - declined, n);
    if (!strstr(out, want)) fail_msg("summary lacks '%s':\n%s", want, out);
    assert_null(strstr(out, "not implemented: linear"));
    assert_int_equal(
        dsv4q("qualify", "--backend", so, "-q", "--db", db, "--case", "linear(*", "--require", "linear", NULL), 1);
    assert_non_null(strstr(out, "FAIL (required, declined)"));
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 18];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Issue 29's vacuous pass. The FP8 extreme linear case, judged as
 * act_q8_0 (GGML Q8_0 activations, F16 block scale): each of its rows has
 * a 32-block whose amax exceeds 127 x 65504 (checked below on the case's
 * own inputs), so the block scale amax/127 is inf in F16 and the block's
 * zero codes (|x| < amax/254, also checked) decode to 0 x inf = NaN: every
 * one of the s x N outputs is NaN at both widths. Once the candidate's NaN
 * scored NRMS 0 and PASS. */
static void reference_not_finite_is_not_checkable(void **state)
{
    (void)state;
    const char *key = NULL;
    for (int i = 0; i < dsv4q_case_count() && !key; i++) {
        const char *k = dsv4q_case_at(i)->key;
        if ((dsv4q_case_at(i)->sets & DSV4Q_CASE_SET_FLASH) && !strncmp(k, "linear(", 7) && strstr(k, "fmt=fp8") &&
            strstr(k, "recipe=extreme"))
            key = k;
    }
    assert_non_null(key);
    dsv4q_case c;
    char err[512];
    assert_int_equal(dsv4q_case_build(&c, key, err, sizeof err), 0);
    const long s = (long)c.in[0].shape[0], K = (long)c.in[0].shape[1], N = (long)c.in[1].shape[0];
    const float *x = c.in[0].data;
    for (long t = 0; t < s; t++) {
        int nan_block = 0;
        for (long b = 0; b + 32 <= K && !nan_block; b += 32) {
            float amax = 0;
            for (long i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[t * K + b + i]));
            int zero = 0;
            for (long i = 0; i < 32; i++) zero |= fabsf(x[t * K + b + i]) < amax / 254;
            nan_block = amax / 127 > 65504 && zero;
        }
        if (!nan_block) fail_msg("row %ld of %s has no block with an inf F16 scale and a zero code", t, key);
    }
    dsv4q_case_free(&c);
    char want[160], json[300];
    snprintf(want, sizeof want,
             "not checkable: reference not finite: oracle-f64 has %ld NaN, first at [0,0]; "
             "oracle-f32 has %ld NaN, first at [0,0]",
             s * N, s * N);
    snprintf(json, sizeof json, "%s/q.json", dir);
    /* with a bf16 linear, which act_q8_0 leaves alone and cpu-ref passes */
    assert_int_equal(dsv4q("qualify", "--backend", "cpu-ref", "--profile", "source:act_q8_0", "-q", "--db", db,
                           "--case", key, "--case", "linear(*fmt=bf16*", "--junit", junit, "--json", json, NULL),
                     0);
    if (!strstr(out, want)) fail_msg("no '%s' in:\n%s", want, out);
    for (char *l = out; (l = strstr(l, key)); l += strlen(key)) /* no row of the case passes */
        if (!strncmp(l + strcspn(l, "\n") - 4, "pass", 4)) fail_msg("a row of %s passes:\n%s", key, out);
    assert_non_null(strstr(out, ", 1 not checkable -> PASS (partial: "));
    assert_non_null(strstr(out, "; linear partial (1 of 2); not checkable: linear (1))"));
    const char *xml = slurp(junit);
    const char *tc = strstr(xml, key);
    assert_non_null(tc);
    assert_non_null(strstr(tc, "<skipped message=\"reference not finite: oracle-f64 has"));
    assert_true(strstr(tc, "<skipped") < strstr(tc, "</testcase>"));
    const char *js = slurp(json);
    assert_non_null(strstr(js, "\"verdict\":\"not checkable\""));
    assert_non_null(strstr(js, "\"not_checkable\":1"));
    /* required: a failure naming the reason */
    assert_int_equal(dsv4q("qualify", "--backend", "cpu-ref", "--profile", "source:act_q8_0", "-q", "--db", db,
                           "--case", key, "--case", "linear(*fmt=bf16*", "--require-all", NULL),
                     1);
    char failed[400];
    snprintf(failed, sizeof failed, "failed: %s: not checkable (required): reference not finite: oracle-f64 has", key);
    assert_non_null(strstr(out, failed));
    assert_non_null(strstr(out, "FAIL (required, not checkable): reference not finite"));
    assert_int_equal(dsv4q("qualify", "--backend", "cpu-ref", "--profile", "source:act_q8_0", "-q", "--db", db,
                           "--case", key, "--require", "linear", NULL),
                     1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mutant_fails_with_case_keys),
        cmocka_unit_test(second_metric_row_has_its_key),
        cmocka_unit_test(junit_reads_with_junitparser),
        cmocka_unit_test(stop_filters_failures_only),
        cmocka_unit_test(skips_are_a_third_state),
        cmocka_unit_test(partial_operators_say_so),
        cmocka_unit_test(reference_not_finite_is_not_checkable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
