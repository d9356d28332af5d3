/*
 * engram_hash.c - ENGRAM_HASH, DeepSeek V4.1's Engram n-gram hash for one
 * Engram layer (V4.1 engram.py NgramHashState.forward): compressed token
 * ids in, table rows out. The call carries everything the hash reads, so an
 * engine's kernel is held against the oracle on identical inputs: the ids
 * of the n positions and of the max_ngram - 1 before them (-1 = DEAD, an
 * image token), the layer's bucket primes and multipliers as the config
 * derives them (oracle/engram_hash.h E1, E2; I64 inputs, so a case can also
 * pass values no config produces: multipliers past E2's bound, whose
 * products wrap), the call's start position and the pad's compressed id.
 * Integer code: the same at both widths, and judged EXACT (.exact: any id
 * unlike the reference fails the case).
 */
#include "harness/ops/op.h"
#include "oracle/engram_hash.h"

DSV4Q_OP_ROW(21, ENGRAM_HASH, engram_hash, 3, 1, 3)

/* A refusal: the message into err, -1. */
#define BAD(...) (snprintf(err, errlen, __VA_ARGS__), -1)

/* The contract's value rules, for the adapter and for caller tensors (the
 * check hook): 0, or -1 with a message naming the tensor or param. */
static int validate(const dsv4q_bcall *c, char *err, size_t errlen)
{
    if (c->nin < 3 || c->nparam < 3 || !c->in || !c->param)
        return BAD("engram_hash: needs 3 inputs (ids, primes, mult) and 3 params");
    const dsv4q_bt *ids = &c->in[0], *pr = &c->in[1], *mu = &c->in[2];
    if (ids->ndim != 1 || ids->dtype != DSV4Q_BT_I32 || !ids->data)
        return BAD("engram_hash: ids must be a 1-D I32 tensor [n+N-1]");
    if (pr->ndim != 1 || pr->dtype != DSV4Q_BT_I64 || !pr->data || mu->ndim != 1 || mu->dtype != DSV4Q_BT_I64 ||
        !mu->data)
        return BAD("engram_hash: primes and mult must be 1-D I64 tensors");
    const long long N = mu->shape[0], C = pr->shape[0], T = ids->shape[0];
    if (N < 2 || N > DSV4Q_ENGRAM_MAX_NGRAM)
        return BAD("engram_hash: mult has %lld entries: max_ngram must be 2..%d", N, DSV4Q_ENGRAM_MAX_NGRAM);
    if (C < N - 1 || C % (N - 1) || C / (N - 1) > DSV4Q_ENGRAM_MAX_HEADS)
        return BAD("engram_hash: primes has %lld entries, must be (N-1) * heads with N = %lld, heads 1..%d", C, N,
                   DSV4Q_ENGRAM_MAX_HEADS);
    if (T < N - 1) return BAD("engram_hash: ids has %lld entries, fewer than the N-1 = %lld look-back slots", T, N - 1);
    const double start = c->param[0], pad = c->param[1], V = c->param[2];
    if (!(V >= 1 && V <= 2147483647.0 && V == floor(V)))
        return BAD("engram_hash: V = %g must be an integer in 1..2^31-1 (ids are I32)", V);
    if (!(start >= 0 && start <= 9007199254740992.0 && start == floor(start)))
        return BAD("engram_hash: start = %g must be a non-negative integer", start);
    if (!(pad >= 0 && pad < V && pad == floor(pad)))
        return BAD("engram_hash: pad = %g must be a compressed id in [0, V = %.0f)", pad, V);
    const int64_t *p = pr->data;
    int64_t sum = 0;
    for (long long k = 0; k < C; k++) {
        if (p[k] < 1) return BAD("engram_hash: primes[%lld] = %lld must be >= 1", k, (long long)p[k]);
        sum += p[k] < INT32_MAX ? p[k] : INT32_MAX;   /* no overflow: C <= 16 * 256 terms */
        if (sum > (int64_t)INT32_MAX + 1)           /* the largest id is the sum - 1 */
            return BAD("engram_hash: the primes up to column %lld sum past 2^31: the bucket ids "
                       "do not fit the I32 output",
                       k);
    }
    const int32_t *id = ids->data;
    for (long long j = 0; j < T; j++)
        if (id[j] < DSV4Q_ENGRAM_DEAD || id[j] >= V)
            return BAD("engram_hash: ids[%lld] = %d outside [-1, V = %.0f) (-1 = DEAD)", j, (int)id[j], V);
    if (c->out && c->nout >= 1 && (c->out[0].ndim != 2 || c->out[0].shape[0] != T - N + 1 || c->out[0].shape[1] != C))
        return BAD("engram_hash: bucket must be [%lld, %lld] (n = T - N + 1, ncols)", T - N + 1, C);
    return 0;
}

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    (void)a;
    if (validate(c, err, errlen)) return -1;
    const dsv4q_bt *in = c->in;
    const long N = (long)in[2].shape[0], C = (long)in[1].shape[0], T = (long)in[0].shape[0], n = T - N + 1;
    const int32_t *ids = in[0].data;
    const int64_t *pr = in[1].data;
    int64_t *ctx = malloc(sizeof(int64_t) * (size_t)T), *off = malloc(sizeof(int64_t) * (size_t)C),
            *o = malloc(sizeof(int64_t) * (size_t)(n * C > 0 ? n * C : 1));
    int rc = !ctx || !off || !o;
    if (!rc) {
        for (long j = 0; j < T; j++) ctx[j] = ids[j];
        for (long k = 0, acc = 0; k < C; acc += (long)pr[k], k++) off[k] = acc;   /* E4: cumsum([0, primes[:-1]]) */
        rc = dsv4q_engram_hash_ctx(ctx, (long)c->param[0], n, (int)N, (int)(C / (N - 1)), in[2].data, pr, off,
                                   (int64_t)c->param[1], o, err, errlen)
                 ? -1
                 : 0;
    }
    int32_t *y = out[0];
    for (long k = 0; !rc && k < n * C; k++) y[k] = (int32_t)o[k];   /* < 2^31: validate */
    free(ctx);
    free(off);
    free(o);
    return rc;
}
DSV4Q_OP_EXEC(engram_hash, exec)

