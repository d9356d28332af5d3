/*
 * test_reference_case_v41.c - the fp64 oracle reproduces DeepSeek's own
 * V4.1 reference outputs (tests/data/pub_v41_tiny, see its README).
 *
 * golden_fp64 is the official V4.1 model.py run in float64 with only its
 * quantizers kept (E4M3 window KV, FP8 activations before FP8/FP4 GEMMs,
 * FP4 indexer q and keys, E2M1/E4M3-per-16 compressed KV): our `qat`
 * profile at width f64. Expected values are the reference's (a published
 * number), never ours. The README measures re-associated fp64 sums of the
 * reference at 7.9e-16 and reports no exact tie at any top-k decision (min
 * relative gaps 3.4e-4 gate, 3.8e-5 indexer, 8.4e-4 candidate blocks), so
 * a faithful oracle matches every float tensor to ~1e-15 and every
 * selection exactly: we assert NRMS < 1e-13 on the logits, every layer's
 * (block_out, block_premix), both Engram outputs, the final collapse and
 * norm, prefill and decode, and set equality of every indexer pick row and
 * candidate-block row.
 *
 * Also: the switch idxk_per_source reproduces golden_fp64_indexk_fix (the
 * reference with per-source index keys), and yarn_gated moves the logits
 * by the NRMS the case publishes for the reference gated the same way
 * (compare_yarn_gated_vs_pinned.txt: 2.2194e-01).
 */
#include "tests/testutil.h"
#include <jansson.h>
#include "io/model.h"
#include "io/safetensors.h"
#include "oracle/model_run.h"
#include "oracle/boundary.h"

#define CASE "tests/data/pub_v41_tiny"
#define NL 8
#define HC 4
#define DIM 128
#define NCALLS 9 /* the prefill + 8 decode steps */
#define MAXROWS 160

/* What the taps deliver, by call: float tensors as the golden's layout
 * (prefill [P, ...], decode [8, ...]) and selections by absolute row. */
typedef struct {
    int call;
    long P;
    double *block[NL], *block_dec[NL], *premix[NL], *premix_dec[NL];
    double *engram[NL], *engram_dec[NL];
    double *fcol, *fcol_dec, *fnorm, *fnorm_dec;
    int32_t topk[NL][MAXROWS][8];
    int topk_k[NL];
    int32_t cand[MAXROWS][8];
    int cand_k;
} taps;

static void keep(double **pre, double **dec, int call, long P, const double *d, long n, long rows)
{
    const long per = n / rows;
    if (call == 0) {
        *pre = malloc(sizeof(double) * (size_t)n);
        memcpy(*pre, d, sizeof(double) * (size_t)n);
        *dec = calloc((size_t)(8 * per), sizeof(double));
        (void)P;
    } else if (*dec) {
        memcpy(*dec + (call - 1) * per, d, sizeof(double) * (size_t)per);
    }
}

static void on_tap(void *u, int layer, const char *stage, const double *d, long n, long rows)
{
    taps *t = u;
    if (!stage || rows < 1) return;
    const long row0 = t->call == 0 ? 0 : t->P + t->call - 1;
    if (layer < 0) {
        if (!strcmp(stage, "final_collapse")) keep(&t->fcol, &t->fcol_dec, t->call, t->P, d, n, rows);
        if (!strcmp(stage, "final_norm")) keep(&t->fnorm, &t->fnorm_dec, t->call, t->P, d, n, rows);
        return;
    }
    if (layer >= NL) return;
    if (!strcmp(stage, "block_out")) keep(&t->block[layer], &t->block_dec[layer], t->call, t->P, d, n, rows);
    if (!strcmp(stage, "block_premix")) keep(&t->premix[layer], &t->premix_dec[layer], t->call, t->P, d, n, rows);
    if (!strcmp(stage, "engram_out")) keep(&t->engram[layer], &t->engram_dec[layer], t->call, t->P, d, n, rows);
    if (!strcmp(stage, "idx_topk") || !strcmp(stage, "cand_blocks")) {
        const int cand = !strcmp(stage, "cand_blocks");
        const long k = n / rows;
        if (cand) t->cand_k = (int)k;
        else t->topk_k[layer] = (int)k;
        for (long i = 0; i < rows && row0 + i < MAXROWS; i++)
            for (long j = 0; j < k && j < 8; j++) {
                int32_t v = (int32_t)d[i * k + j];
                if (cand) t->cand[row0 + i][j] = v;
                else t->topk[layer][row0 + i][j] = v;
            }
    }
}

