/*
 * gates.c - the gate file parser and the default gate file (see gates.h);
 * the bound rule itself is harness/measure/verdict.c's (dsv4q_judge).
 *
 * Strict by design: a typo in a gate file (an op or metric name, "flor")
 * must be an error, not a silently ungated metric, because an ungated
 * metric is indistinguishable from a passing one in a summary.
 */
#include "base/file.h"
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gates/gates.h"
#include "harness/ops/ops.h"

static void metric_list(char *buf, size_t len)
{
    buf[0] = 0;
    for (int m = 0; m < DSV4Q_M_COUNT; m++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", m ? ", " : "", dsv4q_metric_name(m));
}

static int num(json_t *v, const char *origin, const char *path, const char *field, double *out, char *err,
               size_t errlen)
{
    if (!json_is_number(v)) {
        snprintf(err, errlen, "%s: %s.%s must be a number", origin, path, field);
        return -1;
    }
    double d = json_number_value(v);
    if (!isfinite(d) || d < 0) {
        snprintf(err, errlen, "%s: %s.%s = %g must be finite and >= 0", origin, path, field, d);
        return -1;
    }
    *out = d;
    return 0;
}

/* {"factor": F, "floor": G} or null */
static int rule(json_t *v, const char *origin, const char *path, dsv4q_gate_rule *r, char *err, size_t errlen)
{
    if (json_is_null(v)) {
        r->on = 0;
        return 0;
    }
    if (!json_is_object(v)) {
        snprintf(err, errlen, "%s: %s must be {\"factor\": F, \"floor\": G} or null", origin, path);
        return -1;
    }
    const char *k;
    json_t *x;
    dsv4q_gate_rule n = {1, 0, 0, {0, 0, 0}};
    int have_f = 0;
    json_object_foreach(v, k, x) {
        if (!strcmp(k, "factor")) {
            if (num(x, origin, path, k, &n.factor, err, errlen)) return -1;
            have_f = 1;
        } else if (!strcmp(k, "floor")) {
            if (num(x, origin, path, k, &n.floor, err, errlen)) return -1;
        } else if (!strcmp(k, "floor_u")) {
            if (json_is_object(x)) {
                static const char *const dn[3] = {"BF16", "F16", "F32"};
                const char *dk;
                json_t *dv;
                char p2[256];
                snprintf(p2, sizeof p2, "%s.floor_u", path);
                json_object_foreach(x, dk, dv) {
                    int di = -1;
                    for (int q = 0; q < 3; q++) if (!strcmp(dk, dn[q])) di = q;
                    if (di < 0) {
                        snprintf(err, errlen, "%s: %s: unknown storage dtype '%s' (BF16, F16, F32)", origin, p2, dk);
                        return -1;
                    }
                    if (num(dv, origin, p2, dk, &n.floor_u[di], err, errlen)) return -1;
                }
            } else {
                double u;
                if (num(x, origin, path, k, &u, err, errlen)) return -1;
                n.floor_u[0] = n.floor_u[1] = n.floor_u[2] = u;
            }
        } else if (!strcmp(k, "why")) {
            if (!json_is_string(x)) {
                snprintf(err, errlen, "%s: %s.why must be a string", origin, path);
                return -1;
            }
        } else {
            snprintf(err, errlen, "%s: %s: unknown key '%s' (factor, floor, floor_u, why)", origin, path, k);
            return -1;
        }
    }
    if (!have_f) {
        snprintf(err, errlen, "%s: %s: missing \"factor\"", origin, path);
        return -1;
    }
    *r = n;
    return 0;
}

static int metric_set(json_t *obj, const char *origin, const char *path, dsv4q_gate_rule *rules, char *err,
                      size_t errlen)
{
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "%s: %s must be an object of metrics", origin, path);
        return -1;
    }
    const char *k;
    json_t *x;
    json_object_foreach(obj, k, x) {
        if (!strcmp(k, "why")) continue;
        int m = dsv4q_metric_find(k);
        char p[256];
        snprintf(p, sizeof p, "%s.%s", path, k);
        if (m < 0) {
            char list[256];
            metric_list(list, sizeof list);
            snprintf(err, errlen, "%s: %s: unknown metric '%s' (metrics: %s)", origin, path, k, list);
            return -1;
        }
        if (rule(x, origin, p, &rules[m], err, errlen)) return -1;
    }
    return 0;
}

