/*
 * model.h - a DeepSeek V4 checkpoint bound to the oracle's weight views.
 *
 * Owns: mapping the reference's state-dict names (embed.weight,
 * layers.N.attn.wq_a.weight, layers.N.attn.compressor.ape,
 * layers.N.ffn.experts.E.w1.weight, mtp.K...., hc_head_fn, head.weight, ...)
 * to typed views, checking every tensor's dtype and shape against the
 * config, decoding the small FP32-math vectors (norm weights, sinks, hc
 * base/scale, ape, gate bias) once into both widths, and the one load-time
 * conversion the reference does (wo_a: FP8 -> BF16, exact). Large weights
 * stay mmap'd in their stored form. Mirrors model.py module structure and
 * DeepSeek's convert.py naming.
 * Errors: -1 with a message naming the file, tensor and what was expected.
 */
#ifndef DSV4Q_MODEL_H
#define DSV4Q_MODEL_H

#include <stdint.h>
#include "io/config.h"
#include "io/safetensors.h"
#include "oracle/weights.h"

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

typedef struct dsv4q_layer_w {
    int ratio;                 /* compress ratio (0, 4, 128) */
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
    dsv4q_layer_w *layers;     /* n_layers + n_mtp_layers (MTP last) */
    void **owned;              /* buffers to free (wo_a dequantized, vectors) */
    long nowned, capowned;
    /* Leniency for mixed checkpoints: weights stored BF16 where the config's
     * quantization says FP8/FP4 are accepted and run as BF16 weights. How
     * many, and the first one's name (callers should say so). */
    long n_bf16_quant;
    char first_bf16_quant[128];
} dsv4q_model;

/* Open a checkpoint directory (config.json + safetensors), or a llama.cpp
 * deepseek4 .gguf file (dispatched to dsv4q_model_open_gguf). Validates the
 * config and every tensor (presence, dtype, shape, no NaN/inf in the
 * decoded FP32-math vectors and BF16/F32 weights' scales). */
int dsv4q_model_open(dsv4q_model **out, const char *dir, char *err, size_t errlen);
void dsv4q_model_close(dsv4q_model *m);

/* The Hugging Face `transformers` spelling of a reference tensor name
 * (model.layers.N.self_attn.q_a_proj.weight for layers.N.attn.wq_a.weight,
 * `_scale_inv` for `.scale`, ...). The loader tries it when the reference
 * name is absent. Returns 0 and writes buf, or -1 if there is none. */
int dsv4q_hf_name(const char *name, char *buf, size_t len);

/* Check a full weight for non-finite values (decoding every element);
 * returns 0 or -1 naming the tensor and the first bad element. */
int dsv4q_weight_check_finite(const dsv4q_weight *w, char *err, size_t errlen);

#endif
