/*
 * test_goldens.c - the goldens in the repository pass, and damage to them is
 * reported as what it is.
 *
 *  - `golden check` passes on goldens/ (every case, including model_tiny):
 *    this is how CI runs the golden check;
 *  - a flipped byte anywhere in a compressed file, a truncated file, a
 *    payload whose SHA-256 disagrees with the manifest, a payload that is
 *    not safetensors, another case's file and a broken manifest are CORRUPT
 *    (exit class 2), never MISMATCH;
 *  - a re-compressed payload with one value changed AND the manifest hash
 *    updated is a MISMATCH naming the tensor, the flat index and both values;
 *  - a deleted file or manifest entry is MISSING;
 *  - recording twice gives identical bytes; recording a subset keeps the
 *    other manifest entries; unknown case names are refused;
 *  - the CLI's exit status follows the library's result.
 * Damage is done to a copy of goldens/ in a temporary directory.
 */
#include "tests/testutil.h"

#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <omp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "goldens/golden.h"
#include "io/safetensors.h"
#include "io/sha256.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "oracle/stages.h"

static char gdir[PATH_MAX];   /* the repository's goldens */
static char tdir[PATH_MAX];   /* scratch copy */

/* ---- helpers ------------------------------------------------------------ */

static int find_goldens(void)
{
    if (access("goldens/" DSV4Q_GOLDEN_MANIFEST, R_OK) == 0) {
        snprintf(gdir, sizeof gdir, "goldens");
        return 0;
    }
    char exe[PATH_MAX];   /* build/tests/test_goldens -> ../../goldens */
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return -1;
    exe[k] = 0;
    *strrchr(exe, '/') = 0;
    snprintf(gdir, sizeof gdir, "%s/../../goldens", exe);
    char m[PATH_MAX + 32];
    snprintf(m, sizeof m, "%s/%s", gdir, DSV4Q_GOLDEN_MANIFEST);
    return access(m, R_OK);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *b = slurp(from, &n);
    assert_non_null(b);
    spit(to, b, n);
    free(b);
}

static void rm_dir(const char *dir)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* fresh copy of goldens/ at tdir (MANIFEST.json + data/) */
static void fresh_copy(void)
{
    char a[PATH_MAX + 64], b[PATH_MAX + 64];
    rm_dir(tdir);
    snprintf(a, sizeof a, "%s/data", tdir);
    assert_int_equal(mkdir(tdir, 0755), 0);
    assert_int_equal(mkdir(a, 0755), 0);
    snprintf(a, sizeof a, "%s/%s", gdir, DSV4Q_GOLDEN_MANIFEST);
    snprintf(b, sizeof b, "%s/%s", tdir, DSV4Q_GOLDEN_MANIFEST);
    copy_file(a, b);
    snprintf(a, sizeof a, "%s/data", gdir);
    DIR *d = opendir(a);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(a, sizeof a, "%s/data/%s", gdir, e->d_name);
        snprintf(b, sizeof b, "%s/data/%s", tdir, e->d_name);
        copy_file(a, b);
    }
    closedir(d);
}

/* Run the check, capturing the report. */
static int check(const char *dir, const char *ops, char **text)
{
    size_t n;
    FILE *f = open_memstream(text, &n);
    assert_non_null(f);
    int rc = dsv4q_golden_check(dir, ops, f);
    fclose(f);
    return rc;
}

static void path_of(char *out, size_t n, const char *dir, const char *rel)
{
    snprintf(out, n, "%s/%s", dir, rel);
}

