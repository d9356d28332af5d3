/*
 * capi_receipts.c - receipt verification in the flat C API
 * (cli/dsv4q_capi.h), so that a binding verifies a database with the
 * library's own verifier instead of needing the tree's `dsv4q` binary.
 *
 * Owns: dsv4q_capi_receipts_verify (the verifier's report captured into a
 * string, its summary as JSON) and dsv4q_capi_git_commit.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "cli/dsv4q_capi.h"
#include "receipts/receipts.h"
#include "receipts/version.h"

char *dsv4q_capi_receipts_verify(const char *db, long long id, const char *pubkey, int allow_unsigned, char *err,
                                 size_t errlen)
{
    dsv4q_verify_result R;
    char *text = NULL, *out = NULL;
    size_t len = 0;
    json_t *j = NULL;
    FILE *m = open_memstream(&text, &len);
    int r;

    if (!m) {
        dsv4q_errf(err, errlen, "receipts verify: out of memory");
        return NULL;
    }
    memset(&R, 0, sizeof R);
    r = dsv4q_receipt_verify_opts(db, id, pubkey, allow_unsigned, m, &R, err, errlen);
    fclose(m);
    if (r < 0) goto done;
    j = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:b, s:s}", "status",
                  R.n_problems     ? "FAILED"
                  : R.not_verified ? "NOT VERIFIED"
                                   : "OK",
                  "ok", r == 0, "checked", (json_int_t)R.n_checked, "problems", (json_int_t)R.n_problems,
                  "signatures_valid", (json_int_t)R.n_sig_ok, "unsigned", (json_int_t)R.n_unsigned, "not_checked",
                  (json_int_t)R.n_sig_unchecked, "head_id", (json_int_t)R.head_id, "head_hash", R.head_hash, "corrupt",
                  R.corrupt, "report", text ? text : "");
    if (!j || !(out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS)))
        dsv4q_errf(err, errlen, "receipts verify: the report is not valid UTF-8 or out of memory");
done:
    json_decref(j);
    free(text);
    return out;
}

const char *dsv4q_capi_git_commit(void) { return dsv4q_git_commit(); }
