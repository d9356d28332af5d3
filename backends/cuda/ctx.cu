/*
 * ctx.cu - the kernel set's context: device selection, one stream, error
 * messages, and a scratch arena.
 *
 * The arena is a list of plain cudaMalloc chunks (never managed memory)
 * that only grows; dqc_scratch_reset makes all of it free again without
 * returning it to the driver. So a benchmark loop allocates nothing after
 * its first iteration, and one ABI call costs at most a few cudaMallocs.
 */
#include <stdarg.h>
#include <stdio.h>
#include "backends/cuda/dqc.h"

int dqc_fail(dqc_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return -1;
}

int dqc_check(dqc_ctx *c, cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    const char *base = strrchr(file, '/');
    return dqc_fail(c, "CUDA error in %s (%s:%d): %s", what, base ? base + 1 : file, line, cudaGetErrorString(e));
}

int dqc_ctx_init(dqc_ctx *c, int device)
{
    memset(c, 0, sizeof *c);
    c->device = device;
    DQC_CK(c, cudaSetDevice(device));
    DQC_CK(c, cudaGetDeviceProperties(&c->prop, device));
    DQC_CK(c, cudaStreamCreate(&c->stream));
    return 0;
}

void dqc_ctx_fini(dqc_ctx *c)
{
    if (c->stream || c->nchunk) cudaDeviceSynchronize();
    for (int i = 0; i < c->nchunk; i++) cudaFree(c->chunk[i].base);
    c->nchunk = 0;
    if (c->stream) cudaStreamDestroy(c->stream);
    c->stream = 0;
}

void *dqc_alloc(dqc_ctx *c, size_t bytes)
{
    bytes = (bytes + 255) & ~(size_t)255;
    if (!bytes) bytes = 256;
    for (int i = 0; i < c->nchunk; i++)
        if (c->chunk[i].size - c->chunk[i].used >= bytes) {
            void *p = c->chunk[i].base + c->chunk[i].used;
            c->chunk[i].used += bytes;
            return p;
        }
    if (c->nchunk == DQC_MAX_CHUNKS) {
        dqc_fail(c, "scratch arena: more than %d chunks", DQC_MAX_CHUNKS);
        return NULL;
    }
    const size_t min_chunk = (size_t)64 << 20;
    size_t size = bytes > min_chunk ? bytes : min_chunk;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* clear the sticky-free allocation error */
        dqc_fail(c, "cudaMalloc(%zu bytes): %s", size, cudaGetErrorString(e));
        return NULL;
    }
    c->chunk[c->nchunk].base = (char *)p;
    c->chunk[c->nchunk].size = size;
    c->chunk[c->nchunk].used = bytes;
    c->nchunk++;
    return p;
}

void dqc_scratch_reset(dqc_ctx *c)
{
    for (int i = 0; i < c->nchunk; i++) c->chunk[i].used = 0;
}

int dqc_smem_limit(dqc_ctx *c, const void *kernel, size_t bytes, const char *name)
{
    if (bytes <= 48 * 1024) return 0;
    if (bytes > c->prop.sharedMemPerBlockOptin)
        return dqc_fail(c, "%s: needs %zu bytes of shared memory, the device allows %zu per block", name, bytes,
                        (size_t)c->prop.sharedMemPerBlockOptin);
    DQC_CK(c, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return 0;
}
