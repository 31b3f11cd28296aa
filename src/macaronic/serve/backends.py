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


@dataclass
class Generation:
    text: str
    finish_reason: str  # stop | length | cancelled | error
    usage: dict = field(default_factory=dict)  # prompt/completion/prefill/reused tokens, ttft_ms, total_ms
    error: str | None = None


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

    def stream(self, messages: list[dict], adapter: str | None, sampling: SamplingParams) -> AsyncIterator: ...

    def close(self) -> None: ...


LogitsHook = Callable[[list[dict], str | None], Callable | None]


class LocalBackend:
    """The embedded engine (`macaronic.engine.llm.LLM`).

    `logits_hook(messages, adapter)` may return a logits processor for a generation; tests use
    it to script what a tiny random model says while everything else runs for real."""

    label = "local"

    def __init__(self, llm, logits_hook: LogitsHook | None = None):
        self.llm = llm
        self.logits_hook = logits_hook

    def adapters(self) -> dict[str, AdapterMeta]:
        return {i.name: AdapterMeta(i.name, i.mode, i.role, i.id) for i in self.llm.adapters.infos()}

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

    async def stream(self, messages: list[dict], adapter: str | None, sampling: SamplingParams):
        ids = self.encode(messages)
        extra = {}
        if self.logits_hook is not None:
            proc = self.logits_hook(messages, adapter)
            if proc is not None:
                extra["logits_processor"] = proc
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
                    yield Generation("".join(parts), ev.finish_reason, dict(ev.usage or {}), ev.error)
        finally:
            if not h.done.is_set():
                h.cancel()  # the consumer went away (client disconnect): stop decoding

    def close(self) -> None:
        self.llm.close()
