/* base/file.c - non-blocking regular-file opens, bounded whole-file reads and
 * the atomic (temp + fsync + rename) output writer (see base/file.h).
 *
 * Why here: every layer reads untrusted paths (configs, indexes, captures,
 * gates, receipts) and publishes results; doing both in one place is how the
 * rules "never block on a FIFO", "never read without a bound" and "never leave
 * half a file" hold everywhere at once.
 */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int file_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *kind_name(mode_t m)
{
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISDIR(m)) return "a directory";
    return "not a plain file";
}

int dsv4q_file_open_read(const char *path, const char *what, struct stat *sb, char *err, size_t errlen)
{
    if (!path || !path[0])
        return file_fail(err, errlen, "empty path for the %s", what);
    /* O_NONBLOCK: opening a FIFO for reading must not wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return file_fail(err, errlen, "%s: cannot open %s: %s", path, what, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return file_fail(err, errlen, "%s: cannot stat %s: %s", path, what, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return file_fail(err, errlen, "%s: %s is %s, expected a regular file", path, what, kind_name(st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (sb)
        *sb = st;
    return fd;
}

FILE *dsv4q_file_fopen_read(const char *path, const char *what, char *err, size_t errlen)
{
    int fd = dsv4q_file_open_read(path, what, NULL, err, errlen);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        file_fail(err, errlen, "%s: cannot open %s: %s", path, what, strerror(errno));
        close(fd);
    }
    return f;
}

int dsv4q_file_read_all(const char *path, const char *what, size_t limit, char **buf, size_t *len,
                        char *err, size_t errlen)
{
    *buf = NULL;
    *len = 0;
    struct stat st;
    int fd = dsv4q_file_open_read(path, what, &st, err, errlen);
    if (fd < 0)
        return -1;
    if ((uint64_t)st.st_size > (uint64_t)limit) {
        close(fd);
        return file_fail(err, errlen, "%s: %s is %lld bytes, more than the limit of %zu bytes", path, what,
                         (long long)st.st_size, limit);
    }
    /* read up to limit + 1 bytes: one more than allowed proves it grew */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        close(fd);
        return file_fail(err, errlen, "%s: out of memory reading %s (%zu bytes)", path, what, cap);
    }
    for (;;) {
        if (n == cap) {
            if (cap > limit) break;
            size_t nc = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
            char *nb = realloc(b, nc + 1);
            if (!nb) {
                free(b);
                close(fd);
                return file_fail(err, errlen, "%s: out of memory reading %s", path, what);
            }
            b = nb;
            cap = nc;
        }
        ssize_t k = read(fd, b + n, cap - n);
        if (k < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(b);
            close(fd);
            return file_fail(err, errlen, "%s: cannot read %s: %s", path, what, strerror(e));
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    close(fd);
    if (n > limit) {
        free(b);
        return file_fail(err, errlen, "%s: %s grew past the limit of %zu bytes while being read", path, what, limit);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

int dsv4q_file_fault(void)
{
    const char *f = getenv("DSV4Q_FAULT_WRITE");
    if (!f || !f[0]) return 0;
    if (strcmp(f, "EIO") == 0) return EIO;
    return ENOSPC;
}

static char *dir_of(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s) return strdup(".");
    if (s == path) return strdup("/");
    return strndup(path, (size_t)(s - path));
}

FILE *dsv4q_aout_open(dsv4q_aout *a, const char *path, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (!path || !path[0]) {
        file_fail(err, errlen, "empty output path");
        return NULL;
    }
    if (strcmp(path, "-") == 0) {
        a->f = stdout;
        a->path = strdup("-");
        if (!a->path) {
            file_fail(err, errlen, "out of memory");
            return NULL;
        }
        return a->f;
    }
    size_t pl = strlen(path);
    a->path = strdup(path);
    a->tmp = malloc(pl + sizeof ".tmp.XXXXXX");
    if (!a->path || !a->tmp) {
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        file_fail(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    memcpy(a->tmp, path, pl);
    memcpy(a->tmp + pl, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkostemp(a->tmp, O_CLOEXEC);
    if (fd < 0) {
        file_fail(err, errlen, "%s: cannot create the output (temporary %s): %s", path, a->tmp, strerror(errno));
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        return NULL;
    }
    /* mkstemp makes 0600; outputs are ordinary files (0666 & ~umask) */
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    a->f = fdopen(fd, "w");
    if (!a->f) {
        file_fail(err, errlen, "%s: cannot open the output: %s", path, strerror(errno));
        close(fd);
        unlink(a->tmp);
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        return NULL;
    }
    return a->f;
}

void dsv4q_aout_abort(dsv4q_aout *a)
{
    if (a->f && a->tmp) {
        fclose(a->f);
        unlink(a->tmp);
    }
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
}

int dsv4q_aout_commit(dsv4q_aout *a, char *err, size_t errlen)
{
    if (!a->f)
        return file_fail(err, errlen, "output writer: not open");
    int e = 0;
    errno = 0;
    if (fflush(a->f) != 0 || ferror(a->f))
        e = errno ? errno : EIO;
    if (!a->tmp) {   /* stdout */
        free(a->path);
        memset(a, 0, sizeof *a);
        return e ? file_fail(err, errlen, "-: cannot write to standard output: %s", strerror(e)) : 0;
    }
    if (!e && dsv4q_file_fault())
        e = dsv4q_file_fault();
    if (!e && fsync(fileno(a->f)) != 0 && errno != EINVAL)   /* EINVAL: a file system that cannot sync */
        e = errno;
    if (fclose(a->f) != 0 && !e)
        e = errno ? errno : EIO;
    a->f = NULL;
    if (!e && rename(a->tmp, a->path) != 0)
        e = errno;
    if (e) {
        unlink(a->tmp);
        file_fail(err, errlen, "%s: cannot write the output: %s (nothing written)", a->path, strerror(e));
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        return -1;
    }
    char *dir = dir_of(a->path);   /* make the rename durable (best effort) */
    int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    return 0;
}

int dsv4q_file_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen)
{
    dsv4q_aout a;
    FILE *f = dsv4q_aout_open(&a, path, err, errlen);
    if (!f)
        return -1;
    if (n && fwrite(data, 1, n, f) != n) {
        int e = errno;
        dsv4q_aout_abort(&a);
        return file_fail(err, errlen, "%s: cannot write the output: %s (nothing written)", path, strerror(e));
    }
    return dsv4q_aout_commit(&a, err, errlen);
}

/* open outputs by FILE (single-threaded use: the CLI's result files) */
static dsv4q_aout g_out[16];

FILE *dsv4q_out_open(const char *path, char *err, size_t errlen)
{
    for (int i = 0; i < 16; i++)
        if (!g_out[i].f)
            return dsv4q_aout_open(&g_out[i], path, err, errlen);
    file_fail(err, errlen, "%s: too many open outputs", path);
    return NULL;
}

int dsv4q_out_close(FILE *f, char *err, size_t errlen)
{
    char tmp[600];
    for (int i = 0; i < 16; i++)
        if (f && g_out[i].f == f) {
            int r = dsv4q_aout_commit(&g_out[i], tmp, sizeof tmp);
            if (r) {
                if (err && errlen) snprintf(err, errlen, "%s", tmp);
                else fprintf(stderr, "dsv4q: %s\n", tmp);
            }
            return r;
        }
    return f ? fclose(f) : -1;
}

void dsv4q_out_discard(FILE *f)
{
    for (int i = 0; i < 16; i++)
        if (f && g_out[i].f == f) {
            dsv4q_aout_abort(&g_out[i]);
            return;
        }
}
