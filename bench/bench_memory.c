/*
 * bench_memory.c - the whole-model run's memory estimate against the
 * measured peak: dsv4q_run_estimate_bytes (oracle/run.c) beside the peak
 * RSS of the same run, minus the RSS of the loaded checkpoint.
 *
 * Usage: build/bench/bench_memory CONFIG WIDTH PROMPT DECODE [MAX_POS [CHUNK]]
 * (CHUNK: the prompt fed in chunks of that many tokens, dsv4q_run_set_prefill)
 *   CONFIG   a built-in config (tiny, tiny-v41, flash-slice, ...),
 *            synthesized into a temporary directory, or a checkpoint DIR
 *   WIDTH    32 or 64
 *   PROMPT   prefill tokens, DECODE teacher-forced decode steps after it
 *   MAX_POS  positions the run is opened for (default PROMPT + DECODE)
 * One run per process, because the peak (VmHWM) only grows: the peak is
 * reset after the load (/proc/self/clear_refs "5"), so it is the run's own,
 * less the mapped weight pages the run touched (RssFile grows by them).
 * Prints one line: config, width, positions, estimate MB, measured MB,
 * estimate / measured. docs/model.md has the table.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

/* VmRSS or VmHWM of this process in bytes, -1 when unknown. */
static double status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            kb = atof(line + n + 1);
            break;
        }
    fclose(f);
    return kb >= 0 ? kb * 1024 : -1;
}

static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    const int rc = fputs("5", f) < 0;
    return fclose(f) || rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: bench_memory CONFIG|DIR 32|64 PROMPT DECODE [MAX_POS [CHUNK]]\n");
        return 2;
    }
    const int width = atoi(argv[2]);
    const long prompt = atol(argv[3]), decode = atol(argv[4]);
    const long max_pos = argc > 5 ? atol(argv[5]) : prompt + decode;
    const long chunk = argc > 6 ? atol(argv[6]) : prompt;
    if ((width != 32 && width != 64) || prompt < 1 || decode < 0 || max_pos < prompt + decode || chunk < 1) {
        fprintf(stderr, "bench_memory: bad arguments\n");
        return 2;
    }
    char err[1024], root[] = "/tmp/dsv4q-benchmem-XXXXXX", dir[300];
    struct stat st;
    const int synth = stat(argv[1], &st) != 0;
    if (synth) {
        dsv4q_config cfg;
        if (!mkdtemp(root)) return 1;
        snprintf(dir, sizeof dir, "%s/m", root);
        if (dsv4q_config_builtin(&cfg, argv[1], err, sizeof err) ||
            dsv4q_synth_write(&cfg, 1, dir, 1, err, sizeof err)) {
            fprintf(stderr, "bench_memory: %s\n", err);
            return 1;
        }
    } else {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    }
    dsv4q_model *m;
    if (dsv4q_model_open(&m, dir, err, sizeof err)) {
        fprintf(stderr, "bench_memory: %s\n", err);
        return 1;
    }
    uint64_t bs;
    dsv4q_profile_set("source", &bs);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(prompt + decode));
    double *logits = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    if (!ids || !logits) return 1;
    for (long i = 0; i < prompt + decode; i++) ids[i] = (int32_t)((i * 7919 + 13) % m->cfg.vocab_size);
    const double est = dsv4q_run_estimate_bytes(m, width, max_pos, prompt, chunk);
    malloc_trim(0); /* the load's freed heap back to the OS, or the run reuses it unseen */
    const double base = status_bytes("VmRSS"), file0 = status_bytes("RssFile");
    if (reset_peak() || base < 0) {
        fprintf(stderr, "bench_memory: cannot reset or read the peak RSS (/proc/self)\n");
        return 1;
    }
    dsv4q_run *r;
    int rc = dsv4q_run_open(&r, m, width, bs, max_pos, NULL, NULL, err, sizeof err) ||
             (chunk < prompt && dsv4q_run_set_prefill(r, prompt, err, sizeof err));
    for (long p = 0; !rc && p < prompt; p += chunk)
        rc = dsv4q_run_feed(r, ids + p, prompt - p < chunk ? prompt - p : chunk, logits, err, sizeof err);
    for (long i = 0; !rc && i < decode; i++) rc = dsv4q_run_feed(r, &ids[prompt + i], 1, logits, err, sizeof err);
    /* the weights are mapped: pages the run reads count in the RSS but are
     * page cache (MemAvailable counts them free), so they come off */
    const double hwm = status_bytes("VmHWM"), file1 = status_bytes("RssFile");
    const double peak = hwm - base - (file1 - file0);
    if (getenv("BENCH_MEMORY_VERBOSE"))
        fprintf(stderr, "rss after load %.1f MB, peak %.1f MB, mapped weights touched %.1f -> %.1f MB\n", base / 1e6,
                hwm / 1e6, file0 / 1e6, file1 / 1e6);
    if (rc) {
        fprintf(stderr, "bench_memory: %s\n", err);
        return 1;
    }
    dsv4q_run_close(r);
    printf("%-12s f%d  positions %8ld (prefill %6ld in chunks of %6ld, decode %3ld)  estimate %9.1f MB  "
           "measured %9.1f MB  ratio %.2f\n",
           argv[1], width, max_pos, prompt, chunk < prompt ? chunk : prompt, decode, est / 1e6, peak / 1e6, est / peak);
    free(ids);
    free(logits);
    dsv4q_model_close(m);
    if (synth) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        if (system(cmd)) return 1;
    }
    return 0;
}
