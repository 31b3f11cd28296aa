"""`macaronic evolve` on a tiny model: two generations, one successor accepted (a router refit
from logged outcomes) and one rejected (a harmful harness edit), with a SIGKILL mid-run and a
resume that loses and double-counts nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from macaronic.contract.sealed import read_audit
from macaronic.pairs import Lineage

DRAFT = """\
contract: tiny-evolve
version: 1
primary: [agent, mixed]
suites:
  agent: {grader: agent.state_hash@1, role: agent, per_family: 1, max_tokens: 8, max_steps: 1, guard: 0.5}
  mixed: {grader: mixed.route_answer@1, per_family: 2, max_tokens: 6}
gate: {resamples: 500}
"""
# Generation 2 proposes an edit that sends every turn the router is not certain about to the
# default route (coding): a plausible-looking but harmful change the gate must reject.
PLAN = {"generations": [["router_refit"],
                        [{"harness_edit": {"file": "router.json", "merge": {"min_confidence": 1.01},
                                           "note": "only route when certain; else the default (coding)"}}]]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from macaronic.contract.spec import seal
    from macaronic.engine.config import ModelArgs
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest
    from macaronic.testing import make_random_adapter, make_tiny_model_dir

    root = tmp_path_factory.mktemp("evolve")
    (root / "draft.yaml").write_text(DRAFT)
    contract = seal(root / "draft.yaml", root / "contract.yaml")
    base = make_tiny_model_dir(root / "base", seed=3, max_position_embeddings=16384)
    args = ModelArgs.from_dir(base)
    ads = {r: make_random_adapter(root / "adapters" / r, args, seed=i + 1, mode="turn", role=r)
           for i, r in enumerate(["chat", "agent", "coding", "genui"])}
    shutil.copytree(DEFAULT_BUNDLE, root / "harness")
    pair = PairManifest.build(base, ads, root / "harness").save(root / "pair.json")
    (root / "plan.json").write_text(json.dumps(PLAN))
    return root, contract, pair


def argv(root, contract, pair):
    return ["--contract", str(contract), "--generations", "2", "--workdir", str(root / "work"), "--pair", str(pair),
            "--plan", str(root / "plan.json"), "--budget", "samples=1,per_family=1,dev_per_family=2", "--quiet"]


def test_two_generations_accept_then_reject_survive_sigkill(setup):
    from macaronic.evolve.cli import main as evolve_main

    root, contract, pair = setup
    work = root / "work"
    exp = work / "experience.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "macaronic.cli", "evolve", *argv(root, contract, pair)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 300
    while (not exp.exists() or len(exp.read_text().splitlines()) < 3) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole process group, as a crash would
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-3000:]
    assert (work / "gen-000" / "eval.json").exists() and not (work / "gen-001" / "candidate").exists()
    killed_rows = [l for l in exp.read_text().splitlines() if l.endswith("}")]

    assert evolve_main(argv(root, contract, pair)) == 0  # resume, in this process

    summary = json.loads((work / "report.json").read_text())
    gens = summary["generations"]
    assert [g["decision"] for g in gens] == ["reference", "accept", "reject"]
    assert gens[1]["parent_id"] == gens[0]["pair_id"] and gens[2]["parent_id"] == gens[1]["pair_id"]
    assert gens[1]["suites"]["mixed"]["delta"] > 0 and gens[1]["changes"][0]["step"] == "router_refit"
    assert "primary" in gens[2]["failed_rules"] and gens[2]["suites"]["mixed"]["delta"] < 0
    assert gens[2]["changes"][0]["step"] == "harness_edit"
    assert summary["champion"] == gens[1]["pair_id"]
    assert (work / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (work / "report.md").read_text()
    assert "| 1 |" in md and "accept" in md and "reject (primary" in md
    # generation 2 (a harness edit) learns nothing from experience: no rows for its champion
    assert {json.loads(l)["pair"] for l in exp.read_text().splitlines()} == {gens[0]["pair_id"]}

    # Nothing lost, nothing counted twice: the rows from before the kill are still first, every
    # unit appears once, and the lineage holds one record per generation.
    rows = exp.read_text().splitlines()
    assert rows[: len(killed_rows)] == killed_rows
    keys = Counter((r["suite"], r["task"], r["sample"]) for r in map(json.loads, rows))
    assert len(keys) == len(rows) == 10 + 5  # agent: 10 train families x 1; mixed: 5 train families x 1
    for p in work.glob("gen-*/eval.json.tasks.jsonl"):
        ks = Counter((r["pair"], r["suite"], r["task"], r["sample"]) for r in map(json.loads, p.read_text().splitlines()))
        assert max(ks.values()) == 1, p
    with Lineage(work / "lineage.sqlite") as lin:
        assert [r["generation"] for r in lin.records()] == [0, 1, 2]
        assert [h["pair_id"] for h in lin.alias_history("champion")] == [gens[0]["pair_id"], gens[1]["pair_id"]]
        assert [h["pair_id"] for h in lin.alias_history("challenger")] == [gens[1]["pair_id"], gens[2]["pair_id"]]
        assert all(r["contract_sha256"] == summary["contract"]["sha256"] for r in lin.records())

    # The collector and the trainer never read the sealed test split; the evaluator did.
    audit = read_audit(work / "audit.jsonl")
    assert not [a for a in audit if a["purpose"] in ("collector", "trainer") and a["split"] == "test"]
    assert {a["purpose"] for a in audit if a["split"] == "test"} >= {"evaluator"}
    assert {(a["purpose"], a["split"]) for a in audit} >= {("collector", "train"), ("trainer", "dev")}

    # A rerun with everything done changes nothing.
    before = (work / "lineage.sqlite").stat().st_size, len(rows)
    assert evolve_main(argv(root, contract, pair)) == 0
    with Lineage(work / "lineage.sqlite") as lin:
        assert len(lin.records()) == 3 and len(lin.alias_history("champion")) == 2
    assert len(exp.read_text().splitlines()) == before[1]


def test_changed_contract_with_same_version_is_refused(setup, tmp_path):
    from macaronic.evolve.cli import main as evolve_main

    root, contract, pair = setup
    if not (root / "work" / "lineage.sqlite").exists():  # run alone: record the published contract first
        assert evolve_main(argv(root, contract, pair)) == 0
    edited = tmp_path / "contract.yaml"
    edited.write_text(contract.read_text().replace("resamples: 500", "resamples: 400"))
    args = argv(root, edited, pair)
    assert evolve_main(args) == 1
