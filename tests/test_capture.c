/*
 * test_capture.c - captures and their replay (harness/capture/capture.h,
 * harness/capture/replay.h, oracle/stages.h), on a synthesized `tiny`.
 *
 *  - the stage table: names round-trip through the parser, bad names are
 *    refused with a reason, docs/captures.md embeds the current table;
 *  - a capture the f64 oracle writes replays with every stage at exactly
 *    zero error (replay.h P2, model.c M3), and the whole model too, also
 *    when its prefill is written in chunks (model.c M4); an f32
 *    capture's error is exactly its level (M3 at f32);
 *  - one element of one stage's output changed by 1% fails that stage and
 *    no other (the next stage's inputs are still the captured ones);
 *  - wrong shape, unknown stage name, layer out of range, wrong dtype,
 *    missing metadata, a checkpoint pin of another model: a clear error
 *    naming the tensor / field, and `dsv4q replay` exits 2;
 *  - a stage whose reference is not finite (an input scaled past FLT_MAX:
 *    oracle-f32 NaN) is "not checkable" with the reason, exit 1;
 *  - a missing input makes its stage "not checkable" (with the reason),
 *    never silently skipped; a missing attn input makes the layer's later
 *    attn calls "not checkable (missing earlier call)";
 *  - (captures of a backend's run, capture --backend: test_capture_backend.c)
 *  - a capture written by examples/write_capture.py (python3 + numpy +
 *    safetensors; skipped cleanly when they are missing) replays and passes.
 */
#include "tests/testutil.h"
#include "tests/testcap.h"
#include "tests/testcli.h"
#include <jansson.h>
#include <omp.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "gates/gates.h"
#include "harness/capture/capture.h"
#include "receipts/capture_pins.h"
#include "harness/capture/replay.h"
#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/stages.h"

static char root[256], tiny[300], cap_src[300], cap_model[300], dbp[300];
static dsv4q_model *M;
static dsv4q_gates G;
static char csha[65], wsha[65];

static int setup(void **state)
{
    (void)state;
    char err[1024];
    snprintf(root, sizeof root, "/tmp/dsv4q-test-capture-XXXXXX");
    if (!mkdtemp(root)) return -1;
    snprintf(tiny, sizeof tiny, "%s/tiny", root);
    snprintf(cap_src, sizeof cap_src, "%s/cap-source", root);
    snprintf(cap_model, sizeof cap_model, "%s/cap-model", root);
    snprintf(dbp, sizeof dbp, "%s/r.db", root);
    setenv("DSV4Q_DB", dbp, 1);
    /* results do not depend on the thread count (docs/oracle.md); tiny's
     * operators are too small for threads to pay on a loaded machine */
    omp_set_num_threads(1);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny", err, sizeof err) || dsv4q_synth_write(&cfg, 1, tiny, 1, err, sizeof err) ||
        dsv4q_model_open(&M, tiny, err, sizeof err) || dsv4q_capture_pins(tiny, csha, wsha, NULL, err, sizeof err) ||
        dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    /* prefill of 18 (past the window of 16 and a ratio-4 block), 2 decodes */
    if (dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "18", "--decode", "2", "--out",
                         cap_src, "-q", NULL) ||
        dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "18", "--decode", "2",
                         "--profile", "model", "--out", cap_model, "-q", NULL))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dsv4q_model_close(M);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------ */

/* Copy capture dir src to root/name, applying e to call file `call`. */
static const char *variant(const char *src, const char *name, int call, const cap_edit *e)
{
    return cap_variant(root, src, name, call, e);
}

static int replay(const char *path, dsv4q_replay *res, int whole)
{
    char err[1024];
    dsv4q_capture *cap;
    if (dsv4q_capture_open(&cap, path, &M->cfg, csha, wsha, err, sizeof err)) {
        fprintf(stderr, "capture_open: %s\n", err);
        return -1;
    }
    dsv4q_replay_opts o = {.gates = &G, .whole_model = whole, .quiet = 1};
    int rc = dsv4q_replay_run(res, M, cap, &o, err, sizeof err);
    if (rc) fprintf(stderr, "replay: %s\n", err);
    dsv4q_capture_close(cap);
    return rc;
}

/* Opening the capture must fail with a message containing want. */
static void open_fails(const char *path, const char *want)
{
    char err[1024];
    dsv4q_capture *cap = NULL;
    assert_int_equal(dsv4q_capture_open(&cap, path, &M->cfg, csha, wsha, err, sizeof err), -1);
    assert_null(cap);
    if (!strstr(err, want)) fprintf(stderr, "message '%s' lacks '%s'\n", err, want);
    assert_non_null(strstr(err, want));
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", tiny, "--capture", path, "-q", NULL), 2);
}

/* Copy the n call files of capture dir src to root/name, e applied to
 * every one (a metadata key all calls must agree on). */