int dsv4q_gates_parse(dsv4q_gates *g, const char *text, const char *origin, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    snprintf(g->origin, sizeof g->origin, "%s", origin);
    g->greedy_min = -1;
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "%s:%d:%d: invalid JSON: %s", origin, je.line, je.column, je.text);
        return -1;
    }
    int rc = -1;
    dsv4q_gate_rule defaults[DSV4Q_M_COUNT];
    memset(defaults, 0, sizeof defaults);
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: the top level must be an object", origin);
        goto out;
    }
    json_t *ver = json_object_get(root, "dsv4q_gates");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
        snprintf(err, errlen, "%s: missing or unsupported \"dsv4q_gates\" version (this harness reads 1)", origin);
        goto out;
    }
    const char *k;
    json_t *x;
    json_object_foreach(root, k, x) {
        if (!strcmp(k, "dsv4q_gates")) continue;
        if (!strcmp(k, "description")) {
            if (!json_is_string(x)) { snprintf(err, errlen, "%s: description must be a string", origin); goto out; }
            snprintf(g->description, sizeof g->description, "%s", json_string_value(x));
        } else if (!strcmp(k, "defaults")) {
            if (metric_set(x, origin, "defaults", defaults, err, errlen)) goto out;
        } else if (!strcmp(k, "ops") || !strcmp(k, "model") || !strcmp(k, "stages")) {
            if (!json_is_object(x)) { snprintf(err, errlen, "%s: %s must be an object", origin, k); goto out; }
        } else {
            snprintf(err, errlen,
                     "%s: unknown top-level key '%s' (dsv4q_gates, description, defaults, ops, stages, model)", origin,
                     k);
            goto out;
        }
    }
    for (int o = 0; o < DSV4Q_OP_COUNT; o++) memcpy(g->op[o], defaults, sizeof defaults);
    json_t *ops = json_object_get(root, "ops");
    if (ops) {
        json_object_foreach(ops, k, x) {
            int o = dsv4q_op_find(k);
            if (o < 0) {
                snprintf(err, errlen, "%s: ops: unknown operator '%s'", origin, k);
                goto out;
            }
            char p[64];
            snprintf(p, sizeof p, "ops.%s", k);
            if (metric_set(x, origin, p, g->op[o], err, errlen)) goto out;
        }
    }
    /* after ops: a stage starts from its gate operator's final rules */
    json_t *stages = json_object_get(root, "stages");
    if (stages) {
        json_object_foreach(stages, k, x) {
            if (!strcmp(k, "why")) continue;
            const int st = dsv4q_stage_find(k);
            const int op = st >= 0 ? dsv4q_stage_gate_op(st) : -1;
            if (op < 0) {
                snprintf(err, errlen, "%s: stages: unknown stage '%s' (`dsv4q stages` lists them)", origin, k);
                goto out;
            }
            char p[64];
            snprintf(p, sizeof p, "stages.%s", k);
            memcpy(g->stage[st], g->op[op], sizeof g->stage[st]);
            if (metric_set(x, origin, p, g->stage[st], err, errlen)) goto out;
            g->stage_set[st] = 1;
        }
    }
    json_t *model = json_object_get(root, "model");
    if (model) {
        json_object_foreach(model, k, x) {
            if (!strcmp(k, "nrms")) {
                if (rule(x, origin, "model.nrms", &g->model_nrms, err, errlen)) goto out;
            } else if (!strcmp(k, "greedy_agreement_min")) {
                if (num(x, origin, "model", k, &g->greedy_min, err, errlen)) goto out;
                if (g->greedy_min > 1) {
                    snprintf(err, errlen, "%s: model.greedy_agreement_min = %g must be in [0, 1]", origin, g->greedy_min);
                    goto out;
                }
            } else if (strcmp(k, "why")) {
                snprintf(err, errlen, "%s: model: unknown key '%s' (nrms, greedy_agreement_min, why)", origin, k);
                goto out;
            }
        }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int dsv4q_gates_load(dsv4q_gates *g, const char *path, char *err, size_t errlen)
{
    char *buf;
    size_t n;
    if (dsv4q_file_read_all(path, "gate file", DSV4Q_LIMIT_JSON, &buf, &n, err, errlen) != 0)
        return -1;
    buf[n] = 0;
    int rc = dsv4q_gates_parse(g, buf, path, err, errlen);
    free(buf);
    return rc;
}

int dsv4q_gates_default(dsv4q_gates *g, char *err, size_t errlen)
{
    const char *env = getenv("DSV4Q_GATES");
    if (env && *env) return dsv4q_gates_load(g, env, err, errlen);
    if (access("gates/default.json", R_OK) == 0) return dsv4q_gates_load(g, "gates/default.json", err, errlen);
    /* next to the binary: build/dsv4q -> gates/default.json */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 40);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            strcpy(slash, "/../gates/default.json");
            if (access(exe, R_OK) == 0) return dsv4q_gates_load(g, exe, err, errlen);
        }
    }
    snprintf(err, errlen, "no default gate file (gates/default.json here or beside the binary, or $DSV4Q_GATES); "
                          "pass --gates FILE");
    return -1;
}

