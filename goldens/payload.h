/*
 * payload.h - the inside of goldens/: what a case body sees while it builds
 * its payload, and what the drivers see of the case table. Not installed,
 * not for use outside goldens/.
 *
 * A case body runs once per (width, profile) with a context (gctx): it
 * allocates from the context's arena (NEW, freed after every run), draws its
 * inputs from streams named after the case key (rng_of: G1, splitmix64 over
 * FNV-1a, base/rng.h) and hands each output to dsv4q_golden_emit, which
 * stores it as {f32|f64}.{profile}.{output} in the payload image and keeps
 * its bytes to tell which profiles gave identical outputs (G2). Who does
 * what:
 *   goldens/payload.c      the context, the arena, emit, and the builder
 *                          that runs a case at both widths and four profiles
 *   goldens/cases.c        the operator cases (goldens/cases.inc expanded
 *                          per width, weight builders) and the case table
 *   goldens/model_cases.c  the whole-model cases on a synthesized `tiny`
 *                          and on tests/data/pub_v41_tiny (V4.1)
 *   goldens/store.c        zlib container, manifest, payload files (store.h)
 *   goldens/golden.c       record and check (golden.h)
 */
#ifndef DSV4Q_GOLDENS_PAYLOAD_H
#define DSV4Q_GOLDENS_PAYLOAD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "io/safetensors.h"
#include "oracle/dmath.h"
#include "oracle/formats.h"

typedef union ablk {
    union ablk *next;
    max_align_t align;
} ablk;

typedef struct gctx {
    const char *key;          /* case key: seeds every input stream */
    int width;                /* 32 | 64 */
    const char *profile;      /* source | model | qat | exact */
    uint64_t bs;              /* the profile's boundary set */
    dsv4q_st_writer *w;             /* the payload being built */
    ablk *arena;              /* allocations of the current (width, profile) */
    uint8_t *combo;           /* this combination's output bytes (distinct groups) */
    size_t ncombo, capcombo;
    long ntensors, nvalues;
    const char *dir;          /* the goldens directory recorded / checked, or NULL */
    void *user;               /* case state (model_tiny) */
    const char *meta[4][2];   /* extra payload metadata set by a case's setup */
    char *err;
    size_t errlen;
} gctx;

/* n bytes from the context's arena (freed after the run); NULL with the
 * error set on allocation failure. */
void *dsv4q_golden_alloc(gctx *g, size_t n);
#define NEW(T, n) ((T *)dsv4q_golden_alloc(g, sizeof(T) * (size_t)(n)))

/* --- the generator (G1): splitmix64 over FNV-1a of (case key, stream name) --- */

typedef struct grng {
    uint64_t key, ctr;
} grng;

static inline grng rng_of(const gctx *g, const char *stream)
{
    grng r = {dsv4q_mix64(dsv4q_mix64(dsv4q_fnv1a64(g->key) + DSV4Q_RNG_GAMMA) ^ dsv4q_fnv1a64(stream)), 0};
    return r;
}

static inline uint64_t rbits(grng *r)
{
    r->ctr++;
    return dsv4q_mix64(r->key + r->ctr * DSV4Q_RNG_GAMMA);
}

/* Uniform on the 2^-23 grid in [-1, 1): exact in binary32. */
static inline double r_unif(grng *r) { return (double)((int64_t)(rbits(r) >> 40) - ((int64_t)1 << 23)) * 0x1p-23; }

/* Uniform on the 2^-24 grid in [0, 1): exact in binary32. */
static inline double r_unit(grng *r) { return (double)(rbits(r) >> 40) * 0x1p-24; }

static inline int r_int(grng *r, int n) { return (int)(rbits(r) % (uint64_t)n); }

/* Standard normal (Box-Muller with the oracle's own log/cos, IEEE sqrt),
 * rounded to binary32 so both widths see the same value. */
static inline double r_normal(grng *r)
{
    double u1 = (double)((rbits(r) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(rbits(r) >> 11) * 0x1p-53;
    double v = sqrt(-2.0 * dsv4q_log(u1)) * dsv4q_cos(6.283185307179586 * u2);
    return (double)(float)v;
}

/* BF16-valued normal times a power of two. */
static inline double r_bf16(grng *r, double amp) { return dsv4q_bf16_decode(dsv4q_bf16_encode(r_normal(r) * amp)); }

/* --- outputs ------------------------------------------------------------- */

/* Add output `out` of the current (width, profile) as {f32|f64}.{profile}.{out}. */
int dsv4q_golden_emit(gctx *g, const char *out, dsv4q_dtype dt, int ndim, const int64_t *shape, const void *data);

#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define EMIT_I32(out, p, ...) dsv4q_golden_emit(g, out, DSV4Q_DT_I32, NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__}, p)

/* --- the case table (goldens/cases.c) ----------------------------------- */

typedef int (*case_fn)(gctx *g);

typedef struct gcase {
    const char *key;
    const char *inputs;
    case_fn f32, f64;
    int (*setup)(gctx *g);
    void (*teardown)(gctx *g);
} gcase;

#define DSV4Q_GOLDEN_MAX_CASES 64   /* the table's size is checked against it (cases.c) */

/* The case of a key, or NULL; the i-th case (0 <= i < dsv4q_golden_count()). */
const gcase *dsv4q_golden_case(const char *key);
const gcase *dsv4q_golden_case_at(int i);

/* The whole-model cases (goldens/model_cases.c): the `tiny` fixture and the
 * two runs on it; the V4.1 reference checkpoint tests/data/pub_v41_tiny
 * (found beside g->dir, else below the working directory) and its run. */
int dsv4q_golden_tiny_setup(gctx *g);
void dsv4q_golden_tiny_teardown(gctx *g);
int dsv4q_golden_model_tiny(gctx *g);
int dsv4q_golden_stages_tiny(gctx *g);
int dsv4q_golden_v41_setup(gctx *g);
void dsv4q_golden_v41_teardown(gctx *g);
int dsv4q_golden_model_tiny_v41(gctx *g);

/* --- the builder (goldens/payload.c) ----------------------------------- */

/* Run case c at both widths and all four profiles (G2) into a safetensors
 * image (malloc'd *buf). dir (may be NULL): the goldens directory, where a
 * case's setup looks for repository data beside it (g->dir). distinct (may
 * be NULL) receives the profile groups; *nvalues (may be NULL) the number
 * of values. 0, or -1 with err. */
int dsv4q_golden_build(const gcase *c, const char *dir, uint8_t **buf, size_t *len, char *distinct, size_t dlen,
                       long *nvalues, char *err, size_t errlen);

#endif
