"""Validate GenUI output: an A2UI message list or a `{text_response, a2ui}` object.

A list that says or implies A2UI v0.9 (`"version": "v0.9"`, v0.9 message kinds) is checked by
`v09.py` (official v0.9 schema, then integrity); everything else is v0.8, as below.

Three layers, every error reported at once with a JSON-pointer path into the input:
1. `models`: our pydantic models of each message, and each component against its catalog;
2. `jsonschema`: the official `server_to_client_with_standard_catalog.json`, when the shared
   files are present (run only on messages layer 1 passed, so one fault is not reported twice);
3. `integrity`: cross-message checks (`integrity.py`).
Knows nothing about parsing text or repairing it (`repair.py`, `output.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from macaronic.genui import integrity, v09
from macaronic.genui.integrity import ptr
from macaronic.genui.models import (
    CATALOGS, MESSAGE_MODELS, STANDARD_CATALOG_ID, STANDARD_COMPONENTS, ComponentEntry,
)
from macaronic.genui.shared import load_schema

ENVELOPE_KEYS = ("text_response", "a2ui")


@dataclass(frozen=True)
class Limits:
    max_messages: int = 64
    max_components: int = 2000
    max_depth: int = 32
    require_begin_rendering: bool = True
    use_jsonschema: bool = True


@dataclass(frozen=True)
class ValidationResult:
    valid: bool
    errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    layers: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.valid

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "errors": self.errors, "warnings": self.warnings,
                "layers": list(self.layers)}


def validate(obj: Any, limits: Limits = Limits()) -> ValidationResult:
    """Validate a `{text_response, a2ui}` object or a bare list of A2UI messages."""
    return _validate(obj, limits, integrity_layer=True)


def schema_errors(obj: Any, limits: Limits = Limits()) -> list[dict[str, str]]:
    """Only the envelope, models and jsonschema layers: what a grammar can guarantee."""
    return _validate(obj, limits, integrity_layer=False).errors


def _validate(obj: Any, limits: Limits, integrity_layer: bool) -> ValidationResult:
    errors: list[dict[str, str]] = []
    messages, prefix = split_envelope(obj, errors)
    if messages is None:
        return ValidationResult(False, errors, [], ("envelope",))
    if len(messages) > limits.max_messages:
        errors.append({"path": prefix, "message": f"{len(messages)} messages; at most {limits.max_messages} allowed"})
        return ValidationResult(False, errors, [], ("envelope",))
    n_components = sum(len(m["surfaceUpdate"]["components"]) for m in messages
                       if isinstance(m, dict) and isinstance(m.get("surfaceUpdate"), dict)
                       and isinstance(m["surfaceUpdate"].get("components"), list))
    if n_components > limits.max_components:
        errors.append({"path": prefix, "message": f"{n_components} components; at most {limits.max_components} allowed"})
        return ValidationResult(False, errors, [], ("envelope",))
    if v09.is_v09(messages):
        found, v09_layers = v09.validate_messages(messages, prefix, integrity=integrity_layer,
                                                  require_create=limits.require_begin_rendering)
        errors += found
        return ValidationResult(not errors, errors, [], v09_layers)
    layers = ["envelope", "models"]
    catalogs = surface_catalogs(messages)
    schema_ok = []
    for i, message in enumerate(messages):
        found = check_message(message, prefix + ptr(i), catalogs)
        errors += found
        schema_ok.append(not found)
    validator = official_validator() if limits.use_jsonschema else None
    if validator is not None:
        layers.append("jsonschema")
        for i, message in enumerate(messages):
            if schema_ok[i]:
                errors += jsonschema_errors(validator, message, prefix + ptr(i))
    if not messages:
        errors.append({"path": prefix, "message": "no A2UI messages"})
    if not integrity_layer:
        return ValidationResult(not errors, errors, [], tuple(layers))
    layers.append("integrity")
    issues = integrity.check(messages, prefix, max_depth=limits.max_depth,
                             require_begin_rendering=limits.require_begin_rendering)
    errors += issues.errors
    return ValidationResult(not errors, errors, issues.warnings, tuple(layers))


def split_envelope(obj: Any, errors: list[dict[str, str]]) -> tuple[list[Any] | None, str]:
    if isinstance(obj, list):
        return obj, ""
    if not isinstance(obj, dict):
        errors.append({"path": "", "message": "expected an object {text_response, a2ui} or a list of A2UI messages, "
                                              f"got {type(obj).__name__}"})
        return None, ""
    for key in obj:
        if key not in ENVELOPE_KEYS:
            errors.append({"path": ptr(key), "message": f"unknown property {key!r}; expected only text_response and a2ui"})
    if not isinstance(obj.get("text_response"), str):
        errors.append({"path": "/text_response", "message": "missing or not a string"})
    if not isinstance(obj.get("a2ui"), list):
        errors.append({"path": "/a2ui", "message": "missing or not a list of A2UI messages"})
        return None, "/a2ui"
    return obj["a2ui"], "/a2ui"


def surface_catalogs(messages: list[Any]) -> dict[str, str]:
    """surfaceId -> catalog id named by its beginRendering (the standard catalog by default)."""
    out = {}
    for m in messages:
        body = m.get("beginRendering") if isinstance(m, dict) else None
        if isinstance(body, dict) and isinstance(body.get("surfaceId"), str):
            catalog = body.get("catalogId")
            out[body["surfaceId"]] = catalog if isinstance(catalog, str) else STANDARD_CATALOG_ID
    return out


def check_message(message: Any, where: str, catalogs: dict[str, str]) -> list[dict[str, str]]:
    if not isinstance(message, dict):
        return [{"path": where, "message": f"a message must be an object, got {type(message).__name__}"}]
    kinds = [k for k in message if k in MESSAGE_MODELS]
    unknown = [k for k in message if k not in MESSAGE_MODELS]
    if unknown or len(kinds) != 1:
        what = f"unknown message type(s) {unknown}" if unknown else f"{len(kinds)} message types"
        return [{"path": where + (ptr(unknown[0]) if unknown else ""),
                 "message": f"{what}; a message has exactly one of {sorted(MESSAGE_MODELS)}"}]
    kind = kinds[0]
    body, at = message[kind], where + ptr(kind)
    try:
        parsed = MESSAGE_MODELS[kind].model_validate(body)
    except ValidationError as e:
        errors = pydantic_errors(e, at)
        if kind == "surfaceUpdate" and isinstance(body, dict):
            sid = body.get("surfaceId")
            errors += check_components(body.get("components"), at, catalogs.get(sid) if isinstance(sid, str) else None)
        return errors
    errors = []
    if kind == "beginRendering" and parsed.catalogId is not None and parsed.catalogId not in CATALOGS:
        errors.append({"path": at + "/catalogId", "message": f"unknown catalog {parsed.catalogId!r}; known: {sorted(CATALOGS)}"})
    if kind == "surfaceUpdate":
        errors += check_components(body["components"], at, catalogs.get(parsed.surfaceId))
    return errors


def check_components(components: Any, at: str, catalog_id: str | None) -> list[dict[str, str]]:
    allowed = CATALOGS.get(catalog_id or STANDARD_CATALOG_ID, CATALOGS[STANDARD_CATALOG_ID])
    errors = []
    for j, entry in enumerate(components if isinstance(components, list) else []):
        comp = entry.get("component") if isinstance(entry, dict) else None
        if isinstance(comp, dict):
            errors += check_component(comp, at + ptr("components", j, "component"), allowed)
    return errors


def check_component(comp: dict[str, Any], at: str, allowed: frozenset[str]) -> list[dict[str, str]]:
    if len(comp) != 1:
        return [{"path": at, "message": f"must hold exactly one component type, got {sorted(comp) or 'none'}"}]
    (ctype, props), = comp.items()
    if ctype not in STANDARD_COMPONENTS:
        return [{"path": at + ptr(ctype), "message": f"unknown component type {ctype!r}; the catalog has {sorted(allowed)}"}]
    if ctype not in allowed:
        return [{"path": at + ptr(ctype), "message": f"component type {ctype!r} is not in this surface's catalog {sorted(allowed)}"}]
    try:
        STANDARD_COMPONENTS[ctype].model_validate(props)
    except ValidationError as e:
        return pydantic_errors(e, at + ptr(ctype))
    return []


def pydantic_errors(e: ValidationError, at: str) -> list[dict[str, str]]:
    out = []
    for err in e.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        where = at + ptr(*loc)
        if err["type"] == "missing":
            message = f"missing required property {loc[-1]!r}" if loc else "missing"
        elif err["type"] == "extra_forbidden":
            message = f"unknown property {loc[-1]!r}"
        elif err["type"] == "null_property":
            where += ptr(err["ctx"]["property"])
            message = "null is not allowed"
        else:
            message = err["msg"].removeprefix("Value error, ")
        out.append({"path": where, "message": message})
    return out


@lru_cache(maxsize=1)
def official_validator():
    """jsonschema validator of the official message schema with the standard catalog inlined.
    The shipped `server_to_client_with_standard_catalog.json` lags the catalog definition
    (its MultipleChoice lacks `variant` and `filterable`), so the components are taken from
    `standard_catalog_definition.json`, the catalog itself, when both files are present."""
    schema = load_schema("server_to_client_with_standard_catalog.json")
    catalog = load_schema("standard_catalog_definition.json")
    if schema is None:
        return None
    import copy

    import jsonschema

    schema = copy.deepcopy(schema)
    if catalog is not None:
        wrapper = schema["properties"]["surfaceUpdate"]["properties"]["components"]["items"]["properties"]["component"]
        wrapper["properties"] = catalog["components"]

    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def jsonschema_errors(validator, message: Any, where: str) -> list[dict[str, str]]:
    return [{"path": where + ptr(*err.absolute_path), "message": f"schema: {err.message[:300]}"}
            for err in validator.iter_errors(message)]


def component_entries(messages: list[dict[str, Any]]) -> list[ComponentEntry]:
    """Every component of every surfaceUpdate, parsed (assumes the list validated)."""
    return [ComponentEntry.model_validate(c) for m in messages if "surfaceUpdate" in m
            for c in m["surfaceUpdate"]["components"]]
