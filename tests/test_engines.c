/*
 * test_engines.c - real engines as backends (issue 16, ABI v2):
 *
 *  - declarations: base profile + overrides + engine storage points parse,
 *    replace (act_q8_0 switches gemm_act_fp8 off), format canonically and
 *    round-trip; named profiles never hold an engine point; bad ones fail
 *    with the part that is wrong;
 *  - the engine storage points in the oracle, at both widths, against
 *    hand-computed values: act_q8_0 (GGML Q8_0 per 32), kv_f16 (attention
 *    reads F16 rows), idx_score_f32, act_f16 (storage points round to F16);
 *  - tensor identity: roles in cases, the shared-expert form (no routing
 *    weight) and its key; both oracle widths run it;
 *  - a v2 plugin (examples/engine_v2.c, the worked example) that quantizes activations
 *    Q8_0 passes AS DECLARED, its head case is SKIPPED by supports() with
 *    the backend's reason, and the same plugin with the deviation left
 *    undeclared (or a --profile override without it) fails on the FP8/FP4
 *    linears only; a bad declaration is refused, never ignored;
 *  - a v1 plugin built against the released v1 header still qualifies.
 */
#include "tests/testutil.h"

#include "gates/gates.h"
#include "harness/ops/ops.h"
#include "harness/cases/cases.h"
#include "harness/backend/engine_weights.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"
#include "oracle/boundary.h"
#include "oracle/ops.h"

#define PLUG(name) DSV4Q_TEST_BUILD "/plugins/" name ".so"
#define BIT DSV4Q_BIT

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

/* F16 (binary16) RNE rounding of a finite double in F16 range, written
 * here from the format's definition (10 fraction bits, subnormal ulp
 * 2^-24), independent of oracle/formats.c. */
static double f16_rne(double v)
{
    if (v == 0) return v;
    int e;
    frexp(v, &e);   /* |v| in [2^(e-1), 2^e) */
    double u = ldexp(1.0, e - 1 < -14 ? -24 : e - 1 - 10);
    return nearbyint(v / u) * u;   /* default rounding mode: ties to even */
}

/* ---- declarations ------------------------------------------------------ */

