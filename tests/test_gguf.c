/*
 * test_gguf.c - the GGUF reader (io/gguf.c), the GGML decoders
 * (oracle/ggml_decode.c) and the deepseek4 binding (io/gguf_model.c).
 *
 * Owns the evidence that: a well-formed GGUF v3 image reads back with the
 * right metadata, shapes and data pointers; every malformed image (each
 * rule of gguf.h, every truncation of a valid file, random byte flips) is
 * refused with a message naming the file and the key or tensor, never a
 * crash; the decoders give hand-computed values for chosen blocks (the bit
 * for bit comparison with gguf.quants on random and edge blocks is
 * tests/interop_gguf.py, which drives test_interop below through
 * DSV4Q_INTEROP_DIR); a GGUF binding refuses a wrong architecture and a
 * missing tensor by name. Images are built byte by byte here (gb_*).
 */
#include "tests/testutil.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "oracle/ggml_decode.h"
#include "receipts/receipts.h"
#include "io/synth.h"
#include "io/model.h"

#include <sys/stat.h>
#include <unistd.h>

/* ---- a byte builder for GGUF images ------------------------------------- */

typedef struct gb { uint8_t *p; size_t n, cap; } gb;

static void gb_raw(gb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gb_u32(gb *b, uint32_t v) { gb_raw(b, &v, 4); }
static void gb_u64(gb *b, uint64_t v) { gb_raw(b, &v, 8); }
static void gb_str(gb *b, const char *s) { gb_u64(b, strlen(s)); gb_raw(b, s, strlen(s)); }
static void gb_pad(gb *b, size_t a) { while (b->n % a) { uint8_t z = 0; gb_raw(b, &z, 1); } }

static void kv_u32(gb *b, const char *k, uint32_t v) { gb_str(b, k); gb_u32(b, DSV4Q_GGUF_U32); gb_u32(b, v); }
static void kv_str(gb *b, const char *k, const char *v) { gb_str(b, k); gb_u32(b, DSV4Q_GGUF_STRING); gb_str(b, v); }
static void tinfo(gb *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    gb_str(b, name);
    gb_u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++) gb_u64(b, ne[i]);
    gb_u32(b, type);
    gb_u64(b, off);
}

/* A valid image: 3 metadata pairs (incl. an I32 array and alignment 64),
 * tensors "a" F32 [4, 2] at 0 and "q" Q8_0 [32] at 64. */
static gb good_image(void)
{
    gb b = {0};
    gb_raw(&b, "GGUF", 4);
    gb_u32(&b, 3);
    gb_u64(&b, 2);
    gb_u64(&b, 4);
    kv_str(&b, "general.architecture", "test");
    kv_u32(&b, "general.alignment", 64);
    gb_str(&b, "x.arr");
    gb_u32(&b, DSV4Q_GGUF_ARRAY);
    gb_u32(&b, DSV4Q_GGUF_I32);
    gb_u64(&b, 3);
    int32_t arr[3] = {0, 4, -128};
    gb_raw(&b, arr, sizeof arr);
    gb_str(&b, "x.f32");
    gb_u32(&b, DSV4Q_GGUF_F32);
    float e = 1e-6f;
    gb_raw(&b, &e, 4);
    tinfo(&b, "a", 2, (uint64_t[]){4, 2}, DSV4Q_GGML_F32, 0);
    tinfo(&b, "q", 1, (uint64_t[]){32}, DSV4Q_GGML_Q8_0, 64);
    gb_pad(&b, 64);
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    gb_raw(&b, a, sizeof a);
    gb_pad(&b, 64);
    uint16_t d = 0x3C00;
    gb_raw(&b, &d, 2);
    for (int i = 0; i < 32; i++) { int8_t q = (int8_t)(i - 16); gb_raw(&b, &q, 1); }
    return b;
}

static int parse(const gb *b, char *err, size_t errlen)
{
    dsv4q_gguf *g = NULL;
    int rc = dsv4q_gguf_open_buffer(&g, b->p, b->n, "img.gguf", err, errlen);
    dsv4q_gguf_close(g);
    return rc;
}

static void test_good_image(void **s)
{
    (void)s;
    gb b = good_image();
    char err[512];
    dsv4q_gguf *g;
    assert_int_equal(dsv4q_gguf_open_buffer(&g, b.p, b.n, "img.gguf", err, sizeof err), 0);
    assert_int_equal(dsv4q_gguf_alignment(g), 64);
    assert_int_equal(dsv4q_gguf_count(g), 2);
    const dsv4q_gguf_tensor *a = dsv4q_gguf_find(g, "a"), *q = dsv4q_gguf_find(g, "q");
    assert_non_null(a);
    assert_non_null(q);
    assert_null(dsv4q_gguf_find(g, "b"));
    assert_int_equal(a->ne[0], 4);
    assert_int_equal(a->ne[1], 2);
    assert_int_equal(a->numel, 8);
    assert_int_equal(a->nbytes, 32);
    assert_true(((const float *)a->data)[7] == 8.0f);
    assert_int_equal(q->nbytes, 34);
    float y[32];
    assert_int_equal(dsv4q_ggml_row_f32(q->type, q->data, 32, 0, y), 0);
    assert_true(y[0] == -16.0f && y[31] == 15.0f);
    const char *arch;
    assert_int_equal(dsv4q_gguf_get_str(g, "general.architecture", &arch, err, sizeof err), 0);
    assert_string_equal(arch, "test");
    int64_t v;
    assert_int_equal(dsv4q_gguf_get_int(g, "general.alignment", &v, err, sizeof err), 0);
    assert_int_equal(v, 64);
    assert_int_equal(dsv4q_gguf_get_int(g, "nope", &v, err, sizeof err), 1);
    assert_int_equal(dsv4q_gguf_get_int(g, "general.architecture", &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "general.architecture"));
    const dsv4q_gguf_kv *kv = dsv4q_gguf_kv_find(g, "x.arr");
    assert_non_null(kv);
    assert_int_equal(kv->n, 3);
    assert_int_equal(dsv4q_gguf_arr_int(kv, 2, &v), 0);
    assert_int_equal(v, -128);
    assert_int_equal(dsv4q_gguf_arr_int(kv, 3, &v), -1);
    double r;
    assert_int_equal(dsv4q_gguf_get_real(g, "x.f32", &r, err, sizeof err), 0);
    assert_true(r == (double)1e-6f);
    dsv4q_gguf_close(g);
    free(b.p);
}

