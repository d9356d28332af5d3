/*
 * mpref.h - shared MPFR reference helpers for the operator tests
 * (tests/test_ops_*.c).
 *
 * Owns three things the operator tests must not take from the code under
 * test: (1) deterministic inputs - splitmix64 from a fixed seed, no OS
 * entropy and no libm in the input path, so every machine feeds the same
 * bits; (2) reference arithmetic - MPFR at MP_PREC = 200 bits, plus number
 * format decoders written here from the bit layout (OPERATORS.md section 1),
 * never oracle/formats.c; (3) error metrics - NRMS, max relative and ULP
 * errors measured against the unrounded MPFR value (the difference is formed
 * in MPFR, so a reference rounded to double never hides an error of the
 * fp64 instance).
 *
 * Everything is `static inline` so a test that uses a subset compiles
 * cleanly under -Wall -Werror. MPFR is built thread-safe (TLS) on the
 * supported platforms; helpers keep no global state, so callers may run
 * them from several OpenMP threads with per-thread temporaries.
 */
#ifndef DSV4Q_TESTS_MPREF_H
#define DSV4Q_TESTS_MPREF_H

#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MP_PREC 200
#define MP_U64 0x1p-53 /* unit roundoff of binary64 */
#define MP_U32 0x1p-24 /* unit roundoff of binary32 */

/* ---- deterministic inputs ----------------------------------------------- */

typedef struct { uint64_t s; } mp_rng;

/* Seed from a case key (FNV-1a), so a case's inputs follow its name. */
static inline void mp_rng_seed(mp_rng *r, const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    r->s = h;
}

static inline uint64_t mp_rng_u64(mp_rng *r) /* splitmix64 */
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double mp_rng_u01(mp_rng *r) { return (double)(mp_rng_u64(r) >> 11) * 0x1p-53; }
static inline double mp_rng_unif(mp_rng *r, double a, double b) { return a + (b - a) * mp_rng_u01(r); }
static inline int mp_rng_int(mp_rng *r, int n) { return (int)(mp_rng_u64(r) % (uint64_t)n); }
/* Uniform in [a, b), rounded to binary32: identical input for both widths. */
static inline double mp_rng_f32(mp_rng *r, double a, double b) { return (double)(float)mp_rng_unif(r, a, b); }
/* Roughly normal with standard deviation sd (Irwin-Hall of 4 uniforms,
 * rescaled to unit variance; only +,-,* so no libm), rounded to binary32. */
static inline double mp_rng_gauss_f32(mp_rng *r, double sd)
{
    double s = mp_rng_u01(r) + mp_rng_u01(r) + mp_rng_u01(r) + mp_rng_u01(r);
    return (double)(float)((s - 2.0) * 1.7320508075688772 * sd);
}

/* ---- MPFR vectors and exact dots ------------------------------------------ */

static inline mpfr_t *mp_vec_new(long n)
{
    mpfr_t *v = malloc(sizeof(mpfr_t) * (size_t)(n ? n : 1));
    if (v)
        for (long i = 0; i < n; i++) {
            mpfr_init2(v[i], MP_PREC);
            mpfr_set_zero(v[i], 1);
        }
    return v;
}

static inline void mp_vec_free(mpfr_t *v, long n)
{
    if (!v) return;
    for (long i = 0; i < n; i++) mpfr_clear(v[i]);
    free(v);
}

/* acc += a*b for doubles. When the double product is exact (fma residual 0:
 * always the case for a stored-format code times a binary32 value) it is
 * added directly; otherwise the product is formed in MPFR. Either way the
 * term enters exactly; the sum rounds at MP_PREC bits. */
static inline void mp_addmul_dd(mpfr_t acc, double a, double b, mpfr_t tmp)
{
    double p = a * b;
    if (isfinite(p) && fma(a, b, -p) == 0.0 && (p != 0.0 || a == 0.0 || b == 0.0)) {
        mpfr_add_d(acc, acc, p, MPFR_RNDN);
    } else {
        mpfr_set_d(tmp, a, MPFR_RNDN);
        mpfr_mul_d(tmp, tmp, b, MPFR_RNDN);
        mpfr_add(acc, acc, tmp, MPFR_RNDN);
    }
}

/* out = sum_i a[i] * b[i*bstride] (exact terms, 200-bit sum). */
static inline void mp_dot_d(mpfr_t out, const double *a, const double *b, long n, long bstride, mpfr_t tmp)
{
    mpfr_set_zero(out, 1);
    for (long i = 0; i < n; i++) mp_addmul_dd(out, a[i], b[i * bstride], tmp);
}

