/*
 * test_chunked.c - a prefill fed in chunks is the one-call prefill, bit for
 * bit (oracle/model.c M4, dsv4q_run_set_prefill).
 *
 * The expected values are the one-call prefill's own (an independent
 * schedule of the same pass, whose layout is the reference's): for chunk
 * sizes 1, 7, 64 and 4096 on tiny (window 16, ratios 4 and 128, top-k 8:
 * the ring wraps inside a chunk and between chunks, compressor blocks and
 * ratio-128 rows straddle chunk edges, the indexer's cut is made per
 * chunk) and on flash-slice (window 128, top-k 512), at f32 and f64:
 *  - the logits of the last prompt token, and of decode steps after it
 *    (the caches the chunks left are the one call's);
 *  - every per-layer stage tap, row by row (a chunk's indexer scores have
 *    fewer columns: the one call's extra columns must be masked, -inf);
 *  - the MTP block fed chunk by chunk (its own attention and caches).
 * V4.1 (oracle/model_v41.c J5) on tiny-v41 (window 12, ratio-2 groups
 * that odd chunks leave incomplete, so the shared index-key slot must
 * follow the one call; ratio-1 candidate blocks of 3, top-2 blocks, top-k
 * 5 wider than a first chunk's keys; Engram n-grams of 3 that straddle
 * chunk edges) and tiny-v41-dspark (its draft stages seeded chunk by
 * chunk, whether DSpark runs after every chunk or after the last only;
 * the drafts of every decode step compared).
 * Refusals: past the declared prompt, after a feed (V4 and V4.1 alike).
 * make test runs tiny at chunks 1, 7, 64 (6 s) and tiny-v41 at 1, 7, 64
 * on 150 tokens; DSV4Q_TEST_SLOW=1 adds 4096-token chunks of a 4500-token
 * prompt (tiny, tiny-v41) and flash-slice (4.5 min on 2 cores, most of it
 * flash-slice's prefills).
 */
#include "tests/testutil.h"
#include <unistd.h>
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"
#include "oracle/stages.h"

static char root[256];

