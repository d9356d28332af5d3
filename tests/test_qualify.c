/*
 * test_qualify.c - the qualification harness: case table, oracle-f32 as a
 * backend (it IS the rounding level), plugins through dlopen, malformed
 * and misbehaving plugins (missing symbol, wrong ABI, crashing entry
 * point, crashing run, hang, buffer overrun), the selection rule, gate
 * file errors, and the CLI's exit statuses.
 *
 * The plugins are tests/backends/ sources, built into build/plugins/ by
 * `make test`; the tests run from the repository root (as `make test`
 * does). Numbers cited: cases.h K1-K3, isolate.h I1-I4, gates.h G1-G2.
 */
#include "tests/testutil.h"

#include <sys/wait.h>
#include <unistd.h>

#include "gates/gates.h"
#include "harness/ops/ops.h"
#include "harness/cases/cases.h"
#include "harness/ops/ops.h"
#include "harness/measure/metrics.h"
#include "harness/qualify/qualify.h"

#define PLUG(name) DSV4Q_TEST_BUILD "/plugins/" name ".so"

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

static dsv4q_qualify_opts opts(uint64_t ops, double timeout)
{
    dsv4q_qualify_opts o = {
        .gates = &G, .sets = DSV4Q_CASE_SET_FLASH | DSV4Q_CASE_SET_FLASH41, .ops = ops, .iso = {timeout, 0}, .quiet = 1};
    return o;
}

/* ---- case table (K1, K2) ----------------------------------------------- */

static void test_case_table(void **state)
{
    (void)state;
    char err[1024], canon[DSV4Q_CASE_KEY_MAX], again[DSV4Q_CASE_KEY_MAX];
    unsigned flash_ops = 0, pro_ops = 0;
    for (int i = 0; i < dsv4q_case_count(); i++) {
        const dsv4q_case_entry *e = dsv4q_case_at(i);
        assert_int_equal(dsv4q_case_canon(e->key, canon, sizeof canon, err, sizeof err), 0);
        assert_string_equal(canon, e->key);   /* K1: the table is canonical */
        assert_int_equal(dsv4q_case_canon(canon, again, sizeof again, err, sizeof err), 0);
        assert_string_equal(again, canon);
        char op[32];
        snprintf(op, sizeof op, "%.*s", (int)strcspn(e->key, "("), e->key);
        int o = dsv4q_op_find(op);
        assert_true(o >= 0);
        if (e->sets & (DSV4Q_CASE_SET_FLASH | DSV4Q_CASE_SET_FLASH41)) flash_ops |= 1u << o;
        if (e->sets & DSV4Q_CASE_SET_PRO) pro_ops |= 1u << o;
    }
    /* every operator has Flash or V4.1 Flash cases (the CI suite covers the ABI) */
    assert_int_equal(flash_ops, (1u << DSV4Q_OP_COUNT) - 1);
    assert_true(pro_ops != 0);
}

/* The contract table is generated from DSV4Q_OP_LIST; each row's prose must
 * document exactly the list's arity (a DOC_ row with one tensor too few
 * fails here), and the arity must match what the ABI header's comment and
 * the v1 plugins rely on (linear 2/1/2, hc_pre 4/3/3: hand-read from the
 * contract in abi/dsv4q_backend.h). */
static void test_op_table_generated(void **state)
{
    (void)state;
    char err[256] = "";
    assert_int_equal(dsv4q_op_table_check(err, sizeof err), 0);
    const dsv4q_op_info *l = dsv4q_op_get(DSV4Q_OP_LINEAR), *h = dsv4q_op_get(DSV4Q_OP_HC_PRE);
    assert_string_equal(l->name, "linear");
    assert_true(l->nin == 2 && l->nout == 1 && l->nparam == 2);
    assert_true(h->nin == 4 && h->nout == 3 && h->nparam == 3);
    assert_int_equal(dsv4q_op_find("window_attn_decode"), 16);
    assert_null(dsv4q_op_get(DSV4Q_OP_COUNT));
}

