/*
 * test_ci_examples.c - the CI examples of docs/ci.md run as written.
 *
 * tests/py/ci_examples.py reads examples/ci/github-actions.yml and
 * examples/ci/gitlab-ci.yml with PyYAML and runs every command line that is
 * not set-up (golden check, qualify with --junit/--json, whole model on
 * tiny, the comparison with the previous report, receipts verify) in a
 * scratch directory; each must exit 0 for the built-in cpu-ref. Then the
 * same lines with BACKEND=mutant:attn_sink_missing must fail (the gate
 * step is a gate), and examples/ci/compare_qualify.py must report a
 * regression from cpu-ref's report to the mutant's and none from a report
 * to itself. Skipped when python3 lacks PyYAML (make pydeps; CI=true makes
 * that a failure in tests/run_all.sh).
 */
#include "tests/testutil.h"
#include <unistd.h>

static char dir[] = "/tmp/dsv4q-ciex-XXXXXX";

static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void examples_run_as_written(void **state)
{
    (void)state;
    if (system("python3 -c 'import yaml' >/dev/null 2>&1") != 0) {
        print_message("python3 PyYAML not installed (make pydeps): skipped\n");
        skip();
    }
    assert_non_null(mkdtemp(dir));
    assert_int_equal(access("build/dsv4q", X_OK), 0);
    assert_int_equal(sh("python3 tests/py/ci_examples.py . '%s/ok'%s", dir, ""), 0);
    /* the gate fails for a broken kernel */
    assert_int_not_equal(sh("python3 tests/py/ci_examples.py . '%s/bad' mutant:attn_sink_missing%s", dir, ""), 0);
    /* the comparison sees the regression, and no regression against itself */
    char good[400], bad[400];
    snprintf(good, sizeof good, "%s/ok/ci/qualify.json", dir);
    snprintf(bad, sizeof bad, "%s/mutant.json", dir);
    assert_int_equal(sh("./build/dsv4q qualify --backend mutant:attn_sink_missing -q --db %s.db --json %s >/dev/null 2>&1",
                        bad, bad), 1);
    assert_int_equal(sh("python3 examples/ci/compare_qualify.py '%s' '%s'", good, good), 0);
    assert_int_equal(sh("python3 examples/ci/compare_qualify.py '%s' '%s'", good, bad), 1);
    sh("rm -rf '%s'%s", dir, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(examples_run_as_written)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
