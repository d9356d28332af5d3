/*
 * selftest.cu - invariants of the kernel set that need no oracle:
 *
 *  S1. GEMM tiling: the small-s tile (8 x 32) and the large-s tile (32 x 64)
 *      give bit-identical y for every weight format, on shapes with partial
 *      tiles and a partial FP8 K block (each y element sums the same terms
 *      in the same order in both; a wrong index shows as a difference).
 *  S2. Compressor state: prefill of s tokens == prefill of s-k tokens
 *      followed by k one-token decode calls, row for row and state for
 *      state, bit for bit (ratio 4 with overlap, attention and indexer rows;
 *      ratio 128) - the oracle's invariant C1.
 *
 * Run by dsv4q_cuda_debug()->selftest (tests/test_cuda_plugin.c, on the
 * emulator in CI and on the GPU in scripts/gpu-check.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include "backends/cuda/dqc.h"
#include "backends/cuda/dqc_num.h"

namespace {

struct rng {
    uint64_t s;
    uint64_t next()
    {
        s += 0x9E3779B97F4A7C15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uni() { return (float)((next() >> 40) * 0x1p-24) * 2.0f - 1.0f; }   /* [-1, 1) */
};

/* Device copy of a host buffer from the scratch arena. */
template <class T>
T *up(dqc_ctx *c, const T *h, size_t n)
{
    T *d = (T *)dqc_alloc(c, sizeof(T) * n);
    if (!d) return NULL;
    if (dqc_check(c, cudaMemcpy(d, h, sizeof(T) * n, cudaMemcpyHostToDevice), "selftest upload", __FILE__, __LINE__))
        return NULL;
    return d;
}

/* A random weight [out, in] of format fmt, on the device. */
int make_weight(dqc_ctx *c, rng &r, int fmt, long out, long in, dqc_weight *w)
{
    w->fmt = fmt;
    w->out = out;
    w->in = in;
    w->scale = NULL;
    w->scale_cols = 0;
    const long n = out * in;
    if (fmt == DQC_WF_F32) {
        float *h = (float *)malloc(sizeof(float) * n);
        for (long i = 0; i < n; i++) h[i] = r.uni() * 0.1f;
        w->codes = up(c, h, (size_t)n);
        free(h);
    } else if (fmt == DQC_WF_BF16) {
        uint16_t *h = (uint16_t *)malloc(sizeof(uint16_t) * n);
        for (long i = 0; i < n; i++) h[i] = dqc_bf16_code(r.uni() * 0.1f);
        w->codes = up(c, h, (size_t)n);
        free(h);
    } else {
        const long nb = fmt == DQC_WF_FP8 ? n : n / 2;
        uint8_t *h = (uint8_t *)malloc((size_t)nb);
        for (long i = 0; i < nb; i++) {
            uint8_t b = (uint8_t)r.next();
            if (fmt == DQC_WF_FP8 && (b & 0x7F) == 0x7F) b ^= 1;   /* no NaN codes */
            h[i] = b;
        }
        w->codes = up(c, h, (size_t)nb);
        free(h);
        const long rows = fmt == DQC_WF_FP8 ? (out + 127) / 128 : out;
        const long cols = fmt == DQC_WF_FP8 ? (in + 127) / 128 : in / 32;
        float *sc = (float *)malloc(sizeof(float) * rows * cols);
        for (long i = 0; i < rows * cols; i++) sc[i] = dqc_pow2f(-8 - (int)(r.next() % 4));
        w->scale = up(c, sc, (size_t)(rows * cols));
        w->scale_cols = cols;
        free(sc);
    }
    return w->codes && (fmt == DQC_WF_F32 || fmt == DQC_WF_BF16 || w->scale) ? 0 : -1;
}

float *rand_dev(dqc_ctx *c, rng &r, long n, float amp)
{
    float *h = (float *)malloc(sizeof(float) * n);
    for (long i = 0; i < n; i++) h[i] = r.uni() * amp;
    float *d = up(c, h, (size_t)n);
    free(h);
    return d;
}

int download(dqc_ctx *c, float *h, const float *d, long n)
{
    DQC_CK(c, cudaMemcpy(h, d, sizeof(float) * n, cudaMemcpyDeviceToHost));
    return 0;
}

int same(dqc_ctx *c, const float *a, const float *b, long n, const char *what)
{
    if (memcmp(a, b, sizeof(float) * n) == 0) return 0;
    for (long i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof(float)))
            return dqc_fail(c, "selftest %s: element %ld differs: %.9g vs %.9g", what, i, a[i], b[i]);
    return 0;
}

int s1_gemm_tiles(dqc_ctx *c)
{
    rng r = {1};
    const long s = 37, K = 320, N = 100;
    const int fmts[4] = {DQC_WF_F32, DQC_WF_BF16, DQC_WF_FP8, DQC_WF_FP4};
    const char *names[4] = {"S1 gemm F32", "S1 gemm BF16", "S1 gemm FP8", "S1 gemm FP4"};
    float *h1 = (float *)malloc(sizeof(float) * s * N), *h2 = (float *)malloc(sizeof(float) * s * N);
    int rc = -1;
    for (int f = 0; f < 4; f++) {
        dqc_weight w;
        float *x = rand_dev(c, r, s * K, 3.0f), *y = (float *)dqc_alloc(c, sizeof(float) * s * N);
        if (!x || !y || make_weight(c, r, fmts[f], N, K, &w)) goto out;
        c->gemm_cfg = 1;
        if (dqc_linear(c, DQC_SOURCE_SET, 1, &w, x, s, y, DQC_B_LINEAR_BF16) || download(c, h1, y, s * N)) goto out;
        c->gemm_cfg = 2;
        if (dqc_linear(c, DQC_SOURCE_SET, 1, &w, x, s, y, DQC_B_LINEAR_BF16) || download(c, h2, y, s * N)) goto out;
        c->gemm_cfg = 0;
        if (same(c, h1, h2, s * N, names[f])) goto out;
    }
    rc = 0;
out:
    c->gemm_cfg = 0;
    free(h1);
    free(h2);
    return rc;
}