static void test_case_build_and_keys(void **state)
{
    (void)state;
    char err[1024];
    dsv4q_case a, b;
    /* partial keys take the op's defaults; the result is canonical */
    assert_int_equal(dsv4q_case_build(&a, "topk(recipe=ties)", err, sizeof err), 0);
    assert_string_equal(a.key, "topk(rows=2,T=16384,k=512,recipe=ties,seed=1)");
    const dsv4q_op_info *oi = dsv4q_op_get(a.op);
    assert_int_equal(a.nin, oi->nin);
    assert_int_equal(a.nout, oi->nout);
    assert_int_equal(a.nparam, oi->nparam);
    /* K2: the same key gives the same bytes; another seed does not */
    assert_int_equal(dsv4q_case_build(&b, "topk(rows=2,T=16384,k=512,recipe=ties,seed=1)", err, sizeof err), 0);
    assert_memory_equal(a.in[0].data, b.in[0].data, 4 * 2 * 16384);
    dsv4q_case_free(&b);
    assert_int_equal(dsv4q_case_build(&b, "topk(recipe=ties,seed=2)", err, sizeof err), 0);
    assert_true(memcmp(a.in[0].data, b.in[0].data, 4 * 2 * 16384) != 0);
    dsv4q_case_free(&b);
    dsv4q_case_free(&a);
    /* errors name the problem */
    assert_int_equal(dsv4q_case_build(&a, "nosuchop(x=1)", err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown operator 'nosuchop'"));
    assert_int_equal(dsv4q_case_build(&a, "rmsnorm(rows=2,dd=3)", err, sizeof err), -1);
    assert_non_null(strstr(err, "no parameter 'dd'"));
    assert_int_equal(dsv4q_case_build(&a, "rmsnorm(recipe=ties)", err, sizeof err), -1);
    assert_non_null(strstr(err, "recipe 'ties' is not defined for rmsnorm"));
    /* K3: activations are BF16-representable; FP4 weights decode exactly */
    assert_int_equal(dsv4q_case_build(&a, "expert(n=1,d=256,I=128)", err, sizeof err), 0);
    const float *x = a.in[0].data;
    for (int i = 0; i < 256; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        assert_int_equal(u & 0xFFFF, 0);
    }
    assert_int_equal(a.in[1].raw_dtype, DSV4Q_BT_I8);
    assert_int_equal(a.in[1].raw_shape[1], 128);
    dsv4q_case_free(&a);
}

/* Every table case builds and its reference runs at both widths. */
static void test_every_case_builds(void **state)
{
    (void)state;
    char err[1024];
    for (int i = 0; i < dsv4q_case_count(); i++) {
        const dsv4q_case_entry *e = dsv4q_case_at(i);
        if (!(e->sets & (DSV4Q_CASE_SET_FLASH | DSV4Q_CASE_SET_FLASH41))) continue;
        dsv4q_case c;
        if (dsv4q_case_build(&c, e->key, err, sizeof err)) fail_msg("%s", err);
        dsv4q_case_free(&c);
    }
}

/* ---- oracle-f32 behind the ABI ----------------------------------------- */

/* oracle-f32 is the level: every measured value equals its level, so it
 * passes any gate with factor >= 1 (ratio 1), on every Flash case. */
static void test_oracle_f32_is_the_level(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {"oracle-f32"};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(0, 300);
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_false(q.load_failed);
    assert_true(q.ncases >= 40);
    for (int i = 0; i < q.ncases; i++) {
        const dsv4q_qcase *r = &q.cases[i];
        if (r->verdict != DSV4Q_V_PASS) fail_msg("%s: %s %s", r->key, dsv4q_verdict_name(r->verdict), r->msg);
        for (int m = 0; m < DSV4Q_M_COUNT; m++) {
            const dsv4q_qrow *w = &r->row[m];
            if (w->out < 0 || m == DSV4Q_M_RERUN) continue;
            if (!(w->value == w->level || (isnan(w->value) && isnan(w->level))))
                fail_msg("%s %s: value %.17g != level %.17g", r->key, dsv4q_metric_name(m), w->value, w->level);
        }
    }
    assert_int_equal(dsv4q_qualify_status(&q), 0);
    dsv4q_qualify_free(&q);
}

/* ---- plugins ----------------------------------------------------------- */

static void test_plugin_good(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("good")};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_HC_POST) | DSV4Q_CAP(DSV4Q_OP_TOPK) |
                             DSV4Q_CAP(DSV4Q_OP_HADAMARD), 60);
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    if (q.load_failed) fail_msg("%s", q.msg);
    assert_string_equal(q.desc.name, "test-good");
    assert_true(q.desc.is_path);
    long tie_flips = 0;
    int nskip = 0;
    for (int i = 0; i < q.ncases; i++) {
        const dsv4q_qcase *r = &q.cases[i];
        if (r->op == DSV4Q_OP_HADAMARD) {   /* not in caps: skipped, never called */
            assert_int_equal(r->verdict, DSV4Q_V_SKIP);
            nskip++;
            continue;
        }
        if (r->verdict != DSV4Q_V_PASS) fail_msg("%s: %s %s", r->key, dsv4q_verdict_name(r->verdict), r->msg);
        if (r->op == DSV4Q_OP_RMSNORM) assert_int_equal(r->dtype[0], DSV4Q_BT_BF16);   /* ABI option (b) */
        if (r->op == DSV4Q_OP_TOPK && strstr(r->key, "ties")) tie_flips += r->tie_flips;
    }
    assert_true(nskip > 0);
    /* the plugin breaks ties the other way: legitimate swaps, counted */
    assert_true(tie_flips > 0);
    assert_int_equal(dsv4q_qualify_status(&q), 0);
    dsv4q_qualify_free(&q);
}

