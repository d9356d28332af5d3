"""Test helpers: a small PyTorch port of DeepSeek V4 decoder blocks, and the
two engines' dump writers reproduced exactly as their sources write files,
so the importer tests read dumps in the real formats.

Dump writers (file layout only; no engine code is copied):
  SGLangDumper  sglang/srt/debug_utils/dumper.py, non-intrusive mode "all":
      forward pre-hooks dump each positional tensor argument as
      ``non_intrusive__MODULE.inputs.I`` and keyword ones as ``.inputs.NAME``,
      forward hooks the output as ``.output``; the input_ids / positions core
      fields under their own names; file
      ``DIR/EXP/step=S___rank=0___dump_index=K___name=N___recompute_status=disabled[___layer_id=L].pt``
      holding ``{"value": tensor, "meta": {...}}``; ``step()`` ends a call.
  VLLMLogger    vllm/v1/intermediates/intermediates_logging.py: per step
      ``RUN/step_N/MODULE/inputs_I_cpu.pt`` for the positional tensor inputs
      and ``outputs_cpu.pt`` (bare torch.save of each tensor).

The port (V4Port) runs the decoder layers of a checkpoint on the hc streams
a dsv4q capture recorded for layer 0: hc_pre (Sinkhorn) and hc_post in
torch FP32 with the BF16 storage of the `source` profile, the two RMSNorms
as modules; attention and MoE are stand-in modules that return the
capture's own outputs for that layer and call (the port does not
reimplement them: replay judges those stages on the tensors the "engine"
dumped, which is all an importer test needs). Module names follow the
engine: SGLang's DeepseekV4DecoderLayer (input_layernorm, self_attn,
post_attention_layernorm, mlp) or vLLM's (attn_norm, attn, ffn with the
ffn norm folded into it).
"""
import json
from pathlib import Path

import torch
from safetensors import safe_open


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


class RMSNorm(torch.nn.Module):
    """model.py RMSNorm in FP32, output stored in BF16 (norm_bf16).
    defect="gemma": the weight applied as (1 + w), a real porting bug."""

    def __init__(self, w, eps, defect=None):
        super().__init__()
        self.w, self.eps, self.defect = w, eps, defect

    def forward(self, x):
        x = x.float()
        y = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps)
        w = (1 + self.w) if self.defect == "gemma" else self.w
        return bf16(w * y)


class Replay(torch.nn.Module):
    """Stand-in for a kernel the port does not reimplement: returns the
    capture's output tensor `name` of the current call."""

    def __init__(self, port, name, norm=None):
        super().__init__()
        object.__setattr__(self, "port", port)   # not a child module (no cycle)
        self.name, self.norm = name, norm

    def forward(self, *args, **kwargs):
        if self.norm is not None:   # vLLM's ffn: the norm is folded in
            self.norm(args[0])
        return self.port.cap[self.name].float().clone()


def hc_pre(X, fn, scale, base, norm_eps, hc_eps, iters):
    s, hc, d = X.shape
    x = X.reshape(s, hc * d).float()
    mixes = (x @ fn.T) * torch.rsqrt(x.square().mean(-1, keepdim=True) + norm_eps)
    pre = torch.sigmoid(mixes[:, :hc] * scale[0] + base[:hc]) + hc_eps
    post = 2 * torch.sigmoid(mixes[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    comb = torch.softmax((mixes[:, 2 * hc:] * scale[2] + base[2 * hc:]).reshape(s, hc, hc), -1) + hc_eps
    comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + hc_eps)
        comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)
    return bf16((pre[:, :, None] * X.float()).sum(1)), post, comb


def hc_post(x, X, post, comb):
    return bf16(post[:, :, None] * x[:, None, :] + torch.einsum("sjk,sjd->skd", comb, X.float()))


class Layer(torch.nn.Module):
    def __init__(self, port, l, engine, defect):
        super().__init__()
        W, cfg = port.weights, port.cfg
        self.l, self.engine = l, engine
        object.__setattr__(self, "port", port)
        an = RMSNorm(W["layers.%d.attn_norm.weight" % l], cfg["norm_eps"])
        fn = RMSNorm(W["layers.%d.ffn_norm.weight" % l], cfg["norm_eps"], defect)
        if engine == "sglang":
            self.input_layernorm, self.post_attention_layernorm = an, fn
            self.self_attn = Replay(port, "L%d.attn.out" % l)
            self.mlp = Replay(port, "L%d.moe.out" % l)
        else:
            self.attn_norm = an
            self.attn = Replay(port, "L%d.attn.out" % l)
            self.ffn = Replay(port, "L%d.moe.out" % l, norm=fn)

    def hc(self, kind, X):
        W, c = self.port.weights, self.port.cfg
        p = "layers.%d.hc_%s_" % (self.l, kind)
        return hc_pre(X, W[p + "fn"], W[p + "scale"], W[p + "base"], c["norm_eps"], c["hc_eps"],
                      c["hc_sinkhorn_iters"])

    def forward(self, X, positions, input_ids):
        y, post, comb = self.hc("attn", X)
        if self.engine == "sglang":
            a = self.self_attn(x=self.input_layernorm(y), positions=positions)
        else:
            a = self.attn(positions, self.attn_norm(y), None)
        X2 = hc_post(a, X, post, comb)
        y, post, comb = self.hc("ffn", X2)
        if self.engine == "sglang":
            m = self.mlp(self.post_attention_layernorm(y), input_ids=input_ids)
        else:
            m = self.ffn(y, input_ids)
        return hc_post(m, X2, post, comb)


