/*
 * junit.h - a JUnit XML report writer (the dialect CI servers render
 * natively: GitHub Actions test reporters, GitLab `artifacts:reports:junit`,
 * Jenkins). Owned here because qualify and replay both write one; it knows
 * nothing about dsv4q's results, only suites and test cases.
 *
 * Output: <testsuites> with one <testsuite> per dsv4q_junit_suite() call,
 * each holding <testcase classname name time> with at most one <failure>,
 * <error> or <skipped> child; counts (tests, failures, errors, skipped) on
 * every suite and on the root. Text is XML-escaped; control characters
 * other than tab/newline are dropped (XML 1.0 cannot carry them). The file
 * is published on close by base/file.h's atomic writer (a temporary beside
 * it, fsync, rename; "-" is standard output), so a reader never sees a
 * half-written report and a full disk leaves no file.
 */
#ifndef DSV4Q_CLI_JUNIT_H
#define DSV4Q_CLI_JUNIT_H

#include <stddef.h>

typedef enum dsv4q_junit_kind {
    DSV4Q_JUNIT_PASS = 0,
    DSV4Q_JUNIT_FAILURE,   /* the verdict failed (a metric over its bound) */
    DSV4Q_JUNIT_ERROR,     /* the backend crashed, hung or errored */
    DSV4Q_JUNIT_SKIPPED    /* not run (not implemented by the backend) */
} dsv4q_junit_kind;

typedef struct dsv4q_junit dsv4q_junit;

/* Start a report for `path` (its directory must be writable). 0, or -1
 * with a message naming the file. */
int dsv4q_junit_open(dsv4q_junit **j, const char *path, char *err, size_t errlen);
/* Start a new suite (ends the current one). */
void dsv4q_junit_suite(dsv4q_junit *j, const char *name);
/* One test case of the current suite. message: the one-line summary
 * (failure/error/skipped attribute); text: details (element body), may be
 * NULL. seconds < 0: no time attribute. */
void dsv4q_junit_case(dsv4q_junit *j, const char *classname, const char *name, double seconds,
                      dsv4q_junit_kind kind, const char *message, const char *text);
/* Write the file (PATH.tmp then rename) and free. 0, or -1 + message. */
int dsv4q_junit_close(dsv4q_junit *j, char *err, size_t errlen);

#endif
