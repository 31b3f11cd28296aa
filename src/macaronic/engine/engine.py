"""The Mixture-of-LoRA engine: continuous batching over token ids, one adapter per request.

Requests with different adapters decode in the same batch (one LoRA slot index per token).
Prompts are prefilled in chunks of up to `prefill_chunk` tokens per scheduler step, several short
prompts in one forward, so a long prompt or an adapter load never stalls other requests' decoding
for more than one step. Finished conversations go to
the prefix cache; the next request reuses every position whose (token, adapter label) matches.

Adapter modes decide the labels:
- `full`: every token of the request is labelled with the adapter (KV reusable per adapter only);
- `turn`: tokens from `active_from` on carry the adapter; history positions adopt whatever the
  cache computed them with (or the bare base with `history="base"`), so switching adapters
  between turns recomputes no history token.

The engine knows token ids and detokenizes incrementally for text deltas and stop strings
(`engine.detok`); it knows nothing about chat templates, routing or HTTP.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch

from macaronic.engine import errors
from macaronic.engine.base import Base
from macaronic.engine.detok import Detokenizer, StopMatcher
from macaronic.engine.errors import EngineError
from macaronic.engine.kvcache import ADOPT, BASE, PrefixCache
from macaronic.engine.kvpool import KVBuffer, KVPool
from macaronic.engine.model import SeqSlice
from macaronic.engine.sampling import SamplingParams, loop_period, make_generator, sample
from macaronic.engine.slots import AdapterRegistry, LoraBank

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class EngineConfig:
    max_batch: int = 16
    max_loras: int = 8  # resident adapter slots, besides slot 0 (no adapter)
    max_rank: int = 16  # largest adapter rank accepted; slots are as wide as the widest registered one
    max_registered: int = 512
    prefill_chunk: int = 512
    kv_pool_tokens: int = 1024  # sequences up to this long share one K/V pool (batched decode attention)
    prefix_cache: bool = True
    prefix_cache_bytes: int = 1 << 30
    max_context: int | None = None  # default: the base's max_position_embeddings
    max_tokens_limit: int = 4096
    history: str = "cached"  # "cached" (adopt the cache's labels) or "base" (always bare base)
    dtype: str = "float32"  # or "bfloat16"
    quant: str = "none"  # "int8" / "int4": weight-only quantized base matmuls (bf16 activations)

    @classmethod
    def from_env(cls, **kw) -> "EngineConfig":
        """A config whose precision comes from MACARONIC_DTYPE / MACARONIC_QUANT unless given."""
        kw.setdefault("dtype", os.environ.get("MACARONIC_DTYPE", "float32"))
        kw.setdefault("quant", os.environ.get("MACARONIC_QUANT", "none"))
        return cls(**kw)


@dataclass
class Request:
    prompt: list[int]
    adapter: str | None = None
    active_from: int | None = None  # turn mode: first position of the adapter's turn
    sampling: SamplingParams = field(default_factory=SamplingParams)
    logits_processor: Callable[[list[int], torch.Tensor], torch.Tensor] | None = None
    logprobs: int | None = None  # None: off; k: each generated token's logprob and the top k
    id: str = ""


@dataclass
class Event:
    text: str = ""
    token_id: int | None = None
    finish_reason: str | None = None  # "stop" | "length" | "cancelled" | "error"
    error: str | None = None
    code: str | None = None  # with finish_reason "error": an engine.errors code
    usage: dict | None = None


class Handle:
    """A submitted request: iterate its events (sync or async), or cancel it."""

    def __init__(self, req: Request, loop: asyncio.AbstractEventLoop | None = None):
        self.request = req
        self._loop = loop
        self._q: queue.Queue | asyncio.Queue = asyncio.Queue() if loop else queue.Queue()
        self.cancelled = threading.Event()
        self.done = threading.Event()
        self.usage: dict | None = None
        self.output_ids: list[int] = []  # every generated token id, set when the request finishes
        self.logprobs: list[tuple[int, float, list[tuple[int, float]]]] = []  # (id, logprob, top k), when asked
        self.loop_period: int | None = None  # set when the reply was cut as a repetition loop
        self.siblings: list[tuple[Request, "Handle"]] = []  # n > 1: samples that share this prompt's prefill

    def _put(self, ev: Event) -> None:
        if ev.finish_reason is not None:
            self.usage = ev.usage
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._q.put_nowait, ev)
            except RuntimeError:  # the loop is closed: the client is gone
                self.cancelled.set()
        else:
            self._q.put(ev)
        if ev.finish_reason is not None:
            self.done.set()

    def cancel(self) -> None:
        self.cancelled.set()

    def __iter__(self) -> Iterator[Event]:
        while True:
            ev = self._q.get()
            yield ev
            if ev.finish_reason is not None:
                return

    async def aiter(self):
        while True:
            ev = await self._q.get()
            yield ev
            if ev.finish_reason is not None:
                return

    def result(self) -> tuple[str, Event]:
        text, last = [], None
        for ev in self:
            text.append(ev.text)
            last = ev
        return "".join(text), last


@dataclass
class _Seq:
    req: Request
    handle: Handle
    tokens: np.ndarray  # prompt ids
    labels: np.ndarray  # resolved per-position label codes for the prompt
    own_label: int
    slot: int
    kv: KVBuffer
    pos: int  # prompt positions computed so far
    reused: int
    gen: torch.Generator | None
    t0: float
    generated: list[int] = field(default_factory=list)
    detok: Detokenizer | None = None  # None without a tokenizer: token ids only
    stops: StopMatcher = field(default_factory=StopMatcher)
    seen: torch.Tensor | None = None  # [V] bool, tokens generated so far (repetition penalty only)
    t_first: float | None = None
    stop_ids: frozenset = frozenset()
    logprobs: list = field(default_factory=list)


class Engine:
    def __init__(self, base: Base, tokenizer, config: EngineConfig = EngineConfig()):
        self.base, self.tok, self.config = base, tokenizer, config
        self.model = base.model
        self.max_context = min(config.max_context or base.args.max_seq_len, self.model._cos.shape[0])
        self.lock = threading.RLock()  # one forward at a time over shared slots
        # fp32 slots for every model dtype: exact deltas, and small fp32 matmuls cost less than bf16
        # ones on CPU even at twice the bytes (measured again for the grouped bank: docs/LOG.md)
        self.bank = LoraBank(base.args, config.max_loras + 1, min(4, config.max_rank), dtype=torch.float32)
        self.registry = AdapterRegistry(base.args, self.bank, base.fingerprint, config.max_registered,
                                        max_rank=config.max_rank, forward_lock=self.lock)
        self.cache = PrefixCache(config.prefix_cache_bytes, enabled=config.prefix_cache)
        self.kv_pool = KVPool(base.args, self.model.dtype, max_cap=config.kv_pool_tokens)
        self.default_stop_ids = self._default_stop_ids()
        self._inbox: queue.Queue = queue.Queue()
        self._waiting: deque[tuple[Request, Handle]] = deque()
        self._active: list[_Seq] = []
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.stats = {"prefill_tokens": 0, "prefill_forwards": 0, "reused_tokens": 0, "decode_steps": 0,
                      "generated_tokens": 0}

    def _default_stop_ids(self) -> tuple[int, ...]:
        ids = set(self.base.args.eos_token_ids)
        if self.tok is not None:
            if self.tok.eos_token_id is not None:
                ids.add(self.tok.eos_token_id)
            from macaronic.engine.bases import BASES

            spec = BASES.get(self.base.name)  # a registered base names its stop tokens
            for t in spec.stop_tokens if spec else ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
                tid = self.tok.convert_tokens_to_ids(t)
                if isinstance(tid, int) and tid != self.tok.unk_token_id and tid is not None:
                    ids.add(tid)
        return tuple(sorted(ids))

    # ---- submission ----

    def validate(self, req: Request) -> None:
        """Raise EngineError (with its code) for a request the engine cannot run."""
        if not req.prompt:
            raise EngineError(errors.BAD_PROMPT, "empty prompt: at least one token is required")
        if any((not isinstance(t, int)) or t < 0 or t >= self.base.args.vocab_size for t in req.prompt):
            raise EngineError(errors.BAD_PROMPT, f"prompt token ids must be integers in [0, {self.base.args.vocab_size})")
        req.sampling.validate(self.config.max_tokens_limit)
        if len(req.prompt) >= self.max_context:
            raise EngineError(
                errors.CONTEXT_OVERFLOW,
                f"prompt of {len(req.prompt)} tokens does not fit the context window of {self.max_context}",
            )
        if req.adapter is not None:
            try:
                self.registry.get(req.adapter)
            except KeyError as e:
                raise EngineError(errors.UNKNOWN_ADAPTER, e.args[0]) from None
        if req.active_from is not None and not (0 <= req.active_from <= len(req.prompt)):
            raise EngineError(errors.BAD_REQUEST, f"active_from {req.active_from} outside the prompt [0, {len(req.prompt)}]")

    def submit(self, req: Request, loop: asyncio.AbstractEventLoop | None = None) -> Handle:
        """Validate and queue a request; errors in the request raise here, before queueing."""
        self.validate(req)
        req.id = req.id or f"req-{next(self._ids)}"
        h = Handle(req, loop)
        self._inbox.put((req, h))
        self._wake.set()
        if self._thread is None:
            self.start()
        return h

    def submit_n(self, reqs: list[Request], loop: asyncio.AbstractEventLoop | None = None) -> list[Handle]:
        """Several samples of one prompt (same tokens and adapter): the first request's prefill
        is computed once and copied to the others, which then sample on their own."""
        if not reqs:
            raise EngineError(errors.BAD_REQUEST, "submit_n needs at least one request")
        lead = reqs[0]
        for r in reqs[1:]:
            if r.prompt != lead.prompt or r.adapter != lead.adapter or r.active_from != lead.active_from:
                raise EngineError(errors.BAD_REQUEST, "submit_n: every sample must share the prompt, adapter and active_from")
        if len(reqs) > self.config.max_batch:
            raise EngineError(errors.BAD_REQUEST, f"{len(reqs)} samples exceed the batch of {self.config.max_batch}")
        for r in reqs:
            self.validate(r)
        handles = []
        for r in reqs:
            r.id = r.id or f"req-{next(self._ids)}"
            handles.append(Handle(r, loop))
        handles[0].siblings = list(zip(reqs[1:], handles[1:]))
        self._inbox.put((lead, handles[0]))
        self._wake.set()
        if self._thread is None:
            self.start()
        return handles

    def generate(self, req: Request) -> tuple[str, Event]:
        return self.submit(req).result()

    def labels_for(self, req: Request) -> tuple[np.ndarray, int]:
        """Per-position label codes for a request (ADOPT where history may take the cache's)."""
        n = len(req.prompt)
        if req.adapter is None:
            own, mode = BASE, "turn"
        else:
            info = self.registry.get(req.adapter)
            own, mode = self.cache.code(info.id), info.mode
        labels = np.full(n, own, dtype=np.int64)
        if mode == "turn":
            start = n if req.active_from is None and req.adapter is None else (req.active_from or 0)
            labels[:start] = ADOPT if self.config.history == "cached" else BASE
        return labels, own

    # ---- the loop ----

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="macaronic-engine", daemon=True)
            self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        torch.set_grad_enabled(False)
        while not self._stop.is_set():
            try:
                busy = self.step()
            except Exception:  # the loop must survive anything; requests already failed individually
                traceback.print_exc()
                busy = False
            if not busy:
                self._wake.wait(timeout=0.05)
                self._wake.clear()

    def step(self) -> bool:
        """One scheduler iteration: admit, one prefill chunk, one batched decode step."""
        while True:
            try:
                self._waiting.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        # admission copies cached K/V into pool rows, which a fork inside inference mode may have
        # allocated: every in-place K/V write of the engine thread happens in inference mode
        with torch.inference_mode():
            self._drop_cancelled()
            self._admit()
        with self.lock, torch.inference_mode():
            did_prefill = self._prefill_chunk()
            did_decode = self._decode()
        return bool(did_prefill or did_decode or self._waiting)

    def _drop_cancelled(self) -> None:
        for req, h in list(self._waiting):
            if h.cancelled.is_set():
                self._waiting.remove((req, h))
                self._end_unstarted(req, h, "cancelled")
        for s in list(self._active):
            if s.handle.cancelled.is_set():
                self._finish(s, "cancelled")

    def _admit(self) -> None:
        for req, h in list(self._waiting):
            if self._active and len(self._active) + 1 + len(h.siblings) > self.config.max_batch:
                return
            try:
                slot = 0
                if req.adapter is not None:
                    if not self.registry.is_resident(req.adapter):
                        fut = self.registry.stage(req.adapter)  # disk read off the engine thread
                        if not fut.done():
                            continue
                        fut.result()  # raise a load error now
                    slot = self.registry.acquire(req.adapter)
            except Exception as e:
                err = _as_engine_error(e, errors.ADAPTER_LOAD)
                if err.code == errors.OVERLOADED and any(s.slot for s in self._active):
                    continue  # every slot is pinned by a running request: one frees when it ends
                self._waiting.remove((req, h))
                self._end_unstarted(req, h, "error", str(err), err.code)
                continue
            self._waiting.remove((req, h))
            try:
                self._active.append(self._start_seq(req, h, slot))
            except Exception as e:
                if slot:
                    self.registry.release(slot)
                err = _as_engine_error(e, errors.INTERNAL)
                self._end_unstarted(req, h, "error", str(err), err.code)

    def _end_unstarted(self, req: Request, h: Handle, reason: str, error: str | None = None,
                       code: str | None = None) -> None:
        """A request (and its n-sample siblings) that ends before it ever ran."""
        for r, sh in [(req, h), *h.siblings]:
            sh._put(Event(finish_reason=reason, error=error, code=code, usage=self._usage(None, r)))
        h.siblings = []

    def _start_seq(self, req: Request, h: Handle, slot: int) -> _Seq:
        tokens = np.asarray(req.prompt, dtype=np.int64)
        labels, own = self.labels_for(req)
        match = self.cache.lookup(tokens, labels)
        reuse = min(match.length, len(tokens) - 1)  # at least one token must run to get logits
        cap = min(len(tokens) + req.sampling.max_tokens, self.max_context)
        kv = self.kv_pool.alloc(cap) if self.kv_pool.fits(cap) else KVBuffer(self.base.args, cap, self.model.dtype)
        if reuse:
            kv.k[:, :, :reuse] = match.entry.kv.k[:, :, :reuse]
            kv.v[:, :, :reuse] = match.entry.kv.v[:, :, :reuse]
            kv.length = reuse
        labels = match.labels
        stop_ids = req.sampling.stop_token_ids
        return _Seq(
            req=req, handle=h, tokens=tokens, labels=labels, own_label=own, slot=slot, kv=kv,
            pos=reuse, reused=reuse, gen=make_generator(req.sampling.seed), t0=time.perf_counter(),
            stop_ids=frozenset(self.default_stop_ids if stop_ids is None else stop_ids),
            detok=Detokenizer(self.tok) if self.tok is not None else None, stops=StopMatcher(req.sampling.stop),
        )

    def _slots_for(self, s: _Seq, labels: np.ndarray) -> torch.Tensor:
        # Positions being computed carry either the request's own label or BASE.
        return torch.from_numpy(np.where(labels == s.own_label, s.slot, 0).astype(np.int64))

    def _prefill_chunk(self) -> bool:
        """One prefill forward: prompt chunks of as many sequences as fit `prefill_chunk` tokens, so
        a burst of short prompts is prefilled together instead of one per step."""
        budget, batch = self.config.prefill_chunk, []
        for s in self._active:
            if s.pos < len(s.tokens) and budget > 0:
                end = min(s.pos + budget, len(s.tokens))
                batch.append((s, end))
                budget -= end - s.pos
        if not batch:
            return False
        try:
            logits = self._prefill(batch)
        except Exception:
            logits = None  # isolate the failing request: run each alone, fail only those that raise
        if logits is None:
            for s, end in batch:
                try:
                    self._prefilled(s, end, self._prefill([(s, end)])[0])
                except Exception as e:
                    self._finish(s, "error", error=f"prefill failed: {e}")
            return True
        for (s, end), lg in zip(batch, logits):
            self._prefilled(s, end, lg)
        return True

    def _prefill(self, batch: list[tuple[_Seq, int]]) -> list[torch.Tensor | None]:
        """Run the chunks; the next-token logits of each sequence whose prompt ends here."""
        toks = torch.from_numpy(np.concatenate([s.tokens[s.pos : end] for s, end in batch]))
        use_lora = any(s.slot for s, _ in batch)
        slots = torch.cat([self._slots_for(s, s.labels[s.pos : end]) for s, end in batch]) if use_lora else None
        last = any(end == len(s.tokens) for s, end in batch)
        self.stats["prefill_forwards"] += 1
        logits = self.model(
            toks, [SeqSlice(s.kv, end - s.pos) for s, end in batch], lora=self.bank if use_lora else None,
            slots=self.bank.plan(slots) if use_lora else None, logits="last" if last else "none",
        )  # [len(batch), V] (the last row of each chunk) or empty
        return list(logits) if last else [None] * len(batch)

    def _prefilled(self, s: _Seq, end: int, logits: torch.Tensor | None) -> None:
        self.stats["prefill_tokens"] += end - s.pos
        s.pos = end
        if end == len(s.tokens):
            siblings = self._fork(s)  # n samples: each takes a copy of this prompt's K/V
            self._emit(s, logits)
            for sib in siblings:
                self._emit(sib, logits.clone())

    def _fork(self, seq: _Seq) -> list[_Seq]:
        """The sibling samples of a prefilled request, each with a copy of its prompt K/V."""
        out = []
        for req, h in seq.handle.siblings:
            slot = self.registry.acquire(req.adapter) if req.adapter is not None else 0
            n, cap = len(seq.tokens), min(len(seq.tokens) + req.sampling.max_tokens, self.max_context)
            kv = self.kv_pool.alloc(cap) if self.kv_pool.fits(cap) else KVBuffer(self.base.args, cap, self.model.dtype)
            kv.k[:, :, :n] = seq.kv.k[:, :, :n]
            kv.v[:, :, :n] = seq.kv.v[:, :, :n]
            kv.length = n
            stop_ids = req.sampling.stop_token_ids
            sib = _Seq(req=req, handle=h, tokens=seq.tokens, labels=seq.labels, own_label=seq.own_label, slot=slot,
                       kv=kv, pos=n, reused=n, gen=make_generator(req.sampling.seed), t0=seq.t0,
                       stop_ids=frozenset(self.default_stop_ids if stop_ids is None else stop_ids),
                       detok=Detokenizer(self.tok) if self.tok is not None else None,
                       stops=StopMatcher(req.sampling.stop))
            self._active.append(sib)
            out.append(sib)
        seq.handle.siblings = []
        return out

    def _decode(self) -> bool:
        batch = [s for s in self._active if s.pos == len(s.tokens) and s.generated]
        if not batch:
            return False
        toks = torch.tensor([s.generated[-1] for s in batch])
        slots = torch.tensor([s.slot if s.own_label != BASE else 0 for s in batch])
        use_lora = bool((slots != 0).any())
        try:
            logits = self.model(
                toks, [SeqSlice(s.kv, 1) for s in batch], lora=self.bank if use_lora else None,
                slots=self.bank.plan(slots) if use_lora else None,
            )
        except Exception:
            # Isolate the failing request: run each alone, fail only those that raise.
            for s in batch:
                try:
                    lg = self.model(
                        toks[batch.index(s) : batch.index(s) + 1], [SeqSlice(s.kv, 1)],
                        lora=self.bank if s.slot else None,
                        slots=self.bank.plan(torch.tensor([s.slot])) if s.slot else None,
                    )
                    self._emit(s, lg[0])
                except Exception as e:
                    self._finish(s, "error", error=f"decode failed: {e}")
            return True
        self.stats["decode_steps"] += 1
        for i, s in enumerate(batch):
            self._emit(s, logits[i])
        return True

    def _emit(self, s: _Seq, logits: torch.Tensor) -> None:
        """Sample the next token of `s` and stream its text; work per token does not grow with
        the sequence (incremental detokenisation, stop strings matched on the new text)."""
        p = s.req.sampling
        try:
            if s.req.logits_processor is not None:
                logits = s.req.logits_processor(s.generated, logits)
            tok = sample(logits, p, s.gen, s.seen)
        except Exception as e:
            self._finish(s, "error", error=f"sampling failed: {e}")
            return
        if s.t_first is None:
            s.t_first = time.perf_counter()
        if tok in s.stop_ids:
            self._finish(s, "stop")
            return
        if s.req.logprobs is not None:  # of the distribution sampled from: after any constraint's mask
            lp = torch.log_softmax(logits.float(), dim=-1)  # lp: [V]
            top = torch.topk(lp, s.req.logprobs) if s.req.logprobs else None
            s.logprobs.append((tok, float(lp[tok]), [] if top is None else
                               [(int(i), float(v)) for v, i in zip(top.values, top.indices)]))
        s.generated.append(tok)
        if p.repetition_penalty != 1.0:
            if s.seen is None:
                s.seen = torch.zeros(logits.shape[-1], dtype=torch.bool)
            s.seen[tok] = True
        self.stats["generated_tokens"] += 1
        text, stopped = s.stops.feed(s.detok.step(tok) if s.detok is not None else "")
        self._send(s, text, tok)
        if stopped:
            self._finish(s, "stop")
        elif p.loop_cut is not None and (period := loop_period(s.generated, *p.loop_cut)) is not None:
            s.handle.loop_period = period
            self._finish(s, "length")
        elif len(s.generated) >= p.max_tokens or s.kv.length + 1 >= s.kv.capacity:
            self._finish(s, "length")

    def _send(self, s: _Seq, text: str, tok: int | None) -> None:
        if text:
            s.handle._put(Event(text=text, token_id=tok))

    def _flush(self, s: _Seq) -> None:
        """Send the text still held back (an unfinished character, a possible stop string's start)."""
        if not s.stops.stopped:  # after a stop string nothing more is sent
            self._send(s, s.stops.flush() + (s.detok.flush() if s.detok is not None else ""), None)

    def _usage(self, s: _Seq | None, req: Request) -> dict:
        if s is None:
            return {"prompt_tokens": len(req.prompt), "completion_tokens": 0, "prefill_tokens": 0, "reused_tokens": 0}
        return {
            "prompt_tokens": len(s.tokens),
            "completion_tokens": len(s.generated),
            "prefill_tokens": s.pos - s.reused,
            "reused_tokens": s.reused,
            "ttft_ms": None if s.t_first is None else round((s.t_first - s.t0) * 1000, 3),
            "total_ms": round((time.perf_counter() - s.t0) * 1000, 3),
        }

    def _finish(self, s: _Seq, reason: str, error: str | None = None, code: str | None = None) -> None:
        if s in self._active:
            self._active.remove(s)
        if s.slot:
            self.registry.release(s.slot)
        self.stats["reused_tokens"] += s.reused
        if reason != "error" and s.kv.length >= len(s.tokens):
            n_gen = s.kv.length - len(s.tokens)
            toks = np.concatenate([s.tokens, np.asarray(s.generated[:n_gen], dtype=np.int64)])
            labs = np.concatenate([s.labels, np.full(n_gen, s.own_label, dtype=np.int64)])
            if self.cache.enabled:
                self.cache.insert(toks, labs, s.kv.compact(self.base.args) if s.kv.pool is not None else s.kv)
        if s.kv.pool is not None:
            s.kv.pool.release(s.kv)
        if reason != "error":
            self._flush(s)
        s.handle.output_ids = list(s.generated)
        code = code or (errors.INTERNAL if reason == "error" else None)
        s.handle.logprobs = s.logprobs
        for req, h in s.handle.siblings:  # a leader that ended before its prefill: so do its samples
            h._put(Event(finish_reason=reason, error=error, code=code, usage=self._usage(None, req)))
        s.handle.siblings = []
        s.handle._put(Event(finish_reason=reason, error=error, code=code, usage=self._usage(s, s.req)))


def _as_engine_error(e: Exception, default: str) -> EngineError:
    """An EngineError for any exception on the request path; KeyError means the adapter went away."""
    if isinstance(e, EngineError):
        return e
    if isinstance(e, KeyError):
        return EngineError(errors.UNKNOWN_ADAPTER, str(e.args[0] if e.args else e))
    return EngineError(default, str(e))
