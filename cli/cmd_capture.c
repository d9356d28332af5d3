/*
 * cmd_capture.c - `dsv4q capture`: the oracle writes a capture of its own
 * run, in exactly the format an engine writes (docs/captures.md).
 *
 * Options: the command table (cli/cmdtab.c, `dsv4q help capture`), read
 * from dsv4q_capture_args.
 *
 * One file per call in DIR (call-0000.safetensors = the prefill, then one
 * per decode step), every stage of the stage table with its inputs and
 * outputs. It serves three purposes: a working example for engine authors
 * (diff your dump's names, shapes and metadata against it), the round trip
 * the tests replay (an f64 capture replays at zero error, replay.h P2), and
 * a reference dump of the oracle itself. Values are stored in --dtype
 * (default: the run's width, so nothing is rounded; `storage`: each tensor
 * in the dtype the profile stores it in, BF16 or F32, as an engine would
 * dump it: exact for an f32 run). With --backend B (a built-in: cpu-ref,
 * mutant:NAME, oracle-f32; or a plugin .so, run in one isolated child) the
 * ONE forward pass runs at f32 with B as its operator provider
 * (harness/capture/capture_backend.h): every stage B has operators for, attention
 * included, is B's; operators B lacks run on oracle-f32 and are listed on
 * stderr and in each call's metadata (oracle_f32_fallbacks). The profile is
 * B's declaration; the width is f32 (the ABI is F32: --width f64 is
 * refused).
 * --layers A:B records layers A..B-1 only (plus embed and head): a call is
 * held in memory until it is written, which matters for long prefills of
 * large models. Exit 0, or 2 on error.
 */
#include <stdlib.h>
#include <string.h>
#include "cli/cmdopts.h"
#include "cli/cmds.h"
#include "cli/cmdtab.h"
#include "harness/backend/backend.h"
#include "harness/ops/ops.h"
#include "harness/capture/capture.h"
#include "harness/capture/capture_backend.h"
#include "harness/backend/isolate.h"
#include "receipts/capture_pins.h"
#include "io/model.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"
#include "receipts/receipts.h"

