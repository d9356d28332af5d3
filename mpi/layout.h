/*
 * layout.h - which rank runs which layers of a model split by layer range
 * (docs/mpi.md): the weight bytes per layer, an even split of them into
 * contiguous ranges, and the --ranks-layers spelling "0-1,2-3,4". No MPI
 * here, so the choice can be tested (and printed) without a launcher.
 */
#ifndef DSV4Q_MPI_LAYOUT_H
#define DSV4Q_MPI_LAYOUT_H

#include <stddef.h>
#include "oracle/model_types.h"

/* Stored bytes of the weights block li (0 <= li < n_layers) reads: its
 * attention, compressor, indexer, router, routed and shared experts and
 * hc matrices, by format (F32 4, F64 8, BF16 2, FP8 1, FP4 1/2 a value,
 * plus FP8/FP4 scales). Vectors (norms, biases) are left out: they are
 * < 0.01% of a layer. A dsv4q resource estimate, no reference function. */
double dsv4q_mpi_layer_bytes(const dsv4q_model *m, int li);

/* The checkpoint bytes resident in a rank running blocks first..last,
 * today: the loader checks every tensor of a float dtype (BF16, F16, F32,
 * F64, F8 E4M3, E8M0) for non-finite values at open, so each process
 * touches all of those (file pages, shared by the ranks of one host), and
 * keeps a BF16 copy of each layer's FP8 wo_a; the packed FP4 experts are
 * touched only when run: those of layers first..last (an upper bound: all
 * of them). 0 for a GGUF model (not counted). A dsv4q resource estimate. */
double dsv4q_mpi_resident_bytes(const dsv4q_model *m, int first, int last);

/* Split layers 0..n-1 into nranks contiguous ranges of about equal weight
 * bytes (bytes[n]): rank k gets first[k]..last[k], each at least one
 * layer; the embedding and head are not counted (rank 0 and the last rank
 * hold them besides). -1 + message when nranks is outside [1, n]. */
int dsv4q_mpi_split(const double *bytes, int n, int nranks, int *first, int *last, char *err, size_t errlen);

/* Parse --ranks-layers "A-B,C-D,..." (a range may be one layer "E"): one
 * range per rank, contiguous from layer 0 to n-1 in order. -1 + message
 * naming the bad range when the count differs from nranks, a range is
 * empty, reversed, out of [0, n) or leaves a gap / overlap. */
int dsv4q_mpi_parse_ranges(const char *spec, int n, int nranks, int *first, int *last, char *err, size_t errlen);

#endif
