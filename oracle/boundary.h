/*
 * boundary.h - the named rounding points of the DeepSeek V4 reference.
 *
 * Every place where inference/model.py or kernel.py rounds a value to BF16,
 * FP8 or FP4 is a boundary with a stable identifier. A boundary set is a
 * bitset (bit b = dsv4q_boundary b is honoured); a precision profile is a
 * named boundary set. Width (f32/f64) and boundary set are orthogonal: the
 * same oracle source honours any set at either width.
 *
 * Two kinds (spec OPERATORS.md section 0):
 *  - model: QAT simulations and score/probability roundings that are part of
 *    the model definition (an ideal FP64 model keeps them);
 *  - storage: incidental BF16 storage of activations.
 * Profiles: source = all; model = the model kind; qat = the FP8/FP4/Hadamard
 * QAT simulations only (what reference-cases golden_fp64 computed); exact =
 * none.
 *
 * Invariants:
 *  B1. Identifiers are stable: new boundaries are appended, never renumbered.
 *  B2. qat is a subset of model, model a subset of source.
 */
#ifndef DSV4Q_BOUNDARY_H
#define DSV4Q_BOUNDARY_H

#include <stddef.h>
#include <stdint.h>

typedef enum dsv4q_boundary {
    /* model boundaries (QAT simulations first) */
    DSV4Q_B_GEMM_ACT_FP8 = 0, /* FP8 act_quant (block 128) of FP8/FP4-GEMM inputs */
    DSV4Q_B_KV_FP8,           /* act_quant block 64 on window KV nope dims */
    DSV4Q_B_CKV_FP8,          /* act_quant block 64 on compressed KV nope dims */
    DSV4Q_B_IDX_Q_FP4,        /* Hadamard + fp4_act_quant of indexer queries */
    DSV4Q_B_IDX_K_FP4,        /* Hadamard + fp4_act_quant of indexer keys */
    DSV4Q_B_IDX_SCORE_BF16,   /* indexer score stored BF16 (makes exact ties) */
    DSV4Q_B_ATTN_P_BF16,      /* attention probabilities BF16 before P*V */
    /* storage boundaries */
    DSV4Q_B_RESID_BF16,       /* hc streams, hc_pre/hc_head outputs, MTP sum */
    DSV4Q_B_NORM_BF16,        /* RMSNorm outputs cast to storage */
    DSV4Q_B_LINEAR_BF16,      /* BF16 outputs of BF16/FP8/FP4 linears, wo_a einsum */
    DSV4Q_B_QNORM_BF16,       /* the five BF16 steps of the q head norm */
    DSV4Q_B_ROPE_BF16,        /* RoPE results stored back to BF16 */
    DSV4Q_B_ROPE_TABLE_F32,   /* RoPE frequencies/angles in FP32, cos/sin complex64 */
    DSV4Q_B_ATTN_OUT_BF16,    /* sparse_attn output stored BF16 */
    DSV4Q_B_HADAMARD_BF16,    /* Hadamard output stored BF16 */
    DSV4Q_B_CMP_BF16,         /* compressor pooled row cast to storage before norm */
    DSV4Q_B_IDX_PARTIAL_BF16, /* indexer weights (x2), per-head dots, products in BF16 */
    DSV4Q_B_MOE_BF16,         /* expert hidden before w2, MoE output stored */
    DSV4Q_B_COUNT
} dsv4q_boundary;

typedef enum { DSV4Q_BK_MODEL = 0, DSV4Q_BK_STORAGE = 1 } dsv4q_boundary_kind;

typedef struct dsv4q_boundary_info {
    const char *name;        /* stable identifier, e.g. "kv_fp8" */
    dsv4q_boundary_kind kind;
    int qat;                 /* 1 if part of the qat profile */
    const char *format;      /* "FP8 E4M3 block 64 (ue8m0)", "BF16", ... */
    const char *where;       /* where it sits in the forward pass */
    const char *reference;   /* file:function it comes from */
} dsv4q_boundary_info;

const dsv4q_boundary_info *dsv4q_boundary_get(int b);   /* NULL if out of range */
/* Index of a boundary name, -1 if unknown. */
int dsv4q_boundary_find(const char *name);

/* Named profiles. Returns 0 and *set, or -1 for an unknown name. */
int dsv4q_profile_set(const char *profile, uint64_t *set);
/* Names of all profiles, NULL-terminated: source, model, qat, exact. */
extern const char *const dsv4q_profile_names[];

/* Apply "name=on|off[,name=on|off...]" to *set. Returns 0, or -1 with a
 * message listing the valid names. */
int dsv4q_boundary_apply(uint64_t *set, const char *spec, char *err, size_t errlen);
/* Comma-separated names of the boundaries in set (into buf). */
void dsv4q_boundary_format(uint64_t set, char *buf, size_t len);

#define DSV4Q_BIT(b) ((uint64_t)1 << (b))

#endif
