"""The sealed test split: refused to the trainer and the collector, every read audited, and a
contamination check (exact and 13-gram) before evaluation."""

from __future__ import annotations

import json

import pytest

from macaronic.contract import spec as cspec
from macaronic.commands.eval import CONTAMINATED
from macaronic.commands.eval import main as eval_main
from macaronic.contract.sealed import SealedSplitError, SplitLoader, contamination, read_audit


@pytest.mark.parametrize("purpose", ["trainer", "collector"])
def test_test_split_refused_to_trainer_and_collector(contract_file, tmp_path, purpose):
    c = cspec.load(contract_file)
    audit = tmp_path / "audit.jsonl"
    loader = SplitLoader(c, purpose, audit)
    for suite in ("agent", "mixed", "humaneval"):
        with pytest.raises(SealedSplitError, match="sealed"):
            loader.tasks(suite, "test")
    train = loader.tasks("agent", "train", per_family=1)
    assert train and all(t.split == "train" for t in train)
    log = read_audit(audit)
    assert [(r["suite"], r["split"], r["allowed"]) for r in log] == [
        ("agent", "test", False), ("mixed", "test", False), ("humaneval", "test", False), ("agent", "train", True)]
    assert all(r["purpose"] == purpose and r["contract_sha256"] == c.sha256 for r in log)


def test_evaluator_reads_test_and_is_audited(contract_file, tmp_path):
    c = cspec.load(contract_file)
    audit = tmp_path / "audit.jsonl"
    tasks = SplitLoader(c, "evaluator", audit).tasks("mixed", "test")
    assert {t.family for t in tasks} == {"event_form_capital", "fix_identity", "contact_then_fix"}
    (row,) = read_audit(audit)
    assert row["allowed"] and row["n"] == len(tasks) and row["purpose"] == "evaluator"
    with pytest.raises(ValueError):
        SplitLoader(c, "evaluator", audit).tasks("mixed", "test", per_family=50)  # test size is the contract's


def test_splits_are_disjoint_by_family(contract_file, tmp_path):
    c = cspec.load(contract_file)
    loader = SplitLoader(c, "check", tmp_path / "a.jsonl")
    for suite in ("agent", "mixed"):
        fams = {s: {t.family for t in loader.tasks(suite, s)} for s in ("train", "dev", "test")}
        assert fams["test"] and not fams["test"] & (fams["train"] | fams["dev"])


def test_contamination_exact_and_13gram():
    test = [("a", "Please add a reminder for the dentist appointment on Friday at nine in the morning, thanks."),
            ("b", "What is the capital of Peru?"),
            ("c", "Write a Python function named flatten_list that flattens a list of lists into one list.")]
    train = ["Earlier: what is the capital of peru? It is Lima.",  # exact (normalized) containment of b
             "add a reminder for the dentist appointment on Friday at nine in the morning"]  # 13 words of a
    r = contamination(train, test)
    assert r["exact"] == ["b"] and r["ngram"] == ["a"] and not r["clean"]
    assert contamination(["add a reminder for the dentist"], test)["clean"]  # under 13 words


def test_eval_refuses_contaminated_training_data(contract_file, pair_file, tmp_path, capsys):
    from macaronic.pairs import PairManifest

    c = cspec.load(contract_file)
    leaked = SplitLoader(c, "check", tmp_path / "a.jsonl").tasks("mixed", "test")[0].text
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": leaked}]}) + "\n")
    m = PairManifest.load(pair_file).with_data((str(data),))
    m.save(tmp_path / "pair.json")
    rc = eval_main(["--pair", str(tmp_path / "pair.json"), "--contract", str(contract_file),
                    "--json", str(tmp_path / "r.json"), "--quiet", "--audit", str(tmp_path / "a.jsonl")])
    assert rc == CONTAMINATED
    assert "overlaps the sealed test split" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_committed_runs_recount_their_sealed_reads(tmp_path, monkeypatch, capsys):
    """The committed workdirs of v5 (no audit files; report.json counts per workdir) add up across
    runs: 22 reads, each a gate decision, a generation-0 reference or a strata freeze."""
    from pathlib import Path

    from macaronic.commands.contract import main as contract_main

    monkeypatch.setenv("MACARONIC_LEDGER", str(tmp_path / "empty.jsonl"))
    root = Path(__file__).resolve().parents[2]
    assert contract_main(["check", str(root / "contracts" / "macaronic-core-v5.yaml"), "--audit",
                          str(tmp_path / "audit.jsonl")]) == 0
    assert "sealed test read 22 times (by purpose: gate 9, reference 4, strata 9, other 0)" in capsys.readouterr().out


def test_ledger_counts_one_read_per_measurement_across_workdirs(contract_file, tmp_path):
    """A resumed evaluation (same key, another process or workdir) is one read; another report is a
    second; a refused or hash-checking loader is none; a read that decides nothing is a violation."""
    from macaronic.contract import ledger

    c = cspec.load(contract_file)
    book = tmp_path / "ledger.jsonl"
    for audit in ("a/audit.jsonl", "b/audit.jsonl"):  # killed in one workdir, resumed in another
        SplitLoader(c, "gate", tmp_path / audit, key="eval:/w/gen-001/eval.json", ledger=book).tasks("mixed", "test")
    SplitLoader(c, "gate", tmp_path / "a/audit.jsonl", key="eval:/w/gen-002/eval.json", ledger=book).tasks("agent", "test")
    SplitLoader(c, "check", tmp_path / "a/audit.jsonl", ledger=book).tasks("agent", "test")
    with pytest.raises(SealedSplitError):
        SplitLoader(c, "trainer", tmp_path / "a/audit.jsonl", ledger=book).tasks("agent", "test")
    SplitLoader(c, "evaluator", tmp_path / "c/audit.jsonl", key="eval:/adhoc.json", ledger=book).tasks("agent", "test")
    assert len(ledger.read(book)) == 4
    counts = ledger.recount(c, [tmp_path], book)  # the workdirs' audits hold the same reads: not twice
    assert counts["by_purpose"] == {"gate": 2, "reference": 0, "strata": 0, "other": 1} and counts["total"] == 3
    assert [v["key"] for v in counts["violations"]] == ["eval:/adhoc.json"]
    assert ledger.recount(c, [tmp_path], tmp_path / "none.jsonl")["total"] == 3  # the audits alone recount it
