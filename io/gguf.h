/*
 * gguf.h - strict reader of GGUF v3 files (llama.cpp's weight container).
 *
 * Owns: mmap'd read access to one .gguf file: the header, the typed
 * metadata key/value pairs, and the tensor infos with their data ranges.
 * Refuses (with a message naming the file, and the key or tensor): a bad
 * magic, a version other than 3, counts or string/array lengths that cannot
 * fit in the rest of the file or exceed the bounds below, nested arrays,
 * unknown value types, duplicate keys or tensor names, names longer than
 * ggml's 63 bytes, more than 4 dimensions, a zero or negative dimension,
 * element counts that overflow, an unknown GGML type, ne[0] not a multiple
 * of the type's block, a general.alignment that is not a power of two (or
 * not a UINT32), a data offset that is not aligned, data ranges outside the
 * file or overlapping each other. It reads nothing past the end of the file
 * whatever the bytes say (every length is checked before it is used).
 * Errors: functions return 0 / -1 and fill `err`.
 * Mirrors: the GGUF spec (ggml docs/gguf.md) and ggml/src/gguf.cpp
 * gguf_init_from_file_impl: little-endian, u64 counts, strings as u64
 * length + bytes (no NUL), tensor data at align_up(end of infos,
 * alignment), offsets relative to that data start.
 */
#ifndef DSV4Q_GGUF_H
#define DSV4Q_GGUF_H

#include <stddef.h>
#include <stdint.h>

#define DSV4Q_GGUF_MAX_DIMS 4
#define DSV4Q_GGUF_MAX_NAME 63          /* GGML_MAX_NAME - 1 */
#define DSV4Q_GGUF_MAX_KEY 65535        /* longest metadata key accepted */
#define DSV4Q_GGUF_MAX_TENSORS 1000000  /* more tensors than any model */
#define DSV4Q_GGUF_MAX_KV 1000000

/* GGUF metadata value types (gguf.h enum gguf_type). */
typedef enum dsv4q_gguf_vtype {
    DSV4Q_GGUF_U8 = 0, DSV4Q_GGUF_I8 = 1, DSV4Q_GGUF_U16 = 2, DSV4Q_GGUF_I16 = 3,
    DSV4Q_GGUF_U32 = 4, DSV4Q_GGUF_I32 = 5, DSV4Q_GGUF_F32 = 6, DSV4Q_GGUF_BOOL = 7,
    DSV4Q_GGUF_STRING = 8, DSV4Q_GGUF_ARRAY = 9, DSV4Q_GGUF_U64 = 10, DSV4Q_GGUF_I64 = 11,
    DSV4Q_GGUF_F64 = 12, DSV4Q_GGUF_VTYPE_COUNT = 13
} dsv4q_gguf_vtype;

/* One metadata pair. Scalars: `data` points at the value in the map
 * (unaligned; read with the getters). Strings: `str`/`len` (not NUL
 * terminated in the file; `str` here is a NUL-terminated copy). Arrays:
 * `atype`, `n` and `data` (the packed elements; for arrays of strings,
 * `strs[i]` are NUL-terminated copies). */
typedef struct dsv4q_gguf_kv {
    const char *key;
    dsv4q_gguf_vtype type;
    dsv4q_gguf_vtype atype;   /* ARRAY only */
    uint64_t n;               /* ARRAY element count; 1 for a scalar */
    const void *data;
    const char *str;          /* STRING */
    uint64_t len;             /* STRING byte length */
    char **strs;              /* ARRAY of STRING */
} dsv4q_gguf_kv;

typedef struct dsv4q_gguf_tensor {
    const char *name;
    int type;                          /* dsv4q_ggml_type id */
    int ndim;
    int64_t ne[DSV4Q_GGUF_MAX_DIMS];   /* ggml order: ne[0] is the contiguous dim */
    int64_t numel;
    uint64_t offset;                   /* relative to the data section */
    const void *data;                  /* mmap'd, nbytes long */
    size_t nbytes;
} dsv4q_gguf_tensor;

typedef struct dsv4q_gguf dsv4q_gguf;

/* Open and validate `path` (a regular file). Returns 0 and *out, or -1. */
int dsv4q_gguf_open(dsv4q_gguf **out, const char *path, char *err, size_t errlen);
/* Parse an image in memory (tests); buf must outlive the reader. */
int dsv4q_gguf_open_buffer(dsv4q_gguf **out, const uint8_t *buf, size_t len, const char *origin,
                           char *err, size_t errlen);
void dsv4q_gguf_close(dsv4q_gguf *g);

const char *dsv4q_gguf_path(const dsv4q_gguf *g);
uint32_t dsv4q_gguf_alignment(const dsv4q_gguf *g);
size_t dsv4q_gguf_count(const dsv4q_gguf *g);                 /* tensors, file order */
const dsv4q_gguf_tensor *dsv4q_gguf_at(const dsv4q_gguf *g, size_t i);
const dsv4q_gguf_tensor *dsv4q_gguf_find(const dsv4q_gguf *g, const char *name);
size_t dsv4q_gguf_nkv(const dsv4q_gguf *g);
const dsv4q_gguf_kv *dsv4q_gguf_kv_at(const dsv4q_gguf *g, size_t i);
const dsv4q_gguf_kv *dsv4q_gguf_kv_find(const dsv4q_gguf *g, const char *key);

/* Typed getters. Return 0 and *v, 1 when the key is absent, -1 (with err
 * naming the key) when it has the wrong type or its value does not fit.
 * _int accepts any integer type (and BOOL); _real accepts F32/F64 and
 * integers; _str accepts STRING. */
int dsv4q_gguf_get_int(const dsv4q_gguf *g, const char *key, int64_t *v, char *err, size_t errlen);
int dsv4q_gguf_get_real(const dsv4q_gguf *g, const char *key, double *v, char *err, size_t errlen);
int dsv4q_gguf_get_str(const dsv4q_gguf *g, const char *key, const char **v, char *err, size_t errlen);
/* Element i of an array of integers / reals (same conversions). */
int dsv4q_gguf_arr_int(const dsv4q_gguf_kv *kv, uint64_t i, int64_t *v);
int dsv4q_gguf_arr_real(const dsv4q_gguf_kv *kv, uint64_t i, double *v);

#endif