/* out = sum_i a[i] * b[i] with a in MPFR. */
static inline void mp_dot_md(mpfr_t out, mpfr_t *a, const double *b, long n, mpfr_t tmp)
{
    mpfr_set_zero(out, 1);
    for (long i = 0; i < n; i++) {
        if (b[i] == 0.0) continue;
        mpfr_mul_d(tmp, a[i], b[i], MPFR_RNDN);
        mpfr_add(out, out, tmp, MPFR_RNDN);
    }
}

/* ---- error metrics ------------------------------------------------------ */

/* Accumulates got - ref over a tensor. nrms = sqrt(sum d^2 / sum ref^2);
 * maxrel = max|d| / max|ref| (normwise, robust to ref entries near 0). */
typedef struct {
    double se, sr, maxabs, maxref;
    long n, nonfinite;
} mp_err;

static inline void mp_err_add(mp_err *e, double got, mpfr_srcptr ref)
{
    e->n++;
    double r = mpfr_get_d(ref, MPFR_RNDN);
    e->sr += r * r;
    if (fabs(r) > e->maxref) e->maxref = fabs(r);
    if (!isfinite(got)) {
        e->nonfinite++;
        return;
    }
    mpfr_t d;
    mpfr_init2(d, MP_PREC + 64);
    mpfr_sub_d(d, ref, got, MPFR_RNDN);
    double dd = fabs(mpfr_get_d(d, MPFR_RNDN));
    mpfr_clear(d);
    e->se += dd * dd;
    if (dd > e->maxabs) e->maxabs = dd;
}

static inline void mp_err_add_d(mp_err *e, double got, double ref)
{
    mpfr_t r;
    mpfr_init2(r, MP_PREC);
    mpfr_set_d(r, ref, MPFR_RNDN);
    mp_err_add(e, got, r);
    mpfr_clear(r);
}

static inline double mp_err_nrms(const mp_err *e)
{
    if (e->nonfinite) return INFINITY;
    return e->sr > 0 ? sqrt(e->se / e->sr) : sqrt(e->se);
}

static inline double mp_err_maxrel(const mp_err *e)
{
    if (e->nonfinite) return INFINITY;
    return e->maxref > 0 ? e->maxabs / e->maxref : e->maxabs;
}

/* |got - exact| in ULPs of the exact value, for a format with `p` bits of
 * precision (53 binary64, 24 binary32); 0 ULP for exact zero matches. */
static inline double mp_ulp_err(double got, mpfr_srcptr exact, int p)
{
    if (mpfr_zero_p(exact)) return got == 0.0 ? 0.0 : INFINITY;
    if (!isfinite(got)) return INFINITY;
    mpfr_t d;
    mpfr_init2(d, MP_PREC + 64);
    mpfr_sub_d(d, exact, got, MPFR_RNDN);
    mpfr_abs(d, d, MPFR_RNDN);
    long e = (long)mpfr_get_exp(exact) - 1; /* |exact| in [2^e, 2^(e+1)) */
    mpfr_mul_2si(d, d, -(e - (p - 1)), MPFR_RNDN);
    double r = mpfr_get_d(d, MPFR_RNDN);
    mpfr_clear(d);
    return r;
}

/* ---- reference formulas shared by several tests --------------------------- */

/* RoPE frequency f_i (OPERATORS.md section 4) in MPFR: base^(-2i/r), then the
 * YaRN blend f/factor*ramp + f*(1-ramp) when original_seq_len > 0, with
 * c(n) = r*ln(osl/(n*2*pi)) / (2*ln base), lo = max(floor(c(beta_fast)), 0),
 * hi = min(ceil(c(beta_slow)), r-1), hi += 0.001 if lo == hi. */
