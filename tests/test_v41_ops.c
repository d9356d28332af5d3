/*
 * test_v41_ops.c - the DeepSeek V4.1 operators of oracle/ops41.inc that have
 * no golden of their own, at both widths: the two-level top-k
 * (dsv4q_candidate_blocks, dsv4q_topk41), the V4.1 gate (dsv4q_moe_gate41),
 * the ratio-1/2 compressor with its decode state (dsv4q_compressor41,
 * dsv4q_cmp41_init) and the lagged hyper-connection pair (dsv4q_hc_mixes,
 * dsv4q_hc_collapse). The whole forward pass is test_reference_case_v41's.
 *
 * Semantics: DeepSeek's V4.1 inference/model.py (select_candidate_blocks,
 * the end of Indexer.forward, Gate.forward, Compressor.forward,
 * Block.hc_mixes / hc_pre), as oracle/ops41.inc states them. Where every
 * expected value comes from (never from a run of the code under test):
 *  - top-k rows: worked by hand in the comments (small integers and -inf,
 *    exact at both widths, so f32 and f64 must give the same picks);
 *  - gate: gate_ref, an independent long-double implementation of
 *    Gate.forward written here from the formula, plus hand-worked
 *    selections and the identities each branch implies (renormalised
 *    weights sum to route_scale; k == 1 or norm_topk_prob 0 leave the raw
 *    score times route_scale);
 *  - compressor: pairs worked by hand (equal scores: the exact mean, then
 *    an RMSNorm written as a closed form) and pool_ref / rms_ref, an
 *    independent long-double pooling and RMSNorm, on weights that make
 *    every linear exact (a single 1 per row at ratio 2, small dyadic BF16
 *    values at ratio 1);
 *  - hc: V4's dsv4q_hc_pre (oracle/hc.c's existing implementation of the
 *    same arithmetic: mixes, Sinkhorn, collapse with its own pre) bit for
 *    bit, mixes_ref (a long-double mixes + Sinkhorn from the formula), and
 *    collapses worked by hand.
 * Random inputs come from base/rng.h (splitmix64, fixed seeds).
 * Tolerances for the long-double comparisons: 1e-13 (f64) and 1e-5 (f32)
 * relative to max(1, |expected|); every other comparison is exact.
 */
#include "tests/testutil.h"
#include "base/rng.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "oracle/ops41.h"
#include "oracle/boundary.h"

#define NINF (-INFINITY)

static double tol_of(int w) { return w == 64 ? 1e-13 : 1e-5; }

static void near(int w, double got, long double want, const char *what, long i)
{
    const double err = fabs(got - (double)want), lim = tol_of(w) * fmax(1.0, fabs((double)want));
    if (!(err <= lim))
        printf("f%d %s[%ld]: got %.17g want %.17Lg (err %.3g > %.3g)\n", w, what, i, got, want, err, lim);
    assert_true(err <= lim);
}

/* v [n] as floats (v NULL: n zeros, an output buffer). */
static float *to_f32(const double *v, long n)
{
    float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(f);
    for (long i = 0; i < n; i++) f[i] = v ? (float)v[i] : 0.0f;
    return f;
}

static void from_f32(const float *f, long n, double *v)
{
    for (long i = 0; i < n; i++) v[i] = f[i];
}

/* A uniform value in [lo, hi) from the splitmix64 stream. */
static double unif(uint64_t *st, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(dsv4q_splitmix64(st) >> 11) * 0x1p-53);
}

/* BF16 code of v, which must be exactly representable. */
static uint16_t bf16_exact(double v)
{
    uint16_t c = dsv4q_bf16_encode(v);
    assert_true(dsv4q_bf16_decode(c) == v);
    return c;
}

/* ---- width dispatch: the tests hold doubles; the f32 instance gets them
 * rounded to float (exact for every hand-worked value) and returns floats,
 * which convert back exactly, so bitwise comparisons stay bitwise. ---- */

static int cand(int w, const double *score, long rows, long T, const long *clen, int topb, int B, int32_t *blocks,
                uint8_t *mask)
{
    if (w == 64) return dsv4q_candidate_blocks_f64(score, rows, T, clen, topb, B, blocks, mask);
    float *f = to_f32(score, rows * T);
    int rc = dsv4q_candidate_blocks_f32(f, rows, T, clen, topb, B, blocks, mask);
    free(f);
    return rc;
}

static int topk(int w, const double *score, long rows, long T, int k, const long *clen, int32_t *out)
{
    if (w == 64) return dsv4q_topk41_f64(score, rows, T, k, clen, out);
    float *f = to_f32(score, rows * T);
    int rc = dsv4q_topk41_f32(f, rows, T, k, clen, out);
    free(f);
    return rc;
}

static int gate(int w, const double *x, long s, long d, const dsv4q_weight *W, const double *bias, int n_exp, int k,
                const char *func, double temp, int norm, double rs, double *weights, int32_t *indices)
{
    if (w == 64) return dsv4q_moe_gate41_f64(x, s, d, W, bias, n_exp, k, func, temp, norm, rs, weights, indices);
    float *xf = to_f32(x, s * d), *bf = bias ? to_f32(bias, n_exp) : NULL, *wf = to_f32(NULL, s * k);
    int rc = dsv4q_moe_gate41_f32(xf, s, d, W, bf, n_exp, k, func, temp, norm, rs, wf, indices);
    from_f32(wf, s * k, weights);
    free(xf), free(bf), free(wf);
    return rc;
}

static int hc_pre_w(int w, uint64_t bs, const double *Xs, long s, int hc, long d, const dsv4q_weight *fn,
                    const double *scale, const double *base, double ne, double he, int it, double *y, double *post,
                    double *comb)
{
    if (w == 64) return dsv4q_hc_pre_f64(bs, Xs, s, hc, d, fn, scale, base, ne, he, it, y, post, comb);
    const int nm = (2 + hc) * hc;
    float *xf = to_f32(Xs, s * hc * d), *sf = to_f32(scale, 3), *bf = to_f32(base, nm);
    float *yf = to_f32(NULL, s * d), *pf = to_f32(NULL, s * hc), *cf = to_f32(NULL, s * hc * hc);
    int rc = dsv4q_hc_pre_f32(bs, xf, s, hc, d, fn, sf, bf, ne, he, it, yf, pf, cf);
    from_f32(yf, s * d, y), from_f32(pf, s * hc, post), from_f32(cf, s * hc * hc, comb);
    free(xf), free(sf), free(bf), free(yf), free(pf), free(cf);
    return rc;
}

