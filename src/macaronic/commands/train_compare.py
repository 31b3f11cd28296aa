"""`macaronic train compare modes|grpo|md`: the two training comparisons of issue 6 (train/compare.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from macaronic.train.compare import GRPO_PROMPTS, GRPO_ROLE, ROOT, SFT_SEED, comparable, grpo, md, modes
from macaronic.train.compare import __doc__ as COMPARE_DOC


def main(argv: list[str]) -> int:
    argv = list(argv)
    p = argparse.ArgumentParser(prog="macaronic train compare", description=COMPARE_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("modes", help="turn vs full vs tuned turn, per role, on dev families")
    m.add_argument("--roles", default="coding,agent")
    m.add_argument("--work", type=Path, default=Path("runs/modes"))
    m.add_argument("--tuned-rank", type=int, default=16)
    m.add_argument("--tuned-steps", type=float, default=2.0, help="tuned steps = this x the shipped steps")
    m.add_argument("--n", type=int, default=None, help="dev-family tasks per role (default 24 coding, 20 agent)")
    m.add_argument("--n-heldout", type=int, default=20, help="unseen train-family instances per role")
    m.add_argument("--seed", type=int, default=0, help="task seed")
    m.add_argument("--engine-json", type=Path, default=ROOT / "docs/bench/engine.json")
    m.add_argument("--json", type=Path, required=True, metavar="FILE", help="write the rows here")
    m.add_argument("--reuse", type=Path, default=None,
                   help="take rows of the same labels on identical tasks from this JSON instead of rescoring")
    m.add_argument("--extra", action="append", default=[], metavar="LABEL=DIR",
                   help="also score this adapter (for the role its directory name contains), e.g. "
                   "grpo=runs/grpo/agent-grpo, so every variant is scored in one process on the same tasks")
    g = sub.add_parser("grpo", help="GRPO vs continued SFT from the shipped adapter, same wall time")
    g.add_argument("--role", default=GRPO_ROLE, choices=comparable())
    g.add_argument("--work", type=Path, default=Path("runs/grpo"))
    g.add_argument("--steps", type=int, default=20, help="GRPO steps")
    g.add_argument("--prompts", type=int, default=GRPO_PROMPTS)
    g.add_argument("--per-step", type=int, default=2)
    g.add_argument("--group", type=int, default=4)
    g.add_argument("--max-new", type=int, default=48)
    g.add_argument("--grpo-lr", type=float, default=5e-4, help="GRPO learning rate (the shipped SFT used 1e-3)")
    g.add_argument("--sft-lr", type=float, default=3e-4)
    g.add_argument("--sft-seed", type=int, default=SFT_SEED,
                   help="data seed of the continued SFT: train-family instances from this seed on (the shipped "
                   "adapter used 0..; GRPO's prompts are 1000..)")
    g.add_argument("--sft-steps", type=int, default=120,
                   help="the continued SFT's schedule length; it stops at GRPO's wall time (--max-seconds)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--n", type=int, default=None, help="dev-family tasks (default 24 coding, 20 agent)")
    g.add_argument("--n-heldout", type=int, default=20)
    g.add_argument("--seed-eval", type=int, default=0)
    g.add_argument("--reuse", type=Path, default=Path("docs/bench/train-modes.json"),
                   help="take rows of the same labels on identical tasks from the modes JSON (scored there, in one "
                   "process with the mode variants) instead of rescoring")
    g.add_argument("--json", type=Path, required=True, metavar="FILE", help="write the rows here")
    d = sub.add_parser("md", help="render both JSONs as markdown tables (to stdout, or between markers)")
    d.add_argument("--modes-json", type=Path, default=Path("docs/bench/train-modes.json"))
    d.add_argument("--grpo-json", type=Path, default=Path("docs/bench/train-grpo.json"))
    d.add_argument("--write", type=Path, default=None,
                   help="replace the text between <!-- train:tables:start/end --> in this file (the prose around stays)")
    a = p.parse_args(argv)
    a.argv = argv[1:]
    return {"modes": modes, "grpo": grpo, "md": md}[a.what](a)