#if DSV4Q_OP_ONCE
/* Recipe edge: 1 when some column of the row at ctx[i + N - 1] (position
 * start + i) lands on its prime's edge, floor_mod 0 or prime - 1 (the
 * oracle with zero offsets gives the bare floor_mod). */
static int on_edge(const int64_t *ctx, long i, long start, int N, int H, const int64_t *m, const int64_t *pr,
                   const int64_t *zero, int64_t pad, int64_t *tmp)
{
    char e[8];
    if (dsv4q_engram_hash_ctx(ctx + i, start + i, 1, N, H, m, pr, zero, pad, tmp, e, sizeof e)) return 0;
    for (int k = 0; k < (N - 1) * H; k++)
        if (tmp[k] == 0 || tmp[k] == pr[k] - 1) return 1;
    return 0;
}

static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    const long n = dsv4q_kv_int(kv, "n", 1, 1 << 16, &bad), N = dsv4q_kv_int(kv, "N", 2, DSV4Q_ENGRAM_MAX_NGRAM, &bad),
               H = dsv4q_kv_int(kv, "H", 1, DSV4Q_ENGRAM_MAX_HEADS, &bad),
               evs = dsv4q_kv_int(kv, "evs", 1, 1L << 30, &bad), V = dsv4q_kv_int(kv, "V", 2, INT32_MAX, &bad),
               layer = dsv4q_kv_int(kv, "layer", 0, 1 << 20, &bad),
               start = dsv4q_kv_int(kv, "start", 0, 1L << 40, &bad);
    if (bad) {
        snprintf(err, errlen, "%s: bad n/N/H/evs/V/layer/start", c->key);
        return -1;
    }
    RECIPES("normal", "barrier", "edge", "negroll", "bigids");
    const char *rc = c->recipe;
    const long C = (N - 1) * H, T = n + N - 1;
    int32_t *ids = dsv4q_case_input(c, 0, DSV4Q_BT_I32, 1, T, 0, 0);
    int64_t *pr = dsv4q_case_input(c, 1, DSV4Q_BT_I64, 1, C, 0, 0);
    int64_t *m = dsv4q_case_input(c, 2, DSV4Q_BT_I64, 1, N, 0, 0);
    int64_t *ctx = dsv4q_case_alloc(c, sizeof(int64_t) * (size_t)T), *zero = dsv4q_case_alloc(c, 8 * (size_t)C),
            *tmp = dsv4q_case_alloc(c, 8 * (size_t)C);
    NEEDP(ids);
    NEEDP(pr);
    NEEDP(m);
    NEEDP(ctx);
    NEEDP(zero);
    NEEDP(tmp);
    /* the first Engram layer's primes (E1) and layer `layer`'s multipliers
     * (E2) for a compressed vocabulary of V */
    const int lid = (int)layer;
    if (dsv4q_engram_primes(pr, 1, (int)N, (int)H, evs) || dsv4q_engram_multipliers(m, &lid, 1, (int)N, V)) {
        snprintf(err, errlen, "%s: the Engram layout cannot be derived", c->key);
        return -1;
    }
    int64_t sum = 0;
    for (long k = 0; k < C; k++) sum += pr[k];
    if (sum > (int64_t)INT32_MAX + 1) {
        snprintf(err, errlen, "%s: the primes sum to %lld: the bucket ids do not fit I32", c->key, (long long)sum);
        return -1;
    }
    if (!strcmp(rc, "negroll"))   /* odd int64 multipliers over the whole range: products wrap, rolls go negative */
        for (long s = 0; s < N; s++) {
            const uint64_t u = dsv4q_rng_next(r) | 1u;
            memcpy(&m[s], &u, sizeof u);
        }
    const int64_t pad = 1 + dsv4q_rng_below(r, V - 1);
    /* ids[j] is position q = start - (N-1) + j; entries at q < 0 get valid
     * ids too (never DEAD): a kernel that reads them fails */
    for (long j = 0; j < T; j++) {
        long v = dsv4q_rng_below(r, V);
        if (!strcmp(rc, "bigids")) v = V - 1 - dsv4q_rng_below(r, V < 16 ? V : 16);   /* id * m near 2^63 */
        ids[j] = (int32_t)v;
    }
    if (!strcmp(rc, "barrier")) {
        /* DEAD runs of 1-3 positions (~1 in 6 starts one), and two pinned:
         * at the position before the call (when there is one: a barrier
         * from the cache) and mid-call behind a valid id */
        for (long j = 0; j < T; j++) {
            if (start - (N - 1) + j < 0 || dsv4q_rng_below(r, 6)) continue;
            for (long u = 0, len = 1 + dsv4q_rng_below(r, 3); u < len && j + u < T; u++) ids[j + u] = DSV4Q_ENGRAM_DEAD;
        }
        if (start >= 1) ids[N - 2] = DSV4Q_ENGRAM_DEAD;
        ids[N - 1 + n / 2] = DSV4Q_ENGRAM_DEAD;
        ids[N - 2 + n / 2] = (int32_t)dsv4q_rng_below(r, V);
    }
    for (long j = 0; j < T; j++) ctx[j] = ids[j];
    if (!strcmp(rc, "edge"))
        /* each row's own id chosen (in order: later rows see it as a
         * look-back) so that a column hits floor_mod 0 or prime - 1, from up
         * to 2^17 candidates starting at a random id */
        for (long i = 0; i < n; i++) {
            const long t0 = dsv4q_rng_below(r, V), tries = V < (1L << 17) ? V : (1L << 17);
            for (long u = 0; u < tries; u++) {
                ctx[i + N - 1] = (t0 + u) % V;
                if (on_edge(ctx, i, start, (int)N, (int)H, m, pr, zero, pad, tmp)) break;
            }
            ids[i + N - 1] = (int32_t)ctx[i + N - 1];
        }
    dsv4q_case_output(c, 0, DSV4Q_BT_I32, 2, n, C, 0);
    c->param[0] = (double)start;
    c->param[1] = (double)pad;
    c->param[2] = (double)V;
    return 0;
}

