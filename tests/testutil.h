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
#endif
