/*
 * common.c - what the measuring commands share once their options are
 * parsed (see common.h): the output-directory check the table's OUTPATH
 * rows call, the embedded default model, token input, the boundary set,
 * and the receipt write. Option parsing itself is cli/optparse.c's.
 */
#include "base/file.h"
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/rng.h"
#include "cli/common.h"
#include "io/config.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io/sha256.h"
#include "io/synth.h"
#include "oracle/boundary.h"
#include "oracle/model_run.h"
#include "receipts/receipts.h"
#include "base/util.h"

int dsv4q_cli_check_out(const char *opt, const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(dir, W_OK) != 0) {
        fprintf(stderr, "dsv4q: %s %s: directory '%s' does not exist or is not writable\n", opt, path, dir);
        return -1;
    }
    return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

int dsv4q_cli_model_dir(const dsv4q_cli_opts *o, char *dir, size_t len, char *err, size_t errlen)
{
    if (o->model) {
        snprintf(dir, len, "%s", o->model);
        return 0;
    }
    const char *c = getenv("DSV4Q_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    char base[4096];
    if (c && *c) snprintf(base, sizeof base, "%s", c);
    else if (x && *x) snprintf(base, sizeof base, "%s/dsv4q", x);
    else snprintf(base, sizeof base, "%s/.cache/dsv4q", h && *h ? h : "/tmp");
    snprintf(dir, len, "%s/tiny-seed1", base);
    char cfgp[4200];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    if (access(cfgp, F_OK) == 0 || access(dir, F_OK) == 0) {
        /* a damaged cache (truncated weights, edited config, half a synth)
         * is rebuilt, not run: the embedded default is deterministic */
        char e2[1024];
        dsv4q_config cc;
        dsv4q_st *st = NULL;
        if (dsv4q_config_load(&cc, cfgp, e2, sizeof e2) == 0 && dsv4q_st_open(&st, dir, e2, sizeof e2) == 0) {
            dsv4q_st_close(st);
            return 0;
        }
        fprintf(stderr, "dsv4q: the cached default %s is damaged (%s); rebuilding it\n", dir, e2);
        if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "the cached default %s is damaged and cannot be removed (%s); remove it "
                     "(rm -rf '%s') and run again", dir, strerror(errno), dir);
            return -1;
        }
    }
    if (dsv4q_mkdir_p(base)) {
        snprintf(err, errlen, "cannot create cache directory %s: %s", base, strerror(errno));
        return -1;
    }
    dsv4q_config cfg;
    if (dsv4q_config_builtin(&cfg, "tiny", err, errlen)) return -1;
    fprintf(stderr, "dsv4q: no --model given; synthesizing the embedded default `tiny` into %s\n", dir);
    return dsv4q_synth_write(&cfg, 1, dir, 1, err, errlen);
}

void dsv4q_cli_model_notes(const char *cmd, const dsv4q_model *m)
{
    if (m->n_bf16_quant > 0)
        fprintf(stderr, "dsv4q %s: note: %ld weight(s) stored BF16 where the config's quantization says FP8/FP4 "
                "(first: %s); they run as BF16 weights\n", cmd, m->n_bf16_quant, m->first_bf16_quant);
    if (m->cfg.arch == DSV4Q_ARCH_V41 && m->cfg.dspark_block_size > 0 && m->cfg.n_mtp_layers == 0)
        fprintf(stderr,
                "dsv4q %s: note: the config has DSpark (dspark_block_size %d) but the checkpoint has no mtp.* "
                "DSpark stages: the main model only (docs/v41.md)\n",
                cmd, m->cfg.dspark_block_size);
    else if (m->cfg.arch == DSV4Q_ARCH_V41 && m->cfg.dspark_block_size > 0 && strcmp(cmd, "run") != 0)
        fprintf(stderr,
                "dsv4q %s: note: the %d DSpark draft stages (mtp.*) are loaded but not run by this command "
                "(`dsv4q run` runs them): the main model only (docs/v41.md)\n",
                cmd, m->cfg.n_mtp_layers);
    if (m->cfg.arch == DSV4Q_ARCH_V41 && m->cfg.vision_n_layers > 0)
        fprintf(stderr,
                "dsv4q %s: note: the vision tower (vision_n_layers %d) is not loaded: text only, image "
                "tokens are refused (docs/v41.md)\n",
                cmd, m->cfg.vision_n_layers);
}

/* Deterministic synthetic ids: splitmix64's output function over (seed,
 * index) (base/rng.h). */
static int32_t synth_id(uint64_t seed, long i, int vocab)
{
    const uint64_t z = seed * DSV4Q_RNG_GAMMA + (uint64_t)i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    return (int32_t)(dsv4q_mix64(z) % (uint64_t)vocab);
}

