/*
 * bench_cuda.cu - per-operator GPU timings of the CUDA kernel set at Flash
 * shapes (DeepSeek V4 Flash: dim 4096, 64 heads x 512, rope 64, q_lora
 * 1024, 8 output groups x 1024, indexer 64 x 128 top-512, window 128,
 * 256 experts top-6 x 2048, hc 4).
 *
 *   build/cuda/bench_cuda [--tokens S] [--csv FILE]       (`make cuda-bench`)
 *
 * Each operator is the dqc_* device function the plugin runs (no host
 * transfers): 2 warm-up calls, then up to 20 calls (at most ~1 s) each
 * timed with CUDA events around the call; the median is printed with the
 * effective bandwidth over the bytes the operator must move at least
 * (inputs read once, outputs written once) and the arithmetic rate. Inputs
 * are random (never zeros). RoPE and the compressor include the upload of
 * their frequency table (a few hundred bytes and one stream sync).
 * Scratch comes from the context's arena, allocated in the warm-up.
 *
 * The timings measure this kernel set (correctness-first: FP64 block dots,
 * CUDA-core GEMMs, an O(T^2) top-k), not the hardware's limit; docs/cuda.md
 * says what each kernel is.
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include "backends/cuda/dqc.h"
#include "backends/cuda/dqc_num.h"

namespace {

dqc_ctx C;
FILE *csv = NULL;
uint64_t rs = 42;

uint64_t rnext()
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
float runi() { return (float)((rnext() >> 40) * 0x1p-24) * 2.0f - 1.0f; }

void die(const char *what)
{
    fprintf(stderr, "bench_cuda: %s: %s\n", what, C.err);
    exit(1);
}

/* Persistent device buffers (plain cudaMalloc, outside the arena). */
std::vector<void *> owned;
template <class T>
T *dev(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, sizeof(T) * (n ? n : 1)) != cudaSuccess) {
        fprintf(stderr, "bench_cuda: cudaMalloc of %zu bytes failed\n", sizeof(T) * n);
        exit(1);
    }
    owned.push_back(p);
    return (T *)p;
}
template <class T>
T *up(const std::vector<T> &h)
{
    T *d = dev<T>(h.size());
    if (cudaMemcpy(d, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice) != cudaSuccess) die("upload");
    return d;
}
float *rnd(size_t n, float amp)
{
    std::vector<float> h(n);
    for (auto &v : h) v = runi() * amp;
    return up(h);
}
/* BF16-representable activations, as the harness gives them. */
float *rnd_bf16(size_t n, float amp)
{
    std::vector<float> h(n);
    for (auto &v : h) v = dqc_bf16r(runi() * amp);
    return up(h);
}

dqc_weight weight(int fmt, long out, long in)
{
    dqc_weight w = {fmt, out, in, NULL, NULL, 0};
    const size_t n = (size_t)out * in;
    if (fmt == DQC_WF_F32) {
        w.codes = rnd(n, 0.05f);
    } else if (fmt == DQC_WF_BF16) {
        std::vector<uint16_t> h(n);
        for (auto &v : h) v = dqc_bf16_code(runi() * 0.05f);
        w.codes = up(h);
    } else {
        std::vector<uint8_t> h(fmt == DQC_WF_FP8 ? n : n / 2);
        for (auto &v : h) {
            v = (uint8_t)rnext();
            if (fmt == DQC_WF_FP8 && (v & 0x7F) == 0x7F) v ^= 1;
        }
        w.codes = up(h);
        const long rows = fmt == DQC_WF_FP8 ? (out + 127) / 128 : out, cols = fmt == DQC_WF_FP8 ? (in + 127) / 128 : in / 32;
        std::vector<float> sc((size_t)(rows * cols));
        for (auto &v : sc) v = dqc_pow2f(-9 - (int)(rnext() % 3));
        w.scale = up(sc);
        w.scale_cols = cols;
    }
    return w;
}

double wbytes(const dqc_weight &w)
{
    const double n = (double)w.out * w.in;
    switch (w.fmt) {
    case DQC_WF_F32: return 4 * n;
    case DQC_WF_BF16: return 2 * n;
    case DQC_WF_FP8: return n + 4.0 * ((w.out + 127) / 128) * ((w.in + 127) / 128);
    default: return n / 2 + 4.0 * w.out * (w.in / 32);
    }
}

