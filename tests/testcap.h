/* testcap.h - edited copies of an engine capture for the replay tests: one
 * call file rewritten with one defect (an element scaled or made NaN, a
 * tensor dropped, renamed, shrunk or retyped, a metadata key changed). The
 * includer includes cmocka (tests/testutil.h) first. */
#ifndef DSV4Q_TESTCAP_H
#define DSV4Q_TESTCAP_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/safetensors.h"

/* The capture metadata a rewrite carries over (when the source has it). */
/* clang-format off */
static const char *const cap_meta_keys[] = {"dsv4q_capture_version", "checkpoint_sha256", "weights_sha256", "position",
                                            "token_ids", "engine", "engine_version", "profile", "boundary", "width",
                                            "tokens_sha256", "model", "prompt_len", "prefix_token_ids", NULL};
/* clang-format on */

/* How cap_rewrite() changes a call file; NULL/0 fields do nothing. */
typedef struct cap_edit {
    const char *drop;        /* tensor to leave out */
    const char *drop_prefix; /* every tensor whose name starts with this */
    const char *rename_from, *rename_to;
    const char *scale;               /* tensor (F64) whose largest |element| is multiplied by scale_by */
    double scale_by;                 /* 0: 1.01 */
    const char *nan_at;              /* tensor (F64) whose largest |element| becomes NaN */
    const char *shrink;              /* tensor written with its first dim - 1 */
    const char *as_i32;              /* tensor written as I32 */
    const char *drop_meta;           /* metadata key to leave out */
    const char *meta_key, *meta_val; /* metadata to set */
} cap_edit;

static inline int64_t cap_argmax_abs(const double *v, int64_t n)
{
    int64_t best = 0;
    for (int64_t k = 1; k < n; k++)
        if (fabs(v[k]) > fabs(v[best])) best = k;
    return best;
}

/* Copy call file src to dst with e applied; a named scale/nan_at tensor
 * must exist in src. */
static inline void cap_rewrite(const char *src, const char *dst, const cap_edit *e)
{
    char err[1024];
    dsv4q_st *st;
    assert_int_equal(dsv4q_st_open(&st, src, err, sizeof err), 0);
    dsv4q_st_writer *w = dsv4q_st_writer_new();
    assert_non_null(w);
    int edited = !e->scale && !e->nan_at;
    for (size_t i = 0; i < dsv4q_st_count(st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(st, i);
        if (e->drop && !strcmp(t->name, e->drop)) continue;
        if (e->drop_prefix && !strncmp(t->name, e->drop_prefix, strlen(e->drop_prefix))) continue;
        const char *name = e->rename_from && !strcmp(t->name, e->rename_from) ? e->rename_to : t->name;
        int64_t shape[DSV4Q_ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        size_t nb = t->nbytes;
        void *buf = malloc(nb);
        memcpy(buf, t->data, nb);
        dsv4q_dtype dt = t->dtype;
        if (e->scale && !strcmp(t->name, e->scale)) {
            assert_int_equal(dt, DSV4Q_DT_F64);
            ((double *)buf)[cap_argmax_abs(buf, t->numel)] *= e->scale_by ? e->scale_by : 1.01;
            edited = 1;
        }
        if (e->nan_at && !strcmp(t->name, e->nan_at)) {
            assert_int_equal(dt, DSV4Q_DT_F64);
            ((double *)buf)[cap_argmax_abs(buf, t->numel)] = NAN;
            edited = 1;
        }
        if (e->shrink && !strcmp(t->name, e->shrink)) {
            nb = nb / (size_t)shape[0] * (size_t)(shape[0] - 1);
            shape[0]--;
        }
        if (e->as_i32 && !strcmp(t->name, e->as_i32)) {
            dt = DSV4Q_DT_I32;
            int32_t *iv = malloc(sizeof(int32_t) * (size_t)t->numel);
            for (int64_t k = 0; k < t->numel; k++) iv[k] = (int32_t)((double *)buf)[k];
            free(buf);
            buf = iv;
            nb = sizeof(int32_t) * (size_t)t->numel;
        }
        assert_int_equal(dsv4q_st_writer_add(w, name, dt, t->ndim, shape, buf, nb, err, sizeof err), 0);
        free(buf);
    }
    assert_true(edited); /* the tensor to edit is in that call */
    for (int k = 0; cap_meta_keys[k]; k++) {
        const char *v = dsv4q_st_meta(st, cap_meta_keys[k]);
        if (e->drop_meta && !strcmp(e->drop_meta, cap_meta_keys[k])) continue;
        if (e->meta_key && !strcmp(e->meta_key, cap_meta_keys[k])) continue;
        if (v) dsv4q_st_writer_meta(w, cap_meta_keys[k], v);
    }
    if (e->meta_key) dsv4q_st_writer_meta(w, e->meta_key, e->meta_val);
    assert_int_equal(dsv4q_st_writer_write(w, dst, err, sizeof err), 0);
    dsv4q_st_close(st);
}

/* Copy capture dir src to root/name with e applied to call file `call`;
 * returns that directory (a static buffer: one variant at a time). */
static inline const char *cap_variant(const char *root, const char *src, const char *name, int call, const cap_edit *e)
{
    static char dir[400];
    char cmd[1000], f[500], g[500];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dir, src, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(f, sizeof f, "%s/call-%04d.safetensors", src, call);
    snprintf(g, sizeof g, "%s/call-%04d.safetensors", dir, call);
    cap_rewrite(f, g, e);
    return dir;
}

#endif
