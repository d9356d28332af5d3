/*
 * key.h - the case key grammar: op(name=value,...).
 *
 * A key names an operator and values for its parameters. Each operator
 * declares its parameters in canonical order with defaults (the Flash
 * shapes), plus optional ones that appear in a canonical key only when
 * they differ from their default (so the keys, and so the input bytes
 * (cases.h K2), of every case written before an optional parameter existed
 * stay what they were); `recipe` (default normal) and `seed` (default 1)
 * follow every operator's own. Partial keys are accepted and completed
 * with the defaults, so `dsv4q qualify --case 'topk(recipe=ties)'` works;
 * dsv4q_kv_format writes the canonical form (cases.h K1).
 *
 * The grammar is an interface too (engines log keys): its version is
 * DSV4Q_KEY_GRAMMAR, and docs/backends.md tells plugins to pick kernels
 * by the call's role and shapes, never by parsing keys.
 */
#ifndef DSV4Q_CASE_KEY_H
#define DSV4Q_CASE_KEY_H

#include <stddef.h>

#define DSV4Q_KEY_GRAMMAR 1
#define DSV4Q_KV_MAX 12

/* A parsed key: every parameter of the operator (its own, the optional
 * ones, recipe, seed) with the key's value or the default. */
typedef struct dsv4q_kv {
    int n;
    char name[DSV4Q_KV_MAX][16], val[DSV4Q_KV_MAX][32];
    char opt[DSV4Q_KV_MAX];   /* 1: optional, written only when not its default */
    char def[DSV4Q_KV_MAX][32];
} dsv4q_kv;

/* The operator name of a key (the text before '(') into op[oplen]. 0, or
 * -1 with "case key 'K': expected op(name=value,...)". */
int dsv4q_kv_opname(const char *key, char *op, size_t oplen, char *err, size_t errlen);
/* Parse key for an operator with parameters spec[] and optional ones
 * opt[] (each {name, default}, ended by a NULL name) into kv. 0, or -1
 * with a message naming the key and the parameter (an unknown one lists
 * the operator's parameters). */
int dsv4q_kv_parse(const char *key, const char *opname, const char *const (*spec)[2], const char *const (*opt)[2],
                   dsv4q_kv *kv, char *err, size_t errlen);
/* The canonical key: opname(p=v,...) with every parameter in order,
 * optional ones only when they differ from their default (as a number or
 * as written). */
void dsv4q_kv_format(const dsv4q_kv *kv, const char *opname, char *out, size_t len);

/* A parameter's value ("" if the operator has none of that name). */
const char *dsv4q_kv_str(const dsv4q_kv *kv, const char *name);
/* Integer parameter in [lo, hi]; otherwise *bad = 1 and lo is returned
 * (the builder reports the key). */
long dsv4q_kv_int(const dsv4q_kv *kv, const char *name, long lo, long hi, int *bad);
/* Finite real parameter in [lo, hi] (eps, factor); otherwise *bad = 1 and
 * lo is returned. */
double dsv4q_kv_num(const dsv4q_kv *kv, const char *name, double lo, double hi, int *bad);

#endif
