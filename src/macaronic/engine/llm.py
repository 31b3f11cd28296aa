"""The user-facing engine object: base + tokenizer + adapters + the batching engine.

`LLM` adds what needs the tokenizer: chat templates, where the current turn starts, helpers for
the router (pooled hidden states, next-token log-probabilities: engine score requests, each with a
direct from-scratch twin) and a from-scratch scorer used to check cache exactness. It knows
nothing about HTTP or routing policy.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from macaronic.engine.adapters import AdapterInfo
from macaronic.engine.base import Base, load_base
from macaronic.engine.engine import DTYPES, Engine, EngineConfig, Handle, Request
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice
from macaronic.engine.sampling import SamplingParams


def user_marker_ids(tokenizer) -> list[int]:
    """Token ids that open a user message in the chat template: where a turn-mode adapter activates
    (the `alora_invocation_tokens` of PEFT's Activated LoRA). Training and serving both use this."""
    probe = tokenizer.apply_chat_template([{"role": "user", "content": "\x07"}], tokenize=False)
    head = probe.split("\x07")[0]
    # The user header without any leading bos/system text: the part after the last special open.
    for opener in ("<|im_start|>", "<|start_header_id|>"):
        if opener in head:
            head = head[head.rfind(opener) :]
            break
    return tokenizer.encode(head, add_special_tokens=False)


def assistant_marker_ids(tokenizer) -> list[int] | None:
    """Token ids that open the reply's assistant message (the template's generation prompt, its
    trailing whitespace left out so a merge with the reply's first character cannot hide it): where
    an adapter with `activation: "assistant"` switches on (its `alora_invocation_tokens`). None for
    a template without a generation prompt."""
    plain = tokenizer.apply_chat_template([{"role": "user", "content": "\x07"}], tokenize=False)
    gen = tokenizer.apply_chat_template([{"role": "user", "content": "\x07"}], tokenize=False,
                                        add_generation_prompt=True)
    if not gen.startswith(plain) or not gen[len(plain):].strip():
        return None
    return tokenizer.encode(gen[len(plain):].rstrip(), add_special_tokens=False)


def tool_header_ids(tokenizer, marker: list[int]) -> list[int] | None:
    """Where the chat template renders a tool result as a *user* message (Qwen2.5:
    `<|im_start|>user\n<tool_response>`), the ids that open such a message; None where tool results
    have a header of their own (ChatML's `<|im_start|>tool`). The text after the header's last
    non-space character is left out, so a merge with the result's first character cannot hide it."""
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "\x06"},
            {"role": "tool", "content": "\x07"}]
    try:
        text = tokenizer.apply_chat_template(msgs, tokenize=False)
    except Exception:  # a template without a tool role has no tool header to confuse
        return None
    head = text.split("\x07")[0]
    user = tokenizer.decode(marker)
    at = head.rfind(user)
    if at < head.find("\x06"):  # the last user header is the first message's: tools have their own
        return None
    rest = head[at + len(user):].rstrip()
    if not rest:  # the template gives tool results the bare user header: nothing tells them apart
        return None
    ids = tokenizer.encode(head[at:at + len(user) + len(rest)], add_special_tokens=False)
    return ids[:-1] if len(ids) > len(marker) + 1 else ids


class TurnRule:
    """Where the current turn starts in a rendered prompt: the header of the latest message whose
    role is `user`, found from the ids alone (serving sees ids, training sees messages; both call
    this). A tool result that the template renders as a user message is not a turn."""

    def __init__(self, tokenizer):
        self.marker = user_marker_ids(tokenizer)
        self.tool_header = tool_header_ids(tokenizer, self.marker)
        self.answer_marker = assistant_marker_ids(tokenizer)

    def start(self, ids) -> int:
        m, t = self.marker, self.tool_header
        ids = list(ids)
        for i in range(len(ids) - len(m), -1, -1):
            if ids[i : i + len(m)] == m and not (t and ids[i : i + len(t)] == t):
                return i
        return 0

    def answer_start(self, ids) -> int:
        """The first assistant header after the turn's start (the reply, or the turn's first tool
        call): where an `activation: "assistant"` adapter switches on; len(ids) when there is none.
        Everything before it, the user turn included, is the bare base's."""
        m, ids = self.answer_marker, list(ids)
        if not m:
            raise ValueError("the chat template has no generation prompt to activate an adapter at")
        for i in range(self.start(ids), len(ids) - len(m) + 1):
            if ids[i : i + len(m)] == m:
                return i
        return len(ids)

    def active_from(self, ids, activation: str = "user") -> int:
        """Where a turn-mode adapter with this activation ("user" or "assistant") switches on."""
        return self.answer_start(ids) if activation == "assistant" else self.start(ids)


