/*
 * run.c - the width dispatch for whole-model runs (see model_run.h), and
 * the input checks that must happen before either instance sees a token.
 * Width-independent (in ORACLE_COMMON): it holds one instance (r32 or r64)
 * and switches on the width at every call (ON_WIDTH, or by hand where
 * there is no instance yet); the entry points it calls are declared once,
 * in oracle/model_run.inc.
 */
#include <stdio.h>
#include <stdlib.h>
#include "base/util.h"
#include "oracle/engram_hash.h"
#include "oracle/model_run.h"

struct dsv4q_run {
    int width;
    const dsv4q_model *m;
    long max_pos, pos;
    long prompt; /* dsv4q_run_set_prefill, 0 */
    dsv4q_runstate_f32 *r32;
    dsv4q_runstate_f64 *r64;
    long *attn_next;           /* dsv4q_run_stage: next position of each layer's attn */
    int stopped;               /* dsv4q_run_set_last_layer cut the model short */
    int first, last;           /* dsv4q_run_set_layers: the blocks run, else 0, -1 */
};

/* Entry point fn (oracle/model_run.inc) of the run's own instance: fn_f32 on
 * r32 or fn_f64 on r64, with the same further arguments. */
#define ON_WIDTH(r, fn, ...) ((r)->width == 32 ? fn##_f32((r)->r32, __VA_ARGS__) : fn##_f64((r)->r64, __VA_ARGS__))

long dsv4q_run_max_seq_len(const dsv4q_config *g)
{
    double n = g->original_seq_len > 0 ? (double)g->original_seq_len * (g->rope_factor > 1 ? g->rope_factor : 1)
                                       : 1048576.0;
    return n > 1e15 ? (long)1e15 : (long)n;
}

/* Bytes in use at the peak of one call of s tokens whose last position is
 * e - 1, from the forward pass's own allocations (oracle/model.c block,
 * attention and indexer; moe.c; linear.c's quantized input), counting what
 * is written by then (an allocated but untouched buffer takes no memory):
 * the hidden streams Xs, y, n, then the larger of
 *  - attention: qr, q, kv, the column lists, and the larger of the indexer
 *    (its q, weights, new rows, the [s, rows] scores, picks) and the
 *    output side (o, the keys, the grouped low-rank projection, a);
 *  - MoE: X2, a, routing weights and ids, router scores, the gathered
 *    rows and one expert's gate/up.
 * rmin: the smallest compress ratio with an indexer (V4: 4; V4.1 indexes
 * ratio 1 and 2 layers too, so its scores and its candidate mask, one
 * byte each, are [s, e / rmin]). Caches and RoPE tables are the caller's.
 * r bytes a value, 4 an index. */
static double call_bytes(const dsv4q_config *g, double r, double s, double e, double rmin)
{
    const double d = g->dim, hc = g->hc_mult, H = g->n_heads, D = g->head_dim, win = g->window_size;
    const double Hi = g->index_n_heads, Di = g->index_head_dim, topk = g->index_topk;
    const double ql = g->q_lora_rank, G = g->o_groups, ol = g->o_lora_rank, k = g->n_activated_experts;
    const double inter = g->moe_inter_dim, nexp = g->n_routed_experts, ix = 4.0 / r;
    const double rows4 = e / rmin + 1, sel4 = rows4 < topk ? rows4 : topk;
    const double cand = g->arch == DSV4Q_ARCH_V41 ? s * rows4 / r : 0;
    const double streams = s * (hc * d + 2 * d + hc + hc * hc);
    const double ncols = (s < win ? s : win) + (e / 128 > sel4 ? e / 128 : sel4);
    const double attn_in = s * (ql + H * D + D) + ix * s * ncols;
    const double index = s * (Hi * Di + Hi + Di / 4 + ql) + s * rows4 + ix * s * sel4 + cand;
    const double nkeys = (s > win ? s : win) + e / rmin + 1;
    const double out = s * (H * D + H * D / G + ol + G * ol + d) + nkeys * D;
    const double attn = attn_in + (index > out ? index : out);
    const double moe = s * (hc * d + d + k * (1 + ix) + nexp + 2 * d + 2 + 2 * inter);
    return r * (streams + (attn > moe ? attn : moe) + 2.0 * g->vocab_size);
}

