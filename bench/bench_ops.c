/*
 * bench_ops.c - per-operator throughput of the oracle at DeepSeek V4 Flash
 * shapes, both widths, with OpenBLAS on the same shapes in the same run.
 *
 * Weights are synthesized in memory (seeded splitmix64, deterministic) in
 * their stored form through the oracle/formats.h encoders: FP8 E4M3 codes
 * with E8M0 128x128 block scales, packed FP4 E2M1 (low nibble = even k) with
 * E8M0 per-32 scales, F32, BF16 (the RMSNorm weight). The BLAS anchor gets
 * the same weight pre-dequantized to a dense fp64 (dgemv/dgemm) or fp32
 * (sgemv/sgemm) [out, in] row-major matrix; the dequantized values are exact
 * at both widths, and the run checks the oracle (exact profile) against
 * dgemv/sgemv before timing.
 *
 * Timing: clock_gettime(CLOCK_MONOTONIC); BENCH_SETTLE_MS of sleep (idle
 * OpenBLAS / libgomp workers stop spinning), one warm-up call, then repeat
 * until >= BENCH_MIN_S seconds (default 0.3), each call timed on its own.
 * Reported: median wall time per call (used for GB/s, GFLOP/s and ratios),
 * mean wall time, and median process CPU time per call (all threads;
 * with OMP_NUM_THREADS=1 it does not count time lost to other processes on
 * shared cores). The same buffers are reused across repetitions, so
 * whatever fits in the last-level cache stays there (see docs/bench.md).
 * GB/s counts the weight (or main operand) bytes in the form each
 * implementation reads them: stored codes + scales for the oracle linears,
 * 8 (4) bytes per element for d (s) BLAS. "vs BLAS" is t_blas / t_oracle
 * at the same width and token count (>= 1: the oracle is at least as
 * fast); the target is oracle f64 vs dgemv >= 1.0 for the quantized
 * (FP8/FP4) linears at 1 token.
 *
 * Threads: the OpenMP default (omp_get_max_threads()) for the oracle, and
 * OpenBLAS set to the same count with openblas_set_num_threads. Environment
 * variables (OMP_NUM_THREADS, OPENBLAS_CORETYPE, ...) are reported, never
 * changed.
 *
 * Usage: build/bench/bench_ops [filter]   (filter: substring of the op name)
 * Env:   BENCH_MIN_S=<seconds per measurement> (default 0.3),
 *        BENCH_SETTLE_MS=<sleep before each measurement> (default 200)
 *        DSV4Q_KERNEL=generic|avx2|avx512|neon (time only that linear row
 *        kernel; default: every kernel this CPU runs, side by side)
 */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>

#include "oracle/boundary.h"
#include "oracle/formats.h"
#include "oracle/ops.h"
#include "oracle/weights.h"

/* ---------------------------------------------------------------- utils */