/* One compressor configuration: prefill(s) vs prefill(s - k) + k decodes. */
int s2_one(dqc_ctx *c, int ratio, int rotate, long s, long k, const char *what)
{
    rng r = {(uint64_t)(ratio * 10 + rotate)};
    const int Dc = 64, dim = 48, coff = ratio == 4 ? 2 : 1, W = coff * Dc;
    dqc_cmp cm;
    cm.ratio = ratio;
    cm.Dc = Dc;
    cm.rotate = rotate;
    if (make_weight(c, r, DQC_WF_BF16, W, dim, &cm.wkv) || make_weight(c, r, DQC_WF_BF16, W, dim, &cm.wgate))
        return -1;
    cm.ape = rand_dev(c, r, (long)ratio * W, 0.5f);
    float *normh = (float *)malloc(sizeof(float) * Dc);
    for (int i = 0; i < Dc; i++) normh[i] = 1.0f + 0.25f * r.uni();
    cm.norm = up(c, normh, (size_t)Dc);
    free(normh);
    float *x = rand_dev(c, r, s * dim, 2.0f);
    const long nrow = s / ratio;
    float *rows_a = (float *)dqc_alloc(c, sizeof(float) * (nrow + 1) * Dc);
    float *rows_b = (float *)dqc_alloc(c, sizeof(float) * (nrow + 1) * Dc);
    if (!cm.ape || !cm.norm || !x || !rows_a || !rows_b) return -1;
    dqc_rope_params rp = {16, 160000.0, 65536, 16.0, 32.0, 1.0};
    dqc_rope_table rope;
    if (dqc_rope_prepare(c, DQC_SOURCE_SET, &rp, &rope)) return -1;
    dqc_cmp_state sa, sb;
    if (dqc_cmp_state_init(c, &sa, ratio, Dc)) return -1;
    if (dqc_cmp_state_init(c, &sb, ratio, Dc)) { dqc_cmp_state_free(&sa); return -1; }
    int rc = -1;
    const long nst = (long)coff * ratio * W;
    float *ha = (float *)malloc(sizeof(float) * (nrow + 1) * Dc + sizeof(float) * 2 * nst);
    float *hb = (float *)malloc(sizeof(float) * (nrow + 1) * Dc + sizeof(float) * 2 * nst);
    long got_a = dqc_compressor(c, DQC_SOURCE_SET, 1, &cm, &sa, x, s, 0, &rope, 1e-6, rows_a);
    long got_b = dqc_compressor(c, DQC_SOURCE_SET, 1, &cm, &sb, x, s - k, 0, &rope, 1e-6, rows_b);
    if (got_a < 0 || got_b < 0) goto out;
    for (long p = s - k; p < s; p++) {
        long n1 = dqc_compressor(c, DQC_SOURCE_SET, 1, &cm, &sb, x + p * dim, 1, p, &rope, 1e-6, rows_b + got_b * Dc);
        if (n1 < 0) goto out;
        got_b += n1;
    }
    if (got_a != nrow || got_b != nrow) {
        dqc_fail(c, "selftest %s: %ld and %ld rows, want %ld", what, got_a, got_b, nrow);
        goto out;
    }
    if (download(c, ha, rows_a, nrow * Dc) || download(c, hb, rows_b, nrow * Dc) || same(c, ha, hb, nrow * Dc, what))
        goto out;
    if (download(c, ha, sa.kv, nst) || download(c, ha + nst, sa.score, nst) || download(c, hb, sb.kv, nst) ||
        download(c, hb + nst, sb.score, nst))
        goto out;
    {
        /* the meaningful state: the previous block (overlap, once one is
         * complete) and the current partial block; slots past the partial
         * block hold stale rows in decode, never read before rewritten */
        const long off = coff == 2 ? ratio : 0, rem = s % ratio;
        if (coff == 2 && s >= ratio &&
            (same(c, ha, hb, (long)ratio * W, what) || same(c, ha + nst, hb + nst, (long)ratio * W, what)))
            goto out;
        if (rem && (same(c, ha + off * W, hb + off * W, rem * W, what) ||
                    same(c, ha + nst + off * W, hb + nst + off * W, rem * W, what)))
            goto out;
    }
    rc = 0;
out:
    free(ha);
    free(hb);
    dqc_cmp_state_free(&sa);
    dqc_cmp_state_free(&sb);
    return rc;
}

} // namespace

int dqc_selftest(dqc_ctx *c)
{
    int rc = s1_gemm_tiles(c);
    if (!rc) rc = s2_one(c, 4, 0, 14, 7, "S2 compressor ratio 4 attention rows");
    if (!rc) rc = s2_one(c, 4, 1, 13, 6, "S2 compressor ratio 4 indexer rows");
    if (!rc) rc = s2_one(c, 128, 0, 259, 60, "S2 compressor ratio 128");
    if (!rc) DQC_CK(c, cudaDeviceSynchronize());
    dqc_scratch_reset(c);
    return rc;
}
