/*
 * test_v41_rng.c - oracle/pcg64 reproduces numpy's default_rng stream.
 *
 * Every expected value below was printed by numpy 2.4.6 (build/venv after
 * `make pydeps`), never by the code under test. The generating lines:
 *
 *   import numpy as np; I = np.iinfo(np.int64)
 *   np.random.SeedSequence(s).generate_state(8)             # ss_vectors
 *   np.random.PCG64(s).random_raw(4)                         # raw_vectors
 *   b = max(1, (I.max // V) // 2)                            # engram bound
 *   np.random.default_rng(10007*L).integers(low=0, high=b, size=(4,),
 *                                           dtype=np.int64)  # engram_draws
 *   np.random.default_rng(7).integers(0, 10, size=8, dtype=np.int64)
 *   np.random.default_rng(8).integers(-5, 2**32-5, size=6, dtype=np.int64)
 *   np.random.default_rng(9).integers(0, 2**32+1, size=6, dtype=np.int64)
 *   np.random.default_rng(10).integers(-2**63, 2**63-1, size=4, dtype=np.int64)
 *   np.random.default_rng(11).integers(3, 4, size=3, dtype=np.int64)
 *   g = np.random.default_rng(12); g.integers(0, 1000, size=3, ...);
 *       g.integers(0, 2**40, size=2, ...); g.integers(0, 1000, size=3, ...)
 *
 * Together they cover every branch of pcg64.h R1..R4: one-, two- and
 * three-word seeds, the 128-bit seeding and XSL-RR output, the 32-bit
 * Lemire path (and its buffered half-draws carried across calls), the
 * rng == 2^32-1 path, the 64-bit Lemire path with negative lows, and the
 * empty range. tests/interop_numpy_rng.py checks hundreds more seeds and
 * bounds against numpy itself when numpy is installed.
 */
#include "tests/testutil.h"
#include "oracle/pcg64.h"

/* R1: seed words, little-endian uint32. */
static void ss_vectors(void **state)
{
    (void)state;
    static const struct { uint32_t w[3]; size_t n; uint32_t want[8]; } v[] = {
        {{0}, 1, {0xb0f478be, 0xdb2cd7e7, 0x2c71ba49, 0xabf4641a, 0x9d7b8d41, 0x20c6ed6d, 0x223c39d4, 0x2c4099de}},
        {{1}, 1, {0x6d6791ff, 0x672d8ee5, 0x4eb1072c, 0x8ae19ca1, 0x1322fc4a, 0x4915796d, 0xaba049bd, 0xd0cc2bdc}},
        {{20014}, 1,
         {0xdc00c949, 0x9c2f7b93, 0x9291e7e6, 0xf0bfc83a, 0x0174e31d, 0xd07b5e97, 0x103ca82b, 0x159d6098}},
        /* 2**64 - 1 */
        {{0xFFFFFFFFu, 0xFFFFFFFFu}, 2,
         {0x928cad0d, 0xaebca151, 0x8638dc7a, 0x119c3044, 0x59e642a7, 0x1bbb1556, 0xe8c4a8f6, 0xa76b11e3}},
        /* 2**70 + 3 = words {3, 0, 64} */
        {{3, 0, 64}, 3, {0x5e0b88e4, 0x449916e4, 0x996cf1c2, 0xa7cf3269, 0x2c111b5e, 0x9f822a5f, 0x50d24d0c, 0x70f529c3}},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint32_t pool[DSV4Q_SEEDSEQ_POOL], got[8];
        dsv4q_seedseq_pool(pool, v[i].w, v[i].n);
        dsv4q_seedseq_generate(pool, got, 8);
        for (int k = 0; k < 8; k++) assert_int_equal(got[k], v[i].want[k]);
    }
}

/* R2, R3: PCG64.random_raw. */
static void raw_vectors(void **state)
{
    (void)state;
    static const struct { uint64_t seed; uint64_t want[4]; } v[] = {
        {0, {0xa30febcfd9c2825full, 0x4510bdf882d9d721ull, 0x0a7d3da94ecde8b8ull, 0x043b27b61342f01dull}},
        {20014, {0xd26c38b1a43ef95aull, 0x66083b28e7b16e3dull, 0x3e49d20d3dcf0fd9ull, 0xc471627f17fad571ull}},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        dsv4q_pcg64 g;
        dsv4q_pcg64_seed_u64(&g, v[i].seed);
        for (int k = 0; k < 4; k++) assert_true(dsv4q_pcg64_next64(&g) == v[i].want[k]);
    }
}

/* R4, 64-bit Lemire: exactly the draws compute_hash_multipliers makes. */
static void engram_draws(void **state)
{
    (void)state;
    static const struct { int64_t V; int L; int64_t bound; int64_t want[4]; } v[] = {
        {321, 2, 14366623110365694, {11808844533540166, 5726005793266534, 3495599266327724, 11024301714801294}},
        {321, 5, 14366623110365694, {5618555492104066, 4777237652395172, 3143558829036603, 10172600685613764}},
        {99092, 1, 46539438283891, {38316048023122, 2419938046656, 17979836159674, 36993668729195}},
        {99092, 14, 46539438283891, {33858405369630, 25755403400457, 15460673601360, 41309613242795}},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_true((INT64_MAX / v[i].V) / 2 == v[i].bound);
        dsv4q_pcg64 g;
        dsv4q_pcg64_seed_u64(&g, 10007u * (uint64_t)v[i].L);
        int64_t got[4];
        assert_int_equal(dsv4q_rng_integers_i64(&g, 0, v[i].bound, 4, got), 0);
        for (int k = 0; k < 4; k++) assert_true(got[k] == v[i].want[k]);
    }
}

