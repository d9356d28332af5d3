/*
 * provider_abi.h - a backend (abi/dsv4q_backend.h) as the operator
 * provider of THE forward pass (oracle/model.c, oracle/model_run.h
 * dsv4q_provider_f32): `qualify --whole-model` runs dsv4q_run at f32 with
 * this table, so the composition and the oracle's own run cannot drift
 * apart (W1 of harness/qualify/qualify_model.h is now a construction; the
 * bit-identity test in tests/test_qualify_model.c still checks it).
 *
 * Lifetime: one provider per composition (it keeps each ratio layer's input
 * history for the decode compressors); backend calls run in the caller's
 * process (qualify_model.c runs the whole composition in one isolated
 * child). Errors: the first failing call's status (DSV4Q_BACKEND_*) and its
 * message "op X, layer L, position P: ..." in err.
 */
#ifndef DSV4Q_PROVIDER_ABI_H
#define DSV4Q_PROVIDER_ABI_H

#include <stddef.h>
#include "abi/dsv4q_backend.h"
#include "oracle/model_run.h"

typedef struct dsv4q_abi_provider dsv4q_abi_provider;

/* A provider calling backend b (its init()ed ctx) for model m at boundary
 * set bs, for runs of at most max_pos positions. calls[DSV4Q_OP_COUNT]
 * (may be NULL) counts the calls per operator; detail (may be NULL) keeps
 * the place of the latest call; err[errlen] receives the first failure.
 * 0, or -1 with err set (out of memory). */
int dsv4q_abi_provider_new(dsv4q_abi_provider **out, const dsv4q_backend_v1 *b, void *ctx, const dsv4q_model *m,
                           uint64_t bs, long max_pos, long *calls, char *detail, size_t detaillen, char *err,
                           size_t errlen);
/* Its table; window_decode 1: decode attention through WINDOW_ATTN_DECODE
 * (the backend owns the ring), 0: through SPARSE_ATTN on the pass's keys. */
const dsv4q_provider_f32 *dsv4q_abi_provider_table(const dsv4q_abi_provider *p, int window_decode);
/* Partial engines (issue 16): a call of an operator outside the backend's
 * caps, or one its ABI v2 supports() declines, runs on oracle-f32 at the
 * provider's boundary set instead; fallbacks[DSV4Q_OP_COUNT] (may be NULL,
 * the default) counts those calls per operator. Calls carry the weight's
 * role (its checkpoint name without ".weight" / ".w1.weight"), and the
 * shared expert is called with an EMPTY routing weight. */
void dsv4q_abi_provider_set_fallbacks(dsv4q_abi_provider *p, long *fallbacks);
/* The setup both consumers of THE forward pass share (qualify
 * --whole-model's dsv4q_wm_compose, capture --backend): a provider as
 * dsv4q_abi_provider_new (calls, detail, err as there) with fallbacks
 * counted in fallbacks[DSV4Q_OP_COUNT] (may be NULL), and in *table the
 * table to install with dsv4q_run_set_provider_f32 / dsv4q_run_set_provider:
 * decode attention through WINDOW_ATTN_DECODE when b has it in caps and
 * sparse_decode is 0, else SPARSE_ATTN; *decode_op (may be NULL) receives
 * which. 0, or -1 with err set (out of memory). */
int dsv4q_abi_provider_open(dsv4q_abi_provider **out, const dsv4q_provider_f32 **table, const dsv4q_backend_v1 *b,
                            void *ctx, const dsv4q_model *m, uint64_t bs, long max_pos, int sparse_decode, long *calls,
                            long *fallbacks, int *decode_op, char *detail, size_t detaillen, char *err, size_t errlen);
/* DSV4Q_BACKEND_OK, or the status of the first failure. */
int dsv4q_abi_provider_status(const dsv4q_abi_provider *p);
void dsv4q_abi_provider_free(dsv4q_abi_provider *p);

#endif