static int hc_mixes_w(int w, uint64_t bs, const double *Xs, long s, int hc, long d, const dsv4q_weight *fn,
                      const double *scale, const double *base, double ne, double he, int it, double *pre, double *post,
                      double *comb)
{
    if (w == 64) return dsv4q_hc_mixes_f64(bs, Xs, s, hc, d, fn, scale, base, ne, he, it, pre, post, comb);
    const int nm = (2 + hc) * hc;
    float *xf = to_f32(Xs, s * hc * d), *sf = to_f32(scale, 3), *bf = to_f32(base, nm);
    float *rf = to_f32(NULL, s * hc), *pf = to_f32(NULL, s * hc), *cf = to_f32(NULL, s * hc * hc);
    int rc = dsv4q_hc_mixes_f32(bs, xf, s, hc, d, fn, sf, bf, ne, he, it, rf, pf, cf);
    from_f32(rf, s * hc, pre), from_f32(pf, s * hc, post), from_f32(cf, s * hc * hc, comb);
    free(xf), free(sf), free(bf), free(rf), free(pf), free(cf);
    return rc;
}

static void collapse_w(int w, uint64_t bs, const double *Xs, const double *pre, long s, int hc, long d, double *y)
{
    if (w == 64) {
        dsv4q_hc_collapse_f64(bs, Xs, pre, s, hc, d, y);
        return;
    }
    float *xf = to_f32(Xs, s * hc * d), *pf = to_f32(pre, s * hc), *yf = to_f32(NULL, s * d);
    dsv4q_hc_collapse_f32(bs, xf, pf, s, hc, d, yf);
    from_f32(yf, s * d, y);
    free(xf), free(pf), free(yf);
}

/* One compressor at either width; the norm weight lives here. */
typedef struct {
    int w;
    dsv4q_cmp41_f32 c32;
    dsv4q_cmp41_f64 c64;
    float nf[16];
    double nd[16];
} cmpw;

static void cmp_init(cmpw *c, int w, int ratio, int Dc, dsv4q_weight wkv, dsv4q_weight wgate, const double *norm)
{
    assert_true(Dc <= 16);
    c->w = w;
    for (int i = 0; i < Dc; i++) c->nf[i] = (float)norm[i], c->nd[i] = norm[i];
    c->c32 = (dsv4q_cmp41_f32){.ratio = ratio, .Dc = Dc, .wkv = wkv, .wgate = wgate, .norm = c->nf};
    c->c64 = (dsv4q_cmp41_f64){.ratio = ratio, .Dc = Dc, .wkv = wkv, .wgate = wgate, .norm = c->nd};
    assert_int_equal(w == 64 ? dsv4q_cmp41_init_f64(&c->c64) : dsv4q_cmp41_init_f32(&c->c32), 0);
}

static void cmp_free(cmpw *c)
{
    if (c->w == 64) dsv4q_cmp41_free_f64(&c->c64);
    else dsv4q_cmp41_free_f32(&c->c32);
}

/* Feed x [s, dim]; out gets the completed latents [n, Dc]; returns n. */
static long cmp_feed(cmpw *c, uint64_t bs, const double *x, long s, long dim, long p, double eps, double *out)
{
    const int Dc = c->w == 64 ? c->c64.Dc : c->c32.Dc;
    if (c->w == 64) return dsv4q_compressor41_f64(bs, 0, &c->c64, x, s, p, eps, out);
    float *xf = to_f32(x, s * dim), *of = to_f32(NULL, s * Dc);
    long n = dsv4q_compressor41_f32(bs, 0, &c->c32, xf, s, p, eps, of);
    if (n > 0) from_f32(of, n * Dc, out);
    free(xf), free(of);
    return n;
}

/* ======================= level one: candidate blocks ==================== */

static void check_blocks(int w, const double *sc, long rows, long T, const long *clen, int topb, int B,
                         const int32_t *want_b, const uint8_t *want_m)
{
    int32_t blocks[64];
    uint8_t mask[256];
    assert_true(rows * topb <= 64 && rows * T <= 256);
    memset(blocks, 0x55, sizeof blocks); /* poison: every output must be written */
    memset(mask, 0x55, sizeof mask);
    assert_int_equal(cand(w, sc, rows, T, clen, topb, B, blocks, mask), 0);
    for (long i = 0; i < rows * topb; i++) {
        if (blocks[i] != want_b[i]) printf("f%d blocks[%ld] = %d, want %d\n", w, i, blocks[i], want_b[i]);
        assert_int_equal(blocks[i], want_b[i]);
    }
    assert_memory_equal(mask, want_m, (size_t)(rows * T));
}

/* T = 10 positions, B = 4: blocks 0 = [0..3], 1 = [4..7], 2 = [8, 9] plus
 * two -inf pads; topb 2 (< 3 blocks). */
static void candidate_blocks_hand(void **state)
{
    (void)state;
    const double sc[3 * 10] = {/* row 0, clen 10: block maxima 5, 7, 0. The newest position 9 is in
         * block (10-1)/4 = 2, pinned to +inf although its max 0 is the
         * lowest: kept {1 (7), 2 (+inf)}; unpinned it would be {0, 1}. */
                               1, 5, 2, 0, 3, 4, 7, 1, 0, -1,
                               /* row 1, clen 3: positions >= 3 unreachable (-inf). Block 0 holds
         * the newest ((3-1)/4 = 0); blocks 1 and 2 score -inf, so the second
         * pick is -inf and dropped: {0, -1}. The mask covers the whole of
         * block 0 (position 3 included: the reference repeats the block
         * flags over the block). */
                               2, 1, 3, NINF, NINF, NINF, NINF, NINF, NINF, NINF,
                               /* row 2, clen 0: nothing reachable; (0-1)/4 floors to -1 (C's
         * truncation would give 0 and pin block 0): no block, empty mask. */
                               NINF, NINF, NINF, NINF, NINF, NINF, NINF, NINF, NINF, NINF};
    const long clen[3] = {10, 3, 0};
    const int32_t want_b[6] = {1, 2, 0, -1, -1, -1};
    const uint8_t want_m[30] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, /* row 0 */
                                1, 1, 1, 1, 0, 0, 0, 0, 0, 0, /* row 1 */
                                0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int w = 32; w <= 64; w += 32) check_blocks(w, sc, 3, 10, clen, 2, 4, want_b, want_m);
}