static void taps_free(taps *t)
{
    for (int l = 0; l < NL; l++) {
        free(t->block[l]), free(t->block_dec[l]), free(t->premix[l]), free(t->premix_dec[l]);
        free(t->engram[l]), free(t->engram_dec[l]);
    }
    free(t->fcol), free(t->fcol_dec), free(t->fnorm), free(t->fnorm_dec);
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
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* got [n] against the golden float tensor `name`; returns the NRMS. */
static double vs(dsv4q_st *g, const char *name, const double *got, long n)
{
    const dsv4q_st_tensor *t = dsv4q_st_find(g, name);
    assert_non_null(t);
    assert_non_null(got);
    assert_int_equal(t->numel, n);
    double e = nrms(got, t->data, n);
    printf("  %-24s NRMS %.3e\n", name, e);
    return e;
}

/* The logits of the case's protocol (prefill, then the 8 teacher steps):
 * logits [9, V]. */
static void run_case_w(dsv4q_model *m, int width, uint64_t bs, taps *tp, double *logits)
{
    char err[512];
    int32_t prompt[1024], teacher[64];
    int np = 0, nt = 0;
    assert_int_equal(load_tokens(prompt, &np, teacher, &nt), 0);
    assert_int_equal(nt, 8);
    dsv4q_run *r;
    tp->P = np;
    assert_int_equal(dsv4q_run_open(&r, m, width, bs, np + nt, on_tap, tp, err, sizeof err), 0);
    const long V = m->cfg.vocab_size;
    tp->call = 0;
    int rc = dsv4q_run_feed(r, prompt, np, logits, err, sizeof err);
    if (rc) printf("feed: %s\n", err);
    assert_int_equal(rc, 0);
    for (int i = 0; i < nt; i++) {
        tp->call = i + 1;
        assert_int_equal(dsv4q_run_feed(r, &teacher[i], 1, logits + (i + 1) * V, err, sizeof err), 0);
    }
    dsv4q_run_close(r);
}

static void run_case(dsv4q_model *m, uint64_t bs, taps *tp, double *logits) { run_case_w(m, 64, bs, tp, logits); }

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Rows [from, rows) of a golden I32 selection [rows, k] equal ours as sets
 * (the -1s counted). Returns how many rows differ. */
static int sets_differ(dsv4q_st *g, const char *name, int32_t (*got)[8], int gk, long from)
{
    const dsv4q_st_tensor *t = dsv4q_st_find(g, name);
    assert_non_null(t);
    const long k = t->shape[t->ndim - 1], rows = t->numel / k;
    assert_int_equal(k, gk);
    int bad = 0;
    for (long i = from; i < rows && i < MAXROWS; i++) {
        int32_t a[8], b[8];
        for (long j = 0; j < k; j++) {
            a[j] = ((const int32_t *)t->data)[i * k + j];
            b[j] = got[i][j];
        }
        qsort(a, (size_t)k, sizeof *a, cmp_i32);
        qsort(b, (size_t)k, sizeof *b, cmp_i32);
        if (memcmp(a, b, sizeof(int32_t) * (size_t)k)) {
            if (!bad) printf("  %s row %ld differs\n", name, i);
            bad++;
        }
    }
    printf("  %-24s %ld/%ld rows equal as sets\n", name, rows - from - bad, rows - from);
    return bad;
}

static const int k_index_sources[] = {1, 3, 4, 6};

static void fp64_qat_matches_reference(void **state)
{
    (void)state;
    char err[512], name[64];
    dsv4q_model *m;
    int rc = dsv4q_model_open(&m, CASE, err, sizeof err);
    if (rc) printf("open: %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(m->cfg.arch, DSV4Q_ARCH_V41);
    dsv4q_st *g;
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_fp64.safetensors", err, sizeof err), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("qat", &bs), 0);
    const long V = m->cfg.vocab_size;
    double *logits = malloc(sizeof(double) * (size_t)(NCALLS * V));
    taps *tp = calloc(1, sizeof *tp);
    run_case(m, bs, tp, logits);
    const long P = tp->P;
    printf("pub_v41_tiny, fp64 oracle (qat) vs golden_fp64:\n");
    assert_true(vs(g, "logits_prefill", logits, V) < 1e-13);
    assert_true(vs(g, "logits_decode", logits + V, 8 * V) < 1e-13);
    for (int l = 0; l < NL; l++) {
        snprintf(name, sizeof name, "block_out_L%d", l);
        assert_true(vs(g, name, tp->block[l], P * HC * DIM) < 1e-13);
        snprintf(name, sizeof name, "block_out_decode_L%d", l);
        assert_true(vs(g, name, tp->block_dec[l], 8 * HC * DIM) < 1e-13);
        snprintf(name, sizeof name, "block_premix_L%d", l);
        assert_true(vs(g, name, tp->premix[l], P * HC) < 1e-13);
        snprintf(name, sizeof name, "block_premix_decode_L%d", l);
        assert_true(vs(g, name, tp->premix_dec[l], 8 * HC) < 1e-13);
    }
    for (int e = 2; e <= 5; e += 3) {
        snprintf(name, sizeof name, "engram_out_L%d", e);
        assert_true(vs(g, name, tp->engram[e], P * HC * DIM) < 1e-13);
        snprintf(name, sizeof name, "engram_out_decode_L%d", e);
        assert_true(vs(g, name, tp->engram_dec[e], 8 * HC * DIM) < 1e-13);
    }
    assert_true(vs(g, "final_collapse", tp->fcol, P * DIM) < 1e-13);
    assert_true(vs(g, "final_collapse_decode", tp->fcol_dec, 8 * DIM) < 1e-13);
    assert_true(vs(g, "final_norm", tp->fnorm, P * DIM) < 1e-13);
    assert_true(vs(g, "final_norm_decode", tp->fnorm_dec, 8 * DIM) < 1e-13);
    for (int i = 0; i < 4; i++) {
        const int l = k_index_sources[i];
        snprintf(name, sizeof name, "indexer_topk_L%d_compressed", l);
        assert_int_equal(sets_differ(g, name, tp->topk[l], tp->topk_k[l], 0), 0);
    }
    assert_int_equal(sets_differ(g, "candidate_blocks_L4", tp->cand, tp->cand_k, 0), 0);
    taps_free(tp);
    free(tp);
    free(logits);
    dsv4q_st_close(g);
    dsv4q_model_close(m);
}

/* The behaviour switch idxk_per_source against golden_fp64_indexk_fix
 * (its prefill equals golden_fp64; it stores decode activations only). */
static void idxk_per_source_matches_indexk_fix(void **state)
{
    (void)state;
    char err[512], name[64];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, CASE, err, sizeof err), 0);
    dsv4q_st *g;
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_fp64_indexk_fix.safetensors", err, sizeof err), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_declaration_parse("qat:idxk_per_source", &bs, err, sizeof err), 0);
    const long V = m->cfg.vocab_size;
    double *logits = malloc(sizeof(double) * (size_t)(NCALLS * V));
    taps *tp = calloc(1, sizeof *tp);
    run_case(m, bs, tp, logits);
    printf("pub_v41_tiny, fp64 oracle (qat:idxk_per_source) vs golden_fp64_indexk_fix:\n");
    assert_true(vs(g, "logits_prefill", logits, V) < 1e-13);
    assert_true(vs(g, "logits_decode", logits + V, 8 * V) < 1e-13);
    for (int l = 0; l < NL; l++) {
        snprintf(name, sizeof name, "block_out_decode_L%d", l);
        assert_true(vs(g, name, tp->block_dec[l], 8 * HC * DIM) < 1e-13);
        snprintf(name, sizeof name, "block_premix_decode_L%d", l);
        assert_true(vs(g, name, tp->premix_dec[l], 8 * HC) < 1e-13);
    }
    assert_true(vs(g, "final_norm_decode", tp->fnorm_dec, 8 * DIM) < 1e-13);
    for (int i = 0; i < 4; i++) {
        const int l = k_index_sources[i];
        snprintf(name, sizeof name, "indexer_topk_L%d_compressed", l);
        assert_int_equal(sets_differ(g, name, tp->topk[l], tp->topk_k[l], 0), 0);
    }
    assert_int_equal(sets_differ(g, "candidate_blocks_L4", tp->cand, tp->cand_k, 0), 0);
    taps_free(tp);
    free(tp);
    free(logits);
    dsv4q_st_close(g);
    dsv4q_model_close(m);
}