static int write_model(const char *cfgname, char *dir, size_t n)
{
    char err[512];
    dsv4q_config cfg;
    snprintf(dir, n, "%s/%s", root, cfgname);
    if (access(dir, F_OK) == 0) return 0;
    if (dsv4q_config_builtin(&cfg, cfgname, err, sizeof err) || dsv4q_synth_write(&cfg, 3, dir, 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dsv4q-test-chunked-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* Every per-layer tap of a run: the rows of all calls, appended. */
typedef struct tapkey {
    int layer;
    char stage[32];
    long rows, cap;
    long *w;      /* values per row */
    double **row; /* [rows] */
} tapkey;

typedef struct taprec {
    tapkey k[256];
    int n;
    int oom;
} taprec;

static void rec_cb(void *user, int layer, const char *stage, const double *data, long n, long rows)
{
    taprec *t = user;
    if (!stage || layer < 0 || rows < 1) return; /* progress; model-level taps are one row per call */
    tapkey *k = NULL;
    for (int i = 0; i < t->n; i++)
        if (t->k[i].layer == layer && !strcmp(t->k[i].stage, stage)) k = &t->k[i];
    if (!k) {
        if (t->n == 256) {
            t->oom = 1;
            return;
        }
        k = &t->k[t->n++];
        memset(k, 0, sizeof *k);
        k->layer = layer;
        snprintf(k->stage, sizeof k->stage, "%s", stage);
    }
    const long w = n / rows;
    for (long i = 0; i < rows; i++) {
        if (k->rows == k->cap) {
            k->cap = k->cap ? 2 * k->cap : 64;
            k->w = realloc(k->w, sizeof(long) * (size_t)k->cap);
            k->row = realloc(k->row, sizeof(double *) * (size_t)k->cap);
            if (!k->w || !k->row) {
                t->oom = 1;
                return;
            }
        }
        k->w[k->rows] = w;
        k->row[k->rows] = malloc(sizeof(double) * (size_t)(w ? w : 1));
        if (!k->row[k->rows]) {
            t->oom = 1;
            return;
        }
        memcpy(k->row[k->rows], data + i * w, sizeof(double) * (size_t)w);
        k->rows++;
    }
}

static void rec_free(taprec *t)
{
    for (int i = 0; i < t->n; i++) {
        for (long j = 0; j < t->k[i].rows; j++) free(t->k[i].row[j]);
        free(t->k[i].row);
        free(t->k[i].w);
    }
    free(t);
}

/* Rows equal bit for bit; where one row is longer (idx_score: a chunk
 * scores fewer compressed rows) its extra values are -inf (masked). */
static long rec_diff(const taprec *a, const taprec *b, char *what, size_t n)
{
    long bad = 0;
    if (a->n != b->n) {
        snprintf(what, n, "%d vs %d tap keys", a->n, b->n);
        return 1;
    }
    for (int i = 0; i < a->n; i++) {
        const tapkey *x = &a->k[i], *y = NULL;
        for (int j = 0; j < b->n; j++)
            if (b->k[j].layer == x->layer && !strcmp(b->k[j].stage, x->stage)) y = &b->k[j];
        if (!y || y->rows != x->rows) {
            snprintf(what, n, "layer %d %s: rows %ld vs %ld", x->layer, x->stage, x->rows, y ? y->rows : -1);
            return 1;
        }
        for (long r = 0; r < x->rows; r++) {
            const long w = x->w[r] < y->w[r] ? x->w[r] : y->w[r];
            const double *lo = x->w[r] < y->w[r] ? y->row[r] : x->row[r];
            int ok = memcmp(x->row[r], y->row[r], sizeof(double) * (size_t)w) == 0;
            for (long c = w; ok && c < (x->w[r] > y->w[r] ? x->w[r] : y->w[r]); c++) ok = lo[c] == -INFINITY;
            if (!ok && !bad++) snprintf(what, n, "layer %d %s row %ld differs", x->layer, x->stage, r);
        }
    }
    return bad;
}

#define NDEC 3

/* A run of prompt S in chunks of c (c >= S: one call), NDEC decode steps
 * and, where the model has one, the MTP block after every call (V4.1: the
 * DSpark drafts after every feed, seeded by the prefill's). logits
 * [(1 + NDEC), V], mtp [V] (the last call's; V4.1 DSpark: [NDEC, block,
 * V], each decode step's drafts). */
static void run_sched(const dsv4q_model *m, int width, const int32_t *ids, long S, long c, double *logits, double *mtp,
                      taprec *t)
{
    char err[512];
    dsv4q_run *r;
    uint64_t bs;
    const long V = m->cfg.vocab_size, B = m->cfg.dspark_block_size;
    const int v41 = m->cfg.arch == DSV4Q_ARCH_V41;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    assert_true(B < 64);
    double *scratch = malloc(sizeof(double) * (size_t)((B + 1) * V));
    assert_non_null(scratch);
    assert_int_equal(dsv4q_run_open(&r, m, width, bs, S + NDEC + 1, rec_cb, t, err, sizeof err), 0);
    if (c < S) assert_int_equal(dsv4q_run_set_prefill(r, S, err, sizeof err), 0);
    for (long p = 0, n; p < S + NDEC; p += n) {
        n = p >= S ? 1 : S - p < c ? S - p : c;
        /* logits: the last prompt token's, then each decode step's */
        double *out = p >= S ? logits + (p - S + 1) * V : p + n == S ? logits : scratch;
        if (dsv4q_run_feed(r, ids + p, n, out, err, sizeof err)) fail_msg("feed at %ld (%ld tokens): %s", p, n, err);
        if (v41 && m->cfg.n_mtp_layers && (p >= S || p + n == S || c % 2)) {
            /* DSpark on the next id as the sampled token; an even chunk
             * calls it after the last prompt chunk only, as dsv4q run does */
            int32_t dids[64];
            double conf[64];
            const int rc =
                dsv4q_run_dspark(r, ids[p + n], p >= S ? mtp + (p - S) * B * V : scratch, dids, conf, err, sizeof err);
            if (rc != (p < S)) fail_msg("dspark after the feed at %ld: %d (%s)", p, rc, err);
        } else if (!v41 && m->cfg.n_mtp_layers && p < S) {
            assert_int_equal(dsv4q_run_mtp(r, ids + p + 1, mtp, err, sizeof err), 0);
        }
    }
    dsv4q_run_close(r);
    free(scratch);
    assert_false(t->oom);
}

static void check_chunks(const char *cfgname, int width, long S, const long *chunks, int nchunks)
{
    char dir[300], err[512], what[200];
    assert_int_equal(write_model(cfgname, dir, sizeof dir), 0);
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    const long V = m->cfg.vocab_size, nm = (m->cfg.dspark_block_size ? NDEC * m->cfg.dspark_block_size : 1) * V;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(S + NDEC + 1));
    double *la = malloc(sizeof(double) * (size_t)((NDEC + 1) * V)),
           *lb = malloc(sizeof(double) * (size_t)((NDEC + 1) * V));
    double *ma = calloc((size_t)nm, sizeof(double)), *mb = calloc((size_t)nm, sizeof(double));
    assert_non_null(ids && la && lb && ma && mb);
    uint64_t x = 99;
    for (long i = 0; i < S + NDEC + 1; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)V);
    }
    taprec *ta = calloc(1, sizeof *ta);
    assert_non_null(ta);
    run_sched(m, width, ids, S, S, la, ma, ta);
    for (int i = 0; i < nchunks; i++) {
        taprec *tb = calloc(1, sizeof *tb);
        assert_non_null(tb);
        run_sched(m, width, ids, S, chunks[i], lb, mb, tb);
        for (long j = 0; j < (NDEC + 1) * V; j++)
            if (memcmp(&la[j], &lb[j], sizeof(double)))
                fail_msg("%s f%d S %ld chunk %ld: logits of call %ld differ at %ld: %.17g vs %.17g", cfgname, width, S,
                         chunks[i], j / V, j % V, la[j], lb[j]);
        if (memcmp(ma, mb, sizeof(double) * (size_t)nm))
            fail_msg("%s f%d chunk %ld: MTP / DSpark logits differ", cfgname, width, chunks[i]);
        if (rec_diff(ta, tb, what, sizeof what))
            fail_msg("%s f%d S %ld chunk %ld: %s", cfgname, width, S, chunks[i], what);
        rec_free(tb);
    }
    rec_free(ta);
    free(ids);
    free(la);
    free(lb);
    free(ma);
    free(mb);
    dsv4q_model_close(m);
}

