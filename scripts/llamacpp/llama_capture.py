#!/usr/bin/env python3
"""llama_capture.py - run llama.cpp itself on a deepseek4 GGUF and write
what its graph computes, stage by stage, as a dsv4q capture
(docs/captures.md) that `dsv4q replay --model SAME.gguf` judges.

How: llama-cpp-python's ctypes API (llama_cpp.llama_cpp, the C API of
libllama) loads the GGUF, and the scheduler's eval callback (cb_eval in the
context params) is called with every named graph tensor as it is
computed; we copy the ones of the name map below (docs/llamacpp.md lists
it) with ggml_backend_tensor_get, so the same tool works on any backend
(CPU here; CUDA in scripts/llamacpp-gpu.sh). Calls: one prefill of the
prompt, then one decode call per teacher-forced token.

Name map (llama.cpp graph name "NAME-il" -> capture tensor), from
src/models/deepseek4.cpp build_arch_graph:
  hc_init                 -> model.embed.out, L0.hc_attn_pre.in, L0.hc_attn_post.in.X
  l_last-(l-1)            -> L{l}.hc_attn_pre.in, L{l}.hc_attn_post.in.X
  hc_attn_pre-l           -> L{l}.hc_attn_pre.out.y, L{l}.attn_norm.in
  hc_post-l / hc_comb-l   -> (1st of the layer) L{l}.hc_attn_pre.out.post/.comb = hc_attn_post.in.post/.comb
                             (2nd of the layer) L{l}.hc_ffn_pre.out.post/.comb = hc_ffn_post.in.post/.comb
  attn_norm-l             -> L{l}.attn_norm.out, L{l}.attn.in
  attn_out-l              -> L{l}.attn.out, L{l}.hc_attn_post.in.x
  hc_attn_post-l          -> L{l}.hc_attn_post.out, L{l}.hc_ffn_pre.in, L{l}.hc_ffn_post.in.X
  hc_ffn_pre-l            -> L{l}.hc_ffn_pre.out.y, L{l}.ffn_norm.in
  ffn_norm-l              -> L{l}.ffn_norm.out, L{l}.moe.in
  ffn_out-l               -> L{l}.moe.out (routed + shared), L{l}.hc_ffn_post.in.x
  l_last-l                -> L{l}.hc_ffn_post.out (last layer, last token: model.head.in)
  result_output           -> model.head.out (last token)
ggml stores [ne0, ne1, ...] with ne0 contiguous; numpy's C order reverses
it, so [n_embd, hc, tokens] is exactly the capture's [tokens, hc, dim].

usage: python3 llama_capture.py MODEL.gguf OUT_DIR [--prompt-len N | --tokens IDS] [--decode M]
         [--seed S] [--threads T] [--kv f32|f16] [--flash-attn auto|on|off] [--gpu-layers N]
--tokens IDS: comma-separated token ids (e.g. 17,4,900,3,3), instead of the
seeded synthetic prompt: the first len(IDS) - M are the prompt (one call),
each of the last M one teacher-forced decode call. Every id must be below
the model's vocabulary; --tokens excludes --prompt-len and --seed.
env: LLAMA_CPP_LIB_PATH = the directory of libllama.so / libggml*.so;
     PYTHONPATH must reach the llama_cpp package (llama-cpp-python).
"""
import argparse
import ctypes
import hashlib
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file

L = None   # llama_cpp.llama_cpp, imported by main() once the arguments are valid

GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1
ENGINE_VERSION = "llama.cpp 0c1e570 (llama-cpp-python 0.3.36)"


class GgmlTensor(ctypes.Structure):
    """The stable prefix of ggml.h struct ggml_tensor (type, buffer, ne, nb)."""
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
                ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4)]


