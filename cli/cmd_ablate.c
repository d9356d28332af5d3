/*
 * cmd_ablate.c - `dsv4q ablate`: which rounding point makes the floor.
 *
 * For every boundary (and every family of boundaries), toggle it against
 * the base profile, run the whole model at one width on identical inputs,
 * and measure the logit NRMS and greedy agreement against the base run.
 * The fp32-vs-fp64 floor of the base profile is measured in the same
 * command, so each toggle's effect is also given as a share of the floor:
 * a toggle whose share is << 1 is a boundary a kernel may deviate on
 * without moving the whole-model gate. Output: a sorted table, --json,
 * --svg (bar chart), and a receipt.
 */
#include "base/file.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "harness/measure/metrics.h"
#include "io/model.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"

typedef struct {
    char name[48];
    uint64_t mask;      /* boundaries toggled together */
    double nrms, max_abs;
    long agree;
    int on_after;       /* 1: the toggle switches them on */
} toggle;

/* Logits of all calls [rows, V] for one width and boundary set. */
static int run_logits(const dsv4q_model *m, int width, uint64_t bs, const dsv4q_tokens *t, double *out,
                      char *err, size_t errlen)
{
    dsv4q_run *r;
    const long V = m->cfg.vocab_size;
    if (dsv4q_run_open(&r, m, width, bs, t->nprompt + t->nteacher, NULL, NULL, err, errlen)) return -1;
    int rc = dsv4q_run_feed(r, t->prompt, t->nprompt, out, err, errlen);
    for (long i = 0; !rc && i < t->nteacher; i++) rc = dsv4q_run_feed(r, &t->teacher[i], 1, out + (i + 1) * V, err, errlen);
    dsv4q_run_close(r);
    return rc;
}

static long agreement(const double *a, const double *b, long rows, long V)
{
    long n = 0;
    for (long r = 0; r < rows; r++) n += dsv4q_argmax(a + r * V, V) == dsv4q_argmax(b + r * V, V);
    return n;
}

static int cmp_toggle(const void *a, const void *b)
{
    const toggle *x = a, *y = b;
    return (x->nrms < y->nrms) - (x->nrms > y->nrms);
}

/* Families: every boundary of the model's family (V4 / V4.1) alone, then
 * groups of the same kind. */
static int families(toggle *tg, int arch)
{
    int n = 0;
    uint64_t storage = 0, qat = 0, model_bf16 = 0;
    const uint64_t mine = dsv4q_boundary_arch_mask(arch);
    for (int b = 0; b < DSV4Q_B_COUNT; b++) {
        const dsv4q_boundary_info *i = dsv4q_boundary_get(b);
        if (!(mine & DSV4Q_BIT(b))) continue;
        snprintf(tg[n].name, sizeof tg[n].name, "%s", i->name);
        tg[n++].mask = DSV4Q_BIT(b);
        if (i->kind == DSV4Q_BK_STORAGE) storage |= DSV4Q_BIT(b);
        else if (i->qat) qat |= DSV4Q_BIT(b);
        else model_bf16 |= DSV4Q_BIT(b);
    }
    snprintf(tg[n].name, sizeof tg[n].name, "[all storage BF16]");
    tg[n++].mask = storage;
    snprintf(tg[n].name, sizeof tg[n].name, "[all QAT FP8/FP4]");
    tg[n++].mask = qat;
    snprintf(tg[n].name, sizeof tg[n].name, "[model BF16 scores/probs]");
    tg[n++].mask = model_bf16;
    return n;
}

static int write_svg(const char *path, const toggle *tg, int n, double floor_nrms)
{
    FILE *f = dsv4q_out_open(path, NULL, 0);
    if (!f) { fprintf(stderr, "dsv4q ablate: cannot write %s\n", path); return -1; }
    const int W = 900, row = 22, left = 230, top = 40, H = top + row * (n + 1) + 40;
    /* log10 axis from 1e-17 to 1 */
    const double lo = -17, hi = 0;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"14\">logit NRMS vs base when toggling each boundary (log scale; red line: fp32 floor %.2e)</text>\n", floor_nrms);
    for (int i = 0; i < n; i++) {
        double v = tg[i].nrms > 0 ? log10(tg[i].nrms) : lo;
        if (v < lo) v = lo;
        double w = (v - lo) / (hi - lo) * (W - left - 20);
        int y = top + i * row;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s (%s)</text>\n", left - 6, y + 14, tg[i].name,
                tg[i].on_after ? "on" : "off");
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#4a7bd0\"/>\n", left, y + 3, w, row - 6);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.2e</text>\n", left + w + 4, y + 14, tg[i].nrms);
    }
    if (floor_nrms > 0) {
        double x = left + (log10(floor_nrms) - lo) / (hi - lo) * (W - left - 20);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"red\"/>\n", x, top, x, top + row * n);
    }
    for (int e = (int)lo; e <= (int)hi; e += 2) {
        double x = left + (e - lo) / (hi - lo) * (W - left - 20);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">1e%d</text>\n", x, top + row * n + 18, e);
    }
    fprintf(f, "</svg>\n");
    if (dsv4q_out_close(f, NULL, 0)) { fprintf(stderr, "dsv4q ablate: cannot write %s\n", path); return -1; }
    return 0;
}