static void test_tiny(void **state)
{
    (void)state;
    const long chunks[] = {1, 7, 64};
    check_chunks("tiny", 64, 300, chunks, 3);
    check_chunks("tiny", 32, 300, chunks, 3);
}

/* Short prompts at the edges (from the review's sweep): 5 tokens (inside
 * the window of 16, no ratio-4 block), 17 (one past the window and 4
 * blocks), 129 (one past a ratio-128 block), in chunks of 2, 16 and of
 * prompt - 1 (a last chunk of one token), f64. */
static void test_tiny_edges(void **state)
{
    (void)state;
    const long c5[] = {2, 4}, c17[] = {2, 16}, c129[] = {2, 16, 128};
    check_chunks("tiny", 64, 5, c5, 2);
    check_chunks("tiny", 64, 17, c17, 2);
    check_chunks("tiny", 64, 129, c129, 3);
}

/* 4096-token chunks of a prompt longer than one chunk */
static int slow(void)
{
    const char *e = getenv("DSV4Q_TEST_SLOW");
    return e && strcmp(e, "0");
}

static void test_tiny_4096(void **state)
{
    (void)state;
    if (!slow()) skip();
    const long chunks[] = {4096};
    check_chunks("tiny", 64, 4500, chunks, 1);
    check_chunks("tiny", 32, 4500, chunks, 1);
}

