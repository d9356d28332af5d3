/*
 * gen.c - the deterministic input generators of qualification cases
 * (gen.h): splitmix64 seeded by FNV-1a of the canonical key (cases.h K2),
 * Irwin-Hall gaussians, BF16-representable activation recipes (K3), and
 * weights in every stored format, decoded exactly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/rng.h"
#include "harness/cases/gen.h"
#include "oracle/formats.h"

uint64_t dsv4q_rng_seed(const char *s) { return dsv4q_fnv1a64(s); }
uint64_t dsv4q_rng_next(dsv4q_rng *r) { return dsv4q_splitmix64(&r->s); }

double dsv4q_rng_u01(dsv4q_rng *r) { return (double)(dsv4q_rng_next(r) >> 11) * 0x1p-53; }
long dsv4q_rng_below(dsv4q_rng *r, long n) { return (long)(dsv4q_rng_next(r) % (uint64_t)n); }

/* Irwin-Hall(4) scaled to unit variance: arithmetic only, so bit-identical
 * on every machine (no libm transcendental in input generation). The four
 * draws are sequenced (declarations, not one sum of calls: C leaves the
 * order of the operands' calls unspecified). */
double dsv4q_rng_gauss(dsv4q_rng *r)
{
    const double u0 = dsv4q_rng_u01(r), u1 = dsv4q_rng_u01(r), u2 = dsv4q_rng_u01(r), u3 = dsv4q_rng_u01(r);
    return (((u0 + u1) + u2) + u3 - 2.0) * 1.7320508075688772;
}

float dsv4q_gen_bf16(double v) { return dsv4q_bf16_to_f32(dsv4q_bf16_from_f32((float)v)); }

/* Recipe f32: inputs with full FP32 mantissas (K3's exception): the
 * reference keeps its op inputs and parameters in F32, so a backend that
 * stores them narrower (KV rows in F16, sinks or norm weights in BF16)
 * deviates only when the inputs have bits BF16 lacks. dsv4q_gen_store() stores a value
 * as the recipe says: BF16-representable, or F32 for recipe f32. */
int dsv4q_gen_full(const char *recipe) { return !strcmp(recipe, "f32"); }
float dsv4q_gen_store(int full, double v) { return full ? (float)v : dsv4q_gen_bf16(v); }

/* Activation fill by recipe, BF16-representable (K3; F32 for recipe f32).
 * block: the quant block the consumer uses (nearzero/extreme act per
 * block). */
void dsv4q_gen_act(dsv4q_rng *r, const char *recipe, float *x, long rows, long n, double scale, long block)
{
    int ex = !strcmp(recipe, "extreme"), nz = !strcmp(recipe, "nearzero"), full = dsv4q_gen_full(recipe);
    for (long i = 0; i < rows; i++)
        for (long b0 = 0; b0 < n; b0 += block) {
            double m = scale;
            long kind = (ex || nz) ? dsv4q_rng_below(r, 4) : 0;
            if (ex && kind) m = scale * ldexp(1.0, (int)dsv4q_rng_below(r, 49) - 24);
            if (nz && kind == 1) m = 0;                                        /* an all-zero block */
            if (nz && kind == 2) m = scale * ldexp(1.0, -40 - (int)dsv4q_rng_below(r, 60)); /* below the amax floors */
            for (long j = b0; j < b0 + block && j < n; j++) x[i * n + j] = dsv4q_gen_store(full, dsv4q_rng_gauss(r) * m);
            if (ex && kind == 3) x[i * n + b0] = dsv4q_gen_bf16(ldexp(450.0, (int)dsv4q_rng_below(r, 8) - 4)); /* just above 448*2^k */
            if (ex && kind == 2) x[i * n + b0] = dsv4q_gen_bf16(ldexp(448.0, (int)dsv4q_rng_below(r, 8) - 4)); /* exactly 448*2^k */
        }
}

/* 4096 magnitude codes of a quantized gaussian (E4M3: sigma 112 of max
 * 448; E2M1: sigma 2 of max 6), drawn once from a fixed seed. */
static const uint8_t *code_table(int fp8)
{
    static uint8_t tab[2][4096];
    static int made[2];
    if (!made[fp8]) {
        dsv4q_rng r = {fp8 ? 0x4538u : 0x4534u};
        for (int i = 0; i < 4096; i++) {
            double v = fabs(dsv4q_rng_gauss(&r)) * (fp8 ? 112.0 : 2.0);
            tab[fp8][i] = fp8 ? (uint8_t)(dsv4q_e4m3_encode(v, 1) & 0x7F) : (uint8_t)(dsv4q_e2m1_encode(v) & 0x7);
        }
        made[fp8] = 1;
    }
    return tab[fp8];
}

