/*
 * ops.c - the operator registry (ops.h): the descriptors of
 * harness/ops/<name>.c by id and name, generated from DSV4Q_OP_LIST (an
 * operator without its descriptor does not link), their consistency check,
 * and the two texts generated from them: docs/backends.md's operator
 * section and the contract summary of abi/dsv4q_backend.h.
 */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "harness/ops/ops.h"
#include "harness/ops/stage_ops.h"

#define DESC_DECL_(E, nm, ni, no, np) extern const dsv4q_op_info dsv4q_opdesc_##nm;
DSV4Q_OP_LIST(DESC_DECL_)
#undef DESC_DECL_
#define DESC_ROW_(E, nm, ni, no, np) [DSV4Q_OP_##E] = &dsv4q_opdesc_##nm,
static const dsv4q_op_info *const descs[DSV4Q_OP_COUNT] = {DSV4Q_OP_LIST(DESC_ROW_)};
#undef DESC_ROW_

const dsv4q_op_info *dsv4q_op_get(int op)
{
    if (op < 0 || op >= DSV4Q_OP_COUNT) return NULL;
    assert(descs[op]->op == op);   /* the registry is in list order (DSV4Q_OP_DESC takes the id from the list) */
    return descs[op];
}

int dsv4q_op_find(const char *name)
{
    for (int i = 0; i < DSV4Q_OP_COUNT; i++)
        if (!strcmp(descs[i]->name, name)) return i;
    return -1;
}

int dsv4q_op_ulp_rowfloor(int op, int out)
{
    const dsv4q_op_info *o = dsv4q_op_get(op);
    return o && out >= 0 && out < 32 && ((o->rowfloor >> out) & 1u);
}

static int lowest_bit(unsigned m)
{
    for (int i = 0; i < 32; i++)
        if ((m >> i) & 1u) return i;
    return -1;
}

int dsv4q_op_weight_slot(int op)
{
    const dsv4q_op_info *o = dsv4q_op_get(op);
    return o ? lowest_bit(o->weight_in) : -1;
}

int dsv4q_op_sel_slot(int op)
{
    const dsv4q_op_info *o = dsv4q_op_get(op);
    return o ? lowest_bit(o->sel) : -1;
}

int dsv4q_op_exact(int op, int out)
{
    const dsv4q_op_info *o = dsv4q_op_get(op);
    return o && out >= 0 && out < o->nout && ((o->exact >> out) & 1u);
}

static int count_tensors(const dsv4q_op_tensor *t)
{
    int n = 0;
    while (n < DSV4Q_OPS_MAX_T && t[n].name) n++;
    return n;
}

int dsv4q_op_table_check(char *err, size_t errlen)
{
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) {
        const dsv4q_op_info *o = descs[i];
        int np = 0;
        while (np < DSV4Q_OPS_MAX_P && o->param[np]) np++;
        const int ni = count_tensors(o->in), no = count_tensors(o->out);
        if (o->op != i || ni != o->nin || no != o->nout || np != o->nparam) {
            snprintf(err, errlen, "operator %d (%s): DSV4Q_OP_LIST says %d in / %d out / %d params, "
                     "its descriptor documents %d / %d / %d", i, o->name, o->nin, o->nout, o->nparam, ni, no, np);
            return -1;
        }
        if (!o->build || !o->keys[0][0]) {
            snprintf(err, errlen, "operator %s: its descriptor has no case builder or no case keys", o->name);
            return -1;
        }
        if ((o->sel | o->per_pick | o->rowfloor | o->exact) >> o->nout || o->weight_in >> o->nin) {
            snprintf(err, errlen, "operator %s: an output / input bit of its descriptor is past its arity", o->name);
            return -1;
        }
        for (int k = 0; k < o->nout; k++)   /* an exact output is an I32 tensor compared by position */
            if (((o->exact >> k) & 1u) && (strcmp(o->out[k].dtype, "I32") || ((o->sel >> k) & 1u))) {
                snprintf(err, errlen, "operator %s: exact output %s must be I32 and not a selection", o->name,
                         o->out[k].name);
                return -1;
            }
        for (int j = 0; j < i; j++)
            if (!strcmp(descs[j]->name, o->name)) {
                snprintf(err, errlen, "operator name '%s' appears twice in DSV4Q_OP_LIST", o->name);
                return -1;
            }
        for (int k = 0; o->cases && o->cases[k].key; k++) {   /* K1: the cases it lists are canonical */
            char canon[DSV4Q_CASE_KEY_MAX];
            if (dsv4q_case_canon(o->cases[k].key, canon, sizeof canon, err, errlen)) return -1;
            if (strcmp(canon, o->cases[k].key) || strncmp(canon, o->name, strlen(o->name)) ||
                canon[strlen(o->name)] != '(') {
                snprintf(err, errlen, "operator %s: case '%s' is not a canonical key of its own (canonical: %s)",
                         o->name, o->cases[k].key, canon);
                return -1;
            }
        }
    }
    return 0;
}

