/*
 * stage_ops.h - the operator <-> stage links, derived from the stage table.
 *
 * Each row of the stage table (oracle/stages.c) names the backend
 * operators its computation calls (`ops`, by their DSV4Q_OP_LIST names:
 * the oracle layer cannot see the operator enum). This file resolves those
 * names once against the operator list and answers the two questions the
 * harness asks: which operators does a stage call (a partial engine's
 * fallback marks, `qualify --whole-model`), and which stages does an
 * operator - hence every qualification case of it (harness/cases/cases.h, a case
 * tests exactly one operator) - take part in (docs/backends.md, generated).
 * Nothing here keeps its own list: a new stage or operator changes only the
 * table and the operator's descriptor, and the check below refuses a table
 * that names an operator the list does not have.
 */
#ifndef DSV4Q_STAGE_OPS_H
#define DSV4Q_STAGE_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "oracle/stages.h"

/* DSV4Q_CAP(op) bits of the operators stage `stage` calls; 0 for an
 * unknown stage or one that calls none (embed). Names that resolve to no
 * operator are left out (dsv4q_stage_ops_check reports them). */
uint64_t dsv4q_stage_op_mask(int stage);

/* Bit `stage` set for every stage of the table whose ops include `op`
 * (enum dsv4q_op); 0 when none or op is out of range. */
uint32_t dsv4q_op_stage_mask(int op);

/* The stages that are not optional (stages.h `optional`: every stage but
 * mtp): those of every call of the main forward pass, e.g. of a
 * `qualify --whole-model` composition, which does not run MTP. */
uint32_t dsv4q_stage_mask_main(void);
#define DSV4Q_STAGE_MASK_ALL ((uint32_t)((1ull << DSV4Q_STAGE_COUNT) - 1))

/* The stages of dsv4q_op_stage_mask(op) & among as "attn, head" in table
 * (= forward) order, or "-" when none, into buf. Returns buf. */
const char *dsv4q_op_stage_names(int op, uint32_t among, char *buf, size_t len);

/* The same four over the stage table of arch (dsv4q_arch: DSV4Q_ARCH_V4 is
 * what the functions above answer, DSV4Q_ARCH_V41 the dsv4q_stage41 rows,
 * whose bits are dsv4q_stage41 ids; any other value reads V4's table). */
uint64_t dsv4q_stage_op_mask_arch(int arch, int stage);
uint32_t dsv4q_op_stage_mask_arch(int arch, int op);
uint32_t dsv4q_stage_mask_main_arch(int arch);
const char *dsv4q_op_stage_names_arch(int arch, int op, uint32_t among, char *buf, size_t len);

/* Check rows[0..n) (the table: dsv4q_stage_get(0..DSV4Q_STAGE_COUNT)) the
 * way dsv4q_stage_gates_check does the gate links: every name in a row's
 * ops is an operator of DSV4Q_OP_LIST, named once; a row that calls
 * operators is gated by one of them (gate_op in ops). An operator no stage
 * calls is allowed: it is qualified by its own cases only (docs/backends.md
 * lists its stages as "-"), and a whole-model run never needs it. 0, or -1
 * with a message naming the row and the operator. */
int dsv4q_stage_ops_check_rows(const dsv4q_stage_info *const *rows, int n, char *err, size_t errlen);
/* The same over both stage tables (V4's and V4.1's). */
int dsv4q_stage_ops_check(char *err, size_t errlen);

#endif
