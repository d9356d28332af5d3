"""Pure-PyTorch reference kernels of two DeepSeek V4 operators, written the
way kernel test suites write their torch references (vLLM, SGLang,
FlashMLA tests): float32 math on whole tensors, no loops over tokens.
Products are summed by torch's own reductions, not by a BLAS matmul
(einsum/@): the BLAS path (oneDNN/MKL) is chosen per CPU and run, and on
the CI machine it once returned sparse_attn normal/seed=1 at NRMS 2.7e-5,
100x the FP32 level, while the same wheel gave 2.6e-7 elsewhere; a test
must mean the same on every machine (docs/python.md).

  sparse_attn(q, kv, idx, sink, scale)   kernel.py sparse_attn_kernel:
      o[t,h] = sum_c p_c kv[idx[t,c]] / (sum_c p_c + exp(sink_h - m)),
      p_c = exp(scale q[t,h].kv[idx[t,c]] - m) over the live columns
      (idx == -1 or idx >= N is masked), m the row max; no live column -> 0.
  hc_pre(X, fn, scale, base, norm_eps, hc_eps, iters)   model.py
      Block.hc_pre + kernel.py hc_split_sinkhorn_kernel.

``defect=True`` plants one realistic bug in each, the kind that passes a
loose ``assert_close`` on easy inputs:
  sparse_attn: masked columns gathered as row 0 (``idx.clamp(min=0)``
      without a mask), which only matters on rows that HAVE masked columns;
  hc_pre: comb returned transposed, [target, source] instead of the
      reference's C[j][k] with j the source stream (oracle/hc.c notes it as
      a known real-world bug), which every shape check lets through.
"""
import torch


def sparse_attn(q, kv, idx, sink, scale, defect=False):
    s, H, D = q.shape
    N = kv.shape[0]
    live = (idx >= 0) & (idx < N)                          # [s, ncols]
    rows = kv[idx.clamp(0, N - 1).long()]                 # [s, ncols, D]
    rows = rows.float()
    scores = (q.float()[:, :, None, :] * rows[:, None, :, :]).sum(-1) * scale
    if not defect:
        scores = scores.masked_fill(~live[:, None, :], float("-inf"))
    m = torch.maximum(scores.amax(-1, keepdim=True), sink.float()[None, :, None])
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(scores - m)
    denom = p.sum(-1, keepdim=True) + torch.exp(sink.float()[None, :, None] - m)
    o = (p[:, :, :, None] * rows[:, None, :, :]).sum(-2) / denom
    return torch.where(live.any(-1)[:, None, None], o, torch.zeros_like(o))


def hc_pre(X, fn, scale, base, norm_eps, hc_eps, iters, defect=False):
    s, hc, d = X.shape
    x = X.reshape(s, hc * d).float()
    rsqrt = torch.rsqrt(x.square().mean(-1, keepdim=True) + norm_eps)
    mixes = (x[:, None, :] * fn.float()[None, :, :]).sum(-1) * rsqrt   # [s, (2+hc)*hc]
    pre = torch.sigmoid(mixes[:, :hc] * scale[0] + base[:hc]) + hc_eps
    post = 2 * torch.sigmoid(mixes[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    comb = (mixes[:, 2 * hc:] * scale[2] + base[2 * hc:]).reshape(s, hc, hc)
    comb = torch.softmax(comb, -1) + hc_eps
    comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + hc_eps)
        comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)
    y = (pre[:, :, None] * X.float()).sum(1)
    return y, post, (comb.transpose(-1, -2).contiguous() if defect else comb)
