/* fuzz_receipts_db - a receipts SQLite database as bytes: the schema and
 * application-id checks, quick_check and the hash-chain / signature walk of
 * dsv4q_receipt_verify ("" = no signature keys). Seeds: a database written by
 * `dsv4q qualify` (fuzz/seeds.sh). */
#include "fuzz/fuzzutil.h"
#include "receipts/receipts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    const char *p = fz_file("r.db", data, n);
    if (!p) return 0;
    char path[600], err[512];
    snprintf(path, sizeof path, "%s", p);
    dsv4q_verify_result res;
    (void)dsv4q_receipt_verify(path, 0, "", devnull, &res, err, sizeof err);
    return 0;
}
