/*
 * cases.c - the case table, key parsing and deterministic input recipes
 * (see cases.h for the key grammar, the recipes and invariants K1-K3).
 *
 * Shapes follow the published Flash and Pro configs
 * (/work/shared/spec/configs): attention 64|128 heads x 512 with a
 * 128-row window plus 512|1024 selected compressed rows; indexer 64 x 128
 * over up to 16384 compressed rows; compressor and hc at d 4096|7168;
 * experts 4096x2048 and 7168x3072 in FP4 (and the FP8 shared expert). Row
 * counts are small (1-8 tokens, 128 for the ratio-128 compressor): the
 * operators' inner dimensions are what qualify a kernel; many tokens only
 * cost time. The Flash set is the CI suite.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness/cases/cases.h"
#include "harness/ops/oracle_exec.h"
#include "oracle/formats.h"
#include "oracle/ops.h"

/* ---- the table --------------------------------------------------------- */

#define F DSV4Q_CASE_SET_FLASH
#define P DSV4Q_CASE_SET_PRO
#define L DSV4Q_CASE_SET_LONG
static const dsv4q_case_entry table[] = {
    /* linear: FP8 128x128 (wq_a, wkv), FP8 wide-in (wo_b), BF16 (wo_a), FP32 math */
    {"linear(s=2,N=1024,K=4096,fmt=fp8,out=bf16,recipe=normal,seed=1)", F | P},
    {"linear(s=2,N=512,K=4096,fmt=fp8,out=bf16,recipe=extreme,seed=1)", F},
    {"linear(s=2,N=512,K=4096,fmt=fp8,out=bf16,recipe=nearzero,seed=1)", F},
    {"linear(s=2,N=1024,K=4096,fmt=bf16,out=bf16,recipe=normal,seed=1)", F},
    {"linear(s=2,N=1024,K=4096,fmt=f32,out=f32,recipe=normal,seed=1)", F},
    {"linear(s=2,N=1024,K=4096,fmt=f32,out=f32,recipe=f32,seed=1)", F},
    {"linear(s=2,N=512,K=7168,fmt=fp8,out=bf16,recipe=normal,seed=1)", F},
    {"linear(s=2,N=1536,K=7168,fmt=fp8,out=bf16,recipe=normal,seed=1)", P},
    {"linear(s=2,N=7168,K=2048,fmt=fp8,out=bf16,recipe=extreme,seed=1)", P},
    {"linear(s=2,N=1536,K=7168,fmt=fp8,out=bf16,recipe=nearzero,seed=1)", P},
    {"linear(s=2,N=1024,K=8192,fmt=bf16,out=bf16,recipe=normal,seed=1)", P},
    {"linear(s=2,N=1024,K=7168,fmt=f32,out=f32,recipe=f32,seed=1)", P},
    /* norms; eps 1e-5 (the other common norm eps) and head dims 128 / 256
     * with 8 / 16 heads (a tensor-parallel shard) */
    {"rmsnorm(rows=2,d=4096,recipe=normal,seed=1)", F},
    {"rmsnorm(rows=4,d=1024,recipe=extreme,seed=1)", F},
    {"rmsnorm(rows=4,d=512,recipe=nearzero,seed=1)", F | P},
    {"rmsnorm(rows=2,d=4096,eps=1e-5,recipe=f32,seed=1)", F},
    {"rmsnorm(rows=2,d=7168,recipe=normal,seed=1)", F | P},
    {"rmsnorm(rows=4,d=1536,recipe=extreme,seed=1)", P},
    {"rmsnorm(rows=2,d=7168,eps=1e-5,recipe=f32,seed=1)", P},
    {"qhead_norm(s=2,H=64,D=512,recipe=normal,seed=1)", F},
    {"qhead_norm(s=1,H=64,D=512,recipe=nearzero,seed=1)", F},
    {"qhead_norm(s=2,H=8,D=128,eps=1e-5,recipe=f32,seed=1)", F},
    {"qhead_norm(s=2,H=128,D=512,recipe=normal,seed=1)", P},
    {"qhead_norm(s=1,H=128,D=512,recipe=nearzero,seed=1)", P},
    {"qhead_norm(s=2,H=16,D=256,eps=1e-5,recipe=f32,seed=1)", P},
    /* RoPE: both spectra (rope_theta plain; compress_rope_theta + YaRN),
     * positions to 65536 and beyond, the inverse (attention output),
     * rope dims 32 / 128 and YaRN factors 4 / 40 */
    {"rope(rows=8,r=64,pos=131072,rope=yarn,inv=1,recipe=normal,seed=1)", F},
    {"rope(rows=8,r=64,pos=65600,rope=yarn,inv=0,recipe=normal,seed=1)", F},
    {"rope(rows=8,r=64,pos=65600,rope=plain,inv=0,recipe=normal,seed=1)", F | P},
    {"rope(rows=8,r=32,pos=65600,rope=yarn,inv=0,factor=40,recipe=f32,seed=1)", F},
    {"rope(rows=8,r=64,pos=1048576,rope=yarn,inv=0,recipe=normal,seed=1)", P},
    {"rope(rows=8,r=64,pos=1048576,rope=yarn,inv=1,recipe=normal,seed=1)", P},
    {"rope(rows=8,r=128,pos=1048576,rope=yarn,inv=0,factor=4,recipe=f32,seed=1)", P},
    /* QAT simulations: every act_quant block (64 KV, 128 GEMM inputs, 32
     * the MX block an engine may use) with its scaletrap recipe */
    {"act_quant(rows=2,n=4096,block=128,recipe=normal,seed=1)", F},
    {"act_quant(rows=4,n=448,block=64,recipe=extreme,seed=1)", F},
    {"act_quant(rows=4,n=448,block=64,recipe=ties,seed=1)", F | P},
    {"act_quant(rows=2,n=4096,block=128,recipe=nearzero,seed=1)", F},
    {"act_quant(rows=8,n=4096,block=128,recipe=scaletrap,seed=1)", F | P},
    {"act_quant(rows=8,n=448,block=64,recipe=scaletrap,seed=1)", F | P},
    {"act_quant(rows=8,n=512,block=32,recipe=scaletrap,seed=1)", F | P},
    {"act_quant(rows=2,n=7168,block=128,recipe=extreme,seed=1)", P},
    {"act_quant(rows=2,n=7168,block=128,recipe=normal,seed=1)", P},
    {"act_quant(rows=2,n=7168,block=128,recipe=nearzero,seed=1)", P},
    {"fp4_quant(rows=64,n=128,recipe=normal,seed=1)", F | P},
    {"fp4_quant(rows=8,n=128,recipe=ties,seed=1)", F | P},
    {"fp4_quant(rows=8,n=128,recipe=nearzero,seed=1)", F | P},
    {"fp4_quant(rows=64,n=128,recipe=scaletrap,seed=1)", F | P},
    {"hadamard(rows=64,n=128,recipe=normal,seed=1)", F | P},
    {"hadamard(rows=8,n=128,recipe=extreme,seed=1)", F | P},
    /* attention: window 128 + selected compressed rows; full-mantissa
     * KV rows and sinks (f32), whole masked 64-column blocks (blocks),
     * 8 / 16 heads and head dims 256 / 128 */
    {"sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=normal,seed=1)", F},
    {"sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=masked,seed=1)", F},
    {"sparse_attn(s=1,H=64,D=512,win=128,sel=512,recipe=extreme,seed=1)", F},
    {"sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=f32,seed=1)", F},
    {"sparse_attn(s=3,H=8,D=512,win=128,sel=512,recipe=blocks,seed=1)", F},
    {"sparse_attn(s=2,H=16,D=256,win=128,sel=256,recipe=f32,seed=1)", F},
    {"sparse_attn(s=2,H=128,D=512,win=128,sel=1024,recipe=normal,seed=1)", P},
    {"sparse_attn(s=2,H=128,D=512,win=128,sel=1024,recipe=masked,seed=1)", P},
    {"sparse_attn(s=1,H=128,D=512,win=128,sel=1024,recipe=extreme,seed=1)", P},
    {"sparse_attn(s=2,H=128,D=512,win=128,sel=1024,recipe=f32,seed=1)", P},
    {"sparse_attn(s=3,H=16,D=512,win=128,sel=1024,recipe=blocks,seed=1)", P},
    {"sparse_attn(s=2,H=16,D=128,win=128,sel=256,recipe=f32,seed=1)", P},
    /* one decode step that owns the window ring: the ring just full
     * (p = w-1: the current token goes to the last slot), the first wrap
     * (p = w: slot 0 held position 0), wrapped (p = 300: slot 44 held
     * position 172), and not full (p = 5: slot 5 never written; the
     * case's ring is deterministic noise in every slot, so reading the
     * stale slot instead of the current token shows everywhere); p = 63
     * and 64: the ring's second 64-column block wholly masked / one
     * column live (blocks also masks whole cidx blocks) */
    {"window_attn_decode(H=64,D=512,win=128,p=127,sel=512,recipe=normal,seed=1)", F},
    {"window_attn_decode(H=64,D=512,win=128,p=128,sel=512,recipe=normal,seed=1)", F},
    {"window_attn_decode(H=64,D=512,win=128,p=300,sel=512,recipe=normal,seed=1)", F},
    {"window_attn_decode(H=64,D=512,win=128,p=5,sel=512,recipe=normal,seed=1)", F},
    {"window_attn_decode(H=64,D=512,win=128,p=300,sel=512,recipe=masked,seed=1)", F},
    {"window_attn_decode(H=64,D=512,win=128,p=300,sel=512,recipe=f32,seed=1)", F},
    {"window_attn_decode(H=64,D=512,win=128,p=63,sel=512,recipe=blocks,seed=1)", F},
    {"window_attn_decode(H=8,D=256,win=128,p=64,sel=256,recipe=blocks,seed=1)", F},
    {"window_attn_decode(H=128,D=512,win=128,p=1000,sel=1024,recipe=normal,seed=1)", P},
    {"window_attn_decode(H=128,D=512,win=128,p=300,sel=1024,recipe=masked,seed=1)", P},
    {"window_attn_decode(H=128,D=512,win=128,p=5,sel=1024,recipe=normal,seed=1)", P},
    {"window_attn_decode(H=128,D=512,win=128,p=128,sel=1024,recipe=normal,seed=1)", P},
    {"window_attn_decode(H=128,D=512,win=128,p=1000,sel=1024,recipe=f32,seed=1)", P},
    {"window_attn_decode(H=128,D=512,win=128,p=63,sel=1024,recipe=blocks,seed=1)", P},
    {"window_attn_decode(H=128,D=128,win=128,p=64,sel=256,recipe=blocks,seed=1)", P},
    /* compressor: overlap ratio 4 (attention rows and rotated indexer
     * keys) and ratio 128 */
    {"compressor(s=8,d=4096,ratio=4,Dc=512,rotate=0,recipe=normal,seed=1)", F},
    {"compressor(s=8,d=4096,ratio=4,Dc=128,rotate=1,recipe=normal,seed=1)", F},
    {"compressor(s=128,d=4096,ratio=128,Dc=512,rotate=0,recipe=normal,seed=1)", F},
    {"compressor(s=8,d=4096,ratio=4,Dc=512,rotate=0,recipe=extreme,seed=1)", F},
    {"compressor(s=8,d=4096,ratio=4,Dc=128,rotate=1,recipe=f32,seed=1)", F},
    {"compressor(s=8,d=7168,ratio=4,Dc=512,rotate=0,recipe=extreme,seed=1)", P},
    {"compressor(s=128,d=7168,ratio=128,Dc=512,rotate=0,recipe=normal,seed=1)", P},
    {"compressor(s=8,d=7168,ratio=4,Dc=128,rotate=1,recipe=normal,seed=1)", P},
    {"compressor(s=8,d=7168,ratio=4,Dc=512,rotate=0,recipe=f32,seed=1)", P},
    /* indexer */
    {"indexer_score(s=1,Hi=64,Di=128,T=16384,start=65536,recipe=normal,seed=1)", F},
    {"indexer_score(s=16,Hi=64,Di=128,T=4,start=0,recipe=normal,seed=1)", F | P},
    {"indexer_score(s=2,Hi=64,Di=128,T=2048,start=8192,recipe=ties,seed=1)", F | P},
    {"indexer_score(s=2,Hi=64,Di=128,T=2048,start=8192,recipe=f32,seed=1)", F},
    {"indexer_score(s=2,Hi=64,Di=128,T=16384,start=65536,recipe=normal,seed=1)", P},
    {"indexer_score(s=2,Hi=16,Di=128,T=16384,start=65536,recipe=f32,seed=1)", P},
    /* top-k: ties at the cut, fewer finite than k, crowded BF16 scores
     * up to T = 1M (a 1M-token context has 256K compressed rows at ratio 4) */
    {"topk(rows=2,T=16384,k=512,recipe=normal,seed=1)", F},
    {"topk(rows=4,T=4096,k=512,recipe=ties,seed=1)", F},
    {"topk(rows=2,T=1024,k=512,recipe=masked,seed=1)", F | P},
    {"topk(rows=2,T=65536,k=512,recipe=crowd,seed=1)", F},
    {"topk(rows=2,T=16384,k=1024,recipe=ties,seed=1)", P},
    {"topk(rows=2,T=16384,k=1024,recipe=normal,seed=1)", P},
    {"topk(rows=2,T=1048576,k=1024,recipe=crowd,seed=1)", P},
    /* hyper-connections; Sinkhorn iterations 1 / 3 / 20, hc_eps 1e-5 */
    {"hc_pre(s=2,hc=4,d=4096,recipe=normal,seed=1)", F},
    {"hc_pre(s=2,hc=4,d=4096,recipe=extreme,seed=1)", F},
    {"hc_pre(s=2,hc=4,d=4096,iters=3,hceps=1e-5,recipe=f32,seed=1)", F},
    {"hc_pre(s=2,hc=4,d=4096,iters=1,recipe=normal,seed=1)", F},
    {"hc_pre(s=2,hc=4,d=7168,recipe=normal,seed=1)", P},
    {"hc_pre(s=2,hc=4,d=7168,recipe=extreme,seed=1)", P},
    {"hc_pre(s=2,hc=4,d=7168,iters=3,hceps=1e-5,recipe=f32,seed=1)", P},
    {"hc_pre(s=2,hc=4,d=7168,iters=1,recipe=normal,seed=1)", P},
    {"hc_post(s=2,hc=4,d=4096,recipe=normal,seed=1)", F},
    {"hc_post(s=2,hc=4,d=4096,recipe=f32,seed=1)", F},
    {"hc_post(s=2,hc=4,d=7168,recipe=normal,seed=1)", P},
    {"hc_post(s=2,hc=4,d=7168,recipe=f32,seed=1)", P},
    {"hc_head(s=2,hc=4,d=4096,recipe=normal,seed=1)", F},
    {"hc_head(s=2,hc=4,d=4096,hceps=1e-5,recipe=f32,seed=1)", F},
    {"hc_head(s=2,hc=4,d=7168,recipe=normal,seed=1)", P},
    {"hc_head(s=2,hc=4,d=7168,hceps=1e-5,recipe=f32,seed=1)", P},
    /* MoE */
    {"moe_gate(s=4,d=4096,E=256,k=6,route=topk,func=sqrtsoftplus,recipe=normal,seed=1)", F},
    {"moe_gate(s=4,d=4096,E=256,k=6,route=topk,func=sqrtsoftplus,recipe=ties,seed=1)", F},
    {"moe_gate(s=4,d=4096,E=256,k=6,route=hash,func=sqrtsoftplus,recipe=normal,seed=1)", F},
    {"moe_gate(s=4,d=4096,E=256,k=6,route=topk,func=sqrtsoftplus,recipe=f32,seed=1)", F},
    {"moe_gate(s=4,d=7168,E=384,k=6,route=topk,func=sqrtsoftplus,recipe=normal,seed=1)", P},
    {"moe_gate(s=4,d=7168,E=384,k=6,route=topk,func=sqrtsoftplus,recipe=ties,seed=1)", P},
    {"moe_gate(s=4,d=7168,E=384,k=6,route=hash,func=sqrtsoftplus,recipe=normal,seed=1)", P},
    {"moe_gate(s=4,d=7168,E=384,k=6,route=topk,func=sqrtsoftplus,recipe=f32,seed=1)", P},
    {"moe_gate(s=4,d=7168,E=256,k=8,route=topk,func=sigmoid,recipe=normal,seed=1)", P},
    {"expert(n=2,d=4096,I=2048,fmt=fp4,recipe=normal,seed=1)", F},
    {"expert(n=2,d=4096,I=2048,fmt=fp4,recipe=extreme,seed=1)", F},
    {"expert(n=2,d=4096,I=2048,fmt=fp8,recipe=normal,seed=1)", F},
    {"expert(n=2,d=4096,I=2048,fmt=fp8,recipe=extreme,seed=1)", F},
    {"expert(n=2,d=4096,I=2048,fmt=fp4,recipe=f32,seed=1)", F},
    /* the shared expert's form: no routing weight (ABI: empty input) */
    {"expert(n=2,d=4096,I=2048,fmt=fp8,shared=1,recipe=normal,seed=1)", F},
    {"expert(n=2,d=7168,I=3072,fmt=fp4,recipe=normal,seed=1)", P},
    {"expert(n=2,d=7168,I=3072,fmt=fp8,recipe=extreme,seed=1)", P},
    {"expert(n=2,d=7168,I=3072,fmt=fp4,recipe=extreme,seed=1)", P},
    {"expert(n=2,d=7168,I=3072,fmt=fp8,recipe=normal,seed=1)", P},
    {"expert(n=2,d=7168,I=3072,fmt=fp4,recipe=f32,seed=1)", P},
    /* --shapes long (opt-in, never in CI; docs/gates.md gives memory and
     * time): a 1M-token context at ratio 4 has 262144 compressed rows, so
     * its KV is [128 + 262144, 512] (512 MiB F32) and its indexer scores
     * T = 262144 keys; the last case's KV [1048704, 512] is 2 GiB + 256
     * KiB, so its selected rows at the end sit past byte offset 2^31 (an
     * int32 byte offset wraps there; an int32 element offset only at
     * 2^31 elements = 8 GiB F32, see docs/gates.md) */
    {"sparse_attn(s=1,H=64,D=512,win=128,sel=512,rows=262272,recipe=normal,seed=1)", L},
    {"window_attn_decode(H=64,D=512,win=128,p=1048575,sel=512,rows=262144,recipe=normal,seed=1)", L},
    {"indexer_score(s=1,Hi=64,Di=128,T=262144,start=1048575,recipe=normal,seed=1)", L},
    {"topk(rows=1,T=262144,k=512,recipe=crowd,seed=1)", L},
    {"sparse_attn(s=1,H=8,D=512,win=128,sel=512,rows=1048704,recipe=f32,seed=1)", L},
};
#undef F
#undef P
#undef L

