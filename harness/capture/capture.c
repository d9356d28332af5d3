/*
 * capture.c - the capture reader/validator and the oracle's capture writer
 * (see capture.h; format: docs/captures.md).
 *
 * The reader is strict for the same reason the gate parser is: a capture
 * that names a tensor "L3.attn.inn" or gives it the shape of another call
 * must be an error, not a stage that silently is not checked. Everything a
 * replay needs is proven here, once, before any compute: afterwards a
 * captured tensor is either absent or exactly the stage table's shape.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness/capture/capture.h"
#include "io/sha256.h"
#include "oracle/boundary.h"
#include "base/util.h"

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* ---- pins: receipts/capture_pins.c (they hash through the receipts' pins) */

/* ---- reader ------------------------------------------------------------ */

void dsv4q_capture_close(dsv4q_capture *c)
{
    if (!c) return;
    for (int i = 0; i < c->ncalls; i++) {
        dsv4q_st_close(c->calls[i].st);
        free(c->calls[i].ids);
    }
    free(c->calls);
    free(c->prefix_ids);
    free(c->prefix_meta);
    free(c);
}

/* Metadata prefix_token_ids of call file f (the first call's: into cap;
 * later calls must carry the same text). */
static int read_prefix(dsv4q_capture *cap, const char *f, const char *v, int first, const dsv4q_config *cfg, char *err,
                       size_t errlen)
{
    if (!first) {
        if ((v == NULL) != (cap->prefix_meta == NULL) || (v && strcmp(v, cap->prefix_meta)))
            return dsv4q_errf(err, errlen,
                              "capture %s: metadata prefix_token_ids differs from the first call's (the same in "
                              "every call, or in none)",
                              f);
        return 0;
    }
    if (!v) return 0;
    json_error_t je;
    json_t *ids = json_loads(v, JSON_DECODE_ANY, &je);
    const long n = json_is_array(ids) ? (long)json_array_size(ids) : 0;
    if (n < 1 || !(cap->prefix_ids = malloc(sizeof(int32_t) * (size_t)n)) || !(cap->prefix_meta = strdup(v))) {
        json_decref(ids);
        return dsv4q_errf(err, errlen,
                          "capture %s: metadata prefix_token_ids must be a non-empty JSON list of token ids (the "
                          "cached prefix the calls continue)",
                          f);
    }
    for (long i = 0; i < n; i++) {
        json_t *x = json_array_get(ids, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= cfg->vocab_size) {
            json_decref(ids);
            return dsv4q_errf(err, errlen, "capture %s: prefix_token_ids[%ld] must be an integer token id in [0, %d)",
                              f, i, cfg->vocab_size);
        }
        cap->prefix_ids[i] = (int32_t)json_integer_value(x);
    }
    cap->prefix_len = n;
    json_decref(ids);
    return 0;
}

static const char *const required_meta[] = {"dsv4q_capture_version", "checkpoint_sha256", "position", "token_ids",
                                            "engine", "engine_version", "profile", NULL};

static int parse_position(const char *v, long *out)
{
    if (!v || !*v || strlen(v) > 12) return -1;
    long p = 0;
    for (const char *q = v; *q; q++) {
        if (*q < '0' || *q > '9') return -1;
        p = p * 10 + (*q - '0');
    }
    *out = p;
    return 0;
}