static const char *every_call(const char *src, const char *name, int n, const cap_edit *e)
{
    static char dir[400];
    char f[500], g[500];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(f, sizeof f, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    assert_int_equal(system(f), 0);
    for (int i = 0; i < n; i++) {
        snprintf(f, sizeof f, "%s/call-%04d.safetensors", src, i);
        snprintf(g, sizeof g, "%s/call-%04d.safetensors", dir, i);
        cap_rewrite(f, g, e);
    }
    return dir;
}

/* ---- tests -------------------------------------------------------------- */

/* The mtp stage is optional in a capture (the capture command does not run
 * MTP): its result slot stays "not captured" and is not counted missing. */
static int optional_absent(const dsv4q_replay_stage *s)
{
    return dsv4q_stage_get(s->stage)->optional && s->verdict == DSV4Q_RV_ABSENT;
}

static void stage_names_round_trip(void **state)
{
    (void)state;
    char name[DSV4Q_STAGE_NAME_MAX], err[512];
    int n = 0;
    for (int st = 0; st < DSV4Q_STAGE_COUNT; st++) {
        const dsv4q_stage_info *si = dsv4q_stage_get(st);
        assert_int_equal(dsv4q_stage_find(si->name), st);
        for (int io = 0; io < 2; io++)
            for (int t = 0; t < (io ? si->nout : si->nin); t++) {
                int a, b, c, d;
                assert_int_equal(dsv4q_stage_tensor_name(name, sizeof name, st, 3, io, t), 0);
                assert_int_equal(dsv4q_stage_parse_name(name, &a, &b, &c, &d, err, sizeof err), 0);
                assert_int_equal(a, st);
                assert_int_equal(b, si->per_layer ? 3 : -1);
                assert_int_equal(c, io);
                assert_int_equal(d, t);
                n++;
            }
    }
    assert_int_equal(n, 1 + 26 + 2 + 2);   /* embed, 26 per layer, head, mtp (X in, logits out) */
    const char *bad[] = {"L0.atn.in", "L0.attn.inn", "L0.attn.in.x", "L0.hc_attn_pre.out", "L00.attn.in",
                         "model.attn.in", "L1.embed.out", "x.attn.in", "L0.attn", "L0..attn.in", "model.embed.in",
                         NULL};
    for (int i = 0; bad[i]; i++) {
        int a, b, c, d;
        err[0] = 0;
        assert_int_equal(dsv4q_stage_parse_name(bad[i], &a, &b, &c, &d, err, sizeof err), -1);
        assert_non_null(strstr(err, bad[i]));
    }
}

static void docs_table_is_current(void **state)
{
    (void)state;
    FILE *f = fopen("docs/captures.md", "r");
    assert_non_null(f);
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *mark = strstr(doc, "<!-- generated: dsv4q stages --markdown -->\n");
    assert_non_null(mark);
    mark = strchr(mark, '\n') + 1;
    char *gen = NULL;
    size_t glen = 0;
    FILE *m = open_memstream(&gen, &glen);
    dsv4q_stage_print(m, NULL, 1);
    fclose(m);
    if (strncmp(mark, gen, glen)) fprintf(stderr, "docs/captures.md: stage table is stale (make docs)\n");
    assert_int_equal(strncmp(mark, gen, glen), 0);
    free(gen);
}

/* Replay dir (with the whole model) and require every stage and the
 * logits at exactly zero error, each stage checked on `calls` calls. */
static void replays_at_zero_error(const char *dir, long calls)
{
    dsv4q_replay r;
    assert_int_equal(replay(dir, &r, 1), 0);
    assert_int_equal(r.nabsent, 0);
    assert_int_equal(r.nunc, 0);
    assert_int_equal(r.nfail, 0);
    assert_int_equal(r.npass, 2 + 8 * M->cfg.n_layers);
    for (int i = 0; i < r.nst; i++) {
        const dsv4q_replay_stage *s = &r.st[i];
        if (optional_absent(s)) continue;
        assert_int_equal(s->calls_checked, calls);
        for (int t = 0; t < s->nout; t++) {
            assert_true(s->seen[t]);
            assert_true(s->val[t].se == 0 && s->val[t].max_abs == 0); /* bit-exact */
        }
    }
    assert_int_equal(r.model.verdict, DSV4Q_RV_PASS);
    assert_true(r.model.val.max_abs == 0);
    assert_int_equal(r.model.agree, calls);
    assert_int_equal(dsv4q_replay_status(&r), 0);
    dsv4q_replay_free(&r);
}

static void oracle_capture_replays_at_zero_error(void **state)
{
    (void)state;
    replays_at_zero_error(cap_src, 3);
    assert_int_equal(
        dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", tiny, "--capture", cap_src, "--no-model", "-q", NULL),
        0);
}

/* A prefill written in chunks (capture --chunk, as a chunked-prefill engine
 * runs it) replays at exactly zero error too: replay declares the prompt
 * to every layer's attention, which then takes the chunks as the one call
 * (model.c M4), and the whole-model run feeds the same chunks. 16 tokens
 * in chunks of 5: calls of 5, 5, 5, 1 (the last chunk is one token, which
 * only prompt_len tells from a decode step), then 2 decode steps. Without
 * that declaration (the planted bug: no dsv4q_run_set_prefill in replay)
 * the attention of the chunks past the first differs. */
static void chunked_capture_replays_at_zero_error(void **state)
{
    (void)state;
    char dir[400], err[1024];
    snprintf(dir, sizeof dir, "%s/cap-chunk5", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "16", "--decode",
                                      "2", "--chunk", "5", "--out", dir, "-q", NULL),
                     0);
    dsv4q_capture *cap;
    assert_int_equal(dsv4q_capture_open(&cap, dir, &M->cfg, csha, wsha, err, sizeof err), 0);
    assert_int_equal(cap->ncalls, 6);
    assert_int_equal(cap->prompt, 16);
    assert_int_equal(cap->calls[3].pos, 15);
    assert_int_equal(cap->calls[3].s, 1);
    dsv4q_capture_close(cap);
    replays_at_zero_error(dir, 6);
    /* the chunks' last-token logits are the one call's at the same rows:
     * the last chunk's head output equals the one-call capture's prefill */
    char one[400];
    snprintf(one, sizeof one, "%s/cap-one16", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "16", "--decode",
                                      "2", "--out", one, "-q", NULL),
                     0);
    char fa[500], fb[500];
    snprintf(fa, sizeof fa, "%s/call-0003.safetensors", dir);
    snprintf(fb, sizeof fb, "%s/call-0000.safetensors", one);
    dsv4q_st *a, *b;
    assert_int_equal(dsv4q_st_open(&a, fa, err, sizeof err), 0);
    assert_int_equal(dsv4q_st_open(&b, fb, err, sizeof err), 0);
    const dsv4q_st_tensor *ta = dsv4q_st_find(a, "model.head.out"), *tb = dsv4q_st_find(b, "model.head.out");
    assert_non_null(ta);
    assert_non_null(tb);
    assert_int_equal(ta->numel, tb->numel);
    assert_memory_equal(ta->data, tb->data, sizeof(double) * (size_t)ta->numel);
    dsv4q_st_close(a);
    dsv4q_st_close(b);
    /* prompt_len must agree over the calls and be a positive integer */
    cap_edit e = {.drop_meta = "prompt_len"};
    open_fails(variant(dir, "nolen", 2, &e), "metadata prompt_len is absent here and set in the first call");
    e = (cap_edit){.meta_key = "prompt_len", .meta_val = "0"};
    open_fails(variant(dir, "len0", 0, &e), "metadata prompt_len \"0\" must be a positive integer");
    /* a call of several tokens past the prompt is no decode step */
    e = (cap_edit){.meta_key = "position", .meta_val = "40"};
    open_fails(variant(dir, "late", 1, &e), "a call at position 40 is a decode step and has exactly one token");
    /* a call that crosses the prompt's end */
    e = (cap_edit){.meta_key = "position", .meta_val = "13"};
    open_fails(variant(dir, "cross", 2, &e), "the call at position 13 of 5 tokens crosses the end of the prompt");
    /* two chunks that overlap: each position is one call's */
    e = (cap_edit){.meta_key = "position", .meta_val = "3"};
    open_fails(variant(dir, "overlap", 1, &e), "the call at position 3 of 5 tokens overlaps the call at position 0");
    /* a declared prompt past the last call (a capture of its first chunks
     * only) is incomplete, not an error: the run holds its 40 positions
     * and the 6 calls (16 + 2 tokens) replay as chunks of it */
    e = (cap_edit){.meta_key = "prompt_len", .meta_val = "40"};
    const char *longer = every_call(dir, "len40", 6, &e);
    assert_int_equal(dsv4q_capture_open(&cap, longer, &M->cfg, csha, wsha, err, sizeof err), 0);
    assert_int_equal(cap->prompt, 40);
    assert_int_equal(cap->max_pos, 40);
    dsv4q_capture_close(cap);
    dsv4q_replay r;
    assert_int_equal(replay(longer, &r, 1), 0);
    assert_int_equal(r.nfail, 0);
    assert_true(r.npass > 0);
    dsv4q_replay_free(&r);
    /* past the model's positions: refused as the field it is */
    e = (cap_edit){.meta_key = "prompt_len", .meta_val = "2000000"};
    open_fails(every_call(dir, "len2m", 6, &e), "metadata prompt_len 2000000 is past the model's max_seq_len 1048576");
}

