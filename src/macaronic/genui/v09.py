"""A2UI v0.9 beside v0.8: the official v0.9 schemas (vendored, Apache-2.0) and a validator.

v0.9 messages say their version (`"version": "v0.9"`) and use other message kinds
(`createSurface`, `updateComponents`, `updateDataModel`, `deleteSurface`) with flat components
(`{"id": .., "component": "Text", "text": ..}`). Two layers, every error at once with a JSON
pointer: the official JSON Schema (draft 2020-12, the basic catalog bound as `catalog.json`,
exactly as the spec's own `test/run_tests.py` binds it), then integrity across a message list
(unique, non-empty ids, defined children, a `root`, `createSurface` before its other messages).
Knows nothing about v0.8 (`validate.py` dispatches here) nor about parsing or repairing text.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from macaronic.genui.integrity import ptr

VERSION = "v0.9"
SCHEMA_DIR = Path(__file__).with_name("a2ui_v0_9")
BASE_URI = "https://a2ui.org/specification/v0_9/"
BASIC_CATALOG_ID = BASE_URI + "catalogs/basic/catalog.json"
MESSAGE_KINDS = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")
# Properties of the basic catalog that name other components (ComponentId / ChildList refs).
CHILD_KEYS = ("child", "trigger", "content")


# Kinds only v0.9 has: `deleteSurface` is in v0.8 too, so it implies nothing.
V09_ONLY_KINDS = ("createSurface", "updateComponents", "updateDataModel")


def is_v09(messages: Any) -> bool:
    """Whether a message list says (`version`) or implies (a message kind only v0.9 has) A2UI v0.9."""
    for m in messages if isinstance(messages, list) else []:
        if isinstance(m, dict) and (m.get("version") == VERSION or any(k in m for k in V09_ONLY_KINDS)):
            return True
    return False


def _load(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=3)
def validator(schema: str = "server_to_client.json"):
    """jsonschema validator of an official v0.9 schema (`server_to_client.json` or
    `client_to_server.json`), its `catalog.json` reference bound to the basic catalog."""
    import jsonschema
    from referencing import Registry, Resource

    catalog = _load("basic_catalog.json")
    resources = {
        BASE_URI + "common_types.json": _load("common_types.json"),
        BASE_URI + "catalog.json": catalog,  # what server_to_client.json refers to
        BASIC_CATALOG_ID: catalog,
        BASE_URI + "server_to_client.json": _load("server_to_client.json"),
        BASE_URI + "client_to_server.json": _load("client_to_server.json"),
    }
    from referencing.jsonschema import DRAFT202012

    # client_to_server.json names no `$schema`; every v0.9 file is draft 2020-12.
    registry = Registry().with_resources(
        (uri, Resource.from_contents(doc, default_specification=DRAFT202012)) for uri, doc in resources.items())
    root = resources.get(BASE_URI + schema) or {"$ref": BASE_URI + schema}  # or a `file#/$defs/x` pointer
    return jsonschema.Draft202012Validator(root, registry=registry, format_checker=format_checker())


# The spec's runner checks formats with ajv-formats; jsonschema checks `uri`, `date-time` and
# `time` only when optional packages are installed, so these three follow ajv-formats' rules.
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")
TIME = r"(\d\d):(\d\d):(\d\d)(\.\d+)?(z|[+-]\d\d(:?\d\d)?)?"
DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\d[t\s]" + TIME + "$", re.I)
TIME_ONLY = re.compile("^" + TIME + "$", re.I)


def format_checker():
    import jsonschema

    checker = jsonschema.FormatChecker()
    for name, pattern in (("uri", URI), ("date-time", DATE_TIME), ("time", TIME_ONLY)):
        checker.checks(name)(lambda value, p=pattern: not isinstance(value, str) or bool(p.match(value)))
    return checker


def message_errors(message: Any, where: str = "", schema: str = "server_to_client.json") -> list[dict[str, str]]:
    """The official schema's verdict on one message, as `{path, message}` errors."""
    return [{"path": where + ptr(*err.absolute_path), "message": f"schema: {err.message[:300]}"}
            for err in validator(schema).iter_errors(message)]


