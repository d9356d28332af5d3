/*
 * metrics.h - the one metric set, for any pair of tensors.
 *
 * Every command that compares a candidate with the reference (sensitivity,
 * qualify, replay and the whole-model per-stage verdict, margins, ablate,
 * the whole-model gate) measures with these functions, so "NRMS" means the
 * same thing everywhere: NRMS = ||a - b||_2 / ||b||_2 with b the reference
 * (fp64). Accumulators are streaming (a tensor can arrive in pieces:
 * prefill rows, then decode rows) and summed in double in arrival order.
 *
 * Metric definitions (per output tensor; a case reports, per metric, the
 * output with the worst value/bound):
 *  nrms, max_abs, max_rel, cos_dist  dsv4q_acc below, over finite pairs
 *  ulp_max      max ULP distance in the backend's storage dtype (F32, BF16
 *               or F16): candidate vs reference rounded to that dtype; also
 *               a histogram (buckets 0,1,2,<=4,<=8,<=16,<=64,<=256,<=4096,>).
 *               Row-floored for the attention outputs (sparse_attn and
 *               window_attn_decode `o`) and rope's `y`, never for the
 *               quantizers (their outputs sit on a grid; a flip between
 *               grid points is the defect): |a - b| in units
 *               of the dtype's ulp at max(|ref|, RMS of the reference row
 *               (last dim)), so an output near a cancellation zero does not
 *               count the ordinals between +tiny and -tiny; equal to the
 *               plain ULP for values of ordinary size (same binade)
 *  argmax_miss  rows (last dim) whose first argmax differs
 *  nonfinite    candidate values that are NaN/inf where the reference is not
 *               the same value (an unwritten output is NaN:
 *               harness/backend/isolate.h I2)
 *  jaccard_dist selections: 1 - mean over rows of |A n B| / |A u B|
 *  flips        selections: picks that differ from the reference's and are
 *               NOT explained by the tie-run at the cut (reference scores
 *               exactly equal to the k-th selected score); the explained
 *               ones are counted in tie_flips, reported, never failed.
 *               Exact I32 outputs (harness/ops/ops.h .exact: hash ids):
 *               the elements that differ from the reference at the same
 *               index (dsv4q_metrics_exact)
 *  rerun        run-to-run: max |run1 - run2| / max |ref| (floats), the
 *               fraction of differing picks (selections) or elements
 *               (exact outputs): a backend against itself
 *               (dsv4q_metrics_rerun, _rerun_sel, _exact below)
 * The level of every metric is oracle-f32 vs oracle-f64 on the same case.
 */
#ifndef DSV4Q_METRICS_H
#define DSV4Q_METRICS_H

#include <stdint.h>

typedef enum dsv4q_metric {
    DSV4Q_M_NRMS = 0,        /* ||a-b|| / ||b|| */
    DSV4Q_M_MAX_ABS,         /* max |a-b| */
    DSV4Q_M_MAX_REL,         /* max |a-b|/|b| over b != 0 */
    DSV4Q_M_ULP_MAX,         /* max ULP distance in the backend's storage dtype */
    DSV4Q_M_COS_DIST,        /* 1 - cosine */
    DSV4Q_M_ARGMAX_MISS,     /* rows whose argmax (last dim) differs */
    DSV4Q_M_NONFINITE,       /* non-finite values not matched by the reference */
    DSV4Q_M_JACCARD_DIST,    /* selections: 1 - mean Jaccard index */
    DSV4Q_M_FLIPS,           /* selections: elements outside the tie-run at the cut */
    DSV4Q_M_RERUN,           /* max |run1 - run2| / (max |ref| or 1): run-to-run */
    DSV4Q_M_COUNT
} dsv4q_metric;

typedef struct dsv4q_acc {
    double se;        /* sum (a-b)^2 over finite pairs */
    double sb;        /* sum b^2 */
    double sa;        /* sum a^2 */
    double sab;       /* sum a*b */
    double max_abs;   /* max |a-b| */
    double max_rel;   /* max |a-b| / |b| over |b| > 0 */
    long n;           /* pairs seen */
    long nonfinite_a, nonfinite_b;  /* non-finite values not matched by an
                                       identical value on the other side */
} dsv4q_acc;

/* Add n pairs (a candidate, b reference). */
void dsv4q_acc_add(dsv4q_acc *acc, const double *a, const double *b, long n);
/* NRMS; 0 if both are zero, inf if only the reference is zero. */
double dsv4q_acc_nrms(const dsv4q_acc *acc);
/* Cosine similarity of a and b; 1 for two zero vectors. */
double dsv4q_acc_cosine(const dsv4q_acc *acc);
/* Index of the first maximum of v [n] (NaN never wins). */
long dsv4q_argmax(const double *v, long n);

