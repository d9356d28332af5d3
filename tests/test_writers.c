/*
 * test_writers.c - one atomic writer, one generator (issue 22, item 5).
 *
 * Every file dsv4q publishes goes through base/file.h's atomic writer, so
 * every writer honours DSV4Q_FAULT_WRITE: a safetensors file (captures,
 * goldens' payload images, `run --out`), a synthetic checkpoint, a golden
 * record and a JUnit report all fail with the injected errno, leave no file
 * at the destination and no temporary beside it. And base/rng.h is pinned
 * to the published bits of splitmix64 and FNV-1a 64, so a "harmless" edit
 * there fails here before it moves every golden.
 */
#include "tests/testutil.h"
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/file.h"
#include "base/rng.h"
#include "cli/junit.h"
#include "goldens/golden.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/synth.h"
#include "tests/tinyfix.h"

static char root[256];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dsv4q-test-writers-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("DSV4Q_FAULT_WRITE");
    return tinyfix_remove(root);
}

#define ASSERT_HAS(s, needle)                                                                                          \
    do {                                                                                                               \
        if (!strstr((s), (needle))) fail_msg("'%s' lacks '%s'", (s), (needle));                                        \
    } while (0)

/* Nothing in dir but the names listed (NULL-terminated): no temporaries. */
static void assert_only(const char *dir, const char *const *names)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        int ok = 0;
        for (int i = 0; names && names[i]; i++) ok |= !strcmp(line, names[i]);
        if (!ok) fail_msg("%s holds an unexpected entry '%s'", dir, line);
    }
    pclose(p);
}

static dsv4q_st_writer *one_tensor(void)
{
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    assert_non_null(w);
    float v[4] = {1, 2, 3, 4};
    char err[256];
    assert_int_equal(dsv4q_st_writer_add(w, "x", DSV4Q_DT_F32, 1, (int64_t[]){4}, v, sizeof v, err, sizeof err), 0);
    return w;
}

static void safetensors_writer_honours_fault(void **state)
{
    (void)state;
    char d[300], p[400], err[1024];
    snprintf(d, sizeof d, "%s/st", root);
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(p, sizeof p, "%s/a.safetensors", d);
    setenv("DSV4Q_FAULT_WRITE", "ENOSPC", 1);
    assert_int_equal(dsv4q_st_writer_write(one_tensor(), p, err, sizeof err), -1);
    ASSERT_HAS(err, "safetensors writer: ");
    ASSERT_HAS(err, "No space left on device");
    assert_int_equal(access(p, F_OK), -1);
    assert_only(d, NULL);
    unsetenv("DSV4Q_FAULT_WRITE");
    assert_int_equal(dsv4q_st_writer_write(one_tensor(), p, err, sizeof err), 0);
    dsv4q_st *st;
    assert_int_equal(dsv4q_st_open(&st, p, err, sizeof err), 0);
    assert_int_equal(dsv4q_st_count(st), 1);
    dsv4q_st_close(st);
    /* "-" is a file of that name, never standard output */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(d), 0);
    assert_int_equal(dsv4q_st_writer_write(one_tensor(), "-", err, sizeof err), 0);
    assert_int_equal(access("-", F_OK), 0);
    assert_int_equal(chdir(cwd), 0);
}

static void synth_honours_fault(void **state)
{
    (void)state;
    char d[300], out[400], err[1024];
    snprintf(d, sizeof d, "%s/synth", root);
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(out, sizeof out, "%s/tiny", d);
    dsv4q_config cfg;
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny", err, sizeof err), 0);
    setenv("DSV4Q_FAULT_WRITE", "EIO", 1);
    assert_int_equal(dsv4q_synth_write(&cfg, 1, out, 1, err, sizeof err), -1);
    unsetenv("DSV4Q_FAULT_WRITE");
    ASSERT_HAS(err, "synth: ");
    ASSERT_HAS(err, "Input/output error");
    assert_only(d, NULL);   /* no output directory, no temporary directory */
}

