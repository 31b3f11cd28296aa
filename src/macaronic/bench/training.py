"""Training throughput: LoRA SFT on this machine, ours (`macaronic train`, train/sft.py) against the
field's usual recipe, transformers' `Trainer` on a PEFT model, on the same examples and settings.

The examples are one generator's (the agent's data engine by default: tool schemas in the system
prompt, a history, one answered turn), encoded once with the training rule; both sides train one
epoch over exactly the same examples (`steps x batch` of them), rank, alpha, targets, learning rate,
warm-up, AdamW, clipping at 1.0, loss on the same target tokens. What differs is how the step is
computed:

- **transformers + PEFT**: `Trainer`, one example per forward and `gradient_accumulation_steps` =
  batch (no padding: on a CPU a padded batch only adds work, `padded_over_real` says how much, and
  its logits at every position of every example cost gigabytes), labels -100 outside the targets,
  the model's own loss (logits at every position).
- **ours, full**: one example at a time (no padding), the LM head only where a target is predicted,
  the adapter on every token: the same function as the Trainer's.
- **ours, turn**: the rule the specialists are trained with: the history (everything before the
  turn's user header) is the bare base's, computed once per distinct history with no gradient and
  cached; the adapter and the graph start at the turn.

Each row at fp32 and at bf16 autocast (`--autocast bfloat16`, the Trainer's `bf16=True`). Time is
the optimizer steps' wall time (the Trainer's from its step-begin to step-end callbacks; model
loading and data preparation left out on both sides), over one epoch: examples/s, and tokens/s
counting every token of each example (the same examples for every row, so the ratios are time ratios).
`macaronic bench --only training`."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

GENERATOR = "agent_engine"
SEED = 0


def examples(base_dir: Path, base_name: str | None, n: int, generator: str = GENERATOR, max_len: int = 2048,
             max_turn: int = 512):
    """`n` encoded examples of `generator` that fit, as `macaronic train` filters them."""
    from macaronic.datagen.examples import encode_all
    from macaronic.engine.llm import load_tokenizer
    from macaronic.train.builders import build

    tok = load_tokenizer(base_dir)
    out, k = [], n
    while len(out) < n:
        enc, _ = encode_all(tok, build(generator, k, SEED, base_name), max_len)
        out = [e for e in enc if len(e.ids) - e.turn_start <= max_turn]
        k *= 2
    return tok, out[:n]


def _ours(cfg, encoded, base_dir: Path, work: Path) -> list[float]:
    from macaronic.train.sft import train

    seconds = []
    train(cfg, encoded, work, base_dir=base_dir, progress=False, on_step=lambda rec: seconds.append(rec["seconds"]))
    return seconds


def _hf(cfg, encoded, base_dir: Path, work: Path, tokenizer) -> list[float]:
    """transformers' Trainer on a PEFT model: the same LoRA, optimizer and schedule shape."""
    import torch
    from transformers import DataCollatorForSeq2Seq, Trainer, TrainerCallback, TrainingArguments

    from macaronic.train.sft import load_model

    pm = load_model(cfg, base_dir)
    pm.base_model.model.config.use_cache = False  # training builds no K/V cache (ours asks for one only for a history)
    rows = [{"input_ids": list(e.ids), "attention_mask": [1] * len(e.ids),
             "labels": [t if y else -100 for t, y in zip(e.ids, e.labels)]} for e in encoded]
    seconds: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            seconds.append(time.perf_counter() - self.t0)

    args = TrainingArguments(output_dir=str(work), per_device_train_batch_size=1, gradient_accumulation_steps=cfg.batch,
                             max_steps=cfg.steps,
                             learning_rate=cfg.lr, warmup_steps=cfg.warmup, lr_scheduler_type="cosine",
                             weight_decay=cfg.weight_decay, adam_beta2=0.99, max_grad_norm=1.0, optim="adamw_torch",
                             bf16=cfg.autocast == "bfloat16", use_cpu=True, save_strategy="no", report_to=[],
                             logging_strategy="no", dataloader_num_workers=0, remove_unused_columns=False,
                             seed=cfg.seed, disable_tqdm=True)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    tokenizer.pad_token_id = pad
    collator = DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100)
    threads = torch.get_num_threads()  # the Trainer may change it; the row's thread count is ours
    trainer = Trainer(model=pm, args=args, train_dataset=rows, data_collator=collator, callbacks=[Clock()])
    torch.set_num_threads(threads)
    with contextlib.redirect_stdout(io.StringIO()):  # its closing metrics dict: the bench prints its own table
        trainer.train()
    return seconds


