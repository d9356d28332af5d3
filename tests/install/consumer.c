/*
 * consumer.c - a C program built against an INSTALLED libdsv4q (make
 * install + pkg-config), as an engine's own test would be: it includes the
 * public headers by their installed paths and calls the oracle directly,
 * the metrics, and the flat C API. Expected values are computed by hand:
 * x = [3, 4], w = [1, 2], eps = 0: rms = sqrt(12.5), y = [3, 8] / sqrt(12.5)
 * = [0.848528137423857, 2.262741699796952]. The GGML decoders: one Q8_0
 * block with d = 0.5 (F16 0x3800) and q = [3, -4, 0, ...] is [1.5, -2, 0,
 * ...]; F16 0x3555 is 1365/4096. The GGUF reader: the 24-byte header of a
 * v3 file with no tensors and no metadata opens with 0 tensors. Prints cmocka-style summary
 * lines for tests/run_all.sh.
 */
#include <math.h>
#include <stdio.h>
#include "abi/dsv4q_backend.h"
#include "cli/dsv4q_capi.h"
#include "harness/measure/metrics.h"
#include "io/gguf.h"
#include "oracle/ggml_decode.h"
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

    unsigned char q8[34] = {0x00, 0x38, 3, (unsigned char)-4}; /* d (F16, LE), then 32 int8 */
    float yq[32];
    rc = dsv4q_ggml_row_f32(DSV4Q_GGML_Q8_0, q8, 32, 0, yq);
    double yh = 0;
    const unsigned char h[2] = {0x55, 0x35};
    int rh = dsv4q_ggml_decode_f64(DSV4Q_GGML_F16, h, 0, 1, &yh);
    expect(rc == 0 && yq[0] == 1.5f && yq[1] == -2.0f && yq[31] == 0.0f && rh == 0 && yh == 1365.0 / 4096,
           "dsv4q_ggml_row_f32 Q8_0, dsv4q_ggml_decode_f64 F16 (oracle/ggml_decode.h)");
    const uint8_t hdr[24] = {'G', 'G', 'U', 'F', 3}; /* version 3, 0 tensors, 0 metadata pairs */
    dsv4q_gguf *g = NULL;
    rc = dsv4q_gguf_open_buffer(&g, hdr, sizeof hdr, "empty.gguf", err, sizeof err);
    expect(rc == 0 && dsv4q_gguf_count(g) == 0, "dsv4q_gguf_open_buffer (io/gguf.h)");
    if (rc) printf("  error: %s\n", err);
    dsv4q_gguf_close(g);
    printf("[  %s  ] %d test(s).\n", fails ? "FAILED" : "PASSED", fails ? fails : 6);
    return fails != 0;
}
