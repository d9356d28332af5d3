/*
 * ops.h - the operators of the backend ABI as the harness sees them: the
 * per-operator contract table (harness/ops/ops.c) that documents
 * abi/dsv4q_backend.h and generates docs/backends.md, and the small
 * helpers every caller of the ABI shares.
 */
#ifndef DSV4Q_HARNESS_OPS_H
#define DSV4Q_HARNESS_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "abi/dsv4q_backend.h"

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

/* Glue of the ABI provider (harness/provider/provider_abi.c, which qualify
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
/* 1 when output `out` of op has a row-floored ulp_max
 * (harness/measure/metrics.h): the attention outputs and rope's y. */
int dsv4q_op_ulp_rowfloor(int op, int out);
/* Check the table against DSV4Q_OP_LIST: every row documents exactly the
 * list's arity, names are unique. 0, or -1 with a message naming the row. */
int dsv4q_op_table_check(char *err, size_t errlen);
/* docs/backends.md's generated operator section (markdown). */
void dsv4q_op_markdown(FILE *f);

#endif