/* replay --capture A --capture B ...: the same 16 tokens + 2 decode steps
 * captured in one call (A), in chunks of 5 (B) and token by token (C).
 * The oracle's schedules all pass and are byte-identical to each other at
 * every position (difference 0 over every row). The largest element of one
 * chunk's L1.attn output doubled (a chunk-boundary bug of schedule B) fails that
 * stage of B only, and the difference B vs A shows at L1.attn only. Captures
 * of other tokens are refused (exit 2). */
static void schedules_side_by_side(void **state)
{
    (void)state;
    char a[400], b[400], c[400], js[400], err[1024];
    snprintf(a, sizeof a, "%s/sch-one", root);
    snprintf(b, sizeof b, "%s/sch-c5", root);
    snprintf(c, sizeof c, "%s/sch-c1", root);
    snprintf(js, sizeof js, "%s/sch.json", root);
    const char *chunk[3] = {NULL, "5", "1"}, *dirs[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (chunk[i])
            assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "16",
                                              "--decode", "2", "--chunk", chunk[i], "--out", dirs[i], "-q", NULL),
                             0);
        else
            assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "16",
                                              "--decode", "2", "--out", dirs[i], "-q", NULL),
                             0);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", tiny, "--capture", a, "--capture", b,
                                      "--capture", c, "--json", js, "-q", NULL),
                     0);
    json_error_t je;
    json_t *root_j = json_load_file(js, 0, &je), *d;
    assert_non_null(root_j);
    assert_int_equal(json_array_size(json_object_get(root_j, "schedules")), 3);
    size_t i;
    long compared = 0;
    json_array_foreach(json_object_get(root_j, "differences"), i, d) {
        if (json_integer_value(json_object_get(d, "rows")) == 0) continue;
        compared++;
        assert_true(json_real_value(json_object_get(d, "nrms")) == 0);
    }
    assert_true(compared >= 2 * (2 + 8 * M->cfg.n_layers)); /* every judged stage, B and C */
    json_decref(root_j);
    /* schedule B's second chunk (positions 5..9) gets a wrong L1.attn output */
    cap_edit e = {.scale = "L1.attn.out", .scale_by = 2};
    const char *bad = variant(b, "sch-c5-bad", 1, &e);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", tiny, "--capture", a, "--capture", bad,
                                      "--capture", c, "--json", js, "--no-model", "-q", NULL),
                     1);
    root_j = json_load_file(js, 0, &je);
    assert_non_null(root_j);
    json_t *s;
    json_array_foreach(json_object_get(root_j, "schedules"), i, s) {
        json_t *st, *stages = json_object_get(json_object_get(s, "replay"), "stages");
        size_t k;
        json_array_foreach(stages, k, st) {
            const char *key = json_string_value(json_object_get(st, "stage"));
            const char *v = json_string_value(json_object_get(st, "verdict"));
            const int target = i == 1 && !strcmp(key, "L1.attn");
            if (strcmp(v, target ? "FAIL" : "pass")) fprintf(stderr, "schedule %zu %s: %s\n", i, key, v);
            assert_string_equal(v, target ? "FAIL" : "pass");
        }
    }
    json_array_foreach(json_object_get(root_j, "differences"), i, d) {
        if (json_integer_value(json_object_get(d, "rows")) == 0) continue;
        const int target = json_integer_value(json_object_get(d, "schedule")) == 1 &&
                           !strcmp(json_string_value(json_object_get(d, "stage")), "L1.attn");
        const double x = json_real_value(json_object_get(d, "nrms"));
        assert_true(target ? x > 1e-4 : x == 0);
    }
    json_decref(root_j);
    /* other tokens at one position: not schedules of the same run */
    dsv4q_capture *cap;
    assert_int_equal(dsv4q_capture_open(&cap, c, &M->cfg, csha, wsha, err, sizeof err), 0);
    char ids[32];
    snprintf(ids, sizeof ids, "[%d]", (cap->calls[3].ids[0] + 1) % M->cfg.vocab_size);
    dsv4q_capture_close(cap);
    e = (cap_edit){.meta_key = "token_ids", .meta_val = ids};
    const char *other = variant(c, "sch-c1-other", 3, &e);
    assert_int_equal(
        dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", tiny, "--capture", a, "--capture", other, "-q", NULL),
        2);
}

