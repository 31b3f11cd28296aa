"""A generation is a search: candidates from the archive's parents, screened on dev, stacked, and
only the stack goes to the sealed gate.

    parents     the champion and the best other archive member (archive.parents)
    propose     operators.propose: 3-6 candidates of different kinds, each a list of successor
                steps from one parent (prompt variants and decoding from failure clusters,
                router refit, RFT with exploration, failure-driven data, GRPO)
    build       successor.build_successor, into gen-NNN/cand-XX/
    screen      each candidate against the champion on the dev split of the suites its changes
                can reach (`components`: which roles' prompt/decoding/adapter, the router); every
                other suite's dev rows are the champion's, exactly (same prompts, same seeds).
                The paired bootstrap of report.py over the dev tasks gives the verdict:
                positive (lower bound > 0 at the screening confidence, no guard breached),
                harmful (upper bound < 0, or a touched suite dropped by more than its guard),
                neutral otherwise. Every screening is a lineage row: the archive.
    stack       the positives from the champion whose components are disjoint, best first,
                rebuilt as one candidate and screened again; if it is not positive, the best
                single positive. No positive: no sealed read this generation.
    gate        the one candidate against the champion on the sealed test split, by
                `macaronic eval` in its own process (loop.run_eval); accept or reject.

Every step's output is a file or a keyed lineage row, so a rerun resumes. Prints nothing; reports
through the hooks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from macaronic.contract.evaluate import ResultLog, run_units
from macaronic.contract.report import task_scores
from macaronic.contract.stats import paired_bootstrap

VERDICTS = ("positive", "neutral", "harmful")


@dataclass(frozen=True)
class Candidate:
    name: str  # cand-01, stack
    operator: str  # prompt | decoding | router_refit | rft | failure_data | grpo | harness_edit | stack
    parent: str  # pair id
    steps: tuple  # successor steps (config.step_spec form)
    components: tuple[str, ...]  # prompt:<role> decoding:<role> adapter:<role> router all
    note: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "operator": self.operator, "parent": self.parent, "steps": list(self.steps),
                "components": list(self.components), "note": self.note}

    @classmethod
    def from_dict(cls, d: dict) -> "Candidate":
        return cls(d["name"], d["operator"], d["parent"], tuple(d["steps"]), tuple(d["components"]), d.get("note", ""))


# ---- dev screening ----------------------------------------------------------------------------

def dev_units(contract, loader, suites: set[str], budget) -> list[tuple]:
    units = []
    for s in contract.suites:
        if s.name in suites:
            units += [(t, i) for t in loader.tasks(s.name, "dev", per_family=budget.dev_for(s.name))
                      for i in range(budget.dev_samples)]
    return units


def run_dev(contract, loader, runner_factory, pair_id: str, suites: set[str], budget, log: ResultLog,
            progress=None, reuse: list[dict] = ()) -> list[dict]:
    """This pair's dev rows on `suites` (from the log, or run now and appended). `reuse`: rows of
    another pair for tasks this pair answers the same way (pairs.reach.reusable_tasks), copied
    under this pair's id with `reused_from` instead of being run."""
    from macaronic.contract.evaluate import unit_key

    units = dev_units(contract, loader, suites, budget)
    for r in reuse:
        if unit_key(pair_id, r["suite"], r["task"], r["sample"]) not in log.rows:
            log.add({**r, "pair": pair_id, "reused_from": r["pair"], "seconds": 0.0})
    todo = [u for u in units if unit_key(pair_id, u[0].suite, u[0].id, u[1]) not in log.rows]
    view = _capped(contract, budget)
    if todo:
        runner = runner_factory()
        try:
            for row in run_units(view, pair_id, todo, runner, log.keys(), split="dev", workers=budget.workers):
                log.add(row)
                if progress:
                    progress()
        finally:
            runner.close()
    keys = {unit_key(pair_id, t.suite, t.id, i) for t, i in units}
    return [log.rows[k] for k in keys if k in log.rows]


def _capped(contract, budget):
    specs = []
    for s in contract.suites:
        spec = replace(s, k=budget.dev_samples)
        if budget.max_tokens is not None:
            spec = replace(spec, max_tokens=min(spec.max_tokens, budget.max_tokens))
        specs.append(spec)
    return replace(contract, suites=tuple(specs))


