/*
 * test_v41_engram.c - one V4.1 Engram layer end to end against DeepSeek's
 * reference (tests/data/pub_v41_tiny, golden_fp64).
 *
 * The golden stores the stream entering block L (`block_out_L{L-1}`, what
 * the previous block returned) and the stream after layer L's Engram
 * (`engram_out_L{L}`), for the prefill and for each decode step. Between
 * the two sits exactly one Engram: the hash (oracle/engram_hash, its ids
 * checked 1884/1884 in test_v41_engram_hash), the FP8 table rows with
 * per-32 E8M0 scales, wkv (an FP8 linear with 32x32 blocks and 1x32
 * activation quantization: dsv4q_linear on a weight of blk 32), and the per-copy signed-sqrt
 * sigmoid gate (oracle/engram41). golden_fp64 is the reference at float64
 * keeping its FP8 activation quantization and nothing else, i.e. our `qat`
 * profile at width f64. Expected: the reference's own float64 numbers;
 * re-associated float64 sums move the reference by ~1e-15 (its README), so
 * we assert NRMS < 1e-13. The f32 oracle's distance is printed, not gated.
 */
#include "tests/testutil.h"
#include <jansson.h>
#include "io/engram_map.h"
#include "io/safetensors.h"
#include "oracle/engram_hash.h"
#include "oracle/ops41.h"
#include "oracle/boundary.h"

#define CASE "tests/data/pub_v41_tiny"

static const dsv4q_st_tensor *need(const dsv4q_st *st, const char *name)
{
    const dsv4q_st_tensor *t = dsv4q_st_find(st, name);
    if (!t) printf("missing tensor %s\n", name);
    assert_non_null(t);
    return t;
}

static dsv4q_weight weight_of(const dsv4q_st *st, const char *base, dsv4q_wfmt fmt)
{
    char n[128];
    snprintf(n, sizeof n, "%s%s", base, fmt == DSV4Q_WF_BF16 ? "" : ".weight");
    const dsv4q_st_tensor *t = need(st, n);
    dsv4q_weight w = {.name = t->name, .fmt = fmt, .out = t->shape[0], .in = t->shape[1], .data = t->data};
    if (fmt == DSV4Q_WF_FP8) {
        snprintf(n, sizeof n, "%s.scale", base);
        const dsv4q_st_tensor *s = need(st, n);
        assert_int_equal(s->dtype, DSV4Q_DT_F8_E8M0);
        /* V4.1's layout: [ceil(out/32), ceil(in/32)] */
        assert_true(s->shape[0] == (w.out + 31) / 32 && s->shape[1] == (w.in + 31) / 32);
        w.scale = s->data;
        w.scale_dtype = DSV4Q_DT_F8_E8M0;
        w.blk = DSV4Q_FP8_BLOCK_V41;
    }
    return w;
}

static double nrms(const double *a, const double *b, long n)
{
    double num = 0, den = 0;
    for (long i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / den);
}

