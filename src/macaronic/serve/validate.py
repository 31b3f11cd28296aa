"""Request validation for the HTTP API: every field the harness reads, checked before any routing
or engine work, so that bad client input is a 400 naming its `param` and never a 500 later.

What is checked, in order:
- the budgets (`serve/budgets.py`): tools per request, schema bytes, nodes and depth, and only
  local `$ref`s in tools and `response_format`, before anything else reads a schema;
- the whole body: nesting depth (`MAX_DEPTH`) and text that cannot be UTF-8 (a lone surrogate
  such as "\\ud800", which JSON can spell but no tokenizer can encode);
- `tools`: OpenAI function tools; `parameters` must be a JSON-Schema object (checked against the
  draft 2020-12 metaschema), the name like OpenAI's (`^[A-Za-z0-9_-]{1,64}$`), the description text;
- `tool_choice`: none | auto | required, or a named function that is among `tools`;
- `messages` (through `views.normalize_messages`), then tool-call arguments (at most
  `MAX_ARGUMENT_DEPTH` deep), JSON contents (at most `MAX_DEPTH`) and pairing: a `tool` message must answer a call of the assistant
  message that opens its run of tool messages, by `tool_call_id`, as OpenAI requires.

Raises `TurnError` (status 400). Knows the OpenAI wire format; knows nothing about the app, the
engine or routing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from macaronic.serve import views
from macaronic.serve.budgets import BudgetError, Budgets, check_request
from macaronic.serve.mol import TurnError
from macaronic.substrate.tools import depth

MAX_DEPTH = 64  # any JSON value in a request; no real schema or conversation nests deeper
MAX_ARGUMENT_DEPTH = 32  # a tool call's arguments, once parsed
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def bad(message: str, param: str | None = None, code: str | None = None) -> TurnError:
    return TurnError(message, 400, code, param)


# ---- the whole body ----------------------------------------------------------------------

def body(value: Any) -> None:
    """Depth and encodable text of a parsed request body (iterative: no recursion limit to hit)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        v, where, d = stack.pop()
        if d > MAX_DEPTH:
            at = where if len(where) <= 80 else where[:77] + "..."
            raise bad(f"{at or 'body'}: nested deeper than {MAX_DEPTH} levels", at or None)
        if isinstance(v, str):
            _text(v, where)
        elif isinstance(v, dict):
            for k, x in v.items():
                _text(k, where)
                stack.append((x, f"{where}.{k}" if where else str(k), d + 1))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, f"{where}[{i}]", d + 1) for i, x in enumerate(v))


def _text(s: str, where: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise bad(f"{where or 'body'}: text is not valid Unicode (a lone surrogate at character {e.start})",
                  where or None) from None


# ---- tools -------------------------------------------------------------------------------

def tools(value: Any, param: str = "tools") -> list[dict] | None:
    """Chat Completions tools ({"type": "function", "function": {...}}), checked."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise bad(f"{param} must be a list of function tools", param)
    names = set()
    for i, t in enumerate(value):
        where = f"{param}[{i}]"
        if not isinstance(t, dict) or t.get("type", "function") != "function":
            raise bad(f"{where}: only {{\"type\": \"function\", \"function\": {{...}}}} tools are supported", where)
        fn = t.get("function")
        if not isinstance(fn, dict):
            raise bad(f"{where}.function must be an object with a name", f"{where}.function")
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise bad(f"{where}.function.name must match {TOOL_NAME.pattern}, got {_short(name)}",
                      f"{where}.function.name")
        if name in names:
            raise bad(f"{where}.function.name: duplicate tool name {name!r}", f"{where}.function.name")
        names.add(name)
        if fn.get("description") is not None and not isinstance(fn["description"], str):
            raise bad(f"{where}.function.description must be a string", f"{where}.function.description")
        if "parameters" in fn and fn["parameters"] is not None:
            schema(fn["parameters"], f"{where}.function.parameters")
        if fn.get("strict") is not None and not isinstance(fn["strict"], bool):
            raise bad(f"{where}.function.strict must be a boolean", f"{where}.function.strict")
    return value


def schema(value: Any, where: str) -> None:
    """A tool's `parameters`: a JSON Schema (metaschema-valid) describing an object."""
    if not isinstance(value, dict):
        raise bad(f"{where} must be a JSON Schema object, got {type(value).__name__}", where)
    if value.get("type", "object") != "object":
        raise bad(f"{where} must describe an object (\"type\": \"object\"), got type {_short(value.get('type'))}",
                  where)
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as e:
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path)
        raise bad(f"{where}{at}: invalid JSON Schema: {_clip(e.message)}", where) from None


