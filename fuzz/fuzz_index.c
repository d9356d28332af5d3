/* fuzz_index - a sharded checkpoint's model.safetensors.index.json (weight_map
 * names, shard confinement, S5 cross-checks) read by dsv4q_st_open on a
 * directory holding one fixed shard a.safetensors with tensors "x" and "y".
 * Seeds: an index naming both tensors, and variants. */
#include "fuzz/fuzzutil.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static int ready;
    char err[512], shard[600];
    if (!ready) {
        snprintf(shard, sizeof shard, "%s/a.safetensors", fz_dir());
        dsv4q_st_writer *w = dsv4q_st_writer_new();
        float v[2] = {1, 2};
        int64_t sh[1] = {2};
        if (dsv4q_st_writer_add(w, "x", DSV4Q_DT_F32, 1, sh, v, sizeof v, err, sizeof err) ||
            dsv4q_st_writer_add(w, "y", DSV4Q_DT_F32, 1, sh, v, sizeof v, err, sizeof err) ||
            dsv4q_st_writer_write(w, shard, err, sizeof err))
            abort();
        ready = 1;
    }
    if (!fz_file("model.safetensors.index.json", data, n)) return 0;
    dsv4q_st *st;
    if (dsv4q_st_open(&st, fz_dir(), err, sizeof err) == 0) dsv4q_st_close(st);
    return 0;
}
