/*
 * safetensors.h - read and write the safetensors format (the ecosystem's
 * checkpoint container; DeepSeek ships V4 in it).
 *
 * Owns: mmap'd read access to single files and sharded checkpoints
 * (model.safetensors.index.json), strict header validation (io/safetensors.c),
 * and the one deterministic writer (io/safetensors_write.c).
 * Refuses: anything it cannot prove well-formed (bad JSON, offsets outside
 * the file, overlapping or unordered data ranges, shape/dtype/size
 * mismatch, unknown dtype, duplicate names). Tensors are opened lazily: a
 * reader touching layers [a,b) never reads the rest of the bytes.
 * Errors: functions return 0 / -1 and fill `err` naming the file and tensor.
 * Mirrors: the safetensors spec (8-byte LE header length, JSON header,
 * "__metadata__" string map, C-order data, byte offsets relative to the
 * end of the header).
 *
 * DESIGN NOTES (invariants; io/safetensors.c keeps S1-S5, io/safetensors_write.c
 * S6-S7; tests cite them as S1..S7)
 *  S1. Lazy: open maps files and parses headers only; tensor bytes are the
 *      mapping (MAP_PRIVATE, PROT_READ) and are paged in on first touch.
 *  S2. Every tensor satisfies 0 <= begin <= end <= data_len and
 *      end - begin == numel * dtype_size (I8 included: an I8 tensor holding
 *      packed E2M1 pairs has the byte shape [out, in/2] in the file).
 *  S3. Within a file the ranges, sorted by begin, tile [0, data_len) exactly:
 *      no overlap, no hole, no trailing byte (the crate's rule: it prevents
 *      polyglot files and makes the file a function of its header).
 *  S4. Tensor names are unique across all shards; the table is in strcmp
 *      order, so find() is a binary search and at(i) is name order.
 *  S5. A sharded reader holds exactly the tensors of its weight_map, each in
 *      the shard the index names.
 *  S6. The writer is deterministic: header keys are "__metadata__" (its keys
 *      in name order) then the tensors in name order; data is laid out by
 *      element size (8, 4, 2, 1 bytes) then name, so every tensor starts at
 *      a multiple of its element size; the header is padded with spaces so
 *      data starts at a multiple of 8 from the file start. Same tensors + metadata => same bytes (and
 *      SHA-256), which is what lets goldens be pinned.
 *  S7. The writer never leaves a partial file at `path`: it publishes
 *      through base/file.h's atomic writer (`path.tmp.XXXXXX` in the same
 *      directory, fsync, rename), so DSV4Q_FAULT_WRITE reaches it too.
 */
#ifndef DSV4Q_SAFETENSORS_H
#define DSV4Q_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "../oracle/formats.h"

#define DSV4Q_ST_MAX_DIMS 8

typedef struct dsv4q_st_tensor {
    const char *name;            /* owned by the reader */
    dsv4q_dtype dtype;
    int ndim;
    int64_t shape[DSV4Q_ST_MAX_DIMS];
    int64_t numel;
    const void *data;            /* mmap'd, read-only, nbytes long */
    size_t nbytes;
    const char *file;            /* the shard file it lives in */
} dsv4q_st_tensor;

typedef struct dsv4q_st dsv4q_st;  /* opaque reader (one file or shard set) */

/* Open `path`: a .safetensors file, a model.safetensors.index.json, or a
 * directory holding either (index preferred; else all *.safetensors files
 * in name order). Returns 0 and *out, or -1 with err. */
int dsv4q_st_open(dsv4q_st **out, const char *path, char *err, size_t errlen);
void dsv4q_st_close(dsv4q_st *st);
/* Lookup by exact name; NULL if absent. */
const dsv4q_st_tensor *dsv4q_st_find(const dsv4q_st *st, const char *name);
/* Number of tensors and the i-th one (in name order). */
size_t dsv4q_st_count(const dsv4q_st *st);
const dsv4q_st_tensor *dsv4q_st_at(const dsv4q_st *st, size_t i);
/* Value of a "__metadata__" key of the first file that has it; NULL if none. */
const char *dsv4q_st_meta(const dsv4q_st *st, const char *key);
/* Files behind the reader (for pinning by SHA-256). */
size_t dsv4q_st_nfiles(const dsv4q_st *st);
const char *dsv4q_st_file(const dsv4q_st *st, size_t i);

/* --- writer: collect tensors, then write one file atomically (tmp+rename). */
typedef struct dsv4q_st_writer dsv4q_st_writer;
dsv4q_st_writer *dsv4q_st_writer_new(void);
/* Copy `nbytes` of data (must equal numel*size, or numel/2 rounded up for
 * packed E2M1 stored as I8 with an explicit shape). Returns 0 / -1. */
int dsv4q_st_writer_add(dsv4q_st_writer *w, const char *name, dsv4q_dtype dt, int ndim,
                  const int64_t *shape, const void *data, size_t nbytes,
                  char *err, size_t errlen);
int dsv4q_st_writer_meta(dsv4q_st_writer *w, const char *key, const char *value);
/* Write to `path` (tensors in name order, 8-byte aligned data). Frees w. */
int dsv4q_st_writer_write(dsv4q_st_writer *w, const char *path, char *err, size_t errlen);
/* Serialize to memory instead (malloc'd buffer in *buf). Frees w. */
int dsv4q_st_writer_to_buffer(dsv4q_st_writer *w, uint8_t **buf, size_t *len, char *err, size_t errlen);
void dsv4q_st_writer_free(dsv4q_st_writer *w);

/* Parse a safetensors image already in memory (for goldens); the buffer
 * must outlive the reader. */
int dsv4q_st_open_buffer(dsv4q_st **out, const uint8_t *buf, size_t len,
                         const char *origin, char *err, size_t errlen);

#endif
