/*
 * keys.c - Ed25519 signing keys for receipts: creation, default location,
 * loading.
 *
 * Owns: dsv4q_keygen, dsv4q_key_default_path, and the loaders the store and
 * the verifier use (receipts_internal.h). Kept apart from the store so that
 * everything that touches secret bytes is in one short file that can be
 * audited on its own (R13): the secret key file is created exclusively with
 * mode 0600, never overwritten, refused when group/other-accessible, checked
 * for self-consistency on load, and wiped from memory after use.
 *
 * File formats (docs/receipts.md, "Keys"):
 *   secret key:  "# dsv4q Ed25519 signing key ..." comment lines, then
 *                "seed: <64 hex>" and "public: <64 hex>"
 *   public key:  comment lines, then "<64 hex>" (a "public: <64 hex>" line
 *                is accepted too, so a secret key file also works as a
 *                public key argument)
 */
#include "receipts/receipts_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#define KEYFILE_MAX 4096

void dsv4q_receipt_keyid(const unsigned char pk[32], char out[DSV4Q_KEYID_HEX + 1])
{
    sodium_bin2hex(out, DSV4Q_KEYID_HEX + 1, pk, DSV4Q_KEYID_HEX / 2);
}

int dsv4q_key_default_path(char *buf, size_t buflen)
{
    const char *e = getenv("DSV4Q_KEY"), *home;
    int n;

    if (e && *e)
        n = snprintf(buf, buflen, "%s", e);
    else if ((e = getenv("XDG_CONFIG_HOME")) && *e)
        n = snprintf(buf, buflen, "%s/dsv4q/signing.key", e);
    else {
        home = getenv("HOME");
        if (!home || !*home) {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home || !*home)
            return -1;
        n = snprintf(buf, buflen, "%s/.config/dsv4q/signing.key", home);
    }
    return (n < 0 || (size_t)n >= buflen) ? -1 : 0;
}

/* Read a whole small file into buf (NUL-terminated). Returns 0, 1 if it
 * does not exist, -1 with err. If secret, refuses group/other access. */
