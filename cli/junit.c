/*
 * junit.c - JUnit XML report writer (see junit.h). Each suite's cases are
 * buffered in memory because the suite element carries their counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "cli/junit.h"

typedef struct suite {
    char *name, *body;
    size_t len;
    FILE *f;
    int tests, failures, errors, skipped;
    double time;
} suite;

struct dsv4q_junit {
    char *path;
    suite *s;
    int ns, cap;
};

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') fputs("&amp;", f);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c < 0x20 && c != '\n' && c != '\t') continue;
        else fputc(c, f);
    }
}

int dsv4q_junit_open(dsv4q_junit **j, const char *path, char *err, size_t errlen)
{
    *j = calloc(1, sizeof **j);
    if (!*j || !((*j)->path = strdup(path))) {
        free(*j);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static suite *cur(dsv4q_junit *j) { return j->ns ? &j->s[j->ns - 1] : NULL; }

void dsv4q_junit_suite(dsv4q_junit *j, const char *name)
{
    suite *c = cur(j);
    if (c && c->f) { fclose(c->f); c->f = NULL; }
    if (j->ns == j->cap) {
        int nc = j->cap ? 2 * j->cap : 4;
        suite *ns = realloc(j->s, sizeof *ns * (size_t)nc);
        if (!ns) return;
        j->s = ns;
        j->cap = nc;
    }
    c = &j->s[j->ns++];
    memset(c, 0, sizeof *c);
    c->name = strdup(name);
    c->f = open_memstream(&c->body, &c->len);
}

void dsv4q_junit_case(dsv4q_junit *j, const char *classname, const char *name, double seconds,
                      dsv4q_junit_kind kind, const char *message, const char *text)
{
    if (!cur(j)) dsv4q_junit_suite(j, "dsv4q");
    suite *c = cur(j);
    if (!c || !c->f) return;
    FILE *f = c->f;
    c->tests++;
    fputs("    <testcase classname=\"", f);
    esc(f, classname);
    fputs("\" name=\"", f);
    esc(f, name);
    fputc('"', f);
    if (seconds >= 0) {
        fprintf(f, " time=\"%.6f\"", seconds);
        c->time += seconds;
    }
    if (kind == DSV4Q_JUNIT_PASS) {
        fputs("/>\n", f);
        return;
    }
    const char *tag = kind == DSV4Q_JUNIT_FAILURE ? "failure" : kind == DSV4Q_JUNIT_ERROR ? "error" : "skipped";
    c->failures += kind == DSV4Q_JUNIT_FAILURE;
    c->errors += kind == DSV4Q_JUNIT_ERROR;
    c->skipped += kind == DSV4Q_JUNIT_SKIPPED;
    fprintf(f, ">\n      <%s message=\"", tag);
    esc(f, message);
    fputc('"', f);
    if (kind != DSV4Q_JUNIT_SKIPPED) fprintf(f, " type=\"%s\"", kind == DSV4Q_JUNIT_FAILURE ? "FAIL" : "ERROR");
    if (text && *text) {
        fputc('>', f);
        esc(f, text);
        fprintf(f, "</%s>\n", tag);
    } else {
        fputs("/>\n", f);
    }
    fputs("    </testcase>\n", f);
}

int dsv4q_junit_close(dsv4q_junit *j, char *err, size_t errlen)
{
    int rc = 0;
    suite *c = cur(j);
    if (c && c->f) { fclose(c->f); c->f = NULL; }
    dsv4q_aout out;
    char ferr[600];
    FILE *f = dsv4q_aout_open(&out, j->path, ferr, sizeof ferr);
    if (!f) {
        snprintf(err, errlen, "--junit %s", ferr);
        rc = -1;
    } else {
        int t = 0, fl = 0, e = 0, s = 0;
        double tm = 0;
        for (int i = 0; i < j->ns; i++) {
            t += j->s[i].tests; fl += j->s[i].failures; e += j->s[i].errors; s += j->s[i].skipped;
            tm += j->s[i].time;
        }
        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<testsuites name=\"dsv4q\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.6f\">\n",
                t, fl, e, s, tm);
        for (int i = 0; i < j->ns; i++) {
            suite *x = &j->s[i];
            fputs("  <testsuite name=\"", f);
            esc(f, x->name);
            fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.6f\">\n", x->tests,
                    x->failures, x->errors, x->skipped, x->time);
            if (x->body) fwrite(x->body, 1, x->len, f);
            fputs("  </testsuite>\n", f);
        }
        fputs("</testsuites>\n", f);
        if (dsv4q_aout_commit(&out, ferr, sizeof ferr)) {   /* every stdio error checked; no file on failure */
            snprintf(err, errlen, "--junit %s", ferr);
            rc = -1;
        }
    }
    for (int i = 0; i < j->ns; i++) {
        free(j->s[i].name);
        free(j->s[i].body);
    }
    free(j->s);
    free(j->path);
    free(j);
    return rc;
}
