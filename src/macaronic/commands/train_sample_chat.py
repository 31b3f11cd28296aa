"""`macaronic train sample-chat`: rejection-sampled chat data, the bare base's own replies to the chat
engine's prompts that pass every verifier (train/chat_rs.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from macaronic.engine.bases import BASE_HELP
from macaronic.train.chat_rs import DATA
from macaronic.train.chat_rs import __doc__ as CHAT_RS_DOC


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic train sample-chat", description=CHAT_RS_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=DATA, help="JSONL to append to (rows already there are skipped)")
    p.add_argument("--prompts", type=int, default=100, help="prompts of the seeded stream to cover (0..N-1)")
    p.add_argument("--k", type=int, default=4, help="replies per prompt: one greedy and k-1 sampled")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--max-tokens", type=int, default=300, help="a reply cut at this cap fails (check 'complete')")
    p.add_argument("--batch", type=int, default=4, help="prompts in flight at once")
    p.add_argument("--seed", type=int, default=0, help="prompt seed and sampling seed")
    p.add_argument("--base", default=None, help=BASE_HELP)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    if a.k < 1 or a.prompts < 0:
        p.error("--k must be at least 1 and --prompts at least 0")
    import torch

    from macaronic.contract.opening import progress
    from macaronic.datagen.chat import prompts
    from macaronic.engine.llm import load_llm
    from macaronic.train.chat_rs import read, run, summary, todo

    if a.threads:
        torch.set_num_threads(a.threads)
    wanted = prompts(a.prompts, a.seed)
    left = len(todo(wanted, read(a.out)))
    t0 = time.time()
    written = 0
    if left:
        llm = load_llm(a.base, [])
        try:
            with progress(a.quiet) as bar:
                task = bar.add_task("sample-chat", total=left)
                kept = [0]

                def tick(row):
                    kept[0] += row["reply"] is not None
                    bar.update(task, advance=1, description=f"sample-chat kept {kept[0]}")

                written = run(llm, wanted, a.out, a.k, on_row=tick, base=a.base, temperature=a.temperature,
                              max_tokens=a.max_tokens, seed=a.seed, batch=a.batch)
        finally:
            llm.close()
    dt = time.time() - t0
    s = summary(read(a.out))
    for c, v in s["categories"].items():
        print(f"  {c:<10} {v['kept']}/{v['prompts']} prompts kept", file=sys.stderr)
    for kind, v in s["kinds"].items():
        print(f"  {kind:<13} {v['passed']}/{v['samples']} samples pass ({v['rate']:.2f})", file=sys.stderr)
    per = f", {dt / written:.1f} s per prompt" if written else ""
    print(f"sample-chat: {written} new prompts ({len(wanted) - left} already done) in {dt:.0f} s{per}; "
          f"{s['kept']}/{s['prompts']} prompts kept (repaired: {s['repaired'] or 'none'}) in {a.out}", file=sys.stderr)
    return 0
