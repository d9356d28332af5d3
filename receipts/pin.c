/*
 * pin.c - pins: the SHA-256 fingerprints a receipt records of its inputs,
 * and the command-line record.
 *
 * Owns: dsv4q_sha256_file (gate files, backend libraries, weights),
 * dsv4q_pin_checkpoint (config.json + every *.safetensors / *.index.json of
 * a checkpoint directory, or the one file of a .gguf checkpoint), dsv4q_pin_tokens (a token list) and
 * dsv4q_command_line (argv as one valid-UTF-8 string). A receipt is only as
 * good as its pins: they are what lets someone holding the same files prove
 * that a verdict was computed from exactly those bytes. The byte formats
 * are part of the receipt format (docs/receipts.md, "Pins").
 */
#include "base/file.h"
#include "receipts/receipts_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#define PIN_CHUNK (1u << 20)

int dsv4q_sha256_file(const char *path, char hex_out[DSV4Q_SHA256_HEX + 1],
                      long long *bytes_out, char *err, size_t errlen)
{
    crypto_hash_sha256_state hs;
    unsigned char *buf = NULL, raw[32];
    long long total = 0;
    int fd = -1, rc = -1;
    ssize_t k;

    if (dsv4q_receipt_sodium(err, errlen))
        goto done;
    char ferr[400];
    fd = dsv4q_file_open_read(path, "file to pin", NULL, ferr, sizeof ferr);
    if (fd < 0) {
        dsv4q_errf(err, errlen, "%s", ferr);
        goto done;
    }
    buf = malloc(PIN_CHUNK);
    if (!buf) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    crypto_hash_sha256_init(&hs);
    while ((k = read(fd, buf, PIN_CHUNK)) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            dsv4q_errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            goto done;
        }
        crypto_hash_sha256_update(&hs, buf, (unsigned long long)k);
        total += k;
    }
    crypto_hash_sha256_final(&hs, raw);
    sodium_bin2hex(hex_out, DSV4Q_SHA256_HEX + 1, raw, sizeof raw);
    if (bytes_out)
        *bytes_out = total;
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