/* yarn_gated: the run's context (157 positions) is below original_seq_len
 * (65536), so the compressed layers lose YaRN; the case publishes what
 * that does to the reference's logits: NRMS 2.2194e-01 over all 9 rows. */
static void yarn_gated_moves_logits_as_published(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, CASE, err, sizeof err), 0);
    uint64_t pinned, gated;
    assert_int_equal(dsv4q_profile_set("qat", &pinned), 0);
    assert_int_equal(dsv4q_declaration_parse("qat:yarn_gated", &gated, err, sizeof err), 0);
    const long V = m->cfg.vocab_size;
    double *a = malloc(sizeof(double) * (size_t)(NCALLS * V)), *b = malloc(sizeof(double) * (size_t)(NCALLS * V));
    taps *tp = calloc(1, sizeof *tp);
    run_case(m, pinned, tp, b);
    taps_free(tp);
    memset(tp, 0, sizeof *tp);
    run_case(m, gated, tp, a);
    taps_free(tp);
    const double e = nrms(a, b, NCALLS * V);
    printf("yarn_gated vs pinned logits NRMS %.5e (published 2.2194e-01)\n", e);
    assert_true(fabs(e - 2.2194e-01) < 1e-5);
    free(tp);
    free(a);
    free(b);
    dsv4q_model_close(m);
}

