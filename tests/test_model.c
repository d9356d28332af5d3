/*
 * test_model.c - whole-model properties on synthesized checkpoints.
 *
 *  - prefill of N tokens == prefill of N-1 + one decode step (fp64, exact
 *    profile, last logits within 1e-12 relative): the caches (window ring,
 *    compressed rows, indexer keys, compressor states) carry exactly what a
 *    longer prefill would see; checked across the ring wrap of the tiny
 *    window (16) and of a 128 window (positions 127/128/129), and across
 *    compressed block boundaries (ratio 4 and 128);
 *  - a run is bit-identical run to run and at 1 vs 2 threads (both widths);
 *  - a run stopped after layer L (dsv4q_run_set_last_layer) taps exactly
 *    what the full run taps up to and including layer L, bit for bit,
 *    nothing after it, and returns NaN logits; it refuses MTP, and cannot
 *    be set once a call has been fed;
 *  - bad inputs (token id >= vocab, negative id, chunked prefill, past
 *    max_pos) fail with a message, never crash.
 */
#include "tests/testutil.h"
#include <omp.h>
#include <unistd.h>
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static char tiny_dir[256];

static int setup(void **state)
{
    (void)state;
    char err[512];
    snprintf(tiny_dir, sizeof tiny_dir, "/tmp/dsv4q-test-model-XXXXXX");
    if (!mkdtemp(tiny_dir)) return -1;
    strcat(tiny_dir, "/tiny");
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny", err, sizeof err)) return -1;
    if (dsv4q_synth_write(&cfg, 7, tiny_dir, 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tiny_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void ids_for(int32_t *ids, long n, int vocab)
{
    uint64_t x = 12345;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)vocab);
    }
}

static double rel_diff(const double *a, const double *b, long n)
{
    double num = 0, den = 0;
    for (long i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return num / den;
}

/* Last logits of a prefill of n tokens. */
static void prefill_logits(const dsv4q_model *m, int width, uint64_t bs, const int32_t *ids, long n, double *out)
{
    char err[512];
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, width, bs, n, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, n, out, err, sizeof err), 0);
    dsv4q_run_close(r);
}

/* Decode steps from position p_from to p_to, each compared with a fresh
 * prefill of p+1 tokens. */
static void check_decode_equals_prefill(dsv4q_model *m, long p_from, long p_to)
{
    char err[512];
    const long V = m->cfg.vocab_size;
    int32_t ids[512];
    ids_for(ids, p_to + 1, (int)V);
    uint64_t bs;
    dsv4q_profile_set("exact", &bs);
    double *a = malloc(sizeof(double) * (size_t)V), *b = malloc(sizeof(double) * (size_t)V);
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, p_to + 1, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, p_from, a, err, sizeof err), 0);
    for (long p = p_from; p <= p_to; p++) {
        assert_int_equal(dsv4q_run_feed(r, &ids[p], 1, a, err, sizeof err), 0);
        prefill_logits(m, 64, bs, ids, p + 1, b);
        double e = rel_diff(a, b, V);
        if (e > 1e-12) printf("position %ld: decode vs prefill rel diff %.3e\n", p, e);
        assert_true(e <= 1e-12);
    }
    dsv4q_run_close(r);
    free(a);
    free(b);
}

static void decode_matches_prefill_tiny_window(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, tiny_dir, err, sizeof err), 0);
    assert_int_equal(m->cfg.window_size, 16);
    /* ring wrap at 15/16/17, ratio-4 blocks complete at 15, 19 */
    check_decode_equals_prefill(m, 13, 20);
    dsv4q_model_close(m);
}

static void decode_matches_prefill_window_128(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, tiny_dir, err, sizeof err), 0);
    m->cfg.window_size = 128;   /* window does not change any weight shape */
    /* ring wrap at 127/128/129; first ratio-128 row completes at 127 */
    check_decode_equals_prefill(m, 126, 130);
    dsv4q_model_close(m);
}

static void run_all(const dsv4q_model *m, int width, uint64_t bs, int threads, double *out)
{
    char err[512];
    const long V = m->cfg.vocab_size;
    int32_t ids[80];
    ids_for(ids, 80, (int)V);
    omp_set_num_threads(threads);
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, width, bs, 80, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 70, out, err, sizeof err), 0);
    for (int i = 0; i < 10; i++) assert_int_equal(dsv4q_run_feed(r, &ids[70 + i], 1, out + (i + 1) * V, err, sizeof err), 0);
    dsv4q_run_close(r);
}

