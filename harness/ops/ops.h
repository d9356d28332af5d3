/*
 * ops.h - the operators of the backend ABI, as the harness knows them.
 *
 * One operator = one descriptor file, harness/ops/<name>.c (see op.h for
 * how one is written): its row of the ABI's operator list, its contract
 * (tensors, params, dtypes, the oracle function, the reference), its case
 * keys with defaults, its input recipes and case list, the weight role of
 * a case, how its outputs are measured, and its oracle adapter at both
 * widths. Everything that lists operators is generated from those files:
 * DSV4Q_OP_LIST in abi/dsv4q_backend.h (scripts/gen-ops.sh), the registry
 * below, the oracle dispatch, docs/backends.md and the ABI header's
 * contract summary (`make docs`), the Python package's operator table (read
 * from the library at import), the CUDA plugin's and cpu-ref's arity
 * checks (from DSV4Q_OP_LIST).
 *
 * This header is the room's public face: the registry (the descriptors by
 * id and name, their consistency check, the generated docs), cases by key
 * (build, canonical form, every listed case), and the oracle run on one
 * ABI call at either width (the reference, the rounding level and the
 * oracle-f32 backend all go through it, so the three cannot interpret a
 * call differently).
 */
#ifndef DSV4Q_HARNESS_OPS_H
#define DSV4Q_HARNESS_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "abi/dsv4q_backend.h"
#include "harness/cases/cases.h"
#include "harness/cases/gen.h"
#include "harness/cases/key.h"

/* One tensor slot of an operator's contract. */
typedef struct dsv4q_op_tensor {
    const char *name;    /* "x" */
    const char *shape;   /* "[s,K]" with meanings in doc (symbolic: cli/capi.c unifies it) */
    const char *dtype;   /* "F32", "I32", "F32 + raw" */
    const char *doc;     /* one line; "empty" in it marks an optional input */
} dsv4q_op_tensor;

/*
 * An operator's descriptor. The first block comes from its DSV4Q_OP_LIST
 * row (filled by DSV4Q_OP_DESC, op.h); the rest is the descriptor file's.
 * Hooks left NULL take the default named beside them.
 */
typedef struct dsv4q_op_info {
    int op;                      /* enum dsv4q_op */
    const char *name;            /* "linear", "sparse_attn" (lower case, stable) */
    int nin, nout, nparam;       /* (its enum name is DSV4Q_OP_ + the name in upper case) */

    /* the contract: docs/backends.md, `qualify --list-ops`, cli/capi.c */
    dsv4q_op_tensor in[DSV4Q_OPS_MAX_T], out[DSV4Q_OPS_MAX_T];
    const char *param[DSV4Q_OPS_MAX_P];   /* "ue8m0: ..." (the leading word names it) */
    const char *oracle;          /* "oracle/linear.c dsv4q_linear" */
    const char *reference;       /* "model.py linear; kernel.py fp8_gemm" */
    const char *boundaries;      /* rounding points it contains */
    const char *notes;

    /* cases (harness/cases/key.h): parameters in canonical order with
     * their defaults (Flash shapes), optional ones (written only when not
     * their default), and the cases of the default sets */
    const char *keys[DSV4Q_KV_MAX][2];
    const char *optkeys[4][2];
    const dsv4q_case_entry *cases;   /* ended by a NULL key; NULL: none */
    /* build (required): check the key's parameters and the recipe, make
     * the inputs, output templates and params (dsv4q_case_input/_output) */
    int (*build)(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen);
    /* post (default none): after build, e.g. the selection scores */
    int (*post)(dsv4q_case *c, char *err, size_t errlen);
    /* role (default none, a weightless op): c->role / in_role */
    void (*role)(dsv4q_case *c, const dsv4q_kv *kv);

    /* measurement (harness/measure/metrics.h) */
    unsigned sel;                /* bit i: output i is a selection (I32 picks, compared as a set) */
    unsigned per_pick;           /* bit i: output i holds values in the order of the selection's picks
                                    (realigned to the candidate's picks before it is compared) */
    unsigned rowfloor;           /* bit i: output i's ulp_max is row-floored */
    unsigned exact;              /* bit i: output i (I32, not a selection) must equal the reference element
                                    for element (hash ids): qualify counts the differing elements as its
                                    flips, and any one FAILs the case whatever the gates say, the message
                                    giving the count and the first differing index (docs/gates.md) */
    unsigned weight_in;          /* bit i: input i is a weight an engine may store in its own encoding
                                    (ABI v2 load_weight) */

    /* value constraints the oracle relies on beyond the shapes (default
     * none), checked on caller tensors (cli/capi.c): 0, or -1 + message */
    int (*check)(const dsv4q_bcall *c, char *err, size_t errlen);
    /* names the shape strings use beyond the tensors' own dims, derived
     * from the params (default none): fills names[]/vals[], returns how many */
    int (*shape_names)(const double *param, const char *names[4], long long vals[4]);
} dsv4q_op_info;

/* The descriptor of an operator, NULL if out of range. */
const dsv4q_op_info *dsv4q_op_get(int op);
/* The operator of a name, -1 if unknown. */
int dsv4q_op_find(const char *name);
/* 1 when output `out` of op has a row-floored ulp_max. */
int dsv4q_op_ulp_rowfloor(int op, int out);
/* The input an engine may store in its own encoding (the lowest bit of
 * the descriptor's weight_in), -1 for none. */
int dsv4q_op_weight_slot(int op);
/* The selection output (the lowest bit of sel), -1 for none. */
int dsv4q_op_sel_slot(int op);
/* 1 when output `out` of op must match the reference exactly (.exact). */
int dsv4q_op_exact(int op, int out);
/* Check the descriptors against DSV4Q_OP_LIST: each documents exactly the
 * list's arity, names are unique, every listed case is canonical (K1) and
 * builds; 0, or -1 with a message naming the operator. */
int dsv4q_op_table_check(char *err, size_t errlen);
/* docs/backends.md's generated operator section (markdown). */
void dsv4q_op_markdown(FILE *f);
/* The contract summary of abi/dsv4q_backend.h (a C comment body, one
 * paragraph per operator; `make docs` puts it between the header's
 * markers). */
void dsv4q_op_header_summary(FILE *f);

/* ---- cases by key -------------------------------------------------------- */

/* Every case the operators list, in operator order (each operator's cases
 * in its descriptor's order). */
int dsv4q_case_count(void);
const dsv4q_case_entry *dsv4q_case_at(int i);
/* Canonical form of a (possibly partial) key into out. 0 or -1 + message. */
int dsv4q_case_canon(const char *key, char *out, size_t outlen, char *err, size_t errlen);
/* Parse key, make inputs and output templates (the descriptor's build,
 * post and role hooks; tensor names from its contract). 0 or -1 + message;
 * on failure nothing is left to free. */
int dsv4q_case_build(dsv4q_case *c, const char *key, char *err, size_t errlen);

/* ---- the oracle on one call ---------------------------------------------- */

/* Run call through the oracle at width 32|64 under boundary set bs. out[i]
 * points to output i as float (width 32) or double (64) values, or
 * int32_t for the I32 outputs, each sized as call->out[i].shape says.
 * Inputs are read as F32 (their decoded values); a weight with a raw form
 * is handed to the oracle in its stored format (FP8 / FP4 / BF16 +
 * scales), so the FP8/FP4 GEMM block structure and act_quant apply exactly
 * as in the reference. Returns 0, or -1 with a message. */
int dsv4q_oracle_exec(int width, uint64_t bs, const dsv4q_bcall *call, void *const *out, char *err, size_t errlen);

#endif