def padded_tokens(encoded, batch: int, order: list[int]) -> int:
    """Tokens a padded batcher computes over `order`: each batch padded to its longest example."""
    total = 0
    for i in range(0, len(order), batch):
        lens = [len(encoded[j].ids) for j in order[i:i + batch]]
        total += max(lens) * len(lens)
    return total


RECIPES = ("hf", "ours-full", "ours-turn")


def run(base_name: str | None, work: Path, steps: int = 6, batch: int = 4, rank: int = 8, threads: int | None = None,
        precisions: tuple[str, ...] = ("none", "bfloat16"), reps: int = 1, generator: str = GENERATOR,
        progress=None) -> dict:
    """Every recipe at every precision, `reps` times interleaved; the median step time per row."""
    import statistics

    import torch

    from macaronic.engine.base import resolve_base
    from macaronic.train.sft import TrainConfig, step_indices

    if threads:
        torch.set_num_threads(threads)
    base_dir = resolve_base(base_name)
    n = steps * batch
    tok, encoded = examples(base_dir, base_name, n, generator)
    tokens = [len(e.ids) for e in encoded]  # one epoch: every recipe trains each example once
    times: dict[tuple[str, str], list[float]] = {}
    for rep in range(reps):
        for prec in precisions:
            for recipe in RECIPES:
                cfg = TrainConfig(role="bench", mode="turn" if recipe == "ours-turn" else "full", rank=rank,
                                  alpha=2.0 * rank, steps=steps, batch=batch, lr=2e-4, warmup=1, seed=SEED,
                                  save_every=0, base=base_name, autocast=prec, max_turn=10**6)
                where = work / f"{recipe}-{prec}-{rep}"
                secs = _hf(cfg, encoded, base_dir, where, tok) if recipe == "hf" else _ours(cfg, encoded, base_dir, where)
                if len(secs) != steps:
                    raise RuntimeError(f"{recipe} ran {len(secs)} of {steps} steps")
                times.setdefault((recipe, prec), []).append(sum(secs))
                if progress:
                    progress()
    order = [i for step in range(steps) for i in step_indices(n, TrainConfig(role="bench", steps=steps, batch=batch,
                                                                             seed=SEED), step)]
    rows = []
    for prec in precisions:
        hf_s = statistics.median(times[("hf", prec)])
        for recipe in RECIPES:
            s = statistics.median(times[(recipe, prec)])
            rows.append({"recipe": recipe, "precision": "fp32" if prec == "none" else "bf16 autocast",
                         "seconds": round(s, 2), "examples_per_s": round(n / s, 3),
                         "tokens_per_s": round(sum(tokens) / s, 1),
                         "over_hf": round(hf_s / s, 2), "runs_s": [round(x, 2) for x in times[(recipe, prec)]]})
    return {"base": base_name, "generator": generator, "examples": n, "steps": steps, "batch": batch, "rank": rank,
            "threads": torch.get_num_threads(), "reps": reps,
            "tokens_mean": round(sum(tokens) / n, 1), "history_mean": round(sum(e.turn_start for e in encoded) / n, 1),
            "targets_mean": round(sum(e.n_targets for e in encoded) / n, 1),
            "padded_over_real": round(padded_tokens(encoded, batch, order) / sum(tokens), 3),
            "rows": rows}


def markdown(r: dict) -> list[str]:
    out = [f"LoRA SFT on `{r['base']}`, one epoch of {r['examples']} `{r['generator']}` examples ({r['steps']} steps x "
           f"{r['batch']}, rank {r['rank']}, all 7 projections, {r['threads']} threads; examples average "
           f"{r['tokens_mean']} tokens, {r['history_mean']} of them history before the turn, {r['targets_mean']} "
           f"targets). Time: the optimizer steps of the epoch, median of {r['reps']}. transformers + PEFT: `Trainer`, "
           f"one example per forward with gradient accumulation (no padding; padded batches of {r['batch']} would "
           f"compute {r['padded_over_real']}x the tokens), the model's own loss. "
           "Ours, full: no padding, the LM head only at targets. Ours, turn: the history the bare base's, cached, "
           "the adapter from the turn on (how the specialists train). Goal (issue 40): at least 2x.", "",
           "| precision | recipe | examples/s | tokens/s | seconds | over transformers + PEFT |",
           "|---|---|---:|---:|---:|---:|"]
    names = {"hf": "transformers + PEFT", "ours-full": "ours, full", "ours-turn": "ours, turn"}
    for row in r["rows"]:
        out.append(f"| {row['precision']} | {names[row['recipe']]} | {row['examples_per_s']} | {row['tokens_per_s']:,} | "
                   f"{row['seconds']} | {row['over_hf']}x |")
    out += ["", "`macaronic.bench.training`.", ""]
    return out
