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
 * Engine storage points (kind engine, bits 48 and up): rounding points a
 * real ENGINE applies where the reference does not (KV rows stored F16,
 * Q8_0/Q8_K activation quantization, FP32 indexer scores, F16 instead of
 * BF16 activation storage). They are never part of a named profile; a
 * backend or `qualify --profile` DECLARES them on top of a base profile
 * (dsv4q_declaration_parse), and an engine point may REPLACE a reference
 * point (turning it on turns the replaced one off: act_q8_0 replaces
 * gemm_act_fp8, idx_score_f32 replaces idx_score_bf16). The oracle honours
 * them at both widths like every other boundary (docs/engines.md).
 *
 * Invariants:
 *  B1. Identifiers are stable: new boundaries are appended, never renumbered.
 *  B2. qat is a subset of model, model a subset of source.
 *  B3. Reference boundaries are 0 .. DSV4Q_B_COUNT-1; engine points are
 *      DSV4Q_B_ENGINE_FIRST .. DSV4Q_B_END-1; no named profile holds one.
 *  B4. Behaviour switches are DSV4Q_B_SWITCH_FIRST .. DSV4Q_B_SWITCH_END-1:
 *      not roundings but the named hazards where the reference makes one
 *      choice and engines another (YaRN gating, V4.1's shared index-key
 *      slot, empty attention rows). Off is the reference's behaviour; no
 *      profile holds one; they are set like any point (`--boundary
 *      idxk_per_source=on`, or `qat:idxk_per_source` where a command takes
 *      a declaration) and documented in docs/boundaries.md.
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
    DSV4Q_B_CKV_FP4,          /* V4.1: E2M1 + E4M3 per 16 on compressed KV rows */
    DSV4Q_B_COUNT,            /* number of REFERENCE boundaries */
    /* behaviour switches (B4): where the reference's behaviour is a choice
     * engines make differently; off = the reference's, never in a profile */
    DSV4Q_B_SWITCH_FIRST = 40,
    DSV4Q_B_YARN_GATED = 40,      /* YaRN only when the context exceeds original_seq_len */
    DSV4Q_B_IDXK_PER_SOURCE = 41, /* V4.1: every index-key owner publishes its cache every call */
    DSV4Q_B_ATTN_EMPTY_NAN = 42,  /* a query with no valid key gets NaN (naive softmax), not 0 */
    DSV4Q_B_SWITCH_END,
    /* engine storage points (B3): fixed bits, appended, never renumbered */
    DSV4Q_B_ENGINE_FIRST = 48,
    DSV4Q_B_KV_F16 = 48,        /* KV rows (window and compressed) stored F16 */
    DSV4Q_B_ACT_Q8_0 = 49,      /* GGML Q8_0 per 32 act quant of FP8/FP4-GEMM inputs */
    DSV4Q_B_IDX_SCORE_F32 = 50, /* indexer score stored FP32 */
    DSV4Q_B_ACT_F16 = 51,       /* every BF16 storage point that is on stores F16 */
    DSV4Q_B_ACT_Q8_0_RNE = 52,  /* Q8_0 per 32 as engines write it: F32 scale, ties to even */
    DSV4Q_B_ACT_Q8_K = 53,      /* GGML Q8_K per 256 (K-quant/IQ vec_dot input) */
    DSV4Q_B_ACT_Q_ALL = 54,     /* the declared act quantizer also on BF16/F32-weight linears */
    DSV4Q_B_END
} dsv4q_boundary;

typedef enum { DSV4Q_BK_MODEL = 0, DSV4Q_BK_STORAGE = 1, DSV4Q_BK_ENGINE = 2, DSV4Q_BK_SWITCH = 3 } dsv4q_boundary_kind;

/* Which model families a point exists in (dsv4q_boundary_info.arch). */
enum { DSV4Q_BA_ALL = 0, DSV4Q_BA_V4 = 1, DSV4Q_BA_V41 = 2 };

typedef struct dsv4q_boundary_info {
    const char *name;        /* stable identifier, e.g. "kv_fp8" */
    dsv4q_boundary_kind kind;
    int qat;                 /* 1 if part of the qat profile */
    const char *format;      /* "FP8 E4M3 block 64 (ue8m0)", "BF16", ... */
    const char *where;       /* where it sits in the forward pass */
    const char *reference;   /* file:function it comes from (engine: what engines do it) */
    const char *replaces;    /* engine points: the reference boundary it replaces, or NULL */
    int arch;                /* DSV4Q_BA_ALL, or the one family (V4 / V4.1) whose forward pass has it */
} dsv4q_boundary_info;

/* NULL if b is neither a reference boundary, a switch nor an engine point. */
const dsv4q_boundary_info *dsv4q_boundary_get(int b);
/* The bits that exist in the forward pass of model family arch
 * (dsv4q_arch: 0 V4, 1 V4.1): every point whose arch is ALL or that
 * family. A profile holds the reference points of both families (a point
 * of the other family has no effect); commands print and ablate a set
 * masked by this, so a V4 run's header and table do not change when V4.1
 * points are added. */
uint64_t dsv4q_boundary_arch_mask(int arch);
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

/*
 * Declarations: "PROFILE[:NAME[=on|off],...]" (a bare NAME means on), a
 * base profile plus boundary overrides plus engine storage points, e.g.
 *     qat:act_q8_0,kv_f16            (act_q8_0 replaces gemm_act_fp8)
 *     source:idx_score_f32=on,rope_bf16=off
 * Overrides apply left to right; an engine point switched on switches its
 * `replaces` boundary off; switched back on after it, the activation
 * quantizer still runs in its place. At most one activation quantizer (act_q8_0,
 * act_q8_0_rne, act_q8_k) may be on, and act_q_all needs one. Returns 0
 * and *set, or -1 with a message naming the bad part (unknown profile or
 * boundary, bad value, two activation quantizers, act_q_all alone).
 */
int dsv4q_declaration_parse(const char *decl, uint64_t *set, char *err, size_t errlen);
/* Canonical declaration of set: the named profile closest to it (fewest
 * differing bits; ties in the order source, model, qat, exact) and the
 * differences as NAME=on|off in bit order, e.g. "qat:gemm_act_fp8=off,
 * kv_f16=on,act_q8_0=on" (no ':' part when set is a named profile).
 * dsv4q_declaration_parse of the result gives set back. */
void dsv4q_declaration_format(uint64_t set, char *buf, size_t len);
/* 1 if set holds an engine point (a report then says "judged as declared"). */
int dsv4q_declaration_has_engine(uint64_t set);

#define DSV4Q_BIT(b) ((uint64_t)1 << (b))

/* The engine activation quantizers (one at most is on: declaration parse). */
#define DSV4Q_ACT_Q_ENGINE (DSV4Q_BIT(DSV4Q_B_ACT_Q8_0) | DSV4Q_BIT(DSV4Q_B_ACT_Q8_0_RNE) | DSV4Q_BIT(DSV4Q_B_ACT_Q8_K))
/* 1 if set's engine activation quantizer quantizes the input of a linear
 * whose reference weight is FP8/FP4 (quant = 1) or BF16/F32 (quant = 0,
 * only with act_q_all). */
static inline int dsv4q_engine_act_q_applies(uint64_t set, int quant)
{
    return (set & DSV4Q_ACT_Q_ENGINE) && (quant || ((set >> DSV4Q_B_ACT_Q_ALL) & 1u));
}

#endif