static void candidate_blocks_pin_ties_pad(void **state)
{
    (void)state;
    for (int w = 32; w <= 64; w += 32) {
        /* T = 8, B = 4, topb 1, clen 8: maxima 9 and 1; the newest position
         * 7 is in block 7/4 = 1, which is FULL and still pinned: {1}. */
        const double a[8] = {9, 0, 0, 0, 1, 1, 1, 1};
        const long ca = 8;
        const int32_t wa[1] = {1};
        const uint8_t ma[8] = {0, 0, 0, 0, 1, 1, 1, 1};
        check_blocks(w, a, 1, 8, &ca, 1, 4, wa, ma);

        /* T = 12, B = 4, topb 2, clen 12: block 2 pinned; blocks 0 and 1 tie
         * at 4 for the one place left: ties go to the lower block id
         * (oracle/ops41.inc), {0, 2}. Row 2: block 1 at 4.5 beats block 0's
         * 4 (the tie rule is not what picks): {1, 2}. */
        const double b[2 * 12] = {4, 0, 0, 0, 0, 4,   0, 0, 1, 1, 1, 1, /* tie */
                                  4, 0, 0, 0, 0, 4.5, 0, 0, 1, 1, 1, 1};
        const long cb[2] = {12, 12};
        const int32_t wb[4] = {0, 2, 1, 2};
        const uint8_t mb[24] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
        check_blocks(w, b, 2, 12, cb, 2, 4, wb, mb);

        /* topb 5 > 3 blocks (T 10, B 4, clen 10): min(topb, nblocks) = 3
         * are kept, ascending, then -1 pads to topb; every position masked. */
        const double c[10] = {1, 5, 2, 0, 3, 4, 7, 1, 0, -1};
        const long cc = 10;
        const int32_t wc[5] = {0, 1, 2, -1, -1};
        const uint8_t mc[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
        check_blocks(w, c, 1, 10, &cc, 5, 4, wc, mc);
    }
}

/* A prefill at ratio 2 as Indexer.forward builds it: 6 queries, T = 6/2 = 3
 * compressed positions, clen[row] = (row+1)/2 = 0 1 1 2 2 3, scores -inf at
 * t >= clen; B = 2 (blocks [0, 1] and [2] + pad), topb 1. */
static void candidate_blocks_prefill_rows(void **state)
{
    (void)state;
    const double sc[6 * 3] = {
        NINF, NINF, NINF, /* clen 0: no block */
        1,    NINF, NINF, /* clen 1: newest 0 in block 0 */
        -2,   NINF, NINF, /* the same with a negative score */
        8,    3,    NINF, /* clen 2: newest 1 in block 0 */
        3,    8,    NINF, /* the same, the max at 1 */
        9,    9,    -5,   /* clen 3: newest 2 in block 1, pinned over block 0's 9 */
    };
    const long clen[6] = {0, 1, 1, 2, 2, 3};
    const int32_t want_b[6] = {-1, 0, 0, 0, 0, 1};
    const uint8_t want_m[18] = {0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1};
    for (int w = 32; w <= 64; w += 32) check_blocks(w, sc, 6, 3, clen, 1, 2, want_b, want_m);
}

/* ======================= level two: the position picks ================== */

static void check_picks(int w, const double *sc, long rows, long T, int k, const long *clen, const int32_t *want)
{
    int32_t out[128];
    assert_true(rows * k <= 128);
    memset(out, 0x55, sizeof out);
    assert_int_equal(topk(w, sc, rows, T, k, clen, out), 0);
    for (long i = 0; i < rows * k; i++) {
        if (out[i] != want[i]) printf("f%d picks[%ld] = %d, want %d\n", w, i, out[i], want[i]);
        assert_int_equal(out[i], want[i]);
    }
}

/* T = 8, k = 3. */
static void topk41_hand(void **state)
{
    (void)state;
    const double sc[4 * 8] = {/* the 3 largest finite: 7@3, 7@5, 3@1, re-sorted ascending {1, 3, 5} */
                              0.5, 3, -1, 7, 2, 7, NINF, 1,
                              /* 9@3, 5@1, then 2@0 and 2@2 tie for the last place: the lower
         * position wins (oracle/ops41.inc): {0, 1, 3} */
                              2, 5, 2, 9, NINF, NINF, NINF, NINF,
                              /* clen 2 with finite scores beyond it: the top 3 are 9@2, 8@3, 2@1
         * and then 2, 3 >= clen become -1 (last). Position 0 (score 1) is
         * reachable but not among the top 3, so it does NOT fill in: the
         * reference masks after its top-k: {1, -1, -1} */
                              1, 2, 9, 8, NINF, NINF, NINF, NINF,
                              /* fewer finite scores than k: {1, 4, -1} */
                              NINF, 3, NINF, NINF, 1, NINF, NINF, NINF};
    const long clen[4] = {8, 8, 2, 8};
    const int32_t want[12] = {1, 3, 5, 0, 1, 3, 1, -1, -1, 1, 4, -1};
    for (int w = 32; w <= 64; w += 32) check_picks(w, sc, 4, 8, 3, clen, want);
}

/* A ratio-2 prefill of 8 tokens as Indexer.forward has it: T = end_pos / 2 =
 * 4, clen[row] = (row+1)/2 = 0 1 1 2 2 3 3 4 for rows 0..7,
 * scores -inf at t >= clen. k = min(index_topk, end_pos / ratio) is the
 * caller's (oracle/model_v41.c): index_topk 2 gives k = 2; index_topk 8
 * gives k = min(8, 4) = 4, not the per-row reachable count. */
static void topk41_prefill_rows(void **state)
{
    (void)state;
    const double sc[8 * 4] = {
        NINF, NINF, NINF, NINF, /* clen 0 */
        0.25, NINF, NINF, NINF, /* clen 1 */
        -3,   NINF, NINF, NINF, /* clen 1, a negative score is still a pick */
        1,    2,    NINF, NINF, /* clen 2 */
        2,    1,    NINF, NINF, /* clen 2 */
        1,    3,    2,    NINF, /* clen 3: top 2 = 3@1, 2@2 */
        5,    3,    4,    NINF, /* clen 3: top 2 = 5@0, 4@2 */
        0,    4,    1,    3,    /* clen 4: top 2 = 4@1, 3@3 */
    };
    const long clen[8] = {0, 1, 1, 2, 2, 3, 3, 4};
    const long end_pos = 8, ratio = 2;
    const int32_t want2[16] = {-1, -1, 0, -1, 0, -1, 0, 1, 0, 1, 1, 2, 0, 2, 1, 3};
    const int32_t want4[32] = {-1, -1, -1, -1, 0, -1, -1, -1, 0, -1, -1, -1, 0, 1, -1, -1,
                               0,  1,  -1, -1, 0, 1,  2,  -1, 0, 1,  2,  -1, 0, 1, 2,  3};
    for (int w = 32; w <= 64; w += 32) {
        int k = (int)(2 < end_pos / ratio ? 2 : end_pos / ratio);
        assert_int_equal(k, 2);
        check_picks(w, sc, 8, 4, k, clen, want2);
        k = (int)(8 < end_pos / ratio ? 8 : end_pos / ratio);
        assert_int_equal(k, 4);
        check_picks(w, sc, 8, 4, k, clen, want4);
    }
}

/* The two levels together, as oracle/model_v41.c chains them: the candidate
 * source's mask, the consumer's scores set to -inf outside it, then the
 * picks. One decode row: T = clen = 10, B = 4, topb 2. */
static void two_level_topk(void **state)
{
    (void)state;
    /* the source's row: maxima 5, 7, 0 with block 2 pinned -> blocks {1, 2}
     * (positions 4..9), as candidate_blocks_hand's row 0 */
    const double src[10] = {1, 5, 2, 0, 3, 4, 7, 1, 0, -1};
    /* the consumer's own scores prefer block 0 */
    const double con[10] = {9, 9, 9, 9, 1, 5, 2, 3, 4, 0};
    const long clen = 10;
    for (int w = 32; w <= 64; w += 32) {
        int32_t blocks[2];
        uint8_t mask[10];
        assert_int_equal(cand(w, src, 1, 10, &clen, 2, 4, blocks, mask), 0);
        double masked[10];
        for (int t = 0; t < 10; t++) masked[t] = mask[t] ? con[t] : NINF;
        /* k 3 inside the mask: 5@5, 4@8, 3@7 -> {5, 7, 8} */
        const int32_t want3[3] = {5, 7, 8};
        check_picks(w, masked, 1, 10, 3, &clen, want3);
        /* without the mask the four 9s of block 0 tie and the lower
         * positions win: {0, 1, 2} (the mask is what moved the picks) */
        const int32_t raw3[3] = {0, 1, 2};
        check_picks(w, con, 1, 10, 3, &clen, raw3);
        /* k 8 > the 6 candidate positions: the two extra picks would have
         * score -inf below clen, which the reference keeps as two positions
         * torch chooses; the oracle's contract (oracle/ops41.inc) makes them
         * -1, last: {4..9, -1, -1} */
        const int32_t want8[8] = {4, 5, 6, 7, 8, 9, -1, -1};
        check_picks(w, masked, 1, 10, 8, &clen, want8);
    }
}

/* ======================= the V4.1 gate ================================== */

#define GN 6 /* experts */
#define GD 4 /* dim */
/* Gate weight (BF16 in the checkpoint), exact small dyadics, so z = x W^T
 * is exact at both widths. */
static const double GW[GN * GD] = {
    1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0.5, 0.5, 0, 0, -1, 0, 0, 2,
};
/* token 0: z = (1.5, -0.75, 3, 0.25, 0.375, -1); token 1: z = (-2, 48,
 * 0.125, -1, 23, 0). */
static const double GX[2 * GD] = {1.5, -0.75, 3, 0.25, -2, 48, 0.125, -1};
static const double GB[GN] = {0, 0, 0, 0.875, 0, 0}; /* steers token 0 to expert 3 */

/* Gate.forward in long double from the formula (model.py, spec section 10):
 * scores = score_func((x W^T) / gate_temp) (softplus with threshold 20),
 * indices = top-k of scores + bias (strictly greater replaces: ties to the
 * lower id), weights = the unbiased scores, / (sum + 1e-20) when norm and
 * k > 1, * route_scale. */
static void gate_ref(const double *x, long s, const double *bias, int k, const char *func, double temp, int norm,
                     double rs, long double *wts, int32_t *ix)
{
    for (long t = 0; t < s; t++) {
        long double sc[GN];
        for (int e = 0; e < GN; e++) {
            long double z = 0;
            for (int i = 0; i < GD; i++) z += (long double)x[t * GD + i] * GW[e * GD + i];
            z /= temp;
            if (!strcmp(func, "sigmoid")) sc[e] = 1 / (1 + expl(-z));
            else if (!strcmp(func, "softmax")) sc[e] = z;
            else sc[e] = sqrtl(z > 20 ? z : log1pl(expl(z)));
        }
        if (!strcmp(func, "softmax")) {
            long double m = sc[0], sum = 0;
            for (int e = 1; e < GN; e++) m = sc[e] > m ? sc[e] : m;
            for (int e = 0; e < GN; e++) sum += sc[e] = expl(sc[e] - m);
            for (int e = 0; e < GN; e++) sc[e] /= sum;
        }
        int used[GN] = {0};
        long double sum = 0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < GN; e++) {
                if (used[e]) continue;
                long double v = sc[e] + (bias ? bias[e] : 0);
                if (best < 0 || v > sc[best] + (bias ? bias[best] : 0)) best = e;
            }
            used[best] = 1;
            ix[t * k + j] = best;
            sum += wts[t * k + j] = sc[best];
        }
        for (int j = 0; j < k; j++) {
            if (norm && k > 1) wts[t * k + j] /= sum + 1e-20L;
            wts[t * k + j] *= rs;
        }
    }
}

