/* fuzz_gguf - the GGUF v3 reader (io/gguf.c) on an in-memory image
 * (dsv4q_gguf_open_buffer: magic, version, counts, metadata strings and
 * arrays, tensor infos, alignment, offsets), then every accessor on what it
 * accepted: each tensor's first and last byte, each key's typed getters and
 * array elements. Seeds: small GGUF images made by fuzz/seeds.sh. */
#include "fuzz/fuzzutil.h"
#include "io/gguf.h"

/* Touched bytes go here so the reads are not optimised away. */
static volatile unsigned acc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    dsv4q_gguf *g;
    char err[512];
    if (dsv4q_gguf_open_buffer(&g, data, n, "fuzz", err, sizeof err) != 0) return 0;
    for (size_t i = 0; i < dsv4q_gguf_count(g); i++) {
        const dsv4q_gguf_tensor *t = dsv4q_gguf_at(g, i);
        if (dsv4q_gguf_find(g, t->name) != t) abort();   /* find() agrees with at() */
        const uint8_t *p = t->data;
        if (t->nbytes) acc += p[0] + p[t->nbytes - 1];   /* every byte in range */
    }
    for (size_t i = 0; i < dsv4q_gguf_nkv(g); i++) {
        const dsv4q_gguf_kv *kv = dsv4q_gguf_kv_at(g, i);
        int64_t iv;
        double rv;
        const char *sv;
        (void)dsv4q_gguf_get_int(g, kv->key, &iv, err, sizeof err);
        (void)dsv4q_gguf_get_real(g, kv->key, &rv, err, sizeof err);
        (void)dsv4q_gguf_get_str(g, kv->key, &sv, err, sizeof err);
        if (kv->type == DSV4Q_GGUF_ARRAY)
            for (uint64_t k = 0; k < kv->n && k < 64; k++) {
                (void)dsv4q_gguf_arr_int(kv, k, &iv);
                (void)dsv4q_gguf_arr_real(kv, k, &rv);
            }
    }
    dsv4q_gguf_close(g);
    return 0;
}