/* Every prefix of a valid image is refused (and never read past). */
static void test_every_truncation(void **s)
{
    (void)s;
    gb b = good_image();
    char err[512];
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *c = malloc(n ? n : 1);   /* exact-size copy: ASan/valgrind see any overread */
        memcpy(c, b.p, n);
        dsv4q_gguf *g = NULL;
        int rc = dsv4q_gguf_open_buffer(&g, c, n, "img.gguf", err, sizeof err);
        if (rc == 0) fail_msg("truncation to %zu of %zu bytes was accepted", n, b.n);
        assert_non_null(strstr(err, "img.gguf"));
        free(c);
    }
    free(b.p);
}

/* Random byte flips: each image either parses or fails with a message. */
static void test_byte_flips(void **s)
{
    (void)s;
    gb b = good_image();
    char err[512];
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int refused = 0;
    for (int it = 0; it < 4000; it++) {
        uint8_t *c = malloc(b.n);
        memcpy(c, b.p, b.n);
        for (int k = 0; k < 3; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            c[x % b.n] ^= (uint8_t)(1u << ((x >> 32) % 8));
        }
        dsv4q_gguf *g = NULL;
        err[0] = 0;
        if (dsv4q_gguf_open_buffer(&g, c, b.n, "img.gguf", err, sizeof err)) {
            refused++;
            assert_true(err[0] != 0);
        }
        dsv4q_gguf_close(g);
        free(c);
    }
    assert_true(refused > 1000);   /* most flips hit checked fields */
    free(b.p);
}

/* One malformed image per rule; the message must name what is wrong. */
typedef struct bad { const char *what, *msg; } bad;

static void build_bad_body(int i, gb *b)
{
    gb_raw(b, i == 0 ? "GGUX" : "GGUF", 4);
    gb_u32(b, i == 1 ? 2 : 3);
    uint64_t nt = i == 2 ? (1ull << 60) : (i >= 10 ? 2 : 1), nkv = i == 3 ? (1ull << 60) : 2;
    gb_u64(b, nt);
    gb_u64(b, nkv);
    if (i == 4) { gb_u64(b, 1ull << 40); return; }                     /* key length */
    if (i == 5) { gb_str(b, "k"); gb_u32(b, DSV4Q_GGUF_STRING); gb_u64(b, 1ull << 40); return; }
    if (i == 6) { gb_str(b, "k"); gb_u32(b, DSV4Q_GGUF_ARRAY); gb_u32(b, DSV4Q_GGUF_ARRAY); gb_u64(b, 1); return; }
    if (i == 7) { gb_str(b, "k"); gb_u32(b, 13); gb_u32(b, 0); return; }
    if (i == 8) { kv_u32(b, "k", 1); kv_u32(b, "k", 2); return; }
    if (i == 9) { kv_u32(b, "general.alignment", 48); kv_u32(b, "k", 1); return; }
    kv_str(b, "general.architecture", "t");
    if (i == 19) { gb_str(b, "general.alignment"); gb_u32(b, DSV4Q_GGUF_U64); gb_u64(b, 32); }
    else if (i == 20) { gb_str(b, "flag"); gb_u32(b, DSV4Q_GGUF_BOOL); uint8_t two = 2; gb_raw(b, &two, 1); }
    else if (i == 21) { gb_str(b, "arr"); gb_u32(b, DSV4Q_GGUF_ARRAY); gb_u32(b, DSV4Q_GGUF_U32); gb_u64(b, 1ull << 61); return; }
    else kv_u32(b, "k", 1);
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    switch (i) {
    case 10: tinfo(b, "t", 2, ne, 0, 0); tinfo(b, "t", 2, ne, 0, 256); break;                 /* duplicate */
    case 11: tinfo(b, "a_name_that_is_much_longer_than_sixty_three_bytes_which_ggml_cannot_hold", 2, ne, 0, 0);
             tinfo(b, "u", 2, ne, 0, 256); break;
    case 12: tinfo(b, "t", 5, ne, 0, 0); break;                                                /* 5 dims */
    case 13: ne[1] = 0; tinfo(b, "t", 2, ne, 0, 0); tinfo(b, "u", 2, ne, 0, 256); break;      /* zero dim */
    case 14: { uint64_t big[2] = {1ull << 62, 1ull << 62}; tinfo(b, "t", 2, big, 0, 0); tinfo(b, "u", 2, ne, 0, 256); break; }
    case 15: tinfo(b, "t", 2, ne, 33, 0); tinfo(b, "u", 2, ne, 0, 256); break;                /* unknown type */
    case 16: ne[0] = 33; tinfo(b, "t", 2, ne, DSV4Q_GGML_Q8_0, 0); tinfo(b, "u", 2, ne, 0, 256); break;
    case 17: tinfo(b, "t", 2, ne, 0, 16); tinfo(b, "u", 2, ne, 0, 256); break;                /* misaligned */
    case 18: tinfo(b, "t", 2, ne, 0, 0); tinfo(b, "u", 2, ne, 0, 1u << 20); break;            /* outside */
    case 22: tinfo(b, "t", 2, ne, 0, 0); tinfo(b, "u", 2, ne, 0, 128); break;                 /* overlap */
    default: tinfo(b, "t", 2, ne, 0, 0); tinfo(b, "u", 2, ne, 0, 256); break;
    }
}

