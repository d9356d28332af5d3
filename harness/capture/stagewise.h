/*
 * stagewise.h - the whole-model verdict stage by stage (issue 19 item 4):
 * every stage of every layer of a model run, judged on the model's own
 * activations.
 *
 * Why: the logit gate of `qualify --whole-model` sits at a multiple of the
 * fp32 sensitivity floor, which on FP8 checkpoints is driven by FP8 code
 * flips and swings with the prompt; a backend that skips the FP8 activation
 * simulation, or a real defect at 1-9x the floor, slips under it. Judged
 * per stage, each error is measured where it is made, against the fp32
 * level of that stage on the same inputs, as `replay` does for a capture.
 *
 * Method: the reference forward pass (oracle-f64 at the judged profile) runs
 * the calls (prefill of the prompt, then one-token teacher-forced decodes);
 * at every stage it reports (oracle/model_run.h stage hook), that stage's
 * reference inputs are fed to
 *     the candidate: the forward pass at f32 on the candidate's operator
 *                    provider (a backend through the ABI, provider_abi.h),
 *                    one stage at a time (dsv4q_stage_exec_f32)
 *     the level:     oracle-f32 on the same inputs
 * and compared with the reference's outputs of that stage:
 *     value = candidate(ref inputs) vs ref outputs
 *     level = oracle-f32(ref inputs) vs ref outputs
 * accumulated over the calls and gated by the rules of the operator the
 * stage table names (dsv4q_stage_gate_op), exactly replay's metrics and
 * gates (harness/capture/replay.h dsv4q_replay_add / _finish). Both f32 runs see
 * the same F32-rounded inputs. The stateful attn stage of a layer is fed
 * that layer's calls in order, so the candidate's caches (window ring,
 * compressed rows, indexer keys) are built from the reference's inputs.
 *
 * Invariants:
 *  S1. Candidate = oracle-f32's provider: every value equals its level bit
 *      for bit (tests/test_stagewise.c).
 *  S2. A stage's error is its own: no drift from earlier stages reaches it.
 *  S3. MTP is not judged (the main forward pass does not report it).
 */
#ifndef DSV4Q_STAGEWISE_H
#define DSV4Q_STAGEWISE_H

#include <stddef.h>
#include <stdint.h>
#include "harness/capture/replay.h"
#include "oracle/model_run.h"

/* Judge candidate provider cand (with its ctx) stage by stage on model m at
 * boundary set bs over the calls prefill ids[0, nprompt) + ndecode decode
 * steps. res receives one slot per (stage, layer) in forward order, NOT yet
 * gated (call dsv4q_replay_finish with the gates; the slots are plain data,
 * so a child may compute them and the parent judge them). cand_fails
 * (may be NULL) is set to 1 when a candidate call failed (err names it).
 * Returns 0, or -1 with err (out of memory, a failing candidate or oracle
 * call); res is freed on failure. */
int dsv4q_stagewise_run(dsv4q_replay *res, const dsv4q_model *m, uint64_t bs, const dsv4q_provider_f32 *cand,
                        void *cand_ctx, const int32_t *ids, long nprompt, long ndecode, int *cand_fails, char *err,
                        size_t errlen);

/* Human summary: one row per stage of the table, the worst (stage, layer)
 * by value/bound over every gated metric, with the layers that failed;
 * then one "failed: " line per failing (stage, layer). */
void dsv4q_stagewise_print(FILE *f, const dsv4q_replay *res);

#endif
