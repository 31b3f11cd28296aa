"""The engine behind the harness, as one small interface; the embedded engine implements it here
(`remote.py` implements it over HTTP).

A backend lists its adapters (name, mode, role, id), describes its base, and streams one
generation for a list of {role, content} messages with one adapter (None = the bare base):
`stream()` is an async generator of text deltas ending with a `Generation`. Closing the
generator early cancels the generation. Bad requests raise `BackendError` before anything runs;
engine error codes map to HTTP statuses here and nowhere else (`HTTP_OF_ENGINE_CODE`).
Knows nothing about routing, views or HTTP.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, Protocol

from macaronic.engine import errors
from macaronic.engine.errors import EngineError
from macaronic.engine.sampling import SamplingParams


@dataclass(frozen=True)
class AdapterMeta:
    name: str
    mode: str = "full"  # "full" or "turn"
    role: str | None = None
    id: str | None = None
    activation: str = "user"  # turn mode: where it switches on, the "user" or the "assistant" header


@dataclass
class Generation:
    text: str
    finish_reason: str  # stop | length | cancelled | error
    usage: dict = field(default_factory=dict)  # prompt/completion/prefill/reused tokens, ttft_ms, total_ms
    error: str | None = None
    logprobs: list | None = None  # [{"token", "logprob", "bytes", "top_logprobs"}] when asked
    loop_period: int | None = None  # the reply was cut as a repetition loop of this many tokens


class BackendError(Exception):
    """A request the engine refuses: `status` is the HTTP status it maps to."""

    def __init__(self, message: str, status: int = 400, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


# The one place engine error codes become HTTP: code -> (status, OpenAI error code, param).
HTTP_OF_ENGINE_CODE: dict[str, tuple[int, str, str | None]] = {
    errors.BAD_PROMPT: (400, "invalid_request", "messages"),
    errors.CONTEXT_OVERFLOW: (400, "context_length_exceeded", "messages"),
    errors.BAD_SAMPLING: (400, "invalid_request", None),
    errors.BAD_REQUEST: (400, "invalid_request", None),
    errors.UNKNOWN_ADAPTER: (404, "model_not_found", "model"),
    errors.ADAPTER_LOAD: (500, "adapter_load_failed", "model"),
    errors.OVERLOADED: (503, "overloaded", None),
    errors.INTERNAL: (500, "engine_error", None),
}
assert set(HTTP_OF_ENGINE_CODE) == set(errors.CODES)
# codes an engine can report after submit but before any token: still a refusal, not a failed turn
REFUSED_LATE = frozenset({errors.ADAPTER_LOAD, errors.OVERLOADED, errors.UNKNOWN_ADAPTER})


def backend_error(code: str, message: str) -> BackendError:
    status, openai_code, param = HTTP_OF_ENGINE_CODE.get(code, HTTP_OF_ENGINE_CODE[errors.INTERNAL])
    return BackendError(message, status, openai_code, param)


class Backend(Protocol):
    label: str

    def adapters(self) -> dict[str, AdapterMeta]: ...

    def base(self) -> dict: ...  # {"id", "fingerprint"}

    def stream(self, messages: list[dict], adapter: str | None, sampling: SamplingParams, *,
               structure=None, logprobs: int | None = None) -> AsyncIterator: ...

    def close(self) -> None: ...


LogitsHook = Callable[[list[dict], str | None], Callable | None]


class LocalBackend:
    """The embedded engine (`macaronic.engine.llm.LLM`).

    `logits_hook(messages, adapter)` may return a logits processor for a generation; tests use
    it to script what a tiny random model says while everything else runs for real."""

    label = "local"

    def __init__(self, llm, logits_hook: LogitsHook | None = None, compile_s: float = 10.0,
                 stoppable: bool = False):
        self.llm = llm
        self.logits_hook = logits_hook
        self.compile_s = compile_s  # a grammar compile past this is abandoned: 400 (serve/budgets.py)
        self.stoppable = stoppable  # compile in a worker process that is killed at the budget
        self._grammars = None
        self._grammars_lock = asyncio.Lock()

    async def grammars(self):
        """The grammar compiler for this tokenizer (built once, off the event loop)."""
        async with self._grammars_lock:
            if self._grammars is None:
                from macaronic.engine.constraints import Grammars

                llm = self.llm
                self._grammars = await asyncio.to_thread(Grammars, llm.tokenizer, llm.base.args.vocab_size,
                                                         llm.engine.default_stop_ids)
        return self._grammars

    async def processor(self, structure):
        """A fresh logits processor for a grammar spec (compiled off the event loop within the compile
        budget, cached)."""
        from macaronic.engine.constraints import Constrained, GrammarError, serialized_compile
        from macaronic.serve import pools
        from macaronic.serve.budgets import BudgetError, off_loop

        g = await self.grammars()
        try:
            if not self.stoppable:
                return await off_loop(g.processor, structure, budget_s=self.compile_s)
            compiled = g.cached(structure)
            if compiled is None:
                info = await pools.run(pools.GRAMMAR, lambda: g.info_json)  # serialized once, then cached
                data = await off_loop(serialized_compile, info, structure, budget_s=self.compile_s, stoppable=True)
                compiled = await pools.run(pools.GRAMMAR, g.remember, structure, data)
            return Constrained(compiled, g.vocab_size)
        except GrammarError as e:
            raise BackendError(f"the requested structure cannot be compiled: {e}", 400, "invalid_structure") from None
        except BudgetError as e:
            raise BackendError(str(e), 400, e.code, "tools") from None

    def token_logprobs(self, entries) -> list[dict]:
        """Engine (id, logprob, top) tuples -> OpenAI logprob objects (token text and its bytes)."""
        vocab = self._grammars.info.decoded_vocab if self._grammars is not None else None

        def one(tid: int, lp: float) -> dict:
            raw = vocab[tid] if vocab is not None and tid < len(vocab) else \
                self.llm.tokenizer.decode([tid]).encode("utf-8", "replace")
            return {"token": raw.decode("utf-8", "replace"), "logprob": max(lp, -9999.0), "bytes": list(raw)}

        return [{**one(t, lp), "top_logprobs": [one(i, v) for i, v in top]} for t, lp, top in entries]

    def adapters(self) -> dict[str, AdapterMeta]:
        return {i.name: AdapterMeta(i.name, i.mode, i.role, i.id, i.activation)
                for i in self.llm.adapters.infos()}

    def engine_stats(self) -> dict[str, float]:
        """The engine's counters (tokens prefilled and generated, steps), the sequences it runs now and
        the grammar cache's compiles and hits (a request that found its grammar compiled is a hit)."""
        eng = self.llm.engine
        g = self._grammars.stats if self._grammars is not None else {"compiled": 0, "hits": 0}
        return {**eng.stats, "running": len(eng._active), "waiting": len(eng._waiting),
                "grammar_compiled": g["compiled"], "grammar_hits": g["hits"]}

    def base(self) -> dict:
        return {"id": self.llm.base.name, "fingerprint": self.llm.base.fingerprint}

    @property
    def max_context(self) -> int:
        return self.llm.engine.max_context

    @property
    def max_tokens_limit(self) -> int:
        return self.llm.config.max_tokens_limit

    def encode(self, messages: list[dict]) -> list[int]:
        return self.llm.encode_chat(messages)

    async def aencode(self, messages: list[dict]) -> list[int]:
        """`encode` off the event loop: a 100,000-character prompt takes a while to render and tokenize."""
        from macaronic.serve import pools

        return await pools.run(pools.TURN, self.encode, messages)

    async def _extra(self, messages, adapter, structure, logprobs) -> dict:
        extra: dict = {} if logprobs is None else {"logprobs": logprobs}
        if logprobs is not None:
            await self.grammars()  # its vocabulary gives each token's bytes
        if structure is not None:
            extra["logits_processor"] = await self.processor(structure)
        if self.logits_hook is not None:
            proc = self.logits_hook(messages, adapter)
            if proc is not None:
                inner = extra.get("logits_processor")
                # a scripted hook (tests) speaks first; a grammar still masks what it says
                extra["logits_processor"] = proc if inner is None else (lambda g, lg: inner(g, proc(g, lg)))
        return extra

    def route_prefill(self, layout: list[dict], layer: int | None) -> dict:
        """The route read from the answer's own prefill (`LLM.route_prefill`): `layout` with its
        assistant header, the views over the last user turn; {"mean", "last"} and "kept", for
        `stream(..., resume=kept)`."""
        return self.llm.route_prefill_chat(layout, layer)

    def _resume(self, ids: list[int], adapter: str | None, resume) -> dict:
        """{"resume": kept} when the generation can take the kept route prefill, else nothing (it
        prefills as usual: a route whose answer's layout differs, such as a user-header adapter's)."""
        return {"resume": resume} if resume is not None and self.llm.can_resume(ids, adapter, resume) else {}

    async def sample_n(self, messages: list[dict], adapter: str | None, samplings: list[SamplingParams], *,
                       structure=None, logprobs: int | None = None, resume=None) -> list[Generation]:
        """n samples of one prompt that share its prefill; one Generation each, in order."""
        ids = await self.aencode(messages)
        reqs = []
        for sp in samplings:
            extra = {**await self._extra(messages, adapter, structure, logprobs), **self._resume(ids, adapter, resume)}
            reqs.append(self.llm.request(ids, adapter, sp, **extra))
        try:
            handles = self.llm.engine.submit_n(reqs, loop=asyncio.get_running_loop())
        except EngineError as e:
            raise backend_error(e.code, str(e)) from None
        out = []
        try:
            for h in handles:
                parts, last = [], None
                async for ev in h.aiter():
                    parts.append(ev.text)
                    last = ev
                if last.finish_reason == "error" and last.code in REFUSED_LATE:
                    raise backend_error(last.code, last.error or last.code)
                out.append(self._generation(h, "".join(parts), last))
        finally:
            for h in handles:
                if not h.done.is_set():
                    h.cancel()
        return out

    def _generation(self, h, text: str, ev) -> Generation:
        return Generation(text, ev.finish_reason, dict(ev.usage or {}), ev.error,
                          self.token_logprobs(h.logprobs) if h.request.logprobs is not None else None,
                          h.loop_period)

    async def stream(self, messages: list[dict], adapter: str | None, sampling: SamplingParams, *,
                     structure=None, logprobs: int | None = None, resume=None):
        """Text deltas, then one Generation. `resume`: a kept route prefill (`route_prefill`) the
        prompt may continue; taken when it does (`_resume`)."""
        ids = await self.aencode(messages)
        extra = {**await self._extra(messages, adapter, structure, logprobs), **self._resume(ids, adapter, resume)}
        try:
            h = self.llm.submit(ids, adapter, sampling, loop=asyncio.get_running_loop(), **extra)
        except EngineError as e:
            raise backend_error(e.code, str(e)) from None
        parts = []
        try:
            async for ev in h.aiter():
                if ev.finish_reason == "error" and not parts and ev.code in REFUSED_LATE:
                    raise backend_error(ev.code, ev.error or ev.code)  # nothing sent yet: a clean refusal
                if ev.text:
                    parts.append(ev.text)
                    yield ev.text
                if ev.finish_reason is not None:
                    yield self._generation(h, "".join(parts), ev)
        finally:
            if not h.done.is_set():
                h.cancel()  # the consumer went away (client disconnect): stop decoding

    def close(self) -> None:
        self.llm.close()
