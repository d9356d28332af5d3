/*
 * golden.c - the golden cases, their payloads, record and check
 * (see golden.h and docs/goldens.md).
 *
 * Layout of this file:
 *   1. arena, generator, weight builders, output collection (width-free)
 *   2. the per-width case bodies: goldens/cases.inc, included twice (R =
 *      float / double, S(n) = n_f32 / n_f64, G(n) = n_f32 / n_f64), the
 *      same way oracle/ops.h expands oracle/ops.inc
 *   3. the whole-model cases (model_tiny; stages_tiny, whose stage list is
 *      the stage table's)
 *   4. the case table and the payload builder
 *   5. zlib container, manifest, record, check
 */
#include "base/file.h"
#include "goldens/golden.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io/sha256.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/dmath.h"
#include "oracle/formats.h"
#include "oracle/model_run.h"
#include "oracle/ops.h"
#include "oracle/stages.h"
#include "base/rng.h"
#include "base/util.h"

/* ======================================================================== *
 * 1. context: arena, generator, weights, outputs
 * ======================================================================== */

typedef union ablk {
    union ablk *next;
    max_align_t align;
} ablk;

typedef struct gctx {
    const char *key;          /* case key: seeds every input stream */
    int width;                /* 32 | 64 */
    const char *profile;      /* source | model | qat | exact */
    uint64_t bs;              /* the profile's boundary set */
    dsv4q_stw *w;             /* the payload being built */
    ablk *arena;              /* allocations of the current (width, profile) */
    uint8_t *combo;           /* this combination's output bytes (distinct groups) */
    size_t ncombo, capcombo;
    long ntensors, nvalues;
    void *user;               /* case state (model_tiny) */
    const char *meta[4][2];   /* extra payload metadata set by a case's setup */
    char *err;
    size_t errlen;
} gctx;

static void *galloc(gctx *g, size_t n)
{
    ablk *b = malloc(sizeof(ablk) + (n ? n : 1));
    if (!b) {
        dsv4q_errf(g->err, g->errlen, "%s: out of memory (%zu bytes)", g->key, n);
        return NULL;
    }
    b->next = g->arena;
    g->arena = b;
    return b + 1;
}

static void arena_free(gctx *g)
{
    while (g->arena) {
        ablk *n = g->arena->next;
        free(g->arena);
        g->arena = n;
    }
}

#define NEW(T, n) ((T *)galloc(g, sizeof(T) * (size_t)(n)))

/* --- the generator: splitmix64 over FNV-1a of (case key, stream name) --- */

typedef struct grng {
    uint64_t key, ctr;
} grng;

static grng rng_of(const gctx *g, const char *stream)
{
    grng r = {dsv4q_mix64(dsv4q_mix64(dsv4q_fnv1a64(g->key) + DSV4Q_RNG_GAMMA) ^ dsv4q_fnv1a64(stream)), 0};
    return r;
}

static uint64_t rbits(grng *r)
{
    r->ctr++;
    return dsv4q_mix64(r->key + r->ctr * DSV4Q_RNG_GAMMA);
}

/* Uniform on the 2^-23 grid in [-1, 1): exact in binary32. */
static double r_unif(grng *r)
{
    return (double)((int64_t)(rbits(r) >> 40) - ((int64_t)1 << 23)) * 0x1p-23;
}

/* Uniform on the 2^-24 grid in [0, 1): exact in binary32. */
static double r_unit(grng *r)
{
    return (double)(rbits(r) >> 40) * 0x1p-24;
}

static int r_int(grng *r, int n)
{
    return (int)(rbits(r) % (uint64_t)n);
}

/* Standard normal (Box-Muller with the oracle's own log/cos, IEEE sqrt),
 * rounded to binary32 so both widths see the same value. */