static void golden_record_honours_fault(void **state)
{
    (void)state;
    char d[300], err[1024];
    snprintf(d, sizeof d, "%s/gold", root);
    setenv("DSV4Q_FAULT_WRITE", "ENOSPC", 1);
    assert_int_equal(dsv4q_golden_record(d, "hadamard", NULL, err, sizeof err), DSV4Q_GOLDEN_ERROR);
    unsetenv("DSV4Q_FAULT_WRITE");
    ASSERT_HAS(err, "No space left on device");
    static const char *const only_data[] = {"data", NULL};
    assert_only(d, only_data);
    char dd[400];
    snprintf(dd, sizeof dd, "%s/data", d);
    assert_only(dd, NULL);
    /* and without the fault: payload + manifest, and they check */
    assert_int_equal(dsv4q_golden_record(d, "hadamard", NULL, err, sizeof err), DSV4Q_GOLDEN_OK);
    static const char *const both[] = {"data", DSV4Q_GOLDEN_MANIFEST, NULL};
    assert_only(d, both);
    assert_int_equal(dsv4q_golden_check(d, "hadamard", NULL), DSV4Q_GOLDEN_OK);
}

static void junit_honours_fault(void **state)
{
    (void)state;
    char d[300], p[400], err[1024];
    snprintf(d, sizeof d, "%s/junit", root);
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(p, sizeof p, "%s/report.xml", d);
    for (int fault = 1; fault >= 0; fault--) {
        dsv4q_junit *j;
        assert_int_equal(dsv4q_junit_open(&j, p, err, sizeof err), 0);
        dsv4q_junit_suite(j, "s");
        dsv4q_junit_case(j, "c", "n", 0.5, DSV4Q_JUNIT_FAILURE, "over <bound>", "details");
        if (fault) setenv("DSV4Q_FAULT_WRITE", "ENOSPC", 1);
        int rc = dsv4q_junit_close(j, err, sizeof err);
        unsetenv("DSV4Q_FAULT_WRITE");
        if (fault) {
            assert_int_equal(rc, -1);
            ASSERT_HAS(err, "--junit ");
            ASSERT_HAS(err, "No space left on device");
            assert_only(d, NULL);
        } else {
            assert_int_equal(rc, 0);
            char *b;
            size_t n;
            assert_int_equal(dsv4q_file_read_all(p, "report", 1 << 20, &b, &n, err, sizeof err), 0);
            ASSERT_HAS(b, "failures=\"1\"");
            ASSERT_HAS(b, "message=\"over &lt;bound&gt;\"");
            free(b);
        }
    }
}

/* base/rng.h against the published values: splitmix64 seeded 0 (Vigna's
 * splitmix64.c) and the FNV-1a 64 test vectors (draft-eastlake-fnv). */
static void rng_bits_are_the_published_ones(void **state)
{
    (void)state;
    uint64_t s = 0;
    assert_true(dsv4q_splitmix64(&s) == 0xE220A8397B1DCDAFull);
    assert_true(dsv4q_splitmix64(&s) == 0x6E789E6AA1B965F4ull);
    assert_true(dsv4q_splitmix64(&s) == 0x06C45D188009454Full);
    assert_true(s == 3 * DSV4Q_RNG_GAMMA);
    assert_true(dsv4q_mix64(0) == 0);
    assert_true(dsv4q_fnv1a64("") == 0xCBF29CE484222325ull);
    assert_true(dsv4q_fnv1a64("a") == 0xAF63DC4C8601EC8Cull);
    assert_true(dsv4q_fnv1a64("foobar") == 0x85944171F73967E8ull);
    /* bytes are unsigned: a high byte hashes as 0xC3, not as a negative char */
    assert_true(dsv4q_fnv1a64("\xc3") == ((0xCBF29CE484222325ull ^ 0xC3u) * 0x100000001B3ull));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(safetensors_writer_honours_fault), cmocka_unit_test(synth_honours_fault),
        cmocka_unit_test(golden_record_honours_fault),      cmocka_unit_test(junit_honours_fault),
        cmocka_unit_test(rng_bits_are_the_published_ones),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
