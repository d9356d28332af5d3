/*
 * util.h - the small helpers every layer needs, one copy each: an error
 * message into the caller's buffer, mkdir -p, a monotonic timer, a JSON
 * number that survives NaN/inf, and the ordinal of a float's bits (what a
 * ULP distance counts). base/ is the bottom layer: it includes only libc
 * and jansson, never a project header.
 *
 * Call them by these names, never through a local alias macro (`#define
 * fail dsv4q_errf`): a grep for dsv4q_errf then finds every error site.
 */
#ifndef DSV4Q_BASE_UTIL_H
#define DSV4Q_BASE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* printf into err[errlen] (nothing when err is NULL or errlen 0); returns
 * -1, so `return dsv4q_errf(err, errlen, "...")` reports and fails. */
int dsv4q_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* mkdir -p with mode 0755: every missing component of path. 0, or -1 with
 * errno (ENAMETOOLONG past 4095 bytes, ENOTDIR when path exists and is not
 * a directory). */
int dsv4q_mkdir_p(const char *path);

/* Seconds on CLOCK_MONOTONIC (for elapsed times; never for results). */
double dsv4q_now_s(void);

/* A JSON number for v: json_real(v), null for NaN, the strings "inf" /
 * "-inf" for infinities (JSON has no non-finite numbers). New reference. */
json_t *dsv4q_json_num(double v);

/* Ordinal of a binary32's bits: monotone in the value, adjacent floats
 * differ by 1, +0 and -0 both 0 (so |ord(a) - ord(b)| is a's distance
 * from b in F32 ULPs). */
int64_t dsv4q_ord32(float f);
/* The same for a 16-bit code (BF16 or F16: sign-magnitude, 15 bits). */
int64_t dsv4q_ord16(uint16_t c);

#endif