static int in_list(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x) return 1;
    return 0;
}

/* Bytes of the run's two RoPE tables (cos/sin of every position),
 * built and written by dsv4q_run_open. */
static double rope_bytes(const dsv4q_config *g, int width, long max_pos)
{
    return (width / 8) * 2.0 * (double)max_pos * g->rope_head_dim;
}

double dsv4q_run_estimate_bytes(const dsv4q_model *m, int width, long max_pos, long prefill, long chunk)
{
    return dsv4q_run_estimate_range_bytes(m, width, max_pos, prefill, chunk, 0, m->cfg.n_layers - 1);
}

double dsv4q_run_estimate_range_bytes(const dsv4q_model *m, int width, long max_pos, long prefill, long chunk,
                                      int first, int last)
{
    const dsv4q_config *g = &m->cfg;
    const double r = width / 8, s = (double)max_pos, e = prefill < 1 ? 1 : (double)prefill;
    const double p = chunk < 1 || chunk > e ? e : (double)chunk; /* the largest call of the prefill */
    /* caches: window ring, compressed rows (positions / ratio), indexer
     * keys; V4.1 (oracle/model_v41.c): the compressed rows on kv sources
     * only, the latent and the keys on key owners (kv and index source),
     * the n-gram hash's position cache (8 bytes a position, any width) */
    double cache = 0, rmin = 4, fixed = 0;
    for (int li = 0; li < g->n_layers + g->n_mtp_layers; li++) {
        int ratio = m->layers[li].ratio;
        if (g->arch == DSV4Q_ARCH_V41 && ratio > 0 && ratio < rmin) rmin = ratio;
        if (li < first || (li > last && last < g->n_layers - 1)) continue; /* another rank's (set_layers) */
        cache += (double)g->window_size * g->head_dim;
        if (g->arch == DSV4Q_ARCH_V41) {
            const int kv = ratio > 0 && li < g->n_layers && in_list(g->kv_source_layers, g->n_kv_source_layers, li);
            const int own = kv && in_list(g->index_source_layers, g->n_index_source_layers, li);
            if (kv) cache += (s / ratio + 1) * g->head_dim;
            if (own) cache += (s / ratio + 1) * ((double)g->head_dim + g->index_head_dim);
            continue;
        }
        if (ratio) cache += (s / ratio + 1) * g->head_dim;
        if (ratio == 4) cache += (s / 4 + 1) * g->index_head_dim;
    }
    if (g->arch == DSV4Q_ARCH_V41 && g->n_engram_layers > 0) fixed += 8 * s;
    /* the larger call: the prefill at position 0, or a decode step at the
     * end (the prefill's last hidden streams are kept for MTP meanwhile) */
    const double a = call_bytes(g, r, p, e, rmin), b = call_bytes(g, r, 1, s, rmin) + r * p * g->hc_mult * g->dim;
    /* the OpenMP thread pool and allocator slack, started by the first
     * call: 5-9 MB measured on 2 threads (bench/bench_memory.c) */
    const double runtime = 8e6;
    return r * cache + fixed + rope_bytes(g, width, max_pos) + (a > b ? a : b) + runtime;
}

