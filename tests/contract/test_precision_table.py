"""The served-precision table pairs each precision's routed rows with fp32's and applies the rule
(rows and speeds written here, not measured)."""

from __future__ import annotations

import json
from pathlib import Path

from macaronic.commands import eval_table
from macaronic.contract import precision_table
from macaronic.contract.spec import load

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "contracts" / "macaronic-core-v4.yaml"


def _summary(tmp_path: Path, contract, dtype: str, quant: str, chat: list[float]) -> Path:
    name = quant if quant != "none" else dtype
    tasks = tmp_path / f"{name}.tasks.jsonl"
    with tasks.open("w") as f:
        for suite in contract.primary:
            xs = chat if suite == "chat" else [1.0, 0.0, 1.0, 0.0]
            for i, x in enumerate(xs):
                f.write(json.dumps({"contract_sha256": contract.sha256, "pair": "routed/p", "config": "routed",
                                    "suite": suite, "task": f"{suite}{i}", "sample": 0, "score": x,
                                    "passed": x == 1.0}) + "\n")
    doc = {"contract": {"id": contract.id, "sha256": contract.sha256}, "command": f"ablate {name}",
           "pair_ids": {"routed": "p"}, "tasks": str(tasks), "dtype": dtype, "quant": quant}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_fastest_precision_not_below_fp32s_interval_on_any_suite_is_the_default(tmp_path):
    contract = load(CONTRACT, hashes=False)
    chat = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    fp32 = _summary(tmp_path, contract, "float32", "none", chat)
    int4 = _summary(tmp_path, contract, "bfloat16", "int4", chat)  # the same answers
    int8 = _summary(tmp_path, contract, "bfloat16", "int8", [0.0] * 8)  # chat collapses
    speed = tmp_path / "speed.json"
    speed.write_text(json.dumps({"command": "macaronic bench --only precision", "serve_precision": {"variants": [
        {"label": "fp32", "tok_s": 20.0}, {"label": "int8", "tok_s": 80.0}, {"label": "int4", "tok_s": 60.0}]}}))
    md = tmp_path / "B.md"
    md.write_text("# Benchmarks\n")
    out = tmp_path / "t.json"
    assert eval_table.precision(["--contract", str(CONTRACT), "--ablation", str(fp32), "--ablation", str(int4),
                                 "--ablation", str(int8), "--speed", str(speed), "--json", str(out), "--md", str(md)]) == 0
    t = json.loads(out.read_text())
    assert t["rows"]["int8"]["chat"]["delta"] == -0.75 and not t["rows"]["int8"]["chat"]["not_below"]
    assert t["rows"]["int4"]["chat"]["delta"] == 0.0 and t["rows"]["int4"]["chat"]["not_below"]
    # int8 is the fastest but below fp32's interval on chat: the default is int4, the next fastest
    assert t["eligible"] == ["fp32", "int4"] and t["default"] == "int4"
    text = md.read_text()
    assert "<!-- precision:start -->" in text and "**int4**" in text and "below" in text
