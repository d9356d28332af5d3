/*
 * util.c - base/util.h: the shared small helpers, one copy each, so an
 * error message, a directory tree, a timing or a ULP distance is made the
 * same way in every room (they had three to five private copies before).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "base/util.h"

int dsv4q_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int dsv4q_mkdir_p(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(buf, 0755) && errno != EEXIST) return -1;
    struct stat sb;
    if (stat(buf, &sb) || !S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

double dsv4q_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

json_t *dsv4q_json_num(double v)
{
    if (isnan(v)) return json_null();
    if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

int64_t dsv4q_ord32(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

int64_t dsv4q_ord16(uint16_t c) { return (c & 0x8000) ? -(int64_t)(c & 0x7FFF) : (int64_t)c; }
