/*
 * test_long_slice.c - CI sees long positions (issue 30): the long-slice
 * set (cases.h DSV4Q_CASE_SET_LONG_SLICE), one case per attention operator
 * that reads its KV by row index, with a KV of [1048704, 512] F32
 * (2 GiB + 256 KiB) held sparse, so that `make test` can afford it:
 *   - the sparse storage costs what the picked rows do (the process's RSS
 *     grows by a few MB, not 2 GiB), unpicked rows read 0, and the case
 *     picks the rows either side of the int32 byte offset;
 *   - the oracle reads only the rows idx picks (harness/ops dsv4q_op_rows)
 *     and gets the same reference, to the bit, as on the whole KV;
 *   - cpu-ref and oracle-f32 pass the slice; tests/backends/int32_offset.c
 *     (correct attention with `int off = row * D * 4`) passes the Flash
 *     attention cases of the same recipe and fails every case of the slice.
 * Run from the repository root (the plugin is in build/plugins/).
 */
#include "tests/testutil.h"

#include <sys/resource.h>
#include <unistd.h>

#include "gates/gates.h"
#include "harness/cases/cases.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"
#include "oracle/boundary.h"
#include "oracle/ops.h"

#define PLUG(name) DSV4Q_TEST_BUILD "/plugins/" name ".so"
#define SPARSE_KEY "sparse_attn(s=1,H=8,D=512,win=128,sel=512,rows=1048704,sparse=1,recipe=f32,seed=1)"
#define WINDOW_KEY "window_attn_decode(H=8,D=512,win=128,p=4194815,sel=512,rows=1048704,sparse=1,recipe=f32,seed=1)"

static dsv4q_gates G;

