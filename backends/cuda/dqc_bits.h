/*
 * dqc_bits.h - the boundary bit numbers the CUDA kernel set honours (plain
 * C: also included by tests/test_cuda_plugin.c, which checks them).
 */
#ifndef DQC_BITS_H
#define DQC_BITS_H

#include <stdint.h>

/* Boundary bit numbers: identical to enum dsv4q_boundary of
 * oracle/boundary.h (stable by its invariant B1; tests/test_cuda_plugin.c
 * checks them). Repeated here so the plugin needs only the ABI header. */
enum {
    DQC_B_GEMM_ACT_FP8 = 0,
    DQC_B_KV_FP8,
    DQC_B_CKV_FP8,
    DQC_B_IDX_Q_FP4,
    DQC_B_IDX_K_FP4,
    DQC_B_IDX_SCORE_BF16,
    DQC_B_ATTN_P_BF16,
    DQC_B_RESID_BF16,
    DQC_B_NORM_BF16,
    DQC_B_LINEAR_BF16,
    DQC_B_QNORM_BF16,
    DQC_B_ROPE_BF16,
    DQC_B_ROPE_TABLE_F32,
    DQC_B_ATTN_OUT_BF16,
    DQC_B_HADAMARD_BF16,
    DQC_B_CMP_BF16,
    DQC_B_IDX_PARTIAL_BF16,
    DQC_B_MOE_BF16,
    DQC_B_CKV_FP4, /* V4.1 (no V4.1 kernel here yet: honoured by none) */
    DQC_B_COUNT
};
#define DQC_BIT(b) ((uint64_t)1 << (b))
#define DQC_SOURCE_SET (DQC_BIT(DQC_B_COUNT) - 1)

#endif