/* ---- generated texts ------------------------------------------------------ */

static void upper(const char *s, char *out, size_t len)
{
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++) out[i] = (char)toupper((unsigned char)s[i]);
    out[i] = 0;
}

/* A table cell: '|' escaped. */
static void cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

static void md_tensors(FILE *f, const char *what, const dsv4q_op_tensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        fprintf(f, "| %s %d | `%s` | `%s` | ", what, i, t[i].name, t[i].shape);
        cell(f, t[i].dtype);
        fprintf(f, " | ");
        cell(f, t[i].doc);
        fprintf(f, " |\n");
    }
}

void dsv4q_op_markdown(FILE *f)
{
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) {
        const dsv4q_op_info *o = descs[i];
        char en[64];
        upper(o->name, en, sizeof en);
        fprintf(f, "### `%s` (`DSV4Q_OP_%s` = %d)\n\n", o->name, en, i);
        fprintf(f, "| slot | name | shape | dtype | meaning |\n|---|---|---|---|---|\n");
        md_tensors(f, "in", o->in, o->nin);
        md_tensors(f, "out", o->out, o->nout);
        for (int p = 0; p < o->nparam; p++) {
            fprintf(f, "| param %d | | | double | ", p);
            cell(f, o->param[p]);
            fprintf(f, " |\n");
        }
        fprintf(f, "\n- oracle: `%s`\n- reference: %s\n", o->oracle, o->reference);
        if (o->boundaries[0]) fprintf(f, "- rounding points (decided by the declared profile): %s\n", o->boundaries);
        if (o->notes[0]) fprintf(f, "- %s\n", o->notes);
        for (int k = 0; k < o->nout; k++)
            if ((o->exact >> k) & 1u)
                fprintf(f,
                        "- `%s` is judged as an exact match: any element that differs from the reference fails "
                        "the case (docs/gates.md)\n",
                        o->out[k].name);
        /* derived from the stage tables: what a case of this operator stands for */
        char st[256], st41[256];
        dsv4q_op_stage_names_arch(DSV4Q_ARCH_V4, i, DSV4Q_STAGE_MASK_ALL, st, sizeof st);
        dsv4q_op_stage_names_arch(DSV4Q_ARCH_V41, i, DSV4Q_STAGE_MASK_ALL, st41, sizeof st41);
        fprintf(f,
                "- forward-pass stages that call it (so what a failing case or a fallback affects): V4 %s; "
                "V4.1 %s\n",
                st, st41);
        fprintf(f, "\n");
    }
}

/* "x [s,K], w [N,K]" of a slot list into buf. */
static void slots(char *buf, size_t len, const dsv4q_op_tensor *t, int n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s%s %s", i ? ", " : "", t[i].name,
                               t[i].doc && strstr(t[i].doc, "empty") ? "?" : "", t[i].shape);
}

/* One line of a comment body, wrapped at 78 columns with a hanging indent
 * (the text column is 18: " * " and a 14-wide lead and a space). */
static void wrapped(FILE *f, const char *lead, const char *text)
{
    const int width = 78, textcol = 18;
    int col = fprintf(f, " * %-14s ", lead);
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (!w) break;
        if (col > textcol && col + 1 + (int)w > width) col = fprintf(f, "\n *%*s", textcol - 2, "") - 1;
        col += fprintf(f, "%s%.*s", col > textcol ? " " : "", (int)w, p);
        p += w;
    }
    fprintf(f, "\n");
}

void dsv4q_op_header_summary(FILE *f)
{
    fprintf(f, " * Per-operator contract summary (generated from harness/ops/<name>.c by\n"
               " * `make docs`; docs/backends.md has the full table, `dsv4q qualify\n"
               " * --list-ops` prints it; '?' marks an optional input, empty = ndim 0):\n *\n");
    for (int i = 0; i < DSV4Q_OP_COUNT; i++) {
        const dsv4q_op_info *o = descs[i];
        char en[64], buf[1024];
        upper(o->name, en, sizeof en);
        slots(buf, sizeof buf, o->in, o->nin);
        wrapped(f, en, buf);
        size_t at = 0;
        buf[0] = 0;
        for (int p = 0; p < o->nparam && at < sizeof buf; p++) {
            size_t w = strcspn(o->param[p], " :(");
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%d %.*s", p ? ", " : "", p, (int)w, o->param[p]);
        }
        if (o->nparam) wrapped(f, "  params", buf);
        slots(buf, sizeof buf, o->out, o->nout);
        wrapped(f, "  out", buf);
        snprintf(buf, sizeof buf, "%s; %s", o->oracle, o->reference);
        wrapped(f, "  oracle", buf);
    }
}