static void test_declarations(void **state)
{
    (void)state;
    uint64_t qat, src, s, back;
    char err[1024], buf[512];
    assert_int_equal(dsv4q_profile_set("qat", &qat), 0);
    assert_int_equal(dsv4q_profile_set("source", &src), 0);
    assert_false(dsv4q_declaration_has_engine(src));   /* B3: no named profile holds one */
    assert_int_equal(dsv4q_declaration_parse("qat", &s, err, sizeof err), 0);
    assert_int_equal(s, qat);
    assert_int_equal(dsv4q_declaration_parse("qat:act_q8_0,kv_f16", &s, err, sizeof err), 0);
    uint64_t want = (qat & ~BIT(DSV4Q_B_GEMM_ACT_FP8)) | BIT(DSV4Q_B_ACT_Q8_0) | BIT(DSV4Q_B_KV_F16);
    assert_int_equal(s, want);
    dsv4q_declaration_format(s, buf, sizeof buf);
    assert_string_equal(buf, "qat:gemm_act_fp8=off,kv_f16=on,act_q8_0=on");
    assert_int_equal(dsv4q_declaration_parse(buf, &back, err, sizeof err), 0);
    assert_int_equal(back, s);
    /* idx_score_f32 replaces idx_score_bf16; an explicit =off works too */
    assert_int_equal(dsv4q_declaration_parse("source:idx_score_f32=on,rope_bf16=off", &s, err, sizeof err), 0);
    assert_int_equal(s, (src & ~BIT(DSV4Q_B_IDX_SCORE_BF16) & ~BIT(DSV4Q_B_ROPE_BF16)) | BIT(DSV4Q_B_IDX_SCORE_F32));
    dsv4q_declaration_format(s, buf, sizeof buf);
    assert_int_equal(dsv4q_declaration_parse(buf, &back, err, sizeof err), 0);
    assert_int_equal(back, s);
    /* both a point and its replacement on (spelled out later) round-trips */
    assert_int_equal(dsv4q_declaration_parse("qat:act_q8_0,gemm_act_fp8=on", &s, err, sizeof err), 0);
    assert_true(s & BIT(DSV4Q_B_GEMM_ACT_FP8));
    dsv4q_declaration_format(s, buf, sizeof buf);
    assert_int_equal(dsv4q_declaration_parse(buf, &back, err, sizeof err), 0);
    assert_int_equal(back, s);
    dsv4q_declaration_format(qat, buf, sizeof buf);
    assert_string_equal(buf, "qat");
    /* refused with the part that is wrong */
    assert_int_equal(dsv4q_declaration_parse("fast", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown base profile 'fast'"));
    assert_int_equal(dsv4q_declaration_parse("qat:kv_f8", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "kv_f8"));
    assert_non_null(strstr(err, "act_q8_0"));   /* the list names the engine points */
    assert_int_equal(dsv4q_declaration_parse("qat:kv_f16=maybe", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "on or off"));
    /* the table */
    const dsv4q_boundary_info *bi = dsv4q_boundary_get(DSV4Q_B_ACT_Q8_0);
    assert_non_null(bi);
    assert_int_equal(bi->kind, DSV4Q_BK_ENGINE);
    assert_string_equal(bi->replaces, "gemm_act_fp8");
    assert_null(dsv4q_boundary_get(DSV4Q_B_COUNT));
    assert_null(dsv4q_boundary_get(DSV4Q_B_END));
}

/* ---- engine storage points in the oracle, by hand ---------------------- */

static void test_q8_0_by_hand(void **state)
{
    (void)state;
    /* block 0: amax 127 -> d = 1 (F16-exact), q = round half away;
     * block 1: amax 1 -> d = 1/127, F16(d) = 2^-7 * (1 + 8/1024) =
     * 0.00787353515625 (1/127 = 2^-7 * 1.0078740..., 0.0629 of an F16 ulp
     * above 8/1024); 1 -> 127 d16, 0.5 -> 63.5 -> 64 (away) -> 0.50390625;
     * block 2 (8 elements, the tail): all zero -> zero */
    float xf[72] = {0};
    double xd[72] = {0};
    const double in[][2] = {{0, 127}, {1, 2.5}, {2, -2.5}, {3, 0.49}, {4, -0.5}, {5, 1.5}, {32, 1.0}, {33, 0.5}, {34, -0.25}};
    const double want[][2] = {{0, 127}, {1, 3}, {2, -3}, {3, 0}, {4, -1}, {5, 2},
                              {32, 0.99993896484375}, {33, 0.50390625}, {34, -0.251953125}};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        xf[(int)in[i][0]] = (float)in[i][1];
        xd[(int)in[i][0]] = in[i][1];
    }
    dsv4q_q8_0_quant_f32(xf, 72);
    dsv4q_q8_0_quant_f64(xd, 72);
    for (int k = 0; k < 72; k++) {
        double w = 0;
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            if ((int)want[i][0] == k) w = want[i][1];
        if (xf[k] != (float)w || xd[k] != w) fail_msg("q8_0 element %d: f32 %.17g f64 %.17g, want %.17g", k, xf[k], xd[k], w);
    }
}

static void test_kv_f16_by_hand(void **state)
{
    (void)state;
    /* one query, one visible key, sink -1e30 (exp -> 0): o = V exactly,
     * so o shows how attention READ the row: 1 + 2^-11 + 2^-20 rounds to
     * 1 + 2^-10 in F16 (above the tie), 3e-8 to 2^-24 (F16 subnormal
     * ulp; 3e-8 > 2^-25 = 2.98e-8) */
    const double v0 = 1 + ldexp(1, -11) + ldexp(1, -20), v1 = 3e-8;
    double q[2] = {0.5, 0.25}, kv[2] = {v0, v1}, sink = -1e30, o[2];
    float qf[2] = {0.5f, 0.25f}, kvf[2] = {(float)v0, (float)v1}, sinkf = -1e30f, of[2];
    int32_t idx[1] = {0};
    const uint64_t on = BIT(DSV4Q_B_KV_F16);
    assert_int_equal(dsv4q_sparse_attn_f64(on, q, 1, 1, 2, kv, 1, idx, 1, &sink, 1.0, o), 0);
    assert_int_equal(dsv4q_sparse_attn_f32(on, qf, 1, 1, 2, kvf, 1, idx, 1, &sinkf, 1.0f, of), 0);
    assert_true(o[0] == 1 + ldexp(1, -10) && o[1] == ldexp(1, -24));
    assert_true(of[0] == (float)(1 + ldexp(1, -10)) && of[1] == (float)ldexp(1, -24));
    assert_int_equal(dsv4q_sparse_attn_f64(0, q, 1, 1, 2, kv, 1, idx, 1, &sink, 1.0, o), 0);
    assert_true(o[0] == v0 && o[1] == v1);   /* off: the row as given */
}

static void test_idx_score_f32_and_act_f16_by_hand(void **state)
{
    (void)state;
    /* indexer, one head of dim 1: score = relu(q k) w = 1 + 2^-30 exactly
     * in binary64; idx_score_f32 keeps it as binary32 -> 1.0 */
    double q = 1, K = 1 + ldexp(1, -30), w = 1, sc;
    dsv4q_indexer_scores_f64(0, &q, &w, 1, 1, 1, &K, 1, 0, 1, &sc);
    assert_true(sc == 1 + ldexp(1, -30));
    dsv4q_indexer_scores_f64(BIT(DSV4Q_B_IDX_SCORE_F32), &q, &w, 1, 1, 1, &K, 1, 0, 1, &sc);
    assert_true(sc == 1.0);
    /* rmsnorm of {1, 1} (eps 0) is w: w = 1 + 2^-9 is F16-exact but rounds
     * to 1.0 in BF16 (2^-9 < half a BF16 ulp = 2^-8) */
    const uint64_t nb = BIT(DSV4Q_B_NORM_BF16), f16 = BIT(DSV4Q_B_ACT_F16);
    double x[2] = {1, 1}, wn[2] = {1 + ldexp(1, -9), 1 + ldexp(1, -9)}, y[2];
    float xf[2] = {1, 1}, wf[2] = {(float)wn[0], (float)wn[1]}, yf[2];
    dsv4q_rmsnorm_f64(nb, x, 1, 2, wn, 0, y);
    assert_true(y[0] == 1.0);
    dsv4q_rmsnorm_f64(nb | f16, x, 1, 2, wn, 0, y);
    assert_true(y[0] == 1 + ldexp(1, -9));
    dsv4q_rmsnorm_f32(nb | f16, xf, 1, 2, wf, 0, yf);
    assert_true(yf[0] == (float)(1 + ldexp(1, -9)));
    /* act_f16 alone (norm_bf16 off) rounds nothing: it modifies storage points that are on */
    wn[0] = wn[1] = 1 + ldexp(1, -12);
    dsv4q_rmsnorm_f64(f16, x, 1, 2, wn, 0, y);
    assert_true(y[0] == 1 + ldexp(1, -12));
    dsv4q_rmsnorm_f64(nb | f16, x, 1, 2, wn, 0, y);
    assert_true(y[0] == 1.0);   /* 2^-12 < half an F16 ulp (2^-11) */
}

/* LINEAR through the harness's oracle: with act_q8_0 the f64 oracle equals
 * an independent computation (the test's own Q8_0 per 32, exact decoded
 * weights, long double dot) and differs from gemm_act_fp8's. */
static void test_linear_act_q8_0_independent(void **state)
{
    (void)state;
    char err[512];
    dsv4q_case c;
    assert_int_equal(dsv4q_case_build(&c, "linear(s=1,N=8,K=256,fmt=fp8,out=f32)", err, sizeof err), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_declaration_parse("exact:act_q8_0", &bs, err, sizeof err), 0);
    dsv4q_bt out[DSV4Q_OPS_MAX_T];
    dsv4q_bcall call;
    double y[8], y8[8];
    void *o1[1] = {y}, *o2[1] = {y8};
    dsv4q_case_call(&c, out, bs, &call);
    assert_int_equal(dsv4q_oracle_exec(64, bs, &call, o1, err, sizeof err), 0);
    dsv4q_case_call(&c, out, BIT(DSV4Q_B_GEMM_ACT_FP8), &call);
    assert_int_equal(dsv4q_oracle_exec(64, BIT(DSV4Q_B_GEMM_ACT_FP8), &call, o2, err, sizeof err), 0);
    const float *x = c.in[0].data, *w = c.in[1].data;
    double xq[256];
    for (int b0 = 0; b0 < 256; b0 += 32) {
        float amax = 0;   /* GGML's binary32 arithmetic is the definition */
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b0 + i]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        double d16 = f16_rne(d);
        for (int i = 0; i < 32; i++) xq[b0 + i] = (double)roundf(x[b0 + i] * id) * d16;
    }
    int differs = 0;
    for (int o = 0; o < 8; o++) {
        long double acc = 0;
        for (int k = 0; k < 256; k++) acc += (long double)xq[k] * w[o * 256 + k];
        double rel = fabs((double)acc - y[o]) / fmax(fabs((double)acc), 1e-300);
        if (rel > 1e-14) fail_msg("linear act_q8_0 row %d: oracle %.17g, independent %.17g", o, y[o], (double)acc);
        differs += y[o] != y8[o];
    }
    assert_true(differs > 0);   /* Q8_0 per 32 is not FP8 per 128 */
    dsv4q_case_free(&c);
}

