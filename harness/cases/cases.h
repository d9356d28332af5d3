/*
 * cases.h - qualification cases: operator x shape x input recipe x seed.
 *
 * A case is named by ONE canonical key, e.g.
 *     sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=masked,seed=1)
 * and the key is all there is: the table (harness/cases/cases.c) is a list of
 * keys, dsv4q_case_build() parses a key and makes the inputs, and every
 * input value is drawn from a generator seeded with a hash of the canonical
 * key (FNV-1a 64 -> splitmix64; no OS entropy, no libm transcendental), so
 * a key names the same bytes on every machine. Partial keys are accepted
 * and canonicalised (missing parameters take the op's defaults, which are
 * the Flash shapes), so `dsv4q qualify --case 'topk(recipe=ties)'` works.
 *
 * Recipes: normal; extreme (magnitudes over 2^+-24, outliers, the ue8m0
 * scale trap amax = 448*2^k and just above); nearzero (zero and denormal-
 * tiny quant blocks, rows where eps dominates); ties (exact ties at the
 * top-k cut, E4M3/E2M1 rounding midpoints, duplicate keys / experts);
 * masked (-1 / out-of-range attention columns, a fully masked query,
 * fewer finite scores than k). Not every recipe means something for every
 * op; the builder rejects the combinations it does not define.
 *
 * Invariants:
 *  K1. dsv4q_case_canon(key) is a fixed point: canon(canon(k)) == canon(k);
 *      every table entry is canonical (tests/test_qualify.c).
 *  K2. Inputs depend only on the canonical key (not on the table order,
 *      the set, the backend or the thread count).
 *  K3. Activation inputs are BF16-representable (what the reference stores
 *      between ops); weights are given decoded (exact) and raw.
 */
#ifndef DSV4Q_CASES_H
#define DSV4Q_CASES_H

#include <stddef.h>
#include <stdint.h>
#include "harness/ops/ops.h"

#define DSV4Q_CASE_KEY_MAX 256
#define DSV4Q_CASE_SET_FLASH 1u
#define DSV4Q_CASE_SET_PRO 2u
/* Opt-in (`qualify --shapes long`, never in CI): 1M-context KV and indexer
 * sizes and a KV tensor past 2^31 bytes (docs/gates.md: memory and time). */
#define DSV4Q_CASE_SET_LONG 4u

typedef struct dsv4q_case {
    char key[DSV4Q_CASE_KEY_MAX];    /* canonical */
    int op;
    char recipe[16];
    int nin, nout, nparam;
    dsv4q_bt in[DSV4Q_OPS_MAX_T];    /* owned data */
    dsv4q_bt out[DSV4Q_OPS_MAX_T];   /* templates: name, dtype, shape; data NULL */
    double param[DSV4Q_OPS_MAX_P];
    /* Selection outputs: the reference scores the selection is made from
     * ([rows, T], F64), for the tie-run rule; NULL when the op has none. */
    double *sel_scores;
    long sel_rows, sel_T;
    int sel_out;                     /* index of the selection output */
    void *bufs[24];
    int nbufs;
    /* Tensor identity (ABI v2 dsv4q_bcall.role / in_role): the weight
     * role of the case ("head", "layers.0.attn.wq_a",
     * "layers.0.ffn.shared_experts", ...; empty for weightless ops) and
     * per input (NULL for activations). */
    char role[48];
    char in_role_s[DSV4Q_OPS_MAX_T][64];
    const char *in_role[DSV4Q_OPS_MAX_T];
} dsv4q_case;

typedef struct dsv4q_case_entry {
    const char *key;
    unsigned sets;                   /* DSV4Q_CASE_SET_* */
} dsv4q_case_entry;

/* The case table. */
int dsv4q_case_count(void);
const dsv4q_case_entry *dsv4q_case_at(int i);

/* Canonical form of a (possibly partial) key into out. 0 or -1 + message. */
int dsv4q_case_canon(const char *key, char *out, size_t outlen, char *err, size_t errlen);
/* Parse key, make inputs and output templates. 0 or -1 + message. */
int dsv4q_case_build(dsv4q_case *c, const char *key, char *err, size_t errlen);
void dsv4q_case_free(dsv4q_case *c);

/* Bytes of output i as the harness allocates it (4 per element). */
size_t dsv4q_case_out_bytes(const dsv4q_case *c, int i);
/* A call over c's inputs writing into out[] (templates copied, data set by
 * the caller). */
void dsv4q_case_call(const dsv4q_case *c, dsv4q_bt *out, uint64_t boundaries, dsv4q_bcall *call);

#endif
