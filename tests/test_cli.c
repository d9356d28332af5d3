/*
 * test_cli.c - the measuring commands end to end, and their bad inputs.
 *
 *  - a checkpoint written with Hugging Face tensor names loads and gives
 *    bit-identical logits to the reference-named one;
 *  - `run` writes logits that the safetensors reader reads back, f64 and
 *    f32 of the exact profile agree to fp32 rounding but are not equal;
 *  - `sensitivity` on tiny: the exact-profile floor is at fp32 level
 *    (1e-9 < NRMS < 1e-4), a receipt row lands, --json is valid JSON;
 *  - bad input: a missing model dir, malformed tokens.json, a token id >=
 *    vocab, an unknown profile or boundary each exit 2 and write nothing.
 */
#include "tests/testutil.h"
#include "tests/tinyfix.h"
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static char root[256], tiny[300];

static int setup(void **state)
{
    (void)state;
    return tinyfix_make(root, sizeof root, tiny, sizeof tiny, "cli", "tiny", 3);
}

static int teardown(void **state)
{
    (void)state;
    return tinyfix_remove(root);
}

#define call tinyfix_call

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void prefill(const char *dir, double *logits)
{
    char err[512];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = (i * 37 + 5) % m->cfg.vocab_size;
    uint64_t bs;
    dsv4q_profile_set("source", &bs);
    dsv4q_run *r;
    assert_int_equal(dsv4q_run_open(&r, m, 64, bs, 24, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(dsv4q_run_feed(r, ids, 24, logits, err, sizeof err), 0);
    dsv4q_run_close(r);
    dsv4q_model_close(m);
}

static void hf_names_load_identically(void **state)
{
    (void)state;
    char err[512], src[400], dst[400], hfdir[400], cmd[900];
    snprintf(src, sizeof src, "%s/model.safetensors", tiny);
    snprintf(hfdir, sizeof hfdir, "%s/hf", root);
    mkdir(hfdir, 0755);
    snprintf(dst, sizeof dst, "%s/model.safetensors", hfdir);
    snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/'", tiny, hfdir);
    assert_int_equal(system(cmd), 0);
    dsv4q_st *st;
    assert_int_equal(dsv4q_st_open(&st, src, err, sizeof err), 0);
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    long renamed = 0;
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        char hf[300];
        const char *name = t->name;
        if (strncmp(name, "mtp.", 4) && dsv4q_hf_name(name, hf, sizeof hf) == 0) { name = hf; renamed++; }
        assert_int_equal(dsv4q_st_writer_add(w, name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, err, sizeof err), 0);
    }
    assert_true(renamed > 100);
    assert_int_equal(dsv4q_st_writer_write(w, dst, err, sizeof err), 0);
    dsv4q_st_close(st);
    assert_int_equal(dsv4q_st_open(&st, dst, err, sizeof err), 0);
    assert_non_null(dsv4q_st_find(st, "model.layers.1.self_attn.compressor.indexer.q_b_proj.weight"));
    assert_non_null(dsv4q_st_find(st, "model.layers.0.self_attn.q_a_proj.weight_scale_inv"));
    assert_null(dsv4q_st_find(st, "layers.0.attn.wq_a.weight"));
    dsv4q_st_close(st);
    double a[1024], b[1024];
    prefill(tiny, a);
    prefill(hfdir, b);
    assert_memory_equal(a, b, sizeof(double) * 1024);
}

static void run_writes_logits(void **state)
{
    (void)state;
    char out64[400], out32[400], err[512];
    snprintf(out64, sizeof out64, "%s/r64.safetensors", root);
    snprintf(out32, sizeof out32, "%s/r32.safetensors", root);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--model", tiny, "--prompt-len", "20", "--decode", "3", "--width",
                          "f64", "--profile", "exact", "--out", out64, "--quiet", "--taps", NULL), 0);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--model", tiny, "--prompt-len", "20", "--decode", "3", "--width",
                          "f32", "--profile", "exact", "--out", out32, "--quiet", NULL), 0);
    dsv4q_st *a, *b;
    assert_int_equal(dsv4q_st_open(&a, out64, err, sizeof err), 0);
    assert_int_equal(dsv4q_st_open(&b, out32, err, sizeof err), 0);
    const dsv4q_st_tensor *da = dsv4q_st_find(a, "logits_decode"), *db = dsv4q_st_find(b, "logits_decode");
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(da->dtype, DSV4Q_DT_F64);
    assert_int_equal(db->dtype, DSV4Q_DT_F32);
    assert_int_equal(da->shape[0], 3);
    assert_int_equal(da->shape[1], 1024);
    assert_non_null(dsv4q_st_find(a, "L1.idx_topk"));
    double num = 0, den = 0;
    int equal = 1;
    for (long i = 0; i < da->numel; i++) {
        double x = ((const double *)da->data)[i], y = ((const float *)db->data)[i];
        num += (x - y) * (x - y);
        den += x * x;
        equal &= x == y;
    }
    assert_false(equal);
    assert_true(sqrt(num / den) < 1e-4);
    dsv4q_st_close(a);
    dsv4q_st_close(b);
}

