/*
 * synth.c - deterministic synthetic checkpoints (see synth.h, docs/synth.md).
 *
 * Layout of the work:
 *   dsv4q_synth_write
 *     -> validate config, plan shards (layer li -> shard li*N/nl)
 *     -> mkdir -p parent, mkdtemp a sibling "<parent>/.<name>.synth-XXXXXX"
 *     -> config.json, then per shard: one writer (dsv4q_st_writer_*) holding that
 *        shard only, filled tensor by tensor, written (tmp + fsync + rename)
 *     -> index json (sharded), fsync, rename(tmp dir, out_dir)
 *     -> any failure: remove the temp dir; out_dir is untouched.
 *
 * Values: w = f(N) where N = dsv4q_synth_normal(key(seed, tensor name), flat
 * index) and f is the tensor's rule (docs/synth.md). Stored forms: F32 =
 * (float)w, BF16 = dsv4q_bf16_encode(w) (one RNE from the double), FP8 =
 * E4M3 RNE(w / 2^e) with e per 128x128 block, FP4 = E2M1 RNE(w / 2^e) with e
 * per 32 along a row. Rows are generated in parallel (OpenMP); a value never
 * depends on which thread produced it.
 *
 * V4.1 (cfg.arch == DSV4Q_ARCH_V41: layer_v41 / tail_v41, the layout of
 * tests/data/pub_v41_tiny): FP8 per 32x32 block, the reference's BF16
 * parameters BF16, its float32 parameters F32 holding the BF16 rounding of w
 * (as the reference case stores them), compressors / indexer keys on the
 * source layers only, Engram tables (E4M3 with an E8M0 scale per 32 of a
 * row), no hc_head, and engram_token_map.json (token_map_v41).
 *
 * Why not dmath's log/sin/cos for Box-Muller: at ~128 ns (log) + ~50 ns each
 * (sin, cos) they would make the 1.7e9 Gaussians of `flash-slice` take
 * ~100 s on two cores, and any later tuning of dmath's last bit would
 * silently change every synthetic checkpoint (and the goldens recorded on
 * them). The polynomials below use only IEEE +,-,*,/ and bit surgery in a fixed
 * order, are accurate to a few ULP (tests/test_synth.c checks them against
 * dmath), and are frozen: changing them is a DSV4Q_SYNTH_VERSION bump.
 */
#include "io/synth.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "base/file.h"
#include "base/rng.h"
#include "base/util.h"

/* ------------------------------------------------------------------------ */
/* the generator: splitmix64 over FNV-1a (base/rng.h)                        */

uint64_t dsv4q_synth_key(uint64_t seed, const char *name)
{
    return dsv4q_mix64(dsv4q_mix64(seed + DSV4Q_RNG_GAMMA) ^ dsv4q_fnv1a64(name ? name : ""));
}

uint64_t dsv4q_synth_bits(uint64_t key, uint64_t counter) { return dsv4q_mix64(key + (counter + 1) * DSV4Q_RNG_GAMMA); }

/* ln(u) for u in [2^-53, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)),
 * ln m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^21/21), s = (m-1)/(m+1),
 * |s| <= 0.1716, so z = s^2 <= 0.0295 and the truncation is < 3e-17
 * relative. The polynomial in z is evaluated by Estrin's scheme (a fixed
 * tree, so still one deterministic order) to keep the dependency chain
 * short: the generator is latency-bound. */
static inline double sy_log(double u)
{
    /* frexp by hand (u is a positive normal double): exact bit surgery */
    uint64_t ub;
    memcpy(&ub, &u, sizeof ub);
    int e = (int)((ub >> 52) & 0x7FF) - 1022;
    ub = (ub & 0x000FFFFFFFFFFFFFull) | 0x3FE0000000000000ull;
    double m;                           /* u = m 2^e, m in [0.5, 1) */
    memcpy(&m, &ub, sizeof m);
    if (m < 0x1.6a09e667f3bcdp-1) {     /* sqrt(1/2) */
        m *= 2.0;
        e -= 1;
    }
    double f = m - 1.0;                 /* exact (Sterbenz) */
    double s = f / (2.0 + f);
    double z = s * s, z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
    double a0 = 1.0 / 3.0 + z * (1.0 / 5.0);
    double a1 = 1.0 / 7.0 + z * (1.0 / 9.0);
    double a2 = 1.0 / 11.0 + z * (1.0 / 13.0);
    double a3 = 1.0 / 15.0 + z * (1.0 / 17.0);
    double a4 = 1.0 / 19.0 + z * (1.0 / 21.0);
    double p = (a0 + z2 * a1) + (z4 * (a2 + z2 * a3) + z8 * a4);
    double two_s = 2.0 * s;
    double lm = two_s + two_s * (z * p);
    /* ln 2 = LN2_HI (42 significant bits) + LN2_LO; e * LN2_HI is exact (|e| <= 53) */
    const double LN2_HI = 0x1.62e42fefa3800p-1, LN2_LO = 0x1.ef35793c76730p-45;
    return (double)e * LN2_HI + (lm + (double)e * LN2_LO);
}

/* sin and cos of x in [0, pi/4]: Taylor to x^17 / x^18 (truncation < 6e-17
 * relative), polynomials in z = x^2 by Estrin's scheme. */
static inline void sy_sincos(double x, double *sn, double *cs)
{
    double z = x * x, z2 = z * z, z4 = z2 * z2;
    /* sin x = x + x z (s1 + s2 z + ... + s8 z^7), s_n = (-1)^n / (2n+1)! */
    double s0 = -1.0 / 6.0 + z * (1.0 / 120.0);
    double s1 = -1.0 / 5040.0 + z * (1.0 / 362880.0);
    double s2 = -1.0 / 39916800.0 + z * (1.0 / 6227020800.0);
    double s3 = -1.0 / 1307674368000.0 + z * (1.0 / 355687428096000.0);
    double ps = (s0 + z2 * s1) + z4 * (s2 + z2 * s3);
    *sn = x + x * (z * ps);
    /* cos x = 1 - z/2 + z^2 (c2 + c3 z + ... + c9 z^7), c_n = (-1)^n / (2n)! */
    double c0 = 1.0 / 24.0 + z * (-1.0 / 720.0);
    double c1 = 1.0 / 40320.0 + z * (-1.0 / 3628800.0);
    double c2 = 1.0 / 479001600.0 + z * (-1.0 / 87178291200.0);
    double c3 = 1.0 / 20922789888000.0 + z * (-1.0 / 6402373705728000.0);
    double pc = (c0 + z2 * c1) + z4 * (c2 + z2 * c3);
    *cs = (1.0 - 0.5 * z) + z2 * pc;
}

/* The pair (r cos t, r sin t) of Box-Muller number j of stream key.
 * Branch-free (the octant and quadrant are random bits; selecting through
 * small arrays keeps the pipeline full). */
