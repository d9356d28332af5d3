/*
 * dsv4q_cuda_debug.h - a second, test-only export of the CUDA plugin
 * (libdsv4q_cuda.so / libdsv4q_cuda_emu.so), beside dsv4q_backend_entry.
 *
 * It exposes the HOST instances of the plugin's rounding rules (the same
 * __host__ __device__ functions the kernels call: backends/cuda/dqc_num.h)
 * so a machine without a GPU can check them against oracle/formats.c, and
 * the kernel set's self-test (backends/cuda/selftest.cu). Plain C; not part
 * of the backend ABI; the harness never calls it.
 */
#ifndef DSV4Q_CUDA_DEBUG_H
#define DSV4Q_CUDA_DEBUG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4Q_CUDA_DEBUG_SYMBOL "dsv4q_cuda_debug"

typedef struct dsv4q_cuda_debug_v1 {
    uint32_t struct_size;                 /* sizeof(dsv4q_cuda_debug_v1) */
    const char *build;                    /* "cuda" (nvcc) or "cuda-emu" (CPU emulation) */
    float (*bf16_round)(float v);         /* RNE to BF16 and back */
    float (*e4m3_round)(float v);         /* E4M3fn of a value already clamped to +-448 */
    float (*e2m1_round)(float v);         /* E2M1 of a value already clamped to +-6 */
    int (*ceil_log2_ratio)(double amax, double fmax);
    float (*fp8_scale)(float amax, int ue8m0);   /* act_quant block scale */
    float (*fp4_scale)(float amax);              /* fp4_quant block scale */
    /* The kernel set's self-test on device 0 (or the emulator): 0, or
     * nonzero with err set ("no CUDA device ..." when there is none). */
    int (*selftest)(char *err, size_t errlen);
} dsv4q_cuda_debug_v1;

typedef const dsv4q_cuda_debug_v1 *(*dsv4q_cuda_debug_fn)(void);
const dsv4q_cuda_debug_v1 *dsv4q_cuda_debug(void);

#ifdef __cplusplus
}
#endif

#endif
