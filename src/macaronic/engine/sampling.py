"""Sampling parameters and the per-row sampler. Knows nothing about models or adapters."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from macaronic.engine.errors import BAD_SAMPLING, EngineError


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] | None = None  # None = the model's end-of-turn tokens
    repetition_penalty: float = 1.0
    loop_cut: tuple[int, int] | None = None  # (max period, min span) in tokens: end a reply stuck in a loop
    ignore_eos: bool = False  # vLLM's: the end-of-turn tokens (stop_token_ids) end nothing; max_tokens or `stop` does
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def validate(self, max_tokens_limit: int | None = None) -> "SamplingParams":
        problems = []
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            problems.append(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        elif max_tokens_limit is not None and self.max_tokens > max_tokens_limit:
            problems.append(f"max_tokens {self.max_tokens} exceeds the limit {max_tokens_limit}")
        if not (0.0 <= float(self.temperature) <= 5.0):
            problems.append(f"temperature must be in [0, 5], got {self.temperature}")
        if not (0.0 < float(self.top_p) <= 1.0):
            problems.append(f"top_p must be in (0, 1], got {self.top_p}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            problems.append(f"top_k must be a non-negative integer, got {self.top_k!r}")
        if not (0.0 < float(self.repetition_penalty) <= 5.0):
            problems.append(f"repetition_penalty must be in (0, 5], got {self.repetition_penalty}")
        if not isinstance(self.ignore_eos, bool):
            problems.append(f"ignore_eos must be true or false, got {self.ignore_eos!r}")
        if len(self.stop) > 16 or any(not isinstance(s, str) or not s or len(s) > 256 for s in self.stop):
            problems.append("stop must be at most 16 non-empty strings of at most 256 characters")
        if self.loop_cut is not None and not (
                len(self.loop_cut) == 2 and all(isinstance(x, int) and x >= 1 for x in self.loop_cut)
                and self.loop_cut[1] >= 2):
            problems.append(f"loop_cut must be (max period >= 1, min span >= 2), got {self.loop_cut!r}")
        if problems:
            raise EngineError(BAD_SAMPLING, "; ".join(problems))
        return self


def loop_period(ids: list[int], max_period: int, min_span: int) -> int | None:
    """The smallest period p <= max_period such that the last max(min_span, 2p) tokens of `ids`
    repeat with period p (at least two full repeats), if any. Bounded work per call, whatever
    the length of `ids`: a rule that can run on every token."""
    for p in range(1, max_period + 1):
        n = max(min_span, 2 * p)
        if len(ids) < n:
            return None
        tail = ids[-n:]
        if all(tail[i] == tail[i % p] for i in range(p, n)):
            return p
    return None


def make_generator(seed: int | None) -> torch.Generator | None:
    if seed is None:
        return None
    g = torch.Generator()
    g.manual_seed(int(seed))
    return g


def sample(logits: Tensor, p: SamplingParams, gen: torch.Generator | None, seen: Tensor | None = None) -> int:
    """Pick one token from `logits: [V]` (already masked by any constraint). `seen: [V]` bool marks
    the tokens generated so far, for the repetition penalty (kept by the caller, one write a token)."""
    logits = logits.float()
    if p.repetition_penalty != 1.0 and seen is not None:
        penalised = torch.where(logits > 0, logits / p.repetition_penalty, logits * p.repetition_penalty)
        logits = torch.where(seen[: logits.shape[-1]], penalised, logits)
    if p.temperature == 0.0:
        return int(torch.argmax(logits))
    logits = logits / p.temperature
    if p.top_k > 0:
        k = min(p.top_k, logits.shape[-1])
        kth = torch.topk(logits, k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if p.top_p < 1.0:
        idx = _nucleus(probs, p.top_p)
        return int(idx[_draw(probs[idx], gen)])
    return _draw(probs, gen)


def _draw(weights: Tensor, gen: torch.Generator | None) -> int:
    """One index drawn with probability proportional to `weights` (1-D, non-negative, some positive): the
    inverse of their cumulative sum (float64) at one uniform draw. torch.multinomial over the vocabulary cost
    2.4 ms a token on a 2-core CPU, this about a tenth of it; a seed still gives the same draws."""
    c = weights.double().cumsum(0)
    u = torch.rand(1, generator=gen, dtype=torch.float64) * c[-1]
    return min(int(torch.searchsorted(c, u, right=True)), weights.shape[0] - 1)


NUCLEUS_FIRST = (256, 4096)  # candidates the nucleus is looked for in before sorting the whole vocabulary


def _nucleus(probs: Tensor, top_p: float) -> Tensor:
    """Indices of the smallest set of most probable tokens whose mass reaches `top_p` (the top token always).
    Looked for among the NUCLEUS_FIRST most probable first, and in the sorted vocabulary only where it reaches
    past them: sorting 150k probabilities for every sampled token cost 13 ms a token on a 2-core CPU, most of
    a 16-stream sampled decode's time (docs/LOG.md, 2026-12-07, twenty-first session)."""
    for k in NUCLEUS_FIRST:
        if probs.shape[-1] <= k:
            break
        top, order = torch.topk(probs, k)
        keep = top.cumsum(0) - top < top_p
        if not bool(keep[-1]):  # the nucleus ends inside the candidates
            return order[keep]
    sorted_p, order = torch.sort(probs, descending=True)
    return order[sorted_p.cumsum(0) - sorted_p < top_p]
