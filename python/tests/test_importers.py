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
"""
import json

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
