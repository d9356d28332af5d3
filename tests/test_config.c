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
#include "io/sha256.h"

#include <jansson.h>

#define FLASH_JSON "tests/data/configs/deepseek-v4-flash.json"
#define PRO_JSON   "tests/data/configs/deepseek-v4-pro.json"
#define PUB_TINY   "tests/data/pub_tiny/config.json"
#define PUB_V41 "tests/data/pub_v41_tiny/config.json"

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
    /* the V4.1 members (V4 configs hold the C8 V4 values) */
    CI(arch);
    CI(fp8_block);
    CI(gate_temp);
    CI(norm_topk_prob);
    CI(n_kv_source_layers);
    CI(n_index_source_layers);
    CI(candidate_source_layer);
    CI(candidate_topk_blocks);
    CI(candidate_block_size);
    CI(n_engram_layers);
    CI(engram_max_ngram_size);
    CI(engram_n_heads);
    CI(engram_head_dim);
    CI(engram_pad_id);
    CI(engram_vocab_size);
    CI(engram_compressed_vocab_size);
    CI(vision_n_layers);
    CI(image_token_id);
    CI(dspark_block_size);
    CI(dspark_noise_token_id);
    CI(dspark_markov_rank);
    CI(dspark_n_routed_experts);
    CI(dspark_n_activated_experts);
    CI(n_dspark_target_layer_ids);
    for (int i = 0; i < a->n_dspark_target_layer_ids; i++) CI(dspark_target_layer_ids[i]);
    for (int i = 0; i < a->n_kv_source_layers; i++) CI(kv_source_layers[i]);
    for (int i = 0; i < a->n_index_source_layers; i++) CI(index_source_layers[i]);
    for (int i = 0; i < a->n_engram_layers; i++) {
        CI(engram_layer_ids[i]);
        CI(engram_num_embeddings[i]);
    }
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
    static const char *names[] = {"tiny", "tiny-bf16",     "flash-slice", "flash",
                                  "pro",  "pub-tiny-like", "tiny-v41",    "flash41-slice"};
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

/* ---- V4 serialisation pins (C9) ----------------------------------------- */

/* The SHA-256 of dsv4q_config_to_json of every V4 built-in and published
 * config, recorded before V4.1 existed (receipts and golden pins hash this
 * text): V4.1 must not move a byte of it. */
static void test_v4_texts_pinned(void **state)
{
    (void)state;
    static const char *const pins[][2] = {
        {"tiny", "f81fab6556a20b52af62a5436dca7674f7a708c676c3ef2261dcf362ec508001"},
        {"tiny-bf16", "ea316b0121e6d912eac608ffd67e3b4f97dfcde65654268d7078564b5ab06096"},
        {"flash-slice", "529a92eb6bb2bf87e8d5322e364b5713f02ea52b56a92ed93543a0f5edbd6516"},
        {"flash", "3a23706d5ed1b156456bf4a6207a61755bae7ea1135febf963a34bbf6917c5f5"},
        {"pro", "85b659446958a7d5150a6b6310497f12d40f3654ac1e11fea51174a62c4206a3"},
        {"pub-tiny-like", "5e11c266a376ce09edc51066dc0a77396c93bc9be05e8c862f246040dde1373d"},
        {FLASH_JSON, "9435dcf8b5a99ac1d52986c07b1ae5ba4e4b010e943b52f81c2c98f324ac3695"},
        {PRO_JSON, "2176ece52c5d8b90d25d757f9ea6d5156a8246d4c377d47d96e6f7c63b408b36"},
        {PUB_TINY, "df1cc613c04d85b7893c26fd37d323e6274edffc6ba49967b3c7a32e1449f658"},
    };
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
        dsv4q_config c;
        char err[512], hex[65];
        if (strchr(pins[i][0], '/')) {
            if (dsv4q_config_load(&c, pins[i][0], err, sizeof err)) fail_msg("%s", err);
        } else {
            builtin(&c, pins[i][0]);
        }
        assert_int_equal(c.arch, DSV4Q_ARCH_V4);
        assert_int_equal(c.fp8_block, 128);
        char *js = dsv4q_config_to_json(&c);
        assert_non_null(js);
        assert_null(strstr(js, "model_type"));
        dsv4q_sha256_hex(js, strlen(js), hex);
        if (strcmp(hex, pins[i][1])) fail_msg("%s: to_json text moved (sha256 %s)\n%s", pins[i][0], hex, js);
        free(js);
    }
}

