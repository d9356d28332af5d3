/*
 * op.h - what a descriptor file harness/ops/<name>.c is made of. Include it
 * first, and only from descriptor files and harness/ops/exec.c.
 *
 * A descriptor file is the whole of an operator (ops.h lists what that
 * means) and is compiled at both widths, like the oracle (the Makefile
 * builds every harness/ops/ file not in OPS_COMMON with -DDSV4Q_WIDTH=32
 * and =64): its oracle adapter is width code in the vocabulary of
 * oracle/width.h (real, X), its descriptor is compiled once, under
 * DSV4Q_OP_ONCE (the f64 build). Shape of a file:
 *
 *     #include "harness/ops/op.h"
 *     DSV4Q_OP_ROW(17, FOO, foo, 1, 1, 1)    <- its row of DSV4Q_OP_LIST
 *
 *     static int exec(DSV4Q_OP_EXEC_ARGS)     <- the oracle at this width
 *     { NEED(0); ... return 0; }
 *     DSV4Q_OP_EXEC(foo, exec)
 *
 *     #if DSV4Q_OP_ONCE
 *     static int build(dsv4q_case *c, const dsv4q_kv *kv, dsv4q_rng *r, char *err, size_t errlen) {...}
 *     DSV4Q_OP_DESC(foo, .in = {...}, .out = {...}, .param = {...},
 *                   .oracle = "...", .reference = "...", .keys = {...},
 *                   .cases = (const dsv4q_case_entry[]){{"foo(...)", SET_FLASH}, {NULL}},
 *                   .build = build)
 *     #endif
 *
 * DSV4Q_OP_ROW lines are what scripts/gen-ops.sh reads to write
 * DSV4Q_OP_LIST into abi/dsv4q_backend.h (ids are frozen and dense: a new
 * operator takes the next id); in C the line checks that the list agrees.
 */
#ifndef DSV4Q_HARNESS_OP_H
#define DSV4Q_HARNESS_OP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oracle/real.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "harness/ops/ops.h"

#define DSV4Q_OP_ONCE (DSV4Q_WIDTH == 64)

/* The list row of the operator, checked against the generated list (a
 * stale list is also caught by `scripts/gen-ops.sh --check` in make test). */
#define DSV4Q_OP_ROW(id, E, nm, ni, no, np)                                                                     \
    _Static_assert(DSV4Q_OP_##E == (id), "DSV4Q_OP_LIST is stale for " #nm ": run scripts/gen-ops.sh");

/* The oracle adapter: reads its call, converts the inputs it needs with
 * NEED(i) (the converted copy is a[i], freed by the caller), runs the
 * oracle, writes out[i] (real values, or int32_t for I32 outputs). Returns
 * 0, 1 (out of memory or an oracle failure: the caller says so), or -1
 * with err set. (bs, err and errlen may go unused: most adapters cannot
 * fail but by allocation.) */
#define DSV4Q_OP_EXEC_ARGS                                                                                      \
    uint64_t bs __attribute__((unused)), const dsv4q_bcall *c, void *const *out, real **a,                     \
    char *err __attribute__((unused)), size_t errlen __attribute__((unused))
#define DSV4Q_OP_EXEC(nm, fn)                                                                                   \
    int X(dsv4q_op_exec_##nm)(DSV4Q_OP_EXEC_ARGS) { return fn(bs, c, out, a, err, errlen); }
/* Input i as real values (converted from F32 once, kept in a[i]; NULL
 * when out of memory): X(dsv4q_op_in), declared with the dispatch. */
#define DSV4Q_BOTH "harness/ops/exec.inc"
#include "oracle/both.h"
#define NEED(i) do { if (!X(dsv4q_op_in)(c, (i), a)) return 1; } while (0)
/* The rows of key tensor t ([N, D] F32) that index columns cols[0..n)
 * pick, as real values packed in ascending row order ([*nrows, D], caller
 * frees; NULL when out of memory), and packed[j] the packed row of cols[j]
 * (-1 where cols[j] is masked: < 0 or >= N). What the attention adapters
 * read instead of NEED on the whole KV: a case may hold a KV of millions
 * of rows and select a few hundred (cases.h dsv4q_case_input_sparse), and
 * an attention reads a row only through its index, so the reference is
 * the same to the bit: X(dsv4q_op_rows), declared with the dispatch. */
/* The oracle's view of a weight input: its stored form when it has one
 * (BF16 / FP8 / FP4 codes and scales), else its F32 values. */
dsv4q_weight dsv4q_op_weight(const dsv4q_bt *t);

/* The descriptor, with the fields its list row gives filled in. */
#define DSV4Q_OP_DESC(nm, ...)                                                                                  \
    const dsv4q_op_info dsv4q_opdesc_##nm = {.op = DSV4Q_OPID_##nm, .name = #nm, .nin = DSV4Q_OPNIN_##nm,     \
                                             .nout = DSV4Q_OPNOUT_##nm, .nparam = DSV4Q_OPNPAR_##nm,          \
                                             __VA_ARGS__};
/* The list row's fields by operator name (for DSV4Q_OP_DESC). */
#define DSV4Q_OP_CONST_(E, nm, ni, no, np)                                                                      \
    DSV4Q_OPID_##nm = DSV4Q_OP_##E, DSV4Q_OPNIN_##nm = ni, DSV4Q_OPNOUT_##nm = no, DSV4Q_OPNPAR_##nm = np,
enum { DSV4Q_OP_LIST(DSV4Q_OP_CONST_) };
#undef DSV4Q_OP_CONST_

/* Shape sets of a case entry. */
#define SET_FLASH DSV4Q_CASE_SET_FLASH
#define SET_PRO DSV4Q_CASE_SET_PRO
#define SET_LONG DSV4Q_CASE_SET_LONG
#define SET_FLASH41 DSV4Q_CASE_SET_FLASH41
#define SET_LONG_SLICE DSV4Q_CASE_SET_LONG_SLICE

/* A contract tensor slot: name, shape, dtype, doc. */
#define T(n, s, d, doc) { n, s, d, doc }

/* For builders: the recipes a builder defines (anything else is refused
 * with the list), and an allocation that must succeed (the case's own
 * buffers are freed by dsv4q_case_build when a builder fails). */
#define RECIPES(...) do { static const char *const ok_[] = {__VA_ARGS__, NULL}; \
        if (dsv4q_case_recipe(c, dsv4q_op_get(c->op)->name, ok_, err, errlen)) return -1; } while (0)
#define NEEDP(p)                                                                                                       \
    do {                                                                                                               \
        if (!(p)) return dsv4q_case_oom(c, err, errlen);                                                               \
    } while (0)

/* norm_eps of both published configs (tests/data/configs). */
#define DSV4Q_CASE_EPS 1e-6

#endif
