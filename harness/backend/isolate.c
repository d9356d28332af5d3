/*
 * isolate.c - the fork()ed backend runner (see isolate.h for the lifecycle
 * and invariants I1-I4).
 *
 * Why fork and not a thread or a signal handler: a crashing or hanging
 * backend may have corrupted its address space, holds locks, or spins; only
 * a separate process can be abandoned safely. Why fork without exec: the
 * case inputs (up to a few hundred MB of decoded expert weights) are
 * inherited copy-on-write for free; only outputs travel back, through a
 * shared mapping created before the fork.
 *
 * The parent learns the child's end from a pipe: the child holds the write
 * end, so poll() on the read end returns POLLHUP when the child exits for
 * any reason, and times out when it hangs.
 */
#include <assert.h>
#include <errno.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "harness/backend/backend.h"
#include "harness/backend/engine_weights.h"
#include "harness/backend/isolate.h"
#include "harness/ops/ops.h"
#include "base/util.h"

#define GUARD 64
#define GUARD_BYTE 0x5A
#define SENTINEL 0x7FFFA5A5u   /* a NaN as F32; an out-of-range index as I32 */
_Static_assert(((SENTINEL >> 23) & 0xFFu) == 0xFFu && (SENTINEL & 0x7FFFFFu) != 0, "I2: the sentinel is a NaN as F32");

typedef enum { ST_FORKED = 0, ST_LOAD, ST_ENTRY, ST_INIT, ST_RUN1, ST_RUN2, ST_FINI, ST_DONE, ST_SUPPORTS, ST_LOADW } stage;
static const char *const stage_name[] = {"startup", "loading", "dsv4q_backend_entry()", "init()", "run()",
                                         "run() (second run)", "fini()", "exit", "supports()", "load_weight()"};

typedef struct shared_hdr {
    volatile int stage;
    int status;                       /* dsv4q_iso_status */
    char msg[1024];
    char detail[256];                 /* job: what it is doing now (the call in flight) */
    int32_t dtype[2][DSV4Q_OPS_MAX_T];
    /* probe */
    char name[64], version[128], profile[256];
    uint64_t caps;
    uint32_t abi_version;
    int has_supports, has_load_weight;
    /* engine-stored weight of the case (ABI v2 load_weight; LINEAR w) */
    int ew_stored;
    char ew_name[64];
} shared_hdr;

const char *dsv4q_signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGPIPE: return "SIGPIPE";
    case SIGXCPU: return "SIGXCPU";
    case SIGINT: return "SIGINT";
    default: return NULL;
    }
}

const char *dsv4q_iso_status_name(dsv4q_iso_status st)
{
    static const char *const n[] = {"ok", "unsupported", "backend error", "load error", "crash", "timeout",
                                    "buffer overrun", "harness error", "init error", "declined"};
    return (unsigned)st < sizeof n / sizeof n[0] ? n[st] : "?";
}

/* ---- child side -------------------------------------------------------- */

static void mark_entry(void *h) { ((shared_hdr *)h)->stage = ST_ENTRY; }

/* The backend, loaded and validated by the registry (harness/backend/backend.h
 * dsv4q_backend_load) inside this child; NULL with h->status set. */
static const dsv4q_backend_v1 *child_load(const char *spec, shared_hdr *h)
{
    const dsv4q_backend_v1 *b;
    h->stage = ST_LOAD;
    if (dsv4q_backend_load(spec, mark_entry, h, &b, h->msg, sizeof h->msg)) {
        h->status = DSV4Q_ISO_LOAD_ERROR;
        return NULL;
    }
    return b;
}

/* A job (dsv4q_iso_job): one function run in the child with the loaded,
 * initialised backend, writing `bytes` bytes of results. */
typedef struct iso_job {
    dsv4q_iso_job_fn fn;
    void *user;
    size_t bytes;
    const char *what;
} iso_job;

