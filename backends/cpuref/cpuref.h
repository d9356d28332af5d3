/*
 * cpuref.h - cpu-ref, the independent FP32 CPU backend, and its mutants.
 *
 * cpu-ref (the sources of backends/cpuref/) implements the V4 operators of
 * the backend ABI (abi/dsv4q_backend.h; its caps: CPUREF_OPS in backend.c)
 * for the `source` profile, written apart
 * from oracle/ (its own reduction orders, online softmax, fused hc_pre,
 * lookup-table weight decode). A mutant is cpu-ref with one realistic
 * defect, named `mutant:NAME` on the command line; docs/mutants.md lists
 * them, the gate that catches each and the case that exposes it.
 */
#ifndef DSV4Q_CPUREF_H
#define DSV4Q_CPUREF_H

#include "abi/dsv4q_backend.h"

/* NULL or "" = cpu-ref; otherwise the mutant NAME (without "mutant:").
 * Returns NULL for an unknown name. The descriptor is static. */
const dsv4q_backend_v1 *dsv4q_cpuref_backend(const char *mutant_or_null);
/* Mutant names, NULL-terminated, in a stable order. */
const char *const *dsv4q_cpuref_mutants(void);
/* Mutant id of a name (0 = cpu-ref for NULL / ""), -1 if unknown. */
int dsv4q_cpuref_mutant_id(const char *name);

#endif
