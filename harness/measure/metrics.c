/*
 * metrics.c - the shared metric set (metrics.h): streaming accumulators,
 * ULP distances (plain and row-floored), the per-output metric set of a
 * float tensor and the selection rule with its tie-runs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "abi/dsv4q_backend.h"
#include "base/util.h"
#include "harness/measure/metrics.h"
#include "oracle/formats.h"

void dsv4q_acc_add(dsv4q_acc *acc, const double *a, const double *b, long n)
{
    for (long i = 0; i < n; i++) {
        acc->n++;
        int fa = isfinite(a[i]), fb = isfinite(b[i]);
        if (!fa || !fb) {
            /* the same infinity on both sides (a masked score) is agreement */
            if (a[i] == b[i]) continue;
            if (!fa) acc->nonfinite_a++;
            if (!fb) acc->nonfinite_b++;
            continue;
        }
        double d = a[i] - b[i], ad = fabs(d);
        acc->se += d * d;
        acc->sb += b[i] * b[i];
        acc->sa += a[i] * a[i];
        acc->sab += a[i] * b[i];
        if (ad > acc->max_abs) acc->max_abs = ad;
        if (b[i] != 0 && ad / fabs(b[i]) > acc->max_rel) acc->max_rel = ad / fabs(b[i]);
    }
}

double dsv4q_acc_nrms(const dsv4q_acc *acc)
{
    if (acc->sb == 0) return acc->se == 0 ? 0 : INFINITY;
    return sqrt(acc->se / acc->sb);
}

double dsv4q_acc_cosine(const dsv4q_acc *acc)
{
    if (acc->sa == 0 && acc->sb == 0) return 1;
    if (acc->sa == 0 || acc->sb == 0) return 0;
    return acc->sab / (sqrt(acc->sa) * sqrt(acc->sb));
}

long dsv4q_argmax(const double *v, long n)
{
    long best = -1;
    for (long i = 0; i < n; i++)
        if (!isnan(v[i]) && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

/* ULP distance of a from b counted in units of the ulp (in dt) at the
 * magnitude max(|b|, mag): |a - b| / ulp_dt(max(|b|, mag)). With mag = the
 * RMS of b's row this is the plain ULP for values of ordinary size and
 * stops counting the ordinals between +tiny and -tiny for outputs that sit
 * near a cancellation zero (metrics.h: the row-floored ulp_max). */
double dsv4q_ulp_in(int dt, double a, double b)
{
    if (a == b) return 0;
    if (isnan(a) || isnan(b)) return INFINITY;
    int64_t d;
    if (dt == DSV4Q_BT_BF16) d = dsv4q_ord16(dsv4q_bf16_encode(a)) - dsv4q_ord16(dsv4q_bf16_encode(b));
    else if (dt == DSV4Q_BT_F16) d = dsv4q_ord16(dsv4q_f16_encode(a)) - dsv4q_ord16(dsv4q_f16_encode(b));
    else d = dsv4q_ord32((float)a) - dsv4q_ord32((float)b);
    return (double)(d < 0 ? -d : d);
}

static double ulp_floored(int32_t dt, double a, double b, double mag)
{
    if (a == b) return 0;
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) return INFINITY;
    double m = fabs(b) > mag ? fabs(b) : mag;
    int mant = dt == DSV4Q_BT_BF16 ? 7 : dt == DSV4Q_BT_F16 ? 10 : 23;
    int e;
    if (!(m > 0)) return dsv4q_ulp_in(dt, a, b);
    frexp(m, &e);   /* m in [2^(e-1), 2^e) */
    return fabs(a - b) / ldexp(1.0, e - 1 - mant);
}

static int ulp_bucket(double u)
{
    static const double edge[DSV4Q_ULP_BUCKETS - 1] = {0, 1, 2, 4, 8, 16, 64, 256, 4096};
    for (int i = 0; i < DSV4Q_ULP_BUCKETS - 1; i++)
        if (u <= edge[i]) return i;
    return DSV4Q_ULP_BUCKETS - 1;
}

void dsv4q_mset_init(dsv4q_mset *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < DSV4Q_M_COUNT; i++) m->v[i] = NAN;
}

/* The ULP count of element i as ulp_max counts it: plain (ulp_in), or
 * row-floored with the RMS of i's reference row, which is computed at the
 * row's first element and kept in *rms (so walk i upwards from a row start). */
