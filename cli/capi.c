/*
 * capi.c - the flat C API of libdsv4q.so (cli/dsv4q_capi.h): shape
 * validation from the operator table, the oracle on caller tensors, and the
 * qualify verdict of caller outputs, as JSON for bindings.
 *
 * It owns no numerics: every number comes from dsv4q_oracle_exec_* and
 * dsv4q_qualify_measure (the code `qualify` runs). What it adds is the
 * guard a foreign caller needs (shapes unified against the table's
 * symbolic shape strings, so a wrong shape is an error and never an
 * out-of-bounds read) and the location of the worst element, which the
 * harness does not report but a test failure message should. It lives in
 * cli/, the top layer, because it reaches the harness and the gate files
 * (gates/) alike, like the commands do.
 */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gates/gates.h"
#include "harness/ops/ops.h"
#include "harness/cases/cases.h"
#include "cli/dsv4q_capi.h"
#include "harness/backend/isolate.h"
#include "harness/ops/ops.h"
#include "harness/qualify/qualify.h"
#include "oracle/boundary.h"
#include "oracle/formats.h"

int dsv4q_capi_version(void) { return DSV4Q_CAPI_VERSION; }
void dsv4q_capi_free(void *p) { free(p); }
int dsv4q_capi_op_count(void) { return DSV4Q_OP_COUNT; }
int dsv4q_capi_op_find(const char *name) { return name ? dsv4q_op_find(name) : -1; }

/* The parameter's name: the leading identifier of its doc ("k (n_...)"). */
static void param_name(const char *doc, char *buf, size_t len)
{
    size_t n = 0;
    while (doc[n] && (isalnum((unsigned char)doc[n]) || doc[n] == '_') && n + 1 < len) n++;
    snprintf(buf, len, "%.*s", (int)n, doc);
}

static int optional_in(const dsv4q_op_tensor *t) { return t->doc && strstr(t->doc, "empty") != NULL; }

