"""Paired comparison of an agent candidate's committed rows against the shipped agent's (the LOG's
agent tables): BFCL's five categories forced and routed (`macaronic probe bfcl --models agent,macaronic
--adapter-dir CAND`), and the 30 hand-written agent requests (`macaronic evolve probe`, the candidate
as the pair `challenger`). Paired bootstrap over items (`contract.stats.paired_bootstrap`).

    .venv/bin/python scripts/agent_compare.py docs/bench/external/bfcl-qwen-agent-warm2-40.json \\
        docs/bench/external/agent-probe-qwen-base-vs-warm2.json
"""

from __future__ import annotations

import json
import sys

from macaronic.contract.stats import paired_bootstrap

EXT = "docs/bench/external/"
SHIPPED_FORCED = EXT + "bfcl-qwen-engine-40.json"  # base and the shipped agent, forced
SHIPPED_ROUTED = EXT + "bfcl-qwen-shipped-routed-40.json"  # the shipped MoL, routed
SHIPPED_PROBE = EXT + "agent-probe-qwen-340-vs-warm-failure-data.json"  # pair `champion`: the shipped agent
CATS = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")


def _col(doc: dict, cat: str, model: str) -> dict[str, float]:
    return {r["id"]: float(r["passed"]) for r in doc["categories"][cat]["rows"][model]}


def _fmt(new: list[float], old: list[float]) -> str:
    d, ci = paired_bootstrap(new, old)
    return f"{sum(new) / len(new):.3f} vs {sum(old) / len(old):.3f}: {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"


def main(bfcl: str, probe: str | None = None) -> None:
    new, ship, ship_r = (json.load(open(p)) for p in (bfcl, SHIPPED_FORCED, SHIPPED_ROUTED))
    tot = {k: [] for k in ("nf", "sf", "nr", "sr", "b")}
    for cat in CATS:
        nf, sf, b = _col(new, cat, "agent"), _col(ship, cat, "agent"), _col(ship, cat, "base")
        nr, sr = _col(new, cat, "macaronic"), _col(ship_r, cat, "macaronic")
        ids = sorted(nf)
        cols = {k: [c[i] for i in ids] for k, c in (("nf", nf), ("sf", sf), ("nr", nr), ("sr", sr), ("b", b))}
        for k in tot:
            tot[k] += cols[k]
        print(f"{cat:18s} base {sum(cols['b']) / len(ids):.3f} | forced {_fmt(cols['nf'], cols['sf'])} | "
              f"routed {_fmt(cols['nr'], cols['sr'])}")
    print(f"{'all':18s} base {sum(tot['b']) / len(tot['b']):.3f} | forced {_fmt(tot['nf'], tot['sf'])} | "
          f"routed {_fmt(tot['nr'], tot['sr'])}")
    if probe:
        ship_p = {r["task"]: float(r["passed"]) for r in json.load(open(SHIPPED_PROBE))["pairs"][0]["rows"]}
        cand = next(p for p in json.load(open(probe))["pairs"] if p["ref"] == "challenger")
        c = {r["task"]: float(r["passed"]) for r in cand["rows"]}
        ids = sorted(ship_p)
        won = sum(c[i] > ship_p[i] for i in ids)
        lost = sum(c[i] < ship_p[i] for i in ids)
        print(f"hand-written agent requests ({len(ids)}): {_fmt([c[i] for i in ids], [ship_p[i] for i in ids])} "
              f"(+{won} -{lost})")


if __name__ == "__main__":
    main(*sys.argv[1:3])