/* ---- V4.1 (C6-C9) --------------------------------------------------------- */

static json_t *load_obj(const char *path)
{
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o) fail_msg("%s: %s", path, je.text);
    return o;
}

static char *dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    assert_non_null(s);
    return s;
}

/* The pub_v41_tiny config with key set to value (NULL: deleted). */
static char *v41_edit(const char *key, json_t *value)
{
    json_t *o = load_obj(PUB_V41);
    if (value) json_object_set_new(o, key, value);
    else json_object_del(o, key);
    return dump(o);
}

static void v41_fail(const char *key, json_t *value, const char *needle1, const char *needle2)
{
    char *s = v41_edit(key, value);
    expect_parse_fail(s, needle1, needle2);
    free(s);
}

static void parse_ok(dsv4q_config *c, const char *json)
{
    char err[512];
    if (dsv4q_config_parse(c, json, "cfg-under-test.json", err, sizeof err)) fail_msg("%s\n%s", err, json);
}

/* Hand-read from tests/data/pub_v41_tiny/config.json. */
static void check_pub_v41(const dsv4q_config *c)
{
    static const int ratios[8] = {0, 2, 2, 2, 1, 1, 1, 1};
    assert_int_equal(c->arch, DSV4Q_ARCH_V41);
    assert_int_equal(c->fp8_block, 32);
    assert_int_equal(c->vocab_size, 384);
    assert_int_equal(c->dim, 128);
    assert_int_equal(c->moe_inter_dim, 64);
    assert_int_equal(c->n_layers, 8);
    assert_int_equal(c->n_mtp_layers, 0);
    assert_int_equal(c->n_hash_layers, 0);
    assert_int_equal(c->n_heads, 2);
    assert_int_equal(c->n_routed_experts, 4);
    assert_int_equal(c->n_shared_experts, 1);
    assert_int_equal(c->n_activated_experts, 2);
    assert_string_equal(c->score_func, "sqrtsoftplus");
    assert_true(c->gate_temp == 1.0);
    assert_int_equal(c->norm_topk_prob, 1);
    assert_true(c->route_scale == 1.5);
    assert_true(c->swiglu_limit == 10.0);
    assert_int_equal(c->q_lora_rank, 64);
    assert_int_equal(c->head_dim, 64);
    assert_int_equal(c->rope_head_dim, 32);
    assert_true(c->norm_eps == 1e-20);
    assert_int_equal(c->o_groups, 2);
    assert_int_equal(c->o_lora_rank, 32);
    assert_int_equal(c->window_size, 8);
    assert_int_equal(c->n_compress_ratios, 8);
    for (int i = 0; i < 8; i++) assert_int_equal(c->compress_ratios[i], ratios[i]);
    assert_int_equal(c->n_kv_source_layers, 2);
    assert_int_equal(c->kv_source_layers[0], 1);
    assert_int_equal(c->kv_source_layers[1], 4);
    assert_int_equal(c->n_index_source_layers, 4);
    assert_int_equal(c->index_source_layers[0], 1);
    assert_int_equal(c->index_source_layers[1], 3);
    assert_int_equal(c->index_source_layers[2], 4);
    assert_int_equal(c->index_source_layers[3], 6);
    assert_true(c->compress_rope_theta == 160000.0);
    assert_int_equal(c->original_seq_len, 65536);
    assert_true(c->rope_theta == 10000.0);
    assert_true(c->rope_factor == 16.0);
    assert_true(c->beta_fast == 32.0 && c->beta_slow == 1.0);
    assert_int_equal(c->index_n_heads, 8);
    assert_int_equal(c->index_head_dim, 64);
    assert_int_equal(c->index_topk, 6);
    assert_int_equal(c->candidate_source_layer, 4);
    assert_int_equal(c->candidate_topk_blocks, 3);
    assert_int_equal(c->candidate_block_size, 4);
    assert_int_equal(c->hc_mult, 4);
    assert_int_equal(c->hc_sinkhorn_iters, 20);
    assert_true(c->hc_eps == 1e-6);
    assert_int_equal(c->n_engram_layers, 2);
    assert_int_equal(c->engram_layer_ids[0], 2);
    assert_int_equal(c->engram_layer_ids[1], 5);
    assert_true(c->engram_num_embeddings[0] == 304 && c->engram_num_embeddings[1] == 462);
    assert_int_equal(c->engram_max_ngram_size, 4);
    assert_true(c->engram_vocab_size == 40);
    assert_int_equal(c->engram_n_heads, 2);
    assert_int_equal(c->engram_head_dim, 64);
    assert_int_equal(c->engram_pad_id, 2);
    assert_true(c->engram_compressed_vocab_size == 321);
    assert_int_equal(c->vision_n_layers, 0);
    assert_int_equal(c->image_token_id, 129264);
    assert_int_equal(c->dspark_block_size, 0);
    assert_int_equal(c->dtype, DSV4Q_WDT_FP8);
    assert_int_equal(c->expert_dtype, DSV4Q_WDT_FP4);
    assert_int_equal(c->scale_ue8m0, 1);
}

