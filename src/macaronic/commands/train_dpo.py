"""`macaronic train dpo ROLE`: preference tuning (DPO) of one specialist's LoRA on chosen/rejected replies.

    macaronic train dpo chat --pairs chat_engine --out runs/chat-dpo --activation assistant --steps 144
    macaronic train dpo chat --data pairs.jsonl --out runs/chat-dpo --beta 0.1

A pair is a prompt (the messages up to the user turn) and two replies to it, `chosen` over `rejected`
(JSONL: {"messages": [...], "chosen": "...", "rejected": "..."}, trl's field names). The reference
model is the bare base. The adapter modes, activation, schedule, checkpoints (`--resume`), warm start
and saved files are `macaronic train`'s; DIR/pairs.jsonl holds the exact pairs and DIR/history.jsonl
the loss, the reward margin and the share of pairs ranked right, per step.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from macaronic.engine.bases import BASE_HELP


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="macaronic train dpo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", help="the specialist's role (chat, agent, coding, genui or a new name)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--pairs", help="built-in pair generators, comma-separated (their pairs concatenated): "
                     "chat_engine (the chat engine's kept reply over the base's own greedy reply that failed a check: "
                     "macaronic train sample-chat), chat_onpolicy (the same from a chat adapter's own replies: "
                     "sample-chat --adapter)")
    src.add_argument("--data", type=Path, help="JSONL of {\"messages\": [...], \"chosen\": str, \"rejected\": str}")
    p.add_argument("--out", type=Path, required=True, help="output adapter directory")
    p.add_argument("--beta", type=float, default=0.1, help="DPO's β: how far from the bare base the adapter may go")
    p.add_argument("--sft-weight", type=float, default=0.0,
                   help="add this x the chosen reply's mean token cross-entropy (0: DPO alone)")
    p.add_argument("--mode", choices=("turn", "full"), default="turn", help="as in macaronic train")
    p.add_argument("--activation", choices=("user", "assistant"), default="user",
                   help="with --mode turn: the adapter switches on at the user header or at the reply's assistant "
                   "header (then the role's instruction is left out, as the served pair leaves it out)")
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=4, help="pairs per optimizer step")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--max-turn", type=int, default=None,
                   help="skip pairs whose turn (either reply) is longer (default: the role's, as macaronic train)")
    p.add_argument("--max-len", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop-after", type=int, default=0, metavar="N", help="stop after N steps (the schedule spans --steps)")
    p.add_argument("--save-every", type=int, default=25, help="checkpoint period in steps (0: never)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint")
    p.add_argument("--init-adapter", type=Path, default=None, metavar="DIR",
                   help="warm start from this adapter (the reference stays the bare base)")
    p.add_argument("--base", default=None, help=BASE_HELP)
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0 = torch's default)")
    p.add_argument("--autocast", choices=("none", "bfloat16"), default="none", help="as in macaronic train")
    p.add_argument("--description", default="")
    p.add_argument("--no-progress", action="store_true")
    return p


def load_pairs(args) -> tuple[list, str]:
    from macaronic.train.builders import PAIRS, at_answer
    from macaronic.train.dpo import Pair, pair_from_dict

    if args.data:
        pairs = []
        for n, line in enumerate(args.data.read_text().splitlines(), 1):
            if line.strip():
                try:
                    pairs.append(pair_from_dict(json.loads(line), args.role))
                except (ValueError, json.JSONDecodeError) as e:
                    raise ValueError(f"{args.data}:{n}: {e}") from None
        source = f"file:{args.data.name}"
    else:
        names = [n.strip() for n in args.pairs.split(",") if n.strip()]
        bad = [n for n in names if n not in PAIRS]
        if bad or not names:
            raise ValueError(f"unknown pair generator {', '.join(bad) or repr(args.pairs)}; have {sorted(PAIRS)}")
        pairs = [p for n in names for p in PAIRS[n](None, args.seed)]
        source = f"pairs:{','.join(names)}"
    if args.activation == "assistant":
        pairs = [Pair(*at_answer([p.chosen, p.rejected], args.role), p.source) for p in pairs]
    return pairs, source


def run(args) -> Path:
    import os

    from macaronic.commands.train import native_bf16, prior_history, role_defaults
    from macaronic.datagen.examples import encode_all, manifest_hash, user_marker
    from macaronic.engine.base import resolve_base
    from macaronic.engine.llm import assistant_marker_ids, load_tokenizer
    from macaronic.train import dpo
    from macaronic.train.output import write_adapter
    from macaronic.train.sft import TrainConfig

    if args.autocast == "bfloat16" and not native_bf16():
        print("macaronic train dpo: no native bf16 on this CPU: training in fp32 (--autocast none)", file=sys.stderr)
        args.autocast = "none"
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("train dpo runs in one process (no torchrun)")
    if args.beta <= 0:
        raise ValueError(f"--beta must be positive, got {args.beta}")
    args.max_turn = args.max_turn or role_defaults(args.role)[1]
    base_dir = resolve_base(args.base)
    tok = load_tokenizer(base_dir)
    pairs, source = load_pairs(args)
    enc = []
    for p in pairs:
        e, dropped = encode_all(tok, [p.chosen, p.rejected], args.max_len)
        if not dropped and all(len(x.ids) - x.turn_start <= args.max_turn for x in e):
            enc.append((e[0], e[1]))
    if not enc:
        raise ValueError(f"none of the {len(pairs)} pairs fits --max-len {args.max_len} / --max-turn {args.max_turn}")
    cfg = TrainConfig(role=args.role, mode=args.mode, activation=args.activation, rank=args.rank,
                      alpha=args.alpha or 2.0 * args.rank, steps=args.steps, batch=args.batch, lr=args.lr,
                      max_len=args.max_len, max_turn=args.max_turn, seed=args.seed, save_every=args.save_every,
                      save_dtype=args.dtype, base=args.base, description=args.description, threads=args.threads,
                      init_adapter=str(args.init_adapter) if args.init_adapter else None, stop_after=args.stop_after,
                      autocast=args.autocast)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "pairs.jsonl").open("w") as f:
        for p in pairs:
            f.write(json.dumps(p.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    print(f"macaronic train dpo: {len(enc)} of {len(pairs)} pairs fit (max_len {args.max_len}, max_turn "
          f"{args.max_turn}); β {args.beta}, mode {cfg.mode}{' at the assistant header' if cfg.activation == 'assistant' else ''}, "
          f"rank {cfg.rank}, {cfg.steps} steps x {cfg.batch} pairs", file=sys.stderr)
    hist_path = out / "history.jsonl"
    prior = prior_history(out, args.resume)

    def log(rec):
        with hist_path.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    pm, history = dpo.train(cfg, enc, out, beta=args.beta, sft_weight=args.sft_weight, resume=args.resume,
                            base_dir=base_dir, progress=not args.no_progress, on_step=log)
    history = prior + history
    examples = [x for p in pairs for x in (p.chosen, p.rejected)]
    data = {"source": source, "objective": {"dpo": {"beta": args.beta, "sft_weight": args.sft_weight}},
            "manifest_sha256": manifest_hash(examples), "examples": len(examples), "pairs": len(pairs),
            "used": len(enc), "target_tokens": sum(c.n_targets + r.n_targets for c, r in enc)}
    marker = assistant_marker_ids(tok) if cfg.activation == "assistant" else user_marker(tok)
    write_adapter(out, pm, cfg, base_dir, marker, data, history, method="dpo")
    print(f"macaronic train dpo: wrote {out}", file=sys.stderr)
    return out


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"macaronic train dpo: error: {e}", file=sys.stderr)
        return 2
    return 0
