/* testcli.h - run a dsv4q command in-process from a test with its stdout
 * discarded (stderr kept, for the failure messages). */
#ifndef DSV4Q_TESTCLI_H
#define DSV4Q_TESTCLI_H
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

/* cmd(argc, argv) with argv = a0, ... up to a NULL (at most 39 arguments);
 * returns its exit status. */
static inline int dsv4q_quiet_call(int (*cmd)(int, char **), const char *a0, ...)
{
    char *argv[40];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && argc < 39; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    int saved = dup(1);
    FILE *null = fopen("/dev/null", "w");
    dup2(fileno(null), 1);
    int rc = cmd(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(null);
    return rc;
}

#endif
