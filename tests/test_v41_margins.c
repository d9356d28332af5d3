/*
 * test_v41_margins.c - `dsv4q margins` on a DeepSeek V4.1 checkpoint
 * (issue 24 item 6): both cuts, checked by hand on the candidate source.
 *
 * On the synthesized tiny-v41 (index sources 1 3 4 6, candidate source 4:
 * 2 kept blocks of 8, index_topk 5) with a fixed prompt of 24 and 3
 * decodes:
 *  - the command reports exactly the index-source layers, and the block
 *    cut only at layer 4;
 *  - layer 4's figures at f64 equal what this test computes itself from
 *    an independent f64 run's taps (idx_score, idx_topk, cand_blocks) with
 *    its own brute force: the k-th picked score, the best score left out,
 *    their distance in BF16 codes (the scores are BF16 under `source`: the
 *    ordinal is the sign-magnitude of the top 16 bits of the binary32), the
 *    run of scores equal to the k-th inside and outside the picks; and the
 *    block cut: block scores = max over 8 positions, the block of the last
 *    finite position pinned (left out of both sides), the weakest kept
 *    block against the best dropped one;
 *  - --score-dtype f16 / f32 say so, switch idx_score_bf16 off, and count
 *    quanta in that dtype: every row's margin equals the distance between
 *    its reported k-th and next scores in F16 codes (F32 bits), recomputed
 *    here;
 *  - a bad --score-dtype is refused (exit 2) and writes nothing.
 */
#include "tests/testutil.h"
#include "tests/testcli.h"
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static char root[256], mdir[300], tok[300];
static dsv4q_model *M;
enum { NP = 24, ND = 3, NPOS = NP + ND, LAYER = 4 };
static const int32_t prompt[NP] = {3,  17,  5, 99, 250, 8,  41, 41,  7, 300, 12,  5,
                                   77, 140, 3, 3,  18,  60, 2,  511, 9, 33,  150, 6};
static const int32_t teacher[ND] = {44, 120, 5};

static int setup(void **state)
{
    (void)state;
    char err[1024], db[300];
    snprintf(root, sizeof root, "/tmp/dsv4q-test-v41-margins-XXXXXX");
    if (!mkdtemp(root)) return -1;
    snprintf(mdir, sizeof mdir, "%s/tiny-v41", root);
    snprintf(tok, sizeof tok, "%s/tokens.json", root);
    snprintf(db, sizeof db, "%s/r.db", root);
    setenv("DSV4Q_DB", db, 1);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny-v41", err, sizeof err) ||
        dsv4q_synth_write(&cfg, 1, mdir, 1, err, sizeof err) || dsv4q_model_open(&M, mdir, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    FILE *f = fopen(tok, "w");
    if (!f) return -1;
    fprintf(f, "{\"prompt\": [");
    for (int i = 0; i < NP; i++) fprintf(f, "%s%d", i ? ", " : "", prompt[i]);
    fprintf(f, "], \"teacher\": [");
    for (int i = 0; i < ND; i++) fprintf(f, "%s%d", i ? ", " : "", teacher[i]);
    fprintf(f, "]}\n");
    return fclose(f);
}

static int teardown(void **state)
{
    (void)state;
    dsv4q_model_close(M);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

/* ---- the independent side: taps of one f64 run at LAYER ---------------- */

typedef struct rec {
    long pos0;
    double score[NPOS][64]; /* T <= 24 / ratio 1 ... at most NPOS columns */
    long T[NPOS];
    int32_t pick[NPOS][8], blk[NPOS][4];
    long k[NPOS], nb[NPOS];
} rec;

static void tap(void *user, int layer, const char *stage, const double *data, long n, long rows)
{
    rec *r = user;
    if (!stage || layer != LAYER || rows <= 0) return;
    for (long i = 0; i < rows; i++) {
        const long p = r->pos0 + i, w = n / rows;
        if (!strcmp(stage, "idx_score")) {
            assert_true(w <= 64);
            r->T[p] = w;
            for (long t = 0; t < w; t++) r->score[p][t] = data[i * w + t];
        } else if (!strcmp(stage, "idx_topk")) {
            assert_true(w <= 8);
            r->k[p] = w;
            for (long t = 0; t < w; t++) r->pick[p][t] = (int32_t)data[i * w + t];
        } else if (!strcmp(stage, "cand_blocks")) {
            assert_true(w <= 4);
            r->nb[p] = w;
            for (long t = 0; t < w; t++) r->blk[p][t] = (int32_t)data[i * w + t];
        }
    }
}

static void run_f64(rec *r)
{
    char err[512];
    double logits[512];
    dsv4q_run *run;
    assert_true(M->cfg.vocab_size <= 512);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);
    bs &= dsv4q_boundary_arch_mask(M->cfg.arch); /* as the command's profile */
    assert_int_equal(dsv4q_run_open(&run, M, 64, bs, NPOS, tap, r, err, sizeof err), 0);
    r->pos0 = 0;
    assert_int_equal(dsv4q_run_feed(run, prompt, NP, logits, err, sizeof err), 0);
    for (int i = 0; i < ND; i++) {
        r->pos0 = NP + i;
        assert_int_equal(dsv4q_run_feed(run, &teacher[i], 1, logits, err, sizeof err), 0);
    }
    dsv4q_run_close(run);
}

/* BF16 ordinal of a BF16-valued score: sign-magnitude of its top 16 bits. */
static long ord16(double x)
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    assert_int_equal(u & 0xffffu, 0); /* source scores are BF16 (idx_score_bf16) */
    const long mag = (long)((u >> 16) & 0x7fffu);
    return (u >> 31) ? -mag : mag;
}