char *dsv4q_capi_ops_json(void)
{
    json_t *a = json_array();
    for (int op = 0; op < DSV4Q_OP_COUNT; op++) {
        const dsv4q_op_info *o = dsv4q_op_get(op);
        json_t *j = json_object(), *ins = json_array(), *outs = json_array(), *ps = json_array();
        for (int i = 0; i < o->nin; i++)
            json_array_append_new(ins, json_pack("{s:s,s:s,s:s,s:s,s:b}", "name", o->in[i].name, "shape", o->in[i].shape,
                                                 "dtype", o->in[i].dtype, "doc", o->in[i].doc ? o->in[i].doc : "",
                                                 "optional", optional_in(&o->in[i])));
        for (int i = 0; i < o->nout; i++)
            json_array_append_new(outs, json_pack("{s:s,s:s,s:s,s:s}", "name", o->out[i].name, "shape", o->out[i].shape,
                                                  "dtype", o->out[i].dtype, "doc", o->out[i].doc ? o->out[i].doc : ""));
        for (int i = 0; i < o->nparam; i++) {
            char nm[32];
            param_name(o->param[i], nm, sizeof nm);
            json_array_append_new(ps, json_pack("{s:s,s:s}", "name", nm, "doc", o->param[i]));
        }
        json_object_set_new(j, "op", json_integer(op));
        json_object_set_new(j, "name", json_string(o->name));
        json_object_set_new(j, "inputs", ins);
        json_object_set_new(j, "outputs", outs);
        json_object_set_new(j, "params", ps);
        json_object_set_new(j, "oracle", json_string(o->oracle ? o->oracle : ""));
        json_object_set_new(j, "reference", json_string(o->reference ? o->reference : ""));
        json_object_set_new(j, "notes", json_string(o->notes ? o->notes : ""));
        json_object_set_new(j, "selection", json_boolean(o->sel != 0));
        json_object_set_new(j, "exact", json_boolean(o->exact != 0));
        json_array_append_new(a, j);
    }
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

char *dsv4q_capi_metrics_json(void)
{
    json_t *a = json_array();
    for (int m = 0; m < DSV4Q_M_COUNT; m++) json_array_append_new(a, json_string(dsv4q_metric_name(m)));
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

/* ---- symbolic shapes ---------------------------------------------------- */

typedef struct env {
    char name[16][24];
    long long v[16];
    int n;
} env;

static long long *env_get(env *e, const char *name)
{
    for (int i = 0; i < e->n; i++)
        if (!strcmp(e->name[i], name)) return &e->v[i];
    return NULL;
}

static void env_set(env *e, const char *name, long long v)
{
    long long *p = env_get(e, name);
    if (p) { *p = v; return; }
    if (e->n == 16) return;
    snprintf(e->name[e->n], sizeof e->name[0], "%s", name);
    e->v[e->n++] = v;
}

/* Expression of one dimension: integers, names, + - * / and parentheses.
 * Sets *ok = 0 when a name is unbound or the text does not parse. */
typedef struct ex { const char *s; env *e; int ok; } ex;
static long long ex_sum(ex *x);
static long long ex_atom(ex *x)
{
    while (*x->s == ' ') x->s++;
    if (*x->s == '(') {
        x->s++;
        long long v = ex_sum(x);
        if (*x->s == ')') x->s++; else x->ok = 0;
        return v;
    }
    if (isdigit((unsigned char)*x->s)) return strtoll(x->s, (char **)&x->s, 10);
    char nm[24];
    size_t n = 0;
    while ((isalnum((unsigned char)x->s[n]) || x->s[n] == '_') && n + 1 < sizeof nm) { nm[n] = x->s[n]; n++; }
    nm[n] = 0;
    x->s += n;
    long long *p = n ? env_get(x->e, nm) : NULL;
    if (!p) { x->ok = 0; return 0; }
    return *p;
}
static long long ex_prod(ex *x)
{
    long long v = ex_atom(x);
    for (;;) {
        while (*x->s == ' ') x->s++;
        if (*x->s == '*') { x->s++; v *= ex_atom(x); }
        else if (*x->s == '/') { x->s++; long long d = ex_atom(x); if (d) v /= d; else x->ok = 0; }
        else return v;
    }
}
static long long ex_sum(ex *x)
{
    long long v = ex_prod(x);
    for (;;) {
        while (*x->s == ' ') x->s++;
        if (*x->s == '+') { x->s++; v += ex_prod(x); }
        else if (*x->s == '-') { x->s++; v -= ex_prod(x); }
        else return v;
    }
}

/* Split "[a,b*c]" into dims (no nesting commas in the table). */
static int dims_of(const char *shape, char d[6][40])
{
    int n = 0;
    const char *p = shape + (shape[0] == '[');
    while (*p && *p != ']' && n < 6) {
        size_t k = strcspn(p, ",]");
        snprintf(d[n++], 40, "%.*s", (int)k, p);
        p += k;
        if (*p == ',') p++;
    }
    return n;
}

static int is_name(const char *s)
{
    if (!isalpha((unsigned char)*s)) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return 0;
    return 1;
}

static void shape_str(const dsv4q_bt *t, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && i < 6 && n < len; i++) n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

/* A dtype's name for a message ("I32", "F64"), "dtype N" when it has none. */
static const char *bt_name(int32_t dt, char *buf, size_t len)
{
    const char *n = dsv4q_dtype_name((dsv4q_dtype)dt);
    if (n) return n;
    snprintf(buf, len, "dtype %d", (int)dt);
    return buf;
}

/* "[i,j,k]": the coordinates of flat index i in t (row-major). */
static void coords_str(const dsv4q_bt *t, long long i, char *buf, size_t len)
{
    long long idx[6] = {0};
    for (int k = t->ndim - 1; k >= 0 && k < 6; k--) {
        const long long e = t->shape[k] > 0 ? t->shape[k] : 1;
        idx[k] = i % e;
        i /= e;
    }
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < t->ndim && k < 6 && n < len; k++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", k ? "," : "", idx[k]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

/* The ranges of the params every operator reads the same way, checked on
 * caller values (the case builders only make valid ones): an epsilon is
 * added to a mean square or a sum, so a negative one can make the oracle
 * take the root of a negative number; iters (Sinkhorn rounds) is cast to
 * int, so 20.5 would silently run 20 and 0 or -1 none; a switch must be
 * 0 or 1 and a count, size or position an integer. hc_pre41's own check
 * is stricter (norm_eps > 0). 0, or -1 + a message naming the param. */
static int param_range(const dsv4q_op_info *o, const char *nm, double v, char *err, size_t errlen)
{
    const size_t n = strlen(nm);
    if (n >= 3 && !strcmp(nm + n - 3, "eps") && !(v >= 0)) {
        snprintf(err, errlen, "%s: param %s = %g is out of range: %s must be >= 0 (an epsilon)", o->name, nm, v, nm);
        return -1;
    }
    if (!strcmp(nm, "iters") && !(v >= 1 && v <= 1000 && v == floor(v))) {
        snprintf(err, errlen, "%s: param iters = %g is out of range: an integer in 1..1000 (Sinkhorn rounds)", o->name,
                 v);
        return -1;
    }
    /* A switch is read as != 0 and a count or position is cast to an
     * integer, so ue8m0 = 1.5 ran as 1 and k = 8.5 was refused only as
     * "cannot size output": both are named here. */
    static const char *const flags[] = {"ue8m0", "bf16_out", "inverse", "rotate", "norm_topk_prob"};
    static const char *const ints[] = {"k",         "block", "ratio", "rope_dim", "original_seq_len",
                                       "start_pos", "p",     "w",     "topb",     "B",
                                       "start",     "pad",   "V",     "k0",       "score_func"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (!strcmp(nm, flags[i]) && v != 0 && v != 1) {
            snprintf(err, errlen, "%s: param %s = %g is out of range: %s must be 0 or 1 (a switch)", o->name, nm, v,
                     nm);
            return -1;
        }
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (!strcmp(nm, ints[i]) && v != floor(v)) {
            snprintf(err, errlen,
                     "%s: param %s = %g is out of range: %s must be an integer (a count, size or position)", o->name,
                     nm, v, nm);
            return -1;
        }
    return 0;
}

/* A NaN in a float input makes every metric of the outputs NaN (a FAIL
 * that says nothing about the kernel): refuse it, naming the first one.
 * +-inf stays allowed (masked scores, an absent sink are -inf). */
static int nan_input(const dsv4q_op_info *o, const dsv4q_bt *t, int i, char *err, size_t errlen)
{
    if (t->ndim == 0 || t->dtype != DSV4Q_BT_F32 || !t->data) return 0;
    const int64_t n = dsv4q_bt_numel(t);
    const float *v = t->data;
    for (int64_t k = 0; k < n; k++)
        if (isnan(v[k])) {
            char co[96];
            coords_str(t, k, co, sizeof co);
            snprintf(err, errlen, "%s: input %s has a NaN at index %s (flat %lld): NaN inputs are not judged", o->name,
                     o->in[i].name, co, (long long)k);
            return -1;
        }
    return 0;
}

static int bad_shape(const dsv4q_op_info *o, const dsv4q_bt *t, const char *want, const char *why, char *err, size_t errlen)
{
    char got[96];
    shape_str(t, got, sizeof got);
    snprintf(err, errlen, "%s: input %s has shape %s, expected %s%s%s", o->name, t->name ? t->name : "?", got, want,
             why[0] ? ": " : "", why);
    return -1;
}

/* The raw stored form of a 2-D weight [N,K] (dsv4q_backend.h). */
static int check_raw(const dsv4q_op_info *o, const dsv4q_bt *t, char *err, size_t errlen)
{
    if (!t->raw) return 0;
    long long N = t->shape[0], K = t->ndim > 1 ? t->shape[1] : 1;
    char want[128] = "";
    int ok = 1;
    switch (t->raw_dtype) {
    case DSV4Q_BT_F32:
    case DSV4Q_BT_BF16:
        ok = t->raw_ndim == t->ndim && t->raw_shape[0] == N && (t->ndim < 2 || t->raw_shape[1] == K) && !t->raw_scale;
        snprintf(want, sizeof want, "raw [%lld,%lld] and no scale", N, K);
        break;
    case DSV4Q_BT_F8_E4M3: {
        /* V4's 128x128 blocks or V4.1's 32x32: the block is read from the
         * scale grid, as the oracle reads it (dsv4q_weight_blk) */
        const long long b = t->scale_shape[0] == (N + 31) / 32 && t->scale_shape[1] == (K + 31) / 32 ? 32 : 128;
        ok = t->ndim == 2 && t->raw_ndim == 2 && t->raw_shape[0] == N && t->raw_shape[1] == K && t->raw_scale &&
             t->scale_shape[0] == (N + b - 1) / b && t->scale_shape[1] == (K + b - 1) / b &&
             (t->scale_dtype == DSV4Q_BT_F8_E8M0 || t->scale_dtype == DSV4Q_BT_F32);
        snprintf(want, sizeof want,
                 "F8_E4M3 raw [%lld,%lld] with E8M0/F32 scale [%lld,%lld] (128x128 blocks) or "
                 "[%lld,%lld] (32x32)",
                 N, K, (N + 127) / 128, (K + 127) / 128, (N + 31) / 32, (K + 31) / 32);
        break;
    }
    case DSV4Q_BT_I8:
        ok = t->ndim == 2 && K % 32 == 0 && t->raw_ndim == 2 && t->raw_shape[0] == N && t->raw_shape[1] == K / 2 &&
             t->raw_scale && t->scale_shape[0] == N && t->scale_shape[1] == K / 32 && t->scale_dtype == DSV4Q_BT_F8_E8M0;
        snprintf(want, sizeof want, "packed E2M1 raw I8 [%lld,%lld] with E8M0 scale [%lld,%lld] (K a multiple of 32)",
                 N, K / 2, N, K / 32);
        break;
    default:
        snprintf(err, errlen, "%s: input %s: raw dtype %d is not BF16, F8_E4M3, I8 (packed E2M1) or F32", o->name,
                 t->name ? t->name : "?", t->raw_dtype);
        return -1;
    }
    if (!ok) {
        snprintf(err, errlen, "%s: input %s (decoded [%lld,%lld]): raw form does not match, expected %s", o->name,
                 t->name ? t->name : "?", N, K, want);
        return -1;
    }
    return 0;
}

int dsv4q_capi_shapes(int op, const dsv4q_bt *in, int nin, const double *param, int nparam, dsv4q_bt *out, int nout,
                      char *err, size_t errlen)
{
    const dsv4q_op_info *o = dsv4q_op_get(op);
    if (!o) { snprintf(err, errlen, "unknown operator index %d", op); return -1; }
    if (nin != o->nin || nout != o->nout || nparam != o->nparam) {
        snprintf(err, errlen, "%s: takes %d inputs, %d params and gives %d outputs (got %d, %d, %d)", o->name, o->nin,
                 o->nparam, o->nout, nin, nparam, nout);
        return -1;
    }
    env e = {0};
    for (int i = 0; i < nparam; i++) {
        char nm[32];
        param_name(o->param[i], nm, sizeof nm);
        if (!isfinite(param[i])) { snprintf(err, errlen, "%s: param %s is not finite", o->name, nm); return -1; }
        if (param_range(o, nm, param[i], err, errlen)) return -1;
        if (param[i] == floor(param[i]) && fabs(param[i]) < 1e15) env_set(&e, nm, (long long)param[i]);
    }
    if (o->shape_names) {   /* names the shapes use beyond the tensors' own dims (compressor: coff) */
        const char *nm[4];
        long long v[4];
        for (int i = 0, n = o->shape_names(param, nm, v); i < n; i++) env_set(&e, nm[i], v[i]);
    }
    /* pass 1: ndim, dtype, and bind the plain names */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nin; i++) {
            const dsv4q_bt *t = &in[i];
            char d[6][40];
            int nd = dims_of(o->in[i].shape, d);
            if (t->ndim == 0) {
                if (!optional_in(&o->in[i])) {
                    snprintf(err, errlen, "%s: input %s is required (shape %s)", o->name, o->in[i].name, o->in[i].shape);
                    return -1;
                }
                continue;
            }
            if (pass == 0) {
                const int want_i32 = !strcmp(o->in[i].dtype, "I32"), want_i64 = !strcmp(o->in[i].dtype, "I64");
                if (t->dtype != (want_i32 ? DSV4Q_BT_I32 : want_i64 ? DSV4Q_BT_I64 : DSV4Q_BT_F32)) {
                    char dn[24];
                    snprintf(err, errlen, "%s: input %s must be %s (got %s)", o->name, o->in[i].name,
                             want_i32   ? "int32"
                             : want_i64 ? "int64"
                                        : "float32",
                             bt_name(t->dtype, dn, sizeof dn));
                    return -1;
                }
                if (!t->data) { snprintf(err, errlen, "%s: input %s has no data", o->name, o->in[i].name); return -1; }
                if (t->ndim != nd) return bad_shape(o, t, o->in[i].shape, "wrong number of dimensions", err, errlen);
            }
            for (int k = 0; k < nd; k++) {
                if (t->shape[k] < 0) return bad_shape(o, t, o->in[i].shape, "negative extent", err, errlen);
                char why[96];
                if (is_name(d[k])) {
                    long long *v = env_get(&e, d[k]);
                    if (!v) { env_set(&e, d[k], t->shape[k]); continue; }
                    if (*v == t->shape[k]) continue;
                    snprintf(why, sizeof why, "%s = %lld from the other tensors or params", d[k], *v);
                    return bad_shape(o, t, o->in[i].shape, why, err, errlen);
                }
                if (pass == 0) continue;
                ex x = {d[k], &e, 1};
                long long v = ex_sum(&x);
                if (x.ok && v != t->shape[k]) {
                    snprintf(why, sizeof why, "%s = %lld", d[k], v);
                    return bad_shape(o, t, o->in[i].shape, why, err, errlen);
                }
            }
            if (pass == 1 && (check_raw(o, t, err, errlen) || nan_input(o, t, i, err, errlen))) return -1;
        }
    /* value constraints the oracle relies on (the operator's own check) */
    if (o->check) {
        dsv4q_bcall call = {.op = op, .nin = nin, .in = in, .param = param, .nparam = nparam};
        if (o->check(&call, err, errlen)) return -1;
    }
    for (int i = 0; i < nout; i++) {
        char d[6][40];
        int nd = dims_of(o->out[i].shape, d);
        memset(&out[i], 0, sizeof out[i]);
        out[i].name = o->out[i].name;
        out[i].dtype = !strcmp(o->out[i].dtype, "I32") ? DSV4Q_BT_I32 : DSV4Q_BT_F32;
        out[i].ndim = nd;
        for (int k = 0; k < nd; k++) {
            ex x = {d[k], &e, 1};
            long long v = ex_sum(&x);
            if (!x.ok || v < 0) {
                snprintf(err, errlen, "%s: cannot size output %s %s from the inputs", o->name, o->out[i].name, o->out[i].shape);
                return -1;
            }
            out[i].shape[k] = v;
        }
    }
    return 0;
}

/* ---- oracle ------------------------------------------------------------- */

int dsv4q_capi_profile(const char *profile, const char *boundary, uint64_t *bs, char *err, size_t errlen)
{
    const char *p = profile && profile[0] ? profile : "source";
    if (dsv4q_profile_set(p, bs)) {
        snprintf(err, errlen, "unknown profile '%s' (source, model, qat, exact)", p);
        return -1;
    }
    if (boundary && boundary[0] && dsv4q_boundary_apply(bs, boundary, err, errlen)) return -1;
    return 0;
}

static int same_shape(const dsv4q_bt *a, const dsv4q_bt *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] != b->shape[k]) return 0;
    return 1;
}

static int check_outs(const dsv4q_op_info *o, const dsv4q_bt *tmpl, const dsv4q_bt *out, int nout, int cand, char *err,
                      size_t errlen)
{
    for (int i = 0; i < nout; i++) {
        char got[96], want[96];
        if (!out[i].data) { snprintf(err, errlen, "%s: output %s has no buffer", o->name, tmpl[i].name); return -1; }
        if (!same_shape(&out[i], &tmpl[i])) {
            shape_str(&out[i], got, sizeof got);
            shape_str(&tmpl[i], want, sizeof want);
            snprintf(err, errlen, "%s: output %s has shape %s, expected %s (%s from the inputs)", o->name, tmpl[i].name,
                     got, want, o->out[i].shape);
            return -1;
        }
        if (cand) {
            int32_t dt = out[i].dtype;
            int ok = tmpl[i].dtype == DSV4Q_BT_I32 ? dt == DSV4Q_BT_I32
                                                   : dt == DSV4Q_BT_F32 || dt == DSV4Q_BT_BF16 || dt == DSV4Q_BT_F16;
            if (!ok) {
                char dn[24];
                snprintf(err, errlen, "%s: output %s must be %s (got %s)", o->name, tmpl[i].name,
                         tmpl[i].dtype == DSV4Q_BT_I32 ? "int32" : "float32, bfloat16 or float16",
                         bt_name(dt, dn, sizeof dn));
                return -1;
            }
        }
    }
    return 0;
}

int dsv4q_capi_oracle(int op, int width, const char *profile, const char *boundary, const dsv4q_bt *in, int nin,
                      const double *param, int nparam, dsv4q_bt *out, int nout, char *err, size_t errlen)
{
    dsv4q_bt tmpl[DSV4Q_OPS_MAX_T];
    uint64_t bs;
    if (width != 32 && width != 64) { snprintf(err, errlen, "width must be 32 or 64 (got %d)", width); return -1; }
    if (dsv4q_capi_shapes(op, in, nin, param, nparam, tmpl, nout, err, errlen)) return -1;
    if (check_outs(dsv4q_op_get(op), tmpl, out, nout, 0, err, errlen)) return -1;
    if (dsv4q_capi_profile(profile, boundary, &bs, err, errlen)) return -1;
    dsv4q_bcall call = {op, nin, nout, in, tmpl, param, nparam, bs, "capi", NULL, NULL};
    void *dst[DSV4Q_OPS_MAX_T];
    for (int i = 0; i < nout; i++) dst[i] = out[i].data;
    return width == 64 ? dsv4q_oracle_exec(64, bs, &call, dst, err, errlen) : dsv4q_oracle_exec(32, bs, &call, dst, err, errlen);
}

/* ---- check -------------------------------------------------------------- */

static json_t *jnum(double v)
{
    if (isnan(v)) return json_null();
    if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static double cand_at(const dsv4q_bt *t, long i)
{
    if (t->dtype == DSV4Q_BT_F32) return ((const float *)t->data)[i];
    uint16_t h = ((const uint16_t *)t->data)[i];
    return t->dtype == DSV4Q_BT_BF16 ? dsv4q_bf16_decode(h) : dsv4q_f16_decode(h);
}

static json_t *coords(const dsv4q_bt *t, long i)
{
    json_t *a = json_array();
    long long st = 1, idx[6];
    for (int k = t->ndim - 1; k >= 0; k--) {
        idx[k] = (i / st) % (t->shape[k] ? t->shape[k] : 1);
        st *= t->shape[k] ? t->shape[k] : 1;
    }
    for (int k = 0; k < t->ndim; k++) json_array_append_new(a, json_integer(idx[k]));
    return a;
}

/* Where the candidate is worst: a non-finite mismatch first, else the
 * largest |a - b| (the max_abs metric's element), and the element with the
 * most ULPs ("ulp": where an ulp_max failure sits); exact outputs: the first
 * element that differs; selections: the first row whose set differs. */
static json_t *worst_of(const dsv4q_bt *tmpl, const dsv4q_bt *cand, const void *ref, int rowfloor, int exact)
{
    long n = (long)dsv4q_bt_numel(tmpl);
    json_t *w = json_object();
    if (tmpl->dtype == DSV4Q_BT_I32 && exact) {   /* exact outputs: the first element that differs */
        const int32_t *a = cand->data, *b = ref;
        for (long i = 0; i < n; i++)
            if (a[i] != b[i]) {
                json_object_set_new(w, "index", json_integer(i));
                json_object_set_new(w, "coords", coords(tmpl, i));
                json_object_set_new(w, "candidate", json_integer(a[i]));
                json_object_set_new(w, "reference", json_integer(b[i]));
                break;
            }
        return w;
    }
    if (tmpl->dtype == DSV4Q_BT_I32) {
        long k = tmpl->ndim ? (long)tmpl->shape[tmpl->ndim - 1] : 1;
        const int32_t *a = cand->data, *b = ref;
        for (long r = 0; k > 0 && r < n / k; r++) {
            int diff = 0;
            for (long j = 0; j < k && !diff; j++) {
                int in = 0;
                for (long u = 0; u < k; u++) in |= b[r * k + u] == a[r * k + j];
                diff = !in;
            }
            if (!diff) continue;
            json_t *ca = json_array(), *ra = json_array();
            for (long j = 0; j < k && j < 16; j++) {
                json_array_append_new(ca, json_integer(a[r * k + j]));
                json_array_append_new(ra, json_integer(b[r * k + j]));
            }
            json_object_set_new(w, "row", json_integer(r));
            json_object_set_new(w, "candidate", ca);
            json_object_set_new(w, "reference", ra);
            return w;
        }
        return w;
    }
    const double *b = ref;
    long at = -1, uat = -1;
    double worst = -1, uworst = -1;
    double *av = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!av) return w;
    for (long i = 0; i < n; i++) av[i] = cand_at(cand, i);
    for (long i = 0; i < n; i++) {
        if (!isfinite(av[i]) && av[i] != b[i]) { at = i; break; }
        double d = fabs(av[i] - b[i]);
        if (isfinite(d) && d > worst) { worst = d; at = i; }
    }
    /* the ulp_max element, counted exactly as qualify counts it */
    long last = tmpl->ndim ? (long)tmpl->shape[tmpl->ndim - 1] : 1;
    uat = dsv4q_metrics_ulp_argmax(av, b, n, last, cand->dtype, rowfloor, &uworst);
    free(av);
    if (at < 0) return w;
    json_object_set_new(w, "index", json_integer(at));
    json_object_set_new(w, "coords", coords(tmpl, at));
    json_object_set_new(w, "candidate", jnum(cand_at(cand, at)));
    json_object_set_new(w, "reference", jnum(b[at]));
    if (uat >= 0)
        json_object_set_new(w, "ulp", json_pack("{s:o,s:o,s:o,s:o}", "coords", coords(tmpl, uat), "candidate",
                                                 jnum(cand_at(cand, uat)), "reference", jnum(b[uat]), "ulps",
                                                 jnum(uworst)));
    return w;
}

/* The mismatched elements of output i (torch's assert_close prints such a
 * count): floats: the elements whose ULP distance, counted as ulp_max
 * counts it, is over the gated ulp_max bound (or, with ulp_max not gated,
 * over 0: unlike the reference rounded to the storage dtype); selections
 * and exact I32 outputs: the flips. {count, n, what}; NULL for an output
 * whose values follow the candidate's picks (moe_gate weights: they are
 * realigned before they are compared, so an element count would compare
 * the wrong pairs). */
static json_t *mismatched(const dsv4q_case *c, int i, const dsv4q_bt *cand, const void *ref, const dsv4q_qcase *r,
                          const dsv4q_gates *g)
{
    const dsv4q_bt *t = &c->out[i];
    const long n = (long)dsv4q_bt_numel(t);
    const dsv4q_op_info *o = dsv4q_op_get(c->op);
    char what[160];
    if ((o->per_pick >> i) & 1u) return NULL;
    if (t->dtype == DSV4Q_BT_I32) {
        const double f = r->m[i].v[DSV4Q_M_FLIPS];
        if (isnan(f)) return NULL;
        snprintf(what, sizeof what, "%s",
                 dsv4q_op_exact(c->op, i) ? "elements unlike the reference (an exact output)"
                                          : "picks outside the reference's set and its tie-run at the cut (flips)");
        return json_pack("{s:I,s:I,s:s}", "count", (json_int_t)f, "n", (json_int_t)n, "what", what);
    }
    const dsv4q_gate_rule *rule = &g->op[c->op][DSV4Q_M_ULP_MAX];
    const double bound = rule->on ? dsv4q_gate_bound(rule, r->lvl[i].v[DSV4Q_M_ULP_MAX], r->dtype[i]) : 0;
    double *av = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!av) return NULL;
    for (long k = 0; k < n; k++) av[k] = cand_at(cand, k);
    const long last = t->ndim ? (long)t->shape[t->ndim - 1] : 1;
    const long over = dsv4q_metrics_ulp_over(av, ref, n, last, cand->dtype, dsv4q_op_ulp_rowfloor(c->op, i), bound);
    free(av);
    char dn[24];
    if (rule->on)
        snprintf(what, sizeof what, "elements more than %.4g %s ulps from the reference (the ulp_max bound%s)", bound,
                 bt_name(cand->dtype, dn, sizeof dn), dsv4q_op_ulp_rowfloor(c->op, i) ? ", row-floored" : "");
    else
        snprintf(what, sizeof what, "elements unlike the reference rounded to %s (ulp_max is not gated)",
                 bt_name(cand->dtype, dn, sizeof dn));
    return json_pack("{s:I,s:I,s:s}", "count", (json_int_t)over, "n", (json_int_t)n, "what", what);
}

