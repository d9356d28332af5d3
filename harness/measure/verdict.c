/*
 * verdict.c - harness/measure/verdict.h: metric names, the gate evaluator
 * and the stage -> gate links (one copy; qualify, replay and the whole-model
 * gate all judge with it).
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "base/util.h"
#include "harness/ops/ops.h"
#include "harness/measure/verdict.h"
#include "harness/ops/stage_ops.h"
#include "oracle/stages.h"
#include "oracle/formats.h"

static const char *const mnames[DSV4Q_M_COUNT] = {
    "nrms", "max_abs", "max_rel", "ulp_max", "cos_dist", "argmax_miss", "nonfinite", "jaccard_dist", "flips", "rerun",
};

const char *dsv4q_metric_name(int m) { return m >= 0 && m < DSV4Q_M_COUNT ? mnames[m] : NULL; }

int dsv4q_metric_find(const char *name)
{
    for (int m = 0; m < DSV4Q_M_COUNT; m++)
        if (!strcmp(mnames[m], name)) return m;
    return -1;
}

double dsv4q_dtype_unit(int dtype)
{
    switch (dtype) {
    case DSV4Q_BT_BF16: return 0x1p-8;
    case DSV4Q_BT_F16: return 0x1p-11;
    case DSV4Q_BT_F32: return 0x1p-24;
    case DSV4Q_BT_F64: return 0x1p-53;
    default: return 0;
    }
}

double dsv4q_gate_bound(const dsv4q_gate_rule *r, double level, int dtype)
{
    if (isnan(level)) return NAN;
    int di = dtype == DSV4Q_BT_BF16 ? 0 : dtype == DSV4Q_BT_F16 ? 1 : dtype == DSV4Q_BT_F32 ? 2 : -1;
    double fl = r->floor + (di >= 0 ? r->floor_u[di] * dsv4q_dtype_unit(dtype) : 0);
    if (isinf(level)) return r->factor > 0 ? INFINITY : fl;
    return r->factor * level + fl;
}

int dsv4q_gate_pass(double value, double bound)
{
    if (isnan(value) || isnan(bound)) return 0;
    return value <= bound;
}

dsv4q_judgement dsv4q_judge(const dsv4q_gate_rule *r, double value, double level, int dtype)
{
    dsv4q_judgement v = {NAN, 0, 1};
    if (!r) return v;
    v.bound = dsv4q_gate_bound(r, level, dtype);   /* reported even when not gated */
    v.gated = r->on != 0;
    v.pass = !v.gated || dsv4q_gate_pass(value, v.bound);
    assert(!(v.gated && v.pass && (isnan(value) || isnan(v.bound))));   /* G2: NaN never passes */
    return v;
}

const dsv4q_gate_rule *dsv4q_stage_rule(const dsv4q_gates *g, int st, int m)
{
    if (!g || st < 0 || st >= DSV4Q_STAGE_COUNT || m < 0 || m >= DSV4Q_M_COUNT) return NULL;
    if (g->stage_set[st]) return &g->stage[st][m];
    const int op = dsv4q_stage_gate_op(st);
    return op >= 0 ? &g->op[op][m] : NULL;
}

const dsv4q_gate_rule *dsv4q_stage_rule_arch(const dsv4q_gates *g, int arch, int st, int m)
{
    if (arch == DSV4Q_ARCH_V4) return dsv4q_stage_rule(g, st, m);
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(arch, st);
    if (!g || !si || m < 0 || m >= DSV4Q_M_COUNT) return NULL;
    const int v4 = dsv4q_stage_find(si->name); /* the "stages" section names stages; V4's names */
    if (v4 >= 0 && g->stage_set[v4]) return &g->stage[v4][m];
    const int op = si->gate_op ? dsv4q_op_find(si->gate_op) : -1;
    return op >= 0 ? &g->op[op][m] : NULL;
}

int dsv4q_stage_gate_op(int stage)
{
    const dsv4q_stage_info *si = dsv4q_stage_get(stage);
    return si && si->gate_op ? dsv4q_op_find(si->gate_op) : -1;
}

int dsv4q_stage_gates_check(char *err, size_t errlen)
{
    if (dsv4q_stage_table_check(err, errlen)) return -1;
    for (int arch = DSV4Q_ARCH_V4; arch <= DSV4Q_ARCH_V41; arch++)
        for (int st = 0; st < dsv4q_stage_count_arch(arch); st++) {
            const dsv4q_stage_info *si = dsv4q_stage_get_arch(arch, st);
            if (!si->gate_op || dsv4q_op_find(si->gate_op) < 0)
                return dsv4q_errf(err, errlen, "stage %s%s: gate operator '%s' is not in DSV4Q_OP_LIST", si->name,
                                  arch == DSV4Q_ARCH_V41 ? " (V4.1)" : "", si->gate_op ? si->gate_op : "");
        }
    return dsv4q_stage_ops_check(err, errlen);   /* and the stage -> operators links */
}
