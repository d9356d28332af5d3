/*
 * layout.c - layer ranges per rank (see layout.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "io/safetensors.h"
#include "mpi/layout.h"

static double wbytes(const dsv4q_weight *w)
{
    const double n = (double)w->out * (double)w->in;
    const double b = (double)dsv4q_weight_blk(w);
    switch (w->fmt) {
    case DSV4Q_WF_F32: return 4 * n;
    case DSV4Q_WF_F64: return 8 * n;
    case DSV4Q_WF_BF16: return 2 * n;
    case DSV4Q_WF_FP8: return n + 4 * ((double)w->out / b + 1) * ((double)w->in / b + 1);
    case DSV4Q_WF_FP4: return n / 2 + n / 32;
    default: return 0;
    }
}

static double expert_bytes(const dsv4q_expert_w *e) { return wbytes(&e->w1) + wbytes(&e->w2) + wbytes(&e->w3); }

double dsv4q_mpi_layer_bytes(const dsv4q_model *m, int li)
{
    const dsv4q_layer_w *L = &m->layers[li];
    const int nr = L->n_routed > 0 ? L->n_routed : m->cfg.n_routed_experts;
    double b = wbytes(&L->hc_attn_fn) + wbytes(&L->hc_ffn_fn) + wbytes(&L->wq_a) + wbytes(&L->wq_b) + wbytes(&L->wkv) +
               wbytes(&L->wo_a) + wbytes(&L->wo_b) + wbytes(&L->cmp.wkv) + wbytes(&L->cmp.wgate) +
               wbytes(&L->idx_wq_b) + wbytes(&L->idx_weights_proj) + wbytes(&L->idx_cmp.wkv) +
               wbytes(&L->idx_cmp.wgate) + wbytes(&L->gate) + expert_bytes(&L->shared);
    for (int e = 0; L->experts && e < nr; e++) b += expert_bytes(&L->experts[e]);
    return b;
}

double dsv4q_mpi_resident_bytes(const dsv4q_model *m, int first, int last)
{
    double b = 0;
    if (!m->st) return 0;
    for (size_t i = 0; i < dsv4q_st_count(m->st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(m->st, i);
        const dsv4q_dtype d = t->dtype;
        int li;
        if (d == DSV4Q_DT_BF16 || d == DSV4Q_DT_F16 || d == DSV4Q_DT_F32 || d == DSV4Q_DT_F64 ||
            d == DSV4Q_DT_F8_E4M3 || d == DSV4Q_DT_F8_E8M0)
            b += (double)t->nbytes; /* checked at open */
        else if (sscanf(t->name, "layers.%d.", &li) == 1 && li >= first && li <= last)
            b += (double)t->nbytes; /* run here */
    }
    if (m->cfg.dtype == DSV4Q_WDT_FP8)
        for (int li = 0; li < m->cfg.n_layers + m->cfg.n_mtp_layers; li++) b += wbytes(&m->layers[li].wo_a);
    return b;
}

int dsv4q_mpi_split(const double *bytes, int n, int nranks, int *first, int *last, char *err, size_t errlen)
{
    if (nranks < 1 || nranks > n)
        return dsv4q_errf(err, errlen, "%d ranks for a model of %d layers: every rank needs at least one layer", nranks,
                          n);
    double total = 0;
    for (int i = 0; i < n; i++) total += bytes[i];
    /* rank k ends at the first layer whose running sum reaches (k+1)/N of
     * the total, leaving at least one layer to each later rank */
    int li = 0;
    double run = 0;
    for (int k = 0; k < nranks; k++) {
        first[k] = li;
        const double goal = total * (k + 1) / nranks;
        run += bytes[li++];
        while (li < n - (nranks - 1 - k) && (k == nranks - 1 || run + bytes[li] / 2 <= goal)) run += bytes[li++];
        last[k] = li - 1;
    }
    return 0;
}

int dsv4q_mpi_parse_ranges(const char *spec, int n, int nranks, int *first, int *last, char *err, size_t errlen)
{
    const char *p = spec;
    int k = 0, next = 0;
    while (*p) {
        char *e;
        long a = strtol(p, &e, 10), b = a;
        if (e == p) return dsv4q_errf(err, errlen, "--ranks-layers '%s': expected a layer number at '%s'", spec, p);
        if (*e == '-') {
            const char *q = e + 1;
            b = strtol(q, &e, 10);
            if (e == q) return dsv4q_errf(err, errlen, "--ranks-layers '%s': expected a layer number at '%s'", spec, q);
        }
        if (*e && *e != ',') return dsv4q_errf(err, errlen, "--ranks-layers '%s': unexpected '%c'", spec, *e);
        if (k >= nranks)
            return dsv4q_errf(err, errlen, "--ranks-layers '%s': more ranges than the %d ranks", spec, nranks);
        if (a != next || b < a || b >= n)
            return dsv4q_errf(err, errlen,
                              "--ranks-layers '%s': range %d (%ld-%ld) should start at layer %d and end at or "
                              "after it, before layer %d (ranges are contiguous, in order, from 0 to %d)",
                              spec, k, a, b, next, n, n - 1);
        first[k] = (int)a;
        last[k] = (int)b;
        next = (int)b + 1;
        k++;
        p = *e ? e + 1 : e;
    }
    if (k != nranks)
        return dsv4q_errf(err, errlen, "--ranks-layers '%s': %d ranges for %d ranks (one range per rank)", spec, k,
                          nranks);
    if (next != n)
        return dsv4q_errf(err, errlen, "--ranks-layers '%s': the ranges end at layer %d, the model has %d (0-%d)", spec,
                          next - 1, n, n - 1);
    return 0;
}