/* On a FAIL: the same candidate judged under every other profile (with the
 * same boundary deviations), so a report can say when the declared
 * profile, not the kernel, is the reason (a correct FP32 kernel checked
 * against source's BF16 storage). Per profile: its verdict and, for the
 * first failing gated row of the declared profile (metric, output), that
 * metric's value and bound under it. NULL when nothing could be measured. */
static json_t *other_profiles(const dsv4q_case *c, const char *profile, const char *boundary,
                              void *bufs[2][DSV4Q_OPS_MAX_T], int32_t dt[2][DSV4Q_OPS_MAX_T], const dsv4q_gates *g,
                              const dsv4q_qcase *r)
{
    int fm = -1;
    for (int m = 0; m < DSV4Q_M_COUNT && fm < 0; m++)
        if (r->row[m].out >= 0 && r->row[m].gated && !r->row[m].pass) fm = m;
    dsv4q_qcase *q = malloc(sizeof *q);
    json_t *a = json_array();
    const char *given = profile && profile[0] ? profile : "source";
    for (int p = 0; q && dsv4q_profile_names[p]; p++) {
        uint64_t bs;
        char e[512];
        if (!strcmp(dsv4q_profile_names[p], given) ||
            dsv4q_capi_profile(dsv4q_profile_names[p], boundary, &bs, e, sizeof e) ||
            dsv4q_qualify_measure(c, bs, bufs, dt, g, q, NULL, e, sizeof e))
            continue;
        json_t *j =
            json_pack("{s:s,s:s}", "profile", dsv4q_profile_names[p], "verdict", dsv4q_verdict_name(q->verdict));
        if (fm >= 0 && q->verdict != DSV4Q_V_ERROR) {
            const int i = r->row[fm].out;
            const dsv4q_judgement jg = dsv4q_judge(&g->op[c->op][fm], q->m[i].v[fm], q->lvl[i].v[fm], q->dtype[i]);
            json_object_set_new(j, "metric", json_string(dsv4q_metric_name(fm)));
            json_object_set_new(j, "output", json_string(c->out[i].name));
            json_object_set_new(j, "value", jnum(q->m[i].v[fm]));
            json_object_set_new(j, "bound", jnum(jg.bound));
        }
        json_array_append_new(a, j);
    }
    free(q);
    return a;
}

