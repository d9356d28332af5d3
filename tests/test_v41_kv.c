/*
 * test_v41_kv.c - the V4.1 compressed-KV codec (oracle/kv41.c: E2M1 values
 * with one E4M3 scale per 16, the reference's fp4_act_quant(latent, 16,
 * True, scale_dtype=torch.float8_e4m3fn)), at both widths.
 *
 * Expected values are (a) blocks worked by hand in the comments and (b)
 * brute-force searches written here from the format definitions alone
 * (E4M3fn: code = s.eeee.mmm, value m/8 * 2^-6 for e = 0, (1 + m/8) *
 * 2^(e-7) otherwise, 0x7F NaN; E2M1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}):
 * nearest representable value by exhaustive search, ties to the even code.
 * Nothing is compared with the code under test's own helpers.
 */
#include "tests/testutil.h"
#include "oracle/formats.h"
#include "oracle/ops41.h"

static const double E2M1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

static double e4m3_value(int c)   /* positive codes 0x00..0x7E */
{
    int e = (c >> 3) & 15, m = c & 7;
    return e == 0 ? m / 8.0 * ldexp(1.0, -6) : (1 + m / 8.0) * ldexp(1.0, e - 7);
}

/* Nearest positive finite E4M3 code to q >= 0, ties to the even code;
 * above the largest value: 0x7E (saturation). */
static int brute_e4m3(double q)
{
    int best = 0;
    for (int c = 1; c <= 0x7E; c++) {
        double d = fabs(e4m3_value(c) - q), db = fabs(e4m3_value(best) - q);
        if (d < db || (d == db && (c & 1) == 0)) best = c;
    }
    return best;
}

/* Nearest E2M1 magnitude index to |v| <= 6, ties to the even index. */
static int brute_e2m1(double a)
{
    int best = 0;
    for (int i = 1; i < 8; i++) {
        double d = fabs(E2M1[i] - a), db = fabs(E2M1[best] - a);
        if (d < db || (d == db && (i & 1) == 0)) best = i;
    }
    return best;
}

/* ---------------------------------------------------------------------- */
/* hand-worked blocks                                                      */

typedef struct { double x[16], want[16]; int scale_code; } hblock;

static void check_hand(const hblock *b)
{
    float xf[16];
    double xd[16];
    for (int i = 0; i < 16; i++) xf[i] = (float)(xd[i] = b->x[i]);
    uint8_t packed[8], sc;
    dsv4q_kv41_encode_f64(xd, 16, packed, &sc);
    assert_int_equal(sc, b->scale_code);
    dsv4q_kv41_encode_f32(xf, 16, packed, &sc);
    assert_int_equal(sc, b->scale_code);
    dsv4q_kv41_quant_f64(xd, 1, 16);
    dsv4q_kv41_quant_f32(xf, 1, 16);
    for (int i = 0; i < 16; i++) {
        if (xd[i] != b->want[i]) printf("element %d: %.9g, want %.9g\n", i, xd[i], b->want[i]);
        assert_true(xd[i] == b->want[i]);
        assert_true((double)xf[i] == b->want[i]);
    }
}

