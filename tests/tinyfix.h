/*
 * tinyfix.h - test fixtures shared by the tests that need a checkpoint:
 * a built-in config synthesized into a fresh temp directory, its removal,
 * and calling a dsv4q subcommand with a literal argument list.
 */
#ifndef DSV4Q_TINYFIX_H
#define DSV4Q_TINYFIX_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "io/config.h"
#include "io/synth.h"

/* mkdtemp /tmp/dsv4q-test-TAG-XXXXXX into root, synthesize built-in
 * `config` with `seed` into root/tiny (dir). 0 or -1 (message on stderr). */
static inline int tinyfix_make(char *root, size_t rlen, char *dir, size_t dlen, const char *tag,
                               const char *config, uint64_t seed)
{
    char err[512];
    snprintf(root, rlen, "/tmp/dsv4q-test-%s-XXXXXX", tag);
    if (!mkdtemp(root)) return -1;
    snprintf(dir, dlen, "%s/tiny", root);
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, config, err, sizeof err) || dsv4q_synth_write(&cfg, seed, dir, 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static inline int tinyfix_remove(const char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* cmd("name", args..., NULL): argv built from the literal list. */
static inline int tinyfix_call(int (*cmd)(int, char **), const char *a0, ...)
{
    char *argv[48];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && argc < 47; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return cmd(argc, argv);
}

#endif