static char *check_core(const dsv4q_case *c, const char *profile, const char *boundary, const char *gates_path,
                        const dsv4q_bt *cand, const dsv4q_bt *cand2, int nout, char *err, size_t errlen)
{
    const dsv4q_op_info *o = dsv4q_op_get(c->op);
    dsv4q_gates *g = malloc(sizeof *g);
    dsv4q_qcase *r = malloc(sizeof *r);
    char *s = NULL;
    uint64_t bs;
    void *ref[DSV4Q_OPS_MAX_T] = {0};
    if (!g || !r) { snprintf(err, errlen, "out of memory"); goto out; }
    if (nout != c->nout) { snprintf(err, errlen, "%s: %d outputs expected, got %d", o->name, c->nout, nout); goto out; }
    if (check_outs(o, c->out, cand, nout, 1, err, errlen) || (cand2 && check_outs(o, c->out, cand2, nout, 1, err, errlen)))
        goto out;
    if (dsv4q_capi_profile(profile, boundary, &bs, err, errlen)) goto out;
    if (gates_path && gates_path[0] ? dsv4q_gates_load(g, gates_path, err, errlen) : dsv4q_gates_default(g, err, errlen))
        goto out;
    void *bufs[2][DSV4Q_OPS_MAX_T];
    int32_t dt[2][DSV4Q_OPS_MAX_T];
    for (int i = 0; i < nout; i++) {
        bufs[0][i] = cand[i].data;
        bufs[1][i] = (cand2 ? cand2 : cand)[i].data;
        dt[0][i] = cand[i].dtype;
        dt[1][i] = (cand2 ? cand2 : cand)[i].dtype;
    }
    if (dsv4q_qualify_measure(c, bs, bufs, dt, g, r, ref, err, errlen)) goto out;
    json_t *j = json_object(), *outs = json_array(), *rows = json_object();
    json_object_set_new(j, "op", json_string(o->name));
    json_object_set_new(j, "case", json_string(c->key));
    json_object_set_new(j, "profile", json_string(profile && profile[0] ? profile : "source"));
    json_object_set_new(j, "boundary", json_string(boundary ? boundary : ""));
    json_object_set_new(j, "gates", json_string(g->origin));
    json_object_set_new(j, "verdict", json_string(dsv4q_verdict_name(r->verdict)));
    if (r->msg[0]) json_object_set_new(j, "message", json_string(r->msg));
    for (int i = 0; i < nout && r->verdict != DSV4Q_V_ERROR; i++) {
        json_t *jo = json_object(), *ms = json_object(), *h = json_array();
        json_object_set_new(jo, "name", json_string(c->out[i].name));
        json_object_set_new(jo, "dtype", json_string(dsv4q_dtype_name((dsv4q_dtype)r->dtype[i])));
        json_object_set_new(jo, "shape", json_pack("[]"));
        for (int k = 0; k < c->out[i].ndim; k++) json_array_append_new(json_object_get(jo, "shape"), json_integer(c->out[i].shape[k]));
        json_object_set_new(jo, "n", json_integer(r->m[i].n));
        for (int m = 0; m < DSV4Q_M_COUNT; m++) {
            double v = r->m[i].v[m], l = r->lvl[i].v[m];
            if (isnan(v) && isnan(l)) continue;
            const dsv4q_gate_rule *rule = &g->op[c->op][m];
            double b = dsv4q_gate_bound(rule, l, r->dtype[i]);
            if (m == DSV4Q_M_RERUN && !cand2) { /* one run given: nothing to compare, not a pass */
                json_object_set_new(ms, dsv4q_metric_name(m),
                                    json_pack("{s:n,s:n,s:n,s:b,s:n,s:b}", "value", "level", "bound", "gated", rule->on,
                                              "pass", "run", 0));
                continue;
            }
            json_object_set_new(ms, dsv4q_metric_name(m),
                                json_pack("{s:o,s:o,s:o,s:b,s:b}", "value", jnum(v), "level", jnum(l), "bound",
                                          rule->on ? jnum(b) : json_null(), "gated", rule->on,
                                          "pass", !rule->on || dsv4q_gate_pass(v, b)));
        }
        json_object_set_new(jo, "metrics", ms);
        for (int k = 0; k < DSV4Q_ULP_BUCKETS; k++) json_array_append_new(h, json_integer(r->m[i].ulp_hist[k]));
        json_object_set_new(jo, "ulp_hist", h);
        json_object_set_new(jo, "tie_flips", json_integer(r->m[i].tie_flips));
        json_t *mm = mismatched(c, i, &cand[i], ref[i], r, g);
        if (mm) json_object_set_new(jo, "mismatched", mm);
        json_object_set_new(
            jo, "worst",
            worst_of(&c->out[i], &cand[i], ref[i], dsv4q_op_ulp_rowfloor(c->op, i), dsv4q_op_exact(c->op, i)));
        json_array_append_new(outs, jo);
    }
    for (int m = 0; m < DSV4Q_M_COUNT && r->verdict != DSV4Q_V_ERROR; m++) {
        const dsv4q_qrow *w = &r->row[m];
        if (w->out < 0) continue;
        if (m == DSV4Q_M_RERUN && !cand2) {
            json_object_set_new(rows, dsv4q_metric_name(m),
                                json_pack("{s:s,s:n,s:n,s:n,s:s}", "output", o->out[w->out].name, "value", "level",
                                          "bound", "verdict", "not run"));
            continue;
        }
        json_object_set_new(rows, dsv4q_metric_name(m),
                            json_pack("{s:s,s:o,s:o,s:o,s:s}", "output", o->out[w->out].name, "value", jnum(w->value),
                                      "level", jnum(w->level), "bound", w->gated ? jnum(w->bound) : json_null(),
                                      "verdict", !w->gated ? "info" : w->pass ? "pass" : "fail"));
    }
    json_object_set_new(j, "outputs", outs);
    json_object_set_new(j, "metrics", rows);
    if (r->verdict == DSV4Q_V_FAIL)
        json_object_set_new(j, "other_profiles", other_profiles(c, profile, boundary, bufs, dt, g, r));
    json_object_set_new(j, "ulp_buckets", json_string("0,1,2,<=4,<=8,<=16,<=64,<=256,<=4096,>4096"));
    s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s) snprintf(err, errlen, "out of memory");
