"""`macaronic train distill`: rejection-sampled coding data, the bare base's own passing solutions to
train-family coding tasks (train/distill.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from macaronic.commands.sampling import base_llm, parser
from macaronic.engine.bases import SMALL_BASE
from macaronic.train.distill import DATA, sample, select, train_prompts, write
from macaronic.train.distill import __doc__ as DISTILL_DOC

FLAGS = (("--out", dict(type=Path, default=DATA)),
         ("--per-family", dict(type=int, default=10, help="distinct train prompts per family")),
         ("--samples", dict(type=int, default=3, help="sampled replies per prompt (plus one greedy)")),
         ("--per-prompt", dict(type=int, default=3, help="passing solutions kept per prompt")),
         ("--temperature", {}), ("--seed", {}),
         ("--base", dict(default=SMALL_BASE,
                         help=f"a registered base or model directory (default {SMALL_BASE}: its coding_distill data)")),
         ("--threads", {}))


def main(argv: list[str]) -> int:
    a = parser("distill", DISTILL_DOC, "task", FLAGS).parse_args(argv)
    tasks = train_prompts(a.per_family, a.seed)
    t0 = time.time()
    with base_llm(a.base, a.threads) as llm:
        recs = sample(llm, tasks, a.samples, temperature=a.temperature, seed=a.seed)
    kept = select(recs, a.per_prompt)
    write(a.out, kept)
    fams = sorted({t.family for t in tasks})
    for f in fams:
        rs = [r for r in recs if r["family"] == f]
        print(f"{f}: {sum(r['passed'] for r in rs)}/{len(rs)} replies pass, "
              f"{len({r['prompt'] for r in kept if r['family'] == f})} prompts kept", file=sys.stderr)
    print(f"distill: {len(kept)} solutions from {len(tasks)} prompts, {time.time() - t0:.0f} s -> {a.out}",
          file=sys.stderr)
    return 0
