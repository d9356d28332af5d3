/*
 * qualify.h - operator qualification of backends against the oracle.
 *
 * For every selected case: build the inputs (harness/cases/cases.h), compute the
 * reference (oracle-f64 of the backend's declared profile) and the rounding
 * level (oracle-f32 of the same profile, same inputs), run the backend
 * twice in an isolated child (harness/backend/isolate.h), measure both pairs with
 * the same metric code, and judge every gated metric as
 *     value <= factor * level + floor          (gates/gates.h)
 * with the metrics of harness/measure/metrics.h.
 * Several backends can be qualified in one pass: a case's inputs and
 * references are built once and reused for all of them (the CI suite runs
 * cpu-ref and every mutant this way).
 *
 * Declarations: the reference and the level honour the backend's declared
 * profile (base + overrides + engine storage points, dsv4q_backend.h ABI
 * v2), or the one given by the command line instead; every report prints
 * "judged as declared: <canonical declaration>". A declaration that does
 * not parse makes the backend not qualify (exit 2), never a silent default.
 */
#ifndef DSV4Q_QUALIFY_H
#define DSV4Q_QUALIFY_H

#include <stdint.h>
#include <stdio.h>
#include "harness/measure/verdict.h"
#include "harness/cases/cases.h"
#include "harness/backend/isolate.h"

typedef enum dsv4q_verdict {
    DSV4Q_V_PASS = 0,
    DSV4Q_V_FAIL,  /* a gated metric exceeds its bound */
    DSV4Q_V_ERROR, /* the backend crashed, hung, errored, overran */
    DSV4Q_V_SKIP,  /* op not in the backend's caps, or declined by its supports() */
    /* "not checkable": the reference itself is not finite (oracle-f64 or
     * oracle-f32 has a NaN, or an inf the other width does not share:
     * dsv4q_ref_finite), so no metric can judge the candidate; msg says
     * where. Never a pass; counted as a skip (cli/qreport.h: it fails under
     * --require-all / --require OP). */
    DSV4Q_V_UNCHECKABLE
} dsv4q_verdict;

/* One row of the table: a case and a metric, at the output where the
 * value is worst relative to its bound. */
typedef struct dsv4q_qrow {
    int gated, pass, out;
    double value, level, bound;
} dsv4q_qrow;

typedef struct dsv4q_qcase {
    char key[DSV4Q_CASE_KEY_MAX];
    int op, nout;
    dsv4q_verdict verdict;
    dsv4q_iso_status status;
    char msg[1024];
    int32_t dtype[DSV4Q_OPS_MAX_T];
    dsv4q_mset m[DSV4Q_OPS_MAX_T];     /* backend vs f64 */
    dsv4q_mset lvl[DSV4Q_OPS_MAX_T];   /* oracle-f32 vs f64 */
    dsv4q_qrow row[DSV4Q_M_COUNT];
    unsigned failout; /* bit i: a gated metric fails on output i */
    long tie_flips;
    double seconds;                    /* backend time (both runs, child) */
    /* Engine-stored weight (ABI v2 load_weight): m/lvl/row above are then
     * the KERNEL error (backend vs oracle on the engine's decoded weights);
     * the FORMAT error is oracle-f64 on the engine's weights vs oracle-f64
     * on the reference weights (same declaration), reported, gated only
     * with dsv4q_qualify_opts.format_gate. */
    int ew;
    char ew_name[64];                  /* "Q8_0", "F16", ... */
    double fmt_nrms, fmt_max_abs;
} dsv4q_qcase;

typedef struct dsv4q_qualify_result {
    dsv4q_backend_desc desc;
    char profile[256];                 /* the declaration as given (backend or --profile/--boundary) */
    char declared[512];                /* its canonical form (dsv4q_declaration_format) */
    const char *declared_by;           /* "the backend" | "the command line" */
    uint64_t bs;
    dsv4q_qcase *cases;
    int ncases;
    int npass, nfail, nerror, nskip;
    int nunc;                          /* not checkable (DSV4Q_V_UNCHECKABLE) */
    int load_failed;                   /* the probe failed: msg says why */
    char msg[1024];
} dsv4q_qualify_result;

