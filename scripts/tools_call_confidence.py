"""How sure must the agent be before it takes a turn the head sent elsewhere? (router.json
`tools_call_confidence`, read by `MoL.tools_decision`; docs/LOG.md 2026-12-05 fifth session, issue 37.)

The hand-written routing turns of one split (`router.handwritten`, kind "hand"), each with the router
bench's `assistant` toolset attached (create_event, set_reminder, add_note, search_contacts): the
shipped agent reads the turn as it would answer it, one greedy token under the tool grammar, and we
keep the probability that its first token opens a call (`serve.mol.opening_probability`). A turn
labelled agent should open one; the others (chat, coding, genui) should not. The written rule: the
smallest threshold of the grid at which at most 1% of the non-agent turns would open a call. Chosen
on the train split; the dev split is printed beside it. Rows: docs/bench/route-qwen/tools-call-confidence-{split}.json.

    MACARONIC_QUANT=none MACARONIC_DTYPE=float32 OMP_NUM_THREADS=2 \\
      .venv/bin/python scripts/tools_call_confidence.py --split train [--rows-only]
    .venv/bin/python scripts/tools_call_confidence.py --split train --summarize   # from the committed rows
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99)
MAX_FALSE_CALLS = 0.01
ROWS = Path(__file__).resolve().parents[1] / "docs" / "bench" / "route-qwen"


def measure(split: str) -> list[dict]:
    from macaronic.commands.probe import served
    from macaronic.router.bench import TOOLSETS
    from macaronic.router.handwritten import load_handwritten

    llm, mol = served(None, [])
    tools = TOOLSETS["assistant"]
    agent = mol.adapter_for_role("agent")

    async def run():
        grammar = await mol.astructure(tools, None, None)
        out = []
        for e in (e for e in load_handwritten(split) if e["kind"] == "hand"):
            token, p = await mol.call_opening(e["messages"], agent, "agent", tools, grammar)  # the decision's read
            out.append({"id": e["id"], "label": e["label"], "token": token, "p_call": round(p, 6),
                        "text": e["messages"][-1]["content"][:100]})
        return out

    try:
        return asyncio.run(run())
    finally:
        llm.close()


def summarize(rows: list[dict]) -> float:
    agent = [r["p_call"] for r in rows if r["label"] == "agent"]
    other = [r["p_call"] for r in rows if r["label"] != "agent"]
    print(f"{len(agent)} agent turns, {len(other)} others")
    print("| threshold | agent turns that open a call | other turns that open a call |\n|---:|---:|---:|")
    chosen = None
    for t in GRID:
        a, o = sum(p >= t for p in agent), sum(p >= t for p in other)
        print(f"| {t} | {a} ({a / len(agent):.3f}) | {o} ({o / len(other):.3f}) |")
        if chosen is None and o <= MAX_FALSE_CALLS * len(other):
            chosen = t
    print(f"chosen (the smallest with at most {MAX_FALSE_CALLS:.0%} of other turns calling): {chosen}")
    return chosen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="train", choices=("train", "dev"))
    ap.add_argument("--summarize", action="store_true", help="read the committed rows instead of measuring")
    a = ap.parse_args()
    path = ROWS / f"tools-call-confidence-{a.split}.json"
    if a.summarize:
        rows = json.loads(path.read_text())
    else:
        rows = measure(a.split)
        path.write_text(json.dumps(rows, indent=0) + "\n")
    summarize(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