/* Every image gets 512 zero bytes of data after it, so a count check
 * never fires before the rule under test. */
static void build_bad(int i, gb *b)
{
    build_bad_body(i, b);
    gb_pad(b, 32);
    uint8_t zero[512] = {0};
    gb_raw(b, zero, sizeof zero);
}

static void test_hostile(void **s)
{
    (void)s;
    static const bad cases[] = {
        {"bad magic", "bad magic"},
        {"version 2", "version 2"},
        {"2^60 tensors", "tensor count"},
        {"2^60 metadata pairs", "metadata count"},
        {"2^40-byte key", "length"},
        {"2^40-byte string", "the value of key 'k'"},
        {"nested array", "nested"},
        {"unknown value type", "unknown value type"},
        {"duplicate key", "duplicate metadata key 'k'"},
        {"alignment 48", "not a power of two"},
        {"duplicate tensor", "duplicate tensor name 't'"},
        {"63-byte name limit", "longer than 63"},
        {"5 dimensions", "5 dimensions"},
        {"zero dimension", "dimension 1 is 0"},
        {"element count overflow", "overflows"},
        {"unknown GGML type", "unknown GGML type 33"},
        {"ne0 not a block multiple", "not a multiple of its block"},
        {"misaligned offset", "not a multiple of the alignment"},
        {"offset outside", "outside"},
        {"alignment as U64", "expected UINT32"},
        {"bool holding 2", "BOOL holding 2"},
        {"2^61-element array", "claims"},
        {"overlapping data", "overlap"},
    };
    int map[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22};
    char err[512];
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        gb b = {0};
        build_bad(map[k], &b);
        err[0] = 0;
        if (parse(&b, err, sizeof err) == 0) fail_msg("%s: accepted", cases[k].what);
        if (!strstr(err, cases[k].msg) || !strstr(err, "img.gguf"))
            fail_msg("%s: message '%s' lacks '%s' or the file name", cases[k].what, err, cases[k].msg);
        free(b.p);
    }
    /* the default case of build_bad is itself valid (the cases above differ by one rule) */
    gb b = {0};
    build_bad(99, &b);
    assert_int_equal(parse(&b, err, sizeof err), 0);
    free(b.p);
}

static void test_open_file_errors(void **s)
{
    (void)s;
    char err[512];
    dsv4q_gguf *g;
    assert_int_equal(dsv4q_gguf_open(&g, "/nonexistent/x.gguf", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/x.gguf"));
    assert_int_equal(dsv4q_gguf_open(&g, "/tmp", err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    assert_int_equal(dsv4q_is_gguf("/tmp"), 0);
    /* a FIFO is not opened (opening it would block until a writer comes) */
    char fifo[] = "/tmp/dsv4q_fifo_XXXXXX";
    int fd = mkstemp(fifo);
    assert_true(fd >= 0);
    close(fd);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(dsv4q_is_gguf(fifo), 0);
    unlink(fifo);
}

/* ---- decoders: hand-computed blocks --------------------------------------- */

static void test_decode_hand(void **s)
{
    (void)s;
    uint8_t b[256];
    float y[256];
    /* Q8_0, d = 2^-24 (the smallest F16 subnormal): y = q 2^-24 exactly */
    memset(b, 0, sizeof b);
    b[0] = 0x01; b[1] = 0x00;
    b[2] = 0x80; b[3] = 0x7F; b[4] = 0x01;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_Q8_0, b, 0, 1, y), 0);
    assert_true(y[0] == -128.0f * 0x1p-24f && y[1] == 127.0f * 0x1p-24f && y[2] == 0x1p-24f && y[3] == 0.0f);
    /* Q4_0, d = 2: nibble 0 -> -16, 15 -> 14; low nibbles are elements 0..15 */
    memset(b, 0, sizeof b);
    b[0] = 0x00; b[1] = 0x40;
    b[2] = 0xF0;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_Q4_0, b, 0, 1, y), 0);
    assert_true(y[0] == -16.0f && y[16] == 14.0f && y[1] == -16.0f);
    /* MXFP4: e = 128 -> scale 1 on the doubled E2M1 values; e = 0 -> 2^-128 */
    memset(b, 0, sizeof b);
    b[0] = 128; b[1] = 0x97;   /* low 7 -> 12, high 9 -> -1 */
    b[17] = 0; b[18] = 0x01;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_MXFP4, b, 0, 2, y), 0);
    assert_true(y[0] == 12.0f && y[16] == -1.0f && y[1] == 0.0f);
    assert_true(y[32] == 0x1p-128f && y[48] == 0.0f);
    /* Q4_K: d 1, dmin 0.5; (sc, m) = (1,5),(2,6),(3,7),(4,8) then (1,2) x 4;
     * every q byte 0x53: low nibble 3, high 5 */
    memset(b, 0, sizeof b);
    b[0] = 0x00; b[1] = 0x3C; b[2] = 0x00; b[3] = 0x38;
    const uint8_t sc[12] = {1, 2, 3, 4, 5, 6, 7, 8, 0x21, 0x21, 0x21, 0x21};
    memcpy(b + 4, sc, 12);
    memset(b + 16, 0x53, 128);
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_Q4_K, b, 0, 1, y), 0);
    assert_true(y[0] == 1 * 3 - 2.5f);        /* sub-block 0 */
    assert_true(y[32] == 2 * 5 - 3.0f);       /* sub-block 1: high nibbles */
    assert_true(y[64] == 3 * 3 - 3.5f);
    assert_true(y[128] == 1 * 3 - 1.0f);      /* sub-block 4 */
    assert_true(y[255] == 1 * 5 - 1.0f);
    /* IQ2_XXS: d 1, first 32: grid indices 0,1,2,3, scale nibble 3 (db =
     * 3.5/4), sign group 0 = 1 -> ksigns 0x81: elements 0 and 7 negative */
    memset(b, 0, sizeof b);
    b[0] = 0x00; b[1] = 0x3C;
    b[2] = 0; b[3] = 1; b[4] = 2; b[5] = 3;
    uint32_t a1 = (3u << 28) | 1u;
    memcpy(b + 6, &a1, 4);
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ2_XXS, b, 0, 1, y), 0);
    assert_true(y[0] == -7.0f && y[1] == 7.0f && y[7] == -7.0f);
    assert_true(y[8] == 43 * 0.875f && y[9] == 7.0f);   /* grid[1] = ...082b: element 0 is 0x2b */
    /* Q6_K: d 1, scales 1..16, ql 0, qh 0: every q = -32, y = -32 sc */
    memset(b, 0, sizeof b);
    for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(i + 1);
    b[208] = 0x00; b[209] = 0x3C;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_Q6_K, b, 0, 1, y), 0);
    assert_true(y[0] == -32.0f && y[16] == -64.0f && y[255] == -32.0f * 16);
    /* Q5_0, d 1: qh bit 0 (element 0) and bit 16 (element 16) set, qs 0x0F:
     * element 0 = (15 | 16) - 16 = 15, element 16 = (0 | 16) - 16 = 0,
     * element 1 = 15 - 16 = -1 */
    memset(b, 0, sizeof b);
    b[0] = 0x00; b[1] = 0x3C;
    uint32_t qh = 1u | (1u << 16);
    memcpy(b + 2, &qh, 4);
    memset(b + 6, 0x0F, 16);
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_Q5_0, b, 0, 1, y), 0);
    assert_true(y[0] == 15.0f && y[16] == 0.0f && y[1] == -1.0f && y[17] == -16.0f);
    /* undecodable types are refused, sizes are ggml's */
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_Q8_K, b, 0, 1, y), -1);
    assert_int_equal(dsv4q_ggml_decodable(DSV4Q_GGML_Q8_K), 0);
    assert_int_equal(dsv4q_ggml_decodable(DSV4Q_GGML_Q3_K), 1);
    assert_int_equal(dsv4q_ggml_block_bytes(DSV4Q_GGML_Q2_K), 84);
    assert_int_equal(dsv4q_ggml_block_bytes(DSV4Q_GGML_IQ2_XXS), 66);
    assert_int_equal(dsv4q_ggml_row_bytes(DSV4Q_GGML_Q8_0, 64), 68);
    assert_int_equal(dsv4q_ggml_row_bytes(DSV4Q_GGML_Q8_0, 63), 0);
    assert_null(dsv4q_ggml_type_name(33));
}