/* Copy calls from..n-1 of capture dir src to root/name, each with metadata
 * prefix_token_ids = ids (a JSON list): the capture of a request whose
 * positions 0..from-1 were a prefix-cache hit. Returns the directory. */
static const char *prefix_variant(const char *src, const char *name, int from, int n, const char *ids)
{
    static char dir[400];
    char f[500], g[500];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(f, sizeof f, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    assert_int_equal(system(f), 0);
    for (int i = from; i < n; i++) {
        cap_edit e = {.meta_key = "prefix_token_ids", .meta_val = ids};
        snprintf(f, sizeof f, "%s/call-%04d.safetensors", src, i);
        snprintf(g, sizeof g, "%s/call-%04d.safetensors", dir, i);
        cap_rewrite(f, g, &e);
    }
    return dir;
}

/* A prefix-cache hit: the chunked capture (16 tokens in chunks of 5, 2
 * decode steps) without its first call, whose 5 tokens are declared as the
 * cached prefix (prefix_token_ids). Replay seeds every layer's caches with
 * the oracle's own prefill of the prefix (dsv4q_run_seed_prefix), so the
 * oracle's capture replays at exactly zero error on the 5 calls left. A
 * prefix of other ids (an engine whose cache holds another request's
 * blocks) fails attention, and only attention: the stateless stages still
 * see the captured inputs. */
static void prefix_hit_replays_at_zero_error(void **state)
{
    (void)state;
    char src[400], err[1024], ids[200], other[200];
    snprintf(src, sizeof src, "%s/cap-prefix-src", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "16", "--decode",
                                      "2", "--chunk", "5", "--out", src, "-q", NULL),
                     0);
    dsv4q_capture *cap;
    assert_int_equal(dsv4q_capture_open(&cap, src, &M->cfg, csha, wsha, err, sizeof err), 0);
    const int32_t *p = cap->calls[0].ids;
    snprintf(ids, sizeof ids, "[%d, %d, %d, %d, %d]", p[0], p[1], p[2], p[3], p[4]);
    snprintf(other, sizeof other, "[%d, %d, %d, %d, %d]", p[0], p[1], (p[2] + 1) % M->cfg.vocab_size, p[3], p[4]);
    dsv4q_capture_close(cap);
    char dir[400]; /* prefix_variant's buffer is reused below */
    snprintf(dir, sizeof dir, "%s", prefix_variant(src, "cap-prefix", 1, 6, ids));
    assert_int_equal(dsv4q_capture_open(&cap, dir, &M->cfg, csha, wsha, err, sizeof err), 0);
    assert_int_equal(cap->ncalls, 5);
    assert_int_equal(cap->prefix_len, 5);
    assert_int_equal(cap->prompt, 16);
    dsv4q_capture_close(cap);
    replays_at_zero_error(dir, 5);
    dsv4q_replay r;
    /* the one-call schedule and the prefix hit, side by side */
    char one[400];
    snprintf(one, sizeof one, "%s/cap-prefix-one", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "16", "--decode",
                                      "2", "--out", one, "-q", NULL),
                     0);
    assert_int_equal(
        dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", tiny, "--capture", one, "--capture", dir, "-q", NULL),
        0);
    /* another request's prefix in the cache */
    const char *bad = prefix_variant(src, "cap-prefix-other", 1, 6, other);
    assert_int_equal(replay(bad, &r, 0), 0);
    int attn_fail = 0;
    for (int i = 0; i < r.nst; i++) {
        const dsv4q_replay_stage *s = &r.st[i];
        if (optional_absent(s)) continue;
        if (s->stage == DSV4Q_STAGE_ATTN) attn_fail += s->verdict == DSV4Q_RV_FAIL;
        else assert_int_equal(s->verdict, DSV4Q_RV_PASS);
    }
    assert_true(attn_fail >= 1);
    dsv4q_replay_free(&r);
    /* refused: a call inside the prefix, calls that disagree on it, a bad id */
    open_fails(prefix_variant(src, "cap-prefix-inside", 0, 6, ids),
               "a call at position 0 is inside the cached prefix (prefix_token_ids: positions 0..4)");
    cap_edit e = {.meta_key = "prefix_token_ids", .meta_val = other};
    open_fails(variant(dir, "cap-prefix-mixed", 3, &e), "metadata prefix_token_ids differs from the first call's");
    e = (cap_edit){.meta_key = "prefix_token_ids", .meta_val = "[1, 99999]"};
    char one_file[500];
    snprintf(one_file, sizeof one_file, "%s/call-0001.safetensors", variant(dir, "cap-prefix-vocab", 1, &e));
    open_fails(one_file, "prefix_token_ids[1] must be an integer token id in [0, 1024)");
}