static void child_main(const char *spec, const dsv4q_case *c, const iso_job *job, uint64_t bs, int nruns,
                       shared_hdr *h, unsigned char *outs, int wfd)
{
    (void)wfd;
    const dsv4q_backend_v1 *b = child_load(spec, h);
    if (h->status) return;
    char err[1024] = "";
    snprintf(h->name, sizeof h->name, "%s", b->name ? b->name : "?");
    snprintf(h->version, sizeof h->version, "%s", b->version ? b->version : "");
    snprintf(h->profile, sizeof h->profile, "%s", b->profile ? b->profile : "source");
    h->caps = b->caps;
    h->abi_version = b->abi_version;
    const dsv4q_backend_v2 *b2 = dsv4q_backend_v2_of(b);
    h->has_supports = b2 && b2->supports;
    h->has_load_weight = b2 && b2->load_weight;
    if (!c && !job) return;   /* probe */
    if (c && h->has_supports) {   /* ABI v2: the backend may decline this case */
        dsv4q_bt out[DSV4Q_OPS_MAX_T];
        dsv4q_bcall call;
        size_t at = 0;
        for (int i = 0; i < c->nout; i++) {
            out[i].data = outs + at;
            at += dsv4q_case_out_bytes(c, i) + GUARD;
        }
        dsv4q_case_call(c, out, bs, &call);
        h->stage = ST_SUPPORTS;
        char why[512] = "";
        if (!b2->supports(&call, why, sizeof why)) {
            snprintf(h->msg, sizeof h->msg, "declined by the backend: %s", why[0] ? why : "(no reason given)");
            h->status = DSV4Q_ISO_DECLINED;
            return;
        }
    }
    void *ctx = NULL;
    h->stage = ST_INIT;
    if (b->init && b->init(&ctx, err, sizeof err)) {
        snprintf(h->msg, sizeof h->msg, "backend %s: init failed: %s", spec, err[0] ? err : "(no message)");
        h->status = DSV4Q_ISO_INIT_ERROR;
        return;
    }
    const int wi = c ? dsv4q_op_weight_slot(c->op) : -1;   /* the input an engine may store (LINEAR: w) */
    if (wi >= 0 && h->has_load_weight && c->in_role[wi]) {
        /* engine-stored weight: the backend's own encoding, decoded exactly
         * into the region after the outputs (engine_weights.h) */
        h->stage = ST_LOADW;
        dsv4q_bweight enc;
        memset(&enc, 0, sizeof enc);
        err[0] = 0;
        int lw = b2->load_weight(ctx, c->in_role[wi], &c->in[wi], &enc, err, sizeof err);
        if (lw < 0) {
            snprintf(h->msg, sizeof h->msg, "backend %s: load_weight(%s) failed: %s", spec, c->in_role[wi],
                     err[0] ? err : "(no message)");
            h->status = DSV4Q_ISO_BACKEND_ERROR;
            h->stage = ST_FINI;
            if (b->fini) b->fini(ctx);
            return;
        }
        if (lw > 0) {
            size_t at = 0;
            for (int r = 0; r < nruns; r++)
                for (int i = 0; i < c->nout; i++) at += dsv4q_case_out_bytes(c, i) + GUARD;
            if (dsv4q_bweight_decode(&enc, c->in_role[wi], c->in[wi].shape[0], c->in[wi].shape[1], (float *)(void *)(outs + at),
                                     err, sizeof err)) {
                snprintf(h->msg, sizeof h->msg, "backend %s: %s", spec, err);
                h->status = DSV4Q_ISO_BACKEND_ERROR;
                h->stage = ST_FINI;
                if (b->fini) b->fini(ctx);
                return;
            }
            h->ew_stored = 1;
            dsv4q_bweight_name(&enc, h->ew_name, sizeof h->ew_name);
        }
    }
    if (job) {
        h->stage = ST_RUN1;
        err[0] = 0;
        int rc = job->fn(b, ctx, job->user, outs, h->detail, sizeof h->detail, err, sizeof err);
        if (rc == DSV4Q_BACKEND_UNSUPPORTED) {
            snprintf(h->msg, sizeof h->msg, "%s", err[0] ? err : "not supported by the backend");
            h->status = DSV4Q_ISO_UNSUPPORTED;
        } else if (rc != DSV4Q_BACKEND_OK) {
            snprintf(h->msg, sizeof h->msg, "backend %s: %s failed: %s", spec, job->what, err[0] ? err : "(no message)");
            h->status = DSV4Q_ISO_BACKEND_ERROR;
        }
        nruns = 0;
    }
    size_t at = 0;
    for (int r = 0; r < nruns; r++) {
        dsv4q_bt out[DSV4Q_OPS_MAX_T];
        dsv4q_bcall call;
        for (int i = 0; i < c->nout; i++) {
            out[i].data = outs + at;
            at += dsv4q_case_out_bytes(c, i) + GUARD;
        }
        dsv4q_case_call(c, out, bs, &call);
        h->stage = r == 0 ? ST_RUN1 : ST_RUN2;
        err[0] = 0;
        int rc = b->run(ctx, &call, err, sizeof err);
        for (int i = 0; i < c->nout; i++) h->dtype[r][i] = out[i].dtype;
        if (rc == DSV4Q_BACKEND_UNSUPPORTED) {
            snprintf(h->msg, sizeof h->msg, "%s", err[0] ? err : "not supported by the backend");
            h->status = DSV4Q_ISO_UNSUPPORTED;
            break;
        }
        if (rc != DSV4Q_BACKEND_OK) {
            snprintf(h->msg, sizeof h->msg, "backend %s: run failed (rc %d): %s", spec, rc,
                     err[0] ? err : "(no message)");
            h->status = DSV4Q_ISO_BACKEND_ERROR;
            break;
        }
    }
    h->stage = ST_FINI;
    if (b->fini) b->fini(ctx);
}