/* Q3_K and the ternary types, by hand from the block definitions
 * (ggml-common.h block_q3_K, block_tq1_0, block_tq2_0). */
static void test_decode_hand_q3k_tq(void **s)
{
    (void)s;
    uint8_t b[256];
    float y[256];
    /* Q3_K, d = 1 (at byte 108). Scale j: low 4 bits from nibble j/8 of
     * scales[j%8], high 2 bits from bits 2(j/4) of scales[8 + j%4], minus
     * 32. scales[0] = 0x21: j=0 low 1, j=8 low 2; scales[8] = 0x20: j=8
     * high 2 (bits 4-5). So sc0 = 1 - 32 = -31, sc8 = 34 - 32 = 2, every
     * other scale -32. Element 0: qs[0] bits 0-1 = 3, hmask[0] bit 0 set
     * -> q = 3, y = -93. Element 1: q = 0 - 4 -> 124. Element 32 (bits 2-3
     * of qs[0] = 0, hmask[0] bit 1 clear, scale 2 = -32) -> 128. Element
     * 128 (qs[32], hmask bit 4 clear, scale 8) -> 2 * -4 = -8. */
    memset(b, 0, sizeof b);
    b[0] = 0x01;   /* hmask[0] */
    b[32] = 0x03;  /* qs[0] */
    b[96] = 0x21;  /* scales[0] */
    b[104] = 0x20; /* scales[8] */
    b[108] = 0x00;
    b[109] = 0x3C;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_Q3_K, b, 0, 1, y), 0);
    assert_true(y[0] == -93.0f && y[1] == 124.0f && y[32] == 128.0f && y[128] == -8.0f);
    assert_true(y[16] == 128.0f); /* scale 1 = -32, q = -4 */
    /* TQ1_0, d = 1 (at byte 52). A byte holds ceil(v 256 / 243) for the
     * base-3 number v of its trits, first trit most significant; trit k
     * of qs[l] (l < 32) is element 32 k + l, of qs[32 + l] element
     * 160 + 16 k + l, of qh[l] element 240 + 4 k + l; y = trit - 1.
     * Trits (2,0,1,2,1): v = 162 + 0 + 9 + 6 + 1 = 178, byte
     * ceil(178 256 / 243) = 188. qh trits (0,2,2,0): v = 54 + 18 = 72,
     * byte ceil(72 256 / 243) = 76. A zero byte is trits (0,...) -> -1. */
    memset(b, 0, sizeof b);
    b[0] = 188;
    b[32] = 188;
    b[48] = 76;
    b[52] = 0x00;
    b[53] = 0x3C;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_TQ1_0, b, 0, 1, y), 0);
    assert_true(y[0] == 1.0f && y[32] == -1.0f && y[64] == 0.0f && y[96] == 1.0f && y[128] == 0.0f);
    assert_true(y[160] == 1.0f && y[176] == -1.0f && y[192] == 0.0f && y[208] == 1.0f && y[224] == 0.0f);
    assert_true(y[240] == -1.0f && y[244] == 1.0f && y[248] == 1.0f && y[252] == -1.0f);
    assert_true(y[1] == -1.0f && y[255] == -1.0f);
    /* TQ2_0, d = 2 (at byte 64): element 128 n + 32 s + l is bits 2s of
     * qs[32 n + l], minus 1. qs[0] = 0xE4 = 3,2,1,0 from the top:
     * elements 0, 32, 64, 96 = (0, 1, 2, 3) - 1, times 2. */
    memset(b, 0, sizeof b);
    b[0] = 0xE4;
    b[32] = 0x03;
    b[64] = 0x00;
    b[65] = 0x40;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_TQ2_0, b, 0, 1, y), 0);
    assert_true(y[0] == -2.0f && y[32] == 0.0f && y[64] == 2.0f && y[96] == 4.0f);
    assert_true(y[128] == 4.0f && y[160] == -2.0f && y[1] == -2.0f);
}