typedef struct cut {
    int valid, has_next;
    double kth, next;
    long margin, tie_total, tie_in;
} cut;

/* Brute force over v [n] with the chosen set in[n]; entries with !use do not take part. */
static cut brute(const double *v, const int *in, const int *use, long n)
{
    cut c = {0};
    for (long t = 0; t < n; t++)
        if (use[t] && in[t] && (!c.valid || v[t] < c.kth)) c.kth = v[t], c.valid = 1;
    for (long t = 0; t < n; t++)
        if (use[t] && !in[t] && (!c.has_next || v[t] > c.next)) c.next = v[t], c.has_next = 1;
    c.has_next &= c.valid;
    if (c.has_next) c.margin = ord16(c.kth) - ord16(c.next);
    for (long t = 0; c.valid && t < n; t++)
        if (use[t] && v[t] == c.kth) c.tie_total++, c.tie_in += in[t];
    return c;
}

static json_t *margins_json(const char *name, const char *dtype)
{
    char js[400];
    snprintf(js, sizeof js, "%s/%s.json", root, name);
    if (dtype)
        assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_margins, "margins", "--model", mdir, "--tokens", tok, "--positions",
                                          "all", "--score-dtype", dtype, "--json", js, "-q", NULL),
                         0);
    else
        assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_margins, "margins", "--model", mdir, "--tokens", tok, "--positions",
                                          "all", "--json", js, "-q", NULL),
                         0);
    json_error_t je;
    json_t *j = json_load_file(js, 0, &je);
    assert_non_null(j);
    return j;
}

static void check_cut(const json_t *w, const cut *c)
{
    json_t *kth = json_object_get(w, "kth_score"), *next = json_object_get(w, "next_score");
    assert_int_equal(json_is_real(kth), c->valid);
    if (c->valid) assert_true(json_real_value(kth) == c->kth);
    assert_int_equal(json_is_real(next), c->has_next);
    if (c->has_next) {
        assert_true(json_real_value(next) == c->next);
        assert_int_equal(json_integer_value(json_object_get(w, "margin_quanta")), c->margin);
    }
    assert_int_equal(json_integer_value(json_object_get(w, "tie_total")), c->tie_total);
    assert_int_equal(json_integer_value(json_object_get(w, "tie_inside")), c->tie_in);
}

static void both_cuts_by_hand(void **state)
{
    (void)state;
    static rec r;
    memset(&r, 0, sizeof r);
    run_f64(&r);
    json_t *j = margins_json("bf16", NULL);
    assert_string_equal(json_string_value(json_object_get(j, "score_dtype")), "BF16");
    /* the index sources, and the block cut only at the candidate source */
    json_t *layers = json_object_get(j, "layers");
    assert_int_equal(json_array_size(layers), 4);
    const int want[4] = {1, 3, 4, 6};
    for (int i = 0; i < 4; i++) {
        json_t *l = json_array_get(layers, (size_t)i);
        assert_int_equal(json_integer_value(json_object_get(l, "layer")), want[i]);
        assert_int_equal(json_object_get(l, "block_cut") != NULL, want[i] == LAYER);
    }
    json_t *rows = json_object_get(j, "rows");
    long checked = 0, checked_b = 0, ties = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        if (json_integer_value(json_object_get(row, "layer")) != LAYER) continue;
        const long p = (long)json_integer_value(json_object_get(row, "position")), T = r.T[p];
        assert_true(p >= 0 && p < NPOS && T > 0);
        int in[64] = {0}, use[64] = {0};
        for (long t = 0; t < T; t++) use[t] = isfinite(r.score[p][t]) != 0;
        for (long x = 0; x < r.k[p]; x++)
            if (r.pick[p][x] >= 0) in[r.pick[p][x]] = 1;
        const cut c = brute(r.score[p], in, use, T);
        check_cut(json_object_get(row, "f64"), &c);
        ties += c.tie_total > c.tie_in;
        checked++;
        /* the block cut */
        const long B = M->cfg.candidate_block_size, nb = (T + B - 1) / B;
        double bs[16];
        int bin[16] = {0}, buse[16] = {0};
        long last = -1;
        assert_true(nb <= 16);
        for (long b = 0; b < nb; b++) {
            bs[b] = -INFINITY;
            for (long t = b * B; t < T && t < (b + 1) * B; t++) {
                if (r.score[p][t] > bs[b]) bs[b] = r.score[p][t];
                if (use[t]) last = t;
            }
            buse[b] = isfinite(bs[b]) != 0;
        }
        if (last >= 0) buse[last / B] = 0; /* pinned */
        for (long x = 0; x < r.nb[p]; x++)
            if (r.blk[p][x] >= 0) bin[r.blk[p][x]] = 1;
        const cut cb = brute(bs, bin, buse, nb);
        check_cut(json_object_get(json_object_get(row, "block_cut"), "f64"), &cb);
        checked_b += cb.valid;
    }
    assert_int_equal(checked, NPOS);
    assert_true(checked_b > 0); /* rows with a competing kept block exist */
    print_message("layer %d: %ld rows checked by hand (%ld cut inside a tie-run), %ld block cuts\n", LAYER, checked,
                  ties, checked_b);
    json_decref(j);
}

