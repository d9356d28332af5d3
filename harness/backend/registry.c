/*
 * registry.c - what a backend spec names, and how it is loaded: built-ins
 * by name ("oracle-f32", "cpu-ref", "mutant:NAME"), plugins by path
 * (dlopen + dlsym + the entry point), and the descriptor check every
 * backend passes before the harness calls it. The one place that turns a
 * spec into a descriptor: isolation (harness/backend/isolate.c) calls
 * dsv4q_backend_load in its child, the harness process only names and
 * validates (isolate.h I1).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "backends/cpuref/cpuref.h"
#include "harness/backend/backend.h"
#include "oracle/boundary.h"

static const dsv4q_backend_v1 *b_oracle(const char *arg) { (void)arg; return dsv4q_backend_oracle_f32(); }
static const dsv4q_backend_v1 *b_cpuref(const char *arg) { (void)arg; return dsv4q_cpuref_backend(NULL); }
static const dsv4q_backend_v1 *b_mutant(const char *arg) { return dsv4q_cpuref_backend(arg); }

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
    if (dsv4q_cpuref_backend(NULL)) ADD(", cpu-ref");
    const char *const *m = dsv4q_cpuref_mutants();
    for (int i = 0; m && m[i]; i++) ADD(", mutant:%s", m[i]);
#undef ADD
}

const char *const *dsv4q_backend_mutants(void) { return dsv4q_cpuref_mutants(); }

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
                 "abi/dsv4q_backend.h)", spec, b->abi_version, DSV4Q_BACKEND_ABI_V1, DSV4Q_BACKEND_ABI_VERSION);
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

int dsv4q_backend_load(const char *spec, void (*on_entry)(void *), void *user, const dsv4q_backend_v1 **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (!dsv4q_backend_is_path(spec)) {
        const dsv4q_backend_v1 *b = dsv4q_backend_builtin(spec);
        if (!b) {
            char list[1024];
            dsv4q_backend_builtin_list(list, sizeof list);
            snprintf(err, errlen, "unknown backend '%s' (built-ins: %s; or a path to a .so)", spec, list);
            return -1;
        }
        *out = b;
        return dsv4q_backend_validate(b, spec, err, errlen);
    }
    void *so = dlopen(spec, RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        snprintf(err, errlen, "backend %s: cannot load: %s", spec, dlerror());
        return -1;
    }
    dlerror();
    void *sym = dlsym(so, DSV4Q_BACKEND_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(err, errlen, "backend %s: does not export %s (missing symbol; see docs/backends.md)", spec,
                 DSV4Q_BACKEND_ENTRY_SYMBOL);
        return -1;
    }
    dsv4q_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    if (on_entry) on_entry(user);
    *out = entry();
    return dsv4q_backend_validate(*out, spec, err, errlen);
}
