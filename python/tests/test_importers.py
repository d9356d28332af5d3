"""Importers end to end: a PyTorch port of the V4 decoder blocks
(engine_dumps.py) runs under each engine's dump writer (the exact file
formats of SGLang's dumper and vLLM's intermediate logging), the importer
turns the dump into a dsv4q capture with the built-in name map, and
`dsv4q replay` (the C binary: an independent reader of the capture)
qualifies it stage by stage.

Expected verdicts, from what each engine's modules expose:
  sglang  attn_norm, attn, ffn_norm, moe compared on every layer and pass;
          the hc stages are not captured (hc_pre/hc_post are not modules).
  vllm    attn_norm and attn compared and pass; ffn_norm has no output and
          moe no input (the norm is folded into the router gate): both
          "not checkable", listed, not failed.
  defect  the port's ffn norm applies (1 + w) (a Gemma-style weight offset
          ported by mistake): exactly the ffn_norm stages fail.

Refusals: a misspelled module is an error naming the closest known name (it
used to vanish into a catch-all ignore and replay passed with a stage
fewer); a capture imported for one checkpoint's weights is refused by replay
on other weights; without torch the importer says how to install it. The
name matching and the torch message are tested without torch.
"""
import json
import shutil
import subprocess
import sys

import pytest

from conftest import run


