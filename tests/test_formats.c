/*
 * test_formats.c - exhaustive checks of oracle/formats.c.
 *
 * Owns the evidence for formats.h invariants F1-F4. Every code of the 8-bit
 * and 16-bit formats is decoded and compared with a value computed here from
 * the bit layout alone (ref_* below: sign * 2^(e-bias) * (1 + m/2^mbits), or
 * the subnormal formula), never by calling the code under test. Encode is
 * checked by round trip (F1) and at every midpoint between adjacent codes:
 * the exact midpoint must go to the even code, and the doubles just either
 * side of it to the nearer code (F2). Saturation/NaN rules (F3) and the
 * nibble packing (F4) have their own named regression cases.
 */
#include "tests/testutil.h"

#include <float.h>

#include "oracle/formats.h"

/* ---- independent reference decoders (bit layout only) ------------------ */

/* 2^k by repeated doubling/halving: deliberately not ldexp, so the reference
 * shares no code path with the implementation. Exact for the ranges used. */
static double pow2i(int k) {
    double r = 1.0;
    for (; k > 0; k--) r *= 2.0;
    for (; k < 0; k++) r *= 0.5;
    return r;
}

/* Generic IEEE-like layout: returns the magnitude of exponent field e,
 * mantissa field m for a format with `mbits` mantissa bits and `bias`. */
static double ref_mag(unsigned e, unsigned m, int mbits, int bias) {
    double frac = (double)m / (double)(1u << mbits);
    if (e == 0) return frac * pow2i(1 - bias);         /* subnormal */
    return (1.0 + frac) * pow2i((int)e - bias);        /* normal */
}

static double ref_e4m3(unsigned c) {
    if ((c & 0x7F) == 0x7F) return NAN;
    double s = (c & 0x80) ? -1.0 : 1.0;
    return s * ref_mag((c >> 3) & 0xF, c & 7, 3, 7);
}

static double ref_e2m1(unsigned n) {
    double s = (n & 8) ? -1.0 : 1.0;
    return s * ref_mag((n >> 1) & 3, n & 1, 1, 1);
}

static double ref_bf16(unsigned c) {
    double s = (c & 0x8000) ? -1.0 : 1.0;
    unsigned e = (c >> 7) & 0xFF, m = c & 0x7F;
    if (e == 0xFF) return m ? NAN : s * INFINITY;
    return s * ref_mag(e, m, 7, 127);
}

static double ref_f16(unsigned c) {
    double s = (c & 0x8000) ? -1.0 : 1.0;
    unsigned e = (c >> 10) & 0x1F, m = c & 0x3FF;
    if (e == 0x1F) return m ? NAN : s * INFINITY;
    return s * ref_mag(e, m, 10, 15);
}