static double r_normal(grng *r)
{
    double u1 = (double)((rbits(r) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(rbits(r) >> 11) * 0x1p-53;
    double v = sqrt(-2.0 * dsv4q_log(u1)) * dsv4q_cos(6.283185307179586 * u2);
    return (double)(float)v;
}

/* BF16-valued normal times a power of two. */
static double r_bf16(grng *r, double amp)
{
    return dsv4q_bf16_decode(dsv4q_bf16_encode(r_normal(r) * amp));
}

/* --- weights (width-independent: stored codes) --------------------------- */

static dsv4q_weight wview(const char *name, dsv4q_wfmt fmt, long out, long in, const void *data,
                          const void *scale, dsv4q_dtype sdt)
{
    dsv4q_weight w = {name, fmt, out, in, data, scale, sdt};
    return w;
}

/* BF16 [out, in] = bf16(normal * amp). data NULL on allocation failure. */
static dsv4q_weight w_bf16(gctx *g, const char *stream, long out, long in, double amp)
{
    grng r = rng_of(g, stream);
    uint16_t *c = NEW(uint16_t, out * in);
    if (c)
        for (long i = 0; i < out * in; i++) c[i] = dsv4q_bf16_encode(r_normal(&r) * amp);
    return wview(stream, DSV4Q_WF_BF16, out, in, c, NULL, DSV4Q_DT_INVALID);
}

/* F32 [out, in] = normal * amp. */
static dsv4q_weight w_f32(gctx *g, const char *stream, long out, long in, double amp)
{
    grng r = rng_of(g, stream);
    float *c = NEW(float, out * in);
    if (c)
        for (long i = 0; i < out * in; i++) c[i] = (float)(r_normal(&r) * amp);
    return wview(stream, DSV4Q_WF_F32, out, in, c, NULL, DSV4Q_DT_INVALID);
}

/* FP8 E4M3 [out, in] with 128x128 block scales [ceil(out/128), ceil(in/128)]:
 * E8M0 2^-14..2^-11, or (f32scale) F32 (1 + u) 2^-13. Codes are
 * E4M3(normal * 96), saturating (no NaN code). */
static dsv4q_weight w_fp8(gctx *g, const char *stream, long out, long in, int f32scale)
{
    grng r = rng_of(g, stream);
    const long nsc = ((out + 127) / 128) * ((in + 127) / 128);
    uint8_t *c = NEW(uint8_t, out * in);
    void *s = f32scale ? (void *)NEW(float, nsc) : (void *)NEW(uint8_t, nsc);
    if (c && s) {
        for (long i = 0; i < out * in; i++) c[i] = dsv4q_e4m3_encode(r_normal(&r) * 96.0, 1);
        for (long i = 0; i < nsc; i++) {
            if (f32scale) ((float *)s)[i] = (float)((1.0 + r_unit(&r)) * 0x1p-13);
            else ((uint8_t *)s)[i] = (uint8_t)dsv4q_e8m0_encode_exp(-14 + r_int(&r, 4));
        }
    }
    return wview(stream, DSV4Q_WF_FP8, out, in, c && s ? c : NULL, s,
                 f32scale ? DSV4Q_DT_F32 : DSV4Q_DT_F8_E8M0);
}

/* FP4 E2M1 packed [out, in/2] (every code, uniformly) with E8M0 scales
 * [out, in/32] of 2^-6..2^-3. */
static dsv4q_weight w_fp4(gctx *g, const char *stream, long out, long in)
{
    grng r = rng_of(g, stream);
    uint8_t *c = NEW(uint8_t, out * in / 2), *s = NEW(uint8_t, out * (in / 32));
    if (c && s) {
        for (long i = 0; i < out * in / 2; i++) c[i] = (uint8_t)(rbits(&r) >> 56);
        for (long i = 0; i < out * (in / 32); i++) s[i] = (uint8_t)dsv4q_e8m0_encode_exp(-6 + r_int(&r, 4));
    }
    return wview(stream, DSV4Q_WF_FP4, out, in, c && s ? c : NULL, s, DSV4Q_DT_F8_E8M0);
}

/* --- outputs -------------------------------------------------------------- */

static int combo_append(gctx *g, const void *p, size_t n)
{
    if (g->ncombo + n > g->capcombo) {
        size_t nc = g->capcombo ? g->capcombo : 4096;
        while (nc < g->ncombo + n) nc *= 2;
        uint8_t *b = realloc(g->combo, nc);
        if (!b) return dsv4q_errf(g->err, g->errlen, "%s: out of memory", g->key);
        g->combo = b;
        g->capcombo = nc;
    }
    memcpy(g->combo + g->ncombo, p, n);
    g->ncombo += n;
    return 0;
}

/* Add output `out` of the current (width, profile) as {f32|f64}.{profile}.{out}. */
static int emit_raw(gctx *g, const char *out, dsv4q_dtype dt, int ndim, const int64_t *shape,
                    const void *data)
{
    char name[160];
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    if (!data) return dsv4q_errf(g->err, g->errlen, "%s: output %s missing", g->key, out);
    snprintf(name, sizeof name, "f%d.%s.%s", g->width, g->profile, out);
    size_t nb = (size_t)n * dsv4q_dtype_size(dt);
    if (dsv4q_stw_add(g->w, name, dt, ndim, shape, data, nb, g->err, g->errlen)) return -1;
    g->ntensors++;
    g->nvalues += (long)n;
    if (combo_append(g, out, strlen(out) + 1) || combo_append(g, shape, sizeof(int64_t) * (size_t)ndim) ||
        combo_append(g, data, nb))
        return -1;
    return 0;
}

#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define EMIT_I32(out, p, ...) emit_raw(g, out, DSV4Q_DT_I32, NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__}, p)

/* ======================================================================== *
 * 2. per-width case bodies
 * ======================================================================== */

#define R float
#define S(n) n##_f32
#define G(n) n##_f32
#define R_DT DSV4Q_DT_F32
#include "goldens/cases.inc"
#undef R
#undef S
#undef G
#undef R_DT
#define R double
#define S(n) n##_f64
#define G(n) n##_f64
#define R_DT DSV4Q_DT_F64
#include "goldens/cases.inc"
#undef R
#undef S
#undef G
#undef R_DT

/* ======================================================================== *
 * 3. model_tiny: synthesize `tiny` (seed 1) into a temporary directory,
 *    prompt of 40 synthetic ids + 4 decode steps, logits of every call and
 *    the MTP logits after the last call.
 * ======================================================================== */

#define TINY_PROMPT 40
#define TINY_DECODE 4

typedef struct tiny_state {
    char sha[65];             /* SHA-256 of the synthesized model.safetensors */
    char dir[512];            /* .../tiny inside a mkdtemp directory */
    char top[512];
    dsv4q_model *m;
    int32_t ids[TINY_PROMPT + TINY_DECODE + 1];
} tiny_state;

static void rm_tree_shallow(const char *dir)
{
    /* synth writes config.json and model.safetensors (one shard) */
    static const char *const files[] = {"config.json", "model.safetensors", NULL};
    char p[1024];
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

static void tiny_teardown(gctx *g)
{
    tiny_state *t = g->user;
    if (!t) return;
    if (t->m) dsv4q_model_close(t->m);
    if (t->dir[0]) rm_tree_shallow(t->dir);
    if (t->top[0]) rmdir(t->top);
    free(t);
    g->user = NULL;
}

static int tiny_setup(gctx *g)
{
    tiny_state *t = calloc(1, sizeof *t);
    if (!t) return dsv4q_errf(g->err, g->errlen, "model_tiny: out of memory");
    g->user = t;
    const char *tmp = getenv("TMPDIR");
    snprintf(t->top, sizeof t->top, "%s/dsv4q-golden-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(t->top)) {
        int e = errno;
        t->top[0] = 0;
        return dsv4q_errf(g->err, g->errlen, "model_tiny: mkdtemp: %s", strerror(e));
    }
    snprintf(t->dir, sizeof t->dir, "%s/tiny", t->top);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny", g->err, g->errlen) ||
        dsv4q_synth_write(&cfg, 1, t->dir, 1, g->err, g->errlen) ||
        dsv4q_model_open(&t->m, t->dir, g->err, g->errlen))
        return -1;
    /* pinned in the payload: a model_tiny mismatch can then say whether the
     * synthesized checkpoint itself changed (io/synth.c) */
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", t->dir);
    if (dsv4q_sha256_hex_file(path, t->sha, g->err, g->errlen)) return -1;
    g->meta[0][0] = "dsv4q.golden.checkpoint_sha256";
    g->meta[0][1] = t->sha;
    g->meta[1][0] = "dsv4q.golden.synth_version";
    g->meta[1][1] = DSV4Q_SYNTH_VERSION;
    grng r = rng_of(g, "ids");
    for (int i = 0; i < TINY_PROMPT + TINY_DECODE + 1; i++)
        t->ids[i] = (int32_t)(rbits(&r) % (uint64_t)t->m->cfg.vocab_size);
    return 0;
}

static int tiny_run(gctx *g)
{
    tiny_state *t = g->user;
    const long V = t->m->cfg.vocab_size;
    double *lg = NEW(double, (TINY_DECODE + 1) * V), *mtp = NEW(double, V);
    if (!lg || !mtp) return -1;
    dsv4q_run *r = NULL;
    int rc = -1;
    if (dsv4q_run_open(&r, t->m, g->width, g->bs, TINY_PROMPT + TINY_DECODE, NULL, NULL, g->err, g->errlen))
        return -1;
    if (dsv4q_run_feed(r, t->ids, TINY_PROMPT, lg, g->err, g->errlen)) goto out;
    for (int i = 0; i < TINY_DECODE; i++)
        if (dsv4q_run_feed(r, &t->ids[TINY_PROMPT + i], 1, lg + (i + 1) * V, g->err, g->errlen)) goto out;
    if (dsv4q_run_mtp(r, &t->ids[TINY_PROMPT + TINY_DECODE], mtp, g->err, g->errlen)) goto out;
    if (g->width == 64) {
        rc = emit_raw(g, "logits", DSV4Q_DT_F64, 2, (int64_t[]){TINY_DECODE + 1, V}, lg) ||
             emit_raw(g, "mtp_logits", DSV4Q_DT_F64, 2, (int64_t[]){1, V}, mtp) ? -1 : 0;
    } else {   /* the f32 instance's values are floats carried in doubles: exact */
        float *f = NEW(float, (TINY_DECODE + 2) * V);
        if (!f) goto out;
        for (long i = 0; i < (TINY_DECODE + 1) * V; i++) f[i] = (float)lg[i];
        for (long i = 0; i < V; i++) f[(TINY_DECODE + 1) * V + i] = (float)mtp[i];
        rc = emit_raw(g, "logits", DSV4Q_DT_F32, 2, (int64_t[]){TINY_DECODE + 1, V}, f) ||
             emit_raw(g, "mtp_logits", DSV4Q_DT_F32, 2, (int64_t[]){1, V}, f + (TINY_DECODE + 1) * V) ? -1 : 0;
    }
out:
    dsv4q_run_close(r);
    return rc;
}

/* ======================================================================== *
 * 3b. stages_tiny: the same checkpoint, two short calls (prompt 4, one
 *     decode step), and the SHA-256 of every stage output of the stage
 *     table (oracle/stages.h) at the run's width, in forward order: the
 *     stage list is the table's, so a new stage row is recorded with no
 *     edit here, and a moved stage is named by the first differing tensor
 *     (names sort in forward order: c{call}.s{slot}.{capture name}).
 *     Digests, not values: all outputs of both calls at 8 combinations
 *     would be megabytes of incompressible floats.
 * ======================================================================== */

#define STAGES_PROMPT 4
#define STAGES_CALLS 2   /* the prompt, then one decode step */

typedef struct stages_rec {
    gctx *g;
    const dsv4q_config *cfg;
    int call, rc;
} stages_rec;

/* Emit the digest of out[t] of stage st at layer (values rounded to the
 * run's width: exact, the f32 instance's values are floats in doubles). */
static int emit_stage_digest(stages_rec *sr, int st, int layer, long s, int t, const double *v)
{
    gctx *g = sr->g;
    const dsv4q_stage_info *si = dsv4q_stage_get(st);
    const int64_t n = dsv4q_stage_numel(&si->out[t], sr->cfg, s);
    char cap[DSV4Q_STAGE_NAME_MAX], name[DSV4Q_STAGE_NAME_MAX + 24], hex[65];
    const long slot = dsv4q_stage_slot_of(sr->cfg->n_layers, st, layer);
    if (slot < 0 || dsv4q_stage_tensor_name(cap, sizeof cap, st, layer, 1, t))
        return dsv4q_errf(g->err, g->errlen, "%s: stage %s layer %d is not in the stage table's slots", g->key, si->name,
                     layer);
    if (g->width == 32) {
        float *f = NEW(float, n);
        if (!f) return -1;
        for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
        dsv4q_sha256_hex(f, sizeof(float) * (size_t)n, hex);
    } else {
        dsv4q_sha256_hex(v, sizeof(double) * (size_t)n, hex);
    }
    uint8_t d[32];
    for (int i = 0; i < 32; i++) {
        unsigned x;
        sscanf(hex + 2 * i, "%2x", &x);
        d[i] = (uint8_t)x;
    }
    snprintf(name, sizeof name, "c%d.s%03ld.%s", sr->call, slot, cap);
    return emit_raw(g, name, DSV4Q_DT_U8, 1, (int64_t[]){32}, d);
}

static int stages_hook(void *user, const dsv4q_stage_io *io)
{
    stages_rec *sr = user;
    const dsv4q_stage_info *si = dsv4q_stage_get(io->stage);
    for (int t = 0; !sr->rc && si && t < si->nout; t++)
        if (emit_stage_digest(sr, io->stage, io->layer, io->s, t, io->out[t])) sr->rc = -1;
    return 0;   /* observe only */
}

static int stages_run(gctx *g)
{
    tiny_state *t = g->user;
    const long V = t->m->cfg.vocab_size;
    double *lg = NEW(double, V);
    if (!lg) return -1;
    stages_rec sr = {g, &t->m->cfg, 0, 0};
    dsv4q_run *r = NULL;
    int rc = -1;
    if (dsv4q_run_open(&r, t->m, g->width, g->bs, STAGES_PROMPT + STAGES_CALLS - 1, NULL, NULL, g->err, g->errlen))
        return -1;
    dsv4q_run_set_stage_hook(r, stages_hook, &sr);
    for (long pos = 0; sr.call < STAGES_CALLS; sr.call++) {
        const long s = sr.call ? 1 : STAGES_PROMPT;
        if (dsv4q_run_feed(r, t->ids + pos, s, lg, g->err, g->errlen) || sr.rc) goto out;
        pos += s;
        /* the mtp stage (reported to the hook too): the next token of each row */
        if (dsv4q_run_mtp(r, t->ids + pos - s + 1, lg, g->err, g->errlen) || sr.rc) goto out;
    }
    rc = 0;
out:
    dsv4q_run_close(r);
    return rc;
}

/* ======================================================================== *
 * 4. the table and the payload builder
 * ======================================================================== */

typedef int (*case_fn)(gctx *g);

typedef struct gcase {
    const char *key;
    const char *inputs;
    case_fn f32, f64;
    int (*setup)(gctx *g);
    void (*teardown)(gctx *g);
} gcase;

#define OPCASE(k, desc) {#k, desc, c_##k##_f32, c_##k##_f64, NULL, NULL}

static const gcase cases[] = {
    OPCASE(act_quant, "x [4,320] f32-exact: zero row (amax floor), uniform with 448 and 448+2^-15 block maxima, "
                      "normal*32, uniform*2^-20; in place, block 128 ue8m0 and block 64 FP32 scale"),
    OPCASE(act_quant_codes, "x [320] (row 1 of act_quant's pattern); GEMM codes + scales, block 128 ue8m0 and "
                            "block 64 FP32 scale"),
    OPCASE(fp4_act_quant, "x [4,112]: subnormal-range row (amax floor), E2M1 midpoint ties, normal, "
                          "normal*2^20; in place"),
    OPCASE(hadamard, "x [3,128] and [2,64] normal"),
    OPCASE(linear_bf16, "W BF16 [96,256] normal/16, x [3,256] BF16 normal; out linear_bf16 and unrounded"),
    OPCASE(linear_fp8, "W FP8 [160,320] (partial 128-blocks) E8M0 scales, ue8m0; same with FP32 scales, "
                       "ue8m0 off; x [3,320] BF16 normal (row 2 *64)"),
    OPCASE(linear_fp4, "W FP4 [64,256] every code, E8M0 scales per 32; x [3,256] BF16 normal; ue8m0; "
                       "out linear_bf16 and unrounded"),
    OPCASE(linear_f32, "W F32 [64,200] normal/16, x [3,200] normal; unrounded (FP32-math) and linear_bf16"),
    OPCASE(rmsnorm, "x [4,256] normal * 2^{0,6,-10,-24} per row, w [256] 1+normal/8, eps 1e-6; with and "
                    "without w"),
    OPCASE(qhead_norm, "q [6,128] and [2,60] (tail) normal * 2^{0,3,-5}, eps 1e-6"),
    OPCASE(rope_table, "YaRN (r 64, theta 160000, orig 65536, factor 16, beta 32/1) and plain (theta 10000); "
                       "npos 4097, rows at positions 0..7,63,64,1000,4095,4096"),
    OPCASE(rope_apply, "x [6,128] BF16 normal, 3 tokens x 2 heads at pos 5.., rope dims 64..127, YaRN table; "
                       "forward, inverse of forward, plain table at pos 62/63"),
    OPCASE(sparse_attn, "q [3,4,64], kv [150,64] BF16 normal, idx [3,140] (row 0 mixed with -1 and out-of-range "
                        "150/200, row 1 first 70 masked, row 2 all masked), sinks {-2,0,3,12}, scale 1/8"),
    OPCASE(compressor, "dim 128, Dc 128, BF16 wkv/wgate /16, ape, norm; ratio 4 attention (ckv_fp8) and "
                       "ratio 4 indexer (Hadamard+FP4): prefill 10 + decode pos 10..15; ratio 128: prefill 254 "
                       "+ decode 254,255; YaRN table theta 160000; ue8m0"),
    OPCASE(indexer, "Hi 4, Di 64, ratio 4: prefill s 16 T 4 (causal mask), k 2; decode s 2 start 95 T 24, "
                    "k 8, key rows 17=3 and 11=5 (exact ties); q/K BF16 normal, w normal/4"),
    OPCASE(hc_pre, "X [3,4,128] BF16 normal, fn F32 [24,512] normal/32, scale {0.5,0.25,1}, base normal/2, "
                   "eps 1e-6/1e-6, 20 Sinkhorn iterations"),
    OPCASE(hc_post, "x [3,128], X [3,4,128] BF16 normal, post 2*unit, comb unit"),
    OPCASE(hc_head, "X [3,4,128] BF16 normal, fn F32 [4,512] normal/32, scale {0.5}, base normal/2"),
    OPCASE(moe_gate, "x [6,128] BF16 normal (row 5 *64: softplus threshold), W F32 [16,128] normal/16 with row "
                     "7 = row 3, bias unif/8 (bias 7 = bias 3), k 4, route 1.5: sqrtsoftplus+bias, hash "
                     "(tid2eid [10,4]), softmax, sigmoid"),
    OPCASE(expert, "FP4 w1/w3 [128,128], w2 [128,128]; x [3,128] BF16 normal (row 2 *16: clamp), weight "
                   "unit; limit 10; with and without weight; FP8 shared-style expert"),
    OPCASE(moe, "4 FP4 experts + FP8 shared, inter 128, x [5,128] BF16 normal, k 2 (expert 2 unused), weights "
                "unit, limit 10"),
    {"model_tiny",
     "dsv4q synth tiny seed 1; prompt 40 ids + 4 decode ids + 1 MTP id from splitmix64('model_tiny','ids') % "
     "1024; logits [5,1024] of every call, MTP logits after the last",
     tiny_run, tiny_run, tiny_setup, tiny_teardown},
    {"stages_tiny",
     "dsv4q synth tiny seed 1; ids from splitmix64('stages_tiny','ids') % 1024: prompt 4 + 1 decode, MTP after "
     "each call on the next ids; SHA-256 [32] U8 of every stage output of oracle/stages.h per call, "
     "c{call}.s{slot}.{tensor}",
     stages_run, stages_run, tiny_setup, tiny_teardown},
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

int dsv4q_golden_count(void) { return NCASES; }
const char *dsv4q_golden_key(int i) { return i >= 0 && i < NCASES ? cases[i].key : NULL; }
const char *dsv4q_golden_inputs(int i) { return i >= 0 && i < NCASES ? cases[i].inputs : NULL; }

static int case_index(const char *key)
{
    for (int i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].key, key)) return i;
    return -1;
}

static const char *const gprofiles[4] = {"source", "model", "qat", "exact"};

/* "source|model,qat|exact": groups of profiles with identical outputs. */
static void distinct_groups(uint8_t *const *b, const size_t *n, char *out, size_t len)
{
    int grp[4], ng = 0;
    for (int p = 0; p < 4; p++) {
        grp[p] = -1;
        for (int q = 0; q < p; q++)
            if (n[q] == n[p] && !memcmp(b[q], b[p], n[p])) { grp[p] = grp[q]; break; }
        if (grp[p] < 0) grp[p] = ng++;
    }
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < ng; k++) {
        int first = 1;
        for (int p = 0; p < 4; p++)
            if (grp[p] == k) {
                o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s", first ? (k ? "|" : "") : ",",
                                      gprofiles[p]);
                first = 0;
            }
    }
}

