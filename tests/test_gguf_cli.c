/*
 * test_gguf_cli.c - the GGUF paths a command-line user meets (issue 28):
 * a --model path that is neither a directory nor a GGUF file is refused by
 * what it is (missing, empty, too short for a header, another magic), exit
 * 2 from the CLI; `dsv4q weight` lists a GGUF's tensors and prints or
 * writes the values of a hand-made one, and refuses an unknown name, an
 * I32 table and a directory by name. (The reader and decoders themselves:
 * tests/test_gguf.c.)
 */
#include "tests/testutil.h"
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "io/gguf.h"
#include "io/model.h"
#include "oracle/ggml_decode.h"
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

static int call_captured(int (*cmd)(int, char **), char *out, char *err, size_t len, char **argv, int argc)
{
    char po[] = "/tmp/dsv4q_wout_XXXXXX", pe[] = "/tmp/dsv4q_werr_XXXXXX";
    int fo = mkstemp(po), fe = mkstemp(pe);
    assert_true(fo >= 0 && fe >= 0);
    fflush(stdout);
    fflush(stderr);
    int s1 = dup(1), s2 = dup(2);
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = cmd(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(s1, 1);
    dup2(s2, 2);
    close(s1);
    close(s2);
    char *bufs[2] = {out, err};
    int fds[2] = {fo, fe};
    for (int i = 0; i < 2; i++) {
        ssize_t n = pread(fds[i], bufs[i], len - 1, 0);
        bufs[i][n > 0 ? n : 0] = 0;
        close(fds[i]);
    }
    unlink(po);
    unlink(pe);
    return rc;
}

static void put(FILE *f, const void *p, size_t n) { assert_int_equal(fwrite(p, 1, n, f), n); }
static void put_u32(FILE *f, uint32_t v) { put(f, &v, 4); }
static void put_u64(FILE *f, uint64_t v) { put(f, &v, 8); }
static void put_info(FILE *f, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    put_u64(f, strlen(name));
    put(f, name, strlen(name));
    put_u32(f, nd);
    for (uint32_t i = 0; i < nd; i++) put_u64(f, ne[i]);
    put_u32(f, type);
    put_u64(f, off);
}
static void pad_to(FILE *f, long a)
{
    while (ftell(f) % a) put(f, "", 1);
}

/* A GGUF v3 file with no metadata (so the default alignment, 32) and four
 * tensors whose values are known by hand:
 *   "a" F32 [4, 2] = 1 .. 8;
 *   "q" Q8_0 [32], one block with d = 1 (F16 0x3C00), q_i = i - 16: -16 .. 15;
 *   "h" F16 [2] = 0x3555, 0xC000: 1365/4096 (1 + 341/1024 times 2^-2), -2;
 *   "i" I32 [2] (not a float type). */
static void write_image(const char *path)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    put(f, "GGUF", 4);
    put_u32(f, 3);
    put_u64(f, 4);
    put_u64(f, 0);
    put_info(f, "a", 2, (uint64_t[]){4, 2}, DSV4Q_GGML_F32, 0);
    put_info(f, "q", 1, (uint64_t[]){32}, DSV4Q_GGML_Q8_0, 32);
    put_info(f, "h", 1, (uint64_t[]){2}, DSV4Q_GGML_F16, 96);
    put_info(f, "i", 1, (uint64_t[]){2}, DSV4Q_GGML_I32, 128);
    pad_to(f, 32);
    const long base = ftell(f);
    const float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    put(f, a, sizeof a);
    put(f, (const uint8_t[]){0x00, 0x3C}, 2);
    for (int i = 0; i < 32; i++) put(f, &(int8_t){(int8_t)(i - 16)}, 1);
    while (ftell(f) - base < 96) put(f, "", 1);
    put(f, (const uint8_t[]){0x55, 0x35, 0x00, 0xC0}, 4);
    while (ftell(f) - base < 128) put(f, "", 1);
    put(f, (const int32_t[]){7, -1}, 8);
    assert_int_equal(fclose(f), 0);
}

static void test_weight_command(void **s)
{
    (void)s;
    char path[] = "/tmp/dsv4q_wgguf_XXXXXX", bin[64], out[8192], err[2048];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_image(path);
    snprintf(bin, sizeof bin, "%s.bin", path);
    char *lst[] = {"weight", "--list", "--model", path};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, lst, 4), 0);
    if (!strstr(out, "\na ") || !strstr(out, "F32") || !strstr(out, "[4, 2]") || !strstr(out, "Q8_0") ||
        !strstr(out, "[32]") || !strstr(out, "\nh ") || !strstr(out, "I32"))
        fail_msg("--list: %s", out);
    /* binary f64 of "a", binary f32 of "q" */
    char *a64[] = {"weight", "--model", path, "--tensor", "a", "--out", bin};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, a64, 7), 0);
    FILE *f = fopen(bin, "rb");
    assert_non_null(f);
    double d[9];
    assert_int_equal(fread(d, sizeof *d, 9, f), 8);
    fclose(f);
    for (int i = 0; i < 8; i++) assert_true(d[i] == i + 1);
    char *q32[] = {"weight", "--model", path, "--tensor", "q", "--width", "f32", "--out", bin};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, q32, 9), 0);
    f = fopen(bin, "rb");
    assert_non_null(f);
    float y[33];
    assert_int_equal(fread(y, sizeof *y, 33, f), 32);
    fclose(f);
    for (int i = 0; i < 32; i++) assert_true(y[i] == (float)(i - 16));
    /* text: a header line, then one value per line */
    char *qt[] = {"weight", "--model", path, "--tensor", "q"};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, qt, 5), 0);
    assert_non_null(strstr(out, "# q Q8_0 ne=[32]"));
    const char *v = strchr(out, '\n');
    for (int i = 0; i < 32; i++) {
        assert_non_null(v);
        char *end;
        double x = strtod(v + 1, &end);
        if (x != i - 16 || *end != '\n') fail_msg("text value %d: '%.20s'", i, v + 1);
        v = end;
    }
    assert_string_equal(v, "\n");
    /* F16 at f64: the exact binary values, printed with round-trip digits */
    char *ht[] = {"weight", "--model", path, "--tensor", "h"};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, ht, 5), 0);
    v = strchr(out, '\n');
    assert_non_null(v);
    assert_true(strtod(v + 1, NULL) == 1365.0 / 4096);
    assert_non_null(strstr(v, "\n-2\n"));
    /* an unknown tensor is named, exit 2, and no output file is written */
    unlink(bin);
    char *bad[] = {"weight", "--model", path, "--tensor", "blk.9.nope", "--out", bin};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, bad, 7), 2);
    if (!strstr(err, "no tensor 'blk.9.nope'") || !strstr(err, path)) fail_msg("unknown tensor: %s", err);
    struct stat sb;
    assert_int_not_equal(stat(bin, &sb), 0);
    /* an I32 table is not decoded, and says so */
    char *it[] = {"weight", "--model", path, "--tensor", "i", "--out", bin};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, it, 7), 2);
    if (!strstr(err, "tensor 'i' is I32")) fail_msg("I32: %s", err);
    assert_int_not_equal(stat(bin, &sb), 0);
    /* a directory is not a GGUF file */
    char *dir[] = {"weight", "--list", "--model", "/tmp"};
    assert_int_equal(call_captured(dsv4q_cmd_weight, out, err, sizeof out, dir, 4), 2);
    assert_non_null(strstr(err, "weight reads a GGUF file"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_path_errors),
        cmocka_unit_test(test_weight_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
