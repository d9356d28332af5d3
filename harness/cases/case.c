/*
 * case.c - the case object (cases.h): its buffers, its output sizes, the
 * backend call it makes, and the small builder helpers every operator's
 * case builder (harness/ops/<op>.c) shares.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "harness/cases/cases.h"

int64_t dsv4q_bt_numel(const dsv4q_bt *t)
{
    if (t->ndim <= 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim && i < 6; i++) n *= t->shape[i];
    return n;
}

void *dsv4q_case_alloc(dsv4q_case *c, size_t bytes)
{
    if (c->nbufs >= (int)(sizeof c->bufs / sizeof c->bufs[0])) return NULL;
    void *p = calloc(bytes ? bytes : 1, 1);
    if (p) {
        c->bufmap[c->nbufs] = 0;
        c->bufs[c->nbufs++] = p;
    }
    return p;
}

static void set_shape(dsv4q_bt *t, int ndim, const int64_t *d)
{
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = d[i];
}

/* A zeroed mapping of `bytes` owned by the case: untouched pages are the
 * zero page (no memory); no huge pages, or one written row would commit
 * 2 MiB around it (transparent huge pages fault in whole). */
static void *case_map(dsv4q_case *c, size_t bytes)
{
    if (c->nbufs >= (int)(sizeof c->bufs / sizeof c->bufs[0])) return NULL;
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_NOHUGEPAGE
    (void)madvise(p, bytes ? bytes : 1, MADV_NOHUGEPAGE); /* advice only: without it rows still read right */
#endif
    c->bufmap[c->nbufs] = bytes ? bytes : 1;
    c->bufs[c->nbufs++] = p;
    return p;
}

static void *case_input(dsv4q_case *c, int slot, int dtype, int ndim, const int64_t *d, int sparse)
{
    dsv4q_bt *t = &c->in[slot];
    memset(t, 0, sizeof *t);
    set_shape(t, ndim, d);
    t->dtype = dtype;
    if (ndim == 0) return NULL;
    const size_t bytes = (dtype == DSV4Q_BT_I64 ? 8 : 4) * (size_t)dsv4q_bt_numel(t);
    t->data = sparse ? case_map(c, bytes) : dsv4q_case_alloc(c, bytes);
    return t->data;
}

void *dsv4q_case_input(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    const int64_t d[3] = {d0, d1, d2};
    return case_input(c, slot, dtype, ndim, d, 0);
}

void *dsv4q_case_input_sparse(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    const int64_t d[3] = {d0, d1, d2};
    return case_input(c, slot, dtype, ndim, d, 1);
}

void dsv4q_case_output(dsv4q_case *c, int slot, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t d[3] = {d0, d1, d2};
    dsv4q_bt *t = &c->out[slot];
    memset(t, 0, sizeof *t);
    set_shape(t, ndim, d);
    t->dtype = dtype;
}

int dsv4q_case_recipe(const dsv4q_case *c, const char *opname, const char *const *ok, char *err, size_t errlen)
{
    char list[128] = "";
    for (int i = 0; ok[i]; i++) {
        if (!strcmp(ok[i], c->recipe)) return 0;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", ok[i]);
    }
    snprintf(err, errlen, "%s: recipe '%s' is not defined for %s (%s)", c->key, c->recipe, opname, list);
    return -1;
}

int dsv4q_case_oom(const dsv4q_case *c, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: out of memory", c->key);
    return -1;
}

void dsv4q_case_role_last(dsv4q_case *c, const char *role)
{
    const char *suf[DSV4Q_OPS_MAX_T] = {0};
    suf[c->nin - 1] = "";
    dsv4q_case_set_role(c, role, suf);
}

void dsv4q_case_set_role(dsv4q_case *c, const char *role, const char *const *suffix)
{
    snprintf(c->role, sizeof c->role, "%s", role);
    for (int i = 0; i < c->nin; i++) {
        c->in_role[i] = NULL;
        if (!suffix[i]) continue;
        snprintf(c->in_role_s[i], sizeof c->in_role_s[i], "%s%s", role, suffix[i]);
        c->in_role[i] = c->in_role_s[i];
    }
}

void dsv4q_case_free(dsv4q_case *c)
{
    for (int i = 0; i < c->nbufs; i++) {
        if (c->bufmap[i]) munmap(c->bufs[i], c->bufmap[i]);
        else free(c->bufs[i]);
    }
    c->nbufs = 0;
    c->sel_scores = NULL;
}

size_t dsv4q_case_out_bytes(const dsv4q_case *c, int i)
{
    return 4 * (size_t)dsv4q_bt_numel(&c->out[i]);
}

void dsv4q_case_call(const dsv4q_case *c, dsv4q_bt *out, uint64_t boundaries, dsv4q_bcall *call)
{
    for (int i = 0; i < c->nout; i++) {
        void *keep = out[i].data;
        out[i] = c->out[i];
        out[i].data = keep;
    }
    memset(call, 0, sizeof *call);
    call->op = c->op;
    call->nin = c->nin;
    call->nout = c->nout;
    call->in = c->in;
    call->out = out;
    call->param = c->param;
    call->nparam = c->nparam;
    call->boundaries = boundaries;
    call->case_key = c->key;
    call->role = c->role[0] ? c->role : NULL;
    call->in_role = c->role[0] ? c->in_role : NULL;
}