/* A weight [N,K] in format fmt ("fp8", "fp8b32", "fp4", "bf16", "f32"),
 * decoded into the F32 data and stored raw. sigma: the value scale. */
int dsv4q_gen_weight(dsv4q_case *c, int slot, dsv4q_rng *r, const char *fmt, long N, long K, double sigma,
                       const char *recipe, char *err, size_t errlen)
{
    float *w = dsv4q_case_input(c, slot, DSV4Q_BT_F32, 2, N, K, 0);
    dsv4q_bt *t = &c->in[slot];
    if (!w) goto oom;
    int nz = !strcmp(recipe, "nearzero");
    if (!strcmp(fmt, "f32") || !strcmp(fmt, "bf16"))
        for (long i = 0; i < N * K; i++) w[i] = (float)(dsv4q_rng_gauss(r) * sigma);
    if (!strcmp(fmt, "f32")) return 0;
    if (!strcmp(fmt, "bf16")) {
        uint16_t *raw = dsv4q_case_alloc(c, 2 * (size_t)(N * K));
        if (!raw) goto oom;
        for (long i = 0; i < N * K; i++) {
            raw[i] = dsv4q_bf16_from_f32(w[i]);
            w[i] = dsv4q_bf16_to_f32(raw[i]);
        }
        t->raw = raw;
        t->raw_dtype = DSV4Q_BT_BF16;
        t->raw_ndim = 2;
        t->raw_shape[0] = N;
        t->raw_shape[1] = K;
        return 0;
    }
    if (!strcmp(fmt, "fp8") || !strcmp(fmt, "fp8b32") || !strcmp(fmt, "fp4")) {
        /* Codes are drawn from a table of gaussian samples encoded once
         * (deterministic), with a random sign, and block scales around
         * sigma: 25M-element expert weights then cost ~1 ns per element
         * instead of a gauss + encode each; the codes keep the shape of a
         * quantized gaussian, which is all a kernel can tell. */
        const int fp8 = fmt[2] == '8';
        const long wb = fmt[3] == 'b' ? 32 : 128; /* FP8 tile: 128x128 (V4) or 32x32 (V4.1, fp8b32) */
        if (!fp8 && K % 32) { snprintf(err, errlen, "%s: FP4 needs K %% 32 == 0", c->key); return -1; }
        const uint8_t *ctab = code_table(fp8);
        const long nb0 = fp8 ? (N + wb - 1) / wb : N, nb1 = fp8 ? (K + wb - 1) / wb : K / 32;
        uint8_t *raw = dsv4q_case_alloc(c, fp8 ? (size_t)(N * K) : (size_t)(N * K / 2)), *sc = dsv4q_case_alloc(c, (size_t)(nb0 * nb1));
        if (!raw || !sc) goto oom;
        /* sigma of the table's values: ~112 (FP8), ~2 (FP4) */
        int e0 = -(int)ceil(log2(sigma > 0 ? 1.0 / sigma : 1.0)) - (fp8 ? 7 : 1);
        for (long i = 0; i < nb0 * nb1; i++) {
            int e = e0 + (int)dsv4q_rng_below(r, 3) - 1;
            sc[i] = (uint8_t)dsv4q_e8m0_encode_exp(e);
        }
        const double *t8 = dsv4q_e4m3_table();
        double t4[16], *sdec = malloc(sizeof(double) * (size_t)(nb0 * nb1));
        if (!sdec) goto oom;
        for (int q = 0; q < 16; q++) t4[q] = dsv4q_e2m1_decode((uint8_t)q);
        for (long q = 0; q < nb0 * nb1; q++) sdec[q] = dsv4q_e8m0_decode(sc[q]);
        uint64_t bits = 0;
        int left = 0;
        for (long i = 0; i < N; i++)
            for (long k = 0; k < K; k++) {
                if (left == 0) { bits = dsv4q_rng_next(r); left = 4; }
                uint32_t v = (uint32_t)(bits & 0xFFFF);
                bits >>= 16;
                left--;
                uint8_t code = ctab[v & 4095];
                long si = fp8 ? (i / wb) * nb1 + k / wb : i * nb1 + k / 32;
                int zero = nz && (sc[si] & 7) == 0;   /* nearzero: ~1 block in 8 is all zero */
                if (zero) code = 0;
                else if (v & 0x8000) code |= fp8 ? 0x80 : 0x8;
                double scale = sdec[si];
                if (fp8) {
                    raw[i * K + k] = code;
                    w[i * K + k] = (float)(t8[code] * scale);
                } else {
                    long idx = i * K + k;
                    if (idx & 1) raw[idx >> 1] |= (uint8_t)(code << 4);
                    else raw[idx >> 1] = code;
                    w[i * K + k] = (float)(t4[code] * scale);
                }
            }
        free(sdec);
        t->raw = raw;
        t->raw_dtype = fp8 ? DSV4Q_BT_F8_E4M3 : DSV4Q_BT_I8;
        t->raw_ndim = 2;
        t->raw_shape[0] = N;
        t->raw_shape[1] = fp8 ? K : K / 2;
        t->raw_scale = sc;
        t->scale_dtype = DSV4Q_BT_F8_E8M0;
        t->scale_shape[0] = nb0;
        t->scale_shape[1] = nb1;
        return 0;
    }
    snprintf(err, errlen, "%s: unknown weight format '%s' (fp8, fp8b32, fp4, bf16, f32)", c->key, fmt);
    return -1;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

/* Midpoints of adjacent E4M3 magnitudes in [1/8, 448). */
static double e4m3_mid(dsv4q_rng *r)
{
    for (;;) {
        uint8_t c0 = (uint8_t)(8 + dsv4q_rng_below(r, 0x7E - 8));
        double a = dsv4q_e4m3_decode(c0), b = dsv4q_e4m3_decode((uint8_t)(c0 + 1));
        if (b <= 448) return (a + b) / 2 * (dsv4q_rng_below(r, 2) ? -1 : 1);
    }
}

/* The input of a quantizer case (act_quant: fp8 = 1, E4M3 with block
 * `block`; fp4_quant: fp8 = 0, E2M1 in blocks of 32): recipe ties puts every
 * block on rounding midpoints of the grid with one element at fmax*2^e,
 * scaletrap puts every block's amax at fmax*2^e or a few F32 ulps above
 * it, any other recipe is dsv4q_gen_act's. */
void dsv4q_gen_quant(dsv4q_rng *r, const char *recipe, float *x, long rows, long n, long block, int fp8)
{
    if (!strcmp(recipe, "ties")) {
        /* every block: one element at fmax*2^e (fixes s = 2^e), the rest on
         * rounding midpoints of the grid (ties-to-even decides) */
        static const double e2m1_mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5};
        for (long i = 0; i < rows; i++)
            for (long b0 = 0; b0 < n; b0 += block) {
                int e = (int)dsv4q_rng_below(r, 16) - 8;
                for (long j = b0; j < b0 + block && j < n; j++) {
                    double v;
                    if (fp8) {
                        v = e4m3_mid(r);
                    } else {   /* the midpoint, then its sign: two draws in this order */
                        v = e2m1_mid[dsv4q_rng_below(r, 7)];
                        v *= dsv4q_rng_below(r, 2) ? -1 : 1;
                    }
                    x[i * n + j] = dsv4q_gen_bf16(ldexp(v, e));
                }
                x[i * n + b0] = dsv4q_gen_bf16(ldexp(fp8 ? 448.0 : 6.0, e));
            }
    } else if (!strcmp(recipe, "scaletrap")) {
        /* every block's amax is fmax*2^e or a few F32 ulps above it: the
         * exact scale rule gives 2^e resp. 2^(e+1); ceil(log2f(amax/fmax))
         * in float gets some of these wrong. F32 inputs (not BF16: the
         * trap needs bits BF16 does not have; the qat and exact profiles
         * quantize unrounded values). */
        const float fmax = fp8 ? 448.0f : 6.0f;
        for (long i = 0; i < rows; i++)
            for (long b0 = 0; b0 < n; b0 += block) {
                int e = (int)dsv4q_rng_below(r, 31) - 20;
                float a = ldexpf(fmax, e);
                for (long j = dsv4q_rng_below(r, 6); j > 0; j--) a = nextafterf(a, INFINITY);
                for (long j = b0; j < b0 + block && j < n; j++) {
                    double v = dsv4q_rng_gauss(r) * 0.25 * (double)a;
                    if (fabs(v) > 0.9 * a) v = 0.9 * a;
                    x[i * n + j] = dsv4q_gen_bf16(v);
                }
                const long bl = block < n - b0 ? block : n - b0, at = dsv4q_rng_below(r, bl);
                x[i * n + b0 + at] = dsv4q_rng_below(r, 2) ? a : -a;
                /* act_quant: two companions at 2^-8..2^-7 of 2^e, E4M3
                 * subnormals of the block's scale: a scale off by one
                 * binade moves them on the subnormal grid (the normal
                 * grid is scale-invariant, so without them a wrong scale
                 * hides: 'ue8m0_log2f' escaped every case of a seed) */
                if (fp8 && bl > 2)
                    for (int k = 0; k < 2; k++) {
                        long j = (at + 1 + k + dsv4q_rng_below(r, bl - 2)) % bl;
                        if (j == at) j = (j + 1) % bl;
                        const double mag = ldexp(1.0 + dsv4q_rng_u01(r), e - 8);   /* then its sign */
                        x[i * n + b0 + j] = dsv4q_gen_bf16(mag * (dsv4q_rng_below(r, 2) ? 1 : -1));
                    }
            }
    } else {
        dsv4q_gen_act(r, recipe, x, rows, n, 1.0, block);
    }
}