/* M3 at f32: an f32 capture's stages replayed at f32 are bit-identical to
 * the forward pass, so each stage's value (capture vs f64) equals its level
 * (f32 replay vs f64) exactly. --layers 1:3 records layers 1 and 2 only. */
static void f32_capture_replays_as_its_level(void **state)
{
    (void)state;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/cap-f32", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_capture, "capture", "--model", tiny, "--prompt-len", "18", "--decode",
                                      "2", "--width", "f32", "--layers", "1:3", "--out", dir, "-q", NULL),
                     0);
    dsv4q_replay r;
    assert_int_equal(replay(dir, &r, 0), 0);
    assert_int_equal(r.npass + r.nfail, 2 + 8 * 2);
    assert_int_equal(r.nabsent, 8 * (M->cfg.n_layers - 2));
    assert_int_equal(dsv4q_replay_find(&r, DSV4Q_STAGE_ATTN, 0)->verdict, DSV4Q_RV_ABSENT);
    for (int i = 0; i < r.nst; i++) {
        const dsv4q_replay_stage *s = &r.st[i];
        if (s->verdict == DSV4Q_RV_ABSENT) continue;
        assert_int_equal(s->verdict, DSV4Q_RV_PASS);
        for (int t = 0; t < s->nout; t++) {
            assert_true(s->val[t].se == s->lvl[t].se);
            assert_true(s->val[t].max_abs == s->lvl[t].max_abs);
            assert_true(s->ulp_val[t] == s->ulp_lvl[t]);
        }
    }
    dsv4q_replay_free(&r);
}