static dsv4q_weight gate_weight(uint16_t *codes)
{
    for (int i = 0; i < GN * GD; i++) codes[i] = bf16_exact(GW[i]);
    return (dsv4q_weight){"gate.weight", DSV4Q_WF_BF16, GN, GD, codes, NULL, DSV4Q_DT_INVALID, 0};
}

/* Runs the gate at width w and compares it with gate_ref; returns the
 * weights [2, k] and indices for further checks. */
static void gate_vs_ref(int w, const dsv4q_weight *W, const double *bias, int k, const char *func, double temp,
                        int norm, double rs, double *wts, int32_t *ix)
{
    long double rw[2 * 4];
    int32_t ri[2 * 4];
    gate_ref(GX, 2, bias, k, func, temp, norm, rs, rw, ri);
    assert_int_equal(gate(w, GX, 2, GD, W, bias, GN, k, func, temp, norm, rs, wts, ix), 0);
    for (int i = 0; i < 2 * k; i++) {
        assert_int_equal(ix[i], ri[i]);
        near(w, wts[i], rw[i], func, i);
    }
}

static void moe_gate41_branches(void **state)
{
    (void)state;
    uint16_t codes[GN * GD];
    const dsv4q_weight W = gate_weight(codes);
    const double rs = 1.5;
    for (int w = 32; w <= 64; w += 32) {
        double a[4], b[8], c[2];
        int32_t ia[4], ib[8], ic[2];
        /* sqrtsoftplus, gate_temp 2 (z/2 exact), bias, k 2, norm.
         * Token 0: z/2 = (.75, -.375, 1.5, .125, .1875, -.5); sqrt(softplus)
         * is increasing, so by score e2 > e0 > e4 > e3; with e3's bias .875:
         * sqrt(log1p(e^.125)) + .875 ~ .871 + .875 = 1.746 beats e2's
         * sqrt(log1p(e^1.5)) ~ 1.304 and e0's ~ 1.064: picks (3, 2).
         * Token 1: z/2 = (-1, 24, .0625, -.5, 11.5, 0): e1 takes the
         * threshold branch (24 > 20: sqrt(24) ~ 4.90), then e4 ~ 3.39, e3
         * ~ .688 + .875 = 1.56: picks (1, 4). */
        gate_vs_ref(w, &W, GB, 2, "sqrtsoftplus", 2.0, 1, rs, a, ia);
        const int32_t want_ia[4] = {3, 2, 1, 4};
        assert_memory_equal(ia, want_ia, sizeof ia);
        /* renormalised: each token's weights sum to route_scale */
        near(w, a[0] + a[1], rs, "sum", 0);
        near(w, a[2] + a[3], rs, "sum", 1);
        /* the weights are the UNBIASED scores: e3's share is below e2's
         * although the bias ranked it first */
        assert_true(a[0] < a[1]);

        /* norm_topk_prob 0: the raw scores times route_scale; the ratio to
         * the renormalised weights is the sum of the two scores */
        gate_vs_ref(w, &W, GB, 2, "sqrtsoftplus", 2.0, 0, rs, b, ib);
        assert_memory_equal(ib, ia, sizeof ia);
        const double s0 = sqrt(log1p(exp(0.125))) + sqrt(log1p(exp(1.5)));
        near(w, b[0] / a[0], s0, "ratio", 0);
        near(w, b[1] / a[1], s0, "ratio", 1);
        near(w, b[2], rs * sqrt(24.0), "threshold", 2); /* 24 > 20: softplus(z) = z */
        assert_true(fabs(b[0] + b[1] - rs) > 0.5);      /* not renormalised */

        /* k 1: no renorm even with norm_topk_prob (a renorm would give
         * exactly route_scale): the weight is the chosen score * 1.5 */
        gate_vs_ref(w, &W, GB, 1, "sqrtsoftplus", 2.0, 1, rs, c, ic);
        assert_int_equal(ic[0], 3);
        assert_int_equal(ic[1], 1);
        near(w, c[0], rs * sqrt(log1p(exp(0.125))), "k1", 0);
        near(w, c[1], rs * sqrt(24.0), "k1", 1);
        assert_true(fabs(c[0] - rs) > 0.1);

        /* no bias: token 0 picks by the raw scores, (2, 0) */
        gate_vs_ref(w, &W, NULL, 2, "sqrtsoftplus", 2.0, 1, rs, b, ib);
        assert_int_equal(ib[0], 2);
        assert_int_equal(ib[1], 0);

        /* gate_temp 1 vs 2 moves the scores (z/temp before the score).
         * Token 0 at temp 1: e3 ~ sqrt(softplus(.25)) + .875 = 1.784 still
         * leads e2 = sqrt(softplus(3)) ~ 1.746, and e2's raw weight is
         * 1.5 sqrt(log1p(e^3)), not the temp-2 1.5 sqrt(log1p(e^1.5)). */
        gate_vs_ref(w, &W, GB, 2, "sqrtsoftplus", 1.0, 0, rs, b, ib);
        assert_true(fabs(b[1] - rs * sqrt(log1p(exp(3.0)))) < 1e-5 * rs);
        assert_true(fabs(b[1] - a[1]) > 0.1);

        /* softmax is renormalised too in V4.1 (k > 1 and norm): sums to 1.5 */
        gate_vs_ref(w, &W, GB, 2, "softmax", 2.0, 1, rs, b, ib);
        near(w, b[0] + b[1], rs, "softmax sum", 0);
        near(w, b[2] + b[3], rs, "softmax sum", 1);
        gate_vs_ref(w, &W, GB, 3, "sigmoid", 1.5, 1, rs, b, ib);
        gate_vs_ref(w, &W, GB, 2, "sigmoid", 1.5, 0, 1.0, b, ib);
    }
}