static int is_hex64(const char *s)
{
    if (!s || strlen(s) != 64) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

/* The prompt of a chunked prefill (cap->prompt, 0 for a prefill in one
 * call), from the calls sorted by position: prompt_len when declared, else
 * the end of the last call of several tokens. A call of several tokens
 * past position 0 must lie inside it (a decode step has one token), and no
 * call may cross its end. */
static int set_prompt(dsv4q_capture *c, const dsv4q_config *cfg, char *err, size_t errlen)
{
    if (c->prompt_decl > dsv4q_run_max_seq_len(cfg))
        return dsv4q_errf(err, errlen,
                          "capture %s: metadata prompt_len %ld is past the model's max_seq_len %ld "
                          "(original_seq_len x rope_factor)",
                          c->calls[0].file, c->prompt_decl, dsv4q_run_max_seq_len(cfg));
    long prompt = c->prompt_decl ? c->prompt_decl : c->prefix_len; /* a cached prefix is prompt */
    for (int i = 0; !c->prompt_decl && i < c->ncalls; i++)
        if (c->calls[i].s > 1 && c->calls[i].pos + c->calls[i].s > prompt) prompt = c->calls[i].pos + c->calls[i].s;
    int chunked = 0;
    for (int i = 0; i < c->ncalls; i++) {
        const dsv4q_capture_call *k = &c->calls[i];
        if (k->pos < prompt && k->pos + k->s > prompt)
            return dsv4q_errf(err, errlen,
                              "capture %s: the call at position %ld of %ld tokens crosses the end of the prompt "
                              "(prompt_len %ld): a call is a chunk of the prompt or a decode step",
                              k->file, k->pos, k->s, prompt);
        if (k->pos >= prompt && k->s != 1)
            return dsv4q_errf(err, errlen,
                              "capture %s: a call at position %ld is a decode step and has exactly one token "
                              "(token_ids has %ld); only the prefill has several (a prefill in chunks: its calls "
                              "lie inside prompt_len, %ld here)",
                              k->file, k->pos, k->s, prompt);
        if (k->pos > 0 && k->pos < prompt) chunked = 1;
    }
    c->prompt = chunked ? prompt : 0;
    /* calls of the first chunks only: the run still holds the whole prompt */
    if (c->prompt > c->max_pos) c->max_pos = c->prompt;
    return 0;
}

/* Metadata of one call file into call c (and, for the first file, the
 * capture-wide fields of cap; later files must agree). */
static int read_meta(dsv4q_capture *cap, dsv4q_capture_call *c, int first, const dsv4q_config *cfg, char *err,
                     size_t errlen)
{
    const char *f = c->file;
    for (int i = 0; required_meta[i]; i++)
        if (!dsv4q_st_meta(c->st, required_meta[i]))
            return dsv4q_errf(err, errlen,
                              "capture %s: __metadata__ lacks \"%s\" (required: dsv4q_capture_version, "
                              "checkpoint_sha256, position, token_ids, engine, engine_version, profile; see "
                              "docs/captures.md)",
                              f, required_meta[i]);
    const char *ver = dsv4q_st_meta(c->st, "dsv4q_capture_version");
    if (strcmp(ver, DSV4Q_CAPTURE_VERSION))
        return dsv4q_errf(err, errlen,
                          "capture %s: dsv4q_capture_version \"%s\" is not supported (this dsv4q reads \"%s\")", f, ver,
                          DSV4Q_CAPTURE_VERSION);
    /* a V4.1 capture says so (cli/cmd_capture.c writes "model"; a V4 capture has no such key) */
    const char *fam = dsv4q_st_meta(c->st, "model");
    const int v41 = fam && !strcmp(fam, "deepseek_v41");
    if (v41 != (cfg->arch == DSV4Q_ARCH_V41))
        return dsv4q_errf(err, errlen,
                          "capture %s: it is of a DeepSeek %s model, the model given is DeepSeek %s (pass the "
                          "checkpoint it was captured from with --model)",
                          f, v41 ? "V4.1" : "V4", cfg->arch == DSV4Q_ARCH_V41 ? "V4.1" : "V4");
    if (parse_position(dsv4q_st_meta(c->st, "position"), &c->pos))
        return dsv4q_errf(err, errlen,
                          "capture %s: metadata position \"%s\" must be a non-negative integer (the start "
                          "position of the call)",
                          f, dsv4q_st_meta(c->st, "position"));
    if (c->pos >= dsv4q_run_max_seq_len(cfg))
        return dsv4q_errf(err, errlen,
                          "capture %s: metadata position %ld is past the model's max_seq_len %ld "
                          "(original_seq_len x rope_factor)",
                          f, c->pos, dsv4q_run_max_seq_len(cfg));
    const char *ck = dsv4q_st_meta(c->st, "checkpoint_sha256"), *wk = dsv4q_st_meta(c->st, "weights_sha256");
    if (!is_hex64(ck))
        return dsv4q_errf(err, errlen,
                          "capture %s: metadata checkpoint_sha256 must be 64 lowercase hex digits (SHA-256 of "
                          "the checkpoint's config.json)",
                          f);
    if (wk && !is_hex64(wk))
        return dsv4q_errf(err, errlen, "capture %s: metadata weights_sha256 must be 64 lowercase hex digits", f);
    json_error_t je;
    json_t *ids = json_loads(dsv4q_st_meta(c->st, "token_ids"), JSON_DECODE_ANY, &je);
    if (!json_is_array(ids) || json_array_size(ids) < 1) {
        json_decref(ids);
        return dsv4q_errf(err, errlen, "capture %s: metadata token_ids must be a non-empty JSON list of token ids", f);
    }
    c->s = (long)json_array_size(ids);
    c->arch = cfg->arch;
    c->ids = malloc(sizeof(int32_t) * (size_t)c->s);
    if (!c->ids) {
        json_decref(ids);
        return dsv4q_errf(err, errlen, "out of memory");
    }
    for (long i = 0; i < c->s; i++) {
        json_t *v = json_array_get(ids, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= cfg->vocab_size) {
            json_decref(ids);
            return dsv4q_errf(err, errlen, "capture %s: token_ids[%ld] must be an integer token id in [0, %d)", f, i,
                              cfg->vocab_size);
        }
        c->ids[i] = (int32_t)json_integer_value(v);
    }
    json_decref(ids);
    /* prompt_len: the prompt of a prefill fed in several calls (chunks);
     * the same in every call, or in none */
    const char *pl = dsv4q_st_meta(c->st, "prompt_len");
    long plen = 0;
    if (pl && (parse_position(pl, &plen) || plen < 1))
        return dsv4q_errf(err, errlen,
                          "capture %s: metadata prompt_len \"%s\" must be a positive integer (the prompt's tokens "
                          "when the prefill is fed in several calls)",
                          f, pl);
    if (read_prefix(cap, f, dsv4q_st_meta(c->st, "prefix_token_ids"), first, cfg, err, errlen)) return -1;
    if (c->pos < cap->prefix_len)
        return dsv4q_errf(err, errlen,
                          "capture %s: a call at position %ld is inside the cached prefix (prefix_token_ids: "
                          "positions 0..%ld), which the engine did not compute",
                          f, c->pos, cap->prefix_len - 1);
    if (first) cap->prompt_decl = plen;
    else if (plen != cap->prompt_decl)
        return dsv4q_errf(err, errlen,
                          "capture %s: metadata prompt_len is %s here and %s in the first call (the same in every "
                          "call, or in none)",
                          f, pl ? pl : "absent", cap->prompt_decl ? "set" : "absent");
    const char *eng = dsv4q_st_meta(c->st, "engine"), *ev = dsv4q_st_meta(c->st, "engine_version");
    const char *prof = dsv4q_st_meta(c->st, "profile"), *bd = dsv4q_st_meta(c->st, "boundary");
    /* no silent truncation: a value longer than its field is refused as such */
    struct { const char *key, *v; size_t cap; } lim[] = {
        {"engine", eng, sizeof cap->engine}, {"engine_version", ev, sizeof cap->engine_version},
        {"profile", prof, sizeof cap->profile}, {"boundary", bd, sizeof cap->boundary}};
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].v && strlen(lim[i].v) >= lim[i].cap)
            return dsv4q_errf(err, errlen,
                              "capture %s: metadata %s is %zu bytes, longer than the %zu this dsv4q accepts", f,
                              lim[i].key, strlen(lim[i].v), lim[i].cap - 1);
    if (first) {
        snprintf(cap->engine, sizeof cap->engine, "%s", eng);
        snprintf(cap->engine_version, sizeof cap->engine_version, "%s", ev);
        snprintf(cap->profile, sizeof cap->profile, "%s", prof);
        snprintf(cap->boundary, sizeof cap->boundary, "%s", bd ? bd : "");
        snprintf(cap->checkpoint_sha256, sizeof cap->checkpoint_sha256, "%s", ck);
        snprintf(cap->weights_sha256, sizeof cap->weights_sha256, "%s", wk ? wk : "");
        if (dsv4q_profile_set(prof, &cap->bs))
            return dsv4q_errf(err, errlen,
                              "capture %s: metadata profile \"%s\" is not a profile (source, model, qat, exact)", f,
                              prof);
        char e2[512];
        if (cap->boundary[0] && dsv4q_boundary_apply(&cap->bs, cap->boundary, e2, sizeof e2))
            return dsv4q_errf(err, errlen, "capture %s: metadata boundary: %s", f, e2);
        return 0;
    }
    struct { const char *name, *a, *b; } same[] = {
        {"engine", cap->engine, eng}, {"engine_version", cap->engine_version, ev}, {"profile", cap->profile, prof},
        {"boundary", cap->boundary, bd ? bd : ""}, {"checkpoint_sha256", cap->checkpoint_sha256, ck},
        {"weights_sha256", cap->weights_sha256, wk ? wk : ""}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (strcmp(same[i].a, same[i].b))
            return dsv4q_errf(err, errlen,
                              "capture %s: metadata %s \"%s\" differs from \"%s\" in %s (all calls of a capture "
                              "come from one engine run)",
                              f, same[i].name, same[i].b, same[i].a, cap->calls[0].file);
    return 0;
}

