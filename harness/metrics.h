/*
 * metrics.h - the one metric set, for any pair of tensors.
 *
 * Every command that compares (sensitivity, qualify, replay, margins)
 * measures with these functions, so "NRMS" means the same thing
 * everywhere: NRMS = ||a - b||_2 / ||b||_2 with b the reference (fp64).
 * Accumulators are streaming (a tensor can arrive in pieces: prefill rows,
 * then decode rows) and summed in double in arrival order.
 */
#ifndef DSV4Q_METRICS_H
#define DSV4Q_METRICS_H

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
/* Distance in units in the last place of binary32 between a and b, both
 * rounded to binary32 first (monotone integer mapping; 0 if equal). */
double dsv4q_ulp_f32(double a, double b);

#endif
