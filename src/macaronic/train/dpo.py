"""Preference tuning (DPO, Rafailov et al. 2023) of a LoRA specialist on (prompt, chosen, rejected) pairs.

The loss is the paper's sigmoid loss, -log σ(β · ((log π(c) − log π_ref(c)) − (log π(r) − log π_ref(r)))),
with log-probabilities summed over the reply's tokens, plus `sft_weight` × the chosen reply's mean
token cross-entropy (0 by default; RPO's anchor when set). The reference is the bare base: the same
model with the adapter off, computed once per reply before the first step. Replies are computed as
`sft.example_loss` computes them, under the same adapter modes: in `turn` mode the history is the
bare base's, cached, and the adapter applies from the user header or, with activation "assistant",
from the reply's assistant header (PEFT Activated LoRA's rule, which trl's DPOTrainer does not
follow; hence a loop of our own). Batches, schedule, checkpoints and resume are SFT's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from macaronic.datagen.examples import Encoded, Example


@dataclass(frozen=True)
class Pair:
    chosen: Example
    rejected: Example
    source: str = ""

    def to_dict(self) -> dict:
        """The JSONL form `--data` reads: the prompt's messages, then both replies (trl's field names)."""
        return {"messages": list(self.chosen.messages[:-1]), "chosen": self.chosen.messages[-1]["content"],
                "rejected": self.rejected.messages[-1]["content"], "role": self.chosen.role, "source": self.source}


def pair_from_dict(d: dict, role: str = "") -> Pair:
    """A pair from its JSONL form; a clear error when a field is missing or the replies are equal."""
    for k in ("messages", "chosen", "rejected"):
        if k not in d:
            raise ValueError(f"a preference pair needs 'messages', 'chosen' and 'rejected'; missing {k!r}")
    if not isinstance(d["chosen"], str) or not isinstance(d["rejected"], str):
        raise ValueError("'chosen' and 'rejected' must be strings (the assistant's reply)")
    if d["chosen"] == d["rejected"]:
        raise ValueError("'chosen' and 'rejected' are the same reply: the pair prefers nothing")
    msgs = tuple(d["messages"])
    if not msgs or msgs[-1].get("role") != "user":
        raise ValueError("a preference pair's messages must end with the user turn the replies answer")
    r = d.get("role") or role
    src = d.get("source", "")
    return Pair(Example((*msgs, {"role": "assistant", "content": d["chosen"]}), r, src),
                Example((*msgs, {"role": "assistant", "content": d["rejected"]}), r, src), src)


def reply_logp(pm, ex: Encoded, mode: str, cache, activation: str) -> tuple[torch.Tensor, int]:
    """(sum of the reply's token log-probabilities, its token count) under the adapter as it is."""
    from macaronic.train.sft import example_loss

    loss, n, _ = example_loss(pm, ex, mode, cache, activation)
    return -loss, n


def dpo_loss(pc: torch.Tensor, pr: torch.Tensor, rc: float, rr: float, beta: float) -> torch.Tensor:
    """The DPO sigmoid loss of one pair from policy (pc, pr) and reference (rc, rr) log-probabilities."""
    return -torch.nn.functional.logsigmoid(beta * ((pc - rc) - (pr - rr)))


def train(cfg, pairs: list[tuple[Encoded, Encoded]], out: Path, *, beta: float = 0.1, sft_weight: float = 0.0,
          resume: bool = False, base_dir: Path | None = None, progress: bool = True, on_step=None):
    """Run DPO; returns (peft model, history [{step, loss, dpo, margin, accuracy, lr, seconds}]). `cfg` is
    SFT's TrainConfig (its batch counts pairs). Checkpoints to out/checkpoint every cfg.save_every steps."""
    from macaronic.engine.base import resolve_base
    from macaronic.train.sft import (PrefixCache, init_from, load_checkpoint, load_model, lora_params, lr_at,
                                     optimizer_step, save_checkpoint, step_indices)

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if not pairs:
        raise ValueError("no preference pairs (all were filtered out?)")
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    base_dir = base_dir or resolve_base(cfg.base)
    pm = load_model(cfg, base_dir)
    if cfg.init_adapter:
        init_from(pm, cfg.init_adapter)
    params = [p for _, p in lora_params(pm)]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
    ckpt = Path(out) / "checkpoint"
    objective = {"beta": beta, "sft_weight": sft_weight}
    start_step = 0
    if resume and (ckpt / "state.json").exists():
        saved = json.loads((ckpt / "state.json").read_text()).get("dpo")
        if saved != objective:
            raise ValueError(f"{ckpt} was trained with {saved}, not {objective}: resume with the same --beta and "
                             f"--sft-weight, or start a new --out")
        start_step = load_checkpoint(ckpt, pm, opt)
    cache = PrefixCache(pm) if cfg.mode == "turn" else None
    amp = dict(device_type="cpu", dtype=torch.bfloat16, enabled=cfg.autocast == "bfloat16")
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(pairs), desc="DPO reference (the bare base)", dynamic_ncols=True)
    ref = []  # the bare base's log-probabilities, once (a resumed run computes the same numbers again)
    with torch.no_grad(), pm.disable_adapter():
        for c, r in pairs:
            with torch.autocast(**amp):
                ref.append((reply_logp(pm, c, cfg.mode, cache, cfg.activation)[0].item(),
                            reply_logp(pm, r, cfg.mode, cache, cfg.activation)[0].item()))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=start_step, desc=f"dpo {cfg.role} (β {beta}, r{cfg.rank})",
                   dynamic_ncols=True)
    pm.train()
    history = []
    for step in range(start_step, cfg.steps):
        if cfg.stop_after and step >= cfg.stop_after:
            break
        t0 = time.perf_counter()
        batch = step_indices(len(pairs), cfg, step)
        tot = dpo_sum = margin = wins = 0.0
        for i in batch:
            c, r = pairs[i]
            with torch.autocast(**amp):
                pc, nc = reply_logp(pm, c, cfg.mode, cache, cfg.activation)
                pr, _ = reply_logp(pm, r, cfg.mode, cache, cfg.activation)
                d = dpo_loss(pc, pr, ref[i][0], ref[i][1], beta)
                loss = d + (sft_weight * -pc / max(1, nc) if sft_weight else 0.0)
            (loss / len(batch)).backward()
            m = beta * ((pc.item() - ref[i][0]) - (pr.item() - ref[i][1]))
            tot += loss.item()
            dpo_sum += d.item()
            margin += m
            wins += m > 0
        optimizer_step(params, opt, cfg, step)
        dt = time.perf_counter() - t0
        k = len(batch)
        rec = {"step": step + 1, "loss": tot / k, "dpo": dpo_sum / k, "margin": margin / k, "accuracy": wins / k,
               "lr": lr_at(cfg, step), "seconds": round(dt, 3)}
        history.append(rec)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{rec['loss']:.3f}", margin=f"{rec['margin']:+.2f}", acc=f"{rec['accuracy']:.2f}")
        if on_step is not None:
            on_step(rec)
        if cfg.save_every and (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            save_checkpoint(ckpt, pm, opt, step + 1, cfg, extra={"dpo": objective})
    if bar is not None:
        bar.close()
    return pm, history
