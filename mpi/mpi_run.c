/*
 * mpi_run.c - `mpirun -np N dsv4q-mpi run ...`: `dsv4q run` with the
 * model's layers split into contiguous ranges, one per rank, pipelined
 * (docs/mpi.md). Its own binary, built by `make mpi` with mpicc; the
 * library and `dsv4q` know nothing of MPI.
 *
 * Every rank parses the same argv (the `run` rows of cli/cmdtab.c, plus
 * --ranks-layers, which only this binary takes), opens the checkpoint and
 * the tokens, and runs its range (dsv4q_run_set_layers). Each call (a
 * prefill chunk of --chunk tokens, then each teacher-forced decode step)
 * flows rank 0 -> 1 -> ... -> N-1: rank k receives the hidden streams Xs
 * [s, hc_mult, dim] of the call from rank k-1 in the run's width (binary64
 * or binary32: never narrower, so the boundary rounds nothing), runs its
 * blocks and sends Xs on (non-blocking, two buffers), so rank k works on
 * chunk c while rank k+1 works on chunk c-1. The last rank sends the
 * logits of the prefill's last chunk and of every decode step to rank 0,
 * which writes the same file `dsv4q run` writes and prints its line. The
 * result is bit-identical to one process (oracle/model.c M4 and M5).
 *
 * Faults: a boundary message whose byte count is not the call's s x hc x
 * dim x width/8, or a rank whose call fails, prints one line naming the
 * rank and the cause and stops every rank (MPI_Abort, exit 2).
 */
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "base/util.h"
#include "cli/cmdtab.h"
#include "cli/common.h"
#include "cli/taps.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "mpi/layout.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

enum { TAG_XS = 1, TAG_LOGITS = 2 };

static int g_rank;

