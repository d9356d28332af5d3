#!/usr/bin/env python3
"""convert_synth.py - convert a dsv4q checkpoint (`dsv4q synth`, DeepSeek's
own V4 format: reference tensor names, FP8 E4M3 + E8M0 block scales, FP4
E2M1 experts) to a llama.cpp `deepseek4` GGUF with llama.cpp's OWN converter
(convert_hf_to_gguf.py, class DeepseekV4Model), unchanged.

Two adaptations, both outside the converter's tensor path:
 1. The converter reads a Hugging Face config.json (num_hidden_layers,
    hidden_size, ...); dsv4q writes the inference-style one (n_layers, dim,
    ...). We write the HF spelling of the same numbers into a staging
    directory next to a symlink to the weights (hf_config below).
 2. A synthetic checkpoint has no tokenizer. DeepseekV4Model.set_vocab is
    replaced by one that writes llama.cpp's "no vocabulary" form
    (tokenizer.ggml.model = "none" and deepseek4.vocab_size), which
    llama.cpp loads as LLAMA_VOCAB_TYPE_NONE with vocab_size dummy tokens;
    callers feed token ids, never text.
Everything else (FP8 dequantization to Q8_0, FP4 experts repacked to MXFP4,
BF16/F32 kept, tid2eid to I32, MTP dropped) is llama.cpp's own code.

usage: python3 convert_synth.py LLAMA_CPP_DIR CHECKPOINT_DIR OUT.gguf
Needs what convert_hf_to_gguf.py imports: torch, numpy, safetensors,
transformers (PyPI), and llama.cpp's own gguf-py (LLAMA_CPP_DIR/gguf-py,
which knows MODEL_ARCH.DEEPSEEK4; PyPI gguf 0.19.0 does not).
Measured: 36 s for `tiny` on 2 busy cores.
"""
import json
import os
import sys
import tempfile


def hf_config(c):
    """dsv4q inference-style config -> the HF keys DeepseekV4Model reads."""
    n = c["n_layers"]
    rs = None
    if c.get("original_seq_len", 0):
        rs = {"type": "yarn", "rope_type": "yarn", "factor": c["rope_factor"],
              "original_max_position_embeddings": c["original_seq_len"],
              "beta_fast": c["beta_fast"], "beta_slow": c["beta_slow"]}
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "vocab_size": c["vocab_size"],
        "hidden_size": c["dim"],
        "num_hidden_layers": n,
        "num_attention_heads": c["n_heads"],
        "num_key_value_heads": 1,
        "head_dim": c["head_dim"],
        "qk_rope_head_dim": c["rope_head_dim"],
        "q_lora_rank": c["q_lora_rank"],
        "sliding_window": c["window_size"],
        "moe_intermediate_size": c["moe_inter_dim"],
        "n_routed_experts": c["n_routed_experts"],
        "num_experts_per_tok": c["n_activated_experts"],
        "n_shared_experts": c["n_shared_experts"],
        "routed_scaling_factor": c["route_scale"],
        "norm_topk_prob": True,
        "scoring_func": c["score_func"],
        "swiglu_limit": c["swiglu_limit"],
        "index_n_heads": c["index_n_heads"],
        "index_head_dim": c["index_head_dim"],
        "index_topk": c["index_topk"],
        "o_groups": c["o_groups"],
        "o_lora_rank": c["o_lora_rank"],
        "compress_ratios": c["compress_ratios"][:n],
        "compress_rope_theta": c["compress_rope_theta"],
        "hc_mult": c["hc_mult"],
        "hc_sinkhorn_iters": c["hc_sinkhorn_iters"],
        "hc_eps": c["hc_eps"],
        "num_hash_layers": c["n_hash_layers"],
        "num_nextn_predict_layers": 0,
        "rms_norm_eps": c["norm_eps"],
        "rope_theta": c["rope_theta"],
        "rope_scaling": rs,
        "max_position_embeddings": (c["original_seq_len"] * int(c["rope_factor"])) if rs else 4096,
        "torch_dtype": "bfloat16",
        "bos_token_id": 0,
        "eos_token_id": 1,
    }


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    llama_dir, ckpt, out = (os.path.abspath(a) for a in sys.argv[1:])
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    stage = tempfile.mkdtemp(prefix="dsv4q-hf-")
    with open(os.path.join(stage, "config.json"), "w") as f:
        json.dump(hf_config(cfg), f, indent=1)
    for name in os.listdir(ckpt):
        if name.endswith(".safetensors") or name.endswith(".index.json"):
            os.symlink(os.path.join(ckpt, name), os.path.join(stage, name))
    sys.path.insert(0, llama_dir)
    sys.path.insert(1, os.path.join(llama_dir, "gguf-py"))
    os.environ.pop("NO_LOCAL_GGUF", None)
    import convert_hf_to_gguf as conv          # llama.cpp's converter, as shipped
    from conversion.deepseek import DeepseekV4Model

    def set_vocab_none(self):
        self.gguf_writer.add_tokenizer_model("none")
        self.gguf_writer.add_vocab_size(self.hparams["vocab_size"])

    DeepseekV4Model.set_vocab = set_vocab_none
    sys.argv = ["convert_hf_to_gguf.py", stage, "--outfile", out]
    conv.main()


if __name__ == "__main__":
    main()