static void hand_blocks(void **state)
{
    (void)state;
    /* A. amax 3 -> a/6 = 0.5 exactly = E4M3 0x30 (e=6, m=0); x/s = 2, -4,
     *    6, 1: all on the grid, so the block comes back unchanged. */
    hblock a = {{1, -2, 3, 0.5}, {1, -2, 3, 0.5}, 0x30};
    check_hand(&a);
    /* B. amax 6.375 -> a/6 = 1.0625, halfway between 1.0 (0x38) and 1.125
     *    (0x39): ties to even -> s = 1.0. Then x/s = x: 6.375 saturates to
     *    6 (the block maximum does NOT come back); the E2M1 ties: 2.5 -> 2,
     *    0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 3.5 -> 4, 5 -> 4,
     *    -2.5 -> -2; 0.3 -> 0.5. */
    hblock b = {{6.375, 2.5, 0.25, 0.75, 1.25, 1.75, 3.5, 5, -2.5, 0.3},
                {6, 2, 0, 1, 1, 2, 4, 4, -2, 0.5}, 0x38};
    check_hand(&b);
    /* C. amax 7.125 -> a/6 = 1.1875, halfway between 1.125 (0x39, odd) and
     *    1.25 (0x3A): -> s = 1.25. 7.125/1.25 = 5.7 -> 6 -> 7.5 (above the
     *    input); 1.0/1.25 = 0.8 -> 1 -> 1.25; 3.125/1.25 = 2.5 -> tie -> 2
     *    -> 2.5. */
    hblock c = {{7.125, 1.0, 3.125}, {7.5, 1.25, 2.5}, 0x3A};
    check_hand(&c);
    /* D. all zero: amax floored at 6*2^-9 -> a/6 = 2^-9 = E4M3 0x01 (the
     *    smallest subnormal); every value stays 0 (no division by zero). */
    hblock d = {{0}, {0}, 0x01};
    check_hand(&d);
    /* E. tiny amax 2^-10 (below the floor 0.01171875): s = 2^-9; 2^-10 / 2^-9
     *    = 0.5 -> 0.5 -> 2^-10 comes back; 2^-12 / 2^-9 = 0.125 -> 0. */
    hblock e = {{ldexp(1, -10), ldexp(1, -12)}, {ldexp(1, -10), 0}, 0x01};
    check_hand(&e);
    /* F. amax 3072 -> a/6 = 512 > 448: saturates to 448 (0x7E); 3072/448 =
     *    6.857 -> clamp 6 -> 2688; 1000/448 = 2.232 -> 2 -> 896. */
    hblock f = {{3072, 1000}, {2688, 896}, 0x7E};
    check_hand(&f);
    /* G. a subnormal scale: amax 2^-5 -> a/6 = 0.005208 = 2.667 * 2^-9 ->
     *    nearest subnormal m = 3 (0x03): s = 3*2^-9 = 0.005859375;
     *    2^-5 / s = 16/3 = 5.33 -> 6 (|6-5.33| < |4-5.33|) -> 18*2^-9 =
     *    0.03515625; -2^-7 / s = -4/3 -> -1.5 (1.333 is nearer 1.5 than 1)
     *    -> -4.5*2^-9 = -0.0087890625. */
    hblock g = {{ldexp(1, -5), -ldexp(1, -7)}, {0.03515625, -0.0087890625}, 0x03};
    check_hand(&g);
}

/* ---------------------------------------------------------------------- */
/* exhaustive checks against brute force                                  */

/* The scale of every BF16 amax (every finite non-negative code), both
 * widths: floor, RNE onto E4M3 with ties to even, saturation. */
static void scale_exhaustive(void **state)
{
    (void)state;
    long n = 0;
    for (uint32_t c = 0; c < 0x7F80; c++) {   /* +0 .. largest finite BF16 */
        const double amax = dsv4q_bf16_decode((uint16_t)c);
        const double a = amax < 6.0 / 512 ? 6.0 / 512 : amax;
        assert_int_equal(dsv4q_kv41_scale_f64(amax), brute_e4m3(a / 6));
        const float af = (float)a / 6.0f;
        assert_int_equal(dsv4q_kv41_scale_f32((float)amax), brute_e4m3((double)af));
        n++;
    }
    printf("kv41 scale: %ld BF16 amax values x 2 widths equal to brute force\n", n);
}

/* Every element rule: for each BF16 block maximum A from 2^-8 to 4096, the
 * block [A, x_1..x_15] for every BF16 x with |x| <= A (both signs), 15 at a
 * time; expected = brute-force E2M1 of clamp(x/s) times s, s the
 * brute-force scale of A. */
