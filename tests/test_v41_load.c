/*
 * test_v41_load.c - DeepSeek V4.1 checkpoints bound by io/model_load.c.
 *
 * Owns the evidence that the reference case's checkpoint
 * (tests/data/pub_v41_tiny: DeepSeek's own V4.1 state dict) loads exactly:
 * every one of the tensors weights_table.txt lists is bound to the member
 * the forward pass reads (by a resolver written here from the reference's
 * module names, independently of the loader), with the FP8 / FP4 weights
 * marked blk 32; the per-layer roles equal the case README's table; the
 * Engram hash is built from engram_token_map.json with rows [304, 462].
 * Then the refusals: each hostile copy of the case (a missing Engram table,
 * a table of the wrong row count, a wrong bucket count in the config, a
 * token map missing / too long / of another compressed vocabulary / with an
 * id out of range / not covering the pad id, a V4 128-block scale grid,
 * F32 where the reference keeps BF16, an F32 scale that is not a power of
 * two) is refused with one line naming the file and the tensor or field,
 * nothing returned (run under `make asan` for the leaks); an FP8 wo_a with
 * a 32-block scale is dequantized to BF16 exactly; and `synth --config
 * tiny-v41` loads back with the roles its config says.
 */
#include "tests/testutil.h"
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/model.h"
#include "io/safetensors.h"
#include "io/synth.h"
#include "oracle/engram_hash.h"
#include "oracle/formats.h"
#include "tests/tinyfix.h"

#define PUB "tests/data/pub_v41_tiny"

static char g_root[128];

