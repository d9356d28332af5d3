/*
 * cases.h - the case object of operator qualification: one operator call
 * with its inputs, output templates and params, named by ONE canonical key,
 * e.g.
 *     sparse_attn(s=2,H=64,D=512,win=128,sel=512,recipe=masked,seed=1)
 *
 * This room (harness/cases/) owns the mechanism only: the case object
 * (here), the key grammar (key.h) and the deterministic input generators
 * (gen.h). What a key means for an operator - its parameters, defaults,
 * recipes and builder - lives in that operator's descriptor
 * (harness/ops/<op>.c), and the room above (harness/ops/ops.h
 * dsv4q_case_build) puts the two together.
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
 *      every case an operator lists is canonical (tests/test_qualify.c).
 *  K2. Inputs depend only on the canonical key (not on the case list's
 *      order, the set, the backend or the thread count): the generator is
 *      seeded with a hash of the canonical key (FNV-1a 64 -> splitmix64;
 *      no OS entropy, no libm transcendental), so a key names the same
 *      bytes on every machine.
 *  K3. Activation inputs are BF16-representable (what the reference stores
 *      between ops); weights are given decoded (exact) and raw.
 */
#ifndef DSV4Q_CASES_H
#define DSV4Q_CASES_H

#include <stddef.h>
#include <stdint.h>
#include "abi/dsv4q_backend.h"

#define DSV4Q_CASE_KEY_MAX 256
#define DSV4Q_CASE_SET_FLASH 1u
#define DSV4Q_CASE_SET_PRO 2u
/* Opt-in (`qualify --shapes long`; only its slice, below, in CI): 1M-context
 * KV and indexer sizes and a KV tensor past 2^31 bytes (docs/gates.md:
 * memory and time). */
#define DSV4Q_CASE_SET_LONG 4u
/* DeepSeek V4.1 Flash shapes (`qualify --shapes flash41`): the operators
 * V4.1 adds, and V4's operators at V4.1's widths (dim 5120, 32 index heads,
 * 32x32 FP8 blocks). A V4 engine's run never needs it. */
#define DSV4Q_CASE_SET_FLASH41 8u
/* The slice of the long set that `make test` runs (`qualify --shapes
 * long-slice`, tests/test_long_slice.c): per attention operator that reads
 * its KV by row index, one case whose KV is past 2^31 bytes held sparse
 * (dsv4q_case_input_sparse), with rows selected either side of the int32
 * byte offset; well under a second and 20 MB each (docs/gates.md). */
#define DSV4Q_CASE_SET_LONG_SLICE 16u

/* Most tensors / params an operator call has (the ABI's arity bound). */
#define DSV4Q_OPS_MAX_T 8
#define DSV4Q_OPS_MAX_P 12

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
    size_t bufmap[24]; /* bytes of bufs[i] when it is a mapping (sparse input), else 0 */
    int nbufs;
    /* Tensor identity (ABI v2 dsv4q_bcall.role / in_role): the weight
     * role of the case ("head", "layers.0.attn.wq_a",
     * "layers.0.ffn.shared_experts", ...; empty for weightless ops) and
     * per input (NULL for activations). */
    char role[48];
    char in_role_s[DSV4Q_OPS_MAX_T][64];
    const char *in_role[DSV4Q_OPS_MAX_T];
} dsv4q_case;

/* One case an operator lists: its key and the shape sets it belongs to. */
typedef struct dsv4q_case_entry {
    const char *key;
    unsigned sets;                   /* DSV4Q_CASE_SET_* */
} dsv4q_case_entry;

/* Number of elements of a tensor (product of its shape; 0 if ndim 0). The
 * one copy the harness uses (cpu-ref, reading only the ABI, counts for
 * itself). */
int64_t dsv4q_bt_numel(const dsv4q_bt *t);

/* Free what the case owns (its buffers) and forget the selection scores. */
void dsv4q_case_free(dsv4q_case *c);
/* Bytes of output i as the harness allocates it (4 per element). */
size_t dsv4q_case_out_bytes(const dsv4q_case *c, int i);
/* A call over c's inputs writing into out[] (templates copied, data set by
 * the caller). */
void dsv4q_case_call(const dsv4q_case *c, dsv4q_bt *out, uint64_t boundaries, dsv4q_bcall *call);

/* ---- for builders (harness/ops/<op>.c) -------------------------------- */

/* A zeroed buffer of `bytes` owned by the case (freed by dsv4q_case_free);
 * NULL when out of memory or out of buffer slots. */
void *dsv4q_case_alloc(dsv4q_case *c, size_t bytes);
/* Input `slot`: dtype, a shape of ndim <= 3 dims, and owned zeroed data of
 * 4 bytes per element, 8 for DSV4Q_BT_I64 (returned; NULL for ndim 0, an empty optional input,
 * or out of memory). The tensor's name comes from the operator's contract
 * once the builder returns (harness/ops dsv4q_case_build). */
void *dsv4q_case_input(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* dsv4q_case_input with SPARSE storage, for a tensor too big to fill (a
 * KV past 2^31 bytes, of which a case reads a few hundred rows): an
 * anonymous private mapping reserved without swap (MAP_NORESERVE) and
 * without huge pages, so the pages nobody writes stay the kernel's zero
 * page and cost no memory; a reader sees zeros there. Only the rows a case
 * selects are to be written, and every consumer (the oracle adapters, the
 * backends in their forked child) must read only the rows it selects, or
 * the case costs its full size. Same return as dsv4q_case_input; the
 * mapping is unmapped by dsv4q_case_free. */
void *dsv4q_case_input_sparse(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* Output template `slot` (dtype, shape; no data). */
void dsv4q_case_output(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* 0 when c->recipe is one of ok[] (NULL-terminated), else -1 with
 * "KEY: recipe 'R' is not defined for OP (list)". */
int dsv4q_case_recipe(const dsv4q_case *c, const char *opname, const char *const *ok, char *err, size_t errlen);
/* "KEY: out of memory" into err; returns -1 (a builder's failure). */
int dsv4q_case_oom(const dsv4q_case *c, char *err, size_t errlen);
/* The case's weight role and its inputs' roles: in_role[i] = role +
 * suffix[i] (NULL suffix: an activation, no role). suffix has c->nin
 * entries. */
void dsv4q_case_set_role(dsv4q_case *c, const char *role, const char *const *suffix);
/* The role of a case whose one weight is its last input (the attention
 * sink): role on that input, none on the others. */
void dsv4q_case_role_last(dsv4q_case *c, const char *role);

#endif
