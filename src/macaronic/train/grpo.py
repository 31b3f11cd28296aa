"""GRPO with verifiable rewards, compact and CPU-sized: group sampling, group-normalized
advantages, a clipped policy-gradient step on the LoRA parameters, optional KL to the base.

A prompt is `Prompt(ids, start, reward)`: the chat-encoded request (with the generation prompt),
where a turn-mode adapter activates, and a function `text -> float` (a grader). Sampling and
scoring both follow the adapter's mode (turn: history by the bare base). TRL's GRPOTrainer is not
used: it is not a dependency and drives generation through `generate`, which knows nothing of the
turn rule. A group is sampled as one batch on the prompt's cached K/V and scored in one batched
forward (`sample_group`, `group_logprobs`); `sample` and `completion_logprobs` are their
one-sequence reference twins. Knows nothing about which grader stands behind a reward.
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


class _Prefix:
    """Base-only K/V of a prompt's history (turn mode), computed once per prompt and handed out
    as a fresh cache of `n` rows each time (a forward appends to the cache it is given)."""

    def __init__(self, pm, ids: list[int]):
        with torch.no_grad(), pm.disable_adapter():
            out = pm.base_model.model.model(input_ids=torch.tensor([ids]), use_cache=True)
        self.kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]  # each [1, H, T, Dh]

    def cache(self, n: int):
        from transformers.cache_utils import DynamicCache

        return DynamicCache(ddp_cache_data=[(k.expand(n, -1, -1, -1).contiguous(), v.expand(n, -1, -1, -1).contiguous())
                                            for k, v in self.kv])


def _split(prompt: Prompt, mode: str) -> int:
    """Where the adapter's part of the prompt begins: its history is base-only K/V (turn mode)."""
    return prompt.start if mode == "turn" and prompt.start > 0 else 0


@torch.no_grad()
def sample_group(pm, prompt: Prompt, cfg: GRPOConfig, gen: torch.Generator, eos: set[int], n: int,
                 prefix: _Prefix | None = None) -> list[tuple[list[int], list[float]]]:
    """`n` completions decoded as one batch (the fast twin of `sample`): the prompt is computed
    once, its cache repeated over the rows; a row stops contributing at its first eos."""
    inner = pm.base_model.model
    ids, cut = list(prompt.ids), _split(prompt, cfg.mode)
    past = prefix.cache(1) if (cut and prefix is not None) else (_Prefix(pm, ids[:cut]).cache(1) if cut else None)
    out = inner.model(input_ids=torch.tensor([ids[cut:]]), past_key_values=past, use_cache=True)
    past = out.past_key_values
    past.batch_repeat_interleave(n)
    h = out.last_hidden_state[:, -1].expand(n, -1)  # [n, D]
    toks_out, lps_out, done = [[] for _ in range(n)], [[] for _ in range(n)], [False] * n
    for _ in range(cfg.max_new):
        logp = torch.log_softmax(inner.lm_head(h).float() / cfg.temperature, -1)  # [n, V]
        toks = torch.multinomial(logp.exp(), 1, generator=gen)[:, 0]  # [n]
        for i in range(n):
            if not done[i]:
                t = int(toks[i])
                toks_out[i].append(t)
                lps_out[i].append(float(logp[i, t]))
                done[i] = t in eos
        if all(done):
            break
        o = inner.model(input_ids=toks[:, None], past_key_values=past, use_cache=True)
        h, past = o.last_hidden_state[:, -1], o.past_key_values
    return list(zip(toks_out, lps_out))


def group_logprobs(pm, prompt: Prompt, completions: list[list[int]], mode: str, temperature: float = 1.0,
                   prefix: _Prefix | None = None) -> list[torch.Tensor]:
    """Per completion, [N_i] log-probabilities after the prompt, with grad, in one batched forward
    (the fast twin of `completion_logprobs`). Right padding: causal attention keeps every real
    position exact."""
    ids, cut = list(prompt.ids), _split(prompt, mode)
    n, width = len(completions), max(len(c) for c in completions)
    rows = torch.tensor([ids[cut:] + c + [0] * (width - len(c)) for c in completions])  # [n, T - cut + width]
    past = (prefix or _Prefix(pm, ids[:cut])).cache(n) if cut else None
    h = pm.base_model.model.model(input_ids=rows, past_key_values=past, use_cache=past is not None).last_hidden_state
    p0 = len(ids) - cut - 1  # the position predicting the first completion token
    logits = pm.base_model.model.lm_head(h[:, p0:p0 + width]).float() / temperature  # [n, width, V]
    lp = torch.log_softmax(logits, -1).gather(2, rows[:, p0 + 1:p0 + 1 + width, None])[..., 0]  # [n, width]
    return [lp[i, :len(c)] for i, c in enumerate(completions)]


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
        prefixes = {}
        for pr in batch:
            cut = _split(pr, cfg.mode)
            prefixes[pr.id or id(pr)] = _Prefix(pm, list(pr.ids[:cut])) if cut else None
            group = sample_group(pm, pr, cfg, gen, eos, cfg.group, prefixes[pr.id or id(pr)])
            rewards = [float(pr.reward(tokenizer.decode(c, skip_special_tokens=True))) for c, _ in group]
            rewards_all += rewards
            for (c, lp), a in zip(group, advantages(rewards)):
                if a != 0.0 and c:
                    rollouts.append((pr, c, torch.tensor(lp), a))
        pm.train()
        n_tok = sum(len(c) for _, c, _, _ in rollouts)
        kl_sum = 0.0
        by_prompt = {}
        for r in rollouts:
            by_prompt.setdefault(r[0].id or id(r[0]), []).append(r)
        for _ in range(cfg.inner_epochs if rollouts else 0):
            for key, rs in by_prompt.items():  # one batched forward per prompt's group
                pr = rs[0][0]
                news = group_logprobs(pm, pr, [c for _, c, _, _ in rs], cfg.mode, cfg.temperature, prefixes[key])
                loss = 0.0
                for (_, c, old, a), new in zip(rs, news):
                    ratio = torch.exp(new - old)
                    obj = torch.minimum(ratio * a, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * a)
                    loss = loss - obj.sum()
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