long dsv4q_run_chunk_fit(const dsv4q_model *m, int width, long max_pos, long prompt, double budget)
{
    if (prompt < 1 || dsv4q_run_estimate_bytes(m, width, max_pos, prompt, 1) > budget) return 0;
    long lo = 1, hi = prompt; /* the estimate grows with the chunk: the largest that fits */
    while (lo < hi) {
        const long mid = lo + (hi - lo + 1) / 2;
        if (dsv4q_run_estimate_bytes(m, width, max_pos, prompt, mid) <= budget) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

double dsv4q_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb > 0 ? kb * 1024 : -1;
}

int dsv4q_run_open(dsv4q_run **out, const dsv4q_model *m, int width, uint64_t bs, long max_pos,
                   dsv4q_tap_fn tap, void *user, char *err, size_t errlen)
{
    *out = NULL;
    if (width != 32 && width != 64) {
        snprintf(err, errlen, "width must be f32 or f64");
        return -1;
    }
    if (max_pos < 1) {
        snprintf(err, errlen, "a run needs at least one position");
        return -1;
    }
    long maxseq = dsv4q_run_max_seq_len(&m->cfg);
    if (max_pos > maxseq) {
        snprintf(err, errlen, "a run of %ld positions is longer than the model's max_seq_len %ld "
                 "(original_seq_len x rope_factor)", max_pos, maxseq);
        return -1;
    }
    /* caches and decode steps here; a prefill is checked when it is fed */
    double need = dsv4q_run_estimate_bytes(m, width, max_pos, 1, 1), have = dsv4q_mem_available();
    if (have > 0 && need > have) {
        snprintf(err, errlen,
                 "a run of %ld positions at f%d needs about %.2f GB (KV and compressor caches, RoPE "
                 "tables, a decode step), more than the %.2f GB of memory available; use fewer positions%s",
                 max_pos, width, need / 1e9, have / 1e9, width == 64 ? " or f32" : "");
        return -1;
    }
    dsv4q_run *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->width = width;
    r->m = m;
    r->max_pos = max_pos;
    r->last = -1;
    if (width == 32) r->r32 = dsv4q_run_new_f32(m, bs, max_pos, tap, user);
    else r->r64 = dsv4q_run_new_f64(m, bs, max_pos, tap, user);
    if (!r->r32 && !r->r64) goto oom;
    *out = r;
    return 0;
oom:
    free(r);
    snprintf(err, errlen, "out of memory starting a run of %ld positions", max_pos);
    return -1;
}

int dsv4q_model_check_ids(const dsv4q_model *m, const int32_t *ids, long n, long pos0, char *err, size_t errlen)
{
    const int vocab = m->cfg.vocab_size;
    const int v41 = m->cfg.arch == DSV4Q_ARCH_V41;
    const long nmap = v41 && m->engram_hash ? (long)m->engram_hash->vocab : vocab;
    for (long i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab)
            return dsv4q_errf(err, errlen, "token %ld (id %d) is outside the vocabulary [0, %d)", pos0 + i, ids[i],
                              vocab);
        /* V4.1: image inputs are out of scope (no vision tower, no image spans) */
        if (v41 && ids[i] == m->cfg.image_token_id)
            return dsv4q_errf(err, errlen,
                              "token %ld is image_token_id %d: image inputs are out of scope (dsv4q runs the text "
                              "model only)",
                              pos0 + i, ids[i]);
        if (ids[i] >= nmap)
            return dsv4q_errf(err, errlen,
                              "token %ld (id %d) is beyond the Engram token map's %ld entries "
                              "(engram_token_map.json of the checkpoint)",
                              pos0 + i, ids[i], nmap);
    }
    return 0;
}

int dsv4q_run_set_prefill(dsv4q_run *r, long prompt, char *err, size_t errlen)
{
    if (prompt < 1 || prompt > r->max_pos)
        return dsv4q_errf(err, errlen, "a prompt of %ld tokens does not fit a run of %ld positions", prompt,
                          r->max_pos);
    if (r->attn_next || ON_WIDTH(r, dsv4q_run_set_prompt, prompt)) /* attn_next: a stage call was made */
        return dsv4q_errf(err, errlen,
                          "the prompt length is declared before the first call, on a run of the "
                          "oracle's own operators (no backend provider)");
    r->prompt = prompt;
    return 0;
}

