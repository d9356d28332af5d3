/*
 * dqc_emu.cpp - the fiber emulator behind dqc_emu.h (CPU build only).
 *
 * One launch = the blocks of the grid in order; one block = blockDim.x
 * fibers driven by a round-robin scheduler on the calling thread:
 *
 *      RUN --__syncthreads()--> WAIT_BLOCK --(all live fibers waiting)--> RUN
 *      RUN --warp barrier-----> WAIT_WARP  --(all live lanes waiting)---> RUN
 *      RUN --return-----------> DONE
 *
 * After each pass over the fibers the scheduler releases whatever barrier
 * is complete; if nothing can run and nothing releases, the block has a
 * divergent barrier and the launch fails (cudaErrorLaunchFailure, with the
 * reason on stderr). Stacks are kept between launches.
 */
#include "backends/cuda/dqc_emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <vector>

dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

enum { F_RUN, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE };
const size_t STACK = 256 * 1024;

struct fiber {
    ucontext_t ctx;
    char *stack = nullptr;
    int state = F_DONE;
};

std::vector<fiber> fibers;
std::vector<uint64_t> slots;        /* one exchange slot per thread */
std::vector<unsigned char> dyn;     /* dynamic shared memory of the launch */
ucontext_t sched;
int cur = -1;
const std::function<void()> *body = nullptr;
cudaError_t last_error = cudaSuccess;
bool in_launch = false;

void fiber_entry()
{
    (*body)();
    fibers[cur].state = F_DONE;
    /* returning resumes the scheduler through uc_link */
}

void yield_as(int state)
{
    if (!in_launch) { /* called outside a kernel: nothing to wait for */
        return;
    }
    fibers[cur].state = state;
    swapcontext(&fibers[cur].ctx, &sched);
}

/* Run one block to completion; 0 or -1 on barrier divergence. */
int run_block(int n)
{
    for (int f = 0; f < n; f++) {
        getcontext(&fibers[f].ctx);
        fibers[f].ctx.uc_stack.ss_sp = fibers[f].stack;
        fibers[f].ctx.uc_stack.ss_size = STACK;
        fibers[f].ctx.uc_link = &sched;
        makecontext(&fibers[f].ctx, fiber_entry, 0);
        fibers[f].state = F_RUN;
    }
    const int nwarp = (n + 31) / 32;
    for (;;) {
        for (int f = 0; f < n; f++) {
            if (fibers[f].state != F_RUN) continue;
            cur = f;
            threadIdx = dim3((unsigned)f, 0, 0);
            swapcontext(&sched, &fibers[f].ctx);
        }
        int alive = 0, at_block = 0;
        for (int f = 0; f < n; f++) {
            if (fibers[f].state == F_DONE) continue;
            alive++;
            if (fibers[f].state == F_WAIT_BLOCK) at_block++;
        }
        if (!alive) return 0;
        if (at_block == alive) {
            for (int f = 0; f < n; f++)
                if (fibers[f].state == F_WAIT_BLOCK) fibers[f].state = F_RUN;
            continue;
        }
        bool released = false;
        for (int w = 0; w < nwarp; w++) {
            int live = 0, waiting = 0;
            for (int f = w * 32; f < n && f < w * 32 + 32; f++) {
                if (fibers[f].state == F_DONE) continue;
                live++;
                if (fibers[f].state == F_WAIT_WARP) waiting++;
            }
            if (live && waiting == live) {
                for (int f = w * 32; f < n && f < w * 32 + 32; f++)
                    if (fibers[f].state == F_WAIT_WARP) fibers[f].state = F_RUN;
                released = true;
            }
        }
        if (!released) {
            fprintf(stderr, "dqc_emu: barrier divergence in block (%u,%u,%u): %d live fibers, %d at "
                            "__syncthreads, the rest at a warp barrier\n",
                    blockIdx.x, blockIdx.y, blockIdx.z, alive, at_block);
            return -1;
        }
    }
}

} // namespace

void dqc_emu_syncthreads(void) { yield_as(F_WAIT_BLOCK); }
void dqc_emu_syncwarp(void) { yield_as(F_WAIT_WARP); }

uint64_t dqc_emu_exchange(uint64_t v, int src_lane)
{
    const int warp0 = cur & ~31;
    slots[(size_t)cur] = v;
    dqc_emu_syncwarp();
    uint64_t r = slots[(size_t)(warp0 + src_lane)];
    dqc_emu_syncwarp();
    return r;
}

void *dqc_emu_dyn_smem(void) { return dyn.empty() ? nullptr : dyn.data(); }

int dqc_emu_launch(dim3 g, dim3 b, size_t smem, const std::function<void()> &fn)
{
    const unsigned n = b.x * b.y * b.z;
    if (n == 0 || n > 1024 || b.y != 1 || b.z != 1 || g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 ||
        g.z > 65535 || smem > 227 * 1024) {
        last_error = cudaErrorInvalidConfiguration;
        return last_error;
    }
    if (fibers.size() < n) {
        size_t old = fibers.size();
        fibers.resize(n);
        for (size_t f = old; f < n; f++) {
            fibers[f].stack = (char *)malloc(STACK);
            if (!fibers[f].stack) {
                fibers.resize(f);
                last_error = cudaErrorMemoryAllocation;
                return last_error;
            }
        }
    }
    slots.assign(n, 0);
    dyn.assign(smem, 0xFF);   /* NaN-poisoned, as uninitialised shared memory */
    blockDim = b;
    gridDim = g;
    body = &fn;
    in_launch = true;
    int rc = 0;
    for (unsigned z = 0; z < g.z && !rc; z++)
        for (unsigned y = 0; y < g.y && !rc; y++)
            for (unsigned x = 0; x < g.x && !rc; x++) {
                blockIdx = dim3(x, y, z);
                rc = run_block((int)n);
            }
    in_launch = false;
    body = nullptr;
    if (rc) last_error = cudaErrorLaunchFailure;
    return rc ? cudaErrorLaunchFailure : 0;
}

/* --- runtime API ---------------------------------------------------------- */

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure (emulator: barrier divergence)";
    default: return "unknown error";
    }
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
    if (d != 0) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "dqc CPU emulator");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = (size_t)1 << 32;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = 227 * 1024;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) { *v = 0; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 0; return cudaSuccess; }

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xFF, n);   /* NaN poison: unwritten outputs show */
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind)
{
    if (n) memmove(d, s, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t)
{
    return cudaMemcpy(d, s, n, k);
}

cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t)
{
    if (n) memset(d, v, n);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = nullptr; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
