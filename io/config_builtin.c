/*
 * config_builtin.c - the built-in configs, as config.json texts parsed by
 * the one loader (dsv4q_config_parse), never as C assignments: a built-in
 * means exactly what the same file on disk would (C1-C5 of io/config.c
 * apply to it), and `dsv4q synth --config NAME` writes it back out.
 *
 * Each text states every field, so none of them depends on a default (C3
 * of io/config.c). flash and pro are the published configs (the reference
 * repository's own files, tests/data/configs/) with a "name" added;
 * tests/test_config.c checks them field by field against those files. tiny, tiny-bf16,
 * flash-slice and pub-tiny-like (V4) and tiny-v41 and flash41-slice (V4.1)
 * are ours (docs/synth.md says what each is for). A new built-in is a new
 * row: its text and a line of the table.
 */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "io/config.h"

/* tiny: ours: the smallest V4 with every feature (a hash layer, both compressor ratios, MTP, FP8
 * linears, FP4 experts) */
static const char CFG_TINY[] =
    "{\"name\": \"tiny\", \"vocab_size\": 1024, \"dim\": 256, \"moe_inter_dim\": 128, \"n_layers\": 5,\n"
    " \"n_hash_layers\": 1, \"n_mtp_layers\": 1, \"n_heads\": 4, \"n_routed_experts\": 8,\n"
    " \"n_shared_experts\": 1, \"n_activated_experts\": 2, \"score_func\": \"sqrtsoftplus\",\n"
    " \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 128, \"head_dim\": 128,\n"
    " \"rope_head_dim\": 64, \"norm_eps\": 1e-06, \"o_groups\": 2, \"o_lora_rank\": 128,\n"
    " \"window_size\": 16, \"compress_ratios\": [0, 4, 128, 4, 0, 0], \"compress_rope_theta\": 160000.0,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000.0, \"rope_factor\": 16.0, \"beta_fast\": 32.0,\n"
    " \"beta_slow\": 1.0, \"index_n_heads\": 4, \"index_head_dim\": 128, \"index_topk\": 8, \"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"dtype\": \"fp8\", \"expert_dtype\": \"fp4\",\n"
    " \"scale_fmt\": \"ue8m0\"}\n";

/* tiny-bf16: ours: tiny with BF16 weights */
static const char CFG_TINY_BF16[] =
    "{\"name\": \"tiny-bf16\", \"vocab_size\": 1024, \"dim\": 256, \"moe_inter_dim\": 128, \"n_layers\": 5,\n"
    " \"n_hash_layers\": 1, \"n_mtp_layers\": 1, \"n_heads\": 4, \"n_routed_experts\": 8,\n"
    " \"n_shared_experts\": 1, \"n_activated_experts\": 2, \"score_func\": \"sqrtsoftplus\",\n"
    " \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 128, \"head_dim\": 128,\n"
    " \"rope_head_dim\": 64, \"norm_eps\": 1e-06, \"o_groups\": 2, \"o_lora_rank\": 128,\n"
    " \"window_size\": 16, \"compress_ratios\": [0, 4, 128, 4, 0, 0], \"compress_rope_theta\": 160000.0,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000.0, \"rope_factor\": 16.0, \"beta_fast\": 32.0,\n"
    " \"beta_slow\": 1.0, \"index_n_heads\": 4, \"index_head_dim\": 128, \"index_topk\": 8, \"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"dtype\": \"bf16\", \"expert_dtype\": \"bf16\",\n"
    " \"scale_fmt\": \"ue8m0\"}\n";

/* flash-slice: ours: three layers at Flash's widths (fewer experts, a smaller vocabulary) */
static const char CFG_FLASH_SLICE[] =
    "{\"name\": \"flash-slice\", \"vocab_size\": 8192, \"dim\": 4096, \"moe_inter_dim\": 2048,\n"
    " \"n_layers\": 3, \"n_hash_layers\": 1, \"n_mtp_layers\": 0, \"n_heads\": 64, \"n_routed_experts\": "
    "16,\n"
    " \"n_shared_experts\": 1, \"n_activated_experts\": 6, \"score_func\": \"sqrtsoftplus\",\n"
    " \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 1024, \"head_dim\": 512,\n"
    " \"rope_head_dim\": 64, \"norm_eps\": 1e-06, \"o_groups\": 8, \"o_lora_rank\": 1024,\n"
    " \"window_size\": 128, \"compress_ratios\": [0, 4, 128], \"compress_rope_theta\": 160000.0,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000.0, \"rope_factor\": 16.0, \"beta_fast\": 32.0,\n"
    " \"beta_slow\": 1.0, \"index_n_heads\": 64, \"index_head_dim\": 128, \"index_topk\": 512,\n"
    " \"hc_mult\": 4, \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"dtype\": \"fp8\",\n"
    " \"expert_dtype\": \"fp4\", \"scale_fmt\": \"ue8m0\"}\n";

