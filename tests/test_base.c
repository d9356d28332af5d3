/*
 * test_base.c - base/util.h (the shared small helpers) and harness/measure/verdict.h
 * (the one judge). Expected values are hand-computed from IEEE 754 bit
 * patterns and the gate formula of docs/gates.md, not taken from the code.
 */
#include "tests/testutil.h"
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/util.h"
#include "harness/measure/verdict.h"
#include "oracle/stages.h"

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_ordinals(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_ord32(1.0f), 0x3f800000);            /* bits of 1.0 */
    assert_int_equal(dsv4q_ord32(0.0f), 0);
    assert_int_equal(dsv4q_ord32(-0.0f), 0);                    /* +0 and -0 coincide */
    assert_int_equal(dsv4q_ord32(f_of(0x80000001u)), -1);       /* -min denormal */
    assert_int_equal(dsv4q_ord32(f_of(0x3f800001u)) - dsv4q_ord32(1.0f), 1);
    assert_int_equal(dsv4q_ord32(-1.0f), -0x3f800000);
    assert_int_equal(dsv4q_ord16(0x3f80), 0x3f80);              /* BF16 1.0 */
    assert_int_equal(dsv4q_ord16(0x8001), -1);
    assert_int_equal(dsv4q_ord16(0x8000), 0);
    /* ULPs: 1.0 vs the next BF16 up (1 + 2^-7) is one BF16 ulp, 65536 F32 ulps */
    assert_true(dsv4q_ulp_in(DSV4Q_BT_BF16, 1.0 + 0x1p-7, 1.0) == 1.0);
    assert_true(dsv4q_ulp_in(DSV4Q_BT_F32, 1.0 + 0x1p-7, 1.0) == 65536.0);
    assert_true(isinf(dsv4q_ulp_in(DSV4Q_BT_F32, NAN, 1.0)));
    assert_true(dsv4q_ulp_in(DSV4Q_BT_F32, 2.5, 2.5) == 0.0);
}

static void test_errf_json_timer(void **state)
{
    (void)state;
    char e[8];
    assert_int_equal(dsv4q_errf(e, sizeof e, "%s=%d", "abc", 12345), -1);
    assert_string_equal(e, "abc=123");                          /* truncated, terminated */
    assert_int_equal(dsv4q_errf(NULL, 0, "x"), -1);             /* no buffer: still -1 */
    json_t *n = dsv4q_json_num(NAN), *i = dsv4q_json_num(-INFINITY), *r = dsv4q_json_num(0.25);
    assert_true(json_is_null(n));
    assert_string_equal(json_string_value(i), "-inf");
    assert_true(json_real_value(r) == 0.25);
    json_decref(n); json_decref(i); json_decref(r);
    double t0 = dsv4q_now_s(), t1 = dsv4q_now_s();
    assert_true(t1 >= t0);                                      /* monotonic */
}

static void test_mkdir_p(void **state)
{
    (void)state;
    char d[256], f[300];
    snprintf(d, sizeof d, "/tmp/dsv4q-test-base-%d/a/b/c", (int)getpid());
    assert_int_equal(dsv4q_mkdir_p(d), 0);
    struct stat sb;
    assert_int_equal(stat(d, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(dsv4q_mkdir_p(d), 0);                      /* exists: fine */
    snprintf(f, sizeof f, "%s/file", d);
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    fclose(fp);
    errno = 0;
    assert_int_equal(dsv4q_mkdir_p(f), -1);                     /* a file is in the way */
    assert_int_equal(errno, ENOTDIR);
    unlink(f);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/dsv4q-test-base-%d", (int)getpid());
    assert_int_equal(system(cmd), 0);
}

static void test_judge(void **state)
{
    (void)state;
    /* bound = factor*level + floor + floor_u*u(BF16 = 2^-8): 2*0.01 + 0.001 + 1*2^-8 */
    dsv4q_gate_rule r = {1, 2.0, 0.001, {1.0, 0, 0}};
    const double b = 2 * 0.01 + 0.001 + 0x1p-8;
    dsv4q_judgement j = dsv4q_judge(&r, b, 0.01, DSV4Q_BT_BF16);
    assert_true(j.gated && j.pass && fabs(j.bound - b) < 1e-15);
    j = dsv4q_judge(&r, b * 1.0001, 0.01, DSV4Q_BT_BF16);
    assert_true(j.gated && !j.pass);
    j = dsv4q_judge(&r, NAN, 0.01, DSV4Q_BT_BF16);              /* G2: NaN never passes */
    assert_false(j.pass);
    r.on = 0;
    j = dsv4q_judge(&r, 1e9, 0.01, DSV4Q_BT_BF16);              /* G1: reported, not judged */
    assert_true(!j.gated && j.pass);
    j = dsv4q_judge(NULL, 1e9, 0.01, DSV4Q_BT_BF16);
    assert_true(!j.gated && j.pass && isnan(j.bound));
}

/* The stage table's links: every stage has a tap of DSV4Q_TAP_LIST and a
 * gate operator of DSV4Q_OP_LIST (hand-read from oracle/stages.c: attn is
 * bounded by sparse_attn's rules, moe by expert's). */
static void test_stage_links(void **state)
{
    (void)state;
    char err[256] = "";
    assert_int_equal(dsv4q_stage_gates_check(err, sizeof err), 0);
    assert_int_equal(dsv4q_stage_gate_op(DSV4Q_STAGE_ATTN), DSV4Q_OP_SPARSE_ATTN);
    assert_int_equal(dsv4q_stage_gate_op(DSV4Q_STAGE_MOE), DSV4Q_OP_EXPERT);
    assert_int_equal(dsv4q_stage_gate_op(DSV4Q_STAGE_COUNT), -1);
    assert_int_equal(dsv4q_tap_find("idx_topk"), DSV4Q_TAP_IDX_TOPK);
    assert_true(dsv4q_tap_is_selection(DSV4Q_TAP_MOE_IDX) && !dsv4q_tap_is_selection(DSV4Q_TAP_Q));
    assert_int_equal(dsv4q_tap_find("nope"), -1);
    /* forward order for 3 layers: embed, 3 x 8 per-layer stages, head, mtp = 27 slots */
    assert_int_equal(dsv4q_stage_nslots(3), 27);
    int st = -9, l = -9;
    assert_int_equal(dsv4q_stage_slot(3, 0, &st, &l), 0);
    assert_true(st == DSV4Q_STAGE_EMBED && l == -1);
    assert_int_equal(dsv4q_stage_slot(3, 1 + 8 + 2, &st, &l), 0);      /* layer 1's third stage */
    assert_true(st == DSV4Q_STAGE_ATTN && l == 1);
    assert_int_equal(dsv4q_stage_slot(3, 25, &st, &l), 0);
    assert_true(st == DSV4Q_STAGE_HEAD && l == -1);
    assert_int_equal(dsv4q_stage_slot(3, 26, &st, &l), 0);
    assert_true(st == DSV4Q_STAGE_MTP && l == -1);
    assert_int_equal(dsv4q_stage_slot(3, 27, &st, &l), -1);
    for (long i = 0; i < 27; i++) {                                     /* slot_of inverts slot */
        assert_int_equal(dsv4q_stage_slot(3, i, &st, &l), 0);
        assert_int_equal(dsv4q_stage_slot_of(3, st, l), i);
    }
    assert_int_equal(dsv4q_stage_slot_of(3, DSV4Q_STAGE_ATTN, 3), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordinals),
        cmocka_unit_test(test_errf_json_timer),
        cmocka_unit_test(test_mkdir_p),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_stage_links),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
