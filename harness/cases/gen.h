/*
 * gen.h - deterministic input generators for qualification cases.
 *
 * Every value a case holds is drawn from dsv4q_rng seeded with
 * dsv4q_rng_seed(canonical key) (cases.h K2): splitmix64 over the FNV-1a
 * hash of the key, gaussians as an Irwin-Hall(4) sum (arithmetic only: no
 * libm transcendental decides an input, so a key names the same bytes on
 * every machine). Activations are BF16-representable (K3) unless the
 * recipe is f32 (full FP32 mantissas: the reference keeps op inputs and
 * parameters in F32, so a backend that stores them narrower shows only
 * with such inputs).
 */
#ifndef DSV4Q_CASE_GEN_H
#define DSV4Q_CASE_GEN_H

#include <stddef.h>
#include <stdint.h>
#include "harness/cases/cases.h"

typedef struct dsv4q_rng { uint64_t s; } dsv4q_rng;

/* FNV-1a 64 of a string: the seed of a case's generator. */
uint64_t dsv4q_rng_seed(const char *s);
/* splitmix64: the next 64 bits. */
uint64_t dsv4q_rng_next(dsv4q_rng *r);
/* Uniform in [0, 1) with 53 bits. */
double dsv4q_rng_u01(dsv4q_rng *r);
/* Uniform integer in [0, n), n >= 1 (modulo reduction). */
long dsv4q_rng_below(dsv4q_rng *r, long n);
/* Irwin-Hall(4) scaled to zero mean, unit variance. */
double dsv4q_rng_gauss(dsv4q_rng *r);

/* v rounded to BF16 (through binary32, RNE), as a float. */
float dsv4q_gen_bf16(double v);
/* 1 for recipe f32 (inputs with full FP32 mantissas), else 0. */
int dsv4q_gen_full(const char *recipe);
/* A stored input value: BF16-representable, or F32 when full. */
float dsv4q_gen_store(int full, double v);

/* Activations x [rows, n] by recipe (normal, extreme, nearzero, f32), at
 * magnitude `scale`; block: the quant block the consumer uses (extreme /
 * nearzero pick their magnitude per block). */
void dsv4q_gen_act(dsv4q_rng *r, const char *recipe, float *x, long rows, long n, double scale, long block);
/* Weight input `slot` [N, K] in format fmt ("fp8" 128x128 E8M0 blocks,
 * "fp8b32" V4.1's 32x32 E8M0 blocks, "fp4" packed E2M1 with per-32 E8M0 scales, "bf16", "f32"): the decoded
 * values as the F32 data and the stored form as raw (not for f32), at
 * value scale sigma; recipe nearzero zeroes ~1 FP8/FP4 block in 8. 0, or
 * -1 with a message naming the case. */
int dsv4q_gen_weight(dsv4q_case *c, int slot, dsv4q_rng *r, const char *fmt, long N, long K, double sigma,
                     const char *recipe, char *err, size_t errlen);
/* The input of a quantizer case (act_quant: fp8 = 1, E4M3 with block
 * `block`; fp4_quant: fp8 = 0, E2M1 in blocks of 32): recipes ties and
 * scaletrap as gen.c describes, any other through dsv4q_gen_act. */
void dsv4q_gen_quant(dsv4q_rng *r, const char *recipe, float *x, long rows, long n, long block, int fp8);
/* Recipe blocks: whole 64-column softmax blocks of one index row [ncols]
 * masked (-1, or an index >= N), by row i's pattern (gen.c). */
void dsv4q_gen_mask_blocks(dsv4q_rng *r, int32_t *row, long ncols, long i, long N);
/* Sparse KV cases (key sparse=1, cases.h dsv4q_case_input_sparse): the
 * rows of x [N, D] that idx [n] picks (in [0, N); each row once, in
 * ascending order) drawn by dsv4q_gen_act (recipe, scale 1, block D); a
 * row no column picks stays 0. 0, or -1 (out of memory). */
int dsv4q_gen_rows(dsv4q_rng *r, const char *recipe, float *x, long N, long D, const int32_t *idx, long n);
/* The first row of an [N, D] F32 tensor whose byte offset 4 * row * D does
 * not fit an int32 (2^31 / (4 D), rounded up): where an engine that
 * computes `int off = row * D * 4` reads before the tensor. */
long dsv4q_gen_wrap_row(long D);
/* Hyper-connection params at inputs slot, slot+1, slot+2: fn [m, hcd] (F32
 * math), scale [nscale], base [m]. 0, or -1 (out of memory). */
int dsv4q_gen_hc_params(dsv4q_case *c, dsv4q_rng *r, int slot, long m, long hcd, long nscale, char *err,
                        size_t errlen);

#endif
