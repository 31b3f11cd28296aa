"""`macaronic train ROLE`: LoRA SFT of one specialist from a generator or a JSONL file.

    macaronic train agent --generator agent --out runs/agent --steps 100
    macaronic train chat --data my.jsonl --out runs/chat --mode full --rank 16
    torchrun --nproc_per_node 2 -m macaronic.cli train coding --generator coding --out runs/coding

Writes DIR/adapter_config.json, DIR/adapter_model.safetensors, DIR/macaronic.json (provenance),
DIR/data.jsonl (the exact examples) and DIR/history.jsonl (loss per step); checkpoints go to
DIR/checkpoint every --save-every steps and `--resume` continues from there. Other stages, each
with its own --help:

    macaronic train grpo ROLE ...          the RL stage (GRPO) from an SFT adapter
    macaronic train dpo ROLE ...           preference tuning (DPO) on chosen/rejected replies
    macaronic train compare modes|grpo|md  the adapter-mode and SFT-vs-GRPO comparisons (docs/BENCHMARKS.md)
    macaronic train check ...              trained specialists vs the bare base on dev-family prompts
    macaronic train distill ...            regenerate the coding_distill data (the base's passing solutions)
    macaronic train sample-chat ...        the chat_engine data (the base's replies that pass the chat engine's checks)
    macaronic train sample-coding ...      RFT data from the coding engine (the base's passing replies)
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from macaronic.engine.bases import BASE_HELP



def role_defaults(role: str) -> tuple[str, int]:
    """(generator, max_turn tokens) from the role's registry entry: a turn that does not fit is
    skipped. A name the registry does not know: the generator of that name, 384 tokens."""
    from macaronic.specialist import get

    try:
        s = get(role)
    except (KeyError, ValueError):
        return role, 384
    return s.engine or role, s.max_turn

STAGES = ("grpo", "dpo", "compare", "check", "distill", "sample-chat", "sample-coding")  # `macaronic train STAGE ...`: commands/train_STAGE.py


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="macaronic train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", help="the specialist's role (chat, agent, coding, genui or a new name)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--generator", help="built-in data generator: chat, chat_engine (the base's own replies that "
                     "passed the chat engine's checks: macaronic train sample-chat), route, agent, agent_grounded (agent "
                     "episodes, every other one under a random tool renaming), agent_engine (generated tool "
                     "worlds, verified by execution, a quarter agent_grounded), agent_engine_chains (agent_engine with a quarter "
                     "requests of two or three steps done call after call), agent_functions (calculator and converter tools: "
                     "a call when a listed tool computes what is asked, none when only its neighbours are), coding, coding_distill, coding_engine (the base's passing replies to generated problems, train sample-coding), genui, genui_engine (requests that name values, "
                     "cards verified by schema, integrity and render; a quarter genui; the first nine intents), "
                     "genui_engine_wide (the same over every intent: media, decisions, profiles, modals too), "
                     "genui_engine_open (that, with button labels drawn from about 2,000, numbers and codes redrawn, "
                     "polls and named tabs), genui_engine_compose (that, three cards in five with the named buttons, text "
                     "fields or checkboxes the request adds to any intent), genui_engine_mix (that, with widgets of two to "
                     "four controls and a named button, some in other languages, and lists drawn as Lists), genui_engine_name "
                     "(that, with who or where a card is for, quoted titles, values said in a sentence, rows of "
                     "three buttons) "
                     "(default: the role's own)")
    src.add_argument("--data", type=Path, help="JSONL file of {\"messages\": [...]} conversations")
    p.add_argument("--out", type=Path, required=True, help="output adapter directory")
    p.add_argument("--mode", choices=("turn", "full", "upper"), default="turn",
                   help="turn: adapter only from the last user header on, history by the bare base "
                   "(exact KV reuse across switches); full: adapter on every token; upper: adapter on every "
                   "token in the top --top-k layers only (a switch recomputes those layers of the history)")
    p.add_argument("--activation", choices=("user", "assistant"), default="user",
                   help="with --mode turn: where the adapter switches on, at the latest user header (default) or at "
                   "the reply's assistant header (PEFT aLoRA's invocation point: the user message is the bare base's; "
                   "written to macaronic.json as `activation`)")
    p.add_argument("--top-k", type=int, default=0, metavar="K",
                   help="with --mode upper: LoRA in the top K layers only")
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=4, help="examples per optimizer step (global)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--examples", type=int, default=400, help="examples to generate (with --generator)")
    p.add_argument("--max-turn", type=int, default=None, help="skip examples whose current turn is longer")
    p.add_argument("--max-len", type=int, default=2048, help="skip examples longer than this in total")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=0.0,
                   help="stop once the steps took this many seconds (0: run all --steps; the lr schedule still "
                   "spans --steps)")
    p.add_argument("--stop-after", type=int, default=0, metavar="N",
                   help="stop after N steps (0: all --steps; the lr schedule still spans --steps): replays a run that "
                   "--max-seconds stopped, from its recorded steps_done")
    p.add_argument("--save-every", type=int, default=25, help="checkpoint period in steps (0: never)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint")
    p.add_argument("--init-adapter", type=Path, default=None, metavar="DIR",
                   help="warm start from this adapter directory (same rank and targets; --mode should match "
                   "its mode) instead of a fresh LoRA; the schedule and the optimizer start fresh")
    p.add_argument("--base", default=None, help=BASE_HELP)
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16",
                   help="dtype of the saved adapter weights")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per process (default 1: on a shared 2-core machine 2 threads "
                   "made a step 20x slower; 0 = torch's default)")
    p.add_argument("--autocast", choices=("none", "bfloat16"), default="none",
                   help="bfloat16: forward and backward under CPU bf16 autocast, LoRA weights and optimizer in fp32 "
                   "(about 1.8x faster on a CPU with AVX512-BF16 or AMX; none: exact fp32). On a CPU without "
                   "either, bf16 is emulated (a step 30x slower on an AVX2 core): training warns and runs fp32")
    p.add_argument("--description", default="", help="one line the router and UI show")
    p.add_argument("--no-progress", action="store_true")
    return p


def prior_history(out: Path, resume: bool, write: bool = True) -> list[dict]:
    """The per-step records a resumed run keeps (`out/history.jsonl` up to its checkpoint's step), so its
    provenance covers every step; the file is left holding just those (`write`): steps a killed run
    logged past its last checkpoint are done again, and a run that does not resume starts it empty."""
    hist_path = out / "history.jsonl"
    ckpt_state = out / "checkpoint" / "state.json"
    resumed_at = json.loads(ckpt_state.read_text())["step"] if resume and ckpt_state.exists() else 0
    prior = [r for r in (json.loads(line) for line in hist_path.read_text().splitlines() if line.strip())
             if r["step"] <= resumed_at] if resumed_at and hist_path.exists() else []
    if write and (resumed_at or (not resume and hist_path.exists())):
        hist_path.write_text("".join(json.dumps(r) + "\n" for r in prior))
    return prior


def native_bf16() -> bool:
    """Does this CPU compute bf16 natively (`engine.native.cpu_bf16`)? Imported here, not at the top:
    `macaronic train --help` loads no torch."""
    from macaronic.engine.native import cpu_bf16

    return cpu_bf16()


def load_examples(args) -> tuple[list, str]:
    """The examples and where they came from, laid out as the served pair renders them for this adapter
    (at the assistant header: no role instruction before the user turn, `builders.at_answer`)."""
    from macaronic.train.builders import at_answer, build
    from macaronic.datagen.examples import read_jsonl

    if args.data:
        examples, source = read_jsonl(args.data), f"file:{args.data.name}"
    else:
        gen = args.generator or role_defaults(args.role)[0]
        from macaronic.engine.bases import BASES

        base = args.base if args.base in BASES else None  # a model directory gets the default identity
        examples, source = build(gen, args.examples, args.seed, base), f"generator:{gen}"
    if args.activation == "assistant":
        examples = at_answer(examples, args.role)
    return examples, source


def run(args) -> Path:
    from macaronic.engine.base import resolve_base
    from macaronic.engine.llm import load_tokenizer
    from macaronic.datagen.examples import encode_all, manifest_hash, user_marker, write_jsonl
    from macaronic.engine.llm import assistant_marker_ids
    from macaronic.train.output import write_adapter
    from macaronic.train.sft import TrainConfig, dist_finish, dist_info, train

    rank, _ = dist_info()
    if args.autocast == "bfloat16" and not native_bf16():
        print("macaronic train: this CPU has no native bf16 (AVX512-BF16 or AMX), where bf16 autocast is "
              "emulated and a step ran 30x slower than fp32 (2-core AVX2 EPYC, docs/LOG.md 2026-12-05): "
              "training in fp32 instead (--autocast none)", file=sys.stderr)
        args.autocast = "none"
    base_dir = resolve_base(args.base)
    tok = load_tokenizer(base_dir)
    examples, source = load_examples(args)
    max_turn = args.max_turn or role_defaults(args.role)[1]
    encoded, too_long = encode_all(tok, examples, args.max_len)
    enc = [e for e in encoded if len(e.ids) - e.turn_start <= max_turn]
    cfg = TrainConfig(role=args.role, mode=args.mode, activation=args.activation, top_k=args.top_k, rank=args.rank,
                      alpha=args.alpha or 2.0 * args.rank,
                      steps=args.steps, batch=args.batch, lr=args.lr, max_len=args.max_len, max_turn=max_turn,
                      seed=args.seed, save_every=args.save_every, save_dtype=args.dtype, base=args.base,
                      description=args.description, threads=args.threads,
                      init_adapter=str(args.init_adapter) if args.init_adapter else None, max_seconds=args.max_seconds,
                      stop_after=args.stop_after, autocast=args.autocast)
    out = Path(args.out)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / "data.jsonl", examples)
        print(f"macaronic train: {len(enc)} of {len(examples)} examples fit (max_len {args.max_len}, "
              f"max_turn {max_turn}); mode {cfg.mode}{f' top-{cfg.top_k}' if cfg.top_k else ''}"
              f"{' at the assistant header' if cfg.activation == 'assistant' else ''}, rank {cfg.rank}, {cfg.steps} steps x {cfg.batch}",
              file=sys.stderr)
    hist_path = out / "history.jsonl"

    def log(rec):
        if rank == 0:
            with hist_path.open("a") as f:
                f.write(json.dumps(rec) + "\n")

    prior = prior_history(out, args.resume, write=rank == 0)
    pm, history = train(cfg, enc, out, resume=args.resume, base_dir=base_dir, progress=not args.no_progress,
                        on_step=log)
    history = prior + history
    if rank == 0:
        data = {"source": source, "manifest_sha256": manifest_hash(examples), "examples": len(examples),
                "used": len(enc), "target_tokens": sum(e.n_targets for e in enc)}
        marker = assistant_marker_ids(tok) if cfg.activation == "assistant" else user_marker(tok)
        write_adapter(out, pm, cfg, base_dir, marker, data, history)
        print(f"macaronic train: wrote {out}", file=sys.stderr)
    dist_finish()
    return out


def main(argv: list[str]) -> int:
    argv = list(argv)
    if argv and argv[0] in STAGES:
        return importlib.import_module(f"macaronic.commands.train_{argv[0].replace('-', '_')}").main(argv[1:])
    args = parser().parse_args(argv)
    try:
        run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"macaronic train: error: {e}", file=sys.stderr)
        return 2
    return 0