static void test_plugin_off_by_one_fails_on_rmsnorm_only(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("off_by_one")};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(0, 60);
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_false(q.load_failed);
    int fails = 0, passes = 0;
    for (int i = 0; i < q.ncases; i++) {
        const dsv4q_qcase *r = &q.cases[i];
        if (r->op == DSV4Q_OP_RMSNORM) {
            assert_int_equal(r->verdict, DSV4Q_V_FAIL);
            assert_true(r->row[DSV4Q_M_NRMS].gated && !r->row[DSV4Q_M_NRMS].pass);
            fails++;
        } else if (r->op == DSV4Q_OP_HC_POST) {
            assert_int_equal(r->verdict, DSV4Q_V_PASS);
            passes++;
        } else {
            assert_int_equal(r->verdict, DSV4Q_V_SKIP);
        }
    }
    assert_true(fails >= 3 && passes >= 1);
    assert_int_equal(dsv4q_qualify_status(&q), 1);
    dsv4q_qualify_free(&q);
}

/* Load failures: the probe reports, the harness survives (I1). */
static void expect_load_error(const char *plugin, const char *needle)
{
    char err[1024];
    const char *spec[1] = {plugin};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_RMSNORM), 10);
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_true(q.load_failed);
    if (!strstr(q.msg, needle)) fail_msg("%s: message '%s' lacks '%s'", plugin, q.msg, needle);
    assert_int_equal(dsv4q_qualify_status(&q), 2);
    dsv4q_qualify_free(&q);
}

static void test_malformed_plugins(void **state)
{
    (void)state;
    expect_load_error(PLUG("bad_abi"), "ABI version 99, this harness speaks versions 1 and 2");
    expect_load_error(PLUG("no_entry"), "does not export dsv4q_backend_entry");
    expect_load_error(PLUG("crash_entry"), "crashed with signal 11 (SIGSEGV) in dsv4q_backend_entry()");
    expect_load_error("build/plugins/does_not_exist.so", "cannot load");
    expect_load_error("no-such-builtin", "unknown backend 'no-such-builtin'");
    /* init() fails (a GPU backend without a GPU): cannot run here, exit 2,
     * after the first case instead of an ERROR per case */
    expect_load_error(PLUG("init_fail"), "init failed: no CUDA device (test plugin)");
}

