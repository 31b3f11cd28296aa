"""The Mixture-of-LoRA engine: continuous batching over token ids, one adapter per request.

Requests with different adapters decode in the same batch (one LoRA slot index per token).
Each scheduler step runs prompt chunks (up to `prefill_chunk` tokens when nothing decodes,
`prefill_chunk_busy` while streams decode, several prompts together) and one decode step of every
running stream, in one forward (`fuse_steps`) or two, so a long prompt never stalls other
requests' decoding for more than one chunk. Finished conversations go to the prefix cache; the next
request reuses every position whose (token, adapter label) matches.

A request with `score` set ("hidden" or "logprobs": what the router reads) is prefilled like any
other, first in the step's budget and outside `max_batch`, and ends with its result on
`Handle.score` instead of generating: routing is scheduled with the streams it would otherwise
stall, and never holds the forward lock across their steps. A "hidden" score with `score_from` reads
the answer's own prefill (the history from the prefix cache, the user turn run up to `score_layer`)
and, with `score_keep`, keeps it: the generation that follows (`Request.resume`) then runs only the
layers above `score_layer` on the user turn, so the route costs no forward of its own.

Adapter modes decide the labels:
- `full`: every token of the request is labelled with the adapter (KV reusable per adapter only);
- `turn`: tokens from `active_from` on carry the adapter; history positions adopt whatever the
  cache computed them with (or the bare base with `history="base"`), so switching adapters
  between turns recomputes no history token;
- `upper` (LoRA in the top k layers only): labelled like `full`, and every sequence keeps the
  residual stream entering layer L-k of each registered upper adapter; on a switch the history's
  lower layers and that residual are copied and only layers L-k.. are recomputed (k/L of a prefill),
  one prompt chunk a step like any prefill, so a long history never stalls decoding streams.

The engine knows token ids and detokenizes incrementally for text deltas and stop strings
(`engine.detok`); it knows nothing about chat templates, routing or HTTP.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import queue
import threading
import time
import traceback
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch

from macaronic.engine import errors
from macaronic.engine.base import Base
from macaronic.engine.detok import Detokenizer, StopMatcher
from macaronic.engine.errors import EngineError
from macaronic.engine.kvcache import ADOPT, BASE, Match, PrefixCache
from macaronic.engine.kvpool import KVBuffer, KVPool
from macaronic.engine.model import SeqSlice, linear
from macaronic.engine.sampling import SamplingParams, loop_period, make_generator, sample
from macaronic.engine.slots import AdapterRegistry, LoraBank, bank_dtype, bank_int8_b

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class EngineConfig:
    max_batch: int = 16
    max_loras: int = 8  # resident adapter slots, besides slot 0 (no adapter)
    max_rank: int = 16  # largest adapter rank accepted; slots are as wide as the widest registered one
    max_registered: int = 512
    prefill_chunk: int = 512  # prompt tokens per step when no stream decodes
    prefill_chunk_busy: int = 64  # ... while streams decode: bounds their inter-token gap
    fuse_steps: bool = True  # prompt chunks and the decode step in one forward (False: two forwards a step)
    kv_pool_tokens: int = 1024  # sequences up to this long share one K/V pool (batched decode attention)
    prefix_cache: bool = True
    prefix_cache_bytes: int = 1 << 30
    max_context: int | None = None  # default: the base's max_position_embeddings
    max_tokens_limit: int = 4096
    history: str = "cached"  # "cached" (adopt the cache's labels) or "base" (always bare base)
    dtype: str = "float32"  # or "bfloat16"
    quant: str = "none"  # "int8" / "int4" / "gguf": weight-only quantized base matmuls (bf16 activations)
    lora_int8: bool = True  # int4 on the native kernel: adapters' B as int8 rows (slots.int8_rows); False: bf16

    @classmethod
    def from_env(cls, **kw) -> "EngineConfig":
        """A config whose precision comes from MACARONIC_DTYPE / MACARONIC_QUANT, its busy prefill
        budget from MACARONIC_PREFILL_CHUNK_BUSY, step fusion from MACARONIC_FUSE_STEPS and int4's int8
        adapter rows from MACARONIC_LORA_INT8, unless given."""
        kw.setdefault("dtype", os.environ.get("MACARONIC_DTYPE", "float32"))
        kw.setdefault("quant", os.environ.get("MACARONIC_QUANT", "none"))
        if "MACARONIC_PREFILL_CHUNK_BUSY" in os.environ:
            kw.setdefault("prefill_chunk_busy", int(os.environ["MACARONIC_PREFILL_CHUNK_BUSY"]))
        for field_, var in (("fuse_steps", "MACARONIC_FUSE_STEPS"), ("lora_int8", "MACARONIC_LORA_INT8")):
            if var in os.environ:  # on unless 0 / false / no
                kw.setdefault(field_, os.environ[var] not in ("0", "false", "no"))
        return cls(**kw)


@dataclass
class Request:
    prompt: list[int]
    adapter: str | None = None
    active_from: int | None = None  # turn mode: first position of the adapter's turn
    sampling: SamplingParams = field(default_factory=SamplingParams)
    logits_processor: Callable[[list[int], torch.Tensor], torch.Tensor] | None = None
    logprobs: int | None = None  # None: off; k: each generated token's logprob and the top k
    score: str | None = None  # SCORE_KINDS: prefill only, the result on Handle.score (router forwards)
    cache: bool = True  # a score request: offer its K/V to the prefix cache (reused by later requests)
    score_layer: int | None = None  # score "hidden": stop before this layer (the residual entering it)
    score_keep: bool = False  # score "hidden": also return the prompt's K/V and sum of states (a `Kept`)
    score_kept: "Kept | None" = None  # score "hidden": a kept opening the prompt starts with; only the rest runs
    score_from: int | None = None  # score "hidden": views over positions from here (the user turn); earlier ones may come from the prefix cache
    score_to: int | None = None  # with score_from: the views end here (default: the prompt's end; the rest is only kept)
    resume: "Kept | None" = None  # a generation whose prompt starts with a kept route prefill (see `Kept`)
    id: str = ""


@dataclass(frozen=True)
class Kept:
    """A kept opening for "hidden" scores (the chat template's fixed system prompt and user header,
    which every routed request starts with): its tokens, the layer its forward stopped before, its
    K/V and the sum of its positions' states. A score request that carries it runs only its own
    tokens after the opening, scheduled like any prefill, and its mean counts the opening's
    positions too (float noise from one whole forward).

    Kept by a `score_from` request (the route read from the answer's own prefill), it is also the
    start of the answer: positions [0, start) hold every layer (from the prefix cache), positions
    [start, len) the layers below `layer` and, in `kv.resid[layer]`, the residual entering it. A
    generation whose prompt starts with it (`Request.resume`, the bare base on those positions)
    takes all that and runs only the layers from `layer` up there, then its own tokens."""
    tokens: tuple[int, ...]
    layer: int | None
    kv: KVBuffer
    total: torch.Tensor
    start: int = 0  # first position the score request ran (earlier ones: the prefix cache)
    labels: np.ndarray | None = None  # resolved label codes of its positions (a resume keeps them)


# What a score request returns on Handle.score:
#   "hidden":   {"mean": [D], "last": [D]} fp32 final-norm hidden state (mean over positions, last one);
#               with score_layer l < n_layers the residual stream entering layer l instead (an early
#               exit: l/n_layers of the forward's work, run in forwards of its own, K/V never cached);
#               with score_keep also "kept": a `Kept` (its tokens, K/V and state sum) for score_kept;
#               with score_from, both views cover positions [score_from, len) only, earlier ones may come
#               from the prefix cache, and score_keep keeps the prefill for `Request.resume`
#   "logprobs": {"logprobs": [V]} fp32 log-softmax of the next token after the prompt
SCORE_KINDS = ("hidden", "logprobs")


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
        self.score: dict[str, torch.Tensor] | None = None  # a score request's result, set before it finishes

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
    reused: int  # positions whose K/V came from the cache, every layer
    gen: torch.Generator | None
    t0: float
    upper: int = 0  # history positions recomputed in the upper layers only (upper mode)
    upper_todo: "_UpperTodo | None" = None  # the part of that recompute still to run
    generated: list[int] = field(default_factory=list)
    detok: Detokenizer | None = None  # None without a tokenizer: token ids only
    stops: StopMatcher = field(default_factory=StopMatcher)
    seen: torch.Tensor | None = None  # [V] bool, tokens generated so far (repetition penalty only)
    t_first: float | None = None
    stop_ids: frozenset = frozenset()
    logprobs: list = field(default_factory=list)
    hidden: list = field(default_factory=list)  # score "hidden": final-norm hidden rows per chunk

    @property
    def decoding(self) -> bool:
        return self.req.score is None and self.pos == len(self.tokens)


@dataclass
class _UpperTodo:
    """A switched upper turn's history still to recompute: positions [kv.length, end) take the
    layers below `split` (and the residual entering it) from `src`, a prefix-cache entry's buffer
    (or a resumed route prefill's, `Request.resume`: then the bare base runs the layers from `split`)."""

    src: KVBuffer
    split: int
    end: int


class Engine:
    def __init__(self, base: Base, tokenizer, config: EngineConfig = EngineConfig()):
        if config.prefill_chunk < 1 or config.prefill_chunk_busy < 1:
            raise ValueError(f"prefill_chunk and prefill_chunk_busy must be >= 1, got "
                             f"{config.prefill_chunk} and {config.prefill_chunk_busy}")
        self.base, self.tok, self.config = base, tokenizer, config
        self.model = base.model
        self.max_context = min(config.max_context or base.args.max_seq_len, self.model._cos.shape[0])
        self.lock = threading.RLock()  # one forward at a time over shared slots
        # bf16 slots for a bf16 model when the fused native kernel runs (half the bytes a step reads),
        # else fp32: PyTorch's small fp32 matmuls cost less than bf16 ones here (slots.bank_dtype)
        # an int4 model's bank keeps B as int8 rows, their scales folded into A (slots.int8_rows)
        self.bank = LoraBank(base.args, config.max_loras + 1, min(4, config.max_rank), dtype=bank_dtype(base.model.dtype),
                             int8_b=config.lora_int8 and bank_int8_b(base.model))
        self.registry = AdapterRegistry(base.args, self.bank, base.fingerprint, config.max_registered,
                                        max_rank=config.max_rank, forward_lock=self.lock)
        self.cache = PrefixCache(config.prefix_cache_bytes, enabled=config.prefix_cache)
        self.kv_pool = KVPool(base.args, self.model.dtype, max_cap=config.kv_pool_tokens)
        a = base.args  # a prompt token's attention flops per earlier key, over its projections' (`_depth_cost`)
        weights = a.n_layers * (a.dim * 2 * (a.n_heads + a.n_kv_heads) * a.head_dim + 3 * a.dim * a.intermediate_size)
        self._attn_per_key = 4 * a.n_layers * a.n_heads * a.head_dim / (2 * weights)
        self.default_stop_ids = self._default_stop_ids()
        self._inbox: queue.Queue = queue.Queue()
        self._waiting: deque[tuple[Request, Handle]] = deque()
        self._active: list[_Seq] = []
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.stats = {"prefill_tokens": 0, "prefill_forwards": 0, "reused_tokens": 0, "decode_steps": 0,
                      "generated_tokens": 0, "upper_tokens": 0, "scored": 0}

    def _stop_ids(self, sp: SamplingParams) -> frozenset:
        """The tokens that end a reply: none with `ignore_eos`, else the request's or the model's end-of-turn ones."""
        if sp.ignore_eos:
            return frozenset()
        return frozenset(self.default_stop_ids if sp.stop_token_ids is None else sp.stop_token_ids)

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
        if req.score is not None and req.score not in SCORE_KINDS:
            raise EngineError(errors.BAD_REQUEST, f"score must be one of {SCORE_KINDS}, got {req.score!r}")
        if req.score_layer is not None and (req.score != "hidden" or req.adapter is not None
                                            or not 0 < req.score_layer <= self.base.args.n_layers):
            raise EngineError(errors.BAD_REQUEST, "score_layer needs a bare-base \"hidden\" score and "
                              f"0 < score_layer <= {self.base.args.n_layers}, got {req.score_layer!r}")
        if (req.score_keep or req.score_kept is not None) and (req.score != "hidden" or req.adapter is not None):
            raise EngineError(errors.BAD_REQUEST, "score_keep and score_kept need a bare-base \"hidden\" score")
        end = len(req.prompt) if req.score_to is None else req.score_to
        if req.score_from is not None and (req.score != "hidden" or req.adapter is not None or req.score_kept is not None
                                           or not 0 <= req.score_from < end <= len(req.prompt)):
            raise EngineError(errors.BAD_REQUEST, "score_from needs a bare-base \"hidden\" score without score_kept "
                              f"and 0 <= score_from < score_to <= {len(req.prompt)}, got {req.score_from!r}, "
                              f"{req.score_to!r}")
        if req.score_to is not None and req.score_from is None:
            raise EngineError(errors.BAD_REQUEST, "score_to needs score_from")
        if req.resume is not None:
            self._check_resume(req)
        if (k := req.score_kept) is not None:
            layer = None if req.score_layer == self.base.args.n_layers else req.score_layer
            if k.layer != layer or len(req.prompt) <= len(k.tokens) or tuple(req.prompt[:len(k.tokens)]) != k.tokens:
                raise EngineError(errors.BAD_REQUEST, "score_kept: the prompt must start with the kept opening "
                                  "and go past it, at the kept layer")

    def _check_resume(self, req: Request) -> None:
        """A resumed generation: a kept route prefill, and some of its positions past the part the
        prefix cache gave it that the prompt shares and the bare base computes there (`resume_length`)."""
        k = req.resume
        if req.score is not None or k.labels is None or not isinstance(k.kv, KVBuffer) \
                or (k.layer is not None and k.layer not in k.kv.resid):
            raise EngineError(errors.BAD_REQUEST, "resume needs a generation request and a kept route prefill "
                              "(a score request with score_from and score_keep)")
        if self._shared_with_kept(req) <= k.start:
            raise EngineError(errors.BAD_REQUEST, "resume: the prompt must start with the kept prefill's user turn")
        if self.resume_length(req) <= k.start:
            raise EngineError(errors.BAD_REQUEST, f"resume: adapter {req.adapter!r} is active on the kept "
                              "positions; only one that switches on after them (turn mode) can take them")

    def _shared_with_kept(self, req: Request) -> int:
        """How many leading tokens the prompt shares with its kept prefill."""
        k = req.resume
        n = min(len(k.tokens), len(req.prompt))
        same = np.asarray(req.prompt[:n], dtype=np.int64) == np.asarray(k.tokens[:n], dtype=np.int64)
        return n if same.all() else int(np.argmin(same))

    def resume_length(self, req: Request) -> int:
        """The kept positions a resumed request takes: those its prompt shares with the prefill, up
        to where its adapter switches on (a `turn`-mode one; any other mode takes none past the
        cache's part). Without a layer split the kept K/V is whole and one token must still run for
        the logits; with one, the recompute of the layers above gives them."""
        k = req.resume
        n = self._shared_with_kept(req)
        if req.adapter is not None:
            info = self.registry.get(req.adapter)
            if info.mode != "turn" or req.active_from is None:
                return min(n, k.start)
            n = min(n, req.active_from)
        return min(n, len(req.prompt) - 1) if k.layer is None else n

    def submit(self, req: Request, loop: asyncio.AbstractEventLoop | None = None) -> Handle:
        """Validate and queue a request; errors in the request raise here, before queueing."""
        self.validate(req)
        req.id = req.id or f"req-{next(self._ids)}"
        if req.score_layer == self.base.args.n_layers:
            req.score_layer = None  # stopping before the end is the whole forward
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
            own, mode = self.cache.code(info.id, floor=min(info.layers, default=self.base.args.n_layers)), info.mode
        labels = np.full(n, own, dtype=np.int64)
        if req.score is not None and req.adapter is None:
            if req.score_from is not None and self.config.history == "cached":
                labels[:req.score_from] = ADOPT  # the history as the answer will read it
            return labels, own  # the router reads the bare base: adopt no adapter's cached K/V
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
            # a process that exits with the loop mid-forward aborts in torch's teardown: stop it first
            ref = weakref.ref(self)
            atexit.register(lambda: (e := ref()) is not None and e.shutdown())

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
            if self._upper_step():  # this step's prompt work: one chunk of an upper recompute
                self._decode()
                return True
            if self.config.fuse_steps and self._fused_step():
                return True
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
        # Score requests hold no decode row: they are admitted past a full batch (and past the
        # generation requests that wait for a row, which keep their order among themselves).
        running = sum(1 for s in self._active if s.req.score is None)
        full = False
        for req, h in list(self._waiting):
            if req.score is None:
                full = full or (running > 0 and running + 1 + len(h.siblings) > self.config.max_batch)
                if full:
                    continue
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
                running += req.score is None
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
        t0 = time.perf_counter()  # before any upper-mode recompute: it is part of the time to first token
        tokens = np.asarray(req.prompt, dtype=np.int64)
        labels, own = self.labels_for(req)
        # a "hidden" score needs every position's hidden state: nothing cached can stand in for it
        # (with score_from, none from there on)
        match = self.cache.lookup(tokens, labels) if req.score != "hidden" or req.score_from is not None else \
            Match(None, 0, np.where(labels == ADOPT, BASE, labels))
        reuse = min(match.length, len(tokens) - 1)  # at least one token must run to get logits
        if req.score_from is not None:
            reuse = min(reuse, req.score_from)
            match.labels[reuse:] = BASE  # computed here, by the bare base
        if req.resume is not None:  # the kept prefill stands in for its positions (validated)
            k, taken = req.resume, self.resume_length(req)
            match = Match(None, 0, np.concatenate([k.labels[:taken], np.where(labels[taken:] == ADOPT, BASE,
                                                                              labels[taken:])]))
        if req.score is not None:  # prefill only; decode rows of the pool stay for generating streams
            kv = KVBuffer(self.base.args, len(tokens), self.model.dtype)
        else:
            cap = min(len(tokens) + req.sampling.max_tokens, self.max_context)
            kv = self.kv_pool.alloc(cap) if self.kv_pool.fits(cap) else KVBuffer(self.base.args, cap, self.model.dtype)
        if splits := self._residual_layers():
            kv.keep_residual(splits, self.base.args.dim)
        todo = None
        if req.resume is not None:  # every layer up to its start, then the layers it stopped below
            k = req.resume
            reuse = min(k.start, taken) if k.layer is not None else taken
            kv.copy_prefix(k.kv, reuse)
            if k.layer is not None and taken > reuse:
                todo = _UpperTodo(k.kv, k.layer, taken)  # up to the whole prompt: its recompute gives the logits
        elif reuse:
            kv.copy_prefix(match.entry.kv, reuse)
        elif req.score_kept is not None:  # the kept opening stands in for its positions (validated)
            reuse = len(req.score_kept.tokens)
            kv.copy_prefix(req.score_kept.kv, reuse)
        split = self._split_of(req)
        if split is not None:
            todo = self._upper_history(tokens, kv, split)
        labels = match.labels
        return _Seq(
            req=req, handle=h, tokens=tokens, labels=labels, own_label=own, slot=slot, kv=kv,
            pos=kv.length, reused=reuse, upper_todo=todo, gen=make_generator(req.sampling.seed), t0=t0,
            stop_ids=self._stop_ids(req.sampling),
            detok=Detokenizer(self.tok) if self.tok is not None else None, stops=StopMatcher(req.sampling.stop),
        )

    # ---- upper mode: the cache keeps the residual entering layer L-k ----

    def _split_of(self, req: Request) -> int | None:
        """The layer an upper-mode request's LoRA starts at (None for other modes)."""
        if req.adapter is None:
            return None
        info = self.registry.get(req.adapter)
        return self.base.args.n_layers - info.top_k if info.mode == "upper" else None

    def _residual_layers(self) -> set[int]:
        """Layers whose entering residual every sequence keeps: one per registered upper top_k."""
        return {self.base.args.n_layers - i.top_k for i in self.registry.infos() if i.mode == "upper"}

    def _upper_history(self, tokens: np.ndarray, kv: KVBuffer, split: int) -> _UpperTodo | None:
        """History positions past the exact match whose layers below `split` the cache holds as the
        base computed them: those layers and the residual entering `split` are taken, and only the
        layers from `split` up are recomputed with this adapter, a chunk a step (`_upper_step`)."""
        entry, n = self.cache.lookup_below(tokens, split)
        n = min(n, len(tokens) - 1)
        return _UpperTodo(entry.kv, split, n) if entry is not None and n > kv.length else None

    def _upper_step(self) -> bool:
        """One chunk (the step's prompt budget) of the first pending upper recompute: copy its
        lower layers and residual rows, run the layers from the split up. The chunk is copied
        only now, so a K/V pool that grows meanwhile (it keeps rows [0, length)) loses nothing."""
        s = next((s for s in self._active if s.upper_todo is not None), None)
        if s is None:
            return False
        t = s.upper_todo
        busy = any(x.decoding for x in self._active)
        a = s.kv.length
        n = min(t.end, a + (self.config.prefill_chunk_busy if busy else self.config.prefill_chunk))
        try:
            s.kv.copy_prefix(t.src, n, below=t.split)
            resid = t.src.resid[t.split][a:n]  # [n - a, D]
            slots = self._slots_for(s, s.labels[a:n])  # an upper adapter's own label, or the bare base's
            use = bool(s.slot) and bool(slots.any())
            last = n == len(s.tokens)  # a resumed prefill that covers the whole prompt
            logits = self.model.recompute(resid, [SeqSlice(s.kv, n - a)], t.split, lora=self.bank if use else None,
                                          slots=self.bank.plan(slots) if use else None,
                                          logits="last" if last else "none")
        except Exception as e:
            self._finish(s, "error", error=f"upper-mode recompute failed: {e}")
            return True
        s.pos = s.kv.length
        s.upper += n - a
        self.stats["upper_tokens"] += n - a
        if s.kv.length >= t.end:
            s.upper_todo = None
            if s.pos == len(s.tokens):  # nothing left to prefill: the recompute's logits give the first token
                siblings = self._fork(s)
                self._emit(s, logits[0])
                for sib in siblings:
                    self._emit(sib, logits[0].clone())
        return True

    def _slots_for(self, s: _Seq, labels: np.ndarray) -> torch.Tensor:
        # Positions being computed carry either the request's own label or BASE.
        return torch.from_numpy(np.where(labels == s.own_label, s.slot, 0).astype(np.int64))

    def _chunks(self) -> list[tuple[_Seq, int]]:
        """This step's prompt chunks within the token budget (`prefill_chunk`, or `prefill_chunk_busy`
        while streams decode): score requests first (the router's, bounded in length), then the
        prompts with the fewest tokens left, so a short prompt reaches its first token in the next
        step even while a long one prefills; the prompt waiting longest keeps a quarter of the
        budget, so a stream of short prompts never starves it. A chunk deep in a long prompt costs
        more than its tokens (its attention reads every earlier position): it is charged that
        (`_depth_cost`), so a step stays about as long at position 20,000 as at 0."""
        decoding = any(s.decoding for s in self._active)
        budget = self.config.prefill_chunk_busy if decoding else self.config.prefill_chunk
        pending = [s for s in self._active if s.pos < len(s.tokens) and s.upper_todo is None]
        scores = [s for s in pending if s.req.score is not None]
        if scores and scores[0].req.score_layer is not None:  # early-exit scores: a forward of their own
            return self._fill([s for s in scores if s.req.score_layer == scores[0].req.score_layer], budget, None)
        scores = [s for s in scores if s.req.score_layer is None]
        prompts = sorted((s for s in pending if s.req.score is None), key=lambda s: len(s.tokens) - s.pos)
        oldest = min(prompts, key=lambda s: s.t0) if len(prompts) > 1 else None
        oldest = None if oldest is (prompts[0] if prompts else None) else oldest  # first in line anyway
        return self._fill(scores + prompts, budget, oldest)

    def _fill(self, order: list[_Seq], budget: int, oldest: _Seq | None) -> list[tuple[_Seq, int]]:
        """Chunks for `order` within `budget`; `oldest` is kept a quarter of it and takes what is left."""
        reserve = max(1, budget // 4) if oldest is not None else 0
        batch, left = [], budget
        for s in order:
            if s is oldest:
                continue
            n = self._tokens_for(s, left - reserve)
            if n <= 0:
                break
            batch.append((s, s.pos + n))
            left -= n * self._depth_cost(s.pos)
        if oldest is not None:
            n = self._tokens_for(oldest, max(left, reserve))
            batch.append((oldest, oldest.pos + max(n, 1)))
        return batch

    def _tokens_for(self, s: _Seq, room: float) -> int:
        """Prompt tokens of `s` that fit `room` budget tokens at its depth (at least one if any room)."""
        if room < 1:
            return 0
        return min(len(s.tokens) - s.pos, max(1, int(room / self._depth_cost(s.pos))))

    def _depth_cost(self, pos: int) -> float:
        """What one prompt token at position `pos` costs, in tokens at position 0: its attention
        over `pos` keys (4 * layers * heads * head_dim flops each) beside the projections
        (2 flops a weight). At most 8: on a tiny model the step's own overhead dominates instead."""
        return min(8.0, 1.0 + pos * self._attn_per_key)

    def _fused_step(self) -> bool:
        """Prompt chunks and the decode step in one forward (one pass over the weights instead of
        two); False when there is not both kinds of work, or the forward failed (the caller then
        runs the separate steps, which isolate a failing request)."""
        decode = [s for s in self._active if s.pos == len(s.tokens) and s.generated]
        if not decode:
            return False
        chunks = self._chunks()
        if not chunks or chunks[0][0].req.score_layer is not None:
            return False
        try:
            outs = self._prefill(chunks + [(s, None) for s in decode])
        except Exception:
            return False
        for (s, end), (lg, hid) in zip(chunks, outs):
            self._prefilled(s, end, lg, hid)
        self.stats["decode_steps"] += 1
        for s, (lg, _) in zip(decode, outs[len(chunks):]):
            self._emit(s, lg)
        return True

    def _prefill_chunk(self) -> bool:
        """One prefill forward of this step's chunks (`_chunks`), so a burst of short prompts is
        prefilled together and a long one never holds decoding up for more than one chunk."""
        batch = self._chunks()
        if not batch:
            return False
        try:
            outs = self._prefill(batch)
        except Exception:
            outs = None  # isolate the failing request: run each alone, fail only those that raise
        if outs is None:
            for s, end in batch:
                try:
                    self._prefilled(s, end, *self._prefill([(s, end)])[0])
                except Exception as e:
                    self._finish(s, "error", error=f"prefill failed: {e}")
            return True
        for (s, end), (lg, hid) in zip(batch, outs):
            self._prefilled(s, end, lg, hid)
        return True

    def _prefill(self, batch: list[tuple[_Seq, int | None]]) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
        """Run the chunks; per sequence (next-token logits if its prompt ends here, the chunk's
        final-norm hidden rows if it is a "hidden" score). `end` None: a decoding sequence's next
        token (the fused step), with its logits."""
        def piece(s, end):
            return (np.asarray(s.generated[-1:], dtype=np.int64) if end is None else s.tokens[s.pos : end])

        def slot_row(s, end):
            if end is None:
                return torch.tensor([s.slot if s.own_label != BASE else 0])
            return self._slots_for(s, s.labels[s.pos : end])

        toks = torch.from_numpy(np.concatenate([piece(s, end) for s, end in batch]))
        sizes = [len(piece(s, end)) for s, end in batch]
        use_lora = any(s.slot for s, _ in batch)
        slots = torch.cat([slot_row(s, end) for s, end in batch]) if use_lora else None
        last = any(end is None or end == len(s.tokens) for s, end in batch)
        hidden = any(s.req.score == "hidden" for s, _ in batch)
        exit_at = batch[0][0].req.score_layer  # a batch of early-exit scores (see _chunks)
        self.stats["prefill_forwards"] += 1
        seqs = [SeqSlice(s.kv, n) for (s, _), n in zip(batch, sizes)]
        lora, plan = (self.bank, self.bank.plan(slots)) if use_lora else (None, None)
        if hidden or exit_at is not None:  # [N, D]: final-norm hidden rows, or the residual entering exit_at
            out = self.model.score(toks, seqs, lora, plan, last_layer=exit_at)
        else:  # [len(batch), V] (the last row of each chunk) or empty
            out = self.model.decode(toks, seqs, lora, plan, logits="last" if last else "none")
        if exit_at is not None:
            return [(None, r.clone()) for r in torch.split(out, sizes)]
        if not hidden:
            return [(lg, None) for lg in out] if last else [(None, None)] * len(batch)
        rows = torch.split(out, sizes)  # rows[i]: [n_i, D]
        # the same last-row projection as the model's logits="last" (same rows, same matmul)
        logits = linear(out[torch.tensor(sizes).cumsum(0) - 1], self.model.lm_head) if last else None
        return [(None if logits is None else logits[i], rows[i].clone() if s.req.score == "hidden" else None)
                for i, (s, _) in enumerate(batch)]

    def _prefilled(self, s: _Seq, end: int, logits: torch.Tensor | None, hidden: torch.Tensor | None = None) -> None:
        self.stats["prefill_tokens"] += end - s.pos
        s.pos = end
        if s.req.score is not None:
            if hidden is not None:
                s.hidden.append(hidden)
            if end == len(s.tokens):
                self._scored(s, logits)
            return
        if end == len(s.tokens):
            siblings = self._fork(s)  # n samples: each takes a copy of this prompt's K/V
            self._emit(s, logits)
            for sib in siblings:
                self._emit(sib, logits.clone())

    def _scored(self, s: _Seq, logits: torch.Tensor | None) -> None:
        """A score request's result (the reductions the router's direct forwards made), then its end."""
        if s.req.score == "hidden" and s.req.score_from is not None:
            h = s.hidden[0] if len(s.hidden) == 1 else torch.cat(s.hidden)  # [T, D]: positions [reused, len)
            end = len(s.tokens) if s.req.score_to is None else s.req.score_to
            own = h[s.req.score_from - s.reused:end - s.reused].float()
            s.handle.score = {"mean": own.mean(0), "last": own[-1]}
            if s.req.score_keep:
                layer = s.req.score_layer
                if layer is not None:
                    s.kv.resid = {layer: torch.zeros(len(s.tokens), h.shape[1], dtype=s.kv.k.dtype)}
                    s.kv.resid[layer][s.reused:] = h.to(s.kv.k.dtype)
                s.handle.score["kept"] = Kept(tuple(int(t) for t in s.tokens), layer, s.kv, own.sum(0),
                                              start=s.reused, labels=s.labels.copy())
        elif s.req.score == "hidden":
            h = s.hidden[0] if len(s.hidden) == 1 else torch.cat(s.hidden)  # h: [T, D] (T: the positions run)
            h, kept = h.float(), s.req.score_kept
            total = h.sum(0) + (kept.total if kept is not None else 0)  # every position's, the kept ones too
            s.handle.score = {"mean": h.mean(0) if kept is None else total / len(s.tokens), "last": h[-1]}
            if s.req.score_keep:
                s.handle.score["kept"] = Kept(tuple(int(t) for t in s.tokens), s.req.score_layer, s.kv, total)
        else:
            s.handle.score = {"logprobs": torch.log_softmax(logits.float(), dim=-1)}
        s.hidden = []
        self.stats["scored"] += 1
        self._finish(s, "stop")

    def _fork(self, seq: _Seq) -> list[_Seq]:
        """The sibling samples of a prefilled request, each with a copy of its prompt K/V."""
        out = []
        for req, h in seq.handle.siblings:
            slot = self.registry.acquire(req.adapter) if req.adapter is not None else 0
            n, cap = len(seq.tokens), min(len(seq.tokens) + req.sampling.max_tokens, self.max_context)
            kv = self.kv_pool.alloc(cap) if self.kv_pool.fits(cap) else KVBuffer(self.base.args, cap, self.model.dtype)
            kv.keep_residual(seq.kv.resid, self.base.args.dim)
            kv.copy_prefix(seq.kv, n)
            sib = _Seq(req=req, handle=h, tokens=seq.tokens, labels=seq.labels, own_label=seq.own_label, slot=slot,
                       kv=kv, pos=n, reused=n, gen=make_generator(req.sampling.seed), t0=seq.t0,
                       stop_ids=self._stop_ids(req.sampling),
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
            logits = self.model.decode(
                toks, [SeqSlice(s.kv, 1) for s in batch], lora=self.bank if use_lora else None,
                slots=self.bank.plan(slots) if use_lora else None,
            )
        except Exception:
            # Isolate the failing request: run each alone, fail only those that raise.
            for s in batch:
                try:
                    lg = self.model.decode(
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
            return {"prompt_tokens": len(req.prompt), "completion_tokens": 0, "prefill_tokens": 0, "reused_tokens": 0,
                    "upper_tokens": 0}
        return {
            "prompt_tokens": len(s.tokens),
            "completion_tokens": len(s.generated),
            "prefill_tokens": s.pos - s.reused - s.upper,
            "reused_tokens": s.reused,
            "upper_tokens": s.upper,
            "ttft_ms": None if s.t_first is None else round((s.t_first - s.t0) * 1000, 3),
            "total_ms": round((time.perf_counter() - s.t0) * 1000, 3),
        }

    def _finish(self, s: _Seq, reason: str, error: str | None = None, code: str | None = None) -> None:
        if s in self._active:
            self._active.remove(s)
        if s.slot:
            self.registry.release(s.slot)
        self.stats["reused_tokens"] += s.reused
        if reason != "error" and s.kv.length >= len(s.tokens) and (s.req.score is None or s.req.cache) \
                and s.req.score_layer is None:
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