def tool_choice(value: Any, given: list[dict] | None, param: str = "tool_choice") -> None:
    """none | auto | required, or {"type": "function", "function": {"name"}} (Responses: {"type", "name"}):
    the rule lives in serve/structured.py (choose_tools), which also builds the grammar from it."""
    from macaronic.serve.structured import StructureError, choose_tools

    try:
        choose_tools(list(given or []), value)
    except StructureError as e:
        raise bad(str(e), param) from None


# ---- messages ----------------------------------------------------------------------------

def messages(value: Any, *, paired: bool = True) -> list[dict]:
    """Normalized messages (views.normalize_messages), with tool-call arguments and, when `paired`,
    tool-message pairing checked. Engine-only serving takes rendered views (tool results without
    ids), so it checks no pairing."""
    try:
        msgs = views.normalize_messages(value)
    except ValueError as e:
        raise bad(str(e), "messages") from None
    for i, m in enumerate(msgs):
        for j, c in enumerate(m.get("tool_calls") or []):
            arguments(c["function"]["arguments"], f"messages[{i}].tool_calls[{j}].function.arguments")
        if m["content"].lstrip()[:1] in ("{", "["):  # the harness parses JSON content (tool results, A2UI events)
            arguments(m["content"], f"messages[{i}].content", MAX_DEPTH)
    if paired:
        pairing(msgs)
    return msgs


def arguments(text: str, where: str, limit: int = MAX_ARGUMENT_DEPTH) -> None:
    """A call's arguments (or a JSON content): any string (a model may have written broken JSON),
    but parsed JSON may not nest deeper than `limit` (rendering it would exhaust the recursion limit)."""
    try:
        parsed = json.loads(text or "{}")
    except RecursionError:
        raise bad(f"{where}: JSON nested deeper than {limit} levels", where) from None
    except ValueError:
        return
    if depth(parsed, limit) > limit:
        raise bad(f"{where}: JSON nested deeper than {limit} levels", where)


def pairing(msgs: list[dict]) -> None:
    """Each tool message answers, by tool_call_id, a call of the assistant message that opens its run."""
    opener: dict | None = None
    at = -1
    for i, m in enumerate(msgs):
        if m["role"] != "tool":
            opener, at = (m, i) if m["role"] == "assistant" and m.get("tool_calls") else (None, -1)
            continue
        where = f"messages[{i}]"
        if opener is None:
            raise bad(f"{where}: a 'tool' message must answer a preceding assistant message with 'tool_calls'",
                      "messages")
        if m.get("tool_call_id") is None:
            raise bad(f"{where}.tool_call_id is required (the id of the call it answers)",
                      f"{where}.tool_call_id")
        ids = [c["id"] for c in opener["tool_calls"]]
        if m["tool_call_id"] not in ids:
            raise bad(f"{where}.tool_call_id {_short(m['tool_call_id'])} matches no call of messages[{at}] "
                      f"(ids {', '.join(map(repr, ids[:8]))})", f"{where}.tool_call_id")


# ---- one request -------------------------------------------------------------------------

def chat(raw: dict, msgs: Any, tool_list: Any, choice: Any, *, engine_only: bool = False,
         response_format: Any = None, budgets: Budgets = Budgets()) -> list[dict]:
    """A whole Chat Completions (or converted Responses) request; returns the normalized messages.
    Slow for a large request (it walks every schema): the app runs it off the event loop."""
    try:
        check_request(tool_list, response_format, budgets)
    except BudgetError as e:
        raise TurnError(str(e), 400, e.code, e.param) from None
    body(raw)
    checked = tools(tool_list)
    tool_choice(choice, checked)
    return messages(msgs, paired=not engine_only)


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _clip(s: str) -> str:
    return s if len(s) <= 300 else s[:297] + "..."