class Model(torch.nn.Module):
    def __init__(self, port, engine, defect):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer(port, l, engine, defect) for l in range(port.cfg["n_layers"]))

    def forward(self, X, positions, input_ids):
        for layer in self.layers:
            X = layer(X, positions, input_ids)
        return X


class V4Port(torch.nn.Module):
    """Root module; ``model`` holds the layers (so module names start with
    ``model.layers.N``, as in both engines)."""

    def __init__(self, ckpt, engine, defect=None):
        super().__init__()
        self.cfg = json.loads((Path(ckpt) / "config.json").read_text())
        self.weights = {}
        for f in sorted(Path(ckpt).glob("*.safetensors")):
            with safe_open(str(f), "pt") as s:
                for k in s.keys():
                    if k.startswith("layers.") and ("norm.weight" in k or ".hc_" in k) and ".attn." not in k:
                        self.weights[k] = s.get_tensor(k).float()
        self.model = Model(self, engine, defect)
        self.cap = {}

    def run_call(self, cap_file):
        with safe_open(str(cap_file), "pt") as s:
            self.cap = {k: s.get_tensor(k) for k in s.keys()}
            meta = s.metadata()
        ids = torch.tensor(json.loads(meta["token_ids"]), dtype=torch.int64)
        pos = torch.arange(len(ids), dtype=torch.int64) + int(meta["position"])
        return ids, pos, self.cap["L0.hc_attn_pre.in"].float()


class SGLangDumper:
    def __init__(self, root, model):
        self.dir = Path(root) / "dump_1700000000.0"
        self.step_i, self.index, self.ctx = 0, 0, {}
        for name, mod in model.named_modules():
            if not name:
                continue
            if name.count(".") == 2 and name.startswith("model.layers."):
                mod.register_forward_pre_hook(self._enter(int(name.split(".")[2])))
                mod.register_forward_hook(self._leave)
            mod.register_forward_pre_hook(self._pre(name), with_kwargs=True)
            mod.register_forward_hook(self._post(name))

    def _enter(self, layer):   # the dumper's layer_id context (set_ctx)
        def hook(mod, args):
            self.ctx["layer_id"] = layer
        return hook

    def _leave(self, mod, args, out):
        self.ctx.pop("layer_id", None)

    def dump(self, name, value):
        self.index += 1
        tags = dict(step=self.step_i, rank=0, dump_index=self.index, name=name, recompute_status="disabled", **self.ctx)
        path = self.dir / ("___".join("%s=%s" % kv for kv in tags.items()) + ".pt")
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"value": value, "meta": dict(tags, world_rank=0, world_size=1)}, str(path))

    def _pre(self, name):
        def hook(mod, args, kwargs):
            for i, a in enumerate(args):
                if isinstance(a, torch.Tensor):
                    self.dump("non_intrusive__%s.inputs.%d" % (name, i), a)
            for k, a in kwargs.items():
                if isinstance(a, torch.Tensor):
                    self.dump("non_intrusive__%s.inputs.%s" % (name, k), a)
        return hook

    def _post(self, name):
        def hook(mod, args, out):
            if isinstance(out, torch.Tensor):
                self.dump("non_intrusive__%s.output" % name, out)
        return hook

    def step(self):
        self.step_i += 1


class VLLMLogger:
    def __init__(self, root, model):
        self.dir = Path(root) / "010fed05-4a36-4c19-ab44-7cd67e3f63ce"
        self.step_i = 0
        for name, mod in model.named_modules():
            if name:
                mod.register_forward_pre_hook(self._pre(name))
                mod.register_forward_hook(self._post(name))

    def _save(self, t, base):
        if isinstance(t, torch.Tensor):
            base.parent.mkdir(parents=True, exist_ok=True)
            torch.save(t, "%s_%s.pt" % (base, str(t.device).replace(":", "_")))
        elif isinstance(t, (list, tuple)):
            for i, x in enumerate(t):
                self._save(x, Path("%s_%d" % (base, i)))

    def _pre(self, name):
        return lambda mod, args: self._save(args, self.dir / ("step_%d" % self.step_i) / name / "inputs")

    def _post(self, name):
        return lambda mod, args, out: self._save(out, self.dir / ("step_%d" % self.step_i) / name / "outputs")

    def step(self):
        self.step_i += 1


def write_dump(engine, ckpt, capture_dir, out_root, defect=None):
    """Run the port over every call of an oracle capture under the engine's
    dump writer; returns the dump directory the importer reads."""
    port = V4Port(ckpt, engine, defect)
    w = SGLangDumper(out_root, port) if engine == "sglang" else VLLMLogger(out_root, port)
    with torch.no_grad():
        for f in sorted(Path(capture_dir).glob("call-*.safetensors")):
            ids, pos, X = port.run_call(f)
            if engine == "sglang":
                w.dump("input_ids", ids)
                w.dump("positions", pos)
            else:
                w._save((ids,), w.dir / ("step_%d" % w.step_i) / "model.embed_tokens" / "inputs")
            port.model(X, pos, ids)
            w.step()
    return w.dir
