"""A2UI v0.8 -> v0.9: one validated v0.8 message list as the v0.9 messages that draw the same card
(and back, `to_v08`: what the genui specialist reads of a v0.9 card in its history).

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

A surface updated without a `beginRendering` in the same list takes the root an earlier card of
the conversation named (`earlier_roots`, read by `surface_roots` from the v0.8 replies before it):
an update that redefines that root by its v0.8 id replaces `root`; with none known it keeps its ids.
(A served card always has its own `beginRendering`: the v0.8 validator requires one and the harness
closes a card without it, so this is for callers converting bare update lists.) Knows both message
formats; nothing about validation (the caller checks the result with `v09.validate_messages`),
models or rendering.
"""

from __future__ import annotations

import copy
import json
import re
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


def to_v09(messages: list[dict[str, Any]], earlier_roots: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The v0.9 messages for a v0.8 message list (assumed valid v0.8; the input is not changed).
    `earlier_roots`: {surfaceId: v0.8 root id} of surfaces earlier cards began (`surface_roots`)."""
    messages = copy.deepcopy(messages)
    roots = {m["beginRendering"]["surfaceId"]: m["beginRendering"] for m in messages if "beginRendering" in m}
    renames = {sid: root_renames(sid, root, messages, earlier=True) for sid, root in (earlier_roots or {}).items()
               if sid not in roots}
    renames.update({sid: root_renames(sid, begin.get("root"), messages) for sid, begin in roots.items()})
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


def root_renames(sid: str, root: Any, messages: list[dict[str, Any]], earlier: bool = False) -> dict[str, str]:
    """Id renames that make the surface's root `root` (empty when it already is). A component called
    `root` takes a fresh id; on an `earlier` surface always, since a later card may refer to the one
    an earlier card defined."""
    if not isinstance(root, str) or root == "root":
        return {}
    ids = {c.get("id") for m in messages if m.get("surfaceUpdate", {}).get("surfaceId") == sid
           for c in m["surfaceUpdate"].get("components", [])}
    names = {root: "root"}
    if earlier or "root" in ids:
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


def surface_roots(replies: list[Any]) -> dict[str, str]:
    """{surfaceId: v0.8 root id} of the surfaces the v0.8 cards among `replies` (reply texts, oldest
    first) began and did not delete: what a later card's update without `beginRendering` redefines."""
    from macaronic.genui.repair import repair

    roots: dict[str, str] = {}
    for text in replies:
        if not isinstance(text, str) or '"a2ui"' not in text:
            continue
        card = repair(text).obj  # read as the harness reads a reply (a fence or prose around it)
        messages = card.get("a2ui") if isinstance(card, dict) else None
        if not isinstance(messages, list) or v09.is_v09(messages):
            continue
        for m in messages:
            if not isinstance(m, dict):
                continue
            begin, gone = m.get("beginRendering"), m.get("deleteSurface")
            if isinstance(begin, dict) and isinstance(begin.get("surfaceId"), str) and isinstance(begin.get("root"), str):
                roots[begin["surfaceId"]] = begin["root"]
            elif isinstance(gone, dict):
                roots.pop(gone.get("surfaceId"), None)
    return roots


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


OPENING = re.compile(r'\s*(?:```[A-Za-z]*\s*)?\{\s*"text_response"\s*:\s*"')


def streamed_head(text: str) -> str:
    """What a client that renders another version sees of a card while it decodes: the served
    card's opening with the `text_response` decoded so far, in the served form (`close.card_text`'s
    compact JSON), so that the deltas add up to a prefix of the served card ('' until its
    text_response starts). An escape or a surrogate pair cut by the stream waits for the rest."""
    m = OPENING.match(text)
    if m is None:
        return ""
    end = m.end()
    while end < len(text) and text[end] != '"':
        step = 1 if text[end] != "\\" else 6 if text[end + 1:end + 2] == "u" else 2
        if end + step > len(text):
            break
        end += step
    try:
        said = json.loads('"' + text[m.end():end] + '"')
    except ValueError:
        return ""
    if said and "\ud800" <= said[-1] <= "\udbff":  # half a surrogate pair
        said = said[:-1]
    return '{"text_response":' + json.dumps(said, ensure_ascii=False)[:-1]


# ---- back: v0.9 -> v0.8, what the genui specialist reads of its own earlier cards ----

TYPES_BACK = {v: k for k, v in TYPES.items()}
RENAMES_BACK = {kind: {new: old for old, new in names.items()} for kind, names in RENAMES.items()}
TEXT_FIELD_TYPES = ("date", "longText", "number", "shortText", "obscured")


def literal_keys() -> dict[tuple[str, str], str]:
    """(v0.8 component type, property) -> the literal key of its bound value (`literalString`, ...),
    read off the v0.8 catalog's models (one place for which properties bind data)."""
    from typing import get_type_hints

    from macaronic.genui import models

    out: dict[tuple[str, str], str] = {}
    for kind, model in models.STANDARD_COMPONENTS.items():
        for prop, hint in get_type_hints(model).items():
            for t in get_args(hint) or (hint,):  # `BoundString | None` or `BoundString`
                if isinstance(t, type) and issubclass(t, models._Bound):
                    out[(kind, prop)] = next(k for k in t.model_fields if k != "path")
    return out


def to_v08(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The v0.8 messages for a v0.9 message list: `to_v09` backwards, for the genui specialist's
    view of a card it wrote and a v0.9 client sent back. Round trips: `to_v09(to_v08(to_v09(m)))
    == to_v09(m)`. What v0.8 cannot say is dropped (a function call, a `checks` list, a v0.9-only
    property); `beginRendering` (root `root`) comes after its surface's other messages, where the
    v0.8 builder puts it. Malformed entries are skipped, never raised on: this feeds a prompt."""
    keys = literal_keys()
    out: list[dict[str, Any]] = []
    created: dict[str, dict[str, Any]] = {}

    def begin(sid: str) -> None:
        body: dict[str, Any] = {"surfaceId": sid, "root": "root"}
        color = (created.pop(sid).get("theme") or {}).get("primaryColor")
        if isinstance(color, str):
            body["styles"] = {"primaryColor": color}
        out.append({"beginRendering": body})

    for m in messages if isinstance(messages, list) else []:
        kind = next((k for k in v09.MESSAGE_KINDS if isinstance(m, dict) and isinstance(m.get(k), dict)), None)
        if kind is None:
            continue
        body = m[kind]
        sid = body.get("surfaceId")
        if kind == "createSurface":
            created[sid] = body
        elif kind == "updateComponents":
            comps = [component_v08(c, keys) for c in body.get("components") or [] if isinstance(c, dict)]
            out.append({"surfaceUpdate": {"surfaceId": sid, "components": comps}})
        elif kind == "updateDataModel":
            out += [data_update(sid, body.get("path") or "/", body["value"])] if "value" in body else []
        else:
            if sid in created:
                begin(sid)
            out.append({"deleteSurface": {"surfaceId": sid}})
    for sid in list(created):
        begin(sid)
    return out


def literal(value: Any, key: str | None = None) -> dict[str, Any]:
    key = key or ("literalBoolean" if isinstance(value, bool) else "literalNumber" if isinstance(value, (int, float))
                  else "literalArray" if isinstance(value, list) else "literalString")
    return {key: value}


def bound_v08(value: Any, key: str | None = None) -> dict[str, Any] | None:
    """A v0.9 dynamic value as a v0.8 bound value (None: a function call, which v0.8 cannot say)."""
    if isinstance(value, dict):
        return {"path": value["path"]} if isinstance(value.get("path"), str) else None
    return literal(value, key)


def component_v08(comp: dict[str, Any], keys: dict[tuple[str, str], str]) -> dict[str, Any]:
    kind9 = comp.get("component")
    kind = TYPES_BACK.get(kind9, kind9) if isinstance(kind9, str) else "Text"
    rename = RENAMES_BACK.get(kind, {})
    props: dict[str, Any] = {}
    for key, value in comp.items():
        if key in ("id", "component", "weight", "accessibility", "checks"):
            continue
        name = rename.get(key, key)
        if key == "children":
            props[name] = ({"explicitList": [c for c in value if isinstance(c, str)]} if isinstance(value, list) else
                           {"template": {"componentId": value.get("componentId"), "dataBinding": value.get("path")}}
                           if isinstance(value, dict) else {"explicitList": []})
        elif key == "tabs" and isinstance(value, list):
            props[name] = [{"title": bound_v08(t.get("title"), "literalString") or {"literalString": ""},
                            "child": t.get("child")} for t in value if isinstance(t, dict)]
        elif key == "action" and isinstance(value, dict):
            props[name] = action_v08(value)
        elif key == "options" and isinstance(value, list):
            props[name] = [{"label": bound_v08(o.get("label"), "literalString") or {"literalString": ""},
                            "value": o.get("value")} for o in value if isinstance(o, dict)]
        elif kind == "Button" and key == "variant":
            if value == "primary":
                props["primary"] = True
        elif kind == "MultipleChoice" and key == "variant":
            if value == "mutuallyExclusive":
                props["maxAllowedSelections"] = 1
        elif kind == "TextField" and key == "variant":
            if value in TEXT_FIELD_TYPES:
                props[name] = value
        elif kind == "Image" and key == "fit":
            props[name] = "scale-down" if value == "scaleDown" else value
        elif (kind, name) in keys:
            b = bound_v08(value, keys[(kind, name)])
            if b is not None:
                props[name] = b
        elif not isinstance(value, dict):  # a plain property (usageHint, axis, min, ...)
            props[name] = value
    out: dict[str, Any] = {"id": comp.get("id"), "component": {kind: props}}
    if "weight" in comp:
        out["weight"] = comp["weight"]
    return out


def action_v08(value: dict[str, Any]) -> dict[str, Any]:
    event = value.get("event") if isinstance(value.get("event"), dict) else {}
    name = event.get("name") or (value.get("functionCall") or {}).get("call") or "action"
    out: dict[str, Any] = {"name": name}
    context = [{"key": k, "value": b} for k, v in (event.get("context") or {}).items()
               if (b := bound_v08(v)) is not None and "literalArray" not in b]
    if context:
        out["context"] = context
    return out


def data_update(sid: str, path: str, value: Any) -> dict[str, Any]:
    """A v0.9 `updateDataModel` as one v0.8 `dataModelUpdate` (a scalar at `/a/b`: key `b` at `/a`)."""
    if not isinstance(value, dict):
        head, _, key = path.rstrip("/").rpartition("/")
        path, value = head or "/", {key: value}
    body: dict[str, Any] = {"surfaceId": sid, "contents": contents(value, nest=True)}
    if path != "/":
        body["path"] = path
    return {"dataModelUpdate": body}


def contents(values: dict[str, Any], nest: bool) -> list[dict[str, Any]]:
    """Plain JSON as v0.8 entries; what v0.8 cannot nest (a list, a map in a map) as a JSON string,
    which v0.8 renderers and `datamodel.decode_string` read back."""
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            out.append({"key": key, "valueBoolean": value})
        elif isinstance(value, (int, float)):
            out.append({"key": key, "valueNumber": value})
        elif isinstance(value, str):
            out.append({"key": key, "valueString": value})
        elif isinstance(value, dict) and nest:
            out.append({"key": key, "valueMap": contents(value, nest=False)})
        elif value is not None:
            out.append({"key": key, "valueString": json.dumps(value, ensure_ascii=False)})
    return out


def card_to_v08(card: dict[str, Any]) -> dict[str, Any]:
    """A `{text_response, a2ui}` card with its messages in v0.8 (already v0.8: unchanged)."""
    messages = card.get("a2ui") or []
    return {**card, "a2ui": to_v08(messages)} if v09.is_v09(messages) else card


def v08_text(content: Any) -> str | None:
    """The v0.8 text of a reply that is a v0.9 card, as the genui specialist writes a card (None:
    not a v0.9 card). For a card the store does not know (another server's, or one kept by a
    client across a restart); a card this server served is read back as it was before converting."""
    if not isinstance(content, str) or not content.lstrip().startswith("{") or v09.VERSION not in content:
        return None
    try:
        card = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(card, dict) or not isinstance(card.get("text_response"), str) or not v09.is_v09(card.get("a2ui")):
        return None
    from macaronic.genui.close import card_text

    return card_text(card_to_v08(card))
