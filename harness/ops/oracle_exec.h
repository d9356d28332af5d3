/*
 * oracle_exec.h - run one backend-ABI call (abi/dsv4q_backend.h)
 * through the oracle at either width.
 *
 * This is the single adapter between the ABI's tensors and oracle/ops.inc:
 * the reference (f64), the rounding level (f32 vs f64) and the oracle-f32
 * backend all go through it, so the three cannot interpret a call
 * differently. Weights with a raw form are handed to the oracle in their
 * stored format (FP8 / FP4 / BF16 + scales), so the FP8/FP4 GEMM block
 * structure and act_quant apply exactly as in the reference; weights
 * without one are used as F32.
 *
 * out[i] points to the output i as R (float / double) values, or int32_t
 * for the I32 outputs (topk idx, moe_gate indices), each sized as
 * call->out[i].shape says. Returns 0, or -1 with a message.
 */
#ifndef DSV4Q_ORACLE_EXEC_H
#define DSV4Q_ORACLE_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include "harness/ops/ops.h"

int dsv4q_oracle_exec_f32(uint64_t bs, const dsv4q_bcall *call, void *const *out, char *err, size_t errlen);
int dsv4q_oracle_exec_f64(uint64_t bs, const dsv4q_bcall *call, void *const *out, char *err, size_t errlen);

/* dsv4q_bt_numel: harness/backend/backend.h. */

#endif