/* Every tensor of a call: a stage tensor of the table, the right shape, a
 * float dtype. */
static int check_tensors(const dsv4q_capture_call *c, const dsv4q_config *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < dsv4q_st_count(c->st); i++) {
        const dsv4q_st_tensor *t = dsv4q_st_at(c->st, i);
        int st, layer, io, ti;
        char e2[512];
        if (dsv4q_stage_parse_name_arch(cfg->arch, t->name, &st, &layer, &io, &ti, e2, sizeof e2))
            return dsv4q_errf(err, errlen, "capture %s: %s", c->file, e2);
        if (layer >= cfg->n_layers)
            return dsv4q_errf(err, errlen, "capture %s: tensor %s: layer %d is outside the model's %d layers", c->file,
                              t->name, layer, cfg->n_layers);
        if (t->dtype != DSV4Q_DT_F64 && t->dtype != DSV4Q_DT_F32 && t->dtype != DSV4Q_DT_BF16 &&
            t->dtype != DSV4Q_DT_F16)
            return dsv4q_errf(err, errlen,
                              "capture %s: tensor %s has dtype %s; stage tensors are F64, F32, BF16 or F16", c->file,
                              t->name, dsv4q_dtype_name(t->dtype) ? dsv4q_dtype_name(t->dtype) : "?");
        const dsv4q_stage_info *si = dsv4q_stage_get_arch(cfg->arch, st);
        const dsv4q_stage_tensor *ts = io ? &si->out[ti] : &si->in[ti];
        int64_t want[DSV4Q_STAGE_MAX_DIM];
        int nd = dsv4q_stage_shape(ts, cfg, c->s, want);
        int ok = nd == t->ndim;
        for (int k = 0; ok && k < nd; k++) ok = want[k] == t->shape[k];
        if (!ok) {
            char got[96] = "[", exp[96], sym[64];
            for (int k = 0; k < t->ndim; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)t->shape[k]);
            strcat(got, "]");
            snprintf(exp, sizeof exp, "[");
            for (int k = 0; k < nd; k++)
                snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%lld", k ? ", " : "", (long long)want[k]);
            strcat(exp, "]");
            dsv4q_stage_shape_str(ts, NULL, sym, sizeof sym);
            return dsv4q_errf(err, errlen,
                              "capture %s: tensor %s has shape %s, expected %s (%s with s = %ld tokens of "
                              "this call)",
                              c->file, t->name, got, exp, sym, c->s);
        }
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_call(const void *a, const void *b)
{
    const dsv4q_capture_call *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The call files of path: itself, or the *.safetensors of a directory. */
static int list_files(const char *path, char ***names, int *n, char *err, size_t errlen)
{
    struct stat sb;
    *names = NULL;
    *n = 0;
    if (stat(path, &sb)) return dsv4q_errf(err, errlen, "capture %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        *names = malloc(sizeof(char *));
        if (!*names || !((*names)[0] = strdup(path))) return dsv4q_errf(err, errlen, "out of memory");
        *n = 1;
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) return dsv4q_errf(err, errlen, "capture %s: %s", path, strerror(errno));
    struct dirent *de;
    int cap = 0;
    while ((de = readdir(d))) {
        if (!ends_with(de->d_name, ".safetensors")) continue;
        char full[4200];
        snprintf(full, sizeof full, "%s/%s", path, de->d_name);
        if (stat(full, &sb) || !S_ISREG(sb.st_mode)) continue;
        if (*n == cap) {
            char **nn = realloc(*names, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 16));
            if (!nn) {
                closedir(d);
                return dsv4q_errf(err, errlen, "out of memory");
            }
            *names = nn;
        }
        if (!((*names)[*n] = strdup(full))) {
            closedir(d);
            return dsv4q_errf(err, errlen, "out of memory");
        }
        (*n)++;
    }
    closedir(d);
    if (!*n) return dsv4q_errf(err, errlen, "capture %s: the directory holds no .safetensors call files", path);
    qsort(*names, (size_t)*n, sizeof(char *), cmp_str);
    return 0;
}

