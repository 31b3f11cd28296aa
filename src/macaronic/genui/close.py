"""Close a GenUI answer into a valid card: the last step of structure by construction.

The grammar (`genui.grammar`) makes every complete reply schema-valid; what no grammar can say
(ids unique, every child defined, no cycles, a `beginRendering` whose root exists, bindings that
resolve) and a reply the token cap cut off are closed here, deterministically, by removing the
smallest offending piece the validator points at, one error at a time:

- a dangling or cycle-closing entry of a children list -> that entry;
- a duplicate id, or a component the schema or an integrity rule rejects -> that component;
- a surface with no `beginRendering` (or a root that does not exist) -> one pointing at the
  first component no other component names;
- a message the schema rejects -> that message;
- nothing left to show -> one Text card carrying the reply's text;
- a valid card that shows no words at all (only empty containers) after closing -> the reply's
  own `text_response` as a Text at the top of its root;
- a valid card with components its root does not reach (the renderer would drop them: a second
  top-level component, a button label no button holds) -> those tops put under the root, at the end
  of its Column or in a new Column with it (`strays_adopted`).

A v0.9 card (`genui/v09.py`) is closed by the same rules on its flat components (`fix_one_v09`).
It never invents content: the only text it adds is the reply's own `text_response`. Knows the validator's error paths and the
A2UI message shapes; nothing about models or decoding.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from macaronic.genui import v09
from macaronic.genui.validate import validate

COMPONENT = re.compile(r"^/a2ui/(\d+)/surfaceUpdate/components/(\d+)(/.*)?$")
LIST_ENTRY = re.compile(r"^/a2ui/(\d+)/surfaceUpdate/components/(\d+)/component/[^/]+/children/explicitList/(\d+)$")
MESSAGE = re.compile(r"^/a2ui/(\d+)(/.*)?$")
REF_KEYS = ("child", "entryPointChild", "contentChild")
MAX_STEPS = 256
FALLBACK_SURFACE = "main"


def close_card(obj: Any, text: str = "", adopt: bool = True) -> tuple[dict, list[str]]:
    """A valid `{text_response, a2ui}` card from `obj` (parsed, maybe partial) and the list of
    fixes applied (empty when it was valid already). `adopt=False`: components the root does not
    reach stay out (the renderer drops them)."""
    fixes: list[str] = []
    card = envelope(obj, text, fixes)
    is_v09 = v09.is_v09(card["a2ui"])  # a v0.9 card is closed as v0.9 (same rules, flat components)
    fix = fix_one_v09 if is_v09 else fix_one
    for _ in range(MAX_STEPS):
        result = validate(card)
        if result.valid and is_v09 and fixes and not any("updateComponents" in m for m in card["a2ui"]):
            break  # closed down to nothing to show
        if result.valid:
            kept: list[str] = []
            for sid in stray_components(card) if adopt and not is_v09 else []:  # valid, but it would draw without them
                trial = copy.deepcopy(card)
                adopt_strays(trial, [*kept, sid])
                if validate(trial).valid:  # a stray that is invalid once drawn stays out
                    kept.append(sid)
            if kept:
                adopt_strays(card, kept)
                fixes.append("strays_adopted")
            if fixes and not shows_words(card) and card["text_response"].strip():
                worded = with_text(card)
                if worded is not None and validate(worded).valid:
                    fixes.append("text_response_shown")
                    return worded, fixes
            return card, fixes
        if not fix(card, result.errors[0], fixes):
            break
    fixes.append("fallback_text_card")
    return (fallback_v09 if is_v09 else fallback)(card.get("text_response") or text), fixes


def envelope(obj: Any, text: str, fixes: list[str]) -> dict:
    if not isinstance(obj, dict):
        fixes.append("no_json_object")
        return fallback(text)
    tr = obj.get("text_response")
    if not isinstance(tr, str):
        fixes.append("text_response_set")
        tr = text if isinstance(text, str) and not text.lstrip().startswith("{") else ""
    msgs = obj.get("a2ui")
    if not isinstance(msgs, list):
        fixes.append("a2ui_list_set")
        msgs = []
    return {"text_response": tr, "a2ui": copy.deepcopy([m for m in msgs if isinstance(m, dict)])}


def fix_one(card: dict, error: dict, fixes: list[str]) -> bool:
    path, message = error.get("path", ""), error.get("message", "")
    msgs = card["a2ui"]
    if "no beginRendering" in message or "/beginRendering/root" in path or "root" in message and "beginRendering" in path:
        sid = surface_of(msgs, path)
        if sid is not None and set_root(msgs, sid):
            fixes.append("begin_rendering_set")
            return True
    if m := LIST_ENTRY.match(path):
        i, j, k = (int(x) for x in m.groups())
        items = component_props(msgs[i]["surfaceUpdate"]["components"][j])["children"]["explicitList"]
        fixes.append(f"child_dropped:{items[k]}")
        del items[k]
        return True
    if m := COMPONENT.match(path):
        i, j = int(m.group(1)), int(m.group(2))
        comps = msgs[i]["surfaceUpdate"]["components"]
        if j < len(comps):
            cid = comps[j].get("id") if isinstance(comps[j], dict) else None
            del comps[j]
            drop_refs(msgs, cid, keep_duplicates=any(isinstance(c, dict) and c.get("id") == cid for c in comps))
            fixes.append(f"component_dropped:{cid}")
            return True
    if m := MESSAGE.match(path):
        i = int(m.group(1))
        if i < len(msgs):
            fixes.append(f"message_dropped:{next(iter(msgs[i]), '?')}")
            del msgs[i]
            return True
    return False


def component_props(entry: dict) -> dict:
    comp = entry.get("component") or {}
    return next(iter(comp.values())) if comp else {}


def drop_refs(msgs: list[dict], cid: str | None, keep_duplicates: bool) -> None:
    """After a component is gone, remove the list entries that named it (single-child fields
    are left for the validator to report, so their owner goes next)."""
    if cid is None or keep_duplicates:
        return
    for m in msgs:
        for entry in (m.get("surfaceUpdate") or {}).get("components") or []:
            if not isinstance(entry, dict):
                continue
            props = component_props(entry)
            children = props.get("children") if isinstance(props, dict) else None
            if isinstance(children, dict) and isinstance(children.get("explicitList"), list):
                children["explicitList"] = [c for c in children["explicitList"] if c != cid]


def surface_of(msgs: list[dict], path: str) -> str | None:
    m = MESSAGE.match(path)
    if m and int(m.group(1)) < len(msgs):
        body = next(iter(msgs[int(m.group(1))].values()), None)
        if isinstance(body, dict) and isinstance(body.get("surfaceId"), str):
            return body["surfaceId"]
    return next((b["surfaceId"] for msg in msgs for b in msg.values()
                 if isinstance(b, dict) and isinstance(b.get("surfaceId"), str)), None)


def surface_entries(msgs: list[dict], sid: str) -> list[dict]:
    return [e for msg in msgs if isinstance(msg.get("surfaceUpdate"), dict)
            and msg["surfaceUpdate"].get("surfaceId") == sid
            for e in msg["surfaceUpdate"].get("components") or [] if isinstance(e, dict)]


def named_by(entry: dict) -> list[str]:
    """The ids a component names as its children (child, a modal's two, a list, a template, tabs)."""
    props = component_props(entry)
    if not isinstance(props, dict):
        return []
    out = [props[k] for k in REF_KEYS if isinstance(props.get(k), str)]
    children = props.get("children")
    if isinstance(children, dict):
        out += [c for c in children.get("explicitList") or [] if isinstance(c, str)]
        tpl = children.get("template")
        if isinstance(tpl, dict) and isinstance(tpl.get("componentId"), str):
            out.append(tpl["componentId"])
    out += [t["child"] for t in props.get("tabItems") or [] if isinstance(t, dict) and isinstance(t.get("child"), str)]
    return out


def surface_strays(entries: list[dict], root: Any) -> list[str]:
    """The tops of one surface's components other than its root, in the order written."""
    named = {c for e in entries for c in named_by(e)}
    return [e["id"] for e in entries if isinstance(e.get("id"), str) and e["id"] not in named and e["id"] != root]


def stray_components(card: dict) -> list[str]:
    """Components of a surface that its root does not reach, so the renderer would drop them: the
    tops other than the root (what they hold comes along when a top is adopted)."""
    out = []
    for msg in card.get("a2ui") or []:
        begin = msg.get("beginRendering") if isinstance(msg, dict) else None
        if isinstance(begin, dict) and isinstance(begin.get("surfaceId"), str):
            out += surface_strays(surface_entries(card["a2ui"], begin["surfaceId"]), begin.get("root"))
    return out


def adopt_strays(card: dict, only: list[str] | None = None) -> None:
    """Put each surface's stray tops (those in `only`, default all) under its root: at the end of the
    root's Column (or of the Column a root Card holds), else in a new Column holding the root and
    them, in the order written."""
    msgs = card["a2ui"]
    for begin in [m["beginRendering"] for m in msgs if isinstance(m.get("beginRendering"), dict)]:
        sid = begin.get("surfaceId")
        entries = surface_entries(msgs, sid)
        strays = [i for i in surface_strays(entries, begin.get("root")) if only is None or i in only]
        if not strays:
            continue
        by_id = {e.get("id"): e for e in entries}
        target = by_id.get(begin.get("root"))
        if target is not None and "Card" in (target.get("component") or {}):
            target = by_id.get(component_props(target).get("child"))
        children = component_props(target).get("children") if target is not None and "Column" in (target.get("component") or {}) else None
        if isinstance(children, dict) and isinstance(children.get("explicitList"), list):
            children["explicitList"].extend(strays)
            continue
        update = next(m["surfaceUpdate"] for m in msgs if isinstance(m.get("surfaceUpdate"), dict)
                      and m["surfaceUpdate"].get("surfaceId") == sid)
        new = next(f"adopted{i or ''}" for i in range(len(by_id) + 2) if f"adopted{i or ''}" not in by_id)
        update["components"].append({"id": new, "component": {"Column": {"children": {"explicitList": [begin["root"], *strays]}}}})
        begin["root"] = new


def set_root(msgs: list[dict], sid: str) -> bool:
    """Point the surface's beginRendering (added if missing) at its first unreferenced component."""
    entries = surface_entries(msgs, sid)
    ids = [e.get("id") for e in entries if isinstance(e.get("id"), str)]
    named = {c for e in entries for c in named_by(e)}
    roots = [i for i in ids if i not in named]
    if not roots:
        return False
    begin = next((msg["beginRendering"] for msg in msgs if isinstance(msg.get("beginRendering"), dict)
                  and msg["beginRendering"].get("surfaceId") == sid), None)
    if begin is None:
        msgs.append({"beginRendering": {"surfaceId": sid, "root": roots[0]}})
    elif begin.get("root") == roots[0]:
        return False
    else:
        begin["root"] = roots[0]
    return True


def shows_words(card: dict) -> bool:
    """Whether any component carries a literal string a person would read (a Text, a label...)."""
    def walk(v) -> bool:
        if isinstance(v, dict):
            return any((k == "literalString" and isinstance(x, str) and x.strip()) or walk(x) for k, x in v.items())
        return any(walk(x) for x in v) if isinstance(v, list) else False

    return any(walk(e.get("component")) for m in card["a2ui"] if isinstance(m.get("surfaceUpdate"), dict)
               for e in m["surfaceUpdate"].get("components") or [] if isinstance(e, dict))


def with_text(card: dict) -> dict | None:
    """A copy of `card` whose first surface shows its text_response first: a Text put at the head of
    a Column/Row root's children, or a new Column root holding the Text and the old root."""
    out = copy.deepcopy(card)
    begin = next((m["beginRendering"] for m in out["a2ui"] if isinstance(m.get("beginRendering"), dict)), None)
    update = next((m["surfaceUpdate"] for m in out["a2ui"] if isinstance(m.get("surfaceUpdate"), dict)
                   and m["surfaceUpdate"].get("surfaceId") == (begin or {}).get("surfaceId")), None)
    if begin is None or update is None:
        return None
    comps = update["components"]
    ids = {c.get("id") for c in comps if isinstance(c, dict)}
    tid = next(f"text_response{i or ''}" for i in range(len(ids) + 2) if f"text_response{i or ''}" not in ids)
    comps.append({"id": tid, "component": {"Text": {"text": {"literalString": card["text_response"].strip()}}}})
    root = next((c for c in comps if c.get("id") == begin["root"]), None)
    kind = next(iter(root["component"]), None) if root else None
    children = root["component"][kind].get("children") if kind in ("Column", "Row") else None
    if isinstance(children, dict) and isinstance(children.get("explicitList"), list):
        children["explicitList"].insert(0, tid)
        return out
    cid = next(f"card_root{i or ''}" for i in range(len(ids) + 2) if f"card_root{i or ''}" not in ids)
    comps.append({"id": cid, "component": {"Column": {"children": {"explicitList": [tid, begin["root"]]}}}})
    begin["root"] = cid
    return out


def fallback(text: str) -> dict:
    shown = text.strip() or "(no card)"
    return {"text_response": text, "a2ui": [
        {"surfaceUpdate": {"surfaceId": FALLBACK_SURFACE, "components": [
            {"id": "text", "component": {"Text": {"text": {"literalString": shown}}}}]}},
        {"beginRendering": {"surfaceId": FALLBACK_SURFACE, "root": "text"}}]}


def card_text(card: dict) -> str:
    """The closed card as the genui specialist writes it (compact JSON)."""
    return json.dumps(card, ensure_ascii=False, separators=(",", ":"))


# ---- A2UI v0.9 (genui/v09.py validates it): the same rules on its flat components ----

V09_ENTRY = re.compile(r"^/a2ui/(\d+)/updateComponents/components/(\d+)/children/(\d+)$")
V09_COMPONENT = re.compile(r"^/a2ui/(\d+)/updateComponents/components/(\d+)(/.*)?$")


def fix_one_v09(card: dict, error: dict, fixes: list[str]) -> bool:
    """One v0.9 fault removed: a dangling list entry, a component the catalog or an integrity rule
    rejects, a missing `root` (the first unnamed component takes the id), a missing createSurface
    (added, basic catalog), else the message."""
    path, message = error.get("path", ""), error.get("message", "")
    msgs = card["a2ui"]
    if m := V09_ENTRY.match(path):
        i, j, k = (int(x) for x in m.groups())
        items = msgs[i]["updateComponents"]["components"][j]["children"]
        fixes.append(f"child_dropped:{items[k]}")
        del items[k]
        return True
    if m := V09_COMPONENT.match(path):
        return drop_v09_component(msgs, int(m.group(1)), int(m.group(2)), fixes)
    if "has no component with id 'root'" in message:
        comps = [c for m in msgs if "updateComponents" in m for c in m["updateComponents"]["components"]]
        named = {ref for c in comps for _, ref in v09.child_refs(c)}
        top = next((c for c in comps if c["id"] not in named), None)
        if top is not None:
            fixes.append(f"root_set:{top['id']}")
            top["id"] = "root"
            return True
    if "before its createSurface" in message and (m := MESSAGE.match(path)):
        body = next((v for k, v in msgs[int(m.group(1))].items() if k in v09.MESSAGE_KINDS), {})
        sid = body.get("surfaceId", FALLBACK_SURFACE)
        msgs.insert(0, {"version": v09.VERSION, "createSurface": {"surfaceId": sid, "catalogId": v09.BASIC_CATALOG_ID}})
        fixes.append("create_surface_set")
        return True
    if (m := MESSAGE.match(path)) and int(m.group(1)) < len(msgs):
        i = int(m.group(1))
        body = msgs[i].get("updateComponents") if isinstance(msgs[i], dict) else None
        comps = body.get("components") if isinstance(body, dict) else None
        bad = next((j for j, c in enumerate(comps) if not v09.component_ok(c)), None) if isinstance(comps, list) else None
        if bad is not None:
            return drop_v09_component(msgs, i, bad, fixes)
        fixes.append(f"message_dropped:{next((k for k in msgs[i] if k != 'version'), '?')}")
        del msgs[i]
        return True
    return False


def drop_v09_component(msgs: list[dict], i: int, j: int, fixes: list[str]) -> bool:
    comps = msgs[i]["updateComponents"]["components"]
    if j >= len(comps):
        return False
    cid = comps[j].get("id") if isinstance(comps[j], dict) else None
    del comps[j]
    if not comps:
        del msgs[i]
    elif cid is not None and not any(isinstance(c, dict) and c.get("id") == cid for c in comps):
        for c in comps:
            if isinstance(c, dict) and isinstance(c.get("children"), list):
                c["children"] = [x for x in c["children"] if x != cid]
    fixes.append(f"component_dropped:{cid}")
    return True


def fallback_v09(text: str) -> dict:
    shown = text.strip() or "(no card)"
    return {"text_response": text, "a2ui": [
        {"version": v09.VERSION, "createSurface": {"surfaceId": FALLBACK_SURFACE, "catalogId": v09.BASIC_CATALOG_ID}},
        {"version": v09.VERSION, "updateComponents": {"surfaceId": FALLBACK_SURFACE, "components": [
            {"id": "root", "component": "Text", "text": shown}]}}]}
