/*
 * metrics.c - implementation of the shared metric set (metrics.h).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "harness/metrics.h"

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

static int64_t ordered(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

double dsv4q_ulp_f32(double a, double b)
{
    float fa = (float)a, fb = (float)b;
    if (isnan(fa) || isnan(fb)) return INFINITY;
    int64_t d = ordered(fa) - ordered(fb);
    return (double)(d < 0 ? -d : d);
}