static double elem_ulp(const double *a, const double *b, long n, long last, int32_t dt, int rowfloor, long i,
                       double *rms)
{
    if (!(rowfloor && last > 0)) return dsv4q_ulp_in(dt, a[i], b[i]);
    if (i % last == 0) {   /* RMS of the reference row starting here */
        double ss = 0;
        long cnt = 0;
        for (long k = i; k < i + last && k < n; k++)
            if (isfinite(b[k])) { ss += b[k] * b[k]; cnt++; }
        *rms = cnt ? sqrt(ss / (double)cnt) : 0;
    }
    return ulp_floored(dt, a[i], b[i], *rms);
}

long dsv4q_metrics_ulp_argmax(const double *a, const double *b, long n, long last, int32_t dt, int rowfloor,
                              double *umax)
{
    double rms = 0, best = -1;
    long at = -1;
    for (long i = 0; i < n; i++) {
        double u = elem_ulp(a, b, n, last, dt, rowfloor, i, &rms);
        if (u > best) { best = u; at = i; }
    }
    if (umax) *umax = best;
    return at;
}

long dsv4q_metrics_ulp_over(const double *a, const double *b, long n, long last, int32_t dt, int rowfloor, double bound)
{
    double rms = 0;
    long over = 0;
    for (long i = 0; i < n; i++) over += !(elem_ulp(a, b, n, last, dt, rowfloor, i, &rms) <= bound);
    return over;
}

void dsv4q_metrics_float(dsv4q_mset *m, const double *a, const double *b, long n, long last, int32_t dt,
                         int rowfloor)
{
    dsv4q_mset_init(m);
    dsv4q_acc acc = {0};
    dsv4q_acc_add(&acc, a, b, n);
    m->n = n;
    m->v[DSV4Q_M_NRMS] = dsv4q_acc_nrms(&acc);
    m->v[DSV4Q_M_MAX_ABS] = acc.max_abs;
    m->v[DSV4Q_M_MAX_REL] = acc.max_rel;
    m->v[DSV4Q_M_COS_DIST] = 1 - dsv4q_acc_cosine(&acc);
    if (m->v[DSV4Q_M_COS_DIST] < 0) m->v[DSV4Q_M_COS_DIST] = 0;
    m->v[DSV4Q_M_NONFINITE] = (double)acc.nonfinite_a;
    double umax = 0, rms = 0;
    for (long i = 0; i < n; i++) {
        double u = elem_ulp(a, b, n, last, dt, rowfloor, i, &rms);
        if (u > umax) umax = u;
        m->ulp_hist[ulp_bucket(u)]++;
    }
    m->v[DSV4Q_M_ULP_MAX] = umax;
    long miss = 0;
    if (last > 0)
        for (long r = 0; r < n / last; r++) miss += dsv4q_argmax(a + r * last, last) != dsv4q_argmax(b + r * last, last);
    m->v[DSV4Q_M_ARGMAX_MISS] = (double)miss;
}

/* Selection output: B (candidate) vs A (reference), [rows, k]; scores
 * [rows, T] for the tie-run rule or NULL (every difference is a flip). */
void dsv4q_metrics_sel(dsv4q_mset *m, const int32_t *B, const int32_t *A, long rows, long k, const double *scores,
                       long T)
{
    double jsum = 0;
    long flips = 0, ties = 0;
    for (long r = 0; r < rows; r++) {
        const int32_t *a = A + r * k, *b = B + r * k;
        const double *sc = scores ? scores + r * T : NULL;
        /* the cut value: the smallest reference score among its picks */
        double cut = INFINITY;
        long na = 0, nb = 0, inter = 0, b_out = 0, a_out = 0;
        for (long j = 0; j < k; j++) {
            if (a[j] >= 0) {
                na++;
                if (sc && a[j] < T && sc[a[j]] < cut) cut = sc[a[j]];
            }
        }
        for (long j = 0; j < k; j++) {
            if (b[j] < 0) continue;
            int dup = 0;
            for (long u = 0; u < j; u++) dup |= b[u] == b[j];
            if (dup || b[j] >= (T > 0 ? T : INT32_MAX)) {   /* a duplicate or out-of-range pick */
                nb++;
                b_out++;
                continue;
            }
            nb++;
            int in = 0;
            for (long u = 0; u < k; u++) in |= a[u] == b[j];
            if (in) inter++;
            else if (!sc || sc[b[j]] != cut) b_out++;   /* not a tie with the cut */
        }
        for (long j = 0; j < k; j++) {
            if (a[j] < 0) continue;
            int in = 0;
            for (long u = 0; u < k; u++) in |= b[u] == a[j];
            if (!in && (!sc || a[j] >= T || sc[a[j]] != cut)) a_out++;   /* a non-tie pick was dropped */
        }
        long uni = na + nb - inter;
        jsum += uni ? (double)inter / (double)uni : 1.0;
        long diff = nb - inter, bad = b_out > a_out ? b_out : a_out;
        if (na != nb && bad < labs(na - nb)) bad = labs(na - nb);   /* picks added or missing */
        if (bad > diff) diff = bad;
        flips += bad;
        ties += diff - bad;
    }
    m->n = rows * k;
    m->v[DSV4Q_M_JACCARD_DIST] = rows ? 1 - jsum / (double)rows : 0;
    m->v[DSV4Q_M_FLIPS] = (double)flips;
    m->tie_flips = ties;
}