static void bit_identical_runs_and_threads(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, tiny_dir, err, sizeof err), 0);
    const long n = 11 * m->cfg.vocab_size;
    double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n),
           *c = malloc(sizeof(double) * (size_t)n);
    uint64_t bs;
    dsv4q_profile_set("source", &bs);
    for (int w = 32; w <= 64; w += 32) {
        run_all(m, w, bs, 1, a);
        run_all(m, w, bs, 1, b);
        run_all(m, w, bs, 2, c);
        assert_memory_equal(a, b, sizeof(double) * (size_t)n);
        assert_memory_equal(a, c, sizeof(double) * (size_t)n);
    }
    /* the widths really differ (the comparison above can fail) */
    run_all(m, 32, bs, 2, a);
    run_all(m, 64, bs, 2, b);
    assert_true(memcmp(a, b, sizeof(double) * (size_t)n) != 0);
    free(a);
    free(b);
    free(c);
    dsv4q_model_close(m);
}

/* Every tap of a run: layer, stage and an FNV-1a hash of the values. */
typedef struct taplog {
    long n;
    int layer[4096];
    char stage[4096][24];
    uint64_t hash[4096];
} taplog;

static void log_tap(void *user, int layer, const char *stage, const double *data, long n, long rows)
{
    (void)rows;
    taplog *t = user;
    if (!stage || t->n >= 4096) return;
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)data;
    for (size_t i = 0; i < sizeof(double) * (size_t)n; i++) h = (h ^ b[i]) * 1099511628211ull;
    t->layer[t->n] = layer;
    snprintf(t->stage[t->n], sizeof t->stage[0], "%s", stage);
    t->hash[t->n++] = h;
}

static void feed3(const dsv4q_model *m, int width, int last, taplog *t, double *l)
{
    char err[512];
    int32_t ids[12];
    ids_for(ids, 12, m->cfg.vocab_size);
    dsv4q_run *r;
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    assert_int_equal(dsv4q_run_open(&r, m, width, bs, 12, log_tap, t, err, sizeof err), 0);
    if (last >= 0) assert_int_equal(dsv4q_run_set_last_layer(r, last), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 10, l, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_last_layer(r, 1), -1);   /* too late: a call was fed */
    for (int i = 10; i < 12; i++) assert_int_equal(dsv4q_run_feed(r, &ids[i], 1, l, err, sizeof err), 0);
    double *mtp = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    assert_int_equal(dsv4q_run_mtp(r, &ids[11], mtp, err, sizeof err), last >= 0 ? -1 : 0);   /* tiny has MTP */
    if (last >= 0) assert_non_null(strstr(err, "stops early"));
    free(mtp);
    dsv4q_run_close(r);
}

static void last_layer_stops_early(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, tiny_dir, err, sizeof err), 0);
    const int L = 2;
    assert_true(m->cfg.n_layers > L + 1);
    double *l = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    taplog *full = calloc(1, sizeof *full), *cut = calloc(1, sizeof *cut);
    for (int width = 32; width <= 64; width += 32) {
        full->n = cut->n = 0;
        feed3(m, width, -1, full, l);
        for (long i = 0; i < m->cfg.vocab_size; i++) assert_true(isfinite(l[i]));
        feed3(m, width, L, cut, l);
        for (long i = 0; i < m->cfg.vocab_size; i++) assert_true(isnan(l[i]));
        /* the cut run's taps = the full run's taps of layers <= L (and the
         * embedding), in the same order, bit for bit */
        long j = 0, kept = 0;
        for (long i = 0; i < full->n; i++) {
            int want = full->layer[i] <= L && full->layer[i] >= 0 ? 1 : !strcmp(full->stage[i], "embed");
            if (!want) continue;
            kept++;
            assert_true(j < cut->n);
            assert_int_equal(cut->layer[j], full->layer[i]);
            assert_string_equal(cut->stage[j], full->stage[i]);
            assert_true(cut->hash[j] == full->hash[i]);
            j++;
        }
        assert_int_equal(j, cut->n);
        assert_true(kept < full->n);   /* the full run did tap more */
    }
    free(full);
    free(cut);
    free(l);
    dsv4q_model_close(m);
}

/* MTP is a stage of the stage table (oracle/stages.h DSV4Q_STAGE_MTP): the
 * forward pass reports it to the stage hook with its input (the call's hc
 * streams after the last layer) and output (the MTP logits), and running
 * the stage alone on a fresh run from that input reproduces the logits bit
 * for bit (the M3 property the other stages have, tests/test_capture.c). */
typedef struct mtpcap {
    const dsv4q_config *cfg;
    double *X, *logits;
    int32_t ids[16];
    long s, p0;
    int seen, others;
} mtpcap;

