/*
 * kv41_quant.c - KV41_QUANT, V4.1's compressed-KV codec in its in-place
 * quantize-dequantize form (model.py Attention._compress_kv:
 * fp4_act_quant(latent, 16, True, scale_dtype=torch.float8_e4m3fn)): per
 * block of 16, s = E4M3(max(amax, 6*2^-9) / 6) (RNE, subnormals included,
 * saturating at 448), x = E2M1(clamp(x/s, +-6)) * s. Its recipes aim at
 * what separates it from V4's FP4 quantizer: scales E8M0 cannot hold, the
 * amax floor, E2M1 ties, E4M3 subnormal scales and saturation at 448*6.
 */
#include "harness/ops/op.h"
#include "oracle/ops41.h"

DSV4Q_OP_ROW(17, KV41_QUANT, kv41_quant, 1, 1, 0)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    NEED(0);
    const long rows = (long)c->in[0].shape[0], n = (long)c->in[0].shape[1];
    real *y = out[0];
    memcpy(y, a[0], sizeof(real) * (size_t)(rows * n));
    X(dsv4q_kv41_quant)(y, rows, n);
    return 0;
}
DSV4Q_OP_EXEC(kv41_quant, exec)

#if DSV4Q_OP_ONCE
/* A random E4M3 scale: normal (code 8..126 without the powers of two when
 * nonpow2) or subnormal (1..7). */
static double scale_code(dsv4q_rng *r, int sub, int nonpow2)
{
    for (;;) {
        const uint8_t code = sub ? (uint8_t)(1 + dsv4q_rng_below(r, 7)) : (uint8_t)(8 + dsv4q_rng_below(r, 0x7F - 8));
        if (nonpow2 && !sub && (code & 7) == 0) continue;
        return dsv4q_e4m3_decode(code);
    }
}

static double sgn(dsv4q_rng *r) { return dsv4q_rng_below(r, 2) ? -1.0 : 1.0; }

/* One block of 16 at v for the recipe (normal is dsv4q_gen_act's). */
static void gen_block(dsv4q_rng *r, const char *recipe, float *v)
{
    static const double mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5};
    static const double grid[7] = {0.5, 1, 1.5, 2, 3, 4, 6};
    const int at = (int)dsv4q_rng_below(r, DSV4Q_KV41_BLOCK);
    if (!strcmp(recipe, "e4m3scale") || !strcmp(recipe, "ties") || !strcmp(recipe, "subnormal")) {
        /* amax = 6 s exactly, s an E4M3 value (not a power of two for
         * e4m3scale: an E8M0 scale 2^ceil(log2 s) moves every element;
         * subnormal: s in 2^-9..7*2^-9); the others on the grid times s
         * (e4m3scale), on its midpoints (ties: RNE to the even code), or
         * Gaussian (subnormal: the rounded scale decides) */
        const int sub = !strcmp(recipe, "subnormal");
        const double s = scale_code(r, sub, recipe[0] == 'e');
        for (int j = 0; j < DSV4Q_KV41_BLOCK; j++) {
            double x;
            if (recipe[0] == 'e') x = grid[dsv4q_rng_below(r, 7)] * s;
            else if (recipe[0] == 't') x = mid[dsv4q_rng_below(r, 7)] * s;
            else x = fmin(fabs(dsv4q_rng_gauss(r)) * 2.0, 5.9) * s;
            v[j] = (float)(x * sgn(r));
        }
        /* subnormal: the block maximum between 6 s and 6 (s + 2^-9), so a/6
         * rounds on the subnormal grid; otherwise exactly 6 s */
        v[at] = (float)((sub ? 6 * (s + dsv4q_rng_u01(r) * 0x1p-9) : 6 * s) * sgn(r));
    } else if (!strcmp(recipe, "floor")) {
        /* amax at the floor 6*2^-9 times 0, 1/2, 1 - ulp, 1, 1 + ulp, 9/8,
         * 3/2, 2: below the floor the scale stays 2^-9 */
        static const double f[8] = {0, 0.5, -1, 1, -2, 1.125, 1.5, 2};
        const double fl = DSV4Q_KV41_AMAX_FLOOR, k = f[dsv4q_rng_below(r, 8)];
        const float amax = k == -1 ? nextafterf((float)fl, 0) : k == -2 ? nextafterf((float)fl, 1) : (float)(k * fl);
        for (int j = 0; j < DSV4Q_KV41_BLOCK; j++) v[j] = (float)(dsv4q_rng_u01(r) * (double)amax * sgn(r));
        v[at] = amax * (float)sgn(r);
    } else { /* saturate: amax around 448*6 = 2688, up to 1.5x above it */
        static const double f[6] = {1, 0.9, 1.0625, 1.1, 1.25, 1.5};
        const double amax = 2688 * f[dsv4q_rng_below(r, 6)];
        for (int j = 0; j < DSV4Q_KV41_BLOCK; j++)
            v[j] = dsv4q_gen_bf16(fmin(fabs(dsv4q_rng_gauss(r)) * 0.4, 1) * amax * sgn(r));
        v[at] = (float)(amax * sgn(r));
    }
}