static int setup(void **state)
{
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/dsv4q-test-v41load-XXXXXX");
    return mkdtemp(g_root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return tinyfix_remove(g_root);
}

static dsv4q_model *open_ok(const char *dir)
{
    dsv4q_model *m = NULL;
    char err[2048];
    if (dsv4q_model_open(&m, dir, err, sizeof err)) fail_msg("%s: %s", dir, err);
    return m;
}

/* ---- every tensor of weights_table.txt bound ---------------------------- */

typedef struct {
    const dsv4q_weight *w; /* a linear / matrix: .weight = w->data, .scale = w->scale */
    const dsv4q_vec *v;    /* a vector: its decoded values */
    const void *table;     /* an Engram table / scale: the pointer bound */
    int is_scale;
} member;

/* The member the V4.1 forward pass reads for tensor `name` (model.py module
 * names -> oracle/model_types.h), or all-NULL for none. */
static member resolve(const dsv4q_model *m, const char *name)
{
    member r = {0};
    size_t n = strlen(name);
    r.is_scale = n > 6 && !strcmp(name + n - 6, ".scale");
    if (!strcmp(name, "embed.weight")) r.w = &m->embed;
    else if (!strcmp(name, "head.weight")) r.w = &m->head;
    else if (!strcmp(name, "norm.weight")) r.v = &m->norm;
    int li, off = 0;
    if (sscanf(name, "layers.%d.%n", &li, &off) != 1 || !off) return r;
    if (li < 0 || li >= m->cfg.n_layers) return r;
    const dsv4q_layer_w *L = &m->layers[li];
    char base[200];
    snprintf(base, sizeof base, "%s", name + off);
    char *dot = strrchr(base, '.');
    if (dot && (!strcmp(dot, ".weight") || !strcmp(dot, ".scale"))) *dot = '\0'; /* module path */
    static const struct {
        const char *mod;
        size_t woff;
    } W[] = {
        {"hc_attn_fn", offsetof(dsv4q_layer_w, hc_attn_fn)},
        {"hc_ffn_fn", offsetof(dsv4q_layer_w, hc_ffn_fn)},
        {"attn.wq_a", offsetof(dsv4q_layer_w, wq_a)},
        {"attn.wq_b", offsetof(dsv4q_layer_w, wq_b)},
        {"attn.wkv", offsetof(dsv4q_layer_w, wkv)},
        {"attn.wo_a", offsetof(dsv4q_layer_w, wo_a)},
        {"attn.wo_b", offsetof(dsv4q_layer_w, wo_b)},
        {"attn.compressor.wkv", offsetof(dsv4q_layer_w, cmp.wkv)},
        {"attn.compressor.wgate", offsetof(dsv4q_layer_w, cmp.wgate)},
        {"attn.indexer.wq_b", offsetof(dsv4q_layer_w, idx_wq_b)},
        {"attn.indexer.weights_proj", offsetof(dsv4q_layer_w, idx_weights_proj)},
        {"attn.indexer.wk", offsetof(dsv4q_layer_w, idx_wk)},
        {"ffn.gate", offsetof(dsv4q_layer_w, gate)},
        {"ffn.shared_experts.w1", offsetof(dsv4q_layer_w, shared.w1)},
        {"ffn.shared_experts.w2", offsetof(dsv4q_layer_w, shared.w2)},
        {"ffn.shared_experts.w3", offsetof(dsv4q_layer_w, shared.w3)},
        {"engram.wkv", offsetof(dsv4q_layer_w, engram.wkv)},
        {"engram.q_weight", offsetof(dsv4q_layer_w, engram.q_weight)},
        {"engram.k_weight", offsetof(dsv4q_layer_w, engram.k_weight)},
    };
    static const struct {
        const char *mod;
        size_t voff;
    } V[] = {
        {"hc_attn_base", offsetof(dsv4q_layer_w, hc_attn_base)},
        {"hc_ffn_base", offsetof(dsv4q_layer_w, hc_ffn_base)},
        {"hc_attn_scale", offsetof(dsv4q_layer_w, hc_attn_scale)},
        {"hc_ffn_scale", offsetof(dsv4q_layer_w, hc_ffn_scale)},
        {"attn_norm", offsetof(dsv4q_layer_w, attn_norm)},
        {"ffn_norm", offsetof(dsv4q_layer_w, ffn_norm)},
        {"attn.attn_sink", offsetof(dsv4q_layer_w, attn_sink)},
        {"attn.q_norm", offsetof(dsv4q_layer_w, q_norm)},
        {"attn.kv_norm", offsetof(dsv4q_layer_w, kv_norm)},
        {"attn.compressor.norm", offsetof(dsv4q_layer_w, cmp.norm)},
        {"attn.indexer.k_norm", offsetof(dsv4q_layer_w, idx_k_norm)},
        {"ffn.gate.bias", offsetof(dsv4q_layer_w, gate_bias)},
    };
    /* "ffn.gate.bias" has no .weight suffix: match the full suffix first */
    const char *full = name + off;
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++)
        if (!strcmp(full, V[i].mod) || !strcmp(base, V[i].mod)) {
            if (!strcmp(V[i].mod, "ffn.gate.bias") && strcmp(full, "ffn.gate.bias")) continue;
            r.v = (const dsv4q_vec *)((const char *)L + V[i].voff);
            r.is_scale = 0;
            return r;
        }
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++)
        if (!strcmp(base, W[i].mod)) {
            r.w = (const dsv4q_weight *)((const char *)L + W[i].woff);
            return r;
        }
    int e;
    char part[4];
    if (sscanf(base, "ffn.experts.%d.%2s", &e, part) == 2 && e >= 0 && e < m->cfg.n_routed_experts) {
        const dsv4q_expert_w *x = &L->experts[e];
        r.w = !strcmp(part, "w1") ? &x->w1 : !strcmp(part, "w2") ? &x->w2 : !strcmp(part, "w3") ? &x->w3 : NULL;
        return r;
    }
    if (!strcmp(base, "engram.embed")) r.table = r.is_scale ? L->engram.table_scale : L->engram.table;
    return r;
}

