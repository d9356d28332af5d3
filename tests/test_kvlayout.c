/*
 * test_kvlayout.c - the cache compare of oracle/kvlayout.h names the bug
 * classes that ship (issue 25 item 3).
 *
 * A small encoder here writes vllm_fp8_ds_mla records at the offsets the
 * layout description gives (per block of B tokens: B x [448 E4M3 | 64 BF16],
 * then B x [7 UE8M0 | pad], block stride padded to 576) from per-token
 * codes; the oracle's rows are the decode of the correctly placed bytes
 * (the decoder itself is checked bit for bit against numpy by
 * tests/interop_kvcache.py). Then each planted bug is placed in the engine's
 * bytes and the compare must name it: planar/interleaved swap, slot 0
 * overwritten, tokens shifted (flat-id read), a scale in the wrong place,
 * and a plain difference with its slot, field and element. Hostile
 * geometry (unknown layout, a size that is not whole blocks, too few slots)
 * is refused with a message naming it.
 */
#include "tests/testutil.h"

#include <stdlib.h>

#include "oracle/kvlayout.h"

enum { B = 4, NTOK = 8, DATA = 576, SC = 8, NOPE = 448 };

/* Codes of token t: E4M3 codes with no NaN (0x7F/0xFF), BF16 rope codes of
 * moderate values, UE8M0 exponents near 127; all distinct per token. */
static void codes(int t, uint8_t *d, uint8_t *s)
{
    uint32_t x = 2654435761u * (uint32_t)(t + 1);
    for (int i = 0; i < NOPE; i++) {
        x = x * 1664525u + 1013904223u;
        uint8_t c = (uint8_t)(x >> 24);
        if ((c & 0x7F) == 0x7F) c ^= 1;
        d[i] = c;
    }
    for (int i = 0; i < 64; i++) {
        x = x * 1664525u + 1013904223u;
        const uint16_t bf = (uint16_t)(0x3C00 + ((x >> 20) & 0x3FF) + (x >> 31 ? 0x8000 : 0));
        d[NOPE + 2 * i] = (uint8_t)bf, d[NOPE + 2 * i + 1] = (uint8_t)(bf >> 8);
    }
    for (int k = 0; k < 7; k++) s[k] = (uint8_t)(120 + (t + k) % 9);
    s[7] = 0;
}

static size_t stride(void) { return (B * (DATA + SC) + 575) / 576 * 576; }

/* Place token t's record at slot p of a planar cache. */
static void put(uint8_t *cache, int p, const uint8_t *d, const uint8_t *s)
{
    uint8_t *blk = cache + (size_t)(p / B) * stride();
    memcpy(blk + (size_t)(p % B) * DATA, d, DATA);
    memcpy(blk + (size_t)B * DATA + (size_t)(p % B) * SC, s, SC);
}

typedef struct fix {
    dsv4q_kvgeom g;
    size_t n;
    uint8_t *good, *bad;
    double *rv, *rs;
} fix;

static void setup(fix *f)
{
    char err[256];
    assert_int_equal(dsv4q_kvgeom_init(&f->g, "vllm_fp8_ds_mla", B, 0, err, sizeof err), 0);
    assert_int_equal(f->g.block_stride, stride());
    assert_int_equal(f->g.token_bytes, 584);
    f->n = stride() * (NTOK / B);
    f->good = calloc(f->n, 1), f->bad = calloc(f->n, 1);
    f->rv = malloc(sizeof(double) * NTOK * 512), f->rs = malloc(sizeof(double) * NTOK * 7);
    assert_true(f->good && f->bad && f->rv && f->rs);
    uint8_t d[DATA], s[SC];
    for (int t = 0; t < NTOK; t++) {
        codes(t, d, s);
        put(f->good, t, d, s);
    }
    for (int t = 0; t < NTOK; t++) dsv4q_kvcache_decode(&f->g, f->good, t, 0, f->rv + t * 512, f->rs + t * 7);
    memcpy(f->bad, f->good, f->n);
}

static void teardown(fix *f) { free(f->good), free(f->bad), free(f->rv), free(f->rs); }

static void cmp(fix *f, dsv4q_kvdiff *d)
{
    char err[256];
    assert_int_equal(dsv4q_kvcache_compare(&f->g, f->bad, f->n, f->rv, f->rs, NTOK, d, err, sizeof err), 0);
}

static void test_identical(void **st)
{
    (void)st;
    fix f;
    dsv4q_kvdiff d;
    setup(&f);
    cmp(&f, &d);
    assert_int_equal(d.differ, 0);
    assert_int_equal(d.ndiff, 0);
    teardown(&f);
}

static void test_interleaved_swap(void **st)
{
    (void)st;
    fix f;
    dsv4q_kvdiff d;
    setup(&f);
    memset(f.bad, 0, f.n);
    uint8_t dd[DATA], s[SC];
    for (int t = 0; t < NTOK; t++) { /* the writer's bug: adjacent 584-byte records */
        codes(t, dd, s);
        memcpy(f.bad + (size_t)t * 584, dd, DATA);
        memcpy(f.bad + (size_t)t * 584 + DATA, s, SC);
    }
    cmp(&f, &d);
    assert_int_equal(d.differ, 1);
    assert_int_equal(d.slot, 0);
    assert_non_null(strstr(d.diagnosis, "planar/interleaved swap"));
    teardown(&f);
}

