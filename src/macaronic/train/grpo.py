"""GRPO with verifiable rewards, compact and CPU-sized: group sampling, group-normalized
advantages, a clipped policy-gradient step on the LoRA parameters, optional KL to the base.

A prompt is `Prompt(ids, start, reward)`: the chat-encoded request (with the generation prompt),
where a turn-mode adapter activates, and a function `text -> float` (a grader). Sampling and
scoring both follow the adapter's mode (turn: history by the bare base). TRL's GRPOTrainer is not
used: it is not a dependency and drives generation through `generate`, which knows nothing of the
turn rule. Knows nothing about which grader stands behind a reward.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Prompt:
    ids: tuple[int, ...]
    start: int
    reward: Callable[[str], float] = field(compare=False, repr=False)
    id: str = ""


@dataclass(frozen=True)
class GRPOConfig:
    steps: int = 20
    prompts_per_step: int = 2
    group: int = 4  # completions per prompt
    max_new: int = 64
    temperature: float = 1.0
    lr: float = 2e-4
    clip: float = 0.2
    beta: float = 0.0  # KL(policy || base) weight; 0 = no reference forward
    inner_epochs: int = 1  # policy updates per batch of samples (ratio = 1 on the first)
    mode: str = "turn"
    seed: int = 0


def _forward(pm, ids: list[int], start: int, mode: str, adapter: bool = True):
    """Hidden states [T, D] of ids under the mode's rule, with a cache object for decoding."""
    inner = pm.base_model.model
    if not adapter:
        with pm.disable_adapter():
            out = inner.model(input_ids=torch.tensor([ids]), use_cache=True)
        return out.last_hidden_state[0], out.past_key_values
    if mode == "turn" and start > 0:
        with torch.no_grad(), pm.disable_adapter():
            past = inner.model(input_ids=torch.tensor([ids[:start]]), use_cache=True).past_key_values
        out = inner.model(input_ids=torch.tensor([ids[start:]]), past_key_values=past, use_cache=True)
        return out.last_hidden_state[0], out.past_key_values
    out = inner.model(input_ids=torch.tensor([ids]), use_cache=True)
    return out.last_hidden_state[0], out.past_key_values


@torch.no_grad()
def sample(pm, prompt: Prompt, cfg: GRPOConfig, gen: torch.Generator, eos: set[int]) -> tuple[list[int], list[float]]:
    """One completion: (token ids, their log-probabilities under the sampling policy)."""
    inner = pm.base_model.model
    h, past = _forward(pm, list(prompt.ids), prompt.start, cfg.mode)
    h = h[-1:]
    out, lps = [], []
    for _ in range(cfg.max_new):
        logp = torch.log_softmax(inner.lm_head(h)[0].float() / cfg.temperature, -1)
        tok = int(torch.multinomial(logp.exp(), 1, generator=gen))
        out.append(tok)
        lps.append(float(logp[tok]))
        if tok in eos:
            break
        o = inner.model(input_ids=torch.tensor([[tok]]), past_key_values=past, use_cache=True)
        h, past = o.last_hidden_state[0], o.past_key_values
    return out, lps


def completion_logprobs(pm, prompt: Prompt, completion: list[int], mode: str, adapter: bool = True,
                        temperature: float = 1.0) -> torch.Tensor:
    """[N] log-probabilities of `completion` after the prompt (with grad when adapter=True)."""
    ids = list(prompt.ids) + completion
    h, _ = _forward(pm, ids, prompt.start, mode, adapter)
    offset = 0 if (not adapter or mode != "turn" or prompt.start == 0) else prompt.start
    pos = torch.arange(len(prompt.ids) - 1, len(ids) - 1) - offset  # positions predicting the completion
    logits = pm.base_model.model.lm_head(h[pos]).float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None])[:, 0]


def advantages(rewards: list[float], eps: float = 1e-4) -> list[float]:
    """Group-normalized: (r - mean) / (std + eps); all zeros when the group agrees."""
    m = sum(rewards) / len(rewards)
    sd = math.sqrt(sum((r - m) ** 2 for r in rewards) / len(rewards))
    return [0.0] * len(rewards) if sd < 1e-8 else [(r - m) / (sd + eps) for r in rewards]


def grpo(pm, prompts: list[Prompt], cfg: GRPOConfig, tokenizer, progress: bool = True, on_step=None) -> list[dict]:
    """Run GRPO on the LoRA parameters of `pm` in place; returns per-step records."""
    params = [p for p in pm.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.99), weight_decay=0.0)
    gen = torch.Generator().manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    eos = {tokenizer.eos_token_id} | set(getattr(pm.config, "eos_token_id", None) and
                                          ([pm.config.eos_token_id] if isinstance(pm.config.eos_token_id, int)
                                           else list(pm.config.eos_token_id)) or [])
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, desc="grpo", dynamic_ncols=True)
    history = []
    for step in range(cfg.steps):
        t0 = time.perf_counter()
        batch = rng.sample(prompts, min(cfg.prompts_per_step, len(prompts)))
        rollouts = []  # (prompt, completion, old logprobs, advantage)
        rewards_all = []
        pm.eval()
        for pr in batch:
            group = [sample(pm, pr, cfg, gen, eos) for _ in range(cfg.group)]
            rewards = [float(pr.reward(tokenizer.decode(c, skip_special_tokens=True))) for c, _ in group]
            rewards_all += rewards
            for (c, lp), a in zip(group, advantages(rewards)):
                if a != 0.0 and c:
                    rollouts.append((pr, c, torch.tensor(lp), a))
        pm.train()
        n_tok = sum(len(c) for _, c, _, _ in rollouts)
        kl_sum = 0.0
        for _ in range(cfg.inner_epochs if rollouts else 0):
            for pr, c, old, a in rollouts:
                new = completion_logprobs(pm, pr, c, cfg.mode, temperature=cfg.temperature)
                ratio = torch.exp(new - old)
                obj = torch.minimum(ratio * a, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * a)
                loss = -obj.sum()
                if cfg.beta > 0:
                    with torch.no_grad():
                        ref = completion_logprobs(pm, pr, c, cfg.mode, adapter=False, temperature=cfg.temperature)
                    d = ref - new
                    kl = torch.exp(d) - d - 1  # k3 estimator, >= 0
                    loss = loss + cfg.beta * kl.sum()
                    kl_sum += float(kl.sum())
                (loss / max(1, n_tok)).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        rec = {"step": step + 1, "reward": sum(rewards_all) / len(rewards_all), "rollouts": len(rollouts),
               "tokens": n_tok, "kl": kl_sum / max(1, n_tok), "seconds": round(time.perf_counter() - t0, 3)}
        history.append(rec)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(reward=f"{rec['reward']:.3f}")
        if on_step:
            on_step(rec)
    if bar is not None:
        bar.close()
    return history