static inline void sy_pair(uint64_t key, uint64_t j, double *a, double *b)
{
    uint64_t b1 = dsv4q_synth_bits(key, 2 * j), b2 = dsv4q_synth_bits(key, 2 * j + 1);
    double u1 = (double)((b1 >> 11) + 1) * 0x1p-53;     /* (0, 1] */
    double r = sqrt(-2.0 * sy_log(u1));
    /* t = 2 pi u2, u2 = (b2 >> 11) 2^-53 = (q + v) / 4: quadrant q, v in [0, 1) */
    uint64_t t = b2 >> 11, low = t & ((1ull << 51) - 1);
    unsigned q = (unsigned)(t >> 51);
    double v = (double)low * 0x1p-51;
    const double PIO2 = 0x1.921fb54442d18p+0;
    /* v > 1/2: use the complement angle pi/2 (1 - v) (1 - v is exact), whose
     * cos and sin are the sin and cos wanted */
    unsigned sw = low > (1ull << 50);
    double vv[2] = {v, 1.0 - v};
    double s0, c0;
    sy_sincos(PIO2 * vv[sw], &s0, &c0);
    double t3[3] = {c0, s0, c0};
    double c = t3[sw], s = t3[sw + 1];
    /* rotate by q quarter turns: cos(x + q pi/2), sin(x + q pi/2) */
    double t4[4] = {c, s, -c, -s};
    *a = r * t4[(4 - q) & 3];
    *b = r * t4[(5 - q) & 3];
}

double dsv4q_synth_normal(uint64_t key, uint64_t i)
{
    double a, b;
    sy_pair(key, i >> 1, &a, &b);
    return (i & 1) ? b : a;
}

/* out[0..n) = normals start..start+n of stream key. */
static void sy_fill(uint64_t key, uint64_t start, int64_t n, double *out)
{
    int64_t k = 0;
    uint64_t i = start;
    if (n > 0 && (i & 1)) {
        out[k++] = dsv4q_synth_normal(key, i++);
    }
    for (; k + 1 < n; k += 2, i += 2)
        sy_pair(key, i >> 1, &out[k], &out[k + 1]);
    if (k < n) out[k] = dsv4q_synth_normal(key, i);
}

static inline uint8_t sy_e2m1(double v)
{
    /* grid {0, .5, 1, 1.5, 2, 3, 4, 6}: count the midpoints below |v|; at a
     * midpoint the even code wins (>= where the upper neighbour is even). */
    if (isnan(v)) return 0x7;
    double a = fabs(v);
    unsigned c = (unsigned)(a > 0.25) + (unsigned)(a >= 0.75) + (unsigned)(a > 1.25) + (unsigned)(a >= 1.75) +
                 (unsigned)(a > 2.5) + (unsigned)(a >= 3.5) + (unsigned)(a > 5.0);
    return (uint8_t)((signbit(v) ? 0x8u : 0u) | c);
}

static inline uint8_t sy_e4m3(double v)
{
    uint8_t s = signbit(v) ? 0x80 : 0;
    double a = fabs(v);
    if (isnan(v)) return (uint8_t)(s | 0x7F);
    if (a > 448.0) return (uint8_t)(s | 0x7E);         /* saturate */
    if (a < 0x1p-6) return (uint8_t)(s | (uint8_t)rint(a * 512.0));   /* subnormal quantum 2^-9, exact */
    /* normal: RNE of the binary64 significand to 3 bits by integer carry; a
     * carry out of the significand bumps the exponent, as RNE requires */
    uint64_t b;
    memcpy(&b, &a, sizeof b);
    b += (1ull << 48) - 1 + ((b >> 49) & 1);
    int ex = (int)(b >> 52) - 1023;                    /* in [-6, 8] */
    unsigned m = (unsigned)((b >> 49) & 7);
    return (uint8_t)(s | (unsigned)((ex + 7) << 3) | m);
}

uint8_t dsv4q_synth_e2m1(double v) { return sy_e2m1(v); }
uint8_t dsv4q_synth_e4m3(double v) { return sy_e4m3(v); }

/* Exponent of the ue8m0 scale of a block with max |w| = amax. */
static int sy_scale_exp(double amax, double fmax)
{
    if (!(amax > 0.0)) return 0;   /* all-zero block (never, for Gaussians) */
    return dsv4q_ceil_log2_ratio(amax, fmax);
}

/* ------------------------------------------------------------------------ */
/* tensors                                                                   */

typedef enum {
    V_LINEAR,  /* N / sqrt(in) * gain */
    V_NORM,    /* 1 + 0.05 N */
    V_HCFN,    /* N * 0.5 / sqrt(fan_in) */
    V_HCBASE,  /* 0.5 N */
    V_HCSCALE, /* 1 + 0.1 N */
    V_SINK,    /* N (attn_sink; V4.1 Engram tables) */
    V_SMALL,   /* 0.1 N (ape, gate bias) */
    V_EMBED,   /* N + u[col] */
    V_EGATE    /* 1 + 0.2 N (V4.1 Engram q_weight / k_weight) */
} vkind;

/* S_F32B: F32 holding BF16-representable values, (float)bf16(w): V4.1's
 * float32 parameters, as the reference case pub_v41_tiny stores them */
typedef enum { S_F32, S_BF16, S_FP8, S_FP4, S_F32B } storage;

typedef struct {
    const dsv4q_config *cfg;
    uint64_t seed;
    int blk;                     /* FP8 weight block: 128 (V4), 32 (V4.1) */
    dsv4q_st_writer *w;          /* current shard */
    const char *file;      /* its file name (for the weight map) */
    json_t *wmap;          /* NULL for a single file */
    uint64_t total;        /* tensor bytes written */
    char *err;
    size_t errlen;
} sy_ctx;

typedef struct {
    uint64_t key;
    vkind kind;
    double den;            /* sqrt(in) (V_LINEAR) or sqrt(fan_in) (V_HCFN) */
    double gain;
    const double *u;       /* V_EMBED: shared row */
} rule;

static inline double apply(const rule *r, double g, int64_t col)
{
    switch (r->kind) {
    case V_LINEAR: return (g / r->den) * r->gain;
    case V_NORM: return 1.0 + 0.05 * g;
    case V_HCFN: return (g * 0.5) / r->den;
    case V_HCBASE: return 0.5 * g;
    case V_HCSCALE: return 1.0 + 0.1 * g;
    case V_SINK: return g;
    case V_SMALL: return 0.1 * g;
    case V_EMBED: return g + r->u[col];
    case V_EGATE: return 1.0 + 0.2 * g;
    }
    return g;
}

/* Ideal values of rows [o0, o0+nr) of an [out, in] tensor into buf. */
static void gen_rows(const rule *r, int64_t o0, int64_t nr, int64_t in, double *buf)
{
    sy_fill(r->key, (uint64_t)o0 * (uint64_t)in, nr * in, buf);
    for (int64_t o = 0; o < nr; o++)
        for (int64_t k = 0; k < in; k++) buf[o * in + k] = apply(r, buf[o * in + k], k);
}

static int add(sy_ctx *c, const char *name, dsv4q_dtype dt, int ndim, const int64_t *shape, const void *data,
               size_t nbytes)
{
    if (dsv4q_st_writer_add(c->w, name, dt, ndim, shape, data, nbytes, c->err, c->errlen)) return -1;
    if (c->wmap && json_object_set_new(c->wmap, name, json_string(c->file)))
        return dsv4q_errf(c->err, c->errlen, "synth: out of memory adding '%s' to the weight map", name);
    c->total += nbytes;
    return 0;
}

