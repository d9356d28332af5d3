/*
 * cmd_weight.c - `dsv4q weight`: the values a GGUF tensor decodes to, as
 * the oracle runs them (oracle/ggml_decode.h: bit for bit ggml's
 * dequantize_row_*), and `weight --list`: every tensor with its type and
 * shape. For a llama.cpp user who wants to compare one weight with what
 * their engine holds without writing C against the decoders.
 *
 * Options: the command table (cli/cmdtab.c, `dsv4q help weight`), read
 * from dsv4q_weight_args.
 *
 * Output: values in storage order (ne[0], the contiguous dimension, fastest;
 * ggml order). Without --out: a '#' line naming the tensor, type, ne and
 * count, then one value per line, shortest round-trip digits of the width
 * (%.9g f32, %.17g f64). With --out: raw little-endian binary32 or binary64
 * values, nothing else (numpy.fromfile(FILE, '<f4' or '<f8')). Every check
 * (file, tensor, type) runs before the output is opened, and a failed write
 * removes the file, so an error never leaves a partial output behind.
 * Errors exit 2 naming the file and the tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "oracle/ggml_decode.h"

/* ne as "[a, b, ...]" (ggml order) into buf. */
static void shape_str(const dsv4q_gguf_tensor *t, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)t->ne[i]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

static const char *type_name(int type)
{
    const char *s = dsv4q_ggml_type_name(type);
    return s ? s : "unknown";
}

static int list(const dsv4q_gguf *g)
{
    char sh[160];
    printf("%-40s %-8s %-24s %s\n", "tensor", "type", "ne (ggml order)", "elements");
    for (size_t i = 0; i < dsv4q_gguf_count(g); i++) {
        const dsv4q_gguf_tensor *t = dsv4q_gguf_at(g, i);
        shape_str(t, sh, sizeof sh);
        printf("%-40s %-8s %-24s %lld\n", t->name, type_name(t->type), sh, (long long)t->numel);
    }
    return 0;
}

/* Decode every row of t and emit it (text to stdout, or binary to f). */
static int dump(const dsv4q_gguf_tensor *t, int width, FILE *f, const char *path)
{
    const int64_t ne0 = t->ndim ? t->ne[0] : 1, rows = ne0 ? t->numel / ne0 : 0;
    double *yd = width == 64 ? malloc(sizeof(double) * (size_t)(ne0 ? ne0 : 1)) : NULL;
    float *yf = width == 32 ? malloc(sizeof(float) * (size_t)(ne0 ? ne0 : 1)) : NULL;
    int rc = 0;
    if (!yd && !yf) {
        fprintf(stderr, "dsv4q weight: out of memory\n");
        return 2;
    }
    for (int64_t r = 0; r < rows && !rc; r++) {
        const int bad = width == 64 ? dsv4q_ggml_row_f64(t->type, t->data, ne0, r, yd)
                                    : dsv4q_ggml_row_f32(t->type, t->data, ne0, r, yf);
        if (bad) {
            fprintf(stderr, "dsv4q weight: tensor '%s' (%s): row %lld does not decode\n", t->name, type_name(t->type),
                    (long long)r);
            rc = 2;
        } else if (f) {
            const size_t sz = width == 64 ? sizeof(double) : sizeof(float);
            if (fwrite(width == 64 ? (const void *)yd : (const void *)yf, sz, (size_t)ne0, f) != (size_t)ne0) {
                fprintf(stderr, "dsv4q weight: %s: write failed\n", path);
                rc = 2;
            }
        } else
            for (int64_t k = 0; k < ne0; k++)
                if (width == 64) printf("%.17g\n", yd[k]);
                else printf("%.9g\n", (double)yf[k]);
    }
    free(yd);
    free(yf);
    return rc;
}

int dsv4q_cmd_weight(int argc, char **argv)
{
    dsv4q_weight_args o;
    int prc = dsv4q_cli_parse(argc, argv, &o, sizeof o);
    if (prc >= 0) return prc;
    char err[2048];
    const int kind = dsv4q_model_path_kind(o.c.model, err, sizeof err);
    if (kind == 0)
        snprintf(err, sizeof err,
                 "%s: a directory; weight reads a GGUF file (a safetensors checkpoint's tensors are read by "
                 "the model loader, docs/model.md)",
                 o.c.model);
    dsv4q_gguf *g = NULL;
    if (kind != 1 || dsv4q_gguf_open(&g, o.c.model, err, sizeof err)) {
        fprintf(stderr, "dsv4q weight: %s\n", err);
        return 2;
    }
    if (o.list) {
        int rc = list(g);
        dsv4q_gguf_close(g);
        return rc;
    }
    const dsv4q_gguf_tensor *t = dsv4q_gguf_find(g, o.tensor);
    if (!t) {
        char alt[256] = "";
        int expert;
        if (dsv4q_gguf_name(o.tensor, alt, sizeof alt, &expert) == 0 && dsv4q_gguf_find(g, alt))
            fprintf(stderr,
                    "dsv4q weight: %s: no tensor '%s'; its llama.cpp name is '%s'%s (dsv4q weight --list --model %s "
                    "lists the %zu tensors)\n",
                    o.c.model, o.tensor, alt, expert >= 0 ? ", which stacks the experts" : "", o.c.model,
                    dsv4q_gguf_count(g));
        else
            fprintf(stderr, "dsv4q weight: %s: no tensor '%s' (dsv4q weight --list --model %s lists the %zu tensors)\n",
                    o.c.model, o.tensor, o.c.model, dsv4q_gguf_count(g));
        dsv4q_gguf_close(g);
        return 2;
    }
    if (!dsv4q_ggml_decodable(t->type)) {
        fprintf(stderr, "dsv4q weight: %s: tensor '%s' is %s, which is not a float or quantized type dsv4q decodes\n",
                o.c.model, t->name, type_name(t->type));
        dsv4q_gguf_close(g);
        return 2;
    }
    FILE *f = NULL;
    if (o.c.out && !(f = fopen(o.c.out, "wb"))) {
        fprintf(stderr, "dsv4q weight: cannot write %s\n", o.c.out);
        dsv4q_gguf_close(g);
        return 2;
    }
    if (!f) {
        char sh[160];
        shape_str(t, sh, sizeof sh);
        printf("# %s %s ne=%s (ggml order, ne[0] fastest) %lld values, decoded at f%d\n", t->name, type_name(t->type),
               sh, (long long)t->numel, o.c.width);
    }
    int rc = dump(t, o.c.width, f, o.c.out);
    if (f && fclose(f) != 0 && !rc) {
        fprintf(stderr, "dsv4q weight: %s: write failed\n", o.c.out);
        rc = 2;
    }
    if (f && rc) unlink(o.c.out);
    dsv4q_gguf_close(g);
    return rc;
}
