/*
 * test_reference_case.c - the fp64 oracle reproduces DeepSeek's own
 * reference outputs (tests/data/pub_tiny, see its README).
 *
 * golden_fp64 is the reference patched to float64 with only the QAT
 * simulations kept: exactly our `qat` profile at width f64. Expected values
 * are the reference's (a published number), not ours. Tolerance: the README
 * says re-associating the reference's own fp64 sums moves it by ~1e-15 and
 * a faithful oracle matches to ~1e-12 relative; we measure ~8e-16 and
 * assert NRMS < 1e-13 on every logit row and block output, and set equality
 * of every indexer selection (the case has no ties: min gap 9.1e-4).
 */
#include "tests/testutil.h"
#include <jansson.h>
#include "io/model.h"
#include "io/safetensors.h"
#include "oracle/model_run.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"

#define CASE "tests/data/pub_tiny"

typedef struct {
    int nlayers;
    double *block_out[8];      /* prefill block outputs */
    long block_n[8];
    int32_t topk[8][16][64];   /* [layer][call][k] (last row of the call) */
    int topk_k[8];
    int call;
} taps;

static void on_tap(void *u, int layer, const char *stage, const double *d, long n, long rows)
{
    taps *t = u;
    if (!stage || layer < 0 || layer >= 8) return;
    if (t->call == 0 && strcmp(stage, "block_out") == 0) {
        t->block_out[layer] = malloc(sizeof(double) * (size_t)n);
        memcpy(t->block_out[layer], d, sizeof(double) * (size_t)n);
        t->block_n[layer] = n;
    }
    if (strcmp(stage, "idx_topk") == 0) {
        long k = n / rows;
        t->topk_k[layer] = (int)k;
        for (long j = 0; j < k && j < 64; j++) t->topk[layer][t->call][j] = (int32_t)d[(rows - 1) * k + j];
    }
}

static int load_tokens(int32_t *prompt, int *np, int32_t *teacher, int *nt)
{
    json_error_t je;
    json_t *root = json_load_file(CASE "/tokens.json", 0, &je);
    if (!root) return -1;
    json_t *p = json_object_get(root, "prompt"), *t = json_object_get(root, "teacher");
    *np = (int)json_array_size(p);
    *nt = (int)json_array_size(t);
    for (int i = 0; i < *np; i++) prompt[i] = (int32_t)json_integer_value(json_array_get(p, (size_t)i));
    for (int i = 0; i < *nt; i++) teacher[i] = (int32_t)json_integer_value(json_array_get(t, (size_t)i));
    json_decref(root);
    return 0;
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

static int has(const int32_t *v, int k, int32_t x)
{
    for (int i = 0; i < k; i++) if (v[i] == x) return 1;
    return 0;
}

static void fp64_qat_matches_reference(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, CASE, err, sizeof err), 0);
    dsv4q_st *g;
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_fp64.safetensors", err, sizeof err), 0);
    int32_t prompt[1024], teacher[64];
    int np = 0, nt = 0;
    assert_int_equal(load_tokens(prompt, &np, teacher, &nt), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("qat", &bs), 0);
    taps tp = {0};
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, np + nt, on_tap, &tp, err, sizeof err), 0);
    const long V = m->cfg.vocab_size;
    double *logits = malloc(sizeof(double) * (size_t)V);
    const dsv4q_st_tensor *lp = dsv4q_st_find(g, "logits_prefill"), *ld = dsv4q_st_find(g, "logits_decode");
    assert_non_null(lp);
    assert_non_null(ld);
    assert_int_equal(dsv4q_run_feed(r, prompt, np, logits, err, sizeof err), 0);
    double e = nrms(logits, lp->data, V);
    printf("pub_tiny prefill logits NRMS vs golden_fp64: %.3e\n", e);
    assert_true(e < 1e-13);
    for (int i = 0; i < nt; i++) {
        tp.call = i + 1;
        assert_int_equal(dsv4q_run_feed(r, &teacher[i], 1, logits, err, sizeof err), 0);
        e = nrms(logits, (const double *)ld->data + (long)i * V, V);
        printf("pub_tiny decode %d logits NRMS: %.3e\n", i, e);
        assert_true(e < 1e-13);
    }
    for (int L = 0; L < m->cfg.n_layers; L++) {
        char name[64];
        snprintf(name, sizeof name, "block_out_L%d", L);
        const dsv4q_st_tensor *t = dsv4q_st_find(g, name);
        assert_non_null(t);
        assert_int_equal(t->numel, tp.block_n[L]);
        e = nrms(tp.block_out[L], t->data, t->numel);
        printf("pub_tiny %s NRMS: %.3e\n", name, e);
        assert_true(e < 1e-13);
        free(tp.block_out[L]);
    }
    int idx_layers[2] = {2, 4};
    for (int a = 0; a < 2; a++) {
        int L = idx_layers[a];
        char name[64];
        snprintf(name, sizeof name, "indexer_topk_L%d_compressed", L);
        const dsv4q_st_tensor *t = dsv4q_st_find(g, name);
        assert_non_null(t);
        int k = (int)t->shape[1];
        assert_int_equal(tp.topk_k[L], k);
        const int32_t *want = t->data;
        for (int c = 0; c <= nt; c++)
            for (int j = 0; j < k; j++)
                assert_true(has(tp.topk[L][c], k, want[c * k + j]));
    }
    free(logits);
    dsv4q_run_close(r);
    dsv4q_st_close(g);
    dsv4q_model_close(m);
}