/* The harness (or a test framework such as cmocka) may catch fatal signals
 * and longjmp; in the child a crash must kill the child, so the parent can
 * see the signal. */
static void child_signals(void)
{
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGTERM, SIGINT, SIGPIPE};
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        signal(fatal[i], SIG_DFL);
        sigaddset(&set, fatal[i]);
    }
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* ---- parent side ------------------------------------------------------- */

/* Where dsv4q_iso_run_ew wants the decoded engine weight (set around one
 * isolate() call in the harness process; the child never reads it). */
static float *g_ewdst;

static size_t region_bytes(const dsv4q_case *c, const iso_job *job, int nruns)
{
    size_t n = sizeof(shared_hdr);
    if (job) return n + job->bytes + GUARD;
    if (c)
        for (int r = 0; r < nruns; r++)
            for (int i = 0; i < c->nout; i++) n += dsv4q_case_out_bytes(c, i) + GUARD;
    const int wi = c ? dsv4q_op_weight_slot(c->op) : -1;
    if (wi >= 0) n += 4 * (size_t)dsv4q_bt_numel(&c->in[wi]);   /* an engine-stored weight */
    return n;
}

/* I2: every output of every run is its sentinel, then GUARD guard bytes,
 * all inside the `room` bytes mapped for them. */
static void fill_sentinels(const dsv4q_case *c, int nruns, unsigned char *outs, size_t room)
{
    size_t at = 0;
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < c->nout; i++) {
            size_t nb = dsv4q_case_out_bytes(c, i);
            assert(at + nb + GUARD <= room);   /* I2: the guard zone lies inside the mapping */
            uint32_t s = SENTINEL;
            for (size_t k = 0; k + 4 <= nb; k += 4) memcpy(outs + at + k, &s, 4);
            memset(outs + at + nb, GUARD_BYTE, GUARD);
            at += nb + GUARD;
        }
}

