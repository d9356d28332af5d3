/* fuzz_capture - one capture call file (safetensors with the capture metadata:
 * version, pins, position, token_ids, engine, profile, boundary, stage tensor
 * names and shapes) opened by dsv4q_capture_open against the built-in tiny
 * config; every accepted tensor's values are read. Seeds: `dsv4q capture`
 * output on tiny (fuzz/seeds.sh). The config pin the seeds carry is read
 * from the seed itself (the fuzzer cannot guess a SHA-256). */
#include "fuzz/fuzzutil.h"
#include "harness/capture/capture.h"
#include "io/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static dsv4q_config cfg;
    static int ready;
    char err[512];
    if (!ready) {
        if (dsv4q_config_builtin(&cfg, "tiny", err, sizeof err)) abort();
        ready = 1;
    }
    const char *p = fz_file("call.safetensors", data, n);
    if (!p) return 0;
    char path[600];
    snprintf(path, sizeof path, "%s", p);
    /* take the pin from the file itself so validation goes past it */
    char pin[65] = "0000000000000000000000000000000000000000000000000000000000000000";
    dsv4q_st *st;
    if (dsv4q_st_open(&st, path, err, sizeof err) == 0) {
        const char *ck = dsv4q_st_meta(st, "checkpoint_sha256");
        if (ck && strlen(ck) == 64) memcpy(pin, ck, 64);
        dsv4q_st_close(st);
    }
    dsv4q_capture *c;
    if (dsv4q_capture_open(&c, path, &cfg, pin, NULL, err, sizeof err) == 0) {
        for (int i = 0; i < c->ncalls; i++)
            for (size_t k = 0; k < dsv4q_st_count(c->calls[i].st); k++) {
                const dsv4q_st_tensor *t = dsv4q_st_at(c->calls[i].st, k);
                double *v = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
                if (v) dsv4q_capture_values(t, v);
                free(v);
            }
        dsv4q_capture_close(c);
    }
    return 0;
}
