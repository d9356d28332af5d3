/* fuzz_config - config.json parsing and validation (dsv4q_config_parse:
 * both key spellings, nested rope_scaling, compress_ratios, dtypes), then the
 * JSON round trip of what it accepted. Seeds: the JSON files in tests/data/configs. */
#include "fuzz/fuzzutil.h"
#include "io/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *t = fz_text(data, n), err[512];
    dsv4q_config c;
    if (dsv4q_config_parse(&c, t, "fuzz", err, sizeof err) == 0) {
        char *j = dsv4q_config_to_json(&c);
        dsv4q_config c2;
        if (!j || dsv4q_config_parse(&c2, j, "roundtrip", err, sizeof err) != 0) abort();   /* C1: emits what it reads */
        free(j);
    }
    free(t);
    return 0;
}