/* The common fork/wait path. c == NULL: probe only. */
static dsv4q_iso_status isolate(const char *spec, const dsv4q_iso_opts *o, const dsv4q_case *c, const iso_job *job,
                                uint64_t bs, int nruns, shared_hdr *hout, void *out[2][DSV4Q_OPS_MAX_T], char *msg,
                                size_t msglen)
{
    const double timeout = o && o->timeout_s > 0 ? o->timeout_s : 600;
    const char *what = c ? dsv4q_op_get(c->op)->name : NULL;
    size_t bytes = region_bytes(c, job, nruns);
    void *reg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (reg == MAP_FAILED) {
        snprintf(msg, msglen, "cannot map %zu bytes for backend outputs: %s", bytes, strerror(errno));
        return DSV4Q_ISO_HARNESS_ERROR;
    }
    shared_hdr *h = reg;
    memset(h, 0, sizeof *h);
    unsigned char *outs = (unsigned char *)reg + sizeof(shared_hdr);
    if (c) fill_sentinels(c, nruns, outs, bytes - sizeof(shared_hdr));
    if (job) memset(outs + job->bytes, GUARD_BYTE, GUARD);

    dsv4q_iso_status st = DSV4Q_ISO_OK;
    if (o && o->inprocess) {
        child_main(spec, c, job, bs, nruns, h, outs, -1);
        st = (dsv4q_iso_status)h->status;
        if (st) snprintf(msg, msglen, "%s", h->msg);
    } else {
        int pfd[2];
        if (pipe(pfd)) {
            snprintf(msg, msglen, "pipe: %s", strerror(errno));
            munmap(reg, bytes);
            return DSV4Q_ISO_HARNESS_ERROR;
        }
        fflush(NULL);   /* no duplicated stdio buffers in the child */
        pid_t pid = fork();
        if (pid < 0) {
            snprintf(msg, msglen, "fork: %s", strerror(errno));
            close(pfd[0]);
            close(pfd[1]);
            munmap(reg, bytes);
            return DSV4Q_ISO_HARNESS_ERROR;
        }
        if (pid == 0) {
            close(pfd[0]);
            setpgid(0, 0);
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGKILL);   /* never outlive the harness */
#endif
            child_signals();
            omp_set_num_threads(1);   /* I3 */
            child_main(spec, c, job, bs, nruns, h, outs, pfd[1]);
            h->stage = ST_DONE;
            fflush(NULL);
            _exit(0);
        }
        close(pfd[1]);
        setpgid(pid, pid);   /* race-free: both sides set it */
        double t0 = dsv4q_now_s();
        int timed_out = 0;
        for (;;) {
            double left = timeout - (dsv4q_now_s() - t0);
            if (left <= 0) { timed_out = 1; break; }
            struct pollfd p = {pfd[0], POLLIN, 0};
            int n = poll(&p, 1, (int)(left * 1000) + 1);
            if (n < 0 && errno == EINTR) continue;
            if (n > 0) {
                char buf[64];
                if (read(pfd[0], buf, sizeof buf) <= 0) break;   /* EOF: the child is gone */
                continue;
            }
        }
        close(pfd[0]);
        int ws = 0;
        if (timed_out) {
            kill(-pid, SIGKILL);   /* I4 */
            kill(pid, SIGKILL);
        }
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
        const char *stg = stage_name[h->stage >= 0 && h->stage <= ST_LOADW ? h->stage : 0];
        char where[512];
        if (c) snprintf(where, sizeof where, "in %s (op %s, case %s)", stg, what, c->key);
        else if (job && h->stage == ST_RUN1)
            snprintf(where, sizeof where, "in run() (%s%s%s)", job->what, h->detail[0] ? ": " : "", h->detail);
        else snprintf(where, sizeof where, "in %s", stg);
        if (timed_out) {
            snprintf(msg, msglen, "backend %s timed out after %.3g s %s (killed)", spec, timeout, where);
            st = DSV4Q_ISO_TIMEOUT;
        } else if (WIFSIGNALED(ws)) {
            int sig = WTERMSIG(ws);
            const char *sn = dsv4q_signal_name(sig);
            snprintf(msg, msglen, "backend %s crashed with signal %d (%s) %s", spec, sig, sn ? sn : "?", where);
            st = DSV4Q_ISO_CRASH;
        } else if (h->stage != ST_DONE) {
            snprintf(msg, msglen, "backend %s exited with status %d %s", spec,
                     WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, where);
            st = DSV4Q_ISO_CRASH;
        } else {
            st = (dsv4q_iso_status)h->status;
            if (st) snprintf(msg, msglen, "%s", h->msg);
        }
    }
    if (st == DSV4Q_ISO_OK && job) {
        for (int g = 0; g < GUARD; g++)
            if (outs[job->bytes + g] != GUARD_BYTE) {   /* the job's own results overran: a harness bug */
                snprintf(msg, msglen, "%s: results overran their %zu bytes", job->what, job->bytes);
                st = DSV4Q_ISO_HARNESS_ERROR;
                break;
            }
        if (st == DSV4Q_ISO_OK) memcpy(out[0][0], outs, job->bytes);
    }
    if (st == DSV4Q_ISO_OK && c) {
        size_t at = 0;
        for (int r = 0; r < nruns && st == DSV4Q_ISO_OK; r++)
            for (int i = 0; i < c->nout; i++) {
                size_t nb = dsv4q_case_out_bytes(c, i);
                for (int g = 0; g < GUARD; g++)
                    if (outs[at + nb + g] != GUARD_BYTE) {   /* I2 */
                        snprintf(msg, msglen, "backend %s wrote past the end of output %s (%zu bytes) in op %s, case %s",
                                 spec, c->out[i].name, nb, what, c->key);
                        st = DSV4Q_ISO_OVERRUN;
                        break;
                    }
                if (st) break;
                memcpy(out[r][i], outs + at, nb);
                at += nb + GUARD;
            }
    }
    if (st == DSV4Q_ISO_OK && c && h->ew_stored && g_ewdst) {
        size_t at = 0;
        for (int r = 0; r < nruns; r++)
            for (int i = 0; i < c->nout; i++) at += dsv4q_case_out_bytes(c, i) + GUARD;
        memcpy(g_ewdst, outs + at, 4 * (size_t)dsv4q_bt_numel(&c->in[dsv4q_op_weight_slot(c->op)]));
    }
    if (hout) *hout = *h;
    munmap(reg, bytes);
    return st;
}

