/*
 * version.h - the tool version and the git commit a dsv4q binary was built
 * from, as recorded in every receipt.
 *
 * Owns: DSV4Q_VERSION (bumped by hand on release) and dsv4q_git_commit(),
 * the best-effort commit id. Receipts record both so that a result can be
 * traced back to the exact oracle source that produced it; a missing commit
 * is recorded as "unknown" rather than failing the run (a measurement that
 * took hours must not be lost because git is not installed).
 */
#ifndef DSV4Q_VERSION_H
#define DSV4Q_VERSION_H

#define DSV4Q_VERSION "0.1.0"

/* The git commit of this build, resolved once per process, in this order:
 *   1. the environment variable DSV4Q_GIT_COMMIT, if set and non-empty;
 *   2. the compile-time macro DSV4Q_GIT_COMMIT, if the build defined one
 *      (e.g. CFLAGS+='-DDSV4Q_GIT_COMMIT="abc1234"');
 *   3. the build stamp DSV4Q_BUILD_COMMIT: `git rev-parse --short HEAD` of
 *      the source tree when `make` built the library (Makefile,
 *      $(BUILD)/gitcommit.h; "unknown" outside a git checkout);
 *   4. "unknown".
 * Returns a static NUL-terminated string (never NULL; thread-safe). */
const char *dsv4q_git_commit(void);

#endif
