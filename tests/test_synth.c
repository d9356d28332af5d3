/*
 * test_synth.c - synthetic checkpoints (io/synth.c) through the real loader.
 *
 * Owns the evidence that synth output is a checkpoint the loader accepts in
 * every regime (tiny: FP8 + FP4 experts + MTP; tiny-bf16), that it is a
 * function of (config, seed) only (byte-identical reruns, sharded == single
 * file tensor for tensor), that the stored codes are the documented recipe
 * re-derived here independently (dmath Box-Muller, formats.h encoders, a
 * hand-written E2M1 nibble decode), that the logits have a usable spread,
 * and that every corrupted copy is refused by dsv4q_model_open with a
 * message naming the file and the tensor or field.
 */
#include "tests/testutil.h"
#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io/sha256.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/dmath.h"
#include "oracle/formats.h"
#include "oracle/model_run.h"
#include "oracle/ops.h"

#include <dirent.h>
#include <omp.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- fixture: one temp root with the checkpoints every test reads ------- */

static char g_root[64];
static char g_a[256], g_a2[256], g_b[256], g_s3[256], g_bf[256];

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int synth(const char *cfgname, uint64_t seed, const char *dir, int shards)
{
    dsv4q_config cfg;
    char err[1024];
    if (dsv4q_config_builtin(&cfg, cfgname, err, sizeof err)) {
        fprintf(stderr, "config: %s\n", err);
        return -1;
    }
    double t0 = now_s();
    if (dsv4q_synth_write(&cfg, seed, dir, shards, err, sizeof err)) {
        fprintf(stderr, "synth: %s\n", err);
        return -1;
    }
    fprintf(stderr, "[ synth    ] %s seed %llu shards %d: %.3f s\n", cfgname, (unsigned long long)seed, shards,
            now_s() - t0);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/dsv4q_synth_XXXXXX");
    if (!mkdtemp(g_root)) return -1;
    snprintf(g_a, sizeof g_a, "%s/a", g_root);
    snprintf(g_a2, sizeof g_a2, "%s/sub/dir/a2", g_root);   /* exercises mkdir -p */
    snprintf(g_b, sizeof g_b, "%s/b", g_root);
    snprintf(g_s3, sizeof g_s3, "%s/s3/", g_root);          /* trailing slash */
    snprintf(g_bf, sizeof g_bf, "%s/bf", g_root);
    if (synth("tiny", 7, g_a, 1) || synth("tiny", 7, g_a2, 0) || synth("tiny", 8, g_b, 1) ||
        synth("tiny", 7, g_s3, 3) || synth("tiny-bf16", 7, g_bf, 1))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rm_tree(g_root);
    return 0;
}

static uint8_t *read_file(const char *path, size_t *n)
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
    b[sz] = 0;
    *n = (size_t)sz;
    return b;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *b = read_file(from, &n);
    write_file(to, b, n);
    free(b);
}

static dsv4q_model *open_ok(const char *dir)
{
    dsv4q_model *m = NULL;
    char err[1024] = "";
    if (dsv4q_model_open(&m, dir, err, sizeof err)) fail_msg("model_open(%s): %s", dir, err);
    return m;
}

/* ---- loads ------------------------------------------------------------- */

static void test_tiny_loads(void **state)
{
    (void)state;
    dsv4q_model *m = open_ok(g_a);
    const dsv4q_config *g = &m->cfg;
    assert_string_equal(g->name, "tiny");
    assert_int_equal(m->embed.fmt, DSV4Q_WF_BF16);
    assert_int_equal(m->head.fmt, DSV4Q_WF_F32);
    const dsv4q_layer_w *L0 = &m->layers[0], *L1 = &m->layers[1];
    assert_int_equal(L0->wq_a.fmt, DSV4Q_WF_FP8);
    assert_int_equal(L0->wo_a.fmt, DSV4Q_WF_BF16);   /* FP8 on disk, dequantized by the loader */
    assert_int_equal(L0->experts[0].w1.fmt, DSV4Q_WF_FP4);
    assert_int_equal(L0->shared.w2.fmt, DSV4Q_WF_FP8);
    assert_int_equal(L0->gate.fmt, DSV4Q_WF_F32);
    assert_non_null(L0->tid2eid);
    assert_true(L0->hash && !L1->hash);
    assert_int_equal(L1->ratio, 4);
    assert_int_equal(L1->idx_weights_proj.fmt, DSV4Q_WF_BF16);
    assert_int_equal(L1->gate_bias.n, g->n_routed_experts);
    int nl = g->n_layers + g->n_mtp_layers;
    assert_true(m->layers[nl - 1].is_mtp);
    assert_int_equal(m->layers[nl - 1].e_proj.fmt, DSV4Q_WF_FP8);
    /* every weight view decodes to finite values */
    char err[512];
    assert_int_equal(dsv4q_weight_check_finite(&L1->experts[5].w2, err, sizeof err), 0);
    assert_int_equal(dsv4q_weight_check_finite(&L1->wo_a, err, sizeof err), 0);
    dsv4q_model_close(m);
}