int dsv4q_iso_probe(const char *spec, const dsv4q_iso_opts *o, dsv4q_backend_desc *d, dsv4q_iso_status *stp,
                    char *err, size_t errlen)
{
    shared_hdr h;
    memset(d, 0, sizeof *d);
    snprintf(d->spec, sizeof d->spec, "%s", spec);
    d->is_path = dsv4q_backend_is_path(spec);
    dsv4q_iso_status st = isolate(spec, o, NULL, NULL, 0, 0, &h, NULL, err, errlen);
    if (stp) *stp = st;
    if (st) return -1;
    snprintf(d->name, sizeof d->name, "%s", h.name);
    snprintf(d->version, sizeof d->version, "%s", h.version);
    snprintf(d->profile, sizeof d->profile, "%s", h.profile);
    d->caps = h.caps;
    d->abi_version = h.abi_version;
    d->has_supports = h.has_supports;
    d->has_load_weight = h.has_load_weight;
    return 0;
}

dsv4q_iso_status dsv4q_iso_run(const char *spec, const dsv4q_iso_opts *o, const dsv4q_case *c, uint64_t bs,
                               int nruns, void *out[2][DSV4Q_OPS_MAX_T], int32_t dtype[2][DSV4Q_OPS_MAX_T],
                               char *msg, size_t msglen)
{
    shared_hdr h;
    if (nruns < 1) nruns = 1;
    if (nruns > 2) nruns = 2;
    dsv4q_iso_status st = isolate(spec, o, c, NULL, bs, nruns, &h, out, msg, msglen);
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < c->nout; i++) dtype[r][i] = h.dtype[r][i];
    return st;
}

dsv4q_iso_status dsv4q_iso_run_ew(const char *spec, const dsv4q_iso_opts *o, const dsv4q_case *c, uint64_t bs,
                                  int nruns, void *out[2][DSV4Q_OPS_MAX_T], int32_t dtype[2][DSV4Q_OPS_MAX_T],
                                  float *ew, int *ew_stored, char *ew_name, size_t ew_namelen, char *msg, size_t msglen)
{
    shared_hdr h;
    if (nruns < 1) nruns = 1;
    if (nruns > 2) nruns = 2;
    g_ewdst = ew;
    dsv4q_iso_status st = isolate(spec, o, c, NULL, bs, nruns, &h, out, msg, msglen);
    g_ewdst = NULL;
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < c->nout; i++) dtype[r][i] = h.dtype[r][i];
    *ew_stored = st == DSV4Q_ISO_OK && h.ew_stored;
    snprintf(ew_name, ew_namelen, "%s", h.ew_stored ? h.ew_name : "");
    return st;
}

dsv4q_iso_status dsv4q_iso_job(const char *spec, const dsv4q_iso_opts *o, const char *what, dsv4q_iso_job_fn fn,
                               void *user, void *out, size_t out_bytes, char *msg, size_t msglen)
{
    shared_hdr h;
    iso_job job = {fn, user, out_bytes, what ? what : "job"};
    void *outs[2][DSV4Q_OPS_MAX_T] = {{out}};
    return isolate(spec, o, NULL, &job, 0, 1, &h, outs, msg, msglen);
}