/* Time fn: warm-up, then up to 20 runs / ~1 s; print one row. */
template <class F>
void bench(const char *op, const char *shape, double bytes, double flops, F fn)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 2; i++) {
        dqc_scratch_reset(&C);
        if (fn()) die(op);
    }
    if (cudaDeviceSynchronize() != cudaSuccess) die(op);
    std::vector<float> ms;
    float total = 0;
    while (ms.size() < 20 && total < 1000.0f) {
        dqc_scratch_reset(&C);
        cudaEventRecord(a, C.stream);
        if (fn()) die(op);
        cudaEventRecord(b, C.stream);
        if (cudaEventSynchronize(b) != cudaSuccess) die(op);
        float t = 0;
        cudaEventElapsedTime(&t, a, b);
        ms.push_back(t);
        total += t;
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_cuda: %s: %s\n", op, cudaGetErrorString(e));
        exit(1);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    printf("%-16s %-44s %10.1f %9.1f %9.2f %4zu\n", op, shape, med * 1e3, bytes / (med * 1e-3) / 1e9,
           flops / (med * 1e-3) / 1e12, ms.size());
    fflush(stdout);
    if (csv) fprintf(csv, "%s,\"%s\",%.3f,%.3f,%.4f,%zu\n", op, shape, med * 1e3, bytes / (med * 1e-3) / 1e9,
                     flops / (med * 1e-3) / 1e12, ms.size());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}

void bench_linear(const char *name, int fmt, long s, long K, long N, int bf16_out)
{
    dqc_weight w = weight(fmt, N, K);
    float *x = rnd_bf16((size_t)s * K, 2.0f), *y = dev<float>((size_t)s * N);
    char shape[96];
    snprintf(shape, sizeof shape, "x[%ld,%ld] W[%ld,%ld] %s", s, K, N, K,
             fmt == DQC_WF_FP8 ? "fp8" : fmt == DQC_WF_FP4 ? "fp4" : fmt == DQC_WF_BF16 ? "bf16" : "f32");
    bench(name, shape, wbytes(w) + 4.0 * s * (K + N), 2.0 * s * K * N,
          [&] { return dqc_linear(&C, DQC_SOURCE_SET, 1, &w, x, s, y, bf16_out ? DQC_B_LINEAR_BF16 : -1); });
}

} // namespace

