/* fuzz_gates - gate file parsing (dsv4q_gates_parse: metrics, levels, dtype
 * units, per-operator rules). Seeds: gates/default.json. */
#include "fuzz/fuzzutil.h"
#include "gates/gates.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *t = fz_text(data, n), err[512];
    dsv4q_gates g;
    memset(&g, 0, sizeof g);
    (void)dsv4q_gates_parse(&g, t, "fuzz", err, sizeof err);
    free(t);
    return 0;
}