/* flash: DeepSeek-V4-Flash as published (tests/data/configs/deepseek-v4-flash.json) */
static const char CFG_FLASH[] =
    "{\"name\": \"flash\",\n"
    " \"_source\": \"DeepSeek-V4-Flash inference config as published (43 layers; the last "
    "compress_ratios entry belongs to the MTP layer)\",\n"
    " \"vocab_size\": 129280, \"dim\": 4096, \"moe_inter_dim\": 2048, \"n_layers\": 43,\n"
    " \"n_hash_layers\": 3, \"n_mtp_layers\": 1, \"n_heads\": 64, \"n_routed_experts\": 256,\n"
    " \"n_shared_experts\": 1, \"n_activated_experts\": 6, \"score_func\": \"sqrtsoftplus\",\n"
    " \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 1024, \"head_dim\": 512,\n"
    " \"rope_head_dim\": 64, \"o_groups\": 8, \"o_lora_rank\": 1024, \"window_size\": 128,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000, \"rope_factor\": 16, \"beta_fast\": 32,\n"
    " \"beta_slow\": 1, \"index_n_heads\": 64, \"index_head_dim\": 128, \"index_topk\": 512, "
    "\"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"norm_eps\": 1e-06, \"dtype\": \"fp8\",\n"
    " \"scale_fmt\": \"ue8m0\", \"expert_dtype\": \"fp4\", \"compress_rope_theta\": 160000,\n"
    " \"compress_ratios\": [0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4,\n"
    " 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,\n"
    " 4, 0]}\n";

/* pro: DeepSeek-V4-Pro as published (tests/data/configs/deepseek-v4-pro.json) */
static const char CFG_PRO[] =
    "{\"name\": \"pro\",\n"
    " \"_source\": \"DeepSeek-V4-Pro inference config as published with the official reference code\",\n"
    " \"vocab_size\": 129280, \"dim\": 7168, \"moe_inter_dim\": 3072, \"n_layers\": 61,\n"
    " \"n_hash_layers\": 3, \"n_mtp_layers\": 1, \"n_heads\": 128, \"n_routed_experts\": 384,\n"
    " \"n_shared_experts\": 1, \"n_activated_experts\": 6, \"score_func\": \"sqrtsoftplus\",\n"
    " \"route_scale\": 2.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 1536, \"head_dim\": 512,\n"
    " \"rope_head_dim\": 64, \"o_groups\": 16, \"o_lora_rank\": 1024, \"window_size\": 128,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000, \"rope_factor\": 16, \"beta_fast\": 32,\n"
    " \"beta_slow\": 1, \"index_n_heads\": 64, \"index_head_dim\": 128, \"index_topk\": 1024,\n"
    " \"hc_mult\": 4, \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"norm_eps\": 1e-06, \"dtype\": "
    "\"fp8\",\n"
    " \"scale_fmt\": \"ue8m0\", \"expert_dtype\": \"fp4\", \"compress_rope_theta\": 160000,\n"
    " \"compress_ratios\": [128, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4,\n"
    " 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,\n"
    " 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0]}\n";

/* pub-tiny-like: ours: the shape of the reference cases' pub_tiny config (BF16 regime) */
static const char CFG_PUB_TINY_LIKE[] =
    "{\"name\": \"pub-tiny-like\", \"vocab_size\": 512, \"dim\": 128, \"moe_inter_dim\": 64, "
    "\"n_layers\": 5,\n"
    " \"n_hash_layers\": 2, \"n_mtp_layers\": 0, \"n_heads\": 2, \"n_routed_experts\": 4,\n"
    " \"n_shared_experts\": 1, \"n_activated_experts\": 2, \"score_func\": \"sqrtsoftplus\",\n"
    " \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 64, \"head_dim\": 128,\n"
    " \"rope_head_dim\": 64, \"norm_eps\": 1e-06, \"o_groups\": 2, \"o_lora_rank\": 32, \"window_size\": 8,\n"
    " \"compress_ratios\": [0, 0, 4, 128, 4], \"compress_rope_theta\": 160000.0,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000.0, \"rope_factor\": 16.0, \"beta_fast\": 32.0,\n"
    " \"beta_slow\": 1.0, \"index_n_heads\": 8, \"index_head_dim\": 128, \"index_topk\": 4, \"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"dtype\": \"bf16\", \"expert_dtype\": \"bf16\",\n"
    " \"scale_fmt\": \"ue8m0\"}\n";

/* tiny-v41: ours: the smallest V4.1 with every feature: compress ratios 0/1/2 with a kv source
 * and consumers of each ratio, index sources and index consumers of each ratio, a ratio-0 layer
 * after the sources, a candidate source (layer 4) with a later consumer (layer 6), two Engram layers
 * (1, 6), hc 4, gate_temp != 1, FP8 32x32 linears, FP4 experts (docs/synth.md) */
