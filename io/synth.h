/*
 * synth.h - deterministic synthetic checkpoints in DeepSeek's real format.
 *
 * Owns: writing a complete V4 or V4.1 checkpoint directory (config.json +
 * weights under the reference's state-dict names, dtypes and shapes, FP8
 * block scales, packed FP4 experts, sharded or single-file; for V4.1 also
 * the Engram tables and engram_token_map.json) from a config and a seed, so
 * every loader path runs without the real checkpoints. The recipe
 * (docs/synth.md) mirrors the official reference cases pub_tiny (V4) and
 * pub_v41_tiny (V4.1: cfg.arch == DSV4Q_ARCH_V41).
 *
 * Determinism: every stored byte is a function of (config, seed) only. A
 * weight element's value depends on (seed, tensor name, flat index) through a
 * counter-based generator (splitmix64 finalizer over an FNV-1a hash of the
 * name), never on thread count, shard count or machine: the Gaussian is
 * Box-Muller evaluated with IEEE +,-,*,/,sqrt and exact bit operations only (synth.c's own
 * frozen log/sin/cos polynomials, not libm, not dmath), compiled with
 * -ffp-contract=off. Goldens recorded on synth output therefore reproduce on
 * every machine.
 *
 * Atomicity: the checkpoint is built in a sibling temporary directory and
 * rename()d into place, so out_dir is either absent or complete.
 *
 * Errors: -1 with a message naming the path / tensor / field.
 */
#ifndef DSV4Q_SYNTH_H
#define DSV4Q_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include "io/config.h"

/* The logit head's documented gain (docs/synth.md): head.weight =
 * gain * N(0,1) / sqrt(dim). 1.0 gives a last-position logit std of ~1.0 on
 * `tiny` and `tiny-bf16` (tests/test_synth.c asserts 0.5 < std < 10). */
#define DSV4Q_SYNTH_HEAD_GAIN 1.0
/* Recipe version, written into every file's metadata ("dsv4q.synth"). Bump it
 * whenever any stored byte for a given (config, seed) changes. V4.1
 * checkpoints carry DSV4Q_SYNTH_VERSION_V41 instead (the V4.1 recipe has its
 * own counter, so a V4.1 change never moves a V4 byte and vice versa). */
#define DSV4Q_SYNTH_VERSION "1"
#define DSV4Q_SYNTH_VERSION_V41 "v41.1"

/* Write a synthetic checkpoint for `cfg` (validated first) into `out_dir`.
 * out_dir's parent is created (mkdir -p); out_dir itself must not exist or
 * be an empty directory (an existing non-empty directory is refused, never
 * overwritten). shards <= 1: one model.safetensors; shards > 1:
 * model-0000i-of-0000N.safetensors (layers split into N contiguous groups;
 * embed.weight in the first shard, head/norm/hc_head in the last; shards may
 * not exceed n_layers + n_mtp_layers) plus model.safetensors.index.json.
 * A V4.1 config with Engram layers also gets engram_token_map.json (the
 * compressed-token map, io/engram_map.h); engram_compressed_vocab_size
 * must not exceed vocab_size.
 * Returns 0, or -1 with err. */
int dsv4q_synth_write(const dsv4q_config *cfg, uint64_t seed, const char *out_dir, int shards,
                      char *err, size_t errlen);

/* A short text of the recipe (static storage). */
const char *dsv4q_synth_recipe(void);

/* --- the generator, exposed so tests (and anyone) can re-derive a weight. */
/* Per-tensor key: mix(mix(seed + GAMMA) ^ fnv1a64(name)). */
uint64_t dsv4q_synth_key(uint64_t seed, const char *name);
/* 64 random bits number `counter` of the stream `key`: mix(key + (counter+1) * GAMMA). */
uint64_t dsv4q_synth_bits(uint64_t key, uint64_t counter);
/* Standard normal element i of stream `key` (Box-Muller on the pair i/2:
 * u1 = ((bits(2j) >> 11) + 1) 2^-53, u2 = (bits(2j+1) >> 11) 2^-53,
 * sqrt(-2 ln u1) * (cos 2 pi u2 for even i, sin 2 pi u2 for odd i)). */
double dsv4q_synth_normal(uint64_t key, uint64_t i);

/* The exact encoders synth uses in its hot loops (faster than formats.h's
 * general ones, same codes on their domain; tests/test_synth.c checks every
 * grid point, midpoint and neighbour against dsv4q_e2m1_encode /
 * dsv4q_e4m3_encode(v, 1)). E2M1: RNE, |v| > 6 saturates. E4M3fn: RNE,
 * saturating to +-448. */
uint8_t dsv4q_synth_e2m1(double v);
uint8_t dsv4q_synth_e4m3(double v);

#endif
