"""`macaronic train compare`: commands reproduce the shipped budget; tables land between the markers."""

from __future__ import annotations

import json

import pytest

from macaronic.commands import train_compare
from macaronic.train import compare


def test_full_mode_command_keeps_the_shipped_budget(tmp_path):
    like = json.loads((compare.shipped_dir("coding") / "macaronic.json").read_text())
    cmd = compare.sft_cmd("coding", tmp_path / "x", mode="full", rank=8, steps=like["training"]["config"]["steps"], like=like)
    args = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].startswith("--")}
    c = like["training"]["config"]
    assert args["--mode"] == "full" and args["--rank"] == str(c["rank"]) and args["--steps"] == str(c["steps"])
    assert (args["--batch"], args["--lr"], args["--seed"]) == (str(c["batch"]), str(c["lr"]), str(c["seed"]))
    assert args["--examples"] == str(like["data"]["examples"]) and "--resume" not in cmd
    assert "generator:" + args["--generator"] == like["data"]["source"]  # coding v2: coding_distill, not coding


def _summary(mean, delta=None):
    s = {"n": 4, "pass": {"mean": mean, "ci95": [0.0, 1.0]}, "tests": {"mean": mean, "ci95": [0.0, 1.0]}}
    if delta is not None:
        s["pass"]["delta_vs_shipped_turn_r8"] = {"mean": delta, "ci95": [-0.5, 0.75]}
    return s


def test_markdown_between_markers(tmp_path):
    modes = {"switch_cost": {"command": "macaronic bench", "source": "docs/bench/engine.json",
                             "rows": [{"history_tokens": 512, "turn_ms": 100.0, "full_ms": 1500.0, "cleared_ms": 1600.0}]},
             "roles": {"coding": {"command": "macaronic train compare modes --roles coding",
                                  "train": {"full_r8": {"train_s": 420.0}},
                                  "eval": {"dev": {"eval_s": 60.0, "rows": {},
                                                   "summary": {"shipped_turn_r8": _summary(0.25),
                                                               "full_r8": _summary(0.5, 0.25)}}}}}}
    rows = {"full_r8": [{"task": str(i), "pass": 1.0, "tests": 1.0} for i in range(20)],
            "turn_r8": [{"task": str(i), "pass": float(i % 2), "tests": 0.5} for i in reversed(range(20))]}
    pairs = compare.pair_deltas(rows, "coding", [("full_r8", "turn_r8"), ("grpo", "turn_r8")])
    assert [(q["a"], q["b"]) for q in pairs] == [("full_r8", "turn_r8")]  # absent variants are skipped
    assert pairs[0]["pass"]["mean"] == 0.5 and pairs[0]["tests"]["mean"] == 0.5 and pairs[0]["pass"]["ci95"][0] > 0
    modes["roles"]["coding"]["eval"]["dev"]["pairs"] = pairs
    text = compare.markdown(modes, None)
    assert "| full_r8 − turn_r8 | +0.50 [" in text
    assert "| full_r8 | 420 | 0.50 [0.00, 1.00] | 0.50 [0.00, 1.00] | +0.25 [-0.50, +0.75] | – |" in text
    assert "| 512 | 100 | 1,500 | 15.0x |" in text
    (tmp_path / "m.json").write_text(json.dumps(modes))
    doc = tmp_path / "B.md"
    doc.write_text("# B\n<!-- train:start -->\nprose\n<!-- train:tables:start -->\nold\n<!-- train:tables:end -->\n<!-- train:end -->\n")
    args = ["md", "--modes-json", str(tmp_path / "m.json"), "--grpo-json", str(tmp_path / "none.json"), "--write", str(doc)]
    assert train_compare.main(args) == 0
    out = doc.read_text()
    assert "old" not in out and "| full_r8 | 420 |" in out and "prose" in out
    assert out.endswith("<!-- train:tables:end -->\n<!-- train:end -->\n")
    doc.write_text("# no markers\n")
    with pytest.raises(SystemExit):
        train_compare.main(args)
