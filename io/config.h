/*
 * config.h - the model hyper-parameters of a DeepSeek V4 checkpoint.
 *
 * Owns: the one config struct every component reads, its parser from
 * config.json (both the inference-style keys of inference/model.py
 * ModelArgs and the Hugging Face keys), its validation, and the built-in
 * configs (`tiny`, `flash-slice`, ...). Mirrors inference/model.py ModelArgs.
 * Errors: return -1 and write a message naming the file and field.
 */
#ifndef DSV4Q_CONFIG_H
#define DSV4Q_CONFIG_H

#include <stddef.h>

#define DSV4Q_MAX_LAYERS 128

typedef enum { DSV4Q_WDT_BF16 = 0, DSV4Q_WDT_FP8 = 1, DSV4Q_WDT_FP4 = 2 } dsv4q_wdtype;

typedef struct dsv4q_config {
    char   name[64];          /* built-in name or "" */
    int    vocab_size;
    int    dim;               /* d */
    int    moe_inter_dim;
    int    n_layers;
    int    n_hash_layers;
    int    n_mtp_layers;
    int    n_heads;           /* H */
    int    n_routed_experts;
    int    n_shared_experts;  /* must be 1 (the reference asserts it) */
    int    n_activated_experts;
    char   score_func[16];    /* "sqrtsoftplus" | "softmax" | "sigmoid" */
    double route_scale;
    double swiglu_limit;      /* 0 = no clamp */
    int    q_lora_rank;
    int    head_dim;          /* D */
    int    rope_head_dim;     /* r */
    double norm_eps;
    int    o_groups;          /* G */
    int    o_lora_rank;
    int    window_size;       /* w */
    int    compress_ratios[DSV4Q_MAX_LAYERS + 8]; /* n_layers + n_mtp_layers entries */
    int    n_compress_ratios;
    double compress_rope_theta;
    int    original_seq_len;  /* 0 disables YaRN */
    double rope_theta;
    double rope_factor;
    double beta_fast;
    double beta_slow;
    int    index_n_heads;     /* Hi */
    int    index_head_dim;    /* Di */
    int    index_topk;
    int    hc_mult;           /* hc */
    int    hc_sinkhorn_iters;
    double hc_eps;
    dsv4q_wdtype dtype;        /* "bf16" | "fp8": format of the FP8-class linears */
    dsv4q_wdtype expert_dtype; /* routed experts: BF16 (bf16 ckpt), FP8, or FP4 */
    int    scale_ue8m0;        /* 1: power-of-two act-quant scales */
} dsv4q_config;

/* Parse config.json at `path` into *cfg (both key spellings), then validate.
 * Returns 0, or -1 with `err` naming the file and field. */
int dsv4q_config_load(dsv4q_config *cfg, const char *path, char *err, size_t errlen);
/* Parse from a JSON text (same rules; `origin` names it in messages). */
int dsv4q_config_parse(dsv4q_config *cfg, const char *json, const char *origin,
                       char *err, size_t errlen);
/* Check every field the model needs (positivity, divisibility: head_dim %
 * 64-blocks, dim % 128 for FP8, powers of two for Hadamard, ratios in
 * {0,4,128}, ...). Returns 0 or -1 with a message naming the field. */
int dsv4q_config_validate(const dsv4q_config *cfg, char *err, size_t errlen);
/* Built-in config by name ("tiny", "flash-slice", "pub-tiny-like"); -1 if unknown. */
int dsv4q_config_builtin(dsv4q_config *cfg, const char *name, char *err, size_t errlen);
/* Serialize as inference-style config.json text (malloc'd, caller frees). */
char *dsv4q_config_to_json(const dsv4q_config *cfg);

#endif