/* dsv4q_run_feed and dsv4q_run_feed_xs: xs NULL runs the whole call. */
static int feed(dsv4q_run *r, const int32_t *ids, long s, void *xs, double *logits, char *err, size_t errlen)
{
    /* the prefill this call belongs to: declared, or this call at 0 */
    const long S = r->prompt ? r->prompt : r->pos == 0 ? s : 0;
    if (s < 1 || (r->pos >= S && s != 1) || (r->pos < S && r->pos + s > S)) {
        if (r->prompt && r->pos < S)
            snprintf(err, errlen,
                     "a chunk of the %ld-token prompt at position %ld has %ld tokens; at most %ld "
                     "are left",
                     S, r->pos, s, S - r->pos);
        else
            snprintf(err, errlen,
                     "a call is a prefill of >= 1 tokens at position 0 or a one-token decode "
                     "(got %ld tokens at position %ld)",
                     s, r->pos);
        return -1;
    }
    if (r->pos + s > r->max_pos) {
        snprintf(err, errlen, "position %ld is past the run's %ld positions", r->pos + s - 1, r->max_pos);
        return -1;
    }
    if (dsv4q_model_check_ids(r->m, ids, s, r->pos, err, errlen)) return -1;
    if (s > 1) { /* a prefill's activations: refuse what cannot fit, before any work */
        /* the run's estimate with this call, less its RoPE tables, which
         * the open built (MemAvailable already excludes them) */
        const double need =
            dsv4q_run_estimate_bytes(r->m, r->width, r->max_pos, S, s) - rope_bytes(&r->m->cfg, r->width, r->max_pos);
        const double have = dsv4q_mem_available();
        if (have > 0 && need > have) {
            const double rope = rope_bytes(&r->m->cfg, r->width, r->max_pos);
            const long fit = dsv4q_run_chunk_fit(r->m, r->width, r->max_pos, S, have + rope);
            char hint[96] = "";
            if (fit > 0) snprintf(hint, sizeof hint, ", a prefill in chunks of %ld tokens (--chunk %ld)", fit, fit);
            snprintf(err, errlen,
                     "a prefill call of %ld tokens at f%d needs about %.2f GB (activations, the indexer's "
                     "[s, positions/ratio] scores, caches), more than the %.2f GB of memory available; use a "
                     "shorter prompt%s%s",
                     s, r->width, need / 1e9, have / 1e9, hint, r->width == 64 ? " or f32" : "");
            return -1;
        }
    }
    int rc = !xs              ? ON_WIDTH(r, dsv4q_run_step, ids, s, logits)
             : r->width == 32 ? dsv4q_run_step_xs_f32(r->r32, ids, s, xs, logits)
                              : dsv4q_run_step_xs_f64(r->r64, ids, s, xs, logits);
    if (rc) {
        const char *why = r->width == 32 ? dsv4q_run_error_f32(r->r32) : dsv4q_run_error_f64(r->r64);
        if (why && why[0]) snprintf(err, errlen, "the forward pass failed at position %ld: %s", r->pos, why);
        else snprintf(err, errlen, "out of memory in the forward pass at position %ld", r->pos);
        return -1;
    }
    r->pos += s;
    return 0;
}

int dsv4q_run_feed(dsv4q_run *r, const int32_t *ids, long s, double *logits, char *err, size_t errlen)
{
    return feed(r, ids, s, NULL, logits, err, errlen);
}

int dsv4q_run_set_layers(dsv4q_run *r, int first, int last, char *err, size_t errlen)
{
    const int n = r->m->cfg.n_layers;
    if (r->m->cfg.arch == DSV4Q_ARCH_V41)
        return dsv4q_errf(err, errlen,
                          "a layer range (MPI runs) is built for DeepSeek V4 only so far, not V4.1 (its "
                          "carried pre-mix and source-layer caches do not cross a range yet)");
    if (first < 0 || last < first || last >= n)
        return dsv4q_errf(err, errlen, "layers %d-%d are not a range of the model's %d layers (0-%d)", first, last, n,
                          n - 1);
    if (ON_WIDTH(r, dsv4q_run_set_layers, first, last))
        return dsv4q_errf(err, errlen, "a layer range is set before the first call");
    r->first = first;
    r->last = last;
    r->stopped = last < n - 1;
    return 0;
}

long dsv4q_run_xs_count(const dsv4q_run *r, long s) { return s * r->m->cfg.hc_mult * (long)r->m->cfg.dim; }

int dsv4q_run_feed_xs(dsv4q_run *r, const int32_t *ids, long s, void *xs, double *logits, char *err, size_t errlen)
{
    if (!xs) return dsv4q_errf(err, errlen, "dsv4q_run_feed_xs: no hidden-stream buffer");
    return feed(r, ids, s, xs, logits, err, errlen);
}

