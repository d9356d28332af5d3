/*
 * window_attn_decode.c - WINDOW_ATTN_DECODE, one decode step of the
 * attention that owns the window ring update (model.py Attention.forward,
 * decode: kv_cache[start_pos % win] = kv, then sparse_attn): kv_new goes
 * into slot p % w FIRST, then the window slots oldest first and the
 * compressed columns are attended exactly as SPARSE_ATTN does. Its cases
 * sit on the ring's edges (just full, first wrap, wrapped, not full),
 * where reading the stale slot is the classic defect. Keys rows (compressed
 * rows) and sparse=1 as in sparse_attn.c (the long shapes).
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(16, WINDOW_ATTN_DECODE, window_attn_decode, 6, 2, 3)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    /* oracle/model.c decode: the ring slot p % w takes kv_new first,
     * then keys = [ring | cmp] and columns = window slots oldest first,
     * then the compressed columns offset by w */
    const long pos = (long)p[0], w = (long)p[1];
    const int H = in[0].ndim == 3 ? (int)in[0].shape[1] : 0, D = in[0].ndim == 3 ? (int)in[0].shape[2] : 0;
    const long Nc = in[3].ndim > 0 ? (long)in[3].shape[0] : 0;
    const long ncc = in[4].ndim > 0 && in[4].data ? (long)in[4].shape[in[4].ndim - 1] : 0;
    if (in[0].ndim != 3 || in[0].shape[0] != 1 || w < 1 || pos < 0 || in[2].ndim != 2 || in[2].shape[0] != w ||
        in[2].shape[1] != D || (Nc && in[3].shape[1] != D) || dsv4q_bt_numel(&in[1]) != D) {
        snprintf(err, errlen, "window_attn_decode: shapes do not match q [1,H,D], kv_new [1,D], ring [w,D] "
                 "(w = %ld), cmp [Nc,D]", w);
        return -1;
    }
    NEED(0); NEED(1); NEED(2); NEED(5);
    /* of cmp, only the rows cidx picks, packed (op.h dsv4q_op_rows): a
     * long case's compressed cache is 2 GiB of which it reads 512 rows */
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(w + ncc));
    long nk = 0;
    real *cmp = idx ? X(dsv4q_op_rows)(&in[3], D, in[4].data, ncc, idx + w, &nk) : NULL;
    real *ring = out[1], *keys = cmp ? malloc(sizeof(real) * (size_t)((w + nk) * D)) : NULL;
    if (!keys) {
        free(cmp);
        free(idx);
        return 1;
    }
    memcpy(ring, a[2], sizeof(real) * (size_t)(w * D));
    memcpy(ring + (pos % w) * D, a[1], sizeof(real) * (size_t)D);
    if ((bs >> DSV4Q_B_KV_F16) & 1u)   /* engine point: the ring IS the F16 KV cache */
        for (long i = 0; i < w * D; i++) ring[i] = (real)dsv4q_f16_decode(dsv4q_f16_encode((double)ring[i]));
    memcpy(keys, ring, sizeof(real) * (size_t)(w * D));
    memcpy(keys + w * D, cmp, sizeof(real) * (size_t)(nk * D));
    for (long j = 0; j < w; j++)
        idx[j] = pos >= w - 1 ? (int32_t)((pos % w + 1 + j) % w) : (j <= pos ? (int32_t)j : -1);
    for (long j = 0; j < ncc; j++) idx[w + j] = idx[w + j] < 0 ? -1 : (int32_t)(idx[w + j] + w);
    const int rc = X(dsv4q_sparse_attn)(bs, a[0], 1, H, D, keys, w + nk, idx, w + ncc, a[5], (real)p[2], out[0]);
    free(cmp);
    free(keys);
    free(idx);
    return rc ? 1 : 0;
}
DSV4Q_OP_EXEC(window_attn_decode, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long H = dsv4q_kv_int(kv, "H", 1, 1024, &bad), D = dsv4q_kv_int(kv, "D", 1, 4096, &bad), win = dsv4q_kv_int(kv, "win", 1, 1 << 16, &bad),
         pos = dsv4q_kv_int(kv, "p", 0, 1L << 30, &bad), sel = dsv4q_kv_int(kv, "sel", 0, 1 << 16, &bad);
    long rows = dsv4q_kv_int(kv, "rows", 0, 1L << 26, &bad), sparse = dsv4q_kv_int(kv, "sparse", 0, 1, &bad);
    if (bad || (rows && rows < sel) || (sparse && (!rows || sel < 3))) {
        snprintf(err, errlen, "%s: bad H/D/win/p/sel/rows/sparse (sparse=1 needs rows and sel >= 3)", c->key);
        return -1;
    }
    RECIPES("normal", "masked", "f32", "blocks");
    const long C = rows ? rows : 2 * sel;   /* compressed rows; sel of them are picked */
    float *q = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 3, 1, H, D), *kn = dsv4q_case_input(c, 1, DSV4Q_BT_F32, 2, 1, D, 0),
          *ring = dsv4q_case_input(c, 2, DSV4Q_BT_F32, 2, win, D, 0), *sink = dsv4q_case_input(c, 5, DSV4Q_BT_F32, 1, H, 0, 0);
    float *cmp = sparse ? dsv4q_case_input_sparse(c, 3, DSV4Q_BT_F32, 2, C, D, 0)
                        : dsv4q_case_input(c, 3, DSV4Q_BT_F32, C ? 2 : 0, C, D, 0);
    int32_t *cidx = dsv4q_case_input(c, 4, DSV4Q_BT_I32, sel ? 2 : 0, 1, sel, 0);
    NEEDP(q && kn && ring && sink && (!C || cmp) && (!sel || cidx));
    const int full = dsv4q_gen_full(c->recipe);
    const char *fr = full ? "f32" : "normal";
    dsv4q_gen_act(r, fr, q, H, D, 1.0, D);
    dsv4q_gen_act(r, fr, kn, 1, D, 1.0, D);
    /* every slot, including those of positions < 0 and the slot p % w
     * itself (position p - w: the stale row), holds its own noise */
    dsv4q_gen_act(r, fr, ring, win, D, 1.0, D);
    if (C && !sparse) dsv4q_gen_act(r, fr, cmp, C, D, 1.0, D); /* sparse: the picked rows only, below */
    for (long h = 0; h < H; h++) sink[h] = dsv4q_gen_store(full, dsv4q_rng_gauss(r));
    if (sel) {
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)C);
        NEEDP(perm);
        for (long j = 0; j < C; j++) perm[j] = (int32_t)j;
        for (long j = 0; j < sel; j++) {   /* sel distinct compressed rows, in random order */
            long t = j + dsv4q_rng_below(r, C - j);
            int32_t tmp = perm[j];
            perm[j] = perm[t];
            perm[t] = tmp;
            cidx[j] = perm[j];
        }
        free(perm);
        if (rows) cidx[sel - 1] = (int32_t)(C - 1);   /* the far end of the cache */
        const long wrap = dsv4q_gen_wrap_row(D);
        if (sparse && wrap < C - 1) { /* either side of an int32 byte offset into cmp */
            cidx[sel - 3] = (int32_t)(wrap - 1);
            cidx[sel - 2] = (int32_t)wrap;
        }
        if (!strcmp(c->recipe, "masked"))
            for (long j = 0; j < sel; j++)
                if (dsv4q_rng_below(r, 10) < 3) cidx[j] = dsv4q_rng_below(r, 4) ? -1 : (int32_t)(C + dsv4q_rng_below(r, 100));
        /* blocks: the compressed columns start at column w; with w a
         * multiple of 64 the cidx blocks are kernel blocks (the ring's
         * own masked blocks come from p < w - 1: keys p=63, p=64) */
        if (!strcmp(c->recipe, "blocks")) dsv4q_gen_mask_blocks(r, cidx, sel, 0, C);
        if (sparse) NEEDP(!dsv4q_gen_rows(r, fr, cmp, C, D, cidx, sel));
    }
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 3, 1, H, D);
    dsv4q_case_output(c, 1, DSV4Q_BT_F32, 2, win, D, 0);
    c->param[0] = (double)pos;
    c->param[1] = (double)win;
    c->param[2] = 1.0 / sqrt((double)D);
    return 0;
}