/* Recipe blocks: whole 64-column blocks of the kernel's online softmax
 * masked, as a causal window or a short prefix leaves them: query i % 3 ==
 * 0 loses the first block (the first block of the window ring: the
 * kernel starts on a block with no finite score, running max -inf) and
 * the last one, i % 3 == 1 a middle block, i % 3 == 2 every block but
 * one. A masked column is -1 or, one time in four, an index >= N. Rows
 * with fewer than 3 blocks mask what they have. */
static int cmp_i32(const void *x, const void *y)
{
    const int32_t u = *(const int32_t *)x, v = *(const int32_t *)y;
    return (u > v) - (u < v);
}

int dsv4q_gen_rows(dsv4q_rng *r, const char *recipe, float *x, long N, long D, const int32_t *idx, long n)
{
    int32_t *u = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!u) return -1;
    long k = 0;
    for (long j = 0; j < n; j++)
        if (idx[j] >= 0 && idx[j] < N) u[k++] = idx[j];
    qsort(u, (size_t)k, sizeof *u, cmp_i32); /* ascending: the draw order depends on the set, not on idx order */
    for (long j = 0; j < k; j++)
        if (!j || u[j] != u[j - 1]) dsv4q_gen_act(r, recipe, x + (long)u[j] * D, 1, D, 1.0, D);
    free(u);
    return 0;
}

