/*
 * margins.h - the indexer's top-k boundary, one score row at a time.
 *
 * Pure functions (no I/O, no allocation visible to the caller) used by
 * `dsv4q margins` (cli/cmd_margins.c) and its tests. Definitions are in
 * docs/margins.md; in short:
 *
 *  - BF16 quanta. q(x) is the ordinal of BF16(x) (x rounded to the nearest
 *    BF16, ties to even) in the monotone integer ordering of BF16 codes:
 *    q = code for +x, q = -(code & 0x7fff) for -x, so +0 and -0 are both 0
 *    and adjacent representable BF16 values are exactly 1 apart, across
 *    binade boundaries and across zero. The margin between two scores is
 *    q(a) - q(b): 2.0 vs the BF16 just below it = 1 quantum, 1.0 vs 0.5 =
 *    128 quanta (one binade = 128 values). Scores that are already BF16
 *    (source / model profiles: idx_score_bf16) are not moved by the
 *    rounding; unrounded scores (exact / qat) are rounded first.
 *
 *  - The boundary of a row with picks P (the k picks of the indexer; -1 =
 *    none): kth = min over P of score (the k-th selected score), next = max
 *    over the visible (finite-score) rows not in P (the (k+1)-th score).
 *    For the oracle's own top-k these are the k-th and (k+1)-th entries of
 *    the scores sorted descending. margin = q(kth) - q(next); it is
 *    undefined (has_next = 0, margin = -1) when no visible row is left
 *    outside the picks (visible <= k).
 *
 *  - Tie-run at the boundary: the visible rows whose score is EXACTLY equal
 *    to kth (the equality the top-k compares); inside = how many of them
 *    are picked, outside = how many are not (inside + outside = total).
 *    A cut with outside > 0 lies inside a run of equal scores: which of
 *    them is picked is decided by the tie rule, not by the scores.
 *
 *  - distinct: the number of distinct BF16 values (distinct q) among the
 *    picked scores.
 */
#ifndef DSV4Q_MARGINS_H
#define DSV4Q_MARGINS_H

#include <stdint.h>
#include "oracle/formats.h" /* DSV4Q_DT_* */

typedef struct dsv4q_margin {
    long k;            /* picks requested (length of the pick list) */
    long visible;      /* rows with a finite score */
    long npicks;       /* valid picks (>= 0, < T, finite score) */
    double kth;        /* k-th selected score (NaN if no valid pick) */
    double next;       /* (k+1)-th score (NaN if has_next == 0) */
    int has_next;      /* a visible row exists outside the picks */
    long margin;       /* q(kth) - q(next) in BF16 quanta; -1 if !has_next */
    long tie_total;    /* visible rows with score == kth (0 if no pick) */
    long tie_inside;   /* ... of them picked */
    long tie_outside;  /* ... of them not picked */
    long distinct;     /* distinct BF16 values among the picked scores */
} dsv4q_margin;

/* Ordinal of BF16(x) (see above). x must not be NaN; +-inf map to
 * +-0x7f80. */
long dsv4q_bf16_ordinal(double x);

/* q(a) - q(b): BF16 quanta from b up to a (negative if a < b). */
long dsv4q_bf16_quanta(double a, double b);

/* Figures of one score row: score [T] (-inf = masked), picks [k] (row
 * indices, -1 = none; duplicates and out-of-range or masked entries are
 * ignored). Returns 0, or -1 if T < 0 or k < 0 (out untouched). */
int dsv4q_margin_row(const double *score, long T, const int32_t *picks, long k, dsv4q_margin *out);

/* The engine's declared score dtype (dt: DSV4Q_DT_BF16, _F16 or _F32,
 * oracle/formats.h): the ordinal of x rounded (RNE) to dt in the same monotone
 * sign-magnitude ordering as dsv4q_bf16_ordinal, so adjacent values of dt
 * are 1 apart. Any other dt is BF16. */
long dsv4q_score_ordinal(int dt, double x);
/* dsv4q_margin_row in the quanta of dt, with the tie-run counted at dt's
 * granularity: the visible rows whose score ROUNDED to dt equals the
 * rounded kth (what an engine that stores its scores in dt sees; for
 * scores already in dt, e.g. BF16 scores under idx_score_bf16, the same
 * rows as the raw equality). margin and distinct in dt's ordinals. -1 as
 * dsv4q_margin_row, or for a dt other than BF16, F16, F32. */
int dsv4q_margin_row_dt(const double *score, long T, const int32_t *picks, long k, int dt, dsv4q_margin *out);

/* |a \ b| over the k entries of a and kb entries of b, ignoring -1
 * (support flips between two pick lists of one row; duplicates count
 * once). -1 on allocation failure. */
long dsv4q_pick_flips(const int32_t *a, long ka, const int32_t *b, long kb);

/* Nearest-rank percentile of v [n] (p in (0, 1]; p = 0.5 is the lower
 * median, p = 1 the maximum): the value of rank ceil(p n) in ascending
 * order. Sorts a copy into tmp [n]. NaN if n == 0. */
double dsv4q_percentile(const double *v, long n, double p, double *tmp);

#endif
