"""`macaronic train grpo ROLE --init DIR --out DIR`: GRPO on a role's train families, starting
from an SFT adapter (or from zero), rewards from the role's grader:

    coding  fraction of the task's unit tests passed (sandboxed)
    genui   0.5 x L1 validity + 0.5 x L2 content coverage
    agent   first tool call: 1 for the gold call, 0.5 for the gold tool with other arguments, 0.25
            for any call the harness parser accepts (a known tool, valid arguments), else 0
    chat    the chat suite's check score
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from macaronic.engine.bases import BASE_HELP


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic train grpo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role")
    p.add_argument("--init", type=Path, default=None, help="SFT adapter to start from (same rank)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mode", choices=("turn", "full"), default=None, help="default: the init adapter's mode, else turn")
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--per-step", type=int, default=2)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--base", default=None, help=BASE_HELP)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    from dataclasses import replace

    import torch

    from macaronic.engine.base import resolve_base
    from macaronic.engine.llm import load_tokenizer
    from macaronic.datagen.examples import user_marker
    from macaronic.train.grpo import GRPOConfig, grpo
    from macaronic.train.output import write_adapter
    from macaronic.train.rollouts import prompts_for
    from macaronic.train.sft import TrainConfig, init_from, load_model

    torch.set_num_threads(a.threads) if a.threads else None
    base_dir = resolve_base(a.base)
    tok = load_tokenizer(base_dir)
    mode = a.mode or (json.loads((a.init / "macaronic.json").read_text()).get("mode", "turn") if a.init else "turn")
    tcfg = TrainConfig(role=a.role, mode=mode, rank=a.rank, alpha=2.0 * a.rank, steps=a.steps, lr=a.lr, seed=a.seed)
    pm = load_model(tcfg, base_dir)
    if a.init:
        init_from(pm, a.init)
    prompts = prompts_for(a.role, tok, a.prompts, a.seed)
    cfg = GRPOConfig(steps=a.steps, prompts_per_step=a.per_step, group=a.group, max_new=a.max_new, lr=a.lr,
                     beta=a.beta, mode=mode, seed=a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    hist = grpo(pm, prompts, cfg, tok, on_step=lambda r: (a.out / "history.jsonl").open("a").write(json.dumps(r) + "\n"))
    history = [{"step": h["step"], "loss": -h["reward"], "seconds": h["seconds"]} for h in hist]
    write_adapter(a.out, pm, replace(tcfg, save_dtype="bfloat16"), base_dir, user_marker(tok),
                  {"source": f"grpo:{a.role}", "prompts": len(prompts)}, history,
                  extra={"grpo": {"config": cfg.__dict__, "init": str(a.init) if a.init else None,
                                  "reward_first": hist[0]["reward"], "reward_last": hist[-1]["reward"]}})
    print(f"macaronic train grpo: wrote {a.out}", file=sys.stderr)
    return 0