int dsv4q_run_mtp(dsv4q_run *r, const int32_t *ids, double *logits, char *err, size_t errlen)
{
    if (r->m->cfg.n_mtp_layers < 1) {
        snprintf(err, errlen, "the model has no MTP layer");
        return -1;
    }
    if (r->m->cfg.arch == DSV4Q_ARCH_V41) {
        snprintf(err, errlen, "the V4.1 mtp.* layers are DSpark draft stages, not a V4 MTP block");
        return -1;
    }
    if (r->stopped && r->last >= 0) {
        snprintf(err, errlen, "MTP needs the last layer's hidden streams; this run holds layers %d-%d of %d", r->first,
                 r->last, r->m->cfg.n_layers);
        return -1;
    }
    if (r->stopped) {
        snprintf(err, errlen, "MTP needs the last layer's hidden streams; this run stops early (last layer set)");
        return -1;
    }
    int rc = ON_WIDTH(r, dsv4q_run_mtp, ids, logits);
    if (rc) snprintf(err, errlen, "MTP forward failed (no prior call, or out of memory)");
    return rc;
}

int dsv4q_run_dspark(dsv4q_run *r, int32_t tok, double *logits, int32_t *ids, double *conf, char *err, size_t errlen)
{
    const dsv4q_config *g = &r->m->cfg;
    if (g->arch != DSV4Q_ARCH_V41 || g->n_mtp_layers < 1) {
        snprintf(err, errlen,
                 "the model has no DSpark stage (a V4.1 checkpoint with mtp.* stages and "
                 "dspark_block_size > 0)");
        return -1;
    }
    if (tok < 0 || tok >= g->vocab_size) {
        snprintf(err, errlen, "DSpark: token %d outside the vocabulary [0, %d)", (int)tok, g->vocab_size);
        return -1;
    }
    if (r->stopped) {
        snprintf(err, errlen, "DSpark needs every target layer's input; this run stops early (last layer set)");
        return -1;
    }
    int rc = ON_WIDTH(r, dsv4q_run_dspark, tok, logits, ids, conf);
    if (rc < 0) snprintf(err, errlen, "DSpark forward failed (no prior call, or out of memory)");
    return rc;
}

void dsv4q_run_set_pick_hook(dsv4q_run *r, dsv4q_pick_fn fn, void *user)
{
    ON_WIDTH(r, dsv4q_run_set_pick_hook, fn, user);
}

int dsv4q_run_set_last_layer(dsv4q_run *r, int layer)
{
    int rc = ON_WIDTH(r, dsv4q_run_set_last_layer, layer);
    if (!rc) r->stopped = layer >= 0 && layer < r->m->cfg.n_layers - 1;
    return rc;
}

void dsv4q_run_set_stage_hook(dsv4q_run *r, dsv4q_stage_fn fn, void *user)
{
    ON_WIDTH(r, dsv4q_run_set_stage_hook, fn, user);
}

int dsv4q_run_set_provider(dsv4q_run *r, const dsv4q_provider_f32 *p, void *ctx)
{
    if (r->width != 32 || r->pos) return -1;
    return dsv4q_run_set_provider_f32(r->r32, p, ctx);
}

int dsv4q_run_seed_prefix(dsv4q_run *r, const int32_t *ids, long n, char *err, size_t errlen)
{
    const dsv4q_config *g = &r->m->cfg;
    if (g->arch == DSV4Q_ARCH_V41)
        return dsv4q_errf(err, errlen,
                          "a cached prefix is seeded for DeepSeek V4 only, not yet for V4.1 (its shared slots "
                          "follow the calls: oracle/model_v41.c J2)");
    if (r->attn_next || r->pos > 0)
        return dsv4q_errf(err, errlen, "a cached prefix is seeded before any stage call or feed");
    double *logits = malloc(sizeof(double) * (size_t)g->vocab_size);
    if (!logits) return dsv4q_errf(err, errlen, "out of memory");
    const int rc = dsv4q_run_feed(r, ids, n, logits, err, errlen);
    free(logits);
    if (rc) return -1;
    if (!(r->attn_next = calloc((size_t)dsv4q_stage_cache_count(g), sizeof(long))))
        return dsv4q_errf(err, errlen, "out of memory");
    for (int li = 0; li < g->n_layers; li++) r->attn_next[li] = n; /* not the MTP layer's: no feed runs it */
    return 0;
}

