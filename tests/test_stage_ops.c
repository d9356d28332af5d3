/*
 * test_stage_ops.c - the stage table's operator column (oracle/stages.h
 * `ops`) and the links derived from it (harness/ops/stage_ops.h):
 *
 *  1. The column is what the forward pass does: THE forward pass
 *     (oracle/model.c) runs at f32 on the oracle-f32 backend through the ABI
 *     provider (harness/provider/provider_abi.c, which counts calls per operator),
 *     with a stage hook that attributes the calls since the previous stage
 *     to the stage that just finished; MTP after every call. Observed over
 *     `tiny` (prefill 42 + 2 decodes, ring wrapped, ratio-4 and ratio-128
 *     layers, decode through WINDOW_ATTN_DECODE and through SPARSE_ATTN)
 *     and a `tiny` whose MTP layer has compress ratio 4, the operator set
 *     of each stage must EQUAL its row. A row that lists an operator the
 *     stage never calls, or misses one, fails here.
 *  2. The derived op -> stages links against a hand-made list for three
 *     operators, the main-pass filter (no mtp), and the V4 operators (a
 *     hand-written list) each linked to a stage of the main pass.
 *  3. The check refuses rows with an unknown operator, a duplicate, a gate
 *     operator the stage does not call; it accepts an operator no stage
 *     calls (an operator-only case).
 */
#include "tests/testutil.h"

#include <omp.h>

#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/cases/cases.h"
#include "harness/provider/provider_abi.h"
#include "harness/ops/stage_ops.h"
#include "harness/measure/verdict.h"
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static char root_dir[256];

/* ---- 1. the column against the forward pass's calls --------------------- */

typedef struct observer {
    long calls[DSV4Q_OP_COUNT], last[DSV4Q_OP_COUNT];
    uint64_t seen[DSV4Q_STAGE_COUNT];
} observer;

/* The operators called since the last take() belong to stage st. */
static void take(observer *o, int st)
{
    for (int op = 0; op < DSV4Q_OP_COUNT; op++) {
        if (o->calls[op] != o->last[op]) o->seen[st] |= DSV4Q_CAP(op);
        o->last[op] = o->calls[op];
    }
}

static int hook(void *user, const dsv4q_stage_io *io)
{
    take(user, io->stage);
    return 0;
}

static void observe(observer *o, const char *dir, long np, long nd, int window)
{
    char err[1024];
    dsv4q_model *m;
    assert_int_equal(dsv4q_model_open(&m, dir, err, sizeof err), 0);
    uint64_t bs;
    assert_int_equal(dsv4q_profile_set("source", &bs), 0);   /* every quantisation point on */
    const dsv4q_backend_v1 *b = dsv4q_backend_builtin("oracle-f32");
    void *ctx = NULL;
    assert_int_equal(b->init(&ctx, err, sizeof err), 0);
    memset(o->calls, 0, sizeof o->calls);
    memset(o->last, 0, sizeof o->last);
    dsv4q_abi_provider *p;
    assert_int_equal(dsv4q_abi_provider_new(&p, b, ctx, m, bs, np + nd, o->calls, NULL, 0, err, sizeof err), 0);
    dsv4q_runstate_f32 *r = dsv4q_run_new_f32(m, bs, np + nd, NULL, NULL);
    assert_non_null(r);
    dsv4q_run_set_provider_f32(r, dsv4q_abi_provider_table(p, window), p);
    dsv4q_run_set_stage_hook_f32(r, hook, o);
    const long V = m->cfg.vocab_size;
    int32_t ids[64];
    assert_true(np + nd + 1 <= 64);
    for (long i = 0; i <= np + nd; i++) ids[i] = (int32_t)((i * 7919 + 13) % V);
    double *lg = malloc(sizeof(double) * (size_t)V);
    assert_non_null(lg);
    for (long c = 0, pos = 0; c <= nd; c++) {
        const long s = c ? 1 : np;
        assert_int_equal(dsv4q_run_step_f32(r, ids + pos, s, lg), 0);
        take(o, DSV4Q_STAGE_HEAD);   /* nothing after head's own hook */
        pos += s;
        assert_true(m->cfg.n_mtp_layers > 0);
        assert_int_equal(dsv4q_run_mtp_f32(r, ids + pos - s + 1, lg), 0);   /* the next token of each row */
        take(o, DSV4Q_STAGE_MTP);    /* (its REPORT did it already) */
    }
    assert_int_equal(dsv4q_abi_provider_status(p), DSV4Q_BACKEND_OK);
    dsv4q_run_free_f32(r);
    dsv4q_abi_provider_free(p);
    if (b->fini) b->fini(ctx);
    free(lg);
    dsv4q_model_close(m);
}