static int build_payload(const gcase *c, uint8_t **buf, size_t *len, char *distinct, size_t dlen,
                         long *nvalues, char *err, size_t errlen)
{
    gctx g;
    memset(&g, 0, sizeof g);
    g.key = c->key;
    g.err = err;
    g.errlen = errlen;
    *buf = NULL;
    *len = 0;
    uint8_t *pb[4] = {0};
    size_t pn[4] = {0};
    char groups[2][96];
    int rc = -1;
    g.w = dsv4q_stw_new();
    if (!g.w) return dsv4q_errf(err, errlen, "%s: out of memory", c->key);
    if (c->setup && c->setup(&g)) goto out;
    for (int wi = 0; wi < 2; wi++) {
        g.width = wi ? 64 : 32;
        for (int p = 0; p < 4; p++) {
            g.profile = gprofiles[p];
            if (dsv4q_profile_set(g.profile, &g.bs)) { dsv4q_errf(err, errlen, "unknown profile %s", g.profile); goto out; }
            g.ncombo = 0;
            int r = (wi ? c->f64 : c->f32)(&g);
            arena_free(&g);
            if (r) goto out;
            pb[p] = malloc(g.ncombo ? g.ncombo : 1);
            if (!pb[p]) { dsv4q_errf(err, errlen, "%s: out of memory", c->key); goto out; }
            memcpy(pb[p], g.combo, g.ncombo);
            pn[p] = g.ncombo;
        }
        distinct_groups(pb, pn, groups[wi], sizeof groups[wi]);
        for (int p = 0; p < 4; p++) { free(pb[p]); pb[p] = NULL; }
    }
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%d", DSV4Q_GOLDEN_FORMAT);
    if (dsv4q_stw_meta(g.w, "dsv4q.golden.case", c->key) || dsv4q_stw_meta(g.w, "dsv4q.golden.inputs", c->inputs) ||
        dsv4q_stw_meta(g.w, "dsv4q.golden.format", fmt) ||
        dsv4q_stw_meta(g.w, "dsv4q.golden.distinct.f32", groups[0]) ||
        dsv4q_stw_meta(g.w, "dsv4q.golden.distinct.f64", groups[1]) ||
        dsv4q_stw_meta(g.w, "producer", "dsv4q golden") ||
        (g.meta[0][0] && dsv4q_stw_meta(g.w, g.meta[0][0], g.meta[0][1])) ||
        (g.meta[1][0] && dsv4q_stw_meta(g.w, g.meta[1][0], g.meta[1][1])) ||
        (g.meta[2][0] && dsv4q_stw_meta(g.w, g.meta[2][0], g.meta[2][1])) ||
        (g.meta[3][0] && dsv4q_stw_meta(g.w, g.meta[3][0], g.meta[3][1]))) {
        dsv4q_errf(err, errlen, "%s: out of memory (metadata)", c->key);
        goto out;
    }
    if (distinct) snprintf(distinct, dlen, "f32: %s; f64: %s", groups[0], groups[1]);
    if (nvalues) *nvalues = g.nvalues;
    rc = dsv4q_stw_to_buffer(g.w, buf, len, err, errlen);
    g.w = NULL;   /* freed by to_buffer */
out:
    arena_free(&g);
    if (c->teardown) c->teardown(&g);
    for (int p = 0; p < 4; p++) free(pb[p]);
    free(g.combo);
    if (g.w) dsv4q_stw_free(g.w);
    return rc;
}