/* IQ4_NL / IQ4_XS by hand: kvalues_iq4nl is the published table
 * {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}. */
static void test_decode_hand_iq4(void **s)
{
    (void)s;
    uint8_t b[256];
    float y[256];
    /* IQ4_NL, d = 0.5: qs[0] = 0xF0 -> element 0 kv[0] = -127, element 16
     * kv[15] = 113; qs[1] = 0x98 -> element 1 kv[8] = 1, element 17 kv[9] = 13 */
    memset(b, 0, sizeof b);
    b[0] = 0x00;
    b[1] = 0x38;
    b[2] = 0xF0;
    b[3] = 0x98;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ4_NL, b, 0, 1, y), 0);
    assert_true(y[0] == -63.5f && y[16] == 56.5f && y[1] == 0.5f && y[17] == 6.5f && y[2] == -63.5f);
    /* IQ4_XS, d = 1: scale of 32-group ib = (nibble ib of scales_l) |
     * (bits 2ib of scales_h) << 4, minus 32. scales_h = 0x0003, scales_l[0]
     * = 0x21: group 0 = (1 | 3 << 4) - 32 = 17, group 1 = 2 - 32 = -30,
     * groups 2..7 = -32. qs[0] = 0x98: element 0 kv[8] = 1, element 16
     * kv[9] = 13; other codes 0 (kv -127). */
    memset(b, 0, sizeof b);
    b[0] = 0x00;
    b[1] = 0x3C;
    b[2] = 0x03;
    b[3] = 0x00;
    b[4] = 0x21;
    b[8] = 0x98;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ4_XS, b, 0, 1, y), 0);
    assert_true(y[0] == 17.0f && y[16] == 221.0f && y[1] == 17.0f * -127);
    assert_true(y[32] == -30.0f * -127 && y[64] == -32.0f * -127 && y[255] == -32.0f * -127);
}

/* IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S by hand from the block definitions and
 * ggml-common.h's published grids: iq2xs_grid[1] = 0x080808080808082b,
 * iq2xs_grid[511] = 0x2b2b2b2b2b2b2b2b, iq2s_grid[1] = 0x080808080808082b,
 * iq2s_grid[512] = 0x19080819082b1919, iq3xxs_grid[1] = 0x04040414,
 * iq3xxs_grid[255] = 0x3e341c04, iq3s_grid[1] = 0x01010103,
 * iq3s_grid[256] = 0x05090507, every [0] all-minimum (8 or 4 or 1);
 * byte j of an entry is element j. ksigns[1] = 0x81. */
static void test_decode_hand_iq23(void **s)
{
    (void)s;
    uint8_t b[256];
    float y[256];
    /* IQ2_XS, d 1: u16 qs[0] = grid 1 | sign index 1 << 9 (elements 0, 7
     * negative), qs[1] = 511, qs[2] = 0; scales[0] = 0x53: elements 0..15
     * db = (0.5 + 3) / 4 = 0.875, 16..31 db = (0.5 + 5) / 4 = 1.375;
     * scales[1] = 0: db 0.125 */
    memset(b, 0, sizeof b);
    b[1] = 0x3C;
    const uint16_t q2[3] = {1 | 1 << 9, 511, 0};
    memcpy(b + 2, q2, sizeof q2);
    b[66] = 0x53;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ2_XS, b, 0, 1, y), 0);
    assert_true(y[0] == -43 * 0.875f && y[1] == 7.0f && y[7] == -7.0f && y[8] == 43 * 0.875f && y[15] == 43 * 0.875f);
    assert_true(y[16] == 11.0f && y[32] == 1.0f);
    /* IQ2_S, d 1: index 0 = qs[0] 0 | (qh[0] bits 0-1 = 2) << 8 = 512,
     * index 1 = qs[1] 1 | (bits 2-3 = 0) << 8 = 1; sign byte 0 = 0x04
     * (element 2 negative); scales[0] = 1: db = 1.5 / 4 = 0.375 */
    memset(b, 0, sizeof b);
    b[1] = 0x3C;
    b[3] = 1;     /* qs[1] */
    b[34] = 0x04; /* sign byte 0 */
    b[66] = 0x02; /* qh[0] */
    b[74] = 0x01; /* scales[0] */
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ2_S, b, 0, 1, y), 0);
    assert_true(y[0] == 25 * 0.375f && y[1] == 25 * 0.375f && y[2] == -43 * 0.375f && y[3] == 3.0f);
    assert_true(y[7] == 25 * 0.375f && y[8] == 43 * 0.375f && y[9] == 3.0f);
    /* IQ3_XXS, d 1: qs[0] = 1, qs[1] = 255 (4 elements each); u32 0 =
     * scale 1 << 28 | sign index 1: db = 1.5 / 2 = 0.75, elements 0 and 7
     * negative */
    memset(b, 0, sizeof b);
    b[1] = 0x3C;
    b[2] = 1;
    b[3] = 255;
    const uint32_t a3 = 1u << 28 | 1u;
    memcpy(b + 66, &a3, 4);
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ3_XXS, b, 0, 1, y), 0);
    assert_true(y[0] == -15.0f && y[1] == 3.0f && y[4] == 3.0f && y[5] == 21.0f && y[6] == 39.0f && y[7] == -46.5f);
    assert_true(y[8] == 3.0f && y[32] == 4 * 0.25f);
    /* IQ3_S, d 1: index 0 = qs[0] 0 | (qh[0] bit 0) << 8 = 256, index 1 =
     * qs[1] = 1; signs[0] = 0x11 (elements 0, 4 negative); scales[0] = 2:
     * elements 0..31 db = 1 + 2 2 = 5, 32..63 db = 1 */
    memset(b, 0, sizeof b);
    b[1] = 0x3C;
    b[3] = 1;
    b[66] = 0x01;
    b[74] = 0x11;
    b[106] = 0x02;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ3_S, b, 0, 1, y), 0);
    assert_true(y[0] == -35.0f && y[1] == 25.0f && y[2] == 45.0f && y[3] == 25.0f);
    assert_true(y[4] == -15.0f && y[5] == 5.0f && y[8] == 5.0f && y[32] == 1.0f);
}

