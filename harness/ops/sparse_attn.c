/*
 * sparse_attn.c - SPARSE_ATTN, attention over a selected set of key/value
 * rows (kernel.py sparse_attn_kernel): per query, the columns idx picks
 * (window rows, then compressed rows; -1 or >= N masked), an online
 * softmax over blocks of 64 columns in idx order with the attention sink
 * in the denominator only, probabilities at attn_p_bf16. Its cases mask
 * whole 64-column blocks and whole queries, where online softmaxes break;
 * key rows=N sizes the KV (the long shapes), and sparse=1 holds it sparse
 * (cases.h dsv4q_case_input_sparse: only the picked rows hold values, and
 * rows either side of the int32 byte offset are picked), so a KV past
 * 2^31 bytes costs what its picked rows do.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(7, SPARSE_ATTN, sparse_attn, 4, 1, 1)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    const long s = (long)in[0].shape[0], ncols = (long)in[2].shape[1];
    const int H = (int)in[0].shape[1], D = (int)in[0].shape[2];
    NEED(0);
    NEED(3);
    /* only the kv rows idx picks (op.h dsv4q_op_rows): a long case's KV is
     * 2 GiB of which it reads 640 rows */
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(s * ncols > 0 ? s * ncols : 1));
    long nk = 0;
    real *kv = idx ? X(dsv4q_op_rows)(&in[1], D, in[2].data, s * ncols, idx, &nk) : NULL;
    const int rc = !kv || X(dsv4q_sparse_attn)(bs, a[0], s, H, D, kv, nk, idx, ncols, a[3], (real)p[0], out[0]);
    free(kv);
    free(idx);
    return rc ? 1 : 0;
}
DSV4Q_OP_EXEC(sparse_attn, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = dsv4q_kv_int(kv, "s", 1, 4096, &bad), H = dsv4q_kv_int(kv, "H", 1, 1024, &bad), D = dsv4q_kv_int(kv, "D", 1, 4096, &bad),
         win = dsv4q_kv_int(kv, "win", 0, 1 << 16, &bad), sel = dsv4q_kv_int(kv, "sel", 0, 1 << 16, &bad);
    long rows = dsv4q_kv_int(kv, "rows", 0, 1L << 26, &bad), sparse = dsv4q_kv_int(kv, "sparse", 0, 1, &bad);
    if (bad || win + sel == 0 || (rows && rows < win + sel) || (sparse && (!rows || sel < 3))) {
        snprintf(err, errlen,
                 "%s: bad s/H/D/win/sel/rows/sparse (rows 0 or >= win + sel; sparse=1 needs rows and sel >= 3)",
                 c->key);
        return -1;
    }
    RECIPES("normal", "masked", "extreme", "f32", "blocks");
    if (sparse && !strcmp(c->recipe, "extreme")) { /* its dominant keys are every 37th row of the whole kv */
        snprintf(err, errlen, "%s: sparse=1 is not defined for recipe extreme", c->key);
        return -1;
    }
    /* kv = [window rows | compressed rows]; sel of the C picked per query */
    const long C = rows ? rows - win : 2 * sel, N = win + C, ncols = win + sel;
    float *q = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, s, H, D);
    float *k = sparse ? dsv4q_case_input_sparse(c, 1, DSV4Q_BT_F32, 2, N, D, 0)
                      : dsv4q_case_input(c, 1, DSV4Q_BT_F32, 2, N, D, 0);
    int32_t *idx = dsv4q_case_input(c, 2, DSV4Q_BT_I32, 2, s, ncols, 0);
    float *sink = dsv4q_case_input(c, 3, DSV4Q_BT_F32, 1, H, 0, 0);
    NEEDP(q && k && idx && sink);
    int ex = !strcmp(c->recipe, "extreme"), full = dsv4q_gen_full(c->recipe);
    const char *fr = full ? "f32" : "normal";
    dsv4q_gen_act(r, fr, q, s * H, D, ex ? 6.0 : 1.0, D);
    if (!sparse) dsv4q_gen_act(r, fr, k, N, D, 1.0, D); /* sparse: the picked rows only, below */
    if (ex)   /* a few dominant keys: probabilities near 0/1, large logits */
        for (long i = 0; i < N; i += 37)
            for (long j = 0; j < D; j++) k[i * D + j] = dsv4q_gen_bf16(k[i * D + j] * 4);
    for (long h = 0; h < H; h++) sink[h] = dsv4q_gen_store(full, dsv4q_rng_gauss(r));   /* attn_sink is an F32 parameter */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)(C ? C : 1));
    NEEDP(perm);
    for (long i = 0; i < s; i++) {
        int32_t *row = idx + i * ncols;
        for (long j = 0; j < win; j++) row[j] = (int32_t)j;   /* window, ascending */
        for (long j = 0; j < C; j++) perm[j] = (int32_t)(win + j);
        for (long j = 0; j < sel; j++) {                      /* sel distinct compressed rows */
            long t = j + dsv4q_rng_below(r, C - j);
            int32_t tmp = perm[j];
            perm[j] = perm[t];
            perm[t] = tmp;
            row[win + j] = perm[j];
        }
        if (rows && sel) row[win + sel - 1] = (int32_t)(N - 1);   /* the far end of the cache */
        const long wrap = dsv4q_gen_wrap_row(D);
        if (sparse && wrap - 1 >= win && wrap < N - 1) { /* either side of an int32 byte offset */
            row[win + sel - 3] = (int32_t)(wrap - 1);
            row[win + sel - 2] = (int32_t)wrap;
        }
        if (!strcmp(c->recipe, "masked")) {
            for (long j = 0; j < ncols; j++)
                if (dsv4q_rng_below(r, 10) < 3) row[j] = dsv4q_rng_below(r, 4) ? -1 : (int32_t)(N + dsv4q_rng_below(r, 100));
            if (i == s - 1 && s > 1)   /* a query with every column masked */
                for (long j = 0; j < ncols; j++) row[j] = -1;
        }
        if (!strcmp(c->recipe, "blocks")) dsv4q_gen_mask_blocks(r, row, ncols, i, N);
    }
    free(perm);
    if (sparse) NEEDP(!dsv4q_gen_rows(r, fr, k, N, D, idx, s * ncols));
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 3, s, H, D);
    c->param[0] = 1.0 / sqrt((double)D);
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_role_last(c, "layers.0.attn.attn_sink");   /* the sink is the one weight: last input */
}

