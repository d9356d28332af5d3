/*
 * consumer.c - a C program built against an INSTALLED libdsv4q (make
 * install + pkg-config), as an engine's own test would be: it includes the
 * public headers by their installed paths and calls the oracle directly,
 * the metrics, and the flat C API. Expected values are computed by hand:
 * x = [3, 4], w = [1, 2], eps = 0: rms = sqrt(12.5), y = [3, 8] / sqrt(12.5)
 * = [0.848528137423857, 2.262741699796952]. Prints cmocka-style summary
 * lines for tests/run_all.sh.
 */
#include <math.h>
#include <stdio.h>
#include "abi/dsv4q_backend.h"
#include "cli/dsv4q_capi.h"
#include "harness/measure/metrics.h"
#include "oracle/ops.h"

static int fails;
static void expect(int ok, const char *what)
{
    printf("[ %s ] %s\n", ok ? "      OK" : "  FAILED", what);
    fails += !ok;
}

int main(void)
{
    const double want[2] = {3 / sqrt(12.5), 8 / sqrt(12.5)};
    double x[2] = {3, 4}, w[2] = {1, 2}, y[2] = {0, 0};
    dsv4q_rmsnorm_f64(0, x, 1, 2, w, 0.0, y);   /* boundary set 0 = the exact profile */
    expect(fabs(y[0] - want[0]) < 1e-15 && fabs(y[1] - want[1]) < 1e-15, "dsv4q_rmsnorm_f64 (oracle/ops.h)");

    dsv4q_acc acc = {0};
    double a[2] = {1, 1}, b[2] = {1, 2};   /* ||a-b|| / ||b|| = 1 / sqrt(5) */
    dsv4q_acc_add(&acc, a, b, 2);
    expect(fabs(dsv4q_acc_nrms(&acc) - 1 / sqrt(5)) < 1e-15, "dsv4q_acc_nrms (harness/measure/metrics.h)");

    float xf[2] = {3, 4}, wf[2] = {1, 2};
    double yo[2] = {0, 0}, eps = 0;
    dsv4q_bt in[2] = {{.name = "x", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {1, 2}, .data = xf},
                      {.name = "w", .dtype = DSV4Q_BT_F32, .ndim = 1, .shape = {2}, .data = wf}};
    dsv4q_bt out[1] = {{.name = "y", .dtype = DSV4Q_BT_F32, .ndim = 2, .shape = {1, 2}, .data = yo}};
    char err[512] = "";
    int op = dsv4q_capi_op_find("rmsnorm");
    int rc = dsv4q_capi_oracle(op, 64, "exact", NULL, in, 2, &eps, 1, out, 1, err, sizeof err);
    expect(rc == 0 && fabs(yo[0] - want[0]) < 1e-15 && fabs(yo[1] - want[1]) < 1e-15, "dsv4q_capi_oracle rmsnorm f64");
    if (rc) printf("  error: %s\n", err);
    in[1].shape[0] = 3;   /* w[3] does not match x[1,2]: a clear error, not a read past w */
    rc = dsv4q_capi_oracle(op, 64, "exact", NULL, in, 2, &eps, 1, out, 1, err, sizeof err);
    expect(rc == -1 && err[0], "dsv4q_capi_oracle rejects a wrong shape");
    printf("  (message: %s)\n", err);
    printf("[  %s  ] %d test(s).\n", fails ? "FAILED" : "PASSED", fails ? fails : 4);
    return fails != 0;
}
