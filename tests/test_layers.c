/*
 * test_layers.c - a model run as a chain of layer ranges
 * (dsv4q_run_set_layers + dsv4q_run_feed_xs, oracle/model.c M5) is the
 * whole run, bit for bit, in one process: what the MPI driver (mpi/,
 * tests/mpi_check.sh) relies on, tested where no MPI is installed too.
 *
 * The expected values are the whole run's own (dsv4q_run_feed, the
 * single-process path the goldens pin): the logits of the prefill's last
 * token and of decode steps, and the MTP logits after them, on tiny at f64
 * and f32 in the source and exact profiles (exact: Xs not rounded to BF16,
 * so a boundary sent narrower would show), for the splits {0-4}, {0-0, 1-4}, {0-1, 2-2, 3-4} and one range
 * per layer, with the prompt in one call and in chunks of 5. Refusals: MTP
 * on a range that is not the last, a bad range, a range after a feed, a
 * V4.1 model. Also mpi/layout.c: the balanced split and --ranks-layers.
 */
#include "tests/testutil.h"
#include <math.h>
#include <unistd.h>
#include "io/model.h"
#include "oracle/boundary.h"
#include "mpi/layout.c"
#include "oracle/model_run.h"
#include "tests/tinyfix.h"

/* The rounding points of the runs: the source profile, and exact, where
 * the hidden streams are not rounded to BF16 (resid_bf16 off), so a
 * boundary that rounded Xs to binary32 or BF16 would show. */
static const char *profile = "source";
static uint64_t source_bs(void)
{
    uint64_t bs = 0;
    assert_int_equal(dsv4q_profile_set(profile, &bs), 0);
    return bs;
}

static char root[256], dir[300], root41[256], dir41[300];
static dsv4q_model *m;

static int setup(void **state)
{
    (void)state;
    char err[512];
    if (tinyfix_make(root, sizeof root, dir, sizeof dir, "layers", "tiny", 3)) return -1;
    if (dsv4q_model_open(&m, dir, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dsv4q_model_close(m);
    tinyfix_remove(root);
    if (root41[0]) tinyfix_remove(root41);
    return 0;
}

enum { P = 13, M = 2 };

/* logits [M + 2, V]: prefill, M decode steps, MTP after the last step. */
typedef struct result {
    double *lg;
} result;

static void ids_of(int32_t *ids, long n, int vocab)
{
    for (long i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 11) % vocab);
}

/* The whole run (the reference of this test). */
static void whole(int width, long chunk, double *lg)
{
    const long V = m->cfg.vocab_size;
    int32_t ids[P + M];
    char err[512];
    ids_of(ids, P + M, (int)V);
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, width, source_bs(), P + M, NULL, NULL, err, sizeof err), 0);
    if (chunk < P) assert_int_equal(dsv4q_run_set_prefill(r, P, err, sizeof err), 0);
    for (long p = 0; p < P; p += chunk)
        assert_int_equal(dsv4q_run_feed(r, ids + p, P - p < chunk ? P - p : chunk, lg, err, sizeof err), 0);
    for (long i = 0; i < M; i++)
        assert_int_equal(dsv4q_run_feed(r, ids + P + i, 1, lg + (i + 1) * V, err, sizeof err), 0);
    int32_t next = ids[P + M - 1];
    assert_int_equal(dsv4q_run_mtp(r, &next, lg + (M + 1) * V, err, sizeof err), 0);
    dsv4q_run_close(r);
}

/* The same run as nr ranges first[k]..last[k], Xs handed from one to the next. */
static void chained(int width, long chunk, int nr, const int *first, const int *last, double *lg)
{
    const long V = m->cfg.vocab_size;
    int32_t ids[P + M];
    char err[512];
    ids_of(ids, P + M, (int)V);
    dsv4q_run *r[8];
    for (int k = 0; k < nr; k++) {
        assert_int_equal(dsv4q_run_open(&r[k], m, width, source_bs(), P + M, NULL, NULL, err, sizeof err), 0);
        assert_int_equal(dsv4q_run_set_layers(r[k], first[k], last[k], err, sizeof err), 0);
        if (chunk < P) assert_int_equal(dsv4q_run_set_prefill(r[k], P, err, sizeof err), 0);
    }
    const long per = dsv4q_run_xs_count(r[0], 1) * (width / 8);
    void *xs = calloc((size_t)(P * per), 1);
    double *tmp = malloc(sizeof(double) * (size_t)V);
    assert_non_null(xs);
    assert_non_null(tmp);
    for (long c = 0, pos = 0; pos < P + M; c++) {
        const long s = pos < P ? (P - pos < chunk ? P - pos : chunk) : 1;
        for (int k = 0; k < nr; k++) {
            assert_int_equal(dsv4q_run_feed_xs(r[k], ids + pos, s, xs, tmp, err, sizeof err), 0);
            if (k < nr - 1) assert_true(isnan(tmp[0])); /* no head before the last range */
        }
        pos += s;
        if (pos == P) memcpy(lg, tmp, sizeof(double) * (size_t)V);
        else if (pos > P) memcpy(lg + (pos - P) * V, tmp, sizeof(double) * (size_t)V);
    }
    int32_t next = ids[P + M - 1];
    if (nr > 1) {
        assert_int_equal(dsv4q_run_mtp(r[0], &next, tmp, err, sizeof err), -1);
        assert_non_null(strstr(err, "layers 0-"));
    }
    assert_int_equal(dsv4q_run_mtp(r[nr - 1], &next, lg + (M + 1) * V, err, sizeof err), 0);
    for (int k = 0; k < nr; k++) dsv4q_run_close(r[k]);
    free(xs);
    free(tmp);
}