static void test_v41_pub_tiny(void **state)
{
    (void)state;
    dsv4q_config c, d;
    char err[512];
    if (dsv4q_config_load(&c, PUB_V41, err, sizeof err)) fail_msg("%s", err);
    check_pub_v41(&c);
    /* C1/C9: the canonical text parses back to the same struct, is stable, and puts the V4.1 keys last */
    char *js = dsv4q_config_to_json(&c);
    assert_non_null(js);
    parse_ok(&d, js);
    assert_memory_equal(&c, &d, sizeof c);
    char *js2 = dsv4q_config_to_json(&d);
    assert_string_equal(js, js2);
    const char *sf = strstr(js, "\"scale_fmt\""), *mt = strstr(js, "\"model_type\""), *gt = strstr(js, "\"gate_temp\"");
    const char *kv = strstr(js, "\"kv_source_layers\""), *en = strstr(js, "\"engram_num_embeddings\"");
    const char *ds = strstr(js, "\"dspark_block_size\"");
    assert_true(sf && mt && gt && kv && en && ds && sf < mt && mt < gt && gt < kv && kv < en && en < ds);
    free(js);
    free(js2);
}

/* C6: what makes a config V4.1. */
static void test_v41_detection(void **state)
{
    (void)state;
    dsv4q_config c;
    /* the pub_v41_tiny config has no model_type: its V4.1 keys decide */
    static const char *const keys[] = {"kv_source_layers", "index_source_layers", "candidate_source_layer",
                                       "engram_layer_ids"};
    json_t *o = load_obj(PUB_V41);
    json_object_set_new(o, "compress_ratios", json_pack("[i,i,i,i,i,i,i,i]", 0, 0, 0, 0, 0, 0, 0, 0));
    json_object_set_new(o, "candidate_source_layer", json_integer(-1));
    const char *strip[] = {"kv_source_layers", "index_source_layers", "candidate_source_layer", "engram_layer_ids",
                           "engram_num_embeddings"};
    for (size_t i = 0; i < sizeof strip / sizeof strip[0]; i++) json_object_del(o, strip[i]);
    char *plain = json_dumps(o, JSON_COMPACT);
    /* none of them and no model_type: V4 (whose rules then apply: dims, the 64-block rule) */
    expect_parse_fail(plain, "'head_dim'", "multiple of 64");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *e = json_copy(o);
        json_object_set_new(e, keys[i], !strcmp(keys[i], "candidate_source_layer") ? json_integer(-1) : json_array());
        char *s = dump(e);
        parse_ok(&c, s);
        assert_int_equal(c.arch, DSV4Q_ARCH_V41);
        free(s);
    }
    /* the HF spellings count too */
    json_t *e = json_copy(o);
    json_object_set_new(e, "kv_source_layer_ids", json_array());
    char *s = dump(e);
    parse_ok(&c, s);
    assert_int_equal(c.arch, DSV4Q_ARCH_V41);
    free(s);
    /* model_type alone, at the top level or in text_config, every spelling */
    static const char *const types[] = {"deepseek_v41", "deepseek_v41_text", "deepseek_v4.1", "deepseek_v4.1_text"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        e = json_copy(o);
        json_object_set_new(e, "model_type", json_string(types[i]));
        s = dump(e);
        parse_ok(&c, s);
        assert_int_equal(c.arch, DSV4Q_ARCH_V41);
        free(s);
    }
    /* deepseek_v4 with a V4.1 key: refused, naming both */
    free(plain);
    json_decref(o);
    s = v41_edit("model_type", json_string("deepseek_v4"));
    expect_parse_fail(s, "'model_type' (deepseek_v4)", "'kv_source_layers'");
    free(s);
}