static long f16_ord(double x)
{
    /* F16 code by brute force over the 65536 codes (nearest, ties to the even code) */
    long best = 0;
    double bd = INFINITY;
    for (long c = 0; c < 0x7c00; c++) { /* finite positive magnitudes */
        const int e = (int)(c >> 10), m = (int)(c & 0x3ff);
        const double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
        const double d = fabs(fabs(x) - v);
        if (d < bd || (d == bd && !(c & 1))) bd = d, best = c;
    }
    return x < 0 ? -best : best;
}

static void declared_dtypes_count_their_quanta(void **state)
{
    (void)state;
    const char *dts[2] = {"f16", "f32"};
    for (int k = 0; k < 2; k++) {
        json_t *j = margins_json(dts[k], dts[k]);
        assert_string_equal(json_string_value(json_object_get(j, "score_dtype")), k ? "F32" : "F16");
        assert_null(strstr(json_string_value(json_object_get(j, "boundaries")), "idx_score_bf16"));
        json_t *rows = json_object_get(j, "rows");
        long n = 0;
        for (size_t i = 0; i < json_array_size(rows); i++) {
            json_t *w = json_object_get(json_array_get(rows, i), "f64");
            json_t *next = json_object_get(w, "next_score");
            if (!json_is_real(next)) continue;
            const double a = json_real_value(json_object_get(w, "kth_score")), b = json_real_value(next);
            long want;
            if (k == 0) {
                want = f16_ord(a) - f16_ord(b);
            } else {
                float fa = (float)a, fb = (float)b;
                uint32_t ua, ub;
                memcpy(&ua, &fa, 4);
                memcpy(&ub, &fb, 4);
                const long oa = (ua >> 31) ? -(long)(ua & 0x7fffffffu) : (long)ua;
                const long ob = (ub >> 31) ? -(long)(ub & 0x7fffffffu) : (long)ub;
                want = oa - ob;
            }
            assert_int_equal(json_integer_value(json_object_get(w, "margin_quanta")), want);
            n++;
        }
        assert_true(n > 50);
        json_decref(j);
    }
    char js[400];
    struct stat sb;
    snprintf(js, sizeof js, "%s/bad.json", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_margins, "margins", "--model", mdir, "--tokens", tok, "--score-dtype",
                                      "f8", "--json", js, "-q", NULL),
                     2);
    assert_int_not_equal(stat(js, &sb), 0);
}

/* --chunk on V4.1 (model_v41.c J5): the prefill in chunks of 5 measures
 * both cuts at every position exactly as the one call: the same JSON but
 * prefill_chunk (the candidate blocks of 8 and the ratio-2 pairs are cut
 * off their edges). */
static void chunked_same_cuts(void **state)
{
    (void)state;
    json_t *a = margins_json("one", NULL);
    char js[400];
    snprintf(js, sizeof js, "%s/chunk5.json", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_margins, "margins", "--model", mdir, "--tokens", tok, "--positions",
                                      "all", "--chunk", "5", "--json", js, "-q", NULL),
                     0);
    json_error_t je;
    json_t *b = json_load_file(js, 0, &je);
    assert_non_null(b);
    assert_int_equal(json_integer_value(json_object_get(a, "prefill_chunk")), NP);
    assert_int_equal(json_integer_value(json_object_get(b, "prefill_chunk")), 5);
    json_object_del(a, "prefill_chunk");
    json_object_del(b, "prefill_chunk");
    assert_true(json_equal(a, b));
    json_decref(a);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(both_cuts_by_hand),
        cmocka_unit_test(declared_dtypes_count_their_quanta),
        cmocka_unit_test(chunked_same_cuts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