/* IQ1_S and IQ1_M by hand from the block definitions, with ggml-common.h's
 * published iq1s_grid (bytes are int8 -1/0/+1, byte j = element j):
 * [0] = 0xffffffffffffffff, [1] = 0xffffffffffffff01, [1024] =
 * 0x0000000000ff0100, [2047] = 0x0101010101010101; IQ1S_DELTA = 0.125. */
static void test_decode_hand_iq1(void **s)
{
    (void)s;
    uint8_t b[256];
    float y[256];
    /* IQ1_S, d 1. Group 0: qh[0] = 2 << 12 -> dl = 2 2 + 1 = 5, delta
     * +0.125; indices qs[0] = 0 and qs[1] = 1. Group 1: qh[1] = 0x8007 ->
     * dl 1, delta -0.125, index 0 = qs[4] 0xFF | 7 << 8 = 2047. Group 2:
     * qh[2] = 4 -> index 0 = qs[8] 0 | 4 << 8 = 1024, dl 1, delta +. */
    memset(b, 0, sizeof b);
    b[1] = 0x3C;
    b[3] = 1;
    b[6] = 0xFF;
    const uint16_t h1[3] = {2 << 12, 0x8007, 4};
    memcpy(b + 34, h1, sizeof h1);
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ1_S, b, 0, 1, y), 0);
    assert_true(y[0] == -4.375f && y[7] == -4.375f && y[8] == 5.625f && y[9] == -4.375f);
    assert_true(y[32] == 0.875f && y[39] == 0.875f && y[40] == -1.125f);
    assert_true(y[64] == 0.125f && y[65] == 1.125f && y[66] == -0.875f && y[67] == 0.125f);
    /* IQ1_M: d = 1.0 = 0x3C00 is the top nibbles of the u16 scale words
     * (word w gives bits 4w..4w+3): word 2 = 0xC000, word 3 = 0x3000.
     * Word 0 = 0x000A: 16-element scales s = 2 (elements 0..15, dl 5) and
     * 1 (16..31, dl 3), the rest 0 (dl 1). qh[0] = 0x08: index 0 = qs[0] 0
     * with delta -0.125; index 1 = qs[1] 1, delta +. qh[1] = 0x07: index 2
     * = qs[2] 0xFF | 7 << 8 = 2047, delta +. */
    memset(b, 0, sizeof b);
    b[1] = 1;
    b[2] = 0xFF;
    b[32] = 0x08;
    b[33] = 0x07;
    b[48] = 0x0A;
    b[53] = 0xC0;
    b[55] = 0x30;
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_IQ1_M, b, 0, 1, y), 0);
    assert_true(y[0] == -5.625f && y[7] == -5.625f && y[8] == 5.625f && y[9] == -4.375f);
    assert_true(y[16] == 3.375f && y[23] == 3.375f && y[24] == -2.625f && y[32] == -0.875f);
}

/* NVFP4 by hand: 4 sub-blocks of 16, each scaled by an unsigned E4M3 byte
 * (bias 7) halved, since the E2M1 codes are doubled (kvalues_mxfp4
 * {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ...}). 0x38 = 2^0 -> 0.5; 0x7F is 0;
 * 0x01 = subnormal 1/8 2^-6 -> 2^-10; 0x40 = 2^1 -> 1. Sub-block s holds
 * the low nibbles of qs[8s..8s+7] then their high nibbles. */
static void test_decode_hand_nvfp4(void **s)
{
    (void)s;
    uint8_t b[36] = {0x38, 0x7F, 0x01, 0x40};
    float y[64];
    b[4] = 0x97;  /* element 0: code 7 -> 12, element 8: code 9 -> -1 */
    b[12] = 0x77; /* sub-block 1, scale 0 */
    b[20] = 0x01; /* element 32: code 1 */
    b[28] = 0xF0; /* element 48: code 0, element 56: code 15 -> -12 */
    assert_int_equal(dsv4q_ggml_decode_f32(DSV4Q_GGML_NVFP4, b, 0, 1, y), 0);
    assert_true(y[0] == 6.0f && y[8] == -0.5f && y[1] == 0.0f);
    assert_true(y[16] == 0.0f && y[24] == 0.0f && y[32] == 0x1p-10f && y[48] == 0.0f && y[56] == -12.0f);
}

/* A truncated tensor of a newly decodable type is refused at open, naming
 * the tensor: Q3_K [256, 2] needs 2 blocks of 110 bytes, 150 are there. */
