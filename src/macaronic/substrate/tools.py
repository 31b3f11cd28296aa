"""The substrate's tool list and the checks every call passes before a handler runs.

`TOOLS` is the fixed, ordered list of tools; `validate_call(name, arguments)` resolves the tool,
parses string arguments, caps their size and validates them against the tool's JSON schema,
raising `ToolError` with every problem in one message. `schema_errors` also checks calls against
client-written schemas (served tools): it never fetches a `$ref` (only references inside the
schema resolve) and matches each `pattern` with a time budget (`regex` module, `REGEX_BUDGET_S`).
`openai_tools()` and `mcp_tools()` render the list for a chat prompt or an MCP listing.

Knows nothing about episodes, transactions or confirmation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache

import regex
from jsonschema import Draft202012Validator, ValidationError, validators
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from macaronic.substrate import tools_calendar, tools_commerce, tools_personal
from macaronic.substrate.toolbase import Tool, ToolError

TOOLS: tuple[Tool, ...] = tools_calendar.TOOLS + tools_personal.TOOLS + tools_commerce.TOOLS
TOOLS_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
assert len(TOOLS_BY_NAME) == len(TOOLS), "duplicate tool names"

# Arguments larger than this are refused before parsing or validation: no tool needs more, and a
# megabyte string must not reach the schema validator, the database or the log.
MAX_ARGUMENT_BYTES = 16 * 1024
MAX_ARGUMENT_DEPTH = 16  # no schema nests deeper than 3; deep nesting only probes recursion limits
REGEX_BUDGET_S = 0.1  # one `pattern` against one value; a catastrophic pattern stops here


def get_tool(name: str, tools: dict[str, Tool] | None = None) -> Tool:
    tools = TOOLS_BY_NAME if tools is None else tools
    if not isinstance(name, str) or name not in tools:
        shown = name if isinstance(name, str) and len(name) <= 80 else f"{str(name)[:80]}..."
        raise ToolError("unknown_tool", f"unknown tool {shown!r}; available: {', '.join(tools)}")
    return tools[name]


def parse_arguments(arguments, max_bytes: int = MAX_ARGUMENT_BYTES) -> dict:
    """Accept a dict or a JSON string (OpenAI `arguments` is a string); enforce the size cap."""
    if arguments is None:
        return {}
    if isinstance(arguments, (str, bytes)):
        if len(arguments) > max_bytes:
            raise ToolError("too_large", f"arguments are {len(arguments)} bytes; the limit is {max_bytes}")
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ToolError("invalid_json", f"arguments are not valid JSON: {e}")
        except RecursionError:
            raise ToolError("invalid_arguments", f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
    if not isinstance(arguments, dict):
        raise ToolError("invalid_arguments", f"arguments must be a JSON object, got {type(arguments).__name__}")
    if depth(arguments) > MAX_ARGUMENT_DEPTH:
        raise ToolError("invalid_arguments", f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
    try:
        size = len(json.dumps(arguments, ensure_ascii=False).encode())
    except (TypeError, ValueError) as e:
        raise ToolError("invalid_arguments", f"arguments are not JSON-serializable: {e}")
    if size > max_bytes:
        raise ToolError("too_large", f"arguments are {size} bytes; the limit is {max_bytes}")
    return arguments


def depth(value, limit: int = MAX_ARGUMENT_DEPTH) -> int:
    """Nesting depth of a JSON value, counted without recursion and stopping past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if d > limit:
            break
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend((x, d + 1) for x in v)
    return deepest


def _refuse(uri: str):
    raise NoSuchResource(ref=uri)  # nothing outside the schema is ever fetched or opened


NO_REMOTE = Registry(retrieve=_refuse)


def _search(pattern: str, text: str, budget_s: float) -> bool:
    try:
        return regex.search(pattern, text, timeout=budget_s, concurrent=True) is not None
    except TimeoutError:
        raise ValidationError(f"the pattern {pattern[:80]!r} took longer than its budget of {budget_s:g} s "
                              f"on {text[:40]!r}") from None
    except regex.error as e:
        raise ValidationError(f"the pattern {pattern[:80]!r} is not a valid regular expression: {e}") from None


def _budgeted(budget_s: float):
    """Draft 2020-12 whose `pattern` and `patternProperties` match under a time budget."""

    def pattern(validator, patrn, instance, schema):
        if validator.is_type(instance, "string"):
            try:
                ok = _search(patrn, instance, budget_s)
            except ValidationError as e:
                yield e
                return
            if not ok:
                yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator, patterns, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for k, v in instance.items():
                try:
                    ok = _search(patrn, k, budget_s)
                except ValidationError as e:
                    yield e
                    return
                if ok:
                    yield from validator.descend(v, subschema, path=k, schema_path=patrn)

    return validators.extend(Draft202012Validator, {"pattern": pattern, "patternProperties": pattern_properties})


@lru_cache(maxsize=256)
def _validator(schema_json: str, budget_s: float = REGEX_BUDGET_S):
    return _budgeted(budget_s)(json.loads(schema_json), registry=NO_REMOTE)


def schema_errors(parameters: dict, arguments: dict, regex_budget_s: float = REGEX_BUDGET_S) -> list[str]:
    """Every violation of a JSON schema as a short line naming the argument, in a stable order."""
    validator = _validator(json.dumps(parameters, sort_keys=True), regex_budget_s)
    try:
        found = list(validator.iter_errors(arguments))
    except Unresolvable as e:
        return [f"the schema refers to {str(getattr(e, 'ref', ''))[:80]!r}, which is not in it (nothing is fetched)"]
    except RecursionError:
        return ["the schema refers to itself without end"]
    out = []
    for err in sorted(found, key=lambda e: (list(map(str, e.path)), e.message)):
        where = ".".join(map(str, err.path))
        msg = err.message if len(err.message) <= 200 else err.message[:200] + "..."
        out.append(f"{where}: {msg}" if where else msg)
    return out


def validate_call(name, arguments, tools: dict[str, Tool] | None = None,
                  max_bytes: int = MAX_ARGUMENT_BYTES) -> tuple[Tool, dict]:
    tool = get_tool(name, tools)
    args = parse_arguments(arguments, max_bytes)
    errors = schema_errors(tool.parameters, args)
    if errors:
        raise ToolError("invalid_arguments", f"{tool.name}: " + "; ".join(errors))
    return tool, args


def openai_tools(tools: Iterable[Tool] = TOOLS) -> list[dict]:
    return [t.openai() for t in tools]


def mcp_tools(tools: Iterable[Tool] = TOOLS) -> list[dict]:
    """Tools as MCP `tools/list` entries (wire field names)."""
    return [{"name": t.name, "description": t.description, "inputSchema": t.parameters,
             "annotations": t.mcp_annotations()} for t in tools]


def read_tools() -> tuple[str, ...]:
    return tuple(t.name for t in TOOLS if t.kind == "read")


def write_tools() -> tuple[str, ...]:
    return tuple(t.name for t in TOOLS if t.kind == "write")