/* Change one element of one stage output by 1%: exactly that stage fails. */
static void one_edited_element_fails_one_stage(void **state)
{
    (void)state;
    struct { int call; const char *tensor; int stage, layer; } cases[] = {
        {1, "L2.ffn_norm.out", DSV4Q_STAGE_FFN_NORM, 2},
        {0, "L1.attn.out", DSV4Q_STAGE_ATTN, 1},            /* stateful: later calls unaffected */
        {2, "L3.hc_attn_pre.out.comb", DSV4Q_STAGE_HC_ATTN_PRE, 3},
        {0, "L4.moe.out", DSV4Q_STAGE_MOE, 4},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cap_edit e = {.scale = cases[k].tensor};
        const char *dir = variant(cap_model, "edited", cases[k].call, &e);
        dsv4q_replay r;
        assert_int_equal(replay(dir, &r, 0), 0);
        for (int i = 0; i < r.nst; i++) {
            const dsv4q_replay_stage *s = &r.st[i];
            if (optional_absent(s)) continue;
            int target = s->stage == cases[k].stage && s->layer == cases[k].layer;
            if (s->verdict != (target ? DSV4Q_RV_FAIL : DSV4Q_RV_PASS))
                fprintf(stderr, "edit %s: stage %d layer %d verdict %d\n", cases[k].tensor, s->stage, s->layer,
                        s->verdict);
            assert_int_equal(s->verdict, target ? DSV4Q_RV_FAIL : DSV4Q_RV_PASS);
        }
        assert_int_equal(r.nfail, 1);
        assert_int_equal(dsv4q_replay_status(&r), 1);
        dsv4q_replay_free(&r);
    }
}

/* Issue 15: a NaN drops out of every metric, so a stage with one must not
 * PASS: a non-finite captured input, or an output finite on one side only,
 * makes the stage "not checkable", the tensor and element named. */
static void non_finite_is_not_checkable(void **state)
{
    (void)state;
    struct { const char *tensor, *why; } cases[] = {
        {"L2.ffn_norm.in", "non-finite captured input L2.ffn_norm.in["},
        {"L2.ffn_norm.out", "non-finite captured output where the oracle is finite: L2.ffn_norm.out["},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cap_edit e = {.nan_at = cases[k].tensor};
        const char *dir = variant(cap_model, "nonfinite", 1, &e);
        dsv4q_replay r;
        assert_int_equal(replay(dir, &r, 0), 0);
        const dsv4q_replay_stage *s = dsv4q_replay_find(&r, DSV4Q_STAGE_FFN_NORM, 2);
        assert_non_null(s);
        if (s->verdict != DSV4Q_RV_UNCHECKABLE || !strstr(s->why, cases[k].why))
            fail_msg("%s: verdict %d, why: %s", cases[k].tensor, s->verdict, s->why);
        assert_true(strstr(s->why, "(call at position ") != NULL);
        assert_int_not_equal(dsv4q_replay_status(&r), 0);
        dsv4q_replay_free(&r);
    }
}

/* Issue 29: a stage whose reference is not finite judges nothing. One
 * element of L2.ffn_norm's captured input scaled by 1e200 is finite in
 * double but beyond FLT_MAX: the sum of squares overflows at both widths,
 * so the rms factor is 1/sqrt(inf) = 0; oracle-f64's outputs are all 0
 * (finite), oracle-f32's input element is inf and its output inf x 0 =
 * NaN there: one NaN, not shared, so the stage is not checkable (never
 * PASS, never FAIL), whatever the captured output. */
static void reference_not_finite_is_not_checkable(void **state)
{
    (void)state;
    cap_edit e = {.scale = "L2.ffn_norm.in", .scale_by = 1e200};
    const char *dir = variant(cap_model, "refnonfinite", 1, &e);
    dsv4q_replay r;
    assert_int_equal(replay(dir, &r, 0), 0);
    const dsv4q_replay_stage *s = dsv4q_replay_find(&r, DSV4Q_STAGE_FFN_NORM, 2);
    assert_non_null(s);
    const char *want = "reference not finite: L2.ffn_norm.out: oracle-f32 has 1 NaN, first at [";
    if (s->verdict != DSV4Q_RV_UNCHECKABLE || !s->ref_nonfinite || !strstr(s->why, want))
        fail_msg("verdict %d, ref_nonfinite %d, why: %s", s->verdict, s->ref_nonfinite, s->why);
    assert_non_null(strstr(s->why, "(call at position 18)"));
    assert_int_equal(s->calls_unchecked, 1);
    /* the other layers' ffn_norm are judged as usual */
    assert_int_equal(dsv4q_replay_find(&r, DSV4Q_STAGE_FFN_NORM, 1)->verdict, DSV4Q_RV_PASS);
    assert_int_not_equal(dsv4q_replay_status(&r), 0);
    dsv4q_replay_free(&r);
    /* the front door: exit 1, the row and the JUnit testcase say why */
    char junit[400];
    snprintf(junit, sizeof junit, "%s/refnonfinite.xml", root);
    assert_int_equal(dsv4q_quiet_call(dsv4q_cmd_replay, "replay", "--model", tiny, "--capture", dir, "--no-model",
                                      "--junit", junit, "-q", NULL),
                     1);
    FILE *f = fopen(junit, "rb");
    assert_non_null(f);
    char xml[1 << 16];
    size_t n = fread(xml, 1, sizeof xml - 1, f);
    xml[n] = 0;
    fclose(f);
    const char *tc = strstr(xml, "name=\"L2.ffn_norm\"");
    assert_non_null(tc);
    assert_non_null(strstr(tc, "<skipped message=\"reference not finite: L2.ffn_norm.out: oracle-f32 has 1 NaN"));
}

