/*
 * cmd_golden.c - `dsv4q golden record|check|list`: the oracle's reference
 * outputs (goldens/golden.h, docs/goldens.md). Options: the command table
 * (cli/cmdtab.c, `dsv4q help golden`), read from dsv4q_golden_args.
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
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "goldens/golden.h"
#include "base/util.h"

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
    dsv4q_golden_args o;
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    /* One thread unless asked otherwise: the cases are small, so thread
     * synchronisation costs more than it saves (badly so on a loaded
     * machine), and no result depends on the thread count. */
    const char *envt = getenv("OMP_NUM_THREADS");
    if (o.threads_set || !envt || !*envt) omp_set_num_threads((int)o.c.threads);
    if (o.c.action == DSV4Q_GOLDEN_LIST) {
        for (int i = 0; i < dsv4q_golden_count(); i++)
            printf("%-16s %s\n", dsv4q_golden_key(i), dsv4q_golden_inputs(i));
        return 0;
    }
    const int check = o.c.action == DSV4Q_GOLDEN_CHECK;
    const char *dir = o.dir;
    char dbuf[PATH_MAX + 16];
    if (!dir) {
        default_dir(check, dbuf, sizeof dbuf);
        dir = dbuf;
    }
    double t0 = dsv4q_now_s();
    int rc;
    if (check) {
        rc = dsv4q_golden_check(dir, o.ops, stdout);
        printf("golden check: %s (%.1f s)\n", rc == 0 ? "PASS" : rc == 1 ? "FAIL (mismatch)" : "FAIL (corrupt/missing)",
               dsv4q_now_s() - t0);
    } else {
        char err[2048];
        rc = dsv4q_golden_record(dir, o.ops, stdout, err, sizeof err);
        if (rc) fprintf(stderr, "dsv4q golden record: %s\n", err);
        else printf("golden record: wrote %s/%s (%.1f s)\n", dir, DSV4Q_GOLDEN_MANIFEST, dsv4q_now_s() - t0);
    }
    return rc;
}