def verdict(contract, cand_rows: list[dict], champ_rows: list[dict], touched: set[str],
            confidence: float) -> dict:
    """Per-suite dev scores (the candidate's rows on touched suites, the champion's elsewhere),
    deltas with paired-bootstrap intervals, and the verdict."""
    g = contract.gate
    view = replace(contract, suites=tuple(replace(s, k=1) for s in contract.suites))
    champ = task_scores(view, champ_rows)
    cand = {**{k: v for k, v in champ.items() if v["suite"] not in touched},
            **{k: v for k, v in task_scores(view, cand_rows).items() if v["suite"] in touched}}
    suites, guard_breach = {}, []
    for i, s in enumerate(contract.suites):
        keys = sorted(k for k in champ if champ[k]["suite"] == s.name and k in cand)
        if not keys:
            continue
        c, p = [cand[k]["score"] for k in keys], [champ[k]["score"] for k in keys]
        d, ci = paired_bootstrap(c, p, g.resamples, confidence, g.seed + i)
        suites[s.name] = {"n": len(keys), "score": sum(c) / len(c), "parent_score": sum(p) / len(p),
                          "delta": d, "ci": ci, "touched": s.name in touched}
        if s.name in touched and s.guard is not None and d < -s.guard:
            guard_breach.append(s.name)
    pooled = sorted(k for k in champ if k in cand and champ[k]["suite"] in touched)
    d, ci = paired_bootstrap([cand[k]["score"] for k in pooled], [champ[k]["score"] for k in pooled],
                             g.resamples, confidence, g.seed + 999)
    if guard_breach or (ci is not None and ci[1] < 0):
        v = "harmful"
    elif ci is not None and ci[0] > 0:
        v = "positive"
    else:
        v = "neutral"
    return {"verdict": v, "suites": suites, "pooled": {"n": len(pooled), "delta": d, "ci": ci},
            "guard_breach": guard_breach, "confidence": confidence}


# ---- stacking -------------------------------------------------------------------------------

def stack(screened: list[tuple[Candidate, dict]], champion: str) -> list[Candidate]:
    """The positives from the champion with pairwise disjoint components, best pooled delta first."""
    pos = [(c, s) for c, s in screened if s["verdict"] == "positive" and c.parent == champion]
    pos.sort(key=lambda cs: (-(cs[1]["pooled"]["delta"] or 0), cs[0].name))
    chosen, used = [], set()
    for c, _ in pos:
        if "all" in c.components and chosen:
            continue
        if used & set(c.components) or "all" in used:
            continue
        chosen.append(c)
        used |= set(c.components)
    return chosen


def refuted_line(refuted: set[str], parent_of: dict[str, str]) -> frozenset[str]:
    """The pairs in `refuted` and every pair that descends from one of them through `parent_of`
    (pair id -> parent id, as lineage's screens record it): a grandchild through an archived child
    re-claims the refuted gain as surely as a child does."""
    line = set(refuted)
    for pid in parent_of:
        chain, at = [], pid
        while at in parent_of and at not in line and at not in chain:  # `chain` stops a malformed cycle
            chain.append(at)
            at = parent_of[at]
        if at in line:
            line.update(chain)
    return frozenset(line)


def gate_pick(screened: list[tuple[Candidate, dict]], refuted: set[str]) -> tuple[Candidate, dict] | None:
    """The single positive to gate when no stack is: best pooled dev delta first, leaving out the
    descendants of a pair the gate already rejected against this champion (`refuted`, widened by
    `refuted_line`). Such a child's dev gain over the champion is mostly its ancestor's, which the
    sealed test has refuted: gating it again spends a sealed read on the same claim. It stays in the
    archive and can parent."""
    pos = [cs for cs in screened if cs[1]["verdict"] == "positive" and cs[0].parent not in refuted]
    pos.sort(key=lambda cs: (-(cs[1]["pooled"]["delta"] or 0), cs[0].name))
    return pos[0] if pos else None


def stacked(parts: list[Candidate], champion: str) -> Candidate:
    steps = tuple(s for c in parts for s in c.steps)
    comps = tuple(sorted({x for c in parts for x in c.components}))
    return Candidate("stack", "stack", champion, steps, comps, " + ".join(c.name for c in parts))


def sealed_reads(audit_path: Path) -> dict:
    """How often this workdir read the sealed test split: one read per measurement (a report, or a
    process in audits from before read keys), by purpose, and refused attempts. The count across
    every run of a contract version is `macaronic contract check` (contract/ledger.py)."""
    from macaronic.contract.ledger import GATE_PURPOSES, MEASURING
    from macaronic.contract.sealed import read_audit

    rows = read_audit(audit_path)
    allowed = [r for r in rows if r["split"] == "test" and r["allowed"] and r["purpose"] in MEASURING]
    runs = sorted({(r.get("key") or f"pid:{r['pid']}", r["purpose"]) for r in allowed})
    return {"evaluations": len(runs), "by_purpose": {p: sum(1 for _, q in runs if q == p) for p in MEASURING},
            "gate_decisions_only": all(q in GATE_PURPOSES for _, q in runs),
            "suite_reads": len(allowed),
            "refused": sum(1 for r in rows if r["split"] == "test" and not r["allowed"])}