/* Misbehaving run(): a per-case ERROR with a clear message (I2, I4). */
static void expect_run_error(const char *plugin, double timeout, const char *needle)
{
    char err[1024];
    const char *spec[1] = {plugin};
    const char *keys[2] = {"rmsnorm(rows=2,d=512)", NULL};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(0, timeout);
    o.keys = keys;
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_false(q.load_failed);
    assert_int_equal(q.ncases, 1);
    assert_int_equal(q.cases[0].verdict, DSV4Q_V_ERROR);
    if (!strstr(q.cases[0].msg, needle)) fail_msg("%s: message '%s' lacks '%s'", plugin, q.cases[0].msg, needle);
    assert_non_null(strstr(q.cases[0].msg, "rmsnorm(rows=2,d=512,recipe=normal,seed=1)"));
    assert_int_equal(dsv4q_qualify_status(&q), 1);
    dsv4q_qualify_free(&q);
}

static void test_crash_hang_overrun(void **state)
{
    (void)state;
    expect_run_error(PLUG("crash"), 30, "crashed with signal 11 (SIGSEGV) in run() (op rmsnorm");
    expect_run_error(PLUG("hang"), 1, "timed out after 1 s in run() (op rmsnorm");
    expect_run_error(PLUG("overrun"), 30, "wrote past the end of output y");
}

/* Several backends in one pass share the references; results are per
 * backend and independent of the company they keep. */
static void test_multi_backend(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[3] = {PLUG("good"), PLUG("bad_abi"), "oracle-f32"};
    dsv4q_qualify_result q[3];
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_HC_POST), 60);
    assert_int_equal(dsv4q_qualify(spec, 3, &o, q, err, sizeof err), 0);
    assert_int_equal(dsv4q_qualify_status(&q[0]), 0);
    assert_int_equal(dsv4q_qualify_status(&q[1]), 2);
    assert_int_equal(dsv4q_qualify_status(&q[2]), 0);
    for (int i = 0; i < 3; i++) dsv4q_qualify_free(&q[i]);
}

/* ---- selection rule ---------------------------------------------------- */

static void test_selection_tie_rule(void **state)
{
    (void)state;
    /* scores of 8 candidates; k = 3; the reference picks {0, 1, 2} with
     * the cut value 5 shared by 2, 3, 4 (a tie-run straddling the cut) */
    const double sc[8] = {9, 7, 5, 5, 5, 1, 0, -1};
    const int32_t ref[3] = {0, 1, 2};
    dsv4q_mset m;
    const int32_t same[3] = {2, 0, 1};   /* order does not matter */
    dsv4q_mset_init(&m);
    dsv4q_metrics_sel(&m, same, ref, 1, 3, sc, 8);
    assert_true(m.v[DSV4Q_M_FLIPS] == 0 && m.tie_flips == 0 && m.v[DSV4Q_M_JACCARD_DIST] == 0);
    const int32_t tie[3] = {0, 1, 4};    /* swap inside the tie-run: legitimate */
    dsv4q_metrics_sel(&m, tie, ref, 1, 3, sc, 8);
    assert_true(m.v[DSV4Q_M_FLIPS] == 0);
    assert_int_equal(m.tie_flips, 1);
    assert_true(m.v[DSV4Q_M_JACCARD_DIST] > 0);
    const int32_t out[3] = {0, 1, 5};    /* a pick below the cut: a flip */
    dsv4q_metrics_sel(&m, out, ref, 1, 3, sc, 8);
    assert_true(m.v[DSV4Q_M_FLIPS] == 1);
    const int32_t drop[3] = {0, 3, 4};   /* drops 7 (above the cut) for a tie member */
    dsv4q_metrics_sel(&m, drop, ref, 1, 3, sc, 8);
    assert_true(m.v[DSV4Q_M_FLIPS] == 1);
    assert_int_equal(m.tie_flips, 1);
    const int32_t dup[3] = {0, 1, 1};    /* a duplicate pick */
    dsv4q_metrics_sel(&m, dup, ref, 1, 3, sc, 8);
    assert_true(m.v[DSV4Q_M_FLIPS] >= 1);
    const int32_t pad[3] = {0, 1, -1};   /* a missing pick */
    dsv4q_metrics_sel(&m, pad, ref, 1, 3, sc, 8);
    assert_true(m.v[DSV4Q_M_FLIPS] >= 1);
    dsv4q_metrics_sel(&m, tie, ref, 1, 3, NULL, 0);   /* no scores: every difference fails */
    assert_true(m.v[DSV4Q_M_FLIPS] == 1);
}

