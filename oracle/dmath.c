/*
 * dmath.c - the oracle's deterministic exp, log, log1p, sin, cos, pow.
 *
 * Owns bit-reproducible elementary functions (see dmath.h for why libm is
 * not used). Only IEEE +, -, *, / and the exact operations rint, frexp and
 * ldexp appear, in a fixed order; the Makefile's -ffp-contract=off keeps the
 * compiler from fusing a*b+c, so every machine rounds the same steps.
 *
 * Accuracy comes from double-double (dd: an unevaluated sum hi + lo) in the
 * few steps where a plain double would lose the last bit: the final sum of
 * each kernel, the whole of log (so that pow can use its low part), and the
 * argument reductions. High-order polynomial tails stay in plain double,
 * where their rounding is far below the result's ULP. Each function ends in
 * one rounding of a dd value, so results are within a hair of 0.5 ULP;
 * tests/test_dmath.c measures them against MPFR.
 *
 * Polynomials are truncated Taylor series (coefficients 1/n! and 1/(2n+1)
 * are single correctly rounded divisions, or dd constants where the term
 * matters at the last bit), with enough terms that truncation is < 2^-62
 * relative on the reduced ranges stated below.
 */
#include "oracle/dmath.h"

#include <float.h>
#include <math.h>

/* The double-double steps assume every operation rounds to binary64 (no x87
 * excess precision); anything else would change results, so refuse it. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "dmath.c needs FLT_EVAL_METHOD == 0 (binary64 arithmetic, e.g. SSE2 or AArch64)"
#endif

/* ---- double-double primitives ------------------------------------------ */

typedef struct { double hi, lo; } dd;

/* s + e == a + b exactly (Knuth). */
static inline dd two_sum(double a, double b) {
    double s = a + b, bb = s - a;
    dd r = { s, (a - (s - bb)) + (b - bb) };
    return r;
}

/* Same, requires |a| >= |b| (or a == 0) (Dekker). */
static inline dd fast_two_sum(double a, double b) {
    double s = a + b;
    dd r = { s, b - (s - a) };
    return r;
}

/* p + e == a * b exactly (Dekker/Veltkamp split; no FMA so that the result
 * does not depend on the machine). Valid for |a|, |b| < 2^996 and products
 * away from underflow; every caller stays inside that. */
static inline dd two_prod(double a, double b) {
    const double c = 134217729.0; /* 2^27 + 1 */
    double t = c * a, ah = t - (t - a), al = a - ah;
    t = c * b;
    double bh = t - (t - b), bl = b - bh;
    double p = a * b;
    dd r = { p, ((ah * bh - p) + ah * bl + al * bh) + al * bl };
    return r;
}

static inline dd dd_add(dd a, dd b) {
    dd s = two_sum(a.hi, b.hi);
    return fast_two_sum(s.hi, s.lo + (a.lo + b.lo));
}

