"""`macaronic eval report-only` on the tiny pair: a report-only suite beyond the
contract's limit, under base / a forced adapter / routed, resumable, paired vs base."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from macaronic.commands.eval_report_only import main
from macaronic.contract.report_only import parse_limits, widen


def test_limits_and_widen(contract_file):
    from macaronic.contract.spec import load

    assert parse_limits("humaneval=all, bfcl_simple=40") == {"humaneval": None, "bfcl_simple": 40}
    with pytest.raises(ValueError, match="SUITE=N"):
        parse_limits("humaneval")
    c = load(contract_file, hashes=False)
    w = widen(c, {"humaneval": 5})
    assert [s.name for s in w.suites] == ["humaneval"] and w.suite("humaneval").limit == 5 and w.primary == ()
    with pytest.raises(ValueError, match="not report-only"):
        widen(c, {"agent": 3})  # a sealed primary suite cannot be widened


def test_report_only_tiny_pair(contract_file, pair_file, tmp_path, capsys):
    out, tasks = tmp_path / "ro.json", tmp_path / "ro.tasks.jsonl"
    argv = ["--contract", str(contract_file), "--pair", str(pair_file), "--json", str(out), "--tasks", str(tasks),
            "--limit", "humaneval=3", "--configs", "base,coding,routed", "--router-policy", "prompted",
            "--workers", "3", "--quiet", "--audit", str(tmp_path / "audit.jsonl")]
    assert main(argv) == 0
    rows = [json.loads(line) for line in tasks.read_text().splitlines()]
    # three problems (the contract says 2) under each of the three configurations, once each
    assert Counter(r["config"] for r in rows) == {"base": 3, "coding": 3, "routed": 3}
    assert {r["task"] for r in rows} == {"HumanEval/0", "HumanEval/1", "HumanEval/2"}
    assert all(r["suite"] == "humaneval" and r["detail"]["status"] in ("passed", "failed", "timeout") for r in rows)
    doc = json.loads(out.read_text())
    assert doc["outside_contract"] and doc["limits"] == {"humaneval": 3} and doc["units_missing"] == 0
    assert doc["configs"]["base"]["humaneval"]["n"] == 3 and "delta" not in doc["configs"]["base"]["humaneval"]
    assert doc["configs"]["coding"]["humaneval"]["n_paired"] == 3
    assert main(argv) == 0  # resumable: nothing new to run
    assert len(tasks.read_text().splitlines()) == 9
    assert main([*argv[:-2], "--configs", "base,nope"]) == 2
    assert "unknown configurations" in capsys.readouterr().err