int dsv4q_case_count(void) { return (int)(sizeof table / sizeof table[0]); }
const dsv4q_case_entry *dsv4q_case_at(int i) { return i >= 0 && i < dsv4q_case_count() ? &table[i] : NULL; }

/* ---- key grammar: op(name=value,...) ----------------------------------- */

/* Parameters per op in canonical order, with defaults (Flash shapes);
 * recipe and seed are appended to every op. */
/* Key parameters per op, canonical order, with defaults (Flash shapes):
 * PSPEC_<name> for every row of DSV4Q_OP_LIST (a missing one does not
 * compile); recipe and seed are appended to every op. */
#define PSPEC_linear {{"s", "2"}, {"N", "1024"}, {"K", "4096"}, {"fmt", "fp8"}, {"out", "bf16"}}
#define PSPEC_rmsnorm {{"rows", "2"}, {"d", "4096"}}
#define PSPEC_qhead_norm {{"s", "2"}, {"H", "64"}, {"D", "512"}}
#define PSPEC_rope {{"rows", "8"}, {"r", "64"}, {"pos", "65600"}, {"rope", "yarn"}, {"inv", "0"}}
#define PSPEC_act_quant {{"rows", "2"}, {"n", "4096"}, {"block", "128"}}
#define PSPEC_fp4_quant {{"rows", "64"}, {"n", "128"}}
#define PSPEC_hadamard {{"rows", "64"}, {"n", "128"}}
#define PSPEC_sparse_attn {{"s", "2"}, {"H", "64"}, {"D", "512"}, {"win", "128"}, {"sel", "512"}}
#define PSPEC_compressor {{"s", "8"}, {"d", "4096"}, {"ratio", "4"}, {"Dc", "512"}, {"rotate", "0"}}
#define PSPEC_indexer_score {{"s", "1"}, {"Hi", "64"}, {"Di", "128"}, {"T", "16384"}, {"start", "65536"}}
#define PSPEC_topk {{"rows", "2"}, {"T", "16384"}, {"k", "512"}}
#define PSPEC_hc_pre {{"s", "2"}, {"hc", "4"}, {"d", "4096"}}
#define PSPEC_hc_post {{"s", "2"}, {"hc", "4"}, {"d", "4096"}}
#define PSPEC_hc_head {{"s", "2"}, {"hc", "4"}, {"d", "4096"}}
#define PSPEC_moe_gate {{"s", "4"}, {"d", "4096"}, {"E", "256"}, {"k", "6"}, {"route", "topk"}, {"func", "sqrtsoftplus"}}
#define PSPEC_expert {{"n", "2"}, {"d", "4096"}, {"I", "2048"}, {"fmt", "fp4"}}
#define PSPEC_window_attn_decode {{"H", "64"}, {"D", "512"}, {"win", "128"}, {"p", "300"}, {"sel", "512"}}
#define PSPEC_ROW(E, nm, ni, no, np) [DSV4Q_OP_##E] = PSPEC_##nm,
static const char *const pspec[DSV4Q_OP_COUNT][8][2] = {DSV4Q_OP_LIST(PSPEC_ROW)};
#undef PSPEC_ROW

