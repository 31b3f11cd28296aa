"""`macaronic train sample-coding`: RFT data for the coding specialist, the bare base's own passing
replies to the coding engine's generated problems (train/rft.py, datagen/coding.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from macaronic.commands.sampling import base_llm, parser
from macaronic.train.rft import DATA
from macaronic.train.rft import __doc__ as RFT_DOC

FLAGS = (("--out", dict(type=Path, default=DATA, help="kept rows (JSONL); OUT.progress.jsonl beside it")),
         ("--problems", dict(type=int, default=100, help="generated problems (the first N of the seed's list)")),
         ("--k", {}),
         ("--per-problem", dict(type=int, default=2, help="passing replies kept per problem (distinct code)")),
         ("--temperature", {}), ("--top-p", dict(type=float, default=0.95)), ("--max-tokens", dict(default=384)),
         ("--window", dict(type=int, default=8, help="problems in flight at once")),
         ("--give-up", dict(type=int, default=0, metavar="N",
                            help="sample no more problems of a family whose first N had no passing reply (0: never)")),
         ("--seed", {}), ("--base", {}), ("--threads", dict(help="torch threads (0: torch's default)")),
         ("--no-progress", dict(action="store_true")))


def main(argv: list[str]) -> int:
    a = parser("sample-coding", RFT_DOC, "problem", FLAGS).parse_args(argv)
    from macaronic.datagen.coding import problems, verify
    from macaronic.engine.bases import registered
    from macaronic.train.rft import sample_coding, summary

    probs = problems(a.problems, a.seed)
    bad = [e for pr in probs for e in verify(pr)]
    if bad:
        print("sample-coding: problems that fail their own check:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    t0 = time.time()
    with base_llm(a.base, a.threads) as llm:
        rows = sample_coding(llm, probs, a.out, k=a.k, per_problem=a.per_problem, temperature=a.temperature,
                             top_p=a.top_p, max_tokens=a.max_tokens, seed=a.seed, window=a.window,
                             base=registered(a.base) or str(a.base), progress=not a.no_progress, give_up=a.give_up)
    for key in ("family", "style"):
        for name, s in summary(rows, key).items():
            print(f"{key} {name}: {s['passed']}/{s['replies']} replies pass ({s['pass_rate']:.2f}), greedy "
                  f"{s['greedy']}/{s['problems']}, solved {s['solved']}/{s['problems']}", file=sys.stderr)
    tot = summary([{**r, "all": "all"} for r in rows], "all").get("all", {})
    print(f"sample-coding: {sum(r['kept'] for r in rows)} replies kept from {len(rows)} problems, pass rate "
          f"{tot.get('pass_rate', 0):.3f}, greedy {tot.get('greedy_rate', 0):.3f}; {time.time() - t0:.0f} s this run "
          f"-> {a.out}", file=sys.stderr)
    return 0
