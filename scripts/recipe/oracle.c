/*
 * recipe_scale.c - the oracle of the recipe's template operator
 * (scripts/recipe/op.c): y = x * k, rounded at norm_bf16. Compiled at both
 * widths like every oracle source; scripts/recipe-check.sh copies it to
 * recipe_scale.c in the oracle's folder of a scratch copy of the tree.
 */
#include "oracle/real.h"

void X(dsv4q_recipe_scale)(uint64_t bs, const real *x, long n, double k, real *y);

void X(dsv4q_recipe_scale)(uint64_t bs, const real *x, long n, double k, real *y)
{
    for (long i = 0; i < n; i++) y[i] = rb(bs, DSV4Q_B_NORM_BF16, x[i] * (real)k);
}