static inline void mp_rope_freq(mpfr_t f, int i, int r, double base, int osl, double factor,
                                double beta_fast, double beta_slow)
{
    mpfr_t b, t, u;
    mpfr_inits2(MP_PREC, b, t, u, (mpfr_ptr)0);
    mpfr_set_d(b, base, MPFR_RNDN);
    mpfr_set_si(t, -2 * i, MPFR_RNDN);
    mpfr_div_si(t, t, r, MPFR_RNDN);
    mpfr_pow(f, b, t, MPFR_RNDN);
    if (osl > 0) {
        double c[2], beta[2] = {beta_fast, beta_slow};
        for (int k = 0; k < 2; k++) {
            mpfr_const_pi(t, MPFR_RNDN);
            mpfr_mul_d(t, t, 2.0 * beta[k], MPFR_RNDN);
            mpfr_si_div(t, osl, t, MPFR_RNDN);
            mpfr_log(t, t, MPFR_RNDN);
            mpfr_mul_si(t, t, r, MPFR_RNDN);
            mpfr_log(u, b, MPFR_RNDN);
            mpfr_mul_2ui(u, u, 1, MPFR_RNDN);
            mpfr_div(t, t, u, MPFR_RNDN);
            c[k] = mpfr_get_d(t, MPFR_RNDN);
        }
        double lo = floor(c[0]), hi = ceil(c[1]);
        if (lo < 0) lo = 0;
        if (hi > r - 1) hi = r - 1;
        if (lo == hi) hi += 0.001;
        /* ramp = clamp((i - lo)/(hi - lo), 0, 1) */
        mpfr_set_d(t, (double)i - lo, MPFR_RNDN);
        mpfr_set_d(u, hi, MPFR_RNDN);
        mpfr_sub_d(u, u, lo, MPFR_RNDN);
        mpfr_div(t, t, u, MPFR_RNDN);
        if (mpfr_cmp_si(t, 0) < 0) mpfr_set_zero(t, 1);
        if (mpfr_cmp_si(t, 1) > 0) mpfr_set_si(t, 1, MPFR_RNDN);
        /* f = f/factor*ramp + f*(1-ramp) */
        mpfr_div_d(u, f, factor, MPFR_RNDN);
        mpfr_mul(u, u, t, MPFR_RNDN);
        mpfr_si_sub(t, 1, t, MPFR_RNDN);
        mpfr_mul(f, f, t, MPFR_RNDN);
        mpfr_add(f, f, u, MPFR_RNDN);
    }
    mpfr_clears(b, t, u, (mpfr_ptr)0);
}

/* 2^k by repeated doubling/halving (not ldexp: no code shared with the
 * oracle's format code). */
static inline double mp_pow2i(int k)
{
    double r = 1.0;
    for (; k > 0; k--) r *= 2.0;
    for (; k < 0; k++) r *= 0.5;
    return r;
}

/* FP8 E4M3fn value from its bit layout (bias 7, 3 mantissa bits). */
static inline double mp_e4m3_value(unsigned c)
{
    if ((c & 0x7F) == 0x7F) return NAN;
    double s = (c & 0x80) ? -1.0 : 1.0;
    unsigned e = (c >> 3) & 0xF, m = c & 7;
    if (e == 0) return s * (m / 8.0) * mp_pow2i(-6);
    return s * (1.0 + m / 8.0) * mp_pow2i((int)e - 7);
}

/* FP4 E2M1 value: codes 0..7 = {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 = sign. */
static inline double mp_e2m1_value(unsigned n)
{
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (n & 8) ? -mag[n & 7] : mag[n & 7];
}

/* Nearest finite E4M3 value to v by exhaustive search, ties to the code with
 * an even mantissa (RNE); v must be within [-448, 448]. */
static inline double mp_e4m3_nearest(double v)
{
    double best = 0.0, bd = INFINITY;
    unsigned bc = 0;
    for (unsigned c = 0; c < 256; c++) {
        double q = mp_e4m3_value(c);
        if (isnan(q) || (c & 0x80 ? v > 0 : v < 0)) continue;
        double d = fabs(q - v);
        if (d < bd || (d == bd && (c & 1) == 0 && (bc & 1) == 1)) {
            bd = d;
            best = q;
            bc = c;
        }
    }
    return best;
}

/* Smallest integer e with fmax * 2^e >= amax (amax > 0), by exact
 * comparisons counting up from far below. */
static inline int mp_ceil_log2_ratio(double amax, double fmax)
{
    int e = -300;
    while (fmax * mp_pow2i(e) < amax) e++;
    return e;
}

/* E8M0 scale byte for 2^k. */
static inline uint8_t mp_e8m0_byte(int k) { return (uint8_t)(k + 127); }

/* True iff v is exactly a BF16 value (a binary32 whose low 16 bits are 0). */
static inline int mp_is_bf16(double v)
{
    if (!isfinite(v)) return isinf(v);
    float f = (float)v;
    if ((double)f != v) return 0;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0xFFFFu) == 0;
}