DSV4Q_OP_DESC(
    engram_hash,
    .in = {T("ids", "[T]", "I32",
             "compressed token ids of positions start-(N-1) .. start+n-1 (T = n+N-1); -1 = DEAD (an image "
             "token); entries at positions < 0 are never read"),
           T("primes", "[ncols]", "I64",
             "the layer's bucket sizes (E1), ncols = (N-1)*heads, n-gram size major: each >= 1, their sum <= 2^31"),
           T("mult", "[N]", "I64", "the layer's multipliers by look-back distance 0..N-1 (E2; any int64)")},
    .out = {T("bucket", "[T-N+1,ncols]", "I32",
              "table rows: floor_mod(hash, prime) + the column's offset (the sum of the primes before it); exact")},
    .param = {"start: absolute position of row 0 (>= 0)",
              "pad: the pad's compressed id, token_map[engram_pad_id] (0..V-1)",
              "V: engram_compressed_vocab_size (ids lie in [-1, V))"},
    .oracle = "oracle/engram_hash.c dsv4q_engram_hash_ctx",
    .reference = "V4.1 engram.py NgramHashState.forward for one Engram layer (n-gram window with DEAD / sequence-start "
                 "blocking, XOR of id * multiplier, torch's floor %, + offsets)",
    .boundaries = "",
    .notes = "Look-back s of position p reads the id at p - s; a DEAD id or p - s < 0 blocks s and every longer "
             "look-back, which then hold pad (oracle/engram_hash.h E3). Products are int64 with two's-complement "
             "wrap, the remainder takes the prime's sign (E4). Integer outputs, the same at both widths: any "
             "differing id fails.",
    .keys =
        {{"n", "128"}, {"N", "4"}, {"H", "8"}, {"evs", "16000000"}, {"V", "129280"}, {"layer", "1"}, {"start", "0"}},
    .cases =
        (const dsv4q_case_entry[]){
            {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=1,start=0,recipe=normal,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=1,start=0,recipe=barrier,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=1,start=2,recipe=barrier,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=15,start=4093,recipe=barrier,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=1,start=1000,recipe=bigids,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=16000000,V=129280,layer=1,start=1000,recipe=negroll,seed=1)", SET_FLASH41},
            {"engram_hash(n=16,N=4,H=8,evs=16000000,V=129280,layer=1,start=1000,recipe=edge,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=50,V=129280,layer=1,start=0,recipe=edge,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=50,V=129280,layer=1,start=7,recipe=negroll,seed=1)", SET_FLASH41},
            {"engram_hash(n=128,N=4,H=8,evs=50,V=129280,layer=1,start=0,recipe=barrier,seed=1)", SET_FLASH41},
            {NULL, 0}},
    .build = build, .check = validate, .exact = 1u)
#endif