static void test_slot0_overwritten(void **st)
{
    (void)st;
    fix f;
    dsv4q_kvdiff d;
    setup(&f);
    uint8_t dd[DATA], s[SC];
    codes(5, dd, s);
    put(f.bad, 0, dd, s);
    cmp(&f, &d);
    assert_int_equal(d.differ, 1);
    assert_int_equal(d.slot, 0);
    assert_int_equal(d.ndiff, 1);
    assert_string_equal(d.diagnosis, "slot 0 overwritten: it holds token 5's row");
    teardown(&f);
}

static void test_shift(void **st)
{
    (void)st;
    fix f;
    dsv4q_kvdiff d;
    setup(&f);
    uint8_t dd[DATA], s[SC];
    for (int t = 0; t + 1 < NTOK; t++) { /* slot t holds token t + 1 */
        codes(t + 1, dd, s);
        put(f.bad, t, dd, s);
    }
    cmp(&f, &d);
    assert_int_equal(d.differ, 1);
    assert_int_equal(d.slot, 0);
    assert_non_null(strstr(d.diagnosis, "tokens shifted by +1"));
    teardown(&f);
}

static void test_scale_only(void **st)
{
    (void)st;
    fix f;
    dsv4q_kvdiff d;
    setup(&f);
    /* token 6 (block 1, position 2), scale group 3: one exponent off */
    f.bad[stride() + (size_t)B * DATA + 2 * SC + 3] += 1;
    cmp(&f, &d);
    assert_int_equal(d.differ, 1);
    assert_int_equal(d.slot, 6);
    assert_string_equal(d.field, "scale");
    assert_int_equal(d.index, 3);
    assert_true(d.got == 2 * d.want);
    assert_non_null(strstr(d.diagnosis, "scale only: slot 6 group 3"));
    teardown(&f);
}

static void test_plain_difference(void **st)
{
    (void)st;
    fix f;
    dsv4q_kvdiff d;
    setup(&f);
    /* token 3 (block 0, position 3), rope element 5: the high byte's sign bit */
    f.bad[3 * DATA + NOPE + 2 * 5 + 1] ^= 0x80;
    cmp(&f, &d);
    assert_int_equal(d.differ, 1);
    assert_int_equal(d.slot, 3);
    assert_string_equal(d.field, "rope");
    assert_int_equal(d.index, 5);
    assert_true(d.got == -d.want);
    assert_string_equal(d.diagnosis, "");
    /* and a nope element of token 1 */
    memcpy(f.bad, f.good, f.n);
    f.bad[1 * DATA + 100] ^= 0x01;
    cmp(&f, &d);
    assert_int_equal(d.slot, 1);
    assert_string_equal(d.field, "nope");
    assert_int_equal(d.index, 100);
    teardown(&f);
}

static void test_hostile(void **st)
{
    (void)st;
    fix f;
    dsv4q_kvdiff d;
    char err[256];
    dsv4q_kvgeom g;
    setup(&f);
    assert_int_equal(dsv4q_kvgeom_init(&g, "fp8_ds_mla_v9", 0, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown cache layout 'fp8_ds_mla_v9'"));
    assert_int_equal(dsv4q_kvgeom_init(&g, "llamacpp_q8_0", 0, 100, err, sizeof err), -1);
    assert_non_null(strstr(err, "multiple of 32"));
    assert_int_equal(dsv4q_kvcache_slots(&f.g, f.n - 1, "x.bin", err, sizeof err), -1);
    assert_non_null(strstr(err, "x.bin"));
    assert_non_null(strstr(err, "multiple of 2880"));
    assert_int_equal(dsv4q_kvcache_compare(&f.g, f.bad, f.n, f.rv, f.rs, NTOK + 1, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "holds 8 slot(s), the reference has 9"));
    teardown(&f);
}

/* llama.cpp Q8_0 rows: one int8 changed is slot/field k/element. */
static void test_q8_0_rows(void **st)
{
    (void)st;
    char err[256];
    dsv4q_kvgeom g;
    dsv4q_kvdiff d;
    assert_int_equal(dsv4q_kvgeom_init(&g, "llamacpp_q8_0", 0, 64, err, sizeof err), 0);
    assert_int_equal(g.token_bytes, 68);
    uint8_t c[3 * 68];
    for (int i = 0; i < (int)sizeof c; i++) c[i] = (uint8_t)(i * 7 + 3);
    for (int r = 0; r < 3; r++)
        for (int b = 0; b < 2; b++) c[r * 68 + b * 34] = 0x00, c[r * 68 + b * 34 + 1] = 0x3C; /* d = 1.0 */
    double rv[3 * 64], rs[3 * 2];
    for (int t = 0; t < 3; t++) dsv4q_kvcache_decode(&g, c, t, 0, rv + t * 64, rs + t * 2);
    assert_true(rs[0] == 1.0 && rv[0] == (double)(int8_t)c[2]);
    c[2 * 68 + 34 + 2 + 9] ^= 0x10; /* row 2, block 1, element 9 -> element 41 */
    assert_int_equal(dsv4q_kvcache_compare(&g, c, sizeof c, rv, rs, 3, &d, err, sizeof err), 0);
    assert_int_equal(d.slot, 2);
    assert_string_equal(d.field, "k");
    assert_int_equal(d.index, 41);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical),         cmocka_unit_test(test_interleaved_swap),
        cmocka_unit_test(test_slot0_overwritten), cmocka_unit_test(test_shift),
        cmocka_unit_test(test_scale_only),        cmocka_unit_test(test_plain_difference),
        cmocka_unit_test(test_hostile),           cmocka_unit_test(test_q8_0_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