/*
 * golden_bf16src is the reference in its own BF16 precision on CPU (its
 * GEMM accumulation order is the CPU library's, and its top-k order among
 * tied BF16 index scores is torch's), so it cannot match bit for bit. But
 * before the first indexed layer (layer 2) nothing depends on those: the
 * f32 `source` run must reproduce block 0's BF16 output for the vast
 * majority of elements EXACTLY (a missing BF16 rounding point would make
 * almost none equal) and be within BF16 rounding noise in NRMS.
 * Measured: 98.3% equal, NRMS 7.0e-4.
 */
static void f32_source_matches_bf16_reference_layer0(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, CASE, err, sizeof err), 0);
    dsv4q_st *g;
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_bf16src.safetensors", err, sizeof err), 0);
    int32_t prompt[1024], teacher[64];
    int np = 0, nt = 0;
    assert_int_equal(load_tokens(prompt, &np, teacher, &nt), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    taps tp = {0};
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, 32, bs, np, on_tap, &tp, err, sizeof err), 0);
    double *logits = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    assert_int_equal(dsv4q_run_feed(r, prompt, np, logits, err, sizeof err), 0);
    const dsv4q_st_tensor *t = dsv4q_st_find(g, "block_out_L0");
    assert_non_null(t);
    assert_int_equal(t->numel, tp.block_n[0]);
    long equal = 0;
    double num = 0, den = 0;
    for (long i = 0; i < t->numel; i++) {
        double want = dsv4q_decode_elem(t->dtype, t->data, (size_t)i), got = tp.block_out[0][i];
        equal += got == want;
        num += (got - want) * (got - want);
        den += want * want;
    }
    double frac = (double)equal / (double)t->numel, e = sqrt(num / den);
    printf("pub_tiny f32 source vs golden_bf16src block_out_L0: %.4f of elements equal, NRMS %.3e\n", frac, e);
    assert_true(frac > 0.95);
    assert_true(e < 2e-3);
    for (int L = 0; L < 8; L++) free(tp.block_out[L]);
    free(logits);
    dsv4q_run_close(r);
    dsv4q_st_close(g);
    dsv4q_model_close(m);
}

/*
 * The README's profile advice: `qat`, not `source`, reproduces the fp64
 * reference. At f64 `source` adds the reference's BF16 roundings and every
 * logit row moves visibly off golden_fp64 (NRMS > 1e-3 per row), by about
 * the reference's own BF16-vs-fp64 distance (5.8e-2, docs/measurements.md):
 * the mean over the rows lies in [1e-2, 1e-1]. Measured: 3.4e-2 (README).
 */
static void f64_source_is_not_the_fp64_reference(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, CASE, err, sizeof err), 0);
    dsv4q_st *g;
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_fp64.safetensors", err, sizeof err), 0);
    int32_t prompt[1024], teacher[64];
    int np = 0, nt = 0;
    assert_int_equal(load_tokens(prompt, &np, teacher, &nt), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, np + nt, NULL, NULL, err, sizeof err), 0);
    const long V = m->cfg.vocab_size;
    double *logits = malloc(sizeof(double) * (size_t)V), sum = 0;
    const dsv4q_st_tensor *lp = dsv4q_st_find(g, "logits_prefill"), *ld = dsv4q_st_find(g, "logits_decode");
    assert_non_null(lp);
    assert_non_null(ld);
    for (int i = 0; i <= nt; i++) {
        assert_int_equal(i ? dsv4q_run_feed(r, &teacher[i - 1], 1, logits, err, sizeof err)
                           : dsv4q_run_feed(r, prompt, np, logits, err, sizeof err),
                         0);
        const double e = nrms(logits, i ? (const double *)ld->data + (long)(i - 1) * V : lp->data, V);
        assert_true(e > 1e-3);
        sum += e;
    }
    printf("pub_tiny f64 source vs golden_fp64: mean logit NRMS %.3e over %d rows\n", sum / (nt + 1), nt + 1);
    assert_true(sum / (nt + 1) > 1e-2 && sum / (nt + 1) < 1e-1);
    free(logits);
    dsv4q_run_close(r);
    dsv4q_st_close(g);
    dsv4q_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(fp64_qat_matches_reference),
                                       cmocka_unit_test(f32_source_matches_bf16_reference_layer0),
                                       cmocka_unit_test(f64_source_is_not_the_fp64_reference)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