typedef struct dsv4q_qualify_opts {
    const dsv4q_gates *gates;
    unsigned sets;                     /* DSV4Q_CASE_SET_* (0 = flash) */
    uint64_t ops;                      /* DSV4Q_CAP bits to run (0 = all) */
    const char *const *keys;           /* explicit case keys (NULL-terminated) instead of the table */
    long seed_lo, seed_hi;             /* > 0: every selected case once per seed in [lo, hi] (the
                                          key's seed replaced; inputs = hash(key with that seed)) */
    dsv4q_iso_opts iso;
    int quiet;                         /* no progress on stderr */
    /* A declaration ("qat:act_q8_0,kv_f16", oracle/boundary.h) that
     * replaces every backend's own (qualify --profile/--boundary), or NULL. */
    const char *declare;
    /* > 0: a case whose format error (NRMS) exceeds it FAILS (qualify
     * --format-gate); 0: the format error is reported only. */
    double format_gate;
    int stop_on_fail;                  /* stop after the first case that fails or errors for any backend
                                          (ncases then counts the cases run) */
} dsv4q_qualify_opts;

/* Parse "linear,rmsnorm,..." into op bits. 0 or -1 + message. */
int dsv4q_qualify_parse_ops(const char *list, uint64_t *bits, char *err, size_t errlen);
/* Parse "A-B" or "A" (1 <= A <= B) into a seed range. 0 or -1 + message. */
int dsv4q_qualify_parse_seeds(const char *s, long *lo, long *hi, char *err, size_t errlen);
/* Qualify n backends (specs) over the selected cases; q[i] receives the
 * results of backend i (free with dsv4q_qualify_free). Returns 0 when the
 * harness worked (whatever the verdicts), -1 with a message when it could
 * not (bad case key, out of memory). */
int dsv4q_qualify(const char *const *specs, int n, const dsv4q_qualify_opts *o, dsv4q_qualify_result *q, char *err, size_t errlen);
void dsv4q_qualify_free(dsv4q_qualify_result *q);

/* Exit status of one backend: 0 every case passed, was skipped or was not
 * checkable (and at least one passed), 1 a case failed or errored, 2 the
 * backend could not be loaded. */
int dsv4q_qualify_status(const dsv4q_qualify_result *q);

/* The report's header (backend, profile, the declaration, gate file, column
 * titles), shared by dsv4q_qualify_print and cli/qreport.c; for a backend that
 * did not load, one NOT LOADED line instead and -1 (print no rows). */
int dsv4q_qualify_print_header(FILE *f, const dsv4q_qualify_result *q, const dsv4q_gates *g);
/* Human table (case, metric, value, level, bound, verdict). all = every
 * measured metric, not only the gated ones. */
void dsv4q_qualify_print(FILE *f, const dsv4q_qualify_result *q, const dsv4q_gates *g, int all);
/* Machine form (malloc'd JSON text). */
char *dsv4q_qualify_json(const dsv4q_qualify_result *q, const dsv4q_gates *g);

const char *dsv4q_verdict_name(dsv4q_verdict v);

/* One case with the candidate's outputs already computed (two runs, as
 * dsv4q_iso_run returns them; pass the same buffers twice for one run):
 * the reference and level of profile bs, every metric of every output and
 * the gate rows, exactly as dsv4q_qualify judges a backend (same code).
 * ref_f64 (optional, [c->nout]) receives the f64 reference outputs (double,
 * or int32_t for I32 outputs; caller frees each). r->verdict is PASS, FAIL,
 * ERROR (r->msg: a candidate dtype the metrics cannot read) or UNCHECKABLE
 * (r->msg: where the reference is not finite). Returns 0,
 * or -1 with a message when the oracle could not run (out of memory). */
int dsv4q_qualify_measure(const dsv4q_case *c, uint64_t bs, void *out[2][DSV4Q_OPS_MAX_T],
                          int32_t dt[2][DSV4Q_OPS_MAX_T], const dsv4q_gates *g, dsv4q_qcase *r, void **ref_f64,
                          char *err, size_t errlen);

#endif