out:
    for (int i = 0; i < DSV4Q_OPS_MAX_T; i++) free(ref[i]);
    free(g);
    free(r);
    return s;
}

char *dsv4q_capi_check(int op, const char *profile, const char *boundary, const char *gates_path, const dsv4q_bt *in,
                       int nin, const double *param, int nparam, const dsv4q_bt *cand, const dsv4q_bt *cand2, int nout,
                       char *err, size_t errlen)
{
    dsv4q_case *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "out of memory"); return NULL; }
    char *s = NULL;
    if (dsv4q_capi_shapes(op, in, nin, param, nparam, c->out, nout, err, errlen)) goto out;
    const dsv4q_op_info *o = dsv4q_op_get(op);
    snprintf(c->key, sizeof c->key, "%s(given inputs)", o->name);
    c->op = op;
    c->nin = nin;
    c->nout = nout;
    c->nparam = nparam;
    for (int i = 0; i < nin; i++) c->in[i] = in[i];
    for (int i = 0; i < nparam; i++) c->param[i] = param[i];
    /* what the operator derives from its inputs after a build (topk: the
     * selection scores, made from the input scores, as for its cases) */
    if (o->post && o->post(c, err, errlen)) goto out;
    s = check_core(c, profile, boundary, gates_path, cand, cand2, nout, err, errlen);
