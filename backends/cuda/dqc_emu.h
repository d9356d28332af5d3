/*
 * dqc_emu.h - a small CUDA emulator on fibers, for the CPU-side build of
 * the kernel set (see dqc_rt.h). Host C++ only; never part of the nvcc
 * build.
 *
 * Model. A launch runs its blocks one after another, in grid order. Each
 * block runs blockDim.x fibers (ucontext) on the calling OS thread; a fiber
 * runs until it reaches a barrier or returns. __syncthreads() releases when
 * every live fiber of the block waits at it; a warp barrier (inside
 * dqc_shfl_xor) when every live lane of the warp does. A block in which no
 * fiber can run and no barrier can release is a barrier divergence: the
 * launch fails with a message instead of hanging (in CUDA it would be
 * undefined behaviour). Because one block runs at a time, a function-local
 * `static` array is exactly a __shared__ array.
 *
 * Device memory is host memory (malloc, poisoned with 0xFF bytes = NaN
 * floats so an unwritten output shows). The runtime API below is the
 * subset backends/cuda/ uses, with the CUDA names and error conventions.
 */
#ifndef DQC_EMU_H
#define DQC_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

void dqc_emu_syncthreads(void);
void dqc_emu_syncwarp(void);
/* Publish v for this lane, wait for the warp, return lane src's value. */
uint64_t dqc_emu_exchange(uint64_t v, int src_lane);
void *dqc_emu_dyn_smem(void);
/* Run body as the kernel of a <<<g, b, smem>>> launch; 0 or an error code
 * (also recorded for cudaGetLastError). */
int dqc_emu_launch(dim3 g, dim3 b, size_t smem, const std::function<void()> &body);

#define __syncthreads() dqc_emu_syncthreads()
#define __syncwarp() dqc_emu_syncwarp()

/* --- the runtime API subset -------------------------------------------- */
typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorLaunchFailure = 719
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef struct dqc_emu_stream *cudaStream_t;
typedef struct dqc_emu_event *cudaEvent_t;
struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
};

const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }

#endif