/* Optional key parameters: named in a canonical key only when they differ
 * from their default, so the keys (and so the input bytes, K2) of every
 * case written before they existed stay what they were. The values are
 * the ones the published configs use (tests/data/configs); cases vary
 * them over what other configs and engines use (norm eps 1e-5, fewer
 * Sinkhorn iterations, another YaRN factor). */
static const struct { int op; const char *name, *def; } optspec[] = {
    {DSV4Q_OP_RMSNORM, "eps", "1e-6"},
    {DSV4Q_OP_QHEAD_NORM, "eps", "1e-6"},
    {DSV4Q_OP_ROPE, "factor", "16"},
    {DSV4Q_OP_HC_PRE, "iters", "20"},
    {DSV4Q_OP_HC_PRE, "hceps", "1e-6"},
    {DSV4Q_OP_HC_HEAD, "hceps", "1e-6"},
    /* rows of the key tensor (0: win + 2*sel); the long shapes set it to
     * a 1M-token context's compressed rows and past 2^31 bytes */
    {DSV4Q_OP_SPARSE_ATTN, "rows", "0"},
    {DSV4Q_OP_WINDOW_ATTN_DECODE, "rows", "0"},
    /* expert shared=1: the shared expert's form (empty routing weight,
     * role layers.0.ffn.shared_experts) */
    {DSV4Q_OP_EXPERT, "shared", "0"},
};
#define NOPTSPEC ((int)(sizeof optspec / sizeof optspec[0]))

#define KV_MAX 12
typedef struct {
    int op, n;
    char name[KV_MAX][16], val[KV_MAX][32];
    char opt[KV_MAX];   /* 1: optional (optspec), printed only when not its default */
} kvset;

static int nspec(int op)
{
    int n = 0;
    while (n < 8 && pspec[op][n][0]) n++;
    return n;
}