static void malformed_captures_are_clear_errors(void **state)
{
    (void)state;
    cap_edit e;
    e = (cap_edit){.shrink = "L2.attn_norm.in"};
    open_fails(variant(cap_src, "shape", 1, &e), "L2.attn_norm.in has shape [0, 256], expected [1, 256]");
    e = (cap_edit){.shrink = "L0.hc_attn_pre.in"};
    open_fails(variant(cap_src, "shape0", 0, &e), "L0.hc_attn_pre.in has shape [17, 4, 256], expected [18, 4, 256]");
    e = (cap_edit){.rename_from = "L1.attn.in", .rename_to = "L1.atten.in"};
    open_fails(variant(cap_src, "unknown", 0, &e), "unknown stage 'atten'");
    e = (cap_edit){.rename_from = "L1.attn.in", .rename_to = "L9.attn.in"};
    open_fails(variant(cap_src, "layer", 0, &e), "L9.attn.in: layer 9 is outside the model's 5 layers");
    e = (cap_edit){.rename_from = "L1.attn.in", .rename_to = "L1.attn.input"};
    open_fails(variant(cap_src, "side", 0, &e), "'input' must be 'in' or 'out'");
    e = (cap_edit){.as_i32 = "L0.attn.in"};
    open_fails(variant(cap_src, "dtype", 0, &e), "L0.attn.in has dtype I32");
    e = (cap_edit){.drop_meta = "profile"};
    open_fails(variant(cap_src, "nometa", 2, &e), "lacks \"profile\"");
    e = (cap_edit){.drop_meta = "token_ids"};
    open_fails(variant(cap_src, "noids", 0, &e), "lacks \"token_ids\"");
    /* pins: one call file alone (every call of a directory must agree) */
    char one[500];
    e = (cap_edit){.meta_key = "checkpoint_sha256",
                   .meta_val = "0000000000000000000000000000000000000000000000000000000000000000"};
    snprintf(one, sizeof one, "%s/call-0000.safetensors", variant(cap_src, "pin", 0, &e));
    open_fails(one, "checkpoint_sha256 0000000000000000... does not match the model's config.json");
    e = (cap_edit){.meta_key = "weights_sha256",
                   .meta_val = "1111111111111111111111111111111111111111111111111111111111111111"};
    snprintf(one, sizeof one, "%s/call-0000.safetensors", variant(cap_src, "wpin", 0, &e));
    open_fails(one, "weights_sha256 1111111111111111... does not match the model's weight files");
    e = (cap_edit){.meta_key = "checkpoint_sha256", .meta_val = "abc"};
    open_fails(variant(cap_src, "pinfmt", 1, &e), "checkpoint_sha256 must be 64 lowercase hex digits");
    e = (cap_edit){.meta_key = "checkpoint_sha256",
                   .meta_val = "0000000000000000000000000000000000000000000000000000000000000000"};
    open_fails(variant(cap_src, "pinmix", 1, &e), "metadata checkpoint_sha256 \"0000000000000000000000000000000000000"
                                                  "000000000000000000000000000\" differs");
    e = (cap_edit){.meta_key = "dsv4q_capture_version", .meta_val = "2"};
    open_fails(variant(cap_src, "ver", 0, &e), "dsv4q_capture_version \"2\" is not supported");
    e = (cap_edit){.meta_key = "profile", .meta_val = "fast"};
    open_fails(variant(cap_src, "prof", 0, &e), "profile \"fast\" is not a profile");
    e = (cap_edit){.meta_key = "position", .meta_val = "-3"};
    open_fails(variant(cap_src, "pos", 1, &e), "position \"-3\" must be a non-negative integer");
    e = (cap_edit){.meta_key = "position", .meta_val = "18"};
    open_fails(variant(cap_src, "dup", 2, &e), "both are the call at position 18");
    e = (cap_edit){.meta_key = "token_ids", .meta_val = "[1, 5000]"};
    open_fails(variant(cap_src, "vocab", 1, &e), "token_ids[1] must be an integer token id in [0, 1024)");
    e = (cap_edit){.meta_key = "engine", .meta_val = "other"};
    open_fails(variant(cap_src, "engine", 1, &e), "metadata engine \"other\" differs");
}

