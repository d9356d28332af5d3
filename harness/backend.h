/*
 * backend.h - finding a backend: built-ins by name, plugins by path, and
 * the per-operator contract table (harness/backend_ops.c) that documents
 * harness/dsv4q_backend.h and generates docs/backends.md.
 *
 * Built-in names (harness/backend_registry.c):
 *   oracle-f32      the oracle's _f32 instance behind the ABI (any profile:
 *                   it follows call->boundaries); it IS the rounding level
 *   cpu-ref         an independent CPU implementation (harness/cpuref/),
 *                   registered through dsv4q_cpuref_backend(NULL)
 *   mutant:NAME     cpu-ref with one deliberate bug, dsv4q_cpuref_backend(NAME)
 * A spec containing '/' or ending in ".so" is a plugin path (dlopen'd in
 * the isolated child, never in the harness process: harness/isolate.h).
 */
#ifndef DSV4Q_HARNESS_BACKEND_H
#define DSV4Q_HARNESS_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "harness/dsv4q_backend.h"

/* The oracle-f32 backend (harness/backend_oracle.c). Its profile field is
 * "source"; it honours call->boundaries, so it can stand in for any
 * profile. */
const dsv4q_backend_v1 *dsv4q_backend_oracle_f32(void);

/* Built-in backend by name (see above); NULL if unknown. */
const dsv4q_backend_v1 *dsv4q_backend_builtin(const char *name);
/* Names of the built-ins for usage messages (", "-separated into buf),
 * including "mutant:NAME" for every mutant cpu-ref reports. */
void dsv4q_backend_builtin_list(char *buf, size_t len);
/* The mutant names cpu-ref provides (NULL-terminated), or NULL when cpu-ref
 * is not built into this tree. */
const char *const *dsv4q_backend_mutants(void);
/* 1 if spec names a plugin file rather than a built-in. */
int dsv4q_backend_is_path(const char *spec);

/* Hook implemented by harness/cpuref/ (the cpu-ref backend and its
 * mutants): NULL mutant = cpu-ref; else the named mutant, NULL if unknown.
 * dsv4q_cpuref_mutants() lists the mutant names, NULL-terminated. */
const dsv4q_backend_v1 *dsv4q_cpuref_backend(const char *mutant_or_null);
const char *const *dsv4q_cpuref_mutants(void);

/* Check a backend descriptor (ABI version, struct size, entry points,
 * profile). Returns 0 or -1 with a message naming what is wrong. */
int dsv4q_backend_validate(const dsv4q_backend_v1 *b, const char *spec, char *err, size_t errlen);

/* The v2 view of a descriptor: b itself when it says ABI 2 and its
 * struct_size covers dsv4q_backend_v2, else NULL (a v1 backend: no
 * supports hook). */
const dsv4q_backend_v2 *dsv4q_backend_v2_of(const dsv4q_backend_v1 *b);

/* Number of elements of a tensor (product of its shape; 0 if ndim 0). The
 * one copy (cpu-ref, the ABI provider and oracle_exec use it). */
int64_t dsv4q_bt_numel(const dsv4q_bt *t);

/* --- the per-operator contract (one table) ---------------------------- */

#define DSV4Q_OPS_MAX_T 8
#define DSV4Q_OPS_MAX_P 12

typedef struct dsv4q_op_tensor {
    const char *name;    /* "x" */
    const char *shape;   /* "[s,K]" with meanings in doc */
    const char *dtype;   /* "F32", "I32", "F32 + raw" */
    const char *doc;     /* one line */
} dsv4q_op_tensor;

typedef struct dsv4q_op_info {
    int op;
    const char *name;            /* "linear", "sparse_attn" (lower case, stable) */
    int nin, nout, nparam;
    dsv4q_op_tensor in[DSV4Q_OPS_MAX_T], out[DSV4Q_OPS_MAX_T];
    const char *param[DSV4Q_OPS_MAX_P];   /* "ue8m0: ..." */
    const char *oracle;          /* "oracle/linear.c dsv4q_linear" */
    const char *reference;       /* "model.py linear; kernel.py fp8_gemm" */
    const char *boundaries;      /* rounding points it contains */
    const char *notes;
    int selection;               /* output 0/1 is compared as a set */
    const char *ename;           /* "DSV4Q_OP_LINEAR" (generated) */
} dsv4q_op_info;

/* Glue of the ABI provider (harness/provider_abi.c, which qualify
 * --whole-model and capture --backend run), so it routes MoE exactly like
 * oracle/moe.c. */

/* DSV4Q_SCORE_* code of a config score_func name (sqrtsoftplus default). */
int dsv4q_score_func_code(const char *score_func);
/* Gather the rows routed to expert e: for token t and pick j with
 * ix[t*k+j] == e (t ascending), rows[n] = t, we[n] = wts[t*k+j] and
 * xe[n] = x[t] ([d] floats). Returns n. Shapes: ix, wts [s,k]; x [s,d];
 * rows, we [>= s*k]; xe [>= s*k, d]. Mirrors oracle/moe.c dsv4q_moe. */
long dsv4q_moe_gather(const int32_t *ix, const float *wts, const float *x, long s, int k, long d, int e,
                      long *rows, float *we, float *xe);

const dsv4q_op_info *dsv4q_op_get(int op);       /* NULL if out of range */
int dsv4q_op_find(const char *name);             /* -1 if unknown */
/* Check the table against DSV4Q_OP_LIST: every row documents exactly the
 * list's arity, names are unique. 0, or -1 with a message naming the row. */
int dsv4q_op_table_check(char *err, size_t errlen);
/* docs/backends.md's generated operator section (markdown). */
void dsv4q_op_markdown(FILE *f);

#endif
