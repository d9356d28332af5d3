#!/usr/bin/env python3
"""st2gguf.py - write a dsv4q checkpoint's weights, unchanged, as a llama.cpp
`deepseek4` GGUF (gguf-py's GGUFWriter; names and metadata keys as
llama.cpp's converter writes them, see docs/gguf.md).

Why: the oracle must give bit-identical logits on a GGUF holding exactly
the weights of a safetensors checkpoint; llama.cpp's own converter cannot
make one (it re-quantizes FP8 weights to Q8_0 and needs torch and an HF
tokenizer), so this is the lossless path for BF16/F32 checkpoints (e.g.
`dsv4q synth --config tiny-bf16`). F32 and BF16 tensors are copied byte for
byte; I32 (tid2eid) too; MTP layers are dropped (dsv4q binds none from a
GGUF); routed experts are stacked per projection as llama.cpp does.
FP8/FP4 tensors are refused: GGUF has no E4M3 type.

usage: python3 scripts/st2gguf.py CHECKPOINT_DIR OUT.gguf [--f32 | --f16]
--f32: widen BF16 tensors to F32 (exact), so llama.cpp runs every matmul
in F32 (its BF16 matmuls round the activation to BF16) and the oracle binds
F32 weights (same values, same logits).
--f16: write every BF16 tensor of 2 or more dimensions as F16 (the type of
llama.cpp's `--outtype f16` and of llama-quantize's F16 target), rounded to
nearest even by numpy; 1-D BF16 tensors (norms) are widened to F32, as
llama.cpp's converter keeps 1-D tensors, and F32 tensors (the parameters
the reference keeps in F32: hc, gate, compressor) stay F32. A BF16 value
(8 significant bits) is exact in F16 (11) unless it lies outside F16's
range (|x| < 2^-17 loses bits, |x| > 65504 overflows): the script says how
many values rounded (stderr) and refuses a value that would overflow.
The file also carries llama.cpp's "no vocabulary" keys
(tokenizer.ggml.model = "none", deepseek4.vocab_size) so llama.cpp loads it.
Needs: numpy, gguf (PyPI). Reads safetensors by its spec (no torch).
"""
import json
import os
import struct
import sys

import numpy as np
import gguf

ST_NP = {"F32": np.float32, "BF16": np.uint16, "I32": np.int32, "F64": np.float64}


def read_safetensors(d):
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    out = {}
    for f in files:
        with open(os.path.join(d, f), "rb") as fh:
            buf = fh.read()
        (hlen,) = struct.unpack("<Q", buf[:8])
        hdr = json.loads(buf[8:8 + hlen])
        base = 8 + hlen
        for name, info in hdr.items():
            if name == "__metadata__":
                continue
            dt = info["dtype"]
            a, b = info["data_offsets"]
            if dt not in ST_NP:
                raise SystemExit(f"st2gguf: {f}: tensor '{name}' has dtype {dt}; only F32/BF16/I32/F64 copy exactly "
                                 "into GGUF")
            out[name] = (dt, np.frombuffer(buf[base + a:base + b], dtype=ST_NP[dt]).reshape(info["shape"]))
    return out