#define PAR_MIN (1 << 20)   /* elements below which a tensor is generated serially */

/* Plain tensor (F32, F32B or BF16 storage) of logical [out, in] (ndim 1: [in]). */
static int emit_plain(sy_ctx *c, const char *name, int ndim, int64_t out, int64_t in, const rule *r, storage st)
{
    const int f32 = st == S_F32 || st == S_F32B;
    size_t esz = f32 ? 4 : 2;
    size_t n = (size_t)(out * in);
    void *data = malloc(n * esz);
    if (!data) return dsv4q_errf(c->err, c->errlen, "synth: out of memory generating '%s'", name);
    int oom = 0;
#pragma omp parallel if ((int64_t)n >= PAR_MIN)
    {
        double *row = malloc(sizeof(double) * (size_t)in);
        if (!row) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t o = 0; o < out; o++) {
            if (!row) continue;
            gen_rows(r, o, 1, in, row);
            if (st == S_F32) {
                float *d = (float *)data + o * in;
                for (int64_t k = 0; k < in; k++) d[k] = (float)row[k];
            } else if (st == S_F32B) {
                float *d = (float *)data + o * in;
                for (int64_t k = 0; k < in; k++) d[k] = (float)dsv4q_bf16_decode(dsv4q_bf16_encode(row[k]));
            } else {
                uint16_t *d = (uint16_t *)data + o * in;
                for (int64_t k = 0; k < in; k++) d[k] = dsv4q_bf16_encode(row[k]);
            }
        }
        free(row);
    }
    int rc;
    if (oom) rc = dsv4q_errf(c->err, c->errlen, "synth: out of memory generating '%s'", name);
    else {
        int64_t shape[2] = {out, in};
        rc = ndim == 1 ? add(c, name, f32 ? DSV4Q_DT_F32 : DSV4Q_DT_BF16, 1, &shape[1], data, n * esz)
                       : add(c, name, f32 ? DSV4Q_DT_F32 : DSV4Q_DT_BF16, 2, shape, data, n * esz);
    }
    free(data);
    return rc;
}

/* FP8: E4M3 codes [out, in] + E8M0 scales [ceil(out/B), ceil(in/BI)], one
 * per B x BI block: 128 x 128 (V4 linears), 32 x 32 (V4.1 linears), 1 x 32
 * (V4.1 Engram tables). */
static int emit_fp8(sy_ctx *c, const char *wname, const char *sname, int64_t out, int64_t in, const rule *r, int64_t B,
                    int64_t BI)
{
    const int64_t so = (out + B - 1) / B, si = (in + BI - 1) / BI;
    uint8_t *q = malloc((size_t)(out * in));
    uint8_t *sc = malloc((size_t)(so * si));
    int oom = !q || !sc, bad = 0;
    if (!oom) {
#pragma omp parallel if (out * in >= PAR_MIN)
        {
            double *buf = malloc(sizeof(double) * (size_t)(B * in));
            if (!buf) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp for schedule(dynamic)
            for (int64_t bo = 0; bo < so; bo++) {
                if (!buf) continue;
                int64_t o0 = bo * B, nr = out - o0 < B ? out - o0 : B;
                gen_rows(r, o0, nr, in, buf);
                for (int64_t bi = 0; bi < si; bi++) {
                    int64_t k0 = bi * BI, nk = in - k0 < BI ? in - k0 : BI;
                    double amax = 0.0;
                    for (int64_t o = 0; o < nr; o++)
                        for (int64_t k = 0; k < nk; k++) {
                            double a = fabs(buf[o * in + k0 + k]);
                            if (a > amax) amax = a;
                        }
                    int e = sy_scale_exp(amax, 448.0);
                    int code = dsv4q_e8m0_encode_exp(e);
                    if (code < 0) {
#pragma omp atomic write
                        bad = 1;
                        code = 127;
                    }
                    sc[bo * si + bi] = (uint8_t)code;
                    const double inv = ldexp(1.0, -e);
                    for (int64_t o = 0; o < nr; o++)
                        for (int64_t k = 0; k < nk; k++)
                            q[(o0 + o) * in + k0 + k] = sy_e4m3(buf[o * in + k0 + k] * inv);
                }
            }
            free(buf);
        }
    }
    int rc;
    if (oom) rc = dsv4q_errf(c->err, c->errlen, "synth: out of memory generating '%s'", wname);
    else if (bad)
        rc = dsv4q_errf(c->err, c->errlen, "synth: tensor '%s': a block scale is outside E8M0's range", wname);
    else {
        int64_t ws[2] = {out, in}, ss[2] = {so, si};
        rc = add(c, wname, DSV4Q_DT_F8_E4M3, 2, ws, q, (size_t)(out * in));
        if (!rc) rc = add(c, sname, DSV4Q_DT_F8_E8M0, 2, ss, sc, (size_t)(so * si));
    }
    free(q);
    free(sc);
    return rc;
}

/* FP4: packed E2M1 I8 [out, in/2] (low nibble = even k) + E8M0 [out, in/32]. */
static int emit_fp4(sy_ctx *c, const char *wname, const char *sname, int64_t out, int64_t in, const rule *r)
{
    if (in % 32 != 0)
        return dsv4q_errf(c->err, c->errlen, "synth: tensor '%s': FP4 needs in_features (%lld) divisible by 32", wname,
                          (long long)in);
    const int64_t G = 32, ng = in / G, nb = in / 2;
    uint8_t *q = malloc((size_t)(out * nb));
    uint8_t *sc = malloc((size_t)(out * ng));
    int oom = !q || !sc, bad = 0;
    if (!oom) {
#pragma omp parallel if (out * in >= PAR_MIN)
        {
            double *row = malloc(sizeof(double) * (size_t)in);
            if (!row) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp for schedule(static)
            for (int64_t o = 0; o < out; o++) {
                if (!row) continue;
                gen_rows(r, o, 1, in, row);
                for (int64_t g = 0; g < ng; g++) {
                    const double *v = row + g * G;
                    double amax = 0.0;
                    for (int64_t k = 0; k < G; k++) {
                        double a = fabs(v[k]);
                        if (a > amax) amax = a;
                    }
                    int e = sy_scale_exp(amax, 6.0);
                    int code = dsv4q_e8m0_encode_exp(e);
                    if (code < 0) {
#pragma omp atomic write
                        bad = 1;
                        code = 127;
                    }
                    sc[o * ng + g] = (uint8_t)code;
                    const double inv = ldexp(1.0, -e);   /* w * 2^-e == w / 2^e exactly */
                    uint8_t *p = q + o * nb + g * (G / 2);
                    for (int64_t k = 0; k < G; k += 2) {
                        uint8_t lo = sy_e2m1(v[k] * inv), hi = sy_e2m1(v[k + 1] * inv);
                        p[k / 2] = (uint8_t)(lo | (hi << 4));
                    }
                }
            }
            free(row);
        }
    }
    int rc;
    if (oom) rc = dsv4q_errf(c->err, c->errlen, "synth: out of memory generating '%s'", wname);
    else if (bad)
        rc = dsv4q_errf(c->err, c->errlen, "synth: tensor '%s': a group scale is outside E8M0's range", wname);
    else {
        int64_t ws[2] = {out, nb}, ss[2] = {out, ng};
        rc = add(c, wname, DSV4Q_DT_I8, 2, ws, q, (size_t)(out * nb));
        if (!rc) rc = add(c, sname, DSV4Q_DT_F8_E8M0, 2, ss, sc, (size_t)(out * ng));
    }
    free(q);
    free(sc);
    return rc;
}