/* ---- tensor identity ---------------------------------------------------- */

static void test_roles_and_shared_expert(void **state)
{
    (void)state;
    char err[512], canon[DSV4Q_CASE_KEY_MAX];
    dsv4q_case c;
    assert_int_equal(dsv4q_case_canon("expert()", canon, sizeof canon, err, sizeof err), 0);
    assert_null(strstr(canon, "shared"));   /* optional parameters at their default stay out of the key */
    assert_int_equal(dsv4q_case_canon("expert(shared=1)", canon, sizeof canon, err, sizeof err), 0);
    assert_string_equal(canon, "expert(n=2,d=4096,I=2048,fmt=fp4,shared=1,recipe=normal,seed=1)");
    assert_int_equal(dsv4q_case_build(&c, "expert(n=2,d=256,I=128,fmt=fp8,shared=1)", err, sizeof err), 0);
    assert_int_equal(c.in[4].ndim, 0);   /* no routing weight */
    assert_null(c.in[4].data);
    dsv4q_bt out[DSV4Q_OPS_MAX_T];
    dsv4q_bcall call;
    dsv4q_case_call(&c, out, 0, &call);
    assert_string_equal(call.role, "layers.0.ffn.shared_experts");
    assert_null(call.in_role[0]);
    assert_string_equal(call.in_role[2], "layers.0.ffn.shared_experts.w2");
    /* both widths run it, and it is the routed form with weight 1 */
    double ys[2 * 256], yr[2 * 256];
    void *os[1] = {ys}, *orr[1] = {yr};
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, os, err, sizeof err), 0);
    float yf[2 * 256];
    void *of[1] = {yf};
    assert_int_equal(dsv4q_oracle_exec(32, 0, &call, of, err, sizeof err), 0);
    float ones[2] = {1, 1};
    dsv4q_bt in2[DSV4Q_OPS_MAX_T];
    memcpy(in2, c.in, sizeof in2);
    in2[4].ndim = 1;
    in2[4].shape[0] = 2;
    in2[4].data = ones;
    call.in = in2;
    assert_int_equal(dsv4q_oracle_exec(64, 0, &call, orr, err, sizeof err), 0);
    assert_memory_equal(ys, yr, sizeof ys);
    dsv4q_case_free(&c);
    /* roles by tensor */
    assert_int_equal(dsv4q_case_build(&c, "linear(fmt=f32,out=f32)", err, sizeof err), 0);
    assert_string_equal(c.role, "head");
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "linear(N=512)", err, sizeof err), 0);
    assert_string_equal(c.role, "layers.0.attn.wkv");
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "compressor(Dc=128,rotate=1)", err, sizeof err), 0);
    assert_string_equal(c.in_role[2], "layers.0.attn.indexer.compressor.wgate");
    dsv4q_case_free(&c);
    assert_int_equal(dsv4q_case_build(&c, "topk()", err, sizeof err), 0);
    assert_string_equal(c.role, "");   /* weightless */
    dsv4q_bcall call2;
    dsv4q_case_call(&c, out, 0, &call2);
    assert_null(call2.role);
    dsv4q_case_free(&c);
}