int dsv4q_golden_compute(const char *key, uint8_t **buf, size_t *len, char *distinct, size_t dlen,
                         char *err, size_t errlen)
{
    int i = case_index(key ? key : "");
    if (i < 0) return dsv4q_errf(err, errlen, "unknown golden case '%s'", key ? key : "(null)");
    return build_payload(&cases[i], buf, len, distinct, dlen, NULL, err, errlen);
}

/* ======================================================================== *
 * 5. container, manifest, record, check
 * ======================================================================== */

int dsv4q_golden_deflate(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen, char *err, size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    uLongf cap = compressBound((uLong)n);
    uint8_t *b = malloc(cap ? cap : 1);
    if (!b) return dsv4q_errf(err, errlen, "deflate: out of memory");
    int z = compress2(b, &cap, in, (uLong)n, 9);
    if (z != Z_OK) {
        free(b);
        return dsv4q_errf(err, errlen, "deflate: zlib error %d", z);
    }
    *out = b;
    *outlen = cap;
    return 0;
}

int dsv4q_golden_inflate(const uint8_t *in, size_t n, size_t max_out, uint8_t **out, size_t *outlen, char *err,
                         size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit(&zs) != Z_OK) return dsv4q_errf(err, errlen, "inflate: zlib init failed");
    size_t cap = max_out < 65536 ? max_out + 1 : 65536, used = 0;
    uint8_t *b = malloc(cap);
    int z = Z_OK;
    if (!b) { inflateEnd(&zs); return dsv4q_errf(err, errlen, "inflate: out of memory"); }
    zs.next_in = (Bytef *)in;
    zs.avail_in = 0;
    size_t fed = 0;
    for (;;) {
        if (zs.avail_in == 0 && fed < n) {
            size_t chunk = n - fed > (1u << 30) ? (1u << 30) : n - fed;
            zs.next_in = (Bytef *)(in + fed);
            zs.avail_in = (uInt)chunk;
            fed += chunk;
        }
        if (used == cap) {
            if (cap > max_out) break;   /* output longer than allowed */
            size_t nc = cap * 2 > max_out + 1 ? max_out + 1 : cap * 2;
            uint8_t *nb = realloc(b, nc);
            if (!nb) { free(b); inflateEnd(&zs); return dsv4q_errf(err, errlen, "inflate: out of memory"); }
            b = nb;
            cap = nc;
        }
        zs.next_out = b + used;
        zs.avail_out = (uInt)(cap - used);
        z = inflate(&zs, Z_NO_FLUSH);
        used = cap - zs.avail_out;
        if (z == Z_STREAM_END) break;
        if (z == Z_BUF_ERROR && zs.avail_in == 0 && fed == n) break;   /* input ended early */
        if (z != Z_OK && z != Z_BUF_ERROR) break;
    }
    size_t trailing = zs.avail_in + (n - fed);
    const char *msg = zs.msg;
    inflateEnd(&zs);
    if (z == Z_STREAM_END && used > max_out) z = Z_BUF_ERROR;
    if (z != Z_STREAM_END) {
        free(b);
        if (used > max_out) return dsv4q_errf(err, errlen, "inflate: payload longer than %zu bytes", max_out);
        if (z == Z_OK || z == Z_BUF_ERROR) return dsv4q_errf(err, errlen, "inflate: truncated compressed stream");
        return dsv4q_errf(err, errlen, "inflate: %s (zlib %d)", msg ? msg : "invalid stream", z);
    }
    if (trailing) {
        free(b);
        return dsv4q_errf(err, errlen, "inflate: %zu trailing bytes after the compressed stream", trailing);
    }
    *out = b;
    *outlen = used;
    return 0;
}

