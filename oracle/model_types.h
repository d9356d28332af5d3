/*
 * model_types.h - the types the oracle's model runner reads: the model
 * config (dsv4q_config) and the checkpoint's weights as views
 * (dsv4q_model and its layers). Types only.
 *
 * Why here: the oracle (oracle/model.c, stages.c) runs on these structs,
 * and io/ fills them (io/config.c parses config.json, io/model_load.c opens
 * a checkpoint). Declaring them in the oracle layer keeps includes flowing
 * base -> oracle -> io (io/config.h and io/model.h include this header and
 * declare the loaders). The safetensors reader stays opaque (struct
 * dsv4q_st, io/safetensors.h).
 */
#ifndef DSV4Q_MODEL_TYPES_H
#define DSV4Q_MODEL_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include "oracle/weights.h"

typedef struct dsv4q_st dsv4q_st;  /* opaque reader (io/safetensors.h) */

#define DSV4Q_MAX_LAYERS 128
#define DSV4Q_MAX_EXPERTS 1024 /* routed experts per layer (the gate's top-k keeps one flag per expert) */
/* Engram layers a V4.1 config may list (the released Flash has 2). */
#define DSV4Q_MAX_ENGRAM_LAYERS 8

typedef enum { DSV4Q_WDT_BF16 = 0, DSV4Q_WDT_FP8 = 1, DSV4Q_WDT_FP4 = 2 } dsv4q_wdtype;

/* The model family a checkpoint is: DeepSeek V4 (model_type deepseek_v4,
 * inference/model.py of DeepSeek-V4-Flash/Pro) or V4.1 (deepseek_v41, the
 * V4.1-Flash reference: Engram, lagged hyper-connections, compress ratios
 * 1/2 with shared caches, two-level top-k, 32-blocks). */
typedef enum { DSV4Q_ARCH_V4 = 0, DSV4Q_ARCH_V41 = 1 } dsv4q_arch;

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

    dsv4q_arch arch;           /* V4 unless the config says V4.1 (io/config.c) */
    int    fp8_block;          /* FP8 weight tiles b x b and act blocks 1 x b: 128 (V4), 32 (V4.1) */
    /* ---- V4.1 only (V4 configs leave them 0 / -1) ---------------------- */
    double gate_temp;          /* gate logits / gate_temp before the score function */
    int    norm_topk_prob;     /* renormalise the chosen weights (k > 1): w / (sum + 1e-20) */
    /* layers that compress their KV (own a compressor, the compressed-KV and
     * the index-key cache) / run an indexer; ascending */
    int    kv_source_layers[DSV4Q_MAX_LAYERS], n_kv_source_layers;
    int    index_source_layers[DSV4Q_MAX_LAYERS], n_index_source_layers;
    int    candidate_source_layer;   /* -1: no two-level top-k */
    int    candidate_topk_blocks, candidate_block_size;
    int    engram_layer_ids[DSV4Q_MAX_ENGRAM_LAYERS], n_engram_layers;
    int64_t engram_num_embeddings[DSV4Q_MAX_ENGRAM_LAYERS];   /* table rows per Engram layer */
    int    engram_max_ngram_size, engram_n_heads, engram_head_dim, engram_pad_id;
    int64_t engram_vocab_size, engram_compressed_vocab_size;
    int    vision_n_layers;    /* > 0: the checkpoint has a vision tower (text-only runs ignore it) */
    int    image_token_id;     /* an image token in the input is refused (out of scope) */
    /* DSpark (model.py ModelArgs dspark_*): dspark_block_size > 0 makes the
     * n_mtp_layers mtp.* layers DSpark draft stages (window-only blocks);
     * with 0 the other dspark_* members hold their defaults (io/config.c parse_v41)
     * and n_mtp_layers is 0. */
    int dspark_block_size;                                                    /* draft tokens per decode call */
    int dspark_noise_token_id;                                                /* fills draft slots 1..block_size-1 */
    int dspark_target_layer_ids[DSV4Q_MAX_LAYERS], n_dspark_target_layer_ids; /* in [0, n_layers) */
    int dspark_markov_rank;                                                   /* markov_head width (default 256) */
    int dspark_n_routed_experts, dspark_n_activated_experts;                  /* 0 = the backbone's */
} dsv4q_config;

/* A small vector decoded once, in both widths. */
typedef struct dsv4q_vec {
    long n;
    double *d;
    float *f;
} dsv4q_vec;

typedef struct dsv4q_cmp_w {
    dsv4q_weight wkv, wgate;   /* [coff*Dc, dim] */
    dsv4q_vec ape;             /* [ratio, coff*Dc] */
    dsv4q_vec norm;            /* [Dc] */
} dsv4q_cmp_w;

/* One V4.1 Engram layer (model.py Engram, ParallelEngramEmbedding; names
 * layers.{L}.engram.*), NULL table when the layer has none. */
