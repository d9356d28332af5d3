/*
 * ops.h - the public API of the oracle operators, at both widths.
 *
 * ops.inc is written once in the vocabulary of oracle/width.h (real,
 * X(name)) and expanded at both widths by oracle/both.h: float / name_f32,
 * then double / name_f64. The declarations cannot drift between the widths
 * because there is only one list.
 *
 * Common conventions (all operators):
 *  - Row-major; a weight W is [out, in] and y = W x; activations are
 *    [tokens, features]; hc streams are [tokens, hc, dim].
 *  - `bs` is the boundary set (oracle/boundary.h): a rounding point of the
 *    reference is applied iff its bit is set. Every other step runs at the
 *    working width with the fixed reduction order of rdot (oracle/real.h).
 *  - Operators do not allocate on failure paths they cannot report: shapes
 *    are the caller's contract (the model layer validates them against the
 *    config before calling); they never read outside the given extents.
 *  - Deterministic: results do not depend on the number of OpenMP threads.
 */
#ifndef DSV4Q_OPS_H
#define DSV4Q_OPS_H

#include <stdint.h>
#include "oracle/weights.h"
#include "oracle/boundary.h"

/* RoPE table: cos/sin of angle t*f_i for t in [0, npos), i in [0, r/2). */
typedef struct dsv4q_rope_params {
    int rope_dim;            /* r */
    double base;             /* rope_theta or compress_rope_theta */
    int original_seq_len;    /* 0: no YaRN */
    double factor, beta_fast, beta_slow;
} dsv4q_rope_params;

/* Smallest e with fmax * 2^e >= amax (exact; the ue8m0 scale exponent). */
int dsv4q_ceil_log2_ratio(double amax, double fmax);

/* The indexer's Hadamard rotation is applied to queries AND keys whenever
 * either FP4 simulation is on (it cancels exactly in q.k otherwise, so the
 * exact profile skips it; applying it to one side only would be a bug). */
static inline int dsv4q_idx_hadamard_on(uint64_t bs)
{
    return (int)(((bs >> DSV4Q_B_IDX_Q_FP4) | (bs >> DSV4Q_B_IDX_K_FP4)) & 1u);
}

/* RoPE YaRN correction range [lo, hi] (model.py find_correction_range and
 * linear_ramp_factor's lo == hi adjustment). */
void dsv4q_yarn_range(const dsv4q_rope_params *p, double *lo, double *hi);

#define DSV4Q_BOTH "oracle/ops.inc"
#include "oracle/both.h"

#endif
