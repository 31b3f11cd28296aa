"""Which grammar a reply decodes under: tool calls, `response_format`, GenUI cards.

One function, `structure_for(...)`, turns a request's `tools` + `tool_choice`, its
`response_format` and the answering role into a `Structure`: the grammar spec (plain data for
`macaronic.engine.constraints`) and what the harness must expect of the text.

- Tools (`tool_choice` auto; `parallel_tool_calls` false: at most one call): free text, and wherever the model opens `<tool_call>` the call is
  forced to `{"name": <a given name>, "arguments": <that tool's schema>}` in the canonical layout
  the agent specialist is trained on (`substrate.toolcalls.format_tool_call`: keys sorted, `", "`
  and `": "`). `required`: one or more calls and nothing else; a named function: exactly one
  call of it; `none`: no tools at all.
- `response_format` json_object / json_schema: the reply is one JSON value of that schema (with
  tools in auto, either that JSON value or calls).
- The genui role, unless the client gave a `response_format`: the GenUI output contract
  (`genui.grammar.contract_schema`), compact separators.

Schemas are checked before compiling: a keyword the grammar cannot enforce is a `StructureError`
naming it (the server answers 400), never silently ignored. Knows JSON Schema, the tool-call text
format and the OpenAI request fields; nothing about engines, routing or HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from macaronic.engine.constraints import GrammarSpec
from macaronic.specialist import output_of
from macaronic.substrate.toolcalls import CLOSE, OPEN

# JSON Schema keywords the grammar enforces, plus annotations that change nothing.
ENFORCED = {"type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const",
            "anyOf", "oneOf", "$ref", "$defs", "definitions", "minItems", "maxItems", "minLength", "maxLength",
            "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minProperties",
            "maxProperties"}
ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
               "readOnly", "writeOnly", "strict", "nullable"}
# Validated after decoding, not by the grammar: kept out of a tool's grammar, checked by the
# tool-call parser (jsonschema) against the full schema. In a response_format they are a 400.
CHECKED_AFTER = {"uniqueItems", "multipleOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                 "patternProperties", "propertyNames", "contains", "minContains", "maxContains", "allOf",
                 "unevaluatedProperties", "unevaluatedItems"}
# Backstops for callers that bypass the server's budgets (serve/budgets.py, set by `macaronic serve`
# flags, are the served limits and are measured first); the depth also bounds `walk`'s recursion.
MAX_SCHEMA_BYTES = 8 << 20
MAX_SCHEMA_DEPTH = 64
CALL_SEPARATOR = "\n"  # between consecutive calls, as format_tool_calls writes them
# A JSON number in a call's arguments holds at most this many digits before its exponent: float64's
# exact decimal precision. A small model writes Python's float noise into arguments
# (`100.00000000000001`, `300000.00000000015`, `0.0100000000000000025625625...`); the grammar ends
# such a number at its 15th digit, where the noise begins, with no exponent after it (cut short,
# the model would carry the noise into one: `0.01000000000000e-0600...`). Integers ("type":
# "integer") and numbers with bounds (which xgrammar already writes with at most 6 decimals) keep
# xgrammar's own rules.
NUMBER_DIGITS = 15


class StructureError(ValueError):
    """A request whose structure the harness cannot enforce; `param` names the field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Structure:
    spec: GrammarSpec
    kind: str  # "tools" | "json" | "genui"
    tool_names: tuple[str, ...] = ()
    calls_required: bool = False  # required / named function: the reply is calls only
    json_alternative: bool = False  # tools in auto with a response_format: JSON or calls


# ---- schema checks ---------------------------------------------------------------------------