static void test_pub_every_tensor_bound(void **state)
{
    (void)state;
    dsv4q_model *m = open_ok(PUB);
    FILE *f = fopen(PUB "/weights_table.txt", "r");
    assert_non_null(f);
    char line[1024];
    long rows = 0, bound = 0, fp8 = 0, fp4 = 0;
    while (fgets(line, sizeof line, f)) {
        char name[256];
        if (sscanf(line, "%255s", name) != 1) continue;
        rows++;
        const dsv4q_st_tensor *t = dsv4q_st_find(m->st, name);
        if (!t) fail_msg("weights_table lists '%s', the checkpoint lacks it", name);
        member r = resolve(m, name);
        if (r.w) {
            const void *p = r.is_scale ? r.w->scale : r.w->data;
            if (p != t->data) fail_msg("'%s' is not what %s binds", name, r.is_scale ? "scale" : "data");
            if (t->dtype == DSV4Q_DT_F8_E4M3) {
                assert_int_equal(r.w->fmt, DSV4Q_WF_FP8);
                fp8++;
            }
            if (t->dtype == DSV4Q_DT_I8) {
                assert_int_equal(r.w->fmt, DSV4Q_WF_FP4);
                fp4++;
            }
            if (r.w->fmt == DSV4Q_WF_FP8 || r.w->fmt == DSV4Q_WF_FP4) assert_int_equal(r.w->blk, 32);
            else assert_int_equal(r.w->blk, 0);
            if (!r.is_scale) {
                assert_string_equal(r.w->name, name);
                const int64_t in = t->dtype == DSV4Q_DT_I8 ? 2 * t->shape[1] : t->shape[1];
                assert_true(r.w->out == t->shape[0] && r.w->in == in);
            }
        } else if (r.v) {
            if (r.v->n != t->numel) fail_msg("'%s': %ld values bound, %lld stored", name, r.v->n, (long long)t->numel);
            for (long i = 0; i < r.v->n; i++)
                if (r.v->d[i] != dsv4q_decode_elem(t->dtype, t->data, (size_t)i))
                    fail_msg("'%s' element %ld bound as %g", name, i, r.v->d[i]);
        } else if (r.table) {
            if (r.table != t->data) fail_msg("'%s' is not the bound Engram table", name);
        } else {
            fail_msg("'%s': no member of the model binds it", name);
        }
        bound++;
    }
    fclose(f);
    fprintf(stderr, "[ bound    ] %ld of %ld tensors (%ld FP8 weights, %ld FP4 experts), checkpoint holds %zu\n", bound,
            rows, fp8, fp4, dsv4q_st_count(m->st));
    assert_int_equal(rows, 452);
    assert_int_equal(bound, rows);
    assert_int_equal(dsv4q_st_count(m->st), 452);
    /* no V4 global of V4.1 */
    assert_null(m->hc_head_fn.data);
    assert_int_equal(m->hc_head_base.n, 0);
    /* wo_a stays BF16 as stored; the Engram tables' shapes */
    assert_int_equal(m->layers[0].wo_a.fmt, DSV4Q_WF_BF16);
    assert_int_equal(m->layers[2].engram.rows, 304);
    assert_int_equal(m->layers[5].engram.rows, 462);
    assert_int_equal(m->layers[2].engram.head_dim, 64);
    assert_int_equal(m->layers[2].engram.ncols, 6);
    assert_int_equal(m->layers[2].engram.wkv.out, 640);
    assert_int_equal(m->layers[2].engram.wkv.in, 384);
    dsv4q_model_close(m);
}

/* The case README's table: layer, kv source, index source, kv_src, idx_src,
 * candidate source, candidate consumer, engram index. */