/* ---- operator reference formulas (MPFR, from OPERATORS.md) ---------------- */

/* silu(v) = v / (1 + e^-v) */
static inline void mp_silu(mpfr_t out, mpfr_srcptr v)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_neg(t, v, MPFR_RNDN);
    mpfr_exp(t, t, MPFR_RNDN);
    mpfr_add_ui(t, t, 1, MPFR_RNDN);
    mpfr_div(out, v, t, MPFR_RNDN);
    mpfr_clear(t);
}

static inline void mp_silu_d(mpfr_t out, double v)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, v, MPFR_RNDN);
    mp_silu(out, t);
    mpfr_clear(t);
}

/* sigmoid(v) = 1 / (1 + e^-v) */
static inline void mp_sigmoid(mpfr_t out, mpfr_srcptr v)
{
    mpfr_neg(out, v, MPFR_RNDN);
    mpfr_exp(out, out, MPFR_RNDN);
    mpfr_add_ui(out, out, 1, MPFR_RNDN);
    mpfr_ui_div(out, 1, out, MPFR_RNDN);
}

/* sqrt(log1p(exp(z))) (no threshold: for z > 20 it differs from sqrt(z) by
 * < 1e-9 relative, and by 1e-44 at z = 100). */
static inline void mp_sqrtsoftplus(mpfr_t out, mpfr_srcptr z)
{
    mpfr_exp(out, z, MPFR_RNDN);
    mpfr_log1p(out, out, MPFR_RNDN);
    mpfr_sqrt(out, out, MPFR_RNDN);
}

/* RMSNorm of v [n] in place: v_i * (sum v^2 / n + eps)^-1/2 * (w ? w_i : 1). */
static inline void mp_rmsnorm(mpfr_t *v, long n, const double *w, double eps)
{
    mpfr_t ms;
    mpfr_init2(ms, MP_PREC);
    mpfr_set_zero(ms, 1);
    for (long j = 0; j < n; j++) mpfr_fma(ms, v[j], v[j], ms, MPFR_RNDN);
    mpfr_div_si(ms, ms, n, MPFR_RNDN);
    mpfr_add_d(ms, ms, eps, MPFR_RNDN);
    mpfr_rec_sqrt(ms, ms, MPFR_RNDN);
    for (long j = 0; j < n; j++) {
        mpfr_mul(v[j], v[j], ms, MPFR_RNDN);
        if (w) mpfr_mul_d(v[j], v[j], w[j], MPFR_RNDN);
    }
    mpfr_clear(ms);
}

/* Interleaved RoPE of the r dims at v[0..r) at integer position pos:
 * (v[2i], v[2i+1]) *= e^{i pos f_i}, f_i from mp_rope_freq (beta 32 / 1). */
static inline void mp_rope(mpfr_t *v, int r, long pos, double base, int osl, double factor)
{
    mpfr_t t, c, s, a0, a1;
    mpfr_inits2(MP_PREC, t, c, s, a0, a1, (mpfr_ptr)0);
    for (int i = 0; i < r / 2; i++) {
        mp_rope_freq(t, i, r, base, osl, factor, 32.0, 1.0);
        mpfr_mul_si(t, t, pos, MPFR_RNDN);
        mpfr_sin_cos(s, c, t, MPFR_RNDN);
        mpfr_mul(a0, v[2 * i], c, MPFR_RNDN);
        mpfr_mul(t, v[2 * i + 1], s, MPFR_RNDN);
        mpfr_sub(a0, a0, t, MPFR_RNDN);
        mpfr_mul(a1, v[2 * i], s, MPFR_RNDN);
        mpfr_mul(t, v[2 * i + 1], c, MPFR_RNDN);
        mpfr_add(a1, a1, t, MPFR_RNDN);
        mpfr_set(v[2 * i], a0, MPFR_RNDN);
        mpfr_set(v[2 * i + 1], a1, MPFR_RNDN);
    }
    mpfr_clears(t, c, s, a0, a1, (mpfr_ptr)0);
}

/* Sparse attention of one query head (spec section 5) over the valid
 * columns of idx (0 <= idx < N): o = sum_j e^{s_j} v_j / (sum_j e^{s_j} +
 * e^{sink}), s_j = (q . k_j) * scale, V = K. scale is given in MPFR so a
 * caller can use the exact D^-0.5. */
