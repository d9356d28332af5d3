/*
 * margins.c - BF16 (F16, F32) quanta, tie-runs and flips at the indexer's top-k cut
 * (see margins.h and docs/margins.md).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness/measure/margins.h"
#include "oracle/formats.h"

long dsv4q_bf16_ordinal(double x)
{
    uint16_t c = dsv4q_bf16_encode(x);
    long mag = c & 0x7fff;
    return (c & 0x8000) ? -mag : mag;
}

long dsv4q_bf16_quanta(double a, double b)
{
    return dsv4q_bf16_ordinal(a) - dsv4q_bf16_ordinal(b);
}

long dsv4q_score_ordinal(int dt, double x)
{
    long mag, neg;
    if (dt == DSV4Q_DT_F16) {
        const uint16_t c = dsv4q_f16_encode(x);
        mag = c & 0x7fff;
        neg = c >> 15;
    } else if (dt == DSV4Q_DT_F32) {
        const float f = (float)x; /* RNE: one rounding from binary64 */
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        mag = (long)(u & 0x7fffffffu);
        neg = (long)(u >> 31);
    } else {
        return dsv4q_bf16_ordinal(x);
    }
    return neg ? -mag : mag;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* rounded: 0 = the raw scores' equality (dsv4q_margin_row), else ties
 * and quanta in the ordinals of dtype dt. */
static int margin_row(const double *score, long T, const int32_t *picks, long k, int dt, int rounded, dsv4q_margin *out)
{
    if (T < 0 || k < 0) return -1;
    unsigned char *in = calloc((size_t)(T ? T : 1), 1);
    long *q = malloc(sizeof(long) * (size_t)(k ? k : 1));
    if (!in || !q) {
        free(in);
        free(q);
        return -1;
    }
    dsv4q_margin m = {.k = k, .kth = NAN, .next = NAN, .margin = -1};
    for (long t = 0; t < T; t++) m.visible += isfinite(score[t]) != 0;
    for (long j = 0; j < k; j++) {
        int32_t p = picks[j];
        if (p < 0 || p >= T || in[p] || !isfinite(score[p])) continue;
        in[p] = 1;
        q[m.npicks++] = dsv4q_score_ordinal(dt, score[p]);
        if (m.npicks == 1 || score[p] < m.kth) m.kth = score[p];
    }
    for (long t = 0; t < T; t++) {
        if (in[t] || !isfinite(score[t])) continue;
        if (!m.has_next || score[t] > m.next) m.next = score[t];
        m.has_next = 1;
    }
    if (!m.npicks) m.has_next = 0;   /* no cut without a pick */
    if (m.has_next) m.margin = dsv4q_score_ordinal(dt, m.kth) - dsv4q_score_ordinal(dt, m.next);
    const long qk = m.npicks ? dsv4q_score_ordinal(dt, m.kth) : 0;
    if (m.npicks)
        for (long t = 0; t < T; t++)
            if (isfinite(score[t]) && (rounded ? dsv4q_score_ordinal(dt, score[t]) == qk : score[t] == m.kth)) {
                m.tie_total++;
                if (in[t]) m.tie_inside++;
                else m.tie_outside++;
            }
    qsort(q, (size_t)m.npicks, sizeof *q, cmp_long);
    for (long j = 0; j < m.npicks; j++) m.distinct += j == 0 || q[j] != q[j - 1];
    free(in);
    free(q);
    *out = m;
    return 0;
}

int dsv4q_margin_row(const double *score, long T, const int32_t *picks, long k, dsv4q_margin *out)
{
    return margin_row(score, T, picks, k, DSV4Q_DT_BF16, 0, out);
}

int dsv4q_margin_row_dt(const double *score, long T, const int32_t *picks, long k, int dt, dsv4q_margin *out)
{
    if (dt != DSV4Q_DT_BF16 && dt != DSV4Q_DT_F16 && dt != DSV4Q_DT_F32) return -1;
    return margin_row(score, T, picks, k, dt, 1, out);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorted copy of the valid (>= 0) entries of v [n]; returns their count. */
static long sorted_valid(const int32_t *v, long n, int32_t *out)
{
    long m = 0;
    for (long i = 0; i < n; i++)
        if (v[i] >= 0) out[m++] = v[i];
    qsort(out, (size_t)m, sizeof *out, cmp_i32);
    return m;
}

long dsv4q_pick_flips(const int32_t *a, long ka, const int32_t *b, long kb)
{
    int32_t *sa = malloc(sizeof(int32_t) * (size_t)(ka > 0 ? ka : 1));
    int32_t *sb = malloc(sizeof(int32_t) * (size_t)(kb > 0 ? kb : 1));
    if (!sa || !sb) {
        free(sa);
        free(sb);
        return -1;
    }
    long na = sorted_valid(a, ka, sa), nb = sorted_valid(b, kb, sb), n = 0, j = 0;
    for (long i = 0; i < na; i++) {
        if (i > 0 && sa[i] == sa[i - 1]) continue;   /* duplicates count once */
        while (j < nb && sb[j] < sa[i]) j++;
        n += !(j < nb && sb[j] == sa[i]);
    }
    free(sa);
    free(sb);
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dsv4q_percentile(const double *v, long n, double p, double *tmp)
{
    if (n <= 0) return NAN;
    memcpy(tmp, v, sizeof(double) * (size_t)n);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    long r = (long)ceil(p * (double)n);
    if (r < 1) r = 1;
    if (r > n) r = n;
    return tmp[r - 1];
}
