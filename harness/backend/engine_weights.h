/*
 * engine_weights.h - exact decoding of an engine's own weight encoding
 * (ABI v2 load_weight, abi/dsv4q_backend.h dsv4q_bweight), so the
 * harness can judge an engine's KERNEL against the oracle run on the very
 * weights the engine holds, and report its FORMAT error separately.
 *
 * Decoders: BF16 / F16 / F32 (oracle/formats.h), F8_E4M3 and packed E2M1
 * with E8M0 or F32 block scales (value = code * scale, one binary32
 * product: exact for E8M0 scales), GGML blocks through
 * oracle/ggml_decode.h (bit for bit ggml's dequantize_row_*).
 */
#ifndef DSV4Q_ENGINE_WEIGHTS_H
#define DSV4Q_ENGINE_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include "abi/dsv4q_backend.h"

/* Decode e, a weight of logical shape [out, in], into dst [out*in] F32.
 * 0, or -1 with a message naming the role and what is wrong (unknown
 * encoding, missing data or scale, in not a multiple of the GGML block,
 * a scale block that is not positive). */
int dsv4q_bweight_decode(const dsv4q_bweight *e, const char *role, int64_t out, int64_t in, float *dst, char *err,
                         size_t errlen);
/* "Q8_0", "F16", "F8_E4M3/E8M0 128x128", ... into buf. */
void dsv4q_bweight_name(const dsv4q_bweight *e, char *buf, size_t len);

#endif