static void names(uint64_t mask, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int op = 0; op < DSV4Q_OP_COUNT && o < len; op++)
        if (mask & DSV4Q_CAP(op)) o += (size_t)snprintf(buf + o, len - o, " %s", dsv4q_op_get(op)->name);
}

static void test_ops_are_the_forward_pass(void **state)
{
    (void)state;
    char err[1024], dir[400];
    dsv4q_config cfg;
    static observer o;
    memset(&o, 0, sizeof o);
    assert_int_equal(dsv4q_config_builtin(&cfg, "tiny", err, sizeof err), 0);
    snprintf(dir, sizeof dir, "%s/tiny", root_dir);
    assert_int_equal(dsv4q_synth_write(&cfg, 1, dir, 1, err, sizeof err), 0);
    observe(&o, dir, 42, 2, 1);   /* decode attention through WINDOW_ATTN_DECODE */
    observe(&o, dir, 42, 2, 0);   /* ... through SPARSE_ATTN */
    cfg.compress_ratios[cfg.n_layers] = 4;   /* MTP block with the indexer */
    snprintf(dir, sizeof dir, "%s/tiny-mtp4", root_dir);
    assert_int_equal(dsv4q_synth_write(&cfg, 1, dir, 1, err, sizeof err), 0);
    observe(&o, dir, 42, 2, 1);
    int bad = 0;
    for (int st = 0; st < DSV4Q_STAGE_COUNT; st++) {
        const uint64_t want = dsv4q_stage_op_mask(st);
        char a[512], b[512];
        names(o.seen[st], a, sizeof a);
        names(want, b, sizeof b);
        printf("  %-13s calls%s\n", dsv4q_stage_get(st)->name, a[0] ? a : " -");
        if (o.seen[st] != want) {
            printf("    but its row says%s\n", b[0] ? b : " -");
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* ---- 2. derived links against hand-made lists --------------------------- */

#define BIT(st) (1u << DSV4Q_STAGE_##st)

static void test_op_stage_links(void **state)
{
    (void)state;
    char buf[256];
    /* by hand from DeepSeek's Block.forward: hc_pre runs before attention
     * and before the FFN, and once more each inside the MTP block */
    assert_int_equal(dsv4q_op_stage_mask(DSV4Q_OP_HC_PRE), BIT(HC_ATTN_PRE) | BIT(HC_FFN_PRE) | BIT(MTP));
    /* the experts run in MoE only (and MTP's MoE); no projection of the
     * gate is a LINEAR call: the gate is one MOE_GATE call */
    assert_int_equal(dsv4q_op_stage_mask(DSV4Q_OP_EXPERT), BIT(MOE) | BIT(MTP));
    assert_string_equal(dsv4q_op_stage_names(DSV4Q_OP_LINEAR, DSV4Q_STAGE_MASK_ALL, buf, sizeof buf),
                        "attn, head, mtp");
    assert_string_equal(dsv4q_op_stage_names(DSV4Q_OP_RMSNORM, dsv4q_stage_mask_main(), buf, sizeof buf),
                        "attn_norm, attn, ffn_norm, head");
    assert_string_equal(dsv4q_op_stage_names(DSV4Q_OP_TOPK, dsv4q_stage_mask_main(), buf, sizeof buf), "attn");
    assert_string_equal(dsv4q_op_stage_names(DSV4Q_OP_COUNT, DSV4Q_STAGE_MASK_ALL, buf, sizeof buf), "-");
    assert_int_equal(dsv4q_stage_mask_main(), DSV4Q_STAGE_MASK_ALL & ~BIT(MTP));
    assert_int_equal(dsv4q_stage_op_mask(DSV4Q_STAGE_EMBED), 0);   /* an exact decode, no operator */
    assert_int_equal(dsv4q_stage_op_mask(DSV4Q_STAGE_COUNT), 0);
    /* the V4 operators are all forward-pass operators: each is linked to a
     * stage of the main pass (an operator-only one would read "-") */
    static const int v4_ops[] = {DSV4Q_OP_LINEAR, DSV4Q_OP_RMSNORM, DSV4Q_OP_QHEAD_NORM, DSV4Q_OP_ROPE,
                                 DSV4Q_OP_ACT_QUANT, DSV4Q_OP_FP4_QUANT, DSV4Q_OP_HADAMARD, DSV4Q_OP_SPARSE_ATTN,
                                 DSV4Q_OP_COMPRESSOR, DSV4Q_OP_INDEXER_SCORE, DSV4Q_OP_TOPK, DSV4Q_OP_HC_PRE,
                                 DSV4Q_OP_HC_POST, DSV4Q_OP_HC_HEAD, DSV4Q_OP_MOE_GATE, DSV4Q_OP_EXPERT,
                                 DSV4Q_OP_WINDOW_ATTN_DECODE};
    for (size_t i = 0; i < sizeof v4_ops / sizeof v4_ops[0]; i++)
        if (!(dsv4q_op_stage_mask(v4_ops[i]) & dsv4q_stage_mask_main()))
            fail_msg("operator %s: linked to no stage", dsv4q_op_get(v4_ops[i])->name);
}

#define BIT41(st) (1u << DSV4Q_S41_##st)

/* V4.1's table (the V4.1 forward pass: DeepSeek's V4.1 model.py): by hand,
 * the lagged hc pre step before attention and the FFN, the Engram hash and
 * lookup in the engram row only, the two-level top-k and the codecs in
 * attention, the V4.1 gate in the MoE; no V4-only operator in its rows. */
static void test_op_stage_links_v41(void **state)
{
    (void)state;
    char buf[256];
    const int A = DSV4Q_ARCH_V41;
    assert_int_equal(dsv4q_op_stage_mask_arch(A, DSV4Q_OP_HC_PRE41), BIT41(HC_ATTN_PRE) | BIT41(HC_FFN_PRE));
    assert_int_equal(dsv4q_op_stage_mask_arch(A, DSV4Q_OP_ENGRAM_HASH), BIT41(ENGRAM));
    assert_int_equal(dsv4q_op_stage_mask_arch(A, DSV4Q_OP_ENGRAM41), BIT41(ENGRAM));
    assert_int_equal(dsv4q_op_stage_mask_arch(A, DSV4Q_OP_MOE_GATE41), BIT41(MOE));
    static const int attn41[] = {DSV4Q_OP_COMPRESSOR41, DSV4Q_OP_KV41_QUANT, DSV4Q_OP_INDEX41_SCORE,
                                 DSV4Q_OP_CANDIDATE_BLOCKS, DSV4Q_OP_TOPK41};
    for (size_t i = 0; i < sizeof attn41 / sizeof attn41[0]; i++)
        assert_string_equal(dsv4q_op_stage_names_arch(A, attn41[i], dsv4q_stage_mask_main_arch(A), buf, sizeof buf),
                            "attn");
    static const int v4only[] = {DSV4Q_OP_HC_PRE,     DSV4Q_OP_HC_HEAD, DSV4Q_OP_MOE_GATE,
                                 DSV4Q_OP_COMPRESSOR, DSV4Q_OP_TOPK,    DSV4Q_OP_INDEXER_SCORE};
    for (size_t i = 0; i < sizeof v4only / sizeof v4only[0]; i++) {
        assert_int_equal(dsv4q_op_stage_mask_arch(A, v4only[i]), 0);
        assert_string_equal(dsv4q_op_stage_names_arch(A, v4only[i], DSV4Q_STAGE_MASK_ALL, buf, sizeof buf), "-");
    }
    /* and the V4.1 operators are in none of V4's rows */
    assert_int_equal(dsv4q_op_stage_mask_arch(DSV4Q_ARCH_V4, DSV4Q_OP_HC_PRE41), 0);
    assert_int_equal(dsv4q_op_stage_mask(DSV4Q_OP_ENGRAM41), 0);
    /* every V4.1 row is in the main pass (no MTP / DSpark row) */
    assert_int_equal(dsv4q_stage_mask_main_arch(A), (1u << DSV4Q_S41_COUNT) - 1);
}

/* ---- 3. the check ------------------------------------------------------- */

static int check_with(int stage, const char *ops, const char *gate, char *err, size_t errlen)
{
    dsv4q_stage_info copy[DSV4Q_STAGE_COUNT];
    const dsv4q_stage_info *rows[DSV4Q_STAGE_COUNT];
    for (int i = 0; i < DSV4Q_STAGE_COUNT; i++) {
        copy[i] = *dsv4q_stage_get(i);
        rows[i] = &copy[i];
    }
    if (ops) copy[stage].ops = ops;
    if (gate) copy[stage].gate_op = gate;
    return dsv4q_stage_ops_check_rows(rows, DSV4Q_STAGE_COUNT, err, errlen);
}

static void test_check(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(dsv4q_stage_ops_check(err, sizeof err), 0);
    assert_int_equal(dsv4q_stage_gates_check(err, sizeof err), 0);   /* includes it */
    assert_int_equal(check_with(DSV4Q_STAGE_MOE, NULL, NULL, err, sizeof err), 0);

    assert_int_equal(check_with(DSV4Q_STAGE_MOE, "moe_gate, exprt", NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "stage moe: operator 'exprt' in its ops is not in DSV4Q_OP_LIST"));
    assert_int_equal(check_with(DSV4Q_STAGE_MOE, "moe_gate, expert, moe_gate", NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "stage moe: operator 'moe_gate' is named twice"));
    assert_int_equal(check_with(DSV4Q_STAGE_MOE, "moe_gate", NULL, err, sizeof err), -1);   /* gate is expert */
    assert_non_null(strstr(err, "stage moe: its gate operator 'expert' is not one of the operators it calls"));
    assert_int_equal(check_with(DSV4Q_STAGE_MOE, NULL, "moe_gate", err, sizeof err), 0);
    /* hc_head only in head and mtp: drop it from both -> called by no stage,
     * which is allowed (an operator-only case) */
    dsv4q_stage_info copy[DSV4Q_STAGE_COUNT];
    const dsv4q_stage_info *rows[DSV4Q_STAGE_COUNT];
    for (int i = 0; i < DSV4Q_STAGE_COUNT; i++) {
        copy[i] = *dsv4q_stage_get(i);
        rows[i] = &copy[i];
    }
    copy[DSV4Q_STAGE_HEAD].ops = "linear, rmsnorm";
    copy[DSV4Q_STAGE_MTP].ops = "linear";
    assert_int_equal(dsv4q_stage_ops_check_rows(rows, DSV4Q_STAGE_COUNT, err, sizeof err), 0);
    copy[DSV4Q_STAGE_HEAD].ops = NULL;
    assert_int_equal(dsv4q_stage_ops_check_rows(rows, DSV4Q_STAGE_COUNT, err, sizeof err), -1);
    assert_non_null(strstr(err, "stage head: no ops list"));
}

static int setup(void **state)
{
    (void)state;
    omp_set_num_threads(1);
    snprintf(root_dir, sizeof root_dir, "/tmp/dsv4q-test-stageops-XXXXXX");
    return mkdtemp(root_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_are_the_forward_pass),
        cmocka_unit_test(test_op_stage_links),
        cmocka_unit_test(test_op_stage_links_v41),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
