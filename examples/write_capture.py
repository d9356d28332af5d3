#!/usr/bin/env python3
"""write_capture.py - how an engine outside C writes a dsv4q capture.

An engine that cannot be wrapped as a dsv4q backend plugin (a Metal engine
in Swift or Zig, a Python serving stack, one fused graph) can still be
qualified stage by stage: it dumps, for each call of a real run, the input
and output tensors of every stage it can, under the names of the stage
table (`dsv4q stages --model DIR --names`), into one safetensors file per
call with a few metadata strings (docs/captures.md). Then

    dsv4q replay --model DIR --capture THAT_FILE_OR_DIR

feeds each stage's captured inputs to the oracle and compares its outputs.

This script plays such an engine for ONE call. It takes the stage inputs
from a capture the oracle wrote (`dsv4q capture`; an engine would take them
from its own tensors), computes the `ffn_norm` stage of every layer itself
in float32 with numpy (RMSNorm, then the BF16 storage rounding the `source`
profile prescribes), and writes every tensor as float32 - the dtype this
"engine" keeps - together with the metadata a capture needs:

    dsv4q_capture_version  "1"
    checkpoint_sha256      sha256 of the checkpoint's config.json
    weights_sha256         sha256 of `sha256sum` over the weight files (optional)
    position, token_ids    where the call starts and its tokens
    engine, engine_version, profile

Needs: python3, numpy, safetensors (pip install numpy safetensors).

    python3 examples/write_capture.py --model DIR --from CAPDIR/call-0000.safetensors \
        --out /tmp/py-capture/call-0000.safetensors
    dsv4q replay --model DIR --capture /tmp/py-capture
"""
import argparse
import glob
import hashlib
import json
import os
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def checkpoint_pins(model_dir):
    """(checkpoint_sha256, weights_sha256) as docs/captures.md defines them."""
    config = sha256_file(os.path.join(model_dir, "config.json"))
    names = sorted(n for n in os.listdir(model_dir)
                   if n.endswith(".safetensors") or n.endswith(".index.json"))
    names.sort(key=lambda n: n.encode())            # byte order, like LC_ALL=C
    listing = "".join(f"{sha256_file(os.path.join(model_dir, n))}  {n}\n" for n in names)
    return config, hashlib.sha256(listing.encode()).hexdigest()


def model_tensor(model_dir, name):
    """One checkpoint tensor (F32 ones only: numpy has no BF16/FP8)."""
    for path in sorted(glob.glob(os.path.join(model_dir, "*.safetensors"))):
        with safe_open(path, "np") as f:
            if name in f.keys():
                return f.get_tensor(name)
    raise KeyError(name)


def bf16_round(x):
    """Round float32 to the nearest BF16 (ties to even), kept in float32."""
    u = x.astype(np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


def rmsnorm_f32(x, w, eps, bf16_out):
    """The engine's own ffn_norm: RMSNorm in float32 (model.py RMSNorm)."""
    x = x.astype(np.float32)
    inv = np.float32(1) / np.sqrt(np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32) + np.float32(eps))
    y = w.astype(np.float32) * (x * inv)
    return bf16_round(y) if bf16_out else y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint directory (config.json + safetensors)")
    ap.add_argument("--from", dest="src", required=True, help="one call file of a `dsv4q capture`")
    ap.add_argument("--out", required=True, help="the call file to write")
    ap.add_argument("--engine", default="example-python-numpy")
    a = ap.parse_args()

    cfg = json.load(open(os.path.join(a.model, "config.json")))
    eps = cfg.get("norm_eps", cfg.get("rms_norm_eps", 1e-6))
    with safe_open(a.src, "np") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    profile = meta["profile"]
    # norm_bf16 is on in the source profile only (docs/boundaries.md)
    bf16_norm = profile == "source" and "norm_bf16=off" not in meta.get("boundary", "")

    out = {}
    for name, t in tensors.items():
        out[name] = t.astype(np.float32)             # this engine keeps float32
    for layer in range(cfg["n_layers"]):
        x = f"L{layer}.ffn_norm.in"
        if x in tensors:                             # our own computation of the stage
            w = model_tensor(a.model, f"layers.{layer}.ffn_norm.weight")
            out[f"L{layer}.ffn_norm.out"] = rmsnorm_f32(tensors[x], w, eps, bf16_norm)

    config_sha, weights_sha = checkpoint_pins(a.model)
    metadata = {
        "dsv4q_capture_version": "1",
        "checkpoint_sha256": config_sha,
        "weights_sha256": weights_sha,
        "position": meta["position"],                # start position of this call
        "token_ids": meta["token_ids"],              # JSON list, e.g. "[5, 17, 3]"
        "engine": a.engine,
        "engine_version": f"numpy {np.__version__}",
        "profile": profile,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    save_file(out, a.out, metadata=metadata)
    print(f"wrote {a.out}: {len(out)} tensors, position {metadata['position']}, "
          f"{len(json.loads(metadata['token_ids']))} tokens, engine {a.engine}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