static void draws(uint64_t seed, int64_t lo, int64_t hi, size_t n, const int64_t *want)
{
    dsv4q_pcg64 g;
    dsv4q_pcg64_seed_u64(&g, seed);
    int64_t got[16];
    assert_int_equal(dsv4q_rng_integers_i64(&g, lo, hi, n, got), 0);
    for (size_t k = 0; k < n; k++) {
        if (got[k] != want[k]) printf("seed %llu draw %zu: %lld, numpy %lld\n", (unsigned long long)seed, k,
                                      (long long)got[k], (long long)want[k]);
        assert_true(got[k] == want[k]);
    }
}

/* R4, every other branch. */
static void other_ranges(void **state)
{
    (void)state;
    draws(7, 0, 10, 8, (const int64_t[]){9, 6, 6, 8, 5, 7, 8, 2});                                /* 32-bit Lemire */
    draws(8, -5, (INT64_C(1) << 32) - 5, 6,                                                          /* rng = 2^32-1 */
          (const int64_t[]){3090441199, 1404335229, 1007194996, 4240321749, 756055008, 1368852623});
    draws(9, 0, (INT64_C(1) << 32) + 1, 6,                                                           /* rng = 2^32 */
          (const int64_t[]){3737691871, 1231870533, 2590501579, 3339483458, 3075517116, 3931527681});
    draws(10, INT64_MIN, INT64_MAX, 4,
          (const int64_t[]){8411746834699725207, -5392318837559999169, 6058738740978165076,
                            -6469602917580736921});
    draws(11, 3, 4, 3, (const int64_t[]){3, 3, 3});                                                  /* rng = 0 */
}

/* R3: the 32-bit half-draw buffer lives in the generator across calls. */
static void buffer_carries(void **state)
{
    (void)state;
    dsv4q_pcg64 g;
    dsv4q_pcg64_seed_u64(&g, 12);
    int64_t a[3], b[2], c[3];
    assert_int_equal(dsv4q_rng_integers_i64(&g, 0, 1000, 3, a), 0);
    assert_int_equal(dsv4q_rng_integers_i64(&g, 0, INT64_C(1) << 40, 2, b), 0);
    assert_int_equal(dsv4q_rng_integers_i64(&g, 0, 1000, 3, c), 0);
    const int64_t wa[3] = {612, 250, 972}, wb[2] = {208159964176, 197132990515}, wc[3] = {946, 581, 349};
    for (int k = 0; k < 3; k++) assert_true(a[k] == wa[k] && c[k] == wc[k]);
    for (int k = 0; k < 2; k++) assert_true(b[k] == wb[k]);
}

static void empty_range_refused(void **state)
{
    (void)state;
    dsv4q_pcg64 g;
    dsv4q_pcg64_seed_u64(&g, 1);
    int64_t x = 42;
    assert_int_equal(dsv4q_rng_integers_i64(&g, 5, 5, 1, &x), -1);
    assert_int_equal(dsv4q_rng_integers_i64(&g, 6, 5, 1, &x), -1);
    assert_true(x == 42);
}

/* Driven by tests/interop_numpy_rng.py: DSV4Q_RNG_VECTORS names a file of
 * lines "seed_words... ; low high n ; v_1 ... v_n" that numpy wrote; every
 * line must be reproduced. Skipped when the variable is not set. */
static void numpy_vector_file(void **state)
{
    (void)state;
    const char *path = getenv("DSV4Q_RNG_VECTORS");
    if (!path) skip();
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[8192];
    long lines = 0, draws_ok = 0;
    while (fgets(line, sizeof line, f)) {
        uint32_t w[8];
        size_t nw = 0;
        char *p = line, *end;
        while (*p && *p != ';') {
            unsigned long long x = strtoull(p, &end, 10);
            if (end == p) { p++; continue; }
            assert_true(nw < 8);
            w[nw++] = (uint32_t)x;
            p = end;
        }
        assert_true(*p == ';' && nw >= 1);
        p++;
        long long lo = strtoll(p, &end, 10), hi = strtoll(end, &end, 10);
        long n = strtol(end, &end, 10);
        assert_true(*end == ' ' || *end == ';');
        while (*end == ' ') end++;
        assert_true(*end == ';');
        p = end + 1;
        assert_true(n >= 1 && n <= 64);
        dsv4q_pcg64 g;
        dsv4q_pcg64_seed(&g, w, nw);
        int64_t got[64];
        assert_int_equal(dsv4q_rng_integers_i64(&g, lo, hi, (size_t)n, got), 0);
        for (long k = 0; k < n; k++) {
            long long want = strtoll(p, &end, 10);
            assert_true(end != p);
            p = end;
            if (got[k] != want) printf("line %ld draw %ld: %lld, numpy %lld\n", lines + 1, k, (long long)got[k], want);
            assert_true(got[k] == want);
            draws_ok++;
        }
        lines++;
    }
    fclose(f);
    printf("numpy vectors: %ld lines, %ld draws equal\n", lines, draws_ok);
    assert_true(lines > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ss_vectors),        cmocka_unit_test(raw_vectors),     cmocka_unit_test(engram_draws),
        cmocka_unit_test(other_ranges),      cmocka_unit_test(buffer_carries), cmocka_unit_test(empty_range_refused),
        cmocka_unit_test(numpy_vector_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
