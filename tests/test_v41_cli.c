/*
 * test_v41_cli.c - the commands on a DeepSeek V4.1 checkpoint
 * (tests/data/pub_v41_tiny, DeepSeek's own reference case).
 *
 *  - `run --profile qat --width f64` with the case's tokens.json writes the
 *    logits the reference wrote (golden_fp64: prefill and the 8 decode
 *    rows, NRMS < 1e-13), end to end through the CLI;
 *  - an image token (image_token_id of a copy of the case whose config
 *    moves it inside the vocabulary) is refused with exit 2 and no output:
 *    images are out of scope, not silently embedded as text;
 *  - `capture` of the case's protocol (f64, qat) writes the V4.1 stage
 *    table's tensors: the prefill call's (X, pre) state after every layer
 *    (L{i}.hc_ffn_post.out, L{i}.hc_ffn_pre.out.pre), the Engram outputs
 *    and model.head.out equal the reference's block_out / block_premix /
 *    engram_out / logits_prefill (NRMS < 1e-13); the chain is complete (S2):
 *    each stage's inputs are bit for bit the outputs of the stage before
 *    it, L0's incoming pre-mix is the identity [1, 0, 0, 0], the head's
 *    pre-mix is the last block's;
 *  - `sensitivity --json` on the case has one row per layer with the
 *    ratio and role the case README's layer table gives (k kv source, i
 *    index source, c candidate source, m masked), an engram_out floor
 *    exactly on the Engram layers 2 and 5, ckv exactly on the kv sources,
 *    and finite floors; `synth --config tiny-v41` runs end to end;
 *  - refused with exit 2 and nothing written: a checkpoint whose tensors
 *    give a layer a role its config does not (an Engram table with
 *    engram_layer_ids empty), a --boundary of the other model family
 *    (qnorm_bf16 on V4.1, ckv_fp4 on V4), a capture whose tokens hold an
 *    image token (checked before the first call is written), a V4.1
 *    capture replayed against a V4 model, more routed experts than the
 *    gate supports;
 *  - `stages` answers from each family's table; replay, margins,
 *    qualify --whole-model and capture --backend run on V4.1
 *    (tests/test_v41_replay.c, test_v41_margins.c, test_v41_whole_model.c).
 */
#include "tests/testutil.h"
#include "tests/tinyfix.h"
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "io/safetensors.h"

#define CASE "tests/data/pub_v41_tiny"

static char root[128];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dsv4q-test-v41cli-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return tinyfix_remove(root);
}

#define call tinyfix_call

static double nrms(const dsv4q_st_tensor *a, const dsv4q_st_tensor *b)
{
    assert_int_equal(a->numel, b->numel);
    double num = 0, den = 0;
    for (long i = 0; i < a->numel; i++) {
        const double x = dsv4q_decode_elem(a->dtype, a->data, (size_t)i);
        const double y = dsv4q_decode_elem(b->dtype, b->data, (size_t)i);
        num += (x - y) * (x - y);
        den += y * y;
    }
    return sqrt(num / den);
}

static void run_reproduces_reference_logits(void **state)
{
    (void)state;
    char out[300], err[512];
    snprintf(out, sizeof out, "%s/logits.safetensors", root);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64", "--profile", "qat", "--model", CASE, "--tokens",
                          CASE "/tokens.json", "--out", out, "--quiet", NULL),
                     0);
    dsv4q_st *got, *want;
    assert_int_equal(dsv4q_st_open(&got, out, err, sizeof err), 0);
    assert_int_equal(dsv4q_st_open(&want, CASE "/golden_fp64.safetensors", err, sizeof err), 0);
    const char *names[] = {"logits_prefill", "logits_decode"};
    for (int i = 0; i < 2; i++) {
        const dsv4q_st_tensor *a = dsv4q_st_find(got, names[i]), *b = dsv4q_st_find(want, names[i]);
        assert_non_null(a);
        assert_non_null(b);
        const double e = nrms(a, b);
        printf("dsv4q run (f64, qat) %s vs golden_fp64: NRMS %.3e\n", names[i], e);
        assert_true(e < 1e-13);
    }
    dsv4q_st_close(got);
    dsv4q_st_close(want);
}

/* A copy of the case whose config puts image_token_id at 7 (the weights
 * and token map linked, not copied). */
