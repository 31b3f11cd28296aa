"""`macaronic train sample-coding`: RFT data for the coding specialist, the bare base's own passing
replies to the coding engine's generated problems (train/rft.py, datagen/coding.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from macaronic.engine.bases import BASE_HELP
from macaronic.train.rft import DATA
from macaronic.train.rft import __doc__ as RFT_DOC


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic train sample-coding", description=RFT_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=DATA, help="kept rows (JSONL); OUT.progress.jsonl beside it")
    p.add_argument("--problems", type=int, default=100, help="generated problems (the first N of the seed's list)")
    p.add_argument("--k", type=int, default=4, help="replies per problem: one greedy and k-1 sampled")
    p.add_argument("--per-problem", type=int, default=2, help="passing replies kept per problem (distinct code)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--max-tokens", type=int, default=384)
    p.add_argument("--window", type=int, default=8, help="problems in flight at once")
    p.add_argument("--give-up", type=int, default=0, metavar="N",
                   help="sample no more problems of a family whose first N had no passing reply (0: never)")
    p.add_argument("--seed", type=int, default=0, help="problem seed and sampling seed")
    p.add_argument("--base", default=None, help=BASE_HELP)
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    import torch

    from macaronic.datagen.coding import problems, verify
    from macaronic.engine.bases import registered
    from macaronic.engine.llm import load_llm
    from macaronic.train.rft import sample_coding, summary

    if a.threads:
        torch.set_num_threads(a.threads)
    probs = problems(a.problems, a.seed)
    bad = [e for pr in probs for e in verify(pr)]
    if bad:
        print("sample-coding: problems that fail their own check:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    t0 = time.time()
    llm = load_llm(a.base, [])
    try:
        base = registered(a.base) or str(a.base)
        rows = sample_coding(llm, probs, a.out, k=a.k, per_problem=a.per_problem, temperature=a.temperature,
                             top_p=a.top_p, max_tokens=a.max_tokens, seed=a.seed, window=a.window, base=base,
                             progress=not a.no_progress, give_up=a.give_up)
    finally:
        llm.close()
    for key in ("family", "style"):
        for name, s in summary(rows, key).items():
            print(f"{key} {name}: {s['passed']}/{s['replies']} replies pass ({s['pass_rate']:.2f}), greedy "
                  f"{s['greedy']}/{s['problems']}, solved {s['solved']}/{s['problems']}", file=sys.stderr)
    tot = summary([{**r, "all": "all"} for r in rows], "all").get("all", {})
    print(f"sample-coding: {sum(r['kept'] for r in rows)} replies kept from {len(rows)} problems, pass rate "
          f"{tot.get('pass_rate', 0):.3f}, greedy {tot.get('greedy_rate', 0):.3f}; {time.time() - t0:.0f} s this run "
          f"-> {a.out}", file=sys.stderr)
    return 0