/* ---- plugins ------------------------------------------------------------ */

static dsv4q_qualify_opts opts(uint64_t ops)
{
    dsv4q_qualify_opts o = {.gates = &G, .sets = DSV4Q_CASE_SET_FLASH, .ops = ops, .iso = {120, 0}, .quiet = 1};
    return o;
}

static void test_engine_passes_as_declared(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("engine_v2")};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN));
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    if (q.load_failed) fail_msg("%s", q.msg);
    assert_int_equal(q.desc.abi_version, 2);
    assert_true(q.desc.has_supports);
    assert_string_equal(q.declared, "source:gemm_act_fp8=off,kv_f16=on,act_q8_0=on");
    int skipped = 0, passed = 0;
    for (int i = 0; i < q.ncases; i++) {
        const dsv4q_qcase *r = &q.cases[i];
        if (strstr(r->key, "fmt=f32")) {   /* the head: declined by supports(), skipped with the reason */
            assert_int_equal(r->verdict, DSV4Q_V_SKIP);
            assert_non_null(strstr(r->msg, "keeps the output head on the host"));
            skipped++;
            continue;
        }
        if (r->op == DSV4Q_OP_LINEAR && strstr(r->key, "extreme")) {   /* Q8_0 scale overflow: declined */
            assert_int_equal(r->verdict, DSV4Q_V_SKIP);
            assert_non_null(strstr(r->msg, "overflows the F16 scale of a Q8_0 block"));
            skipped++;
            continue;
        }
        if (r->verdict != DSV4Q_V_PASS) fail_msg("%s: %s %s", r->key, dsv4q_verdict_name(r->verdict), r->msg);
        passed++;
    }
    assert_true(skipped >= 2);   /* the head and the extreme linears; each skip checked for its reason above */
    assert_true(passed >= 8);   /* linear, rmsnorm and sparse_attn (F16 KV, declared) */
    assert_int_equal(dsv4q_qualify_status(&q), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    dsv4q_qualify_print(f, &q, &G, 0);
    fclose(f);
    assert_non_null(strstr(buf, "judged as declared: source:gemm_act_fp8=off,kv_f16=on,act_q8_0=on"));
    free(buf);
    dsv4q_qualify_free(&q);
}