int dsv4q_cmd_ablate(int argc, char **argv)
{
    dsv4q_ablate_args a;
    const dsv4q_cli_opts *o = &a.c;   /* --base is o->profile */
    char err[1024], dir[4096];
    int prc = dsv4q_cli_parse(argc, argv, &a, sizeof a);
    if (prc >= 0) return prc;
    if (dsv4q_cli_db_check(o, "ablate")) return 2;   /* before any work */
    dsv4q_cli_threads(o);
    uint64_t base;
    if (dsv4q_cli_bset(o, &base, err, sizeof err)) {
        fprintf(stderr, "dsv4q ablate: %s\n", err);
        return 2;
    }
    dsv4q_model *m;
    dsv4q_tokens t;
    if (dsv4q_cli_start("ablate", o, dir, sizeof dir, &m, &t)) return 2;
    const long V = m->cfg.vocab_size, rows = 1 + t.nteacher;
    double *ref = malloc(sizeof(double) * (size_t)(rows * V)), *cur = malloc(sizeof(double) * (size_t)(rows * V));
    toggle tg[DSV4Q_B_COUNT + 4];
    int n = families(tg, m->cfg.arch), rc = 2;
    if (!ref || !cur) { snprintf(err, sizeof err, "out of memory"); goto fail; }

    /* the floor of the base profile: f32 vs f64 */
    if (run_logits(m, 32, base, &t, cur, err, sizeof err) || run_logits(m, 64, base, &t, ref, err, sizeof err)) goto fail;
    dsv4q_acc facc = {0};
    dsv4q_acc_add(&facc, cur, ref, rows * V);
    double floor_nrms = dsv4q_acc_nrms(&facc);
    if (o->width == 32 && run_logits(m, 32, base, &t, ref, err, sizeof err)) goto fail;
    for (int i = 0; i < n; i++) {
        uint64_t bs = base ^ tg[i].mask;
        if ((base & tg[i].mask) && (base & tg[i].mask) != tg[i].mask) bs = base & ~tg[i].mask;   /* mixed: all off */
        tg[i].on_after = (bs & tg[i].mask) != 0;
        if (!o->quiet) fprintf(stderr, "[ablate] %d/%d %s -> %s\n", i + 1, n, tg[i].name, tg[i].on_after ? "on" : "off");
        if (run_logits(m, o->width, bs, &t, cur, err, sizeof err)) goto fail;
        dsv4q_acc a = {0};
        dsv4q_acc_add(&a, cur, ref, rows * V);
        tg[i].nrms = dsv4q_acc_nrms(&a);
        tg[i].max_abs = a.max_abs;
        tg[i].agree = agreement(cur, ref, rows, V);
    }
    qsort(tg, (size_t)n, sizeof *tg, cmp_toggle);

    printf("dsv4q ablate: toggle each boundary against base profile '%s', width f%d\n", o->profile, o->width);
    printf("  model   %s (%s)\n  tokens  %s (prompt %ld, decode %ld)\n", dir, m->cfg.name, t.source, t.nprompt, t.nteacher);
    printf("  fp32-vs-fp64 floor of the base profile: logit NRMS %.4e\n\n", floor_nrms);
    printf("  %-28s %-4s %12s %12s %8s %10s\n", "boundary", "to", "logit NRMS", "max abs", "greedy", "x floor");
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        double share = floor_nrms > 0 ? tg[i].nrms / floor_nrms : 0;
        printf("  %-28s %-4s %12.4e %12.4e %4ld/%-3ld %10.3g\n", tg[i].name, tg[i].on_after ? "on" : "off", tg[i].nrms,
               tg[i].max_abs, tg[i].agree, rows, share);
        json_t *j = json_object();
        json_object_set_new(j, "boundary", json_string(tg[i].name));
        json_object_set_new(j, "toggled_to", json_string(tg[i].on_after ? "on" : "off"));
        json_object_set_new(j, "logit_nrms", json_real(tg[i].nrms));
        json_object_set_new(j, "max_abs", json_real(tg[i].max_abs));
        json_object_set_new(j, "greedy_agree", json_integer(tg[i].agree));
        json_object_set_new(j, "share_of_floor", json_real(share));
        json_array_append_new(arr, j);
    }
    json_t *jm = json_object();
    json_object_set_new(jm, "base_profile", json_string(o->profile));
    json_object_set_new(jm, "width", json_string(o->width == 64 ? "f64" : "f32"));
    json_object_set_new(jm, "floor_nrms", json_real(floor_nrms));
    json_object_set_new(jm, "rows", json_integer(rows));
    json_object_set_new(jm, "toggles", arr);
    char *metrics = json_dumps(jm, JSON_COMPACT | JSON_SORT_KEYS);
    if (o->json) {
        FILE *f = dsv4q_out_open(o->json, NULL, 0);
        if (!f || fputs(metrics, f) < 0 || dsv4q_out_close(f, NULL, 0)) {
            dsv4q_out_discard(f);   /* no-op once closed */
            fprintf(stderr, "dsv4q ablate: cannot write %s\n", o->json);
            free(metrics);
            json_decref(jm);
            goto out;   /* rc 2, no receipt for a run whose output failed */
        }
    }
    if (a.svg && write_svg(a.svg, tg, n, floor_nrms)) {
        free(metrics);
        json_decref(jm);
        goto out;
    }
    int rrc = dsv4q_cli_receipt(o, "ablate", argc, argv, dir, &m->cfg, &t, o->width == 64 ? "f64" : "f32", metrics,
                                "info");
    free(metrics);
    json_decref(jm);
    rc = rrc ? 2 : 0;
    goto out;
fail:
    fprintf(stderr, "dsv4q ablate: %s\n", err);
out:
    free(ref);
    free(cur);
    dsv4q_tokens_free(&t);
    dsv4q_model_close(m);
    return rc;
}
