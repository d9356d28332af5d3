/*
 * cmd_golden.c - `dsv4q golden record|check|list [--ops a,b] [--dir DIR]
 * [--threads N]`: the oracle's reference outputs (goldens/golden.h,
 * docs/goldens.md).
 *
 * Exit status: 0 all ok (record: written); 1 a numeric mismatch; 2 corrupt
 * or missing golden, unknown case, usage or I/O error.
 *
 * Default directory: ./goldens when it exists (check: when it holds
 * MANIFEST.json), else ../goldens next to the executable's directory (so
 * `./build/dsv4q golden check` works from anywhere inside the repository
 * layout), else ./goldens.
 */
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "goldens/golden.h"
#include "base/util.h"
#define now_s dsv4q_now_s   /* base/util.h */

static void golden_usage(FILE *f)
{
    fprintf(f, "usage: dsv4q golden record|check|list [--ops CASE[,CASE...]] [--dir DIR] [--threads N]\n"
               "  record   recompute the goldens and write DIR/data/CASE.st.zz and DIR/MANIFEST.json\n"
               "  check    recompute and compare bit-exactly with DIR (exit 0 ok, 1 mismatch, 2 corrupt/missing)\n"
               "  list     the cases and their inputs\n"
               "  default DIR: ./goldens, else the executable's ../goldens\n"
               "  threads: 1 unless --threads N or OMP_NUM_THREADS (results do not depend on it)\n");
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void default_dir(int for_check, char *out, size_t n)
{
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "goldens/%s", DSV4Q_GOLDEN_MANIFEST);
    if (for_check ? access(probe, F_OK) == 0 : is_dir("goldens")) {
        snprintf(out, n, "goldens");
        return;
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char cand[PATH_MAX + 16];
            snprintf(cand, sizeof cand, "%s/../goldens", exe);
            snprintf(probe, sizeof probe, "%s/%s", cand, DSV4Q_GOLDEN_MANIFEST);
            if (for_check ? access(probe, F_OK) == 0 : is_dir(cand)) {
                snprintf(out, n, "%s", cand);
                return;
            }
        }
    }
    snprintf(out, n, "goldens");
}

int dsv4q_cmd_golden(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        golden_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1], *ops = NULL, *dir = NULL;
    /* One thread unless asked otherwise: the cases are small, so thread
     * synchronisation costs more than it saves (badly so on a loaded
     * machine), and no result depends on the thread count. */
    const char *envt = getenv("OMP_NUM_THREADS");
    if (!envt || !*envt) omp_set_num_threads(1);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--ops") || !strcmp(a, "--dir") || !strcmp(a, "--threads")) && i + 1 >= argc) {
            fprintf(stderr, "dsv4q golden: option %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--ops")) ops = argv[++i];
        else if (!strcmp(a, "--dir")) dir = argv[++i];
        else if (!strcmp(a, "--threads")) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 1) {
                fprintf(stderr, "dsv4q golden: --threads needs a positive integer, got '%s'\n", argv[i]);
                return 2;
            }
            omp_set_num_threads((int)t);
        } else {
            fprintf(stderr, "dsv4q golden: unknown option '%s'\n", a);
            golden_usage(stderr);
            return 2;
        }
    }
    if (!strcmp(sub, "list")) {
        for (int i = 0; i < dsv4q_golden_count(); i++)
            printf("%-16s %s\n", dsv4q_golden_key(i), dsv4q_golden_inputs(i));
        return 0;
    }
    int check = !strcmp(sub, "check");
    if (!check && strcmp(sub, "record")) {
        fprintf(stderr, "dsv4q golden: unknown subcommand '%s'\n", sub);
        golden_usage(stderr);
        return 2;
    }
    char dbuf[PATH_MAX + 16];
    if (!dir) {
        default_dir(check, dbuf, sizeof dbuf);
        dir = dbuf;
    }
    double t0 = now_s();
    int rc;
    if (check) {
        rc = dsv4q_golden_check(dir, ops, stdout);
        printf("golden check: %s (%.1f s)\n", rc == 0 ? "PASS" : rc == 1 ? "FAIL (mismatch)" : "FAIL (corrupt/missing)",
               now_s() - t0);
    } else {
        char err[2048];
        rc = dsv4q_golden_record(dir, ops, stdout, err, sizeof err);
        if (rc) fprintf(stderr, "dsv4q golden record: %s\n", err);
        else printf("golden record: wrote %s/%s (%.1f s)\n", dir, DSV4Q_GOLDEN_MANIFEST, now_s() - t0);
    }
    return rc;
}