/* Same value and, for zeros, same sign; NaN matches NaN. */
static int same(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* Wrappers so the midpoint checker can drive every format the same way. */
typedef unsigned (*enc_fn)(double);
static unsigned enc_e4m3(double v) { return dsv4q_e4m3_encode(v, 0); }
static unsigned enc_e4m3_sat(double v) { return dsv4q_e4m3_encode(v, 1); }
static unsigned enc_e2m1(double v) { return dsv4q_e2m1_encode(v); }
static unsigned enc_bf16(double v) { return dsv4q_bf16_encode(v); }
static unsigned enc_bf16_f32(double v) { return dsv4q_bf16_from_f32((float)v); }
static unsigned enc_f16(double v) { return dsv4q_f16_encode(v); }

/* Codes lo..hi are the positive finite codes in increasing value order
 * (true for all these sign-magnitude formats); adjacent codes differ by 1,
 * so exactly one of each pair is even, and that one is the RNE tie target.
 * `sign` is the sign-bit mask, used to repeat everything for negatives. */
static void check_midpoints(enc_fn enc, double (*ref)(unsigned), unsigned lo,
                            unsigned hi, unsigned sign, int float_input) {
    for (unsigned c = lo; c < hi; c++) {
        double a = ref(c), b = ref(c + 1);
        double mid = 0.5 * (a + b); /* exact: few significant bits */
        unsigned even = (c & 1) ? c + 1 : c;
        double below, above;
        if (float_input) { /* the f32 path can only see binary32 inputs */
            below = (double)nextafterf((float)mid, 0.0f);
            above = (double)nextafterf((float)mid, INFINITY);
        } else {
            below = nextafter(mid, 0.0);
            above = nextafter(mid, INFINITY);
        }
        if (enc(mid) != even || enc(below) != c || enc(above) != c + 1 ||
            enc(-mid) != (even | sign) || enc(-below) != (c | sign) ||
            enc(-above) != ((c + 1) | sign)) {
            print_error("midpoint %a between codes 0x%x and 0x%x: got 0x%x "
                        "(below 0x%x, above 0x%x)\n",
                        mid, c, c + 1, enc(mid), enc(below), enc(above));
            fail();
        }
    }
}

/* ---- dtype vocabulary ---------------------------------------------------- */

static void test_dtype_names(void **state) {
    (void)state;
    static const char *names[] = {"F64", "F32", "F16", "BF16", "F8_E4M3",
                                  "F8_E8M0", "I8", "U8", "I32", "I64"};
    static const size_t sizes[] = {8, 4, 2, 2, 1, 1, 1, 1, 4, 8};
    assert_int_equal(DSV4Q_DT_COUNT, 11);
    for (int i = 0; i < 10; i++) {
        dsv4q_dtype dt = (dsv4q_dtype)(DSV4Q_DT_F64 + i);
        assert_string_equal(dsv4q_dtype_name(dt), names[i]);
        assert_int_equal(dsv4q_dtype_from_name(names[i]), dt);
        assert_int_equal(dsv4q_dtype_size(dt), sizes[i]);
    }
    assert_null(dsv4q_dtype_name(DSV4Q_DT_INVALID));
    assert_null(dsv4q_dtype_name(DSV4Q_DT_COUNT));
    assert_int_equal(dsv4q_dtype_size(DSV4Q_DT_INVALID), 0);
    assert_int_equal(dsv4q_dtype_from_name("bf16"), DSV4Q_DT_INVALID);
    assert_int_equal(dsv4q_dtype_from_name("F8_E5M2"), DSV4Q_DT_INVALID);
    assert_int_equal(dsv4q_dtype_from_name(""), DSV4Q_DT_INVALID);
    assert_int_equal(dsv4q_dtype_from_name(NULL), DSV4Q_DT_INVALID);
}

/* ---- E4M3fn -------------------------------------------------------------- */

static void test_e4m3_decode_all(void **state) {
    (void)state;
    const double *tab = dsv4q_e4m3_table();
    assert_non_null(tab);
    assert_ptr_equal(tab, dsv4q_e4m3_table()); /* one static table */
    for (unsigned c = 0; c < 256; c++) {
        double want = ref_e4m3(c);
        if (!same(dsv4q_e4m3_decode((uint8_t)c), want) || !same(tab[c], want)) {
            print_error("e4m3 code 0x%02x: decode %a table %a want %a\n", c,
                        dsv4q_e4m3_decode((uint8_t)c), tab[c], want);
            fail();
        }
    }
    /* Anchors of the format: max, min normal, min subnormal. */
    assert_true(dsv4q_e4m3_decode(0x7E) == 448.0);
    assert_true(dsv4q_e4m3_decode(0x08) == 0x1p-6);
    assert_true(dsv4q_e4m3_decode(0x01) == 0x1p-9);
}

static void test_e4m3_roundtrip(void **state) { /* F1 */
    (void)state;
    for (unsigned c = 0; c < 256; c++) {
        if ((c & 0x7F) == 0x7F) continue;
        double v = ref_e4m3(c);
        assert_int_equal(dsv4q_e4m3_encode(v, 0), c);
        assert_int_equal(dsv4q_e4m3_encode(v, 1), c);
    }
}

static void test_e4m3_midpoints(void **state) { /* F2 */
    (void)state;
    check_midpoints(enc_e4m3, ref_e4m3, 0x00, 0x7E, 0x80, 0);
    check_midpoints(enc_e4m3_sat, ref_e4m3, 0x00, 0x7E, 0x80, 0);
}

static void test_e4m3_nan_saturation(void **state) { /* F3 */
    (void)state;
    assert_true(isnan(dsv4q_e4m3_decode(0x7F)));
    assert_true(isnan(dsv4q_e4m3_decode(0xFF)));
    assert_int_equal(dsv4q_e4m3_encode(NAN, 0) & 0x7F, 0x7F);
    assert_int_equal(dsv4q_e4m3_encode(NAN, 1) & 0x7F, 0x7F); /* NaN stays NaN */
    /* (448, 464] rounds to 448; 464 is the tie, and 448's mantissa is even. */
    assert_int_equal(dsv4q_e4m3_encode(450.0, 0), 0x7E);
    assert_int_equal(dsv4q_e4m3_encode(464.0, 0), 0x7E);
    assert_int_equal(dsv4q_e4m3_encode(-464.0, 0), 0xFE);
    assert_int_equal(dsv4q_e4m3_encode(nextafter(464.0, INFINITY), 0), 0x7F);
    assert_int_equal(dsv4q_e4m3_encode(-nextafter(464.0, INFINITY), 0), 0xFF);
    assert_int_equal(dsv4q_e4m3_encode(nextafter(464.0, INFINITY), 1), 0x7E);
    assert_int_equal(dsv4q_e4m3_encode(500.0, 0), 0x7F);
    assert_int_equal(dsv4q_e4m3_encode(500.0, 1), 0x7E);
    assert_int_equal(dsv4q_e4m3_encode(-500.0, 1), 0xFE);
    assert_true(dsv4q_e4m3_decode(dsv4q_e4m3_encode(500.0, 1)) == 448.0);
    assert_true(isnan(dsv4q_e4m3_decode(dsv4q_e4m3_encode(500.0, 0))));
    assert_int_equal(dsv4q_e4m3_encode(INFINITY, 0), 0x7F);
    assert_int_equal(dsv4q_e4m3_encode(-INFINITY, 0), 0xFF);
    assert_int_equal(dsv4q_e4m3_encode(INFINITY, 1), 0x7E);
    assert_int_equal(dsv4q_e4m3_encode(-INFINITY, 1), 0xFE);
    /* Underflow keeps the sign: -1e-10 is -0, not +0. */
    assert_int_equal(dsv4q_e4m3_encode(-1e-10, 0), 0x80);
    assert_true(signbit(dsv4q_e4m3_decode(dsv4q_e4m3_encode(-1e-10, 0))));
    assert_int_equal(dsv4q_e4m3_encode(1e-10, 0), 0x00);
    assert_int_equal(dsv4q_e4m3_encode(0x1p-10, 0), 0x00);  /* tie 0 | 2^-9 */
    assert_int_equal(dsv4q_e4m3_encode(0x1.8p-9, 0), 0x02); /* tie 1 | 2 */
}

/* ---- E8M0 ---------------------------------------------------------------- */

static void test_e8m0_all(void **state) {
    (void)state;
    for (unsigned c = 0; c < 255; c++) {
        double want = pow2i((int)c - 127);
        assert_true(dsv4q_e8m0_decode((uint8_t)c) == want);
    }
    for (int k = -127; k <= 127; k++) {
        int c = dsv4q_e8m0_encode_exp(k);
        assert_int_equal(c, k + 127);
        assert_true(dsv4q_e8m0_decode((uint8_t)c) == pow2i(k)); /* F1 */
    }
    assert_int_equal(dsv4q_e8m0_encode_exp(128), -1);
    assert_int_equal(dsv4q_e8m0_encode_exp(-128), -1);
    assert_int_equal(dsv4q_e8m0_encode_exp(1000), -1);
    /* Named cases. */
    assert_true(dsv4q_e8m0_decode(127) == 1.0);
    assert_true(dsv4q_e8m0_decode(0) == 0x1p-127);
    assert_true(dsv4q_e8m0_decode(254) == 0x1p127);
    assert_true(isnan(dsv4q_e8m0_decode(255)));
}

/* ---- E2M1 ---------------------------------------------------------------- */

static void test_e2m1_all(void **state) {
    (void)state;
    static const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    for (unsigned n = 0; n < 16; n++) {
        double want = ref_e2m1(n);
        assert_true(fabs(want) == grid[n & 7]); /* reference matches the spec */
        assert_true(same(dsv4q_e2m1_decode((uint8_t)n), want));
        assert_int_equal(dsv4q_e2m1_encode(want), n); /* F1, incl. -0 -> 0x8 */
        /* Only the low 4 bits of the argument matter. */
        assert_true(same(dsv4q_e2m1_decode((uint8_t)(n | 0xF0)), want));
    }
}

static void test_e2m1_rne(void **state) { /* F2 */
    (void)state;
    check_midpoints(enc_e2m1, ref_e2m1, 0, 7, 0x8, 0);
    /* The spec's list of ties. */
    static const struct { double v; double want; } ties[] = {
        {0.25, 0.0}, {0.75, 1.0}, {1.25, 1.0}, {1.75, 2.0},
        {2.5, 2.0},  {3.5, 4.0},  {5.0, 4.0},
    };
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
        assert_true(dsv4q_e2m1_decode(dsv4q_e2m1_encode(ties[i].v)) == ties[i].want);
        assert_true(dsv4q_e2m1_decode(dsv4q_e2m1_encode(-ties[i].v)) == -ties[i].want);
    }
    /* Saturation: beyond 6 clamps to +-6, including the 7 tie and inf. */
    assert_int_equal(dsv4q_e2m1_encode(6.5), 0x7);
    assert_int_equal(dsv4q_e2m1_encode(7.0), 0x7);
    assert_int_equal(dsv4q_e2m1_encode(100.0), 0x7);
    assert_int_equal(dsv4q_e2m1_encode(INFINITY), 0x7);
    assert_int_equal(dsv4q_e2m1_encode(-100.0), 0xF);
    assert_int_equal(dsv4q_e2m1_encode(-INFINITY), 0xF);
    assert_int_equal(dsv4q_e2m1_encode(-1e-300), 0x8); /* -0 keeps its sign */
    /* No NaN code: documented mapping to +6. */
    assert_int_equal(dsv4q_e2m1_encode(NAN), 0x7);
}