typedef struct dsv4q_engram_w {
    const uint8_t *table;         /* embed.weight: E4M3 codes [rows, head_dim] */
    const uint8_t *table_scale;   /* embed.scale: E8M0 [rows, head_dim/32] (one per 32 of a row) */
    int64_t rows;                 /* engram_num_embeddings of this layer */
    int head_dim;                 /* engram_head_dim, a multiple of 32 */
    int ncols;                    /* (engram_max_ngram_size - 1) * engram_n_heads */
    dsv4q_weight wkv;             /* FP8 32x32 [dim*(hc+1), ncols*head_dim] */
    dsv4q_weight q_weight, k_weight;   /* BF16 [hc, dim] */
    int hc, dim;
} dsv4q_engram_w;

typedef struct dsv4q_layer_w {
    int ratio;                 /* compress ratio (V4: 0, 4, 128; V4.1: 0, 1, 2) */
    int hash;                  /* hash-routed MoE */
    int is_mtp;
    dsv4q_weight hc_attn_fn, hc_ffn_fn;            /* [(2+hc)*hc, hc*dim] */
    dsv4q_vec hc_attn_base, hc_ffn_base;           /* [(2+hc)*hc] */
    dsv4q_vec hc_attn_scale, hc_ffn_scale;         /* [3] */
    dsv4q_vec attn_norm, ffn_norm;                 /* [dim] */
    dsv4q_vec attn_sink;                           /* [H] */
    dsv4q_weight wq_a, wq_b, wkv, wo_a, wo_b;
    dsv4q_vec q_norm, kv_norm;
    dsv4q_cmp_w cmp;                               /* ratio != 0 */
    dsv4q_weight idx_wq_b, idx_weights_proj;       /* ratio == 4 */
    dsv4q_cmp_w idx_cmp;
    dsv4q_weight gate;                             /* [n_routed, dim] */
    dsv4q_vec gate_bias;                           /* non-hash layers */
    const int32_t *tid2eid;                        /* hash layers [vocab, k] */
    dsv4q_expert_w *experts;                       /* [n_routed] */
    dsv4q_expert_w shared;
    /* MTP only */
    dsv4q_weight e_proj, h_proj, hc_head_fn;
    dsv4q_vec enorm, hnorm, norm, hc_head_base, hc_head_scale;
    /* ---- V4.1 only ----------------------------------------------------
     * kv_source: this layer runs its compressor (cmp: wkv, wgate at ratio 2,
     * norm; no ape) and owns the compressed-KV and index-key caches, which it
     * publishes to the layers after it; index_source: it runs an indexer
     * (idx_wq_b, idx_weights_proj) and publishes its picks; a kv source's
     * indexer keys are idx_k_norm(idx_wk(latent)). kv_src / idx_src: the
     * nearest kv / index source at or before this layer (-1: none), whose
     * caches / picks a ratio > 0 layer reads. */
    int kv_source, index_source, kv_src, idx_src;
    int candidate_source;      /* publishes the level-one candidate blocks */
    int candidate_consumer;    /* an index source after the candidate source: masks to its blocks */
    dsv4q_weight idx_wk;       /* kv sources: [index_head_dim, head_dim] BF16 */
    dsv4q_vec idx_k_norm;      /* kv sources: [index_head_dim] */
    int engram_index;          /* its index in engram_layer_ids, -1 */
    dsv4q_engram_w engram;
    /* ---- V4.1 DSpark stage (is_mtp; mtp.{j}.*, model.py DSparkBlock) ---
     * a window-only block whose MoE has n_routed / n_activated experts
     * (ModelArgs.get_moe_config: the dspark_* counts, 0 = the backbone's;
     * 0 here on backbone layers). Stage 0 also holds main_proj
     * [dim, dim * n_targets] (FP8 class) and main_norm [dim]; the last
     * stage norm [dim] (above), markov_embed [vocab, markov_rank] BF16,
     * markov_head [vocab, markov_rank] (FP32 math of BF16 values) and
     * conf_proj [1, dim + markov_rank] (FP32 math). */
    int n_routed, n_activated;
    dsv4q_weight main_proj, markov_embed, markov_head, conf_proj;
    dsv4q_vec main_norm;
} dsv4q_layer_w;

typedef struct dsv4q_model {
    dsv4q_config cfg;
    char dir[4096];
    dsv4q_st *st;
    struct dsv4q_gguf *gguf;   /* set instead of st for a GGUF (io/gguf_model.h) */
    dsv4q_weight embed;        /* [vocab, dim] BF16 */
    dsv4q_weight head;         /* [vocab, dim] FP32 math */
    dsv4q_weight hc_head_fn;   /* [hc, hc*dim] */
    dsv4q_vec hc_head_base, hc_head_scale, norm;
    dsv4q_layer_w *layers; /* n_layers + n_mtp_layers (MTP / DSpark stages last) */
    /* V4.1: the Engram n-gram hash (oracle/engram_hash.h), built at load
     * from the config and the compressed-token map of the checkpoint
     * directory (engram_token_map.json, io/engram_map.h); NULL without
     * Engram layers. */
    struct dsv4q_engram_hash *engram_hash;
    void **owned;              /* buffers to free (wo_a dequantized, vectors) */
    long nowned, capowned;
    /* Leniency for mixed checkpoints: weights stored BF16 where the config's
     * quantization says FP8/FP4 are accepted and run as BF16 weights. How
     * many, and the first one's name (callers should say so). */
    long n_bf16_quant;
    char first_bf16_quant[128];
} dsv4q_model;

#endif