static void test_truncated_q3k(void **s)
{
    (void)s;
    gb b = {0};
    gb_raw(&b, "GGUF", 4);
    gb_u32(&b, 3);
    gb_u64(&b, 1);
    gb_u64(&b, 1);
    kv_str(&b, "general.architecture", "test");
    tinfo(&b, "blk.0.ffn_down.weight", 2, (uint64_t[]){256, 2}, DSV4Q_GGML_Q3_K, 0);
    gb_pad(&b, 32);
    uint8_t data[150] = {0};
    gb_raw(&b, data, sizeof data);
    char err[512];
    assert_int_equal(parse(&b, err, sizeof err), -1);
    assert_non_null(strstr(err, "img.gguf"));
    assert_non_null(strstr(err, "tensor 'blk.0.ffn_down.weight'"));
    assert_non_null(strstr(err, "+220")); /* 2 x 110 bytes expected */
    free(b.p);
}

/* ---- binding -------------------------------------------------------------- */

static void test_name_map(void **s)
{
    (void)s;
    char b[160];
    int e;
    assert_int_equal(dsv4q_gguf_name("embed.weight", b, sizeof b, &e), 0);
    assert_string_equal(b, "token_embd.weight");
    assert_int_equal(dsv4q_gguf_name("layers.3.attn.kv_norm.weight", b, sizeof b, &e), 0);
    assert_string_equal(b, "blk.3.attn_kv_a_norm.weight");
    assert_int_equal(e, -1);
    assert_int_equal(dsv4q_gguf_name("layers.1.ffn.experts.5.w2.weight", b, sizeof b, &e), 0);
    assert_string_equal(b, "blk.1.ffn_down_exps.weight");
    assert_int_equal(e, 5);
    assert_int_equal(dsv4q_gguf_name("layers.1.attn.indexer.compressor.ape", b, sizeof b, &e), 0);
    assert_string_equal(b, "blk.1.indexer_compressor_ape.weight");
    assert_int_equal(dsv4q_gguf_name("layers.1.ffn.experts.5.w4.weight", b, sizeof b, &e), -1);
    assert_int_equal(dsv4q_gguf_name("mtp.0.e_proj.weight", b, sizeof b, &e), -1);
}

static void test_bind_refusals(void **s)
{
    (void)s;
    char path[] = "/tmp/dsv4q_gguf_XXXXXX", err[1024];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    gb b = good_image();   /* architecture "test" */
    assert_int_equal(write(fd, b.p, b.n), (ssize_t)b.n);
    close(fd);
    assert_int_equal(dsv4q_is_gguf(path), 1);
    dsv4q_model *m = NULL;
    assert_int_equal(dsv4q_model_open(&m, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "expected 'deepseek4'"));
    assert_non_null(strstr(err, path));
    unlink(path);
    free(b.p);
}

/* A GGUF checkpoint is pinned as its one file: SHA-256("abc") is the
 * FIPS 180-2 example value. */
