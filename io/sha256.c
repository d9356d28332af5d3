/*
 * sha256.c - SHA-256 of files and buffers via libsodium.
 *
 * Owns: streaming a file through crypto_hash_sha256 and the hex spelling.
 * Refuses: mmap (a pin must read the bytes the way `sha256sum` does, and a
 * short read must be an error, not a silent truncation) and any hash code of
 * its own. sodium_init() is called before first use; it is idempotent and
 * thread-safe, and the SHA-256 primitives do not depend on its outcome, so a
 * failed init only matters to the file path, which reports it.
 */
#include "base/file.h"
#include "io/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#define SHA256_CHUNK (1u << 20)   /* 1 MiB per read: a static buffer is not thread-safe, so it lives on the heap */

static void to_hex(const unsigned char d[crypto_hash_sha256_BYTES], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < crypto_hash_sha256_BYTES; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = '\0';
}

void dsv4q_sha256_hex(const void *data, size_t n, char hex[65])
{
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    if (sodium_init() < 0) { /* the SHA-256 primitives work regardless */ }
    crypto_hash_sha256_init(&st);
    if (n > 0)
        crypto_hash_sha256_update(&st, (const unsigned char *)data, (unsigned long long)n);
    crypto_hash_sha256_final(&st, d);
    to_hex(d, hex);
}

int dsv4q_sha256_hex_file(const char *path, char hex[65], char *err, size_t errlen)
{
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    unsigned char *buf = NULL;
    FILE *f = NULL;
    int rc = -1;

    hex[0] = '\0';
    if (sodium_init() < 0) {
        snprintf(err, errlen, "sha256: %s: libsodium initialisation failed", path);
        return -1;
    }
    char ferr[400];
    f = dsv4q_file_fopen_read(path, "file to hash", ferr, sizeof ferr);
    if (!f) {
        snprintf(err, errlen, "sha256: %s", ferr);
        return -1;
    }
    buf = malloc(SHA256_CHUNK);
    if (!buf) {
        snprintf(err, errlen, "sha256: %s: out of memory", path);
        goto done;
    }
    crypto_hash_sha256_init(&st);
    for (;;) {
        size_t got = fread(buf, 1, SHA256_CHUNK, f);
        if (got > 0)
            crypto_hash_sha256_update(&st, buf, (unsigned long long)got);
        if (got < SHA256_CHUNK) {
            if (ferror(f)) {
                snprintf(err, errlen, "sha256: %s: read error: %s", path, strerror(errno));
                goto done;
            }
            break;   /* EOF */
        }
    }
    crypto_hash_sha256_final(&st, d);
    to_hex(d, hex);
    rc = 0;
done:
    free(buf);
    fclose(f);
    return rc;
}