static void test_flash_slice(void **state)
{
    (void)state;
    if (!slow()) skip();
    const long chunks[] = {7, 64};
    check_chunks("flash-slice", 64, 300, chunks, 2);
    check_chunks("flash-slice", 32, 300, chunks, 2);
}

/* V4.1: 150 tokens cross the window 12 times, leave ratio-2 groups open
 * at odd chunk edges and hold 50 candidate blocks of 3 */
static void test_tiny_v41(void **state)
{
    (void)state;
    const long chunks[] = {1, 7, 64};
    check_chunks("tiny-v41", 64, 150, chunks, 3);
    check_chunks("tiny-v41", 32, 150, chunks, 3);
}

/* DSpark's draft stages seeded chunk by chunk: called after every chunk
 * (7), or after the last only (4: the earlier chunks seed at the next) */
static void test_tiny_v41_dspark(void **state)
{
    (void)state;
    const long chunks[] = {7, 4};
    check_chunks("tiny-v41-dspark", 64, 40, chunks, 2);
    check_chunks("tiny-v41-dspark", 32, 40, chunks, 2);
}

static void test_tiny_v41_4096(void **state)
{
    (void)state;
    if (!slow()) skip();
    const long chunks[] = {4096, 333};
    check_chunks("tiny-v41", 64, 4500, chunks, 2);
    check_chunks("tiny-v41", 32, 4500, chunks, 2);
}

static void test_refusals(void **state)
{
    (void)state;
    char dir[300], err[512];
    uint64_t bs;
    dsv4q_profile_set("source", &bs);
    dsv4q_model *m;
    dsv4q_run *r;
    double *lg = malloc(sizeof(double) * 8192);
    int32_t ids[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    assert_int_equal(write_model("tiny", dir, sizeof dir), 0);
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, 16, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_prefill(r, 17, err, sizeof err), -1); /* longer than the run */
    assert_non_null(strstr(err, "does not fit"));
    assert_int_equal(dsv4q_run_set_prefill(r, 10, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 4, lg, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids + 4, 7, lg, err, sizeof err), -1); /* past the prompt's 10 */
    assert_non_null(strstr(err, "at most 6"));
    assert_int_equal(dsv4q_run_set_prefill(r, 12, err, sizeof err), -1); /* after a feed */
    assert_int_equal(dsv4q_run_feed(r, ids + 4, 6, lg, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids + 10, 2, lg, err, sizeof err), -1); /* decode: one token */
    dsv4q_run_close(r);
    dsv4q_model_close(m);
    assert_int_equal(write_model("tiny-v41", dir, sizeof dir), 0);
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, 16, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_prefill(r, 17, err, sizeof err), -1); /* V4.1: the same refusals */
    assert_non_null(strstr(err, "does not fit"));
    assert_int_equal(dsv4q_run_set_prefill(r, 10, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 3, lg, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids + 3, 8, lg, err, sizeof err), -1);
    assert_non_null(strstr(err, "at most 7"));
    assert_int_equal(dsv4q_run_set_prefill(r, 12, err, sizeof err), -1); /* after a feed */
    dsv4q_run_close(r);
    dsv4q_model_close(m);
    free(lg);
}

/* On a run with a declared prompt a stage call (dsv4q_run_stage) lays its
 * columns out for the prompt: a call that crosses the prompt's end (a
 * 16-token attn call on a 4-token prompt wrote 16 x 4 picks into a 16 x 1
 * list) is refused, as is a declaration after a stage call. (Chunks inside
 * the prompt replay at zero error: tests/test_capture.c.) */
