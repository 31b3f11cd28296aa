"""Pairs of a lineage on hand-written agent requests, side by side (`macaronic evolve probe`:
commands/evolve.py).

The contract's dev and test tasks come from task families, and the failure-data skills are
families too; this asks the pairs something nobody templated. Each request
(`macaronic/data/agent_requests.json`, or `--requests FILE`) was written by hand against one seeded
substrate state, with the gold actions that reach the intended end state and the facts the reply
must state. Every pair answers every request through its served harness, graded exactly like the
contract's agent suite (its max_steps, max_tokens and grader). Prints, per pair, the pass rate
with a 95% interval, by skill tag, the failure clusters (`failures.label`), and the paired
difference against the first pair (bootstrap interval, McNemar). Writes JSON with every row.
"""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from pathlib import Path


def load_requests(path: Path | None = None) -> list:
    """The requests as contract Tasks of the agent suite (family "hand-written", split "probe")."""
    from macaronic.contract.suites import Task
    from macaronic.substrate.state import StateSpec
    from macaronic.substrate.tasks import AgentTask

    doc = json.loads(path.read_text() if path else
                     resources.files("macaronic").joinpath("data/agent_requests.json").read_text())
    out = []
    for r in doc["requests"]:
        seed = int(r.get("seed", doc["seed"]))
        t = AgentTask(id=r["id"], family="hand-written", split="probe", seed=seed, state=StateSpec(seed=seed),
                      request=r["request"], gold_actions=tuple((n, a) for n, a in r["gold"]),
                      required_facts=tuple(r.get("facts", ())))
        out.append((Task("agent", r["id"], r.get("skill", "hand-written"), "probe", t, t.request), 0))
    return out


def resolve(lin, ref: str) -> str:
    """A pair id: `gen-N` (the pair generation N ended with), an alias, an id or an id prefix."""
    if ref.startswith("gen-"):
        for r in lin.records():
            if r["key"] == ref:
                return r["pair_id"]
        raise ValueError(f"no generation {ref!r} in {lin.path}")
    return lin.resolve(ref)


def summarise(rows: list[dict]) -> dict:
    from macaronic.contract.stats import bootstrap_ci
    from macaronic.evolve.failures import label

    passed = [float(r["passed"]) for r in rows]
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["family"], []).append(float(r["passed"]))
    return {"n": len(rows), "pass": round(sum(passed) / len(rows), 3),
            "ci95": [round(v, 3) for v in bootstrap_ci(passed)],
            "by_skill": {k: f"{int(sum(v))}/{len(v)}" for k, v in sorted(by.items())},
            "failures": dict(Counter(lb for r in rows for lb in label(r)).most_common())}


def compare(rows: list[dict], base: list[dict]) -> dict:
    from macaronic.contract.stats import mcnemar, paired_bootstrap

    a = {r["task"]: float(r["passed"]) for r in rows}
    b = {r["task"]: float(r["passed"]) for r in base}
    ids = sorted(a)
    delta, ci = paired_bootstrap([a[i] for i in ids], [b[i] for i in ids])
    m = mcnemar([a[i] for i in ids], [b[i] for i in ids])
    return {"delta": round(delta, 3), "ci95": [round(v, 3) for v in ci], "gained": m["b"], "lost": m["c"],
            "p_two_sided": round(m["p_two_sided"], 4),
            "gained_ids": [i for i in ids if a[i] > b[i]], "lost_ids": [i for i in ids if a[i] < b[i]]}