static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), n = dsv4q_kv_int(kv, "n", 1, 1 << 20, &bad);
    if (bad) {
        snprintf(err, errlen, "%s: bad rows/n", c->key);
        return -1;
    }
    if (n % DSV4Q_KV41_BLOCK) {
        snprintf(err, errlen, "%s: n must be a multiple of 16", c->key);
        return -1;
    }
    RECIPES("normal", "e4m3scale", "floor", "ties", "subnormal", "saturate");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    NEEDP(x);
    if (!strcmp(c->recipe, "normal")) dsv4q_gen_act(r, "normal", x, rows, n, 1.0, DSV4Q_KV41_BLOCK);
    else
        for (long b = 0; b < rows * n; b += DSV4Q_KV41_BLOCK) gen_block(r, c->recipe, x + b);
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    return 0;
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const long long n = c->in[0].ndim == 2 ? c->in[0].shape[1] : 0;
    if (n % DSV4Q_KV41_BLOCK) {
        snprintf(err, errlen, "kv41_quant: n = %lld must be a multiple of 16 (the block)", n);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(
    kv41_quant, .in = {T("x", "[rows,n]", "F32", "n a multiple of 16 (head_dim 512 in V4.1 Flash)")},
    .out = {T("y", "[rows,n]", "F32", "E2M1(clamp(x/s,+-6))*s per 16-block, s = E4M3(max(amax,6*2^-9)/6)")},
    .param = {NULL}, .oracle = "oracle/kv41.c dsv4q_kv41_quant",
    .reference =
        "V4.1 model.py Attention._compress_kv (fp4_act_quant, 16, inplace, E4M3 scale); kernel.py fp4_quant_kernel",
    .boundaries = "(the op IS the V4.1 compressed-KV cache simulation)",
    .notes = "The scale is a/6 rounded to nearest-even on the E4M3 grid (subnormals included; above 448 it "
             "saturates to 448), NOT a power of two: x/s may exceed 6 (clamped). E2M1 ties go to the even code "
             "(0.25->0, 0.75->1, 2.5->2, 5->4). The result lies on a discrete grid: a wrong scale or tie moves "
             "an element by a whole grid step.",
    .keys = {{"rows", "64"}, {"n", "512"}},
    .cases = (const dsv4q_case_entry[]){{"kv41_quant(rows=64,n=512,recipe=normal,seed=1)", SET_FLASH41},
                                        {"kv41_quant(rows=16,n=512,recipe=e4m3scale,seed=1)", SET_FLASH41},
                                        {"kv41_quant(rows=16,n=512,recipe=floor,seed=1)", SET_FLASH41},
                                        {"kv41_quant(rows=16,n=512,recipe=ties,seed=1)", SET_FLASH41},
                                        {"kv41_quant(rows=16,n=512,recipe=subnormal,seed=1)", SET_FLASH41},
                                        {"kv41_quant(rows=8,n=512,recipe=saturate,seed=1)", SET_FLASH41},
                                        {NULL, 0}},
    .build = build, .check = check)
#endif
