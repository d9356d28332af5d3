/*
 * isolate.h - run a backend where it cannot take the harness down.
 *
 * Every contact with a backend under test (loading it, calling its entry
 * point, init, run, fini) happens in a fork()ed child. The child finds the
 * backend (built-in by name, or dlopen of a path: the plugin is never
 * loaded into the harness process), runs the case's call `nruns` times and
 * writes the outputs into a MAP_SHARED|MAP_ANONYMOUS region mapped before
 * the fork; the parent waits with a timeout. A signal, an exit, a hang, a
 * missing symbol, a wrong ABI version, a failing init or an output written
 * past its end becomes a status and one clear line, e.g.
 *   backend ./crash.so crashed with signal 11 (SIGSEGV) in run (op
 *   rmsnorm, case rmsnorm(rows=2,...))
 * Inputs reach the child by fork's copy-on-write: nothing is serialised.
 *
 * Child lifecycle (the stage is written to shared memory before each
 * step, so a crash is attributed to the step that was running):
 *
 *   fork -> load (builtin | dlopen + dlsym + entry()) -> validate
 *        -> supports (ABI v2, may decline the case) -> init
 *        -> load_weight (ABI v2, LINEAR: the engine's own weight encoding)
 *        -> run #1 -> run #2 -> fini -> _exit(0)
 *
 * Invariants:
 *  I1. The harness process never dlopens a plugin and never calls a
 *      backend function (unless opts->inprocess, for trusted built-ins).
 *  I2. Every output buffer is pre-filled with a NaN sentinel and followed
 *      by a guard zone; an unwritten element reads as non-finite (or as an
 *      out-of-range index), a write past the end is an error.
 *  I3. The child runs with one OpenMP thread: the runtime inherited through
 *      fork() is not usable with more (libgomp deadlocks); a backend must
 *      not rely on libgomp parallelism (GPU backends are unaffected).
 *  I4. On timeout the child's whole process group is killed (SIGKILL).
 */
#ifndef DSV4Q_ISOLATE_H
#define DSV4Q_ISOLATE_H

#include <stddef.h>
#include <stdint.h>
#include "harness/cases/cases.h"

typedef enum dsv4q_iso_status {
    DSV4Q_ISO_OK = 0,
    DSV4Q_ISO_UNSUPPORTED,   /* run() said DSV4Q_BACKEND_UNSUPPORTED */
    DSV4Q_ISO_BACKEND_ERROR, /* run() returned an error */
    DSV4Q_ISO_LOAD_ERROR,    /* not found, no entry symbol, bad descriptor */
    DSV4Q_ISO_CRASH,         /* killed by a signal, or exited early */
    DSV4Q_ISO_TIMEOUT,
    DSV4Q_ISO_OVERRUN,       /* wrote past an output buffer */
    DSV4Q_ISO_HARNESS_ERROR, /* fork/mmap failed */
    DSV4Q_ISO_INIT_ERROR,    /* init() returned an error: the backend cannot run here
                                (e.g. no GPU); callers treat it like a load error */
    DSV4Q_ISO_DECLINED       /* ABI v2 supports() declined the case (msg: its reason);
                                the case is skipped, not an error */
} dsv4q_iso_status;

typedef struct dsv4q_iso_opts {
    double timeout_s;        /* per child (load + all runs); <= 0: 600 */
    int inprocess;           /* 1: no fork (trusted built-ins only) */
} dsv4q_iso_opts;

typedef struct dsv4q_backend_desc {
    char spec[512];          /* as given */
    char name[64], version[128];
    char profile[256];       /* the declaration, "source" or e.g. "qat:act_q8_0,kv_f16" */
    uint64_t caps;
    uint32_t abi_version;
    int is_path;
    int has_supports;        /* ABI v2 supports() hook present */
    int has_load_weight;     /* ABI v2 load_weight() hook present */
} dsv4q_backend_desc;

/* Load the backend in a child and report its descriptor. 0, or -1 with
 * a message (the status in *st when st != NULL). */
int dsv4q_iso_probe(const char *spec, const dsv4q_iso_opts *o, dsv4q_backend_desc *d, dsv4q_iso_status *st,
                    char *err, size_t errlen);

/* Run case c through the backend nruns (1 or 2) times. out[r][i] receives
 * output i of run r (dsv4q_case_out_bytes(c, i) bytes each, caller
 * allocated); dtype[r][i] the dtype the backend left in out[i].dtype.
 * Returns the status; msg holds a one-line explanation when it is not OK. */
dsv4q_iso_status dsv4q_iso_run(const char *spec, const dsv4q_iso_opts *o, const dsv4q_case *c, uint64_t bs,
                               int nruns, void *out[2][DSV4Q_OPS_MAX_T], int32_t dtype[2][DSV4Q_OPS_MAX_T],
                               char *msg, size_t msglen);

/* dsv4q_iso_run, and for a LINEAR case of a backend with ABI v2
 * load_weight: after init() the child asks for the engine's own encoding
 * of w, decodes it exactly (harness/backend/engine_weights.h) and hands it back:
 * *ew_stored = 1, ew [out*in] F32 (caller allocated, numel(c->in[1])
 * floats) and its name ("Q8_0") in ew_name; else *ew_stored = 0. */
dsv4q_iso_status dsv4q_iso_run_ew(const char *spec, const dsv4q_iso_opts *o, const dsv4q_case *c, uint64_t bs,
                                  int nruns, void *out[2][DSV4Q_OPS_MAX_T], int32_t dtype[2][DSV4Q_OPS_MAX_T],
                                  float *ew, int *ew_stored, char *ew_name, size_t ew_namelen, char *msg, size_t msglen);

/* A job: one function run in ONE child with the backend loaded, validated
 * and init()ed (fini() after it), e.g. a whole model composed from the
 * backend's operators (harness/qualify/qualify_model.h). It writes its results to
 * `out` (out_bytes, shared with the parent, copied to the caller's buffer
 * when the child ends normally) and keeps `detail` (shared memory) naming
 * the backend call in flight, so a crash or hang is reported as
 *   backend X crashed with signal 11 (SIGSEGV) in run() (whole model: op
 *   expert, layer 3, position 41)
 * Returns DSV4Q_BACKEND_OK, _UNSUPPORTED or _ERROR (err set). */
typedef int (*dsv4q_iso_job_fn)(const dsv4q_backend_v1 *b, void *ctx, void *user, void *out, char *detail,
                                size_t detaillen, char *err, size_t errlen);
dsv4q_iso_status dsv4q_iso_job(const char *spec, const dsv4q_iso_opts *o, const char *what, dsv4q_iso_job_fn fn,
                               void *user, void *out, size_t out_bytes, char *msg, size_t msglen);

/* "SIGSEGV", ... (NULL if unknown). */
const char *dsv4q_signal_name(int sig);
const char *dsv4q_iso_status_name(dsv4q_iso_status st);

#endif
