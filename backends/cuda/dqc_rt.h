/*
 * dqc_rt.h - the one switch between the real CUDA build and the CPU
 * emulation build of the CUDA kernel set.
 *
 * The kernels of backends/cuda/ are written once, in plain CUDA C++, and
 * compiled two ways:
 *   nvcc            -> build/plugins/libdsv4q_cuda.so      (the real plugin)
 *   g++ -DDQC_EMU   -> build/plugins/libdsv4q_cuda_emu.so  (same sources on a
 *                      fiber emulator, dqc_emu.h: every CUDA thread is a
 *                      fiber, __syncthreads / warp shuffles are barriers)
 * The emulation build exists so that CI, which has nvcc but no GPU, checks
 * the kernels' LOGIC (indexing, tiling, block structure, rounding points)
 * against the oracle through the backend ABI; it proves nothing about
 * speed, races between blocks, or the device's math library.
 *
 * What kernel code may use (so that both builds mean the same thing):
 *  - 1-D thread blocks whose size is a multiple of 32; up to 3-D grids;
 *  - DQC_LAUNCH instead of <<< >>>;
 *  - DQC_SHARED (static shared arrays) and DQC_DYN_SMEM (dynamic);
 *  - __syncthreads(), dqc_shfl_xor() with all 32 lanes of a warp taking part;
 *  - no atomics, no cross-block communication inside one launch.
 */
#ifndef DQC_RT_H
#define DQC_RT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef DQC_EMU
#include "backends/cuda/dqc_emu.h"
#define DQC_SHARED(type, name, n) static type name[n]
#define DQC_DYN_SMEM(type, name) type *name = (type *)dqc_emu_dyn_smem()
#define DQC_LAUNCH(kern, grid, block, smem, stream, ...) \
    dqc_emu_launch(dim3(grid), dim3(block), (size_t)(smem), [=]() { kern(__VA_ARGS__); })
#define DQC_BUILD_NAME "cuda-emu"
#else
#include <cuda_runtime.h>
#define DQC_SHARED(type, name, n) __shared__ type name[n]
#define DQC_DYN_SMEM(type, name)               \
    extern __shared__ float4 dqc_dyn_smem_[]; \
    type *name = reinterpret_cast<type *>(dqc_dyn_smem_)
#define DQC_LAUNCH(kern, grid, block, smem, stream, ...) \
    kern<<<(grid), (block), (size_t)(smem), (stream)>>>(__VA_ARGS__)
#define DQC_BUILD_NAME "cuda"
#endif

#define DQC_HD __host__ __device__ __forceinline__
#define DQC_D __device__ __forceinline__

/* XOR shuffle across the 32 lanes of a warp (all lanes must call it). */
template <class T>
DQC_D T dqc_shfl_xor(T v, int mask)
{
#ifdef DQC_EMU
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    u = dqc_emu_exchange(u, (int)((threadIdx.x & 31u) ^ (unsigned)mask));
    T r;
    memcpy(&r, &u, sizeof r);
    return r;
#else
    return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

#endif
