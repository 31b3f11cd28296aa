"""The agent warm start of 2026-12-05 (eighth session; docs/LOG.md, issue 36): the agent engine's
chained requests (`macaronic.datagen.agent.CHAINS`: two or three things asked in one message, done one
call after another, each record looked up first, one reply that says what each step did) plus rows
replayed from the shipped agent's own training file (`src/macaronic/specialists/data/179a762f…jsonl`),
shuffled, written to OUT. The shipped agent makes one call a turn where BFCL's multi-turn ground
truth chains two to four; the engine's default mix has few chains longer than two calls.

    .venv/bin/python scripts/agent_chains_warm.py runs/agent-chains/data.jsonl --chains 160 --replay 240
    # sha256 e840af16…; measured by scripts/agent_chains_compare.py, not shipped (parallel_multiple
    # fell from 0.750 to 0.400: every chained step made one call). The ninth session's run, with the
    # `together` pattern too (independent lookups made together, then the writes together), same
    # training command with runs/agent-together: also not shipped (all 120 single-turn −0.033):
    #   ... runs/agent-together/data.jsonl --chains 160 --patterns sequence,together --replay 240
    #   # sha256 4a156222…
    .venv/bin/macaronic train agent --data runs/agent-chains/data.jsonl --base qwen2.5-coder-0.5b \\
      --out runs/agent-chains/out --mode turn --rank 8 --steps 100 --batch 4 --lr 2e-4 --max-turn 768 \\
      --save-every 10 --threads 2 --seed 0 \\
      --init-adapter src/macaronic/specialists/qwen2.5-coder-0.5b/agent
"""

from __future__ import annotations

import argparse
import random

from macaronic.datagen.agent import CHAINS, examples
from macaronic.datagen.examples import read_jsonl, write_jsonl
from macaronic.engine.adapters import recorded_data
from macaronic.engine.llm import shipped_adapters_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--chains", type=int, default=160, help="chained-request examples")
    ap.add_argument("--seed", type=int, default=0, help="the agent engine's seed")
    ap.add_argument("--patterns", default="sequence",
                    help=f"comma-separated chained patterns, of {', '.join(CHAINS)} (the run of record: sequence)")
    ap.add_argument("--replay", type=int, default=240, help="rows drawn (seeded) from the shipped agent's training file")
    a = ap.parse_args()
    src = recorded_data(shipped_adapters_dir("qwen2.5-coder-0.5b") / "agent")
    if src is None:
        ap.error("the shipped agent's training file is not in the package")
    replay = read_jsonl(src)
    if a.replay > len(replay):
        ap.error(f"--replay {a.replay}: {src.name} holds {len(replay)} rows")
    random.Random("replay:chains").shuffle(replay)
    patterns = tuple(a.patterns.split(","))
    if not set(patterns) <= set(CHAINS):
        ap.error(f"--patterns {a.patterns}: choose from {', '.join(CHAINS)}")
    rows = examples(a.chains, a.seed, patterns) + replay[:a.replay]
    random.Random(0).shuffle(rows)
    write_jsonl(a.out, rows)
    print(f"{a.chains} chained-request examples + {a.replay} replayed from {src.name} -> {a.out}")


if __name__ == "__main__":
    main()
