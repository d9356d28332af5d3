/*
 * test_cmdtab.c - the command table's front door (cli/cmdtab.c), driven
 * through dsv4q_cli_main exactly as the binary is:
 *
 *  - every command and mode: `CMD [MODE] --help` and `help CMD` exit 0,
 *    `CMD [MODE] --no-such-option` exits 2;
 *  - the refusals the table exists for, each an exit 2 before any work:
 *    an option of another command (qualify --profile), of another mode
 *    (qualify --list --backend), two modes at once, a missing required
 *    option (run without --width), a duplicated single-valued option, two
 *    exclusive options (--tokens with --prompt-len), a stray positional;
 *  - `--version` names the compiler and the reproducibility flags, and
 *    they include -ffp-contract=off;
 *  - the README's command table is byte-identical to `help --markdown`
 *    (stale README = failure; `make docs` regenerates it).
 * Expected statuses come from the contract (0 help, 2 usage), not from
 * running the code.
 */
#include "tests/testutil.h"
#include <fcntl.h>
#include <unistd.h>
#include "cli/cmdtab.h"

/* Run the front door with stdout and stderr sent to `cap` (NULL: dropped). */
static int front(char *cap, size_t caplen, const char *a1, ...)
{
    char *argv[16] = {"dsv4q"};
    int argc = 1;
    va_list ap;
    va_start(ap, a1);
    for (const char *a = a1; a && argc < 15; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    char path[] = "/tmp/dsv4q-cmdtab-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int so = dup(1), se = dup(2);
    dup2(fd, 1);
    dup2(fd, 2);
    int rc = dsv4q_cli_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    if (cap) {
        ssize_t n = pread(fd, cap, caplen - 1, 0);
        cap[n > 0 ? n : 0] = 0;
    }
    close(fd);
    unlink(path);
    return rc;
}

static const char *mode_word(const dsv4q_mode *m) { return m->select ? m->select : NULL; }

static void every_command_has_help(void **state)
{
    (void)state;
    int n;
    const dsv4q_mode *t = dsv4q_cli_modes(&n);
    assert_true(n >= 15);
    static char out[65536];
    for (int i = 0; i < n; i++) {
        const char *w = mode_word(&t[i]);
        int rc = w ? front(out, sizeof out, t[i].cmd, w, "--help", NULL) : front(out, sizeof out, t[i].cmd, "--help", NULL);
        if (rc != 0) fail_msg("%s %s --help: exit %d", t[i].cmd, w ? w : "", rc);
        /* the help names every option of the mode */
        for (const dsv4q_optspec *o = t[i].opts; o->name; o++)
            if (!strstr(out, o->name)) fail_msg("%s --help does not mention %s", t[i].cmd, o->name);
        assert_int_equal(front(out, sizeof out, "help", t[i].cmd, NULL), 0);
        assert_non_null(strstr(out, t[i].summary));
    }
    assert_int_equal(front(NULL, 0, "help", NULL), 0);
    assert_int_equal(front(NULL, 0, "help", "no-such-command", NULL), 2);
    assert_int_equal(front(NULL, 0, "no-such-command", NULL), 2);
}

static void every_command_refuses_a_bogus_option(void **state)
{
    (void)state;
    int n;
    const dsv4q_mode *t = dsv4q_cli_modes(&n);
    static char out[4096];
    for (int i = 0; i < n; i++) {
        const char *w = mode_word(&t[i]);
        int rc = w ? front(out, sizeof out, t[i].cmd, w, "--bogus-opt", NULL)
                   : front(out, sizeof out, t[i].cmd, "--bogus-opt", NULL);
        if (rc != 2) fail_msg("%s %s --bogus-opt: exit %d, want 2", t[i].cmd, w ? w : "", rc);
        /* one line naming the option and the command */
        if (!strstr(out, "--bogus-opt") || !strstr(out, t[i].cmd)) fail_msg("message does not name them: %s", out);
    }
}

static void contradictions_are_refused(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(front(out, sizeof out, "boundaries", "--frob", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--taps", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--boundary", "gemm_act_fp8=off", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--backend", "cpu-ref", "--profile", "exact", NULL), 2);
    assert_non_null(strstr(out, "--profile"));
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--backend", "cpu-ref", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--whole-model", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--list-ops", "--shapes", "pro", NULL), 2);
    assert_int_equal(front(out, sizeof out, "qualify", "--ops", "rmsnorm", NULL), 2);   /* no --backend */
    assert_non_null(strstr(out, "--backend"));
    assert_int_equal(front(out, sizeof out, "run", "--out", "/tmp/x.safetensors", NULL), 2);
    assert_non_null(strstr(out, "--width"));
    assert_int_equal(front(out, sizeof out, "run", "--width", "f32", "--width", "f64", "--out", "/tmp/x", NULL), 2);
    assert_int_equal(front(out, sizeof out, "sensitivity", "--tokens", "t.json", "--prompt-len", "4", NULL), 2);
    assert_int_equal(front(out, sizeof out, "sensitivity", "stray", NULL), 2);
    assert_int_equal(front(out, sizeof out, "sensitivity", "--width", "f32", NULL), 2);
    assert_int_equal(front(out, sizeof out, "margins", "--width", "f32", NULL), 2);
    assert_int_equal(front(out, sizeof out, "capture", "--out", "/tmp", "--backend", "cpu-ref", "--profile", "exact",
                           NULL), 2);
    assert_int_equal(front(out, sizeof out, "synth", "--seed", NULL), 2);   /* value missing */
    assert_int_equal(front(out, sizeof out, "golden", NULL), 2);
    assert_int_equal(front(out, sizeof out, "golden", "verify", NULL), 2);
    assert_int_equal(front(out, sizeof out, "golden", "list", "--frob", NULL), 2);
    /* accepted: list with its own options runs (exit 0) */
    assert_int_equal(front(out, sizeof out, "qualify", "--list", "--shapes", "flash", NULL), 0);
    assert_non_null(strstr(out, "("));
}

static void version_names_the_build(void **state)
{
    (void)state;
    static char out[4096];
    assert_int_equal(front(out, sizeof out, "--version", NULL), 0);
    assert_non_null(strstr(out, "dsv4q "));
    assert_non_null(strstr(out, "compiler: "));
    assert_non_null(strstr(out, "-ffp-contract=off"));
    assert_null(strstr(out, "fast-math: results"));
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void readme_table_is_generated(void **state)
{
    (void)state;
    char *readme = slurp("README.md");
    assert_non_null(readme);
    const char *mark = "<!-- generated: dsv4q help --markdown (make docs) -->\n", *end = "<!-- end generated -->";
    char *a = strstr(readme, mark), *b = a ? strstr(a, end) : NULL;
    assert_non_null(a);
    assert_non_null(b);
    a += strlen(mark);
    char *gen = NULL;
    size_t glen = 0;
    FILE *f = open_memstream(&gen, &glen);
    dsv4q_cli_markdown(f);
    fclose(f);
    if (glen != (size_t)(b - a) || memcmp(gen, a, glen))
        fail_msg("README.md's command table is stale: run `make docs` (generated %zu bytes, README has %zu)", glen,
                 (size_t)(b - a));
    free(gen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_command_has_help),
        cmocka_unit_test(every_command_refuses_a_bogus_option),
        cmocka_unit_test(contradictions_are_refused),
        cmocka_unit_test(version_names_the_build),
        cmocka_unit_test(readme_table_is_generated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
