/*
 * receipts.h - signed, hash-chained run receipts in SQLite.
 *
 * Owns: the public API the measuring commands (sensitivity, qualify,
 * margins, golden, ablate, replay) use to record one receipt per run, the
 * pins they record (checkpoint files, token list, gate file, backend
 * library), signing-key management, and verification of a receipt database
 * or of a single exported receipt. A receipt is the durable, tamper-evident
 * answer to "which oracle, which backend, which checkpoint, which tokens,
 * which gate produced this verdict": every receipt carries the SHA-256 of
 * its predecessor (a hash chain) and, when a signing key exists, an Ed25519
 * signature over its own hash. The exact byte format that is hashed and the
 * threat model are documented in docs/receipts.md; the numbered invariants
 * (R1..R14) are listed in receipts/receipts.c and cited by the tests.
 *
 * Conventions: functions return 0 on success and -1 on error with a
 * one-line message in `err` (which may be NULL); none of them exits or
 * aborts. Verification functions are must-use.
 */
#ifndef DSV4Q_RECEIPTS_H
#define DSV4Q_RECEIPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "receipts/version.h"

#if defined(__GNUC__) || defined(__clang__)
#define DSV4Q_MUST_USE __attribute__((warn_unused_result))
#else
#define DSV4Q_MUST_USE
#endif

/* Hex lengths (without NUL) of the stored digests and keys. */
#define DSV4Q_SHA256_HEX   64
#define DSV4Q_SIG_HEX      128
#define DSV4Q_KEYID_HEX    16   /* first 8 bytes of the Ed25519 public key */
#define DSV4Q_PUBKEY_HEX   64

/* The values accepted in dsv4q_receipt.kind and .verdict (R5). */
#define DSV4Q_RECEIPT_KINDS    "sensitivity, qualify, margins, golden, ablate, replay"
#define DSV4Q_RECEIPT_VERDICTS "pass, fail, info, error"

/* What a measuring command supplies. Every pointer may be NULL (= empty)
 * except kind and verdict. The tool version, git commit, creation time, id,
 * chain link, hash and signature are filled in by dsv4q_receipt_write.
 *   kind                one of DSV4Q_RECEIPT_KINDS
 *   command_line        the full invocation (see dsv4q_command_line)
 *   backend_id/_version the kernel backend under test ("" for the oracle)
 *   backend_sha256      64 hex digits of the backend library file, or ""
 *   checkpoint_pin_json JSON text from dsv4q_pin_checkpoint, or NULL
 *   tokens_pin          64 hex digits from dsv4q_pin_tokens, or ""
 *   config_json         JSON text (any JSON value), or NULL
 *   profile, widths     free text ("fp8-e4m3", "32,64", ...)
 *   gate_file           path of the gate file, gate_sha256 its 64 hex digits
 *   metrics_json        JSON text (any JSON value), or NULL
 *   verdict             one of DSV4Q_RECEIPT_VERDICTS
 * Strings must be valid UTF-8; JSON texts must parse (duplicate keys are
 * rejected) and are stored re-serialized canonically (R3). */
typedef struct dsv4q_receipt {
    const char *kind, *command_line, *backend_id, *backend_version, *backend_sha256,
               *checkpoint_pin_json, *tokens_pin, *config_json, *profile, *widths,
               *gate_file, *gate_sha256, *metrics_json, *verdict;
} dsv4q_receipt;

/* Append one receipt to the database at db_path (NULL = the default, see
 * dsv4q_receipt_default_db), creating the database if needed. Runs one
 * BEGIN IMMEDIATE transaction: read the last receipt's id and hash, build
 * and hash this receipt, sign it, insert, COMMIT (R6, R7). Concurrent
 * writers (threads or processes) serialize on the database write lock,
 * waiting up to 10 s.
 * key_path: the Ed25519 secret key file; NULL = the default location (see
 * dsv4q_key_default_path); if no key exists there, prints one note to
 * stderr ("no signing key at ...; receipt stored unsigned but chained") and
 * stores the receipt unsigned. "" = store unsigned deliberately, no note.
 * A non-NULL, non-empty key_path that cannot be read is an error.
 * id_out: receives the new receipt's id (may be NULL).
 * Returns 0, or -1 with err set; on -1 nothing was stored (ROLLBACK). */
int dsv4q_receipt_write(const char *db_path, const dsv4q_receipt *r, const char *key_path,
                        long long *id_out, char *err, size_t errlen);

/* Summary of a verification run. */
typedef struct dsv4q_verify_result {
    long long n_checked;      /* receipts whose hash was recomputed */
    long long n_problems;     /* lines written to `report` that are failures */
    long long n_sig_ok;       /* signatures verified */
    long long n_sig_unchecked;/* signed, but no public key for that signer */
    long long n_unsigned;     /* receipts with no signer */
    long long head_id;        /* id of the newest receipt checked (0 = none) */
    char head_hash[DSV4Q_SHA256_HEX + 1];
    int corrupt;              /* 1: the database itself is damaged */
    int not_verified;         /* 1: no problem, but receipts without a verified signature
                                 (unsigned or n_sig_unchecked) were not allowed */
} dsv4q_verify_result;