static void test_e2m1_packing(void **state) { /* F4 */
    (void)state;
    const uint8_t b = 0x71;
    assert_true(dsv4q_e2m1_decode(dsv4q_e2m1_nibble(&b, 0)) == 0.5);
    assert_true(dsv4q_e2m1_decode(dsv4q_e2m1_nibble(&b, 1)) == 6.0);
    const uint8_t arr[3] = {0x21, 0xA9, 0x08};
    static const double want[6] = {0.5, 1.0, -0.5, -1.0, -0.0, 0.0};
    for (size_t i = 0; i < 6; i++)
        assert_true(same(dsv4q_e2m1_decode(dsv4q_e2m1_nibble(arr, i)), want[i]));
    /* 0x08: nibble 0x8 is -0 (sign set), the high nibble is +0. */
    assert_true(dsv4q_e2m1_decode(0x8) == 0.0);
    assert_true(signbit(dsv4q_e2m1_decode(0x8)));
    assert_false(signbit(dsv4q_e2m1_decode(dsv4q_e2m1_nibble(&arr[2], 1))));
}

/* ---- BF16 ---------------------------------------------------------------- */

static void test_bf16_decode_all(void **state) {
    (void)state;
    for (unsigned c = 0; c < 65536; c++) {
        double want = ref_bf16(c);
        if (!same(dsv4q_bf16_decode((uint16_t)c), want) ||
            !same((double)dsv4q_bf16_to_f32((uint16_t)c), want)) {
            print_error("bf16 0x%04x: decode %a want %a\n", c,
                        dsv4q_bf16_decode((uint16_t)c), want);
            fail();
        }
    }
}