static void sensitivity_floor_and_receipt(void **state)
{
    (void)state;
    char json[400], db[400];
    snprintf(json, sizeof json, "%s/sens.json", root);
    snprintf(db, sizeof db, "%s/r.db", root);
    assert_int_equal(call(dsv4q_cmd_sensitivity, "sensitivity", "--model", tiny, "--prompt-len", "24", "--decode", "2",
                          "--profile", "exact", "--json", json, "--db", db, "--quiet", NULL), 0);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    assert_non_null(j);
    double nrms = json_real_value(json_object_get(j, "logit_nrms"));
    printf("tiny exact-profile floor: logit NRMS %.3e\n", nrms);
    assert_true(nrms > 1e-9 && nrms < 1e-4);
    assert_int_equal(json_integer_value(json_object_get(j, "rows")), 3);
    assert_int_equal(json_array_size(json_object_get(j, "layers")), 5);
    json_decref(j);
    struct stat sb;
    assert_int_equal(stat(db, &sb), 0);
}

static json_t *find_toggle(json_t *arr, const char *name)
{
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *e = json_array_get(arr, i);
        if (!strcmp(json_string_value(json_object_get(e, "boundary")), name)) return e;
    }
    return NULL;
}

static void ablate_table_json_svg(void **state)
{
    (void)state;
    char json[400], svg[400], db[400];
    snprintf(json, sizeof json, "%s/abl.json", root);
    snprintf(svg, sizeof svg, "%s/abl.svg", root);
    snprintf(db, sizeof db, "%s/r.db", root);
    assert_int_equal(call(dsv4q_cmd_ablate, "ablate", "--model", tiny, "--prompt-len", "24", "--decode", "2", "--base",
                          "exact", "--json", json, "--svg", svg, "--db", db, "--quiet", NULL), 0);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    assert_non_null(j);
    json_t *arr = json_object_get(j, "toggles");
    /* V4's 18 boundaries one by one (not V4.1's ckv_fp4: no effect on a V4
     * model) and the three families */
    assert_int_equal(json_array_size(arr), 18 + 3);
    /* in `exact` the Hadamard is not applied, so its BF16 rounding alone
     * cannot change anything; switching the KV FP8 simulation on must */
    json_t *h = find_toggle(arr, "hadamard_bf16"), *kv = find_toggle(arr, "kv_fp8");
    assert_non_null(h);
    assert_non_null(kv);
    assert_string_equal(json_string_value(json_object_get(kv, "toggled_to")), "on");
    assert_true(json_real_value(json_object_get(h, "logit_nrms")) == 0);
    assert_true(json_real_value(json_object_get(kv, "logit_nrms")) > 1e-6);
    /* sorted by effect, largest first */
    double prev = INFINITY;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        double v = json_real_value(json_object_get(json_array_get(arr, i), "logit_nrms"));
        assert_true(v <= prev);
        prev = v;
    }
    json_decref(j);
    FILE *f = fopen(svg, "r");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    assert_true(strncmp(buf, "<svg ", 5) == 0);
    assert_non_null(strstr(buf, "</svg>\n"));
    int rects = 0;
    for (char *p = buf; (p = strstr(p, "<rect ")); p++) rects++;
    assert_int_equal(rects, 18 + 3);
}

/* --chunk on run: the CLI's chunked prefill writes the same bytes as the
 * one call (the oracle's identity is tests/test_chunked.c; this is the
 * command's loop over chunks and its last call's logits), and the chunks
 * it cannot honour are refused before any output. */