def component_ok(comp: Any) -> bool:
    """Whether one component passes the basic catalog (where a message-level schema error is)."""
    return validator("catalog.json#/$defs/anyComponent").is_valid(comp)


def child_refs(comp: dict[str, Any]) -> list[tuple[str, str]]:
    """(property path, id) for every component this one names."""
    out = [(k, comp[k]) for k in CHILD_KEYS if isinstance(comp.get(k), str)]
    children = comp.get("children")
    if isinstance(children, list):
        out += [(f"children/{i}", c) for i, c in enumerate(children) if isinstance(c, str)]
    elif isinstance(children, dict) and isinstance(children.get("componentId"), str):
        out.append(("children/componentId", children["componentId"]))
    for i, tab in enumerate(comp.get("tabs") or []):
        if isinstance(tab, dict) and isinstance(tab.get("child"), str):
            out.append((f"tabs/{i}/child", tab["child"]))
    return out


def integrity_errors(messages: list[Any], prefix: str = "", require_create: bool = True) -> list[dict[str, str]]:
    """Cross-message checks the schema cannot express, on messages that passed the schema."""
    errors: list[dict[str, str]] = []
    created: set[str] = set()
    components: dict[str, dict[str, tuple[str, dict]]] = {}  # surface -> id -> (path, comp)
    for i, m in enumerate(messages):
        kind = next((k for k in MESSAGE_KINDS if k in m), None)
        body, at = m[kind], prefix + ptr(i, kind)
        sid = body["surfaceId"]
        if kind == "createSurface":
            if sid in created:
                errors.append({"path": at, "message": f"surface {sid!r} created twice without deleteSurface"})
            created.add(sid)
            continue
        if sid not in created and require_create:
            errors.append({"path": at, "message": f"{kind} for surface {sid!r} before its createSurface"})
        if kind == "deleteSurface":
            created.discard(sid)
            components.pop(sid, None)
        elif kind == "updateComponents":
            seen: set[str] = set()
            for j, comp in enumerate(body["components"]):
                if not comp["id"]:  # the schema allows it; the official renderer refuses the whole message
                    errors.append({"path": at + ptr("components", j, "id"), "message": "empty component id"})
                if comp["id"] in seen:
                    errors.append({"path": at + ptr("components", j, "id"),
                                   "message": f"duplicate component id {comp['id']!r} in one message"})
                seen.add(comp["id"])
                components.setdefault(sid, {})[comp["id"]] = (at + ptr("components", j), comp)
    for sid, by_id in components.items():
        if "root" not in by_id:
            errors.append({"path": prefix, "message": f"surface {sid!r} has no component with id 'root'"})
        for path, comp in by_id.values():
            for key, ref in child_refs(comp):
                if ref not in by_id:
                    errors.append({"path": f"{path}/{key}", "message": f"refers to undefined component {ref!r}"})
    errors += _cycles(components)
    return errors


def _cycles(components: dict[str, dict[str, tuple[str, dict]]]) -> list[dict[str, str]]:
    errors = []
    for sid, by_id in components.items():
        state: dict[str, int] = {}  # 1 = on the path, 2 = done

        def visit(cid: str) -> bool:
            state[cid] = 1
            for _, ref in child_refs(by_id[cid][1]):
                if ref in by_id and (state.get(ref) == 1 or (ref not in state and visit(ref))):
                    return True
            state[cid] = 2
            return False

        for cid in by_id:
            if cid not in state and visit(cid):
                errors.append({"path": by_id[cid][0], "message": f"surface {sid!r} has a cycle through {cid!r}"})
                break
    return errors


def validate_messages(messages: list[Any], prefix: str = "", integrity: bool = True,
                      require_create: bool = True) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """Errors of a v0.9 message list and the layers run (`jsonschema`, then `integrity`)."""
    errors: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        errors += message_errors(m, prefix + ptr(i))
    if not messages:
        errors.append({"path": prefix, "message": "no A2UI messages"})
    if errors or not integrity:
        return errors, ("envelope", "jsonschema")
    return integrity_errors(messages, prefix, require_create), ("envelope", "jsonschema", "integrity")