def shipped_adapters_dir(base: str | None = None) -> Path:
    """The shipped specialists of a registered base (default: the default base)."""
    from macaronic.engine import bases

    return bases.specialists_dir(bases.get(base))


class LLM:
    def __init__(self, base: Base, tokenizer, config: EngineConfig = EngineConfig()):
        self.base, self.tokenizer, self.config = base, tokenizer, config
        self.args = base.args
        self.engine = Engine(base, tokenizer, config)
        self.adapters = self.engine.registry
        self.turn_rule = TurnRule(tokenizer)
        self._prefix_views: dict = {}  # (prefix ids, layer) -> its `engine.Kept`: `hidden_views(prefix=)`
        self._user_marker = self.turn_rule.marker

    # ---- adapters ----

    def add_adapter(self, path: str | Path, name: str | None = None) -> AdapterInfo:
        return self.adapters.register(path, name)

    def describe(self) -> dict:
        return {
            "base": {
                "id": self.base.name,
                "family": self.args.family,
                "params": self.base.params(),
                "fingerprint": self.base.fingerprint,
                "precision": self.base.precision,
                "path": str(self.base.path),
            },
            "adapters": [i.public() for i in self.adapters.infos()],
        }

    # ---- text ----

    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True, tools=None) -> list[int]:
        from macaronic.prompts import encode  # the one renderer's call to the chat template

        return encode(self.tokenizer, messages, add_generation_prompt, tools)

    def turn_start(self, ids: list[int]) -> int:
        """Position of the latest user message's header: where a turn-mode adapter activates."""
        return self.turn_rule.start(ids)

    # ---- generation ----

    def request(self, ids: list[int], adapter: str | None = None, sampling: SamplingParams | None = None,
                active_from: int | None = None, **kw) -> Request:
        if active_from is None and adapter is not None:
            info = self.adapters.get(adapter) if adapter in self.adapters.names() else None  # unknown: the engine refuses it
            active_from = self.turn_rule.active_from(ids, info.activation if info else "user")
        return Request(prompt=list(ids), adapter=adapter, active_from=active_from,
                       sampling=sampling or SamplingParams(), **kw)

    def submit(self, ids: list[int], adapter: str | None = None, sampling: SamplingParams | None = None,
               loop=None, **kw) -> Handle:
        return self.engine.submit(self.request(ids, adapter, sampling, **kw), loop=loop)

    def chat(self, messages: list[dict], adapter: str | None = None, sampling: SamplingParams | None = None,
             **kw) -> tuple[str, dict]:
        text, last = self.submit(self.encode_chat(messages), adapter, sampling, **kw).result()
        if last.finish_reason == "error":
            raise RuntimeError(last.error)
        return text, {**(last.usage or {}), "finish_reason": last.finish_reason}

    # ---- direct forwards (router, tests) ----

    @torch.inference_mode()
    def score(self, ids: list[int], adapters: list[str | None] | str | None = None, logits: str = "all",
              hidden: bool = False) -> torch.Tensor:
        """From-scratch forward with one adapter per position (or one for all); no cache involved."""
        n = len(ids)
        per_pos = adapters if isinstance(adapters, list) else [adapters] * n
        assert len(per_pos) == n
        names = sorted({a for a in per_pos if a is not None})
        with self.engine.lock:
            slot_of = {a: self.adapters.acquire(a) for a in names}
            try:
                kv = KVBuffer(self.args, n, self.base.model.dtype)
                slots = torch.tensor([slot_of[a] if a else 0 for a in per_pos])
                use = bool(names)
                lora, plan = (self.engine.bank, self.engine.bank.plan(slots)) if use else (None, None)
                if hidden:
                    return self.base.model.score(torch.tensor(ids), [SeqSlice(kv, n)], lora, plan)
                return self.base.model.decode(torch.tensor(ids), [SeqSlice(kv, n)], lora, plan, logits=logits)
            finally:
                for s in slot_of.values():
                    self.adapters.release(s)

    def pooled_hidden(self, batch: list[list[int]], max_tokens: int = 4096) -> torch.Tensor:
        """[N, D] mean over tokens of the final-norm hidden state of the bare base."""
        return self.hidden_views(batch, max_tokens)[0]

    def hidden_views(self, batch: list[list[int]], max_tokens: int = 4096,
                     layer: int | None = None, prefix: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """([N, D] mean, [N, D] last position) of the final-norm hidden state of the bare base
        (`layer` < n_layers: of the residual stream entering that layer, an early exit).

        Each sequence is a score request of the engine: scheduled with the decoding streams (at
        most one prefill chunk between two of their tokens), never under the forward lock across
        their steps. A sequence that runs alone in one chunk gives the bits of `hidden_views_direct`;
        batched or chunked, float noise (tested). `max_tokens` is kept for the direct twin.

        `prefix`: token ids every sequence is expected to start with (the chat template's fixed
        system prompt and user header). Its K/V and its hidden states' sum are computed once and
        kept (an engine score request); a sequence that starts with it runs only its own tokens, as
        a score request scheduled like the rest, and its mean counts the prefix positions as well
        (float noise from the whole-sequence forward). One that does not runs whole."""
        if any(len(ids) == 0 for ids in batch):
            raise ValueError("pooled_hidden: empty token sequence")
        if not batch:
            empty = torch.zeros(0, self.args.dim)
            return empty, empty
        if layer == 0:
            return self._embedding_views(batch)
        if prefix:
            return self._prefixed_views(batch, layer, list(prefix))
        got = self._score([Request(prompt=list(ids), score="hidden", cache=False, score_layer=layer) for ids in batch])
        return torch.stack([g["mean"] for g in got]), torch.stack([g["last"] for g in got])

    def route_prefill(self, ids: list[int], start: int, layer: int | None = None, end: int | None = None) -> dict:
        """The route read from the answer's own prefill: `ids` (the conversation as the bare base
        answers it, up to its assistant header or to the end of the user turn) as an engine score
        request that takes the history from the prefix cache, runs the rest up to `layer` (None: every
        layer) and keeps it. Returns {"mean", "last"} over positions [start, end) (the user turn; end
        None: the prompt's end) and "kept", which a generation sharing its start passes as `resume`
        (`request(..., resume=kept)`): a bare answer on exactly `ids` needs no other forward below `layer`."""
        return self._score([Request(prompt=list(ids), score="hidden", score_layer=layer, score_from=start,
                                    score_to=end, score_keep=True, cache=False)])[0]  # the answer caches it, whole

    def route_prefill_chat(self, layout: list[dict], layer: int | None = None) -> dict:
        """`route_prefill` on layout messages as the bare answer's prompt: rendered with its assistant
        header (a bare answer then runs no other forward below `layer`), the views over the last user
        turn (from its header to the assistant header)."""
        ids = self.encode_chat(layout)
        return self.route_prefill(ids, self.turn_start(ids), layer, self.turn_rule.answer_start(ids))

    def can_resume(self, ids: list[int], adapter: str | None, kept) -> bool:
        """Whether a generation of `ids` with `adapter` takes part of the kept route prefill (`resume`):
        its prompt shares the prefill's user turn, computed by the bare base there (no adapter, or a
        turn-mode one that switches on after it, such as one activated at the assistant header)."""
        if adapter is not None and adapter not in self.adapters.names():
            return False
        return self.engine.resume_length(self.request(ids, adapter, resume=kept)) > kept.start

    def _prefixed_views(self, batch: list[list[int]], layer: int | None,
                        prefix: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """`hidden_views` with a kept opening: the opening runs once as an engine score request that
        keeps its K/V and state sum (`Request.score_keep`); each sequence that starts with it is a
        score request carrying it (`Request.score_kept`), so only its own tokens run, scheduled
        with the decoding streams like any prefill. A sequence that does not start with it runs whole."""
        cache = self._prefix_views
        key = (tuple(prefix), layer)
        kept = cache.get(key)  # routes may run on several threads: one local reference, never re-read
        if kept is None:
            if len(cache) >= 8:
                cache.clear()
            got = self._score([Request(prompt=list(prefix), score="hidden", cache=False, score_layer=layer,
                                       score_keep=True)])
            kept = cache[key] = got[0]["kept"]
        n0 = len(prefix)
        got = self._score([Request(prompt=list(ids), score="hidden", cache=False, score_layer=layer,
                                   score_kept=kept if len(ids) > n0 and tuple(ids[:n0]) == kept.tokens else None)
                           for ids in batch])
        return torch.stack([g["mean"] for g in got]), torch.stack([g["last"] for g in got])

    @torch.inference_mode()
    def _embedding_views(self, batch: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer 0's views: the residual entering the first layer is the token embeddings, so no
        forward runs (a lookup into the read-only table, outside the scheduler)."""
        rows = [self.base.model.embed[torch.tensor(ids)].float() for ids in batch]
        return torch.stack([r.mean(0) for r in rows]), torch.stack([r[-1] for r in rows])

    def next_logprobs(self, ids: list[int], adapter: str | None = None) -> torch.Tensor:
        """[V] log-softmax of the next token after `ids`, with `adapter` on every position: an engine
        score request whose K/V goes to the prefix cache, so a shared prompt prefix (the prompted
        router's route prompt) is computed once."""
        req = Request(prompt=list(ids), adapter=adapter, active_from=0 if adapter is not None else None,
                      score="logprobs", cache=True)
        return self._score([req])[0]["logprobs"]

    def _score(self, reqs: list[Request]) -> list[dict[str, torch.Tensor]]:
        """Submit score requests together (one prefill forward takes as many as fit its budget)."""
        handles = [self.engine.submit(r) for r in reqs]
        out = []
        for h in handles:
            _, last = h.result()
            if last.finish_reason != "stop" or h.score is None:
                raise RuntimeError(f"score request failed: {last.error or last.finish_reason}")
            out.append(h.score)
        return out

    @torch.inference_mode()
    def hidden_views_direct(self, batch: list[list[int]], max_tokens: int = 4096,
                            layer: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference twin of `hidden_views`: from-scratch forwards outside the scheduler, under
        the engine's forward lock (so every decoding stream waits for them). Used by tests and by
        the serving benchmark's before/after comparison.

        Sequences run together in one varlen forward per chunk of about `max_tokens` tokens:
        the projections batch over every token, attention stays per sequence.
        """
        if layer == 0:
            if any(len(ids) == 0 for ids in batch):
                raise ValueError("pooled_hidden: empty token sequence")
            return self._embedding_views(batch) if batch else (torch.zeros(0, self.args.dim),) * 2
        means: list[torch.Tensor] = []
        lasts: list[torch.Tensor] = []
        i = 0
        while i < len(batch):
            chunk, n = [], 0
            while i < len(batch) and (not chunk or n + len(batch[i]) <= max_tokens):
                chunk.append(batch[i])
                n += len(batch[i])
                i += 1
            if any(len(ids) == 0 for ids in chunk):
                raise ValueError("pooled_hidden: empty token sequence")
            seqs = [SeqSlice(KVBuffer(self.args, len(ids), self.base.model.dtype), len(ids)) for ids in chunk]
            with self.engine.lock:
                h = self.base.model.score(torch.tensor([t for ids in chunk for t in ids]), seqs, last_layer=layer)
            for seg in torch.split(h, [len(ids) for ids in chunk]):
                means.append(seg.float().mean(0))
                lasts.append(seg[-1].float())
        if not means:
            empty = torch.zeros(0, self.args.dim)
            return empty, empty
        return torch.stack(means), torch.stack(lasts)

    def next_logprobs_direct(self, ids: list[int], adapter: str | None = None) -> torch.Tensor:
        """The reference twin of `next_logprobs` (a from-scratch forward under the lock)."""
        return torch.log_softmax(self.score(ids, adapter, logits="last")[0].float(), dim=-1)

    def close(self) -> None:
        self.engine.shutdown()


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    return AutoTokenizer.from_pretrained(str(path))


def load_llm(
    base: str | Path | None = None,
    adapters: list[str | Path] | None = None,
    config: EngineConfig | None = None,
) -> LLM:
    """Load a base (default: the default base, engine/bases.py) and register adapter directories."""
    config = config or EngineConfig.from_env()
    if config.dtype not in DTYPES:
        raise ValueError(f"unknown dtype {config.dtype!r}; choose one of {sorted(DTYPES)}")
    b = load_base(base, dtype=DTYPES[config.dtype], quant=config.quant)
    llm = LLM(b, load_tokenizer(b.path), config)
    for path in adapters or []:
        llm.add_adapter(path)
    return llm


def load_default_llm(config: EngineConfig | None = None, with_adapters: bool = True, base: str | None = None) -> LLM:
    """A registered base (default: the default base) plus its shipped specialists (if present)."""
    d = shipped_adapters_dir(base)
    paths = sorted(p for p in d.iterdir() if (p / "adapter_config.json").exists()) if d.is_dir() and with_adapters else []
    return load_llm(base, paths, config)


def load_base_llm(base: str | None = None, adapters: list | None = None, config: EngineConfig | None = None) -> LLM:
    """What `--base NAME|DIR` plus `--adapter-dir` mean on every command: a registered base with no
    adapter directories given comes with its shipped specialists; a model directory, or explicit
    adapter directories, load just those."""
    from macaronic.engine.bases import registered

    if not adapters and registered(base):
        return load_default_llm(config, base=registered(base))
    return load_llm(base, adapters or [], config)


__all__ = ["LLM", "load_llm", "load_default_llm", "EngineConfig", "SamplingParams", "replace"]
