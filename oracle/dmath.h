/*
 * dmath.h - the oracle's own elementary functions.
 *
 * Why not libm: glibc picks exp/log/sin/cos variants at run time by CPU
 * feature (FMA or not), and other platforms ship other code, so the last
 * bit of exp(x) is not a property of x alone. The oracle's results must be
 * bit-identical on every machine (goldens recorded on x86-64 pass on ARM),
 * so these functions use only IEEE +,-,*,/, sqrt, rint and ldexp/frexp in a
 * fixed order (compiled with -ffp-contract=off). Accuracy is measured
 * against MPFR in tests/test_dmath.c; the documented bound is in
 * docs/oracle.md. Float versions evaluate the double function and round
 * once (deterministic; at worst one extra half-ULP in float).
 */
#ifndef DSV4Q_DMATH_H
#define DSV4Q_DMATH_H

double dsv4q_exp(double x);    /* e^x; inf past 709.78, 0 below -745.2; NaN->NaN */
double dsv4q_log(double x);    /* natural log; -inf at 0, NaN below 0 */
double dsv4q_log1p(double x);  /* log(1+x), accurate for tiny x */
double dsv4q_sin(double x);    /* <= 0.51 ulp for |x| <= 2^20 (4-part pi/2
                                  reduction); deterministic but unasserted up
                                  to 2^52; NaN for |x| >= 2^52 */
double dsv4q_cos(double x);
double dsv4q_pow(double b, double e);  /* b > 0 only: exp(e*log(b)) with an
                                          extra-precise log; NaN for b <= 0 */
static inline float dsv4q_expf(float x) { return (float)dsv4q_exp((double)x); }
static inline float dsv4q_logf(float x) { return (float)dsv4q_log((double)x); }
static inline float dsv4q_log1pf(float x) { return (float)dsv4q_log1p((double)x); }
static inline float dsv4q_sinf(float x) { return (float)dsv4q_sin((double)x); }
static inline float dsv4q_cosf(float x) { return (float)dsv4q_cos((double)x); }
static inline float dsv4q_powf(float b, float e) { return (float)dsv4q_pow((double)b, (double)e); }

#endif