static void test_bf16_roundtrip(void **state) { /* F1 */
    (void)state;
    for (unsigned c = 0; c < 65536; c++) {
        double v = ref_bf16(c);
        if (isnan(v)) {
            assert_true(isnan(dsv4q_bf16_decode(dsv4q_bf16_encode(v))));
            continue;
        }
        if (dsv4q_bf16_encode(v) != c || dsv4q_bf16_from_f32((float)v) != c) {
            print_error("bf16 0x%04x round trip: 0x%04x / 0x%04x\n", c,
                        dsv4q_bf16_encode(v), dsv4q_bf16_from_f32((float)v));
            fail();
        }
    }
}

static void test_bf16_midpoints(void **state) { /* F2 */
    (void)state;
    check_midpoints(enc_bf16, ref_bf16, 0x0000, 0x7F7F, 0x8000, 0);
    check_midpoints(enc_bf16_f32, ref_bf16, 0x0000, 0x7F7F, 0x8000, 1);
}

static void test_bf16_overflow_nan(void **state) {
    (void)state;
    const double max = ref_bf16(0x7F7F), half = 0x1p119; /* half a quantum */
    assert_true(max == 0x1.FEp127);
    /* The halfway point above max ties to the even code, which is inf. */
    assert_int_equal(dsv4q_bf16_encode(max + half), 0x7F80);
    assert_int_equal(dsv4q_bf16_encode(-(max + half)), 0xFF80);
    assert_int_equal(dsv4q_bf16_encode(nextafter(max + half, 0.0)), 0x7F7F);
    assert_int_equal(dsv4q_bf16_encode(1e300), 0x7F80);
    assert_int_equal(dsv4q_bf16_encode(INFINITY), 0x7F80);
    assert_int_equal(dsv4q_bf16_encode(-INFINITY), 0xFF80);
    assert_int_equal(dsv4q_bf16_from_f32(FLT_MAX), 0x7F80); /* 0x1.fffffep127 */
    /* Below the smallest subnormal 2^-133: half of it ties to 0. */
    assert_int_equal(dsv4q_bf16_encode(0x1p-134), 0x0000);
    assert_int_equal(dsv4q_bf16_encode(nextafter(0x1p-134, 1.0)), 0x0001);
    assert_int_equal(dsv4q_bf16_encode(-1e-300), 0x8000);
    /* NaN stays a quiet NaN on both paths. */
    uint16_t n1 = dsv4q_bf16_encode(NAN), n2 = dsv4q_bf16_from_f32(NAN);
    assert_true(isnan(dsv4q_bf16_decode(n1)) && (n1 & 0x0040));
    assert_true(isnan(dsv4q_bf16_decode(n2)) && (n2 & 0x0040));
    /* A signalling-NaN float whose payload lives only in the low 16 bits
     * must not truncate to inf. */
    union { uint32_t u; float f; } sn = {0x7F800001u};
    assert_true(isnan(dsv4q_bf16_decode(dsv4q_bf16_from_f32(sn.f))));
}

