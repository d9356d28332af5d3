/*
 * topk41.c - TOPK41, level two of V4.1's two-level top-k (the end of V4.1
 * model.py Indexer.forward): the score of every position outside the
 * candidate blocks (when given: the CANDIDATE_BLOCKS output of the
 * candidate source, blocks of B positions) is -inf; then the k largest
 * finite scores (ties to the lower position), a pick >= clen[row] is -1,
 * the rest ascending, the -1s last. Without blocks it is the candidate
 * source's (and every non-consumer's) own top-k. A selection, compared as
 * a set against the masked scores (swaps inside the tie-run at the cut
 * are legitimate).
 */
#include "harness/ops/op.h"
#include "oracle/ops41.h"

DSV4Q_OP_ROW(20, TOPK41, topk41, 3, 1, 2)

/* sc [rows, T] = -inf outside the listed blocks [rows, nb] of B positions
 * (ids < 0 or past T ignored). */
static void mask_blocks(real *sc, long rows, long T, const int32_t *blocks, long nb, long B, uint8_t *keep)
{
    for (long r = 0; r < rows; r++) {
        memset(keep, 0, (size_t)T);
        for (long j = 0; j < nb; j++) {
            const long b = blocks[r * nb + j];
            for (long t = b * B; b >= 0 && t < (b + 1) * B && t < T; t++) keep[t] = 1;
        }
        for (long t = 0; t < T; t++)
            if (!keep[t]) sc[r * T + t] = -INFINITY;
    }
}

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    NEED(0);
    const long rows = (long)in[0].shape[0], T = (long)in[0].shape[1];
    const int32_t *cl = in[1].data;
    long *clen = malloc(sizeof(long) * (size_t)(rows > 0 ? rows : 1));
    uint8_t *keep = malloc((size_t)(T > 0 ? T : 1));
    int rc = !clen || !keep;
    if (!rc) {
        for (long i = 0; i < rows; i++) clen[i] = cl[i];
        if (in[2].ndim == 2 && in[2].data)
            mask_blocks(a[0], rows, T, in[2].data, (long)in[2].shape[1], (long)c->param[1], keep);
        rc = X(dsv4q_topk41)(a[0], rows, T, (int)c->param[0], clen, out[0]) ? 1 : 0;
    }
    free(clen);
    free(keep);
    return rc;
}
DSV4Q_OP_EXEC(topk41, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    const long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 12, &bad), T = dsv4q_kv_int(kv, "T", 1, 1 << 20, &bad),
               k = dsv4q_kv_int(kv, "k", 1, 1 << 16, &bad), B = dsv4q_kv_int(kv, "B", 1, 1 << 12, &bad),
               topb = dsv4q_kv_int(kv, "topb", 0, 1 << 16, &bad);
    if (bad) {
        snprintf(err, errlen, "%s: bad rows/T/k/B/topb", c->key);
        return -1;
    }
    RECIPES("normal", "partial", "ties", "neginf", "clen0");
    const long nb = (T + B - 1) / B;
    const char *rc = c->recipe;
    float *sc = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, T, 0);
    int32_t *clen = dsv4q_case_input(c, 1, DSV4Q_BT_I32, 1, rows, 0, 0);
    int32_t *blk = topb ? dsv4q_case_input(c, 2, DSV4Q_BT_I32, 2, rows, topb, 0)
                        : dsv4q_case_input(c, 2, DSV4Q_BT_I32, 0, 0, 0, 0);
    NEEDP(sc);
    NEEDP(clen);
    if (topb) NEEDP(blk);
    for (long i = 0; i < rows; i++) {
        float *v = sc + i * T;
        /* clen from T down over the rows; partial: not a multiple of B;
         * clen0: every other row 0 */
        long n = T - (long)dsv4q_rng_below(r, (uint64_t)(T / 2 + 1));
        if (!strcmp(rc, "partial") && B > 1 && n % B == 0) n -= 1 + (long)dsv4q_rng_below(r, (uint64_t)(B - 1));
        if (!strcmp(rc, "clen0") && i % 2 == 0) n = 0;
        clen[i] = (int32_t)n;
        for (long t = 0; t < T; t++) v[t] = dsv4q_gen_bf16(dsv4q_rng_gauss(r) * 4);
        if (!strcmp(rc, "ties")) /* ~100 distinct values: the cut inside a run of equal scores */
            for (long t = 0; t < T; t++) v[t] = (float)(floor(v[t] * 4.0) / 4.0);
        if (!strcmp(rc, "partial") && n > 0) /* the newest (partial) block scores highest */
            for (long t = (n - 1) / B * B; t < n; t++) v[t] = dsv4q_gen_bf16(20 + dsv4q_rng_u01(r));
        for (long t = n; t < T; t++) v[t] = -INFINITY;
        if (!topb) continue;
        /* the candidate blocks: the newest block (as the source pins it),
         * then distinct random reachable ones; neginf: only two blocks in
         * odd rows and whole kept blocks at -inf, so fewer than k finite
         * positions remain (the rest -1) */
        int32_t *o = blk + i * topb;
        long m = 0;
        const long reach = n > 0 ? (n - 1) / B + 1 : 0, want = !strcmp(rc, "neginf") && i % 2 ? 2 : topb;
        if (reach > 0) o[m++] = (int32_t)(reach - 1);
        while (m < want && m < reach) {
            const int32_t b = (int32_t)dsv4q_rng_below(r, (uint64_t)reach);
            int dup = 0;
            for (long u = 0; u < m; u++) dup |= o[u] == b;
            if (!dup) o[m++] = b;
        }
        if (!strcmp(rc, "neginf") && m > 1)
            for (long t = (long)o[1] * B; t < ((long)o[1] + 1) * B && t < T; t++) v[t] = -INFINITY;
        for (long u = 1; u < m; u++) /* ascending, as CANDIDATE_BLOCKS writes them */
            for (long w = u; w > 0 && o[w - 1] > o[w]; w--) {
                const int32_t x = o[w];
                o[w] = o[w - 1];
                o[w - 1] = x;
            }
        for (long u = m; u < topb; u++) o[u] = -1;
    }
    (void)nb;
    dsv4q_case_output(c, 0, DSV4Q_BT_I32, 2, rows, k, 0);
    c->param[0] = (double)k;
    c->param[1] = (double)B;
    /* the scores the picks are judged against: masked by the blocks */
    double *z = dsv4q_case_alloc(c, sizeof(double) * (size_t)(rows * T));
    if (!z) return dsv4q_case_oom(c, err, errlen);
    for (long i = 0; i < rows; i++)
        for (long t = 0; t < T; t++) {
            int in = !topb;
            for (long u = 0; u < topb && !in; u++) in = blk[i * topb + u] >= 0 && t / B == blk[i * topb + u];
            z[i * T + t] = in ? (double)sc[i * T + t] : -INFINITY;
        }
    c->sel_scores = z;
    c->sel_rows = rows;
    c->sel_T = T;
    c->sel_out = 0;
    return 0;
}

