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
 * flash-slice and pub-tiny-like are ours (docs/synth.md says what each is
 * for). A new built-in is a new row: its text and a line of the table.
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
