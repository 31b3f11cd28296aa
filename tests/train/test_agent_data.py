"""The shipped Qwen agent's training data still rebuilds byte for byte from its scripts, under the
compact tool listing it was trained with (a bundle may list tools `typed` instead; the shipped one
keeps `compact`): its recorded data manifest and that of the adapter it started from."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKILLS = "fill_placeholders,state_facts,lookup_then_act,pick_tools,find_person,order_writes,calls_together"


def _run(monkeypatch, script: str, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", [script, *args])
    runpy.run_path(str(ROOT / "scripts" / script), run_name="__main__")


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_the_shipped_agents_data_rebuilds_under_the_listing_it_was_trained_with(monkeypatch, tmp_path, capsys):
    import macaronic.harness as harness
    from macaronic.engine.llm import shipped_adapters_dir

    loaded = harness.load_bundle  # pinned to the listing it was trained with, whatever the shipped bundle says
    monkeypatch.setattr(harness, "load_bundle", lambda path=None: dataclasses.replace(loaded(path), tool_listing="compact"))
    warm, data = tmp_path / "warm3.jsonl", tmp_path / "data.jsonl"
    _run(monkeypatch, "agent_failure_data_warm.py", str(warm), "--n", "40", "--replay", "2", "--parallel-share", "0.25",
         "--skills", SKILLS)
    _run(monkeypatch, "agent_functions_warm.py", str(data), "--functions", "240", "--replay-file", str(warm),
         "--replay", "240")
    meta = json.loads((shipped_adapters_dir("qwen2.5-coder-0.5b") / "agent" / "macaronic.json").read_text())
    assert hashlib.sha256(data.read_bytes()).hexdigest() == meta["data"]["manifest_sha256"]
    # the package ships that file (content-addressed, outside the adapter's directory, whose files
    # make its id), so the loop's RFT and failure-data successors replay it (`evolve.successor._replay`;
    # without it a warm start from the shipped agent had nothing to replay) and the contract's
    # contamination check reads it
    from macaronic.engine.adapters import recorded_data

    shipped = shipped_adapters_dir("qwen2.5-coder-0.5b") / "agent"
    assert not (shipped / "data.jsonl").exists() and recorded_data(shipped).read_bytes() == data.read_bytes()
    assert recorded_data(shipped).name == meta["data"]["manifest_sha256"] + ".jsonl"
    assert recorded_data(shipped_adapters_dir("qwen2.5-coder-0.5b") / "genui") is None  # a generator rebuilds it
    own = tmp_path / "own"
    own.mkdir()
    (own / "data.jsonl").write_text("{}\n")
    assert recorded_data(own) == own / "data.jsonl" and recorded_data(tmp_path / "missing") is None
    assert hashlib.sha256(warm.read_bytes()).hexdigest() == meta["training"]["init"]["data"]["manifest_sha256"]
    assert "Tools (name(arguments)" in data.read_text()