static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (!(c->param[0] >= 1) || !(c->param[1] >= 1)) {
        snprintf(err, errlen, "topk41: k = %g and B = %g must be >= 1", c->param[0], c->param[1]);
        return -1;
    }
    const int32_t *cl = c->in[1].data;
    for (long long i = 0; cl && i < c->in[1].shape[0]; i++)
        if (cl[i] < 0 || cl[i] > c->in[0].shape[1]) {
            snprintf(err, errlen, "topk41: clen[%lld] = %d outside 0..T", i, (int)cl[i]);
            return -1;
        }
    if (c->in[2].ndim && (c->in[2].ndim != 2 || c->in[2].shape[0] != c->in[0].shape[0])) {
        snprintf(err, errlen, "topk41: blocks must be [rows, topb] or empty");
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(
    topk41,
    .in = {T("score", "[rows,T]", "F32", "index scores; -inf where a row cannot reach (t >= clen)"),
           T("clen", "[rows]", "I32", "compress length of each row (0..T)"),
           T("blocks", "[rows,topb]", "I32",
             "candidate blocks of the candidate source (ids, -1 ignored), or empty: no mask")},
    .out = {T("idx", "[rows,k]", "I32", "picks ascending, -1 last (a selection: compared as sets)")},
    .param = {"k: min(index_topk, T)", "B (candidate_block_size; used with blocks)"},
    .oracle = "oracle/index41.c dsv4q_topk41 (after the consumer's candidate mask, oracle/model_v41.c)",
    .reference = "V4.1 model.py Indexer.forward (masked score.topk, sort, idxs < compress_lens)", .boundaries = "",
    .notes = "Ties to the lower position (swaps inside the tie-run at the cut are legitimate). Where the candidate "
             "blocks leave fewer than k finite positions below clen, the rest are -1 (the reference would return "
             "-inf positions torch picks among ties; docs/v41.md).",
    .keys = {{"rows", "4"}, {"T", "4096"}, {"k", "512"}, {"B", "8"}, {"topb", "128"}},
    .cases =
        (const dsv4q_case_entry[]){
            {"topk41(rows=4,T=4096,k=512,B=8,topb=128,recipe=normal,seed=1)", SET_FLASH41},
            {"topk41(rows=4,T=4096,k=512,B=8,topb=0,recipe=normal,seed=1)", SET_FLASH41},
            {"topk41(rows=4,T=4096,k=512,B=8,topb=128,recipe=partial,seed=1)", SET_FLASH41},
            {"topk41(rows=4,T=4096,k=512,B=8,topb=128,recipe=ties,seed=1)", SET_FLASH41},
            {"topk41(rows=4,T=4096,k=512,B=8,topb=0,recipe=ties,seed=1)", SET_FLASH41},
            {"topk41(rows=4,T=4096,k=512,B=8,topb=128,recipe=neginf,seed=1)", SET_FLASH41},
            {"topk41(rows=4,T=4096,k=512,B=8,topb=128,recipe=clen0,seed=1)", SET_FLASH41},
            {NULL, 0}},
    .build = build, .check = check, .sel = 1u)
#endif
