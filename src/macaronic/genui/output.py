"""Parse one GenUI specialist reply: text -> (repaired) JSON -> validated `{text_response, a2ui}`.

Knows the output contract and a size cap; delegates repair to `repair.py` and checks to
`validate.py`. Knows nothing about models, decoding or rendering.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from macaronic.genui.repair import repair
from macaronic.genui.validate import Limits, ValidationResult, validate

MAX_BYTES = 256 * 1024  # a GenUI card is a few KiB; anything near a megabyte is a runaway


@dataclass(frozen=True)
class GenUIOutput:
    text_response: str
    messages: list[dict[str, Any]]
    validation: ValidationResult
    repairs: list[str] = field(default_factory=list)
    obj: Any = None

    @property
    def valid(self) -> bool:
        return self.validation.valid

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "errors": self.validation.errors, "repaired": self.repairs,
                "text_response": self.text_response, "a2ui": self.messages}


def failed(message: str, repairs: list[str] | None = None, path: str = "") -> GenUIOutput:
    result = ValidationResult(False, [{"path": path, "message": message}], [], ("parse",))
    return GenUIOutput("", [], result, repairs or [])


def parse_genui_output(text: str | bytes, *, require_envelope: bool = True, max_bytes: int = MAX_BYTES,
                       limits: Limits = Limits()) -> GenUIOutput:
    """Parse, repair and validate a reply. Never raises on bad input: errors are in `.validation`.
    With `require_envelope=False` a bare list of A2UI messages is accepted too."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return failed(f"output is {size} bytes; the cap is {max_bytes} bytes")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            return failed(f"output is not UTF-8: {e}")
    fixed = repair(text)
    if not fixed.ok:
        return failed(f"not JSON: {fixed.error}", fixed.repairs)
    obj = fixed.obj
    if isinstance(obj, list) and require_envelope:
        return failed("expected the object {\"text_response\": ..., \"a2ui\": [...]}, got a bare list",
                      fixed.repairs)
    result = validate(obj, limits)
    text_response = obj.get("text_response", "") if isinstance(obj, dict) else ""
    messages = obj.get("a2ui", []) if isinstance(obj, dict) else obj if isinstance(obj, list) else []
    return GenUIOutput(text_response if isinstance(text_response, str) else "",
                       messages if isinstance(messages, list) else [], result, fixed.repairs, obj)