static void role(dsv4q_case *c, const dsv4q_kv *kv)
{
    (void)kv;
    dsv4q_case_role_last(c, "layers.0.attn.attn_sink");   /* the sink is the one weight: last input */
}

/* clang-format off */
DSV4Q_OP_DESC(window_attn_decode,
    .in = { T("q", "[1,H,D]", "F32", "the query at position p"), 
          T("kv_new", "[1,D]", "F32", "the current token's processed KV row (key = value)"), 
          T("ring", "[w,D]", "F32", "window ring BEFORE this step: slot pos % w holds position pos; " 
                                    "slots of positions < 0 hold anything"), 
          T("cmp", "[Nc,D]", "F32", "compressed KV rows, or empty (ndim 0)"), 
          T("cidx", "[1,nc]", "I32", "compressed columns (rows of cmp), -1 (or >= Nc) masked; or empty"), 
          T("sink", "[H]", "F32", "attn_sink, denominator only") },
    .out = { T("o", "[1,H,D]", "F32|BF16", "SPARSE_ATTN over [ring_out | cmp] with the decode column layout"), 
          T("ring_out", "[w,D]", "F32", "ring with kv_new written at slot p % w (every other slot unchanged)") },
    .param = { "p: position of the query (the token being decoded)", "w: window size (ring slots)", 
          "scale: softmax scale (D^-0.5)" },
    .oracle = "oracle/attn.c dsv4q_sparse_attn on the keys and columns oracle/model.c builds in decode",
    .reference = "model.py Attention.forward (decode: kv_cache[start_pos % win] = kv, then sparse_attn)",
    .boundaries = "attn_p_bf16, attn_out_bf16",
    .notes = "Order: write kv_new into slot p % w FIRST, then attend. Columns: window slots oldest first " 
        "(p >= w-1: p%w+1 .. w-1, 0 .. p%w; else 0..p, then -1 up to w columns), then cidx + w. " 
        "Reading the ring before the write (the stale slot of position p-w) is the window_off_by_one bug.",
    .keys = {{"H", "64"}, {"D", "512"}, {"win", "128"}, {"p", "300"}, {"sel", "512"}},
    .optkeys = {{"rows", "0"}, {"sparse", "0"}},
    .cases = (const dsv4q_case_entry[]){
        {"window_attn_decode(H=64,D=512,win=128,p=127,sel=512,recipe=normal,seed=1)", SET_FLASH},
        {"window_attn_decode(H=64,D=512,win=128,p=128,sel=512,recipe=normal,seed=1)", SET_FLASH},
        {"window_attn_decode(H=64,D=512,win=128,p=300,sel=512,recipe=normal,seed=1)", SET_FLASH},
        {"window_attn_decode(H=64,D=512,win=128,p=5,sel=512,recipe=normal,seed=1)", SET_FLASH},
        {"window_attn_decode(H=64,D=512,win=128,p=300,sel=512,recipe=masked,seed=1)", SET_FLASH},
        {"window_attn_decode(H=64,D=512,win=128,p=300,sel=512,recipe=f32,seed=1)", SET_FLASH},
        {"window_attn_decode(H=64,D=512,win=128,p=63,sel=512,recipe=blocks,seed=1)", SET_FLASH},
        {"window_attn_decode(H=8,D=256,win=128,p=64,sel=256,recipe=blocks,seed=1)", SET_FLASH},
        {"window_attn_decode(H=128,D=512,win=128,p=1000,sel=1024,recipe=normal,seed=1)", SET_PRO},
        {"window_attn_decode(H=128,D=512,win=128,p=300,sel=1024,recipe=masked,seed=1)", SET_PRO},
        {"window_attn_decode(H=128,D=512,win=128,p=5,sel=1024,recipe=normal,seed=1)", SET_PRO},
        {"window_attn_decode(H=128,D=512,win=128,p=128,sel=1024,recipe=normal,seed=1)", SET_PRO},
        {"window_attn_decode(H=128,D=512,win=128,p=1000,sel=1024,recipe=f32,seed=1)", SET_PRO},
        {"window_attn_decode(H=128,D=512,win=128,p=63,sel=1024,recipe=blocks,seed=1)", SET_PRO},
        {"window_attn_decode(H=128,D=128,win=128,p=64,sel=256,recipe=blocks,seed=1)", SET_PRO},
        {"window_attn_decode(H=64,D=512,win=128,p=1048575,sel=512,rows=262144,recipe=normal,seed=1)", SET_LONG},
        /* 2 GiB + 256 KiB of compressed rows: position 4M at ratio 4 */
        {"window_attn_decode(H=8,D=512,win=128,p=4194815,sel=512,rows=1048704,sparse=1,recipe=f32,seed=1)",
         SET_LONG | SET_LONG_SLICE},
        {NULL, 0}},
    .build = build, .role = role, .rowfloor = 1u)
/* clang-format on */
#endif