int dsv4q_run_stage(dsv4q_run *r, const dsv4q_stage_io *io, char *err, size_t errlen)
{
    const dsv4q_config *g = &r->m->cfg;
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(g->arch, io->stage);
    if (!si) {
        snprintf(err, errlen, "unknown stage id %d", io->stage);
        return -1;
    }
    if (si->per_layer && (io->layer < 0 || io->layer >= g->n_layers)) {
        snprintf(err, errlen, "stage %s: layer %d is outside [0, %d)", si->name, io->layer, g->n_layers);
        return -1;
    }
    /* With a declared prompt a call is one of its chunks (inside [0,
     * prompt)) or a one-token decode after it: the attention lays its
     * columns out for the prompt (oracle/model.c M4), so a call that
     * crosses the prompt's end would outgrow them. */
    const int chunk = r->prompt > 0 && io->pos0 + io->s <= r->prompt;
    const int crosses = r->prompt > 0 && io->pos0 < r->prompt && io->pos0 + io->s > r->prompt;
    if (io->s < 1 || io->pos0 < 0 || crosses || (io->pos0 > 0 && io->s != 1 && !chunk)) {
        snprintf(err, errlen,
                 "stage %s: a call is a prefill of >= 1 tokens at position 0, a chunk inside a declared prefill "
                 "(dsv4q_run_set_prefill: %ld tokens) or a one-token decode (got %ld tokens at position %ld)",
                 si->name, r->prompt, io->s, io->pos0);
        return -1;
    }
    if (io->pos0 + io->s > r->max_pos) {
        snprintf(err, errlen, "stage %s: position %ld is past the run's %ld positions", si->name,
                 io->pos0 + io->s - 1, r->max_pos);
        return -1;
    }
    for (long i = 0; io->ids && i < io->s; i++)
        if (io->ids[i] < 0 || io->ids[i] >= g->vocab_size) {
            snprintf(err, errlen, "token %ld (id %d) is outside the vocabulary [0, %d)", i, io->ids[i], g->vocab_size);
            return -1;
        }
    if (si->uses_ids && !io->ids) {
        snprintf(err, errlen, "stage %s needs the call's token ids", si->name);
        return -1;
    }
    const int ci = dsv4q_stage_cache_index(io->stage, io->layer, g);   /* -1: stateless */
    if (g->arch == DSV4Q_ARCH_V41 && io->stage == DSV4Q_S41_ENGRAM && ci < 0) {
        snprintf(err, errlen, "stage engram: layer %d has no Engram", io->layer);
        return -1;
    }
    if (g->arch == DSV4Q_ARCH_V4 && io->stage == DSV4Q_STAGE_MTP && g->n_mtp_layers < 1) {
        snprintf(err, errlen, "stage mtp: the model has no MTP layer");
        return -1;
    }
    if (ci >= 0) {
        if (!r->attn_next && !(r->attn_next = calloc((size_t)dsv4q_stage_cache_count(g), sizeof(long)))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (io->pos0 != r->attn_next[ci]) {
            snprintf(err, errlen, "stage %s of layer %d: call at position %ld, but this layer's caches are at "
                     "position %ld (calls must come in order from position 0)", si->name, ci, io->pos0,
                     r->attn_next[ci]);
            return -1;
        }
    }
    if (g->arch == DSV4Q_ARCH_V41 && io->stage == DSV4Q_S41_ATTN) {
        const int src = dsv4q_v41_unready_source(g, io->layer, r->attn_next, io->pos0 + io->s);
        if (src >= 0) {
            snprintf(err, errlen,
                     "stage attn of layer %d at position %ld reads the caches of source layer %d, "
                     "whose attn has not run this call (source layers run first, in layer order)",
                     io->layer, io->pos0, src);
            return -1;
        }
    }
    int rc = ON_WIDTH(r, dsv4q_stage_exec, io);
    if (rc) {
        const char *why = r->width == 32 ? dsv4q_run_error_f32(r->r32) : dsv4q_run_error_f64(r->r64);
        snprintf(err, errlen, "stage %s at position %ld: %s", si->name, io->pos0,
                 why && why[0] ? why : "out of memory");
        return -1;
    }
    if (ci >= 0) r->attn_next[ci] = io->pos0 + io->s;
    return 0;
}

void dsv4q_run_close(dsv4q_run *r)
{
    if (!r) return;
    free(r->attn_next);
    if (r->width == 32) dsv4q_run_free_f32(r->r32);
    else dsv4q_run_free_f64(r->r64);
    free(r);
}