/* clang-format off */
DSV4Q_OP_DESC(sparse_attn,
    .in = { T("q", "[s,H,D]", "F32", "queries"), T("kv", "[N,D]", "F32", "key = value rows"), 
          T("idx", "[s,ncols]", "I32", "selected rows per query, -1 (or >= N) masked"), 
          T("sink", "[H]", "F32", "attn_sink, denominator only") },
    .out = { T("o", "[s,H,D]", "F32|BF16", "softmax(scale q.k) v; all columns masked -> 0") },
    .param = { "scale: softmax scale (D^-0.5)" },
    .oracle = "oracle/attn.c dsv4q_sparse_attn",
    .reference = "kernel.py sparse_attn_kernel",
    .boundaries = "attn_p_bf16, attn_out_bf16",
    .notes = "Online softmax over blocks of 64 idx columns in idx order (matters for the source profile).",
    .keys = {{"s", "2"}, {"H", "64"}, {"D", "512"}, {"win", "128"}, {"sel", "512"}},
    .optkeys = {{"rows", "0"}, {"sparse", "0"}},
    .cases = (const dsv4q_case_entry[]){
        {"sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=normal,seed=1)", SET_FLASH},
        {"sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=masked,seed=1)", SET_FLASH},
        {"sparse_attn(s=1,H=64,D=512,win=128,sel=512,recipe=extreme,seed=1)", SET_FLASH},
        {"sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=f32,seed=1)", SET_FLASH},
        {"sparse_attn(s=3,H=8,D=512,win=128,sel=512,recipe=blocks,seed=1)", SET_FLASH},
        {"sparse_attn(s=2,H=16,D=256,win=128,sel=256,recipe=f32,seed=1)", SET_FLASH},
        {"sparse_attn(s=2,H=128,D=512,win=128,sel=1024,recipe=normal,seed=1)", SET_PRO},
        {"sparse_attn(s=2,H=128,D=512,win=128,sel=1024,recipe=masked,seed=1)", SET_PRO},
        {"sparse_attn(s=1,H=128,D=512,win=128,sel=1024,recipe=extreme,seed=1)", SET_PRO},
        {"sparse_attn(s=2,H=128,D=512,win=128,sel=1024,recipe=f32,seed=1)", SET_PRO},
        {"sparse_attn(s=3,H=16,D=512,win=128,sel=1024,recipe=blocks,seed=1)", SET_PRO},
        {"sparse_attn(s=2,H=16,D=128,win=128,sel=256,recipe=f32,seed=1)", SET_PRO},
        {"sparse_attn(s=1,H=64,D=512,win=128,sel=512,rows=262272,recipe=normal,seed=1)", SET_LONG},
        {"sparse_attn(s=1,H=8,D=512,win=128,sel=512,rows=1048704,recipe=f32,seed=1)", SET_LONG},
        {"sparse_attn(s=1,H=8,D=512,win=128,sel=512,rows=1048704,sparse=1,recipe=f32,seed=1)", SET_LONG | SET_LONG_SLICE},
        /* 2^31 + 8192 ELEMENTS (8 GiB, sparse): `int off = row * D` wraps at the far end */
        {"sparse_attn(s=1,H=8,D=64,win=128,sel=512,rows=33554560,sparse=1,recipe=f32,seed=1)", SET_LONG},
        {NULL, 0}},
    .build = build, .role = role, .rowfloor = 1u)
/* clang-format on */
#endif
