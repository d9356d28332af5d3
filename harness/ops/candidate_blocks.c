/*
 * candidate_blocks.c - CANDIDATE_BLOCKS, level one of V4.1's two-level
 * top-k (V4.1 model.py select_candidate_blocks, run by the candidate
 * source layer): per row, the score of block b (positions b*B .. b*B+B-1,
 * the last one padded with -inf) is its maximum; the block holding the
 * row's newest position (clen - 1) / B is forced to +inf (clen 0: none);
 * the min(topb, nblocks) best are kept, ties to the lower block id, any
 * whose score is -inf dropped; out: the kept ids ascending, -1 padded. A
 * selection, compared as a set against the block scores (swaps inside the
 * tie-run at the cut are legitimate). Level two, the position top-k inside
 * the kept blocks, is TOPK41.
 */
#include "harness/ops/op.h"
#include "oracle/ops41.h"

DSV4Q_OP_ROW(19, CANDIDATE_BLOCKS, candidate_blocks, 2, 1, 2)

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    NEED(0);
    const long rows = (long)in[0].shape[0], T = (long)in[0].shape[1];
    const int topb = (int)c->param[0], B = (int)c->param[1];
    const int32_t *cl = in[1].data;
    long *clen = malloc(sizeof(long) * (size_t)(rows > 0 ? rows : 1));
    uint8_t *mask = malloc((size_t)(rows * T > 0 ? rows * T : 1));
    int rc = !clen || !mask;
    if (!rc) {
        for (long i = 0; i < rows; i++) clen[i] = cl[i];
        rc = X(dsv4q_candidate_blocks)(a[0], rows, T, clen, topb, B, out[0], mask) ? 1 : 0;
    }
    free(clen);
    free(mask);
    return rc;
}
DSV4Q_OP_EXEC(candidate_blocks, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    const long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 12, &bad), T = dsv4q_kv_int(kv, "T", 1, 1 << 20, &bad),
               B = dsv4q_kv_int(kv, "B", 1, 1 << 12, &bad), topb = dsv4q_kv_int(kv, "topb", 1, 1 << 16, &bad);
    if (bad) {
        snprintf(err, errlen, "%s: bad rows/T/B/topb", c->key);
        return -1;
    }
    RECIPES("normal", "partial", "cuttie", "neginf", "clen0");
    const long nb = (T + B - 1) / B;
    float *sc = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, T, 0);
    int32_t *clen = dsv4q_case_input(c, 1, DSV4Q_BT_I32, 1, rows, 0, 0);
    NEEDP(sc);
    NEEDP(clen);
    const char *rc = c->recipe;
    for (long i = 0; i < rows; i++) {
        float *v = sc + i * T;
        /* clen: from T down over the rows (decode rows see all of T, prefill
         * rows fewer); partial: never a multiple of B (the newest block is
         * partly filled); clen0: every other row 0 */
        long n = T - (long)dsv4q_rng_below(r, (uint64_t)(T / 2 + 1));
        if (!strcmp(rc, "partial") && B > 1 && n % B == 0)
            n = n > 1 ? n - 1 - (long)dsv4q_rng_below(r, (uint64_t)(B - 1 < n - 1 ? B - 1 : n - 1)) : n;
        if (!strcmp(rc, "clen0") && i % 2 == 0) n = 0;
        clen[i] = (int32_t)n;
        for (long t = 0; t < T; t++) v[t] = dsv4q_gen_bf16(dsv4q_rng_gauss(r) * 4);
        if (!strcmp(rc, "cuttie"))
            /* block maxima on a coarse grid: ~16 distinct values over the
             * blocks, so the cut falls inside a run of equal block scores */
            for (long t = 0; t < T; t++) v[t] = (float)floor(v[t]);
        if (!strcmp(rc, "partial") && n > 0)
            /* the newest block's reachable positions score lowest: it wins
             * only because it is pinned */
            for (long t = (n - 1) / B * B; t < n; t++) v[t] = dsv4q_gen_bf16(-20 - dsv4q_rng_u01(r));
        if (!strcmp(rc, "neginf"))
            /* whole blocks unreachable (-inf) below clen, so fewer than topb
             * blocks have a finite score in some rows: -1 pads */
            for (long b = 0; b < nb; b++)
                if (dsv4q_rng_below(r, 4) != 0 || (i % 2 && b % 3 != 0))
                    for (long t = b * B; t < (b + 1) * B && t < T; t++) v[t] = -INFINITY;
        for (long t = n; t < T; t++) v[t] = -INFINITY;
    }
    dsv4q_case_output(c, 0, DSV4Q_BT_I32, 2, rows, topb, 0);
    c->param[0] = (double)topb;
    c->param[1] = (double)B;
    /* the block scores the selection is judged against (max, newest +inf) */
    double *z = dsv4q_case_alloc(c, sizeof(double) * (size_t)(rows * nb));
    if (!z) return dsv4q_case_oom(c, err, errlen);
    for (long i = 0; i < rows; i++)
        for (long b = 0; b < nb; b++) {
            double m = -INFINITY;
            for (long t = b * B; t < (b + 1) * B && t < T; t++) m = fmax(m, (double)sc[i * T + t]);
            z[i * nb + b] = clen[i] > 0 && b == (clen[i] - 1) / B ? INFINITY : m;
        }
    c->sel_scores = z;
    c->sel_rows = rows;
    c->sel_T = nb;
    c->sel_out = 0;
    return 0;
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (!(c->param[0] >= 1) || !(c->param[1] >= 1)) {
        snprintf(err, errlen, "candidate_blocks: topb = %g and B = %g must be >= 1", c->param[0], c->param[1]);
        return -1;
    }
    const int32_t *cl = c->in[1].data;
    for (long long i = 0; cl && i < c->in[1].shape[0]; i++)
        if (cl[i] < 0 || cl[i] > c->in[0].shape[1]) {
            snprintf(err, errlen, "candidate_blocks: clen[%lld] = %d outside 0..T", i, (int)cl[i]);
            return -1;
        }
    return 0;
}