/* ---- gates ------------------------------------------------------------- */

/* The reference rule (issue 29, metrics.h dsv4q_ref_finite): a masked -inf
 * at both widths is checkable; a NaN at either width, or an inf the other
 * width does not share (other sign, or finite there), is not, each counted
 * per width with its first element in row-major coordinates. */
static void test_reference_finite_rule(void **state)
{
    (void)state;
    char why[512];
    const int64_t shape[2] = {2, 3};
    const double a64[4] = {1, -INFINITY, 2, 3};
    const float a32[4] = {1, -INFINITY, 2, 3};
    assert_int_equal(dsv4q_ref_finite(a64, a32, 1, 4, shape + 1, 1, NULL, why, sizeof why), 0);
    const double b64[6] = {1, INFINITY, NAN, 4, 5, 6}, b32[6] = {1, -INFINITY, 2, INFINITY, 5, NAN};
    assert_int_equal(dsv4q_ref_finite(b64, b32, 0, 6, shape, 2, "out", why, sizeof why), 1);
    assert_string_equal(why, "reference not finite: out: oracle-f64 has 1 NaN, first at [0,2]; oracle-f64 has 1 inf "
                             "not shared by oracle-f32, first at [0,1]; oracle-f32 has 1 NaN, first at [1,2]; "
                             "oracle-f32 has 2 inf not shared by oracle-f64, first at [0,1]");
}

static void expect_gate_error(const char *text, const char *needle)
{
    dsv4q_gates g;
    char err[1024];
    assert_int_equal(dsv4q_gates_parse(&g, text, "t.json", err, sizeof err), -1);
    if (!strstr(err, needle)) fail_msg("gate error '%s' lacks '%s'", err, needle);
}

