"""The search's archive: every screened pair with its per-suite dev scores, a per-suite Pareto
front over them, and the choice of parents for the next generation.

Nothing is ever dropped (Darwin Gödel Machine's rule): a candidate rejected by the gate, or
dominated on dev, stays in the archive and can parent later. The front is per suite: pair A
dominates pair B when A's dev score is at least B's on every suite and higher on one. Parents are
the champion plus the best archived pairs by mean dev score discounted by how many children they
already had (so an archive member that has been tried often gives way to one that has not);
harmful candidates never parent. Pure: lineage rows in, lists out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Member:
    pair_id: str
    scores: dict  # suite -> dev score (mean task score on the dev split)
    verdict: str  # reference | positive | neutral | harmful | stacked
    generation: int
    operator: str = ""

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / max(1, len(self.scores))


def members(screens: list[dict], references: dict[str, dict]) -> list[Member]:
    """Archive members from lineage screens (+ the dev scores of champions, `references`)."""
    out = {pid: Member(pid, dict(s), "reference", -1) for pid, s in references.items()}
    for r in screens:
        scores = {k: v["score"] for k, v in r["suites"].items() if v.get("score") is not None}
        out[r["pair_id"]] = Member(r["pair_id"], scores, r["verdict"], r["generation"], r["operator"])
    return list(out.values())


def dominates(a: Member, b: Member) -> bool:
    suites = set(a.scores) & set(b.scores)
    if not suites:
        return False
    return all(a.scores[s] >= b.scores[s] for s in suites) and any(a.scores[s] > b.scores[s] for s in suites)


def front(ms: list[Member]) -> list[Member]:
    """The non-dominated members (the per-suite Pareto front)."""
    return [m for m in ms if not any(dominates(o, m) for o in ms if o.pair_id != m.pair_id)]


def best_per_suite(ms: list[Member]) -> dict[str, str]:
    """suite -> the pair with the highest dev score on it (ties: earliest)."""
    out: dict[str, tuple[float, str]] = {}
    for m in ms:
        for s, v in m.scores.items():
            if s not in out or v > out[s][0]:
                out[s] = (v, m.pair_id)
    return {s: pid for s, (_, pid) in out.items()}


def parents(ms: list[Member], champion: str, children: dict[str, int], n: int = 2,
            refuted: frozenset[str] = frozenset(), absent: frozenset[str] = frozenset()) -> list[str]:
    """The champion first, then up to n-1 archived pairs (front members first, then the rest) by
    mean dev score / (1 + children); harmful members never parent. Pairs the gate rejected
    against this champion (`refuted`) come after every other member: they can still parent, once
    the archive has nothing else (a child of theirs would mostly re-claim a refuted gain). Pairs
    whose files are gone (`absent`: a workdir restored from a checkpoint that keeps no adapter
    weights) keep their place in the front but never parent."""
    pool = [m for m in ms if m.pair_id != champion and m.verdict != "harmful" and m.pair_id not in absent]
    on_front = {m.pair_id for m in front(ms)}
    pool.sort(key=lambda m: (m.pair_id in refuted, m.pair_id not in on_front,
                             -m.mean / (1 + children.get(m.pair_id, 0)), m.pair_id))
    return [champion] + [m.pair_id for m in pool[: max(0, n - 1)]]


def summary(ms: list[Member]) -> dict:
    f = {m.pair_id for m in front(ms)}
    return {"members": len(ms), "front": sorted(f), "dominated": sorted(m.pair_id for m in ms if m.pair_id not in f),
            "best_per_suite": best_per_suite(ms),
            "by_verdict": {v: sum(m.verdict == v for m in ms) for v in sorted({m.verdict for m in ms})}}