static void copy_case_with_image_token(const char *dir)
{
    assert_int_equal(mkdir(dir, 0755), 0);
    const char *files[] = {"model.safetensors", "engram_token_map.json"};
    char src[600], dst[600], cwd[400];
    assert_non_null(getcwd(cwd, sizeof cwd));
    for (int i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/" CASE "/%s", cwd, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        assert_int_equal(symlink(src, dst), 0);
    }
    json_error_t je;
    json_t *cfg = json_load_file(CASE "/config.json", 0, &je);
    assert_non_null(cfg);
    json_object_set_new(cfg, "image_token_id", json_integer(7));
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    assert_int_equal(json_dump_file(cfg, dst, 0), 0);
    json_decref(cfg);
}

static void image_token_refused(void **state)
{
    (void)state;
    char dir[300], tok[300], out[300];
    snprintf(dir, sizeof dir, "%s/img", root);
    snprintf(tok, sizeof tok, "%s/tokens.json", root);
    snprintf(out, sizeof out, "%s/never.safetensors", root);
    copy_case_with_image_token(dir);
    FILE *f = fopen(tok, "w");
    assert_non_null(f);
    fputs("{\"prompt\": [0, 5, 9, 11], \"teacher\": [3]}", f);
    fclose(f);
    /* without the image token the copy runs */
    assert_int_equal(
        call(dsv4q_cmd_run, "run", "--width", "f32", "--model", dir, "--tokens", tok, "--out", out, "--quiet", NULL),
        0);
    assert_int_equal(unlink(out), 0);
    f = fopen(tok, "w");
    assert_non_null(f);
    fputs("{\"prompt\": [0, 5, 7, 11], \"teacher\": [3]}", f);
    fclose(f);
    assert_int_equal(
        call(dsv4q_cmd_run, "run", "--width", "f32", "--model", dir, "--tokens", tok, "--out", out, "--quiet", NULL),
        2);
    struct stat sb;
    assert_int_not_equal(stat(out, &sb), 0);
}

/* The tensor `name` of st as doubles (numel into *n). */
static double *get(dsv4q_st *st, const char *name, long *n)
{
    const dsv4q_st_tensor *t = dsv4q_st_find(st, name);
    if (!t) fail_msg("capture lacks %s", name);
    double *v = malloc(sizeof(double) * (size_t)t->numel);
    for (long i = 0; i < t->numel; i++) v[i] = dsv4q_decode_elem(t->dtype, t->data, (size_t)i);
    *n = t->numel;
    return v;
}

/* capture tensor a equals golden tensor b of the reference to NRMS < 1e-13;
 * or, with g NULL, capture tensors a and b are equal bit for bit. */
static void same(dsv4q_st *c, const char *a, dsv4q_st *g, const char *b)
{
    long na, nb;
    double *x = get(c, a, &na), *y = get(g ? g : c, b, &nb);
    assert_int_equal(na, nb);
    double num = 0, den = 0;
    for (long i = 0; i < na; i++) {
        num += (x[i] - y[i]) * (x[i] - y[i]);
        den += y[i] * y[i];
        if (!g && x[i] != y[i]) fail_msg("%s[%ld] = %.17g differs from %s[%ld] = %.17g", a, i, x[i], b, i, y[i]);
    }
    if (g && !(sqrt(num / den) < 1e-13)) fail_msg("%s vs the reference's %s: NRMS %.3e", a, b, sqrt(num / den));
    free(x);
    free(y);
}