out:
    dsv4q_case_free(c);
    free(c);
    return s;
}

/* ---- case keys ---------------------------------------------------------- */

struct dsv4q_capi_case {
    dsv4q_case c;
};

dsv4q_capi_case *dsv4q_capi_case_new(const char *key, char *err, size_t errlen)
{
    dsv4q_capi_case *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (!key || dsv4q_case_build(&c->c, key, err, errlen)) {
        if (!key) snprintf(err, errlen, "no case key");
        free(c);
        return NULL;
    }
    return c;
}

void dsv4q_capi_case_free(dsv4q_capi_case *c)
{
    if (!c) return;
    dsv4q_case_free(&c->c);
    free(c);
}

const char *dsv4q_capi_case_key(const dsv4q_capi_case *c) { return c->c.key; }
int dsv4q_capi_case_op(const dsv4q_capi_case *c) { return c->c.op; }
const dsv4q_bt *dsv4q_capi_case_inputs(const dsv4q_capi_case *c, int *nin) { *nin = c->c.nin; return c->c.in; }
const dsv4q_bt *dsv4q_capi_case_outputs(const dsv4q_capi_case *c, int *nout) { *nout = c->c.nout; return c->c.out; }
const double *dsv4q_capi_case_params(const dsv4q_capi_case *c, int *nparam) { *nparam = c->c.nparam; return c->c.param; }
size_t dsv4q_capi_case_out_bytes(const dsv4q_capi_case *c, int i) { return dsv4q_case_out_bytes(&c->c, i); }

