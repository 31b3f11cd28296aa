"""`macaronic train distill`: rejection-sampled coding data, the bare base's own passing solutions to
train-family coding tasks (train/distill.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from macaronic.train.distill import DATA, sample, select, train_prompts, write
from macaronic.train.distill import __doc__ as DISTILL_DOC


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic train distill", description=DISTILL_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=DATA)
    p.add_argument("--per-family", type=int, default=10, help="distinct train prompts per family")
    p.add_argument("--samples", type=int, default=3, help="sampled replies per prompt (plus one greedy)")
    p.add_argument("--per-prompt", type=int, default=3, help="passing solutions kept per prompt")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0, help="task seed and sampling seed")
    p.add_argument("--base", default="smollm2-135m-instruct",
                   help="a registered base or model directory (default smollm2-135m-instruct: its coding_distill data)")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    import torch

    from macaronic.engine.llm import load_llm

    if a.threads:
        torch.set_num_threads(a.threads)
    tasks = train_prompts(a.per_family, a.seed)
    t0 = time.time()
    llm = load_llm(a.base, [])
    try:
        recs = sample(llm, tasks, a.samples, temperature=a.temperature, seed=a.seed)
    finally:
        llm.close()
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