static void test_pub_roles(void **state)
{
    (void)state;
    static const int want[8][8] = {
        /* L kvs ixs kv_src idx_src cand cons eng */
        {0, 0, 0, -1, -1, 0, 0, -1}, /* sliding window only */
        {1, 1, 1, 1, 1, 0, 0, -1},   /* kv + index source, ratio 2 */
        {2, 0, 0, 1, 1, 0, 0, 0},    /* consumer of 1; Engram (hash layer 0) */
        {3, 0, 1, 1, 3, 0, 0, -1},   /* index source on layer 1's keys */
        {4, 1, 1, 4, 4, 1, 0, -1},   /* kv + index source, ratio 1; candidate source */
        {5, 0, 0, 4, 4, 0, 0, 1},    /* consumer of 4; Engram (hash layer 1) */
        {6, 0, 1, 4, 6, 0, 1, -1},   /* index source, candidate consumer */
        {7, 0, 0, 4, 6, 0, 0, -1},   /* consumer: KV of 4, top-k of 6 */
    };
    dsv4q_model *m = open_ok(PUB);
    for (int i = 0; i < 8; i++) {
        const dsv4q_layer_w *L = &m->layers[i];
        const int got[8] = {i,          L->kv_source,        L->index_source,       L->kv_src,
                            L->idx_src, L->candidate_source, L->candidate_consumer, L->engram_index};
        for (int k = 0; k < 8; k++)
            if (got[k] != want[i][k])
                fail_msg("layer %d role column %d is %d, the README says %d", i, k, got[k], want[i][k]);
        /* what a role binds */
        assert_int_equal(L->cmp.wkv.data != NULL, L->kv_source);
        assert_int_equal(L->cmp.wgate.data != NULL, L->kv_source && L->ratio == 2);
        assert_int_equal(L->idx_wq_b.data != NULL, L->index_source);
        assert_int_equal(L->idx_wk.data != NULL, L->kv_source && L->index_source);
        assert_int_equal(L->engram.table != NULL, L->engram_index >= 0);
        assert_int_equal(L->cmp.ape.n, 0);
        assert_int_equal(L->hash, 0);
        assert_null(L->tid2eid);
    }
    assert_int_equal(m->layers[1].cmp.wkv.fmt, DSV4Q_WF_F32);  /* ratio 2: FP32 */
    assert_int_equal(m->layers[4].cmp.wkv.fmt, DSV4Q_WF_BF16); /* ratio 1: BF16 */
    assert_non_null(m->engram_hash);
    assert_int_equal(m->engram_hash->n_layers, 2);
    assert_true(m->engram_hash->rows[0] == 304 && m->engram_hash->rows[1] == 462);
    assert_true(m->engram_hash->V == 321);
    assert_int_equal(m->engram_hash->vocab, 384);
    dsv4q_model_close(m);
}

/* ---- hostile copies of the case ------------------------------------------ */

typedef struct {
    const char *name; /* tensor to edit, or NULL */
    int drop;
    int64_t rows;           /* > 0: keep the first `rows` rows */
    int64_t shape0, shape1; /* > 0: replace by zero bytes of this 2-D shape (same dtype) */
    int to_f32;             /* store as F32 with this first value */
    float f32_first;
} tedit;

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) assert_int_equal(fwrite(buf, 1, n, b), n);
    fclose(a);
    assert_int_equal(fclose(b), 0);
}