static storage wdt_storage(dsv4q_wdtype t)
{
    return t == DSV4Q_WDT_FP8 ? S_FP8 : t == DSV4Q_WDT_FP4 ? S_FP4 : S_BF16;
}

/* A linear `prefix`.weight [out, in] (+ `prefix`.scale) in storage st. */
static int linear(sy_ctx *c, const char *prefix, int64_t out, int64_t in, storage st)
{
    char wn[256], sn[256];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(sn, sizeof sn, "%s.scale", prefix);
    rule r = {dsv4q_synth_key(c->seed, wn), V_LINEAR, sqrt((double)in), 1.0, NULL};
    switch (st) {
    case S_FP8: return emit_fp8(c, wn, sn, out, in, &r, c->blk, c->blk);
    case S_FP4: return emit_fp4(c, wn, sn, out, in, &r);
    default: return emit_plain(c, wn, 2, out, in, &r, st);
    }
}

/* A plain tensor of rule kind in storage st (1-D when out == 0). */
static int plain_st(sy_ctx *c, const char *name, int64_t out, int64_t in, vkind kind, double fan_in, storage st)
{
    rule r = {dsv4q_synth_key(c->seed, name), kind, sqrt(fan_in), 1.0, NULL};
    return emit_plain(c, name, out ? 2 : 1, out ? out : 1, in, &r, st);
}

/* An F32 tensor of rule kind (1-D when out == 0). */
static int plain(sy_ctx *c, const char *name, int64_t out, int64_t in, vkind kind, double fan_in)
{
    return plain_st(c, name, out, in, kind, fan_in, S_F32);
}

#define NM(buf, ...) snprintf(buf, sizeof buf, __VA_ARGS__)

static int compressor(sy_ctx *c, const char *pre, int ratio, int64_t Dc)
{
    const int64_t coff = ratio == 4 ? 2 : 1, d = c->cfg->dim;
    char n[256];
    NM(n, "%s.wkv", pre);
    if (linear(c, n, coff * Dc, d, S_F32)) return -1;
    NM(n, "%s.wgate", pre);
    if (linear(c, n, coff * Dc, d, S_F32)) return -1;
    NM(n, "%s.ape", pre);
    if (plain(c, n, ratio, coff * Dc, V_SMALL, 0)) return -1;
    NM(n, "%s.norm.weight", pre);
    return plain(c, n, 0, Dc, V_NORM, 0);
}

static int tid2eid(sy_ctx *c, const char *name)
{
    const dsv4q_config *g = c->cfg;
    const int64_t V = g->vocab_size, k = g->n_activated_experts, ne = g->n_routed_experts;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)(V * k));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)ne);
    if (!t || !perm) {
        free(t);
        free(perm);
        return dsv4q_errf(c->err, c->errlen, "synth: out of memory generating '%s'", name);
    }
    uint64_t key = dsv4q_synth_key(c->seed, name);
    for (int64_t row = 0; row < V; row++) {
        /* first k steps of a Fisher-Yates shuffle of 0..ne-1 */
        for (int64_t e = 0; e < ne; e++) perm[e] = (int32_t)e;
        for (int64_t j = 0; j < k; j++) {
            uint64_t x = dsv4q_synth_bits(key, (uint64_t)(row * k + j)) >> 32;
            int64_t pick = j + (int64_t)((x * (uint64_t)(ne - j)) >> 32);
            int32_t tmp = perm[j];
            perm[j] = perm[pick];
            perm[pick] = tmp;
            t[row * k + j] = perm[j];
        }
    }
    int64_t shape[2] = {V, k};
    int rc = add(c, name, DSV4Q_DT_I32, 2, shape, t, sizeof(int32_t) * (size_t)(V * k));
    free(t);
    free(perm);
    return rc;
}

static int expert(sy_ctx *c, const char *pre, storage st)
{
    const int64_t d = c->cfg->dim, I = c->cfg->moe_inter_dim;
    char n[256];
    NM(n, "%s.w1", pre);
    if (linear(c, n, I, d, st)) return -1;
    NM(n, "%s.w2", pre);
    if (linear(c, n, d, I, st)) return -1;
    NM(n, "%s.w3", pre);
    return linear(c, n, I, d, st);
}

/* hc_head_fn / base / scale under prefix (may be ""). */
static int hc_head(sy_ctx *c, const char *pre)
{
    const int64_t hc = c->cfg->hc_mult, d = c->cfg->dim;
    char n[256];
    NM(n, "%shc_head_fn", pre);
    if (plain(c, n, hc, hc * d, V_HCFN, (double)(hc * d))) return -1;
    NM(n, "%shc_head_base", pre);
    if (plain(c, n, 0, hc, V_HCBASE, 0)) return -1;
    NM(n, "%shc_head_scale", pre);
    return plain(c, n, 0, 1, V_HCSCALE, 0);
}