static const char CFG_TINY_V41[] =
    "{\"name\": \"tiny-v41\", \"model_type\": \"deepseek_v41\", \"vocab_size\": 512, \"dim\": 192,\n"
    " \"moe_inter_dim\": 96, \"n_layers\": 9, \"n_hash_layers\": 0, \"n_mtp_layers\": 0, \"n_heads\": 4,\n"
    " \"n_routed_experts\": 6, \"n_shared_experts\": 1, \"n_activated_experts\": 2,\n"
    " \"score_func\": \"sqrtsoftplus\", \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 96,\n"
    " \"head_dim\": 64, \"rope_head_dim\": 32, \"norm_eps\": 1e-20, \"o_groups\": 2, \"o_lora_rank\": 48,\n"
    " \"window_size\": 12, \"compress_ratios\": [0, 2, 2, 2, 1, 1, 1, 0, 1], \"compress_rope_theta\": 160000.0,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000.0, \"rope_factor\": 16.0, \"beta_fast\": 32.0,\n"
    " \"beta_slow\": 1.0, \"index_n_heads\": 4, \"index_head_dim\": 64, \"index_topk\": 5, \"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"dtype\": \"fp8\", \"expert_dtype\": \"fp4\",\n"
    " \"scale_fmt\": \"ue8m0\", \"gate_temp\": 1.25, \"norm_topk_prob\": true, \"kv_source_layers\": [1, 4],\n"
    " \"index_source_layers\": [1, 3, 4, 6], \"candidate_source_layer\": 4, \"candidate_topk_blocks\": 2,\n"
    " \"candidate_block_size\": 3, \"engram_layer_ids\": [1, 6], \"engram_num_embeddings\": [240, 306],\n"
    " \"engram_max_ngram_size\": 3, \"engram_vocab_size\": 50, \"engram_n_heads\": 2, \"engram_head_dim\": 32,\n"
    " \"engram_pad_id\": 2, \"engram_compressed_vocab_size\": 400, \"vision_n_layers\": 0,\n"
    " \"image_token_id\": 129264, \"dspark_block_size\": 0}\n";

/* tiny-v41-dspark: ours: tiny-v41 plus two DSpark draft stages (mtp.0, mtp.1: window-only blocks
 * with 4 routed experts, top-2), block size 3, noise token 1, main_hidden from layers 2 and 6
 * (one of them an Engram layer's input, taken after its Engram), Markov rank 32 */
static const char CFG_TINY_V41_DSPARK[] =
    "{\"name\": \"tiny-v41-dspark\", \"model_type\": \"deepseek_v41\", \"vocab_size\": 512, \"dim\": 192,\n"
    " \"moe_inter_dim\": 96, \"n_layers\": 9, \"n_hash_layers\": 0, \"n_mtp_layers\": 2, \"n_heads\": 4,\n"
    " \"n_routed_experts\": 6, \"n_shared_experts\": 1, \"n_activated_experts\": 2,\n"
    " \"score_func\": \"sqrtsoftplus\", \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 96,\n"
    " \"head_dim\": 64, \"rope_head_dim\": 32, \"norm_eps\": 1e-20, \"o_groups\": 2, \"o_lora_rank\": 48,\n"
    " \"window_size\": 12, \"compress_ratios\": [0, 2, 2, 2, 1, 1, 1, 0, 1, 0, 0], \"compress_rope_theta\": 160000.0,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000.0, \"rope_factor\": 16.0, \"beta_fast\": 32.0,\n"
    " \"beta_slow\": 1.0, \"index_n_heads\": 4, \"index_head_dim\": 64, \"index_topk\": 5, \"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"dtype\": \"fp8\", \"expert_dtype\": \"fp4\",\n"
    " \"scale_fmt\": \"ue8m0\", \"gate_temp\": 1.25, \"norm_topk_prob\": true, \"kv_source_layers\": [1, 4],\n"
    " \"index_source_layers\": [1, 3, 4, 6], \"candidate_source_layer\": 4, \"candidate_topk_blocks\": 2,\n"
    " \"candidate_block_size\": 3, \"engram_layer_ids\": [1, 6], \"engram_num_embeddings\": [240, 306],\n"
    " \"engram_max_ngram_size\": 3, \"engram_vocab_size\": 50, \"engram_n_heads\": 2, \"engram_head_dim\": 32,\n"
    " \"engram_pad_id\": 2, \"engram_compressed_vocab_size\": 400, \"vision_n_layers\": 0,\n"
    " \"image_token_id\": 129264, \"dspark_block_size\": 3,\n"
    " \"dspark_noise_token_id\": 1, \"dspark_target_layer_ids\": [2, 6], \"dspark_markov_rank\": 32,\n"
    " \"dspark_n_routed_experts\": 4, \"dspark_n_activated_experts\": 2}\n";

