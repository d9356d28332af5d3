/*
 * schedules.c - schedule labels, the same-tokens check and the difference
 * between two schedules' captures (harness/capture/schedules.h).
 */
#include "harness/capture/schedules.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"

void dsv4q_schedule_label(const dsv4q_capture *cap, char *buf, size_t len)
{
    long prompt = cap->prompt, chunks = 0, big = 0, decode = 0;
    if (!prompt && cap->ncalls && cap->calls[0].pos == 0) prompt = cap->calls[0].s;
    if (!prompt) prompt = cap->prefix_len;
    size_t n = 0;
    if (cap->prefix_len) { /* a prefix-cache hit: "prefix of P cached, " then the rest */
        n = (size_t)snprintf(buf, len, "prefix of %ld cached, ", cap->prefix_len);
        if (n >= len) return;
        buf += n;
        len -= n;
    }
    for (int i = 0; i < cap->ncalls; i++) {
        const dsv4q_capture_call *c = &cap->calls[i];
        if (c->pos < prompt) {
            chunks++;
            if (c->s > big) big = c->s;
        } else {
            decode++;
        }
    }
    const char *steps = decode == 1 ? "step" : "steps";
    const char *tokens = prompt == 1 ? "token" : "tokens";
    if (!chunks) snprintf(buf, len, "%ld decode %s", decode, steps);
    else if (chunks == 1 && cap->prefix_len)
        snprintf(buf, len, "prefill in one call (%ld tokens, prompt %ld), %ld decode %s", prompt - cap->prefix_len,
                 prompt, decode, steps);
    else if (chunks == 1)
        snprintf(buf, len, "prefill in one call (%ld %s), %ld decode %s", prompt, tokens, decode, steps);
    else if (big == 1) snprintf(buf, len, "prefill token by token (%ld tokens), %ld decode %s", prompt, decode, steps);
    else
        snprintf(buf, len, "prefill in %ld calls of up to %ld tokens (prompt %ld), %ld decode %s", chunks, big, prompt,
                 decode, steps);
}

/* The call of cap holding position p, or NULL. */
static const dsv4q_capture_call *call_at(const dsv4q_capture *cap, long p)
{
    for (int i = 0; i < cap->ncalls; i++)
        if (cap->calls[i].pos <= p && p < cap->calls[i].pos + cap->calls[i].s) return &cap->calls[i];
    return NULL;
}

/* The token cap holds at position p (a call's, or its cached prefix's), -1 for none. */
static int32_t token_at(const dsv4q_capture *cap, long p)
{
    if (p < cap->prefix_len) return cap->prefix_ids[p];
    const dsv4q_capture_call *x = call_at(cap, p);
    return x ? x->ids[p - x->pos] : -1;
}

int dsv4q_schedule_same_tokens(const dsv4q_capture *a, const dsv4q_capture *b, char *err, size_t errlen)
{
    const long end = a->max_pos > b->max_pos ? a->max_pos : b->max_pos;
    for (long p = 0; p < end; p++) {
        const int32_t u = token_at(a, p), v = token_at(b, p);
        if (u < 0 && v < 0) continue;
        if (u < 0 || v < 0)
            return dsv4q_errf(err, errlen, "captures %s and %s are not of the same tokens: position %ld is in %s only",
                              a->path, b->path, p, u >= 0 ? a->path : b->path);
        if (u != v)
            return dsv4q_errf(err, errlen,
                              "captures %s and %s are not of the same tokens: position %ld has token %d in the "
                              "first and %d in the second",
                              a->path, b->path, p, u, v);
    }
    return 0;
}

/* Decode tensor t into *buf (grown as needed). 0, or -1 when out of memory. */
static int values(const dsv4q_st_tensor *t, double **buf, long *cap)
{
    if (t->numel > *cap) {
        double *n = realloc(*buf, sizeof(double) * (size_t)t->numel);
        if (!n) return -1;
        *buf = n;
        *cap = t->numel;
    }
    dsv4q_capture_values(t, *buf);
    return 0;
}

/* One output t of stage slot (st, l): b's rows against a's. */
static int diff_output(const dsv4q_capture *a, const dsv4q_capture *b, int st, int l, int t, int per_row,
                       dsv4q_schedule_diff *d, double **va, long *ca, double **vb, long *cb)
{
    for (int i = 0; i < b->ncalls; i++) {
        const dsv4q_capture_call *y = &b->calls[i];
        const dsv4q_st_tensor *tb = dsv4q_capture_tensor(y, st, l, 1, t);
        if (!tb) continue;
        if (values(tb, vb, cb)) return -1;
        if (!per_row) { /* the call's last token: a's call must end there too */
            const long last = y->pos + y->s - 1;
            const dsv4q_capture_call *x = call_at(a, last);
            const dsv4q_st_tensor *ta = x && x->pos + x->s - 1 == last ? dsv4q_capture_tensor(x, st, l, 1, t) : NULL;
            if (!ta || ta->numel != tb->numel) continue;
            if (values(ta, va, ca)) return -1;
            dsv4q_acc_add(&d->acc[t], *vb, *va, tb->numel);
            d->rows++;
            continue;
        }
        const long row = tb->numel / y->s;
        const dsv4q_capture_call *x = NULL;
        const dsv4q_st_tensor *ta = NULL;
        for (long k = 0; k < y->s; k++) {
            const long p = y->pos + k;
            if (!x || p < x->pos || p >= x->pos + x->s) { /* a's call holding p */
                x = call_at(a, p);
                ta = x ? dsv4q_capture_tensor(x, st, l, 1, t) : NULL;
                if (ta && ta->numel != row * x->s) ta = NULL;
                if (ta && values(ta, va, ca)) return -1;
            }
            if (!ta) continue;
            dsv4q_acc_add(&d->acc[t], *vb + k * row, *va + (p - x->pos) * row, row);
            d->rows++;
        }
    }
    return 0;
}

int dsv4q_schedule_diff_run(const dsv4q_capture *a, const dsv4q_capture *b, const dsv4q_config *cfg,
                            dsv4q_schedule_diff *d, char *err, size_t errlen)
{
    const int arch = cfg->arch, nl = cfg->n_layers;
    const long nslot = dsv4q_stage_nslots_arch(arch, nl);
    double *va = NULL, *vb = NULL;
    long ca = 0, cb = 0;
    int rc = 0;
    memset(d, 0, sizeof *d * (size_t)nslot);
    for (long k = 0; k < nslot && !rc; k++) {
        int st, l;
        dsv4q_stage_slot_arch(arch, nl, k, &st, &l);
        const dsv4q_stage_info *si = dsv4q_stage_get_arch(arch, st);
        for (int t = 0; t < si->nout && !rc; t++)
            rc = diff_output(a, b, st, l, t, si->out[t].dims[0] == DSV4Q_SD_S, &d[k], &va, &ca, &vb, &cb);
    }
    free(va);
    free(vb);
    if (rc) return dsv4q_errf(err, errlen, "out of memory comparing the schedules of %s and %s", a->path, b->path);
    return 0;
}