static int layer(sy_ctx *c, int li)
{
    const dsv4q_config *g = c->cfg;
    const int mtp = li >= g->n_layers;
    const int ratio = g->compress_ratios[li];
    const int hash = !mtp && li < g->n_hash_layers;
    const int64_t hc = g->hc_mult, nmix = (2 + hc) * hc, d = g->dim, H = g->n_heads, D = g->head_dim;
    const int64_t G = g->o_groups, q = g->q_lora_rank;
    const storage lin = wdt_storage(g->dtype), exp_st = wdt_storage(g->expert_dtype);
    char pre[64], n[256];
    if (mtp) NM(pre, "mtp.%d", li - g->n_layers);
    else NM(pre, "layers.%d", li);

    NM(n, "%s.hc_attn_fn", pre);
    if (plain(c, n, nmix, hc * d, V_HCFN, (double)(hc * d))) return -1;
    NM(n, "%s.hc_ffn_fn", pre);
    if (plain(c, n, nmix, hc * d, V_HCFN, (double)(hc * d))) return -1;
    NM(n, "%s.hc_attn_base", pre);
    if (plain(c, n, 0, nmix, V_HCBASE, 0)) return -1;
    NM(n, "%s.hc_ffn_base", pre);
    if (plain(c, n, 0, nmix, V_HCBASE, 0)) return -1;
    NM(n, "%s.hc_attn_scale", pre);
    if (plain(c, n, 0, 3, V_HCSCALE, 0)) return -1;
    NM(n, "%s.hc_ffn_scale", pre);
    if (plain(c, n, 0, 3, V_HCSCALE, 0)) return -1;
    NM(n, "%s.attn_norm.weight", pre);
    if (plain(c, n, 0, d, V_NORM, 0)) return -1;
    NM(n, "%s.ffn_norm.weight", pre);
    if (plain(c, n, 0, d, V_NORM, 0)) return -1;

    NM(n, "%s.attn.attn_sink", pre);
    if (plain(c, n, 0, H, V_SINK, 0)) return -1;
    NM(n, "%s.attn.wq_a", pre);
    if (linear(c, n, q, d, lin)) return -1;
    NM(n, "%s.attn.q_norm.weight", pre);
    if (plain(c, n, 0, q, V_NORM, 0)) return -1;
    NM(n, "%s.attn.wq_b", pre);
    if (linear(c, n, H * D, q, lin)) return -1;
    NM(n, "%s.attn.wkv", pre);
    if (linear(c, n, D, d, lin)) return -1;
    NM(n, "%s.attn.kv_norm.weight", pre);
    if (plain(c, n, 0, D, V_NORM, 0)) return -1;
    /* wo_a: FP8 in the fp8 regime (the loader dequantizes it to BF16, like
     * DeepSeek's converter), BF16 in the bf16 regime. */
    NM(n, "%s.attn.wo_a", pre);
    if (linear(c, n, G * g->o_lora_rank, H * D / G, lin)) return -1;
    NM(n, "%s.attn.wo_b", pre);
    if (linear(c, n, d, G * g->o_lora_rank, lin)) return -1;
    if (ratio) {
        NM(n, "%s.attn.compressor", pre);
        if (compressor(c, n, ratio, D)) return -1;
    }
    if (ratio == 4) {
        const int64_t Hi = g->index_n_heads, Di = g->index_head_dim;
        NM(n, "%s.attn.indexer.wq_b", pre);
        if (linear(c, n, Hi * Di, q, lin)) return -1;
        NM(n, "%s.attn.indexer.weights_proj", pre);
        if (linear(c, n, Hi, d, S_BF16)) return -1;
        NM(n, "%s.attn.indexer.compressor", pre);
        if (compressor(c, n, 4, Di)) return -1;
    }

    NM(n, "%s.ffn.gate", pre);
    if (linear(c, n, g->n_routed_experts, d, S_F32)) return -1;
    if (hash) {
        NM(n, "%s.ffn.gate.tid2eid", pre);
        if (tid2eid(c, n)) return -1;
    } else {
        NM(n, "%s.ffn.gate.bias", pre);
        if (plain(c, n, 0, g->n_routed_experts, V_SMALL, 0)) return -1;
    }
    for (int e = 0; e < g->n_routed_experts; e++) {
        NM(n, "%s.ffn.experts.%d", pre, e);
        if (expert(c, n, exp_st)) return -1;
    }
    NM(n, "%s.ffn.shared_experts", pre);
    if (expert(c, n, lin)) return -1;

    if (mtp) {
        NM(n, "%s.e_proj", pre);
        if (linear(c, n, d, d, lin)) return -1;
        NM(n, "%s.h_proj", pre);
        if (linear(c, n, d, d, lin)) return -1;
        NM(n, "%s.enorm.weight", pre);
        if (plain(c, n, 0, d, V_NORM, 0)) return -1;
        NM(n, "%s.hnorm.weight", pre);
        if (plain(c, n, 0, d, V_NORM, 0)) return -1;
        NM(n, "%s.norm.weight", pre);
        if (plain(c, n, 0, d, V_NORM, 0)) return -1;
        NM(n, "%s.", pre);
        if (hc_head(c, n)) return -1;
    }
    return 0;
}

static int embed(sy_ctx *c)
{
    const dsv4q_config *g = c->cfg;
    double *u = malloc(sizeof(double) * (size_t)g->dim);
    if (!u) return dsv4q_errf(c->err, c->errlen, "synth: out of memory generating 'embed.weight'");
    sy_fill(dsv4q_synth_key(c->seed, "embed.weight/u"), 0, g->dim, u);
    rule r = {dsv4q_synth_key(c->seed, "embed.weight"), V_EMBED, 0, 1.0, u};
    int rc = emit_plain(c, "embed.weight", 2, g->vocab_size, g->dim, &r, S_BF16);
    free(u);
    return rc;
}

static int tail(sy_ctx *c)
{
    const dsv4q_config *g = c->cfg;
    rule r = {dsv4q_synth_key(c->seed, "head.weight"), V_LINEAR, sqrt((double)g->dim), DSV4Q_SYNTH_HEAD_GAIN, NULL};
    if (emit_plain(c, "head.weight", 2, g->vocab_size, g->dim, &r, S_F32)) return -1;
    if (plain(c, "norm.weight", 0, g->dim, V_NORM, 0)) return -1;
    return hc_head(c, "");
}

/* ------------------------------------------------------------------------ */
/* DeepSeek V4.1 (the layout of tests/data/pub_v41_tiny, docs/synth.md)      */

static int v41_index(const int *list, int n, int x)
{
    for (int k = 0; k < n; k++)
        if (list[k] == x) return k;
    return -1;
}

/* layers.{li}.engram.*: the E4M3 table [rows, head_dim] with an E8M0 scale
 * per 32 of a row, wkv, q_weight / k_weight. */
static int engram(sy_ctx *c, const char *pre, int e)
{
    const dsv4q_config *g = c->cfg;
    const int64_t rows = g->engram_num_embeddings[e], hd = g->engram_head_dim, hc = g->hc_mult, d = g->dim;
    const int64_t ncols = (int64_t)(g->engram_max_ngram_size - 1) * g->engram_n_heads;
    char n[256], sn[256];
    NM(n, "%s.engram.embed.weight", pre);
    NM(sn, "%s.engram.embed.scale", pre);
    rule r = {dsv4q_synth_key(c->seed, n), V_SINK, 1.0, 1.0, NULL};
    if (emit_fp8(c, n, sn, rows, hd, &r, 1, 32)) return -1;
    NM(n, "%s.engram.wkv", pre);
    if (linear(c, n, d * (hc + 1), ncols * hd, wdt_storage(g->dtype))) return -1;
    NM(n, "%s.engram.q_weight", pre);
    if (plain_st(c, n, hc, d, V_EGATE, 0, S_BF16)) return -1;
    NM(n, "%s.engram.k_weight", pre);
    return plain_st(c, n, hc, d, V_EGATE, 0, S_BF16);
}

/* The DSpark-only tensors of stage j (mtp.{j}.*, model.py DSparkBlock):
 * main_proj + main_norm on stage 0; norm, markov_head.embed / head and
 * confidence_head.proj on the last stage. */
static int dspark_v41(sy_ctx *c, const char *pre, int j)
{
    const dsv4q_config *g = c->cfg;
    const int64_t d = g->dim, R = g->dspark_markov_rank, V = g->vocab_size;
    char n[256];
    if (j == 0) {
        NM(n, "%s.main_proj", pre);
        if (linear(c, n, d, d * g->n_dspark_target_layer_ids, wdt_storage(g->dtype))) return -1;
        NM(n, "%s.main_norm.weight", pre);
        if (plain_st(c, n, 0, d, V_NORM, 0, S_BF16)) return -1;
    }
    if (j != g->n_mtp_layers - 1) return 0;
    NM(n, "%s.norm.weight", pre);
    if (plain_st(c, n, 0, d, V_NORM, 0, S_BF16)) return -1;
    NM(n, "%s.markov_head.embed.weight", pre);
    if (plain_st(c, n, V, R, V_LINEAR, 1.0, S_BF16)) return -1;
    NM(n, "%s.markov_head.head", pre);
    if (linear(c, n, V, R, S_F32B)) return -1;
    NM(n, "%s.confidence_head.proj", pre);
    return linear(c, n, 1, d + R, S_F32B);
}