/* C7: a Hugging Face composite config (model_type deepseek_v41 + text_config) reads as the
 * inference config it spells. */
static void test_v41_hf_composite(void **state)
{
    (void)state;
    static const char *HF =
        "{\"architectures\": [\"DeepseekV41ForConditionalGeneration\"], \"model_type\": \"deepseek_v41\",\n"
        " \"dtype\": \"bfloat16\", \"transformers_version\": \"5.0.0\",\n"
        " \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\",\n"
        "     \"scale_fmt\": \"ue8m0\", \"weight_block_size\": [32, 32]},\n"
        " \"vision_config\": {\"model_type\": \"deepseek_v41_vision\", \"num_hidden_layers\": 24},\n"
        " \"image_token_id\": 129264,\n"
        " \"text_config\": {\"model_type\": \"deepseek_v41_text\", \"dtype\": \"bfloat16\", \"vocab_size\": 384,\n"
        "   \"hidden_size\": 128, \"moe_intermediate_size\": 64, \"num_hidden_layers\": 8,\n"
        "   \"num_nextn_predict_layers\": 3, \"dspark_block_size\": 5, \"dspark_num_experts_per_tok\": 3,\n"
        "   \"dspark_target_layer_ids\": [6, 2], \"dspark_noise_token_id\": 7, \"dspark_markov_rank\": 32,\n"
        "   \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"n_routed_experts\": 4, \"n_shared_experts\": 1,\n"
        "   \"num_experts_per_tok\": 2, \"scoring_func\": \"sqrtsoftplus\", \"gate_temp\": 1.0, \"norm_topk_prob\": "
        "true,\n"
        "   \"routed_scaling_factor\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 64, \"head_dim\": 64,\n"
        "   \"qk_rope_head_dim\": 32, \"rms_norm_eps\": 1e-20, \"o_groups\": 2, \"o_lora_rank\": 32,\n"
        "   \"sliding_window\": 8, \"compress_ratios\": [0, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0],\n"
        "   \"kv_source_layer_ids\": [1, 4], \"index_source_layer_ids\": [1, 3, 4, 6],\n"
        "   \"candidate_source_layer_id\": 4, \"candidate_topk_blocks\": 3, \"candidate_block_size\": 4,\n"
        "   \"compress_rope_theta\": 160000.0, \"rope_theta\": 10000.0,\n"
        "   \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 16, \"beta_fast\": 32, \"beta_slow\": 1,\n"
        "                    \"original_max_position_embeddings\": 65536},\n"
        "   \"index_n_heads\": 8, \"index_head_dim\": 64, \"index_topk\": 6, \"hc_mult\": 4,\n"
        "   \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-6, \"engram_layer_ids\": [2, 5],\n"
        "   \"engram_vocab_size\": 40, \"engram_num_embeddings\": [304, 462], \"engram_max_ngram_size\": 4,\n"
        "   \"engram_n_heads\": 2, \"engram_head_dim\": 64, \"engram_pad_id\": 2,\n"
        "   \"engram_compressed_vocab_size\": 321}}";
    dsv4q_config hf, inf;
    char err[512];
    parse_ok(&hf, HF);
    if (dsv4q_config_load(&inf, PUB_V41, err, sizeof err)) fail_msg("%s", err);
    /* vision_config.num_hidden_layers is the HF spelling of vision_n_layers (accepted: C8);
     * dspark_block_size 5 with 3 mtp layers: three DSpark stages (their ratios 0, 0, 0), the dspark_* keys
     * read, dspark_num_experts_per_tok the HF spelling of dspark_n_activated_experts */
    assert_int_equal(hf.vision_n_layers, 24);
    assert_int_equal(hf.dspark_block_size, 5);
    assert_int_equal(hf.n_mtp_layers, 3);
    assert_int_equal(hf.n_compress_ratios, 11);
    assert_int_equal(hf.dspark_n_activated_experts, 3);
    assert_int_equal(hf.dspark_n_routed_experts, 0);
    assert_int_equal(hf.dspark_noise_token_id, 7);
    assert_int_equal(hf.dspark_markov_rank, 32);
    assert_int_equal(hf.n_dspark_target_layer_ids, 2);
    assert_int_equal(hf.dspark_target_layer_ids[0], 6);
    assert_int_equal(hf.dspark_target_layer_ids[1], 2);
    /* the backbone is the inference config's */
    hf.vision_n_layers = 0;
    hf.dspark_block_size = 0;
    hf.n_mtp_layers = 0;
    hf.n_compress_ratios = 8;
    hf.dspark_n_activated_experts = hf.dspark_noise_token_id = hf.n_dspark_target_layer_ids = 0;
    hf.dspark_target_layer_ids[0] = hf.dspark_target_layer_ids[1] = 0;
    hf.dspark_markov_rank = 256;
    assert_same(&hf, &inf, 1);
    check_pub_v41(&hf);

    /* a top-level copy must agree with text_config's */
    json_error_t je;
    json_t *o = json_loads(HF, 0, &je);
    assert_non_null(o);
    json_object_set_new(o, "hidden_size", json_integer(256));
    char *s = json_dumps(o, JSON_COMPACT);
    expect_parse_fail(s, "'hidden_size' in 'text_config' (128)", "(256)");
    free(s);
    json_object_set_new(o, "hidden_size", json_integer(128)); /* agreeing copies are fine */
    s = json_dumps(o, JSON_COMPACT);
    parse_ok(&hf, s);
    free(s);
    /* V4's 128x128 blocks in a V4.1 quantization_config */
    json_object_set_new(json_object_get(o, "quantization_config"), "weight_block_size", json_pack("[i,i]", 128, 128));
    s = json_dumps(o, JSON_COMPACT);
    expect_parse_fail(s, "'quantization_config.weight_block_size'", "[32, 32]");
    free(s);
    json_decref(o);
}