/* ======================= the compressor ================================= */

#define CD 4 /* dim = Dc = 4 */
static const double CNORM[CD] = {1, 0.5, 2, 1.5};
static const float EYE[CD * CD] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
/* score_j = x_{(j+1)%4}: one 1 per row, so the gate linear is exact */
static const float SHIFT[CD * CD] = {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0};
static const float ZERO[CD * CD] = {0};

static dsv4q_weight f32w(const char *name, const float *data)
{
    return (dsv4q_weight){name, DSV4Q_WF_F32, CD, CD, data, NULL, DSV4Q_DT_INVALID, 0};
}

/* RMSNorm in long double: y = w * v / sqrt(mean(v^2) + eps). */
static void rms_ref(const long double *v, double eps, long double *y)
{
    long double ss = 0;
    for (int j = 0; j < CD; j++) ss += v[j] * v[j];
    const long double r = 1 / sqrtl(ss / CD + eps);
    for (int j = 0; j < CD; j++) y[j] = CNORM[j] * (v[j] * r);
}

/* One pooled group, long double: per feature j, sum_t kv_t * softmax_t(g_t)
 * over the two tokens a, b (kv = x, the wkv being EYE; g from gate, SHIFT or
 * ZERO), then rms_ref. xa NULL: kv 0 and score -inf (a fresh state slot). */
