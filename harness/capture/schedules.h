/*
 * schedules.h - the same tokens under several schedules (issue 25 item 2):
 * an engine's one-call prefill, its chunked prefills (chunks of 1, 7,
 * 64, ...) and its token-by-token feed are each replayed against the oracle
 * (replay.h); this file names a capture's schedule, checks that captures
 * hold the same tokens, and measures how far two schedules' captured
 * outputs are from each other at the same positions: information beside
 * the verdicts (a schedule that fails a stage the others pass is a
 * schedule bug; a difference between passing schedules is rounding).
 * dsv4q's own: no reference function.
 */
#ifndef DSV4Q_CAPTURE_SCHEDULES_H
#define DSV4Q_CAPTURE_SCHEDULES_H

#include <stddef.h>
#include "harness/capture/capture.h"
#include "harness/measure/metrics.h"

/* "prefill in one call (18 tokens), 2 decode steps", "prefill in 4 calls of
 * up to 5 tokens (prompt 16), 2 decode steps", "prefill token by token
 * (16 tokens), 0 decode steps": from the calls (capture.h: cap->prompt). */
void dsv4q_schedule_label(const dsv4q_capture *cap, char *buf, size_t len);

/* 0 when a and b cover the same positions with the same token ids; -1 +
 * message naming the first position that differs (or that one of them
 * lacks) and both captures' paths. */
int dsv4q_schedule_same_tokens(const dsv4q_capture *a, const dsv4q_capture *b, char *err, size_t errlen);

/* b's captured outputs against a's, one stage slot (forward order,
 * dsv4q_stage_slot_arch) per entry. */
typedef struct dsv4q_schedule_diff {
    dsv4q_acc acc[DSV4Q_STAGE_MAX_T]; /* per output: b (candidate) vs a (reference) */
    long rows;                        /* rows compared, over the outputs */
} dsv4q_schedule_diff;

/* Fill d[n] (n = dsv4q_stage_nslots_arch(cfg->arch, cfg->n_layers)):
 * every output row of b at a position a also holds, against a's row there
 * (rows of [s, ...] tensors by absolute position; the head's [vocab] by
 * the position of the call's last token, when a has a call ending there).
 * Tensors missing on either side are skipped. 0, or -1 + message (out of
 * memory). */
int dsv4q_schedule_diff_run(const dsv4q_capture *a, const dsv4q_capture *b, const dsv4q_config *cfg,
                            dsv4q_schedule_diff *d, char *err, size_t errlen);

#endif
