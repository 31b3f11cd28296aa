"""`macaronic evolve` on a tiny model: a generation is a search. Generation 1 screens a router
refit (dev-positive) and a role-prompt variant (neutral, hence dominated by the refit) on dev;
only the refit reaches the sealed gate and is accepted. Generation 2 screens a harmful router
edit (every unsure turn to the default route) and operator proposals, one of them from the
dominated candidate of generation 1 (archived pairs can parent); the harmful one is rejected on
dev and never reaches the sealed test. A SIGKILL mid-run and a resume lose and double-count nothing."""

from __future__ import annotations

import json
import os
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
strata: {k: 2, temperature: 0.7}
gate: {resamples: 500}
"""
REFIT = {"operator": "router_refit", "steps": ["router_refit"], "note": "refit on logged outcomes"}
PROMPT = {"operator": "prompt", "steps": [{"harness_edit": {"file": "roles/chat.md", "append": "Be brief."}}],
          "note": "a chat prompt variant"}
HARMFUL = {"operator": "harness_edit",
           "steps": [{"harness_edit": {"file": "router.json", "merge": {"min_confidence": 1.01, "tools_route": None},
                                       "note": "only route when certain; else the default (coding), tools or not"}}],
           "note": "plausible-looking, harmful"}
PLAN = {"generations": [[REFIT, PROMPT], [HARMFUL]]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import shutil

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
            "--plan", str(root / "plan.json"), "--operators", "prompt,decoding",
            "--budget", "per_family=1,dev_per_family=3,candidates=3,screen_confidence=90", "--quiet"]


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_search_screens_archives_stacks_and_gates_once_per_positive_generation(setup, monkeypatch, capsys):
    from macaronic.commands.evolve import main as evolve_main

    root, contract, pair = setup
    monkeypatch.setenv("MACARONIC_LEDGER", str(root / "ledger.jsonl"))  # inherited by the loop's processes
    work = root / "work"
    dev = work / "dev.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "macaronic.cli", "evolve", *argv(root, contract, pair)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 300
    while (not dev.exists() or len(dev.read_text().splitlines()) < 8) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole process group, as a crash would
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-3000:]
    killed_rows = [l for l in dev.read_text().splitlines() if l.endswith("}")]

    assert evolve_main(argv(root, contract, pair)) == 0  # resume, in this process

    summary = json.loads((work / "report.json").read_text())
    gens = {g["generation"]: g for g in summary["generations"]}
    assert [gens[g]["decision"] for g in sorted(gens)] == ["reference", "accept", "kept"]
    s1 = {s["name"]: s for s in gens[1]["screens"]}
    assert s1["cand-01"]["verdict"] == "positive" and s1["cand-01"]["components"] == ["router"]
    assert s1["cand-02"]["verdict"] == "neutral" and s1["cand-02"]["components"] == ["prompt:chat"]
    assert gens[1]["candidate"]["name"] == "cand-01"  # one positive: it goes to the gate alone
    assert gens[1]["suites"]["mixed"]["delta"] > 0 and summary["champion"] == gens[1]["pair_id"]
    # the refit reaches only the routed suite: the gate reuses the champion's agent rows
    assert json.loads((work / "gen-001" / "eval.json.gate.json").read_text())["reused_suites"] == ["agent"]
    # generation 2: the harmful edit is rejected on dev and the sealed test is not read again
    s2 = {s["name"]: s for s in gens[2]["screens"]}
    assert s2["cand-01"]["verdict"] == "harmful" and s2["cand-01"]["pooled"]["delta"] < 0
    assert not (work / "gen-002" / "eval.json").exists()
    # dominated candidates stay in the archive, and one of them parents a candidate of generation 2
    dominated = set(summary["archive"]["dominated"])
    assert {s1["cand-02"]["pair_id"], s2["cand-01"]["pair_id"]} <= dominated
    assert any(s["parent_id"] in dominated - {gens[0]["pair_id"]} for s in gens[2]["screens"])
    # sealed reads: the k = 2 strata reference, the generation-0 reference and one gate
    assert summary["sealed_reads"]["by_purpose"] == {"gate": 1, "reference": 1, "strata": 1, "evaluator": 0}
    assert summary["sealed_reads"]["gate_decisions_only"]
    assert summary["strata"]["k"] == 2 and sum(summary["strata"]["counts"].values()) > 0
    md = (work / "report.md").read_text()
    assert "Sealed test reads: 3 evaluations (1 gate, 1 reference, 1 strata)" in md and "harmful" in md and "| 1 | parent |" in md
    assert (work / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Nothing lost, nothing counted twice.
    rows = dev.read_text().splitlines()
    assert rows[: len(killed_rows)] == killed_rows
    keys = Counter((r["pair"], r["suite"], r["task"], r["sample"]) for r in map(json.loads, rows))
    assert max(keys.values()) == 1
    with Lineage(work / "lineage.sqlite") as lin:
        assert [r["generation"] for r in lin.records()] == [0, 1, 2]
        assert len({sc["key"] for sc in lin.screens()}) == len(lin.screens()) == len(gens[1]["screens"]) + len(gens[2]["screens"])
    audit = read_audit(work / "audit.jsonl")
    assert not [a for a in audit if a["purpose"] in ("collector", "trainer") and a["split"] == "test"]

    # A rerun with everything done changes nothing.
    n = len(rows)
    assert evolve_main(argv(root, contract, pair)) == 0
    with Lineage(work / "lineage.sqlite") as lin:
        assert len(lin.records()) == 3 and len(lin.alias_history("champion")) == 2
    assert len(dev.read_text().splitlines()) == n
    # A time budget already spent starts no generation: asked for three, the third is not begun.
    more = argv(root, contract, pair)
    more[more.index("--generations") + 1] = "3"
    assert evolve_main([*more, "--hours", "-1"]) == 2
    assert evolve_main([*more, "--hours", "0"]) == 0
    with Lineage(work / "lineage.sqlite") as lin:
        assert [r["generation"] for r in lin.records()] == [0, 1, 2]
        assert {sc["generation"] for sc in lin.screens()} <= {1, 2}
    assert len(dev.read_text().splitlines()) == n and not (work / "gen-003").exists()

    # Sealed hygiene. The ledger holds one read per measurement, the killed-and-resumed run's too,
    # and the recount from the workdir's audit finds the same reads, not twice as many.
    from macaronic.commands.contract import main as contract_main
    from macaronic.contract import ledger

    assert sorted(r["purpose"] for r in ledger.read()) == ["gate", "reference", "strata"]
    capsys.readouterr()
    assert contract_main(["check", str(contract), "--runs", str(work)]) == 0
    assert "sealed test read 3 times (by purpose: gate 1, reference 1, strata 1, other 0)" in capsys.readouterr().out
    # every decision's rows lie beside it, and every interval it quotes recomputes equal from them
    from macaronic.commands.evolve import intervals as intervals_main
    from macaronic.contract.decision_rows import read_rows as read_gz, rows_path, write_rows

    for g in ("gen-000", "gen-001"):
        assert read_gz(rows_path(work / g / "eval.json")), g
    assert intervals_main([str(work), "--contract", str(contract)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok ") >= 2 and "ok: " in out and " 0 intervals recomputed" not in out
    # a committed copy (no task logs, no audit, no lineage) recomputes the same; one changed score does not
    import shutil

    copy = root / "committed"
    shutil.copytree(work, copy, ignore=shutil.ignore_patterns("*.tasks.jsonl", "audit.jsonl", "lineage.sqlite",
                                                              "dev.jsonl", "experience.jsonl", "cand-*", "stack"))
    assert intervals_main([str(copy), "--contract", str(contract)]) == 0
    rows = read_gz(rows_path(copy / "gen-001" / "eval.json"))
    child = gens[1]["pair_id"]
    i = next(i for i, r in enumerate(rows) if r["pair"] == child and r["suite"] == "mixed")
    rows[i] = {**rows[i], "score": 1.0 - rows[i]["score"], "passed": not rows[i]["passed"]}
    write_rows(rows_path(copy / "gen-001" / "eval.json"), rows)
    capsys.readouterr()
    assert intervals_main([str(copy), "--contract", str(contract)]) == 1
    assert "MISMATCH" in capsys.readouterr().out
    # a read of the test that decides nothing is counted, and shown as a violation
    from macaronic.commands.eval import main as eval_main

    assert eval_main(["--pair", str(pair), "--contract", str(contract), "--json", str(root / "adhoc.json"),
                      "--audit", str(root / "adhoc-audit.jsonl"), "--quiet"]) == 0
    capsys.readouterr()
    assert contract_main(["check", str(contract), "--runs", str(work)]) == 0
    out = capsys.readouterr().out
    assert "sealed test read 4 times (by purpose: gate 1, reference 1, strata 1, other 1)" in out
    assert "VIOLATION" in out and "adhoc.json" in out

    # The probe: generation 0 and the champion on hand-written requests, graded, paired, in JSON.
    from importlib import resources

    from macaronic.commands.evolve import probe as probe_main

    doc = json.loads(resources.files("macaronic").joinpath("data/agent_requests.json").read_text())
    (root / "req.json").write_text(json.dumps({**doc, "requests": doc["requests"][:4]}))
    assert probe_main(["--workdir", str(work), "--contract", str(contract), "--pairs", "gen-0,champion",
                       "--requests", str(root / "req.json"), "--json", str(root / "probe.json")]) == 0
    probe = json.loads((root / "probe.json").read_text())
    first, champ = probe["pairs"]
    assert first["pair"] == gens[0]["pair_id"] and champ["pair"] == summary["champion"]
    assert [r["task"] for r in champ["rows"]] == ["h01", "h02", "h03", "h04"] and champ["n"] == 4
    assert all(r["split"] == "probe" and r["messages"][0]["content"] == q["request"]
               for r, q in zip(champ["rows"], doc["requests"]))
    assert "vs_first" in champ and "vs_first" not in first
    assert champ["vs_first"]["gained"] - champ["vs_first"]["lost"] == round(4 * (champ["pass"] - first["pass"]))
    assert probe_main(["--workdir", str(work), "--contract", str(contract), "--pairs", "gen-9",
                       "--json", str(root / "p2.json")]) == 2


@pytest.mark.long  # needs the search test's run above (alone it runs one, 27 s): the long CI step
def test_changed_contract_with_same_version_is_refused(setup, tmp_path):
    from macaronic.commands.evolve import main as evolve_main

    root, contract, pair = setup
    if not (root / "work" / "lineage.sqlite").exists():  # run alone: record the published contract first
        assert evolve_main(argv(root, contract, pair)) == 0
    edited = tmp_path / "contract.yaml"
    edited.write_text(contract.read_text().replace("resamples: 500", "resamples: 400"))
    assert evolve_main(argv(root, edited, pair)) == 1
