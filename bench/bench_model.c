/*
 * bench_model.c - whole-model throughput: tokens/s of prefill and of
 * decode, at both widths, on `tiny` (synthesized here) and, when a
 * flash-slice checkpoint is given (DSV4Q_FLASH_SLICE=DIR, e.g. made by
 * `dsv4q synth --config flash-slice --out DIR --shards 3`), on flash-slice.
 * Profile `source`. Wall-clock time of the forward calls only (the
 * checkpoint load is reported separately). The peer in the same run is
 * the other width.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include "io/config.h"
#include "io/model.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int bench(const char *label, const char *dir, long prompt, long decode)
{
    char err[1024];
    double t0 = now();
    dsv4q_model *m;
    if (dsv4q_model_open(&m, dir, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    double tload = now() - t0;
    uint64_t bs;
    dsv4q_profile_set("source", &bs);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(prompt + decode));
    double *logits = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    for (long i = 0; i < prompt + decode; i++) ids[i] = (int32_t)((i * 7919 + 13) % m->cfg.vocab_size);
    printf("%-12s load %.2f s; prompt %ld, decode %ld, %d threads\n", label, tload, prompt, decode, omp_get_max_threads());
    double pf[2], dc[2];
    for (int w = 0; w < 2; w++) {
        dsv4q_run *r;
        if (dsv4q_run_open(&r, m, w ? 64 : 32, bs, prompt + decode, NULL, NULL, err, sizeof err)) return 1;
        double a = now();
        if (dsv4q_run_feed(r, ids, prompt, logits, err, sizeof err)) return 1;
        double b = now();
        for (long i = 0; i < decode; i++)
            if (dsv4q_run_feed(r, &ids[prompt + i], 1, logits, err, sizeof err)) return 1;
        double c = now();
        dsv4q_run_close(r);
        pf[w] = prompt / (b - a);
        dc[w] = decode / (c - b);
        printf("  f%d  prefill %9.2f tok/s   decode %8.2f tok/s\n", w ? 64 : 32, pf[w], dc[w]);
    }
    printf("  f64/f32 ratio: prefill %.2f, decode %.2f\n", pf[1] / pf[0], dc[1] / dc[0]);
    free(ids);
    free(logits);
    dsv4q_model_close(m);
    return 0;
}

int main(void)
{
    char err[1024], root[] = "/tmp/dsv4q-bench-XXXXXX", dir[256];
    if (!mkdtemp(root)) return 1;
    snprintf(dir, sizeof dir, "%s/tiny", root);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny", err, sizeof err) || dsv4q_synth_write(&cfg, 1, dir, 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("bench_model: whole-model throughput, profile source\n");
    int rc = bench("tiny", dir, 256, 32);
    const char *fs = getenv("DSV4Q_FLASH_SLICE");
    if (fs && *fs) rc |= bench("flash-slice", fs, 64, 4);
    else printf("flash-slice: set DSV4Q_FLASH_SLICE=DIR to include it\n");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd)) rc = 1;
    return rc;
}
