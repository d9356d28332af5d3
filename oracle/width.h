/*
 * width.h - THE precision vocabulary of dsv4q: `real` (float | double) and
 * X(name) (name_f32 | name_f64), chosen by DSV4Q_W (32 | 64), plus R_NAME
 * ("f32" | "f64"). Every piece of code written once for both widths speaks
 * it, whether it is compiled twice or expanded twice (the FFTW precision
 * build: one source, one type macro, one name macro; nothing hand-written
 * per width). No include guard: it is included again whenever DSV4Q_W
 * changes.
 *
 * Two ways in, one vocabulary:
 *  - a source compiled once per width (the oracle and harness/ops sources: the
 *    Makefile passes -DDSV4Q_WIDTH=32 and =64) includes oracle/real.h,
 *    which sets DSV4Q_W = DSV4Q_WIDTH and includes this file;
 *  - a block expanded at both widths inside one translation unit (a header
 *    that declares both instances, like oracle/ops.h) names the block and
 *    includes oracle/both.h:
 *        #define DSV4Q_BOTH "oracle/ops.inc"
 *        #include "oracle/both.h"
 *    which includes the block with DSV4Q_W = 32, then 64, then restores the
 *    translation unit's own width (DSV4Q_WIDTH), or none.
 */
#undef real
#undef X
#undef R_NAME
#if !defined(DSV4Q_W)
/* no width here: the vocabulary is undefined */
#elif DSV4Q_W == 32
#define real float
#define X(name) name##_f32
#define R_NAME "f32"
#elif DSV4Q_W == 64
#define real double
#define X(name) name##_f64
#define R_NAME "f64"
#else
#error "DSV4Q_W must be 32 or 64"
#endif