static int parse_key(const char *key, kvset *kv, char *err, size_t errlen)
{
    const char *lp = strchr(key, '(');
    size_t klen = strlen(key);
    char opname[32];
    size_t on = lp ? (size_t)(lp - key) : klen;
    if (on == 0 || on >= sizeof opname || (lp && key[klen - 1] != ')')) {
        snprintf(err, errlen, "case key '%s': expected op(name=value,...)", key);
        return -1;
    }
    memcpy(opname, key, on);
    opname[on] = 0;
    kv->op = dsv4q_op_find(opname);
    if (kv->op < 0) {
        snprintf(err, errlen, "case key '%s': unknown operator '%s'", key, opname);
        return -1;
    }
    /* defaults */
    int ns = nspec(kv->op);
    memset(kv->opt, 0, sizeof kv->opt);
    for (int i = 0; i < ns; i++) {
        snprintf(kv->name[i], sizeof kv->name[i], "%s", pspec[kv->op][i][0]);
        snprintf(kv->val[i], sizeof kv->val[i], "%s", pspec[kv->op][i][1]);
    }
    for (int i = 0; i < NOPTSPEC; i++)
        if (optspec[i].op == kv->op) {
            snprintf(kv->name[ns], sizeof kv->name[0], "%s", optspec[i].name);
            snprintf(kv->val[ns], sizeof kv->val[0], "%s", optspec[i].def);
            kv->opt[ns++] = 1;
        }
    kv->n = ns + 2;
    snprintf(kv->name[ns], sizeof kv->name[0], "recipe");
    snprintf(kv->val[ns], sizeof kv->val[0], "normal");
    snprintf(kv->name[ns + 1], sizeof kv->name[0], "seed");
    snprintf(kv->val[ns + 1], sizeof kv->val[0], "1");
    if (!lp) return 0;
    const char *p = lp + 1, *end = key + klen - 1;
    while (p < end) {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *cm = memchr(p, ',', (size_t)(end - p));
        if (!cm) cm = end;
        if (!eq || eq > cm) {
            snprintf(err, errlen, "case key '%s': expected name=value at '%.*s'", key, (int)(cm - p), p);
            return -1;
        }
        int found = -1;
        for (int i = 0; i < kv->n; i++)
            if (strlen(kv->name[i]) == (size_t)(eq - p) && !strncmp(kv->name[i], p, (size_t)(eq - p))) found = i;
        if (found < 0) {
            char names[256] = "";
            for (int i = 0; i < kv->n; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", kv->name[i]);
            snprintf(err, errlen, "case key '%s': %s has no parameter '%.*s' (parameters: %s)", key, opname,
                     (int)(eq - p), p, names);
            return -1;
        }
        size_t vl = (size_t)(cm - eq - 1);
        if (vl == 0 || vl >= sizeof kv->val[0]) {
            snprintf(err, errlen, "case key '%s': bad value for %s", key, kv->name[found]);
            return -1;
        }
        memcpy(kv->val[found], eq + 1, vl);
        kv->val[found][vl] = 0;
        p = cm + 1;
    }
    return 0;
}

static void format_key(const kvset *kv, char *out, size_t len)
{
    size_t at = (size_t)snprintf(out, len, "%s(", dsv4q_op_get(kv->op)->name);
    for (int i = 0, first = 1; i < kv->n && at < len; i++) {
        if (kv->opt[i]) {   /* optional: only when not the default (as a number or as written) */
            const char *def = NULL;
            for (int k = 0; k < NOPTSPEC; k++)
                if (optspec[k].op == kv->op && !strcmp(optspec[k].name, kv->name[i])) def = optspec[k].def;
            char *e1, *e2;
            double a = strtod(kv->val[i], &e1), b = strtod(def, &e2);
            if (!strcmp(kv->val[i], def) || (!*e1 && !*e2 && a == b)) continue;
        }
        at += (size_t)snprintf(out + at, len - at, "%s%s=%s", first ? "" : ",", kv->name[i], kv->val[i]);
        first = 0;
    }
    if (at < len) snprintf(out + at, len - at, ")");
}

int dsv4q_case_canon(const char *key, char *out, size_t outlen, char *err, size_t errlen)
{
    kvset kv;
    if (parse_key(key, &kv, err, errlen)) return -1;
    format_key(&kv, out, outlen);
    return 0;
}

static const char *kv_str(const kvset *kv, const char *name)
{
    for (int i = 0; i < kv->n; i++)
        if (!strcmp(kv->name[i], name)) return kv->val[i];
    return "";
}

/* Integer parameter, or -1 (reported by the caller) when not a positive
 * integer within [lo, hi]. */
static long kv_int(const kvset *kv, const char *name, long lo, long hi, int *bad)
{
    const char *s = kv_str(kv, name);
    char *e;
    long v = strtol(s, &e, 10);
    if (!*s || *e || v < lo || v > hi) {
        *bad = 1;
        return lo;
    }
    return v;
}

/* Positive finite real parameter (eps, factor), or lo when bad. */
static double kv_num(const kvset *kv, const char *name, double lo, double hi, int *bad)
{
    const char *s = kv_str(kv, name);
    char *e;
    double v = strtod(s, &e);
    if (!*s || *e || !(v >= lo && v <= hi)) {
        *bad = 1;
        return lo;
    }
    return v;
}

/* ---- deterministic generator ------------------------------------------- */

typedef struct { uint64_t s; } rng;

static uint64_t splitmix(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double u01(rng *r) { return (double)(splitmix(r) >> 11) * 0x1p-53; }
static long uint_below(rng *r, long n) { return (long)(splitmix(r) % (uint64_t)n); }

/* Irwin-Hall(4) scaled to unit variance: arithmetic only, so bit-identical
 * on every machine (no libm transcendental in input generation). */
static double gauss(rng *r)
{
    double s = u01(r) + u01(r) + u01(r) + u01(r);
    return (s - 2.0) * 1.7320508075688772;
}

static float bf(double v) { return dsv4q_bf16_to_f32(dsv4q_bf16_from_f32((float)v)); }

/* Recipe f32: inputs with full FP32 mantissas (K3's exception): the
 * reference keeps its op inputs and parameters in F32, so a backend that
 * stores them narrower (KV rows in F16, sinks or norm weights in BF16)
 * deviates only when the inputs have bits BF16 lacks. st() stores a value
 * as the recipe says: BF16-representable, or F32 for recipe f32. */
static int is_full(const char *recipe) { return !strcmp(recipe, "f32"); }
static float st(int full, double v) { return full ? (float)v : bf(v); }

/* ---- tensors ----------------------------------------------------------- */

static void *own(dsv4q_case *c, size_t bytes)
{
    if (c->nbufs >= (int)(sizeof c->bufs / sizeof c->bufs[0])) return NULL;
    void *p = calloc(bytes ? bytes : 1, 1);
    if (p) c->bufs[c->nbufs++] = p;
    return p;
}

static void set_shape(dsv4q_bt *t, const char *name, int ndim, const int64_t *d)
{
    t->name = name;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = d[i];
}

static void *in_t(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    const dsv4q_op_info *oi = dsv4q_op_get(c->op);
    int64_t d[3] = {d0, d1, d2};
    dsv4q_bt *t = &c->in[slot];
    memset(t, 0, sizeof *t);
    set_shape(t, oi->in[slot].name, ndim, d);
    t->dtype = dtype;
    if (ndim == 0) return NULL;
    t->data = own(c, 4 * (size_t)dsv4q_bt_numel(t));
    return t->data;
}

static void out_t(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    const dsv4q_op_info *oi = dsv4q_op_get(c->op);
    int64_t d[3] = {d0, d1, d2};
    dsv4q_bt *t = &c->out[slot];
    memset(t, 0, sizeof *t);
    set_shape(t, oi->out[slot].name, ndim, d);
    t->dtype = dtype;
}

/* Activation fill by recipe, BF16-representable (K3; F32 for recipe f32).
 * block: the quant block the consumer uses (nearzero/extreme act per
 * block). */
static void fill_act(rng *r, const char *recipe, float *x, long rows, long n, double scale, long block)
{
    int ex = !strcmp(recipe, "extreme"), nz = !strcmp(recipe, "nearzero"), full = is_full(recipe);
    for (long i = 0; i < rows; i++)
        for (long b0 = 0; b0 < n; b0 += block) {
            double m = scale;
            long kind = (ex || nz) ? uint_below(r, 4) : 0;
            if (ex && kind) m = scale * ldexp(1.0, (int)uint_below(r, 49) - 24);
            if (nz && kind == 1) m = 0;                                        /* an all-zero block */
            if (nz && kind == 2) m = scale * ldexp(1.0, -40 - (int)uint_below(r, 60)); /* below the amax floors */
            for (long j = b0; j < b0 + block && j < n; j++) x[i * n + j] = st(full, gauss(r) * m);
            if (ex && kind == 3) x[i * n + b0] = bf(ldexp(450.0, (int)uint_below(r, 8) - 4)); /* just above 448*2^k */
            if (ex && kind == 2) x[i * n + b0] = bf(ldexp(448.0, (int)uint_below(r, 8) - 4)); /* exactly 448*2^k */
        }
}

/* 4096 magnitude codes of a quantized gaussian (E4M3: sigma 112 of max
 * 448; E2M1: sigma 2 of max 6), drawn once from a fixed seed. */
static const uint8_t *code_table(int fp8)
{
    static uint8_t tab[2][4096];
    static int made[2];
    if (!made[fp8]) {
        rng r = {fp8 ? 0x4538u : 0x4534u};
        for (int i = 0; i < 4096; i++) {
            double v = fabs(gauss(&r)) * (fp8 ? 112.0 : 2.0);
            tab[fp8][i] = fp8 ? (uint8_t)(dsv4q_e4m3_encode(v, 1) & 0x7F) : (uint8_t)(dsv4q_e2m1_encode(v) & 0x7);
        }
        made[fp8] = 1;
    }
    return tab[fp8];
}

/* A weight [N,K] in format fmt ("fp8", "fp4", "bf16", "f32"), decoded into
 * the F32 data and stored raw. sigma: the value scale. */
static int make_weight(dsv4q_case *c, int slot, rng *r, const char *fmt, long N, long K, double sigma,
                       const char *recipe, char *err, size_t errlen)
{
    float *w = in_t(c, slot, DSV4Q_BT_F32, 2, N, K, 0);
    dsv4q_bt *t = &c->in[slot];
    if (!w) goto oom;
    int nz = !strcmp(recipe, "nearzero");
    if (!strcmp(fmt, "f32") || !strcmp(fmt, "bf16"))
        for (long i = 0; i < N * K; i++) w[i] = (float)(gauss(r) * sigma);
    if (!strcmp(fmt, "f32")) return 0;
    if (!strcmp(fmt, "bf16")) {
        uint16_t *raw = own(c, 2 * (size_t)(N * K));
        if (!raw) goto oom;
        for (long i = 0; i < N * K; i++) {
            raw[i] = dsv4q_bf16_from_f32(w[i]);
            w[i] = dsv4q_bf16_to_f32(raw[i]);
        }
        t->raw = raw;
        t->raw_dtype = DSV4Q_BT_BF16;
        t->raw_ndim = 2;
        t->raw_shape[0] = N;
        t->raw_shape[1] = K;
        return 0;
    }
    if (!strcmp(fmt, "fp8") || !strcmp(fmt, "fp4")) {
        /* Codes are drawn from a table of gaussian samples encoded once
         * (deterministic), with a random sign, and block scales around
         * sigma: 25M-element expert weights then cost ~1 ns per element
         * instead of a gauss + encode each; the codes keep the shape of a
         * quantized gaussian, which is all a kernel can tell. */
        const int fp8 = fmt[2] == '8';
        if (!fp8 && K % 32) { snprintf(err, errlen, "%s: FP4 needs K %% 32 == 0", c->key); return -1; }
        const uint8_t *ctab = code_table(fp8);
        const long nb0 = fp8 ? (N + 127) / 128 : N, nb1 = fp8 ? (K + 127) / 128 : K / 32;
        uint8_t *raw = own(c, fp8 ? (size_t)(N * K) : (size_t)(N * K / 2)), *sc = own(c, (size_t)(nb0 * nb1));
        if (!raw || !sc) goto oom;
        /* sigma of the table's values: ~112 (FP8), ~2 (FP4) */
        int e0 = -(int)ceil(log2(sigma > 0 ? 1.0 / sigma : 1.0)) - (fp8 ? 7 : 1);
        for (long i = 0; i < nb0 * nb1; i++) {
            int e = e0 + (int)uint_below(r, 3) - 1;
            sc[i] = (uint8_t)dsv4q_e8m0_encode_exp(e);
        }
        const double *t8 = dsv4q_e4m3_table();
        double t4[16], *sdec = malloc(sizeof(double) * (size_t)(nb0 * nb1));
        if (!sdec) goto oom;
        for (int q = 0; q < 16; q++) t4[q] = dsv4q_e2m1_decode((uint8_t)q);
        for (long q = 0; q < nb0 * nb1; q++) sdec[q] = dsv4q_e8m0_decode(sc[q]);
        uint64_t bits = 0;
        int left = 0;
        for (long i = 0; i < N; i++)
            for (long k = 0; k < K; k++) {
                if (left == 0) { bits = splitmix(r); left = 4; }
                uint32_t v = (uint32_t)(bits & 0xFFFF);
                bits >>= 16;
                left--;
                uint8_t code = ctab[v & 4095];
                long si = fp8 ? (i / 128) * nb1 + k / 128 : i * nb1 + k / 32;
                int zero = nz && (sc[si] & 7) == 0;   /* nearzero: ~1 block in 8 is all zero */
                if (zero) code = 0;
                else if (v & 0x8000) code |= fp8 ? 0x80 : 0x8;
                double scale = sdec[si];
                if (fp8) {
                    raw[i * K + k] = code;
                    w[i * K + k] = (float)(t8[code] * scale);
                } else {
                    long idx = i * K + k;
                    if (idx & 1) raw[idx >> 1] |= (uint8_t)(code << 4);
                    else raw[idx >> 1] = code;
                    w[i * K + k] = (float)(t4[code] * scale);
                }
            }
        free(sdec);
        t->raw = raw;
        t->raw_dtype = fp8 ? DSV4Q_BT_F8_E4M3 : DSV4Q_BT_I8;
        t->raw_ndim = 2;
        t->raw_shape[0] = N;
        t->raw_shape[1] = fp8 ? K : K / 2;
        t->raw_scale = sc;
        t->scale_dtype = DSV4Q_BT_F8_E8M0;
        t->scale_shape[0] = nb0;
        t->scale_shape[1] = nb1;
        return 0;
    }
    snprintf(err, errlen, "%s: unknown weight format '%s' (fp8, fp4, bf16, f32)", c->key, fmt);
    return -1;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

/* ---- per-op builders --------------------------------------------------- */

#define NEEDP(p) do { if (!(p)) goto oom; } while (0)
#define RECIPES(...) do { static const char *const ok_[] = {__VA_ARGS__, NULL}; \
        if (recipe_check(c, ok_, err, errlen)) return -1; } while (0)

static int recipe_check(const dsv4q_case *c, const char *const *ok, char *err, size_t errlen)
{
    char list[128] = "";
    for (int i = 0; ok[i]; i++) {
        if (!strcmp(ok[i], c->recipe)) return 0;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", ok[i]);
    }
    snprintf(err, errlen, "%s: recipe '%s' is not defined for %s (%s)", c->key, c->recipe, dsv4q_op_get(c->op)->name,
             list);
    return -1;
}

static const double EPS = 1e-6;   /* norm_eps of both configs */

static int b_linear(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = kv_int(kv, "s", 1, 4096, &bad), N = kv_int(kv, "N", 1, 1 << 20, &bad),
         K = kv_int(kv, "K", 1, 1 << 20, &bad);
    const char *outs = kv_str(kv, "out");
    if (bad || (strcmp(outs, "bf16") && strcmp(outs, "f32"))) {
        snprintf(err, errlen, "%s: bad s/N/K/out", c->key);
        return -1;
    }
    RECIPES("normal", "extreme", "nearzero", "f32");
    float *x = in_t(c, 0, DSV4Q_BT_F32, 2, s, K, 0);
    NEEDP(x);
    fill_act(r, c->recipe, x, s, K, 1.0, 128);
    if (make_weight(c, 1, r, kv_str(kv, "fmt"), N, K, 1.0 / sqrt((double)K), c->recipe, err, errlen)) return -1;
    out_t(c, 0, DSV4Q_BT_F32, 2, s, N, 0);
    c->param[0] = 1;
    c->param[1] = !strcmp(outs, "bf16");
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_rmsnorm(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = kv_int(kv, "rows", 1, 1 << 16, &bad), d = kv_int(kv, "d", 1, 1 << 20, &bad);
    double eps = kv_num(kv, "eps", 0, 1, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/d/eps", c->key); return -1; }
    RECIPES("normal", "extreme", "nearzero", "f32");
    const int full = is_full(c->recipe);
    float *x = in_t(c, 0, DSV4Q_BT_F32, 2, rows, d, 0), *w = in_t(c, 1, DSV4Q_BT_F32, 1, d, 0, 0);
    NEEDP(x && w);
    fill_act(r, c->recipe, x, rows, d, 1.0, d);   /* per row: the norm's unit */
    if (!strcmp(c->recipe, "extreme")) {
        for (long i = 0; i < d; i += 97) x[i] = bf(x[i] * 4096.0);   /* outlier features */
    }
    if (!strcmp(c->recipe, "nearzero")) {            /* rows where eps dominates */
        for (long i = 0; i < d; i++) x[(rows - 1) * d + i] = bf(gauss(r) * 1e-4);
    }
    for (long i = 0; i < d; i++) w[i] = st(full, 1.0 + 0.25 * gauss(r));   /* RMSNorm.weight is F32 */
    out_t(c, 0, DSV4Q_BT_F32, 2, rows, d, 0);
    c->param[0] = eps;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_qhead_norm(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = kv_int(kv, "s", 1, 4096, &bad), H = kv_int(kv, "H", 1, 1024, &bad), D = kv_int(kv, "D", 1, 1 << 16, &bad);
    double eps = kv_num(kv, "eps", 0, 1, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad s/H/D/eps", c->key); return -1; }
    RECIPES("normal", "nearzero", "f32");
    const int full = is_full(c->recipe);
    float *q = in_t(c, 0, DSV4Q_BT_F32, 2, s * H, D, 0);
    NEEDP(q);
    for (long i = 0; i < s * H; i++) {
        /* nearzero: mean(q^2) near and below 3e-4, where +eps is not lost */
        double m = !strcmp(c->recipe, "nearzero") ? ldexp(1.0, -(int)uint_below(r, 14)) * 0.02 : 1.0 + 3 * u01(r);
        for (long j = 0; j < D; j++) q[i * D + j] = st(full, gauss(r) * m);
    }
    out_t(c, 0, DSV4Q_BT_F32, 2, s * H, D, 0);
    c->param[0] = eps;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_rope(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = kv_int(kv, "rows", 1, 1 << 16, &bad), rd = kv_int(kv, "r", 2, 512, &bad),
         pmax = kv_int(kv, "pos", 0, 1L << 24, &bad), inv = kv_int(kv, "inv", 0, 1, &bad);
    double factor = kv_num(kv, "factor", 1, 1024, &bad);
    const char *sp = kv_str(kv, "rope");
    if (bad || rd % 2 || (strcmp(sp, "yarn") && strcmp(sp, "plain"))) {
        snprintf(err, errlen, "%s: bad rows/r/pos/inv/rope/factor (rope=yarn|plain, r even)", c->key);
        return -1;
    }
    RECIPES("normal", "f32");
    float *x = in_t(c, 0, DSV4Q_BT_F32, 2, rows, rd, 0);
    int32_t *pos = in_t(c, 1, DSV4Q_BT_I32, 1, rows, 0, 0);
    NEEDP(x && pos);
    fill_act(r, c->recipe, x, rows, rd, 1.0, rd);
    /* positions: 0, 1, then spread up to pmax, the last exactly pmax */
    for (long i = 0; i < rows; i++)
        pos[i] = (int32_t)(i == 0 ? 0 : i == rows - 1 ? pmax : (i == 1 ? 1 : (long)(u01(r) * (double)pmax)));
    out_t(c, 0, DSV4Q_BT_F32, 2, rows, rd, 0);
    int yarn = !strcmp(sp, "yarn");
    c->param[0] = yarn ? 160000 : 10000;   /* compress_rope_theta | rope_theta */
    c->param[1] = yarn ? 65536 : 0;
    c->param[2] = factor;
    c->param[3] = 32;
    c->param[4] = 1;
    c->param[5] = (double)inv;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

/* Midpoints of adjacent E4M3 magnitudes in [1/8, 448). */
static double e4m3_mid(rng *r)
{
    for (;;) {
        uint8_t c0 = (uint8_t)(8 + uint_below(r, 0x7E - 8));
        double a = dsv4q_e4m3_decode(c0), b = dsv4q_e4m3_decode((uint8_t)(c0 + 1));
        if (b <= 448) return (a + b) / 2 * (uint_below(r, 2) ? -1 : 1);
    }
}

static int b_quant(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = kv_int(kv, "rows", 1, 1 << 16, &bad), n = kv_int(kv, "n", 1, 1 << 20, &bad);
    long block = c->op == DSV4Q_OP_ACT_QUANT ? kv_int(kv, "block", 1, 4096, &bad) : 32;
    if (bad) { snprintf(err, errlen, "%s: bad rows/n/block", c->key); return -1; }
    if (c->op == DSV4Q_OP_HADAMARD && (n & (n - 1))) { snprintf(err, errlen, "%s: n must be a power of two", c->key); return -1; }
    if (c->op == DSV4Q_OP_FP4_QUANT && n % 32) { snprintf(err, errlen, "%s: n must be a multiple of 32", c->key); return -1; }
    if (c->op == DSV4Q_OP_HADAMARD) RECIPES("normal", "extreme");
    else RECIPES("normal", "extreme", "nearzero", "ties", "scaletrap");
    float *x = in_t(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    NEEDP(x);
    if (!strcmp(c->recipe, "ties")) {
        /* every block: one element at fmax*2^e (fixes s = 2^e), the rest on
         * rounding midpoints of the grid (ties-to-even decides) */
        static const double e2m1_mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5};
        for (long i = 0; i < rows; i++)
            for (long b0 = 0; b0 < n; b0 += block) {
                int e = (int)uint_below(r, 16) - 8;
                for (long j = b0; j < b0 + block && j < n; j++) {
                    double v = c->op == DSV4Q_OP_ACT_QUANT ? e4m3_mid(r)
                                                           : e2m1_mid[uint_below(r, 7)] * (uint_below(r, 2) ? -1 : 1);
                    x[i * n + j] = bf(ldexp(v, e));
                }
                x[i * n + b0] = bf(ldexp(c->op == DSV4Q_OP_ACT_QUANT ? 448.0 : 6.0, e));
            }
    } else if (!strcmp(c->recipe, "scaletrap")) {
        /* every block's amax is fmax*2^e or a few F32 ulps above it: the
         * exact scale rule gives 2^e resp. 2^(e+1); ceil(log2f(amax/fmax))
         * in float gets some of these wrong. F32 inputs (not BF16: the
         * trap needs bits BF16 does not have; the qat and exact profiles
         * quantize unrounded values). */
        const float fmax = c->op == DSV4Q_OP_ACT_QUANT ? 448.0f : 6.0f;
        for (long i = 0; i < rows; i++)
            for (long b0 = 0; b0 < n; b0 += block) {
                int e = (int)uint_below(r, 31) - 20;
                float a = ldexpf(fmax, e);
                for (long j = uint_below(r, 6); j > 0; j--) a = nextafterf(a, INFINITY);
                for (long j = b0; j < b0 + block && j < n; j++) {
                    double v = gauss(r) * 0.25 * (double)a;
                    if (fabs(v) > 0.9 * a) v = 0.9 * a;
                    x[i * n + j] = bf(v);
                }
                const long bl = block < n - b0 ? block : n - b0, at = uint_below(r, bl);
                x[i * n + b0 + at] = uint_below(r, 2) ? a : -a;
                /* act_quant: two companions at 2^-8..2^-7 of 2^e, E4M3
                 * subnormals of the block's scale: a scale off by one
                 * binade moves them on the subnormal grid (the normal
                 * grid is scale-invariant, so without them a wrong scale
                 * hides: 'ue8m0_log2f' escaped every case of a seed) */
                if (c->op == DSV4Q_OP_ACT_QUANT && bl > 2)
                    for (int k = 0; k < 2; k++) {
                        long j = (at + 1 + k + uint_below(r, bl - 2)) % bl;
                        if (j == at) j = (j + 1) % bl;
                        x[i * n + b0 + j] = bf(ldexp(1.0 + u01(r), e - 8) * (uint_below(r, 2) ? 1 : -1));
                    }
            }
    } else {
        fill_act(r, c->recipe, x, rows, n, 1.0, block);
    }
    out_t(c, 0, DSV4Q_BT_F32, 2, rows, n, 0);
    if (c->op == DSV4Q_OP_ACT_QUANT) {
        c->param[0] = (double)block;
        c->param[1] = 1;
    }
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

/* Recipe blocks: whole 64-column blocks of the kernel's online softmax
 * masked, as a causal window or a short prefix leaves them: query i % 3 ==
 * 0 loses the first block (the first block of the window ring: the
 * kernel starts on a block with no finite score, running max -inf) and
 * the last one, i % 3 == 1 a middle block, i % 3 == 2 every block but
 * one. A masked column is -1 or, one time in four, an index >= N. Rows
 * with fewer than 3 blocks mask what they have. */
static void mask_blocks(rng *r, int32_t *row, long ncols, long i, long N)
{
    const long nb = (ncols + 63) / 64, live = nb > 1 ? 1 + uint_below(r, nb - 1) : 0;
    for (long b = 0; b < nb; b++) {
        int m;
        switch (i % 3) {
        case 0: m = b == 0 || (nb > 2 && b == nb - 1); break;
        case 1: m = b == nb / 2; break;
        default: m = b != live; break;
        }
        if (!m) continue;
        for (long j = b * 64; j < (b + 1) * 64 && j < ncols; j++)
            row[j] = uint_below(r, 4) ? -1 : (int32_t)(N + uint_below(r, 100));
    }
}

static int b_sparse_attn(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = kv_int(kv, "s", 1, 4096, &bad), H = kv_int(kv, "H", 1, 1024, &bad), D = kv_int(kv, "D", 1, 4096, &bad),
         win = kv_int(kv, "win", 0, 1 << 16, &bad), sel = kv_int(kv, "sel", 0, 1 << 16, &bad);
    long rows = kv_int(kv, "rows", 0, 1L << 26, &bad);
    if (bad || win + sel == 0 || (rows && rows < win + sel)) {
        snprintf(err, errlen, "%s: bad s/H/D/win/sel/rows (rows 0 or >= win + sel)", c->key);
        return -1;
    }
    RECIPES("normal", "masked", "extreme", "f32", "blocks");
    /* kv = [window rows | compressed rows]; sel of the C picked per query */
    const long C = rows ? rows - win : 2 * sel, N = win + C, ncols = win + sel;
    float *q = in_t(c, 0, DSV4Q_BT_F32, 3, s, H, D), *k = in_t(c, 1, DSV4Q_BT_F32, 2, N, D, 0);
    int32_t *idx = in_t(c, 2, DSV4Q_BT_I32, 2, s, ncols, 0);
    float *sink = in_t(c, 3, DSV4Q_BT_F32, 1, H, 0, 0);
    NEEDP(q && k && idx && sink);
    int ex = !strcmp(c->recipe, "extreme"), full = is_full(c->recipe);
    const char *fr = full ? "f32" : "normal";
    fill_act(r, fr, q, s * H, D, ex ? 6.0 : 1.0, D);
    fill_act(r, fr, k, N, D, 1.0, D);
    if (ex)   /* a few dominant keys: probabilities near 0/1, large logits */
        for (long i = 0; i < N; i += 37)
            for (long j = 0; j < D; j++) k[i * D + j] = bf(k[i * D + j] * 4);
    for (long h = 0; h < H; h++) sink[h] = st(full, gauss(r));   /* attn_sink is an F32 parameter */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)(C ? C : 1));
    NEEDP(perm);
    for (long i = 0; i < s; i++) {
        int32_t *row = idx + i * ncols;
        for (long j = 0; j < win; j++) row[j] = (int32_t)j;   /* window, ascending */
        for (long j = 0; j < C; j++) perm[j] = (int32_t)(win + j);
        for (long j = 0; j < sel; j++) {                      /* sel distinct compressed rows */
            long t = j + uint_below(r, C - j);
            int32_t tmp = perm[j];
            perm[j] = perm[t];
            perm[t] = tmp;
            row[win + j] = perm[j];
        }
        if (rows && sel) row[win + sel - 1] = (int32_t)(N - 1);   /* the far end of the cache */
        if (!strcmp(c->recipe, "masked")) {
            for (long j = 0; j < ncols; j++)
                if (uint_below(r, 10) < 3) row[j] = uint_below(r, 4) ? -1 : (int32_t)(N + uint_below(r, 100));
            if (i == s - 1 && s > 1)   /* a query with every column masked */
                for (long j = 0; j < ncols; j++) row[j] = -1;
        }
        if (!strcmp(c->recipe, "blocks")) mask_blocks(r, row, ncols, i, N);
    }
    free(perm);
    out_t(c, 0, DSV4Q_BT_F32, 3, s, H, D);
    c->param[0] = 1.0 / sqrt((double)D);
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_window_attn(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long H = kv_int(kv, "H", 1, 1024, &bad), D = kv_int(kv, "D", 1, 4096, &bad), win = kv_int(kv, "win", 1, 1 << 16, &bad),
         pos = kv_int(kv, "p", 0, 1L << 30, &bad), sel = kv_int(kv, "sel", 0, 1 << 16, &bad);
    long rows = kv_int(kv, "rows", 0, 1L << 26, &bad);
    if (bad || (rows && rows < sel)) { snprintf(err, errlen, "%s: bad H/D/win/p/sel/rows", c->key); return -1; }
    RECIPES("normal", "masked", "f32", "blocks");
    const long C = rows ? rows : 2 * sel;   /* compressed rows; sel of them are picked */
    float *q = in_t(c, 0, DSV4Q_BT_F32, 3, 1, H, D), *kn = in_t(c, 1, DSV4Q_BT_F32, 2, 1, D, 0),
          *ring = in_t(c, 2, DSV4Q_BT_F32, 2, win, D, 0), *sink = in_t(c, 5, DSV4Q_BT_F32, 1, H, 0, 0);
    float *cmp = in_t(c, 3, DSV4Q_BT_F32, C ? 2 : 0, C, D, 0);
    int32_t *cidx = in_t(c, 4, DSV4Q_BT_I32, sel ? 2 : 0, 1, sel, 0);
    NEEDP(q && kn && ring && sink && (!C || cmp) && (!sel || cidx));
    const int full = is_full(c->recipe);
    const char *fr = full ? "f32" : "normal";
    fill_act(r, fr, q, H, D, 1.0, D);
    fill_act(r, fr, kn, 1, D, 1.0, D);
    /* every slot, including those of positions < 0 and the slot p % w
     * itself (position p - w: the stale row), holds its own noise */
    fill_act(r, fr, ring, win, D, 1.0, D);
    if (C) fill_act(r, fr, cmp, C, D, 1.0, D);
    for (long h = 0; h < H; h++) sink[h] = st(full, gauss(r));
    if (sel) {
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)C);
        NEEDP(perm);
        for (long j = 0; j < C; j++) perm[j] = (int32_t)j;
        for (long j = 0; j < sel; j++) {   /* sel distinct compressed rows, in random order */
            long t = j + uint_below(r, C - j);
            int32_t tmp = perm[j];
            perm[j] = perm[t];
            perm[t] = tmp;
            cidx[j] = perm[j];
        }
        free(perm);
        if (rows) cidx[sel - 1] = (int32_t)(C - 1);   /* the far end of the cache */
        if (!strcmp(c->recipe, "masked"))
            for (long j = 0; j < sel; j++)
                if (uint_below(r, 10) < 3) cidx[j] = uint_below(r, 4) ? -1 : (int32_t)(C + uint_below(r, 100));
        /* blocks: the compressed columns start at column w; with w a
         * multiple of 64 the cidx blocks are kernel blocks (the ring's
         * own masked blocks come from p < w - 1: keys p=63, p=64) */
        if (!strcmp(c->recipe, "blocks")) mask_blocks(r, cidx, sel, 0, C);
    }
    out_t(c, 0, DSV4Q_BT_F32, 3, 1, H, D);
    out_t(c, 1, DSV4Q_BT_F32, 2, win, D, 0);
    c->param[0] = (double)pos;
    c->param[1] = (double)win;
    c->param[2] = 1.0 / sqrt((double)D);
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_compressor(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = kv_int(kv, "s", 1, 1 << 16, &bad), d = kv_int(kv, "d", 1, 1 << 16, &bad),
         ratio = kv_int(kv, "ratio", 1, 128, &bad), Dc = kv_int(kv, "Dc", 64, 128 * 4, &bad),
         rot = kv_int(kv, "rotate", 0, 1, &bad);
    if (bad || (ratio != 4 && ratio != 128) || s < ratio || (rot && (Dc & (Dc - 1)))) {
        snprintf(err, errlen, "%s: bad s/d/ratio/Dc/rotate (ratio 4|128, s >= ratio, Dc <= 512)", c->key);
        return -1;
    }
    RECIPES("normal", "extreme", "f32");
    const long coff = ratio == 4 ? 2 : 1, W = coff * Dc;
    float *x = in_t(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    NEEDP(x);
    fill_act(r, c->recipe, x, s, d, 1.0, 128);
    if (make_weight(c, 1, r, "f32", W, d, 1.0 / sqrt((double)d), "normal", err, errlen) ||
        make_weight(c, 2, r, "f32", W, d, 1.0 / sqrt((double)d), "normal", err, errlen))
        return -1;
    float *ape = in_t(c, 3, DSV4Q_BT_F32, 2, ratio, W, 0), *nw = in_t(c, 4, DSV4Q_BT_F32, 1, Dc, 0, 0);
    NEEDP(ape && nw);
    for (long i = 0; i < ratio * W; i++) ape[i] = (float)(0.5 * gauss(r));
    for (long i = 0; i < Dc; i++) nw[i] = st(is_full(c->recipe), 1.0 + 0.25 * gauss(r));
    out_t(c, 0, DSV4Q_BT_F32, 2, s / ratio, Dc, 0);
    double p[10] = {(double)ratio, (double)rot, EPS, 64, 160000, 65536, 16, 32, 1, 1};
    memcpy(c->param, p, sizeof p);
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_indexer(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = kv_int(kv, "s", 1, 4096, &bad), Hi = kv_int(kv, "Hi", 1, 1024, &bad),
         Di = kv_int(kv, "Di", 1, 4096, &bad), T = kv_int(kv, "T", 1, 1 << 20, &bad),
         start = kv_int(kv, "start", 0, 1L << 30, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad s/Hi/Di/T/start", c->key); return -1; }
    RECIPES("normal", "ties", "f32");
    float *q = in_t(c, 0, DSV4Q_BT_F32, 3, s, Hi, Di), *w = in_t(c, 1, DSV4Q_BT_F32, 2, s, Hi, 0),
          *K = in_t(c, 2, DSV4Q_BT_F32, 2, T, Di, 0);
    NEEDP(q && w && K);
    /* queries and keys as the FP4 simulation leaves them */
    fill_act(r, "normal", q, s * Hi, Di, 1.0, Di);
    dsv4q_fp4_act_quant_f32(q, s * Hi, Di);
    fill_act(r, "normal", K, T, Di, 1.0, Di);
    dsv4q_fp4_act_quant_f32(K, T, Di);
    if (!strcmp(c->recipe, "ties"))   /* duplicate key rows: exactly equal scores */
        for (long t = 1; t < T; t += 2)
            if (uint_below(r, 2)) memcpy(K + t * Di, K + (t - 1) * Di, sizeof(float) * (size_t)Di);
    double ws = 1.0 / sqrt((double)Di * (double)Hi);
    for (long i = 0; i < s * Hi; i++) w[i] = is_full(c->recipe) ? (float)(gauss(r) * ws) : bf(bf(gauss(r)) * ws);
    out_t(c, 0, DSV4Q_BT_F32, 2, s, T, 0);
    c->param[0] = (double)start;
    c->param[1] = 4;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_topk(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long rows = kv_int(kv, "rows", 1, 1 << 16, &bad), T = kv_int(kv, "T", 1, 1 << 22, &bad),
         k = kv_int(kv, "k", 1, 1 << 16, &bad);
    if (bad) { snprintf(err, errlen, "%s: bad rows/T/k", c->key); return -1; }
    RECIPES("normal", "ties", "masked", "crowd");
    float *sc = in_t(c, 0, DSV4Q_BT_F32, 2, rows, T, 0);
    NEEDP(sc);
    for (long i = 0; i < rows; i++) {
        float *v = sc + i * T;
        for (long t = 0; t < T; t++) v[t] = bf(gauss(r) * 4);
        if (!strcmp(c->recipe, "ties"))   /* coarse grid: ~100 distinct values, so the
                                              cut falls inside a run of equal scores */
            for (long t = 0; t < T; t++) v[t] = (float)(floor(v[t] * 4.0) / 4.0);
        if (!strcmp(c->recipe, "masked"))   /* fewer finite scores than k in row 0 */
            for (long t = 0; t < T; t++)
                if (i == 0 ? t >= k / 2 : uint_below(r, 3) == 0) v[t] = -INFINITY;
        if (!strcmp(c->recipe, "crowd")) {
            /* real BF16 index scores: sums of relu'd head scores stored in
             * BF16 crowd one binade (128 codes), so thousands of scores
             * share a few codes and the cut falls inside a long run of
             * exact ties; a radix / histogram top-k must split that run
             * by the tie rule, not by the bucket. Even rows: all in
             * [2, 4) around 3; odd rows: all but ~k/2 scores are the exact
             * zeros relu leaves (the cut inside the zero run), the causal
             * tail -inf. */
            if (i % 2 == 0)
                for (long t = 0; t < T; t++) {
                    double x = 3.0 + 0.1 * gauss(r);
                    v[t] = bf(x < 2 ? 2 : x > 3.98 ? 3.98 : x);
                }
            else
                for (long t = 0; t < T; t++)
                    v[t] = t >= T - T / 8 ? -INFINITY : uint_below(r, T) < k / 2 ? bf(0.5 + u01(r)) : 0.0f;
        }
    }
    out_t(c, 0, DSV4Q_BT_I32, 2, rows, k, 0);
    c->param[0] = (double)k;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

/* hc params: fn [m, hc*d] F32 math, scale, base. */
static int hc_params(dsv4q_case *c, rng *r, int slot, long m, long hcd, long nscale, char *err, size_t errlen)
{
    if (make_weight(c, slot, r, "f32", m, hcd, 1.0 / sqrt((double)hcd), "normal", err, errlen)) return -1;
    float *scale = in_t(c, slot + 1, DSV4Q_BT_F32, 1, nscale, 0, 0), *base = in_t(c, slot + 2, DSV4Q_BT_F32, 1, m, 0, 0);
    if (!scale || !base) {
        snprintf(err, errlen, "%s: out of memory", c->key);
        return -1;
    }
    for (long i = 0; i < nscale; i++) scale[i] = (float)(0.5 + u01(r));
    for (long i = 0; i < m; i++) base[i] = (float)(0.5 * gauss(r));
    return 0;
}

static int b_hc(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = kv_int(kv, "s", 1, 4096, &bad), hc = kv_int(kv, "hc", 1, 16, &bad), d = kv_int(kv, "d", 1, 1 << 16, &bad);
    long iters = c->op == DSV4Q_OP_HC_PRE ? kv_int(kv, "iters", 1, 1000, &bad) : 0;
    double hceps = c->op != DSV4Q_OP_HC_POST ? kv_num(kv, "hceps", 0, 1, &bad) : 0;
    if (bad) { snprintf(err, errlen, "%s: bad s/hc/d/iters/hceps", c->key); return -1; }
    if (c->op == DSV4Q_OP_HC_PRE) RECIPES("normal", "extreme", "f32");
    else RECIPES("normal", "f32");
    int xs = c->op == DSV4Q_OP_HC_POST;   /* hc_post: X is input 1 */
    float *X = in_t(c, xs, DSV4Q_BT_F32, 3, s, hc, d);
    if (!X) goto oom;
    fill_act(r, c->recipe, X, s * hc, d, 1.0, d);
    if (c->op == DSV4Q_OP_HC_PRE) {
        if (hc_params(c, r, 1, (2 + hc) * hc, hc * d, 3, err, errlen)) return -1;
        out_t(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
        out_t(c, 1, DSV4Q_BT_F32, 2, s, hc, 0);
        out_t(c, 2, DSV4Q_BT_F32, 3, s, hc, hc);
        c->param[0] = EPS;
        c->param[1] = hceps;
        c->param[2] = (double)iters;
    } else if (c->op == DSV4Q_OP_HC_HEAD) {
        if (hc_params(c, r, 1, hc, hc * d, 1, err, errlen)) return -1;
        out_t(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
        c->param[0] = EPS;
        c->param[1] = hceps;
    } else {
        float *x = in_t(c, 0, DSV4Q_BT_F32, 2, s, d, 0), *post = in_t(c, 2, DSV4Q_BT_F32, 2, s, hc, 0),
              *comb = in_t(c, 3, DSV4Q_BT_F32, 3, s, hc, hc);
        if (!x || !post || !comb) goto oom;
        fill_act(r, is_full(c->recipe) ? "f32" : "normal", x, s, d, 1.0, d);
        for (long i = 0; i < s * hc; i++) post[i] = (float)(2 * u01(r));
        for (long t = 0; t < s; t++)   /* roughly doubly stochastic, as Sinkhorn leaves it */
            for (long j = 0; j < hc; j++) {
                double sum = 0, v[16];
                for (long k = 0; k < hc; k++) sum += v[k] = 0.1 + u01(r);
                for (long k = 0; k < hc; k++) comb[(t * hc + j) * hc + k] = (float)(v[k] / sum);
            }
        out_t(c, 0, DSV4Q_BT_F32, 3, s, hc, d);
    }
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_moe_gate(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long s = kv_int(kv, "s", 1, 4096, &bad), d = kv_int(kv, "d", 1, 1 << 16, &bad), E = kv_int(kv, "E", 1, 1024, &bad),
         k = kv_int(kv, "k", 1, 64, &bad);
    const char *route = kv_str(kv, "route"), *func = kv_str(kv, "func");
    int f = !strcmp(func, "sqrtsoftplus") ? 0 : !strcmp(func, "sigmoid") ? 1 : !strcmp(func, "softmax") ? 2 : -1;
    int hash = !strcmp(route, "hash");
    if (bad || k > E || f < 0 || (!hash && strcmp(route, "topk"))) {
        snprintf(err, errlen, "%s: bad s/d/E/k/route/func (route topk|hash; func sqrtsoftplus|sigmoid|softmax)", c->key);
        return -1;
    }
    RECIPES("normal", "ties", "f32");
    const long vocab = 129280;
    const int full = is_full(c->recipe);
    float *x = in_t(c, 0, DSV4Q_BT_F32, 2, s, d, 0);
    if (!x) goto oom;
    fill_act(r, full ? "f32" : "normal", x, s, d, 1.0, d);
    if (make_weight(c, 1, r, "f32", E, d, 1.0 / sqrt((double)d), "normal", err, errlen)) return -1;
    float *W = c->in[1].data;
    int ties = !strcmp(c->recipe, "ties");
    if (ties)   /* experts in groups of 8 identical rows: equal scores straddle the cut */
        for (long e = 0; e < E; e++)
            if (e % 8) memcpy(W + e * d, W + (e - e % 8) * d, sizeof(float) * (size_t)d);
    float *bias = NULL;
    if (!hash) {
        bias = in_t(c, 2, DSV4Q_BT_F32, 1, E, 0, 0);
        if (!bias) goto oom;
        for (long e = 0; e < E; e++) bias[e] = ties ? (float)((e / 8) % 3) * 0.0625f : st(full, 0.1 * gauss(r));
        in_t(c, 3, DSV4Q_BT_I32, 0, 0, 0, 0);
    } else {
        in_t(c, 2, DSV4Q_BT_F32, 0, 0, 0, 0);
        int32_t *t2e = in_t(c, 3, DSV4Q_BT_I32, 2, vocab, k, 0);
        if (!t2e) goto oom;
        for (long v = 0; v < vocab; v++)
            for (long j = 0; j < k; j++) {
                int32_t e;
                int dup;
                do {   /* distinct experts per token */
                    e = (int32_t)uint_below(r, E);
                    dup = 0;
                    for (long u = 0; u < j; u++) dup |= t2e[v * k + u] == e;
                } while (dup);
                t2e[v * k + j] = e;
            }
    }
    int32_t *ids = in_t(c, 4, DSV4Q_BT_I32, 1, s, 0, 0);
    if (!ids) goto oom;
    for (long i = 0; i < s; i++) ids[i] = (int32_t)uint_below(r, vocab);
    out_t(c, 0, DSV4Q_BT_F32, 2, s, k, 0);
    out_t(c, 1, DSV4Q_BT_I32, 2, s, k, 0);
    c->param[0] = (double)k;
    c->param[1] = E > 256 ? 2.5 : 1.5;
    c->param[2] = f;
    if (!hash) {
        /* the scores the selection is made from (sc + bias), in f64 */
        double *z = own(c, sizeof(double) * (size_t)(s * E)), *xd = own(c, sizeof(double) * (size_t)(s * d));
        if (!z || !xd) goto oom;
        for (long i = 0; i < s * d; i++) xd[i] = x[i];
        dsv4q_weight Wv = {"W", DSV4Q_WF_F32, E, d, W, NULL, DSV4Q_DT_INVALID};
        if (dsv4q_linear_f64(0, 0, &Wv, xd, s, z, -1)) goto oom;
        for (long i = 0; i < s; i++) {
            double *v = z + i * E, m = v[0], sum = 0;
            if (f == 2) {
                for (long e = 1; e < E; e++) if (v[e] > m) m = v[e];
                for (long e = 0; e < E; e++) sum += v[e] = exp(v[e] - m);
                for (long e = 0; e < E; e++) v[e] /= sum;
            } else {
                for (long e = 0; e < E; e++)
                    v[e] = f == 1 ? 1 / (1 + exp(-v[e])) : sqrt(v[e] > 20 ? v[e] : log1p(exp(v[e])));
            }
            for (long e = 0; e < E; e++) v[e] += bias[e];
        }
        c->sel_scores = z;
        c->sel_rows = s;
        c->sel_T = E;
        c->sel_out = 1;
    }
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

static int b_expert(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen)
{
    int bad = 0;
    long n = kv_int(kv, "n", 1, 4096, &bad), d = kv_int(kv, "d", 32, 1 << 16, &bad), I = kv_int(kv, "I", 32, 1 << 16, &bad);
    const char *fmt = kv_str(kv, "fmt");
    if (bad || (strcmp(fmt, "fp4") && strcmp(fmt, "fp8"))) {
        snprintf(err, errlen, "%s: bad n/d/I/fmt (fmt fp4|fp8)", c->key);
        return -1;
    }
    RECIPES("normal", "extreme", "f32");
    float *x = in_t(c, 0, DSV4Q_BT_F32, 2, n, d, 0);
    if (!x) goto oom;
    /* extreme: large inputs drive w1 x / w3 x into the swiglu clamp (10) */
    fill_act(r, is_full(c->recipe) ? "f32" : "normal", x, n, d, !strcmp(c->recipe, "extreme") ? 24.0 : 1.0, 128);
    if (make_weight(c, 1, r, fmt, I, d, 1.0 / sqrt((double)d), "normal", err, errlen) ||
        make_weight(c, 2, r, fmt, d, I, 1.0 / sqrt((double)I), "normal", err, errlen) ||
        make_weight(c, 3, r, fmt, I, d, 1.0 / sqrt((double)d), "normal", err, errlen))
        return -1;
    const char *shared = kv_str(kv, "shared");
    if (strcmp(shared, "0") && strcmp(shared, "1")) {
        snprintf(err, errlen, "%s: shared must be 0 or 1", c->key);
        return -1;
    }
    if (!strcmp(shared, "1")) {
        in_t(c, 4, DSV4Q_BT_F32, 0, 0, 0, 0);   /* the shared expert: no routing weight (ndim 0) */
    } else {
        float *w = in_t(c, 4, DSV4Q_BT_F32, 1, n, 0, 0);
        if (!w) goto oom;
        for (long i = 0; i < n; i++) w[i] = (float)(0.05 + 0.4 * u01(r));
    }
    out_t(c, 0, DSV4Q_BT_F32, 2, n, d, 0);
    c->param[0] = 10;
    c->param[1] = 1;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

/* ---- public ------------------------------------------------------------ */

/* ---- per-operator hooks ------------------------------------------------ */

/* topk: the selection is made from the input scores themselves (the tie-run
 * rule of the selection metrics needs them). */
static int post_topk(dsv4q_case *c, char *err, size_t errlen)
{
    long n = (long)dsv4q_bt_numel(&c->in[0]);
    double *z = own(c, sizeof(double) * (size_t)n);
    if (!z) { snprintf(err, errlen, "%s: out of memory", c->key); return -1; }
    for (long i = 0; i < n; i++) z[i] = ((const float *)c->in[0].data)[i];
    c->sel_scores = z;
    c->sel_rows = (long)c->in[0].shape[0];
    c->sel_T = (long)c->in[0].shape[1];
    c->sel_out = 0;
    return 0;
}

/* ---- tensor identity (ABI v2 dsv4q_bcall.role / in_role) ---------------
 * The role of the weight a case carries, named as the tensor of the
 * reference checkpoint it stands for (Flash layer 0 unless the shape says
 * otherwise), so a backend can pick its kernel by tensor as it would in a
 * model. Derived from the key, never a key parameter of its own. */
static void set_role(dsv4q_case *c, const char *role, const char *const *suffix)
{
    snprintf(c->role, sizeof c->role, "%s", role);
    for (int i = 0; i < c->nin; i++) {
        c->in_role[i] = NULL;
        if (!suffix[i]) continue;
        snprintf(c->in_role_s[i], sizeof c->in_role_s[i], "%s%s", role, suffix[i]);
        c->in_role[i] = c->in_role_s[i];
    }
}

static void r_linear(dsv4q_case *c, const kvset *kv)
{
    const char *fmt = kv_str(kv, "fmt");
    long N = atol(kv_str(kv, "N")), K = atol(kv_str(kv, "K"));
    const char *role = !strcmp(fmt, "f32") ? "head"                      /* FP32-math [vocab, dim] slice */
                       : !strcmp(fmt, "bf16") ? "layers.0.attn.wo_a"      /* the BF16 grouped einsum */
                       : N == 512 ? "layers.0.attn.wkv"
                       : N > K ? "layers.0.attn.wo_b" : "layers.0.attn.wq_a";
    set_role(c, role, (const char *const[]){NULL, ""});
}
static void r_rmsnorm(dsv4q_case *c, const kvset *kv)
{
    (void)kv;
    set_role(c, "layers.0.attn_norm", (const char *const[]){NULL, ""});
}
static void r_attn(dsv4q_case *c, const kvset *kv)
{
    (void)kv;   /* the sink is the one weight: last input */
    const char *suf[DSV4Q_OPS_MAX_T] = {0};
    suf[c->nin - 1] = "";
    set_role(c, "layers.0.attn.attn_sink", suf);
}
static void r_compressor(dsv4q_case *c, const kvset *kv)
{
    set_role(c, strcmp(kv_str(kv, "rotate"), "0") ? "layers.0.attn.indexer.compressor" : "layers.0.attn.compressor",
             (const char *const[]){NULL, ".wkv", ".wgate", ".ape", ".norm"});
}
static void r_hc(dsv4q_case *c, const kvset *kv)
{
    (void)kv;
    if (c->op == DSV4Q_OP_HC_PRE)
        set_role(c, "layers.0.hc_attn", (const char *const[]){NULL, "_fn", "_scale", "_base"});
    else if (c->op == DSV4Q_OP_HC_HEAD)
        set_role(c, "hc_head", (const char *const[]){NULL, "_fn", "_scale", "_base"});
}
static void r_moe_gate(dsv4q_case *c, const kvset *kv)
{
    (void)kv;
    set_role(c, "layers.0.ffn.gate", (const char *const[]){NULL, ".weight", ".bias", ".tid2eid", NULL});
}
static void r_expert(dsv4q_case *c, const kvset *kv)
{
    set_role(c, strcmp(kv_str(kv, "shared"), "1") ? "layers.0.ffn.experts.0" : "layers.0.ffn.shared_experts",
             (const char *const[]){NULL, ".w1", ".w2", ".w3", NULL});
}

/* One row per operator, HOOKS_<name> for every row of DSV4Q_OP_LIST (the
 * shape of llama.cpp test-backend-ops' test_case: a builder that makes the
 * inputs of a key, plus defaulted hooks). Hooks left NULL take the default:
 *   build  required: parse the key's parameters, check the recipe, make
 *          inputs, output templates and params
 *   post   after build (default: nothing); e.g. topk's selection scores
 * A later hook (a per-case supports(), a role per tensor) is one more field
 * here with a NULL default. */
typedef struct case_hooks {
    int (*build)(dsv4q_case *c, const kvset *kv, rng *r, char *err, size_t errlen);
    int (*post)(dsv4q_case *c, char *err, size_t errlen);
    /* role (default: none, a weightless op): dsv4q_case.role / in_role */
    void (*role)(dsv4q_case *c, const kvset *kv);
} case_hooks;

#define HOOKS_linear {.build = b_linear, .role = r_linear}
#define HOOKS_rmsnorm {.build = b_rmsnorm, .role = r_rmsnorm}
#define HOOKS_qhead_norm {.build = b_qhead_norm}
#define HOOKS_rope {.build = b_rope}
#define HOOKS_act_quant {.build = b_quant}
#define HOOKS_fp4_quant {.build = b_quant}
#define HOOKS_hadamard {.build = b_quant}
#define HOOKS_sparse_attn {.build = b_sparse_attn, .role = r_attn}
#define HOOKS_compressor {.build = b_compressor, .role = r_compressor}
#define HOOKS_indexer_score {.build = b_indexer}
#define HOOKS_topk {.build = b_topk, .post = post_topk}
#define HOOKS_hc_pre {.build = b_hc, .role = r_hc}
#define HOOKS_hc_post {.build = b_hc}
#define HOOKS_hc_head {.build = b_hc, .role = r_hc}
#define HOOKS_moe_gate {.build = b_moe_gate, .role = r_moe_gate}
#define HOOKS_expert {.build = b_expert, .role = r_expert}
#define HOOKS_window_attn_decode {.build = b_window_attn, .role = r_attn}
#define HOOK_ROW(E, nm, ni, no, np) [DSV4Q_OP_##E] = HOOKS_##nm,
static const case_hooks hooks[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(HOOK_ROW)};
#undef HOOK_ROW

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

int dsv4q_case_build(dsv4q_case *c, const char *key, char *err, size_t errlen)
{
    kvset kv;
    memset(c, 0, sizeof *c);
    if (parse_key(key, &kv, err, errlen)) return -1;
    format_key(&kv, c->key, sizeof c->key);
    c->op = kv.op;
    snprintf(c->recipe, sizeof c->recipe, "%s", kv_str(&kv, "recipe"));
    const dsv4q_op_info *oi = dsv4q_op_get(c->op);
    c->nin = oi->nin;
    c->nout = oi->nout;
    c->nparam = oi->nparam;
    int bad = 0;
    kv_int(&kv, "seed", 0, 0x7fffffffL, &bad);
    if (bad) {
        snprintf(err, errlen, "%s: seed must be a non-negative integer", c->key);
        return -1;
    }
    rng r = {fnv1a(c->key)};   /* K2: seeded by the canonical key only */
    const case_hooks *h = &hooks[c->op];
    int rc = h->build(c, &kv, &r, err, errlen);
    if (!rc && h->post) rc = h->post(c, err, errlen);
    if (!rc && h->role) h->role(c, &kv);
    if (rc) dsv4q_case_free(c);
    return rc;
}

void dsv4q_case_free(dsv4q_case *c)
{
    for (int i = 0; i < c->nbufs; i++) free(c->bufs[i]);
    c->nbufs = 0;
    c->sel_scores = NULL;
}

size_t dsv4q_case_out_bytes(const dsv4q_case *c, int i)
{
    return 4 * (size_t)dsv4q_bt_numel(&c->out[i]);
}

void dsv4q_case_call(const dsv4q_case *c, dsv4q_bt *out, uint64_t boundaries, dsv4q_bcall *call)
{
    for (int i = 0; i < c->nout; i++) {
        void *keep = out[i].data;
        out[i] = c->out[i];
        out[i].data = keep;
    }
    memset(call, 0, sizeof *call);
    call->op = c->op;
    call->nin = c->nin;
    call->nout = c->nout;
    call->in = c->in;
    call->out = out;
    call->param = c->param;
    call->nparam = c->nparam;
    call->boundaries = boundaries;
    call->case_key = c->key;
    call->role = c->role[0] ? c->role : NULL;
    call->in_role = c->role[0] ? c->in_role : NULL;
}