/* FP8/FP4 linears fail, everything else still passes: the failure names
 * the stage the deviation affects. */
static void expect_linear_quant_fail(const dsv4q_qualify_result *q)
{
    int fails = 0;
    for (int i = 0; i < q->ncases; i++) {
        const dsv4q_qcase *r = &q->cases[i];
        int quant = r->op == DSV4Q_OP_LINEAR && (strstr(r->key, "fmt=fp8") || strstr(r->key, "fmt=fp4"));
        if (quant && strstr(r->key, "extreme")) {
            assert_int_equal(r->verdict, DSV4Q_V_SKIP);   /* declined (Q8_0 scale overflow) */
        } else if (quant) {
            if (r->verdict != DSV4Q_V_FAIL) fail_msg("%s: %s, expected FAIL", r->key, dsv4q_verdict_name(r->verdict));
            fails++;
        } else if (r->verdict != DSV4Q_V_PASS && r->verdict != DSV4Q_V_SKIP) {
            fail_msg("%s: %s %s", r->key, dsv4q_verdict_name(r->verdict), r->msg);
        }
    }
    assert_true(fails >= 2);
    assert_int_equal(dsv4q_qualify_status(q), 1);
}

static void test_engine_undeclared_fails(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("engine_v2")};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_RMSNORM));
    setenv("DSV4Q_TEST_UNDECLARED", "1", 1);   /* the same plugin, declaring plain source */
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    unsetenv("DSV4Q_TEST_UNDECLARED");
    if (q.load_failed) fail_msg("%s", q.msg);
    assert_string_equal(q.declared, "source");
    expect_linear_quant_fail(&q);
    dsv4q_qualify_free(&q);
    /* the command line's declaration replaces the backend's */
    o.declare = "source";
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_string_equal(q.declared_by, "the command line");
    expect_linear_quant_fail(&q);
    dsv4q_qualify_free(&q);
    /* ...and a bad one is refused (exit 2), not ignored */
    o.declare = "source:act_q9";
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    assert_true(q.load_failed);
    assert_non_null(strstr(q.msg, "act_q9"));
    assert_int_equal(dsv4q_qualify_status(&q), 2);
    dsv4q_qualify_free(&q);
}