static int setup_gates(void **state)
{
    (void)state;
    char err[1024];
    if (dsv4q_gates_load(&G, "gates/default.json", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

/* Resident bytes of this process now (/proc/self/statm, field 2). */
static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
        fclose(f);
    }
    return res * sysconf(_SC_PAGESIZE);
}

/* The slice is exactly one case per operator that reads a KV by row
 * index, each one's KV past 2^31 bytes. */
static void test_slice_set(void **state)
{
    (void)state;
    int n = 0, ns = 0, nw = 0;
    for (int i = 0; i < dsv4q_case_count(); i++) {
        const dsv4q_case_entry *e = dsv4q_case_at(i);
        if (!(e->sets & DSV4Q_CASE_SET_LONG_SLICE)) continue;
        assert_true(e->sets & DSV4Q_CASE_SET_LONG); /* a slice of the long set */
        n++;
        ns += !strcmp(e->key, SPARSE_KEY);
        nw += !strcmp(e->key, WINDOW_KEY);
    }
    assert_int_equal(n, 2);
    assert_int_equal(ns, 1);
    assert_int_equal(nw, 1);
}

/* The sparse KV: 1048704 rows of 512 F32 = 2^31 + 2^18 bytes, a few MB
 * resident; the last row below the int32 byte offset (2^31 / 2048 - 1 =
 * 1048575), the first past it (1048576) and the far end (1048703) picked
 * and holding values; a row nobody picks reads 0. */
static void test_sparse_storage(void **state)
{
    (void)state;
    char err[1024];
    dsv4q_case c;
    const long before = rss_bytes();
    assert_int_equal(dsv4q_case_build(&c, SPARSE_KEY, err, sizeof err), 0);
    const long grown = rss_bytes() - before;
    const dsv4q_bt *kv = &c.in[1];
    assert_int_equal(kv->shape[0], 1048704);
    assert_int_equal(kv->shape[1], 512);
    assert_true(4 * dsv4q_bt_numel(kv) == (INT64_C(1) << 31) + (INT64_C(1) << 18));
    if (grown > 64L << 20) fail_msg("building the sparse case grew RSS by %ld MB (expected a few)", grown >> 20);
    const int32_t *idx = c.in[2].data;
    const long ncols = c.in[2].shape[1];
    int picked[3] = {0, 0, 0};
    const int32_t want[3] = {1048575, 1048576, 1048703};
    for (long j = 0; j < ncols; j++)
        for (int k = 0; k < 3; k++) picked[k] |= idx[j] == want[k];
    const float *k0 = kv->data;
    for (int k = 0; k < 3; k++) {
        if (!picked[k]) fail_msg("row %d is not picked", (int)want[k]);
        double ss = 0;
        for (long d = 0; d < 512; d++) ss += (double)k0[(long)want[k] * 512 + d] * k0[(long)want[k] * 512 + d];
        assert_true(ss > 0);
    }
    /* a row no column picks: search one that is not in idx */
    long free_row = 1048000;
    for (long j = 0; j < ncols; j++)
        if (idx[j] == free_row) free_row++;
    for (long d = 0; d < 512; d++) assert_true(k0[free_row * 512 + d] == 0.0f);
    dsv4q_case_free(&c);
}

/* The adapter gathers the picked rows; the reference must be what the
 * oracle computes over the whole KV, bit for bit: a masked case (columns
 * -1 and >= N, a fully masked query) at the source profile and with the
 * F16 KV cache engine point (which rounds the rows it reads). */
static void test_gather_is_exact(void **state)
{
    (void)state;
    char err[1024];
    const char *decls[2] = {"source", "qat:kv_f16"};
    for (int di = 0; di < 2; di++) {
        uint64_t bs = 0;
        assert_int_equal(dsv4q_declaration_parse(decls[di], &bs, err, sizeof err), 0);
        dsv4q_case c;
        assert_int_equal(
            dsv4q_case_build(&c, "sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=masked,seed=1)", err, sizeof err),
            0);
        const long s = c.in[0].shape[0], H = c.in[0].shape[1], D = c.in[0].shape[2], N = c.in[1].shape[0];
        const long nq = s * H * D, nk = N * D;
        double *got = malloc(sizeof(double) * (size_t)nq), *want = malloc(sizeof(double) * (size_t)nq);
        double *q = malloc(sizeof(double) * (size_t)nq), *kv = malloc(sizeof(double) * (size_t)nk);
        double sink[64];
        assert_non_null(got && want && q && kv);
        for (long i = 0; i < nq; i++) q[i] = ((const float *)c.in[0].data)[i];
        for (long i = 0; i < nk; i++) kv[i] = ((const float *)c.in[1].data)[i];
        for (long h = 0; h < H; h++) sink[h] = ((const float *)c.in[3].data)[h];
        dsv4q_bt out[DSV4Q_OPS_MAX_T];
        dsv4q_bcall call;
        dsv4q_case_call(&c, out, bs, &call);
        void *outs[1] = {got};
        assert_int_equal(dsv4q_oracle_exec(64, bs, &call, outs, err, sizeof err), 0);
        assert_int_equal(dsv4q_sparse_attn_f64(bs, q, s, (int)H, (int)D, kv, N, c.in[2].data, c.in[2].shape[1], sink,
                                               c.param[0], want),
                         0);
        assert_memory_equal(got, want, sizeof(double) * (size_t)nq);
        free(got);
        free(want);
        free(q);
        free(kv);
        dsv4q_case_free(&c);
    }
}

static dsv4q_qualify_opts slice_opts(void)
{
    dsv4q_qualify_opts o = {.gates = &G, .sets = DSV4Q_CASE_SET_LONG_SLICE, .iso = {120, 0}, .quiet = 1};
    return o;
}

/* The correct backends pass the slice, and the whole slice stays cheap:
 * this process's peak RSS (every test above included) and its children's
 * (the forked backends) under 256 MB, where the dense long case took 6 GiB. */
static void test_correct_backends_pass(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[2] = {"cpu-ref", "oracle-f32"};
    dsv4q_qualify_result q[2];
    dsv4q_qualify_opts o = slice_opts();
    assert_int_equal(dsv4q_qualify(spec, 2, &o, q, err, sizeof err), 0);
    for (int b = 0; b < 2; b++) {
        assert_false(q[b].load_failed);
        assert_int_equal(q[b].ncases, 2);
        for (int i = 0; i < q[b].ncases; i++)
            if (q[b].cases[i].verdict != DSV4Q_V_PASS)
                fail_msg("%s %s: %s %s", spec[b], q[b].cases[i].key, dsv4q_verdict_name(q[b].cases[i].verdict),
                         q[b].cases[i].msg);
        assert_int_equal(dsv4q_qualify_status(&q[b]), 0);
        dsv4q_qualify_free(&q[b]);
    }
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    if (self.ru_maxrss > 256L * 1024 || kids.ru_maxrss > 256L * 1024)
        fail_msg("peak RSS %ld MB (children %ld MB): the long slice is not cheap", self.ru_maxrss >> 10,
                 kids.ru_maxrss >> 10);
}

/* The planted int32 byte offset: correct where every KV is under 2^31
 * bytes (the Flash f32 attention cases: the plugin is otherwise right),
 * and not a pass on any case of the slice (it crashes reading 2 GiB before
 * the KV, or reads another tensor's bytes and fails the gates). */
static void test_int32_offset_fails(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("int32_offset")};
    dsv4q_qualify_result q;
    const char *small[3] = {"sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=f32,seed=1)",
                            "window_attn_decode(H=64,D=512,win=128,p=300,sel=512,recipe=f32,seed=1)", NULL};
    dsv4q_qualify_opts o = slice_opts();
    o.keys = small;
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_false(q.load_failed);
    for (int i = 0; i < q.ncases; i++)
        if (q.cases[i].verdict != DSV4Q_V_PASS)
            fail_msg("%s: %s %s (expected pass)", q.cases[i].key, dsv4q_verdict_name(q.cases[i].verdict),
                     q.cases[i].msg);
    dsv4q_qualify_free(&q);

    o = slice_opts();
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_false(q.load_failed);
    assert_int_equal(q.ncases, 2);
    for (int i = 0; i < q.ncases; i++) {
        const dsv4q_qcase *r = &q.cases[i];
        if (r->verdict != DSV4Q_V_FAIL && r->verdict != DSV4Q_V_ERROR)
            fail_msg("%s: %s, expected FAIL or ERROR (int32 byte offset)", r->key, dsv4q_verdict_name(r->verdict));
        fprintf(stderr, "int32_offset %s: %s %s\n", r->key, dsv4q_verdict_name(r->verdict), r->msg);
    }
    assert_int_equal(dsv4q_qualify_status(&q), 1);
    dsv4q_qualify_free(&q);
}

int main(void)
{
    /* clang-format off */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_set),
        cmocka_unit_test(test_sparse_storage),
        cmocka_unit_test(test_gather_is_exact),
        cmocka_unit_test(test_correct_backends_pass),
        cmocka_unit_test(test_int32_offset_fails),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, setup_gates, NULL);
}