static void elements_exhaustive(void **state)
{
    (void)state;
    long blocks = 0, elems = 0;
    for (uint32_t ca = 0x3B80; ca <= 0x4580; ca += 7) {   /* 2^-8 .. 4096, every seventh code */
        const double A = dsv4q_bf16_decode((uint16_t)ca);
        const double s = e4m3_value(brute_e4m3((A < 6.0 / 512 ? 6.0 / 512 : A) / 6));
        double xd[16], want[16];
        float xf[16];
        int k = 1;
        xd[0] = A;
        for (uint32_t cx = 0; cx <= ca; cx++)
            for (int sg = 0; sg < 2; sg++) {
                xd[k++] = dsv4q_bf16_decode((uint16_t)(cx | (sg ? 0x8000u : 0)));
                if (k < 16 && !(cx == ca && sg == 1)) continue;
                for (int i = k; i < 16; i++) xd[i] = 0;
                for (int i = 0; i < 16; i++) {
                    double v = xd[i] / s;
                    v = v > 6 ? 6 : (v < -6 ? -6 : v);
                    want[i] = (v < 0 ? -1 : 1) * E2M1[brute_e2m1(fabs(v))] * s;
                    xf[i] = (float)xd[i];
                }
                double qd[16];
                memcpy(qd, xd, sizeof qd);
                dsv4q_kv41_quant_f64(qd, 1, 16);
                dsv4q_kv41_quant_f32(xf, 1, 16);
                for (int i = 0; i < 16; i++) {
                    /* x/s at f32 can differ from x/s at f64 only off a tie;
                     * on BF16 inputs and E4M3 scales both land on the same
                     * E2M1 point, so one expectation serves both widths */
                    if (qd[i] != want[i] || (double)xf[i] != want[i])
                        printf("A=%g x=%g: f64 %g f32 %g want %g\n", A, xd[i], qd[i], (double)xf[i], want[i]);
                    assert_true(qd[i] == want[i]);
                    assert_true((double)xf[i] == want[i]);
                }
                blocks++;
                elems += 16;
                k = 1;
            }
    }
    printf("kv41 elements: %ld blocks, %ld values x 2 widths equal to brute force\n", blocks, elems);
}

/* Decode of every packed byte under every finite scale, against the
 * format tables written above; encode -> decode == the in-place rule. */
static void decode_exhaustive(void **state)
{
    (void)state;
    for (int sc = 0; sc <= 0x7E; sc++)
        for (int b = 0; b < 256; b++) {
            uint8_t packed[8], scales[1] = {(uint8_t)sc};
            memset(packed, b, sizeof packed);
            double y[16];
            float yf[16];
            dsv4q_kv41_decode_f64(packed, scales, 16, y);
            dsv4q_kv41_decode_f32(packed, scales, 16, yf);
            const double lo = ((b & 8) ? -1 : 1) * E2M1[b & 7] * e4m3_value(sc);
            const double hi = ((b & 0x80) ? -1 : 1) * E2M1[(b >> 4) & 7] * e4m3_value(sc);
            for (int i = 0; i < 16; i++) {
                assert_true(y[i] == (i % 2 ? hi : lo));   /* low nibble = even index */
                assert_true((double)yf[i] == y[i]);       /* exact in binary32 */
            }
        }
    /* round trip on a pseudo-random row of 512 (the Flash head_dim) */
    double x[512], q[512], y[512];
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 512; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = dsv4q_bf16_decode((uint16_t)(0x3A00 + (st >> 52) % 0xC00)) * ((st >> 40) & 1 ? -1 : 1);
    }
    uint8_t packed[256], scales[32];
    dsv4q_kv41_encode_f64(x, 512, packed, scales);
    dsv4q_kv41_decode_f64(packed, scales, 512, y);
    memcpy(q, x, sizeof q);
    dsv4q_kv41_quant_f64(q, 1, 512);
    assert_memory_equal(q, y, sizeof q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_blocks),
        cmocka_unit_test(scale_exhaustive),
        cmocka_unit_test(elements_exhaustive),
        cmocka_unit_test(decode_exhaustive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
