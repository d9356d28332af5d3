/*
 * test_v41_synth.c - synthetic DeepSeek V4.1 checkpoints (io/synth.c,
 * docs/synth.md "V4.1 checkpoints").
 *
 * Owns the evidence that `synth` of a V4.1 config writes the V4.1
 * reference's state dict: synthesized with the config of the reference case
 * tests/data/pub_v41_tiny, every tensor has the name, dtype and shape of
 * DeepSeek's own checkpoint there (452 of them, nothing more), and its values
 * the reference case's magnitudes (RMS per tensor within 15 %); on tiny-v41
 * the stored codes are the documented recipe re-derived here (32x32 FP8
 * blocks, E8M0 per 32 of an Engram table row, BF16 parameters, F32 of BF16
 * values, the Engram gate rule), every F32 value is BF16-exact, nothing V4-only
 * is written (hc_head, ape, tid2eid); engram_token_map.json has the
 * reference's schema with the config's compressed vocabulary, numbered in
 * order of first occurrence with vocab - V folds (512 - 400 = 112) and the
 * three special ids kept apart; same seed = same bytes, shards = single file
 * tensor for tensor; a compressed vocabulary larger than the vocabulary is
 * refused with nothing written.
 */
#include "tests/testutil.h"
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io/synth.h"
#include "oracle/engram_hash.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "tests/tinyfix.h"

#define PUB "tests/data/pub_v41_tiny"

static char g_root[128], g_tiny[256], g_pub[256];

static int synth_into(dsv4q_config *cfg, uint64_t seed, const char *dir, int shards)
{
    char err[1024];
    if (dsv4q_synth_write(cfg, seed, dir, shards, err, sizeof err)) {
        fprintf(stderr, "synth %s: %s\n", dir, err);
        return -1;
    }
    return 0;
}