def load_ggml():
    d = os.environ.get("LLAMA_CPP_LIB_PATH", "")
    g = ctypes.CDLL(os.path.join(d, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    g.ggml_get_name.restype = ctypes.c_char_p
    g.ggml_get_name.argtypes = [ctypes.c_void_p]
    g.ggml_nbytes.restype = ctypes.c_size_t
    g.ggml_nbytes.argtypes = [ctypes.c_void_p]
    g.ggml_is_contiguous.restype = ctypes.c_bool
    g.ggml_is_contiguous.argtypes = [ctypes.c_void_p]
    g.ggml_backend_tensor_get.restype = None
    g.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    return g, g


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_tokens(text, decode):
    """--tokens "a,b,c" -> [a, b, c]; SystemExit (exit 2) naming the bad element or count."""
    ids = []
    for i, w in enumerate(text.split(",")):
        w = w.strip()
        if not w.isdigit():
            print(f"llama_capture: --tokens: element {i} is '{w}', expected a non-negative integer token id",
                  file=sys.stderr)
            sys.exit(2)
        ids.append(int(w))
    if len(ids) <= decode:
        print(f"llama_capture: --tokens: {len(ids)} ids, but --decode {decode} needs at least {decode + 1} "
              "(a prompt of one or more, then one id per decode call)", file=sys.stderr)
        sys.exit(2)
    return ids


def synth_tokens(seed, n, vocab):
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(0, vocab, size=n)]


class Grabber:
    """The eval callback: keeps a copy of every tensor whose name we map."""

    def __init__(self, ggml, n_layers, extra=()):
        self.g, self.gb = ggml
        self.want = {"hc_init", "result_output"} | set(extra)
        for l in range(n_layers):
            for n in ("hc_attn_pre", "hc_post", "hc_comb", "attn_norm", "attn_out", "hc_attn_post", "hc_ffn_pre",
                      "ffn_norm", "ffn_out", "l_last"):
                self.want.add(f"{n}-{l}")
        self.got = {}
        self.cb = L.ggml_backend_sched_eval_callback(self._cb)

    def _cb(self, t, ask, _ud):
        name = self.g.ggml_get_name(t).decode()
        if name not in self.want:
            return False if ask else True
        if ask:
            return True
        ti = ctypes.cast(t, ctypes.POINTER(GgmlTensor)).contents
        if ti.type != GGML_TYPE_F32 or not self.g.ggml_is_contiguous(t):
            raise SystemExit(f"llama_capture: graph tensor {name} is type {ti.type} / non-contiguous; "
                             "the name map expects contiguous F32")
        ne = [ti.ne[i] for i in range(4)]
        buf = np.empty(int(np.prod(ne)), dtype=np.float32)
        self.gb.ggml_backend_tensor_get(t, buf.ctypes.data, 0, buf.nbytes)
        shape = [d for d in reversed(ne)]
        while len(shape) > 1 and shape[0] == 1:
            shape = shape[1:]
        self.got.setdefault(name, []).append(buf.reshape(shape).copy())
        return True


def stage_tensors(got, nl, s, vocab):
    """The llama.cpp graph tensors of one call -> capture tensors."""
    def one(name):
        v = got.get(name)
        if not v:
            raise SystemExit(f"llama_capture: graph tensor '{name}' was not seen in this call")
        return v

    out = {}
    hc_init = one("hc_init")[0].reshape(s, -1, got["hc_init"][0].shape[-1])
    out["model.embed.out"] = hc_init
    X = hc_init
    for l in range(nl):
        post, comb = one(f"hc_post-{l}"), one(f"hc_comb-{l}")
        if len(post) != 2 or len(comb) != 2:
            raise SystemExit(f"llama_capture: layer {l}: expected 2 hc_post and 2 hc_comb tensors, saw "
                             f"{len(post)} and {len(comb)}")
        pa, pf = (p.reshape(s, -1) for p in post)
        ca, cf = (c.reshape(s, pa.shape[1], pa.shape[1]) for c in comb)
        y = one(f"hc_attn_pre-{l}")[0].reshape(s, -1)
        an = one(f"attn_norm-{l}")[0].reshape(s, -1)
        ao = one(f"attn_out-{l}")[0].reshape(s, -1)
        Xa = one(f"hc_attn_post-{l}")[0].reshape(X.shape)
        yf = one(f"hc_ffn_pre-{l}")[0].reshape(s, -1)
        fn = one(f"ffn_norm-{l}")[0].reshape(s, -1)
        fo = one(f"ffn_out-{l}")[0].reshape(s, -1)
        Xf = one(f"l_last-{l}")[0].reshape(X.shape)
        P = f"L{l}."
        out.update({
            P + "hc_attn_pre.in": X, P + "hc_attn_pre.out.y": y, P + "hc_attn_pre.out.post": pa,
            P + "hc_attn_pre.out.comb": ca,
            P + "attn_norm.in": y, P + "attn_norm.out": an, P + "attn.in": an, P + "attn.out": ao,
            P + "hc_attn_post.in.x": ao, P + "hc_attn_post.in.X": X, P + "hc_attn_post.in.post": pa,
            P + "hc_attn_post.in.comb": ca, P + "hc_attn_post.out": Xa,
            P + "hc_ffn_pre.in": Xa, P + "hc_ffn_pre.out.y": yf, P + "hc_ffn_pre.out.post": pf,
            P + "hc_ffn_pre.out.comb": cf,
            P + "ffn_norm.in": yf, P + "ffn_norm.out": fn, P + "moe.in": fn, P + "moe.out": fo,
            P + "hc_ffn_post.in.x": fo, P + "hc_ffn_post.in.X": Xa, P + "hc_ffn_post.in.post": pf,
            P + "hc_ffn_post.in.comb": cf, P + "hc_ffn_post.out": Xf,
        })
        X = Xf
    out["model.head.in"] = X[-1]
    logits = one("result_output")[0].reshape(-1, vocab)
    out["model.head.out"] = logits[-1]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--prompt-len", type=int, default=None)
    ap.add_argument("--tokens", default=None, help="comma-separated token ids: prompt, then the --decode ones")
    ap.add_argument("--decode", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", choices=("f32", "f16"), default="f32")
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--flash-attn", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--extra", default="", help="comma-separated graph names (e.g. q-0,kv-0) also written, "
                    "raw, to OUT/extra-NNNN.safetensors (debugging; not part of the capture)")
    a = ap.parse_args()
    extra = [x for x in a.extra.split(",") if x]
    if a.decode < 0:
        ap.error("--decode must be >= 0")
    given = None
    if a.tokens is not None:
        if a.prompt_len is not None or a.seed is not None:
            ap.error("--tokens excludes --prompt-len and --seed (the ids are the prompt and the decode tokens)")
        given = parse_tokens(a.tokens, a.decode)
        a.prompt_len = len(given) - a.decode
    else:
        a.prompt_len = 12 if a.prompt_len is None else a.prompt_len
        a.seed = 1 if a.seed is None else a.seed
    global L
    import llama_cpp.llama_cpp as L

    ggml = load_ggml()
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = a.gpu_layers
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    if not model:
        raise SystemExit(f"llama_capture: llama.cpp could not load {a.model} (see its log above)")
    vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    nl = L.llama_model_n_layer(model)
    total = a.prompt_len + a.decode
    grab = Grabber(ggml, nl, extra)
    cp = L.llama_context_default_params()
    cp.n_ctx = max(64, total + 8)
    cp.n_batch = cp.n_ubatch = max(a.prompt_len, 1)
    cp.n_seq_max = 1
    cp.n_threads = cp.n_threads_batch = a.threads
    cp.type_k = cp.type_v = GGML_TYPE_F32 if a.kv == "f32" else GGML_TYPE_F16
    cp.flash_attn_type = {"auto": -1, "off": 0, "on": 1}[a.flash_attn]
    cp.cb_eval = grab.cb
    cp.cb_eval_user_data = None
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise SystemExit("llama_capture: llama_init_from_model failed (see its log above)")

    toks = given if given is not None else synth_tokens(a.seed, total, vocab)
    bad = [(i, t) for i, t in enumerate(toks) if t >= vocab]
    if bad:
        raise SystemExit(f"llama_capture: --tokens: element {bad[0][0]} is {bad[0][1]}, not below the vocabulary "
                         f"of {a.model} ({vocab} tokens)")
    os.makedirs(a.out, exist_ok=True)
    ck = sha256_file(a.model)
    listing = f"{ck}  {os.path.basename(a.model)}\n"
    meta_base = {"dsv4q_capture_version": "1", "checkpoint_sha256": ck,
                 "weights_sha256": hashlib.sha256(listing.encode()).hexdigest(),
                 "engine": "llama.cpp", "engine_version": ENGINE_VERSION, "profile": "exact",
                 "llamacpp_kv_type": a.kv, "llamacpp_flash_attn": a.flash_attn, "llamacpp_threads": str(a.threads)}
    calls = [(0, toks[:a.prompt_len])] + [(a.prompt_len + i, [toks[a.prompt_len + i]]) for i in range(a.decode)]
    for ci, (pos, ids) in enumerate(calls):
        grab.got = {}
        b = L.llama_batch_init(len(ids), 0, 1)
        for i, t in enumerate(ids):
            b.token[i] = t
            b.pos[i] = pos + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(ids) - 1 else 0
        b.n_tokens = len(ids)
        rc = L.llama_decode(ctx, b)
        L.llama_batch_free(b)
        if rc != 0:
            raise SystemExit(f"llama_capture: llama_decode returned {rc} at position {pos}")
        tens = stage_tensors(grab.got, nl, len(ids), vocab)
        meta = dict(meta_base, position=str(pos), token_ids=json.dumps(ids))
        save_file(tens, os.path.join(a.out, f"call-{ci:04d}.safetensors"), metadata=meta)
        if extra:
            ex = {f"{n}.{k}": np.ascontiguousarray(v) for n in extra for k, v in enumerate(grab.got.get(n, []))}
            save_file(ex, os.path.join(a.out, f"extra-{ci:04d}.safetensors.dbg"))
    L.llama_free(ctx)
    L.llama_model_free(model)
    print(f"llama_capture: {len(calls)} calls ({a.prompt_len} prompt + {a.decode} decode tokens), "
          f"{len(tens)} tensors per call -> {a.out}")


if __name__ == "__main__":
    main()