/* One line naming the rank and the cause, then every rank stops. */
static void die(const char *why)
{
    fprintf(stderr, "dsv4q-mpi: rank %d: %s\n", g_rank, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* The same tensors and metadata as cli/cmd_run.c, so the files compare
 * byte for byte. */
static int add(dsv4q_st_writer *w, const char *name, int width, int ndim, const int64_t *shape, const double *v, long n,
               char *err, size_t errlen)
{
    if (width == 64)
        return dsv4q_st_writer_add(w, name, DSV4Q_DT_F64, ndim, shape, v, sizeof(double) * (size_t)n, err, errlen);
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!f) return dsv4q_errf(err, errlen, "out of memory");
    for (long i = 0; i < n; i++) f[i] = (float)v[i];
    int rc = dsv4q_st_writer_add(w, name, DSV4Q_DT_F32, ndim, shape, f, sizeof(float) * (size_t)n, err, errlen);
    free(f);
    return rc;
}

static int write_out(const dsv4q_cli_opts *o, const char *bnames, const dsv4q_tokens *t, long V, long M,
                     const double *lp, const double *ld, char *err, size_t errlen)
{
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    if (!w) return dsv4q_errf(err, errlen, "out of memory");
    int64_t s1[1] = {V}, s2[2] = {M, V};
    if (add(w, "logits_prefill", o->width, 1, s1, lp, V, err, errlen) ||
        add(w, "logits_decode", o->width, 2, s2, ld, M * V, err, errlen)) {
        dsv4q_st_writer_free(w);
        return -1;
    }
    dsv4q_st_writer_meta(w, "producer", "dsv4q run");
    dsv4q_st_writer_meta(w, "width", o->width == 64 ? "f64" : "f32");
    dsv4q_st_writer_meta(w, "profile", o->profile);
    dsv4q_st_writer_meta(w, "boundaries", bnames);
    dsv4q_st_writer_meta(w, "tokens_sha256", t->pin);
    return dsv4q_st_writer_write(w, o->out, err, errlen); /* frees w */
}

/* Take "--ranks-layers SPEC" (this binary's one option of its own) out of
 * argv; *spec = SPEC or NULL. -1 when it has no value. */
static int take_ranks_layers(int *argc, char **argv, const char **spec)
{
    static const char name[] = "--ranks-layers";
    *spec = NULL;
    for (int i = 0; i < *argc; i++) {
        if (strcmp(argv[i], name)) continue;
        if (i + 1 >= *argc) return -1;
        *spec = argv[i + 1];
        memmove(argv + i, argv + i + 2, sizeof(char *) * (size_t)(*argc - i - 2));
        *argc -= 2;
        return 0;
    }
    return 0;
}

/* CPU seconds of this process (all its threads). */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Wait for a request without spinning: a rank waits for a whole block of
 * another rank (100s of ms), and Open MPI's busy polling would take a core
 * from the rank it waits for when ranks share cores. 0.2 ms naps. */
static void wait_req(MPI_Request *q)
{
    int done = 0;
    const struct timespec nap = {0, 200000};
    while (MPI_Test(q, &done, MPI_STATUS_IGNORE), !done) nanosleep(&nap, NULL);
}

/* Receive call c's Xs from rank src into buf, checking its byte count. */
static void recv_xs(void *buf, long bytes, int src, long c, long s, int width)
{
    MPI_Status st;
    int got;
    char why[256];
    int here = 0;
    const struct timespec nap = {0, 200000};
    while (MPI_Iprobe(src, TAG_XS, MPI_COMM_WORLD, &here, &st), !here) nanosleep(&nap, NULL);
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != bytes) {
        snprintf(why, sizeof why,
                 "the boundary message of call %ld from rank %d has %d bytes, expected %ld (%ld tokens x hc x dim "
                 "in f%d): the ranks disagree on the width, the tokens or the checkpoint",
                 c, src, got, bytes, s, width);
        die(why);
    }
    MPI_Recv(buf, (int)bytes, MPI_BYTE, src, TAG_XS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    int nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double base = (double)ru.ru_maxrss * 1024; /* the program and MPI, before any model */
    const int r0 = g_rank == 0, rl = g_rank == nranks - 1;
    if (argc < 2 || strcmp(argv[1], "run")) {
        if (r0)
            fprintf(stderr, "usage: mpirun -np N dsv4q-mpi run [--ranks-layers A-B,C-D,...] OPTIONS OF `dsv4q run`\n"
                            "  (docs/mpi.md; `dsv4q help run` lists the options)\n");
        MPI_Finalize();
        return 2;
    }
    int ac = argc - 1;
    char **av = argv + 1;
    const char *spec;
    if (take_ranks_layers(&ac, av, &spec)) {
        if (r0) fprintf(stderr, "dsv4q-mpi run: --ranks-layers needs a value (A-B,C-D,...)\n");
        MPI_Finalize();
        return 2;
    }
    /* every rank parses the same argv; rank 0 alone says what is wrong */
    dsv4q_cli_opts o;
    int saved[2] = {-1, -1}; /* stdout (help), stderr (errors) */
    if (!r0) {
        fflush(stdout);
        fflush(stderr);
        const int null = open("/dev/null", O_WRONLY);
        for (int i = 0; i < 2 && null >= 0; i++) {
            saved[i] = dup(1 + i);
            dup2(null, 1 + i);
        }
        if (null >= 0) close(null);
    }
    int prc = dsv4q_cli_parse(ac, av, &o, sizeof o);
    if (prc == 0 && r0) /* --help: the one option of this binary's own */
        printf("  and, dsv4q-mpi only:\n    --ranks-layers A-B,C-D,...     the layers of each rank, in rank order "
               "[default: ranges of about equal weight bytes] (docs/mpi.md)\n");
    char err[1024], dir[4096], bnames[1024];
    uint64_t bs = 0;
    dsv4q_model *m = NULL;
    dsv4q_tokens t;
    memset(&t, 0, sizeof t);
    if (prc < 0 && dsv4q_cli_bset(&o, &bs, err, sizeof err)) {
        if (r0) fprintf(stderr, "dsv4q-mpi run: %s\n", err);
        prc = 2;
    }
    if (prc < 0 && o.taps) {
        if (r0)
            fprintf(stderr, "dsv4q-mpi run: --taps is not built for MPI runs yet (issue 27): run `dsv4q run --taps`\n");
        prc = 2;
    }
    fflush(stdout); /* the parse is done: what a rank meets from here on is its own to report */
    fflush(stderr);
    for (int i = 0; i < 2; i++)
        if (saved[i] >= 0) {
            dup2(saved[i], 1 + i);
            close(saved[i]);
        }
    /* the checkpoint and the tokens may fail on one host only: every rank
     * learns whether all started, and all stop together if one did not */
    int started = prc < 0 && !dsv4q_cli_start("run", &o, dir, sizeof dir, &m, &t), all_started = 0;
    if (prc < 0 && !started) fprintf(stderr, "dsv4q-mpi: rank %d: could not start (the line above says why)\n", g_rank);
    MPI_Allreduce(&started, &all_started, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_started) {
        if (started) {
            dsv4q_tokens_free(&t);
            dsv4q_model_close(m);
        }
        MPI_Finalize();
        return prc >= 0 ? prc : 2;
    }
    dsv4q_cli_threads(&o);
    const dsv4q_config *g = &m->cfg;
    const int n = g->n_layers;
    int *first = malloc(sizeof(int) * (size_t)nranks), *last = malloc(sizeof(int) * (size_t)nranks);
    double *lb = malloc(sizeof(double) * (size_t)n);
    if (!first || !last || !lb) die("out of memory");
    for (int li = 0; li < n; li++) lb[li] = dsv4q_mpi_layer_bytes(m, li);
    int lrc = spec ? dsv4q_mpi_parse_ranges(spec, n, nranks, first, last, err, sizeof err)
                   : dsv4q_mpi_split(lb, n, nranks, first, last, err, sizeof err);
    if (lrc) {
        if (r0) fprintf(stderr, "dsv4q-mpi run: %s\n", err);
        MPI_Finalize();
        return 2;
    }
    const long V = g->vocab_size, M = t.nteacher, P = t.nprompt;
    /* the pipeline needs chunks: by default one per rank (and no larger
     * than what fits in memory, as `dsv4q run` chooses) */
    long chunk = o.chunk < P ? o.chunk : P; /* a --chunk past the prompt is the one call */
    if (!chunk) {
        chunk = dsv4q_taps_chunk(m, o.width, P, M, 0);
        const long even = (P + nranks - 1) / nranks;
        if (even < chunk) chunk = even;
    }
    const long nchunks = (P + chunk - 1) / chunk;
    const long xs_tok = (long)g->hc_mult * g->dim * (o.width / 8); /* bytes of one token's Xs */
    if (chunk * xs_tok > INT_MAX) {
        snprintf(err, sizeof err,
                 "a chunk of %ld tokens is %.2f GB of hidden streams, more than one MPI message "
                 "carries (2 GB): use --chunk %ld or less",
                 chunk, chunk * (double)xs_tok / 1e9, INT_MAX / xs_tok);
        if (r0) fprintf(stderr, "dsv4q-mpi run: %s\n", err);
        MPI_Finalize();
        return 2;
    }
    dsv4q_boundary_format(bs & dsv4q_boundary_arch_mask(g->arch), bnames, sizeof bnames);
    if (r0) {
        fprintf(stderr, "dsv4q run: %s, width f%d, profile %s (%s), prompt %ld, decode %ld\n", dir, o.width, o.profile,
                bnames, P, M);
        fprintf(stderr, "dsv4q-mpi: %d ranks, prefill in %ld calls of up to %ld tokens; layers:", nranks, nchunks,
                chunk);
        for (int k = 0; k < nranks; k++) {
            double b = 0;
            for (int li = first[k]; li <= last[k]; li++) b += lb[li];
            fprintf(stderr, "%s rank %d %d-%d (%.1f MB)", k ? "," : "", k, first[k], last[k], b / 1e6);
        }
        fprintf(stderr, "\n");
    }
    /* this rank's peak: the process as started, the checkpoint pages it
     * touches (dsv4q_mpi_resident_bytes), its caches and a call's working set */
    const double est = base + dsv4q_mpi_resident_bytes(m, first[g_rank], last[g_rank]) +
                       dsv4q_run_estimate_range_bytes(m, o.width, P + M, P, chunk, first[g_rank], last[g_rank]);
    dsv4q_run *r = NULL;
    if (dsv4q_run_open(&r, m, o.width, bs, P + M, NULL, NULL, err, sizeof err) ||
        dsv4q_run_set_layers(r, first[g_rank], last[g_rank], err, sizeof err) ||
        (nchunks > 1 && dsv4q_run_set_prefill(r, P, err, sizeof err)))
        die(err);
    /* two Xs buffers: one being sent on while the next call runs */
    void *xs[2] = {malloc((size_t)(chunk * xs_tok)), malloc((size_t)(chunk * xs_tok))};
    MPI_Request sreq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    double *lg = malloc(sizeof(double) * (size_t)V);
    /* rank 0 keeps the logits of the prefill [V] and the decode steps [M, V] */
    double *lall = (r0 || rl) ? malloc(sizeof(double) * (size_t)((M + 1) * V)) : NULL;
    MPI_Request *lreq = calloc((size_t)(M + 1), sizeof *lreq);
    if (!xs[0] || !xs[1] || !lg || ((r0 || rl) && !lall) || !lreq) die("out of memory");
    for (long i = 0; i <= M; i++) lreq[i] = MPI_REQUEST_NULL;
    if (r0 && !rl) /* posted first: the last rank never waits on rank 0 */
        for (long i = 0; i <= M; i++)
            MPI_Irecv(lall + i * V, (int)V, MPI_DOUBLE, nranks - 1, TAG_LOGITS, MPI_COMM_WORLD, &lreq[i]);
    const long ncalls = nchunks + M;
    const double t0 = MPI_Wtime();
    double busy = 0, cpu = 0; /* seconds in this rank's own blocks: wall, CPU */
    for (long c = 0; c < ncalls; c++) {
        const long pos = c < nchunks ? c * chunk : P + (c - nchunks);
        const long s = c < nchunks ? (P - pos < chunk ? P - pos : chunk) : 1;
        const int32_t *ids = c < nchunks ? t.prompt + pos : &t.teacher[c - nchunks];
        void *b = xs[c & 1];
        wait_req(&sreq[c & 1]); /* this buffer's previous send is done */
        if (!r0) recv_xs(b, s * xs_tok, g_rank - 1, c, s, o.width);
        const double tb = MPI_Wtime(), cb = cpu_s();
        if (dsv4q_run_feed_xs(r, ids, s, b, lg, err, sizeof err)) die(err);
        busy += MPI_Wtime() - tb;
        cpu += cpu_s() - cb;
        if (!rl) MPI_Isend(b, (int)(s * xs_tok), MPI_BYTE, g_rank + 1, TAG_XS, MPI_COMM_WORLD, &sreq[c & 1]);
        const long li = c < nchunks - 1 ? -1 : c - (nchunks - 1); /* which logits row, -1: none */
        if (rl && li >= 0) {
            memcpy(lall + li * V, lg, sizeof(double) * (size_t)V);
            if (!r0) MPI_Isend(lall + li * V, (int)V, MPI_DOUBLE, 0, TAG_LOGITS, MPI_COMM_WORLD, &lreq[li]);
        }
    }
    wait_req(&sreq[0]);
    wait_req(&sreq[1]);
    for (long i = 0; i <= M; i++) wait_req(&lreq[i]);
    const double wall = MPI_Wtime() - t0;
    /* peak RSS of every rank against its estimate, on rank 0 */
    getrusage(RUSAGE_SELF, &ru);
    double mine[5] = {(double)ru.ru_maxrss * 1024, est, busy, wall, cpu};
    double *all = r0 ? malloc(sizeof(double) * 5 * (size_t)nranks) : NULL;
    if (r0 && !all) die("out of memory");
    MPI_Gather(mine, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (r0 && !o.quiet) {
        fprintf(stderr, "dsv4q-mpi: peak RSS (estimate):");
        for (int k = 0; k < nranks; k++)
            fprintf(stderr, "%s rank %d %.1f MB (%.1f MB)", k ? "," : "", k, all[5 * k] / 1e6, all[5 * k + 1] / 1e6);
        fprintf(stderr, "\ndsv4q-mpi: calls %.2f s wall; in own blocks (wall, CPU):", wall);
        for (int k = 0; k < nranks; k++)
            fprintf(stderr, "%s rank %d %.2f s, %.2f s", k ? "," : "", k, all[5 * k + 2], all[5 * k + 4]);
        fprintf(stderr, "\n");
    }
    free(all);
    int rc = 0;
    if (r0) {
        if (write_out(&o, bnames, &t, V, M, lall, lall + V, err, sizeof err)) die(err);
        printf("wrote %s (logits_prefill [%ld], logits_decode [%ld, %ld])\n", o.out, V, M, V);
        long nonfin = 0;
        for (long i = 0; i < (M + 1) * V; i++) nonfin += !isfinite(lall[i]);
        if (nonfin)
            fprintf(stderr,
                    "dsv4q run: warning: %ld of %ld logits are not finite (a weight or scale overflows the "
                    "width; `run --taps` shows the first stage that does)\n",
                    nonfin, (M + 1) * V);
    }
    dsv4q_run_close(r);
    free(xs[0]);
    free(xs[1]);
    free(lg);
    free(lall);
    free(lreq);
    free(first);
    free(last);
    free(lb);
    dsv4q_tokens_free(&t);
    dsv4q_model_close(m);
    MPI_Finalize();
    return rc;
}
