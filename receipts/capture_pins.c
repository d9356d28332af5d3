/*
 * capture_pins.c - a capture's checkpoint pins (receipts/capture_pins.h):
 * the SHA-256 of config.json and of the weight files' sha256sum listing,
 * derived from the receipts' checkpoint pin so that a capture, a replay and
 * the receipt that records them name the same bytes the same way.
 */
#include <sys/stat.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "io/sha256.h"
#include "receipts/capture_pins.h"
#include "receipts/receipts.h"

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* SHA-256 of the `sha256sum` listing of the weight files in a pin JSON. */
static int weights_listing_sha(const char *pin_json, char hex[65], char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loads(pin_json, 0, &je), *files = root ? json_object_get(root, "files") : NULL;
    if (!json_is_array(files)) {
        json_decref(root);
        return dsv4q_errf(err, errlen, "checkpoint pin: unexpected JSON");
    }
    size_t cap = 4096, n = 0, i;
    char *buf = malloc(cap);
    json_t *f;
    json_array_foreach(files, i, f) {
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *sha = json_string_value(json_object_get(f, "sha256"));
        if (!name || !sha || (!ends_with(name, ".safetensors") && !ends_with(name, ".index.json") &&
                                !ends_with(name, ".gguf"))) continue;
        size_t need = strlen(name) + strlen(sha) + 4;
        if (buf && n + need >= cap) {
            char *nb = realloc(buf, (cap = 2 * (n + need)));
            if (!nb) free(buf);
            buf = nb;
        }
        if (!buf) break;
        n += (size_t)snprintf(buf + n, cap - n, "%s  %s\n", sha, name);
    }
    json_decref(root);
    if (!buf) return dsv4q_errf(err, errlen, "out of memory");
    dsv4q_sha256_hex(buf, n, hex);
    free(buf);
    return 0;
}

int dsv4q_capture_pins(const char *model_dir, char config_sha[65], char weights_sha[65], char **pin_json,
                       char *err, size_t errlen)
{
    char path[4200];
    struct stat fs;
    /* a GGUF holds its config in its own metadata: the file is the config pin */
    if (stat(model_dir, &fs) == 0 && S_ISREG(fs.st_mode)) snprintf(path, sizeof path, "%s", model_dir);
    else snprintf(path, sizeof path, "%s/config.json", model_dir);
    if (dsv4q_sha256_hex_file(path, config_sha, err, errlen)) return -1;
    if (pin_json) *pin_json = NULL;
    if (!weights_sha && !pin_json) return 0;
    char *pin = NULL;
    if (dsv4q_pin_checkpoint(model_dir, &pin, err, errlen)) return -1;
    if (weights_sha && weights_listing_sha(pin, weights_sha, err, errlen)) {
        free(pin);
        return -1;
    }
    if (pin_json) *pin_json = pin;
    else free(pin);
    return 0;
}

