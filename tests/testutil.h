/* testutil.h - shared includes for cmocka tests. */
#ifndef DSV4Q_TESTUTIL_H
#define DSV4Q_TESTUTIL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
/* The build directory the tests were built into (build, or build/asan for
 * `make asan`): binaries and plugins are found there. */
#ifndef DSV4Q_TEST_BUILD
#define DSV4Q_TEST_BUILD "build"
#endif
#endif
