/* fuzz_tokens - a --tokens file ({"prompt": [...], "teacher": [...]}) read by
 * dsv4q_cli_tokens against a vocabulary of 1000 ids. Seeds: small token files. */
#include "fuzz/fuzzutil.h"
#include "cli/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    const char *p = fz_file("tokens.json", data, n);
    if (!p) return 0;
    dsv4q_cli_opts o;
    memset(&o, 0, sizeof o);
    o.tokens = p;
    dsv4q_tokens t;
    memset(&t, 0, sizeof t);
    char err[512];
    if (dsv4q_cli_tokens(&o, 1000, &t, err, sizeof err) == 0) dsv4q_tokens_free(&t);
    return 0;
}