static void pool_ref(const double *xa, const double *xb, const float *gate_w, double eps, long double *y)
{
    long double v[CD];
    for (int j = 0; j < CD; j++) {
        long double ga = 0, gb = 0;
        for (int i = 0; i < CD; i++) {
            ga += (long double)gate_w[j * CD + i] * (xa ? xa[i] : 0);
            gb += (long double)gate_w[j * CD + i] * xb[i];
        }
        if (!xa) ga = -INFINITY;
        const long double m = ga > gb ? ga : gb, ea = expl(ga - m), eb = expl(gb - m);
        v[j] = (xa ? xa[j] : 0) * (ea / (ea + eb)) + xb[j] * (eb / (ea + eb));
    }
    rms_ref(v, eps, y);
}

static void near_row(int w, const double *got, const long double *want, const char *what)
{
    for (int j = 0; j < CD; j++) near(w, got[j], want[j], what, j);
}

/* Ratio 2 with equal scores (wgate 0: score 0, softmax exactly 1/2 each),
 * worked by hand; and the cmp_bf16 cast between the pooling and the norm. */
static void compressor41_ratio2_hand(void **state)
{
    (void)state;
    const double eps = 1e-20;
    /* kv0 = (2, 1, -3, 1), kv1 = (4, -1, -5, 1 + 2^-8): pooled = the mean =
     * (3, 0, -4, 1 + 2^-9) exactly. */
    const double x[2 * CD] = {2, 1, -3, 1, 4, -1, -5, 1 + 0x1p-8};
    for (int w = 32; w <= 64; w += 32) {
        double out[2 * CD], outc[2 * CD];
        for (int bf = 0; bf < 2; bf++) {
            cmpw c;
            cmp_init(&c, w, 2, CD, f32w("wkv", EYE), f32w("wgate", ZERO), CNORM);
            const uint64_t bs = bf ? 1ull << DSV4Q_B_CMP_BF16 : 0;
            assert_int_equal(cmp_feed(&c, bs, x, 2, CD, 0, eps, bf ? outc : out), 1);
            cmp_free(&c);
        }
        /* bs 0: the norm of (3, 0, -4, 1 + 2^-9): mean square (25 + (1 +
         * 2^-9)^2) / 4 */
        const long double q = 1 + 0x1p-9L, ms = (25 + q * q) / 4;
        const long double want[CD] = {3 / sqrtl(ms), 0, 2 * -4 / sqrtl(ms), 1.5L * q / sqrtl(ms)};
        near_row(w, out, want, "pooled");
        /* cmp_bf16: 1 + 2^-9 is a quarter BF16 ulp (2^-7) above 1 and rounds
         * to 1, so the norm sees (3, 0, -4, 1): mean square 26/4 = 6.5,
         * y = (3, 0, -4 * 2, 1 * 1.5) / sqrt(6.5) = (1.17670, 0, -3.13786,
         * 0.58835) */
        const long double wantc[CD] = {3 / sqrtl(6.5L), 0, -8 / sqrtl(6.5L), 1.5L / sqrtl(6.5L)};
        near_row(w, outc, wantc, "pooled bf16");
        assert_true(fabs(out[0] - outc[0]) > 5e-5); /* the cast moved the row */
    }
}

static void compressor41_ratio2_state(void **state)
{
    (void)state;
    const double eps = 1e-20;
    double x[8 * CD];
    uint64_t st = dsv4q_fnv1a64("test_v41_ops compressor41");
    for (int i = 0; i < 8 * CD; i++) x[i] = ldexp(round(unif(&st, -64, 64)), -4); /* k/16: exact at f32 */
    for (int w = 32; w <= 64; w += 32) {
        long double want[4][CD];
        for (int g = 0; g < 4; g++) pool_ref(x + 2 * g * CD, x + (2 * g + 1) * CD, SHIFT, eps, want[g]);
        double out[8 * CD];
        cmpw c;
        cmp_init(&c, w, 2, CD, f32w("wkv", EYE), f32w("wgate", SHIFT), CNORM);
        /* a fresh state is kv 0, score -inf */
        for (int i = 0; i < 2 * CD; i++) {
            assert_true(w == 64 ? c.c64.kv[i] == 0 : c.c32.kv[i] == 0);
            assert_true(w == 64 ? c.c64.score[i] == NINF : c.c32.score[i] == NINF);
        }
        /* prefill of 5 tokens: the pairs (0,1), (2,3); token 4 waits */
        assert_int_equal(cmp_feed(&c, 0, x, 5, CD, 0, eps, out), 2);
        near_row(w, out, want[0], "prefill g0");
        near_row(w, out + CD, want[1], "prefill g1");
        /* decode p 5 fills slot 1 and pools (4, 5) */
        assert_int_equal(cmp_feed(&c, 0, x + 5 * CD, 1, CD, 5, eps, out), 1);
        near_row(w, out, want[2], "decode g2");
        /* p 6: slot 0, nothing yet; p 7: pools (6, 7) */
        assert_int_equal(cmp_feed(&c, 0, x + 6 * CD, 1, CD, 6, eps, out), 0);
        assert_int_equal(cmp_feed(&c, 0, x + 7 * CD, 1, CD, 7, eps, out), 1);
        near_row(w, out, want[3], "decode g3");
        cmp_free(&c);

        /* one token per call from p 0 (p 0 is a prefill of 1 < ratio: no
         * row, the token waits): rows at p 1, 3, 5, 7 only */
        cmp_init(&c, w, 2, CD, f32w("wkv", EYE), f32w("wgate", SHIFT), CNORM);
        for (int p = 0; p < 8; p++) {
            long n = cmp_feed(&c, 0, x + p * CD, 1, CD, p, eps, out);
            assert_int_equal(n, p % 2);
            if (n) near_row(w, out, want[p / 2], "token by token");
        }
        cmp_free(&c);

        /* a decode at p 1 on a FRESH state: slot 0 still has score -inf, its
         * softmax weight exp(-inf) = 0, so the row is norm(kv of token 1) */
        long double solo[CD];
        pool_ref(NULL, x + CD, SHIFT, eps, solo);
        cmp_init(&c, w, 2, CD, f32w("wkv", EYE), f32w("wgate", SHIFT), CNORM);
        assert_int_equal(cmp_feed(&c, 0, x + CD, 1, CD, 1, eps, out), 1);
        near_row(w, out, solo, "fresh slot");
        cmp_free(&c);
    }
}