static inline void mp_attn_ref(const double *q, int D, const double *kv, long N, const int32_t *idx, long ncols,
                               double sink, mpfr_srcptr scale, mpfr_t *o)
{
    mpfr_t s, e, den, t;
    mpfr_inits2(MP_PREC, s, e, den, t, (mpfr_ptr)0);
    mpfr_set_d(den, sink, MPFR_RNDN);
    mpfr_exp(den, den, MPFR_RNDN);
    for (int d = 0; d < D; d++) mpfr_set_zero(o[d], 1);
    for (long c = 0; c < ncols; c++) {
        if (idx[c] < 0 || idx[c] >= N) continue;
        const double *k = kv + (long)idx[c] * D;
        mp_dot_d(s, q, k, D, 1, t);
        mpfr_mul(s, s, scale, MPFR_RNDN);
        mpfr_exp(e, s, MPFR_RNDN);
        mpfr_add(den, den, e, MPFR_RNDN);
        for (int d = 0; d < D; d++) {
            mpfr_mul_d(t, e, k[d], MPFR_RNDN);
            mpfr_add(o[d], o[d], t, MPFR_RNDN);
        }
    }
    for (int d = 0; d < D; d++) mpfr_div(o[d], o[d], den, MPFR_RNDN);
    mpfr_clears(s, e, den, t, (mpfr_ptr)0);
}

/* hc_pre of one token (spec section 8): X [hc, d], fn [(2+hc)*hc, hc*d],
 * scale [3], base [(2+hc)*hc] -> y [d], post [hc], comb [hc*hc]:
 *   mixes = (fn X) * (mean(X^2) + norm_eps)^-1/2
 *   pre_j = sigmoid(mixes_j*scale0 + base_j) + hc_eps
 *   post_j = 2*sigmoid(mixes_{hc+j}*scale1 + base_{hc+j})
 *   C = softmax_row(mixes_C*scale2 + base_C) + hc_eps; C /= colsum + hc_eps;
 *   (iters-1) x { C /= rowsum + hc_eps; C /= colsum + hc_eps }
 *   y = sum_j pre_j X_j */
static inline void mp_hc_pre_ref(const double *X, int hc, long d, const double *fn, const double *scale,
                                 const double *base, double norm_eps, double hc_eps, int iters, mpfr_t *y,
                                 mpfr_t *post, mpfr_t *comb)
{
    const long n = (long)hc * d;
    const int nmix = (2 + hc) * hc;
    mpfr_t *mix = mp_vec_new(nmix), *pre = mp_vec_new(hc);
    mpfr_t rs, t, u;
    mpfr_inits2(MP_PREC, rs, t, u, (mpfr_ptr)0);
    mp_dot_d(rs, X, X, n, 1, t);
    mpfr_div_si(rs, rs, n, MPFR_RNDN);
    mpfr_add_d(rs, rs, norm_eps, MPFR_RNDN);
    mpfr_rec_sqrt(rs, rs, MPFR_RNDN);
    for (int m = 0; m < nmix; m++) {
        mp_dot_d(mix[m], fn + (long)m * n, X, n, 1, t);
        mpfr_mul(mix[m], mix[m], rs, MPFR_RNDN);
    }
    for (int j = 0; j < 2 * hc; j++) {
        mpfr_mul_d(t, mix[j], scale[j < hc ? 0 : 1], MPFR_RNDN);
        mpfr_add_d(t, t, base[j], MPFR_RNDN);
        mp_sigmoid(t, t);
        if (j < hc) mpfr_add_d(pre[j], t, hc_eps, MPFR_RNDN);
        else mpfr_mul_ui(post[j - hc], t, 2, MPFR_RNDN);
    }
    for (int j = 0; j < hc; j++) { /* row softmax + eps */
        mpfr_set_zero(u, 1);
        for (int k = 0; k < hc; k++) {
            mpfr_mul_d(t, mix[2 * hc + j * hc + k], scale[2], MPFR_RNDN);
            mpfr_add_d(t, t, base[2 * hc + j * hc + k], MPFR_RNDN);
            mpfr_exp(comb[j * hc + k], t, MPFR_RNDN);
            mpfr_add(u, u, comb[j * hc + k], MPFR_RNDN);
        }
        for (int k = 0; k < hc; k++) {
            mpfr_div(comb[j * hc + k], comb[j * hc + k], u, MPFR_RNDN);
            mpfr_add_d(comb[j * hc + k], comb[j * hc + k], hc_eps, MPFR_RNDN);
        }
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int j = 0; j < hc; j++) {
                mpfr_set_d(u, hc_eps, MPFR_RNDN);
                for (int k = 0; k < hc; k++) mpfr_add(u, u, comb[j * hc + k], MPFR_RNDN);
                for (int k = 0; k < hc; k++) mpfr_div(comb[j * hc + k], comb[j * hc + k], u, MPFR_RNDN);
            }
        for (int k = 0; k < hc; k++) {
            mpfr_set_d(u, hc_eps, MPFR_RNDN);
            for (int j = 0; j < hc; j++) mpfr_add(u, u, comb[j * hc + k], MPFR_RNDN);
            for (int j = 0; j < hc; j++) mpfr_div(comb[j * hc + k], comb[j * hc + k], u, MPFR_RNDN);
        }
    }
    for (long i = 0; i < d; i++) {
        mpfr_set_zero(y[i], 1);
        for (int j = 0; j < hc; j++) {
            mpfr_mul_d(t, pre[j], X[j * d + i], MPFR_RNDN);
            mpfr_add(y[i], y[i], t, MPFR_RNDN);
        }
    }
    mp_vec_free(mix, nmix);
    mp_vec_free(pre, hc);
    mpfr_clears(rs, t, u, (mpfr_ptr)0);
}