/* ULP distance of a (a value of storage dtype dt) from the reference b, in
 * dt's own units: BF16 / F16 codes, else binary32 (F32 and F64 both count
 * in F32 ulps). 0 when a == b, +inf when either is NaN. */
double dsv4q_ulp_in(int dt, double a, double b);


#define DSV4Q_ULP_BUCKETS 10

/* Metrics of one output tensor, candidate vs reference. NaN = n/a. */
typedef struct dsv4q_mset {
    double v[DSV4Q_M_COUNT];
    long ulp_hist[DSV4Q_ULP_BUCKETS];
    long tie_flips;
    long n;
} dsv4q_mset;

void dsv4q_mset_init(dsv4q_mset *m);
/* The float metrics of one output (candidate a of storage dtype dt
 * (dsv4q_bt_dtype) vs reference b, n values in rows of `last`), as qualify
 * and replay measure them; rowfloor: ulp_max row-floored (above; per
 * operator output: harness/ops/ops.h dsv4q_op_ulp_rowfloor). m is
 * initialised here. */
void dsv4q_metrics_float(dsv4q_mset *m, const double *a, const double *b, long n, long last, int32_t dt,
                         int rowfloor);
/* The element where ulp_max sits (same arguments and counting as
 * dsv4q_metrics_float): its index (the first of equal maxima; -1 when
 * n = 0), its ULP count in *umax (INFINITY for a NaN/Inf mismatch). */
long dsv4q_metrics_ulp_argmax(const double *a, const double *b, long n, long last, int32_t dt, int rowfloor,
                              double *umax);
/* How many elements are further from the reference than `bound` ULPs, each
 * counted exactly as ulp_max counts it (same arguments as above): the
 * elements a gated ulp_max bound rejects (a NaN/Inf mismatch counts;
 * dsv4q_gate_pass: value <= bound passes). The "mismatched elements" of a
 * failure message (cli/capi.c). */
long dsv4q_metrics_ulp_over(const double *a, const double *b, long n, long last, int32_t dt, int rowfloor,
                            double bound);
/* The selection rule on its own (exposed for tests): candidate picks B vs
 * reference picks A, both [rows, k] (-1 = none), judged with the
 * reference scores [rows, T] (NULL: every difference is a flip). Fills
 * v[DSV4Q_M_JACCARD_DIST], v[DSV4Q_M_FLIPS] and tie_flips. */
void dsv4q_metrics_sel(dsv4q_mset *m, const int32_t *B, const int32_t *A, long rows, long k, const double *scores,
                       long T);

/* The exact rule (an output that must equal the reference element for
 * element): candidate B vs reference A, n values each. Sets
 * v[DSV4Q_M_FLIPS] = the number of indices where they differ (the other
 * metrics stay n/a) and m->n; returns the first such index, -1 when they
 * are equal. m is initialised here. */
long dsv4q_metrics_exact(dsv4q_mset *m, const int32_t *B, const int32_t *A, long n);

/* rerun, floats: max |a - b| / max |ref| (1 when the reference is all
 * zero) over n values of the candidate's two runs a, b; a NaN in one run
 * only counts as infinite. */
double dsv4q_metrics_rerun(const double *a, const double *b, const double *ref, long n);
/* rerun, selections: the fraction of run-2 picks b [rows, k] (per row)
 * that run 1 a did not make; order within a row is not compared. */
double dsv4q_metrics_rerun_sel(const int32_t *a, const int32_t *b, long rows, long k);

/* The reference check (issue 29): a comparison proves nothing when the
 * reference itself is not finite (a NaN drops out of every metric, so a
 * candidate NaN where the reference is NaN scores NRMS 0). The reference
 * r64 [n] (oracle-f64) with its level r32 [n] (oracle-f32; float values
 * when r32_is_float, else double) is checkable when neither holds a NaN and
 * every infinity of one is the same infinity (same sign, same element) in
 * the other (a masked score: -inf at both widths). shape [nd] names the
 * element ("[0,5]"; nd 0: the flat index). Returns 0 when checkable;
 * else 1 with why = "reference not finite: [NAME: ]oracle-f64 has 1024
 * NaN, first at [0,0]; oracle-f32 has ..." (name may be NULL), one part
 * per width and kind (NaN; inf the other width does not share). */
int dsv4q_ref_finite(const double *r64, const void *r32, int r32_is_float, long n, const int64_t *shape, int nd,
                     const char *name, char *why, size_t len);

#endif
