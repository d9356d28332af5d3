/*
 * backend.h - finding a backend: built-ins by name, plugins by path, and
 * the descriptor checks every backend passes before the harness calls it.
 *
 * Built-in names (harness/backend/registry.c):
 *   oracle-f32      the oracle's _f32 instance behind the ABI (any profile:
 *                   it follows call->boundaries); it IS the rounding level
 *   cpu-ref         an independent CPU implementation (backends/cpuref/),
 *                   registered through dsv4q_cpuref_backend(NULL)
 *   mutant:NAME     cpu-ref with one deliberate bug, dsv4q_cpuref_backend(NAME)
 * A spec containing '/' or ending in ".so" is a plugin path (dlopen'd in
 * the isolated child, never in the harness process: harness/backend/isolate.h).
 */
#ifndef DSV4Q_HARNESS_BACKEND_H
#define DSV4Q_HARNESS_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "abi/dsv4q_backend.h"

/* The oracle-f32 backend (harness/backend/oracle_f32.c). Its profile field is
 * "source"; it honours call->boundaries, so it can stand in for any
 * profile. */
const dsv4q_backend_v1 *dsv4q_backend_oracle_f32(void);

/* Built-in backend by name (see above); NULL if unknown. */
const dsv4q_backend_v1 *dsv4q_backend_builtin(const char *name);
/* Names of the built-ins for usage messages (", "-separated into buf),
 * including "mutant:NAME" for every mutant cpu-ref reports. */
void dsv4q_backend_builtin_list(char *buf, size_t len);
/* The mutant names cpu-ref provides (NULL-terminated; backends/cpuref/). */
const char *const *dsv4q_backend_mutants(void);
/* 1 if spec names a plugin file rather than a built-in. */
int dsv4q_backend_is_path(const char *spec);


/* Load the backend a spec names: a built-in by name, or a plugin path
 * (dlopen, dlsym DSV4Q_BACKEND_ENTRY_SYMBOL, the entry point), then
 * dsv4q_backend_validate. A plugin's code runs here (its constructors and
 * entry point), so only the isolated child calls it for a plugin
 * (harness/backend/isolate.h I1); on_entry (may be NULL) is called with
 * user just before the entry point runs, so a crash there is attributed
 * to it. The plugin stays loaded for the life of the process. 0 with *out
 * set, or -1 with a message naming the spec (*out may then be set: a
 * descriptor that failed validation). */
int dsv4q_backend_load(const char *spec, void (*on_entry)(void *), void *user, const dsv4q_backend_v1 **out,
                       char *err, size_t errlen);

/* Check a backend descriptor (ABI version, struct size, entry points,
 * profile). Returns 0 or -1 with a message naming what is wrong. */
int dsv4q_backend_validate(const dsv4q_backend_v1 *b, const char *spec, char *err, size_t errlen);

/* The v2 view of a descriptor: b itself when it says ABI 2 and its
 * struct_size covers dsv4q_backend_v2, else NULL (a v1 backend: no
 * supports hook). */
const dsv4q_backend_v2 *dsv4q_backend_v2_of(const dsv4q_backend_v1 *b);

#endif
