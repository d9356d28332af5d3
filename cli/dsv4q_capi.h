/*
 * dsv4q_capi.h - the flat C API of libdsv4q.so for foreign callers (the
 * Python package python/dsv4q over ctypes, or a C engine's own tests).
 *
 * Why a separate surface: the internal headers (cases.h, qualify.h,
 * backend.h) change with the harness; this one only hands out plain C types
 * (ints, doubles, char pointers, the frozen ABI struct dsv4q_bt of
 * abi/dsv4q_backend.h) and JSON text, so a binding never mirrors an
 * internal struct. Every function is a thin wrapper over the functions the
 * CLI uses: dsv4q_oracle_exec (the oracle behind `qualify`),
 * dsv4q_case_build (the case keys), dsv4q_iso_run (the isolated backend
 * runs) and dsv4q_qualify_measure (the metric set and gate verdicts of
 * `qualify`, harness/qualify/qualify.h).
 *
 * Conventions: tensors are dsv4q_bt (row-major, contiguous, host memory;
 * F32 activations and decoded weights, I32 integer tensors, optional raw
 * stored form of a weight exactly as the ABI describes). Functions return
 * 0 / a pointer on success and -1 / NULL on error with a one-line message
 * in err naming the operator, tensor and what was expected; none of them
 * exits, aborts or reads past a shape it validated. Strings returned as
 * char * are malloc'd: free them with dsv4q_capi_free.
 */
#ifndef DSV4Q_CAPI_H
#define DSV4Q_CAPI_H

#include <stddef.h>
#include <stdint.h>
#include "abi/dsv4q_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4Q_CAPI_VERSION 1

/* DSV4Q_CAPI_VERSION of the library (a binding checks it at load). */
int dsv4q_capi_version(void);
void dsv4q_capi_free(void *p);

/* --- the operator table (harness/ops/ops.c) ------------------------ */

int dsv4q_capi_op_count(void);
/* Operator index of a stable lower-case name ("sparse_attn"), -1 if unknown. */
int dsv4q_capi_op_find(const char *name);
/* The whole table as JSON: [{"op", "name", "inputs": [{"name", "shape",
 * "dtype", "doc", "optional"}], "outputs": [...], "params": [{"name",
 * "doc"}], "oracle", "reference", "notes", "selection", "exact"}] (malloc'd). */
char *dsv4q_capi_ops_json(void);
/* The metric names of qualify, in order, as a JSON array (malloc'd). */
char *dsv4q_capi_metrics_json(void);

/* --- shapes ------------------------------------------------------------ */

/* Validate the inputs of one call of op against the table's shape strings
 * (symbolic dimensions are unified across tensors and params: x[s,K],
 * w[N,K] need the same K) and fill out[0..nout) with the output templates
 * (name, dtype F32 or I32, ndim, shape; data untouched). nin, nparam and
 * nout must equal the table's counts. Returns 0, or -1 with a message
 * like "linear: input w has shape [64,32], expected [N,K] with K = 48". */
int dsv4q_capi_shapes(int op, const dsv4q_bt *in, int nin, const double *param, int nparam, dsv4q_bt *out,
                      int nout, char *err, size_t errlen);

/* --- the oracle -------------------------------------------------------- */

/* Profile bits: profile "source" | "model" | "qat" | "exact" (NULL =
 * source), then boundary (NULL or "") = "name=on|off,..." deviations
 * (oracle/boundary.h). 0 or -1 with a message listing the valid names. */
int dsv4q_capi_profile(const char *profile, const char *boundary, uint64_t *bs, char *err, size_t errlen);

/* Run op through the oracle at width 64 (out[i].data: double) or 32
 * (float); I32 outputs are int32_t at both widths. Shapes are validated
 * first (dsv4q_capi_shapes); out[i].shape must equal the templates. The
 * same adapter the harness uses for references and levels. */
int dsv4q_capi_oracle(int op, int width, const char *profile, const char *boundary, const dsv4q_bt *in, int nin,
                      const double *param, int nparam, dsv4q_bt *out, int nout, char *err, size_t errlen);

/* --- qualification of given outputs ------------------------------------ */

