"""The chained-request agent of 2026-12-05 (eighth session; docs/LOG.md, issue 36) against the shipped
agent, forced, greedy, 256 tokens. The shipped agent's rows are its committed ones from the same kind
of box (a 2-core AVX2 EPYC) at the same settings: multi_turn_base first 20 served int4
(`bfcl-qwen-mt-preamble-after-20.json`, the current tool listing), the single-turn categories fp32
(`bfcl-qwen-agent-functions-cand-*.json`, the rows it was shipped on). The new rows came from
(`runs/agent-chains/out`: scripts/agent_chains_warm.py's command):

    MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 OMP_NUM_THREADS=2 macaronic probe bfcl \\
      --categories multi_turn_base --limit 20 --models agent --max-tokens 256 \\
      --adapter-dir runs/agent-chains/out --json docs/bench/external/bfcl-qwen-agent-chains-mt-20.json
    MACARONIC_QUANT=none MACARONIC_DTYPE=float32 OMP_NUM_THREADS=2 macaronic probe bfcl \\
      --categories simple,multiple,parallel,parallel_multiple --limit 20 --models agent \\
      --adapter-dir runs/agent-chains/out --json docs/bench/external/bfcl-qwen-agent-chains-4x20.json
    ... --categories irrelevance --limit 40 ... --json docs/bench/external/bfcl-qwen-agent-chains-irr.json

    .venv/bin/python scripts/agent_chains_compare.py

The ninth session's rows: the `together` agent (`runs/agent-together/out`, the same commands with
`agent-together` in the file names) and the shipped agent rerun under the tool grammar's bounded
numbers (`--models agent` without `--adapter-dir`, `bfcl-qwen-agent-bound-{4x20,irr}.json`):

    .venv/bin/python scripts/agent_chains_compare.py --new agent-together --old agent-bound
    .venv/bin/python scripts/agent_chains_compare.py --new agent-bound --old agent-functions-cand

Multi-turn: the package's checker passes a problem only when every turn leaves the backends as the
ground truth does. Beside it, over the user turns with ground-truth calls: the turns whose calls name
a function the ground truth calls ("right tool"), the share of the ground truth's distinct functions
the turn called ("recall"), the turns with two or more steps, and the turns with no call. Intervals:
paired bootstrap over turns (not independent within a problem: a rough guide) or items.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from macaronic.contract.stats import paired_bootstrap

EXT = Path("docs/bench/external")
MT_OLD = EXT / "bfcl-qwen-mt-preamble-after-20.json"
SINGLE = {"simple": "4x20", "multiple": "4x20", "parallel": "4x20", "parallel_multiple": "4x20", "irrelevance": "irr"}


def _rows(path: Path, cat: str, model: str = "agent") -> list[dict]:
    return json.loads(path.read_text())["categories"][cat]["rows"][model]


def _cell(new: list[float], old: list[float]) -> str:
    d, ci = paired_bootstrap(new, old)
    return f"{sum(new) / len(new):.3f} against {sum(old) / len(old):.3f} ({d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}])"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--new", default="agent-chains", help="stem of the new rows: bfcl-qwen-STEM-{mt-20,4x20,irr}.json")
    ap.add_argument("--old", default="agent-functions-cand",
                    help="stem of the single-turn rows compared against (the multi-turn rows are the shipped agent's)")
    a = ap.parse_args()
    mt_new = EXT / f"bfcl-qwen-{a.new}-mt-20.json"
    if mt_new.exists():
        _multi_turn(mt_new)
    _single(a.new, a.old)


def _multi_turn(mt_new: Path) -> None:
    from macaronic.suites import bfcl

    gold = {p["id"]: p["ground_truth"] for p in bfcl.problems("multi_turn_base", limit=20)}
    new, old = (bfcl.turn_measures(_rows(f, "multi_turn_base"), gold) for f in (mt_new, MT_OLD))
    keys = sorted(old)
    assert keys == sorted(new)
    probs = lambda t: {pid: v["passed"] for (pid, _), v in t.items()}  # noqa: E731
    print(f"multi_turn_base, first 20: problems passed {int(sum(probs(new).values()))} / 20 against "
          f"{int(sum(probs(old).values()))} / 20; over {len(keys)} turns with ground-truth calls, new against shipped:")
    print("\n| measure | new against the shipped agent |\n|---|---|")
    for m in ("right", "recall", "chained", "none"):
        print(f"| {m} | {_cell([new[k][m] for k in keys], [old[k][m] for k in keys])} |")


def _single(new_stem: str, old_stem: str) -> None:
    print(f"\n| category | {new_stem} against {old_stem} (items) |\n|---|---|")
    together_new, together_old = [], []
    for cat, f in SINGLE.items():
        a = {r["id"]: float(r["passed"]) for r in _rows(EXT / f"bfcl-qwen-{new_stem}-{f}.json", cat)}
        b = {r["id"]: float(r["passed"]) for r in _rows(EXT / f"bfcl-qwen-{old_stem}-{f}.json", cat)}
        ids = sorted(a)
        assert ids == sorted(b), cat
        together_new += [a[i] for i in ids]
        together_old += [b[i] for i in ids]
        print(f"| {cat} ({len(ids)}) | {_cell([a[i] for i in ids], [b[i] for i in ids])} |")
    print(f"| all ({len(together_new)}) | {_cell(together_new, together_old)} |")


if __name__ == "__main__":
    main()
