/*
 * version.c - resolves the git commit recorded in receipts (version.h).
 *
 * Owns: dsv4q_git_commit. The commit is looked up once per process and
 * cached, because every receipt records it and a stress run writes
 * hundreds. The commit is the one the library was BUILT from (the
 * Makefile's stamp), never looked up at run time: the process may be a
 * Python interpreter or a program in another checkout. No commit is never
 * an error: it yields "unknown".
 */
#include "receipts/version.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char commit[64] = "unknown";
static pthread_once_t commit_once = PTHREAD_ONCE_INIT;

/* Keep only [0-9a-zA-Z] of a trimmed one-line answer; "" if none. */
static void set_commit(const char *s)
{
    size_t n = 0;
    while (*s && n + 1 < sizeof commit && isalnum((unsigned char)*s))
        commit[n++] = *s++;
    if (n)
        commit[n] = '\0';
}

/* The build's stamp (Makefile: $(BUILD)/gitcommit.h, passed with -include);
 * a build outside the Makefile has none. */
#ifndef DSV4Q_BUILD_COMMIT
#define DSV4Q_BUILD_COMMIT "unknown"
#endif

static void resolve_commit(void)
{
    const char *e = getenv("DSV4Q_GIT_COMMIT");

    if (e && *e) {
        set_commit(e);
        return;
    }
#ifdef DSV4Q_GIT_COMMIT
    set_commit(DSV4Q_GIT_COMMIT);
#else
    set_commit(DSV4Q_BUILD_COMMIT);
#endif
}

const char *dsv4q_git_commit(void)
{
    pthread_once(&commit_once, resolve_commit);
    return commit;
}