/* Judge candidate outputs cand[0..nout) (dtype F32, BF16 or F16 codes for
 * float outputs, I32 for index outputs; shapes = the templates) of one
 * call, as `dsv4q qualify` judges a backend of that profile: reference =
 * oracle-f64, level = oracle-f32 vs oracle-f64, every metric per output,
 * bound = factor * level + floor of the gate file (gates_path NULL = the
 * default gates, dsv4q_gates_default). cand2 (or NULL = cand) is a second
 * run for the rerun metric. For topk the selection tie rule uses the
 * input scores; for moe_gate with given inputs every changed pick is a
 * flip (use dsv4q_capi_check_case for the tie rule on a case key).
 * Returns JSON (malloc'd; see python/dsv4q/_verdict.py for the fields) or
 * NULL with a message. */
char *dsv4q_capi_check(int op, const char *profile, const char *boundary, const char *gates_path, const dsv4q_bt *in,
                       int nin, const double *param, int nparam, const dsv4q_bt *cand, const dsv4q_bt *cand2,
                       int nout, char *err, size_t errlen);

/* --- case keys (harness/cases/cases.h) ---------------------------------------- */

typedef struct dsv4q_capi_case dsv4q_capi_case;

/* Build the inputs of a (possibly partial) case key. NULL + message. */
dsv4q_capi_case *dsv4q_capi_case_new(const char *key, char *err, size_t errlen);
void dsv4q_capi_case_free(dsv4q_capi_case *c);
const char *dsv4q_capi_case_key(const dsv4q_capi_case *c);   /* canonical */
int dsv4q_capi_case_op(const dsv4q_capi_case *c);
/* Borrowed views (valid until dsv4q_capi_case_free). */
const dsv4q_bt *dsv4q_capi_case_inputs(const dsv4q_capi_case *c, int *nin);
const dsv4q_bt *dsv4q_capi_case_outputs(const dsv4q_capi_case *c, int *nout);   /* templates */
const double *dsv4q_capi_case_params(const dsv4q_capi_case *c, int *nparam);
/* Run backend spec (built-in name or plugin path) twice on the case in an
 * isolated child, as qualify does: out1/out2 [nout] templates with data
 * buffers of dsv4q_capi_case_out_bytes each; dtype is set to what the
 * backend reported. Returns 0, or -1 with the isolation message. */
size_t dsv4q_capi_case_out_bytes(const dsv4q_capi_case *c, int i);
int dsv4q_capi_case_run(const dsv4q_capi_case *c, const char *spec, const char *profile, dsv4q_bt *out1,
                        dsv4q_bt *out2, char *err, size_t errlen);
/* dsv4q_capi_check on the case's own inputs (with the moe_gate tie rule
 * of the case builder): the same verdict as `dsv4q qualify --case KEY`
 * for a backend that produced cand/cand2. */
char *dsv4q_capi_check_case(const dsv4q_capi_case *c, const char *profile, const char *boundary,
                            const char *gates_path, const dsv4q_bt *cand, const dsv4q_bt *cand2, int nout, char *err,
                            size_t errlen);

/* --- receipts (cli/capi_receipts.c) ----------------------------------- */

/* Verify a receipts database as `dsv4q receipts verify` does
 * (dsv4q_receipt_verify_opts, receipts/receipts.h): db NULL or "" = the
 * default database; id 0 = the whole chain, id > 0 = that receipt and its
 * link; pubkey NULL = the default key's .pub if any (lenient), "" = no
 * signature checks, else a .pub file every receipt must be signed by;
 * allow_unsigned non-zero lets unsigned receipts pass under a NULL key.
 * Returns malloc'd JSON {"status": "OK" | "NOT VERIFIED" | "FAILED",
 * "ok": bool, "checked", "problems", "signatures_valid", "unsigned",
 * "not_checked", "head_id" (integers), "head_hash", "corrupt" (bool),
 * "report" (the verifier's lines, one per problem or note, and its
 * summary)}; NULL with err on an error (no database, not a receipts
 * database, no such id, unreadable key). */
char *dsv4q_capi_receipts_verify(const char *db, long long id, const char *pubkey, int allow_unsigned, char *err,
                                 size_t errlen);
/* The git commit the library was built from ("unknown" outside a git
 * checkout; $DSV4Q_GIT_COMMIT overrides), as receipts record it. */
const char *dsv4q_capi_git_commit(void);

#ifdef __cplusplus
}
#endif

#endif