/* One V4.1 block: what io/model_load.c's bind_layer_v41 binds (li >=
 * n_layers: DSpark stage li - n_layers, a window-only block under mtp.*
 * with the DSpark expert counts, then dspark_v41's tensors). */
static int layer_v41(sy_ctx *c, int li)
{
    const dsv4q_config *g = c->cfg;
    const int stage = li >= g->n_layers ? li - g->n_layers : -1;
    const int n_routed = stage >= 0 && g->dspark_n_routed_experts ? g->dspark_n_routed_experts : g->n_routed_experts;
    const int ratio = g->compress_ratios[li];
    const int kv = v41_index(g->kv_source_layers, g->n_kv_source_layers, li) >= 0;
    const int ix = v41_index(g->index_source_layers, g->n_index_source_layers, li) >= 0;
    const int eg = v41_index(g->engram_layer_ids, g->n_engram_layers, li);
    const int64_t hc = g->hc_mult, nmix = (2 + hc) * hc, d = g->dim, H = g->n_heads, D = g->head_dim;
    const int64_t G = g->o_groups, q = g->q_lora_rank, Hi = g->index_n_heads, Di = g->index_head_dim;
    const storage lin = wdt_storage(g->dtype), exp_st = wdt_storage(g->expert_dtype);
    char pre[64], n[256];
    if (stage >= 0) NM(pre, "mtp.%d", stage);
    else NM(pre, "layers.%d", li);

    NM(n, "%s.hc_attn_fn", pre);
    if (plain_st(c, n, nmix, hc * d, V_HCFN, (double)(hc * d), S_F32B)) return -1;
    NM(n, "%s.hc_ffn_fn", pre);
    if (plain_st(c, n, nmix, hc * d, V_HCFN, (double)(hc * d), S_F32B)) return -1;
    NM(n, "%s.hc_attn_base", pre);
    if (plain_st(c, n, 0, nmix, V_HCBASE, 0, S_F32B)) return -1;
    NM(n, "%s.hc_ffn_base", pre);
    if (plain_st(c, n, 0, nmix, V_HCBASE, 0, S_F32B)) return -1;
    NM(n, "%s.hc_attn_scale", pre);
    if (plain_st(c, n, 0, 3, V_HCSCALE, 0, S_F32B)) return -1;
    NM(n, "%s.hc_ffn_scale", pre);
    if (plain_st(c, n, 0, 3, V_HCSCALE, 0, S_F32B)) return -1;
    NM(n, "%s.attn_norm.weight", pre);
    if (plain_st(c, n, 0, d, V_NORM, 0, S_BF16)) return -1;
    NM(n, "%s.ffn_norm.weight", pre);
    if (plain_st(c, n, 0, d, V_NORM, 0, S_BF16)) return -1;

    NM(n, "%s.attn.attn_sink", pre);
    if (plain_st(c, n, 0, H, V_SINK, 0, S_F32B)) return -1;
    NM(n, "%s.attn.wq_a", pre);
    if (linear(c, n, q, d, lin)) return -1;
    NM(n, "%s.attn.q_norm.weight", pre);
    if (plain_st(c, n, 0, q, V_NORM, 0, S_BF16)) return -1;
    NM(n, "%s.attn.wq_b", pre);
    if (linear(c, n, H * D, q, lin)) return -1;
    NM(n, "%s.attn.wkv", pre);
    if (linear(c, n, D, d, lin)) return -1;
    NM(n, "%s.attn.kv_norm.weight", pre);
    if (plain_st(c, n, 0, D, V_NORM, 0, S_BF16)) return -1;
    /* wo_a: a BF16 parameter of the V4.1 reference in every regime */
    NM(n, "%s.attn.wo_a", pre);
    if (linear(c, n, G * g->o_lora_rank, H * D / G, S_BF16)) return -1;
    NM(n, "%s.attn.wo_b", pre);
    if (linear(c, n, d, G * g->o_lora_rank, lin)) return -1;
    if (kv) {
        /* the compressor: ratio 1 a BF16 projection, ratio 2 FP32 wkv + wgate; no ape */
        NM(n, "%s.attn.compressor.wkv", pre);
        if (linear(c, n, D, d, ratio == 1 ? S_BF16 : S_F32B)) return -1;
        if (ratio > 1) {
            NM(n, "%s.attn.compressor.wgate", pre);
            if (linear(c, n, D, d, S_F32B)) return -1;
        }
        NM(n, "%s.attn.compressor.norm.weight", pre);
        if (plain_st(c, n, 0, D, V_NORM, 0, S_BF16)) return -1;
    }
    if (ix) {
        NM(n, "%s.attn.indexer.wq_b", pre);
        if (linear(c, n, Hi * Di, q, lin)) return -1;
        NM(n, "%s.attn.indexer.weights_proj", pre);
        if (linear(c, n, Hi, d, S_BF16)) return -1;
        if (kv) {
            /* the index keys' owner: wk over the compressor latent, k_norm */
            NM(n, "%s.attn.indexer.wk", pre);
            if (linear(c, n, Di, D, S_BF16)) return -1;
            NM(n, "%s.attn.indexer.k_norm.weight", pre);
            if (plain_st(c, n, 0, Di, V_NORM, 0, S_BF16)) return -1;
        }
    }

    NM(n, "%s.ffn.gate", pre);
    if (linear(c, n, n_routed, d, S_BF16)) return -1;
    NM(n, "%s.ffn.gate.bias", pre);
    if (plain_st(c, n, 0, n_routed, V_SMALL, 0, S_F32B)) return -1;
    for (int e = 0; e < n_routed; e++) {
        NM(n, "%s.ffn.experts.%d", pre, e);
        if (expert(c, n, exp_st)) return -1;
    }
    NM(n, "%s.ffn.shared_experts", pre);
    if (expert(c, n, lin)) return -1;
    if (stage >= 0) return dspark_v41(c, pre, stage);
    return eg >= 0 ? engram(c, pre, eg) : 0;
}

/* head (F32 of BF16 values) and norm (BF16); V4.1 has no hc_head. */
static int tail_v41(sy_ctx *c)
{
    const dsv4q_config *g = c->cfg;
    rule r = {dsv4q_synth_key(c->seed, "head.weight"), V_LINEAR, sqrt((double)g->dim), DSV4Q_SYNTH_HEAD_GAIN, NULL};
    if (emit_plain(c, "head.weight", 2, g->vocab_size, g->dim, &r, S_F32B)) return -1;
    return plain_st(c, "norm.weight", 0, g->dim, V_NORM, 0, S_BF16);
}

