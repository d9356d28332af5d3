/*
 * engram_map.h - the Engram compressed-token map, read from its JSON file.
 *
 * Owns: the on-disk form of the output of DeepSeek V4.1's
 * inference/engram.py build_compressed_token_map(tokenizer) (a list
 * token_map[vocab] of compressed ids and the compressed vocabulary size),
 * so that the oracle never needs a tokenizer at run time. The file is
 *
 *     {"compressed_vocab_size": V, "token_map": [c_0, c_1, ..., c_{vocab-1}]}
 *
 * with every c_t an integer in [0, V); other keys are ignored. This is the
 * format of tests/data/pub_v41_tiny/engram_token_map.json. How to make one
 * for a real checkpoint: run the reference's build_compressed_token_map on
 * its tokenizer (transformers AutoTokenizer: it reads backend_tokenizer and
 * len(tokenizer)) and json.dump {"compressed_vocab_size": size,
 * "token_map": lookup}.
 * Refuses: a file that is not that shape (missing key, non-integer entry,
 * entry outside [0, V), V < 1, more than DSV4Q_LIMIT_JSON bytes), naming
 * the key or entry. It does not check the map against a config: the caller
 * passes both sizes to dsv4q_engram_hash_init (oracle/engram_hash.h),
 * which refuses a mismatch as the reference asserts it.
 */
#ifndef DSV4Q_IO_ENGRAM_MAP_H
#define DSV4Q_IO_ENGRAM_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct dsv4q_engram_map {
    int32_t *token_map;       /* [vocab], malloc'd */
    int64_t vocab;            /* entries of token_map */
    int64_t compressed_vocab_size;
} dsv4q_engram_map;

/* Parse the JSON text `json` (origin names it in messages). 0, or -1 with a
 * message; *m is zeroed first and owns nothing after a failure. */
int dsv4q_engram_map_parse(dsv4q_engram_map *m, const char *json, const char *origin, char *err, size_t errlen);
/* Read and parse the file at path. 0 or -1. */
int dsv4q_engram_map_load(dsv4q_engram_map *m, const char *path, char *err, size_t errlen);
void dsv4q_engram_map_free(dsv4q_engram_map *m);

#endif
