"""Tool calls as text: the canonical format the agent specialist emits, a lenient parser from
model text to OpenAI `tool_calls`, and the prompt that lists the tools.

Canonical call (one block per call, Hermes-style tags):

    <tool_call>{"name": "create_event", "arguments": {"end": "...", "start": "...", "title": "..."}}</tool_call>

The parser is lenient about the wrapping (tags, a bare JSON object, a ```json fence, trailing
commas, one short piece of trailing junk, an unclosed last tag) and strict about the content:
an unknown tool, a missing required argument or a wrong type gives one error string the
harness can feed back to the model, and then no calls at all.

Knows nothing about episodes or state: it only turns text into calls and calls into text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from macaronic.substrate.toolbase import Tool
from macaronic.substrate.tools import (MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH, REGEX_BUDGET_S, TOOLS, depth,
                                       schema_errors)

OPEN, CLOSE = "<tool_call>", "</tool_call>"
RESULT_OPEN, RESULT_CLOSE = "<tool_response>", "</tool_response>"
MAX_TRAILING_JUNK = 16  # e.g. a stray "}", "</s>" or "." after the JSON; prose is not junk

_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)(?:" + re.escape(CLOSE) + r"|\Z)", re.S)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)


@dataclass(frozen=True)
class ParseResult:
    content: str  # the text outside tool calls
    tool_calls: tuple[dict, ...]  # OpenAI format: {"id", "type": "function", "function": {...}}
    error: str | None = None  # set when a call was attempted but is malformed; then no calls

    @property
    def ok(self) -> bool:
        return self.error is None


class _Bad(Exception):
    pass


# ---- rendering ---------------------------------------------------------------------------

def format_tool_call(name: str, arguments: dict) -> str:
    """The canonical text of one call: the training target for the agent specialist."""
    body = json.dumps({"name": name, "arguments": _sorted(arguments)}, ensure_ascii=False)
    return f"{OPEN}{body}{CLOSE}"


def format_tool_calls(calls: Iterable[tuple[str, dict]]) -> str:
    return "\n".join(format_tool_call(n, a) for n, a in calls)


def format_tool_result(result: dict) -> str:
    return f"{RESULT_OPEN}{json.dumps(result, ensure_ascii=False, sort_keys=True)}{RESULT_CLOSE}"


def format_tool_prompt(tools: Sequence[Tool | dict] = TOOLS) -> str:
    """The tool list and calling convention, for a system prompt."""
    lines = ["You can use tools. Their signatures, one JSON object per line:", "<tools>"]
    lines += [json.dumps(_openai(t), ensure_ascii=False) for t in tools]
    lines += ["</tools>",
              "To call a tool, reply with one block per call, exactly in this form:",
              f'{OPEN}{{"name": "<tool name>", "arguments": {{<arguments as a JSON object>}}}}{CLOSE}',
              f"Each result comes back as {RESULT_OPEN}...{RESULT_CLOSE}. A result with an \"error\" "
              "explains what went wrong; a \"pending_confirmation\" result means nothing was changed "
              "until the user confirms. When you have what you need, answer the user in plain text."]
    return "\n".join(lines)


def _openai(tool: Tool | dict) -> dict:
    return tool.openai() if isinstance(tool, Tool) else tool


def _sorted(obj):
    if isinstance(obj, dict):
        return {k: _sorted(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [_sorted(v) for v in obj]
    return obj


# ---- parsing -----------------------------------------------------------------------------

def parse_tool_calls(text: str, tools: Sequence[Tool | dict] = TOOLS, regex_s: float = REGEX_BUDGET_S) -> ParseResult:
    """Find the tool calls in a model's reply and check them against the tools' schemas (each
    `pattern` within `regex_s` seconds; a `$ref` outside the schema is never fetched)."""
    schemas = {f["name"]: f.get("parameters") or {"type": "object"}
               for f in (_openai(t)["function"] for t in tools)}
    try:
        objs, content = _extract(text)
        calls = [_check_call(o, schemas, regex_s) for o in _flatten(objs)]
    except _Bad as e:
        return ParseResult(content=text.strip(), tool_calls=(), error=str(e))
    return ParseResult(content=content, tool_calls=tuple(_openai_call(n, a, i) for i, (n, a) in enumerate(calls)))


def _extract(text: str) -> tuple[list, str]:
    """The JSON values that are tool calls, and the remaining prose."""
    if OPEN in text:
        objs = []
        for m in _BLOCK.finditer(text):
            body = _unfence(m.group(1).strip())
            if not body:
                raise _Bad(f"empty {OPEN} block")
            objs.append(_loads(body, where=f"in a {OPEN} block"))
        return objs, _BLOCK.sub("", text).strip()
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        if not _looks_like_call(stripped):
            return [], stripped
        return [_loads(stripped, where="in the tool call")], ""
    objs, kept = [], []
    for m in _FENCE.finditer(text):
        body = m.group(1).strip()
        if body.startswith(("{", "[")) and _looks_like_call(body):
            objs.append(_loads(body, where="in the fenced tool call"))
            kept.append(m.group(0))
    content = text
    for block in kept:
        content = content.replace(block, "", 1)
    return objs, content.strip()


def _looks_like_call(s: str) -> bool:
    return re.search(r'"(name|function)"\s*:', s) is not None


def _unfence(body: str) -> str:
    m = _FENCE.fullmatch(body)
    return m.group(1).strip() if m else body


def _loads(s: str, where: str):
    """json.loads, forgiving trailing commas and one short piece of trailing junk."""
    if len(s) > 4 * MAX_ARGUMENT_BYTES:
        raise _Bad(f"the tool call is {len(s)} characters; arguments are limited to {MAX_ARGUMENT_BYTES} bytes")
    for candidate in (s, _drop_trailing_commas(s)):
        try:
            value, end = json.JSONDecoder().raw_decode(candidate)
        except json.JSONDecodeError:
            continue
        except RecursionError:
            raise _Bad(f"the JSON {where} nests too deeply")
        junk = candidate[end:].strip()
        if len(junk) <= MAX_TRAILING_JUNK and "\n" not in junk:
            return value
        raise _Bad(f"unexpected text after the JSON {where}: {junk[:40]!r}")
    try:
        json.loads(_drop_trailing_commas(s))
    except json.JSONDecodeError as e:
        raise _Bad(f"invalid JSON {where}: {e.msg} at line {e.lineno} column {e.colno}")
    raise _Bad(f"invalid JSON {where}")  # pragma: no cover - raw_decode failed but loads did not


def _drop_trailing_commas(s: str) -> str:
    """Remove commas that directly precede } or ], outside strings."""
    out, in_str, esc = [], False, False
    for i, ch in enumerate(s):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "," and _next_char(s, i + 1) in ("}", "]"):
            continue
        out.append(ch)
    return "".join(out)


def _next_char(s: str, i: int) -> str:
    while i < len(s) and s[i].isspace():
        i += 1
    return s[i] if i < len(s) else ""


def _flatten(objs: list) -> list:
    out = []
    for o in objs:
        if isinstance(o, list):
            out.extend(o)
        elif isinstance(o, dict) and isinstance(o.get("tool_calls"), list):
            out.extend(o["tool_calls"])
        else:
            out.append(o)
    return out


def _check_call(obj, schemas: dict[str, dict], regex_s: float = REGEX_BUDGET_S) -> tuple[str, dict]:
    if not isinstance(obj, dict):
        raise _Bad(f"a tool call must be a JSON object with \"name\" and \"arguments\", got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict):  # OpenAI shape {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise _Bad('a tool call needs a "name" string')
    if name not in schemas:
        raise _Bad(f"unknown tool {name[:80]!r}; available tools: {', '.join(schemas)}")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI puts arguments in a JSON string
        args = _loads(args, where=f"in the arguments of {name}") if args.strip() else {}
    if not isinstance(args, dict):
        raise _Bad(f'{name}: "arguments" must be a JSON object, got {type(args).__name__}')
    if depth(args) > MAX_ARGUMENT_DEPTH:
        raise _Bad(f"{name}: arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
    if len(json.dumps(args, ensure_ascii=False).encode()) > MAX_ARGUMENT_BYTES:
        raise _Bad(f"{name}: arguments exceed {MAX_ARGUMENT_BYTES} bytes")
    errors = schema_errors(schemas[name], args, regex_s)
    if errors:
        raise _Bad(f"{name}: " + "; ".join(errors))
    return name, args


def _openai_call(name: str, args: dict, index: int) -> dict:
    arguments = json.dumps(args, ensure_ascii=False, sort_keys=True)
    digest = hashlib.sha256(f"{index}:{name}:{arguments}".encode()).hexdigest()[:12]
    return {"id": f"call_{digest}", "type": "function",
            "function": {"name": name, "arguments": arguments}}
