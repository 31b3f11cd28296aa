"""A surface's data model: built from `dataModelUpdate` messages, read by JSON-pointer paths.

Knows the v0.8 encoding (`contents` entries with `valueString`/`valueNumber`/`valueBoolean`/
`valueMap`, an optional target `path`, `/` or no path replacing the whole model) and how template
items and relative paths resolve. Like the reference renderer, a `valueString` holding a JSON array
or object is decoded (v0.8 `valueMap` cannot nest, so the official weather example ships its
forecast list that way). Knows nothing about components or rendering; the official renderer
(@a2ui/lit, drawn by web/a2ui-card.js) is checked against them in tests/genui/test_a2ui_official.py.
"""

from __future__ import annotations

import json
from typing import Any

MISSING = object()


def entry_value(entry: dict[str, Any]) -> Any:
    """The decoded value of one `contents` entry (a `valueMap` becomes a dict)."""
    if "valueString" in entry:
        return decode_string(entry["valueString"])
    for key in ("valueNumber", "valueBoolean"):
        if key in entry:
            return entry[key]
    if "valueMap" in entry:
        return decode_contents(entry["valueMap"])
    return None


def decode_string(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            pass
    return value


def decode_contents(contents: Any) -> dict[str, Any]:
    """Entries -> dict; malformed entries (the validator reports them) are skipped."""
    if not isinstance(contents, list):
        return {}
    return {e["key"]: entry_value(e) for e in contents if isinstance(e, dict) and isinstance(e.get("key"), str)}


def split_path(path: str) -> list[str]:
    """`/a/b~1c` -> ['a', 'b/c'] (RFC 6901 escapes); `/` and `` -> []."""
    parts = [p for p in path.strip().split("/") if p != ""]
    return [p.replace("~1", "/").replace("~0", "~") for p in parts]


def escape_key(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def join_path(base: str, path: str) -> str:
    """Resolve a binding: absolute paths start with `/`; others are relative to `base`."""
    if path.startswith("/"):
        return path
    return "/" + "/".join(split_path(base) + split_path(path))


def get_path(model: Any, path: str) -> Any:
    """The value at `path`, or MISSING. Lists are indexed by decimal strings."""
    node = model
    for part in split_path(path):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def set_path(model: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Return `model` with `value` stored at `path` (intermediate maps created). `/` replaces."""
    parts = split_path(path)
    if not parts:
        return value if isinstance(value, dict) else {"": value}
    node = model
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value
    return model


def apply_update(model: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Apply one `dataModelUpdate` body to a surface's model (in place where possible)."""
    path = update.get("path")
    return set_path(model, path if isinstance(path, str) else "/", decode_contents(update.get("contents")))


def build_models(messages: list[Any]) -> dict[str, dict[str, Any]]:
    """surfaceId -> final data model after every `dataModelUpdate` in order."""
    models: dict[str, dict[str, Any]] = {}
    for message in messages:
        body = message.get("dataModelUpdate") if isinstance(message, dict) else None
        if isinstance(body, dict) and isinstance(body.get("surfaceId"), str):
            sid = body["surfaceId"]
            models[sid] = apply_update(models.get(sid, {}), body)
    return models


def template_items(value: Any) -> list[tuple[str, Any]]:
    """(key, item) pairs a template iterates over: a map's entries or a list's elements."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return [(str(i), v) for i, v in enumerate(value)]
    return []