/* The compressed-token map (io/engram_map.h) into map[vocab_size]: the
 * shape of build_compressed_token_map's output (compressed ids numbered in
 * order of first occurrence), with the folds drawn from the seed. The ids
 * below s = min(3, V - 1) (BOS / EOS / PAD of the reference's tokenizer) keep
 * compressed ids of their own that nothing else maps to; of the ids after s
 * (id s itself always starts a new compressed id) exactly vocab - V are
 * folded, chosen by selection sampling (Knuth's algorithm S: id t is folded
 * when (x * (vocab - t)) >> 32 < the folds still to place, x = bits(key, 2t)
 * >> 32), onto the compressed id s + ((y * (next - s)) >> 32), y =
 * bits(key, 2t + 1) >> 32, next = the compressed ids numbered so far; every
 * other id gets compressed id next. key = key(seed, "engram_token_map.json").
 * The map so holds exactly the V ids 0..V-1 (V <= vocab). */
static void token_map_v41(const dsv4q_config *g, uint64_t seed, int32_t *map)
{
    const int64_t T = g->vocab_size, V = g->engram_compressed_vocab_size, s = V - 1 < 3 ? V - 1 : 3;
    const uint64_t key = dsv4q_synth_key(seed, "engram_token_map.json");
    int64_t need = T - V, next = 0;
    for (int64_t t = 0; t < T; t++) {
        if (t > s && need > 0) {
            const uint64_t x = dsv4q_synth_bits(key, 2 * (uint64_t)t) >> 32;
            if ((int64_t)((x * (uint64_t)(T - t)) >> 32) < need) {
                const uint64_t y = dsv4q_synth_bits(key, 2 * (uint64_t)t + 1) >> 32;
                map[t] = (int32_t)(s + (int64_t)((y * (uint64_t)(next - s)) >> 32));
                need--;
                continue;
            }
        }
        map[t] = (int32_t)next++;
    }
}

/* ------------------------------------------------------------------------ */
/* files and directories                                                     */