/* oracle-f32 follows call->boundaries: under any declaration it IS the level. */
static void test_oracle_f32_under_a_declaration(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {"oracle-f32"};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_LINEAR) | DSV4Q_CAP(DSV4Q_OP_SPARSE_ATTN) |
                             DSV4Q_CAP(DSV4Q_OP_INDEXER_SCORE) | DSV4Q_CAP(DSV4Q_OP_RMSNORM));
    o.declare = "qat:act_q8_0,kv_f16,idx_score_f32,act_f16,norm_bf16=on";
    o.iso.inprocess = 1;
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    if (q.load_failed) fail_msg("%s", q.msg);
    for (int i = 0; i < q.ncases; i++)
        /* extreme linear inputs (amax ~2^24) overflow the F16 Q8_0 scale
         * (amax/127 > 65504) at both widths: NaN in, NaN out, as in GGML */
        if (q.cases[i].verdict != DSV4Q_V_PASS && !strstr(q.cases[i].key, "recipe=extreme"))
            fail_msg("%s: %s %s", q.cases[i].key, dsv4q_verdict_name(q.cases[i].verdict), q.cases[i].msg);
    assert_true(q.bs & BIT(DSV4Q_B_ACT_F16));
    dsv4q_qualify_free(&q);
}

/* ---- engine-stored weights ---------------------------------------------- */

/* The decoders by hand: F16 codes, F8_E4M3 with E8M0 per 1x2 blocks, E2M1
 * with F32 scales, GGML Q8_0 (a block_q8_0 written here byte by byte). */