static int read_ids(json_t *arr, const char *file, const char *key, int32_t **out, long *n, char *err,
                    size_t errlen)
{
    if (!json_is_array(arr)) {
        snprintf(err, errlen, "%s: field '%s' must be an array of token ids", file, key);
        return -1;
    }
    *n = (long)json_array_size(arr);
    *out = malloc(sizeof(int32_t) * (size_t)(*n ? *n : 1));
    if (!*out) { snprintf(err, errlen, "out of memory"); return -1; }
    for (long i = 0; i < *n; i++) {
        json_t *v = json_array_get(arr, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            snprintf(err, errlen, "%s: %s[%ld] must be a non-negative integer token id", file, key, i);
            return -1;
        }
        (*out)[i] = (int32_t)json_integer_value(v);
    }
    return 0;
}

int dsv4q_cli_tokens(const dsv4q_cli_opts *o, int vocab, dsv4q_tokens *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (o->tokens && o->prompt_len_set) {
        snprintf(err, errlen, "--tokens and --prompt-len exclude each other (the prompt comes from one of them)");
        return -1;
    }
    if (o->tokens) {
        char *text;
        size_t tlen;
        if (dsv4q_file_read_all(o->tokens, "tokens file", DSV4Q_LIMIT_JSON, &text, &tlen, err, errlen) != 0)
            return -1;
        json_error_t je;
        json_t *root = json_loadb(text, tlen, 0, &je);
        free(text);
        if (!root) {
            snprintf(err, errlen, "%s: invalid JSON at line %d: %s", o->tokens, je.line, je.text);
            return -1;
        }
        int rc = read_ids(json_object_get(root, "prompt"), o->tokens, "prompt", &t->prompt, &t->nprompt, err, errlen);
        json_t *te = json_object_get(root, "teacher");
        if (!rc && te) rc = read_ids(te, o->tokens, "teacher", &t->teacher, &t->nteacher, err, errlen);
        json_decref(root);
        if (rc) { dsv4q_tokens_free(t); return -1; }
        if (t->nprompt < 1) { snprintf(err, errlen, "%s: 'prompt' is empty", o->tokens); dsv4q_tokens_free(t); return -1; }
        if (o->decode_set && o->decode > t->nteacher) {
            snprintf(err, errlen, "%s: --decode %ld asks for more steps than the %ld teacher ids in the file",
                     o->tokens, o->decode, t->nteacher);
            dsv4q_tokens_free(t);
            return -1;
        }
        if (o->decode_set) t->nteacher = o->decode;
        snprintf(t->source, sizeof t->source, "%s", o->tokens);
    } else {
        long m = o->decode;
        if (o->prompt_len < 1) { snprintf(err, errlen, "--prompt-len must be >= 1"); return -1; }
        t->nprompt = o->prompt_len;
        t->nteacher = m;
        t->prompt = malloc(sizeof(int32_t) * (size_t)t->nprompt);
        t->teacher = malloc(sizeof(int32_t) * (size_t)(m ? m : 1));
        if (!t->prompt || !t->teacher) { snprintf(err, errlen, "out of memory"); dsv4q_tokens_free(t); return -1; }
        for (long i = 0; i < t->nprompt; i++) t->prompt[i] = synth_id(o->seed, i, vocab);
        for (long i = 0; i < m; i++) t->teacher[i] = synth_id(o->seed, t->nprompt + i, vocab);
        snprintf(t->source, sizeof t->source, "synthetic:seed=%llu,prompt=%ld,decode=%ld",
                 (unsigned long long)o->seed, t->nprompt, m);
    }
    for (long i = 0; i < t->nprompt + t->nteacher; i++) {
        int32_t id = i < t->nprompt ? t->prompt[i] : t->teacher[i - t->nprompt];
        if (id >= vocab) {
            snprintf(err, errlen, "%s: token %s[%ld] = %d is outside the vocabulary [0, %d)", t->source,
                     i < t->nprompt ? "prompt" : "teacher", i < t->nprompt ? i : i - t->nprompt, id, vocab);
            dsv4q_tokens_free(t);
            return -1;
        }
    }
    long n = t->nprompt + t->nteacher;
    int32_t *all = malloc(sizeof(int32_t) * (size_t)n);
    if (!all) { snprintf(err, errlen, "out of memory"); dsv4q_tokens_free(t); return -1; }
    memcpy(all, t->prompt, sizeof(int32_t) * (size_t)t->nprompt);
    if (t->nteacher) memcpy(all + t->nprompt, t->teacher, sizeof(int32_t) * (size_t)t->nteacher);
    dsv4q_sha256_hex(all, sizeof(int32_t) * (size_t)n, t->pin);
    free(all);
    return 0;
}

void dsv4q_tokens_free(dsv4q_tokens *t)
{
    free(t->prompt);
    free(t->teacher);
    t->prompt = t->teacher = NULL;
}

int dsv4q_cli_bset(const dsv4q_cli_opts *o, uint64_t *bs, char *err, size_t errlen)
{
    if (dsv4q_profile_set(o->profile, bs)) {
        snprintf(err, errlen, "unknown profile '%s' (source, model, qat, exact)", o->profile);
        return -1;
    }
    if (o->boundary[0] && dsv4q_boundary_apply(bs, o->boundary, err, errlen)) return -1;
    return 0;
}