/* flash41-slice: ours: four layers at DeepSeek-V4.1-Flash's widths (dim 5120, 64 heads x 512,
 * q_lora 1280, o 8 x 1024, indexer 32 x 128 top-512, experts 2304 wide, Engram 8 heads x 256,
 * n-gram 4) with ratios 2, 2, 1, 1 (kv sources 0 and 2, index sources 0, 2, 3, candidate source 2
 * with the released 2048 blocks of 8), Engram at layers 1 and 3 with the real hashing on small
 * tables (engram_vocab_size 1000), 8 experts and a vocabulary of 8192 */
static const char CFG_FLASH41_SLICE[] =
    "{\"name\": \"flash41-slice\", \"model_type\": \"deepseek_v41\", \"vocab_size\": 8192, \"dim\": 5120,\n"
    " \"moe_inter_dim\": 2304, \"n_layers\": 4, \"n_hash_layers\": 0, \"n_mtp_layers\": 0, \"n_heads\": 64,\n"
    " \"n_routed_experts\": 8, \"n_shared_experts\": 1, \"n_activated_experts\": 6,\n"
    " \"score_func\": \"sqrtsoftplus\", \"route_scale\": 1.5, \"swiglu_limit\": 10.0, \"q_lora_rank\": 1280,\n"
    " \"head_dim\": 512, \"rope_head_dim\": 64, \"norm_eps\": 1e-20, \"o_groups\": 8, \"o_lora_rank\": 1024,\n"
    " \"window_size\": 128, \"compress_ratios\": [2, 2, 1, 1], \"compress_rope_theta\": 160000.0,\n"
    " \"original_seq_len\": 65536, \"rope_theta\": 10000.0, \"rope_factor\": 16.0, \"beta_fast\": 32.0,\n"
    " \"beta_slow\": 1.0, \"index_n_heads\": 32, \"index_head_dim\": 128, \"index_topk\": 512, \"hc_mult\": 4,\n"
    " \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-06, \"dtype\": \"fp8\", \"expert_dtype\": \"fp4\",\n"
    " \"scale_fmt\": \"ue8m0\", \"gate_temp\": 1.0, \"norm_topk_prob\": true, \"kv_source_layers\": [0, 2],\n"
    " \"index_source_layers\": [0, 2, 3], \"candidate_source_layer\": 2, \"candidate_topk_blocks\": 2048,\n"
    " \"candidate_block_size\": 8, \"engram_layer_ids\": [1, 3], \"engram_num_embeddings\": [25874, 30058],\n"
    " \"engram_max_ngram_size\": 4, \"engram_vocab_size\": 1000, \"engram_n_heads\": 8, \"engram_head_dim\": 256,\n"
    " \"engram_pad_id\": 2, \"engram_compressed_vocab_size\": 6272, \"vision_n_layers\": 0,\n"
    " \"image_token_id\": 129264, \"dspark_block_size\": 0}\n";

/* clang-format off */
static const struct {
    const char *name, *json;
} builtins[] = {
    {"tiny", CFG_TINY},
    {"tiny-bf16", CFG_TINY_BF16},
    {"flash-slice", CFG_FLASH_SLICE},
    {"flash", CFG_FLASH},
    {"pro", CFG_PRO},
    {"pub-tiny-like", CFG_PUB_TINY_LIKE},
    {"tiny-v41", CFG_TINY_V41},
    {"tiny-v41-dspark", CFG_TINY_V41_DSPARK},
    {"flash41-slice", CFG_FLASH41_SLICE},
};
/* clang-format on */
#define NBUILTINS (sizeof builtins / sizeof builtins[0])

const char *dsv4q_config_builtin_json(const char *name)
{
    for (size_t i = 0; name && i < NBUILTINS; i++)
        if (!strcmp(name, builtins[i].name)) return builtins[i].json;
    return NULL;
}

int dsv4q_config_builtin(dsv4q_config *cfg, const char *name, char *err, size_t errlen)
{
    if (!cfg || !name) return dsv4q_errf(err, errlen, "config: NULL argument");
    const char *json = dsv4q_config_builtin_json(name);
    if (!json) {
        char known[256] = "";
        for (size_t i = 0, o = 0; i < NBUILTINS && o < sizeof known; i++)
            o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", i ? ", " : "", builtins[i].name);
        return dsv4q_errf(err, errlen, "config: unknown built-in '%s' (known: %s)", name, known);
    }
    char origin[64];
    snprintf(origin, sizeof origin, "built-in config %s", name);
    return dsv4q_config_parse(cfg, json, origin, err, errlen);
}