int dsv4q_capi_case_run(const dsv4q_capi_case *c, const char *spec, const char *profile, dsv4q_bt *out1, dsv4q_bt *out2,
                        char *err, size_t errlen)
{
    uint64_t bs;
    if (dsv4q_capi_profile(profile, NULL, &bs, err, errlen)) return -1;
    dsv4q_iso_opts iso = {0, 0};
    void *bufs[2][DSV4Q_OPS_MAX_T];
    int32_t dt[2][DSV4Q_OPS_MAX_T];
    for (int i = 0; i < c->c.nout; i++) {
        if (!out1[i].data || !out2[i].data) { snprintf(err, errlen, "output %s has no buffer", c->c.out[i].name); return -1; }
        bufs[0][i] = out1[i].data;
        bufs[1][i] = out2[i].data;
    }
    dsv4q_iso_status st = dsv4q_iso_run(spec, &iso, &c->c, bs, 2, bufs, dt, err, errlen);
    if (st != DSV4Q_ISO_OK) return -1;
    for (int i = 0; i < c->c.nout; i++) {
        void *d1 = out1[i].data, *d2 = out2[i].data;
        out1[i] = c->c.out[i];
        out2[i] = c->c.out[i];
        out1[i].data = d1;
        out2[i].data = d2;
        out1[i].dtype = dt[0][i];
        out2[i].dtype = dt[1][i];
    }
    return 0;
}

char *dsv4q_capi_check_case(const dsv4q_capi_case *c, const char *profile, const char *boundary, const char *gates_path,
                            const dsv4q_bt *cand, const dsv4q_bt *cand2, int nout, char *err, size_t errlen)
{
    return check_core(&c->c, profile, boundary, gates_path, cand, cand2, nout, err, errlen);
}