@pytest.fixture(scope="module")
def capture(tiny, dsv4q_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("cap") / "cap"
    r = run([dsv4q_bin, "capture", "--model", str(tiny), "--prompt-len", "6", "--decode", "1", "--out", str(d)])
    assert r.returncode == 0, r.stderr
    return d


def import_and_replay(engine, tiny, capture, tmp_path, dsv4q_bin, torch, defect=None):
    import engine_dumps
    from dsv4q.importers.__main__ import main
    dump = engine_dumps.write_dump(engine, tiny, capture, tmp_path / "dump", defect=defect)
    out = tmp_path / "imported"
    assert main([engine, str(dump), "--model", str(tiny), "--out", str(out), "--engine-version", "port"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["call-0000.safetensors", "call-0001.safetensors"]
    js = tmp_path / "replay.json"
    r = run([dsv4q_bin, "replay", "--model", str(tiny), "--capture", str(out), "--no-model", "--json", str(js),
             "--db", str(tmp_path / "r.db"), "-q"])
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r.returncode, json.loads(js.read_text())


def verdicts(rep):
    return {s["stage"]: s["verdict"] for s in rep["stages"]}


def test_sglang_dump_replays_stage_by_stage(tiny, capture, tmp_path, dsv4q_bin, torch):
    rc, rep = import_and_replay("sglang", tiny, capture, tmp_path, dsv4q_bin, torch)
    v = verdicts(rep)
    for l in range(5):
        for st in ("attn_norm", "attn", "ffn_norm", "moe"):
            assert v["L%d.%s" % (l, st)] == "pass", (st, l, rep)
    assert rc == 0 and rep["engine"] == "sglang" and rep["fail"] == 0
    assert "L0.hc_attn_pre" in rep["not_captured"] and rep["not_checkable"] == 0


def test_vllm_dump_replays_what_it_exposes(tiny, capture, tmp_path, dsv4q_bin, torch):
    rc, rep = import_and_replay("vllm", tiny, capture, tmp_path, dsv4q_bin, torch)
    v = verdicts(rep)
    for l in range(5):
        assert v["L%d.attn_norm" % l] == "pass" and v["L%d.attn" % l] == "pass"
    assert rc == 0 and rep["engine"] == "vllm"
    assert rep["not_checkable"] == 10
    why = {s["stage"]: s.get("why", "") for s in rep["stages"]}
    assert v["L0.ffn_norm"] == "not checkable" and "no output captured (L0.ffn_norm.out" in why["L0.ffn_norm"]
    assert v["L0.moe"] == "not checkable" and "missing input L0.moe.in" in why["L0.moe"]


def test_defective_port_fails_exactly_its_stage(tiny, capture, tmp_path, dsv4q_bin, torch):
    rc, rep = import_and_replay("sglang", tiny, capture, tmp_path, dsv4q_bin, torch, defect="gemma")
    v = verdicts(rep)
    assert rc == 1
    for l in range(5):
        assert v["L%d.ffn_norm" % l] == "FAIL" and v["L%d.attn_norm" % l] == "pass"


def test_importer_errors_name_the_file(tmp_path, tiny, torch):
    from dsv4q.importers.__main__ import main
    bad = tmp_path / "d"
    bad.mkdir()
    (bad / "garbage.pt").write_bytes(b"not a pickle")
    assert main(["sglang", str(bad), "--model", str(tiny), "--out", str(tmp_path / "o")]) == 2
    (bad / "garbage.pt").rename(bad / "step=0___rank=0___name=x.pt")
    assert main(["sglang", str(bad), "--model", str(tiny), "--out", str(tmp_path / "o")]) == 2
    assert main(["vllm", str(bad), "--model", str(tiny), "--out", str(tmp_path / "o")]) == 2


# ---- name matching (no torch) -------------------------------------------------

def test_distance_counts_edits_and_star_matches_any_run():
    from dsv4q.importers import distance
    # hand-counted: kitten -> sitting is k->s, e->i, +g; a swap of two
    # neighbours is one edit; '*' in the known name absorbs any run
    assert distance("kitten", "sitting") == 3
    assert distance("input_layernrom", "input_layernorm") == 1
    assert distance("mlp.inputs.input_ids", "mlp.inputs.*") == 0
    assert distance("mlp.inputs.", "mlp.inputs.*") == 0
    assert distance("abc", "") == 3 and distance("", "a*b") == 2


@pytest.mark.parametrize("engine,name,closest", [
    ("sglang", "non_intrusive__model.layers.3.input_layernrom.output",
     "non_intrusive__model.layers.3.input_layernorm.output"),
    ("sglang", "non_intrusive__model.layers.0.self_atn.output", "non_intrusive__model.layers.0.self_attn.output"),
    ("sglang", "non_intrusive__model.layers.12.post_attention_layernorm.inputs.O",
     "non_intrusive__model.layers.12.post_attention_layernorm.inputs.0"),
    ("vllm", "model.layers.2.attn_nrom/outputs", "model.layers.2.attn_norm/outputs"),
    ("vllm", "model.layers.7.attn_norm/inputs_1", "model.layers.7.attn_norm/inputs_0"),
])
def test_unknown_name_inside_a_layer_is_refused_naming_the_closest(engine, name, closest):
    from dsv4q.importers import load_map
    m = load_map(engine)
    assert m.lookup(name) == (None, None)
    why = m.suspect(name)
    layer = name.split(".")[2].split("/")[0]
    assert why and ("inside layer %s" % layer) in why and ("closest known name is %s." % closest) in why, why


@pytest.mark.parametrize("engine,name,closest", [
    ("sglang", "non_intrusive__imput_ids", "non_intrusive__input_ids"),
    ("sglang", "positinos", "positions"),
    ("vllm", "model.embed_tokns/inputs_0", "model.embed_tokens/inputs_0"),
])
def test_near_miss_of_a_known_name_is_refused(engine, name, closest):
    from dsv4q.importers import load_map
    m = load_map(engine)
    assert m.lookup(name) == (None, None)
    why = m.suspect(name)
    assert why and "near-miss" in why and ("closest known name is %s." % closest) in why, why


@pytest.mark.parametrize("engine,name,kind", [
    # the names the port's dumps hold, each mapped or explicitly ignored
    ("sglang", "non_intrusive__model.layers.4.input_layernorm.output", "tensors"),
    ("sglang", "non_intrusive__model.layers.4.self_attn.inputs.positions", "ignore"),
    ("sglang", "non_intrusive__model.layers.4.mlp.inputs.input_ids", "ignore"),
    ("sglang", "non_intrusive__model.layers.4.self_attn.q_a_proj.output", "ignore"),
    ("sglang", "non_intrusive__model.layers.4.output", "ignore"),
    ("sglang", "non_intrusive__model.inputs.2", "ignore"),
    ("sglang", "input_ids", "meta"),
    ("vllm", "model.layers.4.ffn.norm/outputs", "ignore"),
    ("vllm", "model.layers.4/inputs_2", "ignore"),
    ("vllm", "model/outputs", "ignore"),
    ("vllm", "model.embed_tokens/inputs_0", "meta"),
    # no catch-all: nothing else is ignored
    ("sglang", "non_intrusive__model.layers.4.input_layernrom.output", None),
    ("sglang", "non_intrusive__vision_tower.output", None),
    ("vllm", "model.layers.4.attn_nrom/outputs", None),
    ("vllm", "vision_tower/outputs", None),
])
def test_builtin_maps_ignore_only_listed_names(engine, name, kind):
    from dsv4q.importers import load_map
    assert load_map(engine).lookup(name)[0] == kind


def test_unrelated_name_outside_layers_is_only_listed():
    from dsv4q.importers import load_map
    assert load_map("sglang").suspect("non_intrusive__vision_tower.output") is None
    assert load_map("vllm").suspect("vision_tower/outputs") is None


def test_without_torch_the_importer_says_how_to_install(tmp_path):
    # torch made unimportable (None in sys.modules) in a fresh interpreter
    code = ("import sys, runpy; sys.modules['torch'] = None; sys.modules['safetensors.torch'] = None; "
            "sys.argv = ['dsv4q-import', 'sglang', %r, '--model', %r, '--out', %r]; "
            "runpy.run_module('dsv4q.importers', run_name='__main__')"
            % (str(tmp_path / "dump"), str(tmp_path / "ckpt"), str(tmp_path / "out")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "the importer needs PyTorch: pip install 'dsv4q[torch]'" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


# ---- refusals on real dumps (torch) ----------------------------------------

def test_misspelled_module_in_a_dump_is_refused(tiny, capture, tmp_path, torch, capsys):
    import engine_dumps
    from dsv4q.importers.__main__ import main
    dump = engine_dumps.write_dump("sglang", tiny, capture, tmp_path / "dump")
    n = 0
    for f in dump.iterdir():   # the port's layer-2 norm, misspelled by its author
        if "layers.2.input_layernorm." in f.name:
            f.rename(f.with_name(f.name.replace("input_layernorm", "input_layernrom")))
            n += 1
    assert n == 4   # inputs.0 and output, two calls
    assert main(["sglang", str(dump), "--model", str(tiny), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "non_intrusive__model.layers.2.input_layernrom." in err and "inside layer 2" in err, err
    assert "closest known name is non_intrusive__model.layers.2.input_layernorm." in err, err
    assert not (tmp_path / "o").exists()


def test_capture_pins_the_weights_and_replay_refuses_others(tiny, capture, tmp_path, dsv4q_bin, torch):
    import engine_dumps
    from safetensors import safe_open
    from dsv4q.importers.__main__ import main
    dump = engine_dumps.write_dump("vllm", tiny, capture, tmp_path / "dump")
    out = tmp_path / "imported"
    assert main(["vllm", str(dump), "--model", str(tiny), "--out", str(out)]) == 0
    # the pin as docs/captures.md spells it in shell
    want = subprocess.run("cd '%s' && ls | LC_ALL=C grep -E '\\.safetensors$|\\.index\\.json$' | LC_ALL=C sort | "
                          "xargs sha256sum | sha256sum" % tiny, shell=True, capture_output=True, text=True,
                          check=True).stdout.split()[0]
    for f in sorted(out.iterdir()):
        with safe_open(str(f), "pt") as s:
            assert s.metadata()["weights_sha256"] == want, f
    # the same config.json, one weight byte changed
    other = tmp_path / "other"
    shutil.copytree(tiny, other)
    w = sorted(other.glob("*.safetensors"))[0]
    b = bytearray(w.read_bytes())
    b[-1] ^= 1
    w.write_bytes(bytes(b))
    r = run([dsv4q_bin, "replay", "--model", str(other), "--capture", str(out), "--no-model",
             "--db", str(tmp_path / "r.db"), "-q"])
    assert r.returncode == 2, r.stdout + r.stderr
    assert "weights_sha256" in r.stderr and "does not match the model's weight files" in r.stderr, r.stderr
    r = run([dsv4q_bin, "replay", "--model", str(tiny), "--capture", str(out), "--no-model",
             "--db", str(tmp_path / "r.db"), "-q"])
    assert r.returncode == 0, r.stdout + r.stderr