/* Ratio 1: latent[t] = norm(wkv x[t]) for every token of every call (BF16
 * wkv, no gate, no state). */
static void compressor41_ratio1(void **state)
{
    (void)state;
    const double eps = 1e-20;
    const double wv[CD * CD] = {1, 0.5, 0, -2, 0, 1, 0.25, 0, -1, 0, 2, 0.5, 0.5, 0.5, 0.5, 0.5};
    uint16_t codes[CD * CD];
    for (int i = 0; i < CD * CD; i++) codes[i] = bf16_exact(wv[i]);
    const dsv4q_weight W = {"wkv", DSV4Q_WF_BF16, CD, CD, codes, NULL, DSV4Q_DT_INVALID, 0};
    const double x[3 * CD] = {1, 2, 3, 4, -0.5, 0.25, 8, -1, 0, 0, 1, 0};
    /* token 0 by hand: wkv x = (1 + 1 - 8, 2 + .75, -1 + 6 + 2, 5) = (-6,
     * 2.75, 7, 5); mean square (36 + 7.5625 + 49 + 25) / 4 = 29.390625 */
    long double want[3][CD];
    for (int t = 0; t < 3; t++) {
        long double v[CD];
        for (int j = 0; j < CD; j++) {
            v[j] = 0;
            for (int i = 0; i < CD; i++) v[j] += (long double)wv[j * CD + i] * x[t * CD + i];
        }
        rms_ref(v, eps, want[t]);
    }
    const long double r0 = sqrtl(29.390625L);
    assert_true(fabsl(want[0][0] - -6 / r0) < 1e-15L && fabsl(want[0][3] - 1.5L * 5 / r0) < 1e-15L);
    for (int w = 32; w <= 64; w += 32) {
        double out[3 * CD];
        cmpw c;
        cmp_init(&c, w, 1, CD, W, (dsv4q_weight){0}, CNORM);
        assert_null(w == 64 ? (void *)c.c64.kv : (void *)c.c32.kv); /* no state at ratio 1 */
        assert_int_equal(cmp_feed(&c, 0, x, 3, CD, 0, eps, out), 3);
        for (int t = 0; t < 3; t++) near_row(w, out + t * CD, want[t], "ratio 1");
        /* a decode call yields its row too */
        assert_int_equal(cmp_feed(&c, 0, x + CD, 1, CD, 7, eps, out), 1);
        near_row(w, out, want[1], "ratio 1 decode");
        cmp_free(&c);
    }
}

/* ======================= lagged hyper-connections ======================= */

#define HC 4
#define HD 13 /* hc*d = 52: the 8-lane dots have a tail */
#define HS 3
#define NMIX ((2 + HC) * HC)

typedef struct {
    double X[HS * HC * HD], scale[3], base[NMIX];
    float fn[NMIX * HC * HD];
    dsv4q_weight W;
} hc_case;

static void hc_make(hc_case *c, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < HS * HC * HD; i++) c->X[i] = unif(&st, -2, 2);
    for (int i = 0; i < NMIX * HC * HD; i++) c->fn[i] = (float)unif(&st, -0.5, 0.5);
    for (int i = 0; i < 3; i++) c->scale[i] = unif(&st, 0.5, 1.5);
    for (int i = 0; i < NMIX; i++) c->base[i] = unif(&st, -1, 1);
    c->W = (dsv4q_weight){"hc_fn", DSV4Q_WF_F32, NMIX, HC * HD, c->fn, NULL, DSV4Q_DT_INVALID, 0};
}

/* hc_mixes + hc_collapse(own pre) == V4's hc_pre, bit for bit (post and comb
 * too), at both widths, with and without the resid_bf16 storage cast. */
static void hc_pair_equals_hc_pre(void **state)
{
    (void)state;
    const double ne = 1e-20, he = 1e-6;
    const int iters = 20;
    for (int w = 32; w <= 64; w += 32)
        for (int trial = 0; trial < 3; trial++)
            for (int bf = 0; bf < 2; bf++) {
                hc_case c;
                hc_make(&c, dsv4q_fnv1a64("test_v41_ops hc") + (uint64_t)trial);
                const uint64_t bs = bf ? 1ull << DSV4Q_B_RESID_BF16 : 0;
                double y[HS * HD], post[HS * HC], comb[HS * HC * HC];
                double pre2[HS * HC], y2[HS * HD], post2[HS * HC], comb2[HS * HC * HC];
                assert_int_equal(hc_pre_w(w, bs, c.X, HS, HC, HD, &c.W, c.scale, c.base, ne, he, iters, y, post, comb),
                                 0);
                assert_int_equal(
                    hc_mixes_w(w, bs, c.X, HS, HC, HD, &c.W, c.scale, c.base, ne, he, iters, pre2, post2, comb2), 0);
                collapse_w(w, bs, c.X, pre2, HS, HC, HD, y2);
                assert_memory_equal(y, y2, sizeof y);
                assert_memory_equal(post, post2, sizeof post);
                assert_memory_equal(comb, comb2, sizeof comb);
            }
}

/* Block.hc_mixes + hc_split_sinkhorn in long double from the formula (spec
 * section 6): mixes = (fn X) * rsqrt(mean(X^2) + norm_eps); pre_j =
 * sigmoid(m_j s0 + b_j) + hc_eps; post_j = 2 sigmoid(m_{hc+j} s1 +
 * b_{hc+j}); comb = row softmax + hc_eps, / (col sums + hc_eps), then
 * iters-1 times rows / (row sum + hc_eps), cols / (col sum + hc_eps). */