void dsv4q_cli_threads(const dsv4q_cli_opts *o)
{
    if (o->threads > 0) omp_set_num_threads((int)o->threads);
}

int dsv4q_cli_start(const char *cmd, const dsv4q_cli_opts *o, char *dir, size_t dirlen, dsv4q_model **m,
                    dsv4q_tokens *t)
{
    char err[2048];
    *m = NULL;
    if (dsv4q_cli_model_dir(o, dir, dirlen, err, sizeof err) || dsv4q_model_open(m, dir, err, sizeof err)) {
        fprintf(stderr, "dsv4q %s: %s\n", cmd, err);
        return 2;
    }
    dsv4q_cli_model_notes(cmd, *m);
    /* a --boundary of the other model family would be ignored by the pass: say so instead */
    /* off starts with every point on but the engine activation quantizers,
     * which the declaration rules allow only one at a time */
    uint64_t on = 0, off = ~(DSV4Q_ACT_Q_ENGINE | DSV4Q_BIT(DSV4Q_B_ACT_Q_ALL));
    if (o->boundary[0] && !dsv4q_boundary_apply(&on, o->boundary, err, sizeof err) &&
        !dsv4q_boundary_apply(&off, o->boundary, err, sizeof err)) {
        const uint64_t other = (on | ~off) & ~dsv4q_boundary_arch_mask((*m)->cfg.arch);
        for (int b = 0; other && b < 64; b++)
            if ((other >> b) & 1u) {
                fprintf(stderr,
                        "dsv4q %s: --boundary %s: DeepSeek %s (%s) has no such rounding point (`dsv4q "
                        "boundaries` lists each point's models)\n",
                        cmd, dsv4q_boundary_get(b)->name, (*m)->cfg.arch == DSV4Q_ARCH_V41 ? "V4.1" : "V4", dir);
                dsv4q_model_close(*m);
                *m = NULL;
                return 2;
            }
    }
    /* every token is checked before any work, so a command never stops half-way through its output */
    if (t && (dsv4q_cli_tokens(o, (*m)->cfg.vocab_size, t, err, sizeof err) ||
              dsv4q_model_check_ids(*m, t->prompt, t->nprompt, 0, err, sizeof err) ||
              dsv4q_model_check_ids(*m, t->teacher, t->nteacher, t->nprompt, err, sizeof err))) {
        fprintf(stderr, "dsv4q %s: %s\n", cmd, err);
        dsv4q_tokens_free(t);
        dsv4q_model_close(*m);
        *m = NULL;
        return 2;
    }
    return 0;
}

int dsv4q_cli_receipt_store(const char *cmd, const dsv4q_cli_opts *o, dsv4q_receipt *r, int argc, char **argv,
                            int blank_line)
{
    char err[1024], *cmdline = NULL;
    if (!r->command_line) r->command_line = cmdline = dsv4q_command_line(argc, argv);
    const char *db = o->db ? o->db : dsv4q_receipt_default_db();
    long long id = 0;
    int rc = 0;
    /* the table printed so far goes out first, so a warning of the write
     * (e.g. "no signing key", stderr) lands after it in a merged log */
    fflush(stdout);
    if (dsv4q_receipt_write(db, r, o->key, &id, err, sizeof err)) {
        fprintf(stderr, "dsv4q %s: receipt not written: %s\n", cmd, err);
        rc = -1;
    } else if (!o->quiet) {
        printf("%sreceipt %lld written to %s\n", blank_line ? "\n" : "", id, db);
    }
    if (cmdline) { free(cmdline); r->command_line = NULL; }
    return rc;
}

int dsv4q_cli_db_check(const dsv4q_cli_opts *o, const char *cmd)
{
    char err[1024];
    if (dsv4q_receipt_precheck(o->db ? o->db : dsv4q_receipt_default_db(), err, sizeof err) == 0) return 0;
    fprintf(stderr, "dsv4q %s: %s\n", cmd, err);
    return -1;
}

int dsv4q_cli_receipt(const dsv4q_cli_opts *o, const char *kind, int argc, char **argv, const char *dir,
                      const dsv4q_config *cfg, const dsv4q_tokens *t, const char *widths,
                      const char *metrics_json, const char *verdict)
{
    char err[1024], prof[1200];
    char *pin = NULL, *cfgjson = dsv4q_config_to_json(cfg);
    if (dsv4q_pin_checkpoint(dir, &pin, err, sizeof err)) fprintf(stderr, "dsv4q %s: %s\n", kind, err);
    snprintf(prof, sizeof prof, "%s%s%s", o->profile, o->boundary[0] ? " + " : "", o->boundary);
    dsv4q_receipt r = {.kind = kind, .checkpoint_pin_json = pin, .tokens_pin = t ? t->pin : NULL,
                       .config_json = cfgjson, .profile = prof, .widths = widths, .metrics_json = metrics_json,
                       .verdict = verdict};
    int rc = dsv4q_cli_receipt_store(kind, o, &r, argc, argv, 1);
    free(pin);
    free(cfgjson);
    return rc;
}