/* C8: the V4.1 defaults (ModelArgs') for absent keys, and V4's for a V4 config. */
static void test_v41_defaults(void **state)
{
    (void)state;
    const char *min =
        "{\"model_type\": \"deepseek_v41\", \"vocab_size\": 64, \"dim\": 128, \"n_layers\": 2, \"n_heads\": 2,"
        " \"moe_inter_dim\": 64, \"n_routed_experts\": 4, \"n_activated_experts\": 2, \"q_lora_rank\": 64,"
        " \"head_dim\": 64, \"rope_head_dim\": 32, \"o_groups\": 1, \"o_lora_rank\": 32, \"window_size\": 8,"
        " \"compress_ratios\": [0, 0], \"index_n_heads\": 2, \"index_head_dim\": 64, \"index_topk\": 2}";
    dsv4q_config c;
    parse_ok(&c, min);
    assert_int_equal(c.arch, DSV4Q_ARCH_V41);
    assert_int_equal(c.fp8_block, 32);
    assert_true(c.norm_eps == 1e-20);
    assert_int_equal(c.dtype, DSV4Q_WDT_FP8);
    assert_int_equal(c.expert_dtype, DSV4Q_WDT_FP4);
    assert_int_equal(c.scale_ue8m0, 1);
    assert_true(c.gate_temp == 1.0);
    assert_int_equal(c.norm_topk_prob, 1);
    assert_int_equal(c.candidate_source_layer, -1);
    assert_int_equal(c.n_kv_source_layers, 0);
    assert_int_equal(c.n_engram_layers, 0);
    assert_int_equal(c.engram_max_ngram_size, 1);
    assert_int_equal(c.engram_pad_id, 2);
    assert_int_equal(c.image_token_id, 129264);
    assert_int_equal(c.dspark_block_size, 0);
    /* a V4 config: the V4 values of the V4.1 members */
    dsv4q_config v;
    builtin(&v, "tiny");
    assert_int_equal(v.arch, DSV4Q_ARCH_V4);
    assert_int_equal(v.fp8_block, 128);
    assert_true(v.gate_temp == 1.0);
    assert_int_equal(v.norm_topk_prob, 0);
    assert_int_equal(v.candidate_source_layer, -1);

    /* explicit values: norm_topk_prob false, any negative candidate source is -1, expert_dtype null = dtype,
     * a torch dtype name is not ModelArgs.dtype, DSpark stages dropped (C8) */
    json_error_t je;
    json_t *o = json_loads(min, 0, &je);
    json_object_set_new(o, "norm_topk_prob", json_false());
    json_object_set_new(o, "candidate_source_layer", json_integer(-7));
    json_object_set_new(o, "expert_dtype", json_null());
    json_object_set_new(o, "dtype", json_string("bfloat16"));
    json_object_set_new(o, "n_mtp_layers", json_integer(1));
    json_object_set_new(o, "dspark_block_size", json_integer(4));
    json_object_set_new(o, "dspark_target_layer_ids", json_pack("[i]", 1));
    json_object_set_new(o, "compress_ratios", json_pack("[i,i,i]", 0, 0, 0));
    char *s = json_dumps(o, JSON_COMPACT);
    parse_ok(&c, s);
    free(s);
    assert_int_equal(c.norm_topk_prob, 0);
    assert_int_equal(c.candidate_source_layer, -1);
    assert_int_equal(c.dtype, DSV4Q_WDT_FP8);
    assert_int_equal(c.expert_dtype, DSV4Q_WDT_FP8);
    assert_int_equal(c.n_mtp_layers, 1); /* one DSpark stage */
    assert_int_equal(c.n_compress_ratios, 3);
    assert_int_equal(c.dspark_block_size, 4);
    assert_int_equal(c.dspark_markov_rank, 256); /* ModelArgs' default */
    /* scale keys are module constants in V4.1; bf16 experts under fp8 would be FP8 in the reference */
    json_object_set_new(o, "scale_fmt", json_string("fp32"));
    s = json_dumps(o, JSON_COMPACT);
    expect_parse_fail(s, "'scale_fmt'", "deepseek_v41");
    free(s);
    json_object_del(o, "scale_fmt");
    json_object_set_new(o, "scale_dtype", json_string("fp32"));
    s = json_dumps(o, JSON_COMPACT);
    expect_parse_fail(s, "'scale_dtype'", "deepseek_v41");
    free(s);
    json_object_del(o, "scale_dtype");
    json_object_set_new(o, "expert_dtype", json_string("bf16"));
    s = json_dumps(o, JSON_COMPACT);
    expect_parse_fail(s, "'expert_dtype'", "\"bf16\"");
    free(s);
    json_object_del(o, "expert_dtype");
    json_object_set_new(o, "norm_topk_prob", json_string("yes"));
    s = json_dumps(o, JSON_COMPACT);
    expect_parse_fail(s, "'norm_topk_prob'", "true or false");
    free(s);
    json_decref(o);
}