/* --- case selection -------------------------------------------------------- */

/* sel[NCASES]: 1 = selected. Returns 0 or -1 with err naming the bad key. */
static int select_cases(const char *ops, unsigned char *sel, int *all, char *err, size_t errlen)
{
    *all = !ops || !*ops || !strcmp(ops, "all");
    for (int i = 0; i < NCASES; i++) sel[i] = (unsigned char)*all;
    if (*all) return 0;
    const char *p = ops;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        char key[128];
        size_t n = (size_t)(e - p) < sizeof key - 1 ? (size_t)(e - p) : sizeof key - 1;
        memcpy(key, p, n);
        key[n] = 0;
        int i = case_index(key);
        if (!strcmp(key, "all")) {
            for (int j = 0; j < NCASES; j++) sel[j] = 1;
        } else if (i < 0) {
            size_t o = (size_t)snprintf(err, errlen, "unknown golden case '%s'; cases:", key);
            for (int j = 0; j < NCASES && o < errlen; j++)
                o += (size_t)snprintf(err + o, errlen - o, " %s", cases[j].key);
            return -1;
        } else {
            sel[i] = 1;
        }
        p = e;
    }
    for (int i = 0; i < NCASES; i++)
        if (sel[i]) return 0;
    return dsv4q_errf(err, errlen, "no golden case named in '%s'", ops);
}