static void engram_matches_reference(void **state)
{
    (void)state;
    char err[512];
    /* config + map + tokens -> hash ids for every position */
    json_error_t je;
    json_t *c = json_load_file(CASE "/config.json", 0, &je), *k = json_load_file(CASE "/tokens.json", 0, &je);
    assert_non_null(c);
    assert_non_null(k);
    int layer_ids[2];
    int64_t ne[2];
    for (int i = 0; i < 2; i++) {
        layer_ids[i] = (int)json_integer_value(json_array_get(json_object_get(c, "engram_layer_ids"), (size_t)i));
        ne[i] = json_integer_value(json_array_get(json_object_get(c, "engram_num_embeddings"), (size_t)i));
    }
    const int dim = (int)json_integer_value(json_object_get(c, "dim"));
    const int hc = (int)json_integer_value(json_object_get(c, "hc_mult"));
    const int hd = (int)json_integer_value(json_object_get(c, "engram_head_dim"));
    const double eps = json_number_value(json_object_get(c, "norm_eps"));
    assert_true(eps == 1e-20);
    dsv4q_engram_map map;
    assert_int_equal(dsv4q_engram_map_load(&map, CASE "/engram_token_map.json", err, sizeof err), 0);
    dsv4q_engram_hash_params hp = {
        .n_layers = 2, .layer_ids = layer_ids,
        .max_ngram = (int)json_integer_value(json_object_get(c, "engram_max_ngram_size")),
        .n_heads = (int)json_integer_value(json_object_get(c, "engram_n_heads")),
        .engram_vocab_size = json_integer_value(json_object_get(c, "engram_vocab_size")), .num_embeddings = ne,
        .compressed_vocab_size = json_integer_value(json_object_get(c, "engram_compressed_vocab_size")),
        .map_vocab_size = map.compressed_vocab_size, .token_map = map.token_map, .vocab = map.vocab,
        .pad_id = json_integer_value(json_object_get(c, "engram_pad_id")),
    };
    dsv4q_engram_hash h;
    assert_int_equal(dsv4q_engram_hash_init(&h, &hp, err, sizeof err), 0);
    json_t *pr = json_object_get(k, "prompt"), *te = json_object_get(k, "teacher");
    const long P = (long)json_array_size(pr), T = (long)json_array_size(te), C = h.ncols;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(P + T));
    for (long i = 0; i < P; i++) tok[i] = (int32_t)json_integer_value(json_array_get(pr, (size_t)i));
    for (long i = 0; i < T; i++) tok[P + i] = (int32_t)json_integer_value(json_array_get(te, (size_t)i));
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)((P + T) * 2 * C));
    dsv4q_engram_cache cache;
    assert_int_equal(dsv4q_engram_cache_init(&cache, 512), 0);
    assert_int_equal(dsv4q_engram_hash_ids(&h, &cache, 0, tok, NULL, P, ids, err, sizeof err), 0);
    for (long i = 0; i < T; i++)
        assert_int_equal(dsv4q_engram_hash_ids(&h, &cache, P + i, tok + P + i, NULL, 1, ids + (P + i) * 2 * C, err,
                                               sizeof err),
                         0);

    dsv4q_st *m, *g;
    assert_int_equal(dsv4q_st_open(&m, CASE "/model.safetensors", err, sizeof err), 0);
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_fp64.safetensors", err, sizeof err), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("qat", &bs), 0);
    for (int li = 0; li < 2; li++) {
        const int L = layer_ids[li];
        char n[128];
        dsv4q_engram_w w = {.head_dim = hd, .ncols = (int)C, .hc = hc, .dim = dim};
        snprintf(n, sizeof n, "layers.%d.engram.embed.weight", L);
        const dsv4q_st_tensor *tw = need(m, n);
        snprintf(n, sizeof n, "layers.%d.engram.embed.scale", L);
        const dsv4q_st_tensor *ts = need(m, n);
        assert_int_equal(tw->dtype, DSV4Q_DT_F8_E4M3);
        assert_true(tw->shape[0] == h.rows[li] && tw->shape[1] == hd);   /* rows = sum of the layer's primes */
        assert_true(ts->shape[0] == h.rows[li] && ts->shape[1] == hd / 32);
        w.table = tw->data;
        w.table_scale = ts->data;
        w.rows = tw->shape[0];
        snprintf(n, sizeof n, "layers.%d.engram.wkv", L);
        w.wkv = weight_of(m, n, DSV4Q_WF_FP8);
        assert_true(w.wkv.out == (int64_t)dim * (hc + 1) && w.wkv.in == C * hd);
        snprintf(n, sizeof n, "layers.%d.engram.q_weight", L);
        w.q_weight = weight_of(m, n, DSV4Q_WF_BF16);
        snprintf(n, sizeof n, "layers.%d.engram.k_weight", L);
        w.k_weight = weight_of(m, n, DSV4Q_WF_BF16);

        for (int dec = 0; dec < 2; dec++) {
            snprintf(n, sizeof n, dec ? "block_out_decode_L%d" : "block_out_L%d", L - 1);
            const dsv4q_st_tensor *in = need(g, n);
            snprintf(n, sizeof n, dec ? "engram_out_decode_L%d" : "engram_out_L%d", L);
            const dsv4q_st_tensor *want = need(g, n);
            const long s = dec ? T : P, nel = s * hc * dim;
            assert_true(in->numel == nel && want->numel == nel && in->dtype == DSV4Q_DT_F64);
            /* this layer's columns of the ids, rows of this call */
            int64_t *lid = malloc(sizeof(int64_t) * (size_t)(s * C));
            for (long t = 0; t < s; t++)
                memcpy(lid + t * C, ids + ((dec ? P : 0) + t) * 2 * C + li * C, sizeof(int64_t) * (size_t)C);
            double *x = malloc(sizeof(double) * (size_t)nel);
            float *xf = malloc(sizeof(float) * (size_t)nel);
            double *xf64 = malloc(sizeof(double) * (size_t)nel);
            memcpy(x, in->data, sizeof(double) * (size_t)nel);
            for (long i = 0; i < nel; i++) xf[i] = (float)x[i];
            if (dec) {
                /* decode: one token per call, as the reference ran it */
                for (long t = 0; t < s; t++)
                    assert_int_equal(dsv4q_engram41_f64(bs, 1, &w, lid + t * C, NULL, x + t * hc * dim, 1, eps), 0);
            } else {
                assert_int_equal(dsv4q_engram41_f64(bs, 1, &w, lid, NULL, x, s, eps), 0);
            }
            assert_int_equal(dsv4q_engram41_f32(bs, 1, &w, lid, NULL, xf, s, eps), 0);
            for (long i = 0; i < nel; i++) xf64[i] = xf[i];
            const double e64 = nrms(x, want->data, nel), e32 = nrms(xf64, want->data, nel);
            printf("engram L%d %s: f64 NRMS %.3e (gate < 1e-13), f32 NRMS %.3e (reported)\n", L,
                   dec ? "decode " : "prefill", e64, e32);
            assert_true(e64 < 1e-13);
            /* the Engram moved the stream (the check is not vacuous) */
            assert_true(nrms(in->data, want->data, nel) > 1e-3);
            free(lid), free(x), free(xf), free(xf64);
        }
    }
    dsv4q_st_close(m);
    dsv4q_st_close(g);
    free(tok), free(ids);
    dsv4q_engram_cache_free(&cache);
    dsv4q_engram_hash_free(&h);
    dsv4q_engram_map_free(&map);
    json_decref(c);
    json_decref(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(engram_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