static void missing_inputs_are_not_checkable(void **state)
{
    (void)state;
    char err[1024];
    /* the moe input of layer 1 missing in the first decode call */
    cap_edit e = {.drop = "L1.moe.in"};
    const char *dir = variant(cap_src, "noinput", 1, &e);
    dsv4q_replay r;
    assert_int_equal(replay(dir, &r, 0), 0);
    const dsv4q_replay_stage *s = dsv4q_replay_find(&r, DSV4Q_STAGE_MOE, 1);
    assert_int_equal(s->verdict, DSV4Q_RV_PASS);
    assert_int_equal(s->calls_checked, 2);
    assert_int_equal(s->calls_unchecked, 1);
    assert_non_null(strstr(s->why, "missing input L1.moe.in"));
    assert_int_equal(r.nunc, 0);
    assert_int_equal(r.npartial, 1);   /* judged, but on 2 of its 3 calls */
    dsv4q_replay_free(&r);

    /* the attn input of layer 2 missing in the prefill: every later call of
     * that layer's attn is not checkable; other layers are unaffected */
    e = (cap_edit){.drop = "L2.attn.in"};
    dir = variant(cap_src, "noattn", 0, &e);
    assert_int_equal(replay(dir, &r, 0), 0);
    s = dsv4q_replay_find(&r, DSV4Q_STAGE_ATTN, 2);
    assert_int_equal(s->verdict, DSV4Q_RV_UNCHECKABLE);
    assert_int_equal(s->calls_checked, 0);
    assert_int_equal(s->calls_unchecked, 3);
    assert_non_null(strstr(s->why, "missing input L2.attn.in"));
    assert_int_equal(dsv4q_replay_find(&r, DSV4Q_STAGE_ATTN, 3)->calls_checked, 3);
    assert_int_equal(r.nunc, 1);
    assert_int_equal(r.nfail, 0);
    /* not checkable is reported, not a failure */
    assert_int_equal(dsv4q_replay_status(&r), 0);
    FILE *f = fopen("/dev/null", "w");
    dsv4q_replay_print(f, &r, &G, 0);
    fclose(f);
    dsv4q_replay_free(&r);

    /* the same in the middle call: the call after it is a "missing earlier call" */
    e = (cap_edit){.drop = "L2.attn.in"};
    dir = variant(cap_src, "noattn1", 1, &e);
    assert_int_equal(replay(dir, &r, 0), 0);
    s = dsv4q_replay_find(&r, DSV4Q_STAGE_ATTN, 2);
    assert_int_equal(s->calls_checked, 1);
    assert_int_equal(s->calls_unchecked, 2);
    assert_int_equal(r.npartial, 1);   /* L2.attn: judged on its first call only */
    dsv4q_replay_free(&r);

    /* a call missing altogether: later attn stages need it, the stateless
     * ones do not; the whole model needs every call */
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -f '%s/call-0001.safetensors'", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(replay(dir, &r, 1), 0);
    s = dsv4q_replay_find(&r, DSV4Q_STAGE_ATTN, 0);
    assert_int_equal(s->calls_checked, 1);
    assert_non_null(strstr(s->why, "missing earlier call: L0.attn.in at position 18"));
    assert_int_equal(dsv4q_replay_find(&r, DSV4Q_STAGE_MOE, 0)->calls_checked, 2);
    assert_int_equal(r.model.verdict, DSV4Q_RV_UNCHECKABLE);
    assert_non_null(strstr(r.model.why, "next expected position 18"));
    dsv4q_replay_free(&r);

    /* one call file alone (a FILE, not a DIR) replays */
    char one[500];
    snprintf(one, sizeof one, "%s/call-0000.safetensors", cap_src);
    assert_int_equal(replay(one, &r, 0), 0);
    assert_int_equal(r.nfail + r.nunc, 0);
    dsv4q_replay_free(&r);
    (void)err;
}

static void python_example_capture_replays(void **state)
{
    (void)state;
    if (system("python3 -c 'import numpy, safetensors' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "python3 with numpy + safetensors not available: skipped\n");
        skip();
    }
    char cmd[1500], out[400];
    snprintf(out, sizeof out, "%s/cap-python", root);
    snprintf(cmd, sizeof cmd,
             "python3 examples/write_capture.py --model '%s' --from '%s/call-0000.safetensors' "
             "--out '%s/call-0000.safetensors' >/dev/null",
             tiny, cap_src, out);
    assert_int_equal(system(cmd), 0);
    dsv4q_capture *cap;
    char err[1024];
    assert_int_equal(dsv4q_capture_open(&cap, out, &M->cfg, csha, wsha, err, sizeof err), 0);
    assert_string_equal(cap->engine, "example-python-numpy");
    assert_int_equal(cap->calls[0].st ? dsv4q_st_find(cap->calls[0].st, "L2.ffn_norm.out")->dtype : 0, DSV4Q_DT_F32);
    dsv4q_capture_close(cap);
    dsv4q_replay r;
    assert_int_equal(replay(out, &r, 1), 0);
    if (dsv4q_replay_status(&r)) dsv4q_replay_print(stderr, &r, &G, 0);
    assert_int_equal(r.nfail, 0);
    assert_int_equal(r.npass, 2 + 8 * M->cfg.n_layers);
    assert_int_equal(r.model.verdict, DSV4Q_RV_PASS);
    dsv4q_replay_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stage_names_round_trip),
        cmocka_unit_test(docs_table_is_current),
        cmocka_unit_test(oracle_capture_replays_at_zero_error),
        cmocka_unit_test(chunked_capture_replays_at_zero_error),
        cmocka_unit_test(schedules_side_by_side),
        cmocka_unit_test(prefix_hit_replays_at_zero_error),
        cmocka_unit_test(f32_capture_replays_as_its_level),
        cmocka_unit_test(one_edited_element_fails_one_stage),
        cmocka_unit_test(non_finite_is_not_checkable),
        cmocka_unit_test(reference_not_finite_is_not_checkable),
        cmocka_unit_test(malformed_captures_are_clear_errors),
        cmocka_unit_test(missing_inputs_are_not_checkable),
        cmocka_unit_test(python_example_capture_replays),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