/* Remove a flat directory we created (its plain files, then itself). */
static void rm_flat(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char p[4400];
        while ((de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* SIGINT/SIGTERM during a synth: remove the temporary directory, then die
 * of the signal as usual. rm_flat is not async-signal-safe in theory (it
 * uses opendir); the process is about to exit and nothing else runs. */
static char g_tmp[4200];
static volatile sig_atomic_t g_tmp_live;
static void on_signal(int sig)
{
    if (g_tmp_live) rm_flat(g_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* A small text file inside the temporary directory, through base/file.h
 * (the directory itself is published by one rename at the end). */
static int write_text(const char *path, const char *text, char *err, size_t errlen)
{
    char ferr[600];
    if (dsv4q_file_write_atomic(path, text, strlen(text), ferr, sizeof ferr))
        return dsv4q_errf(err, errlen, "synth: %s", ferr);
    return 0;
}

/* DIR/engram_token_map.json: {"compressed_vocab_size": V, "token_map": [...]}
 * (the schema and spelling of tests/data/pub_v41_tiny/engram_token_map.json). */
static int write_token_map(const dsv4q_config *g, uint64_t seed, const char *dir, char *err, size_t errlen)
{
    const int64_t T = g->vocab_size;
    int32_t *map = malloc(sizeof(int32_t) * (size_t)T);
    char *txt = malloc((size_t)T * 13 + 64); /* ", " + at most 10 digits per entry */
    if (!map || !txt) {
        free(map);
        free(txt);
        return dsv4q_errf(err, errlen, "synth: out of memory building the Engram token map");
    }
    token_map_v41(g, seed, map);
    size_t n = (size_t)sprintf(txt, "{\"compressed_vocab_size\": %lld, \"token_map\": [",
                               (long long)g->engram_compressed_vocab_size);
    for (int64_t t = 0; t < T; t++) n += (size_t)sprintf(txt + n, "%s%d", t ? ", " : "", (int)map[t]);
    snprintf(txt + n, 3, "]}");
    char path[4400];
    snprintf(path, sizeof path, "%s/engram_token_map.json", dir);
    int rc = write_text(path, txt, err, errlen);
    free(map);
    free(txt);
    return rc;
}

/* 1: an empty directory, 0: absent, -1: something else is there. */
static int dir_state(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode)) return -1;
    DIR *d = opendir(path);
    if (!d) return -1;
    struct dirent *de;
    int empty = 1;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            empty = 0;
            break;
        }
    closedir(d);
    return empty ? 1 : -1;
}

#define SY_STR2(x) #x
#define SY_STR(x) SY_STR2(x)

/* clang-format off */
static const char RECIPE[] =
    "dsv4q synthetic checkpoint, recipe v" DSV4Q_SYNTH_VERSION " (docs/synth.md; mirrors reference case pub_tiny)\n"
    "N = Box-Muller normal of splitmix64 stream (seed, FNV-1a(tensor name)), element = flat index\n"
    "linears X.weight [out,in]: N/sqrt(in)   (BF16 | FP8 E4M3 + E8M0 per 128x128 | FP4 E2M1 + E8M0 per 32)\n"
    "head.weight: gain*N/sqrt(dim) F32, gain " SY_STR(DSV4Q_SYNTH_HEAD_GAIN) "\n"
    "embed.weight: N + u[col] BF16, u one shared N(0,1) row ('embed.weight/u')\n"
    "norm weights: 1+0.05N   hc fn: N*0.5/sqrt(hc*dim)   hc base: 0.5N   hc scale: 1+0.1N\n"
    "attn_sink: N   compressor ape: 0.1N   gate bias: 0.1N   gate/compressor linears: F32\n"
    "tid2eid rows: first k of a seeded Fisher-Yates permutation of the experts\n"
    "scales: 2^e, e = smallest with fmax*2^e >= amax (fmax 448 for FP8, 6 for FP4)\n"
    "V4.1 (recipe " DSV4Q_SYNTH_VERSION_V41 ", mirrors pub_v41_tiny): FP8 per 32x32; the reference's BF16 parameters BF16,\n"
    "its float32 ones F32 of BF16 values; compressors / index keys on the source layers; Engram tables N as\n"
    "E4M3 + E8M0 per 32 of a row, q/k_weight 1+0.2N BF16; no hc_head; engram_token_map.json (seeded folds)\n";
/* clang-format on */

const char *dsv4q_synth_recipe(void) { return RECIPE; }

int dsv4q_synth_write(const dsv4q_config *cfg, uint64_t seed, const char *out_dir, int shards, char *err,
                      size_t errlen)
{
    if (!cfg || !out_dir || !out_dir[0]) return dsv4q_errf(err, errlen, "synth: NULL config or empty output directory");
    if (dsv4q_config_validate(cfg, err, errlen)) return -1;
    const int v41 = cfg->arch == DSV4Q_ARCH_V41;
    const char *version = v41 ? DSV4Q_SYNTH_VERSION_V41 : DSV4Q_SYNTH_VERSION;
    if (v41 && cfg->n_engram_layers > 0 && cfg->engram_compressed_vocab_size > cfg->vocab_size)
        return dsv4q_errf(err, errlen,
                          "synth: %s: field 'engram_compressed_vocab_size' (%lld) exceeds vocab_size (%d): a token map "
                          "of vocab_size entries cannot hold that many compressed ids",
                          out_dir, (long long)cfg->engram_compressed_vocab_size, cfg->vocab_size);
    const int nl = cfg->n_layers + cfg->n_mtp_layers;
    if (shards < 1) shards = 1;
    if (shards > nl)
        return dsv4q_errf(err, errlen,
                          "synth: %s: %d shards requested but the model has %d layers (shards split by layer)", out_dir,
                          shards, nl);
    if (shards > 99999) return dsv4q_errf(err, errlen, "synth: %s: too many shards (%d)", out_dir, shards);

    /* out_dir without trailing slashes, its parent and base name */
    char dir[4096], parent[4096], tmp[4200];
    if (snprintf(dir, sizeof dir, "%s", out_dir) >= (int)sizeof dir)
        return dsv4q_errf(err, errlen, "synth: output path too long");
    size_t L = strlen(dir);
    while (L > 1 && dir[L - 1] == '/') dir[--L] = 0;
    const char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == dir) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - dir), dir);
    if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(dir, "/"))
        return dsv4q_errf(err, errlen, "synth: %s: output must name a new directory", out_dir);
    if (dsv4q_mkdir_p(parent))
        return dsv4q_errf(err, errlen, "synth: cannot create directory %s: %s", parent, strerror(errno));
    if (dir_state(dir) < 0)
        return dsv4q_errf(err, errlen, "synth: %s exists and is not an empty directory (refusing to overwrite)", dir);
    snprintf(tmp, sizeof tmp, "%s/.%s.synth-XXXXXX", parent, base);
    if (!mkdtemp(tmp))
        return dsv4q_errf(err, errlen, "synth: cannot create a temporary directory in %s: %s", parent, strerror(errno));
    (void)chmod(tmp, 0755);
    snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
    g_tmp_live = 1;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    const double t0 = dsv4q_now_s();

    int rc = -1;
    json_t *wmap = NULL, *index = NULL;
    char path[4400], fname[64], seedstr[32];
    snprintf(seedstr, sizeof seedstr, "%llu", (unsigned long long)seed);

    char *cj = dsv4q_config_to_json(cfg);
    if (!cj) {
        dsv4q_errf(err, errlen, "synth: cannot serialize the config");
        goto done;
    }
    snprintf(path, sizeof path, "%s/config.json", tmp);
    {
        size_t n = strlen(cj);
        char *cjn = malloc(n + 2);
        if (!cjn) {
            free(cj);
            dsv4q_errf(err, errlen, "synth: out of memory");
            goto done;
        }
        memcpy(cjn, cj, n);
        cjn[n] = '\n';
        cjn[n + 1] = 0;
        free(cj);
        int w = write_text(path, cjn, err, errlen);
        free(cjn);
        if (w) goto done;
    }
    if (v41 && cfg->n_engram_layers > 0 && write_token_map(cfg, seed, tmp, err, errlen)) goto done;

    if (shards > 1 && !(wmap = json_object())) {
        dsv4q_errf(err, errlen, "synth: out of memory");
        goto done;
    }
    sy_ctx c = {cfg, seed, v41 ? DSV4Q_FP8_BLOCK_V41 : 128, NULL, fname, wmap, 0, err, errlen};
    for (int s = 0; s < shards; s++) {
        if (shards > 1) snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, shards);
        else snprintf(fname, sizeof fname, "model.safetensors");
        c.w = dsv4q_st_writer_new();
        if (!c.w) {
            dsv4q_errf(err, errlen, "synth: out of memory");
            goto done;
        }
        if (dsv4q_st_writer_meta(c.w, "format", "pt") || dsv4q_st_writer_meta(c.w, "dsv4q.synth", version) ||
            dsv4q_st_writer_meta(c.w, "dsv4q.seed", seedstr) ||
            dsv4q_st_writer_meta(c.w, "dsv4q.config", cfg->name[0] ? cfg->name : "custom")) {
            dsv4q_st_writer_free(c.w);
            dsv4q_errf(err, errlen, "synth: out of memory");
            goto done;
        }
        int bad = 0;
        if (s == 0) bad = embed(&c);
        const uint64_t embed_bytes = c.total;
        for (int li = 0; !bad && li < nl; li++) {
            if ((int)((long long)li * shards / nl) != s) continue;
            bad = v41 ? layer_v41(&c, li) : layer(&c, li);
            if (!bad && li == 0) {
                /* size estimate from layer 0 (+ a head as large as the embedding): checked against the free
                 * space before any tensor byte is written (the shard is held in memory until then) */
                double est = 2.0 * (double)embed_bytes + (double)(c.total - embed_bytes) * nl, avail = -1;
                struct statvfs vf;
                if (statvfs(parent, &vf) == 0) avail = (double)vf.f_bavail * (double)vf.f_frsize;
                if (avail >= 0 && est > avail) {
                    dsv4q_errf(err, errlen, "synth: %s needs about %.1f MB, but only %.1f MB are free in %s", dir,
                               est / 1e6, avail / 1e6, parent);
                    dsv4q_st_writer_free(c.w);
                    goto done;
                }
                if (dsv4q_now_s() - t0 > 2 || est > 1e9)
                    fprintf(stderr, "[synth] %s: about %.2f GB to write (%.2f GB free)\n", dir, est / 1e9, avail / 1e9);
            }
            if (!bad && dsv4q_now_s() - t0 > 2)   /* progress only for syntheses that take a while */
                fprintf(stderr, "[synth] layer %d/%d done (%.2f GB generated, %.0f s)\n", li + 1, nl, c.total / 1e9,
                        dsv4q_now_s() - t0);
        }
        if (!bad && s == shards - 1) bad = v41 ? tail_v41(&c) : tail(&c);
        if (bad) {
            dsv4q_st_writer_free(c.w);
            goto done;
        }
        snprintf(path, sizeof path, "%s/%s", tmp, fname);
        if (dsv4q_st_writer_write(c.w, path, err, errlen)) goto done;   /* frees the writer */
    }
    if (shards > 1) {
        index = json_pack("{s:{s:I,s:s,s:s},s:O}", "metadata", "total_size", (json_int_t)c.total, "dsv4q.synth",
                          version, "dsv4q.seed", seedstr, "weight_map", wmap);
        char *txt = index ? json_dumps(index, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        if (!txt) {
            dsv4q_errf(err, errlen, "synth: out of memory writing the index");
            goto done;
        }
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", tmp);
        size_t n = strlen(txt);
        char *t2 = realloc(txt, n + 2);
        if (t2) {
            txt = t2;
            txt[n] = '\n';
            txt[n + 1] = 0;
        }
        int w = write_text(path, txt, err, errlen);
        free(txt);
        if (w) goto done;
    }
    fsync_path(tmp);
    if (rename(tmp, dir) != 0) {
        dsv4q_errf(err, errlen, "synth: cannot move %s into place as %s: %s%s", tmp, dir, strerror(errno),
                   errno == ENOTEMPTY || errno == EEXIST ? " (it appeared meanwhile and is not empty)" : "");
        goto done;
    }
    fsync_path(parent);
    rc = 0;
done:
    json_decref(index);
    json_decref(wmap);
    if (rc) rm_flat(tmp);
    g_tmp_live = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}
