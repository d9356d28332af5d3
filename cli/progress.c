/*
 * progress.c - the work of a forward call and the time a run has left
 * (cli/progress.h).
 */
#include "cli/progress.h"
#include <stdio.h>
#include <time.h>
#include "oracle/model_types.h"

static int in_list(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x) return 1;
    return 0;
}

double dsv4q_layer_work(const dsv4q_config *g, int li, long p0, long s)
{
    if (!g || li < 0 || li >= g->n_layers || p0 < 0 || s < 1) return 0;
    const double d = g->dim, H = g->n_heads, D = g->head_dim, ql = g->q_lora_rank, ol = g->o_lora_rank;
    const double G = g->o_groups, hd = (double)g->index_n_heads * g->index_head_dim;
    const double p = (double)p0 + (double)(s - 1) / 2; /* the middle row's position */
    const double linears = d * ql + ql * H * D + d * D + H * D * ol + G * ol * d +
                           (g->n_activated_experts + g->n_shared_experts) * 3.0 * d * g->moe_inter_dim;
    const int ratio = g->compress_ratios[li];
    const double win = p + 1 < g->window_size ? p + 1 : g->window_size;
    double keys = win, index = 0, per_token = linears;
    if (ratio > 0) {
        const double rows = (p + 1) / ratio;
        const int indexed = g->arch == DSV4Q_ARCH_V41 ? 1 : ratio == 4;
        const int scores =
            g->arch == DSV4Q_ARCH_V41 ? in_list(g->index_source_layers, g->n_index_source_layers, li) : ratio == 4;
        keys += indexed && rows > g->index_topk ? g->index_topk : rows;
        if (scores) index = rows * hd;
        per_token += 2.0 * d * D; /* the compressor's kv and gate projections */
    }
    return (double)s * (per_token + 2 * H * D * keys + index);
}

double dsv4q_head_work(const dsv4q_config *g) { return g ? (double)g->vocab_size * g->dim : 0; }

double dsv4q_call_work(const dsv4q_config *g, long p0, long s)
{
    if (!g || p0 < 0 || s < 1) return 0;
    double w = dsv4q_head_work(g);
    for (int li = 0; li < g->n_layers; li++) w += dsv4q_layer_work(g, li, p0, s);
    return w;
}

/* A call's work over its first nl layers, plus the head when `head`. */
static double part_work(const dsv4q_config *g, long p0, long s, int nl, int head)
{
    double w = head ? dsv4q_head_work(g) : 0;
    for (int li = 0; li < nl; li++) w += dsv4q_layer_work(g, li, p0, s);
    return w;
}

double dsv4q_plan_work(const dsv4q_config *g, long prompt, long chunk, long decode, int nlayers, int head)
{
    double w = 0;
    if (!g) return 0;
    if (nlayers < 1 || nlayers > g->n_layers) nlayers = g->n_layers;
    if (chunk < 1 || chunk > prompt) chunk = prompt;
    for (long p = 0; p < prompt; p += chunk)
        w += part_work(g, p, prompt - p < chunk ? prompt - p : chunk, nlayers, head);
    for (long i = 0; i < decode; i++) w += part_work(g, prompt + i, 1, nlayers, head);
    return w;
}

double dsv4q_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dsv4q_eta_start(dsv4q_eta *e, const dsv4q_config *g, double total, int nlayers, int head, double now)
{
    *e = (dsv4q_eta){.t0 = now, .total = total, .g = g, .nlayers = nlayers, .head = head, .weight = 1};
}

void dsv4q_eta_call(dsv4q_eta *e, long p0, long s)
{
    e->p0 = p0;
    e->s = s;
}

void dsv4q_eta_layer(dsv4q_eta *e, int li)
{
    double w = dsv4q_layer_work(e->g, li, e->p0, e->s);
    if (e->head && li == e->nlayers - 1) w += dsv4q_head_work(e->g);
    e->done += e->weight * w;
}

double dsv4q_eta_left(double done, double total, double elapsed)
{
    if (!(total > 0) || !(done > 0) || elapsed < 0) return -1;
    if (done >= total) return 0;
    return elapsed * (total - done) / done;
}

void dsv4q_eta_format(const dsv4q_eta *e, double now, char *buf, size_t len)
{
    if (!len) return;
    const double left = dsv4q_eta_left(e->done, e->total, now - e->t0);
    const double frac = e->total > 0 ? e->done / e->total : 0;
    const int pct = (int)(100 * (frac < 1 ? frac : 1) + 1e-6); /* a sum of parts may fall short of 1 by an ulp */
    if (left < 0) {
        snprintf(buf, len, "%d%%", pct);
        return;
    }
    const long t = (long)(left + 0.5);
    if (t >= 3600) snprintf(buf, len, "%d%%, %ld h %02ld min left", pct, t / 3600, t % 3600 / 60);
    else if (t >= 60) snprintf(buf, len, "%d%%, %ld min %02ld s left", pct, t / 60, t % 60);
    else snprintf(buf, len, "%d%%, %ld s left", pct, t);
}