/* Set the manifest entry of `key` to the payload's hash and size. */
static void manifest_set(const char *dir, const char *key, const uint8_t *pay, size_t n)
{
    char mp[PATH_MAX + 32], sha[65];
    path_of(mp, sizeof mp, dir, DSV4Q_GOLDEN_MANIFEST);
    json_error_t je;
    json_t *root = json_load_file(mp, 0, &je);
    assert_non_null(root);
    json_t *cs = json_object_get(root, "cases"), *e = NULL;
    for (size_t i = 0; i < json_array_size(cs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(cs, i), "key")), key)) e = json_array_get(cs, i);
    assert_non_null(e);
    dsv4q_sha256_hex(pay, n, sha);
    json_object_set_new(e, "sha256_payload", json_string(sha));
    json_object_set_new(e, "payload_bytes", json_integer((json_int_t)n));
    assert_int_equal(json_dump_file(root, mp, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
    json_decref(root);
}

/* The inflated payload of `key` in dir (size from the manifest). */
static uint8_t *payload_of(const char *dir, const char *key, size_t *n)
{
    char p[PATH_MAX + 64], err[256];
    snprintf(p, sizeof p, "%s/data/%s.st.zz", dir, key);
    size_t nz;
    uint8_t *z = slurp(p, &nz), *pay;
    assert_non_null(z);
    assert_int_equal(dsv4q_golden_inflate(z, nz, (size_t)1 << 30, &pay, n, err, sizeof err), 0);
    free(z);
    return pay;
}

static void write_payload(const char *dir, const char *key, const uint8_t *pay, size_t n)
{
    char p[PATH_MAX + 64], err[256];
    uint8_t *z;
    size_t nz;
    assert_int_equal(dsv4q_golden_deflate(pay, n, &z, &nz, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/data/%s.st.zz", dir, key);
    spit(p, z, nz);
    free(z);
}

#define ASSERT_HAS(text, needle)                                                   \
    do {                                                                           \
        if (!strstr((text), (needle))) {                                           \
            print_error("report lacks \"%s\":\n%s\n", (needle), (text));           \
            fail();                                                                \
        }                                                                          \
    } while (0)
#define ASSERT_LACKS(text, needle)                                                 \
    do {                                                                           \
        if (strstr((text), (needle))) {                                            \
            print_error("report should not say \"%s\":\n%s\n", (needle), (text)); \
            fail();                                                                \
        }                                                                          \
    } while (0)

/* ---- tests -------------------------------------------------------------- */

/* What CI runs: every golden in the repository, recomputed, bit-exact. */
static void test_repo_goldens_pass(void **state)
{
    (void)state;
    char *text = NULL;
    int rc = check(gdir, NULL, &text);
    printf("%s", text);
    assert_int_equal(rc, DSV4Q_GOLDEN_OK);
    char want[128];
    snprintf(want, sizeof want, "%d ok, 0 mismatch, 0 corrupt/missing", dsv4q_golden_count());
    ASSERT_HAS(text, want);
    ASSERT_HAS(text, "ok model_tiny (");
    ASSERT_HAS(text, "ok model_tiny_v41 ("); /* tests/data/pub_v41_tiny, found from the root */
    free(text);
}

/* The goldens with each linear kernel this CPU runs forced (both widths):
 * every kernel gives the recorded bits (issue 26: goldens prove that the
 * ISA kernels keep rdot's order). */
static void test_repo_goldens_every_kernel(void **state)
{
    (void)state;
    const char *def = dsv4q_linear_kernel_f64(NULL);
    int n = 0;
    for (int i = 0; dsv4q_linear_kernel_at_f64(i); i++, n++) {
        const char *k = dsv4q_linear_kernel_at_f64(i);
        assert_string_equal(dsv4q_linear_kernel_f64(k), k);
        assert_string_equal(dsv4q_linear_kernel_f32(k), k);
        char *text = NULL;
        const int rc = check(gdir, NULL, &text);
        if (rc != DSV4Q_GOLDEN_OK) printf("kernel %s:\n%s", k, text);
        assert_int_equal(rc, DSV4Q_GOLDEN_OK);
        print_message("goldens bit-exact with linear kernel %s\n", k);
        free(text);
    }
    assert_true(n >= 1);
    assert_string_equal(dsv4q_linear_kernel_at_f64(n - 1), "generic"); /* the baseline comes last */
    assert_non_null(dsv4q_linear_kernel_f64(def));
    assert_non_null(dsv4q_linear_kernel_f32(def));
}

/* (a) one flipped byte in a compressed file: header, middle, checksum. */
static void test_flipped_byte_is_corrupt(void **state)
{
    (void)state;
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/data/act_quant.st.zz", tdir);
    size_t n;
    uint8_t *orig = slurp(p, &n);
    assert_non_null(orig);
    const size_t at[4] = {0, 1, n / 2, n - 1};
    for (int i = 0; i < 4; i++) {
        uint8_t *b = malloc(n);
        memcpy(b, orig, n);
        b[at[i]] ^= 0x5a;
        spit(p, b, n);
        free(b);
        char *text = NULL;
        assert_int_equal(check(tdir, "act_quant", &text), DSV4Q_GOLDEN_ERROR);
        ASSERT_HAS(text, "CORRUPT act_quant");
        ASSERT_LACKS(text, "MISMATCH");
        free(text);
    }
    spit(p, orig, n);
    free(orig);
    char *text = NULL;
    assert_int_equal(check(tdir, "act_quant", &text), DSV4Q_GOLDEN_OK);
    free(text);
}

static void test_truncated_is_corrupt(void **state)
{
    (void)state;
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/data/hadamard.st.zz", tdir);
    size_t n;
    uint8_t *orig = slurp(p, &n);
    assert_non_null(orig);
    spit(p, orig, n / 2);
    char *text = NULL;
    assert_int_equal(check(tdir, "hadamard", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT hadamard");
    ASSERT_HAS(text, "truncated");
    ASSERT_LACKS(text, "MISMATCH");
    free(text);
    spit(p, orig, 0);   /* empty file */
    assert_int_equal(check(tdir, "hadamard", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT hadamard");
    free(text);
    spit(p, orig, n);
    free(orig);
}

/* A well-formed stream whose payload is not the one the manifest pins. */
static void test_hash_mismatch_is_corrupt(void **state)
{
    (void)state;
    size_t n;
    uint8_t *pay = payload_of(tdir, "act_quant", &n);
    pay[n - 1] ^= 1;   /* last data byte */
    write_payload(tdir, "act_quant", pay, n);
    char *text = NULL;
    assert_int_equal(check(tdir, "act_quant", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT act_quant");
    ASSERT_HAS(text, "SHA-256");
    ASSERT_LACKS(text, "MISMATCH");
    free(text);
    free(pay);
    fresh_copy();
}

/* (b) one value changed, re-compressed, manifest hash updated: MISMATCH
 * with the tensor, the flat index and both values. */
static void test_changed_value_is_mismatch(void **state)
{
    (void)state;
    static const char *const tensors[2] = {"f64.source.y_b128_ue8m0", "f32.exact.y_b64_f32scale"};
    for (int v = 0; v < 2; v++) {
        size_t n;
        char err[256];
        uint8_t *pay = payload_of(tdir, "act_quant", &n);
        dsv4q_st *st;
        assert_int_equal(dsv4q_st_open_buffer(&st, pay, n, "test", err, sizeof err), 0);
        const dsv4q_st_tensor *t = dsv4q_st_find(st, tensors[v]);
        assert_non_null(t);
        const long k = 327;   /* row 1, element 7 (-19: an E4M3 tie) */
        uint8_t *at = pay + ((const uint8_t *)t->data - pay) + (size_t)k * dsv4q_dtype_size(t->dtype);
        double was, now;
        if (t->dtype == DSV4Q_DT_F64) {
            memcpy(&was, at, 8);
            now = was * 1.5;
            memcpy(at, &now, 8);
        } else {
            float f;
            memcpy(&f, at, 4);
            was = f;
            f = nextafterf(f, INFINITY);
            now = f;
            memcpy(at, &f, 4);
        }
        dsv4q_st_close(st);
        write_payload(tdir, "act_quant", pay, n);
        manifest_set(tdir, "act_quant", pay, n);
        free(pay);
        char *text = NULL, want[256];
        assert_int_equal(check(tdir, "act_quant", &text), DSV4Q_GOLDEN_MISMATCH);
        snprintf(want, sizeof want, "MISMATCH act_quant %s [%ld]: golden %.17g got %.17g", tensors[v], k, now, was);
        ASSERT_HAS(text, want);
        ASSERT_HAS(text, "(1 of 1280 values differ)");
        ASSERT_LACKS(text, "CORRUPT");
        free(text);
        fresh_copy();
    }
}

/* (c) a deleted file, a deleted manifest entry. */
static void test_missing(void **state)
{
    (void)state;
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/data/rmsnorm.st.zz", tdir);
    assert_int_equal(unlink(p), 0);
    char *text = NULL;
    assert_int_equal(check(tdir, "rmsnorm,hadamard", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "MISSING rmsnorm");
    ASSERT_HAS(text, "ok hadamard");
    ASSERT_LACKS(text, "MISMATCH");
    free(text);

    fresh_copy();
    char mp[PATH_MAX + 32];
    path_of(mp, sizeof mp, tdir, DSV4Q_GOLDEN_MANIFEST);
    json_error_t je;
    json_t *root = json_load_file(mp, 0, &je), *cs = json_object_get(root, "cases");
    for (size_t i = 0; i < json_array_size(cs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(cs, i), "key")), "rmsnorm"))
            json_array_remove(cs, i--);
    assert_int_equal(json_dump_file(root, mp, JSON_INDENT(2)), 0);
    json_decref(root);
    assert_int_equal(check(tdir, "rmsnorm", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "MISSING rmsnorm: no entry");
    free(text);
    fresh_copy();
}

static void test_not_safetensors_and_wrong_case(void **state)
{
    (void)state;
    const char junk[] = "this is not a safetensors image";
    write_payload(tdir, "qhead_norm", (const uint8_t *)junk, sizeof junk);
    manifest_set(tdir, "qhead_norm", (const uint8_t *)junk, sizeof junk);
    char *text = NULL;
    assert_int_equal(check(tdir, "qhead_norm", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT qhead_norm: not a safetensors payload");
    free(text);

    /* hadamard's (sound) payload filed under rmsnorm */
    size_t n;
    uint8_t *pay = payload_of(tdir, "hadamard", &n);
    write_payload(tdir, "rmsnorm", pay, n);
    manifest_set(tdir, "rmsnorm", pay, n);
    free(pay);
    assert_int_equal(check(tdir, "rmsnorm", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT rmsnorm");
    ASSERT_HAS(text, "holds case 'hadamard'");
    ASSERT_LACKS(text, "MISMATCH");
    free(text);
    fresh_copy();
}

static void test_bad_manifest(void **state)
{
    (void)state;
    char mp[PATH_MAX + 32];
    path_of(mp, sizeof mp, tdir, DSV4Q_GOLDEN_MANIFEST);
    size_t n;
    uint8_t *orig = slurp(mp, &n);
    assert_non_null(orig);
    spit(mp, orig, n / 3);   /* cut in the middle: invalid JSON */
    char *text = NULL;
    assert_int_equal(check(tdir, NULL, &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT manifest");
    free(text);
    const char *v2 = "{\"version\": 2, \"cases\": []}";
    spit(mp, v2, strlen(v2));
    assert_int_equal(check(tdir, NULL, &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT manifest");
    free(text);
    const char *evil = "{\"version\": 1, \"cases\": [{\"key\": \"act_quant\", \"file\": \"../../etc/passwd\", "
                       "\"payload_bytes\": 1, \"sha256_payload\": "
                       "\"0000000000000000000000000000000000000000000000000000000000000000\"}]}";
    spit(mp, evil, strlen(evil));
    assert_int_equal(check(tdir, "act_quant", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "CORRUPT manifest");
    free(text);
    spit(mp, orig, n);
    free(orig);
}

static void test_unknown_case(void **state)
{
    (void)state;
    char *text = NULL, err[1024];
    assert_int_equal(check(tdir, "act_quant,no_such_op", &text), DSV4Q_GOLDEN_ERROR);
    ASSERT_HAS(text, "unknown golden case 'no_such_op'");
    free(text);
    assert_int_equal(dsv4q_golden_record(tdir, "no_such_op", NULL, err, sizeof err), DSV4Q_GOLDEN_ERROR);
    assert_non_null(strstr(err, "no_such_op"));
}

/* Record twice: identical bytes; and the same payload hashes as goldens/. */
static void test_record_deterministic(void **state)
{
    (void)state;
    const char *ops = "act_quant,rope_apply,indexer,moe_gate,sparse_attn";
    char a[PATH_MAX + 16], b[PATH_MAX + 16], err[1024];
    snprintf(a, sizeof a, "%s-rec1", tdir);
    snprintf(b, sizeof b, "%s-rec2", tdir);
    rm_dir(a);
    rm_dir(b);
    assert_int_equal(dsv4q_golden_record(a, ops, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_golden_record(b, ops, NULL, err, sizeof err), 0);
    const char *files[6] = {DSV4Q_GOLDEN_MANIFEST, "data/act_quant.st.zz", "data/rope_apply.st.zz",
                            "data/indexer.st.zz", "data/moe_gate.st.zz", "data/sparse_attn.st.zz"};
    for (int i = 0; i < 6; i++) {
        char pa[PATH_MAX + 64], pb[PATH_MAX + 64];
        path_of(pa, sizeof pa, a, files[i]);
        path_of(pb, sizeof pb, b, files[i]);
        size_t na, nb;
        uint8_t *x = slurp(pa, &na), *y = slurp(pb, &nb);
        assert_non_null(x);
        assert_non_null(y);
        assert_int_equal(na, nb);
        assert_memory_equal(x, y, na);
        free(x);
        free(y);
    }
    /* the payload hashes equal the repository's (zlib bytes may differ
     * between zlib versions; the payload may not) */
    json_error_t je;
    char ma[PATH_MAX + 32], mg[PATH_MAX + 32];
    path_of(ma, sizeof ma, a, DSV4Q_GOLDEN_MANIFEST);
    path_of(mg, sizeof mg, gdir, DSV4Q_GOLDEN_MANIFEST);
    json_t *ra = json_load_file(ma, 0, &je), *rg = json_load_file(mg, 0, &je);
    assert_non_null(ra);
    assert_non_null(rg);
    json_t *ca = json_object_get(ra, "cases"), *cg = json_object_get(rg, "cases");
    assert_int_equal(json_array_size(ca), 5);
    for (size_t i = 0; i < json_array_size(ca); i++) {
        json_t *e = json_array_get(ca, i);
        const char *k = json_string_value(json_object_get(e, "key"));
        int found = 0;
        for (size_t j = 0; j < json_array_size(cg); j++) {
            json_t *f = json_array_get(cg, j);
            if (strcmp(k, json_string_value(json_object_get(f, "key")))) continue;
            found = 1;
            assert_string_equal(json_string_value(json_object_get(e, "sha256_payload")),
                                json_string_value(json_object_get(f, "sha256_payload")));
        }
        assert_true(found);
    }
    json_decref(ra);
    json_decref(rg);
    rm_dir(a);
    rm_dir(b);
}

/* stages_tiny records the stage table's stages: per (width, profile) and
 * call, one 32-byte digest per output of every slot of the table's forward
 * order (dsv4q_stage_slot, mtp included), named by the table's capture
 * names, and nothing else. Hand count for tiny (5 layers): per call embed 1
 * + 5 x (hc_attn_pre 3 + attn_norm, attn, hc_attn_post 1 each + hc_ffn_pre 3
 * + ffn_norm, moe, hc_ffn_post 1 each = 12) + head 1 + mtp 1 = 63; x 2 calls
 * x 2 widths x 4 profiles = 1008. */
static void test_stages_golden_follows_table(void **state)
{
    (void)state;
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[1024], distinct[256];
    assert_int_equal(dsv4q_golden_compute("stages_tiny", &buf, &len, distinct, sizeof distinct, err, sizeof err), 0);
    dsv4q_st *st;
    assert_int_equal(dsv4q_st_open_buffer(&st, buf, len, "stages_tiny", err, sizeof err), 0);
    assert_int_equal(dsv4q_st_count(st), 1008);
    static const char *const profs[4] = {"source", "model", "qat", "exact"};
    const int n_layers = 5;
    long want = 0;
    for (int w = 32; w <= 64; w += 32)
        for (int p = 0; p < 4; p++)
            for (int c = 0; c < 2; c++)
                for (long i = 0; i < dsv4q_stage_nslots(n_layers); i++) {
                    int sid, layer;
                    assert_int_equal(dsv4q_stage_slot(n_layers, i, &sid, &layer), 0);
                    for (int t = 0; t < dsv4q_stage_get(sid)->nout; t++) {
                        char cap[DSV4Q_STAGE_NAME_MAX], name[200];
                        assert_int_equal(dsv4q_stage_tensor_name(cap, sizeof cap, sid, layer, 1, t), 0);
                        snprintf(name, sizeof name, "f%d.%s.c%d.s%03ld.%s", w, profs[p], c, i, cap);
                        const dsv4q_st_tensor *x = dsv4q_st_find(st, name);
                        if (!x) fail_msg("stages_tiny lacks %s", name);
                        assert_int_equal(x->dtype, DSV4Q_DT_U8);
                        assert_int_equal(x->numel, 32);
                        want++;
                    }
                }
    assert_int_equal(want, 1008);
    /* spot names (by hand): the slots of layer 0 start after embed */
    assert_non_null(dsv4q_st_find(st, "f64.exact.c1.s001.L0.hc_attn_pre.out.comb"));
    assert_non_null(dsv4q_st_find(st, "f32.source.c0.s042.model.mtp.out"));
    /* the decode call's attn digest differs from the prompt call's */
    const dsv4q_st_tensor *a0 = dsv4q_st_find(st, "f32.source.c0.s003.L0.attn.out"),
                          *a1 = dsv4q_st_find(st, "f32.source.c1.s003.L0.attn.out");
    assert_true(a0 && a1);
    assert_true(memcmp(a0->data, a1->data, 32) != 0);
    dsv4q_st_close(st);
    free(buf);
}

/* Recording a subset rewrites those cases and keeps the others' entries. */
static void test_record_subset_keeps_others(void **state)
{
    (void)state;
    char err[1024], mp[PATH_MAX + 32];
    assert_int_equal(dsv4q_golden_record(tdir, "hadamard", NULL, err, sizeof err), 0);
    path_of(mp, sizeof mp, tdir, DSV4Q_GOLDEN_MANIFEST);
    json_error_t je;
    json_t *root = json_load_file(mp, 0, &je);
    assert_non_null(root);
    assert_int_equal(json_array_size(json_object_get(root, "cases")), dsv4q_golden_count());
    json_decref(root);
    char *text = NULL;
    assert_int_equal(check(tdir, "hadamard,act_quant,hc_head", &text), DSV4Q_GOLDEN_OK);
    free(text);
    fresh_copy();
}

/* Run a shell command, its output (up to n - 1 bytes) into out; returns
 * its exit status (-1 when it did not exit). */
static int cmd_output(const char *cmd, char *out, size_t n)
{
    FILE *pf = popen(cmd, "r");
    assert_non_null(pf);
    const size_t got = fread(out, 1, n - 1, pf);
    out[got] = 0;
    const int st = pclose(pf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The CLI: exit 0 / 1 / 2 as the library says. */
static void test_cli_exit_status(void **state)
{
    (void)state;
    char exe[PATH_MAX], bin[PATH_MAX + 32], cmd[3 * PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(k > 0);
    exe[k] = 0;
    *strrchr(exe, '/') = 0;
    snprintf(bin, sizeof bin, "%s/../dsv4q", exe);
    if (access(bin, X_OK)) {
        print_message("skipping: %s not built\n", bin);
        skip();
    }
    snprintf(cmd, sizeof cmd, "'%s' golden check --dir '%s' --ops act_quant >/dev/null", bin, tdir);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);

    size_t n;
    uint8_t *pay = payload_of(tdir, "hc_head", &n);
    pay[n - 3] ^= 0x40;   /* inside the last value */
    write_payload(tdir, "hc_head", pay, n);
    manifest_set(tdir, "hc_head", pay, n);
    free(pay);
    snprintf(cmd, sizeof cmd, "'%s' golden check --dir '%s' --ops hc_head >/dev/null", bin, tdir);
    st = system(cmd);
    assert_int_equal(WEXITSTATUS(st), 1);

    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/data/hc_head.st.zz", tdir);
    assert_int_equal(unlink(p), 0);
    st = system(cmd);
    assert_int_equal(WEXITSTATUS(st), 2);
    snprintf(cmd, sizeof cmd, "'%s' golden check --dir '%s' --ops bogus >/dev/null", bin, tdir);
    st = system(cmd);
    assert_int_equal(WEXITSTATUS(st), 2);
    fresh_copy();

    /* DSV4Q_KERNEL: each kernel this CPU runs is taken (and says so in
     * --version); a name it cannot run is refused before any work */
    for (int i = 0; dsv4q_linear_kernel_at_f64(i); i++) {
        const char *kn = dsv4q_linear_kernel_at_f64(i);
        char want[64];
        snprintf(cmd, sizeof cmd, "DSV4Q_KERNEL=%s '%s' --version", kn, bin);
        char out[2048];
        assert_int_equal(cmd_output(cmd, out, sizeof out), 0);
        snprintf(want, sizeof want, "linear kernel: %s (", kn);
        ASSERT_HAS(out, want);
        snprintf(cmd, sizeof cmd,
                 "DSV4Q_KERNEL=%s '%s' golden check --dir '%s' --ops linear_fp8,linear_fp4,linear_fp8_b32 >/dev/null",
                 kn, bin, tdir);
        st = system(cmd);
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    snprintf(cmd, sizeof cmd, "DSV4Q_KERNEL=avx9 '%s' golden check --dir '%s' --ops linear_fp8 2>&1", bin, tdir);
    char out[2048];
    assert_int_equal(cmd_output(cmd, out, sizeof out), 2);
    ASSERT_HAS(out, "DSV4Q_KERNEL=avx9: not a linear kernel this CPU runs (it runs:");
}

static int setup(void **state)
{
    (void)state;
    omp_set_num_threads(1);   /* small cases: threads only add synchronisation */
    if (find_goldens()) {
        fprintf(stderr, "test_goldens: no goldens/%s (run from the repository root)\n", DSV4Q_GOLDEN_MANIFEST);
        return -1;
    }
    const char *t = getenv("TMPDIR");
    snprintf(tdir, sizeof tdir, "%s/dsv4q-test-goldens-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tdir)) return -1;
    fresh_copy();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repo_goldens_pass),
        cmocka_unit_test(test_repo_goldens_every_kernel),
        cmocka_unit_test(test_flipped_byte_is_corrupt),
        cmocka_unit_test(test_truncated_is_corrupt),
        cmocka_unit_test(test_hash_mismatch_is_corrupt),
        cmocka_unit_test(test_changed_value_is_mismatch),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_not_safetensors_and_wrong_case),
        cmocka_unit_test(test_bad_manifest),
        cmocka_unit_test(test_unknown_case),
        cmocka_unit_test(test_record_deterministic),
        cmocka_unit_test(test_stages_golden_follows_table),
        cmocka_unit_test(test_record_subset_keeps_others),
        cmocka_unit_test(test_cli_exit_status),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