static void test_bf16_loads(void **state)
{
    (void)state;
    dsv4q_model *m = open_ok(g_bf);
    assert_int_equal(m->layers[0].wq_a.fmt, DSV4Q_WF_BF16);
    assert_int_equal(m->layers[0].wo_a.fmt, DSV4Q_WF_BF16);
    assert_int_equal(m->layers[1].experts[0].w1.fmt, DSV4Q_WF_BF16);
    /* same ideal values in both regimes: the BF16 wq_a is the RNE of the
     * value the FP8 one quantizes */
    const dsv4q_weight *w = &m->layers[2].wq_a;
    uint64_t key = dsv4q_synth_key(7, "layers.2.attn.wq_a.weight");
    for (int64_t i = 0; i < 300; i++) {
        int64_t o = (i * 37) % w->out, k = (i * 101) % w->in;
        double v = dsv4q_synth_normal(key, (uint64_t)(o * w->in + k)) / sqrt((double)w->in);
        assert_true(dsv4q_weight_at(w, o, k) == dsv4q_bf16_decode(dsv4q_bf16_encode(v)));
    }
    dsv4q_model_close(m);
}

/* ---- determinism ------------------------------------------------------- */

/* SHA-256 of a checkpoint file (the whole file read into memory; tiny). */
static void sha(const char *dir, const char *file, char hex[65])
{
    char p[512];
    size_t n;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    uint8_t *b = read_file(p, &n);
    dsv4q_sha256_hex(b, n, hex);
    free(b);
}

static void test_same_seed_same_bytes(void **state)
{
    (void)state;
    char h1[65], h2[65];
    sha(g_a, "model.safetensors", h1);
    sha(g_a2, "model.safetensors", h2);
    fprintf(stderr, "[ sha256   ] tiny seed 7 model.safetensors %s\n", h1);
    assert_string_equal(h1, h2);
    sha(g_a, "config.json", h1);
    sha(g_a2, "config.json", h2);
    assert_string_equal(h1, h2);
    sha(g_b, "model.safetensors", h2);
    sha(g_a, "model.safetensors", h1);
    assert_string_not_equal(h1, h2);
    /* no temp directory left behind next to the outputs */
    DIR *d = opendir(g_root);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) assert_null(strstr(de->d_name, ".synth-"));
    closedir(d);
}

/* Tensors of >= 2^20 elements are generated in parallel: a config with
 * such tensors in every storage path (BF16 embed, F32 head, FP8 shared
 * experts, FP4 experts) gives the same bytes on 1 and 3 threads. */
static void test_thread_independence(void **state)
{
    (void)state;
    dsv4q_config cfg;
    char err[1024], d1[256], d3[256];
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny", err, sizeof err), 0);
    snprintf(cfg.name, sizeof cfg.name, "%s", "");
    cfg.dim = 1024;
    cfg.moe_inter_dim = 1024;
    cfg.n_layers = 1;
    cfg.n_mtp_layers = 0;
    cfg.n_hash_layers = 0;
    cfg.n_routed_experts = 2;
    cfg.n_activated_experts = 1;
    cfg.compress_ratios[0] = 4;
    cfg.n_compress_ratios = 1;
    if (dsv4q_config_validate(&cfg, err, sizeof err)) fail_msg("%s", err);
    snprintf(d1, sizeof d1, "%s/threads1", g_root);
    snprintf(d3, sizeof d3, "%s/threads3", g_root);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    double t0 = now_s();
    int rc = dsv4q_synth_write(&cfg, 5, d1, 1, err, sizeof err);
    double t1 = now_s();
    omp_set_num_threads(3);
    if (!rc) rc = dsv4q_synth_write(&cfg, 5, d3, 1, err, sizeof err);
    double t2 = now_s();
    omp_set_num_threads(saved);
    if (rc) fail_msg("%s", err);
    fprintf(stderr, "[ threads  ] 1 thread %.3f s, 3 threads %.3f s\n", t1 - t0, t2 - t1);
    char h1[65], h3[65];
    sha(d1, "model.safetensors", h1);
    sha(d3, "model.safetensors", h3);
    assert_string_equal(h1, h3);
    dsv4q_model *m = open_ok(d3);
    assert_int_equal(m->layers[0].experts[1].w2.fmt, DSV4Q_WF_FP4);
    dsv4q_model_close(m);
    rm_tree(d1);
    rm_tree(d3);
}