static void test_gates_parse(void **state)
{
    (void)state;
    dsv4q_gates g;
    char err[1024];
    const char *ok = "{\"dsv4q_gates\": 1, \"defaults\": {\"nrms\": {\"factor\": 4, \"floor\": 1e-6}},"
                     " \"ops\": {\"topk\": {\"nrms\": null, \"flips\": {\"factor\": 0, \"floor\": 0, \"why\": \"x\"}}},"
                     " \"model\": {\"nrms\": {\"factor\": 10, \"floor\": 0}, \"greedy_agreement_min\": 0.9}}";
    assert_int_equal(dsv4q_gates_parse(&g, ok, "t.json", err, sizeof err), 0);
    assert_true(g.op[DSV4Q_OP_LINEAR][DSV4Q_M_NRMS].on);
    assert_true(g.op[DSV4Q_OP_LINEAR][DSV4Q_M_NRMS].factor == 4);
    assert_false(g.op[DSV4Q_OP_TOPK][DSV4Q_M_NRMS].on);   /* null removes */
    assert_true(g.op[DSV4Q_OP_TOPK][DSV4Q_M_FLIPS].on);
    assert_false(g.op[DSV4Q_OP_LINEAR][DSV4Q_M_MAX_ABS].on);   /* G1: not gated, still measured */
    assert_true(g.greedy_min == 0.9);
    /* bound rule and G2 */
    dsv4q_gate_rule r = {1, 4, 1e-6, {0, 0, 0}};
    assert_true(dsv4q_gate_bound(&r, 1e-3, DSV4Q_BT_BF16) == 4e-3 + 1e-6);
    assert_true(dsv4q_gate_pass(4e-3, dsv4q_gate_bound(&r, 1e-3, DSV4Q_BT_BF16)));
    dsv4q_gate_rule ru = {1, 2, 0, {0.5, 0.5, 8}};   /* floor in storage units */
    assert_true(dsv4q_gate_bound(&ru, 0, DSV4Q_BT_BF16) == 0x1p-9);
    assert_true(dsv4q_gate_bound(&ru, 0, DSV4Q_BT_F32) == 0x1p-21);
    assert_true(dsv4q_gate_bound(&ru, 0, DSV4Q_BT_I32) == 0);
    const char *ok2 = "{\"dsv4q_gates\": 1, \"defaults\": {\"nrms\": {\"factor\": 4, \"floor_u\": {\"BF16\": 0.1, \"F32\": 4}}}}";
    assert_int_equal(dsv4q_gates_parse(&g, ok2, "t.json", err, sizeof err), 0);
    assert_true(g.op[DSV4Q_OP_RMSNORM][DSV4Q_M_NRMS].floor_u[0] == 0.1);
    assert_true(g.op[DSV4Q_OP_RMSNORM][DSV4Q_M_NRMS].floor_u[1] == 0);
    assert_true(g.op[DSV4Q_OP_RMSNORM][DSV4Q_M_NRMS].floor_u[2] == 4);
    expect_gate_error("{\"dsv4q_gates\": 1, \"defaults\": {\"nrms\": {\"factor\": 1, \"floor_u\": {\"FP8\": 1}}}}",
                      "unknown storage dtype 'FP8'");
    assert_false(dsv4q_gate_pass(NAN, 1));
    assert_false(dsv4q_gate_pass(0, NAN));

    expect_gate_error("{\"dsv4q_gates\": 1,", "t.json:1:");   /* syntax: file:line:col */
    expect_gate_error("{\"defaults\": {}}", "\"dsv4q_gates\" version");
    expect_gate_error("{\"dsv4q_gates\": 2}", "unsupported");
    expect_gate_error("{\"dsv4q_gates\": 1, \"ops\": {\"matmul\": {}}}", "unknown operator 'matmul'");
    expect_gate_error("{\"dsv4q_gates\": 1, \"ops\": {\"linear\": {\"nrmss\": {\"factor\": 1}}}}",
                      "ops.linear: unknown metric 'nrmss'");
    expect_gate_error("{\"dsv4q_gates\": 1, \"defaults\": {\"nrms\": {\"factor\": -1}}}", "defaults.nrms.factor = -1");
    expect_gate_error("{\"dsv4q_gates\": 1, \"defaults\": {\"nrms\": {\"floor\": 1}}}", "missing \"factor\"");
    expect_gate_error("{\"dsv4q_gates\": 1, \"defaults\": {\"nrms\": {\"factor\": 1, \"flor\": 1}}}",
                      "unknown key 'flor'");
    expect_gate_error("{\"dsv4q_gates\": 1, \"dsv4q_gates\": 1}", "duplicate");
    expect_gate_error("{\"dsv4q_gates\": 1, \"model\": {\"greedy_agreement_min\": 2}}", "must be in [0, 1]");
    expect_gate_error("{\"dsv4q_gates\": 1, \"extra\": 1}", "unknown top-level key 'extra'");
    /* stages: a stage starts from its gate operator's rules (after ops), the
     * listed metrics replaced; the other stages keep the operator's */
    const char *st = "{\"dsv4q_gates\": 1, \"defaults\": {\"nrms\": {\"factor\": 4}, \"ulp_max\": {\"factor\": 2}},"
                     " \"ops\": {\"sparse_attn\": {\"ulp_max\": {\"factor\": 8, \"floor\": 4}}},"
                     " \"stages\": {\"attn\": {\"nrms\": {\"factor\": 3, \"floor_u\": {\"BF16\": 0.5}}}}}";
    assert_int_equal(dsv4q_gates_parse(&g, st, "t.json", err, sizeof err), 0);
    const dsv4q_gate_rule *an = dsv4q_stage_rule(&g, DSV4Q_STAGE_ATTN, DSV4Q_M_NRMS),
                          *au = dsv4q_stage_rule(&g, DSV4Q_STAGE_ATTN, DSV4Q_M_ULP_MAX),
                          *mn = dsv4q_stage_rule(&g, DSV4Q_STAGE_MOE, DSV4Q_M_NRMS);
    assert_true(an->factor == 3 && an->floor_u[0] == 0.5);
    assert_true(au->factor == 8 && au->floor == 4);        /* sparse_attn's, not replaced */
    assert_true(mn->factor == 4 && mn->floor_u[0] == 0);   /* moe not listed: expert's (the defaults) */
    assert_null(dsv4q_stage_rule(NULL, DSV4Q_STAGE_ATTN, DSV4Q_M_NRMS));
    expect_gate_error("{\"dsv4q_gates\": 1, \"stages\": {\"atn\": {}}}", "stages: unknown stage 'atn'");
    expect_gate_error("{\"dsv4q_gates\": 1, \"stages\": {\"moe\": {\"nrm\": {\"factor\": 1}}}}",
                      "stages.moe: unknown metric 'nrm'");
    assert_int_equal(dsv4q_gates_load(&g, "no/such/gates.json", err, sizeof err), -1);
    assert_non_null(strstr(err, "no/such/gates.json: cannot open gate file"));
}

