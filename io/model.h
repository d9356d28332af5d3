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
#include "oracle/model_types.h"
#include "oracle/weights.h"

/* The weight structs (dsv4q_vec, dsv4q_cmp_w, dsv4q_layer_w, dsv4q_model)
 * live in oracle/model_types.h (the oracle runs on them; io/ fills them). */

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