static inline dd dd_mul(dd a, dd b) {
    dd p = two_prod(a.hi, b.hi);
    return fast_two_sum(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}

static inline dd dd_d(double a) { dd r = { a, 0.0 }; return r; }
static inline dd dd_neg(dd a) { dd r = { -a.hi, -a.lo }; return r; }

/* ---- constants (from MPFR at 400 bits) -------------------------------- */

/* ln 2 as dd, for log (k*ln2 is formed with two_prod, exact). */
static const dd LN2 = { 0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56 };
/* ln 2 split for exp's Cody-Waite step: LN2_HI has 29 significant bits, so
 * k*LN2_HI is exact for |k| < 2^24 (exp needs |k| <= 1077). */
static const double LN2_HI = 0x1.62e42ffp-1;
static const double LN2_LO = -0x1.718432a1b0e26p-35;
static const double LOG2E = 0x1.71547652b82fep+0;
/* pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + PIO2_4 + O(2^-177): the first two have
 * 33 significant bits, so k*PIO2_1 and k*PIO2_2 are exact for |k| < 2^20;
 * the last two are full doubles, multiplied exactly with two_prod. */
static const double PIO2_1 = 0x1.921fb544p+0;
static const double PIO2_2 = 0x1.0b4611a6p-34;
static const double PIO2_3 = 0x1.3198a2e037073p-69;
static const double PIO2_4 = 0x1.129024e088a68p-123;
static const double TWO_OVER_PI = 0x1.45f306dc9c883p-1;
static const double PIO4 = 0x1.921fb54442d18p-1;
static const double SQRT_HALF = 0x1.6a09e667f3bcdp-1;
/* 1/3, 1/5, 1/7, -1/6, 1/24, 1/120, -1/720 as dd. */
static const dd C_1_3 = { 0x1.5555555555555p-2, 0x1.5555555555555p-56 };
static const dd C_1_5 = { 0x1.999999999999ap-3, -0x1.999999999999ap-57 };
static const dd C_1_7 = { 0x1.2492492492492p-3, 0x1.2492492492492p-57 };
static const dd C_M1_6 = { -0x1.5555555555555p-3, -0x1.5555555555555p-57 };
static const dd C_1_24 = { 0x1.5555555555555p-5, 0x1.5555555555555p-59 };
static const dd C_1_120 = { 0x1.1111111111111p-7, 0x1.1111111111111p-63 };
static const dd C_M1_720 = { -0x1.6c16c16c16c17p-10, 0x1.f49f49f49f49fp-65 };

/* Polynomial coefficients: each a single correctly rounded division of
 * exact doubles (n! is exact for n <= 22), folded at compile time. */
static const double EXP_C[12] = { /* 1/n!, n = 4..15 */
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362880.0,
    1.0 / 3628800.0,
    1.0 / 39916800.0,
    1.0 / 479001600.0,
    1.0 / 6227020800.0,
    1.0 / 87178291200.0,
    1.0 / 1307674368000.0,
};
static const double SIN_C[7] = { /* (-1)^i / (2i+7)!, i = 0..6 */
    -1.0 / 5040.0,
    1.0 / 362880.0,
    -1.0 / 39916800.0,
    1.0 / 6227020800.0,
    -1.0 / 1307674368000.0,
    1.0 / 355687428096000.0,
    -1.0 / 121645100408832000.0,
};
static const double COS_C[7] = { /* (-1)^i / (2i+8)!, i = 0..6 */
    1.0 / 40320.0,
    -1.0 / 3628800.0,
    1.0 / 479001600.0,
    -1.0 / 87178291200.0,
    1.0 / 20922789888000.0,
    -1.0 / 6402373705728000.0,
    1.0 / 2432902008176640000.0,
};
static const double LOG_C[11] = { /* 1/(2n+1), n = 4..14 */
    1.0 / 9.0,
    1.0 / 11.0,
    1.0 / 13.0,
    1.0 / 15.0,
    1.0 / 17.0,
    1.0 / 19.0,
    1.0 / 21.0,
    1.0 / 23.0,
    1.0 / 25.0,
    1.0 / 27.0,
    1.0 / 29.0,
};

/* ---- log ------------------------------------------------------------------ */

/* ln(x) as dd, relative error ~2^-75, for finite x > 0 (subnormals too).
 * x = m * 2^k with m in [sqrt(1/2), sqrt(2)); ln(m) = 2 atanh(s) with
 * s = (m-1)/(m+1), |s| <= 0.1716, so z = s^2 <= 0.0295 and
 * ln(m) = 2s (1 + z/3 + z^2/5 + ... ), 15 terms (truncation < 2^-80). */
static dd log_dd(double x) {
    int k;
    double m = frexp(x, &k); /* exact, m in [0.5, 1) */
    if (m < SQRT_HALF) { m *= 2.0; k--; }
    double f = m - 1.0;      /* exact (Sterbenz) */
    /* s = f / (2 + f) in dd: 2 + f held exactly, one correction step. */
    dd d = two_sum(2.0, f);
    double sh = f / d.hi;
    dd p = two_prod(sh, d.hi);
    double sl = (((f - p.hi) - p.lo) - sh * d.lo) / d.hi; /* f - p.hi exact */
    dd s = fast_two_sum(sh, sl);
    dd z = dd_mul(s, s);
    /* Tail 1/9 + z/11 + ... + z^11/29 in double: it enters at z^4/9 < 2^-28
     * relative, so its rounding is ~2^-80 of the result. */
    double t = LOG_C[10];
    for (int i = 9; i >= 0; i--) t = t * z.hi + LOG_C[i];
    dd q = dd_add(C_1_7, dd_d(z.hi * t));
    q = dd_add(C_1_5, dd_mul(z, q));
    q = dd_add(C_1_3, dd_mul(z, q));
    q = dd_add(dd_d(1.0), dd_mul(z, q));
    dd lm = dd_mul(s, q);
    lm.hi *= 2.0; lm.lo *= 2.0; /* exact */
    if (k == 0) return lm;
    dd kl = two_prod((double)k, LN2.hi);
    kl = fast_two_sum(kl.hi, kl.lo + (double)k * LN2.lo);
    return dd_add(kl, lm);
}

double dsv4q_log(double x) {
    if (isnan(x)) return x + x;
    if (x < 0.0) return NAN;
    if (x == 0.0) return -INFINITY;
    if (isinf(x)) return x;
    return log_dd(x).hi; /* hi is the rounded sum (fast_two_sum) */
}

double dsv4q_log1p(double x) {
    if (isnan(x)) return x + x;
    if (x < -1.0) return NAN;
    if (x == -1.0) return -INFINITY;
    if (isinf(x) || x == 0.0) return x; /* +inf; keeps -0 */
    /* 1 + x = u.hi + u.lo exactly, so log1p(x) = ln(u.hi) + ln(1 + t) with
     * t = u.lo / u.hi, |t| <= 2^-53: ln(1+t) = t - t^2/2 to < 2^-159. When
     * u.hi == 1 (|x| < 2^-53) the first term is 0 and the result is x - x^2/2,
     * so tiny x comes back exact. */
    dd u = two_sum(1.0, x);
    double th = u.lo / u.hi;
    dd p = two_prod(th, u.hi);
    double tl = ((u.lo - p.hi) - p.lo) / u.hi;
    dd lt = fast_two_sum(th, tl - 0.5 * th * th);
    if (u.hi == 1.0) return lt.hi;
    return dd_add(log_dd(u.hi), lt).hi;
}

/* ---- exp ------------------------------------------------------------------ */

/* e^(xh + xl), |xl| <= ulp(xh). k = rint(xh/ln2), r = x - k ln2 carried as
 * dd (|r| <= 0.3466), e^r by Taylor through r^15/15! (truncation < 2^-68),
 * summed so that only the last addition rounds at the result's ULP, then
 * scaled by 2^k with no second rounding, subnormal results included. */
static double exp_dd(double xh, double xl) {
    if (isnan(xh)) return xh + xh;
    if (xh > 709.79) return INFINITY; /* ln(DBL_MAX) = 709.7827... */
    if (xh < -746.0) return 0.0;      /* below half the least subnormal */
    double k = rint(xh * LOG2E);
    /* Exact: k*LN2_HI needs <= 40 bits, and the difference is a multiple of
     * the finer of the two ULPs (>= 2^-54 once k != 0) below 0.5 in size. */
    double r1 = xh - k * LN2_HI;
    dd r = two_sum(r1, xl - k * LN2_LO);
    double rh = r.hi, rl = r.lo;
    /* e^r = 1 + r + r^2/2 + r^3/6 + r^4 (1/24 + ... + r^11/15!). The first
     * four terms are exact or dd; the tail enters at r^4/24 < 6e-4, so
     * plain double is ~2^-63 of the result. */
    double p = EXP_C[11];
    for (int i = 10; i >= 0; i--) p = p * rh + EXP_C[i];
    double r2 = rh * rh;
    p = (r2 * r2) * p;
    dd h = two_prod(rh, rh);                         /* r^2/2, exact */
    h.hi *= 0.5; h.lo *= 0.5;
    dd c = dd_mul(h, dd_mul(dd_d(rh), C_1_3));      /* r^3/6 */
    dd s = two_sum(rh, h.hi);
    dd s2 = two_sum(s.hi, c.hi);
    /* e^(rh+rl) = e^rh (1 + rl) to 2^-110; e^rh - 1 ~ s2.hi suffices for rl. */
    double lo = (s.lo + s2.lo) + ((h.lo + c.lo) + (p + (rl + rl * s2.hi)));
    dd t = two_sum(1.0, s2.hi);
    int ki = (int)k;
    if (ki > -1022) /* one rounding at the result ULP; ldexp exact or inf */
        return ldexp(t.hi + (t.lo + lo), ki);
    /* Result below 2^-1021: its grid is 2^-1074, coarser than 53 bits, so
     * rounding to 53 bits first and then to the grid would round twice.
     * Instead count grid units exactly: a + b = result / 2^-1074 with a, b
     * exact scalings (a < 2^53), and round a + b to an integer once. */
    double a = ldexp(t.hi, ki + 1074), b = ldexp(t.lo + lo, ki + 1074);
    double ai = rint(a);
    return ldexp(ai + rint((a - ai) + b), -1074); /* a - ai exact */
}

double dsv4q_exp(double x) { return exp_dd(x, 0.0); }

/* ---- pow ------------------------------------------------------------------ */

double dsv4q_pow(double b, double e) {
    if (isnan(b) || !(b > 0.0)) return NAN;   /* domain is b > 0 only */
    if (b == 1.0 || e == 0.0) return 1.0;
    if (isnan(e)) return e + e;
    if (isinf(b)) return e > 0.0 ? INFINITY : 0.0;
    /* y = e * ln(b) in dd; ln(b) carries ~2^-75 relative error, so y is good
     * to ~2^-65 absolute even at |y| ~ 745 and the result stays near 0.5 ULP. */
    dd l = log_dd(b);
    double y0 = e * l.hi;
    if (isinf(e) || !(fabs(y0) <= 746.0)) return y0 > 0.0 ? INFINITY : 0.0;
    dd y = two_prod(e, l.hi);
    y = fast_two_sum(y.hi, y.lo + e * l.lo);
    return exp_dd(y.hi, y.lo);
}

/* ---- sin / cos -------------------------------------------------------------- */

/* x = k pi/2 + r, r as dd, returns k mod 4. Cody-Waite with pi/2 in four
 * parts, valid to |x| <= 2^20 (|k| < 2^20): k*PIO2_1 and k*PIO2_2 are exact
 * doubles, k*PIO2_3 and k*PIO2_4 exact dd products, x - k*PIO2_1 is exact
 * (Sterbenz), and the dd additions lose nothing even when r is tiny. Three
 * parts (pi/2 to 2^-123) are not enough: the double nearest 204551*pi/2 has
 * |r| ~ 2^-60, and k*2^-124 would cost 3 ULP there; four parts leave an
 * error of |k| 2^-177. Between 2^20 and 2^52 the same steps still run
 * deterministically (two_prod keeps every product exact) but k = rint(x 2/pi)
 * is no longer certain to be the nearest integer and the tests do not cover
 * that range. Beyond 2^52 the quadrant is lost without a Payne-Hanek
 * reduction; sin/cos return NaN there rather than a wrong number. */
static int reduce_pio2(double x, dd *r) {
    double k = rint(x * TWO_OVER_PI);
    dd a = two_prod(k, PIO2_1);
    dd acc = two_sum(x - a.hi, -a.lo);
    acc = dd_add(acc, dd_neg(two_prod(k, PIO2_2)));
    acc = dd_add(acc, dd_neg(two_prod(k, PIO2_3)));
    acc = dd_add(acc, dd_neg(two_prod(k, PIO2_4)));
    *r = acc;
    double q = k - 4.0 * rint(k * 0.25); /* k mod 4 in {-2..2}, exact */
    return (int)q & 3;
}

/* sin(r), |r| <= pi/4 (+tiny): r (1 + z Q), z = r^2, Q = -1/6 + z/120 - ...
 * through r^19/19! (truncation < 2^-72). */
static double sin_kernel(dd r) {
    dd z = two_prod(r.hi, r.hi);
    z = fast_two_sum(z.hi, z.lo + 2.0 * r.hi * r.lo);
    /* Q = -1/3! + z (1/5! + z t), t = -1/7! + z/9! - ... - z^6/19! in double:
     * it enters at z^2/7! < 2^-13 of Q, the two leading terms are dd. */
    double t = SIN_C[6];
    for (int i = 5; i >= 0; i--) t = t * z.hi + SIN_C[i];
    dd q = dd_add(C_1_120, dd_d(z.hi * t));
    q = dd_add(C_M1_6, dd_mul(z, q));
    dd p = dd_mul(r, dd_mul(z, q));
    return dd_add(r, p).hi;
}

/* cos(r), |r| <= pi/4 (+tiny): 1 + z (-1/2 + z (1/24 + z C)), C = -1/720 +
 * z/8! - ... through r^20/20! (truncation < 2^-68). */
static double cos_kernel(dd r) {
    dd z = two_prod(r.hi, r.hi);
    z = fast_two_sum(z.hi, z.lo + 2.0 * r.hi * r.lo);
    /* C = -1/6! + z t, t = 1/8! - z/10! + ... + z^6/20! in double: it enters
     * at z/8! < 2^-16 of C's leading term; -1/6! and 1/4! are dd. */
    double t = COS_C[6];
    for (int i = 5; i >= 0; i--) t = t * z.hi + COS_C[i];
    dd w = dd_add(C_M1_720, dd_d(z.hi * t));
    w = dd_add(C_1_24, dd_mul(z, w));
    dd v = dd_add(dd_d(-0.5), dd_mul(z, w));
    return dd_add(dd_d(1.0), dd_mul(z, v)).hi;
}

double dsv4q_sin(double x) {
    if (isnan(x) || isinf(x)) return x - x;   /* NaN */
    double ax = fabs(x);
    if (ax < 0x1p-26) return x;               /* sin x = x(1 - x^2/6) rounds to x; keeps -0 */
    if (ax <= PIO4) return sin_kernel(dd_d(x));
    if (ax >= 0x1p52) return NAN;             /* see reduce_pio2 */
    dd r;
    switch (reduce_pio2(x, &r)) {
    case 0: return sin_kernel(r);
    case 1: return cos_kernel(r);
    case 2: return -sin_kernel(r);
    default: return -cos_kernel(r);
    }
}

double dsv4q_cos(double x) {
    if (isnan(x) || isinf(x)) return x - x;
    double ax = fabs(x);
    if (ax < 0x1p-27) return 1.0;             /* 1 - x^2/2 rounds to 1 */
    if (ax <= PIO4) return cos_kernel(dd_d(x));
    if (ax >= 0x1p52) return NAN;             /* see reduce_pio2 */
    dd r;
    switch (reduce_pio2(x, &r)) {
    case 0: return cos_kernel(r);
    case 1: return -sin_kernel(r);
    case 2: return -cos_kernel(r);
    default: return sin_kernel(r);
    }
}