static int setup(void **state)
{
    (void)state;
    char err[1024];
    snprintf(g_root, sizeof g_root, "/tmp/dsv4q-test-v41synth-XXXXXX");
    if (!mkdtemp(g_root)) return -1;
    snprintf(g_tiny, sizeof g_tiny, "%s/tiny-v41", g_root);
    snprintf(g_pub, sizeof g_pub, "%s/pub", g_root);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny-v41", err, sizeof err) || synth_into(&cfg, 3, g_tiny, 1)) return -1;
    if (dsv4q_config_load(&cfg, PUB "/config.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return synth_into(&cfg, 1, g_pub, 1);
}

static int teardown(void **state)
{
    (void)state;
    return tinyfix_remove(g_root);
}

static dsv4q_st *st_open(const char *dir, const char *file)
{
    char p[512], err[1024];
    dsv4q_st *st = NULL;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    if (dsv4q_st_open(&st, p, err, sizeof err)) fail_msg("%s", err);
    return st;
}

static const dsv4q_st_tensor *find(const dsv4q_st *st, const char *name)
{
    const dsv4q_st_tensor *t = dsv4q_st_find(st, name);
    if (!t) fail_msg("tensor %s missing", name);
    return t;
}

/* Element i of tensor t decoded by hand: FP8 / FP4 with its .scale tensor
 * s (block = how many rows / columns one scale covers, from the shapes). */
static double decoded(const dsv4q_st_tensor *t, const dsv4q_st_tensor *s, int64_t i)
{
    if (t->dtype == DSV4Q_DT_F8_E4M3) {
        const int64_t out = t->shape[0], in = t->shape[1], o = i / in, k = i % in;
        const int64_t bo = (out + s->shape[0] - 1) / s->shape[0], bi = (in + s->shape[1] - 1) / s->shape[1];
        const uint8_t sc = ((const uint8_t *)s->data)[(o / bo) * s->shape[1] + k / bi];
        return dsv4q_e4m3_decode(((const uint8_t *)t->data)[i]) * ldexp(1.0, (int)sc - 127);
    }
    if (t->dtype == DSV4Q_DT_I8) {
        const int64_t in = 2 * t->shape[1], o = i / in, k = i % in;
        const uint8_t byte = ((const uint8_t *)t->data)[o * t->shape[1] + k / 2];
        const uint8_t nib = k % 2 == 0 ? (byte & 0x0F) : (byte >> 4);
        const uint8_t sc = ((const uint8_t *)s->data)[o * (in / 32) + k / 32];
        return dsv4q_e2m1_decode(nib) * ldexp(1.0, (int)sc - 127);
    }
    return dsv4q_decode_elem(t->dtype, t->data, (size_t)i);
}

static double rms(const dsv4q_st *st, const dsv4q_st_tensor *t)
{
    const dsv4q_st_tensor *s = NULL;
    const size_t n = strlen(t->name);
    if (t->dtype == DSV4Q_DT_F8_E4M3 || t->dtype == DSV4Q_DT_I8) {
        char sn[256];
        snprintf(sn, sizeof sn, "%.*s.scale", (int)(n - 7), t->name); /* X.weight -> X.scale */
        s = find(st, sn);
    }
    const int64_t numel = t->dtype == DSV4Q_DT_I8 ? 2 * t->numel : t->numel;
    double s2 = 0;
    for (int64_t i = 0; i < numel; i++) {
        const double v = decoded(t, s, i);
        s2 += v * v;
    }
    return sqrt(s2 / (double)numel);
}

/* ---- the reference's layout ------------------------------------------------ */

static void test_layout_is_the_reference(void **state)
{
    (void)state;
    dsv4q_st *ref = st_open(PUB, "model.safetensors"), *syn = st_open(g_pub, "model.safetensors");
    assert_int_equal(dsv4q_st_count(ref), 452); /* weights_table.txt's rows */
    assert_int_equal(dsv4q_st_count(syn), dsv4q_st_count(ref));
    long compared = 0, worst_i = -1;
    double worst = 0;
    for (size_t i = 0; i < dsv4q_st_count(ref); i++) {
        const dsv4q_st_tensor *a = dsv4q_st_at(ref, i), *b = dsv4q_st_find(syn, a->name);
        if (!b) fail_msg("the reference has '%s', synth lacks it", a->name);
        if (a->dtype != b->dtype)
            fail_msg("'%s': reference %s, synth %s", a->name, dsv4q_dtype_name(a->dtype), dsv4q_dtype_name(b->dtype));
        assert_int_equal(a->ndim, b->ndim);
        for (int d = 0; d < a->ndim; d++)
            if (a->shape[d] != b->shape[d])
                fail_msg("'%s' dim %d: reference %lld, synth %lld", a->name, d, (long long)a->shape[d],
                         (long long)b->shape[d]);
        const size_t n = strlen(a->name);
        if (a->numel < 256 || (n > 6 && !strcmp(a->name + n - 6, ".scale"))) continue;
        /* same distributions as the reference case: the same magnitudes */
        const double ra = rms(ref, a), rb = rms(syn, b), rel = fabs(rb / ra - 1.0);
        if (rel > worst) {
            worst = rel;
            worst_i = (long)i;
        }
        if (rel > 0.15) fail_msg("'%s': RMS %.4g in the reference, %.4g synthesized", a->name, ra, rb);
        compared++;
    }
    fprintf(stderr, "[ layout   ] 452 tensors as the reference; RMS of %ld compared, worst %.3f (%s)\n", compared,
            worst, worst_i >= 0 ? dsv4q_st_at(ref, (size_t)worst_i)->name : "-");
    assert_int_equal(compared, 207); /* weights_table.txt: 207 non-scale tensors of >= 256 stored elements */
    dsv4q_st_close(ref);
    dsv4q_st_close(syn);
    /* and the loader takes it, with the case's Engram hash sizes */
    dsv4q_model *m = NULL;
    char err[1024];
    if (dsv4q_model_open(&m, g_pub, err, sizeof err)) fail_msg("%s", err);
    assert_true(m->engram_hash->V == 321 && m->engram_hash->vocab == 384);
    assert_true(m->engram_hash->rows[0] == 304 && m->engram_hash->rows[1] == 462);
    dsv4q_model_close(m);
}

/* ---- the recipe, re-derived on tiny-v41 ------------------------------------ */

static double bf16r(double v) { return dsv4q_bf16_decode(dsv4q_bf16_encode(v)); }

/* FP8 weight `name` [out, in] with ideal values N / sqrt(in) (den = sqrt(in))
 * or N (den = 1), scales per bo x bi block. */
static void check_fp8(const dsv4q_st *st, const char *wname, const char *sname, int64_t bo, int64_t bi, double den)
{
    const dsv4q_st_tensor *t = find(st, wname), *s = find(st, sname);
    assert_int_equal(t->dtype, DSV4Q_DT_F8_E4M3);
    assert_int_equal(s->dtype, DSV4Q_DT_F8_E8M0);
    const int64_t out = t->shape[0], in = t->shape[1], so = (out + bo - 1) / bo, si = (in + bi - 1) / bi;
    assert_int_equal(s->shape[0], so);
    assert_int_equal(s->shape[1], si);
    const uint64_t key = dsv4q_synth_key(3, wname);
    for (int64_t b0 = 0; b0 < so; b0++)
        for (int64_t b1 = 0; b1 < si; b1++) {
            double amax = 0;
            for (int64_t o = b0 * bo; o < out && o < (b0 + 1) * bo; o++)
                for (int64_t k = b1 * bi; k < in && k < (b1 + 1) * bi; k++)
                    amax = fmax(amax, fabs(dsv4q_synth_normal(key, (uint64_t)(o * in + k)) / den));
            const int e = dsv4q_ceil_log2_ratio(amax, 448.0);
            assert_true(448.0 * ldexp(1.0, e) >= amax && 448.0 * ldexp(1.0, e - 1) < amax);
            assert_int_equal(((const uint8_t *)s->data)[b0 * si + b1], e + 127);
            for (int64_t o = b0 * bo; o < out && o < (b0 + 1) * bo; o++)
                for (int64_t k = b1 * bi; k < in && k < (b1 + 1) * bi; k++) {
                    const double w = dsv4q_synth_normal(key, (uint64_t)(o * in + k)) / den;
                    assert_int_equal(((const uint8_t *)t->data)[o * in + k], dsv4q_e4m3_encode(w / ldexp(1.0, e), 1));
                }
        }
}

static void test_recipe_values(void **state)
{
    (void)state;
    dsv4q_st *st = st_open(g_tiny, "model.safetensors");
    /* FP8 linears in 32x32 blocks: wq_b [4*64, 96] -> scales [8, 3]; the Engram wkv [192*5, 2*2*32] */
    check_fp8(st, "layers.4.attn.wq_b.weight", "layers.4.attn.wq_b.scale", 32, 32, sqrt(96.0));
    check_fp8(st, "layers.6.engram.wkv.weight", "layers.6.engram.wkv.scale", 32, 32, sqrt(128.0));
    assert_int_equal(find(st, "layers.6.engram.wkv.weight")->shape[0], 960);
    /* the Engram table: N, an E8M0 scale per 32 of a row: [306, 32] + [306, 1] */
    check_fp8(st, "layers.6.engram.embed.weight", "layers.6.engram.embed.scale", 1, 32, 1.0);
    assert_int_equal(find(st, "layers.6.engram.embed.weight")->shape[0], 306);
    /* BF16 parameters: norms 1 + 0.05 N, the Engram gates 1 + 0.2 N, wo_a / gate / indexer wk N / sqrt(in) */
    static const struct {
        const char *name;
        double a, b; /* w = a + b N, b = 0: N / sqrt(in) */
    } B[] = {
        {"norm.weight", 1, 0.05},
        {"layers.2.attn.q_norm.weight", 1, 0.05},
        {"layers.4.attn.compressor.norm.weight", 1, 0.05},
        {"layers.1.attn.indexer.k_norm.weight", 1, 0.05},
        {"layers.1.engram.q_weight", 1, 0.2},
        {"layers.6.engram.k_weight", 1, 0.2},
        {"layers.0.attn.wo_a.weight", 0, 0},
        {"layers.5.ffn.gate.weight", 0, 0},
        {"layers.4.attn.indexer.wk.weight", 0, 0},
        {"layers.4.attn.compressor.wkv.weight", 0, 0}, /* ratio 1: BF16 */
        {"layers.3.attn.indexer.weights_proj.weight", 0, 0},
    };
    for (size_t j = 0; j < sizeof B / sizeof B[0]; j++) {
        const dsv4q_st_tensor *t = find(st, B[j].name);
        if (t->dtype != DSV4Q_DT_BF16)
            fail_msg("'%s' is %s, the reference keeps BF16", t->name, dsv4q_dtype_name(t->dtype));
        const uint64_t key = dsv4q_synth_key(3, t->name);
        const double den = t->ndim == 2 ? sqrt((double)t->shape[1]) : 1;
        for (int64_t i = 0; i < t->numel; i++) {
            const double g = dsv4q_synth_normal(key, (uint64_t)i);
            const double w = B[j].b != 0 ? B[j].a + B[j].b * g : g / den;
            if (((const uint16_t *)t->data)[i] != dsv4q_bf16_encode(w))
                fail_msg("'%s' element %lld", t->name, (long long)i);
        }
    }
    /* F32 parameters hold the BF16 rounding: hc fn N*0.5/sqrt(hc*dim), head N/sqrt(dim), gate bias 0.1 N,
     * the ratio-2 compressor's wkv / wgate N/sqrt(dim) */
    static const struct {
        const char *name;
        double mul, den;
    } F[] = {
        {"layers.0.hc_attn_fn", 0.5, 768},
        {"head.weight", 1, 192},
        {"layers.8.ffn.gate.bias", 0.1, 1},
        {"layers.1.attn.compressor.wkv.weight", 1, 192},
        {"layers.1.attn.compressor.wgate.weight", 1, 192},
    };
    for (size_t j = 0; j < sizeof F / sizeof F[0]; j++) {
        const dsv4q_st_tensor *t = find(st, F[j].name);
        assert_int_equal(t->dtype, DSV4Q_DT_F32);
        const uint64_t key = dsv4q_synth_key(3, t->name);
        for (int64_t i = 0; i < t->numel; i++) {
            const double w = (dsv4q_synth_normal(key, (uint64_t)i) * F[j].mul) / sqrt(F[j].den);
            if (((const float *)t->data)[i] != (float)bf16r(w)) fail_msg("'%s' element %lld", t->name, (long long)i);
        }
    }
    /* every F32 value of the checkpoint is BF16-exact; nothing of V4 only */
    long f32 = 0;
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        if (strstr(t->name, "hc_head") || strstr(t->name, ".ape") || strstr(t->name, "tid2eid") ||
            strstr(t->name, "mtp."))
            fail_msg("'%s': not a V4.1 tensor", t->name);
        if (t->dtype != DSV4Q_DT_F32) continue;
        f32++;
        for (int64_t k = 0; k < t->numel; k++) {
            const double v = ((const float *)t->data)[k];
            if (bf16r(v) != v) fail_msg("'%s' element %lld (%a) is not BF16-exact", t->name, (long long)k, v);
        }
    }
    assert_true(f32 >= 9 * 8 + 1); /* 6 hc_*, attn_sink, gate.bias per layer; head */
    /* compressors only on the kv sources (1, 4), wgate only at ratio 2, index keys on 1 and 4 only */
    for (int li = 0; li < 9; li++) {
        char n[128];
        snprintf(n, sizeof n, "layers.%d.attn.compressor.wkv.weight", li);
        assert_int_equal(dsv4q_st_find(st, n) != NULL, li == 1 || li == 4);
        snprintf(n, sizeof n, "layers.%d.attn.compressor.wgate.weight", li);
        assert_int_equal(dsv4q_st_find(st, n) != NULL, li == 1);
        snprintf(n, sizeof n, "layers.%d.attn.indexer.wq_b.weight", li);
        assert_int_equal(dsv4q_st_find(st, n) != NULL, li == 1 || li == 3 || li == 4 || li == 6);
        snprintf(n, sizeof n, "layers.%d.attn.indexer.wk.weight", li);
        assert_int_equal(dsv4q_st_find(st, n) != NULL, li == 1 || li == 4);
        snprintf(n, sizeof n, "layers.%d.engram.embed.weight", li);
        assert_int_equal(dsv4q_st_find(st, n) != NULL, li == 1 || li == 6);
    }
    assert_string_equal(dsv4q_st_meta(st, "dsv4q.synth"), DSV4Q_SYNTH_VERSION_V41);
    assert_string_equal(dsv4q_st_meta(st, "dsv4q.seed"), "3");
    assert_string_equal(dsv4q_st_meta(st, "dsv4q.config"), "tiny-v41");
    dsv4q_st_close(st);
}

/* ---- engram_token_map.json -------------------------------------------------- */

/* The map of dir: vocab entries, compressed vocabulary V, first-occurrence
 * numbering, specials 0..2 apart; returns the number of folds. */
static long check_map(const char *dir, long vocab, long V)
{
    char p[512];
    snprintf(p, sizeof p, "%s/engram_token_map.json", dir);
    json_error_t je;
    json_t *o = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
    if (!o) fail_msg("%s: %s", p, je.text);
    assert_int_equal(json_object_size(o), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "compressed_vocab_size")), V);
    const json_t *a = json_object_get(o, "token_map");
    assert_int_equal(json_array_size(a), vocab);
    long folds = 0, mx = -1;
    for (long t = 0; t < vocab; t++) {
        const long c = (long)json_integer_value(json_array_get(a, (size_t)t));
        assert_true(c >= 0 && c <= mx + 1); /* a new id is the next one */
        if (t < 3) assert_int_equal(c, t);
        else assert_true(c >= 3); /* nothing folds onto BOS / EOS / PAD */
        if (c <= mx) folds++;
        else mx = c;
    }
    assert_int_equal(mx, V - 1);
    json_decref(o);
    return folds;
}

