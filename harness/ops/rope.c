/*
 * rope.c - ROPE, rotary embedding of the rope dims of each row at its own
 * position (model.py precompute_freqs_cis, apply_rotary_emb): interleaved
 * pairs, rope_theta on ratio-0 layers, compress_rope_theta + YaRN on the
 * compressed ones, the conjugate for the attention output (inverse).
 * Positions reach 2^24 in its cases: the angle table is where engines
 * lose precision.
 */
#include "harness/ops/op.h"

DSV4Q_OP_ROW(3, ROPE, rope, 2, 1, 6)

/* RoPE tables are expensive at large positions (65536+ positions x r/2
 * deterministic cos/sin) and a case needs the table at up to three places
 * (reference, level, the oracle-f32 backend's two runs in a forked child,
 * which inherits this cache). So tables are cached per width, keyed by
 * every input of dsv4q_rope_build, and grown when a larger position is
 * needed. Entries are never freed while cached; 4 slots, round robin. */
typedef struct {
    int used, src;
    dsv4q_rope_params p;
    X(dsv4q_rope_table) t;
} rope_slot;

static const X(dsv4q_rope_table) *rope_get(const dsv4q_rope_params *p, long npos, uint64_t bs)
{
    static rope_slot slot[4];
    static int next;
    const int src = (int)((bs >> DSV4Q_B_ROPE_TABLE_F32) & 1u);
    rope_slot *e = NULL;
    for (int i = 0; i < 4; i++)
        if (slot[i].used && slot[i].src == src && !memcmp(&slot[i].p, p, sizeof *p)) e = &slot[i];
    if (e && e->t.npos >= npos) return &e->t;
    if (!e) {
        e = &slot[next];
        next = (next + 1) % 4;
    }
    if (e->used) X(dsv4q_rope_free)(&e->t);
    e->used = 0;
    if (X(dsv4q_rope_build)(&e->t, p, npos, bs)) return NULL;
    e->used = 1;
    e->src = src;
    e->p = *p;
    return &e->t;
}

static int exec(DSV4Q_OP_EXEC_ARGS)
{
    const dsv4q_bt *in = c->in;
    const double *p = c->param;
    NEED(0);
    const long rows = (long)in[0].shape[0], r = (long)in[0].shape[1];
    const int32_t *pos = in[1].data;
    long npos = 1;
    for (long i = 0; i < rows; i++) if (pos[i] + 1L > npos) npos = pos[i] + 1L;
    dsv4q_rope_params rp;
    memset(&rp, 0, sizeof rp);   /* the cache compares the bytes */
    rp.rope_dim = (int)r;
    rp.base = p[0];
    rp.original_seq_len = (int)p[1];
    rp.factor = p[2];
    rp.beta_fast = p[3];
    rp.beta_slow = p[4];
    const X(dsv4q_rope_table) *tab = rope_get(&rp, npos, bs);
    if (!tab) return 1;
    real *y = out[0];
    memcpy(y, a[0], sizeof(real) * (size_t)(rows * r));
    for (long i = 0; i < rows; i++) X(dsv4q_rope_apply)(bs, tab, y + i * r, 1, r, 0, pos[i], 1, p[5] != 0);
    return 0;
}
DSV4Q_OP_EXEC(rope, exec)

