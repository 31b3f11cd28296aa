"""The evaluation report and the gate, from per-task result rows. Pure: rows in, dict out.

A row is one (pair, suite, task, sample) outcome. Per task, samples reduce to one task score:
pass^k for suites with k > 1 and binary outcomes (all k samples pass), else the mean score.
The primary metric pools the task scores of the primary suites. Strata are a frozen
task -> easy|mid|hard map. Gate rules (each failure is named in failed_rules):

  primary     the paired-bootstrap lower bound of the primary improvement must be > 0
  guard:S     suite S must not drop by more than its guard
  easy        the easy stratum must not drop by more than gate.easy_max_drop
  mcnemar     cross-check on binary outcomes: the child must not be significantly worse
"""

from __future__ import annotations

from collections import defaultdict
from math import comb

from macaronic.contract.stats import bootstrap_ci, mcnemar, paired_bootstrap

STRATA = ("easy", "mid", "hard")


def task_scores(contract, rows: list[dict]) -> dict[str, dict]:
    """task key -> {"suite", "score", "rate", "passed", "binary"} for one pair's rows."""
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_task[f"{r['suite']}/{r['task']}"].append(r)
    out = {}
    for key, rs in by_task.items():
        spec = contract.suite(rs[0]["suite"])
        scores = [float(r["score"]) for r in rs]
        binary = all(s in (0.0, 1.0) for s in scores)
        c = sum(bool(r["passed"]) for r in rs)
        if binary and spec.k > 1 and len(rs) >= spec.k:
            score = comb(c, spec.k) / comb(len(rs), spec.k)  # pass^k
        else:
            score = sum(scores) / len(scores)
        out[key] = {"suite": rs[0]["suite"], "score": score, "rate": sum(scores) / len(scores),
                    "passed": c == len(rs), "binary": binary}
    return out


def freeze_strata(contract, reference_rows: list[dict]) -> dict[str, str]:
    """task key -> stratum from the reference pair's per-task pass rate."""
    out = {}
    for key, t in sorted(task_scores(contract, reference_rows).items()):
        if contract.suite(t["suite"]).report_only:
            continue
        rate = t["rate"]
        out[key] = ("easy" if rate >= contract.strata.easy_min else
                    "hard" if rate <= contract.strata.hard_max else "mid")
    return out


def _block(contract, child: dict, parent: dict | None, keys: list[str], salt: int) -> dict:
    g = contract.gate
    x = [child[k]["score"] for k in keys if k in child]
    block = {"n": len(x), "score": sum(x) / len(x) if x else None,
             "ci95": bootstrap_ci(x, g.resamples, g.confidence, g.seed + salt), "delta": None, "delta_ci95": None}
    if parent is not None:
        both = [k for k in keys if k in child and k in parent]
        d, ci = paired_bootstrap([child[k]["score"] for k in both], [parent[k]["score"] for k in both],
                                 g.resamples, g.confidence, g.seed + salt)
        block["delta"], block["delta_ci95"] = d, ci
    return block


def build_report(contract, pair_id: str, rows: list[dict], parent_id: str | None = None,
                 parent_rows: list[dict] | None = None, strata: dict[str, str] | None = None) -> tuple[dict, list[dict]]:
    """(report with exactly the published fields, the gate's checks with their numbers)."""
    child = task_scores(contract, rows)
    parent = task_scores(contract, parent_rows) if parent_id is not None else None
    suites = {}
    for i, s in enumerate(contract.suites):
        keys = sorted(k for k in child if child[k]["suite"] == s.name)
        suites[s.name] = _block(contract, child, parent, keys, i)
    strata_out = {}
    for j, name in enumerate(STRATA):
        keys = sorted(k for k, v in (strata or {}).items() if v == name)
        b = _block(contract, child, parent, keys, 100 + j)
        strata_out[name] = {k: b[k] for k in ("n", "score", "delta", "delta_ci95")}
    decision, failed, checks = "reference", [], []
    if parent is not None:
        decision, failed, checks = gate(contract, child, parent, suites, strata_out)
    report = {
        "contract": {"id": contract.id, "version": contract.version, "sha256": contract.sha256},
        "pair": {"id": pair_id}, "parent": {"id": parent_id},
        "suites": suites, "strata": strata_out, "decision": decision, "failed_rules": failed,
        "cost": {"tokens": int(sum(r.get("tokens", 0) for r in rows)),
                 "seconds": round(float(sum(r.get("seconds", 0.0) for r in rows)), 3)},
    }
    return report, checks


def gate(contract, child: dict, parent: dict, suites: dict, strata: dict) -> tuple[str, list[str], list[dict]]:
    g = contract.gate
    prim = sorted(k for k in child if k in parent and child[k]["suite"] in contract.primary)
    d, ci = paired_bootstrap([child[k]["score"] for k in prim], [parent[k]["score"] for k in prim],
                             g.resamples, g.confidence, g.seed + 999)
    checks = [{"rule": "primary", "n": len(prim), "delta": d, "ci": ci,
               "ok": ci is not None and ci[0] > 0}]
    for s in contract.suites:
        if s.guard is not None and not s.report_only and suites[s.name]["delta"] is not None:
            delta = suites[s.name]["delta"]
            checks.append({"rule": f"guard:{s.name}", "delta": delta, "bound": -s.guard, "ok": delta >= -s.guard})
    easy = strata.get("easy", {})
    if easy.get("n") and easy.get("delta") is not None:
        checks.append({"rule": "easy", "delta": easy["delta"], "bound": -g.easy_max_drop,
                       "ok": easy["delta"] >= -g.easy_max_drop})
    binary = [k for k in prim if child[k]["binary"] and parent[k]["binary"]]
    if binary:
        m = mcnemar([child[k]["passed"] for k in binary], [parent[k]["passed"] for k in binary])
        checks.append({"rule": "mcnemar", "n": len(binary), **m, "alpha": g.mcnemar_alpha,
                       "ok": not (m["c"] > m["b"] and m["p_worse"] < g.mcnemar_alpha)})
    failed = [c["rule"] for c in checks if not c["ok"]]
    return ("accept" if not failed else "reject"), failed, checks