long dsv4q_gen_wrap_row(long D) { return ((1L << 31) + 4 * D - 1) / (4 * D); }

void dsv4q_gen_mask_blocks(dsv4q_rng *r, int32_t *row, long ncols, long i, long N)
{
    const long nb = (ncols + 63) / 64, live = nb > 1 ? 1 + dsv4q_rng_below(r, nb - 1) : 0;
    for (long b = 0; b < nb; b++) {
        int m;
        switch (i % 3) {
        case 0: m = b == 0 || (nb > 2 && b == nb - 1); break;
        case 1: m = b == nb / 2; break;
        default: m = b != live; break;
        }
        if (!m) continue;
        for (long j = b * 64; j < (b + 1) * 64 && j < ncols; j++)
            row[j] = dsv4q_rng_below(r, 4) ? -1 : (int32_t)(N + dsv4q_rng_below(r, 100));
    }
}

/* hc params at inputs slot.. (hc_pre, hc_head): fn [m, hc*d] F32 math,
 * scale [nscale], base [m]. */
int dsv4q_gen_hc_params(dsv4q_case *c, dsv4q_rng *r, int slot, long m, long hcd, long nscale, char *err, size_t errlen)
{
    if (dsv4q_gen_weight(c, slot, r, "f32", m, hcd, 1.0 / sqrt((double)hcd), "normal", err, errlen)) return -1;
    float *scale = dsv4q_case_input(c, slot + 1, DSV4Q_BT_F32, 1, nscale, 0, 0),
          *base = dsv4q_case_input(c, slot + 2, DSV4Q_BT_F32, 1, m, 0, 0);
    if (!scale || !base) {
        snprintf(err, errlen, "%s: out of memory", c->key);
        return -1;
    }
    for (long i = 0; i < nscale; i++) scale[i] = (float)(0.5 + dsv4q_rng_u01(r));
    for (long i = 0; i < m; i++) base[i] = (float)(0.5 * dsv4q_rng_gauss(r));
    return 0;
}