/* docs/backends.md's operator section is generated from the op table. */
static void test_docs_current(void **state)
{
    (void)state;
    FILE *f = fopen("docs/backends.md", "rb");
    assert_non_null(f);
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *mark = strstr(doc, "<!-- generated -->\n");
    assert_non_null(mark);
    char *gen = NULL;
    size_t glen = 0;
    FILE *m = open_memstream(&gen, &glen);
    dsv4q_op_markdown(m);
    fclose(m);
    if (strcmp(mark + strlen("<!-- generated -->\n"), gen))
        fail_msg("docs/backends.md is stale: regenerate the section after <!-- generated --> with "
                 "`dsv4q qualify --list-ops --markdown`");
    free(gen);
    /* the ABI header's contract summary, between its markers */
    f = fopen("abi/dsv4q_backend.h", "rb");
    assert_non_null(f);
    n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *begin = strstr(doc, "<!-- generated: dsv4q qualify --list-ops --header (make docs) -->\n");
    const char *end = strstr(doc, " * <!-- end generated -->");
    assert_non_null(begin);
    assert_non_null(end);
    begin = strchr(begin, '\n') + 1;
    m = open_memstream(&gen, &glen);
    dsv4q_op_header_summary(m);
    fclose(m);
    if (strlen(gen) != (size_t)(end - begin) || strncmp(begin, gen, glen))
        fail_msg("abi/dsv4q_backend.h's contract summary is stale: run `make docs`");
    free(gen);
}

/* ---- the CLI ----------------------------------------------------------- */

static int run_cli(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./" DSV4Q_TEST_BUILD "/dsv4q qualify -q --db /tmp/dsv4q-test-qualify-%d.db %s >/dev/null 2>&1",
             (int)getpid(), args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_exit_status(void **state)
{
    (void)state;
    assert_int_equal(run_cli("--backend oracle-f32 --ops rmsnorm,hc_post"), 0);
    assert_int_equal(run_cli("--backend " PLUG("off_by_one") " --ops rmsnorm"), 1);
    assert_int_equal(run_cli("--backend " PLUG("crash") " --ops rmsnorm"), 1);
    assert_int_equal(run_cli("--backend " PLUG("bad_abi")), 2);
    assert_int_equal(run_cli("--backend " PLUG("no_entry")), 2);
    assert_int_equal(run_cli("--backend oracle-f32 --ops nosuchop"), 2);
    assert_int_equal(run_cli("--backend oracle-f32 --gates no/such/file.json"), 2);
    assert_int_equal(run_cli("--backend oracle-f32 --shapes huge"), 2);
    assert_int_equal(run_cli(""), 2);
    char db[64];
    snprintf(db, sizeof db, "/tmp/dsv4q-test-qualify-%d.db", (int)getpid());
    unlink(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case_table),
        cmocka_unit_test(test_op_table_generated),
        cmocka_unit_test(test_case_build_and_keys),
        cmocka_unit_test(test_every_case_builds),
        cmocka_unit_test(test_selection_tie_rule),
        cmocka_unit_test(test_reference_finite_rule),
        cmocka_unit_test(test_gates_parse),
        cmocka_unit_test(test_docs_current),
        cmocka_unit_test(test_plugin_good),
        cmocka_unit_test(test_plugin_off_by_one_fails_on_rmsnorm_only),
        cmocka_unit_test(test_malformed_plugins),
        cmocka_unit_test(test_crash_hang_overrun),
        cmocka_unit_test(test_multi_backend),
        cmocka_unit_test(test_cli_exit_status),
        cmocka_unit_test(test_oracle_f32_is_the_level),
    };
    return cmocka_run_group_tests(tests, setup_gates, NULL);
}