#if DSV4Q_OP_ONCE
static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = dsv4q_kv_int(kv, "rows", 1, 1 << 16, &bad), rd = dsv4q_kv_int(kv, "r", 2, 512, &bad),
         pmax = dsv4q_kv_int(kv, "pos", 0, 1L << 24, &bad), inv = dsv4q_kv_int(kv, "inv", 0, 1, &bad);
    double factor = dsv4q_kv_num(kv, "factor", 1, 1024, &bad);
    const char *sp = dsv4q_kv_str(kv, "rope");
    if (bad || rd % 2 || (strcmp(sp, "yarn") && strcmp(sp, "plain"))) {
        snprintf(err, errlen, "%s: bad rows/r/pos/inv/rope/factor (rope=yarn|plain, r even)", c->key);
        return -1;
    }
    RECIPES("normal", "f32");
    float *x = dsv4q_case_input(c, 0, DSV4Q_BT_F32, 2, rows, rd, 0);
    int32_t *pos = dsv4q_case_input(c, 1, DSV4Q_BT_I32, 1, rows, 0, 0);
    NEEDP(x && pos);
    dsv4q_gen_act(r, c->recipe, x, rows, rd, 1.0, rd);
    /* positions: 0, 1, then spread up to pmax, the last exactly pmax */
    for (long i = 0; i < rows; i++)
        pos[i] = (int32_t)(i == 0 ? 0 : i == rows - 1 ? pmax : (i == 1 ? 1 : (long)(dsv4q_rng_u01(r) * (double)pmax)));
    dsv4q_case_output(c, 0, DSV4Q_BT_F32, 2, rows, rd, 0);
    int yarn = !strcmp(sp, "yarn");
    c->param[0] = yarn ? 160000 : 10000;   /* compress_rope_theta | rope_theta */
    c->param[1] = yarn ? 65536 : 0;
    c->param[2] = factor;
    c->param[3] = 32;
    c->param[4] = 1;
    c->param[5] = (double)inv;
    return 0;
}

/* The rope dims come in pairs. */
static int check(const dsv4q_bcall *c, char *err, size_t errlen)
{
    const long long r = c->in[0].ndim == 2 ? c->in[0].shape[1] : 0;
    if (r % 2) {
        snprintf(err, errlen, "rope: r = %lld must be even (pairs)", r);
        return -1;
    }
    return 0;
}

DSV4Q_OP_DESC(rope,
    .in = { T("x", "[rows,r]", "F32", "the r rope dims only (interleaved pairs)"), 
          T("pos", "[rows]", "I32", "absolute position of each row") },
    .out = { T("y", "[rows,r]", "F32|BF16", "x * e^(i pos f) per pair (conjugate if inverse)") },
    .param = { "base: rope_theta (ratio-0 layers) or compress_rope_theta", 
          "original_seq_len: 0 = no YaRN", "factor (YaRN)", "beta_fast", "beta_slow", "inverse: 0|1" },
    .oracle = "oracle/rope.c dsv4q_rope_build + dsv4q_rope_apply",
    .reference = "model.py precompute_freqs_cis, apply_rotary_emb",
    .boundaries = "rope_table_f32, rope_bf16",
    .notes = "",
    .keys = {{"rows", "8"}, {"r", "64"}, {"pos", "65600"}, {"rope", "yarn"}, {"inv", "0"}},
    .optkeys = {{"factor", "16"}},
    .cases = (const dsv4q_case_entry[]){
        {"rope(rows=8,r=64,pos=131072,rope=yarn,inv=1,recipe=normal,seed=1)", SET_FLASH},
        {"rope(rows=8,r=64,pos=65600,rope=yarn,inv=0,recipe=normal,seed=1)", SET_FLASH},
        {"rope(rows=8,r=64,pos=65600,rope=plain,inv=0,recipe=normal,seed=1)", SET_FLASH | SET_PRO},
        {"rope(rows=8,r=32,pos=65600,rope=yarn,inv=0,factor=40,recipe=f32,seed=1)", SET_FLASH},
        {"rope(rows=8,r=64,pos=1048576,rope=yarn,inv=0,recipe=normal,seed=1)", SET_PRO},
        {"rope(rows=8,r=64,pos=1048576,rope=yarn,inv=1,recipe=normal,seed=1)", SET_PRO},
        {"rope(rows=8,r=128,pos=1048576,rope=yarn,inv=0,factor=4,recipe=f32,seed=1)", SET_PRO},
        {NULL, 0}},
    .build = build, .check = check, .rowfloor = 1u)
#endif
