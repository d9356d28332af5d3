/*
 * case_build.c - cases by key (ops.h): the cases every operator lists, in
 * operator order, and a key turned into a case by its operator's
 * descriptor (key parameters and defaults, builder, post and role hooks)
 * with the mechanism of harness/cases/ (grammar, generators).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include "harness/ops/ops.h"

int dsv4q_case_count(void)
{
    int n = 0;
    for (int op = 0; op < DSV4Q_OP_COUNT; op++)
        for (const dsv4q_case_entry *e = dsv4q_op_get(op)->cases; e && e->key; e++) n++;
    return n;
}

const dsv4q_case_entry *dsv4q_case_at(int i)
{
    if (i < 0) return NULL;
    for (int op = 0; op < DSV4Q_OP_COUNT; op++)
        for (const dsv4q_case_entry *e = dsv4q_op_get(op)->cases; e && e->key; e++)
            if (i-- == 0) return e;
    return NULL;
}

/* The operator of a key and its parsed parameters. */
static const dsv4q_op_info *parse(const char *key, dsv4q_kv *kv, char *err, size_t errlen)
{
    char opname[32];
    if (dsv4q_kv_opname(key, opname, sizeof opname, err, errlen)) return NULL;
    const dsv4q_op_info *o = dsv4q_op_get(dsv4q_op_find(opname));
    if (!o) {
        snprintf(err, errlen, "case key '%s': unknown operator '%s'", key, opname);
        return NULL;
    }
    return dsv4q_kv_parse(key, o->name, o->keys, o->optkeys, kv, err, errlen) ? NULL : o;
}

int dsv4q_case_canon(const char *key, char *out, size_t outlen, char *err, size_t errlen)
{
    dsv4q_kv kv;
    const dsv4q_op_info *o = parse(key, &kv, err, errlen);
    if (!o) return -1;
    dsv4q_kv_format(&kv, o->name, out, outlen);
    return 0;
}

int dsv4q_case_build(dsv4q_case *c, const char *key, char *err, size_t errlen)
{
    dsv4q_kv kv;
    memset(c, 0, sizeof *c);
    const dsv4q_op_info *o = parse(key, &kv, err, errlen);
    if (!o) return -1;
    dsv4q_kv_format(&kv, o->name, c->key, sizeof c->key);
    assert(!strncmp(c->key, o->name, strlen(o->name)) && c->key[strlen(o->name)] == '(');   /* K1's form */
    c->op = o->op;
    snprintf(c->recipe, sizeof c->recipe, "%s", dsv4q_kv_str(&kv, "recipe"));
    c->nin = o->nin;
    c->nout = o->nout;
    c->nparam = o->nparam;
    int bad = 0;
    dsv4q_kv_int(&kv, "seed", 0, 0x7fffffffL, &bad);
    if (bad) {
        snprintf(err, errlen, "%s: seed must be a non-negative integer", c->key);
        return -1;
    }
    dsv4q_rng r = {dsv4q_rng_seed(c->key)};   /* K2: seeded by the canonical key only */
    int rc = o->build(c, &kv, &r, err, errlen);
    if (!rc && o->post) rc = o->post(c, err, errlen);
    if (!rc && o->role) o->role(c, &kv);
    if (rc) {
        dsv4q_case_free(c);
        return rc;
    }
    for (int i = 0; i < c->nin; i++) c->in[i].name = o->in[i].name;   /* the contract's names */
    for (int i = 0; i < c->nout; i++) c->out[i].name = o->out[i].name;
    return 0;
}