int dsv4q_cmd_capture(int argc, char **argv)
{
    dsv4q_capture_args c;
    dsv4q_cli_opts *o = &c.c;
    char err[1024], dir[4096], bnames[1024];
    int prc = dsv4q_cli_parse(argc, argv, &c, sizeof c);
    if (prc >= 0) return prc;
    dsv4q_cli_threads(o);
    /* --backend: B's declaration is the profile, the width is f32 */
    dsv4q_backend_desc desc;
    dsv4q_iso_opts iso = {c.timeout, 0};
    char bprof[512] = "", bbound[1024] = "";
    uint64_t bs_decl = 0;
    if (c.backend) {
        char list[1024];
        if (o->width_set && o->width == 64) {
            fprintf(stderr, "dsv4q capture: --backend runs the forward pass on %s's operators through the backend "
                    "ABI, which is F32: --width f64 cannot be combined with it (f32 is implied)\n", c.backend);
            return 2;
        }
        o->width = 32;
        iso.inprocess = !dsv4q_backend_is_path(c.backend);   /* built-ins are trusted; a plugin runs in a child */
        if (iso.inprocess && !dsv4q_backend_builtin(c.backend)) {
            dsv4q_backend_builtin_list(list, sizeof list);
            fprintf(stderr, "dsv4q capture: --backend %s: not a built-in backend (%s) nor a plugin path (a '/' or "
                    "\".so\")\n", c.backend, list);
            return 2;
        }
        if (dsv4q_iso_probe(c.backend, &iso, &desc, NULL, err, sizeof err)) {
            fprintf(stderr, "dsv4q capture: %s\n", err);
            return 2;
        }
        if (dsv4q_declaration_parse(desc.profile, &bs_decl, err, sizeof err)) {   /* --boundary: exclusive */
            fprintf(stderr, "dsv4q capture: --backend %s declares '%s': %s\n", c.backend, desc.profile, err);
            return 2;
        }
        /* the declaration as the capture states it: profile + boundary overrides */
        dsv4q_declaration_format(bs_decl, bprof, sizeof bprof);
        char *colon = strchr(bprof, ':');
        if (colon) {
            snprintf(bbound, sizeof bbound, "%s", colon + 1);
            *colon = 0;
        }
        o->profile = bprof;
        snprintf(o->boundary, sizeof o->boundary, "%s", bbound);
    } else if (c.timeout_set) {
        fprintf(stderr, "dsv4q capture: --timeout applies to --backend only\n");
        return 2;
    }
    const dsv4q_dtype dt = c.dtype_set ? (dsv4q_dtype)c.dtype : o->width == 64 ? DSV4Q_DT_F64 : DSV4Q_DT_F32;
    int lo = 0, hi = 0;
    if (c.layers) {
        char *e1, *e2;
        lo = (int)strtol(c.layers, &e1, 10);
        hi = *e1 == ':' ? (int)strtol(e1 + 1, &e2, 10) : -1;
        if (*e1 != ':' || *e2 || lo < 0 || hi <= lo) {
            fprintf(stderr, "dsv4q capture: --layers wants A:B (layers A..B-1), got '%s'\n", c.layers);
            return 2;
        }
    }
    uint64_t bs;
    if (dsv4q_cli_bset(o, &bs, err, sizeof err)) {
        fprintf(stderr, "dsv4q capture: %s\n", err);
        return 2;
    }
    dsv4q_model *m;
    dsv4q_tokens t;
    if (dsv4q_cli_start("capture", o, dir, sizeof dir, &m, &t)) return 2;
    char csha[65], wsha[65], ver[128], engine[128];
    dsv4q_capture_writer *w = NULL;
    dsv4q_run *r = NULL;
    double *logits = malloc(sizeof(double) * (size_t)m->cfg.vocab_size);
    int rc = 2;
    if (!logits) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    if (dsv4q_capture_pins(dir, csha, wsha, NULL, err, sizeof err)) goto fail;
    snprintf(ver, sizeof ver, "%s (%s)", DSV4Q_VERSION, dsv4q_git_commit());
    snprintf(engine, sizeof engine, "%s",
             c.engine ? c.engine : c.backend ? desc.name : (o->width == 64 ? "dsv4q-oracle-f64" : "dsv4q-oracle-f32"));
    if (c.backend)
        snprintf(ver, sizeof ver, "%s (its operators in the dsv4q %s forward pass)", desc.version, DSV4Q_VERSION);
    dsv4q_capture_info info = {.engine = engine,
                               .engine_version = ver,
                               .profile = o->profile,
                               .boundary = o->boundary,
                               .dtype = dt,
                               .config_sha = csha,
                               .weights_sha = wsha,
                               .extra_meta = {{"width", o->width == 64 ? "f64" : "f32"}, {"tokens_sha256", t.pin}},
                               .layer_lo = lo,
                               .layer_hi = hi};
    int nx = 2; /* then the model family (V4.1 only: a V4 capture has no such key) and the backend */
    if (m->cfg.arch == DSV4Q_ARCH_V41) {
        info.extra_meta[nx][0] = "model";
        info.extra_meta[nx++][1] = "deepseek_v41";
    }
    if (c.backend) {
        info.extra_meta[nx][0] = "backend";
        info.extra_meta[nx++][1] = c.backend;
    }
    /* --chunk: the prefill in calls of that many tokens, as a chunked-prefill engine writes it */
    const long chunk = o->chunk && o->chunk < t.nprompt ? o->chunk : t.nprompt;
    char plen[32];
    if (chunk < t.nprompt) {
        if (c.backend) {
            snprintf(err, sizeof err,
                     "--chunk: a backend's operators have no chunk contract (leave it out with a "
                     "backend)");
            goto fail;
        }
        snprintf(plen, sizeof plen, "%ld", t.nprompt);
        info.extra_meta[nx][0] = "prompt_len";
        info.extra_meta[nx++][1] = plen;
    }
    if (hi > m->cfg.n_layers) {
        snprintf(err, sizeof err, "--layers %s: the model has %d layers", c.layers, m->cfg.n_layers);
        goto fail;
    }
    dsv4q_boundary_format(bs & dsv4q_boundary_arch_mask(m->cfg.arch), bnames, sizeof bnames);
    fprintf(stderr, "dsv4q capture: %s%s%s, width f%d, profile %s (%s), prompt %ld, decode %ld -> %s (%s)\n", dir,
            c.backend ? ", backend " : "", c.backend ? c.backend : "", o->width, o->profile, bnames, t.nprompt,
            t.nteacher, o->out, dt == DSV4Q_DT_BF16 ? "storage dtypes" : dsv4q_dtype_name(dt));
    int ncalls;
    if (c.backend) {
        dsv4q_capture_backend_res res;
        if (dsv4q_capture_backend(c.backend, &iso, m, bs, o->out, &info, t.prompt, t.nprompt, t.teacher, t.nteacher,
                                  &res, err, sizeof err))
            goto fail;
        ncalls = res.ncalls;
        long nfb = 0, ncall = 0;
        char fbl[2048] = "";
        size_t n = 0;
        for (int i = 0; i < DSV4Q_OP_COUNT; i++) {
            ncall += res.calls[i];
            if (!res.fallbacks[i]) continue;
            nfb += res.fallbacks[i];
            if (n < sizeof fbl)
                n += (size_t)snprintf(fbl + n, sizeof fbl - n, "%s%s %ld", n ? ", " : "", dsv4q_op_get(i)->name,
                                      res.fallbacks[i]);
        }
        fprintf(stderr, "dsv4q capture: %s: %ld operator calls, decode attention through %s\n", c.backend, ncall,
                dsv4q_op_get(res.decode_op)->name);
        if (nfb)
            fprintf(stderr, "dsv4q capture: %ld calls ran on oracle-f32 (outside %s's caps or declined by it): %s\n",
                    nfb, c.backend, fbl);
    } else {
        if (dsv4q_capture_writer_new(&w, o->out, &m->cfg, &info, err, sizeof err)) goto fail;
        if (dsv4q_run_open(&r, m, o->width, bs, t.nprompt + t.nteacher, NULL, NULL, err, sizeof err)) goto fail;
        if (chunk < t.nprompt && dsv4q_run_set_prefill(r, t.nprompt, err, sizeof err)) goto fail;
        dsv4q_run_set_stage_hook(r, dsv4q_capture_stage_cb, w);
        for (long pos = 0, s; pos < t.nprompt + t.nteacher; pos += s) {
            s = pos < t.nprompt ? (t.nprompt - pos < chunk ? t.nprompt - pos : chunk) : 1;
            const int32_t *ids = pos < t.nprompt ? t.prompt + pos : &t.teacher[pos - t.nprompt];
            if (dsv4q_run_feed(r, ids, s, logits, err, sizeof err)) goto fail;
            if (dsv4q_capture_writer_call(w, pos, ids, s, err, sizeof err)) goto fail;
        }
        ncalls = dsv4q_capture_writer_count(w);
    }
    int per_call = 0;
    for (int st = 0; st < dsv4q_stage_count_arch(m->cfg.arch); st++) {
        const dsv4q_stage_info *si = dsv4q_stage_get_arch(m->cfg.arch, st);
        if (si->optional) continue;   /* mtp: not run by capture */
        const int l0 = si->per_layer ? lo : 0, l1 = si->per_layer ? (hi > 0 ? hi : m->cfg.n_layers) : 1;
        for (int l = l0; l < l1; l++) per_call += dsv4q_stage_present(&m->cfg, st, l) ? si->nin + si->nout : 0;
    }
    printf("wrote %d calls to %s (engine %s, profile %s, %s; %d stage tensors per call)\n",
           ncalls, o->out, engine, o->profile,
           dt == DSV4Q_DT_BF16 ? "storage dtypes" : dsv4q_dtype_name(dt), per_call);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "dsv4q capture: %s\n", err);
out:
    dsv4q_run_close(r);
    dsv4q_capture_writer_free(w);
    free(logits);
    dsv4q_tokens_free(&t);
    dsv4q_model_close(m);
    return rc;
}
