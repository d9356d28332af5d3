#!/usr/bin/env python3
"""llamacpp_e2e.py - llama.cpp (CPU) qualified end to end by dsv4q on
identical weights: llama.cpp runs, its graph tensors become a capture
(scripts/llamacpp/llama_capture.py), `dsv4q replay` judges every stage on
llama.cpp's own inputs and the logits against the fp64 oracle.

Needs build/llamacpp/env.sh from scripts/llamacpp/build.sh (run_all.sh
skips this test without it) and python3 with numpy, gguf, safetensors,
jinja2, diskcache (llama-cpp-python's imports).

Runs (docs/llamacpp.md has the tables and why each expectation holds):
 A. `dsv4q synth --config tiny-bf16` widened to an F32 GGUF
    (scripts/st2gguf.py --f32), F32 KV cache, flash attention off: llama.cpp
    adds no rounding of its own, so the whole-model logits must pass the
    gate (NRMS within the fp32 sensitivity floor's bound) with greedy
    agreement, and every stage's NRMS must pass. ULP outliers are reported
    (a finding, docs/llamacpp.md), not failed.
 B. tests/data/llamacpp/tiny-llamacpp.gguf (llama.cpp's converter: Q8_0 +
    MXFP4), llama.cpp defaults (flash attention auto) with F32 KV: every
    stage is captured and compared; the stages without a quantized matmul
    (norms, hc_post, embed) pass; attn / moe / logits sit at the level of
    llama.cpp's Q8_0 activation quantization (NRMS < 5e-2), greedy agrees.
 C. the same GGUF re-quantized by llama_model_quantize to Q4_K_M: replays
    (all stages compared, decoders incl. the Q5_0 fallback); IQ2_XXS is
    refused by llama.cpp without an importance matrix.
 D. the same GGUF quantized by llama_model_quantize to Q3_K_S, Q3_K_M,
    IQ4_NL, IQ4_XS, TQ1_0 and TQ2_0 (types dsv4q refused before issue 28):
    every quantized tensor decodes (`dsv4q weight`) bit for bit as gguf-py.
Exit 0 when every expectation holds.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "dsv4q")
TOOLS = os.path.join(ROOT, "scripts", "llamacpp")


def env():
    e = dict(os.environ)
    for line in open(os.path.join(ROOT, "build", "llamacpp", "env.sh")):
        m = re.match(r'export (\w+)="([^"]*)"', line.strip())
        if m:
            e[m.group(1)] = m.group(2).replace("${PYTHONPATH:+:$PYTHONPATH}", "")
    e["DSV4Q"] = BIN
    return e


def qualify(model, out, *opts):
    r = subprocess.run(["bash", os.path.join(TOOLS, "qualify.sh"), model, out, "--prompt-len", "12", "--decode",
                        "4", *opts], env=env(), capture_output=True, text=True)
    print(r.stdout.strip())
    if r.returncode == 2 or not os.path.exists(os.path.join(out, "replay.json")):
        print(r.stderr[-2000:])
        return None
    return json.load(open(os.path.join(out, "replay.json")))


def stages(j, pat):
    return [s for s in j["stages"] if re.search(pat, s["stage"])]


def check(cond, what, fails):
    print(("  ok    " if cond else "  FAIL  ") + what)
    if not cond:
        fails.append(what)


# llama.cpp file types whose base type dsv4q once refused (issue 28); the
# names are gguf-py's LlamaFileType members (MOSTLY_<name>), and each file
# must hold at least one tensor of the type the name says.
NEW_FTYPES = {"Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS", "TQ1_0": "TQ1_0",
              "TQ2_0": "TQ2_0"}


def decode_quantized(conv, tmp, e, fails):
    """D: each NEW_FTYPES file from llama_model_quantize; every tensor of a
    quantized type decodes (dsv4q weight) bit for bit as gguf-py's numpy
    dequantizer reads it."""
    import numpy as np
    from gguf import GGUFReader, GGMLQuantizationType, quants
    from gguf.constants import LlamaFileType
    sys.path.insert(0, TOOLS)
    import quantize
    plain = {GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16, GGMLQuantizationType.I32}
    print("D. llama_model_quantize to the types dsv4q decodes since issue 28")
    for ft, base in NEW_FTYPES.items():
        check(quantize.FTYPES.get(ft) == LlamaFileType["MOSTLY_" + ft].value,
              f"D: quantize.py {ft} = gguf-py LlamaFileType.MOSTLY_{ft}", fails)
        out = os.path.join(tmp, f"tiny-{ft}.gguf")
        r = subprocess.run([sys.executable, os.path.join(TOOLS, "quantize.py"), conv, out, ft], env=e,
                           capture_output=True, text=True)
        if r.returncode != 0:
            check(False, f"D: {ft} quantized ({(r.stdout + r.stderr).strip()[-300:]})", fails)
            continue
        rd = GGUFReader(out)
        n, diff, types = 0, [], {}
        for t in rd.tensors:
            if t.tensor_type in plain:
                continue
            types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
            want = quants.dequantize(t.data, t.tensor_type).astype(np.float32).ravel()
            raw = os.path.join(tmp, "w.f32")
            w = subprocess.run([BIN, "weight", "--model", out, "--tensor", t.name, "--width", "f32", "--out", raw],
                               capture_output=True, text=True)
            got = np.fromfile(raw, dtype="<f4") if w.returncode == 0 else None
            n += 1
            if got is None or got.shape != want.shape or not np.array_equal(got.view("<u4"), want.view("<u4")):
                diff.append(f"{t.name} ({t.tensor_type.name}): " + (w.stderr.strip()[-200:] if got is None else
                            f"{int(np.sum(got.view('<u4') != want.view('<u4')))} values differ"
                            if got.shape == want.shape else f"shape {got.shape} vs {want.shape}"))
        check(types.get(base, 0) > 0 and not diff,
              f"D: {ft}: {n} quantized tensors ({', '.join(f'{k} {v}' for k, v in sorted(types.items()))}) "
              f"decode as gguf-py's dequantizer {'bit for bit' if not diff else diff[:3]}", fails)


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="dsv4q-llamacpp-") as tmp:
        # A. F32 weights, no added rounding
        st = os.path.join(tmp, "tiny-bf16")
        subprocess.run([BIN, "synth", "--config", "tiny-bf16", "--out", st], check=True, capture_output=True)
        g32 = os.path.join(tmp, "tiny-f32.gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "st2gguf.py"), st, g32, "--f32"], check=True)
        print("A. F32 GGUF, F32 KV, flash attention off")
        j = qualify(g32, os.path.join(tmp, "A"), "--kv", "f32", "--flash-attn", "off")
        check(j is not None, "A: llama.cpp ran and the capture replayed", fails)
        if j:
            w = j["whole_model"]
            check(j["pass"] + j["fail"] == 42 and not j["not_checkable"], "A: all 42 stages compared", fails)
            check(w and w["verdict"] == "pass",
                  f"A: whole-model logits pass (NRMS {w['logit_nrms']:.3e}, fp32 level {w['logit_nrms_level']:.3e})",
                  fails)
            bad = [s["stage"] for s in j["stages"] if not s["metrics"]["nrms"]["pass"]]
            check(not bad, f"A: every stage's NRMS within its bound {bad if bad else ''}", fails)
            ulp = [f"{s['stage']} ulp_max {s['metrics']['ulp_max']['value']:.3g} > {s['metrics']['ulp_max']['bound']:.3g}"
                   for s in j["stages"] if "ulp_max" in s["metrics"] and not s["metrics"]["ulp_max"]["pass"]]
            print("  note  ULP outliers (finding, not failed):", "; ".join(ulp) if ulp else "none")
        # B. llama.cpp's own converter output
        conv = os.path.join(ROOT, "tests", "data", "llamacpp", "tiny-llamacpp.gguf")
        print("B. llama.cpp-converted GGUF (Q8_0 + MXFP4), llama.cpp defaults, F32 KV")
        j = qualify(conv, os.path.join(tmp, "B"), "--kv", "f32")
        check(j is not None, "B: llama.cpp ran and the capture replayed", fails)
        if j:
            w = j["whole_model"]
            check(j["pass"] + j["fail"] == 42 and not j["not_checkable"], "B: all 42 stages compared", fails)
            exact = stages(j, r"(norm|hc_attn_post|hc_ffn_post|hc_attn_pre|hc_ffn_pre|embed|head)$")
            check(all(s["verdict"] == "pass" for s in exact),
                  f"B: the {len(exact)} stages without a quantized matmul pass", fails)
            q = stages(j, r"\.(attn|moe)$")
            worst = max(s["metrics"]["nrms"]["value"] for s in q)
            check(worst < 5e-2, f"B: attn/moe NRMS at the Q8_0-activation level (worst {worst:.3e} < 5e-2)", fails)
            check(w and w["logit_nrms"] < 5e-2 and w["greedy_agree"] == w["rows"],
                  f"B: logits NRMS {w['logit_nrms']:.3e} < 5e-2, greedy {w['greedy_agree']}/{w['rows']}", fails)
        # C. llama_model_quantize
        print("C. llama_model_quantize: Q4_K_M, IQ2_XXS")
        e = env()
        q4 = os.path.join(tmp, "tiny-Q4_K_M.gguf")
        r = subprocess.run([sys.executable, os.path.join(TOOLS, "quantize.py"), conv, q4, "Q4_K_M"], env=e,
                           capture_output=True, text=True)
        check(r.returncode == 0, "C: Q4_K_M quantized", fails)
        if r.returncode == 0:
            j = qualify(q4, os.path.join(tmp, "C"), "--kv", "f32")
            check(j is not None and j["pass"] + j["fail"] == 42 and j["whole_model"]["greedy_agree"] ==
                  j["whole_model"]["rows"], "C: Q4_K_M replays, 42 stages, greedy agrees", fails)
        r = subprocess.run([sys.executable, os.path.join(TOOLS, "quantize.py"), conv, os.path.join(tmp, "iq2.gguf"),
                            "IQ2_XXS"], env=e, capture_output=True, text=True)
        check(r.returncode != 0 and "importance matrix" in (r.stdout + r.stderr),
              "C: IQ2_XXS refused by llama.cpp without an importance matrix", fails)
        # D. the types issue 28 found refused, written by llama.cpp's quantizer
        decode_quantized(conv, tmp, e, fails)
    print("llamacpp_e2e:", "ok" if not fails else f"FAILED ({len(fails)})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
