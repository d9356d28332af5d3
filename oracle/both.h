/*
 * both.h - expand the file named by DSV4Q_BOTH once per width, in the
 * vocabulary of oracle/width.h (real, X), then restore this translation
 * unit's own width (DSV4Q_WIDTH when it is compiled per width; else the
 * vocabulary is left undefined). No include guard: include it once per
 * block.
 *     #define DSV4Q_BOTH "oracle/ops.inc"
 *     #include "oracle/both.h"
 */
#ifndef DSV4Q_BOTH
#error "define DSV4Q_BOTH as the file to expand at both widths before including oracle/both.h"
#endif
#undef DSV4Q_W
#define DSV4Q_W 32
#include "oracle/width.h"
#include DSV4Q_BOTH
#undef DSV4Q_W
#define DSV4Q_W 64
#include "oracle/width.h"
#include DSV4Q_BOTH
#undef DSV4Q_W
#ifdef DSV4Q_WIDTH
#define DSV4Q_W DSV4Q_WIDTH
#endif
#include "oracle/width.h"
#undef DSV4Q_BOTH