static void test_bweight_decode_by_hand(void **state)
{
    (void)state;
    char err[512];
    float out[64];
    /* F16: 0x3C00 = 1, 0xC000 = -2, 0x0001 = 2^-24, 0x7BFF = 65504 */
    const uint16_t h[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};
    dsv4q_bweight e = {DSV4Q_BT_F16, h, NULL, 0, {0, 0}};
    assert_int_equal(dsv4q_bweight_decode(&e, "t", 2, 2, out, err, sizeof err), 0);
    assert_true(out[0] == 1 && out[1] == -2 && out[2] == ldexpf(1, -24) && out[3] == 65504);
    /* E4M3: 0x38 = 1.0, 0x40 = 2.0, 0xB8 = -1.0, 0x01 = 2^-9; E8M0 128 = 2, 126 = 0.5 */
    const uint8_t q8[4] = {0x38, 0x40, 0xB8, 0x01}, sc[2] = {128, 126};
    e = (dsv4q_bweight){DSV4Q_BT_F8_E4M3, q8, sc, DSV4Q_BT_F8_E8M0, {1, 2}};
    assert_int_equal(dsv4q_bweight_decode(&e, "t", 2, 2, out, err, sizeof err), 0);
    assert_true(out[0] == 2 && out[1] == 4 && out[2] == -0.5f && out[3] == ldexpf(1, -10));
    /* E2M1 pairs (low nibble first): 0x21 = {0.5, 1.0}, 0xF7 = {6.0, -6.0}; F32 scale 0.25 per 1x4 */
    const uint8_t f4[2] = {0x21, 0xF7};
    const float s4[1] = {0.25f};
    e = (dsv4q_bweight){DSV4Q_BT_I8, f4, s4, DSV4Q_BT_F32, {1, 4}};
    assert_int_equal(dsv4q_bweight_decode(&e, "t", 1, 4, out, err, sizeof err), 0);
    assert_true(out[0] == 0.125f && out[1] == 0.25f && out[2] == 1.5f && out[3] == -1.5f);
    /* GGML Q8_0: d = F16 0x3800 (0.5), qs = 0, 1, -1, 127, -128, ... */
    unsigned char blk[34] = {0x00, 0x38};
    const int8_t qs[5] = {0, 1, -1, 127, -128};
    memcpy(blk + 2, qs, 5);
    e = (dsv4q_bweight){DSV4Q_BW_GGML(8), blk, NULL, 0, {0, 0}};
    assert_int_equal(dsv4q_bweight_decode(&e, "t", 1, 32, out, err, sizeof err), 0);
    assert_true(out[0] == 0 && out[1] == 0.5f && out[2] == -0.5f && out[3] == 63.5f && out[4] == -64 && out[31] == 0);
    char nm[64];
    dsv4q_bweight_name(&e, nm, sizeof nm);
    assert_string_equal(nm, "Q8_0");
    /* refused with the role and the reason */
    assert_int_equal(dsv4q_bweight_decode(&e, "layers.0.attn.wq_a", 1, 48, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "layers.0.attn.wq_a"));
    e.dtype = 77;
    assert_int_equal(dsv4q_bweight_decode(&e, "head", 1, 32, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "dtype 77"));
    e = (dsv4q_bweight){DSV4Q_BT_F8_E4M3, q8, NULL, DSV4Q_BT_F8_E8M0, {1, 2}};
    assert_int_equal(dsv4q_bweight_decode(&e, "t", 2, 2, out, err, sizeof err), -1);
}

/* engine_v2 storing its linear weights Q8_0 / F16 (DSV4Q_TEST_OWN_WEIGHTS=1):
 * kernel error passes, the format error is reported (> 0 for Q8_0 of FP8
 * weights); the lying variant (=2: claims Q8_0, multiplies the reference)
 * fails on the kernel error; --format-gate fails on the format. */
