/*
 * test_check_refs.c - the check that keeps the words true
 * (scripts/check-refs.sh) catches what it claims to catch.
 *
 * make test runs the script on the tree (report-only until the tree is
 * clean); this test runs it on a small scratch tree whose stale citations
 * are known, so a change to the script that stops it seeing one kind fails
 * here even while the real tree happens to be clean: a path that moved, a
 * dsv4q_ name that no code defines, an invariant id the owning header does
 * not define. The scratch tree is not a git checkout: the script's
 * directory walk is tested too.
 */
#include "tests/testutil.h"
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/tinyfix.h"

static char root[256];

static void put(const char *rel, const char *text)
{
    char p[600], cmd[700];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", p);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* Run the copy of the script in the scratch tree; its output into *out. */
static int run(char *out, size_t n, const char *env)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s sh scripts/check-refs.sh > out.txt 2>&1", root, env);
    int st = system(cmd);
    char p[600];
    snprintf(p, sizeof p, "%s/out.txt", root);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    size_t k = fread(out, 1, n - 1, f);
    out[k] = 0;
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define ASSERT_HAS(s, needle)                                                                                          \
    do {                                                                                                               \
        if (!strstr((s), (needle))) fail_msg("output lacks '%s':\n%s", (needle), (s));                                 \
    } while (0)

static void finds_each_kind_and_passes_when_fixed(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dsv4q-test-check-refs-XXXXXX");
    assert_non_null(mkdtemp(root));
    char cmd[800];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/scripts' && cp scripts/check-refs.sh '%s/scripts/'", root, root);
    assert_int_equal(system(cmd), 0);
    put("lib/store.h", "/*\n * store.h - a store.\n *\n * Invariants:\n *  T1. one\n *  T2. two\n */\n"
                       "int dsv4q_store_put(int x);\n");
    put("lib/store.c", "/* store.c - see lib/store.h and lib/gone.c; T2 holds, T3 too;\n"
                       " * dsv4q_store_put() and dsv4q_store_get() do it (lib/{store,gone}.h). */\n"
                       "#include \"lib/store.h\"\n"
                       "int dsv4q_store_put(int x) { return x; }   /* T1 */\n"
                       "static const char *s = \"lib/nowhere.c T9 dsv4q_in_a_string\";\n");
    put("docs/a.md", "See `lib/store.c`, `lib/old/` and `lib/*.h`; T2 and T7.\n");
    char out[8192];
    assert_int_equal(run(out, sizeof out, ""), 1);
    ASSERT_HAS(out, "lib/store.c:1: path lib/gone.c does not exist");
    ASSERT_HAS(out, "lib/store.c:1: invariant T3 is not defined by lib/store.h");
    ASSERT_HAS(out, "lib/store.c:2: dsv4q_store_get is not defined anywhere in the tree");
    ASSERT_HAS(out, "lib/store.c:2: path lib/{store,gone}.h does not exist");
    ASSERT_HAS(out, "docs/a.md:1: path lib/old/ does not exist");
    ASSERT_HAS(out, "docs/a.md:1: invariant T7 is not defined by lib/store.h");
    /* what is not stale is not reported: code and strings are not comments */
    if (strstr(out, "dsv4q_store_put") || strstr(out, "nowhere") || strstr(out, "T9") || strstr(out, "T1 ") ||
        strstr(out, "lib/*.h"))
        fail_msg("reported something that is not stale:\n%s", out);
    /* report-only */
    assert_int_equal(run(out, sizeof out, "CHECK_REFS_STRICT=0"), 0);
    ASSERT_HAS(out, "report only");
    /* fixed: clean, exit 0 */
    put("lib/store.c", "/* store.c - see lib/store.h; T2 holds; dsv4q_store_put() does it. */\n"
                       "#include \"lib/store.h\"\n"
                       "int dsv4q_store_put(int x) { return x; }\n");
    put("docs/a.md", "See `lib/store.c` and `lib/*.h`; T2.\n");
    assert_int_equal(run(out, sizeof out, ""), 0);
    ASSERT_HAS(out, "check-refs: ok");
    assert_int_equal(tinyfix_remove(root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(finds_each_kind_and_passes_when_fixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