static void write_str(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* g_root/tag: the case with one tensor edited (ed may be NULL); config.json
 * and engram_token_map.json copied (callers then overwrite them). */
static void make_case(char *dir, size_t n, const char *tag, const tedit *ed)
{
    char p[512], err[1024];
    snprintf(dir, n, "%s/%s", g_root, tag);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/config.json", dir);
    copy_file(PUB "/config.json", p);
    snprintf(p, sizeof p, "%s/engram_token_map.json", dir);
    copy_file(PUB "/engram_token_map.json", p);
    dsv4q_st *st = NULL;
    if (dsv4q_st_open(&st, PUB "/model.safetensors", err, sizeof err)) fail_msg("%s", err);
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    assert_non_null(w);
    int found = !ed || !ed->name;
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        int64_t shape[DSV4Q_ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        dsv4q_dtype dt = t->dtype;
        const void *data = t->data;
        size_t nb = t->nbytes;
        void *own = NULL;
        if (ed && ed->name && !strcmp(t->name, ed->name)) {
            found = 1;
            if (ed->drop) continue;
            if (ed->rows > 0) {
                nb = nb / (size_t)t->shape[0] * (size_t)ed->rows;
                shape[0] = ed->rows;
            }
            if (ed->shape0 > 0) {
                shape[0] = ed->shape0;
                shape[1] = ed->shape1;
                nb = (size_t)(ed->shape0 * ed->shape1) * (nb / (size_t)t->numel);
                own = calloc(nb, 1);
                if (dt == DSV4Q_DT_F8_E8M0) memset(own, 127, nb); /* scale 1 */
            }
            if (ed->to_f32) {
                dt = DSV4Q_DT_F32;
                nb = (size_t)t->numel * 4;
                float *f = malloc(nb);
                for (int64_t k = 0; k < t->numel; k++) f[k] = (float)dsv4q_decode_elem(t->dtype, t->data, (size_t)k);
                f[0] = ed->f32_first;
                own = f;
            }
            if (own) data = own;
        }
        if (dsv4q_st_writer_add(w, t->name, dt, t->ndim, shape, data, nb, err, sizeof err)) fail_msg("%s", err);
        free(own);
    }
    assert_true(found);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (dsv4q_st_writer_write(w, p, err, sizeof err)) fail_msg("%s", err);
    dsv4q_st_close(st);
}

/* The case's config.json / engram_token_map.json with one key set (value
 * NULL: deleted) written into dir. */
static void edit_json(const char *dir, const char *file, const char *key, json_t *value)
{
    char src[512], dst[512];
    snprintf(src, sizeof src, PUB "/%s", file);
    snprintf(dst, sizeof dst, "%s/%s", dir, file);
    json_error_t je;
    json_t *o = json_load_file(src, 0, &je);
    assert_non_null(o);
    if (value) json_object_set_new(o, key, value);
    else json_object_del(o, key);
    assert_int_equal(json_dump_file(o, dst, JSON_COMPACT), 0);
    json_decref(o);
}

/* dsv4q_model_open(dir) fails naming each needle, in one line. */
static void refused(const char *dir, const char *n1, const char *n2, const char *n3)
{
    dsv4q_model *m = (dsv4q_model *)1;
    char err[2048] = "";
    if (dsv4q_model_open(&m, dir, err, sizeof err) == 0) fail_msg("%s: a hostile checkpoint loaded", dir);
    assert_null(m);
    fprintf(stderr, "[ refused  ] %s\n", err);
    assert_null(strchr(err, '\n'));
    const char *nd[3] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        if (nd[i] && !strstr(err, nd[i])) fail_msg("error lacks '%s': %s", nd[i], err);
}

static void test_refuse_missing_table(void **state)
{
    (void)state;
    char d[256];
    tedit e = {.name = "layers.2.engram.embed.weight", .drop = 1};
    make_case(d, sizeof d, "no_table", &e);
    refused(d, d, "missing tensor 'layers.2.engram.embed.weight'", NULL);
    tedit s = {.name = "layers.5.engram.embed.scale", .drop = 1};
    make_case(d, sizeof d, "no_table_scale", &s);
    refused(d, "missing tensor 'layers.5.engram.embed.scale'", NULL, NULL);
    tedit q = {.name = "layers.5.engram.q_weight", .drop = 1};
    make_case(d, sizeof d, "no_q_weight", &q);
    refused(d, "missing tensor 'layers.5.engram.q_weight'", NULL, NULL);
}

static void test_refuse_table_rows(void **state)
{
    (void)state;
    char d[256];
    tedit e = {.name = "layers.2.engram.embed.weight", .rows = 303};
    make_case(d, sizeof d, "rows303", &e);
    refused(d, "model.safetensors",
            "tensor 'layers.2.engram.embed.weight' has 303 rows, engram_num_embeddings[0] says 304", NULL);
    tedit s = {.name = "layers.5.engram.embed.scale", .rows = 461};
    make_case(d, sizeof d, "scale461", &s);
    refused(d, "tensor 'layers.5.engram.embed.scale' has shape [461, 2], expected [462, 2]", NULL, NULL);
}

static void test_refuse_bucket_count(void **state)
{
    (void)state;
    char d[256];
    make_case(d, sizeof d, "buckets", NULL);
    edit_json(d, "config.json", "engram_num_embeddings", json_pack("[i,i]", 304, 461));
    refused(d, "config.json", "field 'engram_num_embeddings' entry 1 is 461, but layer 5's bucket primes sum to 462",
            NULL);
    /* a config whose table sizes match a different bucket layout: the tensors then disagree */
    make_case(d, sizeof d, "heads", NULL);
    edit_json(d, "config.json", "engram_n_heads", json_integer(1));
    refused(d, "config.json", "'engram_num_embeddings' entry 0 is 304", NULL);
}

static void test_refuse_token_map(void **state)
{
    (void)state;
    char d[256], p[512];
    make_case(d, sizeof d, "map_missing", NULL);
    snprintf(p, sizeof p, "%s/engram_token_map.json", d);
    assert_int_equal(unlink(p), 0);
    refused(d, "engram_token_map.json", "compressed-token map", NULL);

    /* longer than the vocabulary */
    make_case(d, sizeof d, "map_long", NULL);
    json_t *a = json_array();
    for (int i = 0; i < 385; i++) json_array_append_new(a, json_integer(i % 321));
    edit_json(d, "engram_token_map.json", "token_map", a);
    refused(d, "engram_token_map.json", "385 entries, more than the model's vocab_size 384", NULL);

    /* shorter than the pad id */
    make_case(d, sizeof d, "map_short", NULL);
    edit_json(d, "engram_token_map.json", "token_map", json_pack("[i,i]", 0, 1));
    refused(d, "engram_token_map.json", "'engram_pad_id' is 2", NULL);

    /* another compressed vocabulary than the config's (the reference asserts it) */
    make_case(d, sizeof d, "map_vocab", NULL);
    edit_json(d, "engram_token_map.json", "compressed_vocab_size", json_integer(322));
    refused(d, "engram_token_map.json",
            "compressed_vocab_size (322) differs from field 'engram_compressed_vocab_size' (321)", NULL);

    /* an id outside the compressed vocabulary */
    make_case(d, sizeof d, "map_range", NULL);
    json_error_t je;
    json_t *o = json_load_file(PUB "/engram_token_map.json", 0, &je);
    assert_non_null(o);
    json_array_set_new(json_object_get(o, "token_map"), 17, json_integer(321));
    snprintf(p, sizeof p, "%s/engram_token_map.json", d);
    assert_int_equal(json_dump_file(o, p, JSON_COMPACT), 0);
    json_decref(o);
    refused(d, "engram_token_map.json", "'token_map' entry 17", "[0, 321)");

    /* not JSON at all */
    make_case(d, sizeof d, "map_garbage", NULL);
    snprintf(p, sizeof p, "%s/engram_token_map.json", d);
    write_str(p, "[1, 2");
    refused(d, "engram_token_map.json", "invalid JSON", NULL);
}

static void test_refuse_v4_scale_grid(void **state)
{
    (void)state;
    char d[256];
    /* V4's [ceil(64/128), ceil(128/128)] grid on a V4.1 FP8 weight */
    tedit e = {.name = "layers.0.attn.wq_a.scale", .shape0 = 1, .shape1 = 1};
    make_case(d, sizeof d, "grid128", &e);
    refused(d, "tensor 'layers.0.attn.wq_a.scale' has shape [1, 1], expected [2, 4]", "E8M0 scale per 32x32 block",
            NULL);
    tedit w = {.name = "layers.2.engram.wkv.scale", .shape0 = 5, .shape1 = 3};
    make_case(d, sizeof d, "grid128_engram", &w);
    refused(d, "tensor 'layers.2.engram.wkv.scale' has shape [5, 3], expected [20, 12]", NULL, NULL);
}

static void test_refuse_bf16_params(void **state)
{
    (void)state;
    char d[256];
    /* F32 holding BF16 values: accepted (what the reference would load unrounded) */
    tedit ok = {.name = "layers.3.attn_norm.weight", .to_f32 = 1, .f32_first = 1.5f};
    make_case(d, sizeof d, "norm_f32_ok", &ok);
    dsv4q_model *m = open_ok(d);
    assert_true(m->layers[3].attn_norm.d[0] == 1.5);
    dsv4q_model_close(m);
    /* F32 with a value BF16 cannot hold: the reference would round it */
    tedit bad = {.name = "layers.3.attn_norm.weight", .to_f32 = 1, .f32_first = 1.0f + 0x1p-12f};
    make_case(d, sizeof d, "norm_f32_bad", &bad);
    refused(d, "tensor 'layers.3.attn_norm.weight' is F32 with a value BF16 cannot hold (element 0)", NULL, NULL);
    tedit g = {.name = "layers.1.ffn.gate.weight", .to_f32 = 1, .f32_first = 0.1f};
    make_case(d, sizeof d, "gate_f32_bad", &g);
    refused(d, "'layers.1.ffn.gate.weight'", "BF16", NULL);
    /* an F32 scale that is no power of two */
    tedit s = {.name = "layers.0.attn.wkv.scale", .to_f32 = 1, .f32_first = 0.75f};
    make_case(d, sizeof d, "scale_f32", &s);
    refused(d, "tensor 'layers.0.attn.wkv.scale' element 0 is 0.75", "E8M0", NULL);
}

/* wo_a stored FP8 with a 32x32 scale (a raw checkpoint; convert.py dequantizes it): bound as BF16
 * code * scale, block by block. */
static void test_fp8_wo_a_dequantized(void **state)
{
    (void)state;
    char d[256], p[512], err[1024];
    make_case(d, sizeof d, "wo_a_fp8", &(tedit){.name = "layers.3.attn.wo_a.weight", .drop = 1});
    /* add layers.3.attn.wo_a as FP8 [64, 64] + E8M0 [2, 2] */
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    dsv4q_st *st = NULL;
    if (dsv4q_st_open(&st, p, err, sizeof err)) fail_msg("%s", err);
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        if (dsv4q_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, err, sizeof err))
            fail_msg("%s", err);
    }
    uint8_t codes[64 * 64], sc[4] = {127 - 3, 127 - 5, 127 + 1, 127};
    for (int i = 0; i < 64 * 64; i++) codes[i] = (uint8_t)((i * 37 + 11) % 0x7E); /* no NaN code */
    const int64_t ws[2] = {64, 64}, ss[2] = {2, 2};
    assert_int_equal(dsv4q_st_writer_add(w, "layers.3.attn.wo_a.weight", DSV4Q_DT_F8_E4M3, 2, ws, codes, sizeof codes,
                                         err, sizeof err),
                     0);
    assert_int_equal(
        dsv4q_st_writer_add(w, "layers.3.attn.wo_a.scale", DSV4Q_DT_F8_E8M0, 2, ss, sc, sizeof sc, err, sizeof err), 0);
    dsv4q_st_close(st);
    if (dsv4q_st_writer_write(w, p, err, sizeof err)) fail_msg("%s", err);
    dsv4q_model *m = open_ok(d);
    const dsv4q_weight *wo = &m->layers[3].wo_a;
    assert_int_equal(wo->fmt, DSV4Q_WF_BF16);
    const double *e4 = dsv4q_e4m3_table();
    for (int o = 0; o < 64; o++)
        for (int k = 0; k < 64; k++) {
            const double want = e4[codes[o * 64 + k]] * ldexp(1.0, sc[(o / 32) * 2 + k / 32] - 127);
            if (dsv4q_weight_at(wo, o, k) != want)
                fail_msg("wo_a[%d][%d] = %g, want %g", o, k, dsv4q_weight_at(wo, o, k), want);
        }
    dsv4q_model_close(m);
    /* with V4's 128 grid ([1, 1]) it is refused */
    make_case(d, sizeof d, "wo_a_fp8_128", &(tedit){.name = "layers.3.attn.wo_a.weight", .drop = 1});
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    if (dsv4q_st_open(&st, p, err, sizeof err)) fail_msg("%s", err);
    w = dsv4q_st_writer_new();
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        if (dsv4q_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, err, sizeof err))
            fail_msg("%s", err);
    }
    const int64_t s1[2] = {1, 1};
    assert_int_equal(dsv4q_st_writer_add(w, "layers.3.attn.wo_a.weight", DSV4Q_DT_F8_E4M3, 2, ws, codes, sizeof codes,
                                         err, sizeof err),
                     0);
    assert_int_equal(
        dsv4q_st_writer_add(w, "layers.3.attn.wo_a.scale", DSV4Q_DT_F8_E8M0, 2, s1, sc, 1, err, sizeof err), 0);
    dsv4q_st_close(st);
    if (dsv4q_st_writer_write(w, p, err, sizeof err)) fail_msg("%s", err);
    refused(d, "tensor 'layers.3.attn.wo_a.scale' has shape [1, 1], expected [2, 2]", NULL, NULL);
}

