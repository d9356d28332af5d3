/*
 * recipe_scale.c - RECIPE_SCALE, the template operator of the "Add an
 * operator" recipe (docs/architecture.md): y[rows,n] = x[rows,n] * k, the
 * product stored at norm_bf16. scripts/recipe-check.sh copies this file to
 * recipe_scale.c in harness/ops of a scratch copy of the tree (ID replaced by
 * the next operator id) to prove the recipe; it is not built here.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(@ID@, RECIPE_SCALE, recipe_scale, 1, 1, 1)

/* The oracle function (scripts/recipe/oracle.c, in the oracle's folder of
 * the scratch copy); declared here because only
 * this adapter calls it (the forward pass would need it in oracle/ops.inc). */
void X(dsv4q_recipe_scale)(uint64_t bs, const real *x, long n, double k, real *y);

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    NEED(0);
    X(dsv4q_recipe_scale)(bs, a[0], (long)dsv4q_bt_numel(&c->in[0]), c->param[0], out[0]);
    return 0;
}
DSV4Q_OP_EXEC(recipe_scale, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), n = dsv4q_kv_int(kv, "n", 1, 1 << 20, &bad);
    double k = dsv4q_kv_num(kv, "k", -1e6, 1e6, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/n/k", c->key); return -1; }
    RECIPES("normal", "f32");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    NEEDP(x);
    dsv4q_gen_act(r, c->recipe, x, rows, n, 1.0, n);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    c->param[0] = k;
    return 0;
}

DSV4Q_OP_DESC(recipe_scale,
    .in = {T("x", "[rows,n]", "F32", "")},
    .out = {T("y", "[rows,n]", "F32|BF16", "x * k")},
    .param = {"k: the factor"},
    .oracle = "oracle/recipe_scale.c dsv4q_recipe_scale",
    .reference = "(none: the recipe's template)",
    .boundaries = "norm_bf16",
    .notes = "",
    .keys = {{"rows", "2"}, {"n", "64"}, {"k", "3"}},
    .cases = (const dsv4q_case_entry[]){
        {"recipe_scale(rows=2,n=64,k=3,recipe=normal,seed=1)", SET_FLASH},
        {"recipe_scale(rows=2,n=64,k=0.1,recipe=f32,seed=1)", SET_FLASH},
        {NULL, 0}},
    .build = build)
#endif
