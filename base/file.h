/* base/file.h - the project's only ways to read a whole file or publish one.
 *
 * Every output dsv4q publishes goes through the atomic writer below: CLI
 * result files, safetensors files (io/safetensors_write.c: captures, `run
 * --out`, synthetic checkpoints), goldens, JUnit reports (tests/test_writers.c
 * injects a failure into each). The one file created otherwise is a signing
 * key (receipts/keys.c): created with O_EXCL, never replaced (R13), which is
 * the opposite of publishing over a destination.
 *
 * Owns three rules every reader and writer of dsv4q follows (docs/robustness.md):
 *  - A path is opened with O_NONBLOCK and fstat'd before anything else, and
 *    anything but a regular file (FIFO, socket, device such as /dev/zero,
 *    directory) is refused, so a hostile path can neither block open() nor
 *    stream without end.
 *  - A file read into memory has a stated byte limit, checked against the
 *    size fstat reports and again while reading (the file may grow).
 *  - An output is written to a temporary file in the destination's directory,
 *    flushed, fsync'd and renamed over the destination; any failure (ENOSPC,
 *    EIO, EROFS, ...) removes the temporary and leaves the destination as it
 *    was, so no reader ever sees half a result.
 * Errors are returned as -1 with a message in err naming the path, the rule
 * and the expected value; nothing here prints or exits.
 */
#ifndef DSV4Q_BASE_FILE_H
#define DSV4Q_BASE_FILE_H
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

/* Byte limits for the files the project reads whole (a file larger than its
 * limit is refused with the size and the limit named). Chosen well above any
 * real file: a DeepSeek V3 index is ~9 MB, a config.json ~5 KB. */
#define DSV4Q_LIMIT_CONFIG   (4u << 20)    /* config.json */
#define DSV4Q_LIMIT_INDEX    (256u << 20)  /* model.safetensors.index.json */
#define DSV4Q_LIMIT_JSON     (64u << 20)   /* gates, tokens, receipts export, goldens */
#define DSV4Q_LIMIT_SMALL    (64u << 10)   /* keys, pins */

/* Open `path` read-only (O_CLOEXEC) without blocking and refuse it unless it
 * is a regular file. Returns the fd (blocking mode restored) or -1 with
 * "PATH: cannot open WHAT: strerror" or "PATH: WHAT is not a regular file
 * (a FIFO|socket|character device|block device|directory)" in err. `what`
 * names the file's role ("config", "index", ...). If sb is non-NULL it
 * receives the fstat result. */
int dsv4q_file_open_read(const char *path, const char *what, struct stat *sb, char *err, size_t errlen);

/* fopen(path, "rb") through dsv4q_file_open_read: the same refusals. Returns
 * NULL with err set. */
FILE *dsv4q_file_fopen_read(const char *path, const char *what, char *err, size_t errlen);

/* Read all of regular file `path` into a malloc'd buffer, NUL-terminated (the
 * terminator is not counted in *len). Refuses non-regular files and files of
 * more than `limit` bytes: "PATH: WHAT is N bytes, more than the limit of L
 * bytes". Returns 0 or -1 (with *buf = NULL). */
int dsv4q_file_read_all(const char *path, const char *what, size_t limit, char **buf, size_t *len,
                        char *err, size_t errlen);

/* Atomic output writer. Usage:
 *     dsv4q_aout a;
 *     FILE *f = dsv4q_aout_open(&a, path, err, errlen);   // NULL: err set
 *     fprintf(f, ...);
 *     if (dsv4q_aout_commit(&a, err, errlen)) ...         // -1: no file left
 * open creates PATH.tmp.XXXXXX (mode 0644 after umask) next to PATH; commit
 * checks every stdio error, fflush + fsync + close, renames onto PATH and
 * fsyncs the directory (best effort). dsv4q_aout_abort removes the temporary
 * (use it on any error path before commit). A path of "-" writes to stdout
 * (commit then only flushes and checks it).
 * Fault injection for tests: environment DSV4Q_FAULT_WRITE=ENOSPC (or EIO)
 * makes every commit fail with that errno, as a full disk would. */
typedef struct {
    FILE *f;
    char *path;   /* destination (malloc'd) */
    char *tmp;    /* temporary (malloc'd), NULL for stdout */
} dsv4q_aout;

FILE *dsv4q_aout_open(dsv4q_aout *a, const char *path, char *err, size_t errlen);
int dsv4q_aout_commit(dsv4q_aout *a, char *err, size_t errlen);
void dsv4q_aout_abort(dsv4q_aout *a);

/* The same writer keyed by its FILE, as drop-in replacements for
 * fopen(path, "w") / fclose(f) at call sites: dsv4q_out_open returns NULL
 * with err (may be NULL) set; dsv4q_out_close commits (fflush + fsync +
 * rename; -1 and no file on any error, like ENOSPC); dsv4q_out_discard
 * removes the temporary. At most 16 outputs open at once. */
FILE *dsv4q_out_open(const char *path, char *err, size_t errlen);
int dsv4q_out_close(FILE *f, char *err, size_t errlen);
void dsv4q_out_discard(FILE *f);

/* Write `n` bytes to PATH atomically (open + fwrite + commit). */
int dsv4q_file_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen);

/* The errno injected by DSV4Q_FAULT_WRITE (ENOSPC, EIO), or 0. */
int dsv4q_file_fault(void);

#endif