static void test_pin_file(void **s)
{
    (void)s;
    char path[] = "/tmp/dsv4q_pin_XXXXXX", err[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    close(fd);
    char *json = NULL;
    assert_int_equal(dsv4q_pin_checkpoint(path, &json, err, sizeof err), 0);
    assert_non_null(strstr(json, "\"gguf_sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\""));
    assert_non_null(strstr(json, "\"total_bytes\":3"));
    free(json);
    unlink(path);
}

/* tests/data/llamacpp/tiny-llamacpp.gguf is `dsv4q synth --config tiny
 * --seed 1` converted by llama.cpp's own convert_hf_to_gguf.py
 * (tests/data/README.md). The converter keeps some tensors exactly (BF16
 * embed, F32 hc/compressor/gate/norms, I32 tid2eid) and repacks the FP4
 * experts to MXFP4, which is lossless (E2M1 x E8M0 = MXFP4's doubled E2M1
 * x 2^(e-128)); FP8 linears become Q8_0 (lossy, not compared). So every
 * routed-expert element, and every exact tensor, must equal the
 * safetensors checkpoint's bit for bit: a check of the converter's repack,
 * our MXFP4 decoder and the binding's stacking/slicing at once. */
static void test_llamacpp_converter_gguf(void **s)
{
    (void)s;
    const char *gp = "tests/data/llamacpp/tiny-llamacpp.gguf";
    char dir[] = "/tmp/dsv4q_gguf_ck_XXXXXX", ck[128], err[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(ck, sizeof ck, "%s/tiny", dir);
    dsv4q_config cfg;
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny", err, sizeof err), 0);
    if (dsv4q_synth_write(&cfg, 1, ck, 1, err, sizeof err)) fail_msg("%s", err);
    dsv4q_model *a = NULL, *b = NULL;
    if (dsv4q_model_open(&a, ck, err, sizeof err)) fail_msg("%s", err);
    if (dsv4q_model_open(&b, gp, err, sizeof err)) fail_msg("%s", err);
    assert_non_null(b->gguf);
    assert_int_equal(b->cfg.n_layers, a->cfg.n_layers);
    assert_int_equal(b->cfg.n_mtp_layers, 0);
    assert_true(b->cfg.norm_eps == a->cfg.norm_eps && b->cfg.hc_eps == a->cfg.hc_eps);
    assert_true(b->cfg.rope_factor == a->cfg.rope_factor && b->cfg.original_seq_len == a->cfg.original_seq_len);
    long n = 0;
    for (int li = 0; li < a->cfg.n_layers; li++) {
        const dsv4q_layer_w *A = &a->layers[li], *B = &b->layers[li];
        for (int e = 0; e < a->cfg.n_routed_experts; e++) {
            const dsv4q_weight *wa[3] = {&A->experts[e].w1, &A->experts[e].w2, &A->experts[e].w3};
            const dsv4q_weight *wb[3] = {&B->experts[e].w1, &B->experts[e].w2, &B->experts[e].w3};
            for (int p = 0; p < 3; p++) {
                assert_int_equal(wa[p]->fmt, DSV4Q_WF_FP4);
                assert_int_equal(wb[p]->out, wa[p]->out);
                assert_int_equal(wb[p]->in, wa[p]->in);
                for (int64_t o = 0; o < wa[p]->out; o++)
                    for (int64_t k = 0; k < wa[p]->in; k++, n++)
                        if (dsv4q_weight_at(wa[p], o, k) != dsv4q_weight_at(wb[p], o, k))
                            fail_msg("layer %d expert %d w%d [%lld, %lld]: FP4 %g, GGUF MXFP4 %g", li, e, p + 1,
                                     (long long)o, (long long)k, dsv4q_weight_at(wa[p], o, k),
                                     dsv4q_weight_at(wb[p], o, k));
            }
        }
        for (int64_t o = 0; o < A->hc_attn_fn.out; o++)
            for (int64_t k = 0; k < A->hc_attn_fn.in; k++)
                assert_true(dsv4q_weight_at(&A->hc_attn_fn, o, k) == dsv4q_weight_at(&B->hc_attn_fn, o, k));
        for (long i = 0; i < A->attn_norm.n; i++) assert_true(A->attn_norm.d[i] == B->attn_norm.d[i]);
        for (long i = 0; i < A->attn_sink.n; i++) assert_true(A->attn_sink.d[i] == B->attn_sink.d[i]);
        if (A->hash)
            assert_memory_equal(A->tid2eid, B->tid2eid,
                                sizeof(int32_t) * (size_t)a->cfg.vocab_size * (size_t)a->cfg.n_activated_experts);
    }
    for (int64_t o = 0; o < a->embed.out; o++)
        for (int64_t k = 0; k < a->embed.in; k++)
            assert_true(dsv4q_weight_at(&a->embed, o, k) == dsv4q_weight_at(&b->embed, o, k));
    printf("llama.cpp converter GGUF: %ld routed-expert values equal the FP4 checkpoint's\n", n);
    assert_true(n > 1000000);
    dsv4q_model_close(a);
    dsv4q_model_close(b);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- interop (driven by tests/interop_gguf.py) ----------------------------
 * Contract: DSV4Q_INTEROP_DIR/from_py.gguf (written by gguf-py) holds, per
 * type T, "q.T" (raw blocks, ne = [block_elems, n_blocks]) and "want.T"
 * (F32, gguf.quants.dequantize of the same bytes). Every q.T row must
 * decode to want.T bit for bit. Prints "interop T: N blocks" per type. */
static void test_interop(void **s)
{
    (void)s;
    const char *dir = getenv("DSV4Q_INTEROP_DIR");
    if (!dir) { skip(); return; }
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/from_py.gguf", dir);
    dsv4q_gguf *g;
    if (dsv4q_gguf_open(&g, path, err, sizeof err)) fail_msg("%s", err);
    int types = 0;
    for (size_t i = 0; i < dsv4q_gguf_count(g); i++) {
        const dsv4q_gguf_tensor *q = dsv4q_gguf_at(g, i);
        if (strncmp(q->name, "q.", 2)) continue;
        char wn[80];
        snprintf(wn, sizeof wn, "want.%s", q->name + 2);
        const dsv4q_gguf_tensor *w = dsv4q_gguf_find(g, wn);
        assert_non_null(w);
        assert_int_equal(w->type, DSV4Q_GGML_F32);
        assert_int_equal(w->numel, q->numel);
        assert_string_equal(dsv4q_ggml_type_name(q->type), q->name + 2);
        const int64_t ne0 = q->ne[0], rows = q->numel / ne0;
        float *y = malloc(sizeof(float) * (size_t)ne0);
        double *yd = malloc(sizeof(double) * (size_t)ne0);
        long diff = 0;
        for (int64_t r = 0; r < rows; r++) {
            assert_int_equal(dsv4q_ggml_row_f32(q->type, q->data, ne0, r, y), 0);
            assert_int_equal(dsv4q_ggml_row_f64(q->type, q->data, ne0, r, yd), 0);
            const float *want = (const float *)w->data + r * ne0;
            for (int64_t k = 0; k < ne0; k++) {
                uint32_t a, c;
                memcpy(&a, &y[k], 4);
                memcpy(&c, &want[k], 4);
                if (a != c && diff++ < 5)
                    fprintf(stderr, "interop %s: row %lld elem %lld: dsv4q %a (0x%08x), gguf.quants %a (0x%08x)\n",
                            q->name + 2, (long long)r, (long long)k, (double)y[k], a, (double)want[k], c);
                if (!(yd[k] == (double)y[k] || (isnan(yd[k]) && isnan(y[k])))) diff++;
            }
        }
        printf("interop %s: %lld blocks, %lld values, %ld differences\n", q->name + 2,
               (long long)(q->numel / dsv4q_ggml_block_elems(q->type)), (long long)q->numel, diff);
        assert_int_equal(diff, 0);
        free(y);
        free(yd);
        types++;
    }
    assert_true(types >= 26);
    dsv4q_gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_image),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_byte_flips),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_open_file_errors),
        cmocka_unit_test(test_decode_hand),
        cmocka_unit_test(test_decode_hand_q3k_tq),
        cmocka_unit_test(test_decode_hand_iq4),
        cmocka_unit_test(test_decode_hand_iq23),
        cmocka_unit_test(test_decode_hand_iq1),
        cmocka_unit_test(test_decode_hand_nvfp4),
        cmocka_unit_test(test_truncated_q3k),
        cmocka_unit_test(test_name_map),
        cmocka_unit_test(test_bind_refusals),
        cmocka_unit_test(test_pin_file),
        cmocka_unit_test(test_llamacpp_converter_gguf),
        cmocka_unit_test(test_interop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