static void ranges_are_the_whole_run(void **state)
{
    (void)state;
    const long V = m->cfg.vocab_size, n = (M + 2) * V;
    static const int f1[] = {0}, l1[] = {4}, f2[] = {0, 1}, l2[] = {0, 4}, f3[] = {0, 2, 3}, l3[] = {1, 2, 4};
    static const int f5[] = {0, 1, 2, 3, 4}, l5[] = {0, 1, 2, 3, 4};
    const struct {
        int nr;
        const int *f, *l;
    } splits[] = {{1, f1, l1}, {2, f2, l2}, {3, f3, l3}, {5, f5, l5}};
    assert_int_equal(m->cfg.n_layers, 5);
    double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
    assert_non_null(ref);
    assert_non_null(got);
    static const char *profiles[] = {"source", "exact"};
    for (int pi = 0; pi < 2; pi++)
        for (int w = 32; w <= 64; w += 32)
            for (long chunk = 5; chunk <= P; chunk += P - 5) {
                profile = profiles[pi];
                whole(w, P, ref); /* the one-call prefill: chunks are M4's, ranges M5's */
                for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
                    memset(got, 0, sizeof(double) * (size_t)n);
                    chained(w, chunk, splits[i].nr, splits[i].f, splits[i].l, got);
                    if (memcmp(ref, got, sizeof(double) * (size_t)n))
                        fail_msg("%s f%d, chunk %ld, %d ranges: logits differ from the whole run", profile, w, chunk,
                                 splits[i].nr);
                }
            }
    profile = "source";
    free(ref);
    free(got);
}

static void refusals(void **state)
{
    (void)state;
    char err[512];
    dsv4q_run *r;
    int32_t id = 1;
    double *lg = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    assert_non_null(lg);
    assert_int_equal(dsv4q_run_open(&r, m, 64, source_bs(), 4, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_layers(r, 2, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a range"));
    assert_int_equal(dsv4q_run_set_layers(r, 0, 5, err, sizeof err), -1);
    assert_int_equal(dsv4q_run_set_layers(r, -1, 2, err, sizeof err), -1);
    assert_int_equal(dsv4q_run_feed_xs(r, &id, 1, NULL, lg, err, sizeof err), -1);
    assert_int_equal(dsv4q_run_feed(r, &id, 1, lg, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_layers(r, 0, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "before the first call"));
    dsv4q_run_close(r);
    free(lg);
    /* V4.1: its carried state is more than Xs */
    dsv4q_model *m41;
    assert_int_equal(tinyfix_make(root41, sizeof root41, dir41, sizeof dir41, "layers41", "tiny-v41", 3), 0);
    assert_int_equal(dsv4q_model_open(&m41, dir41, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_open(&r, m41, 64, source_bs(), 4, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_layers(r, 0, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "V4 only so far"));
    dsv4q_run_close(r);
    dsv4q_model_close(m41);
}

static void layout(void **state)
{
    (void)state;
    char err[512];
    int f[4], l[4];
    /* by hand: bytes 1 1 1 1 8 -> two ranks: 0-3 (4) and 4 (8); the last rank takes what is left */
    const double b[] = {1, 1, 1, 1, 8};
    assert_int_equal(dsv4q_mpi_split(b, 5, 2, f, l, err, sizeof err), 0);
    assert_int_equal(f[0], 0);
    assert_int_equal(l[0], 3);
    assert_int_equal(f[1], 4);
    assert_int_equal(l[1], 4);
    /* 8 1 1 1 1 -> 0 | 1-4; equal bytes, 3 ranks of 6 layers: 2 each */
    const double c[] = {8, 1, 1, 1, 1}, e[] = {1, 1, 1, 1, 1, 1};
    assert_int_equal(dsv4q_mpi_split(c, 5, 2, f, l, err, sizeof err), 0);
    assert_int_equal(l[0], 0);
    assert_int_equal(dsv4q_mpi_split(e, 6, 3, f, l, err, sizeof err), 0);
    assert_int_equal(l[0], 1);
    assert_int_equal(l[1], 3);
    assert_int_equal(l[2], 5);
    assert_int_equal(dsv4q_mpi_split(e, 6, 7, f, l, err, sizeof err), -1);
    assert_int_equal(dsv4q_mpi_parse_ranges("0-1,2,3-5", 6, 3, f, l, err, sizeof err), 0);
    assert_int_equal(f[1], 2);
    assert_int_equal(l[1], 2);
    assert_int_equal(f[2], 3);
    assert_int_equal(l[2], 5);
    assert_int_equal(dsv4q_mpi_parse_ranges("0-1,3-5", 6, 2, f, l, err, sizeof err), -1); /* gap */
    assert_non_null(strstr(err, "start at layer 2"));
    assert_int_equal(dsv4q_mpi_parse_ranges("0-2,2-5", 6, 2, f, l, err, sizeof err), -1); /* overlap */
    assert_int_equal(dsv4q_mpi_parse_ranges("0-4", 6, 1, f, l, err, sizeof err), -1);     /* short */
    assert_int_equal(dsv4q_mpi_parse_ranges("0-5", 6, 2, f, l, err, sizeof err), -1);     /* count */
    assert_int_equal(dsv4q_mpi_parse_ranges("0-x", 6, 1, f, l, err, sizeof err), -1);
    /* tiny's layers: every one has weights, the ratio-4 ones (indexer) more than ratio 0 */
    assert_true(dsv4q_mpi_layer_bytes(m, 0) > 0);
    assert_true(dsv4q_mpi_layer_bytes(m, 1) > dsv4q_mpi_layer_bytes(m, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ranges_are_the_whole_run),
        cmocka_unit_test(refusals),
        cmocka_unit_test(layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
