/* fuzz_receipt_json - verification of an exported receipt (canonical fields,
 * hash, embedded public key and signature: dsv4q_receipt_verify_json with no
 * key file). Seeds: `dsv4q receipts export` output. */
#include "fuzz/fuzzutil.h"
#include "receipts/receipts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    char *t = fz_text(data, n), err[512];
    int r = dsv4q_receipt_verify_json(t, NULL, devnull, err, sizeof err);
    (void)r;
    free(t);
    return 0;
}
