/*
 * sha256.h - SHA-256 digests of files and buffers, as lowercase hex.
 *
 * Owns: the one way dsv4q pins bytes (checkpoint shards, goldens, receipts).
 * Refuses: to re-implement the hash: libsodium's crypto_hash_sha256 is the
 * audited implementation, and a pin that disagrees with `sha256sum` is worse
 * than no pin. Files are streamed in fixed-size chunks, so hashing a 100 GB
 * shard costs no memory. Output is always 64 lowercase hex digits + NUL.
 *
 * Naming: the file hash is dsv4q_sha256_hex_file, not dsv4q_sha256_file,
 * because receipts/pin.c already defines dsv4q_sha256_file (with a byte
 * count out-parameter, declared in receipts/receipts.h); two definitions of
 * one symbol in libdsv4q.a would break every binary that links both. Both
 * produce the same digest for the same file.
 */
#ifndef DSV4Q_SHA256_H
#define DSV4Q_SHA256_H

#include <stddef.h>

#define DSV4Q_SHA256_HEX_LEN 64   /* hex digits; buffers are [65] with the NUL */

/* Hash the whole file at `path`. Returns 0 and fills hex[65] (64 lowercase
 * digits, NUL-terminated), or -1 with `err` naming the file and the failing
 * call (open/read/libsodium init); hex is then the empty string. */
int dsv4q_sha256_hex_file(const char *path, char hex[65], char *err, size_t errlen);

/* Hash n bytes at `data` (data may be NULL when n == 0). Cannot fail. */
void dsv4q_sha256_hex(const void *data, size_t n, char hex[65]);

#endif