/* The CLI maps a refused checkpoint to exit 2 with the one line on stderr. */
static void test_cli_exit_2(void **state)
{
    (void)state;
    char d[256], cmd[1024], out[512];
    make_case(d, sizeof d, "cli_rows", &(tedit){.name = "layers.5.engram.embed.weight", .rows = 400});
    snprintf(out, sizeof out, "%s/cli_rows.err", g_root);
    snprintf(cmd, sizeof cmd, "%s/dsv4q run --width f64 --out %s/x.safetensors --model %s --quiet 2>%s",
             DSV4Q_TEST_BUILD, g_root, d, out);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 2);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char line[2048] = "";
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    if (!strstr(line, "'layers.5.engram.embed.weight' has 400 rows, engram_num_embeddings[1] says 462"))
        fail_msg("stderr: %s", line);
}

/* ---- synth tiny-v41 -> load -------------------------------------------------- */

static void test_synth_tiny_v41_loads(void **state)
{
    (void)state;
    char dir[256], err[1024];
    snprintf(dir, sizeof dir, "%s/tiny-v41", g_root);
    dsv4q_config cfg;
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny-v41", err, sizeof err), 0);
    if (dsv4q_synth_write(&cfg, 3, dir, 1, err, sizeof err)) fail_msg("%s", err);
    dsv4q_model *m = open_ok(dir);
    assert_int_equal(m->cfg.arch, DSV4Q_ARCH_V41);
    /* roles by the tiny-v41 config: ratios 0 2 2 2 1 1 1 0 1, kv [1, 4], index [1, 3, 4, 6], candidate 4,
     * Engram [1, 6] */
    static const int want[9][7] = {
        /* kvs ixs kv_src idx_src cand cons eng */
        {0, 0, -1, -1, 0, 0, -1}, {1, 1, 1, 1, 0, 0, 0},    {0, 0, 1, 1, 0, 0, -1},
        {0, 1, 1, 3, 0, 0, -1},   {1, 1, 4, 4, 1, 0, -1},   {0, 0, 4, 4, 0, 0, -1},
        {0, 1, 4, 6, 0, 1, 1},    {0, 0, -1, -1, 0, 0, -1}, {0, 0, 4, 6, 0, 0, -1},
    };
    for (int i = 0; i < 9; i++) {
        const dsv4q_layer_w *L = &m->layers[i];
        const int got[7] = {L->kv_source,        L->index_source,       L->kv_src,      L->idx_src,
                            L->candidate_source, L->candidate_consumer, L->engram_index};
        for (int k = 0; k < 7; k++)
            if (got[k] != want[i][k])
                fail_msg("tiny-v41 layer %d role column %d is %d, want %d", i, k, got[k], want[i][k]);
        assert_int_equal(L->wq_a.blk, 32);
        assert_int_equal(L->experts[0].w1.fmt, DSV4Q_WF_FP4);
        assert_int_equal(L->experts[0].w1.blk, 32);
    }
    assert_true(m->engram_hash->rows[0] == 240 && m->engram_hash->rows[1] == 306);
    assert_true(m->engram_hash->V == 400);
    assert_int_equal(m->engram_hash->vocab, 512);
    /* the synthetic token map folds 112 ids onto earlier compressed ids (docs/synth.md) */
    long folded = 0;
    for (int t = 1; t < 512; t++) {
        int32_t mx = -1;
        for (int u = 0; u < t; u++)
            if (m->engram_hash->token_map[u] > mx) mx = m->engram_hash->token_map[u];
        folded += m->engram_hash->token_map[t] <= mx;
    }
    assert_int_equal(folded, 512 - 400);
    dsv4q_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pub_every_tensor_bound), cmocka_unit_test(test_pub_roles),
        cmocka_unit_test(test_refuse_missing_table),   cmocka_unit_test(test_refuse_table_rows),
        cmocka_unit_test(test_refuse_bucket_count),    cmocka_unit_test(test_refuse_token_map),
        cmocka_unit_test(test_refuse_v4_scale_grid),   cmocka_unit_test(test_refuse_bf16_params),
        cmocka_unit_test(test_fp8_wo_a_dequantized),   cmocka_unit_test(test_cli_exit_2),
        cmocka_unit_test(test_synth_tiny_v41_loads),
    };
    return cmocka_run_group_tests_name("v41_load", tests, setup, teardown);
}