LAYER = {
    "hc_attn_fn": "hc_attn_fn.weight", "hc_attn_base": "hc_attn_base.weight", "hc_attn_scale": "hc_attn_scale.weight",
    "hc_ffn_fn": "hc_ffn_fn.weight", "hc_ffn_base": "hc_ffn_base.weight", "hc_ffn_scale": "hc_ffn_scale.weight",
    "attn_norm.weight": "attn_norm.weight", "ffn_norm.weight": "ffn_norm.weight",
    "attn.attn_sink": "attn_sinks.weight", "attn.wq_a.weight": "attn_q_a.weight",
    "attn.q_norm.weight": "attn_q_a_norm.weight", "attn.wq_b.weight": "attn_q_b.weight",
    "attn.wkv.weight": "attn_kv.weight", "attn.kv_norm.weight": "attn_kv_a_norm.weight",
    "attn.wo_a.weight": "attn_output_a.weight", "attn.wo_b.weight": "attn_output_b.weight",
    "attn.compressor.wkv.weight": "attn_compressor_kv.weight",
    "attn.compressor.wgate.weight": "attn_compressor_gate.weight",
    "attn.compressor.ape": "attn_compressor_ape.weight", "attn.compressor.norm.weight": "attn_compressor_norm.weight",
    "attn.indexer.wq_b.weight": "indexer.attn_q_b.weight", "attn.indexer.weights_proj.weight": "indexer.proj.weight",
    "attn.indexer.compressor.wkv.weight": "indexer_compressor_kv.weight",
    "attn.indexer.compressor.wgate.weight": "indexer_compressor_gate.weight",
    "attn.indexer.compressor.ape": "indexer_compressor_ape.weight",
    "attn.indexer.compressor.norm.weight": "indexer_compressor_norm.weight",
    "ffn.gate.weight": "ffn_gate_inp.weight", "ffn.gate.bias": "exp_probs_b.bias",
    "ffn.gate.tid2eid": "ffn_gate_tid2eid.weight",
    "ffn.shared_experts.w1.weight": "ffn_gate_shexp.weight", "ffn.shared_experts.w2.weight": "ffn_down_shexp.weight",
    "ffn.shared_experts.w3.weight": "ffn_up_shexp.weight",
}
GLOBAL = {"embed.weight": "token_embd.weight", "norm.weight": "output_norm.weight", "head.weight": "output.weight",
          "hc_head_fn": "output_hc_fn.weight", "hc_head_base": "output_hc_base.weight",
          "hc_head_scale": "output_hc_scale.weight"}
EXPERT = {"w1": "ffn_gate_exps", "w2": "ffn_down_exps", "w3": "ffn_up_exps"}


WIDEN = False
F16 = False
ROUNDED = [0, 0]   # --f16: values that changed, values written


def to_f16(name, dt, arr):
    """arr (BF16 storage, uint16) as float16, rounded to nearest even; refuses overflow."""
    x = (arr.astype(np.uint32) << 16).view(np.float32)
    h = x.astype(np.float16)
    bad = np.isinf(h) & np.isfinite(x)
    if bad.any():
        raise SystemExit(f"st2gguf: --f16: tensor '{name}' holds {x[bad].flat[0]!r}, outside F16's range "
                         "(|x| <= 65504): write it without --f16")
    ROUNDED[0] += int(np.count_nonzero(h.astype(x.dtype) != x))
    ROUNDED[1] += h.size
    return np.ascontiguousarray(h)


def add(w, name, dt, arr):
    if F16 and dt == "BF16" and arr.ndim >= 2:
        w.add_tensor(name, to_f16(name, dt, arr))
    elif dt == "BF16" and (WIDEN or F16):
        w.add_tensor(name, np.ascontiguousarray((arr.astype(np.uint32) << 16).view(np.float32)))
    elif dt == "BF16":
        w.add_tensor(name, np.ascontiguousarray(arr), raw_dtype=gguf.GGMLQuantizationType.BF16)
    else:
        w.add_tensor(name, np.ascontiguousarray(arr))