static json_t *ilist(int n, const int *v)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}
#define IL(...) ilist((int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})

/* The V4.1 validation rules (docs/model.md, V4.1 configs), each refused naming the key as written. */
static void test_v41_rules(void **state)
{
    (void)state;
    /* 1: ratios */
    v41_fail("compress_ratios", IL(0, 2, 2, 2, 1, 4, 1, 1),
             "field 'compress_ratios' entry 5 is 4, must be 0, 1 or 2 for deepseek_v41", NULL);
    /* 2: source lists */
    v41_fail("kv_source_layers", IL(1, 1), "'kv_source_layers' entry 1", "ascending");
    v41_fail("kv_source_layers", IL(1, 8), "'kv_source_layers' entry 1 is 8", "outside");
    v41_fail("kv_source_layers", IL(0, 1, 4), "'kv_source_layers' entry 0 is layer 0", "ratio is 0");
    v41_fail("kv_source_layer_ids", IL(1, 5), "'kv_source_layers' (", "'kv_source_layer_ids'");
    v41_fail("index_source_layers", json_string("1,3"), "'index_source_layers' must be an array", NULL);
    v41_fail("index_source_layers", IL(1, -3), "'index_source_layers' entry 1", "non-negative");
    /* 3: every ratio > 0 layer has a kv source of its ratio at or before it */
    v41_fail("kv_source_layers", IL(4), "layer 1 has compress ratio 2 but no kv source", NULL);
    v41_fail("kv_source_layers", IL(1), "layer 4 has compress ratio 1 but its kv source (layer 1) has ratio 2", NULL);
    /* 4: index sources */
    v41_fail("index_source_layers", IL(3, 4, 6), "layer 1 has compress ratio 2 but no index source", NULL);
    v41_fail("index_source_layers", IL(1, 3, 6),
             "'index_source_layers': layer 4 has compress ratio 1 but its index source (layer 3) has ratio 2", NULL);
    v41_fail("index_source_layers", IL(3, 4, 6), "'index_source_layers'", NULL);
    { /* an index source whose kv source makes no index keys */
        json_t *o = load_obj(PUB_V41);
        json_object_set_new(o, "kv_source_layers", IL(1, 2, 4));
        char *s = dump(o);
        expect_parse_fail(s, "layer 3 reads its index keys from kv source layer 2, which is not an index source", NULL);
        free(s);
    }
    /* 5: the candidate source */
    v41_fail("candidate_source_layer", json_integer(5), "'candidate_source_layer' is 5", "index_source_layers");
    v41_fail("candidate_topk_blocks", json_integer(0), "'candidate_topk_blocks' is 0", NULL);
    v41_fail("candidate_block_size", json_integer(0), "'candidate_block_size' is 0", NULL);
    v41_fail("candidate_source_layer", json_integer(3), "'candidate_source_layer': index source layer 4 (ratio 1)",
             "(layer 3, ratio 2)");
    /* 7-8: Engram */
    v41_fail("engram_num_embeddings", json_pack("[i,i]", 304, 461),
             "field 'engram_num_embeddings' entry 1 is 461, but layer 5's bucket primes sum to 462", NULL);
    v41_fail("engram_num_embeddings", json_pack("[i]", 304), "'engram_num_embeddings' has 1 entries",
             "engram_layer_ids has 2");
    v41_fail("engram_num_embeddings", NULL, "missing field 'engram_num_embeddings'", "has 2 entries");
    {
        json_t *o = load_obj(PUB_V41);
        json_object_set_new(o, "engram_layer_ids", IL(5, 5));
        json_object_set_new(o, "engram_num_embeddings", json_pack("[i,i]", 304, 462));
        char *s = dump(o);
        expect_parse_fail(s, "'engram_layer_ids' lists layer 5 twice", NULL);
        free(s);
    }
    v41_fail("engram_layer_ids", IL(2, 8), "'engram_layer_ids' entry 1 is 8", "outside");
    v41_fail("engram_max_ngram_size", json_integer(1), "'engram_max_ngram_size' is 1", NULL);
    v41_fail("engram_n_heads", json_integer(0), "'engram_n_heads' is 0", NULL);
    v41_fail("engram_head_dim", json_integer(48), "'engram_head_dim' is 48", "multiple of 32");
    v41_fail("engram_vocab_size", json_integer(0), "'engram_vocab_size' is 0", NULL);
    v41_fail("engram_compressed_vocab_size", json_integer(0), "'engram_compressed_vocab_size' is 0", NULL);
    v41_fail("engram_pad_id", json_integer(384), "'engram_pad_id' is 384", "[0, 384)");
    v41_fail("engram_layer_ids", IL(0, 1, 2, 3, 4, 5, 6, 7, 0), "'engram_layer_ids' has 9 entries", "at most 8");
    { /* a prime search no machine finishes: refused before it starts */
        json_t *o = load_obj(PUB_V41);
        json_object_set_new(o, "engram_layer_ids", IL(0, 1, 2, 3, 4, 5, 6, 7));
        json_object_set_new(o, "engram_num_embeddings", IL(1, 1, 1, 1, 1, 1, 1, 1));
        json_object_set_new(o, "engram_max_ngram_size", json_integer(16));
        json_object_set_new(o, "engram_n_heads", json_integer(256));
        json_object_set_new(o, "engram_vocab_size", json_integer(1099511627776LL));
        char *s = dump(o);
        expect_parse_fail(s, "'engram_vocab_size'", "work bound");
        free(s);
    }
    /* 10-12: V4.1's 32-blocks replace V4's 128 rules (dim 128 passes here, fails V4's pow2/64 rules) */
    v41_fail("dim", json_integer(144), "'dim' (144) must be a multiple of 32 for dtype fp8", NULL);
    v41_fail("q_lora_rank", json_integer(80), "'q_lora_rank' (80)", NULL);
    v41_fail("moe_inter_dim", json_integer(80), "'moe_inter_dim' (80)", NULL);
    v41_fail("o_lora_rank", json_integer(40), "'o_lora_rank' (o_groups * o_lora_rank = 80)", NULL);
    v41_fail("head_dim", json_integer(80), "'head_dim' (80) must be a multiple of 32", NULL);
    v41_fail("index_head_dim", json_integer(48), "'index_head_dim' must be a multiple of 32", NULL);
    v41_fail("rope_head_dim", json_integer(33), "'rope_head_dim' must be even", NULL);
    { /* no power-of-two rule (no Hadamard) and no (head_dim - rope) % 64 rule */
        json_t *o = load_obj(PUB_V41);
        json_object_set_new(o, "index_head_dim", json_integer(96));
        json_object_set_new(o, "head_dim", json_integer(96));
        char *s = dump(o);
        dsv4q_config c;
        parse_ok(&c, s);
        free(s);
    }
    /* 15: V4-only keys with V4.1-incompatible values */
    v41_fail("n_hash_layers", json_integer(1), "'n_hash_layers' is 1, must be 0 for deepseek_v41", NULL);
    v41_fail("gate_temp", json_integer(0), "'gate_temp' must be a positive number", NULL);
    /* 13: vision accepted (not loaded) */
    char *s = v41_edit("vision_n_layers", json_integer(24));
    dsv4q_config c;
    parse_ok(&c, s);
    assert_int_equal(c.vision_n_layers, 24);
    free(s);
    /* a hand-built V4.1 struct with MTP layers */
    char err[512] = "";
    assert_int_equal(dsv4q_config_load(&c, PUB_V41, err, sizeof err), 0);
    c.n_mtp_layers = 1;
    c.n_compress_ratios = 9;
    assert_int_equal(dsv4q_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "'n_mtp_layers' is 1, must be 0 for deepseek_v41"));
    /* a V4 struct holding V4.1 structure */
    builtin(&c, "tiny");
    c.n_engram_layers = 1;
    assert_int_equal(dsv4q_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "'engram_layer_ids'"));
}

