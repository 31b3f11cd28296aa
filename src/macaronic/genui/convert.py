"""A2UI v0.8 -> v0.9: one validated v0.8 message list as the v0.9 messages that draw the same card.

The genui specialist decodes v0.8 under its grammar (`grammar.py`); a client that renders v0.9
gets the validated, closed card converted here. Message kinds map one to one (`beginRendering` ->
`createSurface`, `surfaceUpdate` -> `updateComponents`, `dataModelUpdate` -> `updateDataModel`,
`deleteSurface` stays), each message says `"version": "v0.9"`, and components become flat
(`{"id", "component": "Text", "text": ..}`) with the basic catalog's names, following the official
schemas (v0.8 `standard_catalog_definition.json`, v0.9 `a2ui_v0_9/basic_catalog.json`):

- bound values: `{"literalString": s}` -> `s`, `{"path": p}` -> `{"path": p}`; a v0.8 value with
  both (the literal initialises the path) -> the path, plus an `updateDataModel` setting the literal
  where the card's own data does not;
- `usageHint` -> `variant`, `distribution` / `alignment` -> `justify` / `align`, children lists
  flat, templates `{componentId, path}`, `tabItems` -> `tabs`, Modal's `entryPointChild` /
  `contentChild` -> `trigger` / `content`, Button `primary` -> `variant: "primary"` and its action
  `{name, context: [{key, value}]}` -> `{"event": {name, context: {key: value}}}`, TextField `text`
  -> `value` and `textFieldType` -> `variant` (v0.9 has no `date` variant: `shortText`),
  MultipleChoice -> ChoicePicker, Slider `minValue` / `maxValue` -> `min` / `max`, Image
  `altText` -> `description` and fit `scale-down` -> `scaleDown`;
- v0.9 names a surface's root `root`: `beginRendering.root` is renamed so (a component already
  called `root` takes a fresh id), and `createSurface` comes before the surface's other messages;
- `dataModelUpdate` contents become plain JSON (`datamodel.decode_contents`).

A surface updated without a `beginRendering` in the same list keeps its ids (its root is the one
an earlier card named). Knows both message formats; nothing about validation (the caller checks the
result with `v09.validate_messages`), models or rendering.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, get_args

from macaronic.genui import v09
from macaronic.genui.datamodel import decode_contents

LITERALS = ("literalString", "literalNumber", "literalBoolean", "literalArray", "literal")
# v0.8 property name -> v0.9 name, per component type (properties not named keep their name).
RENAMES = {
    "Text": {"usageHint": "variant"},
    "Image": {"usageHint": "variant", "altText": "description"},
    "Row": {"distribution": "justify", "alignment": "align"},
    "Column": {"distribution": "justify", "alignment": "align"},
    "List": {"alignment": "align"},
    "Tabs": {"tabItems": "tabs"},
    "Modal": {"entryPointChild": "trigger", "contentChild": "content"},
    "TextField": {"text": "value", "textFieldType": "variant"},
    "MultipleChoice": {"selections": "value", "variant": "displayStyle"},
    "Slider": {"minValue": "min", "maxValue": "max"},
}
TYPES = {"MultipleChoice": "ChoicePicker"}
TEXT_FIELD_VARIANTS = {"date": "shortText"}  # the rest (longText, number, shortText, obscured) are the same
SLIDER_MAX = 100  # v0.9 requires `max`; v0.8 renderers default it to 100


def to_v09(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The v0.9 messages for a v0.8 message list (assumed valid v0.8; the input is not changed)."""
    messages = copy.deepcopy(messages)
    roots = {m["beginRendering"]["surfaceId"]: m["beginRendering"] for m in messages if "beginRendering" in m}
    renames = {sid: root_renames(sid, begin.get("root"), messages) for sid, begin in roots.items()}
    data_paths = {(m["dataModelUpdate"]["surfaceId"], m["dataModelUpdate"].get("path") or "/")
                  for m in messages if "dataModelUpdate" in m}
    out: list[dict[str, Any]] = []
    created: set[str] = set()
    for m in messages:
        kind, body = next(iter(m.items()))
        sid = body.get("surfaceId")
        if sid in roots and sid not in created and kind != "deleteSurface":
            out.append(create_surface(roots[sid]))
            created.add(sid)
        if kind == "surfaceUpdate":
            names = renames.get(sid, {})
            inits: list[tuple[str, Any]] = []
            comps = [component(c, names, inits) for c in body["components"]]
            out.append(wrap("updateComponents", {"surfaceId": sid, "components": comps}))
            out += [wrap("updateDataModel", {"surfaceId": sid, "path": path, "value": value})
                    for path, value in inits if (sid, path) not in data_paths]
        elif kind == "dataModelUpdate":
            out.append(wrap("updateDataModel", {"surfaceId": sid, "path": body.get("path") or "/",
                                                "value": decode_contents(body.get("contents"))}))
        elif kind == "deleteSurface":
            out.append(wrap("deleteSurface", {"surfaceId": sid}))
            created.discard(sid)
    return out


def wrap(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"version": v09.VERSION, kind: body}