static void mixes_ref(const hc_case *c, long t, double ne, double he, int iters, long double *pre, long double *post,
                      long double *comb)
{
    const double *X = c->X + t * HC * HD;
    long double ss = 0, m[NMIX];
    for (int i = 0; i < HC * HD; i++) ss += (long double)X[i] * X[i];
    const long double r = 1 / sqrtl(ss / (HC * HD) + ne);
    for (int o = 0; o < NMIX; o++) {
        long double a = 0;
        for (int i = 0; i < HC * HD; i++) a += (long double)c->fn[o * HC * HD + i] * X[i];
        m[o] = a * r;
    }
    for (int j = 0; j < HC; j++) {
        pre[j] = 1 / (1 + expl(-(m[j] * c->scale[0] + c->base[j]))) + he;
        post[j] = 2 / (1 + expl(-(m[HC + j] * c->scale[1] + c->base[HC + j])));
    }
    for (int j = 0; j < HC; j++) {
        long double mx = -INFINITY, sum = 0, *row = comb + j * HC;
        for (int k = 0; k < HC; k++) {
            row[k] = m[2 * HC + j * HC + k] * c->scale[2] + c->base[2 * HC + j * HC + k];
            mx = row[k] > mx ? row[k] : mx;
        }
        for (int k = 0; k < HC; k++) sum += row[k] = expl(row[k] - mx);
        for (int k = 0; k < HC; k++) row[k] = row[k] / sum + he;
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int j = 0; j < HC; j++) {
                long double s = 0;
                for (int k = 0; k < HC; k++) s += comb[j * HC + k];
                for (int k = 0; k < HC; k++) comb[j * HC + k] /= s + he;
            }
        for (int k = 0; k < HC; k++) {
            long double s = 0;
            for (int j = 0; j < HC; j++) s += comb[j * HC + k];
            for (int j = 0; j < HC; j++) comb[j * HC + k] /= s + he;
        }
    }
}

static void hc_mixes_long_double(void **state)
{
    (void)state;
    const double ne = 1e-20, he = 1e-6;
    const int iters = 20;
    hc_case c;
    hc_make(&c, dsv4q_fnv1a64("test_v41_ops hc mixes"));
    for (int w = 32; w <= 64; w += 32) {
        double pre[HS * HC], post[HS * HC], comb[HS * HC * HC];
        double X[HS * HC * HD];
        /* the f32 instance sees X rounded to float: so does the reference */
        for (int i = 0; i < HS * HC * HD; i++) X[i] = w == 64 ? c.X[i] : (double)(float)c.X[i];
        hc_case cr = c;
        memcpy(cr.X, X, sizeof X);
        for (int i = 0; i < 3; i++) cr.scale[i] = w == 64 ? c.scale[i] : (double)(float)c.scale[i];
        for (int i = 0; i < NMIX; i++) cr.base[i] = w == 64 ? c.base[i] : (double)(float)c.base[i];
        assert_int_equal(hc_mixes_w(w, 0, X, HS, HC, HD, &c.W, c.scale, c.base, ne, he, iters, pre, post, comb), 0);
        for (long t = 0; t < HS; t++) {
            long double rp[HC], rq[HC], rc[HC * HC];
            mixes_ref(&cr, t, ne, he, iters, rp, rq, rc);
            for (int j = 0; j < HC; j++) near(w, pre[t * HC + j], rp[j], "pre", t * HC + j);
            for (int j = 0; j < HC; j++) near(w, post[t * HC + j], rq[j], "post", t * HC + j);
            for (int j = 0; j < HC * HC; j++) near(w, comb[t * HC * HC + j], rc[j], "comb", t * HC * HC + j);
        }
    }
}

/* hc_collapse with a hand-given pre: y = sum_c pre_c * x_c. */
static void hc_collapse_hand(void **state)
{
    (void)state;
    /* hc 2, d 3, two tokens, each with its own pre:
     * token 0: (1, 2, -4) * .25 + (.5, -1, 8) * 2 = (1.25, -1.5, 15);
     * token 1: pre (1, 0), the identity pre-mix in front of layer 0, gives
     * copy 0 itself: (3, -1, .5). All BF16-exact, so resid_bf16 keeps them. */
    const double X[2 * 2 * 3] = {1, 2, -4, 0.5, -1, 8, 3, -1, 0.5, 1, 1, 1};
    const double pre[2 * 2] = {0.25, 2, 1, 0};
    const double want[2 * 3] = {1.25, -1.5, 15, 3, -1, 0.5};
    /* the cast: (1) + (2^-9) = 1 + 2^-9 unrounded; at resid_bf16 a quarter
     * ulp above 1, so 1 */
    const double X1[2] = {1, 0x1p-9}, pre1[2] = {1, 1};
    /* the order, hc 4, pre all 1, x = (1, 2^-24, 2^-24, -1): in j order at
     * binary32 1 + 2^-24 ties to even (1), again 1, then 0; at f64 every
     * step is exact: 2^-23. (Any other order could keep 2^-23 at f32.) */
    const double X4[4] = {1, 0x1p-24, 0x1p-24, -1}, pre4[4] = {1, 1, 1, 1};
    for (int w = 32; w <= 64; w += 32)
        for (int bf = 0; bf < 2; bf++) {
            const uint64_t bs = bf ? 1ull << DSV4Q_B_RESID_BF16 : 0;
            double y[6], y1, y4;
            collapse_w(w, bs, X, pre, 2, 2, 3, y);
            for (int i = 0; i < 6; i++) assert_true(y[i] == want[i]);
            collapse_w(w, bs, X1, pre1, 1, 2, 1, &y1);
            assert_true(y1 == (bf ? 1.0 : 1 + 0x1p-9));
            collapse_w(w, 0, X4, pre4, 1, 4, 1, &y4);
            assert_true(y4 == (w == 32 ? 0.0 : 0x1p-23));
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(candidate_blocks_hand),
        cmocka_unit_test(candidate_blocks_pin_ties_pad),
        cmocka_unit_test(candidate_blocks_prefill_rows),
        cmocka_unit_test(topk41_hand),
        cmocka_unit_test(topk41_prefill_rows),
        cmocka_unit_test(two_level_topk),
        cmocka_unit_test(moe_gate41_branches),
        cmocka_unit_test(compressor41_ratio2_hand),
        cmocka_unit_test(compressor41_ratio2_state),
        cmocka_unit_test(compressor41_ratio1),
        cmocka_unit_test(hc_pair_equals_hc_pre),
        cmocka_unit_test(hc_mixes_long_double),
        cmocka_unit_test(hc_collapse_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