static void test_sharded_equals_single(void **state)
{
    (void)state;
    char p[512], err[1024];
    for (int i = 1; i <= 3; i++) {
        snprintf(p, sizeof p, "%smodel-%05d-of-00003.safetensors", g_s3, i);
        assert_int_equal(access(p, R_OK), 0);
    }
    snprintf(p, sizeof p, "%smodel.safetensors", g_s3);
    assert_int_not_equal(access(p, F_OK), 0);
    dsv4q_st *one = NULL, *three = NULL;
    snprintf(p, sizeof p, "%s/model.safetensors", g_a);
    if (dsv4q_st_open(&one, p, err, sizeof err)) fail_msg("%s", err);
    snprintf(p, sizeof p, "%smodel.safetensors.index.json", g_s3);
    if (dsv4q_st_open(&three, p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(dsv4q_st_count(one), dsv4q_st_count(three));
    assert_int_equal(dsv4q_st_nfiles(three), 3);
    for (size_t i = 0; i < dsv4q_st_count(one); i++) {
        const dsv4q_st_tensor *a = dsv4q_st_at(one, i), *b = dsv4q_st_at(three, i);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->dtype, b->dtype);
        assert_int_equal(a->ndim, b->ndim);
        for (int d = 0; d < a->ndim; d++) assert_int_equal(a->shape[d], b->shape[d]);
        assert_int_equal(a->nbytes, b->nbytes);
        if (memcmp(a->data, b->data, a->nbytes)) fail_msg("tensor %s differs between shards and single file", a->name);
    }
    /* split by layer: embed first, head last, a layer never straddles */
    assert_non_null(strstr(dsv4q_st_find(three, "embed.weight")->file, "model-00001-of-00003"));
    assert_non_null(strstr(dsv4q_st_find(three, "head.weight")->file, "model-00003-of-00003"));
    assert_non_null(strstr(dsv4q_st_find(three, "layers.0.attn.wq_a.weight")->file, "model-00001-of-00003"));
    assert_non_null(strstr(dsv4q_st_find(three, "mtp.0.e_proj.weight")->file, "model-00003-of-00003"));
    for (int li = 0; li < 5; li++) {
        char n1[128], n2[128];
        snprintf(n1, sizeof n1, "layers.%d.hc_attn_fn", li);
        snprintf(n2, sizeof n2, "layers.%d.ffn.shared_experts.w3.scale", li);
        assert_string_equal(dsv4q_st_find(three, n1)->file, dsv4q_st_find(three, n2)->file);
    }
    dsv4q_st_close(one);
    dsv4q_st_close(three);
    dsv4q_model *m = open_ok(g_s3);
    dsv4q_model_close(m);
}

static void test_refusals(void **state)
{
    (void)state;
    dsv4q_config cfg;
    char err[1024] = "", p[512];
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny", err, sizeof err), 0);
    /* an existing non-empty directory is never overwritten */
    assert_int_equal(dsv4q_synth_write(&cfg, 7, g_a, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, g_a));
    /* more shards than layers */
    snprintf(p, sizeof p, "%s/toomany", g_root);
    assert_int_equal(dsv4q_synth_write(&cfg, 7, p, 7, err, sizeof err), -1);
    assert_non_null(strstr(err, "shards"));
    assert_int_not_equal(access(p, F_OK), 0);
    /* an invalid config is refused before anything is written */
    cfg.head_dim = 100;
    assert_int_equal(dsv4q_synth_write(&cfg, 7, p, 1, err, sizeof err), -1);
    assert_int_not_equal(access(p, F_OK), 0);
    /* an existing empty directory is fine */
    snprintf(p, sizeof p, "%s/empty", g_root);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny-bf16", err, sizeof err), 0);
    if (dsv4q_synth_write(&cfg, 3, p, 2, err, sizeof err)) fail_msg("%s", err);
    dsv4q_model *m = open_ok(p);
    dsv4q_model_close(m);
    assert_non_null(strstr(dsv4q_synth_recipe(), "N/sqrt(in)"));
}

/* ---- the recipe, re-derived -------------------------------------------- */

/* Box-Muller with dmath (the documented formula, independently). */
static double ref_normal(uint64_t key, uint64_t i)
{
    uint64_t j = i >> 1;
    double u1 = (double)((dsv4q_synth_bits(key, 2 * j) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(dsv4q_synth_bits(key, 2 * j + 1) >> 11) * 0x1p-53;
    double r = sqrt(-2.0 * dsv4q_log(u1)), t = 2.0 * M_PI * u2;
    return (i & 1) ? r * dsv4q_sin(t) : r * dsv4q_cos(t);
}

static void test_normal_generator(void **state)
{
    (void)state;
    uint64_t key = dsv4q_synth_key(11, "some.tensor");
    assert_true(key != dsv4q_synth_key(12, "some.tensor"));
    assert_true(key != dsv4q_synth_key(11, "some.tensor2"));
    const long n = 400000;
    double s1 = 0, s2 = 0, s4 = 0, maxdiff = 0;
    for (long i = 0; i < n; i++) {
        double g = dsv4q_synth_normal(key, (uint64_t)i);
        double d = fabs(g - ref_normal(key, (uint64_t)i)) / (1.0 + fabs(g));
        if (d > maxdiff) maxdiff = d;
        s1 += g;
        s2 += g * g;
        s4 += g * g * g * g;
    }
    double mean = s1 / n, var = s2 / n - mean * mean, kurt = (s4 / n) / (var * var);
    fprintf(stderr, "[ normal   ] mean %.4f var %.4f kurtosis %.3f, max |synth - dmath| %.2e\n", mean, var, kurt,
            maxdiff);
    assert_true(maxdiff < 1e-14);
    assert_true(fabs(mean) < 0.01 && fabs(var - 1.0) < 0.01 && fabs(kurt - 3.0) < 0.05);
}

/* synth's fast encoders agree with formats.h on every grid point, every
 * midpoint between neighbours (the ties), their float neighbours, and a
 * sweep of random values. */
static void check_e4m3(double v)
{
    uint8_t a = dsv4q_synth_e4m3(v), b = dsv4q_e4m3_encode(v, 1);
    if (a != b) fail_msg("e4m3(%a): synth 0x%02x, formats 0x%02x", v, a, b);
}

static void check_e2m1(double v)
{
    uint8_t a = dsv4q_synth_e2m1(v), b = dsv4q_e2m1_encode(v);
    if (a != b) fail_msg("e2m1(%a): synth 0x%x, formats 0x%x", v, a, b);
}

static void test_fast_encoders(void **state)
{
    (void)state;
    double g8[128], g4[8];
    int n8 = 0;
    for (int c = 0; c < 0x7F; c++) g8[n8++] = dsv4q_e4m3_decode((uint8_t)c);   /* 0 .. 448 ascending */
    for (int c = 0; c < 8; c++) g4[c] = dsv4q_e2m1_decode((uint8_t)c);
    for (int sgn = 0; sgn < 2; sgn++) {
        double sg = sgn ? -1.0 : 1.0;
        for (int i = 0; i < n8; i++) {
            double pts[3] = {g8[i], i + 1 < n8 ? 0.5 * (g8[i] + g8[i + 1]) : 456.0, i + 1 < n8 ? g8[i + 1] : 464.0};
            for (int j = 0; j < 3; j++) {
                check_e4m3(sg * pts[j]);
                check_e4m3(sg * nextafter(pts[j], 0.0));
                check_e4m3(sg * nextafter(pts[j], 1e9));
            }
        }
        for (int i = 0; i < 8; i++) {
            double pts[2] = {g4[i], i + 1 < 8 ? 0.5 * (g4[i] + g4[i + 1]) : 7.0};
            for (int j = 0; j < 2; j++) {
                check_e2m1(sg * pts[j]);
                check_e2m1(sg * nextafter(pts[j], 0.0));
                check_e2m1(sg * nextafter(pts[j], 1e9));
            }
        }
        check_e4m3(sg * 500.0);
        check_e4m3(sg * 1e-30);
        check_e2m1(sg * 100.0);
        check_e2m1(sg * 1e-30);
    }
    check_e4m3(NAN);
    check_e2m1(NAN);
    uint64_t key = dsv4q_synth_key(5, "encoders");
    for (uint64_t i = 0; i < 200000; i++) {
        double u = (double)(dsv4q_synth_bits(key, i) >> 11) * 0x1p-53;
        check_e4m3((u - 0.5) * 2.0 * ldexp(1.0, (int)(i % 20) - 10) * 448.0);
        check_e2m1((u - 0.5) * 14.0);
    }
}

static const dsv4q_st_tensor *find(dsv4q_st *st, const char *name)
{
    const dsv4q_st_tensor *t = dsv4q_st_find(st, name);
    if (!t) fail_msg("tensor %s missing", name);
    return t;
}

static void test_recipe_values(void **state)
{
    (void)state;
    char p[512], err[1024];
    dsv4q_st *st = NULL;
    snprintf(p, sizeof p, "%s/model.safetensors", g_a);
    if (dsv4q_st_open(&st, p, err, sizeof err)) fail_msg("%s", err);
    const uint64_t seed = 7;
    /* F32 norm: (float)(1 + 0.05 N) */
    const dsv4q_st_tensor *t = find(st, "layers.3.ffn_norm.weight");
    assert_int_equal(t->dtype, DSV4Q_DT_F32);
    uint64_t key = dsv4q_synth_key(seed, t->name);
    for (long i = 0; i < t->numel; i++)
        assert_true(((const float *)t->data)[i] == (float)(1.0 + 0.05 * dsv4q_synth_normal(key, (uint64_t)i)));
    /* hc fn: N*0.5/sqrt(hc*dim) */
    t = find(st, "layers.0.hc_ffn_fn");
    key = dsv4q_synth_key(seed, t->name);
    for (long i = 0; i < t->numel; i += 97)
        assert_true(((const float *)t->data)[i] ==
                    (float)((dsv4q_synth_normal(key, (uint64_t)i) * 0.5) / sqrt((double)t->shape[1])));
    /* embed: BF16 of N + u[col] */
    t = find(st, "embed.weight");
    assert_int_equal(t->dtype, DSV4Q_DT_BF16);
    key = dsv4q_synth_key(seed, "embed.weight");
    uint64_t ukey = dsv4q_synth_key(seed, "embed.weight/u");
    for (long i = 0; i < t->numel; i += 13) {
        long col = i % t->shape[1];
        double v = dsv4q_synth_normal(key, (uint64_t)i) + dsv4q_synth_normal(ukey, (uint64_t)col);
        assert_int_equal(((const uint16_t *)t->data)[i], dsv4q_bf16_encode(v));
    }
    /* FP8: every block's scale and every code of wq_b */
    t = find(st, "layers.1.attn.wq_b.weight");
    const dsv4q_st_tensor *s = find(st, "layers.1.attn.wq_b.scale");
    assert_int_equal(t->dtype, DSV4Q_DT_F8_E4M3);
    assert_int_equal(s->dtype, DSV4Q_DT_F8_E8M0);
    int64_t out = t->shape[0], in = t->shape[1], si = (in + 127) / 128;
    assert_int_equal(s->shape[0], (out + 127) / 128);
    assert_int_equal(s->shape[1], si);
    key = dsv4q_synth_key(seed, t->name);
    double *w = malloc(sizeof(double) * (size_t)(out * in));
    assert_non_null(w);
    for (int64_t i = 0; i < out * in; i++) w[i] = dsv4q_synth_normal(key, (uint64_t)i) / sqrt((double)in);
    for (int64_t bo = 0; bo * 128 < out; bo++)
        for (int64_t bi = 0; bi < si; bi++) {
            double amax = 0;
            for (int64_t o = bo * 128; o < out && o < bo * 128 + 128; o++)
                for (int64_t k = bi * 128; k < in && k < bi * 128 + 128; k++) amax = fmax(amax, fabs(w[o * in + k]));
            int e = dsv4q_ceil_log2_ratio(amax, 448.0);
            assert_true(448.0 * ldexp(1.0, e) >= amax && 448.0 * ldexp(1.0, e - 1) < amax);
            assert_int_equal(((const uint8_t *)s->data)[bo * si + bi], e + 127);
            for (int64_t o = bo * 128; o < out && o < bo * 128 + 128; o++)
                for (int64_t k = bi * 128; k < in && k < bi * 128 + 128; k++)
                    assert_int_equal(((const uint8_t *)t->data)[o * in + k],
                                     dsv4q_e4m3_encode(w[o * in + k] / ldexp(1.0, e), 1));
        }
    free(w);
    /* tid2eid: each row k distinct experts in range */
    t = find(st, "layers.0.ffn.gate.tid2eid");
    assert_int_equal(t->dtype, DSV4Q_DT_I32);
    int64_t k = t->shape[1];
    const int32_t *e = t->data;
    long hist[64] = {0};
    for (int64_t r = 0; r < t->shape[0]; r++)
        for (int64_t j = 0; j < k; j++) {
            assert_true(e[r * k + j] >= 0 && e[r * k + j] < 8);
            hist[e[r * k + j]]++;
            for (int64_t j2 = 0; j2 < j; j2++) assert_int_not_equal(e[r * k + j], e[r * k + j2]);
        }
    for (int x = 0; x < 8; x++) assert_true(hist[x] > 150 && hist[x] < 370);   /* ~256 each */
    /* metadata */
    assert_string_equal(dsv4q_st_meta(st, "dsv4q.synth"), DSV4Q_SYNTH_VERSION);
    assert_string_equal(dsv4q_st_meta(st, "dsv4q.seed"), "7");
    dsv4q_st_close(st);
}

/* FP4: decode nibbles by hand from the raw bytes (low nibble = even k) and
 * compare with the loader's view and with the recipe. */
static void test_fp4_packing(void **state)
{
    (void)state;
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    char p[512], err[1024];
    dsv4q_st *st = NULL;
    snprintf(p, sizeof p, "%s/model.safetensors", g_a);
    if (dsv4q_st_open(&st, p, err, sizeof err)) fail_msg("%s", err);
    const char *wn = "layers.1.ffn.experts.3.w2.weight";
    const dsv4q_st_tensor *t = find(st, wn), *s = find(st, "layers.1.ffn.experts.3.w2.scale");
    dsv4q_model *m = open_ok(g_a);
    const dsv4q_weight *w = &m->layers[1].experts[3].w2;
    const int64_t out = m->cfg.dim, in = m->cfg.moe_inter_dim;
    assert_int_equal(t->dtype, DSV4Q_DT_I8);
    assert_int_equal(t->shape[0], out);
    assert_int_equal(t->shape[1], in / 2);
    assert_int_equal(s->dtype, DSV4Q_DT_F8_E8M0);
    assert_int_equal(s->shape[0], out);
    assert_int_equal(s->shape[1], in / 32);
    const uint8_t *q = t->data, *sc = s->data;
    uint64_t key = dsv4q_synth_key(7, wn);
    long nonzero = 0, odd_hi = 0;
    for (int64_t o = 0; o < out; o++)
        for (int64_t g = 0; g < in / 32; g++) {
            double v[32], amax = 0;
            for (int k = 0; k < 32; k++) {
                v[k] = dsv4q_synth_normal(key, (uint64_t)(o * in + g * 32 + k)) / sqrt((double)in);
                amax = fmax(amax, fabs(v[k]));
            }
            int e = dsv4q_ceil_log2_ratio(amax, 6.0);
            assert_int_equal(sc[o * (in / 32) + g], e + 127);
            for (int kk = 0; kk < 32; kk++) {
                int64_t k = g * 32 + kk;
                uint8_t byte = q[o * (in / 2) + k / 2];
                uint8_t nib = (k % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
                double hand = ((nib & 8) ? -1.0 : 1.0) * mag[nib & 7] * ldexp(1.0, (int)sc[o * (in / 32) + g] - 127);
                if (!(dsv4q_weight_at(w, o, k) == hand))
                    fail_msg("(%lld,%lld): loader %g, hand decode %g", (long long)o, (long long)k,
                             dsv4q_weight_at(w, o, k), hand);
                assert_int_equal(nib, dsv4q_e2m1_encode(v[kk] / ldexp(1.0, e)));
                nonzero += hand != 0;
                odd_hi += (k & 1) && (nib & 7) == 7;
            }
        }
    assert_true(nonzero > out * in / 2);
    assert_true(odd_hi > 0);   /* the group max (code 6.0) lands on odd k too */
    dsv4q_model_close(m);
    dsv4q_st_close(st);
}

/* ---- logits ------------------------------------------------------------- */

static double logit_std(const char *dir, int width, const char *profile)
{
    dsv4q_model *m = open_ok(dir);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set(profile, &bs), 0);
    const long S = 48;
    int32_t ids[48];
    for (long i = 0; i < S; i++) ids[i] = (int32_t)(dsv4q_synth_bits(99, (uint64_t)i) % (uint64_t)m->cfg.vocab_size);
    dsv4q_run *r = NULL;
    char err[512];
    if (dsv4q_run_open(&r, m, width, bs, S + 1, NULL, NULL, err, sizeof err)) fail_msg("%s", err);
    double *lg = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    assert_non_null(lg);
    if (dsv4q_run_feed(r, ids, S, lg, err, sizeof err)) fail_msg("%s", err);
    double s1 = 0, s2 = 0;
    int V = m->cfg.vocab_size;
    for (int i = 0; i < V; i++) {
        assert_true(isfinite(lg[i]));
        s1 += lg[i];
        s2 += lg[i] * lg[i];
    }
    double mean = s1 / V, sd = sqrt(s2 / V - mean * mean);
    free(lg);
    dsv4q_run_close(r);
    dsv4q_model_close(m);
    return sd;
}

static void test_logit_spread(void **state)
{
    (void)state;
    double a = logit_std(g_a, 64, "model"), b = logit_std(g_bf, 64, "model"), c = logit_std(g_b, 32, "exact");
    fprintf(stderr, "[ logits   ] last-position std: tiny seed 7 %.3f, tiny-bf16 seed 7 %.3f, tiny seed 8 %.3f\n",
            a, b, c);
    assert_true(a > 0.5 && a < 10.0);
    assert_true(b > 0.5 && b < 10.0);
    assert_true(c > 0.5 && c < 10.0);
}

/* ---- corrupted copies --------------------------------------------------- */

typedef struct {
    const char *name;      /* tensor to edit */
    int drop;              /* remove it */
    int swap_shape;        /* reverse its 2-D shape */
    int to_f16;            /* restore as F16 zeros */
    int to_bf16;           /* restore as BF16 values 1.0 of the same shape */
    long poke;             /* byte offset to overwrite (-1: none) */
    const uint8_t *bytes;  /* with these bytes */
    size_t nbytes;
} edit;

/* dst/model.safetensors = src's tensors with one edit; config copied. */
static void rewrite(const char *src, const char *dst, const edit *ed)
{
    char p[512], q[512], err[1024];
    assert_int_equal(mkdir(dst, 0755), 0);
    dsv4q_st *st = NULL;
    snprintf(p, sizeof p, "%s/model.safetensors", src);
    if (dsv4q_st_open(&st, p, err, sizeof err)) fail_msg("%s", err);
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    assert_non_null(w);
    int found = 0;
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        int64_t shape[DSV4Q_ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        dsv4q_dtype dt = t->dtype;
        const void *data = t->data;
        size_t nb = t->nbytes;
        uint8_t *own = NULL;
        if (!strcmp(t->name, ed->name)) {
            found = 1;
            if (ed->drop) continue;
            if (ed->swap_shape) {
                shape[0] = t->shape[1];
                shape[1] = t->shape[0];
            }
            if (ed->to_f16) {
                dt = DSV4Q_DT_F16;
                nb = (size_t)t->numel * 2;
                own = calloc(nb, 1);
            }
            if (ed->to_bf16) {
                dt = DSV4Q_DT_BF16;
                nb = (size_t)t->numel * 2;
                own = malloc(nb);
                for (int64_t k = 0; k < t->numel; k++) ((uint16_t *)own)[k] = 0x3F80;   /* 1.0 */
            }
            if (ed->poke >= 0) {
                own = malloc(nb);
                memcpy(own, t->data, nb);
                memcpy(own + ed->poke, ed->bytes, ed->nbytes);
            }
            if (own) data = own;
        }
        if (dsv4q_st_writer_add(w, t->name, dt, t->ndim, shape, data, nb, err, sizeof err)) fail_msg("%s", err);
        free(own);
    }
    assert_true(found);
    snprintf(q, sizeof q, "%s/model.safetensors", dst);
    if (dsv4q_st_writer_write(w, q, err, sizeof err)) fail_msg("%s", err);
    dsv4q_st_close(st);
    snprintf(p, sizeof p, "%s/config.json", src);
    snprintf(q, sizeof q, "%s/config.json", dst);
    copy_file(p, q);
}

/* dsv4q_model_open(dir) must fail naming `file` (a path) and `what`. */
static void expect_refused(const char *dir, const char *file, const char *what, const char *what2)
{
    dsv4q_model *m = (dsv4q_model *)1;
    char err[2048] = "";
    int rc = dsv4q_model_open(&m, dir, err, sizeof err);
    if (rc == 0) fail_msg("%s: a corrupted checkpoint loaded", dir);
    assert_null(m);
    fprintf(stderr, "[ refused  ] %s\n", err);
    if (!strstr(err, file)) fail_msg("error does not name %s: %s", file, err);
    if (what && !strstr(err, what)) fail_msg("error does not name %s: %s", what, err);
    if (what2 && !strstr(err, what2)) fail_msg("error lacks '%s': %s", what2, err);
}

static void bad_dir(char *out, size_t n, const char *tag)
{
    snprintf(out, n, "%s/bad_%s", g_root, tag);
}

static void test_bad_missing_tensor(void **state)
{
    (void)state;
    char d[256];
    bad_dir(d, sizeof d, "missing");
    edit e = {"layers.2.attn.compressor.ape", 1, 0, 0, 0, -1, NULL, 0};
    rewrite(g_a, d, &e);
    expect_refused(d, d, "'layers.2.attn.compressor.ape'", "missing");
}

static void test_bad_shape(void **state)
{
    (void)state;
    char d[256], f[300];
    bad_dir(d, sizeof d, "shape");
    edit e = {"layers.3.attn.wq_a.weight", 0, 1, 0, 0, -1, NULL, 0};
    rewrite(g_a, d, &e);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    expect_refused(d, f, "'layers.3.attn.wq_a.weight'", "shape");
}

static void test_bad_dtype(void **state)
{
    (void)state;
    char d[256], f[300];
    bad_dir(d, sizeof d, "dtype");
    edit e = {"layers.0.attn.wkv.weight", 0, 0, 1, 0, -1, NULL, 0};
    rewrite(g_a, d, &e);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    expect_refused(d, f, "'layers.0.attn.wkv.weight'", "dtype F16");
}

/* dsv4q_weight_row_f32 (the harness's decoded form of a weight) equals
 * dsv4q_weight_at element by element, bit for bit, in every format of a
 * synthesized checkpoint (FP8 with partial 128-blocks, FP4, BF16, F32). */
static void check_rows(const dsv4q_weight *w)
{
    float *row = malloc(sizeof(float) * (size_t)w->in);
    assert_non_null(row);
    for (int64_t o = 0; o < w->out; o++) {
        dsv4q_weight_row_f32(w, o, row);
        for (int64_t k = 0; k < w->in; k++) {
            float want = (float)dsv4q_weight_at(w, o, k);
            if (memcmp(&want, &row[k], sizeof want))
                fail_msg("%s [%lld,%lld]: %a vs %a", w->name, (long long)o, (long long)k, (double)row[k],
                         (double)want);
        }
    }
    free(row);
}

static void test_weight_rows(void **state)
{
    (void)state;
    char err[1024];
    dsv4q_model *m = NULL;
    if (dsv4q_model_open(&m, g_a, err, sizeof err)) fail_msg("%s", err);
    const dsv4q_layer_w *L = &m->layers[1];
    assert_int_equal(L->wq_a.fmt, DSV4Q_WF_FP8);
    check_rows(&L->wq_a);
    check_rows(&L->wq_b);
    check_rows(&L->wo_a);                    /* BF16 (dequantized at load) */
    check_rows(&m->embed);                   /* BF16 */
    check_rows(&m->head);                    /* F32 */
    const dsv4q_layer_w *E = &m->layers[3];
    assert_int_equal(E->experts[0].w1.fmt, DSV4Q_WF_FP4);
    check_rows(&E->experts[0].w1);
    check_rows(&E->experts[0].w2);
    dsv4q_model_close(m);
}

/* BF16 where the config says FP8: accepted (mixed checkpoints), counted
 * and named so the commands can say so; the weight runs as BF16. */
static void test_bf16_where_fp8(void **state)
{
    (void)state;
    char d[256], err[1024];
    bad_dir(d, sizeof d, "bf16fp8");
    edit e = {"layers.1.attn.wq_a.weight", 0, 0, 0, 1, -1, NULL, 0};
    rewrite(g_a, d, &e);
    dsv4q_model *m = NULL, *ref = NULL;
    if (dsv4q_model_open(&m, d, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(m->n_bf16_quant, 1);
    assert_string_equal(m->first_bf16_quant, "layers.1.attn.wq_a.weight");
    assert_int_equal(m->layers[1].wq_a.fmt, DSV4Q_WF_BF16);
    if (dsv4q_model_open(&ref, g_a, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ref->n_bf16_quant, 0);
    assert_int_equal(ref->layers[1].wq_a.fmt, DSV4Q_WF_FP8);
    dsv4q_model_close(m);
    dsv4q_model_close(ref);
}

static void test_bad_nan_norm(void **state)
{
    (void)state;
    char d[256], f[300];
    bad_dir(d, sizeof d, "nan");
    float nan = NAN;
    edit e = {"layers.1.ffn_norm.weight", 0, 0, 0, 0, 4 * 17, (const uint8_t *)&nan, 4};
    rewrite(g_a, d, &e);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    expect_refused(d, f, "'layers.1.ffn_norm.weight'", "non-finite");
}

static void test_bad_e8m0(void **state)
{
    (void)state;
    char d[256], f[300];
    static const uint8_t ff = 0xFF;
    bad_dir(d, sizeof d, "e8m0_fp4");
    edit e = {"layers.4.ffn.experts.6.w3.scale", 0, 0, 0, 0, 9, &ff, 1};
    rewrite(g_a, d, &e);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    expect_refused(d, f, "'layers.4.ffn.experts.6.w3.scale'", "non-finite");
    bad_dir(d, sizeof d, "e8m0_fp8");
    edit e2 = {"layers.0.attn.wq_b.scale", 0, 0, 0, 0, 0, &ff, 1};
    rewrite(g_a, d, &e2);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    expect_refused(d, f, "'layers.0.attn.wq_b.scale'", "non-finite");
}

static void test_bad_truncated(void **state)
{
    (void)state;
    char d[256], f[300], p[300];
    bad_dir(d, sizeof d, "trunc");
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(p, sizeof p, "%s/model.safetensors", g_a);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    copy_file(p, f);
    struct stat sb;
    assert_int_equal(stat(f, &sb), 0);
    assert_int_equal(truncate(f, sb.st_size - 5000), 0);
    snprintf(p, sizeof p, "%s/config.json", g_a);
    snprintf(f, sizeof f, "%s/config.json", d);
    copy_file(p, f);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    expect_refused(d, f, "tensor '", "truncated");
}

/* Copy of g_a with config.json replaced by `text`. */
static void with_config(const char *d, const char *text)
{
    char p[300], f[300];
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(p, sizeof p, "%s/model.safetensors", g_a);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    copy_file(p, f);
    snprintf(f, sizeof f, "%s/config.json", d);
    write_file(f, text, strlen(text));
}

static void test_bad_config(void **state)
{
    (void)state;
    char d[256], f[300], p[300], err[1024];
    /* consistent JSON, inconsistent with the tensors: dim changed */
    dsv4q_config cfg;
    snprintf(p, sizeof p, "%s/config.json", g_a);
    if (dsv4q_config_load(&cfg, p, err, sizeof err)) fail_msg("%s", err);
    cfg.dim = 384;
    char *js = dsv4q_config_to_json(&cfg);
    assert_non_null(js);
    bad_dir(d, sizeof d, "cfg_dim");
    with_config(d, js);
    free(js);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    expect_refused(d, f, "'embed.weight'", "384");

    /* malformed JSON */
    size_t n;
    char *text = (char *)read_file(p, &n);
    bad_dir(d, sizeof d, "cfg_syntax");
    text[n / 2] = 0;   /* cut in the middle */
    with_config(d, text);
    snprintf(f, sizeof f, "%s/config.json", d);
    expect_refused(d, f, NULL, "JSON");
    free(text);

    /* a field of the wrong type */
    text = (char *)read_file(p, &n);
    char *at = strstr(text, "\"n_heads\": 4");
    assert_non_null(at);
    char *fixed = malloc(n + 16);
    assert_non_null(fixed);
    snprintf(fixed, n + 16, "%.*s\"n_heads\": \"four\"%s", (int)(at - text), text, at + strlen("\"n_heads\": 4"));
    bad_dir(d, sizeof d, "cfg_field");
    with_config(d, fixed);
    snprintf(f, sizeof f, "%s/config.json", d);
    expect_refused(d, f, "n_heads", NULL);
    free(fixed);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_loads),
        cmocka_unit_test(test_bf16_loads),
        cmocka_unit_test(test_same_seed_same_bytes),
        cmocka_unit_test(test_thread_independence),
        cmocka_unit_test(test_sharded_equals_single),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_normal_generator),
        cmocka_unit_test(test_fast_encoders),
        cmocka_unit_test(test_recipe_values),
        cmocka_unit_test(test_fp4_packing),
        cmocka_unit_test(test_logit_spread),
        cmocka_unit_test(test_bad_missing_tensor),
        cmocka_unit_test(test_bad_shape),
        cmocka_unit_test(test_bad_dtype),
        cmocka_unit_test(test_bf16_where_fp8),
        cmocka_unit_test(test_weight_rows),
        cmocka_unit_test(test_bad_nan_norm),
        cmocka_unit_test(test_bad_e8m0),
        cmocka_unit_test(test_bad_truncated),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