/* double -> bf16 must round once. v lies just above the midpoint between
 * 1.0 (0x3F80, even) and 1.0078125 (0x3F81); the excess 2^-30 is below half
 * a binary32 ulp at 1, so (float)v is exactly the midpoint and a
 * double->float->bf16 chain would tie down to 0x3F80. */
static void test_bf16_single_rounding(void **state) {
    (void)state;
    const double v = 1.0 + 0x1p-8 + 0x1p-30;
    assert_true((double)(float)v == 1.0 + 0x1p-8);           /* the trap exists */
    assert_int_equal(dsv4q_bf16_from_f32((float)v), 0x3F80); /* double rounding */
    assert_int_equal(dsv4q_bf16_encode(v), 0x3F81);          /* single rounding */
    assert_int_equal(dsv4q_bf16_encode(-v), 0xBF81);
    /* Mirror: just below an odd-to-even midpoint, (float) rounds up onto the
     * midpoint, which then ties up to the even code; correct is down. */
    const double w = 1.0 + 0x1p-7 + 0x1p-8 - 0x1p-30; /* between 0x3F81, 0x3F82 */
    assert_true((double)(float)w == 1.0 + 0x1p-7 + 0x1p-8);
    assert_int_equal(dsv4q_bf16_from_f32((float)w), 0x3F82);
    assert_int_equal(dsv4q_bf16_encode(w), 0x3F81);
}