static void test_stage_refused(void **state)
{
    (void)state;
    char dir[300], err[512];
    uint64_t bs;
    dsv4q_profile_set("source", &bs);
    dsv4q_model *m;
    dsv4q_run *r;
    assert_int_equal(write_model("tiny", dir, sizeof dir), 0);
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    const long s = 16, d = m->cfg.dim;
    double *x = calloc((size_t)(s * d), sizeof(double)), *y = calloc((size_t)(s * d), sizeof(double));
    assert_non_null(x && y);
    for (long i = 0; i < s * d; i++) x[i] = (double)((i * 37) % 101) / 101.0 - 0.5;
    assert_int_equal(m->layers[1].ratio, 4);
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, s, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_prefill(r, 4, err, sizeof err), 0);
    dsv4q_stage_io io = {DSV4Q_STAGE_ATTN, 1, s, 0, NULL, {x}, {y}};
    assert_int_equal(dsv4q_run_stage(r, &io, err, sizeof err), -1);
    assert_non_null(strstr(err, "dsv4q_run_set_prefill"));
    dsv4q_run_close(r);
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, s, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_stage(r, &io, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_set_prefill(r, 4, err, sizeof err), -1);
    dsv4q_run_close(r);
    free(x);
    free(y);
    dsv4q_model_close(m);
}

/* The CLI's --chunk: larger than the prompt is the one call, up to
 * LONG_MAX (the call count was (prompt + chunk - 1) / chunk: a signed
 * overflow, "0 calls" printed, an abort under UBSan); 0 is refused. */
static int sh_rc(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_chunk(void **state)
{
    (void)state;
    char cmd[1400], out[400], js[400], db[400], *b = NULL;
    size_t n;
    snprintf(out, sizeof out, "%s/cli.out", root);
    snprintf(js, sizeof js, "%s/cli.json", root);
    snprintf(db, sizeof db, "%s/cli.db", root);
    snprintf(cmd, sizeof cmd,
             "./%s/dsv4q sensitivity --prompt-len 16 --decode 1 --chunk 9223372036854775807 -q --db '%s' "
             "--json '%s' > '%s' 2>&1",
             DSV4Q_TEST_BUILD, db, js, out);
    assert_int_equal(sh_rc(cmd), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    b = calloc(1, 1 << 16);
    assert_non_null(b);
    n = fread(b, 1, (1 << 16) - 1, f);
    fclose(f);
    if (!strstr(b, "prefill    1 call of up to 16 tokens\n")) fail_msg("the plan: %.*s", (int)n, b);
    f = fopen(js, "r");
    assert_non_null(f);
    n = fread(b, 1, (1 << 16) - 1, f);
    b[n] = 0;
    fclose(f);
    assert_non_null(strstr(b, "\"prefill_chunk\":16"));
    snprintf(cmd, sizeof cmd,
             "./%s/dsv4q run --width f32 --prompt-len 16 --decode 1 --chunk 9223372036854775807 -q --out "
             "'%s/cli.st' > '%s' 2>&1",
             DSV4Q_TEST_BUILD, root, out);
    assert_int_equal(sh_rc(cmd), 0);
    snprintf(cmd, sizeof cmd, "./%s/dsv4q run --width f32 --prompt-len 16 --chunk 0 -q --out '%s/cli0.st' 2>/dev/null",
             DSV4Q_TEST_BUILD, root);
    assert_int_equal(sh_rc(cmd), 2);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),        cmocka_unit_test(test_stage_refused),
        cmocka_unit_test(test_cli_chunk),       cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_tiny_edges),      cmocka_unit_test(test_tiny_4096),
        cmocka_unit_test(test_flash_slice),     cmocka_unit_test(test_tiny_v41),
        cmocka_unit_test(test_tiny_v41_dspark), cmocka_unit_test(test_tiny_v41_4096),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