static void run_chunk_same_bytes_and_refusals(void **state)
{
    (void)state;
    char one[400], chunked[400], never[400], err[512];
    snprintf(one, sizeof one, "%s/one.safetensors", root);
    snprintf(chunked, sizeof chunked, "%s/chunked.safetensors", root);
    snprintf(never, sizeof never, "%s/never-chunk.safetensors", root);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--model", tiny, "--prompt-len", "20", "--decode", "2", "--width",
                          "f64", "--out", one, "--quiet", NULL),
                     0);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--model", tiny, "--prompt-len", "20", "--decode", "2", "--width",
                          "f64", "--chunk", "7", "--out", chunked, "--quiet", NULL),
                     0);
    dsv4q_st *a, *b;
    assert_int_equal(dsv4q_st_open(&a, one, err, sizeof err), 0);
    assert_int_equal(dsv4q_st_open(&b, chunked, err, sizeof err), 0);
    const char *names[] = {"logits_prefill", "logits_decode"};
    for (int i = 0; i < 2; i++) {
        const dsv4q_st_tensor *ta = dsv4q_st_find(a, names[i]), *tb = dsv4q_st_find(b, names[i]);
        assert_non_null(ta);
        assert_non_null(tb);
        assert_int_equal(ta->numel, tb->numel);
        assert_memory_equal(ta->data, tb->data, sizeof(double) * (size_t)ta->numel);
    }
    dsv4q_st_close(a);
    dsv4q_st_close(b);
    struct stat sb;
    /* --taps keeps the one call's taps: a chunked prefill is refused */
    assert_int_equal(call(dsv4q_cmd_run, "run", "--model", tiny, "--prompt-len", "20", "--width", "f64", "--chunk", "7",
                          "--taps", "--out", never, "--quiet", NULL),
                     2);
    /* a chunk below 1 is not a chunk */
    assert_int_equal(call(dsv4q_cmd_run, "run", "--model", tiny, "--prompt-len", "20", "--width", "f64", "--chunk", "0",
                          "--out", never, "--quiet", NULL),
                     2);
    assert_int_equal(call(dsv4q_cmd_sensitivity, "sensitivity", "--model", tiny, "--prompt-len", "20", "--chunk", "-3",
                          "--quiet", NULL),
                     2);
    assert_int_not_equal(stat(never, &sb), 0);
}

static void bad_inputs_exit_2_and_write_nothing(void **state)
{
    (void)state;
    char out[400], tok[400], missing[400];
    snprintf(out, sizeof out, "%s/never.safetensors", root);
    snprintf(tok, sizeof tok, "%s/tokens.json", root);
    snprintf(missing, sizeof missing, "%s/no-such-model", root);
    struct stat sb;
    /* a command parses by the command table even when called directly: run needs --width */
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", missing, "--out", out, "--quiet", NULL), 2);
    write_file(tok, "{\"prompt\": [1, 2, ");
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--tokens", tok, "--out", out, "--quiet", NULL), 2);
    write_file(tok, "{\"prompt\": [1, 2, 1024], \"teacher\": [3]}");
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--tokens", tok, "--out", out, "--quiet", NULL), 2);
    write_file(tok, "{\"prompt\": [1, 2, 3], \"teacher\": [-1]}");
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--tokens", tok, "--out", out, "--quiet", NULL), 2);
    write_file(tok, "{\"prompt\": []}");
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--tokens", tok, "--out", out, "--quiet", NULL), 2);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--profile", "fast", "--out", out, NULL), 2);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--boundary", "kv_fp9=on", "--out", out, NULL), 2);
    assert_int_equal(call(dsv4q_cmd_sensitivity, "sensitivity", "--model", missing, NULL), 2);
    /* an output that cannot be written is refused before any work, and no
     * receipt is stored for it */
    char db[400], badjson[400];
    snprintf(db, sizeof db, "%s/bad.db", root);
    snprintf(badjson, sizeof badjson, "%s/no-such-dir/x.json", root);
    assert_int_equal(call(dsv4q_cmd_sensitivity, "sensitivity", "--model", tiny, "--prompt-len", "4", "--decode", "0",
                          "--json", badjson, "--db", db, "--quiet", NULL), 2);
    assert_int_not_equal(stat(db, &sb), 0);
    /* --tokens and --prompt-len exclude each other; a missing tokens file is named */
    write_file(tok, "{\"prompt\": [1, 2, 3], \"teacher\": [4]}");
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--tokens", tok, "--prompt-len", "9", "--out", out,
                          "--quiet", NULL), 2);
    assert_int_equal(call(dsv4q_cmd_run, "run", "--width", "f64",
                          "--model", tiny, "--tokens", tok, "--decode", "5", "--out", out,
                          "--quiet", NULL), 2);
    assert_int_not_equal(stat(out, &sb), 0);
    assert_int_not_equal(stat(out, &sb), 0);
    /* the boundary error lists the valid names */
    uint64_t bs = 0;
    char err[1024];
    assert_int_equal(dsv4q_boundary_apply(&bs, "kv_fp9=on", err, sizeof err), -1);
    assert_non_null(strstr(err, "kv_fp8"));
    assert_non_null(strstr(err, "idx_score_bf16"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hf_names_load_identically),
        cmocka_unit_test(run_writes_logits),
        cmocka_unit_test(run_chunk_same_bytes_and_refusals),
        cmocka_unit_test(sensitivity_floor_and_receipt),
        cmocka_unit_test(ablate_table_json_svg),
        cmocka_unit_test(bad_inputs_exit_2_and_write_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
