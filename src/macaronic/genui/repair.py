"""Repair near-miss JSON from a model before validation.

Fixes, each recorded by name: a markdown fence around the JSON, prose before or after it,
typographic quotes used as JSON quotes, trailing commas, raw control characters inside strings,
and a truncated tail (an open string closed, a dangling partial member dropped, open brackets
closed). Knows only JSON text; it does not know what A2UI is, and it never invents content
beyond the closing characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

SMART_OPEN = "\u201c\u201e\u201f"  # “ „ ‟
SMART_CLOSE = "\u201d"  # ”
CLOSERS = {"{": "}", "[": "]"}
FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
MAX_STARTS = 20  # candidate '{' / '[' positions tried when prose surrounds the JSON
MAX_CUTS = 64  # how far back a truncated tail may be trimmed


@dataclass(frozen=True)
class RepairResult:
    obj: Any = None
    repairs: list[str] = field(default_factory=list)
    error: str | None = None
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Scan:
    out: list[str]
    end: int  # index just past the balanced value, or len(text) if it never closed
    stack: list[str]
    in_string: bool
    repairs: set[str]
    structural: list[int]  # positions in `out` of ',' '{' '[' ':' outside strings


def repair(text: str) -> RepairResult:
    """Parse `text` as JSON, repairing near misses; `obj` is None and `error` set on failure."""
    stripped = text.strip()
    try:
        return RepairResult(json.loads(stripped), [], None, stripped)
    except ValueError:
        pass
    repairs: list[str] = []
    body = stripped
    fence = FENCE.search(body)
    if fence:
        repairs.append("markdown_fence")
        if body[: fence.start()].strip():
            repairs.append("prose_before")
        if body[fence.end():].strip():
            repairs.append("prose_after")
        body = fence.group(1).strip()
    starts = [m.start() for m in re.finditer(r"[\[{]", body)][:MAX_STARTS]
    if not starts:
        return RepairResult(None, repairs, "no JSON object or array found", body)
    last_error = "unparseable JSON"
    for start in starts:
        result = repair_from(body, start)
        if result.ok:
            extra = []
            if body[:start].strip() and "prose_before" not in repairs:
                extra.append("prose_before")
            return RepairResult(result.obj, repairs + extra + result.repairs, None, result.text)
        last_error = result.error or last_error
    return RepairResult(None, repairs, last_error, body)


def repair_from(body: str, start: int) -> RepairResult:
    scan = scan_value(body, start)
    repairs = sorted(scan.repairs)
    candidate = "".join(scan.out)
    if not scan.stack and not scan.in_string:
        if body[scan.end:].strip():
            repairs.append("prose_after")
        return parse(candidate, repairs)
    return close_truncated(scan, repairs)


def parse(candidate: str, repairs: list[str]) -> RepairResult:
    try:
        return RepairResult(json.loads(candidate), repairs, None, candidate)
    except ValueError as e:
        return RepairResult(None, repairs, f"invalid JSON: {e}", candidate)


def close_truncated(scan: Scan, repairs: list[str]) -> RepairResult:
    """Close an open string and the open brackets; if that does not parse, trim the tail back
    to an earlier separator (dropping a partial member) and try again. A tail that leaves
    nothing but empty brackets is not a recovery."""
    result = _close_truncated(scan, repairs)
    if result.ok and result.obj in ({}, []):
        return RepairResult(None, result.repairs, "truncated before any complete value", result.text)
    return result


def _close_truncated(scan: Scan, repairs: list[str]) -> RepairResult:
    out = "".join(scan.out)
    if scan.in_string:
        out += '"'
        repairs = repairs + ["closed_string"]
    attempt = parse(out + closers_for(out), repairs + ["closed_brackets"])
    if attempt.ok:
        return attempt
    for cut in list(reversed(scan.structural))[:MAX_CUTS]:
        head = out[:cut] if out[cut] in ",:" else out[: cut + 1]
        head = head.rstrip()
        if head.endswith(":"):
            continue
        attempt = parse(head + closers_for(head), repairs + ["dropped_partial_tail", "closed_brackets"])
        if attempt.ok:
            return attempt
    return RepairResult(None, repairs, "truncated JSON could not be closed", out)


def closers_for(prefix: str) -> str:
    scan = scan_value(prefix, 0, stop_when_closed=False)
    return "".join(CLOSERS[c] for c in reversed(scan.stack))


def scan_value(text: str, start: int, stop_when_closed: bool = True) -> Scan:
    out: list[str] = []
    stack: list[str] = []
    structural: list[int] = []
    repairs: set[str] = set()
    in_string, smart, i = False, False, start
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\" and i + 1 < len(text):
                out += [ch, text[i + 1]]
                i += 2
                continue
            if ch == '"' and not smart or smart and ch in SMART_CLOSE + '"' and closes_here(text, i):
                out.append('"')
                in_string = False
            elif ch == '"':  # a quote inside a smart-quoted string that does not close it
                out.append('\\"')
            elif ord(ch) < 0x20:
                out.append(json.dumps(ch)[1:-1])
                repairs.add("escaped_control_chars")
            else:
                out.append(ch)
        elif ch == '"' or ch in SMART_OPEN + SMART_CLOSE:
            if ch != '"':
                repairs.add("smart_quotes")
            in_string, smart = True, ch != '"'
            out.append('"')
        elif ch in "{[":
            stack.append(ch)
            structural.append(len(out))
            out.append(ch)
        elif ch in "}]":
            drop_trailing_comma(out, structural, repairs)
            if not stack or CLOSERS[stack[-1]] != ch:  # mismatched: not this candidate
                out.append(ch)
                return Scan(out, i + 1, [], False, repairs, structural)
            stack.pop()
            out.append(ch)
            if not stack and stop_when_closed:
                return Scan(out, i + 1, stack, False, repairs, structural)
        else:
            if ch in ",:":
                structural.append(len(out))
            out.append(ch)
        i += 1
    return Scan(out, len(text), stack, in_string, repairs, structural)


def closes_here(text: str, i: int) -> bool:
    # Typographic quotes also occur as content ("a “quoted” word"); one closes a smart-quoted
    # string only when JSON structure follows it.
    rest = text[i + 1:].lstrip()
    return not rest or rest[0] in ",:}]"


def drop_trailing_comma(out: list[str], structural: list[int], repairs: set[str]) -> None:
    j = len(out) - 1
    while j >= 0 and out[j] in " \t\r\n":
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]
        if structural and structural[-1] == j:
            structural.pop()
        repairs.add("trailing_comma")