def main():
    global WIDEN, F16
    args = [a for a in sys.argv[1:] if a not in ("--f32", "--f16")]
    WIDEN, F16 = "--f32" in sys.argv[1:], "--f16" in sys.argv[1:]
    if len(args) != 2 or (WIDEN and F16):
        raise SystemExit(__doc__)
    src, dst = args
    cfg = json.load(open(os.path.join(src, "config.json")))
    t = read_safetensors(src)
    nl = cfg["n_layers"]
    w = gguf.GGUFWriter(dst, "deepseek4")
    A = "deepseek4."
    w.add_uint32(A + "block_count", nl)
    w.add_uint32(A + "context_length", cfg["original_seq_len"] * int(cfg["rope_factor"]) if cfg.get("original_seq_len") else 4096)
    w.add_uint32(A + "embedding_length", cfg["dim"])
    w.add_uint32(A + "attention.head_count", cfg["n_heads"])
    w.add_uint32(A + "attention.head_count_kv", 1)
    w.add_uint32(A + "attention.key_length", cfg["head_dim"])
    w.add_uint32(A + "attention.value_length", cfg["head_dim"])
    w.add_uint32(A + "rope.dimension_count", cfg["rope_head_dim"])
    w.add_uint32(A + "attention.q_lora_rank", cfg["q_lora_rank"])
    w.add_uint32(A + "attention.sliding_window", cfg["window_size"])
    w.add_uint32(A + "expert_count", cfg["n_routed_experts"])
    w.add_uint32(A + "expert_used_count", cfg["n_activated_experts"])
    w.add_uint32(A + "expert_shared_count", cfg["n_shared_experts"])
    w.add_uint32(A + "expert_feed_forward_length", cfg["moe_inter_dim"])
    w.add_float32(A + "expert_weights_scale", cfg["route_scale"])
    w.add_bool(A + "expert_weights_norm", True)
    w.add_uint32(A + "expert_gating_func", {"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}[cfg["score_func"]])
    w.add_array(A + "swiglu_clamp_exp", [float(cfg["swiglu_limit"])] * nl)
    w.add_array(A + "swiglu_clamp_shexp", [float(cfg["swiglu_limit"])] * nl)
    w.add_float32(A + "attention.layer_norm_rms_epsilon", cfg["norm_eps"])
    w.add_float32(A + "rope.freq_base", cfg["rope_theta"])
    if cfg.get("original_seq_len", 0):
        w.add_string(A + "rope.scaling.type", "yarn")
        w.add_float32(A + "rope.scaling.factor", cfg["rope_factor"])
        w.add_uint32(A + "rope.scaling.original_context_length", cfg["original_seq_len"])
        w.add_float32(A + "rope.scaling.yarn_beta_fast", cfg["beta_fast"])
        w.add_float32(A + "rope.scaling.yarn_beta_slow", cfg["beta_slow"])
    w.add_uint32(A + "attention.indexer.head_count", cfg["index_n_heads"])
    w.add_uint32(A + "attention.indexer.key_length", cfg["index_head_dim"])
    w.add_uint32(A + "attention.indexer.top_k", cfg["index_topk"])
    w.add_uint32(A + "attention.output_group_count", cfg["o_groups"])
    w.add_uint32(A + "attention.output_lora_rank", cfg["o_lora_rank"])
    w.add_array(A + "attention.compress_ratios", [int(r) for r in cfg["compress_ratios"][:nl]])
    w.add_float32(A + "attention.compress_rope_freq_base", cfg["compress_rope_theta"])
    w.add_uint32(A + "hyper_connection.count", cfg["hc_mult"])
    w.add_uint32(A + "hyper_connection.sinkhorn_iterations", cfg["hc_sinkhorn_iters"])
    w.add_float32(A + "hyper_connection.epsilon", cfg["hc_eps"])
    w.add_uint32(A + "hash_layer_count", cfg["n_hash_layers"])
    w.add_uint32(A + "embedding_length_out", cfg["dim"] * cfg["hc_mult"])
    w.add_string("general.name", "dsv4q st2gguf " + os.path.basename(os.path.abspath(src)))
    w.add_string("tokenizer.ggml.model", "none")
    w.add_uint32(A + "vocab_size", cfg["vocab_size"])

    for ref, gname in GLOBAL.items():
        add(w, gname, *t[ref])
    ne = cfg["n_routed_experts"]
    for li in range(nl):
        pre = f"layers.{li}."
        for suf, gsuf in LAYER.items():
            if pre + suf in t:
                add(w, f"blk.{li}.{gsuf}", *t[pre + suf])
        for p, gp in EXPERT.items():
            parts = [t[f"{pre}ffn.experts.{e}.{p}.weight"] for e in range(ne)]
            dts = {d for d, _ in parts}
            if len(dts) != 1:
                raise SystemExit(f"st2gguf: layer {li} experts {p}: mixed dtypes {dts}")
            add(w, f"blk.{li}.{gp}.weight", dts.pop(), np.stack([a for _, a in parts]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if F16:
        print(f"st2gguf: --f16: {ROUNDED[0]} of {ROUNDED[1]} values rounded to F16", file=sys.stderr)


if __name__ == "__main__":
    main()