static double g_min_s = 0.3;
static const char *g_filter = NULL;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench_ops: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* splitmix64: deterministic, seeded, platform-independent. */
typedef struct { uint64_t s; } rng;
static uint64_t rng_u64(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_unit(rng *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; } /* [0,1) */
/* Approximately N(0,1): Irwin-Hall of 4 uniforms, rescaled. */
static double rng_gauss(rng *r)
{
    double s = rng_unit(r) + rng_unit(r) + rng_unit(r) + rng_unit(r);
    return (s - 2.0) * 1.7320508075688772;
}

typedef void (*bench_fn)(void *ctx);

/* Let the other runtime's idle workers stop spinning before a measurement:
 * OpenBLAS (pthreads build) busy-waits after a call and libgomp after a
 * parallel region; on 2 cores a spinning idle worker preempts one thread
 * of the next measurement. BENCH_SETTLE_MS (default 200) of sleep is
 * inserted before every measurement, BLAS and oracle alike. */
static double g_settle_s = 0.2;
static void settle(void)
{
    if (g_settle_s <= 0) return;
    struct timespec ts = {(time_t)g_settle_s, (long)((g_settle_s - (double)(time_t)g_settle_s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One measurement: per-call wall time (CLOCK_MONOTONIC) median and mean,
 * and the median per-call process CPU time (CLOCK_PROCESS_CPUTIME_ID, all
 * threads of this process). */
typedef struct meas { double wall, mean, cpu; } meas;

/* One warm-up call, then repeat until >= g_min_s (and at least 3 calls).
 * Each call is timed on its own and the MEDIAN is reported: the 2 cores
 * may be shared with other processes, and a preempted OpenMP thread stalls
 * a whole parallel region, so the mean over-reports (it is printed too).
 * Process CPU time does not count time spent preempted: with one thread
 * (OMP_NUM_THREADS=1) it is a load-independent measure of the work. */
static meas time_it(bench_fn fn, void *ctx)
{
    static double *v = NULL, *c = NULL;
    static size_t cap = 0;
    settle();
    fn(ctx);
    size_t n = 0;
    double t0 = now_s(), total = 0, sum = 0;
    do {
        double ca = cpu_s(), a = now_s();
        fn(ctx);
        double b = now_s(), cb = cpu_s();
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            v = realloc(v, cap * sizeof *v);
            c = realloc(c, cap * sizeof *c);
            if (!v || !c) {
                fprintf(stderr, "bench_ops: out of memory\n");
                exit(1);
            }
        }
        v[n] = b - a;
        c[n] = cb - ca;
        sum += v[n++];
        total = b - t0;
    } while (total < g_min_s || n < 3);
    meas m = {median(v, n), sum / (double)n, median(c, n)};
    return m;
}

/* ----------------------------------------------------------- reporting */

static void print_header(void)
{
    printf("%-24s %-20s %3s %-7s %-11s %11s %11s %11s %9s %9s %8s\n", "op", "shape", "tok", "profile",
           "impl", "median", "mean", "cpu", "GB/s", "GFLOP/s", "vs BLAS");
    printf("%-24s %-20s %3s %-7s %-11s %11s %11s %11s %9s %9s %8s\n", "------------------------",
           "--------------------", "---", "-------", "-----------", "-----------", "-----------",
           "-----------", "---------", "---------", "--------");
}

static void fmt_time(double s, char *buf, size_t n)
{
    if (s < 1e-3) snprintf(buf, n, "%8.2f us", s * 1e6);
    else snprintf(buf, n, "%8.3f ms", s * 1e3);
}

/* GB/s, GFLOP/s and the ratio use the median wall time; the mean wall
 * time and the median process CPU time of the same calls are printed next
 * to it. ratio < 0: no BLAS column. */
static void print_row(const char *op, const char *shape, long tok, const char *prof,
                      const char *impl, meas m, double bytes, double flops, double ratio)
{
    char tb[32], mb[32], cb[32], rb[16];
    const double sec = m.wall;
    fmt_time(sec, tb, sizeof tb);
    fmt_time(m.mean, mb, sizeof mb);
    fmt_time(m.cpu, cb, sizeof cb);
    if (ratio >= 0) snprintf(rb, sizeof rb, "%8.2f", ratio);
    else snprintf(rb, sizeof rb, "%8s", "");
    printf("%-24s %-20s %3ld %-7s %-11s %11s %11s %11s %9.2f %9.2f %s\n", op, shape, tok, prof, impl, tb, mb,
           cb, bytes / sec * 1e-9, flops / sec * 1e-9, rb);
    fflush(stdout);
}

/* Summary of the target ratios, printed at the end. */
#define MAX_SUMMARY 128
static struct {
    char line[176];
} g_sum[MAX_SUMMARY];
static int g_nsum = 0;
static void summary_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void summary_add(const char *fmt, ...)
{
    if (g_nsum >= MAX_SUMMARY) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_sum[g_nsum++].line, sizeof g_sum[0].line, fmt, ap);
    va_end(ap);
}

/* 1-minute load average (other processes share the cores), -1 if unknown. */
static double loadavg1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static int want(const char *name) { return !g_filter || strstr(name, g_filter) != NULL; }

/* ----------------------------------------------------- weight synthesis */

typedef struct synth_w {
    dsv4q_weight w;
    size_t stored_bytes;   /* codes + scales as stored */
    double *wd;            /* dequantized fp64 [out, in] */
    float *wf;             /* dequantized fp32 [out, in] (exact: dyadic values) */
} synth_w;

static void synth_fp8(synth_w *S, const char *name, int64_t out, int64_t in, uint64_t seed)
{
    rng r = {seed};
    const int64_t nob = (out + 127) / 128, nib = (in + 127) / 128;
    uint8_t *codes = xmalloc((size_t)(out * in));
    uint8_t *sc = xmalloc((size_t)(nob * nib));
    for (int64_t i = 0; i < nob * nib; i++)
        sc[i] = (uint8_t)dsv4q_e8m0_encode_exp(-14 + (int)(rng_u64(&r) % 4));
    for (int64_t i = 0; i < out * in; i++) codes[i] = dsv4q_e4m3_encode(96.0 * rng_gauss(&r), 1);
    S->w = (dsv4q_weight){.name = name, .fmt = DSV4Q_WF_FP8, .out = out, .in = in, .data = codes,
                          .scale = sc, .scale_dtype = DSV4Q_DT_F8_E8M0};
    S->stored_bytes = (size_t)(out * in + nob * nib);
    S->wd = xmalloc(sizeof(double) * (size_t)(out * in));
    S->wf = xmalloc(sizeof(float) * (size_t)(out * in));
    const double *t = dsv4q_e4m3_table();
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < in; k++) {
            double v = t[codes[o * in + k]] * dsv4q_e8m0_decode(sc[(o / 128) * nib + k / 128]);
            S->wd[o * in + k] = v;
            S->wf[o * in + k] = (float)v;
        }
}

static void synth_fp4(synth_w *S, const char *name, int64_t out, int64_t in, uint64_t seed)
{
    rng r = {seed};
    const int64_t nsb = in / 32;
    uint8_t *packed = xmalloc((size_t)(out * in / 2));
    uint8_t *sc = xmalloc((size_t)(out * nsb));
    for (int64_t i = 0; i < out * nsb; i++)
        sc[i] = (uint8_t)dsv4q_e8m0_encode_exp(-9 + (int)(rng_u64(&r) % 4));
    for (int64_t i = 0; i < out * in / 2; i++) {
        uint8_t lo = dsv4q_e2m1_encode(2.0 * rng_gauss(&r)) & 0xF;
        uint8_t hi = dsv4q_e2m1_encode(2.0 * rng_gauss(&r)) & 0xF;
        packed[i] = (uint8_t)(lo | (hi << 4));
    }
    S->w = (dsv4q_weight){.name = name, .fmt = DSV4Q_WF_FP4, .out = out, .in = in, .data = packed,
                          .scale = sc, .scale_dtype = DSV4Q_DT_F8_E8M0};
    S->stored_bytes = (size_t)(out * in / 2 + out * nsb);
    S->wd = xmalloc(sizeof(double) * (size_t)(out * in));
    S->wf = xmalloc(sizeof(float) * (size_t)(out * in));
    double lut[16];
    for (int c = 0; c < 16; c++) lut[c] = dsv4q_e2m1_decode((uint8_t)c);
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < in; k++) {
            double v = lut[dsv4q_e2m1_nibble(packed + o * (in / 2), (size_t)k)] *
                       dsv4q_e8m0_decode(sc[o * nsb + k / 32]);
            S->wd[o * in + k] = v;
            S->wf[o * in + k] = (float)v;
        }
}

static void synth_f32(synth_w *S, const char *name, int64_t out, int64_t in, uint64_t seed)
{
    rng r = {seed};
    float *v = xmalloc(sizeof(float) * (size_t)(out * in));
    for (int64_t i = 0; i < out * in; i++) v[i] = (float)(0.02 * rng_gauss(&r));
    S->w = (dsv4q_weight){.name = name, .fmt = DSV4Q_WF_F32, .out = out, .in = in, .data = v};
    S->stored_bytes = sizeof(float) * (size_t)(out * in);
    S->wd = xmalloc(sizeof(double) * (size_t)(out * in));
    S->wf = xmalloc(sizeof(float) * (size_t)(out * in));
    for (int64_t i = 0; i < out * in; i++) {
        S->wd[i] = v[i];
        S->wf[i] = v[i];
    }
}

static void synth_free(synth_w *S)
{
    free((void *)S->w.data);
    free((void *)S->w.scale);
    free(S->wd);
    free(S->wf);
    memset(S, 0, sizeof *S);
}

/* Activations: the same doubles at both widths. */
static void synth_act(rng *r, long n, double scale, double *xd, float *xf)
{
    for (long i = 0; i < n; i++) {
        double v = scale * rng_gauss(r);
        xf[i] = (float)v;
        xd[i] = (double)xf[i];   /* identical inputs at both widths */
    }
}

/* ------------------------------------------------------------- linears */

typedef struct lin_ctx {
    int f64;
    uint64_t bs;
    const dsv4q_weight *W;
    const void *x;
    long s;
    void *y;
    int out_b;
} lin_ctx;

static void run_lin(void *p)
{
    lin_ctx *c = p;
    int rc = c->f64 ? dsv4q_linear_f64(c->bs, 1, c->W, c->x, c->s, c->y, c->out_b)
                    : dsv4q_linear_f32(c->bs, 1, c->W, c->x, c->s, c->y, c->out_b);
    if (rc) {
        fprintf(stderr, "bench_ops: dsv4q_linear failed\n");
        exit(1);
    }
}

typedef struct blas_ctx {
    int f64;
    int N, K, s;
    const void *A, *x;
    void *y;
} blas_ctx;

static void run_blas(void *p)
{
    blas_ctx *c = p;
    if (c->s == 1) {
        if (c->f64)
            cblas_dgemv(CblasRowMajor, CblasNoTrans, c->N, c->K, 1.0, c->A, c->K, c->x, 1, 0.0, c->y, 1);
        else
            cblas_sgemv(CblasRowMajor, CblasNoTrans, c->N, c->K, 1.0f, c->A, c->K, c->x, 1, 0.0f, c->y, 1);
    } else {
        /* Y [s, N] = X [s, K] . W^T, W [N, K] row-major */
        if (c->f64)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->s, c->N, c->K, 1.0, c->x, c->K,
                        c->A, c->K, 0.0, c->y, c->N);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->s, c->N, c->K, 1.0f, c->x, c->K,
                        c->A, c->K, 0.0f, c->y, c->N);
    }
}

