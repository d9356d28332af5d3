/*
 * test_gguf_cli.c - the GGUF paths a command-line user meets (issue 28):
 * a --model path that is neither a directory nor a GGUF file is refused by
 * what it is (missing, empty, too short for a header, another magic), exit
 * 2 from the CLI. (The reader and decoders themselves: tests/test_gguf.c.)
 */
#include "tests/testutil.h"
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "io/model.h"
#include "tests/testcli.h"

static void test_model_path_errors(void **s)
{
    (void)s;
    char dir[] = "/tmp/dsv4q_gguf_path_XXXXXX", p[4][128], err[1024];
    assert_non_null(mkdtemp(dir));
    static const char *const file[4] = {"empty.gguf", "text.gguf", "short.gguf", "missing.gguf"};
    static const char *const body[4] = {"", "{\"dim\": 4}\n", "GGU", NULL};
    static const char *const want[4] = {"empty file (0 bytes), not a GGUF file",
                                        "not a GGUF file (magic 7b 22 64 69 '{\"di', expected 47 47 55 46 'GGUF'",
                                        "file too short (3 bytes) for a GGUF header", "no such file or directory"};
    for (int k = 0; k < 4; k++) {
        snprintf(p[k], sizeof p[k], "%s/%s", dir, file[k]);
        if (body[k]) {
            FILE *f = fopen(p[k], "wb");
            assert_non_null(f);
            assert_int_equal(fwrite(body[k], 1, strlen(body[k]), f), strlen(body[k]));
            fclose(f);
        }
        dsv4q_model *m = (dsv4q_model *)&m; /* a non-NULL value the refusal must clear */
        assert_int_equal(dsv4q_model_open(&m, p[k], err, sizeof err), -1);
        assert_null(m);
        if (!strstr(err, want[k]) || strncmp(err, p[k], strlen(p[k])) || err[strlen(p[k])] != ':' ||
            strstr(err, "config.json: "))
            fail_msg("%s: '%s' does not start with the path and say '%s'", file[k], err, want[k]);
        char out[160];
        snprintf(out, sizeof out, "%s/logits.safetensors", dir);
        assert_int_equal(
            dsv4q_quiet_call(dsv4q_cmd_run, "run", "--width", "f64", "--model", p[k], "--out", out, "--quiet", NULL),
            2);
        struct stat sb;
        assert_int_not_equal(stat(out, &sb), 0);
        assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_stages, "stages", "--model", p[k], NULL), 2);
    }
    for (int k = 0; k < 3; k++) unlink(p[k]);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_path_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