static void test_engine_weights_kernel_vs_format(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("engine_v2")};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_LINEAR));
    setenv("DSV4Q_TEST_OWN_WEIGHTS", "1", 1);
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    if (q.load_failed) fail_msg("%s", q.msg);
    assert_true(q.desc.has_load_weight);
    int nq8 = 0, nf16 = 0;
    for (int i = 0; i < q.ncases; i++) {
        const dsv4q_qcase *r = &q.cases[i];
        if (r->verdict == DSV4Q_V_SKIP) continue;
        if (r->verdict != DSV4Q_V_PASS) fail_msg("%s: %s %s", r->key, dsv4q_verdict_name(r->verdict), r->msg);
        assert_true(r->ew);
        printf("  %s: engine %s, kernel nrms %.3e (level %.3e), format nrms %.3e max_abs %.3e\n", r->key, r->ew_name,
               r->row[DSV4Q_M_NRMS].value, r->row[DSV4Q_M_NRMS].level, r->fmt_nrms, r->fmt_max_abs);
        if (!strcmp(r->ew_name, "Q8_0")) {
            nq8++;
            assert_true(r->fmt_nrms > 1e-4);   /* Q8_0 per 32 of FP8 weights is not exact */
        } else {
            assert_string_equal(r->ew_name, "F16");
            nf16++;
            assert_true(r->fmt_nrms < 1e-3);
        }
    }
    assert_true(nq8 >= 2 && nf16 >= 1);
    char *js = dsv4q_qualify_json(&q, &G);
    assert_non_null(strstr(js, "\"engine_weight\":\"Q8_0\""));
    assert_non_null(strstr(js, "\"format_nrms\""));
    free(js);
    dsv4q_qualify_free(&q);
    /* the format error gated on request */
    o.format_gate = 1e-6;
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    int gated = 0;
    for (int i = 0; i < q.ncases; i++) gated += q.cases[i].verdict == DSV4Q_V_FAIL && strstr(q.cases[i].msg, "--format-gate");
    assert_true(gated >= 2);
    dsv4q_qualify_free(&q);
    o.format_gate = 0;
    /* claims Q8_0 but multiplies the reference weights: kernel error FAILs */
    setenv("DSV4Q_TEST_OWN_WEIGHTS", "2", 1);
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    unsetenv("DSV4Q_TEST_OWN_WEIGHTS");
    int fails = 0;
    for (int i = 0; i < q.ncases; i++) fails += q.cases[i].verdict == DSV4Q_V_FAIL && !strcmp(q.cases[i].ew_name, "Q8_0");
    assert_true(fails >= 2);
    dsv4q_qualify_free(&q);
}

static void test_v1_plugin_still_qualifies(void **state)
{
    (void)state;
    char err[1024];
    const char *spec[1] = {PLUG("v1_good")};
    dsv4q_qualify_result q;
    dsv4q_qualify_opts o = opts(DSV4Q_CAP(DSV4Q_OP_RMSNORM) | DSV4Q_CAP(DSV4Q_OP_HC_POST) | DSV4Q_CAP(DSV4Q_OP_TOPK));
    assert_int_equal(dsv4q_qualify(spec, 1, &o, &q, err, sizeof err), 0);
    if (q.load_failed) fail_msg("%s", q.msg);
    assert_int_equal(q.desc.abi_version, 1);   /* built against the released v1 header */
    assert_false(q.desc.has_supports);
    assert_string_equal(q.declared, "source");
    assert_int_equal(dsv4q_qualify_status(&q), 0);
    dsv4q_qualify_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declarations),
        cmocka_unit_test(test_q8_0_by_hand),
        cmocka_unit_test(test_kv_f16_by_hand),
        cmocka_unit_test(test_idx_score_f32_and_act_f16_by_hand),
        cmocka_unit_test(test_linear_act_q8_0_independent),
        cmocka_unit_test(test_roles_and_shared_expert),
        cmocka_unit_test(test_engine_passes_as_declared),
        cmocka_unit_test(test_engine_undeclared_fails),
        cmocka_unit_test(test_oracle_f32_under_a_declaration),
        cmocka_unit_test(test_bweight_decode_by_hand),
        cmocka_unit_test(test_engine_weights_kernel_vs_format),
        cmocka_unit_test(test_v1_plugin_still_qualifies),
    };
    return cmocka_run_group_tests(tests, setup_gates, NULL);
}
