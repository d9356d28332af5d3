/*
 * gguf_model.h - a llama.cpp `deepseek4` GGUF bound to the same dsv4q_model
 * the safetensors loader gives (io/model.h).
 *
 * Owns: the metadata map (deepseek4.* keys -> dsv4q_config) and the
 * tensor-name map (llama.cpp names: token_embd, blk.N.attn_q_a, ... ->
 * the reference's state-dict roles), with their shapes in ggml order
 * (ne[0] = in). Both follow llama.cpp 0c1e570: gguf-py constants.py
 * (MODEL_ARCH.DEEPSEEK4, TENSOR_NAMES, Keys), conversion/deepseek.py
 * DeepseekV4Model, src/models/deepseek4.cpp load_arch_hparams /
 * load_arch_tensors. docs/gguf.md lists the map and what differs.
 *
 * Regime: every weight runs as the value ggml decodes (oracle/ggml_decode.h):
 * F32/BF16/F64 tensors stay mmap'd views, every other type (F16, Q8_0,
 * Q4_K, ..., MXFP4) is decoded once at load into an F32 buffer (exact: the
 * decoded value is a binary32). The model is therefore bound in the BF16
 * regime (cfg.dtype = cfg.expert_dtype = bf16): no linear quantizes its
 * activation, as llama.cpp's float paths do not either. MTP (nextn) layers
 * are not bound (n_mtp_layers = 0; llama.cpp's converter drops them by
 * default too).
 * Errors: -1 with a message naming the file, tensor or key and what was
 * expected.
 */
#ifndef DSV4Q_GGUF_MODEL_H
#define DSV4Q_GGUF_MODEL_H

#include <stddef.h>
#include "io/config.h"
#include "io/gguf.h"
#include "io/model.h"

/* 1 if `path` is a regular file starting with the GGUF magic, else 0. */
int dsv4q_is_gguf(const char *path);

/* What a model path is: 1 a file starting with the GGUF magic, 0 a
 * directory (a safetensors checkpoint, opened as one), -1 neither, with
 * err naming the path, what it is (missing, empty, too short for a GGUF
 * header, a non-GGUF magic shown in hex, not a regular file) and what a
 * model path must be. */
int dsv4q_model_path_kind(const char *path, char *err, size_t errlen);

/* The dsv4q_config of a deepseek4 GGUF (general.architecture must be
 * "deepseek4"), validated. Float metadata stored as FLOAT32 is read as the
 * shortest decimal that rounds to the stored float (1e-06 for the F32 of
 * 1e-6), i.e. the config.json value the converter was given. */
int dsv4q_gguf_config(const dsv4q_gguf *g, dsv4q_config *cfg, char *err, size_t errlen);

/* The same from a file path (opens and closes the GGUF). */
int dsv4q_gguf_load_config(const char *path, dsv4q_config *cfg, char *err, size_t errlen);

/* Open and bind a GGUF (dsv4q_model_open dispatches here for GGUF files). */
int dsv4q_model_open_gguf(dsv4q_model **out, const char *path, char *err, size_t errlen);

/* The llama.cpp GGUF name of a reference tensor name (embed.weight ->
 * token_embd.weight, layers.3.attn.wq_a.weight -> blk.3.attn_q_a.weight,
 * layers.1.ffn.experts.5.w2.weight -> blk.1.ffn_down_exps.weight, expert
 * 5 of it). Returns 0 and writes buf (and *expert: -1, or the expert
 * index inside a stacked tensor), or -1 if the name has no GGUF form. */
int dsv4q_gguf_name(const char *ref, char *buf, size_t len, int *expert);

#endif
