#!/usr/bin/env python3
"""table.py - one markdown table from several `dsv4q replay --json` files of
llama.cpp captures: per stage family (hc_pre, norm, attn, hc_post, moe,
head; worst layer), the NRMS value / fp32 level / verdict, and the whole
model logit NRMS against the fp64 oracle, relative to the fp32 level.

usage: python3 table.py LABEL=replay.json [LABEL=replay.json ...]
"""
import json
import re
import sys

FAMILIES = ["model.embed", "hc_attn_pre", "attn_norm", "attn", "hc_attn_post", "hc_ffn_pre", "ffn_norm", "moe",
            "hc_ffn_post", "model.head"]


def family(stage):
    return stage if stage.startswith("model.") else re.sub(r"^L\d+\.", "", stage)


def main():
    runs = []
    for a in sys.argv[1:]:
        label, path = a.split("=", 1)
        runs.append((label, json.load(open(path))))
    print("| stage (worst layer) | " + " | ".join(f"{l}: NRMS / fp32 level" for l, _ in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for fam in FAMILIES:
        cells = []
        for _, j in runs:
            worst = None
            for s in j["stages"]:
                if family(s["stage"]) != fam or "nrms" not in s["metrics"]:
                    continue
                m = s["metrics"]["nrms"]
                if worst is None or m["value"] > worst[1]["value"]:
                    worst = (s, m)
            if worst is None:
                cells.append("-")
            else:
                s, m = worst
                cells.append(f"{m['value']:.2e} / {m['level']:.2e} {'pass' if s['verdict'] == 'pass' else '**FAIL**'}"
                             f" ({s['stage']})")
        print(f"| {fam} | " + " | ".join(cells) + " |")
    cells = []
    for _, j in runs:
        w = j.get("whole_model")
        if not w:
            cells.append("-")
            continue
        cells.append(f"{w['logit_nrms']:.2e} / {w['logit_nrms_level']:.2e} = {w['logit_nrms'] / w['logit_nrms_level']:.0f}x"
                     f" level, greedy {w['greedy_agree']}/{w['rows']} {'pass' if w['verdict'] == 'pass' else '**FAIL**'}")
    print("| whole-model logits vs fp64 | " + " | ".join(cells) + " |")
    print("| stages pass / compared | " + " | ".join(f"{j['pass']} / {j['pass'] + j['fail']}" for _, j in runs) + " |")


if __name__ == "__main__":
    main()
