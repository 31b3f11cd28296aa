"""`macaronic eval ablate` on the tiny pair: every configuration answers every unit once, routed
and oracle rows reuse forced generations, and the table lands between the markers."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from macaronic.contract.ablate import END, START, write_section
from macaronic.commands.eval_ablate import main

DRAFT = """\
contract: tiny-ablate
version: 1
primary: [agent, mixed, genui]
suites:
  agent: {grader: agent.state_hash@1, role: agent, per_family: 1, max_tokens: 6, max_steps: 1}
  mixed: {grader: mixed.route_answer@1, per_family: 1, max_tokens: 4}
  genui: {grader: genui.l1_l2@1, role: genui, per_family: 1, max_tokens: 6}
  humaneval: {grader: humaneval.exec@2, limit: 1, max_tokens: 6, report_only: true}
gate: {resamples: 200}
"""


@pytest.fixture(scope="module")
def ablate_contract(tmp_path_factory, monkeypatch_session_audit, sealed_contract_factory):
    return sealed_contract_factory(tmp_path_factory.mktemp("ablate-contract"), DRAFT)


def test_ablate_tiny_pair(ablate_contract, pair_file, tmp_path):
    md = tmp_path / "BENCH.md"
    md.write_text("# Bench\n\nkept above\n\n## Specialists\n\n" + START + "\nold\n" + END + "\n\nkept below\n")
    out, tasks = tmp_path / "spec.json", tmp_path / "tasks.jsonl"
    argv = ["--contract", str(ablate_contract), "--pair", str(pair_file), "--json", str(out), "--md", str(md),
            "--tasks", str(tasks), "--router-policy", "prompted", "--workers", "4", "--quiet",
            "--audit", str(tmp_path / "audit.jsonl")]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    rows = [json.loads(l) for l in tasks.read_text().splitlines()]
    per = Counter(r["config"] for r in rows)
    # agent 3 + mixed 3 + genui 2 tasks per row; humaneval (1) only on base and the coding adapter;
    # the grammar row on the genui suite only
    assert per == {"base": 9, "chat": 8, "agent": 8, "coding": 9, "genui": 8, "routed": 8, "oracle": 8,
                   "genui+grammar": 2}
    assert max(Counter((r["config"], r["suite"], r["task"], r["sample"]) for r in rows).values()) == 1
    forced = {(r["task"], r["sample"]): r["messages"] for r in rows if r["config"] == "agent" and r["suite"] == "agent"}
    oracle = {(r["task"], r["sample"]): r["messages"] for r in rows if r["config"] == "oracle" and r["suite"] == "agent"}
    assert oracle == forced  # oracle on a single-role suite is that role's adapter
    for r in rows:
        if r["config"] == "oracle" and r["suite"] == "mixed":
            assert all(t["routed"] == t["gold"] for t in r["detail"]["turns"])
        if r["config"] == "coding" and r["suite"] == "mixed":
            assert all(t["routed"] == "coding" for t in r["detail"]["turns"])
    assert doc["memo_hits"] > 0
    assert doc["configs"]["base"]["agent"]["delta_ci95"] is None
    assert doc["configs"]["agent"]["agent"]["n"] == 3 and doc["configs"]["agent"]["agent"]["delta_ci95"] is not None
    assert set(doc["quality_bar"]) == {"agent", "genui"}
    assert set(doc["quality_bar"]["agent"]["vs"]) == {"base", "chat", "coding", "genui"}
    assert doc["external"]["humaneval"]["vs_base"]["n"] == 1
    assert doc["external"]["genui+grammar"]["vs_unconstrained"]["n"] == 2
    grammar = [r for r in rows if r["config"] == "genui+grammar"]
    assert all(r["messages"][-1]["content"].startswith("{") for r in grammar)  # the grammar shaped them
    text = md.read_text()
    assert text.startswith("# Bench\n\nkept above") and text.rstrip().endswith("kept below") and "\nold\n" not in text
    assert "| oracle |" in text and "| configuration | agent | mixed | genui |" in text

    # A rerun has nothing left to do and writes the same numbers.
    assert main(argv) == 0
    again = json.loads(out.read_text())
    assert again["units_run"] == 0 and again["configs"] == doc["configs"]


def test_max_seconds_starts_no_unit_after_the_deadline_and_summarises_what_finished(ablate_contract, pair_file,
                                                                                      tmp_path):
    out, tasks = tmp_path / "spec.json", tmp_path / "tasks.jsonl"
    argv = ["--contract", str(ablate_contract), "--pair", str(pair_file), "--json", str(out), "--tasks", str(tasks),
            "--router-policy", "prompted", "--workers", "1", "--quiet", "--configs", "base,agent",
            "--no-external", "--audit", str(tmp_path / "audit.jsonl"), "--max-seconds", "0.000001"]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    rows = tasks.read_text().splitlines()
    assert doc["units"] == 16 and doc["units_run"] == len(rows) and 1 <= len(rows) < 16
    assert doc["units_missing"] == 16 - len(rows)
    # the rerun without a deadline continues from the rows written, and covers everything
    assert main(argv[:-2]) == 0
    again = json.loads(out.read_text())
    assert again["units_missing"] == 0 and again["units_run"] == 16 - len(rows)


def test_split_dev_answers_the_dev_tasks_into_their_own_file(ablate_contract, pair_file, tmp_path):
    """--split dev: the dev units, rows marked dev, the JSON says so; a tasks file that holds the
    other split's rows is refused (a unit's key does not name its split)."""
    out, tasks = tmp_path / "dev.json", tmp_path / "dev.tasks.jsonl"
    argv = ["--contract", str(ablate_contract), "--pair", str(pair_file), "--json", str(out), "--tasks", str(tasks),
            "--router-policy", "prompted", "--workers", "2", "--quiet", "--configs", "agent", "--suites", "agent",
            "--no-external", "--audit", str(tmp_path / "audit.jsonl"), "--split", "dev"]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    rows = [json.loads(l) for l in tasks.read_text().splitlines()]
    assert doc["split"] == "dev" and rows and {r["split"] for r in rows} == {"dev"}
    assert doc["configs"]["agent"]["agent"]["n"] == len(rows)
    audit = [json.loads(l) for l in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert any(a["split"] == "dev" and a["suite"] == "agent" for a in audit)
    assert main([*argv[:-2], "--split", "test"]) == 2


def test_write_section_appends_when_markers_are_missing():
    text = write_section("# B\n\nbody\n", "table")
    assert text == f"# B\n\nbody\n\n## Specialists\n\n{START}\ntable\n{END}\n"
    assert write_section(text, "new") == text.replace("\ntable\n", "\nnew\n")