def create_surface(begin: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"surfaceId": begin["surfaceId"], "catalogId": v09.BASIC_CATALOG_ID}
    color = (begin.get("styles") or {}).get("primaryColor")
    if isinstance(color, str) and len(color) == 7:  # v0.9's theme takes #rrggbb; v0.8's `font` has no twin
        body["theme"] = {"primaryColor": color}
    return wrap("createSurface", body)


def root_renames(sid: str, root: Any, messages: list[dict[str, Any]]) -> dict[str, str]:
    """Id renames that make the surface's root `root` (empty when it already is)."""
    if not isinstance(root, str) or root == "root":
        return {}
    ids = {c.get("id") for m in messages if m.get("surfaceUpdate", {}).get("surfaceId") == sid
           for c in m["surfaceUpdate"].get("components", [])}
    names = {root: "root"}
    if "root" in ids:
        fresh = "root-0"
        while fresh in ids:
            fresh += "0"
        names["root"] = fresh
    return names


def bound(value: Any, inits: list[tuple[str, Any]]) -> Any:
    """A v0.8 bound value as a v0.9 dynamic value; a path with a literal records an initialiser."""
    if not isinstance(value, dict):
        return value
    literal = next((value[k] for k in LITERALS if k in value), None)
    if "path" in value:
        if literal is not None:
            inits.append((value["path"], literal))
        return {"path": value["path"]}
    return literal


def component(comp: dict[str, Any], names: dict[str, str], inits: list[tuple[str, Any]]) -> dict[str, Any]:
    kind, props = next(iter(comp["component"].items()))
    ref = lambda i: names.get(i, i)  # noqa: E731
    out: dict[str, Any] = {"id": ref(comp["id"]), "component": TYPES.get(kind, kind)}
    if "weight" in comp:
        out["weight"] = comp["weight"]
    rename = RENAMES.get(kind, {})
    for key, value in props.items():
        name = rename.get(key, key)
        if key == "children":
            out[name] = children(value, ref)
        elif key in ("child", "entryPointChild", "contentChild"):
            out[name] = ref(value)
        elif key == "tabItems":
            out[name] = [{"title": bound(t.get("title"), inits), "child": ref(t.get("child"))} for t in value]
        elif key == "action":
            out[name] = action(value)
        elif key == "primary":
            if value:
                out["variant"] = "primary"
        elif key == "options":
            out[name] = [{"label": bound(o.get("label"), inits), "value": o.get("value")} for o in value]
        elif key == "maxAllowedSelections":
            out["variant"] = "mutuallyExclusive" if value == 1 else "multipleSelection"
        elif key == "textFieldType":
            out[name] = TEXT_FIELD_VARIANTS.get(value, value)
        elif key == "fit":
            out[name] = "scaleDown" if value == "scale-down" else value
        else:
            out[name] = bound(value, inits)
    if kind == "MultipleChoice" and "variant" not in out:
        out["variant"] = "multipleSelection"  # v0.8: no cap means many may be chosen
    if kind == "Slider" and "max" not in out:
        out["max"] = SLIDER_MAX
    return out


def children(value: Any, ref) -> Any:
    if isinstance(value, dict) and isinstance(value.get("explicitList"), list):
        return [ref(c) for c in value["explicitList"]]
    template = value.get("template") if isinstance(value, dict) else None
    if isinstance(template, dict):
        return {"componentId": ref(template.get("componentId")), "path": template.get("dataBinding")}
    return []


def action(value: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {"name": value.get("name")}
    context = {item["key"]: bound(item.get("value"), []) for item in value.get("context") or []
               if isinstance(item, dict) and isinstance(item.get("key"), str)}
    if context:
        event["context"] = context
    return {"event": event}


def card_to_v09(card: dict[str, Any]) -> dict[str, Any]:
    """A `{text_response, a2ui}` card with its messages in v0.9 (already v0.9: unchanged)."""
    messages = card.get("a2ui") or []
    return card if v09.is_v09(messages) else {**card, "a2ui": to_v09(messages)}


# ---- what a client renders: the version it states on its request ----

Version = Literal["0.8", "0.9"]  # the `a2ui_version` a client may state; the specialist writes the first
VERSIONS: tuple[str, ...] = get_args(Version)
DEFAULT_VERSION = VERSIONS[0]


def served_card(genui: dict[str, Any], version: str) -> tuple[dict[str, Any], str | None]:
    """A served turn's card (`TurnResult.genui`, v0.8 as decoded, validated or closed) in the
    version the client renders, and the reply text to serve for it (None: the text as decoded).
    What v0.9 refuses and v0.8 let through (an empty id) is closed by the v0.9 rules
    (`close.close_card`), its fixes added to `closed`. A card that did not validate is served as it is."""
    if version == DEFAULT_VERSION or not genui.get("valid"):
        return genui, None
    from macaronic.genui.close import card_text, close_card

    card = card_to_v09({"text_response": genui["text_response"], "a2ui": genui["a2ui"]})
    out = {**genui, "a2ui_version": version}
    if v09.validate_messages(card["a2ui"], "/a2ui")[0]:
        card, fixes = close_card(card, card["text_response"])
        out["closed"] = [*(genui.get("closed") or []), *fixes]
    out["a2ui"] = card["a2ui"]
    return out, card_text(card)
