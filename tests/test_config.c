/*
 * test_config.c - config.json parsing, validation, built-ins (io/config.c).
 *
 * Owns the evidence that both config dialects land on the same struct, that
 * the published Flash/Pro configs parse to their published numbers (and to
 * the built-ins), and that every missing key and every validation rule is
 * reported with the field's name. Paths are relative to the repository root
 * (tests run from there); the published configs are copied into tests/data/.
 */
#include "tests/testutil.h"
#include "io/config.h"

#include <jansson.h>

#define FLASH_JSON "tests/data/configs/deepseek-v4-flash.json"
#define PRO_JSON   "tests/data/configs/deepseek-v4-pro.json"
#define PUB_TINY   "tests/data/pub_tiny/config.json"

/* Name of the first field that differs (NULL if equal). Names are compared
 * only when with_name. */
static const char *cfg_diff(const dsv4q_config *a, const dsv4q_config *b, int with_name)
{
#define CI(f) if (a->f != b->f) return #f
    if (with_name && strcmp(a->name, b->name) != 0)
        return "name";
    CI(vocab_size); CI(dim); CI(moe_inter_dim); CI(n_layers); CI(n_hash_layers); CI(n_mtp_layers);
    CI(n_heads); CI(n_routed_experts); CI(n_shared_experts); CI(n_activated_experts);
    if (strcmp(a->score_func, b->score_func) != 0)
        return "score_func";
    CI(route_scale); CI(swiglu_limit); CI(q_lora_rank); CI(head_dim); CI(rope_head_dim); CI(norm_eps);
    CI(o_groups); CI(o_lora_rank); CI(window_size); CI(n_compress_ratios);
    for (int i = 0; i < a->n_compress_ratios; i++)
        if (a->compress_ratios[i] != b->compress_ratios[i])
            return "compress_ratios";
    CI(compress_rope_theta); CI(original_seq_len); CI(rope_theta); CI(rope_factor); CI(beta_fast);
    CI(beta_slow); CI(index_n_heads); CI(index_head_dim); CI(index_topk); CI(hc_mult);
    CI(hc_sinkhorn_iters); CI(hc_eps); CI(dtype); CI(expert_dtype); CI(scale_ue8m0);
#undef CI
    return NULL;
}

static void assert_same(const dsv4q_config *a, const dsv4q_config *b, int with_name)
{
    const char *d = cfg_diff(a, b, with_name);
    if (d)
        fail_msg("configs differ in field '%s'", d);
}

static void builtin(dsv4q_config *c, const char *name)
{
    char err[512];
    if (dsv4q_config_builtin(c, name, err, sizeof err) != 0)
        fail_msg("builtin %s: %s", name, err);
}

/* Parse text expecting failure; the message must contain each needle. */
static void expect_parse_fail(const char *json, const char *needle1, const char *needle2)
{
    dsv4q_config c;
    char err[512] = "";
    int rc = dsv4q_config_parse(&c, json, "cfg-under-test.json", err, sizeof err);
    if (rc == 0)
        fail_msg("parse unexpectedly succeeded (wanted error with '%s')", needle1);
    if (!strstr(err, "cfg-under-test.json") || (needle1 && !strstr(err, needle1)) ||
        (needle2 && !strstr(err, needle2)))
        fail_msg("error '%s' lacks '%s' / '%s' / origin", err, needle1, needle2 ? needle2 : "");
}

