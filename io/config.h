/*
 * config.h - the model hyper-parameters of a DeepSeek V4 or V4.1 checkpoint.
 *
 * Owns: the one config struct every component reads, its parser from
 * config.json (both the inference-style keys of inference/model.py
 * ModelArgs and the Hugging Face keys, V4.1's nested `text_config`
 * included), which family a config is (io/config.c C6), its validation,
 * and the built-in configs (`tiny`, `flash-slice`, `tiny-v41`,
 * `flash41-slice`, ...). Mirrors inference/model.py ModelArgs (V4's and
 * V4.1's).
 * Errors: return -1 and write a message naming the file and field.
 */
#ifndef DSV4Q_CONFIG_H
#define DSV4Q_CONFIG_H

#include <stddef.h>

/* The config struct (dsv4q_config, dsv4q_wdtype, DSV4Q_MAX_LAYERS) lives in
 * oracle/model_types.h, so the oracle needs no io/ header. */
#include "oracle/model_types.h"


/* Parse config.json at `path` into *cfg (both key spellings), then validate.
 * Returns 0, or -1 with `err` naming the file and field. */
int dsv4q_config_load(dsv4q_config *cfg, const char *path, char *err, size_t errlen);
/* Parse from a JSON text (same rules; `origin` names it in messages). */
int dsv4q_config_parse(dsv4q_config *cfg, const char *json, const char *origin,
                       char *err, size_t errlen);
/* Check every field the model needs. V4: positivity, divisibility
 * (head_dim % 64-blocks, dim % 128 for FP8, powers of two for Hadamard),
 * ratios in {0,4,128}, ... V4.1 (cfg->arch): its own rules instead (ratios
 * {0,1,2}, 32-multiples, the kv / index / candidate source topology, the
 * Engram layout and bucket-prime sums; docs/model.md). Returns 0 or -1 with
 * a message naming the field. */
int dsv4q_config_validate(const dsv4q_config *cfg, char *err, size_t errlen);
/* Built-in config by name (tiny, tiny-bf16, flash-slice, flash, pro,
 * pub-tiny-like, tiny-v41, flash41-slice; io/config_builtin.c): its config.json text, parsed by
 * dsv4q_config_parse. 0, or -1 with err (an unknown name lists the known). */
int dsv4q_config_builtin(dsv4q_config *cfg, const char *name, char *err, size_t errlen);
/* The config.json text of a built-in (static storage), or NULL if unknown. */
const char *dsv4q_config_builtin_json(const char *name);
/* Serialize as inference-style config.json text (malloc'd, caller frees). */
char *dsv4q_config_to_json(const dsv4q_config *cfg);

#endif