/* Verify the receipts in db_path (NULL = default): every receipt's hash is
 * recomputed from its fields, every chain link is checked against the
 * receipt with the next lower id (gaps are reported), every signature is
 * checked (R8..R12). id = 0 checks the whole chain (after a PRAGMA
 * quick_check); id > 0 checks that receipt and its link to id-1.
 * pubkey_path: a .pub file (or a secret key file). When given, every
 * receipt checked must be signed by that key (strict). NULL = use the .pub
 * beside the default secret key if it exists and check only the receipts
 * that key signed (lenient: others are counted in n_sig_unchecked). "" =
 * check no signatures.
 * report: receives one line per problem, prefixed "receipt N: ", and notes
 * (may be NULL). res: receives the summary (may be NULL).
 * Under a NULL key, receipts without a verified signature leave the
 * database NOT VERIFIED (see dsv4q_receipt_verify_opts).
 * Returns 0 all good, 1 verification failed (including a corrupt
 * database, and unsigned receipts not allowed), -1 error (cannot open, not a dsv4q database, no such id,
 * unreadable key) with err set. */
DSV4Q_MUST_USE
int dsv4q_receipt_verify(const char *db_path, long long id, const char *pubkey_path,
                          FILE *report, dsv4q_verify_result *res, char *err, size_t errlen);

/* dsv4q_receipt_verify with the unsigned-receipt policy spelled out. With
 * pubkey_path NULL (lenient), a receipt without a verified signature
 * (unsigned, or signed by a key other than the default .pub) leaves the
 * database NOT VERIFIED (return 1, res->not_verified = 1, a note in
 * report) unless allow_unsigned is non-zero; dsv4q_receipt_verify is
 * allow_unsigned = 0. With a key every receipt must be signed by it anyway;
 * with "" signature checks are off and such receipts pass. Returns as
 * dsv4q_receipt_verify. */
DSV4Q_MUST_USE
int dsv4q_receipt_verify_opts(const char *db_path, long long id, const char *pubkey_path, int allow_unsigned,
                              FILE *report, dsv4q_verify_result *res, char *err, size_t errlen);

/* Validate the receipts database a command will write its receipt to -
 * application id, schema version, the exact schema (no view, trigger or
 * retyped column), writable - so a bad database is reported before any
 * work, not after it. An absent database is not created (only its
 * directory must be writable). 0, or -1 with err naming the database and
 * the problem. */
int dsv4q_receipt_precheck(const char *db_path, char *err, size_t errlen);

/* Export receipt `id` as a self-contained JSON document (malloc'd into
 * *json_out, caller frees): the receipt's fields, the canonical string,
 * hash, signature, signer key id and, if known, the full public key (from
 * pubkey_path, or NULL = the default .pub when its key id matches the
 * signer). Returns 0 or -1 with err set. */
int dsv4q_receipt_export_json(const char *db_path, long long id, const char *pubkey_path,
                              char **json_out, char *err, size_t errlen);

/* Verify an export produced by dsv4q_receipt_export_json: recompute the
 * canonical bytes from its fields, the hash, and the signature, under
 * pubkey_path if given (strict: the export must be signed by that key),
 * else under the public key embedded in the export (noted in the report).
 * Returns 0 valid, 1 invalid (reasons in report), -1 error (unparsable
 * document, unreadable key) with err set. */
DSV4Q_MUST_USE
int dsv4q_receipt_verify_json(const char *json_text, const char *pubkey_path,
                              FILE *report, char *err, size_t errlen);

/* Pin a checkpoint directory: SHA-256 and size of config.json and of every
 * *.safetensors and *.index.json file in model_dir, sorted by name (byte
 * order), as canonical JSON:
 *   {"config_sha256":"..","files":[{"bytes":N,"name":"..","sha256":".."},..],
 *    "total_bytes":N}
 * config.json is required. A regular file (a .gguf checkpoint) is pinned
 * alone: {"files":[{..}],"format":"gguf","gguf_sha256":"..","total_bytes":N}.
 * *json_out is malloc'd (caller frees).
 * Returns 0 or -1 with err set. */
int dsv4q_pin_checkpoint(const char *model_dir, char **json_out, char *err, size_t errlen);

/* Pin a token list: SHA-256 over the tokens as consecutive 4-byte
 * little-endian two's-complement integers (n = 0 hashes zero bytes).
 * Writes 64 lowercase hex digits + NUL into hex_out. */
void dsv4q_pin_tokens(const int32_t *tokens, size_t n, char hex_out[DSV4Q_SHA256_HEX + 1]);

/* SHA-256 of a file's contents as 64 lowercase hex digits (+ NUL); the
 * file's size in *bytes_out if non-NULL. For gate files and backend
 * libraries. Returns 0 or -1 with err set. */
int dsv4q_sha256_file(const char *path, char hex_out[DSV4Q_SHA256_HEX + 1],
                      long long *bytes_out, char *err, size_t errlen);

/* Create a new Ed25519 signing key at path (NULL = default location) with
 * mode 0600 (open O_CREAT|O_EXCL), and its public key at path + ".pub"
 * (mode 0644). Missing parent directories are created with mode 0700.
 * Refuses to overwrite either file. keyid_out (may be NULL) receives the
 * 16-hex-digit key id. Returns 0 or -1 with err set. */
int dsv4q_keygen(const char *path, char keyid_out[DSV4Q_KEYID_HEX + 1], char *err, size_t errlen);

/* The default secret key path: $DSV4Q_KEY if set and non-empty, else
 * $XDG_CONFIG_HOME/dsv4q/signing.key, else ~/.config/dsv4q/signing.key.
 * Returns 0 or -1 if it does not fit in buf / no home directory. */
int dsv4q_key_default_path(char *buf, size_t buflen);

/* The default database path: $DSV4Q_DB if set and non-empty, else
 * "dsv4q.db" (in the current directory). Never NULL. */
const char *dsv4q_receipt_default_db(void);

/* Join argv into one command line, shell-quoting words that need it
 * (POSIX single quotes) and writing bytes that are not valid UTF-8 as
 * \xNN, so the result is valid UTF-8. Malloc'd; NULL only on OOM. */
char *dsv4q_command_line(int argc, char **argv);

#endif