/*
 * golden_bf16src is the reference at its own precision on CPU: its GEMM
 * sums run in the CPU library's order and torch breaks ties among equal
 * BF16 index scores its own way, so no bit-for-bit match is possible. But
 * layer 0 is window-only (no indexer, no top-k), so the f32 `source` run
 * must give block 0's BF16 output EXACTLY for most elements (one BF16
 * rounding point missing or added and almost none would be equal) and stay
 * within BF16 noise in NRMS. After layer 0 the model amplifies every
 * flipped BF16 rounding: the logits' distance to golden_bf16src is printed
 * as a measurement, not asserted (it is of the size of the reference's own
 * bf16-vs-fp64 distance, compare_bf16src_vs_fp64.txt: 2.3674e-01, so it
 * cannot tell a bug from rounding; the qat tests above do).
 */
static void f32_source_matches_bf16_reference(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, CASE, err, sizeof err), 0);
    dsv4q_st *g;
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_bf16src.safetensors", err, sizeof err), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    const long V = m->cfg.vocab_size;
    double *logits = malloc(sizeof(double) * (size_t)(NCALLS * V));
    taps *tp = calloc(1, sizeof *tp);
    run_case_w(m, 32, bs, tp, logits);
    const dsv4q_st_tensor *t = dsv4q_st_find(g, "block_out_L0");
    assert_non_null(t);
    assert_non_null(tp->block[0]);
    long equal = 0;
    double num = 0, den = 0;
    for (long i = 0; i < t->numel; i++) {
        const double want = dsv4q_decode_elem(t->dtype, t->data, (size_t)i), got = tp->block[0][i];
        equal += got == want;
        num += (got - want) * (got - want);
        den += want * want;
    }
    const double frac = (double)equal / (double)t->numel, e0 = sqrt(num / den);
    printf("pub_v41_tiny f32 source vs golden_bf16src block_out_L0: %.4f of elements equal, NRMS %.3e\n", frac, e0);
    assert_true(frac > 0.95);
    assert_true(e0 < 2e-3);
    /* the later layers: measured (printed), not asserted */
    for (int L = 1; L < NL; L++) {
        char name[32];
        snprintf(name, sizeof name, "block_out_L%d", L);
        const dsv4q_st_tensor *tl = dsv4q_st_find(g, name);
        assert_non_null(tl);
        assert_non_null(tp->block[L]);
        long eq = 0;
        double nu = 0, de = 0;
        for (long i = 0; i < tl->numel; i++) {
            const double w = dsv4q_decode_elem(tl->dtype, tl->data, (size_t)i), x = tp->block[L][i];
            eq += x == w;
            nu += (x - w) * (x - w);
            de += w * w;
        }
        printf("  %s: %.4f of elements equal, NRMS %.3e\n", name, (double)eq / (double)tl->numel, sqrt(nu / de));
    }
    double *want = malloc(sizeof(double) * (size_t)(NCALLS * V));
    const dsv4q_st_tensor *lp = dsv4q_st_find(g, "logits_prefill"), *ld = dsv4q_st_find(g, "logits_decode");
    assert_non_null(lp);
    assert_non_null(ld);
    assert_int_equal(lp->numel + ld->numel, NCALLS * V);
    for (long i = 0; i < V; i++) want[i] = dsv4q_decode_elem(lp->dtype, lp->data, (size_t)i);
    for (long i = 0; i < ld->numel; i++) want[V + i] = dsv4q_decode_elem(ld->dtype, ld->data, (size_t)i);
    const double el = nrms(logits, want, NCALLS * V);
    printf("pub_v41_tiny f32 source vs golden_bf16src logits: NRMS %.3e (the reference's bf16 vs fp64: 2.3674e-01)\n",
           el);
    taps_free(tp);
    free(tp);
    free(want);
    free(logits);
    dsv4q_st_close(g);
    dsv4q_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp64_qat_matches_reference),
        cmocka_unit_test(idxk_per_source_matches_indexk_fix),
        cmocka_unit_test(yarn_gated_moves_logits_as_published),
        cmocka_unit_test(f32_source_matches_bf16_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