static int read_small(const char *path, char *buf, size_t buflen, int secret,
                      char *err, size_t errlen)
{
    int fd = -1, rc = -1;
    struct stat st;
    size_t n = 0;
    ssize_t k;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO must not block: refused below */
    if (fd < 0) {
        if (errno == ENOENT) {
            rc = 1;
            goto done;
        }
        dsv4q_errf(err, errlen, "cannot open key file %s: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        dsv4q_errf(err, errlen, "key file %s is not a regular file", path);
        goto done;
    }
    if (secret && (st.st_mode & 077)) {
        dsv4q_errf(err, errlen,
                   "signing key %s is accessible by group/others (mode 0%03o); "
                   "refusing to use it (chmod 600 %s)",
                   path, (unsigned)(st.st_mode & 0777), path);
        goto done;
    }
    while (n + 1 < buflen && (k = read(fd, buf + n, buflen - 1 - n)) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            dsv4q_errf(err, errlen, "cannot read key file %s: %s", path, strerror(errno));
            goto done;
        }
        n += (size_t)k;
    }
    buf[n] = '\0';
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Find "<tag> <64 hex>" (tag "" = a bare 64-hex line) in text; decode 32
 * bytes. Returns 0 or -1. */
static int find_hex32(const char *text, const char *tag, unsigned char out[32])
{
    const char *line = text;
    size_t tl = strlen(tag);

    while (line && *line) {
        const char *end = strchr(line, '\n'), *v = line;
        size_t len = end ? (size_t)(end - line) : strlen(line);
        size_t bin_len = 0;
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
            len--;
        if (len && line[0] != '#' &&
            (tl == 0 || (len > tl && strncmp(line, tag, tl) == 0))) {
            v = line + tl;
            while (v < line + len && (*v == ' ' || *v == '\t'))
                v++;
            if ((size_t)(line + len - v) == 64 &&
                sodium_hex2bin(out, 32, v, 64, NULL, &bin_len, NULL) == 0 && bin_len == 32)
                return 0;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

int dsv4q_receipt_load_secret(const char *path, unsigned char sk[64], unsigned char pk[32],
                           char *err, size_t errlen)
{
    char buf[KEYFILE_MAX];
    unsigned char seed[32], pk_file[32];
    int rc = -1, r;

    if (dsv4q_receipt_sodium(err, errlen))
        goto done;
    r = read_small(path, buf, sizeof buf, 1, err, errlen);
    if (r != 0) {
        rc = r;
        goto done;
    }
    if (find_hex32(buf, "seed:", seed) || find_hex32(buf, "public:", pk_file)) {
        dsv4q_errf(err, errlen,
                   "signing key %s is malformed (expected \"seed: <64 hex>\" and "
                   "\"public: <64 hex>\" lines)",
                   path);
        goto done;
    }
    crypto_sign_seed_keypair(pk, sk, seed);
    if (sodium_memcmp(pk, pk_file, 32) != 0) {
        dsv4q_errf(err, errlen, "signing key %s is corrupt: its seed does not produce its public key", path);
        goto done;
    }
    rc = 0;
done:
    sodium_memzero(buf, sizeof buf);
    sodium_memzero(seed, sizeof seed);
    if (rc != 0)
        sodium_memzero(sk, 64);
    return rc;
}

int dsv4q_receipt_load_pubkey(const char *path, unsigned char pk[32], char *err, size_t errlen)
{
    char buf[KEYFILE_MAX];
    int rc = -1, r;

    r = read_small(path, buf, sizeof buf, 0, err, errlen);
    if (r != 0) {
        rc = r;
        if (r == 1) dsv4q_errf(err, errlen, "no public key file %s", path);
        goto done;
    }
    if (find_hex32(buf, "public:", pk) && find_hex32(buf, "", pk)) {
        dsv4q_errf(err, errlen, "public key %s is malformed (expected a line of 64 hex digits)", path);
        goto done;
    }
    rc = 0;
done:
    sodium_memzero(buf, sizeof buf); /* may be a secret key file */
    return rc;
}

/* mkdir -p of the directory part of path, new directories mode 0700. */
static int make_parents(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    size_t i, n = strlen(path);

    if (n >= sizeof dir) {
        dsv4q_errf(err, errlen, "key path too long: %s", path);
        return -1;
    }
    memcpy(dir, path, n + 1);
    for (i = 1; i < n; i++) {
        if (dir[i] != '/')
            continue;
        dir[i] = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            dsv4q_errf(err, errlen, "cannot create directory %s: %s", dir, strerror(errno));
            return -1;
        }
        dir[i] = '/';
    }
    return 0;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t k = write(fd, s, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        s += k;
        n -= (size_t)k;
    }
    return 0;
}

int dsv4q_keygen(const char *path, char keyid_out[DSV4Q_KEYID_HEX + 1], char *err, size_t errlen)
{
    char defpath[PATH_MAX], pubpath[PATH_MAX + 8], text[512];
    char seedhex[65], pkhex[65], keyid[DSV4Q_KEYID_HEX + 1];
    unsigned char seed[32], pk[32], sk[64];
    int fd = -1, pfd = -1, rc = -1, created = 0, n;
    struct stat st;

    if (dsv4q_receipt_sodium(err, errlen))
        goto done;
    if (!path || !*path) {
        if (dsv4q_key_default_path(defpath, sizeof defpath)) {
            dsv4q_errf(err, errlen, "no default key location (set DSV4Q_KEY or HOME)");
            goto done;
        }
        path = defpath;
    }
    n = snprintf(pubpath, sizeof pubpath, "%s.pub", path);
    if (n < 0 || (size_t)n >= sizeof pubpath) {
        dsv4q_errf(err, errlen, "key path too long: %s", path);
        goto done;
    }
    if (lstat(pubpath, &st) == 0) {
        dsv4q_errf(err, errlen, "refusing to overwrite existing public key %s", pubpath);
        goto done;
    }
    if (make_parents(path, err, errlen))
        goto done;

    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST) dsv4q_errf(err, errlen, "refusing to overwrite existing key %s", path);
        else dsv4q_errf(err, errlen, "cannot create key %s: %s", path, strerror(errno));
        goto done;
    }
    created = 1;
    if (fchmod(fd, 0600) != 0) { /* independent of a strange umask */
        dsv4q_errf(err, errlen, "cannot chmod 600 %s: %s", path, strerror(errno));
        goto done;
    }

    randombytes_buf(seed, sizeof seed);
    crypto_sign_seed_keypair(pk, sk, seed);
    sodium_bin2hex(seedhex, sizeof seedhex, seed, sizeof seed);
    sodium_bin2hex(pkhex, sizeof pkhex, pk, sizeof pk);
    dsv4q_receipt_keyid(pk, keyid);

    n = snprintf(text, sizeof text,
                 "# dsv4q Ed25519 signing key - keep secret (mode 0600)\n"
                 "# key id: %s\n"
                 "seed: %s\n"
                 "public: %s\n",
                 keyid, seedhex, pkhex);
    if (write_all(fd, text, (size_t)n) || fsync(fd) != 0) {
        dsv4q_errf(err, errlen, "cannot write key %s: %s", path, strerror(errno));
        goto done;
    }
    if (close(fd) != 0) {
        fd = -1;
        dsv4q_errf(err, errlen, "cannot write key %s: %s", path, strerror(errno));
        goto done;
    }
    fd = -1;

    pfd = open(pubpath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (pfd < 0) {
        dsv4q_errf(err, errlen, "cannot create public key %s: %s", pubpath, strerror(errno));
        goto done;
    }
    n = snprintf(text, sizeof text, "# dsv4q Ed25519 public key, key id %s\n%s\n", keyid, pkhex);
    if (write_all(pfd, text, (size_t)n) || fsync(pfd) != 0) {
        dsv4q_errf(err, errlen, "cannot write public key %s: %s", pubpath, strerror(errno));
        unlink(pubpath);
        goto done;
    }
    n = close(pfd);
    pfd = -1;
    if (n != 0) {
        dsv4q_errf(err, errlen, "cannot write public key %s: %s", pubpath, strerror(errno));
        unlink(pubpath);
        goto done;
    }
    if (keyid_out)
        memcpy(keyid_out, keyid, sizeof keyid);
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    if (pfd >= 0)
        close(pfd);
    if (rc != 0 && created)
        unlink(path); /* never leave a half-written or orphaned secret key */
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(seedhex, sizeof seedhex);
    sodium_memzero(text, sizeof text);
    return rc;
}
