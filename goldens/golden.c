/*
 * golden.c - record and check: the two drivers of golden.h, over the case
 * table (goldens/cases.c), the payload builder (goldens/payload.c) and the
 * store (goldens/store.c).
 *
 * record recomputes the selected cases and publishes their payloads and the
 * manifest; check proves each golden sound before it computes anything
 * (G3), then compares bit for bit (G4) and names the first difference:
 * tensor, flat index, both values (their bit patterns when they print the
 * same), and whether the synthesized checkpoint itself moved. Cases are
 * selected by key; the order of the report is the table's.
 */
#include "goldens/golden.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "goldens/payload.h"
#include "goldens/store.h"
#include "io/safetensors.h"
#include "io/sha256.h"
#include "oracle/formats.h"

/* ---- case selection ---------------------------------------------------------- */

/* sel[dsv4q_golden_count()]: 1 = selected. Returns 0 or -1 with err naming the bad key. */
static int select_cases(const char *ops, unsigned char *sel, int *all, char *err, size_t errlen)
{
    *all = !ops || !*ops || !strcmp(ops, "all");
    const int ncases = dsv4q_golden_count();
    for (int i = 0; i < ncases; i++) sel[i] = (unsigned char)*all;
    if (*all) return 0;
    const char *p = ops;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        char key[128];
        size_t n = (size_t)(e - p) < sizeof key - 1 ? (size_t)(e - p) : sizeof key - 1;
        memcpy(key, p, n);
        key[n] = 0;
        const gcase *c = dsv4q_golden_case(key);
        if (!strcmp(key, "all")) {
            for (int j = 0; j < ncases; j++) sel[j] = 1;
        } else if (!c) {
            size_t o = (size_t)snprintf(err, errlen, "unknown golden case '%s'; cases:", key);
            for (int j = 0; j < ncases && o < errlen; j++)
                o += (size_t)snprintf(err + o, errlen - o, " %s", dsv4q_golden_key(j));
            return -1;
        } else {
            sel[c - dsv4q_golden_case_at(0)] = 1;
        }
        p = e;
    }
    for (int i = 0; i < ncases; i++)
        if (sel[i]) return 0;
    return dsv4q_errf(err, errlen, "no golden case named in '%s'", ops);
}

/* ---- record ------------------------------------------------------------------ */

int dsv4q_golden_record(const char *dir, const char *ops, FILE *report, char *err, size_t errlen)
{
    unsigned char sel[DSV4Q_GOLDEN_MAX_CASES];
    const int ncases = dsv4q_golden_count();
    int all;
    if (select_cases(ops, sel, &all, err, errlen)) return DSV4Q_GOLDEN_ERROR;
    char ddir[4200], mpath[4200];
    snprintf(ddir, sizeof ddir, "%s/data", dir);
    snprintf(mpath, sizeof mpath, "%s/%s", dir, DSV4Q_GOLDEN_MANIFEST);
    if (dsv4q_mkdir_p(ddir)) {
        dsv4q_errf(err, errlen, "cannot create %s: %s", ddir, strerror(errno));
        return DSV4Q_GOLDEN_ERROR;
    }
    json_t *old = NULL;
    if (!all) {   /* keep the other cases' entries: the existing manifest must be sound */
        char merr[1024];
        if (access(mpath, F_OK) == 0 && !(old = dsv4q_golden_manifest_load(dir, merr, sizeof merr))) {
            dsv4q_errf(err, errlen, "cannot record a subset over an unreadable manifest (%s); record all cases", merr);
            return DSV4Q_GOLDEN_ERROR;
        }
    }
    json_t *entries[DSV4Q_GOLDEN_MAX_CASES] = {0};
    int rc = DSV4Q_GOLDEN_ERROR;
    for (int i = 0; i < ncases; i++) {
        const gcase *c = dsv4q_golden_case_at(i);
        if (!sel[i]) {
            json_t *e = old ? dsv4q_golden_manifest_find(old, c->key) : NULL;
            if (e) entries[i] = json_incref(e);
            continue;
        }
        uint8_t *pay = NULL;
        size_t npay = 0, nz = 0;
        long nvals = 0;
        char distinct[200], sha[65], file[200];
        double t0 = dsv4q_now_s();
        if (dsv4q_golden_build(c, dir, &pay, &npay, distinct, sizeof distinct, &nvals, err, errlen)) goto out;
        int w = dsv4q_golden_payload_write(dir, c->key, pay, npay, file, sha, &nz, err, errlen);
        free(pay);
        if (w) goto out;
        entries[i] = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s}", "key", c->key, "file", file, "payload_bytes",
                               (json_int_t)npay, "sha256_payload", sha, "profiles", distinct, "inputs", c->inputs);
        if (!entries[i]) {
            dsv4q_errf(err, errlen, "out of memory");
            goto out;
        }
        if (report)
            fprintf(report, "recorded %-16s %7zu bytes payload, %7zu compressed, %6ld values, %5.2f s; profiles %s\n",
                    c->key, npay, nz, nvals, dsv4q_now_s() - t0, distinct);
    }
    if (dsv4q_golden_manifest_write(dir, entries, ncases, err, errlen)) goto out;
    rc = DSV4Q_GOLDEN_OK;