/* --- manifest -------------------------------------------------------------- */

static int is_hex64(const char *s)
{
    if (!s || strlen(s) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* Load and validate dir/MANIFEST.json. Returns the root or NULL with err. */
static json_t *manifest_load(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DSV4Q_GOLDEN_MANIFEST);
    json_error_t je;
    char *text;
    size_t tlen;
    char ferr[600];
    if (dsv4q_file_read_all(path, "goldens manifest", DSV4Q_LIMIT_JSON, &text, &tlen, ferr, sizeof ferr)) {
        dsv4q_errf(err, errlen, "%s", ferr);
        return NULL;
    }
    json_t *root = json_loadb(text, tlen, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        dsv4q_errf(err, errlen, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
        return NULL;
    }
    json_t *v = json_object_get(root, "version"), *cs = json_object_get(root, "cases");
    if (!json_is_integer(v) || json_integer_value(v) != DSV4Q_GOLDEN_FORMAT) {
        dsv4q_errf(err, errlen, "%s: \"version\" must be %d", path, DSV4Q_GOLDEN_FORMAT);
        goto bad;
    }
    if (!json_is_array(cs)) {
        dsv4q_errf(err, errlen, "%s: \"cases\" must be an array", path);
        goto bad;
    }
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *e = json_array_get(cs, i);
        const char *key = json_string_value(json_object_get(e, "key"));
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *sha = json_string_value(json_object_get(e, "sha256_payload"));
        json_t *nb = json_object_get(e, "payload_bytes");
        if (!json_is_object(e) || !key || !*key || !file || !*file || !is_hex64(sha) || !json_is_integer(nb) ||
            json_integer_value(nb) < 0) {
            dsv4q_errf(err, errlen, "%s: cases[%zu] needs \"key\", \"file\", \"payload_bytes\" and a 64-hex-digit "
                  "\"sha256_payload\"", path, i);
            goto bad;
        }
        if (file[0] == '/' || strstr(file, "..")) {
            dsv4q_errf(err, errlen, "%s: cases[%zu] (%s): file '%s' must be a relative path inside the directory",
                  path, i, key, file);
            goto bad;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(key, json_string_value(json_object_get(json_array_get(cs, j), "key")))) {
                dsv4q_errf(err, errlen, "%s: case '%s' listed twice", path, key);
                goto bad;
            }
    }
    return root;
bad:
    json_decref(root);
    return NULL;
}

static json_t *manifest_find(json_t *root, const char *key)
{
    json_t *cs = json_object_get(root, "cases");
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *e = json_array_get(cs, i);
        if (!strcmp(json_string_value(json_object_get(e, "key")), key)) return e;
    }
    return NULL;
}

/* --- record ---------------------------------------------------------------- */

int dsv4q_golden_record(const char *dir, const char *ops, FILE *report, char *err, size_t errlen)
{
    unsigned char sel[NCASES];
    int all;
    if (select_cases(ops, sel, &all, err, errlen)) return DSV4Q_GOLDEN_ERROR;
    char ddir[4200], mpath[4200];
    snprintf(ddir, sizeof ddir, "%s/data", dir);
    snprintf(mpath, sizeof mpath, "%s/%s", dir, DSV4Q_GOLDEN_MANIFEST);
    if (dsv4q_mkdir_p(ddir)) {
        dsv4q_errf(err, errlen, "cannot create %s: %s", ddir, strerror(errno));
        return DSV4Q_GOLDEN_ERROR;
    }
    json_t *old = NULL;
    if (!all) {   /* keep the other cases' entries: the existing manifest must be sound */
        char merr[1024];
        if (access(mpath, F_OK) == 0 && !(old = manifest_load(dir, merr, sizeof merr))) {
            dsv4q_errf(err, errlen, "cannot record a subset over an unreadable manifest (%s); record all cases", merr);
            return DSV4Q_GOLDEN_ERROR;
        }
    }
    json_t *entries[NCASES] = {0};
    int rc = DSV4Q_GOLDEN_ERROR;
    for (int i = 0; i < NCASES; i++) {
        if (!sel[i]) {
            json_t *e = old ? manifest_find(old, cases[i].key) : NULL;
            if (e) entries[i] = json_incref(e);
            continue;
        }
        uint8_t *pay = NULL, *z = NULL;
        size_t npay = 0, nz = 0;
        long nvals = 0;
        char distinct[200], sha[65], file[200], path[4400];
        double t0 = dsv4q_now_s();
        if (build_payload(&cases[i], &pay, &npay, distinct, sizeof distinct, &nvals, err, errlen) ||
            dsv4q_golden_deflate(pay, npay, &z, &nz, err, errlen)) {
            free(pay);
            goto out;
        }
        dsv4q_sha256_hex(pay, npay, sha);
        free(pay);
        snprintf(file, sizeof file, "data/%s.st.zz", cases[i].key);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        int w = dsv4q_file_write_atomic(path, z, nz, err, errlen);
        free(z);
        if (w) goto out;
        entries[i] = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s}", "key", cases[i].key, "file", file,
                               "payload_bytes", (json_int_t)npay, "sha256_payload", sha, "profiles", distinct,
                               "inputs", cases[i].inputs);
        if (!entries[i]) { dsv4q_errf(err, errlen, "out of memory"); goto out; }
        if (report)
            fprintf(report, "recorded %-16s %7zu bytes payload, %7zu compressed, %6ld values, %5.2f s; profiles %s\n",
                    cases[i].key, npay, nz, nvals, dsv4q_now_s() - t0, distinct);
    }
    {
        json_t *arr = json_array(), *root;
        for (int i = 0; i < NCASES; i++)
            if (entries[i]) json_array_append(arr, entries[i]);
        root = json_pack("{s:i, s:s, s:s, s:s, s:o}", "version", DSV4Q_GOLDEN_FORMAT, "generator",
                         "dsv4q golden record", "payload",
                         "zlib(safetensors); tensors {f32|f64}.{source|model|qat|exact}.{output}; see docs/goldens.md",
                         "inputs_seed",
                         "per case key and stream name: splitmix64 over FNV-1a (goldens/golden.c rng_of); "
                         "values binary32-exact",
                         "cases", arr);
        char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(root);
        if (!text) { dsv4q_errf(err, errlen, "out of memory (manifest)"); goto out; }
        size_t tl = strlen(text);
        char *t2 = realloc(text, tl + 2);
        if (!t2) { free(text); dsv4q_errf(err, errlen, "out of memory (manifest)"); goto out; }
        t2[tl] = '\n';
        t2[tl + 1] = 0;
        int w = dsv4q_file_write_atomic(mpath, t2, tl + 1, err, errlen);
        free(t2);
        if (w) goto out;
    }
    rc = DSV4Q_GOLDEN_OK;