void dsv4q_pin_tokens(const int32_t *tokens, size_t n, char hex_out[DSV4Q_SHA256_HEX + 1])
{
    crypto_hash_sha256_state hs;
    unsigned char le[4], raw[32];
    size_t i;

    if (sodium_init() < 0) { /* cannot happen on a sane system; keep a defined output */
        memset(hex_out, '0', DSV4Q_SHA256_HEX);
        hex_out[DSV4Q_SHA256_HEX] = '\0';
        return;
    }
    crypto_hash_sha256_init(&hs);
    for (i = 0; i < n; i++) {
        uint32_t u = (uint32_t)tokens[i];
        le[0] = (unsigned char)(u & 0xff);
        le[1] = (unsigned char)((u >> 8) & 0xff);
        le[2] = (unsigned char)((u >> 16) & 0xff);
        le[3] = (unsigned char)((u >> 24) & 0xff);
        crypto_hash_sha256_update(&hs, le, 4);
    }
    crypto_hash_sha256_final(&hs, raw);
    sodium_bin2hex(hex_out, DSV4Q_SHA256_HEX + 1, raw, sizeof raw);
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int dsv4q_pin_checkpoint(const char *model_dir, char **json_out, char *err, size_t errlen)
{
    DIR *d = NULL;
    struct dirent *de;
    char **names = NULL, path[4096], hex[DSV4Q_SHA256_HEX + 1];
    size_t n = 0, cap = 0, i;
    json_t *root = NULL, *files = NULL, *ent;
    long long total = 0, bytes;
    int rc = -1, have_config = 0;

    *json_out = NULL;
    {
        /* A single-file checkpoint (a .gguf): the pin is that file. */
        struct stat fs;
        if (stat(model_dir, &fs) == 0 && S_ISREG(fs.st_mode)) {
            const char *base = strrchr(model_dir, '/');
            base = base ? base + 1 : model_dir;
            if (dsv4q_sha256_file(model_dir, hex, &bytes, err, errlen)) return -1;
            json_t *jn = json_string(base);
            if (!jn) {
                dsv4q_errf(err, errlen, "file name %s is not valid UTF-8", model_dir);
                return -1;
            }
            root = json_pack("{s:s,s:s,s:[{s:I,s:o,s:s}],s:I}", "format", "gguf", "gguf_sha256", hex, "files",
                             "bytes", (json_int_t)bytes, "name", jn, "sha256", hex, "total_bytes", (json_int_t)bytes);
            if (!root || !(*json_out = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII))) {
                json_decref(root);
                dsv4q_errf(err, errlen, "out of memory");
                return -1;
            }
            json_decref(root);
            return 0;
        }
    }
    d = opendir(model_dir);
    if (!d) {
        dsv4q_errf(err, errlen, "cannot open checkpoint directory %s: %s", model_dir, strerror(errno));
        goto done;
    }
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strcmp(nm, "config.json") != 0 && !ends_with(nm, ".safetensors") &&
            !ends_with(nm, ".index.json"))
            continue;
        if (n == cap) {
            char **q = realloc(names, (cap ? cap * 2 : 16) * sizeof *names);
            if (!q) {
                dsv4q_errf(err, errlen, "out of memory");
                goto done;
            }
            names = q;
            cap = cap ? cap * 2 : 16;
        }
        if (!(names[n] = strdup(nm))) {
            dsv4q_errf(err, errlen, "out of memory");
            goto done;
        }
        n++;
    }
    if (n)
        qsort(names, n, sizeof *names, cmp_names);

    root = json_object();
    files = json_array();
    if (!root || !files) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    for (i = 0; i < n; i++) {
        struct stat st;
        json_t *jname;
        int k = snprintf(path, sizeof path, "%s/%s", model_dir, names[i]);
        if (k < 0 || (size_t)k >= sizeof path) {
            dsv4q_errf(err, errlen, "path too long: %s/%s", model_dir, names[i]);
            goto done;
        }
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue; /* a directory named x.safetensors is not a weight file */
        if (dsv4q_sha256_file(path, hex, &bytes, err, errlen))
            goto done;
        total += bytes;
        if (strcmp(names[i], "config.json") == 0) {
            have_config = 1;
            if (json_object_set_new(root, "config_sha256", json_string(hex))) {
                dsv4q_errf(err, errlen, "out of memory");
                goto done;
            }
        }
        jname = json_string(names[i]);
        if (!jname) {
            dsv4q_errf(err, errlen, "file name in %s is not valid UTF-8", model_dir);
            goto done;
        }
        ent = json_pack("{s:I,s:o,s:s}", "bytes", (json_int_t)bytes, "name", jname,
                        "sha256", hex);
        if (!ent || json_array_append_new(files, ent)) {
            dsv4q_errf(err, errlen, "out of memory");
            goto done;
        }
    }
    if (!have_config) {
        dsv4q_errf(err, errlen, "checkpoint directory %s has no config.json", model_dir);
        goto done;
    }
    if (json_object_set(root, "files", files) ||
        json_object_set_new(root, "total_bytes", json_integer((json_int_t)total)) ||
        !(*json_out = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII))) {
        dsv4q_errf(err, errlen, "out of memory");
        goto done;
    }
    rc = 0;
done:
    if (d)
        closedir(d);
    for (i = 0; i < n; i++)
        free(names[i]);
    free(names);
    json_decref(files);
    json_decref(root);
    return rc;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return (s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return (s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80 && (s[3] & 0xC0) == 0x80)
                   ? 4 : 0;
    }
    return 0;
}

char *dsv4q_command_line(int argc, char **argv)
{
    size_t cap = 1, i;
    char *out, *p;
    int a;

    for (a = 0; a < argc; a++)
        cap += 4 * strlen(argv[a] ? argv[a] : "") + 3 + 1; /* worst: every byte \xNN, quotes */
    out = malloc(cap);
    if (!out)
        return NULL;
    p = out;
    for (a = 0; a < argc; a++) {
        const unsigned char *s = (const unsigned char *)(argv[a] ? argv[a] : "");
        int plain = *s != '\0';
        for (i = 0; s[i]; i++)
            if (!(s[i] < 0x80 && (strchr("_@%+=:,./-", s[i]) || (s[i] >= '0' && s[i] <= '9') ||
                                  ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z'))))
                plain = 0;
        if (a)
            *p++ = ' ';
        if (!plain)
            *p++ = '\'';
        for (i = 0; s[i];) {
            int k = utf8_len(s + i);
            if (k == 0) {
                p += sprintf(p, "\\x%02X", s[i]);
                i++;
            } else if (s[i] == '\'') {
                memcpy(p, "'\\''", 4);
                p += 4;
                i++;
            } else {
                memcpy(p, s + i, (size_t)k);
                p += k;
                i += (size_t)k;
            }
        }
        if (!plain)
            *p++ = '\'';
    }
    *p = '\0';
    return out;
}
