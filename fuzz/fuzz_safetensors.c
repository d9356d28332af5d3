/* fuzz_safetensors - the safetensors reader on an in-memory image
 * (dsv4q_st_open_buffer: header length, JSON header, dtypes, shapes, offsets),
 * then every accessor on what it accepted. Seeds: any *.safetensors file
 * (synth checkpoints, captures, goldens payloads). */
#include "fuzz/fuzzutil.h"
#include "io/safetensors.h"

/* Touched bytes go here so the reads are not optimised away. */
static volatile unsigned acc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    dsv4q_st *st;
    char err[512];
    if (dsv4q_st_open_buffer(&st, data, n, "fuzz", err, sizeof err) == 0) {
        for (size_t i = 0; i < dsv4q_st_count(st); i++) {
            const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
            if (dsv4q_st_find(st, t->name) != t) abort();   /* S4: find() agrees with at() */
            const uint8_t *p = t->data;
            if (t->nbytes) acc += p[0] + p[t->nbytes - 1];   /* S2: every byte in range */
        }
        (void)dsv4q_st_meta(st, "format");
        dsv4q_st_close(st);
    }
    return 0;
}
