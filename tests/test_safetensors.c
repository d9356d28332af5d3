/*
 * test_safetensors.c - the checkpoint container (io/safetensors.c and
 * io/safetensors_write.c) and the SHA-256 pins (io/sha256.c).
 *
 * Owns the evidence for invariants S1..S7 of io/safetensors.h: every dtype
 * round-trips byte-exactly through the writer and the reader, the writer is
 * deterministic and aligned, and every malformed file is refused with a
 * message naming the file (and the tensor, where there is one). The bad
 * files are crafted byte by byte here, in a mkdtemp directory, so the suite
 * needs no Python. The Python interop half lives in
 * tests/interop_safetensors.py and drives test_interop below through
 * DSV4Q_INTEROP_DIR.
 */
#include "tests/testutil.h"
#include "io/safetensors.h"
#include "io/sha256.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

static char g_dir[64];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/dsv4q_st_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

/* Remove the (flat, or one level deep) temp tree. */
static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int teardown_dir(void **state)
{
    (void)state;
    rm_tree(g_dir);
    return 0;
}

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", g_dir, name);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static uint8_t *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* A raw safetensors image: 8-byte LE length, header text, `dlen` data bytes
 * (a counting pattern). `hlen_override` >= 0 replaces the length field. */
static uint8_t *raw_image(const char *header, size_t dlen, long long hlen_override, size_t *len)
{
    size_t h = strlen(header);
    *len = 8 + h + dlen;
    uint8_t *b = malloc(*len + 1);
    assert_non_null(b);
    uint64_t L = hlen_override >= 0 ? (uint64_t)hlen_override : (uint64_t)h;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(L >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < dlen; i++)
        b[8 + h + i] = (uint8_t)(i * 7 + 1);
    return b;
}

/* Write a crafted file `name` and assert that opening it fails with a
 * message containing the path, `tensor` (if any) and `why` (if any). */
static void expect_bad_file(const char *name, const uint8_t *img, size_t len, const char *tensor,
                            const char *why)
{
    char path[256], err[1024] = "";
    path_in(path, sizeof path, name);
    write_bytes(path, img, len);
    dsv4q_st *st = (dsv4q_st *)1;
    int rc = dsv4q_st_open(&st, path, err, sizeof err);
    if (rc == 0)
        fail_msg("%s: open succeeded on a bad file", name);
    assert_null(st);
    if (!strstr(err, path))
        fail_msg("%s: error does not name the file: %s", name, err);
    if (tensor) {
        char q[128];
        snprintf(q, sizeof q, "'%s'", tensor);
        if (!strstr(err, q))
            fail_msg("%s: error does not name tensor %s: %s", name, q, err);
    }
    if (why && !strstr(err, why))
        fail_msg("%s: error lacks '%s': %s", name, why, err);
    /* the same bytes through the in-memory path fail the same way */
    rc = dsv4q_st_open_buffer(&st, img, len, name, err, sizeof err);
    assert_int_equal(rc, -1);
    assert_null(st);
    assert_non_null(strstr(err, name));
}

static void expect_bad(const char *name, const char *header, size_t dlen, const char *tensor, const char *why)
{
    size_t len;
    uint8_t *img = raw_image(header, dlen, -1, &len);
    expect_bad_file(name, img, len, tensor, why);
    free(img);
}

static void add(dsv4q_st_writer *w, const char *name, dsv4q_dtype dt, int ndim, const int64_t *shape,
                const void *data, size_t nbytes)
{
    char err[512];
    if (dsv4q_st_writer_add(w, name, dt, ndim, shape, data, nbytes, err, sizeof err) != 0)
        fail_msg("add %s: %s", name, err);
}

static void write_or_fail(dsv4q_st_writer *w, const char *path)
{
    char err[512];
    if (dsv4q_st_writer_write(w, path, err, sizeof err) != 0)
        fail_msg("write %s: %s", path, err);
}

static dsv4q_st *open_or_fail(const char *path)
{
    dsv4q_st *st = NULL;
    char err[1024];
    if (dsv4q_st_open(&st, path, err, sizeof err) != 0)
        fail_msg("open %s: %s", path, err);
    return st;
}

/* ---- round trips -------------------------------------------------------- */

static const dsv4q_dtype ALL_DT[] = {
    DSV4Q_DT_F64, DSV4Q_DT_F32, DSV4Q_DT_F16, DSV4Q_DT_BF16, DSV4Q_DT_F8_E4M3,
    DSV4Q_DT_F8_E8M0, DSV4Q_DT_I8, DSV4Q_DT_U8, DSV4Q_DT_I32, DSV4Q_DT_I64,
};
#define N_DT (sizeof ALL_DT / sizeof ALL_DT[0])

/* Tensor k of the round-trip set: name, shape and a byte pattern. Shapes
 * vary so odd byte counts sit next to 8-byte types (S6 alignment). */