/* The JSON of builtin `name`, edited by `edit` (key -> value, NULL = delete). */
static char *edited_json(const char *name, const char *key, json_t *value)
{
    dsv4q_config c;
    builtin(&c, name);
    char *s = dsv4q_config_to_json(&c);
    assert_non_null(s);
    json_error_t je;
    json_t *o = json_loads(s, 0, &je);
    free(s);
    assert_non_null(o);
    if (value)
        json_object_set_new(o, key, value);
    else
        json_object_del(o, key);
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* ---- published configs ------------------------------------------------- */

static void test_flash_published(void **state)
{
    (void)state;
    dsv4q_config c, b;
    char err[512];
    if (dsv4q_config_load(&c, FLASH_JSON, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.vocab_size, 129280);
    assert_int_equal(c.dim, 4096);
    assert_int_equal(c.n_layers, 43);
    assert_int_equal(c.n_mtp_layers, 1);
    assert_int_equal(c.n_compress_ratios, 44);
    assert_int_equal(c.n_hash_layers, 3);
    assert_int_equal(c.n_heads, 64);
    assert_int_equal(c.head_dim, 512);
    assert_int_equal(c.o_groups, 8);
    assert_int_equal(c.index_topk, 512);
    assert_int_equal(c.n_routed_experts, 256);
    assert_int_equal(c.n_activated_experts, 6);
    assert_true(c.route_scale == 1.5);
    assert_true(c.swiglu_limit == 10.0);
    assert_int_equal(c.compress_ratios[0], 0);
    assert_int_equal(c.compress_ratios[1], 0);
    assert_int_equal(c.compress_ratios[2], 4);
    assert_int_equal(c.compress_ratios[3], 128);
    assert_int_equal(c.compress_ratios[42], 4);
    assert_int_equal(c.compress_ratios[43], 0);
    assert_int_equal(c.dtype, DSV4Q_WDT_FP8);
    assert_int_equal(c.expert_dtype, DSV4Q_WDT_FP4);
    assert_int_equal(c.scale_ue8m0, 1);
    assert_string_equal(c.name, "");
    builtin(&b, "flash");
    assert_same(&c, &b, 0);
}

static void test_pro_published(void **state)
{
    (void)state;
    dsv4q_config c, b;
    char err[512];
    if (dsv4q_config_load(&c, PRO_JSON, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.dim, 7168);
    assert_int_equal(c.n_layers, 61);
    assert_int_equal(c.n_compress_ratios, 62);
    assert_int_equal(c.n_heads, 128);
    assert_int_equal(c.o_groups, 16);
    assert_int_equal(c.q_lora_rank, 1536);
    assert_int_equal(c.n_routed_experts, 384);
    assert_int_equal(c.index_topk, 1024);
    assert_true(c.route_scale == 2.5);
    assert_int_equal(c.compress_ratios[0], 128);
    assert_int_equal(c.compress_ratios[61], 0);
    builtin(&b, "pro");
    assert_same(&c, &b, 0);
}

static void test_pub_tiny(void **state)
{
    (void)state;
    dsv4q_config c, b;
    char err[512];
    if (dsv4q_config_load(&c, PUB_TINY, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.dtype, DSV4Q_WDT_BF16);
    assert_int_equal(c.expert_dtype, DSV4Q_WDT_BF16);   /* null: same as dtype */
    assert_int_equal(c.scale_ue8m0, 1);                  /* scale_dtype fp8 (C5) */
    assert_int_equal(c.n_layers, 5);
    assert_int_equal(c.n_mtp_layers, 0);
    assert_int_equal(c.n_hash_layers, 2);
    assert_int_equal(c.n_compress_ratios, 5);
    assert_int_equal(c.compress_ratios[3], 128);
    assert_int_equal(c.index_n_heads, 8);
    assert_int_equal(c.index_topk, 4);
    assert_int_equal(c.o_lora_rank, 32);
    builtin(&b, "pub-tiny-like");
    assert_same(&c, &b, 0);
}

/* ---- dialects ----------------------------------------------------------- */

static const char *HF_TINY =
    "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"model_type\": \"deepseek_v4\",\n"
    " \"vocab_size\": 1024, \"hidden_size\": 256, \"moe_intermediate_size\": 128,\n"
    " \"num_hidden_layers\": 5, \"num_hash_layers\": 1, \"num_nextn_predict_layers\": 1,\n"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"n_routed_experts\": 8,\n"
    " \"n_shared_experts\": 1, \"num_experts_per_tok\": 2, \"scoring_func\": \"sqrtsoftplus\",\n"
    " \"norm_topk_prob\": true, \"topk_method\": \"noaux_tc\", \"routed_scaling_factor\": 1.5,\n"
    " \"swiglu_limit\": 10.0, \"q_lora_rank\": 128, \"head_dim\": 128, \"qk_rope_head_dim\": 64,\n"
    " \"rms_norm_eps\": 1e-6, \"o_groups\": 2, \"o_lora_rank\": 128, \"sliding_window\": 16,\n"
    " \"compress_ratios\": [0, 4, 128, 4, 0, 0], \"compress_rope_theta\": 160000,\n"
    " \"rope_theta\": 10000.0, \"max_position_embeddings\": 1048576,\n"
    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": 65536,\n"
    "                  \"beta_fast\": 32, \"beta_slow\": 1},\n"
    " \"index_n_heads\": 4, \"index_head_dim\": 128, \"index_topk\": 8, \"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-6, \"torch_dtype\": \"bfloat16\",\n"
    " \"expert_dtype\": \"fp4\",\n"
    " \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\",\n"
    "     \"quant_method\": \"fp8\", \"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]}}";

static void test_hf_equals_inference(void **state)
{
    (void)state;
    dsv4q_config hf, inf, b;
    char err[512];
    if (dsv4q_config_parse(&hf, HF_TINY, "hf.json", err, sizeof err) != 0)
        fail_msg("%s", err);
    builtin(&b, "tiny");
    char *js = dsv4q_config_to_json(&b);
    assert_non_null(js);
    /* drop the name so both texts are anonymous */
    json_error_t je;
    json_t *o = json_loads(js, 0, &je);
    free(js);
    json_object_del(o, "name");
    js = json_dumps(o, 0);
    json_decref(o);
    if (dsv4q_config_parse(&inf, js, "inf.json", err, sizeof err) != 0)
        fail_msg("%s", err);
    free(js);
    assert_same(&hf, &inf, 1);
    assert_same(&hf, &b, 0);
}

static void test_spellings_must_agree(void **state)
{
    (void)state;
    char *s = edited_json("tiny", "hidden_size", json_integer(512));
    expect_parse_fail(s, "'dim'", "'hidden_size'");
    free(s);
    /* equal values under both spellings are fine */
    s = edited_json("tiny", "hidden_size", json_real(256.0));
    dsv4q_config c;
    char err[512];
    if (dsv4q_config_parse(&c, s, "x", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.dim, 256);
    free(s);
}

static void test_type_errors(void **state)
{
    (void)state;
    char *s = edited_json("tiny", "dim", json_string("abc"));
    expect_parse_fail(s, "field 'dim' must be a positive integer, got \"abc\"", NULL);
    free(s);
    s = edited_json("tiny", "n_heads", json_real(4.5));
    expect_parse_fail(s, "field 'n_heads'", "positive integer");
    free(s);
    s = edited_json("tiny", "rope_theta", json_string("big"));
    expect_parse_fail(s, "field 'rope_theta'", "number");
    free(s);
    s = edited_json("tiny", "dtype", json_string("fp16"));
    expect_parse_fail(s, "'dtype'", "fp16");
    free(s);
    s = edited_json("tiny", "expert_dtype", json_integer(4));
    expect_parse_fail(s, "'expert_dtype'", NULL);
    free(s);
    s = edited_json("tiny", "score_func", json_string("relu"));
    expect_parse_fail(s, "'score_func'", "relu");
    free(s);
    s = edited_json("tiny", "compress_ratios", json_string("0,4"));
    expect_parse_fail(s, "'compress_ratios'", NULL);
    free(s);
    s = edited_json("tiny", "n_hash_layers", json_integer(-1));
    expect_parse_fail(s, "'n_hash_layers'", "non-negative");
    free(s);
    expect_parse_fail("{\"dim\": ", "invalid JSON", NULL);
    expect_parse_fail("[1, 2]", "not a JSON object", NULL);
}

static void test_missing_required(void **state)
{
    (void)state;
    static const char *req[] = {
        "vocab_size", "dim", "n_layers", "n_heads", "moe_inter_dim", "n_routed_experts",
        "n_activated_experts", "q_lora_rank", "head_dim", "rope_head_dim", "o_groups", "o_lora_rank",
        "window_size", "compress_ratios", "index_n_heads", "index_head_dim", "index_topk",
    };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        char *s = edited_json("tiny", req[i], NULL);
        char needle[64];
        snprintf(needle, sizeof needle, "'%s'", req[i]);
        expect_parse_fail(s, "missing required field", needle);
        free(s);
    }
    /* null counts as absent (C2) */
    char *s = edited_json("tiny", "index_topk", json_null());
    expect_parse_fail(s, "missing required field", "'index_topk'");
    free(s);
}

static void test_defaults_and_optional(void **state)
{
    (void)state;
    /* a minimal inference config: only the required keys */
    const char *min =
        "{\"vocab_size\": 64, \"dim\": 128, \"n_layers\": 2, \"n_heads\": 2, \"moe_inter_dim\": 64,"
        " \"n_routed_experts\": 4, \"n_activated_experts\": 2, \"q_lora_rank\": 64, \"head_dim\": 128,"
        " \"rope_head_dim\": 64, \"o_groups\": 1, \"o_lora_rank\": 32, \"window_size\": 8,"
        " \"compress_ratios\": [0, 4], \"index_n_heads\": 2, \"index_head_dim\": 64, \"index_topk\": 2,"
        " \"max_batch_size\": 3, \"max_seq_len\": 99, \"some_future_key\": {\"x\": 1}}";
    dsv4q_config c;
    char err[512];
    if (dsv4q_config_parse(&c, min, "min", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.n_hash_layers, 0);
    assert_int_equal(c.n_mtp_layers, 0);
    assert_int_equal(c.n_shared_experts, 1);
    assert_string_equal(c.score_func, "sqrtsoftplus");
    assert_true(c.route_scale == 1.0);
    assert_true(c.swiglu_limit == 0.0);
    assert_true(c.norm_eps == 1e-6);
    assert_int_equal(c.original_seq_len, 0);
    assert_true(c.rope_factor == 40.0);
    assert_true(c.beta_fast == 32.0 && c.beta_slow == 1.0);
    assert_int_equal(c.hc_mult, 4);
    assert_int_equal(c.hc_sinkhorn_iters, 20);
    assert_true(c.hc_eps == 1e-6);
    assert_int_equal(c.dtype, DSV4Q_WDT_BF16);
    assert_int_equal(c.expert_dtype, DSV4Q_WDT_BF16);
    assert_int_equal(c.scale_ue8m0, 0);

    /* C4: n_layers entries + MTP layers -> MTP ratio 0 */
    char *s = edited_json("tiny", "compress_ratios", json_pack("[i,i,i,i,i]", 0, 4, 128, 4, 4));
    if (dsv4q_config_parse(&c, s, "c4", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.n_compress_ratios, 6);
    assert_int_equal(c.compress_ratios[4], 4);
    assert_int_equal(c.compress_ratios[5], 0);
    free(s);
    s = edited_json("tiny", "compress_ratios", json_pack("[i,i,i]", 0, 4, 128));
    expect_parse_fail(s, "'compress_ratios'", "entries");
    free(s);

    /* C5: scale_dtype fp8 implies ue8m0; expert_dtype fp8 */
    s = edited_json("tiny", "scale_fmt", json_null());
    if (dsv4q_config_parse(&c, s, "c5", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.scale_ue8m0, 0);
    free(s);
    s = edited_json("tiny", "scale_fmt", json_null());
    json_t *o = json_loads(s, 0, NULL);
    free(s);
    json_object_set_new(o, "scale_dtype", json_string("fp8"));
    json_object_set_new(o, "expert_dtype", json_string("fp8"));
    s = json_dumps(o, 0);
    json_decref(o);
    if (dsv4q_config_parse(&c, s, "c5", err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.scale_ue8m0, 1);
    assert_int_equal(c.expert_dtype, DSV4Q_WDT_FP8);
    free(s);
}

/* ---- validation --------------------------------------------------------- */

typedef struct vcase {
    const char *field;     /* must appear in the message as 'field' */
    void (*mutate)(dsv4q_config *c);
} vcase;

static void m_dim0(dsv4q_config *c) { c->dim = 0; }
static void m_vocab_neg(dsv4q_config *c) { c->vocab_size = -5; }
static void m_layers_big(dsv4q_config *c) { c->n_layers = DSV4Q_MAX_LAYERS + 1; }
static void m_rope_odd(dsv4q_config *c) { c->rope_head_dim = 63; c->head_dim = 127; }
static void m_rope_ge_head(dsv4q_config *c) { c->rope_head_dim = 128; }
static void m_nope_block(dsv4q_config *c) { c->rope_head_dim = 32; }
static void m_index_pow2(dsv4q_config *c) { c->index_head_dim = 96; }
static void m_index_32(dsv4q_config *c) { c->index_head_dim = 16; c->rope_head_dim = 8; c->head_dim = 72; }
static void m_index_rope(dsv4q_config *c) { c->index_head_dim = 32; }
static void m_ratio(dsv4q_config *c) { c->compress_ratios[2] = 64; }
static void m_ratio_count(dsv4q_config *c) { c->n_compress_ratios = 5; }
static void m_groups(dsv4q_config *c) { c->o_groups = 3; }
static void m_topk_experts(dsv4q_config *c) { c->n_activated_experts = 9; }
static void m_hash(dsv4q_config *c) { c->n_hash_layers = 6; }
static void m_shared(dsv4q_config *c) { c->n_shared_experts = 2; }
static void m_hc(dsv4q_config *c) { c->hc_mult = 0; }
static void m_sink(dsv4q_config *c) { c->hc_sinkhorn_iters = 0; }
static void m_fp8_dim(dsv4q_config *c) { c->dim = 192; }
static void m_fp8_q(dsv4q_config *c) { c->q_lora_rank = 96; }
static void m_fp8_o(dsv4q_config *c) { c->o_lora_rank = 32; }
static void m_fp8_moe(dsv4q_config *c) { c->moe_inter_dim = 64; c->expert_dtype = DSV4Q_WDT_BF16; }
static void m_fp4_moe(dsv4q_config *c) { c->dtype = DSV4Q_WDT_BF16; c->moe_inter_dim = 64; }
static void m_score(dsv4q_config *c) { snprintf(c->score_func, sizeof c->score_func, "relu"); }
static void m_norm_eps(dsv4q_config *c) { c->norm_eps = 0; }
static void m_hc_eps(dsv4q_config *c) { c->hc_eps = -1e-6; }
static void m_dtype_fp4(dsv4q_config *c) { c->dtype = DSV4Q_WDT_FP4; }
static void m_window(dsv4q_config *c) { c->window_size = 0; }
static void m_topk(dsv4q_config *c) { c->index_topk = 0; }
static void m_route(dsv4q_config *c) { c->route_scale = 0; }
static void m_mtp(dsv4q_config *c) { c->n_mtp_layers = -1; }

static void test_validate_rules(void **state)
{
    (void)state;
    static const vcase cases[] = {
        { "dim", m_dim0 },                 { "vocab_size", m_vocab_neg },
        { "n_layers", m_layers_big },      { "rope_head_dim", m_rope_odd },
        { "rope_head_dim", m_rope_ge_head }, { "head_dim", m_nope_block },
        { "index_head_dim", m_index_pow2 }, { "index_head_dim", m_index_32 },
        { "index_head_dim", m_index_rope }, { "compress_ratios", m_ratio },
        { "compress_ratios", m_ratio_count }, { "o_groups", m_groups },
        { "n_activated_experts", m_topk_experts }, { "n_hash_layers", m_hash },
        { "n_shared_experts", m_shared },  { "hc_mult", m_hc },
        { "hc_sinkhorn_iters", m_sink },   { "dim", m_fp8_dim },
        { "q_lora_rank", m_fp8_q },        { "o_lora_rank", m_fp8_o },
        { "moe_inter_dim", m_fp8_moe },    { "moe_inter_dim", m_fp4_moe },
        { "score_func", m_score },         { "norm_eps", m_norm_eps },
        { "hc_eps", m_hc_eps },            { "dtype", m_dtype_fp4 },
        { "window_size", m_window },       { "index_topk", m_topk },
        { "route_scale", m_route },        { "n_mtp_layers", m_mtp },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dsv4q_config c;
        char err[512] = "";
        builtin(&c, "tiny");
        cases[i].mutate(&c);
        if (dsv4q_config_validate(&c, err, sizeof err) == 0)
            fail_msg("case %zu (%s): validate accepted", i, cases[i].field);
        char needle[64];
        snprintf(needle, sizeof needle, "'%s'", cases[i].field);
        if (!strstr(err, needle))
            fail_msg("case %zu: message '%s' does not name %s", i, err, needle);
    }
    /* a bf16 config may have dims that are not 128-multiples */
    dsv4q_config c;
    char err[512];
    builtin(&c, "pub-tiny-like");
    assert_int_equal(dsv4q_config_validate(&c, err, sizeof err), 0);
    /* parse runs validate, and prefixes the origin */
    char *s = edited_json("tiny", "o_groups", json_integer(3));
    expect_parse_fail(s, "'o_groups'", NULL);
    free(s);
}

/* ---- built-ins ---------------------------------------------------------- */

static void test_builtins_round_trip(void **state)
{
    (void)state;
    static const char *names[] = { "tiny", "tiny-bf16", "flash-slice", "flash", "pro", "pub-tiny-like" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        dsv4q_config c, d;
        char err[512];
        builtin(&c, names[i]);
        assert_string_equal(c.name, names[i]);
        char *js = dsv4q_config_to_json(&c);
        assert_non_null(js);
        if (dsv4q_config_parse(&d, js, names[i], err, sizeof err) != 0)
            fail_msg("%s: %s\n%s", names[i], err, js);
        assert_same(&c, &d, 1);
        /* the emission is canonical: emitting again gives the same text */
        char *js2 = dsv4q_config_to_json(&d);
        assert_string_equal(js, js2);
        free(js);
        free(js2);
    }
}

static void test_builtin_values(void **state)
{
    (void)state;
    dsv4q_config t, tb, fs;
    builtin(&t, "tiny");
    assert_int_equal(t.vocab_size, 1024);
    assert_int_equal(t.n_layers, 5);
    assert_int_equal(t.n_mtp_layers, 1);
    assert_int_equal(t.n_compress_ratios, 6);
    assert_int_equal(t.compress_ratios[2], 128);
    assert_int_equal(t.compress_ratios[5], 0);
    assert_true(t.route_scale == 1.5);
    assert_true(t.rope_factor == 16.0);
    assert_int_equal(t.original_seq_len, 65536);
    assert_int_equal(t.dtype, DSV4Q_WDT_FP8);
    assert_int_equal(t.expert_dtype, DSV4Q_WDT_FP4);
    assert_int_equal(t.scale_ue8m0, 1);
    builtin(&tb, "tiny-bf16");
    assert_int_equal(tb.dtype, DSV4Q_WDT_BF16);
    assert_int_equal(tb.expert_dtype, DSV4Q_WDT_BF16);
    tb.dtype = t.dtype;
    tb.expert_dtype = t.expert_dtype;
    assert_same(&t, &tb, 0);
    builtin(&fs, "flash-slice");
    assert_int_equal(fs.n_layers, 3);
    assert_int_equal(fs.n_mtp_layers, 0);
    assert_int_equal(fs.n_compress_ratios, 3);
    assert_int_equal(fs.n_routed_experts, 16);
    assert_int_equal(fs.n_activated_experts, 6);
    assert_int_equal(fs.vocab_size, 8192);
    assert_int_equal(fs.index_topk, 512);
}

static void test_unknown_builtin(void **state)
{
    (void)state;
    dsv4q_config c;
    char err[512] = "";
    assert_int_equal(dsv4q_config_builtin(&c, "huge", err, sizeof err), -1);
    assert_non_null(strstr(err, "huge"));
    assert_int_equal(dsv4q_config_load(&c, "tests/data/no/such/config.json", err, sizeof err), -1);
    assert_non_null(strstr(err, "no/such/config.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash_published),
        cmocka_unit_test(test_pro_published),
        cmocka_unit_test(test_pub_tiny),
        cmocka_unit_test(test_hf_equals_inference),
        cmocka_unit_test(test_spellings_must_agree),
        cmocka_unit_test(test_type_errors),
        cmocka_unit_test(test_missing_required),
        cmocka_unit_test(test_defaults_and_optional),
        cmocka_unit_test(test_validate_rules),
        cmocka_unit_test(test_builtins_round_trip),
        cmocka_unit_test(test_builtin_values),
        cmocka_unit_test(test_unknown_builtin),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