static void capture_is_the_reference_state(void **state)
{
    (void)state;
    char cap[300], call0[400], a[96], b[96], err[512];
    snprintf(cap, sizeof cap, "%s/cap41", root);
    assert_int_equal(call(dsv4q_cmd_capture, "capture", "--model", CASE, "--tokens", CASE "/tokens.json", "--width",
                          "f64", "--profile", "qat", "--out", cap, "--quiet", NULL),
                     0);
    snprintf(call0, sizeof call0, "%s/call-0000.safetensors", cap);
    dsv4q_st *c, *g;
    assert_int_equal(dsv4q_st_open(&c, call0, err, sizeof err), 0);
    assert_int_equal(dsv4q_st_open(&g, CASE "/golden_fp64.safetensors", err, sizeof err), 0);
    const int engram[8] = {0, 0, 1, 0, 0, 1, 0, 0}; /* the case README: Engram before blocks 2 and 5 */
    long n;
    double *pre0 = get(c, "L0.hc_attn_pre.in.pre", &n);
    for (long i = 0; i < n; i++) assert_true(pre0[i] == (i % 4 == 0 ? 1.0 : 0.0));
    free(pre0);
    for (int L = 0; L < 8; L++) {
        snprintf(a, sizeof a, "L%d.hc_ffn_post.out", L);
        snprintf(b, sizeof b, "block_out_L%d", L);
        same(c, a, g, b);
        snprintf(a, sizeof a, "L%d.hc_ffn_pre.out.pre", L);
        snprintf(b, sizeof b, "block_premix_L%d", L);
        same(c, a, g, b);
        /* the chain: each input is the output before it */
        char in[96], from[96];
        snprintf(in, sizeof in, engram[L] ? "L%d.engram.in" : "L%d.hc_attn_pre.in.X", L);
        if (L == 0) snprintf(from, sizeof from, "model.embed.out");
        else snprintf(from, sizeof from, "L%d.hc_ffn_post.out", L - 1);
        same(c, in, NULL, from);
        if (engram[L]) {
            snprintf(a, sizeof a, "L%d.engram.out", L);
            snprintf(b, sizeof b, "engram_out_L%d", L);
            same(c, a, g, b);
            snprintf(in, sizeof in, "L%d.hc_attn_pre.in.X", L);
            same(c, in, NULL, a);
        }
        if (L > 0) {
            snprintf(in, sizeof in, "L%d.hc_attn_pre.in.pre", L);
            snprintf(from, sizeof from, "L%d.hc_ffn_pre.out.pre", L - 1);
            same(c, in, NULL, from);
        }
        snprintf(in, sizeof in, "L%d.hc_ffn_pre.in.pre", L);
        snprintf(from, sizeof from, "L%d.hc_attn_pre.out.pre", L);
        same(c, in, NULL, from);
    }
    assert_null(dsv4q_st_find(c, "L1.engram.in")); /* no Engram before block 1 */
    same(c, "model.head.out", g, "logits_prefill");
    long np, nh;
    double *last = get(c, "L7.hc_ffn_pre.out.pre", &np), *hp = get(c, "model.head.in.pre", &nh);
    assert_int_equal(nh, 4);
    for (int j = 0; j < 4; j++) assert_true(hp[j] == last[np - 4 + j]);
    free(last);
    free(hp);
    dsv4q_st_close(c);
    dsv4q_st_close(g);
}

static void sensitivity_rows_follow_the_roles(void **state)
{
    (void)state;
    char js[300], db[300], err[200];
    snprintf(js, sizeof js, "%s/sens.json", root);
    snprintf(db, sizeof db, "%s/sens.db", root);
    assert_int_equal(call(dsv4q_cmd_sensitivity, "sensitivity", "--model", CASE, "--prompt-len", "24", "--decode", "2",
                          "--profile", "exact", "--json", js, "--db", db, "--quiet", NULL),
                     0);
    json_error_t je;
    json_t *root_j = json_load_file(js, 0, &je);
    assert_non_null(root_j);
    json_t *rows = json_object_get(root_j, "layers");
    assert_int_equal(json_array_size(rows), 8);
    /* the case README's layer table */
    const int ratio[8] = {0, 2, 2, 2, 1, 1, 1, 1};
    const char *role[8] = {"", "ki", "", "i", "kic", "", "im", ""};
    for (int L = 0; L < 8; L++) {
        json_t *r = json_array_get(rows, (size_t)L);
        assert_int_equal(json_integer_value(json_object_get(r, "ratio")), ratio[L]);
        assert_string_equal(json_string_value(json_object_get(r, "role")), role[L]);
        assert_int_equal(json_object_get(r, "engram_out") != NULL, L == 2 || L == 5);
        assert_int_equal(json_object_get(r, "ckv") != NULL, L == 1 || L == 4);
        /* exact profile: fp32 rounding everywhere, so a floor above 0 and far below 1 */
        const double b = json_real_value(json_object_get(r, "block_out"));
        if (!(b > 0 && b < 1e-2)) fail_msg("layer %d: block_out floor %g", L, b);
    }
    json_decref(root_j);
    /* a synthesized V4.1 checkpoint runs end to end */
    char dir[300], out[300];
    snprintf(dir, sizeof dir, "%s/tiny-v41", root);
    snprintf(out, sizeof out, "%s/tv41.safetensors", root);
    assert_int_equal(call(dsv4q_cmd_synth, "synth", "--config", "tiny-v41", "--out", dir, NULL), 0);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f32", "--model", dir, "--prompt-len", "12", "--decode", "2",
                          "--out", out, "--quiet", NULL),
                     0);
    dsv4q_st *st;
    assert_int_equal(dsv4q_st_open(&st, out, err, sizeof err), 0);
    const dsv4q_st_tensor *t = dsv4q_st_find(st, "logits_decode");
    assert_non_null(t);
    for (long i = 0; i < t->numel; i++) assert_true(isfinite(dsv4q_decode_elem(t->dtype, t->data, (size_t)i)));
    dsv4q_st_close(st);
}