static void rt_tensor(size_t k, char *name, size_t nn, int *ndim, int64_t shape[], uint8_t **data, size_t *nb)
{
    dsv4q_dtype dt = ALL_DT[k];
    snprintf(name, nn, "t%02zu.%s", N_DT - k, dsv4q_dtype_name(dt));
    *ndim = (int)(k % 3) + 1;
    int64_t numel = 1;
    for (int d = 0; d < *ndim; d++) {
        shape[d] = (int64_t)(3 + (k + (size_t)d) % 4);
        numel *= shape[d];
    }
    *nb = (size_t)numel * dsv4q_dtype_size(dt);
    *data = malloc(*nb);
    assert_non_null(*data);
    for (size_t i = 0; i < *nb; i++)
        (*data)[i] = (uint8_t)(i * 31 + k * 17 + 5);
}

static void test_roundtrip_all_dtypes(void **state)
{
    (void)state;
    char path[256];
    path_in(path, sizeof path, "rt.safetensors");
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    assert_non_null(w);
    for (size_t k = 0; k < N_DT; k++) {
        char name[64];
        int nd;
        int64_t sh[8];
        uint8_t *d;
        size_t nb;
        rt_tensor(k, name, sizeof name, &nd, sh, &d, &nb);
        add(w, name, ALL_DT[k], nd, sh, d, nb);
        free(d);
    }
    int64_t zero_shape[2] = { 0, 5 };
    add(w, "empty", DSV4Q_DT_F32, 2, zero_shape, NULL, 0);
    double scalar = 3.25;
    add(w, "scalar", DSV4Q_DT_F64, 0, NULL, &scalar, sizeof scalar);
    assert_int_equal(dsv4q_st_writer_meta(w, "producer", "dsv4q test"), 0);
    assert_int_equal(dsv4q_st_writer_meta(w, "case", "roundtrip"), 0);
    assert_int_equal(dsv4q_st_writer_meta(w, "case", "roundtrip-all"), 0);   /* replaces */
    write_or_fail(w, path);

    dsv4q_st *st = open_or_fail(path);
    assert_int_equal(dsv4q_st_count(st), N_DT + 2);
    assert_int_equal(dsv4q_st_nfiles(st), 1);
    assert_string_equal(dsv4q_st_file(st, 0), path);
    assert_null(dsv4q_st_file(st, 1));
    assert_string_equal(dsv4q_st_meta(st, "producer"), "dsv4q test");
    assert_string_equal(dsv4q_st_meta(st, "case"), "roundtrip-all");
    assert_null(dsv4q_st_meta(st, "nope"));
    for (size_t k = 0; k < N_DT; k++) {
        char name[64];
        int nd;
        int64_t sh[8];
        uint8_t *d;
        size_t nb;
        rt_tensor(k, name, sizeof name, &nd, sh, &d, &nb);
        const dsv4q_st_tensor *t = dsv4q_st_find(st, name);
        if (!t)
            fail_msg("tensor %s missing", name);
        assert_string_equal(t->name, name);
        assert_int_equal(t->dtype, ALL_DT[k]);
        assert_int_equal(t->ndim, nd);
        for (int i = 0; i < nd; i++)
            assert_int_equal(t->shape[i], sh[i]);
        assert_int_equal(t->nbytes, nb);
        assert_int_equal((int64_t)nb, t->numel * (int64_t)dsv4q_dtype_size(ALL_DT[k]));
        assert_memory_equal(t->data, d, nb);
        /* S6: every tensor starts at a multiple of its element size */
        assert_int_equal((uintptr_t)t->data % dsv4q_dtype_size(ALL_DT[k]), 0);
        assert_string_equal(t->file, path);
        free(d);
    }
    const dsv4q_st_tensor *e = dsv4q_st_find(st, "empty");
    assert_non_null(e);
    assert_int_equal(e->numel, 0);
    assert_int_equal(e->nbytes, 0);
    const dsv4q_st_tensor *s = dsv4q_st_find(st, "scalar");
    assert_non_null(s);
    assert_int_equal(s->ndim, 0);
    assert_int_equal(s->numel, 1);
    double got;
    memcpy(&got, s->data, sizeof got);
    assert_true(got == 3.25);
    /* S4: at(i) is name order */
    for (size_t i = 1; i < dsv4q_st_count(st); i++)
        assert_true(strcmp(dsv4q_st_at(st, i - 1)->name, dsv4q_st_at(st, i)->name) < 0);
    assert_null(dsv4q_st_at(st, dsv4q_st_count(st)));
    assert_null(dsv4q_st_find(st, "t99"));
    dsv4q_st_close(st);

    /* S6: data section starts at a multiple of 8; header padded with spaces */
    size_t n;
    uint8_t *b = read_bytes(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | b[i];
    assert_int_equal((8 + hl) % 8, 0);
    assert_int_equal(b[8], '{');
    assert_non_null(memchr(b + 8, '}', hl));
    for (uint64_t i = hl; i > 0 && b[8 + i - 1] != '}'; i--)
        assert_int_equal(b[8 + i - 1], ' ');
    free(b);
}

/* S6 + S7: deterministic bytes, buffer == file, no temp file left. */
static void test_writer_deterministic(void **state)
{
    (void)state;
    char p1[256], p2[256];
    path_in(p1, sizeof p1, "det1.safetensors");
    path_in(p2, sizeof p2, "det2.safetensors");
    float v[6] = { 1, 2, 3, 4, 5, 6 };
    int64_t sh[2] = { 2, 3 };
    uint8_t u[3] = { 9, 8, 7 };
    int64_t su[1] = { 3 };
    for (int pass = 0; pass < 3; pass++) {
        dsv4q_st_writer *w = dsv4q_st_writer_new();
        /* insertion order differs per pass; the output must not */
        if (pass == 1) {
            add(w, "b", DSV4Q_DT_U8, 1, su, u, 3);
            add(w, "a", DSV4Q_DT_F32, 2, sh, v, sizeof v);
        } else {
            add(w, "a", DSV4Q_DT_F32, 2, sh, v, sizeof v);
            add(w, "b", DSV4Q_DT_U8, 1, su, u, 3);
        }
        if (pass == 1) {
            dsv4q_st_writer_meta(w, "z", "last");
            dsv4q_st_writer_meta(w, "k", "v");
        } else {
            dsv4q_st_writer_meta(w, "k", "v");
            dsv4q_st_writer_meta(w, "z", "last");
        }
        if (pass < 2) {
            write_or_fail(w, pass == 0 ? p1 : p2);
        } else {
            uint8_t *buf;
            size_t len;
            char err[256];
            assert_int_equal(dsv4q_st_writer_to_buffer(w, &buf, &len, err, sizeof err), 0);
            size_t n1;
            uint8_t *f1 = read_bytes(p1, &n1);
            assert_int_equal(len, n1);
            assert_memory_equal(buf, f1, n1);
            char h1[65], h2[65], hb[65];
            assert_int_equal(dsv4q_sha256_hex_file(p1, h1, err, sizeof err), 0);
            assert_int_equal(dsv4q_sha256_hex_file(p2, h2, err, sizeof err), 0);
            dsv4q_sha256_hex(buf, len, hb);
            assert_string_equal(h1, h2);
            assert_string_equal(h1, hb);
            dsv4q_st *st;
            assert_int_equal(dsv4q_st_open_buffer(&st, buf, len, "mem", err, sizeof err), 0);
            assert_int_equal(dsv4q_st_count(st), 2);
            assert_string_equal(dsv4q_st_file(st, 0), "mem");
            assert_memory_equal(dsv4q_st_find(st, "b")->data, u, 3);
            assert_string_equal(dsv4q_st_meta(st, "k"), "v");
            dsv4q_st_close(st);
            free(buf);
            free(f1);
        }
    }
    /* S7: no leftovers next to the outputs */
    DIR *d = opendir(g_dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        assert_null(strstr(de->d_name, ".tmp."));
    closedir(d);
}

static void test_writer_errors(void **state)
{
    (void)state;
    char err[512], path[256];
    float v[4] = { 0 };
    int64_t sh[1] = { 4 }, neg[1] = { -1 };
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    assert_int_equal(dsv4q_st_writer_add(w, "x", DSV4Q_DT_F32, 1, sh, v, 12, err, sizeof err), -1);
    assert_non_null(strstr(err, "'x'"));
    assert_int_equal(dsv4q_st_writer_add(w, "__metadata__", DSV4Q_DT_F32, 1, sh, v, 16, err, sizeof err), -1);
    assert_int_equal(dsv4q_st_writer_add(w, "", DSV4Q_DT_F32, 1, sh, v, 16, err, sizeof err), -1);
    assert_int_equal(dsv4q_st_writer_add(w, "n", DSV4Q_DT_F32, 1, neg, v, 16, err, sizeof err), -1);
    assert_non_null(strstr(err, "'n'"));
    assert_int_equal(dsv4q_st_writer_add(w, "bad", DSV4Q_DT_INVALID, 1, sh, v, 16, err, sizeof err), -1);
    assert_int_equal(dsv4q_st_writer_add(w, "deep", DSV4Q_DT_F32, 9, sh, v, 16, err, sizeof err), -1);
    assert_int_equal(dsv4q_st_writer_meta(w, "bad-utf8", "\xff\xfe"), -1);
    /* a duplicate is caught at write time, and nothing is left behind */
    add(w, "dup", DSV4Q_DT_F32, 1, sh, v, 16);
    add(w, "dup", DSV4Q_DT_F32, 1, sh, v, 16);
    path_in(path, sizeof path, "dup_written.safetensors");
    assert_int_equal(dsv4q_st_writer_write(w, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "'dup'"));
    assert_int_equal(access(path, F_OK), -1);
    /* an unwritable destination fails cleanly */
    w = dsv4q_st_writer_new();
    add(w, "a", DSV4Q_DT_F32, 1, sh, v, 16);
    assert_int_equal(dsv4q_st_writer_write(w, "/nonexistent-dir/x.safetensors", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent-dir/x.safetensors"));
    dsv4q_st_writer_free(NULL);
}

/* I8 with the logical E2M1 shape [out, in] and in/2 bytes per row is stored
 * with the byte shape [out, in/2]. */
static void test_writer_packed_e2m1(void **state)
{
    (void)state;
    char path[256];
    path_in(path, sizeof path, "e2m1.safetensors");
    uint8_t packed[2 * 4];
    for (int i = 0; i < 8; i++)
        packed[i] = (uint8_t)(0x21 * i);
    int64_t logical[2] = { 2, 8 };
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    add(w, "experts.0.w1.weight", DSV4Q_DT_I8, 2, logical, packed, sizeof packed);
    int64_t odd[2] = { 2, 7 };
    char err[256];
    assert_int_equal(dsv4q_st_writer_add(w, "odd", DSV4Q_DT_I8, 2, odd, packed, 7, err, sizeof err), -1);
    write_or_fail(w, path);
    dsv4q_st *st = open_or_fail(path);
    const dsv4q_st_tensor *t = dsv4q_st_find(st, "experts.0.w1.weight");
    assert_non_null(t);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 4);
    assert_int_equal(t->nbytes, 8);
    assert_memory_equal(t->data, packed, 8);
    dsv4q_st_close(st);
}

/* ---- sharded ------------------------------------------------------------ */

static void write_shard(const char *name, const char *const *tensors, int n, float base)
{
    char path[256];
    path_in(path, sizeof path, name);
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    for (int i = 0; i < n; i++) {
        float v[3] = { base + (float)i, base + (float)i + 0.5f, -base };
        int64_t sh[1] = { 3 };
        add(w, tensors[i], DSV4Q_DT_F32, 1, sh, v, sizeof v);
    }
    dsv4q_st_writer_meta(w, "shard", name);
    write_or_fail(w, path);
}

static void write_text(const char *name, const char *text)
{
    char path[256];
    path_in(path, sizeof path, name);
    write_bytes(path, text, strlen(text));
}

static void test_sharded_roundtrip(void **state)
{
    (void)state;
    char sub[256], idx[256];
    path_in(sub, sizeof sub, "sharded");
    assert_int_equal(mkdir(sub, 0755), 0);
    static const char *a[] = { "layers.0.attn.wq", "layers.0.ffn.w1", "embed" };
    static const char *b[] = { "layers.1.attn.wq", "head" };
    write_shard("sharded/model-00001-of-00002.safetensors", a, 3, 1.0f);
    write_shard("sharded/model-00002-of-00002.safetensors", b, 2, 10.0f);
    write_text("sharded/model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 60},\n \"weight_map\": {\n"
               "  \"layers.0.attn.wq\": \"model-00001-of-00002.safetensors\",\n"
               "  \"layers.0.ffn.w1\": \"model-00001-of-00002.safetensors\",\n"
               "  \"embed\": \"model-00001-of-00002.safetensors\",\n"
               "  \"layers.1.attn.wq\": \"model-00002-of-00002.safetensors\",\n"
               "  \"head\": \"model-00002-of-00002.safetensors\"}}");
    path_in(idx, sizeof idx, "sharded/model.safetensors.index.json");
    for (int via_dir = 0; via_dir < 2; via_dir++) {
        dsv4q_st *st = open_or_fail(via_dir ? sub : idx);
        assert_int_equal(dsv4q_st_count(st), 5);
        assert_int_equal(dsv4q_st_nfiles(st), 2);
        assert_non_null(strstr(dsv4q_st_file(st, 0), "model-00001-of-00002.safetensors"));
        assert_non_null(strstr(dsv4q_st_file(st, 1), "model-00002-of-00002.safetensors"));
        const dsv4q_st_tensor *t = dsv4q_st_find(st, "head");
        assert_non_null(t);
        assert_non_null(strstr(t->file, "model-00002"));
        float v[3];
        memcpy(v, t->data, sizeof v);
        assert_true(v[0] == 11.0f && v[2] == -10.0f);
        t = dsv4q_st_find(st, "layers.0.ffn.w1");
        assert_non_null(t);
        assert_non_null(strstr(t->file, "model-00001"));
        memcpy(v, t->data, sizeof v);
        assert_true(v[0] == 2.0f && v[1] == 2.5f);
        assert_string_equal(dsv4q_st_meta(st, "shard"), "sharded/model-00001-of-00002.safetensors");
        assert_string_equal(dsv4q_st_at(st, 0)->name, "embed");
        dsv4q_st_close(st);
    }
    /* a directory without an index: all *.safetensors in name order */
    char plain[256];
    path_in(plain, sizeof plain, "plain");
    assert_int_equal(mkdir(plain, 0755), 0);
    static const char *c1[] = { "x" }, *c2[] = { "y", "z" };
    write_shard("plain/b.safetensors", c1, 1, 0.0f);
    write_shard("plain/a.safetensors", c2, 2, 0.0f);
    write_text("plain/notes.txt", "not a checkpoint");
    dsv4q_st *st = open_or_fail(plain);
    assert_int_equal(dsv4q_st_count(st), 3);
    assert_int_equal(dsv4q_st_nfiles(st), 2);
    assert_non_null(strstr(dsv4q_st_file(st, 0), "/a.safetensors"));
    assert_non_null(strstr(dsv4q_st_find(st, "x")->file, "/b.safetensors"));
    dsv4q_st_close(st);
}

/* ---- malformed inputs: each names the file (and the tensor) ------------- */

static const char *GOOD_HDR =
    "{\"__metadata__\":{\"a\":\"b\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"v\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[16,19]}}";

static void test_bad_truncated(void **state)
{
    (void)state;
    size_t len;
    uint8_t *img = raw_image(GOOD_HDR, 19, -1, &len);
    char path[256], err[512];
    path_in(path, sizeof path, "good.safetensors");
    write_bytes(path, img, len);
    dsv4q_st *st = open_or_fail(path);   /* the uncut image is fine */
    assert_int_equal(dsv4q_st_count(st), 2);
    dsv4q_st_close(st);
    /* cut inside the header */
    expect_bad_file("cut_header.safetensors", img, 8 + strlen(GOOD_HDR) / 2, NULL, "header length");
    /* cut inside the data: names the tensor whose range runs off the end */
    expect_bad_file("cut_data.safetensors", img, len - 2, "v", "out of the file");
    /* cut inside the length field itself */
    expect_bad_file("cut_len.safetensors", img, 5, NULL, "8-byte");
    free(img);
    /* header length far past the file */
    img = raw_image(GOOD_HDR, 19, 1000000, &len);
    expect_bad_file("hlen_big.safetensors", img, len, NULL, "header length 1000000");
    free(img);
    img = raw_image(GOOD_HDR, 19, (long long)0x7fffffffffffffffLL, &len);
    expect_bad_file("hlen_huge.safetensors", img, len, NULL, "header length");
    free(img);
    /* an empty file */
    path_in(path, sizeof path, "empty.safetensors");
    write_bytes(path, "", 0);
    assert_int_equal(dsv4q_st_open(&st, path, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
}

static void test_bad_json_cases(void **state)
{
    (void)state;
    expect_bad("json_cut.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],", 4, NULL, "JSON");
    expect_bad("json_garbage.safetensors", "{\"w\" 12}", 0, NULL, "JSON");
    expect_bad("json_utf8.safetensors",
               "{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NULL, "UTF-8");
    expect_bad("json_notobj.safetensors", "[1,2,3]", 0, NULL, "'{'");
    expect_bad("json_trailing.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, NULL, "JSON");
    expect_bad("json_nul.safetensors", "{\"w\\u0000\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               4, NULL, "JSON");
}

static void test_bad_entries(void **state)
{
    (void)state;
    expect_bad("no_dtype.safetensors", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "w", "dtype");
    expect_bad("no_shape.safetensors", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "w", "shape");
    expect_bad("no_offsets.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "w", "data_offsets");
    expect_bad("entry_str.safetensors", "{\"w\":\"F32\"}", 0, "w", NULL);
    expect_bad("unknown_dtype.safetensors",
               "{\"w\":{\"dtype\":\"F7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "w", "unknown dtype 'F7'");
    expect_bad("bool_dtype.safetensors",
               "{\"w\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "w", "unknown dtype");
    expect_bad("neg_dim.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[-4],\"data_offsets\":[0,4]}}", 4, "w", "negative");
    expect_bad("float_dim.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[4.0],\"data_offsets\":[0,4]}}", 4, "w", "shape");
    expect_bad("many_dims.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,4],\"data_offsets\":[0,4]}}", 4, "w",
               "dimensions");
    expect_bad("size_mismatch.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16, "w", "needs 12");
    expect_bad("i8_mismatch.safetensors",
               "{\"w\":{\"dtype\":\"I8\",\"shape\":[2,8],\"data_offsets\":[0,8]}}", 8, "w", "needs 16");
    expect_bad("numel_overflow.safetensors",
               "{\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, "w",
               "overflow");
    expect_bad("offs_range.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[0,64]}}", 16, "w", "out of the file");
    expect_bad("offs_huge.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[9223372036854775800,"
               "9223372036854775804]}}", 4, "w", "out of the file");
    expect_bad("offs_reversed.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, "w", "before begin");
    expect_bad("offs_neg.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[-4,0]}}", 4, "w", "non-negative");
    expect_bad("offs_three.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}}", 8, "w", "pair");
    expect_bad("meta_nonstring.safetensors",
               "{\"__metadata__\":{\"n\":3},\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
               4, NULL, "__metadata__");
}

static void test_bad_layout(void **state)
{
    (void)state;
    expect_bad("overlap.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 24, "b", "overlap");
    expect_bad("same_range.safetensors",
               "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, NULL, "overlap");
    expect_bad("hole.safetensors",
               "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}", 12, "b", "no tensor");
    expect_bad("trailing.safetensors",
               "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 9, NULL, "trailing");
    expect_bad("dup_name.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8, "w", "duplicate");
    expect_bad("dup_long_name.safetensors",
               "{\"layers.12.ffn.experts.255.w3.weight\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
               "\"layers.12.ffn.experts.255.w3.weight\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
               12, "layers.12.ffn.experts.255.w3.weight", "duplicate");
    expect_bad("dup_inner_key.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, NULL,
               "duplicate");
}

static void test_bad_shards(void **state)
{
    (void)state;
    char sub[256], idx[256], err[1024];
    dsv4q_st *st;
    /* duplicate names across shards (directory without index) */
    path_in(sub, sizeof sub, "dupdir");
    assert_int_equal(mkdir(sub, 0755), 0);
    static const char *t1[] = { "shared.name", "a" }, *t2[] = { "shared.name" };
    write_shard("dupdir/s1.safetensors", t1, 2, 1.0f);
    write_shard("dupdir/s2.safetensors", t2, 1, 2.0f);
    assert_int_equal(dsv4q_st_open(&st, sub, err, sizeof err), -1);
    assert_null(st);
    assert_non_null(strstr(err, "'shared.name'"));
    assert_non_null(strstr(err, "s2.safetensors"));
    assert_non_null(strstr(err, "duplicate"));

    /* index naming a missing shard */
    path_in(sub, sizeof sub, "missing");
    assert_int_equal(mkdir(sub, 0755), 0);
    static const char *t3[] = { "a", "b" };
    write_shard("missing/m1.safetensors", t3, 2, 1.0f);
    write_text("missing/model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"m1.safetensors\", \"b\": \"m1.safetensors\","
               " \"c\": \"m2.safetensors\"}}");
    path_in(idx, sizeof idx, "missing/model.safetensors.index.json");
    assert_int_equal(dsv4q_st_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, idx));
    assert_non_null(strstr(err, "m2.safetensors"));
    assert_non_null(strstr(err, "'c'"));
    assert_int_equal(dsv4q_st_open(&st, sub, err, sizeof err), -1);   /* via the directory too */
    assert_non_null(strstr(err, "m2.safetensors"));

    /* index naming a tensor its shard does not hold */
    path_in(sub, sizeof sub, "absent");
    assert_int_equal(mkdir(sub, 0755), 0);
    write_shard("absent/m1.safetensors", t3, 2, 1.0f);
    write_text("absent/model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"m1.safetensors\", \"b\": \"m1.safetensors\","
               " \"ghost\": \"m1.safetensors\"}}");
    path_in(idx, sizeof idx, "absent/model.safetensors.index.json");
    assert_int_equal(dsv4q_st_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, idx));
    assert_non_null(strstr(err, "'ghost'"));
    assert_non_null(strstr(err, "m1.safetensors"));

    /* index putting a tensor in the wrong shard */
    path_in(sub, sizeof sub, "wrong");
    assert_int_equal(mkdir(sub, 0755), 0);
    static const char *t4[] = { "c" };
    write_shard("wrong/m1.safetensors", t3, 2, 1.0f);
    write_shard("wrong/m2.safetensors", t4, 1, 1.0f);
    write_text("wrong/model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"m1.safetensors\", \"b\": \"m2.safetensors\","
               " \"c\": \"m2.safetensors\"}}");
    path_in(idx, sizeof idx, "wrong/model.safetensors.index.json");
    assert_int_equal(dsv4q_st_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, "'b'"));

    /* a shard tensor the index does not list (S5) */
    write_text("wrong/model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"m1.safetensors\", \"c\": \"m2.safetensors\"}}");
    assert_int_equal(dsv4q_st_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, "'b'"));
    assert_non_null(strstr(err, "not listed"));

    /* malformed indexes */
    write_text("wrong/model.safetensors.index.json", "{\"weight_map\": [1]}");
    assert_int_equal(dsv4q_st_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, idx));
    write_text("wrong/model.safetensors.index.json", "{\"weight_map\": {\"a\": 3}}");
    assert_int_equal(dsv4q_st_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, "'a'"));
    write_text("wrong/model.safetensors.index.json", "{\"weight_map\": {\"a\": \"m1.safetensors\",");
    assert_int_equal(dsv4q_st_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, "JSON"));

    /* nothing to open */
    path_in(sub, sizeof sub, "void");
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(dsv4q_st_open(&st, sub, err, sizeof err), -1);
    assert_non_null(strstr(err, sub));
    path_in(sub, sizeof sub, "no-such-file.safetensors");
    assert_int_equal(dsv4q_st_open(&st, sub, err, sizeof err), -1);
    assert_non_null(strstr(err, sub));
}

/* Every prefix of a valid image is refused, never crashes (no read past the
 * length the reader is told). */
static void test_every_prefix(void **state)
{
    (void)state;
    size_t len;
    uint8_t *img = raw_image(GOOD_HDR, 19, -1, &len);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1);   /* exact size: ASan/valgrind catch overreads */
        memcpy(copy, img, n);
        dsv4q_st *st;
        char err[512];
        assert_int_equal(dsv4q_st_open_buffer(&st, copy, n, "prefix", err, sizeof err), -1);
        assert_non_null(strstr(err, "prefix"));
        free(copy);
    }
    dsv4q_st *st;
    char err[512];
    assert_int_equal(dsv4q_st_open_buffer(&st, img, len, "whole", err, sizeof err), 0);
    dsv4q_st_close(st);
    free(img);
}

/* Reads a real checkpoint written by the safetensors package (torch). */
static void test_reference_checkpoint(void **state)
{
    (void)state;
    const char *p = "tests/data/pub_tiny/golden_fp64.safetensors";
    if (access(p, R_OK) != 0)
        skip();
    dsv4q_st *st = open_or_fail(p);
    const dsv4q_st_tensor *t = dsv4q_st_find(st, "logits_decode");
    assert_non_null(t);
    assert_int_equal(t->dtype, DSV4Q_DT_F64);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 8);
    assert_int_equal(t->shape[1], 512);
    assert_string_equal(dsv4q_st_meta(st, "case"), "pub_tiny");
    dsv4q_st_close(st);
}

/* ---- sha256 ------------------------------------------------------------- */

static void test_sha256(void **state)
{
    (void)state;
    char hex[65], err[256], path[256];
    dsv4q_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    dsv4q_sha256_hex(NULL, 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* a file larger than one read chunk */
    size_t n = (1u << 20) * 2 + 12345;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 2654435761u >> 13);
    path_in(path, sizeof path, "big.bin");
    write_bytes(path, b, n);
    char h2[65];
    dsv4q_sha256_hex(b, n, h2);
    assert_int_equal(dsv4q_sha256_hex_file(path, hex, err, sizeof err), 0);
    assert_string_equal(hex, h2);
    free(b);
    path_in(path, sizeof path, "absent.bin");
    assert_int_equal(dsv4q_sha256_hex_file(path, hex, err, sizeof err), -1);
    assert_string_equal(hex, "");
    assert_non_null(strstr(err, path));
}

/* ---- interop (driven by tests/interop_safetensors.py) -------------------- */

/* Half-precision decode, enough for the small exact values used here. */
static double half_to_double(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static double elem(const dsv4q_st_tensor *t, size_t i)
{
    const uint8_t *p = (const uint8_t *)t->data + i * dsv4q_dtype_size(t->dtype);
    switch (t->dtype) {
    case DSV4Q_DT_F64: { double x; memcpy(&x, p, 8); return x; }
    case DSV4Q_DT_F32: { float x; memcpy(&x, p, 4); return x; }
    case DSV4Q_DT_F16: { uint16_t x; memcpy(&x, p, 2); return half_to_double(x); }
    case DSV4Q_DT_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case DSV4Q_DT_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case DSV4Q_DT_I8:  return (int8_t)p[0];
    case DSV4Q_DT_U8:  return p[0];
    default: return NAN;
    }
}

/* Contract with interop_safetensors.py: tensors named "py_<dtype>" of shape
 * [3, 4], element i = (i - 4) * 0.25 for floats, i - 4 for signed ints,
 * i for U8; metadata {"producer": "safetensors-python"}. */
static void check_from_py(const char *path)
{
    static const struct { const char *name; dsv4q_dtype dt; } want[] = {
        { "py_f64", DSV4Q_DT_F64 }, { "py_f32", DSV4Q_DT_F32 }, { "py_f16", DSV4Q_DT_F16 },
        { "py_i64", DSV4Q_DT_I64 }, { "py_i32", DSV4Q_DT_I32 }, { "py_i8", DSV4Q_DT_I8 },
        { "py_u8", DSV4Q_DT_U8 },
    };
    dsv4q_st *st = open_or_fail(path);
    assert_int_equal(dsv4q_st_count(st), sizeof want / sizeof want[0]);
    assert_string_equal(dsv4q_st_meta(st, "producer"), "safetensors-python");
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const dsv4q_st_tensor *t = dsv4q_st_find(st, want[k].name);
        if (!t)
            fail_msg("%s: no tensor %s", path, want[k].name);
        assert_int_equal(t->dtype, want[k].dt);
        assert_int_equal(t->ndim, 2);
        assert_int_equal(t->shape[0], 3);
        assert_int_equal(t->shape[1], 4);
        for (size_t i = 0; i < 12; i++) {
            double x = (double)i - 4;
            if (want[k].dt == DSV4Q_DT_U8)
                x = (double)i;
            else if (want[k].dt == DSV4Q_DT_F64 || want[k].dt == DSV4Q_DT_F32 || want[k].dt == DSV4Q_DT_F16)
                x *= 0.25;
            if (elem(t, i) != x)
                fail_msg("%s[%zu] = %g, want %g", want[k].name, i, elem(t, i), x);
        }
    }
    dsv4q_st_close(st);
}

/* Contract for from_c.safetensors: "c_<dtype>" for every dtype, shape
 * [3, 4] (I8 packed E2M1: logical [3, 8] -> byte shape [3, 4]), element i
 * as in check_from_py; BF16 = the top half of the F32 bits; F8_E4M3 codes
 * 0x30 + i (1.0 + i/8 ... ), F8_E8M0 codes 120 + i; metadata
 * {"producer": "dsv4q", "format": "pt"}. */
static void write_from_c(const char *path)
{
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    int64_t sh[2] = { 3, 4 };
    double f64[12];
    float f32[12];
    uint16_t f16[12], bf16[12];
    int64_t i64[12];
    int32_t i32[12];
    int8_t i8[12];
    uint8_t u8[12], e4[12], e8[12];
    for (int i = 0; i < 12; i++) {
        f64[i] = (i - 4) * 0.25;
        f32[i] = (float)f64[i];
        uint32_t bits;
        memcpy(&bits, &f32[i], 4);
        bf16[i] = (uint16_t)(bits >> 16);
        /* binary16 of (i-4)/4: exact; build from sign/exponent/mantissa */
        double a = fabs(f64[i]);
        uint16_t h = 0;
        if (a > 0) {
            int e;
            double m = frexp(a, &e);   /* a = m * 2^e, m in [0.5, 1) */
            h = (uint16_t)(((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024));
        }
        f16[i] = (uint16_t)(h | (f64[i] < 0 ? 0x8000 : 0));
        i64[i] = i - 4;
        i32[i] = i - 4;
        i8[i] = (int8_t)(i - 4);
        u8[i] = (uint8_t)i;
        e4[i] = (uint8_t)(0x30 + i);
        e8[i] = (uint8_t)(120 + i);
    }
    add(w, "c_f64", DSV4Q_DT_F64, 2, sh, f64, sizeof f64);
    add(w, "c_f32", DSV4Q_DT_F32, 2, sh, f32, sizeof f32);
    add(w, "c_f16", DSV4Q_DT_F16, 2, sh, f16, sizeof f16);
    add(w, "c_bf16", DSV4Q_DT_BF16, 2, sh, bf16, sizeof bf16);
    add(w, "c_i64", DSV4Q_DT_I64, 2, sh, i64, sizeof i64);
    add(w, "c_i32", DSV4Q_DT_I32, 2, sh, i32, sizeof i32);
    add(w, "c_i8", DSV4Q_DT_I8, 2, sh, i8, sizeof i8);
    add(w, "c_u8", DSV4Q_DT_U8, 2, sh, u8, sizeof u8);
    add(w, "c_f8_e4m3", DSV4Q_DT_F8_E4M3, 2, sh, e4, sizeof e4);
    add(w, "c_f8_e8m0", DSV4Q_DT_F8_E8M0, 2, sh, e8, sizeof e8);
    int64_t logical[2] = { 3, 8 };
    add(w, "c_e2m1_packed", DSV4Q_DT_I8, 2, logical, u8, sizeof u8);
    dsv4q_st_writer_meta(w, "producer", "dsv4q");
    dsv4q_st_writer_meta(w, "format", "pt");
    write_or_fail(w, path);
}

static void test_interop(void **state)
{
    (void)state;
    const char *dir = getenv("DSV4Q_INTEROP_DIR");
    if (!dir || !dir[0])
        skip();
    char p[1024];
    snprintf(p, sizeof p, "%s/from_c.safetensors", dir);
    write_from_c(p);
    dsv4q_st *st = open_or_fail(p);   /* our own reader accepts it too */
    assert_int_equal(dsv4q_st_count(st), 11);
    dsv4q_st_close(st);
    snprintf(p, sizeof p, "%s/from_py.safetensors", dir);
    if (access(p, R_OK) == 0)
        check_from_py(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_dtypes),
        cmocka_unit_test(test_writer_deterministic),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_writer_packed_e2m1),
        cmocka_unit_test(test_sharded_roundtrip),
        cmocka_unit_test(test_bad_truncated),
        cmocka_unit_test(test_bad_json_cases),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_bad_layout),
        cmocka_unit_test(test_bad_shards),
        cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_reference_checkpoint),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_interop),
    };
    return cmocka_run_group_tests_name("safetensors", tests, setup_dir, teardown_dir);
}