static int grab_mtp(void *user, const dsv4q_stage_io *io)
{
    mtpcap *c = user;
    if (io->stage != DSV4Q_STAGE_MTP) { c->others++; return 0; }
    const long nX = io->s * c->cfg->hc_mult * c->cfg->dim, V = c->cfg->vocab_size;
    c->X = malloc(sizeof(double) * (size_t)nX);
    c->logits = malloc(sizeof(double) * (size_t)V);
    memcpy(c->X, io->in[0], sizeof(double) * (size_t)nX);
    memcpy(c->logits, io->out[0], sizeof(double) * (size_t)V);
    memcpy(c->ids, io->ids, sizeof(int32_t) * (size_t)io->s);
    c->s = io->s;
    c->p0 = io->pos0;
    c->seen++;
    return 0;
}

static void mtp_is_a_stage(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, tiny_dir, err, sizeof err), 0);
    assert_true(m->cfg.n_mtp_layers >= 1);
    const long V = m->cfg.vocab_size;
    int32_t ids[12];
    ids_for(ids, 12, m->cfg.vocab_size);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    double *l = malloc(sizeof(double) * (size_t)V), *a = malloc(sizeof(double) * (size_t)V),
           *b = malloc(sizeof(double) * (size_t)V);
    for (int width = 32; width <= 64; width += 32) {
        mtpcap c = {.cfg = &m->cfg};
        dsv4q_run *r, *r2;
        assert_int_equal(dsv4q_run_open(&r, m, width, bs, 12, NULL, NULL, err, sizeof err), 0);
        dsv4q_run_set_stage_hook(r, grab_mtp, &c);
        assert_int_equal(dsv4q_run_feed(r, ids, 10, l, err, sizeof err), 0);
        assert_int_equal(c.seen, 0);                           /* not part of a plain call */
        assert_int_equal(dsv4q_run_mtp(r, &ids[1], a, err, sizeof err), 0);
        assert_int_equal(c.seen, 1);
        assert_true(c.s == 10 && c.p0 == 0 && c.ids[0] == ids[1] && c.ids[9] == ids[10]);
        assert_memory_equal(c.logits, a, sizeof(double) * (size_t)V);
        assert_int_equal(dsv4q_run_open(&r2, m, width, bs, 12, NULL, NULL, err, sizeof err), 0);
        dsv4q_stage_io io = {DSV4Q_STAGE_MTP, -1, c.s, c.p0, c.ids, {c.X}, {b}};
        assert_int_equal(dsv4q_run_stage(r2, &io, err, sizeof err), 0);
        assert_memory_equal(a, b, sizeof(double) * (size_t)V);  /* bit for bit */
        assert_int_equal(dsv4q_run_stage(r2, &io, err, sizeof err), -1);   /* the MTP caches moved on */
        assert_non_null(strstr(err, "position 10"));
        dsv4q_run_close(r);
        dsv4q_run_close(r2);
        free(c.X);
        free(c.logits);
    }
    free(l); free(a); free(b);
    dsv4q_model_close(m);
}

static void bad_tokens_and_calls(void **state)
{
    (void)state;
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, tiny_dir, err, sizeof err), 0);
    double *l = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    uint64_t bs = 0;
    dsv4q_run *r;
    int32_t ids[4] = {1, 2, m->cfg.vocab_size, 3};
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, 8, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 4, l, err, sizeof err), -1);
    assert_non_null(strstr(err, "outside the vocabulary"));
    ids[2] = -5;
    assert_int_equal(dsv4q_run_feed(r, ids, 4, l, err, sizeof err), -1);
    assert_non_null(strstr(err, "id -5"));
    ids[2] = 7;
    assert_int_equal(dsv4q_run_feed(r, ids, 4, l, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 2, l, err, sizeof err), -1);   /* chunked prefill */
    assert_non_null(strstr(err, "one-token decode"));
    for (int i = 0; i < 4; i++) assert_int_equal(dsv4q_run_feed(r, &ids[i], 1, l, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 1, l, err, sizeof err), -1);   /* past max_pos */
    assert_non_null(strstr(err, "past the run"));
    dsv4q_run_close(r);
    free(l);
    dsv4q_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_matches_prefill_tiny_window),
        cmocka_unit_test(decode_matches_prefill_window_128),
        cmocka_unit_test(bit_identical_runs_and_threads),
        cmocka_unit_test(last_layer_stops_early),
        cmocka_unit_test(bad_tokens_and_calls),
        cmocka_unit_test(mtp_is_a_stage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
