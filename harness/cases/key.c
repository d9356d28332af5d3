/*
 * key.c - the case key grammar (key.h): parse, complete with defaults,
 * write canonically, read typed values.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness/cases/key.h"

int dsv4q_kv_opname(const char *key, char *op, size_t oplen, char *err, size_t errlen)
{
    const char *lp = strchr(key, '(');
    size_t klen = strlen(key);
    size_t on = lp ? (size_t)(lp - key) : klen;
    if (on == 0 || on >= oplen || (lp && key[klen - 1] != ')')) {
        snprintf(err, errlen, "case key '%s': expected op(name=value,...)", key);
        return -1;
    }
    memcpy(op, key, on);
    op[on] = 0;
    return 0;
}

static void kv_add(dsv4q_kv *kv, const char *name, const char *def, int opt)
{
    snprintf(kv->name[kv->n], sizeof kv->name[0], "%s", name);
    snprintf(kv->val[kv->n], sizeof kv->val[0], "%s", def);
    snprintf(kv->def[kv->n], sizeof kv->def[0], "%s", def);
    kv->opt[kv->n++] = (char)opt;
}

int dsv4q_kv_parse(const char *key, const char *opname, const char *const (*spec)[2], const char *const (*opt)[2],
                   dsv4q_kv *kv, char *err, size_t errlen)
{
    memset(kv, 0, sizeof *kv);
    for (int i = 0; spec && spec[i][0] && kv->n < DSV4Q_KV_MAX - 2; i++) kv_add(kv, spec[i][0], spec[i][1], 0);
    for (int i = 0; opt && opt[i][0] && kv->n < DSV4Q_KV_MAX - 2; i++) kv_add(kv, opt[i][0], opt[i][1], 1);
    kv_add(kv, "recipe", "normal", 0);
    kv_add(kv, "seed", "1", 0);
    assert(kv->n <= DSV4Q_KV_MAX);
    const char *lp = strchr(key, '(');
    if (!lp) return 0;
    const size_t klen = strlen(key);
    const char *p = lp + 1, *end = key + klen - 1;
    while (p < end) {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *cm = memchr(p, ',', (size_t)(end - p));
        if (!cm) cm = end;
        if (!eq || eq > cm) {
            snprintf(err, errlen, "case key '%s': expected name=value at '%.*s'", key, (int)(cm - p), p);
            return -1;
        }
        int found = -1;
        for (int i = 0; i < kv->n; i++)
            if (strlen(kv->name[i]) == (size_t)(eq - p) && !strncmp(kv->name[i], p, (size_t)(eq - p))) found = i;
        if (found < 0) {
            char names[256] = "";
            for (int i = 0; i < kv->n; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", kv->name[i]);
            snprintf(err, errlen, "case key '%s': %s has no parameter '%.*s' (parameters: %s)", key, opname,
                     (int)(eq - p), p, names);
            return -1;
        }
        size_t vl = (size_t)(cm - eq - 1);
        if (vl == 0 || vl >= sizeof kv->val[0]) {
            snprintf(err, errlen, "case key '%s': bad value for %s", key, kv->name[found]);
            return -1;
        }
        memcpy(kv->val[found], eq + 1, vl);
        kv->val[found][vl] = 0;
        p = cm + 1;
    }
    return 0;
}

void dsv4q_kv_format(const dsv4q_kv *kv, const char *opname, char *out, size_t len)
{
    size_t at = (size_t)snprintf(out, len, "%s(", opname);
    for (int i = 0, first = 1; i < kv->n && at < len; i++) {
        if (kv->opt[i]) {   /* optional: only when not the default (as a number or as written) */
            char *e1, *e2;
            double a = strtod(kv->val[i], &e1), b = strtod(kv->def[i], &e2);
            if (!strcmp(kv->val[i], kv->def[i]) || (!*e1 && !*e2 && a == b)) continue;
        }
        at += (size_t)snprintf(out + at, len - at, "%s%s=%s", first ? "" : ",", kv->name[i], kv->val[i]);
        first = 0;
    }
    if (at < len) snprintf(out + at, len - at, ")");
}

const char *dsv4q_kv_str(const dsv4q_kv *kv, const char *name)
{
    for (int i = 0; i < kv->n; i++)
        if (!strcmp(kv->name[i], name)) return kv->val[i];
    return "";
}

long dsv4q_kv_int(const dsv4q_kv *kv, const char *name, long lo, long hi, int *bad)
{
    const char *s = dsv4q_kv_str(kv, name);
    char *e;
    long v = strtol(s, &e, 10);
    if (!*s || *e || v < lo || v > hi) {
        *bad = 1;
        return lo;
    }
    return v;
}

double dsv4q_kv_num(const dsv4q_kv *kv, const char *name, double lo, double hi, int *bad)
{
    const char *s = dsv4q_kv_str(kv, name);
    char *e;
    double v = strtod(s, &e);
    if (!*s || *e || !(v >= lo && v <= hi)) {
        *bad = 1;
        return lo;
    }
    return v;
}