/* dir: a copy of the case with config.json edited by edit(cfg) (weights and map linked). */
static void copy_case(const char *dir, void (*edit)(json_t *))
{
    assert_int_equal(mkdir(dir, 0755), 0);
    const char *files[] = {"model.safetensors", "engram_token_map.json"};
    char src[600], dst[600], cwd[400];
    assert_non_null(getcwd(cwd, sizeof cwd));
    for (int i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/" CASE "/%s", cwd, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        assert_int_equal(symlink(src, dst), 0);
    }
    json_error_t je;
    json_t *cfg = json_load_file(CASE "/config.json", 0, &je);
    assert_non_null(cfg);
    edit(cfg);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    assert_int_equal(json_dump_file(cfg, dst, 0), 0);
    json_decref(cfg);
}

static void no_engram(json_t *c)
{
    json_object_set_new(c, "engram_layer_ids", json_array());
    json_object_set_new(c, "engram_num_embeddings", json_array());
}

static void image_at_7(json_t *c) { json_object_set_new(c, "image_token_id", json_integer(7)); }

static void many_experts(json_t *c) { json_object_set_new(c, "n_routed_experts", json_integer(1100)); }

static void refusals(void **state)
{
    (void)state;
    char dir[300], out[300], tok[300], v4[300], cap[300], db[300];
    struct stat sb;
    snprintf(out, sizeof out, "%s/never.safetensors", root);
    snprintf(db, sizeof db, "%s/ref.db", root);
    /* the weights hold Engram tables on layers 2 and 5, the config lists none */
    snprintf(dir, sizeof dir, "%s/noeng", root);
    copy_case(dir, no_engram);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f32", "--model", dir, "--out", out, "--quiet", NULL), 2);
    snprintf(dir, sizeof dir, "%s/manyexp", root);
    copy_case(dir, many_experts);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f32", "--model", dir, "--out", out, "--quiet", NULL), 2);
    /* the other family's rounding points */
    snprintf(v4, sizeof v4, "%s/tiny-v4", root);
    assert_int_equal(call(dsv4q_cmd_synth, "synth", "--config", "tiny", "--out", v4, NULL), 0);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f32", "--model", CASE, "--boundary", "qnorm_bf16=on",
                          "--out", out, "--quiet", NULL),
                     2);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f32", "--model", v4, "--boundary", "ckv_fp4=on", "--out",
                          out, "--quiet", NULL),
                     2);
    assert_int_not_equal(stat(out, &sb), 0);
    /* an image token in the teacher ids: refused before capture writes call 0 */
    snprintf(dir, sizeof dir, "%s/img7", root);
    copy_case(dir, image_at_7);
    snprintf(tok, sizeof tok, "%s/img-tokens.json", root);
    FILE *f = fopen(tok, "w");
    assert_non_null(f);
    fputs("{\"prompt\": [0, 5, 9, 11], \"teacher\": [3, 4, 7]}", f);
    fclose(f);
    snprintf(cap, sizeof cap, "%s/cap-img", root);
    assert_int_equal(call(dsv4q_cmd_capture, "capture", "--model", dir, "--tokens", tok, "--out", cap, "--quiet", NULL),
                     2);
    assert_int_not_equal(stat(cap, &sb), 0);
    /* a V4.1 capture against a V4 model: the family is named, not a shape */
    snprintf(cap, sizeof cap, "%s/cap-v41", root);
    assert_int_equal(call(dsv4q_cmd_capture, "capture", "--model", CASE, "--prompt-len", "6", "--decode", "1", "--out",
                          cap, "--quiet", NULL),
                     0);
    assert_int_equal(call(dsv4q_cmd_replay, "replay", "--capture", cap, "--model", v4, "--db", db, "--quiet", NULL), 2);
    assert_int_not_equal(stat(db, &sb), 0);
}

static void stage_tables_per_family(void **state)
{
    (void)state;
    assert_int_equal(call(dsv4q_cmd_stages, "stages", "--model", CASE, "--names", NULL), 0);
    /* the V4 stage table still answers for V4 */
    assert_int_equal(call(dsv4q_cmd_stages, "stages", "--config", "tiny", "--names", NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_reproduces_reference_logits),
        cmocka_unit_test(image_token_refused),
        cmocka_unit_test(capture_is_the_reference_state),
        cmocka_unit_test(sensitivity_rows_follow_the_roles),
        cmocka_unit_test(refusals),
        cmocka_unit_test(stage_tables_per_family),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