int dsv4q_capture_open(dsv4q_capture **out, const char *path, const dsv4q_config *cfg, const char *config_sha,
                       const char *weights_sha, char *err, size_t errlen)
{
    *out = NULL;
    char **names = NULL;
    int n = 0, rc = -1;
    dsv4q_capture *c = calloc(1, sizeof *c);
    char *listing = NULL;
    if (!c) return dsv4q_errf(err, errlen, "out of memory");
    snprintf(c->path, sizeof c->path, "%s", path);
    if (list_files(path, &names, &n, err, errlen)) goto out;
    c->calls = calloc((size_t)n, sizeof *c->calls);
    listing = malloc((size_t)n * 4200 + 1);
    if (!c->calls || !listing) {
        dsv4q_errf(err, errlen, "out of memory");
        goto out;
    }
    size_t ln = 0;
    for (int i = 0; i < n; i++) {
        dsv4q_capture_call *k = &c->calls[i];
        snprintf(k->file, sizeof k->file, "%s", names[i]);
        c->ncalls = i + 1;
        char e2[1024], hex[65];
        if (dsv4q_st_open(&k->st, names[i], e2, sizeof e2)) {
            dsv4q_errf(err, errlen, "capture %s: not a readable safetensors file: %s", names[i], e2);
            goto out;
        }
        if (read_meta(c, k, i == 0, cfg, err, errlen) || check_tensors(k, cfg, err, errlen)) goto out;
        c->ntensors += (long)dsv4q_st_count(k->st);
        if (k->pos + k->s > c->max_pos) c->max_pos = k->pos + k->s;
        if (dsv4q_sha256_hex_file(names[i], hex, e2, sizeof e2)) {
            dsv4q_errf(err, errlen, "%s", e2);
            goto out;
        }
        const char *base = strrchr(names[i], '/');
        ln += (size_t)snprintf(listing + ln, 4200, "%s  %s\n", hex, base ? base + 1 : names[i]);
    }
    dsv4q_sha256_hex(listing, ln, c->sha256);
    qsort(c->calls, (size_t)c->ncalls, sizeof *c->calls, cmp_call);
    for (int i = 1; i < c->ncalls; i++)
        if (c->calls[i].pos == c->calls[i - 1].pos) {
            dsv4q_errf(err, errlen, "capture %s and %s: both are the call at position %ld", c->calls[i - 1].file,
                       c->calls[i].file, c->calls[i].pos);
            goto out;
        }
    if (set_prompt(c, cfg, err, errlen)) goto out;
    for (int i = 1; i < c->ncalls; i++) /* sorted by position: each position is one call's */
        if (c->calls[i].pos < c->calls[i - 1].pos + c->calls[i - 1].s) {
            dsv4q_errf(err, errlen,
                       "capture %s: the call at position %ld of %ld tokens overlaps the call at position %ld of %ld "
                       "tokens (%s)",
                       c->calls[i].file, c->calls[i].pos, c->calls[i].s, c->calls[i - 1].pos, c->calls[i - 1].s,
                       c->calls[i - 1].file);
            goto out;
        }
    if (config_sha && strcmp(config_sha, c->checkpoint_sha256)) {
        dsv4q_errf(err, errlen,
                   "capture %s: checkpoint_sha256 %.16s... does not match the model's config.json (%.16s...): "
                   "the capture was written for another checkpoint",
                   c->calls[0].file, c->checkpoint_sha256, config_sha);
        goto out;
    }
    if (weights_sha && weights_sha[0] && c->weights_sha256[0] && strcmp(weights_sha, c->weights_sha256)) {
        dsv4q_errf(err, errlen,
                   "capture %s: weights_sha256 %.16s... does not match the model's weight files (%.16s...): "
                   "the capture was written for other weights",
                   c->calls[0].file, c->weights_sha256, weights_sha);
        goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(listing);
    dsv4q_capture_close(c);
    return rc;
}

const dsv4q_st_tensor *dsv4q_capture_tensor(const dsv4q_capture_call *c, int stage, int layer, int io, int t)
{
    char name[DSV4Q_STAGE_NAME_MAX];
    if (dsv4q_stage_tensor_name_arch(c->arch, name, sizeof name, stage, layer, io, t)) return NULL;
    return dsv4q_st_find(c->st, name);
}

void dsv4q_capture_values(const dsv4q_st_tensor *t, double *out)
{
    for (int64_t i = 0; i < t->numel; i++) out[i] = dsv4q_decode_elem(t->dtype, t->data, (size_t)i);
}

/* ---- writer ------------------------------------------------------------ */

struct dsv4q_capture_writer {
    char dir[4096];
    dsv4q_config cfg;
    dsv4q_dtype dtype;
    uint64_t bs;
    char engine[128], engine_version[128], profile[32], boundary[4096], config_sha[65], weights_sha[65];
    char extra[8][2][1024];
    int nextra;
    int layer_lo, layer_hi;
    dsv4q_st_writer *cur;
    int ncalls;
    int failed;
    char err[1024];
};

/* "call-" digits ".safetensors": the writer's own file names. */
static int is_call_file(const char *n)
{
    if (strncmp(n, "call-", 5) || !ends_with(n, ".safetensors")) return 0;
    const char *p = n + 5, *e = n + strlen(n) - strlen(".safetensors");
    if (p == e) return 0;
    for (; p < e; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

int dsv4q_capture_clear(const char *dir, char *err, size_t errlen)
{
    if (dsv4q_mkdir_p(dir)) return dsv4q_errf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    if (!d) return dsv4q_errf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        if (ends_with(de->d_name, ".safetensors") && !is_call_file(de->d_name)) {
            closedir(d);
            return dsv4q_errf(err, errlen,
                              "%s holds %s, which is not a capture call file: a capture directory holds only "
                              "its calls (replay reads every .safetensors in it)",
                              dir, de->d_name);
        }
        if (is_call_file(de->d_name)) {   /* a previous capture's call: replaced */
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            if (unlink(p)) {
                closedir(d);
                return dsv4q_errf(err, errlen, "cannot remove %s: %s", p, strerror(errno));
            }
        }
    }
    closedir(d);
    return 0;
}

int dsv4q_capture_writer_new(dsv4q_capture_writer **out, const char *dir, const dsv4q_config *cfg,
                             const dsv4q_capture_info *info, char *err, size_t errlen)
{
    *out = NULL;
    if (info->dtype != DSV4Q_DT_F64 && info->dtype != DSV4Q_DT_F32 && info->dtype != DSV4Q_DT_BF16)
        return dsv4q_errf(err, errlen, "capture dtype must be F64, F32 or BF16");
    if (dsv4q_capture_clear(dir, err, errlen)) return -1;
    dsv4q_capture_writer *w = calloc(1, sizeof *w);
    if (!w) return dsv4q_errf(err, errlen, "out of memory");
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    w->cfg = *cfg;
    w->dtype = info->dtype;
    w->layer_lo = info->layer_lo;
    w->layer_hi = info->layer_hi > 0 ? info->layer_hi : cfg->n_layers;
    {   /* no silent truncation of what the writer records */
        struct { const char *key, *v; size_t cap; } lim[] = {
            {"engine", info->engine, sizeof w->engine}, {"engine_version", info->engine_version, sizeof w->engine_version},
            {"profile", info->profile, sizeof w->profile}, {"boundary", info->boundary, sizeof w->boundary}};
        for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
            if (lim[i].v && strlen(lim[i].v) >= lim[i].cap) {
                free(w);
                return dsv4q_errf(err, errlen, "capture: %s is %zu bytes, longer than the %zu a capture records",
                                  lim[i].key, strlen(lim[i].v), lim[i].cap - 1);
            }
    }
    snprintf(w->engine, sizeof w->engine, "%s", info->engine);
    snprintf(w->engine_version, sizeof w->engine_version, "%s", info->engine_version);
    snprintf(w->profile, sizeof w->profile, "%s", info->profile);
    snprintf(w->boundary, sizeof w->boundary, "%s", info->boundary ? info->boundary : "");
    if (dsv4q_profile_set(w->profile, &w->bs) ||
        (w->boundary[0] && dsv4q_boundary_apply(&w->bs, w->boundary, err, errlen))) {
        free(w);
        return dsv4q_errf(err, errlen, "capture: bad profile '%s' / boundary '%s'", info->profile, w->boundary);
    }
    snprintf(w->config_sha, sizeof w->config_sha, "%s", info->config_sha);
    snprintf(w->weights_sha, sizeof w->weights_sha, "%s", info->weights_sha ? info->weights_sha : "");
    for (int i = 0; i < 8 && info->extra_meta[i][0]; i++, w->nextra++) {
        snprintf(w->extra[i][0], sizeof w->extra[i][0], "%s", info->extra_meta[i][0]);
        snprintf(w->extra[i][1], sizeof w->extra[i][1], "%s", info->extra_meta[i][1] ? info->extra_meta[i][1] : "");
    }
    *out = w;
    return 0;
}

/* Add one stage tensor (values v) to the current call in dtype dt. */
static int add_tensor(dsv4q_capture_writer *w, const char *name, dsv4q_dtype dt, int ndim, const int64_t *shape,
                      const double *v, int64_t n)
{
    size_t sz = dsv4q_dtype_size(dt);
    void *buf = malloc(sz * (size_t)(n ? n : 1));
    if (!buf) return dsv4q_errf(w->err, sizeof w->err, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (dt == DSV4Q_DT_F64) ((double *)buf)[i] = v[i];
        else if (dt == DSV4Q_DT_F32) ((float *)buf)[i] = (float)v[i];
        else ((uint16_t *)buf)[i] = dsv4q_bf16_encode(v[i]);
    }
    int rc = dsv4q_st_writer_add(w->cur, name, dt, ndim, shape, buf, sz * (size_t)n, w->err, sizeof w->err);
    free(buf);
    return rc;
}

int dsv4q_capture_stage_cb(void *user, const dsv4q_stage_io *io)
{
    dsv4q_capture_writer *w = user;
    if (w->failed) return 0;
    if (!w->cur && !(w->cur = dsv4q_st_writer_new())) {
        w->failed = 1;
        snprintf(w->err, sizeof w->err, "out of memory");
        return 0;
    }
    const dsv4q_stage_info *si = dsv4q_stage_get_arch(w->cfg.arch, io->stage);
    if (si->per_layer && (io->layer < w->layer_lo || io->layer >= w->layer_hi)) return 0;
    for (int side = 0; side < 2; side++)
        for (int t = 0; t < (side ? si->nout : si->nin); t++) {
            const dsv4q_stage_tensor *ts = side ? &si->out[t] : &si->in[t];
            char name[DSV4Q_STAGE_NAME_MAX];
            int64_t shape[DSV4Q_STAGE_MAX_DIM];
            int nd = dsv4q_stage_shape(ts, &w->cfg, io->s, shape);
            dsv4q_stage_tensor_name_arch(w->cfg.arch, name, sizeof name, io->stage, io->layer, side, t);
            dsv4q_dtype dt = w->dtype == DSV4Q_DT_BF16 ? (dsv4q_dtype)dsv4q_stage_storage(ts, w->bs) : w->dtype;
            if (add_tensor(w, name, dt, nd, shape, side ? io->out[t] : io->in[t], dsv4q_stage_numel(ts, &w->cfg, io->s))) {
                w->failed = 1;
                return 0;
            }
        }
    return 0;
}

int dsv4q_capture_writer_call(dsv4q_capture_writer *w, long pos, const int32_t *ids, long s, char *err, size_t errlen)
{
    if (w->failed) {
        dsv4q_st_writer_free(w->cur);
        w->cur = NULL;
        return dsv4q_errf(err, errlen, "capture: %s", w->err);
    }
    if (!w->cur && !(w->cur = dsv4q_st_writer_new())) return dsv4q_errf(err, errlen, "out of memory");
    char posv[32], path[4200];
    snprintf(posv, sizeof posv, "%ld", pos);
    size_t cap = (size_t)s * 12 + 4, n = 0;
    char *tok = malloc(cap);
    if (!tok) return dsv4q_errf(err, errlen, "out of memory");
    n += (size_t)snprintf(tok, cap, "[");
    for (long i = 0; i < s; i++) n += (size_t)snprintf(tok + n, cap - n, "%s%d", i ? "," : "", ids[i]);
    snprintf(tok + n, cap - n, "]");
    dsv4q_st_writer_meta(w->cur, "dsv4q_capture_version", DSV4Q_CAPTURE_VERSION);
    dsv4q_st_writer_meta(w->cur, "checkpoint_sha256", w->config_sha);
    if (w->weights_sha[0]) dsv4q_st_writer_meta(w->cur, "weights_sha256", w->weights_sha);
    dsv4q_st_writer_meta(w->cur, "position", posv);
    dsv4q_st_writer_meta(w->cur, "token_ids", tok);
    dsv4q_st_writer_meta(w->cur, "engine", w->engine);
    dsv4q_st_writer_meta(w->cur, "engine_version", w->engine_version);
    dsv4q_st_writer_meta(w->cur, "profile", w->profile);
    if (w->boundary[0]) dsv4q_st_writer_meta(w->cur, "boundary", w->boundary);
    for (int i = 0; i < w->nextra; i++) dsv4q_st_writer_meta(w->cur, w->extra[i][0], w->extra[i][1]);
    free(tok);
    snprintf(path, sizeof path, "%s/call-%04d.safetensors", w->dir, w->ncalls);
    dsv4q_st_writer *cur = w->cur;
    w->cur = NULL;
    if (dsv4q_st_writer_write(cur, path, err, errlen)) return -1;
    w->ncalls++;
    return 0;
}

int dsv4q_capture_writer_meta(dsv4q_capture_writer *w, const char *key, const char *value, char *err, size_t errlen)
{
    int i = 0;
    while (i < w->nextra && strcmp(w->extra[i][0], key)) i++;
    if (i == 8) return dsv4q_errf(err, errlen, "capture: more than 8 extra metadata keys (adding %s)", key);
    if (strlen(key) >= sizeof w->extra[i][0] || strlen(value) >= sizeof w->extra[i][1])
        return dsv4q_errf(err, errlen, "capture: metadata %s is longer than the %zu bytes a capture records", key,
                          sizeof w->extra[i][1] - 1);
    snprintf(w->extra[i][0], sizeof w->extra[i][0], "%s", key);
    snprintf(w->extra[i][1], sizeof w->extra[i][1], "%s", value);
    if (i == w->nextra) w->nextra++;
    return 0;
}

int dsv4q_capture_writer_count(const dsv4q_capture_writer *w) { return w->ncalls; }

void dsv4q_capture_writer_free(dsv4q_capture_writer *w)
{
    if (!w) return;
    dsv4q_st_writer_free(w->cur);
    free(w);
}