def check_schema(schema: Any, where: str, lenient: bool = False) -> None:
    """Refuse a schema the grammar cannot enforce exactly; names the first offending keyword.
    `lenient` (tool parameters): any other keyword passes: CHECKED_AFTER ones are validated after
    decoding, unknown ones (e.g. BFCL's `optional`) are annotations by JSON Schema's own rule."""
    if not isinstance(schema, dict):
        raise StructureError(f"{where} must be a JSON Schema object, got {type(schema).__name__}", where)
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise StructureError(f"{where} is larger than {MAX_SCHEMA_BYTES} bytes", where)

    def walk(node: Any, path: str, depth: int) -> None:
        if depth > MAX_SCHEMA_DEPTH:
            raise StructureError(f"{where}: schema nested deeper than {MAX_SCHEMA_DEPTH} levels at {path}", where)
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            raise StructureError(f"{where}: expected a schema object at {path}", where)
        for key, value in node.items():
            if lenient and key not in ENFORCED:
                continue
            if key not in ENFORCED and key not in ANNOTATIONS:
                raise StructureError(f"{where}: unsupported JSON Schema feature {key!r} at {path or '/'}", where)
            if key in ("properties", "$defs", "definitions"):
                if not isinstance(value, dict):
                    raise StructureError(f"{where}: {key!r} must be an object at {path or '/'}", where)
                for name, sub in value.items():
                    walk(sub, f"{path}/{key}/{name}", depth + 1)
            elif key in ("anyOf", "oneOf", "prefixItems"):
                if not isinstance(value, list) or not value:
                    raise StructureError(f"{where}: {key!r} must be a non-empty list at {path or '/'}", where)
                for i, sub in enumerate(value):
                    walk(sub, f"{path}/{key}/{i}", depth + 1)
            elif key in ("items", "additionalProperties") and not isinstance(value, bool):
                walk(value, f"{path}/{key}", depth + 1)
            elif key == "required" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise StructureError(f"{where}: 'required' must be a list of names at {path or '/'}", where)
            elif key == "$ref" and not (isinstance(value, str) and value.startswith("#")):
                raise StructureError(f"{where}: $ref {str(value)[:80]!r} at {path or '/'} is not local; only "
                                     "references into the same schema (\"#...\") are allowed", where)

    walk(schema, "", 0)
    dead = endless(sorted_schema(schema))
    if dead is not None:
        raise StructureError(f"{where}: the schema at {dead} refers to itself with no way to end (every choice "
                             "leads back to it), so no value can match it", where)


def endless(schema: Any) -> str | None:
    """The path of the first subschema no finite value can match (a reference cycle with no base
    case, e.g. {"anyOf": [{"$ref": "#"}]}), or None. A grammar compiled from such a schema has
    a rule that can never end; decoding under it fails. Least fixed point over the subschemas."""
    nodes: dict[str, Any] = {}
    stack = [("#", schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict) or path in nodes:
            continue
        nodes[path] = node
        for key in ("properties", "$defs", "definitions"):
            if isinstance(node.get(key), dict):
                stack += [(f"{path}/{key}/{_escape(k)}", v) for k, v in node[key].items()]
        for key in ("anyOf", "oneOf", "prefixItems"):
            if isinstance(node.get(key), list):
                stack += [(f"{path}/{key}/{i}", v) for i, v in enumerate(node[key])]
        for key in ("items", "additionalProperties"):
            stack.append((f"{path}/{key}", node.get(key)))

    def target(ref: str) -> str:
        return "#" if ref in ("#", "#/") else ref.rstrip("/")

    def ok(node: Any, path: str, live: set) -> bool:
        def sub(x: Any, at: str) -> bool:
            return x is not False and (not isinstance(x, dict) or at in live)

        if isinstance(node.get("$ref"), str) and target(node["$ref"]) in nodes and target(node["$ref"]) not in live:
            return False
        for key in ("anyOf", "oneOf"):
            alts = node.get(key)
            if isinstance(alts, list) and alts and not any(sub(a, f"{path}/{key}/{i}") for i, a in enumerate(alts)):
                return False
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        for name in node.get("required") or ():
            if name in props and not sub(props[name], f"{path}/properties/{_escape(name)}"):
                return False
        low = node.get("minItems", 0) if isinstance(node.get("minItems"), int) else 0
        prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else []
        for i in range(min(low, len(prefix) + 1)):
            if i < len(prefix):
                if not sub(prefix[i], f"{path}/prefixItems/{i}"):
                    return False
            elif "items" in node and not sub(node["items"], f"{path}/items"):
                return False
        return True

    live: set[str] = set()
    changed = True
    while changed:
        changed = False
        for path, node in nodes.items():
            if path not in live and ok(node, path, live):
                live.add(path)
                changed = True
    dead = [p for p in nodes if p not in live]
    refs = [p for p in dead if "$ref" in nodes[p]]  # name where the cycle closes, not what contains it
    return min(refs or dead, key=len) if dead else None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def sorted_schema(schema: Any) -> Any:
    """The schema with every object's properties in sorted order (the grammar then writes keys
    sorted, as the canonical tool-call layout and so the agent's training data do), keeping only
    the keywords the grammar enforces (the rest is checked after decoding or is annotation)."""
    if isinstance(schema, list):
        return [sorted_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: ({n: sorted_schema(d) for n, d in v.items()} if k in ("$defs", "definitions") and isinstance(v, dict)
               else sorted_schema(v)) for k, v in schema.items() if k in ENFORCED}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: sorted_schema(schema["properties"][k]) for k in sorted(schema["properties"])}
    return out


