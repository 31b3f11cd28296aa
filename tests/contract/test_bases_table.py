"""The two-base table pairs each base's rows over the same tasks (rows written here, not measured)."""

from __future__ import annotations

import json
from pathlib import Path

from macaronic.commands import eval_table
from macaronic.contract import bases_table
from macaronic.contract.spec import load

ROOT = Path(__file__).resolve().parents[2]


def _rows(path: Path, sha: str, pid: str, scores: dict[str, list[float]]) -> None:
    with path.open("w") as f:
        for cfg, xs in scores.items():
            for i, x in enumerate(xs):
                f.write(json.dumps({"contract_sha256": sha, "pair": f"{cfg}/{pid}", "config": cfg, "suite": "chat",
                                    "task": f"t{i}", "sample": 0, "score": x, "passed": x == 1.0}) + "\n")


def test_gains_are_paired_over_the_same_tasks_and_written_between_markers(tmp_path):
    contract = load(ROOT / "contracts" / "macaronic-core-v4.yaml", hashes=False)
    docs = []
    for name, pid, scores in (("smollm2-135m-instruct", "a", {"base": [0, 0, 1, 1], "routed": [1, 0, 1, 1]}),
                              ("qwen2.5-coder-0.5b", "b", {"base": [1, 1, 1, 0], "routed": [1, 1, 1, 1]})):
        tasks = tmp_path / f"{name}.tasks.jsonl"
        _rows(tasks, contract.sha256, pid, scores)
        doc = {"contract": {"id": contract.id, "sha256": contract.sha256}, "command": f"ablate {name}",
               "pair": {"base": None if pid == "a" else name}, "pair_ids": {"base": pid, "routed": pid},
               "tasks": str(tasks)}
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        docs.append(tmp_path / f"{name}.json")
    md = tmp_path / "B.md"
    md.write_text("# Benchmarks\n")
    assert eval_table.bases(["--contract", str(ROOT / "contracts" / "macaronic-core-v4.yaml"), "--ablation", str(docs[0]),
                             "--ablation", str(docs[1]), "--md", str(md), "--json", str(tmp_path / "t.json")]) == 0
    t = json.loads((tmp_path / "t.json").read_text())["suites"]
    assert list(t) == ["chat"]
    row = t["chat"]
    assert row["smollm2-135m-instruct base"] == 0.5 and row["qwen2.5-coder-0.5b routed"] == 1.0
    assert row["base_gain"]["delta"] == 0.25 and row["base_gain"]["n"] == 4  # (1-0)+(1-0)+0+(0-1) over 4
    assert row["scheme_gain smollm2-135m-instruct"]["delta"] == 0.25
    assert row["scheme_gain qwen2.5-coder-0.5b"]["delta"] == 0.25 and row["routed_gain"]["delta"] == 0.25
    text = md.read_text()
    assert bases_table.START in text and "| chat | 0.500 | 0.750 | 0.750 | 1.000 |" in text
    # a second section under its own markers leaves the first one alone
    assert eval_table.bases(["--contract", str(ROOT / "contracts" / "macaronic-core-v4.yaml"), "--ablation", str(docs[0]),
                             "--ablation", str(docs[1]), "--md", str(md), "--key", "other", "--title", "Other"]) == 0
    text = md.read_text()
    assert text.count(bases_table.START) == 1 and "<!-- other:start -->\n## Other\n" in text


def test_the_pooled_primary_row_pools_the_task_scores_of_every_primary_suite():
    contract = load(ROOT / "contracts" / "macaronic-core-v4.yaml", hashes=False)
    sc = lambda suite, xs: {f"{suite}/t{i}": {"suite": suite, "score": x} for i, x in enumerate(xs)}  # noqa: E731
    a = {"base": {**sc("chat", [0, 0]), **sc("coding", [0, 0, 0, 0])}, "routed": {**sc("chat", [1, 1]), **sc("coding", [0, 0, 0, 0])}}
    b = {"base": {**sc("chat", [1, 1]), **sc("coding", [1, 1, 0, 0])}, "routed": {**sc("chat", [1, 1]), **sc("coding", [1, 1, 1, 1])}}
    t = bases_table.table(contract, ("a", "b"), (a, b))
    row = t[bases_table.POOLED]
    assert row["n"] == 6 and row["a routed"] == 2 / 6 and row["b base"] == 4 / 6
    assert row["routed_gain"]["n"] == 6 and abs(row["routed_gain"]["delta"] - 4 / 6) < 1e-9
    one = bases_table.table(contract, ("a", "b"), ({"base": sc("chat", [0])}, {"base": sc("chat", [1])}))
    assert bases_table.POOLED not in one  # one suite: nothing to pool