int main(int argc, char **argv)
{
    long S = 128;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc) S = atol(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = fopen(argv[++i], "w");
        else {
            fprintf(stderr, "usage: bench_cuda [--tokens S] [--csv FILE]\n");
            return 2;
        }
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        fprintf(stderr, "bench_cuda: no CUDA device (cudaGetDeviceCount: %s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 1;
    }
    if (dqc_ctx_init(&C, 0)) die("init");
    printf("device: %s, %d SMs, %.1f GiB; tokens per call S = %ld (decode rows: 1)\n", C.prop.name,
           C.prop.multiProcessorCount, C.prop.totalGlobalMem / 1073741824.0, S);
    if (csv) fprintf(csv, "op,shape,median_us,GBps,TFLOPs,runs\n");
    printf("%-16s %-44s %10s %9s %9s %4s\n", "op", "shape", "median_us", "GB/s", "TFLOP/s", "runs");
    const uint64_t bs = DQC_SOURCE_SET;

    /* GEMMs: the attention projections (FP8 128x128), one wo_a group (BF16),
     * decode (1 token) and S tokens */
    for (long s : {1L, S}) {
        bench_linear("linear wq_a", DQC_WF_FP8, s, 4096, 1024, 1);
        bench_linear("linear wq_b", DQC_WF_FP8, s, 1024, 32768, 1);
        bench_linear("linear wkv", DQC_WF_FP8, s, 4096, 512, 1);
        bench_linear("linear wo_a grp", DQC_WF_BF16, s, 4096, 1024, 1);
        bench_linear("linear wo_b", DQC_WF_FP8, s, 8192, 4096, 1);
        bench_linear("linear idx wq_b", DQC_WF_FP8, s, 1024, 8192, 1);
    }
    /* experts: a routed FP4 expert with 8 rows, the shared FP8 expert on S */
    for (int f = 0; f < 2; f++) {
        const int fmt = f ? DQC_WF_FP8 : DQC_WF_FP4;
        const long rows = f ? S : 8;
        dqc_weight w1 = weight(fmt, 2048, 4096), w2 = weight(fmt, 4096, 2048), w3 = weight(fmt, 2048, 4096);
        float *x = rnd_bf16((size_t)rows * 4096, 2.0f), *wt = rnd((size_t)rows, 1.0f), *y = dev<float>((size_t)rows * 4096);
        char shape[96];
        snprintf(shape, sizeof shape, "x[%ld,4096] I=2048 %s", rows, f ? "fp8" : "fp4");
        bench(f ? "expert shared" : "expert routed", shape, wbytes(w1) * 3 + 8.0 * rows * 4096,
              2.0 * rows * 4096 * 2048 * 3,
              [&] { return dqc_expert(&C, bs, 1, &w1, &w2, &w3, x, rows, f ? NULL : wt, 10.0, y); });
    }
    {
        float *x = rnd_bf16((size_t)S * 4096, 3.0f), *w = rnd(4096, 1.0f), *y = dev<float>((size_t)S * 4096);
        bench("rmsnorm", "x[S,4096]", 8.0 * S * 4096, 3.0 * S * 4096,
              [&] { return dqc_rmsnorm(&C, bs, x, S, 4096, w, 1e-6, y); });
        bench("act_quant", "x[S,4096] block 128", 8.0 * S * 4096, 4.0 * S * 4096,
              [&] { return dqc_act_quant(&C, x, S, 4096, 128, 1, y); });
    }
    {
        const long rows = S * 64;
        float *q = rnd_bf16((size_t)rows * 512, 0.1f), *y = dev<float>((size_t)rows * 512);
        bench("qhead_norm", "q[S*64,512]", 8.0 * rows * 512, 4.0 * rows * 512,
              [&] { return dqc_qhead_norm(&C, bs, q, rows, 512, 1e-6, y); });
        std::vector<int32_t> ph((size_t)rows);
        for (long i = 0; i < rows; i++) ph[i] = (int32_t)(65536 + i / 64);
        int32_t *pos = up(ph);
        float *xr = rnd_bf16((size_t)rows * 64, 1.0f), *yr = dev<float>((size_t)rows * 64);
        dqc_rope_params rp = {64, 160000.0, 65536, 16.0, 32.0, 1.0};
        bench("rope", "x[S*64,64] yarn pos 65536+", 8.0 * rows * 64, 6.0 * rows * 64, [&] {
            dqc_rope_table t;
            return dqc_rope_prepare(&C, bs, &rp, &t) || dqc_rope(&C, bs, &t, xr, pos, rows, 0, yr);
        });
        float *xi = rnd_bf16((size_t)rows * 128, 1.0f), *yi = dev<float>((size_t)rows * 128);
        bench("hadamard", "x[S*64,128]", 8.0 * rows * 128, 7.0 * rows * 128,
              [&] { return dqc_hadamard(&C, bs, xi, rows, 128, yi); });
        bench("fp4_quant", "x[S*64,128]", 8.0 * rows * 128, 4.0 * rows * 128,
              [&] { return dqc_fp4_quant(&C, xi, rows, 128, yi); });
    }
    {
        const int H = 64, D = 512;
        const long N = 128 + 16384, nc = 128 + 512;
        float *q = rnd_bf16((size_t)S * H * D, 0.05f), *kv = rnd_bf16((size_t)N * D, 1.0f), *sink = rnd(H, 1.0f);
        float *o = dev<float>((size_t)S * H * D);
        std::vector<int32_t> ih((size_t)(S * nc));
        for (auto &v : ih) v = (int32_t)(rnext() % N);
        int32_t *idx = up(ih);
        bench("sparse_attn", "q[S,64,512] kv[16512,512] idx[S,640]", 4.0 * (2.0 * S * H * D + (double)S * nc * D) + 4.0 * S * nc,
              4.0 * S * H * nc * D, [&] {
                  return dqc_sparse_attn(&C, bs, q, S, H, D, kv, N, idx, nc, sink, 1.0f / sqrtf((float)D), o);
              });
    }
    for (int k = 0; k < 3; k++) {
        const int ratio = k == 2 ? 128 : 4, Dc = k == 1 ? 128 : 512, rotate = k == 1, coff = ratio == 4 ? 2 : 1;
        const long s = std::max(S, (long)ratio);
        dqc_cmp cm = {ratio, Dc, rotate, weight(DQC_WF_BF16, coff * Dc, 4096), weight(DQC_WF_BF16, coff * Dc, 4096),
                      rnd((size_t)ratio * coff * Dc, 0.5f), rnd((size_t)Dc, 1.0f)};
        float *x = rnd_bf16((size_t)s * 4096, 2.0f), *rows = dev<float>((size_t)(s / ratio + 1) * Dc);
        dqc_cmp_state st;
        if (dqc_cmp_state_init(&C, &st, ratio, Dc)) die("compressor state");
        dqc_rope_params rp = {64, 160000.0, 65536, 16.0, 32.0, 1.0};
        char shape[96];
        snprintf(shape, sizeof shape, "x[%ld,4096] ratio %d Dc %d%s", s, ratio, Dc, rotate ? " rotate" : "");
        bench("compressor", shape, 2 * wbytes(cm.wkv) + 4.0 * s * 4096, 4.0 * s * 4096 * coff * Dc, [&] {
            dqc_rope_table t;
            return dqc_rope_prepare(&C, bs, &rp, &t) ||
                   dqc_compressor(&C, bs, 1, &cm, &st, x, s, 0, &t, 1e-6, rows) < 0;
        });
        dqc_cmp_state_free(&st);
    }
    for (int k = 0; k < 2; k++) {
        const long s = k ? S : 1, T = k ? 2048 : 16384, start = k ? 8192 : 65536;
        float *q = rnd_bf16((size_t)s * 64 * 128, 0.5f), *w = rnd_bf16((size_t)s * 64, 0.02f);
        float *K = rnd_bf16((size_t)T * 128, 0.5f), *sc = dev<float>((size_t)s * T);
        char shape[96];
        snprintf(shape, sizeof shape, "q[%ld,64,128] K[%ld,128]", s, T);
        bench("indexer_score", shape, 4.0 * (s * 64 * 128 + T * 128 + s * T), 2.0 * s * T * 64 * 128,
              [&] { return dqc_indexer_score(&C, bs, q, w, s, 64, 128, K, T, start, 4, sc); });
        int32_t *ix = (int32_t *)dev<int32_t>((size_t)s * 512);
        snprintf(shape, sizeof shape, "score[%ld,%ld] k=512", s, T);
        bench("topk", shape, 4.0 * s * T + 4.0 * s * 512, (double)s * T * T, [&] { return dqc_topk(&C, sc, s, T, 512, ix); });
    }
    {
        const int hc = 4;
        const long d = 4096;
        dqc_weight fn = weight(DQC_WF_F32, (2 + hc) * hc, hc * d), fh = weight(DQC_WF_F32, hc, hc * d);
        float *X = rnd_bf16((size_t)S * hc * d, 1.0f), *scale = rnd(3, 1.0f), *base = rnd(24, 0.5f);
        float *y = dev<float>((size_t)S * d), *post = dev<float>((size_t)S * hc), *comb = dev<float>((size_t)S * hc * hc);
        float *Y = dev<float>((size_t)S * hc * d), *x = rnd_bf16((size_t)S * d, 1.0f);
        bench("hc_pre", "X[S,4,4096] fn[24,16384] sinkhorn 20", wbytes(fn) + 4.0 * S * hc * d + 4.0 * S * d,
              2.0 * S * 24 * hc * d, [&] {
                  return dqc_hc_pre(&C, bs, X, S, hc, d, &fn, scale, base, 1e-6, 1e-6, 20, y, post, comb);
              });
        bench("hc_post", "x[S,4096] X[S,4,4096]", 4.0 * S * d * (2 * hc + 1), 2.0 * S * hc * d * (hc + 1),
              [&] { return dqc_hc_post(&C, bs, x, X, post, comb, S, hc, d, Y); });
        bench("hc_head", "X[S,4,4096] fn[4,16384]", wbytes(fh) + 4.0 * S * hc * d + 4.0 * S * d,
              2.0 * S * hc * hc * d, [&] { return dqc_hc_head(&C, bs, X, S, hc, d, &fh, scale, base, 1e-6, 1e-6, y); });
    }
    {
        dqc_weight W = weight(DQC_WF_F32, 256, 4096);
        float *x = rnd_bf16((size_t)S * 4096, 1.0f), *bias = rnd(256, 0.1f), *wts = dev<float>((size_t)S * 6);
        int32_t *ix = dev<int32_t>((size_t)S * 6);
        bench("moe_gate", "x[S,4096] W[256,4096] top-6", wbytes(W) + 4.0 * S * 4096, 2.0 * S * 256 * 4096, [&] {
            return dqc_moe_gate(&C, x, S, 4096, &W, bias, NULL, NULL, 256, 6, 0, 1.5, wts, ix);
        });
    }
    for (void *p : owned) cudaFree(p);
    dqc_ctx_fini(&C);
    if (csv) fclose(csv);
    return 0;
}