/* ---- FP16 ---------------------------------------------------------------- */

static void test_f16_decode_all(void **state) {
    (void)state;
    for (unsigned c = 0; c < 65536; c++) {
        double want = ref_f16(c);
        if (!same(dsv4q_f16_decode((uint16_t)c), want)) {
            print_error("f16 0x%04x: decode %a want %a\n", c,
                        dsv4q_f16_decode((uint16_t)c), want);
            fail();
        }
    }
    assert_true(dsv4q_f16_decode(0x7BFF) == 65504.0);
    assert_true(dsv4q_f16_decode(0x0001) == 0x1p-24);
    assert_true(dsv4q_f16_decode(0x0400) == 0x1p-14);
}

static void test_f16_roundtrip(void **state) { /* F1 */
    (void)state;
    for (unsigned c = 0; c < 65536; c++) {
        double v = ref_f16(c);
        if (isnan(v)) {
            assert_true(isnan(dsv4q_f16_decode(dsv4q_f16_encode(v))));
            continue;
        }
        if (dsv4q_f16_encode(v) != c) {
            print_error("f16 0x%04x round trip: 0x%04x\n", c, dsv4q_f16_encode(v));
            fail();
        }
    }
}

static void test_f16_midpoints(void **state) { /* F2 */
    (void)state;
    check_midpoints(enc_f16, ref_f16, 0x0000, 0x7BFF, 0x8000, 0);
}

static void test_f16_overflow_nan(void **state) {
    (void)state;
    assert_int_equal(dsv4q_f16_encode(65520.0), 0x7C00); /* tie above max */
    assert_int_equal(dsv4q_f16_encode(-65520.0), 0xFC00);
    assert_int_equal(dsv4q_f16_encode(nextafter(65520.0, 0.0)), 0x7BFF);
    assert_int_equal(dsv4q_f16_encode(1e6), 0x7C00);
    assert_int_equal(dsv4q_f16_encode(-INFINITY), 0xFC00);
    assert_int_equal(dsv4q_f16_encode(0x1p-25), 0x0000); /* tie 0 | 2^-24 */
    assert_int_equal(dsv4q_f16_encode(-1e-30), 0x8000);
    uint16_t n = dsv4q_f16_encode(NAN);
    assert_true(isnan(dsv4q_f16_decode(n)));
    assert_int_equal(n & 0x7C00, 0x7C00);
    assert_true((n & 0x03FF) != 0);
}

/* ---- generic grid rounding ------------------------------------------------ */

static void test_round_grid(void **state) {
    (void)state;
    /* Double's own grid is the identity. */
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 10000; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        double v;
        uint64_t bits = s & 0x7FEFFFFFFFFFFFFFull; /* finite */
        memcpy(&v, &bits, 8);
        if (s >> 63) v = -v;
        assert_true(same(dsv4q_round_grid(v, 52, -1022), v));
    }
    assert_true(same(dsv4q_round_grid(-0.0, 3, -6), -0.0));
    assert_true(same(dsv4q_round_grid(-1e-10, 3, -6), -0.0));
    assert_true(isnan(dsv4q_round_grid(NAN, 7, -126)));
    assert_true(dsv4q_round_grid(INFINITY, 7, -126) == INFINITY);
    /* No overflow handling: E4M3's grid continues past 448. */
    assert_true(dsv4q_round_grid(470.0, 3, -6) == 480.0);
    assert_true(dsv4q_round_grid(1e6, 1, 0) == 0x1p20 * 1.0);
    /* Ties to even, normal and subnormal ranges. */
    assert_true(dsv4q_round_grid(1.0 + 0x1p-8, 7, -126) == 1.0);
    assert_true(dsv4q_round_grid(1.0 + 3 * 0x1p-8, 7, -126) == 1.0 + 0x1p-6);
    assert_true(dsv4q_round_grid(0x1.8p-9, 3, -6) == 0x1p-8);
    assert_true(dsv4q_round_grid(0x1p-10, 3, -6) == 0.0);
    assert_true(dsv4q_round_grid(0.3, 1, 0) == 0.5);
    /* Matches the formats that are defined through it. */
    for (unsigned c = 0; c < 0x7BFF; c++) {
        double mid = 0.5 * (ref_f16(c) + ref_f16(c + 1));
        assert_true(dsv4q_round_grid(mid, 10, -14) == ref_f16((c & 1) ? c + 1 : c));
    }
}