# ---- tools -----------------------------------------------------------------------------------

def parameters_of(tool: dict) -> dict:
    params = tool["function"].get("parameters")
    return {"type": "object", "properties": {}} if params in (None, {}) else params


_NUMBER_INT = 'basic_number_2 ::= (("0") | ([1-9] [0-9]*))'  # xgrammar's plain number: integer part,
_NUMBER_FRACTION = 'basic_number_3 ::= ("" | ("." basic_number_digits{1, -1}))'  # fraction,
_NUMBER_EXPONENT = 'basic_number_5 ::= ("" | ([eE] basic_number_4 basic_number_digits{1, -1}))'  # exponent


def bounded_numbers(ebnf: str, digits: int = NUMBER_DIGITS) -> str:
    """xgrammar's EBNF for a JSON schema with its plain number rule bounded: at most `digits` digits
    before the exponent (integer part and fraction), and a number that used them all ends there (no
    exponent after a mantissa cut short; an exponent has at most 3 digits, float64's range). EBNF
    without xgrammar's rules is returned as it is."""
    if any(rule not in ebnf for rule in (_NUMBER_INT, _NUMBER_FRACTION, _NUMBER_EXPONENT)):
        return ebnf
    exp = '("" | ([eE] basic_number_4 basic_number_digits{1, 3}))'

    def tail(room: int) -> str:  # what may follow an integer part that leaves `room` digits
        if room == 0:
            return '""'
        alts = [exp, f'("." basic_number_digits{{{room}, {room}}})']  # a full mantissa ends the number
        if room > 1:
            alts.insert(1, f'("." basic_number_digits{{1, {room - 1}}} {exp})')
        return f"({' | '.join(alts)})"

    alts = [f'("0" {tail(digits - 1)})']
    for k in range(1, digits + 1):  # k digits before the point, the first not 0
        more = f" basic_number_digits{{{k - 1}, {k - 1}}}" if k > 1 else ""
        alts.append(f"([1-9]{more} {tail(digits - k)})")
    return (ebnf.replace(_NUMBER_INT, f"basic_number_2 ::= ({' | '.join(alts)})")
            .replace(_NUMBER_FRACTION, 'basic_number_3 ::= ("")').replace(_NUMBER_EXPONENT, 'basic_number_5 ::= ("")'))


def call_tag(tool: dict) -> dict:
    """One structural tag: the call's fixed head, its arguments under the tool's schema, its tail."""
    import xgrammar as xgr

    name = tool["function"]["name"]
    args = json.dumps(sorted_schema(parameters_of(tool)))
    try:
        ebnf = bounded_numbers(str(xgr.Grammar.from_json_schema(args, any_whitespace=False,
                                                                separators=(", ", ": "), strict_mode=True)))
    except Exception as e:
        raise StructureError(f"tools: the parameters of {name!r} cannot be compiled: {str(e).splitlines()[0]}",
                             "tools") from None
    head = OPEN + json.dumps({"name": name}, ensure_ascii=False)[:-1] + ', "arguments": '
    return {"type": "tag", "begin": head, "content": {"type": "grammar", "grammar": ebnf}, "end": "}" + CLOSE}