out:
    for (int i = 0; i < ncases; i++) json_decref(entries[i]);
    json_decref(old);
    return rc;
}

/* ---- check ------------------------------------------------------------------- */

static void fmt_shape(const dsv4q_st_tensor *t, char *b, size_t n)
{
    size_t o = (size_t)snprintf(b, n, "%s [", dsv4q_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(b + o, n - o, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (o < n) snprintf(b + o, n - o, "]");
}

static int same_layout(const dsv4q_st_tensor *a, const dsv4q_st_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* Compare golden gs with computed cs tensor by tensor (name order); writes
 * the first difference into line. Returns the number of differing tensors. */
static long compare_tensors(const char *key, const dsv4q_st *gs, const dsv4q_st *cs, char *line, size_t n)
{
    size_t ng = dsv4q_st_count(gs), nc = dsv4q_st_count(cs), i = 0, j = 0;
    long ndiff = 0;
    line[0] = 0;
    while (i < ng || j < nc) {
        const dsv4q_st_tensor *a = i < ng ? dsv4q_st_at(gs, i) : NULL, *b = j < nc ? dsv4q_st_at(cs, j) : NULL;
        int c = !a ? 1 : !b ? -1 : strcmp(a->name, b->name);
        if (c < 0) {
            if (!ndiff) snprintf(line, n, "MISMATCH %s %s: in the golden, not produced by this build", key, a->name);
            ndiff++;
            i++;
            continue;
        }
        if (c > 0) {
            if (!ndiff) snprintf(line, n, "MISMATCH %s %s: produced by this build, not in the golden", key, b->name);
            ndiff++;
            j++;
            continue;
        }
        i++;
        j++;
        if (!same_layout(a, b)) {
            char sa[128], sb[128];
            fmt_shape(a, sa, sizeof sa);
            fmt_shape(b, sb, sizeof sb);
            if (!ndiff) snprintf(line, n, "MISMATCH %s %s: golden %s got %s", key, a->name, sa, sb);
            ndiff++;
            continue;
        }
        if (!memcmp(a->data, b->data, a->nbytes)) continue;
        size_t es = dsv4q_dtype_size(a->dtype);
        long first = -1, nel = 0;
        for (int64_t k = 0; k < a->numel; k++)
            if (memcmp((const uint8_t *)a->data + k * es, (const uint8_t *)b->data + k * es, es)) {
                if (first < 0) first = (long)k;
                nel++;
            }
        if (!ndiff) {
            double ga = dsv4q_decode_elem(a->dtype, a->data, (size_t)first);
            double gb = dsv4q_decode_elem(b->dtype, b->data, (size_t)first);
            char va[64], vb[64], bits[80] = "";
            snprintf(va, sizeof va, "%.17g", ga);
            snprintf(vb, sizeof vb, "%.17g", gb);
            if (!strcmp(va, vb)) {   /* same printed value: show the bit patterns */
                uint64_t xa = 0, xb = 0;
                memcpy(&xa, (const uint8_t *)a->data + first * (long)es, es);
                memcpy(&xb, (const uint8_t *)b->data + first * (long)es, es);
                snprintf(bits, sizeof bits, "; bits 0x%llx vs 0x%llx", (unsigned long long)xa,
                         (unsigned long long)xb);
            }
            snprintf(line, n, "MISMATCH %s %s [%ld]: golden %s got %s (%ld of %lld values differ%s)", key, a->name,
                     first, va, vb, nel, (long long)a->numel, bits);
        }
        ndiff++;
    }
    return ndiff;
}

static int check_case(const char *dir, const gcase *c, json_t *e, FILE *rep)
{
    char line[2048];
    uint8_t *gold = NULL, *mine = NULL;
    size_t ngold = 0, nmine = 0;
    dsv4q_st *gs = NULL, *cs = NULL;
    char err[1024], sha[65];
    long nvals = 0;
    int rc;
    double t0 = dsv4q_now_s();
    if (!e) {
        snprintf(line, sizeof line, "MISSING %s: no entry in %s/%s", c->key, dir, DSV4Q_GOLDEN_MANIFEST);
        rc = DSV4Q_GOLDEN_ERROR;
        goto done;
    }
    /* G3: integrity first, numbers only for a sound golden */
    if ((rc = dsv4q_golden_payload_load(dir, c->key, e, &gold, &ngold, line, sizeof line))) goto done;
    if (dsv4q_golden_build(c, dir, &mine, &nmine, NULL, 0, &nvals, err, sizeof err)) {
        snprintf(line, sizeof line, "ERROR %s: cannot compute: %s", c->key, err);
        rc = DSV4Q_GOLDEN_ERROR;
        goto done;
    }
    dsv4q_sha256_hex(mine, nmine, sha);
    if (dsv4q_st_open_buffer(&gs, gold, ngold, c->key, err, sizeof err) ||
        dsv4q_st_open_buffer(&cs, mine, nmine, c->key, err, sizeof err)) {
        snprintf(line, sizeof line, "ERROR %s: %s", c->key, err);
        rc = DSV4Q_GOLDEN_ERROR;
        goto done;
    }
    long nd = compare_tensors(c->key, gs, cs, line, sizeof line);
    if (nd) {
        size_t o = strlen(line);
        if (nd > 1) o += (size_t)snprintf(line + o, sizeof line - o, " [%ld tensors differ]", nd);
        const char *ka = "dsv4q.golden.checkpoint_sha256";
        const char *ga = dsv4q_st_meta(gs, ka), *ca = dsv4q_st_meta(cs, ka);
        if (ga && ca && strcmp(ga, ca) && o < sizeof line) {
            if (dsv4q_st_meta(gs, "dsv4q.golden.synth_version"))
                snprintf(line + o, sizeof line - o,
                         " [the synthesized checkpoint itself differs: model.safetensors SHA-256 %s, recorded %s; "
                         "io/synth.c changed]",
                         ca, ga);
            else /* a checkpoint file of the repository (model_tiny_v41) */
                snprintf(line + o, sizeof line - o,
                         " [the checkpoint itself differs: model.safetensors SHA-256 %s, recorded %s]", ca, ga);
        }
        rc = DSV4Q_GOLDEN_MISMATCH;
    } else {
        snprintf(line, sizeof line, "ok %s (%zu tensors, %ld values, %.2f s%s)", c->key, dsv4q_st_count(cs), nvals,
                 dsv4q_now_s() - t0,
                 strcmp(sha, json_string_value(json_object_get(e, "sha256_payload")))
                     ? "; tensors identical, payload metadata differs: re-record to refresh it"
                     : "");
        rc = DSV4Q_GOLDEN_OK;
    }
done:
    if (rep) {
        fprintf(rep, "%s\n", line);
        fflush(rep);
    }
    dsv4q_st_close(gs);
    dsv4q_st_close(cs);
    free(gold);
    free(mine);
    return rc;
}

int dsv4q_golden_check(const char *dir, const char *ops, FILE *rep)
{
    unsigned char sel[DSV4Q_GOLDEN_MAX_CASES];
    const int ncases = dsv4q_golden_count();
    int all;
    char err[2048];
    if (select_cases(ops, sel, &all, err, sizeof err)) {
        if (rep) fprintf(rep, "ERROR %s\n", err);
        return DSV4Q_GOLDEN_ERROR;
    }
    json_t *root = dsv4q_golden_manifest_load(dir, err, sizeof err);
    if (!root) {
        if (rep) fprintf(rep, "CORRUPT manifest: %s\n", err);
        return DSV4Q_GOLDEN_ERROR;
    }
    int worst = DSV4Q_GOLDEN_OK, nok = 0, nmis = 0, nbad = 0, n = 0;
    for (int i = 0; i < ncases; i++) {
        if (!sel[i]) continue;
        const gcase *c = dsv4q_golden_case_at(i);
        int r = check_case(dir, c, dsv4q_golden_manifest_find(root, c->key), rep);
        n++;
        if (r == DSV4Q_GOLDEN_OK) nok++;
        else if (r == DSV4Q_GOLDEN_MISMATCH) nmis++;
        else nbad++;
        if (r > worst) worst = r;
    }
    if (all) {   /* a manifest entry this build has no case for */
        json_t *cs = json_object_get(root, "cases");
        for (size_t i = 0; i < json_array_size(cs); i++) {
            const char *k = json_string_value(json_object_get(json_array_get(cs, i), "key"));
            if (!dsv4q_golden_case(k)) {
                if (rep) fprintf(rep, "STALE %s: in %s/%s but not a case of this build (re-record)\n", k, dir,
                                 DSV4Q_GOLDEN_MANIFEST);
                nbad++;
                worst = DSV4Q_GOLDEN_ERROR;
            }
        }
    }
    json_decref(root);
    if (rep)
        fprintf(rep, "golden check: %d cases in %s: %d ok, %d mismatch, %d corrupt/missing\n", n, dir, nok, nmis,
                nbad);
    return worst;
}