DSV4Q_OP_DESC(
    candidate_blocks,
    .in = {T("score", "[rows,T]", "F32", "index scores of the candidate source; -inf where a row cannot reach"),
           T("clen", "[rows]", "I32", "compress length of each row (0..T)")},
    .out = {T("blocks", "[rows,topb]", "I32", "kept block ids ascending, -1 padded (a selection: compared as sets)")},
    .param = {"topb (candidate_topk_blocks)", "B (candidate_block_size)"},
    .oracle = "oracle/index41.c dsv4q_candidate_blocks", .reference = "V4.1 model.py select_candidate_blocks",
    .boundaries = "",
    .notes = "Block score = max over the block; the block of position clen-1 is pinned (+inf); ties to the lower "
             "block id (torch.topk leaves them open: swaps inside the tie-run at the cut are legitimate); a block "
             "whose score is -inf is never kept. The mask of the kept blocks is what TOPK41's consumers apply.",
    .keys = {{"rows", "4"}, {"T", "2048"}, {"B", "8"}, {"topb", "64"}},
    .cases =
        (const dsv4q_case_entry[]){
            {"candidate_blocks(rows=4,T=2048,B=8,topb=64,recipe=normal,seed=1)", SET_FLASH41},
            {"candidate_blocks(rows=4,T=2048,B=8,topb=64,recipe=partial,seed=1)", SET_FLASH41},
            {"candidate_blocks(rows=4,T=2048,B=8,topb=64,recipe=cuttie,seed=1)", SET_FLASH41},
            {"candidate_blocks(rows=4,T=2048,B=8,topb=64,recipe=neginf,seed=1)", SET_FLASH41},
            {"candidate_blocks(rows=4,T=2048,B=8,topb=64,recipe=clen0,seed=1)", SET_FLASH41},
            {"candidate_blocks(rows=2,T=32768,B=8,topb=2048,recipe=normal,seed=1)", SET_FLASH41},
            {NULL, 0}},
    .build = build, .check = check, .sel = 1u)
#endif