long dsv4q_metrics_exact(dsv4q_mset *m, const int32_t *B, const int32_t *A, long n)
{
    dsv4q_mset_init(m);
    long first = -1, diff = 0;
    for (long i = 0; i < n; i++)
        if (B[i] != A[i]) {
            if (first < 0) first = i;
            diff++;
        }
    m->n = n;
    m->v[DSV4Q_M_FLIPS] = (double)diff;
    return first;
}

double dsv4q_metrics_rerun(const double *a, const double *b, const double *ref, long n)
{
    double mx = 0, rm = 0;
    for (long k = 0; k < n; k++) {
        double d = fabs(a[k] - b[k]);
        if (isnan(d) && !(isnan(a[k]) && isnan(b[k]))) d = INFINITY;
        if (d > mx) mx = d;
        double rv = fabs(ref[k]);
        if (isfinite(rv) && rv > rm) rm = rv;
    }
    return mx / (rm > 0 ? rm : 1);
}

double dsv4q_metrics_rerun_sel(const int32_t *a, const int32_t *b, long rows, long k)
{
    long d = 0;
    for (long r = 0; r < rows; r++)
        for (long j = 0; j < k; j++) {
            int in = 0;
            for (long u = 0; u < k && !in; u++) in = a[r * k + u] == b[r * k + j];
            d += !in;
        }
    return rows > 0 && k > 0 ? (double)d / (double)(rows * k) : 0;
}

/* "[i,j,k]" of flat index i in a row-major shape [nd] ("[i]" when nd is 0). */
static void coords_of(long i, const int64_t *shape, int nd, char *buf, size_t len)
{
    long c[8];
    if (nd <= 0 || nd > 8) {
        snprintf(buf, len, "[%ld]", i);
        return;
    }
    for (int d = nd - 1; d >= 0; d--) {
        const long e = shape[d] > 0 ? (long)shape[d] : 1;
        c[d] = i % e;
        i /= e;
    }
    size_t k = 0;
    for (int d = 0; d < nd && k < len; d++) k += (size_t)snprintf(buf + k, len - k, "%s%ld", d ? "," : "[", c[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

int dsv4q_ref_finite(const double *r64, const void *r32, int r32_is_float, long n, const int64_t *shape, int nd,
                     const char *name, char *why, size_t len)
{
    /* [width][0 NaN, 1 unshared inf]: count and first index */
    long cnt[2][2] = {{0}}, first[2][2] = {{-1, -1}, {-1, -1}};
    for (long i = 0; i < n; i++) {
        const double v[2] = {r64[i], r32_is_float ? (double)((const float *)r32)[i] : ((const double *)r32)[i]};
        if (isfinite(v[0]) && isfinite(v[1])) continue;
        for (int w = 0; w < 2; w++) {
            int kind = isnan(v[w]) ? 0 : isinf(v[w]) && v[w] != v[1 - w] ? 1 : -1;
            if (kind < 0) continue;
            if (!cnt[w][kind]++) first[w][kind] = i;
        }
    }
    if (!cnt[0][0] && !cnt[0][1] && !cnt[1][0] && !cnt[1][1]) return 0;
    size_t k = (size_t)snprintf(why, len, "reference not finite: %s%s", name ? name : "", name ? ": " : "");
    int parts = 0;
    for (int w = 0; w < 2; w++)
        for (int kind = 0; kind < 2; kind++) {
            if (!cnt[w][kind] || k >= len) continue;
            char at[96];
            coords_of(first[w][kind], shape, nd, at, sizeof at);
            k += (size_t)snprintf(
                why + k, len - k, "%soracle-f%s has %ld %s, first at %s", parts++ ? "; " : "", w ? "32" : "64",
                cnt[w][kind], kind ? (w ? "inf not shared by oracle-f64" : "inf not shared by oracle-f32") : "NaN", at);
        }
    return 1;
}