static void test_token_map(void **state)
{
    (void)state;
    assert_int_equal(check_map(g_tiny, 512, 400), 112);
    assert_int_equal(check_map(g_pub, 384, 321), 63);
    /* the loader's view: the hash sees the same map */
    dsv4q_model *m = NULL;
    char err[1024];
    if (dsv4q_model_open(&m, g_tiny, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(m->engram_hash->vocab, 512);
    assert_true(m->engram_hash->V == 400);
    assert_int_equal(m->engram_hash->pad, 2); /* token_map[engram_pad_id 2] */
    dsv4q_model_close(m);
}

/* ---- determinism ------------------------------------------------------------ */

static int same_file(const char *a, const char *b)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

static void test_same_seed_same_bytes_and_shards(void **state)
{
    (void)state;
    dsv4q_config cfg;
    char err[1024], again[256], other[256], sh[256], a[512], b[512];
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny-v41", err, sizeof err), 0);
    snprintf(again, sizeof again, "%s/again", g_root);
    snprintf(other, sizeof other, "%s/seed4", g_root);
    snprintf(sh, sizeof sh, "%s/shards3", g_root);
    assert_int_equal(synth_into(&cfg, 3, again, 1), 0);
    assert_int_equal(synth_into(&cfg, 4, other, 1), 0);
    assert_int_equal(synth_into(&cfg, 3, sh, 3), 0);
    static const char *const files[] = {"config.json", "model.safetensors", "engram_token_map.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", g_tiny, files[i]);
        snprintf(b, sizeof b, "%s/%s", again, files[i]);
        if (!same_file(a, b)) fail_msg("%s differs between two runs of seed 3", files[i]);
        snprintf(b, sizeof b, "%s/%s", other, files[i]);
        assert_int_equal(same_file(a, b), i == 0); /* another seed: other weights, another map */
    }
    snprintf(a, sizeof a, "%s/engram_token_map.json", g_tiny);
    snprintf(b, sizeof b, "%s/engram_token_map.json", sh);
    assert_true(same_file(a, b));
    dsv4q_st *one = st_open(g_tiny, "model.safetensors"), *three = st_open(sh, "model.safetensors.index.json");
    assert_int_equal(dsv4q_st_nfiles(three), 3);
    assert_int_equal(dsv4q_st_count(one), dsv4q_st_count(three));
    for (size_t i = 0; i < dsv4q_st_count(one); i++) {
        const dsv4q_st_tensor *x = dsv4q_st_at(one, i), *y = dsv4q_st_find(three, x->name);
        if (!y || x->dtype != y->dtype || x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes))
            fail_msg("tensor %s differs between shards and single file", x->name);
    }
    assert_non_null(strstr(dsv4q_st_find(three, "embed.weight")->file, "model-00001-of-00003"));
    assert_non_null(strstr(dsv4q_st_find(three, "head.weight")->file, "model-00003-of-00003"));
    assert_non_null(strstr(dsv4q_st_find(three, "norm.weight")->file, "model-00003-of-00003"));
    dsv4q_st_close(one);
    dsv4q_st_close(three);
    snprintf(a, sizeof a, "%s/model.safetensors.index.json", sh);
    json_error_t je;
    json_t *ix = json_load_file(a, 0, &je);
    assert_non_null(ix);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ix, "metadata"), "dsv4q.synth")),
                        DSV4Q_SYNTH_VERSION_V41);
    json_decref(ix);
    dsv4q_model *m = NULL;
    if (dsv4q_model_open(&m, sh, err, sizeof err)) fail_msg("%s", err);
    dsv4q_model_close(m);
}

static void test_refuse_compressed_vocab(void **state)
{
    (void)state;
    dsv4q_config cfg;
    char err[1024] = "", dir[256];
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny-v41", err, sizeof err), 0);
    cfg.engram_compressed_vocab_size = 513; /* vocab_size 512 */
    snprintf(dir, sizeof dir, "%s/too_many_ids", g_root);
    assert_int_equal(dsv4q_synth_write(&cfg, 3, dir, 1, err, sizeof err), -1);
    fprintf(stderr, "[ refused  ] %s\n", err);
    assert_non_null(strstr(err, "'engram_compressed_vocab_size' (513) exceeds vocab_size (512)"));
    assert_int_not_equal(access(dir, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_is_the_reference),
        cmocka_unit_test(test_recipe_values),
        cmocka_unit_test(test_token_map),
        cmocka_unit_test(test_same_seed_same_bytes_and_shards),
        cmocka_unit_test(test_refuse_compressed_vocab),
    };
    return cmocka_run_group_tests_name("v41_synth", tests, setup, teardown);
}