static void test_v41_builtins(void **state)
{
    (void)state;
    dsv4q_config t, f;
    builtin(&t, "tiny-v41");
    assert_int_equal(t.arch, DSV4Q_ARCH_V41);
    assert_int_equal(t.n_layers, 9);
    assert_true(t.gate_temp == 1.25);
    assert_int_equal(t.n_engram_layers, 2);
    assert_true(t.engram_num_embeddings[0] == 240 && t.engram_num_embeddings[1] == 306); /* 53+59+61+67, 71+73+79+83 */
    /* every ratio has a kv source with a later consumer and an index source */
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < t.n_layers; i++) seen[t.compress_ratios[i]]++;
    assert_true(seen[0] >= 2 && seen[1] >= 3 && seen[2] >= 3);
    builtin(&f, "flash41-slice");
    assert_int_equal(f.dim, 5120);
    assert_int_equal(f.n_heads, 64);
    assert_int_equal(f.head_dim, 512);
    assert_int_equal(f.rope_head_dim, 64);
    assert_int_equal(f.q_lora_rank, 1280);
    assert_int_equal(f.o_groups, 8);
    assert_int_equal(f.o_lora_rank, 1024);
    assert_int_equal(f.window_size, 128);
    assert_int_equal(f.index_n_heads, 32);
    assert_int_equal(f.index_head_dim, 128);
    assert_int_equal(f.index_topk, 512);
    assert_int_equal(f.moe_inter_dim, 2304);
    assert_int_equal(f.hc_mult, 4);
    assert_int_equal(f.engram_head_dim, 256);
    assert_int_equal(f.engram_n_heads, 8);
    assert_int_equal(f.engram_max_ngram_size, 4);
    assert_int_equal(f.n_layers, 4);
    /* the released Flash's Engram sizes, derived by the same rules: [384006168, 384016682] */
    json_t *o = load_obj(PUB_V41);
    json_object_set_new(o, "engram_vocab_size", json_integer(16000000));
    json_object_set_new(o, "engram_n_heads", json_integer(8));
    json_object_set_new(o, "engram_head_dim", json_integer(256));
    json_object_set_new(o, "engram_num_embeddings", json_pack("[I,I]", (json_int_t)384006168, (json_int_t)384016682));
    char *s = dump(o);
    parse_ok(&t, s);
    free(s);
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
        cmocka_unit_test(test_v4_texts_pinned),
        cmocka_unit_test(test_v41_pub_tiny),
        cmocka_unit_test(test_v41_detection),
        cmocka_unit_test(test_v41_hf_composite),
        cmocka_unit_test(test_v41_defaults),
        cmocka_unit_test(test_v41_rules),
        cmocka_unit_test(test_v41_builtins),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