/* max |a-b| / max |b| over n */
static double rel_err_d(const double *a, const double *b, long n)
{
    double e = 0, m = 0;
    for (long i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? e / m : e;
}
static double rel_err_f(const float *a, const float *b, long n)
{
    double e = 0, m = 0;
    for (long i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? e / m : e;
}

/* The linear kernels to time: every one this CPU runs, widest first, or
 * only the one DSV4Q_KERNEL names. */
static const char *g_kern[8];
static int g_nkern = 0;

static void bench_linear(const char *op, const char *fmtname, synth_w *S, int out_b, uint64_t seed,
                         uint64_t bs_exact, uint64_t bs_source)
{
    const long N = (long)S->w.out, K = (long)S->w.in, T16 = 16;
    const int quant = S->w.fmt == DSV4Q_WF_FP8 || S->w.fmt == DSV4Q_WF_FP4;
    char shape[32], opn[48];
    snprintf(shape, sizeof shape, "[%ld,%ld]", N, K);
    snprintf(opn, sizeof opn, "%s %s", op, fmtname);

    rng r = {seed};
    double *xd = xmalloc(sizeof(double) * (size_t)(T16 * K));
    float *xf = xmalloc(sizeof(float) * (size_t)(T16 * K));
    synth_act(&r, T16 * K, 1.0, xd, xf);
    double *yd = xmalloc(sizeof(double) * (size_t)(T16 * N)), *yd2 = xmalloc(sizeof(double) * (size_t)(T16 * N));
    float *yf = xmalloc(sizeof(float) * (size_t)(T16 * N)), *yf2 = xmalloc(sizeof(float) * (size_t)(T16 * N));

    /* Correctness check of the anchor: oracle (exact, no output rounding)
     * against BLAS on the dequantized matrix, 1 token and 16 tokens. */
    {
        lin_ctx lo = {1, bs_exact, &S->w, xd, T16, yd, -1};
        blas_ctx bl = {1, (int)N, (int)K, (int)T16, S->wd, xd, yd2};
        run_lin(&lo);
        run_blas(&bl);
        double ed = rel_err_d(yd, yd2, T16 * N);
        lin_ctx lf = {0, bs_exact, &S->w, xf, T16, yf, -1};
        blas_ctx bf = {0, (int)N, (int)K, (int)T16, S->wf, xf, yf2};
        run_lin(&lf);
        run_blas(&bf);
        double ef = rel_err_f(yf, yf2, T16 * N);
        printf("%-24s %-20s check: max|oracle-BLAS|/max|BLAS| f64 %.2e, f32 %.2e%s\n", opn, shape, ed,
               ef, (ed < 1e-12 && ef < 1e-4) ? "" : "  ** MISMATCH **");
        if (!(ed < 1e-12 && ef < 1e-4))
            summary_add("%s: anchor check FAILED (f64 %.2e, f32 %.2e)", opn, ed, ef);
    }

    const double wb_or = (double)S->stored_bytes;
    const double wb_d = 8.0 * (double)N * (double)K, wb_s = 4.0 * (double)N * (double)K;
    const long toks[2] = {1, T16};
    for (int ti = 0; ti < 2; ti++) {
        const long s = toks[ti];
        const double fl = 2.0 * (double)N * (double)K * (double)s;
        blas_ctx bd = {1, (int)N, (int)K, (int)s, S->wd, xd, yd2};
        blas_ctx bsg = {0, (int)N, (int)K, (int)s, S->wf, xf, yf2};
        meas t_d = time_it(run_blas, &bd);
        print_row(opn, shape, s, "-", s == 1 ? "dgemv f64" : "dgemm f64", t_d, wb_d, fl, -1);
        meas t_s = time_it(run_blas, &bsg);
        print_row(opn, shape, s, "-", s == 1 ? "sgemv f32" : "sgemm f32", t_s, wb_s, fl, -1);
        const char *pn[2] = {"exact", "source"};
        const uint64_t pb[2] = {bs_exact, bs_source};
        for (int p = 0; p < 2; p++)
            for (int ki = 0; ki < g_nkern; ki++) { /* every kernel, against the same BLAS timings */
                const char *kn = g_kern[ki];
                char i64[24], i32[24];
                dsv4q_linear_kernel_f64(kn);
                dsv4q_linear_kernel_f32(kn);
                snprintf(i64, sizeof i64, "f64 %s", kn);
                snprintf(i32, sizeof i32, "f32 %s", kn);
                lin_ctx od = {1, pb[p], &S->w, xd, s, yd, out_b};
                lin_ctx of = {0, pb[p], &S->w, xf, s, yf, out_b};
                meas t64 = time_it(run_lin, &od);
                print_row(opn, shape, s, pn[p], i64, t64, wb_or, fl, t_d.wall / t64.wall);
                meas t32 = time_it(run_lin, &of);
                print_row(opn, shape, s, pn[p], i32, t32, wb_or, fl, t_s.wall / t32.wall);
                const double r64 = t_d.wall / t64.wall, r32 = t_s.wall / t32.wall;
                summary_add("%-18s %-13s %2ld tok %-6s %-7s f64/%s %6.3f (cpu %6.3f)  f32/%s %6.3f (cpu %6.3f)%s", opn,
                            shape, s, pn[p], kn, s == 1 ? "dgemv" : "dgemm", r64, t_d.cpu / t64.cpu,
                            s == 1 ? "sgemv" : "sgemm", r32, t_s.cpu / t32.cpu,
                            (quant && s == 1) ? (r64 >= 1.5 ? "  target met" : "  BELOW TARGET") : "");
            }
        dsv4q_linear_kernel_f64(g_kern[0]);
        dsv4q_linear_kernel_f32(g_kern[0]);
    }
    free(xd); free(xf); free(yd); free(yd2); free(yf); free(yf2);
}

/* --------------------------------------------------------- other ops */

typedef struct norm_ctx {
    int f64;
    uint64_t bs;
    const void *x, *w;
    long d;
    void *y;
} norm_ctx;
static void run_norm(void *p)
{
    norm_ctx *c = p;
    if (c->f64) dsv4q_rmsnorm_f64(c->bs, c->x, 1, c->d, c->w, 1e-6, c->y);
    else dsv4q_rmsnorm_f32(c->bs, c->x, 1, c->d, c->w, 1e-6, c->y);
}

static void bench_rmsnorm(uint64_t bs)
{
    const long d = 4096;
    rng r = {101};
    double *xd = xmalloc(sizeof(double) * d), *wd = xmalloc(sizeof(double) * d), *yd = xmalloc(sizeof(double) * d);
    float *xf = xmalloc(sizeof(float) * d), *wf = xmalloc(sizeof(float) * d), *yf = xmalloc(sizeof(float) * d);
    synth_act(&r, d, 1.0, xd, xf);
    for (long i = 0; i < d; i++) {   /* BF16 norm weight, decoded */
        uint16_t c = dsv4q_bf16_encode(1.0 + 0.1 * rng_gauss(&r));
        wf[i] = dsv4q_bf16_to_f32(c);
        wd[i] = wf[i];
    }
    const double fl = 5.0 * (double)d;
    norm_ctx cd = {1, bs, xd, wd, d, yd}, cf = {0, bs, xf, wf, d, yf};
    meas t = time_it(run_norm, &cd);
    print_row("rmsnorm", "d=4096", 1, "source", "oracle f64", t, 2.0 * 8 * d, fl, -1);
    t = time_it(run_norm, &cf);
    print_row("rmsnorm", "d=4096", 1, "source", "oracle f32", t, 2.0 * 4 * d, fl, -1);
    free(xd); free(wd); free(yd); free(xf); free(wf); free(yf);
}

typedef struct hc_ctx {
    int f64;
    uint64_t bs;
    const void *X;
    int hc;
    long d;
    const dsv4q_weight *fn;
    const void *scale, *base;
    void *y, *post, *comb;
} hc_ctx;
static void run_hc(void *p)
{
    hc_ctx *c = p;
    int rc = c->f64 ? dsv4q_hc_pre_f64(c->bs, c->X, 1, c->hc, c->d, c->fn, c->scale, c->base, 1e-6,
                                       1e-6, 20, c->y, c->post, c->comb)
                    : dsv4q_hc_pre_f32(c->bs, c->X, 1, c->hc, c->d, c->fn, c->scale, c->base, 1e-6,
                                       1e-6, 20, c->y, c->post, c->comb);
    if (rc) {
        fprintf(stderr, "bench_ops: hc_pre failed\n");
        exit(1);
    }
}

static void bench_hc_pre(uint64_t bs)
{
    const int hc = 4;
    const long d = 4096, hcd = hc * d, nmix = (2 + hc) * hc;
    synth_w S;
    synth_f32(&S, "hc_attn_fn", nmix, hcd, 202);
    rng r = {203};
    double *Xd = xmalloc(sizeof(double) * hcd);
    float *Xf = xmalloc(sizeof(float) * hcd);
    synth_act(&r, hcd, 1.0, Xd, Xf);
    double scd[3], based[24];
    float scf[3], basef[24];
    for (int i = 0; i < 3; i++) { scf[i] = (float)(0.5 + rng_unit(&r)); scd[i] = scf[i]; }
    for (int i = 0; i < nmix; i++) { basef[i] = (float)(0.1 * rng_gauss(&r)); based[i] = basef[i]; }
    double yd[4096], postd[4], combd[16];
    float yf[4096], postf[4], combf[16];
    /* mixes linear + sum of squares + sinkhorn (~20 iters) + weighted reduce */
    const double fl = 2.0 * nmix * hcd + 2.0 * hcd + 2.0 * hc * d + 20 * 4.0 * hc * hc;
    hc_ctx cd = {1, bs, Xd, hc, d, &S.w, scd, based, yd, postd, combd};
    hc_ctx cf = {0, bs, Xf, hc, d, &S.w, scf, basef, yf, postf, combf};
    const char *shape = "hc4 d4096 [24,16384]";
    meas t = time_it(run_hc, &cd);
    print_row("hc_pre (fn F32)", shape, 1, "source", "oracle f64", t, (double)S.stored_bytes + 8.0 * hcd, fl, -1);
    t = time_it(run_hc, &cf);
    print_row("hc_pre (fn F32)", shape, 1, "source", "oracle f32", t, (double)S.stored_bytes + 4.0 * hcd, fl, -1);
    /* anchor: the mixes GEMV alone, on the same fn matrix */
    double md[24];
    float mf[24];
    blas_ctx bd = {1, (int)nmix, (int)hcd, 1, S.wd, Xd, md}, bf = {0, (int)nmix, (int)hcd, 1, S.wf, Xf, mf};
    const double flm = 2.0 * nmix * hcd;
    t = time_it(run_blas, &bd);
    print_row("hc_pre: fn gemv only", "[24,16384]", 1, "-", "dgemv f64", t, 8.0 * nmix * hcd, flm, -1);
    t = time_it(run_blas, &bf);
    print_row("hc_pre: fn gemv only", "[24,16384]", 1, "-", "sgemv f32", t, 4.0 * nmix * hcd, flm, -1);
    free(Xd); free(Xf);
    synth_free(&S);
}

typedef struct attn_ctx {
    int f64;
    uint64_t bs;
    const void *q, *kv, *sink;
    int H, D;
    long N;
    const int32_t *idx;
    long ncols;
    double scale;
    void *o;
} attn_ctx;
static void run_attn(void *p)
{
    attn_ctx *c = p;
    int rc = c->f64 ? dsv4q_sparse_attn_f64(c->bs, c->q, 1, c->H, c->D, c->kv, c->N, c->idx, c->ncols,
                                            c->sink, c->scale, c->o)
                    : dsv4q_sparse_attn_f32(c->bs, c->q, 1, c->H, c->D, c->kv, c->N, c->idx, c->ncols,
                                            c->sink, (float)c->scale, c->o);
    if (rc) {
        fprintf(stderr, "bench_ops: sparse_attn failed\n");
        exit(1);
    }
}

static void bench_attn(uint64_t bs)
{
    const int H = 64, D = 512;
    const long win = 128, cmp = 512, N = win + cmp, ncols = N;
    rng r = {301};
    double *qd = xmalloc(sizeof(double) * H * D), *kvd = xmalloc(sizeof(double) * N * D);
    float *qf = xmalloc(sizeof(float) * H * D), *kvf = xmalloc(sizeof(float) * N * D);
    double *od = xmalloc(sizeof(double) * H * D), sinkd[64];
    float *of = xmalloc(sizeof(float) * H * D), sinkf[64];
    synth_act(&r, (long)H * D, 1.0, qd, qf);
    synth_act(&r, N * D, 1.0, kvd, kvf);
    synth_act(&r, H, 1.0, sinkd, sinkf);
    /* 128 window rows then 512 compressed rows, each visible once */
    int32_t *idx = xmalloc(sizeof(int32_t) * ncols);
    for (long j = 0; j < ncols; j++) idx[j] = (int32_t)j;
    const double scale = 1.0 / sqrt((double)D);
    const double fl = 4.0 * H * ncols * D;   /* q.k and p*v */
    attn_ctx cd = {1, bs, qd, kvd, sinkd, H, D, N, idx, ncols, scale, od};
    attn_ctx cf = {0, bs, qf, kvf, sinkf, H, D, N, idx, ncols, scale, of};
    const char *shape = "64x512 640keys";
    meas t = time_it(run_attn, &cd);
    print_row("sparse_attn (128w+512c)", shape, 1, "source", "oracle f64", t, 8.0 * N * D, fl, -1);
    t = time_it(run_attn, &cf);
    print_row("sparse_attn (128w+512c)", shape, 1, "source", "oracle f32", t, 4.0 * N * D, fl, -1);
    free(qd); free(kvd); free(qf); free(kvf); free(od); free(of); free(idx);
}

typedef struct idx_ctx {
    int f64;
    uint64_t bs;
    const void *q, *w, *K;
    int Hi, Di;
    long T;
    void *score;
} idx_ctx;
static void run_idx(void *p)
{
    idx_ctx *c = p;
    /* decode step: start_pos > 0, so nothing is masked */
    if (c->f64) dsv4q_indexer_scores_f64(c->bs, c->q, c->w, 1, c->Hi, c->Di, c->K, c->T, 4 * c->T, 4, c->score);
    else dsv4q_indexer_scores_f32(c->bs, c->q, c->w, 1, c->Hi, c->Di, c->K, c->T, 4 * c->T, 4, c->score);
}

static void bench_indexer(uint64_t bs)
{
    const int Hi = 64, Di = 128;
    const long T = 4096;
    rng r = {401};
    double *qd = xmalloc(sizeof(double) * Hi * Di), *Kd = xmalloc(sizeof(double) * T * Di);
    float *qf = xmalloc(sizeof(float) * Hi * Di), *Kf = xmalloc(sizeof(float) * T * Di);
    double wd[64], *sd = xmalloc(sizeof(double) * T);
    float wf[64], *sf = xmalloc(sizeof(float) * T);
    synth_act(&r, (long)Hi * Di, 1.0, qd, qf);
    synth_act(&r, T * Di, 1.0, Kd, Kf);
    synth_act(&r, Hi, 1.0 / sqrt((double)Hi * Di), wd, wf);
    const double fl = 2.0 * Hi * Di * T + 3.0 * Hi * T;
    idx_ctx cd = {1, bs, qd, wd, Kd, Hi, Di, T, sd}, cf = {0, bs, qf, wf, Kf, Hi, Di, T, sf};
    const char *shape = "64x128 T=4096";
    meas t = time_it(run_idx, &cd);
    print_row("indexer_scores", shape, 1, "source", "oracle f64", t, 8.0 * T * Di, fl, -1);
    t = time_it(run_idx, &cf);
    print_row("indexer_scores", shape, 1, "source", "oracle f32", t, 4.0 * T * Di, fl, -1);
    free(qd); free(Kd); free(qf); free(Kf); free(sd); free(sf);
}

typedef struct had_ctx {
    int f64;
    uint64_t bs;
    void *x;
    long rows, n;
} had_ctx;
static void run_had(void *p)
{
    had_ctx *c = p;
    /* in place; the normalized transform is an involution, values stay bounded */
    if (c->f64) dsv4q_hadamard_f64(c->bs, c->x, c->rows, c->n);
    else dsv4q_hadamard_f32(c->bs, c->x, c->rows, c->n);
}

static void bench_hadamard(uint64_t bs)
{
    const long rows = 64, n = 128;
    rng r = {501};
    double *xd = xmalloc(sizeof(double) * rows * n);
    float *xf = xmalloc(sizeof(float) * rows * n);
    synth_act(&r, rows * n, 1.0, xd, xf);
    const double fl = (double)rows * n * (7 + 1);   /* log2(128) butterfly stages + scale */
    had_ctx cd = {1, bs, xd, rows, n}, cf = {0, bs, xf, rows, n};
    meas t = time_it(run_had, &cd);
    print_row("hadamard", "128 x 64 rows", 1, "source", "oracle f64", t, 8.0 * rows * n, fl, -1);
    t = time_it(run_had, &cf);
    print_row("hadamard", "128 x 64 rows", 1, "source", "oracle f32", t, 4.0 * rows * n, fl, -1);
    free(xd); free(xf);
}

typedef struct aq_ctx {
    int f64;
    const void *x;
    long n;
    void *q, *s;
} aq_ctx;
static void run_aq(void *p)
{
    aq_ctx *c = p;
    /* the GEMM-input form: codes + per-128 ue8m0 scales, input untouched */
    if (c->f64) dsv4q_act_quant_codes_f64(c->x, c->n, 128, 1, c->q, c->s);
    else dsv4q_act_quant_codes_f32(c->x, c->n, 128, 1, c->q, c->s);
}

static void bench_act_quant(void)
{
    const long n = 4096;
    rng r = {601};
    double *xd = xmalloc(sizeof(double) * n), *qd = xmalloc(sizeof(double) * n), sd[32];
    float *xf = xmalloc(sizeof(float) * n), *qf = xmalloc(sizeof(float) * n), sf[32];
    synth_act(&r, n, 3.0, xd, xf);
    const double fl = 3.0 * n;   /* amax, divide, clamp (+ encode/decode) */
    aq_ctx cd = {1, xd, n, qd, sd}, cf = {0, xf, n, qf, sf};
    meas t = time_it(run_aq, &cd);
    print_row("act_quant (codes, b128)", "4096", 1, "source", "oracle f64", t, 8.0 * n, fl, -1);
    t = time_it(run_aq, &cf);
    print_row("act_quant (codes, b128)", "4096", 1, "source", "oracle f32", t, 4.0 * n, fl, -1);
    free(xd); free(qd); free(xf); free(qf);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    if (argc > 1) g_filter = argv[1];
    const char *ms = getenv("BENCH_MIN_S");
    if (ms && atof(ms) > 0) g_min_s = atof(ms);
    const char *st = getenv("BENCH_SETTLE_MS");
    if (st && atof(st) >= 0) g_settle_s = atof(st) * 1e-3;

    uint64_t bs_source = 0, bs_exact = 0;
    if (dsv4q_profile_set("source", &bs_source) || dsv4q_profile_set("exact", &bs_exact)) {
        fprintf(stderr, "bench_ops: unknown profile\n");
        return 1;
    }

    const char *lk = getenv("DSV4Q_KERNEL");
    if (lk && *lk) {
        if (!dsv4q_linear_kernel_f64(lk) || !dsv4q_linear_kernel_f32(lk)) {
            fprintf(stderr, "bench_ops: DSV4Q_KERNEL=%s is not a linear kernel this CPU runs\n", lk);
            return 1;
        }
        g_kern[g_nkern++] = dsv4q_linear_kernel_f64(NULL);
    } else {
        for (int i = 0; dsv4q_linear_kernel_at_f64(i) && g_nkern < 8; i++)
            g_kern[g_nkern++] = dsv4q_linear_kernel_at_f64(i);
    }

    const int nt = omp_get_max_threads();
    openblas_set_num_threads(nt);
    const char *ev[] = {"OMP_NUM_THREADS",   "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
                        "GOMP_CPU_AFFINITY", "OMP_PROC_BIND",        "DSV4Q_KERNEL"};
    printf("bench_ops: DeepSeek V4 Flash shapes, oracle f64/f32 vs OpenBLAS, same run\n");
    printf("threads: oracle OpenMP %d (omp_get_max_threads), OpenBLAS %d (openblas_set_num_threads)\n", nt,
           openblas_get_num_threads());
    printf("openblas: core %s; config %s\n", openblas_get_corename(), openblas_get_config());
    printf("oracle linear kernels timed:");
    for (int i = 0; i < g_nkern; i++) printf(" %s%s", g_kern[i], i ? "" : " (default)");
    printf("%s\n", lk && *lk ? " (DSV4Q_KERNEL)" : " (every one this CPU runs; DSV4Q_KERNEL=name for one)");
    printf("env:");
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        const char *v = getenv(ev[i]);
        printf(" %s=%s", ev[i], v ? v : "(unset)");
    }
    printf("\ntiming: CLOCK_MONOTONIC, %.0f ms settle + 1 warm-up, repeat to >= %.2f s; median wall per call (mean shown),\n"
           "        cpu = median process CPU time per call (all threads; load-independent with OMP_NUM_THREADS=1);\n"
           "        operands stay cache-resident across repeats\n",
           g_settle_s * 1e3, g_min_s);
    printf("GB/s: weight bytes as read (oracle: stored codes+scales; dgemv 8 B, sgemv 4 B per element); "
           "vs BLAS = t_BLAS / t_oracle, median wall (>= 1: oracle faster)\n\n");
    printf("load average (1 min) at start: %.2f\n\n", loadavg1());
    print_header();
    const double t_start = now_s();

    struct {
        const char *op, *fmt;
        int kind;   /* 0 FP8, 1 FP4, 2 F32 */
        int64_t out, in;
        int out_b;
        uint64_t seed;
    } lin[] = {
        {"wq_b", "FP8", 0, 32768, 1024, DSV4Q_B_LINEAR_BF16, 11},
        {"wo_b", "FP8", 0, 4096, 8192, DSV4Q_B_LINEAR_BF16, 12},
        {"expert w1", "FP4", 1, 2048, 4096, DSV4Q_B_LINEAR_BF16, 13},
        {"expert w2", "FP4", 1, 4096, 2048, DSV4Q_B_LINEAR_BF16, 14},
        {"compressor wkv", "F32", 2, 1024, 4096, -1, 15},
    };
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        if (!want(lin[i].op)) continue;
        synth_w S;
        if (lin[i].kind == 0) synth_fp8(&S, lin[i].op, lin[i].out, lin[i].in, lin[i].seed);
        else if (lin[i].kind == 1) synth_fp4(&S, lin[i].op, lin[i].out, lin[i].in, lin[i].seed);
        else synth_f32(&S, lin[i].op, lin[i].out, lin[i].in, lin[i].seed);
        bench_linear(lin[i].op, lin[i].fmt, &S, lin[i].out_b, lin[i].seed * 1000 + 1, bs_exact, bs_source);
        synth_free(&S);
    }
    if (want("rmsnorm")) bench_rmsnorm(bs_source);
    if (want("hc_pre")) bench_hc_pre(bs_source);
    if (want("sparse_attn")) bench_attn(bs_source);
    if (want("indexer")) bench_indexer(bs_source);
    if (want("hadamard")) bench_hadamard(bs_source);
    if (want("act_quant")) bench_act_quant();

    if (g_nsum) {
        printf("\nratios t_BLAS / t_oracle, median wall (cpu: median process CPU time)\n"
               "target: FP8/FP4 linears, 1 token, oracle f64 / dgemv >= 1.5 (issue 26)\n");
        for (int i = 0; i < g_nsum; i++) printf("  %s\n", g_sum[i].line);
    }
    printf("\ntotal bench time %.1f s; load average (1 min) at end: %.2f\n", now_s() - t_start, loadavg1());
    return 0;
}