def choose_tools(tools: list[dict], tool_choice: Any) -> tuple[list[dict], str]:
    """The tools the reply may call and the simplified choice: auto | required | forced."""
    if tool_choice in (None, "auto"):
        return tools, "auto"
    if tool_choice == "none":
        return [], "auto"
    if tool_choice == "required":
        if not tools:
            raise StructureError("tool_choice 'required' needs tools", "tool_choice")
        return tools, "required"
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        fn = tool_choice.get("function") if isinstance(tool_choice.get("function"), dict) else tool_choice
        name = fn.get("name")
        if not isinstance(name, str):
            raise StructureError("tool_choice: the function needs a name", "tool_choice")
        chosen = [t for t in tools if t["function"]["name"] == name]
        if not chosen:
            raise StructureError(f"tool_choice names {name[:64]!r}, which is not among the tools "
                                 f"{[t['function']['name'] for t in tools][:16]}", "tool_choice")
        return chosen[:1], "forced"
    shown = tool_choice[:64] if isinstance(tool_choice, str) else type(tool_choice).__name__
    raise StructureError("tool_choice must be one of none, auto, required or "
                         f"{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got {shown!r}", "tool_choice")


# ---- response_format ---------------------------------------------------------------------------

def response_schema(response_format: Any, where: str = "response_format") -> dict | None:
    """The JSON schema a `response_format` (Chat Completions) or `text.format` (Responses) asks for."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict) or not isinstance(response_format.get("type"), str):
        raise StructureError(f"{where} must be an object with a 'type'", where)
    kind = response_format["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        body = response_format.get("json_schema", response_format)  # Responses puts the fields flat
        if not isinstance(body, dict) or "schema" not in body:
            raise StructureError(f"{where}.json_schema needs a 'schema'", where)
        check_schema(body["schema"], f"{where}.json_schema.schema")
        return body["schema"]
    raise StructureError(f"{where}.type {kind!r} is not supported; use text, json_object or json_schema", where)


# ---- the one decision --------------------------------------------------------------------------

def structure_for(*, tools: list[dict] | None = None, tool_choice: Any = None, response_format: Any = None,
                  role: str | None = None, genui_schema: dict | None = None,
                  parallel_tool_calls: bool = True) -> Structure | None:
    """The grammar one reply decodes under, or None for free text. `parallel_tool_calls=False`
    (OpenAI's field): the grammar ends the reply after the first call."""
    schema = response_schema(response_format)
    chosen, choice = choose_tools(list(tools or []), tool_choice)
    for t in chosen:
        check_schema(parameters_of(t), f"tools[{t['function']['name']}].function.parameters", lenient=True)
    names = tuple(t["function"]["name"] for t in chosen)
    if chosen:
        tags = [call_tag(t) for t in chosen]
        calls = {"type": "tags_with_separator", "tags": tags, "separator": CALL_SEPARATOR, "at_least_one": True,
                 "stop_after_first": choice == "forced" or not parallel_tool_calls}
        if choice != "auto":
            fmt = calls
        elif schema is not None:
            fmt = {"type": "or", "elements": [calls, {"type": "json_schema", "json_schema": schema}]}
        else:
            fmt = {"type": "triggered_tags", "triggers": [OPEN], "tags": tags,
                   "stop_after_first": not parallel_tool_calls}
        spec = GrammarSpec("structural_tag", json.dumps({"type": "structural_tag", "format": fmt}))
        return Structure(spec, "tools", names, calls_required=choice != "auto",
                         json_alternative=choice == "auto" and schema is not None)
    if schema is not None:
        return Structure(GrammarSpec("json_schema", json.dumps(schema)), "json")
    if output_of(role) == "card" and genui_schema is not None:
        return Structure(GrammarSpec("json_schema", json.dumps(genui_schema), (",", ":")), "genui")
    return None