/* One compressed row (spec section 6). */
typedef struct {
    int ratio, Dc, d, r;       /* r: RoPE dims, the last r of the row */
    const double *wkv, *wgate; /* [coff*Dc, d], coff = 2 if ratio == 4 */
    const double *ape;         /* [ratio, coff*Dc] */
    const double *norm;        /* [Dc] */
    double eps;
    double rope_base, rope_factor;
    int rope_osl;
} mp_cmp_spec;

/* Row b from the tokens x [.., d]: per dim j the candidates are (overlap and
 * b > 0) block b-1 at column j, then block b at column off+j (off = Dc if
 * overlap); gates include ape[pos % ratio]; softmax-weighted sum of kv;
 * RMSNorm; RoPE at position b*ratio. absent_as_zero != 0 computes the BUG
 * variant for b == 0: the absent previous block averaged in as kv 0, gate 0.
 * The per-dim pooling runs on OpenMP threads (independent dims). */
static inline void mp_cmp_row_ref(const mp_cmp_spec *c, const double *x, int b, int absent_as_zero, mpfr_t *out)
{
    const int ratio = c->ratio, ov = ratio == 4, W = (ov ? 2 : 1) * c->Dc, off = ov ? c->Dc : 0;
    #pragma omp parallel
    {
        mpfr_t kv, g, e, num, den, t;
        mpfr_inits2(MP_PREC, kv, g, e, num, den, t, (mpfr_ptr)0);
        #pragma omp for schedule(dynamic, 8)
        for (int j = 0; j < c->Dc; j++) {
            mpfr_set_zero(num, 1);
            mpfr_set_zero(den, 1);
            for (int half = ov ? 0 : 1; half < 2; half++) {
                long blk = half == 0 ? b - 1 : b;
                int col = half == 0 ? j : off + j;
                if (blk < 0) {
                    if (absent_as_zero) mpfr_add_ui(den, den, (unsigned long)ratio, MPFR_RNDN);
                    continue;
                }
                for (int p = 0; p < ratio; p++) {
                    const double *xt = x + (blk * ratio + p) * c->d;
                    mp_dot_d(kv, c->wkv + (long)col * c->d, xt, c->d, 1, t);
                    mp_dot_d(g, c->wgate + (long)col * c->d, xt, c->d, 1, t);
                    mpfr_add_d(g, g, c->ape[p * W + col], MPFR_RNDN);
                    mpfr_exp(e, g, MPFR_RNDN);
                    mpfr_add(den, den, e, MPFR_RNDN);
                    mpfr_mul(e, e, kv, MPFR_RNDN);
                    mpfr_add(num, num, e, MPFR_RNDN);
                }
            }
            mpfr_div(out[j], num, den, MPFR_RNDN);
        }
        mpfr_clears(kv, g, e, num, den, t, (mpfr_ptr)0);
    }
    mp_rmsnorm(out, c->Dc, c->norm, c->eps);
    mp_rope(out + c->Dc - c->r, c->r, (long)b * ratio, c->rope_base, c->rope_osl, c->rope_factor);
}

#endif
