/*
 * backend_registry.c - built-in backends by name, and the descriptor check
 * every backend (built-in or plugin) passes before the harness calls it.
 *
 * The registry is one table. cpu-ref and its mutants live in
 * harness/cpuref/ and are reached through dsv4q_cpuref_backend(); when that
 * code is not in the tree yet (harness/cpuref.h absent), a local fallback
 * returns NULL so the build and the other built-ins still work. A strong
 * reference (not a weak one) is used when it exists, so the linker pulls
 * the cpu-ref objects out of libdsv4q.a.
 */
#include <stdio.h>
#include <string.h>
#include "harness/backend.h"
#include "oracle/boundary.h"

#if defined(__has_include)
#if __has_include("harness/cpuref.h")
#include "harness/cpuref.h"
#define DSV4Q_HAVE_CPUREF 1
#endif
#endif

#ifndef DSV4Q_HAVE_CPUREF
static const dsv4q_backend_v1 *cpuref_or_null(const char *mutant) { (void)mutant; return NULL; }
static const char *const *mutants_or_null(void) { return NULL; }
#else
static const dsv4q_backend_v1 *cpuref_or_null(const char *mutant) { return dsv4q_cpuref_backend(mutant); }
static const char *const *mutants_or_null(void) { return dsv4q_cpuref_mutants(); }
#endif

static const dsv4q_backend_v1 *b_oracle(const char *arg) { (void)arg; return dsv4q_backend_oracle_f32(); }
static const dsv4q_backend_v1 *b_cpuref(const char *arg) { (void)arg; return cpuref_or_null(NULL); }
static const dsv4q_backend_v1 *b_mutant(const char *arg) { return cpuref_or_null(arg); }

/* name, or prefix ending in ':' that takes the rest as an argument */
static const struct {
    const char *name;
    const dsv4q_backend_v1 *(*get)(const char *arg);
} builtins[] = {
    {"oracle-f32", b_oracle},
    {"cpu-ref", b_cpuref},
    {"mutant:", b_mutant},
};

const dsv4q_backend_v1 *dsv4q_backend_builtin(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        size_t n = strlen(builtins[i].name);
        if (builtins[i].name[n - 1] == ':') {
            if (!strncmp(name, builtins[i].name, n) && name[n]) return builtins[i].get(name + n);
        } else if (!strcmp(name, builtins[i].name)) {
            return builtins[i].get(NULL);
        }
    }
    return NULL;
}

void dsv4q_backend_builtin_list(char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
#define ADD(...) do { if (at < len) at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__); } while (0)
    ADD("oracle-f32");
    if (cpuref_or_null(NULL)) ADD(", cpu-ref");
    const char *const *m = mutants_or_null();
    for (int i = 0; m && m[i]; i++) ADD(", mutant:%s", m[i]);
#undef ADD
}

const char *const *dsv4q_backend_mutants(void) { return mutants_or_null(); }

int dsv4q_backend_is_path(const char *spec)
{
    size_t n = strlen(spec);
    return strchr(spec, '/') != NULL || (n > 3 && !strcmp(spec + n - 3, ".so")) ||
           (n > 6 && !strcmp(spec + n - 6, ".dylib"));
}

int dsv4q_backend_validate(const dsv4q_backend_v1 *b, const char *spec, char *err, size_t errlen)
{
    if (!b) {
        snprintf(err, errlen, "backend %s: %s returned NULL", spec, DSV4Q_BACKEND_ENTRY_SYMBOL);
        return -1;
    }
    if (b->abi_version != DSV4Q_BACKEND_ABI_V1 && b->abi_version != DSV4Q_BACKEND_ABI_VERSION) {
        snprintf(err, errlen, "backend %s: ABI version %u, this harness speaks versions %u and %u (rebuild it against "
                 "harness/dsv4q_backend.h)", spec, b->abi_version, DSV4Q_BACKEND_ABI_V1, DSV4Q_BACKEND_ABI_VERSION);
        return -1;
    }
    if (b->struct_size < sizeof(dsv4q_backend_v1)) {
        snprintf(err, errlen, "backend %s: descriptor struct_size %u < %zu", spec, b->struct_size,
                 sizeof(dsv4q_backend_v1));
        return -1;
    }
    if (!b->run) {
        snprintf(err, errlen, "backend %s: run entry point is NULL", spec);
        return -1;
    }
    if (b->caps & ~DSV4Q_CAP_KNOWN) {
        snprintf(err, errlen, "backend %s: caps 0x%llx has bits beyond the %d operators", spec,
                 (unsigned long long)b->caps, DSV4Q_OP_COUNT);
        return -1;
    }
    uint64_t set;
    char why[768];
    if (b->profile && dsv4q_declaration_parse(b->profile, &set, why, sizeof why)) {
        snprintf(err, errlen, "backend %s: bad precision profile: %s", spec, why);
        return -1;
    }
    return 0;
}

const dsv4q_backend_v2 *dsv4q_backend_v2_of(const dsv4q_backend_v1 *b)
{
    if (!b || b->abi_version < 2 || b->struct_size < sizeof(dsv4q_backend_v2)) return NULL;
    return (const dsv4q_backend_v2 *)(const void *)b;   /* base is the first member */
}
