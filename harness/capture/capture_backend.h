/*
 * capture_backend.h - `dsv4q capture --backend B`: a capture of THE forward
 * pass (oracle/model.c) run at f32 with backend B as its operator provider
 * (harness/provider/provider_abi.h), so every stage B has operators for - attention
 * included - is computed by B, exactly as `qualify --whole-model` composes
 * it; operators outside B's caps, or declined by its ABI v2 supports(), run
 * on oracle-f32 and are counted (partial engines, issue 16).
 *
 * Where it runs (isolate.h I1): a built-in (cpu-ref, mutant:NAME,
 * oracle-f32) runs in this process, with the run's threads; a plugin path
 * runs the whole capture - load, init, forward pass, writing the call files -
 * in ONE fork()ed child (dsv4q_iso_job), so the harness process never
 * dlopens it and a crash or hang becomes a clear error naming the op,
 * layer and position in flight. Either way the directory's old call files
 * are removed first and a failed capture leaves none (no half capture).
 */
#ifndef DSV4Q_CAPTURE_BACKEND_H
#define DSV4Q_CAPTURE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "harness/capture/capture.h"
#include "abi/dsv4q_backend.h"
#include "harness/backend/isolate.h"
#include "io/model.h"

/* Metadata keys capture --backend adds to every call file (docs/captures.md) */
#define DSV4Q_CAPTURE_META_FALLBACKS "oracle_f32_fallbacks"   /* JSON {op: calls} of this call, "{}" if none */
#define DSV4Q_CAPTURE_META_DECODE "decode_attn"               /* window_attn_decode | sparse_attn */

typedef struct dsv4q_capture_backend_res {
    long calls[DSV4Q_OP_COUNT];       /* backend calls per operator, all calls of the capture */
    long fallbacks[DSV4Q_OP_COUNT];   /* calls run on oracle-f32 instead, per operator */
    int decode_op;                    /* DSV4Q_OP_WINDOW_ATTN_DECODE or DSV4Q_OP_SPARSE_ATTN */
    int ncalls;                       /* call files written */
} dsv4q_capture_backend_res;

/* Capture the run of prompt[nprompt] (the prefill, call-0000) then ndecode
 * one-token decodes of decode[] with backend spec (built-in name or plugin
 * path; iso->inprocess must be 0 for a path) at boundary set bs (B's
 * declaration), into dir with writer info (info->dtype etc. as for the
 * oracle's capture). Decode attention goes through WINDOW_ATTN_DECODE
 * when B has it (B owns the ring), else SPARSE_ATTN, as in qualify
 * --whole-model. Every call file carries the two keys above. Returns 0 with *res, or -1 with err naming the backend, the op,
 * layer and position (a backend error, crash, hang or writer error). */
int dsv4q_capture_backend(const char *spec, const dsv4q_iso_opts *iso, const dsv4q_model *m, uint64_t bs,
                          const char *dir, const dsv4q_capture_info *info, const int32_t *prompt,
                          long nprompt, const int32_t *decode, long ndecode, dsv4q_capture_backend_res *res, char *err,
                          size_t errlen);

#endif