/* ---- generic element decode ----------------------------------------------- */

static void test_decode_elem(void **state) {
    (void)state;
    /* Little-endian bytes, as stored in a safetensors file. */
    static const uint8_t f64[16] = {0x18, 0x2D, 0x44, 0x54, 0xFB, 0x21, 0x09, 0x40, /* pi */
                                    0, 0, 0, 0, 0, 0, 0xF0, 0xBF};                 /* -1 */
    static const uint8_t f32[8] = {0, 0, 0xC0, 0x3F, 0, 0, 0x80, 0x7F}; /* 1.5, inf */
    static const uint8_t f16[4] = {0x00, 0x3C, 0xFF, 0x7B};             /* 1, 65504 */
    static const uint8_t bf16[4] = {0x80, 0x3F, 0x40, 0xC0};            /* 1, -3 */
    static const uint8_t e4m3[2] = {0x7E, 0xB8};                        /* 448, -1 */
    static const uint8_t e8m0[2] = {127, 0xFF};                         /* 1, NaN */
    static const uint8_t i8[2] = {0xFF, 0x7F};                          /* -1, 127 */
    static const uint8_t u8[2] = {0xFF, 0x00};                          /* 255, 0 */
    static const uint8_t i32[8] = {0xFB, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x01, 0x00};
    static const uint8_t i64[16] = {0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00};
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F64, f64, 0) == 3.141592653589793);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F64, f64, 1) == -1.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F32, f32, 0) == 1.5);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F32, f32, 1) == INFINITY);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F16, f16, 0) == 1.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F16, f16, 1) == 65504.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_BF16, bf16, 0) == 1.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_BF16, bf16, 1) == -3.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F8_E4M3, e4m3, 0) == 448.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F8_E4M3, e4m3, 1) == -1.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_F8_E8M0, e8m0, 0) == 1.0);
    assert_true(isnan(dsv4q_decode_elem(DSV4Q_DT_F8_E8M0, e8m0, 1)));
    assert_true(dsv4q_decode_elem(DSV4Q_DT_I8, i8, 0) == -1.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_I8, i8, 1) == 127.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_U8, u8, 0) == 255.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_U8, u8, 1) == 0.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_I32, i32, 0) == -5.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_I32, i32, 1) == 65536.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_I64, i64, 0) == -2.0);
    assert_true(dsv4q_decode_elem(DSV4Q_DT_I64, i64, 1) == 0x1p52);
    assert_true(isnan(dsv4q_decode_elem(DSV4Q_DT_INVALID, u8, 0)));
    assert_true(isnan(dsv4q_decode_elem(DSV4Q_DT_COUNT, u8, 0)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_e4m3_decode_all),
        cmocka_unit_test(test_e4m3_roundtrip),
        cmocka_unit_test(test_e4m3_midpoints),
        cmocka_unit_test(test_e4m3_nan_saturation),
        cmocka_unit_test(test_e8m0_all),
        cmocka_unit_test(test_e2m1_all),
        cmocka_unit_test(test_e2m1_rne),
        cmocka_unit_test(test_e2m1_packing),
        cmocka_unit_test(test_bf16_decode_all),
        cmocka_unit_test(test_bf16_roundtrip),
        cmocka_unit_test(test_bf16_midpoints),
        cmocka_unit_test(test_bf16_overflow_nan),
        cmocka_unit_test(test_bf16_single_rounding),
        cmocka_unit_test(test_f16_decode_all),
        cmocka_unit_test(test_f16_roundtrip),
        cmocka_unit_test(test_f16_midpoints),
        cmocka_unit_test(test_f16_overflow_nan),
        cmocka_unit_test(test_round_grid),
        cmocka_unit_test(test_decode_elem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
