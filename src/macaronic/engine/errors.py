"""The engine's one error type: a stable code and a message for people.

The engine raises `EngineError` for a request it refuses (at submit) and puts its code on the
error event of a request that fails later (`Event.code`). Serving maps codes to HTTP statuses in
one place (macaronic.serve.backends); nothing matches on message text. It subclasses ValueError
so callers that caught the engine's former bare ValueErrors keep working. Knows nothing about HTTP.
"""

from __future__ import annotations

BAD_PROMPT = "bad_prompt"  # empty, or token ids outside the vocabulary
CONTEXT_OVERFLOW = "context_overflow"  # the prompt does not fit the context window
BAD_SAMPLING = "bad_sampling"  # sampling parameters out of range
UNKNOWN_ADAPTER = "unknown_adapter"  # no adapter registered under that name
BAD_REQUEST = "bad_request"  # another field of the request is invalid (active_from)
ADAPTER_LOAD = "adapter_load"  # a registered adapter failed to load into a slot
OVERLOADED = "overloaded"  # no slot or queue space now; retrying later can succeed
INTERNAL = "internal"  # a forward or the sampler failed

CODES = (BAD_PROMPT, CONTEXT_OVERFLOW, BAD_SAMPLING, UNKNOWN_ADAPTER, BAD_REQUEST, ADAPTER_LOAD, OVERLOADED, INTERNAL)


class EngineError(ValueError):
    def __init__(self, code: str, message: str):
        if code not in CODES:
            raise AssertionError(f"unknown engine error code {code!r}")
        super().__init__(message)
        self.code, self.message = code, message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return EngineError, (self.code, self.message)
