/* fuzz/fuzzutil.h - shared helpers for the libFuzzer targets (fuzz/fuzz_*.c).
 *
 * Each target feeds one reader of untrusted bytes. Readers that take a path
 * get the input written to a per-process scratch file (in $TMPDIR or /tmp);
 * readers that take text get a NUL-terminated copy. A target only checks that
 * the reader returns (0 or -1) without a sanitizer finding: crashes, leaks,
 * UB and timeouts are the findings.
 */
#ifndef DSV4Q_FUZZUTIL_H
#define DSV4Q_FUZZUTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A per-process scratch directory, created once. */
static inline const char *fz_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/dsv4q-fuzz-%d", t && t[0] ? t : "/tmp", (int)getpid());
        mkdir(dir, 0700);
    }
    return dir;
}

/* Write data to dir/name; returns the path (static buffer) or NULL. */
static inline const char *fz_file(const char *name, const uint8_t *data, size_t n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    if (n && fwrite(data, 1, n, f) != n) { fclose(f); return NULL; }
    if (fclose(f)) return NULL;
    return path;
}

/* NUL-terminated copy (caller frees). */
static inline char *fz_text(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}
#endif
