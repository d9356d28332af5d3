/*
 * version.c - resolves the git commit recorded in receipts (version.h).
 *
 * Owns: dsv4q_git_commit. The commit is looked up once per process and
 * cached, because every receipt records it and a stress run writes
 * hundreds. Failure to find one is never an error: it yields "unknown".
 */
#include "receipts/version.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void resolve_commit(void)
{
    const char *e = getenv("DSV4Q_GIT_COMMIT");
    char exe[4096], cmd[4096 * 4 + 128], line[128], *slash, *q;
    const char *c;
    ssize_t n;
    FILE *p = NULL;

    if (e && *e) {
        set_commit(e);
        return;
    }
#ifdef DSV4Q_GIT_COMMIT
    set_commit(DSV4Q_GIT_COMMIT);
    return;
#endif
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    /* Single-quote the directory for the shell: ' -> '\'' */
    q = cmd;
    q += sprintf(q, "git -C '");
    for (c = exe; *c; c++) {
        if (*c == '\'') {
            memcpy(q, "'\\''", 4);
            q += 4;
        } else {
            *q++ = *c;
        }
    }
    sprintf(q, "' rev-parse --short HEAD 2>/dev/null");
    p = popen(cmd, "r");
    if (!p)
        return;
    if (fgets(line, sizeof line, p))
        set_commit(line);
    pclose(p);
}

const char *dsv4q_git_commit(void)
{
    pthread_once(&commit_once, resolve_commit);
    return commit;
}
