/*
 * engine_weights.c - the exact decoders behind ABI v2 load_weight (see
 * engine_weights.h). Every value is the stored value: codes decoded by the
 * format tables, block scales applied once.
 */
#include <stdio.h>
#include <string.h>
#include "harness/backend/engine_weights.h"
#include "oracle/formats.h"
#include "oracle/ggml_decode.h"

static float scale_at(const dsv4q_bweight *e, int64_t in, int64_t o, int64_t k)
{
    const int64_t b0 = e->block[0], b1 = e->block[1], nb1 = (in + b1 - 1) / b1;
    const int64_t at = (o / b0) * nb1 + k / b1;
    if (e->scale_dtype == DSV4Q_BT_F8_E8M0) return (float)dsv4q_e8m0_decode(((const uint8_t *)e->scale)[at]);
    return ((const float *)e->scale)[at];
}

int dsv4q_bweight_decode(const dsv4q_bweight *e, const char *role, int64_t out, int64_t in, float *dst, char *err,
                         size_t errlen)
{
    const char *r = role ? role : "(no role)";
    if (!e->data) {
        snprintf(err, errlen, "load_weight for %s: data is NULL", r);
        return -1;
    }
    const int64_t n = out * in;
    switch (e->dtype) {
    case DSV4Q_BT_F32:
        memcpy(dst, e->data, sizeof(float) * (size_t)n);
        return 0;
    case DSV4Q_BT_F16:
    case DSV4Q_BT_BF16: {
        const uint16_t *h = e->data;
        for (int64_t i = 0; i < n; i++)
            dst[i] = e->dtype == DSV4Q_BT_BF16 ? dsv4q_bf16_to_f32(h[i]) : (float)dsv4q_f16_decode(h[i]);
        return 0;
    }
    case DSV4Q_BT_F8_E4M3:
    case DSV4Q_BT_I8: {
        if (!e->scale || e->block[0] < 1 || e->block[1] < 1 ||
            (e->scale_dtype != DSV4Q_BT_F8_E8M0 && e->scale_dtype != DSV4Q_BT_F32)) {
            snprintf(err, errlen, "load_weight for %s: %s needs a scale (E8M0 or F32) and a positive block, got "
                     "scale %s, dtype %d, block %dx%d", r, e->dtype == DSV4Q_BT_I8 ? "E2M1" : "F8_E4M3",
                     e->scale ? "set" : "NULL", e->scale_dtype, e->block[0], e->block[1]);
            return -1;
        }
        if (e->dtype == DSV4Q_BT_I8 && in % 2) {
            snprintf(err, errlen, "load_weight for %s: packed E2M1 needs an even row length, got %lld", r, (long long)in);
            return -1;
        }
        const uint8_t *c = e->data;
        for (int64_t o = 0; o < out; o++)
            for (int64_t k = 0; k < in; k++) {
                double v = e->dtype == DSV4Q_BT_F8_E4M3 ? dsv4q_e4m3_decode(c[o * in + k])
                                                        : dsv4q_e2m1_decode((uint8_t)(c[(o * in + k) / 2] >> (4 * (k & 1))));
                dst[o * in + k] = (float)v * scale_at(e, in, o, k);
            }
        return 0;
    }
    default:
        break;
    }
    if (e->dtype >= DSV4Q_BW_GGML(0) && e->dtype < DSV4Q_BW_GGML(DSV4Q_GGML_TYPE_LIMIT)) {
        const int t = e->dtype - DSV4Q_BW_GGML(0);
        if (!dsv4q_ggml_decodable(t) || dsv4q_ggml_row_bytes(t, in) == 0) {
            snprintf(err, errlen, "load_weight for %s: GGML type %d (%s) cannot hold rows of %lld (not decodable or "
                     "not a multiple of its %lld-element block)", r, t, dsv4q_ggml_type_name(t) ? dsv4q_ggml_type_name(t) : "?",
                     (long long)in, (long long)dsv4q_ggml_block_elems(t));
            return -1;
        }
        for (int64_t o = 0; o < out; o++)
            if (dsv4q_ggml_row_f32(t, e->data, in, o, dst + o * in)) {
                snprintf(err, errlen, "load_weight for %s: GGML row %lld does not decode", r, (long long)o);
                return -1;
            }
        return 0;
    }
    snprintf(err, errlen, "load_weight for %s: dtype %d is not an encoding dsv4q decodes (F32, F16, BF16, F8_E4M3, "
             "I8 = E2M1, DSV4Q_BW_GGML(type))", r, e->dtype);
    return -1;
}

void dsv4q_bweight_name(const dsv4q_bweight *e, char *buf, size_t len)
{
    if (e->dtype >= DSV4Q_BW_GGML(0) && e->dtype < DSV4Q_BW_GGML(DSV4Q_GGML_TYPE_LIMIT)) {
        const char *n = dsv4q_ggml_type_name(e->dtype - DSV4Q_BW_GGML(0));
        snprintf(buf, len, "%s", n ? n : "GGML?");
        return;
    }
    const char *n = dsv4q_dtype_name((dsv4q_dtype)e->dtype);
    if (e->dtype == DSV4Q_BT_I8) n = "E2M1";
    if (e->dtype == DSV4Q_BT_F8_E4M3 || e->dtype == DSV4Q_BT_I8)
        snprintf(buf, len, "%s/%s %dx%d", n ? n : "?", e->scale_dtype == DSV4Q_BT_F8_E8M0 ? "E8M0" : "F32", e->block[0],
                 e->block[1]);
    else
        snprintf(buf, len, "%s", n ? n : "?");
}