out:
    for (int i = 0; i < NCASES; i++) json_decref(entries[i]);
    json_decref(old);
    return rc;
}

/* --- check ----------------------------------------------------------------- */

static void fmt_shape(const dsv4q_st_tensor *t, char *b, size_t n)
{
    size_t o = (size_t)snprintf(b, n, "%s [", dsv4q_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(b + o, n - o, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (o < n) snprintf(b + o, n - o, "]");
}

static int same_layout(const dsv4q_st_tensor *a, const dsv4q_st_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* Compare golden gs with computed cs tensor by tensor (name order); writes
 * the first difference into line. Returns the number of differing tensors. */
static long compare_tensors(const char *key, const dsv4q_st *gs, const dsv4q_st *cs, char *line, size_t n)
{
    size_t ng = dsv4q_st_count(gs), nc = dsv4q_st_count(cs), i = 0, j = 0;
    long ndiff = 0;
    line[0] = 0;
    while (i < ng || j < nc) {
        const dsv4q_st_tensor *a = i < ng ? dsv4q_st_at(gs, i) : NULL, *b = j < nc ? dsv4q_st_at(cs, j) : NULL;
        int c = !a ? 1 : !b ? -1 : strcmp(a->name, b->name);
        if (c < 0) {
            if (!ndiff) snprintf(line, n, "MISMATCH %s %s: in the golden, not produced by this build", key, a->name);
            ndiff++;
            i++;
            continue;
        }
        if (c > 0) {
            if (!ndiff) snprintf(line, n, "MISMATCH %s %s: produced by this build, not in the golden", key, b->name);
            ndiff++;
            j++;
            continue;
        }
        i++;
        j++;
        if (!same_layout(a, b)) {
            char sa[128], sb[128];
            fmt_shape(a, sa, sizeof sa);
            fmt_shape(b, sb, sizeof sb);
            if (!ndiff) snprintf(line, n, "MISMATCH %s %s: golden %s got %s", key, a->name, sa, sb);
            ndiff++;
            continue;
        }
        if (!memcmp(a->data, b->data, a->nbytes)) continue;
        size_t es = dsv4q_dtype_size(a->dtype);
        long first = -1, nel = 0;
        for (int64_t k = 0; k < a->numel; k++)
            if (memcmp((const uint8_t *)a->data + k * es, (const uint8_t *)b->data + k * es, es)) {
                if (first < 0) first = (long)k;
                nel++;
            }
        if (!ndiff) {
            double ga = dsv4q_decode_elem(a->dtype, a->data, (size_t)first);
            double gb = dsv4q_decode_elem(b->dtype, b->data, (size_t)first);
            char va[64], vb[64], bits[80] = "";
            snprintf(va, sizeof va, "%.17g", ga);
            snprintf(vb, sizeof vb, "%.17g", gb);
            if (!strcmp(va, vb)) {   /* same printed value: show the bit patterns */
                uint64_t xa = 0, xb = 0;
                memcpy(&xa, (const uint8_t *)a->data + first * (long)es, es);
                memcpy(&xb, (const uint8_t *)b->data + first * (long)es, es);
                snprintf(bits, sizeof bits, "; bits 0x%llx vs 0x%llx", (unsigned long long)xa,
                         (unsigned long long)xb);
            }
            snprintf(line, n, "MISMATCH %s %s [%ld]: golden %s got %s (%ld of %lld values differ%s)", key, a->name,
                     first, va, vb, nel, (long long)a->numel, bits);
        }
        ndiff++;
    }
    return ndiff;
}

/* Integrity of one golden: returns 0 with the inflated payload in *pay, or
 * 2 with the report line (CORRUPT / MISSING) in line. */
static int load_golden(const char *dir, const char *key, json_t *e, uint8_t **pay, size_t *npay, char *line,
                       size_t n)
{
    *pay = NULL;
    *npay = 0;
    const char *file = json_string_value(json_object_get(e, "file"));
    const char *sha = json_string_value(json_object_get(e, "sha256_payload"));
    json_int_t want = json_integer_value(json_object_get(e, "payload_bytes"));
    char path[4400], zerr[512], got[65];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *z;
    size_t nz;
    char ferr[600];
    if (dsv4q_file_read_all(path, "golden payload", DSV4Q_LIMIT_JSON, &z, &nz, ferr, sizeof ferr)) {
        snprintf(line, n, "%s %s: %s", access(path, F_OK) ? "MISSING" : "CORRUPT", key, ferr);
        return DSV4Q_GOLDEN_ERROR;
    }
    int r = dsv4q_golden_inflate((const uint8_t *)z, nz, (size_t)want, pay, npay, zerr, sizeof zerr);
    free(z);
    if (r) {
        snprintf(line, n, "CORRUPT %s: %s: %s", key, path, zerr);
        return DSV4Q_GOLDEN_ERROR;
    }
    if ((json_int_t)*npay != want) {
        snprintf(line, n, "CORRUPT %s: %s: payload is %zu bytes, the manifest says %lld (truncated)", key, path, *npay,
                 (long long)want);
        goto bad;
    }
    dsv4q_sha256_hex(*pay, *npay, got);
    if (strcmp(got, sha)) {
        snprintf(line, n, "CORRUPT %s: %s: SHA-256 of the payload is %s, the manifest says %s", key, path, got, sha);
        goto bad;
    }
    dsv4q_st *st;
    if (dsv4q_st_open_buffer(&st, *pay, *npay, path, zerr, sizeof zerr)) {
        snprintf(line, n, "CORRUPT %s: not a safetensors payload: %s", key, zerr);
        goto bad;
    }
    const char *mk = dsv4q_st_meta(st, "dsv4q.golden.case");
    int wrong = !mk || strcmp(mk, key);
    if (wrong)
        snprintf(line, n, "CORRUPT %s: %s holds case '%s'", key, path, mk ? mk : "(none)");
    dsv4q_st_close(st);
    if (wrong) goto bad;
    return DSV4Q_GOLDEN_OK;
bad:
    free(*pay);
    *pay = NULL;
    return DSV4Q_GOLDEN_ERROR;
}

static int check_case(const char *dir, const gcase *c, json_t *e, FILE *rep)
{
    char line[2048];
    uint8_t *gold = NULL, *mine = NULL;
    size_t ngold = 0, nmine = 0;
    dsv4q_st *gs = NULL, *cs = NULL;
    char err[1024], sha[65];
    long nvals = 0;
    int rc;
    double t0 = dsv4q_now_s();
    if (!e) {
        snprintf(line, sizeof line, "MISSING %s: no entry in %s/%s", c->key, dir, DSV4Q_GOLDEN_MANIFEST);
        rc = DSV4Q_GOLDEN_ERROR;
        goto done;
    }
    /* G3: integrity first, numbers only for a sound golden */
    if ((rc = load_golden(dir, c->key, e, &gold, &ngold, line, sizeof line))) goto done;
    if (build_payload(c, &mine, &nmine, NULL, 0, &nvals, err, sizeof err)) {
        snprintf(line, sizeof line, "ERROR %s: cannot compute: %s", c->key, err);
        rc = DSV4Q_GOLDEN_ERROR;
        goto done;
    }
    dsv4q_sha256_hex(mine, nmine, sha);
    if (dsv4q_st_open_buffer(&gs, gold, ngold, c->key, err, sizeof err) ||
        dsv4q_st_open_buffer(&cs, mine, nmine, c->key, err, sizeof err)) {
        snprintf(line, sizeof line, "ERROR %s: %s", c->key, err);
        rc = DSV4Q_GOLDEN_ERROR;
        goto done;
    }
    long nd = compare_tensors(c->key, gs, cs, line, sizeof line);
    if (nd) {
        size_t o = strlen(line);
        if (nd > 1) o += (size_t)snprintf(line + o, sizeof line - o, " [%ld tensors differ]", nd);
        const char *ka = "dsv4q.golden.checkpoint_sha256";
        const char *ga = dsv4q_st_meta(gs, ka), *ca = dsv4q_st_meta(cs, ka);
        if (ga && ca && strcmp(ga, ca) && o < sizeof line)
            snprintf(line + o, sizeof line - o,
                     " [the synthesized checkpoint itself differs: model.safetensors SHA-256 %s, recorded %s; "
                     "io/synth.c changed]", ca, ga);
        rc = DSV4Q_GOLDEN_MISMATCH;
    } else {
        snprintf(line, sizeof line, "ok %s (%zu tensors, %ld values, %.2f s%s)", c->key, dsv4q_st_count(cs), nvals,
                 dsv4q_now_s() - t0,
                 strcmp(sha, json_string_value(json_object_get(e, "sha256_payload")))
                     ? "; tensors identical, payload metadata differs: re-record to refresh it"
                     : "");
        rc = DSV4Q_GOLDEN_OK;
    }
done:
    if (rep) {
        fprintf(rep, "%s\n", line);
        fflush(rep);
    }
    dsv4q_st_close(gs);
    dsv4q_st_close(cs);
    free(gold);
    free(mine);
    return rc;
}

int dsv4q_golden_check(const char *dir, const char *ops, FILE *rep)
{
    unsigned char sel[NCASES];
    int all;
    char err[2048];
    if (select_cases(ops, sel, &all, err, sizeof err)) {
        if (rep) fprintf(rep, "ERROR %s\n", err);
        return DSV4Q_GOLDEN_ERROR;
    }
    json_t *root = manifest_load(dir, err, sizeof err);
    if (!root) {
        if (rep) fprintf(rep, "CORRUPT manifest: %s\n", err);
        return DSV4Q_GOLDEN_ERROR;
    }
    int worst = DSV4Q_GOLDEN_OK, nok = 0, nmis = 0, nbad = 0, n = 0;
    for (int i = 0; i < NCASES; i++) {
        if (!sel[i]) continue;
        int r = check_case(dir, &cases[i], manifest_find(root, cases[i].key), rep);
        n++;
        if (r == DSV4Q_GOLDEN_OK) nok++;
        else if (r == DSV4Q_GOLDEN_MISMATCH) nmis++;
        else nbad++;
        if (r > worst) worst = r;
    }
    if (all) {   /* a manifest entry this build has no case for */
        json_t *cs = json_object_get(root, "cases");
        for (size_t i = 0; i < json_array_size(cs); i++) {
            const char *k = json_string_value(json_object_get(json_array_get(cs, i), "key"));
            if (case_index(k) < 0) {
                if (rep) fprintf(rep, "STALE %s: in %s/%s but not a case of this build (re-record)\n", k, dir,
                                 DSV4Q_GOLDEN_MANIFEST);
                nbad++;
                worst = DSV4Q_GOLDEN_ERROR;
            }
        }
    }
    json_decref(root);
    if (rep)
        fprintf(rep, "golden check: %d cases in %s: %d ok, %d mismatch, %d corrupt/missing\n", n, dir, nok, nmis,
                nbad);
    return worst;
}
