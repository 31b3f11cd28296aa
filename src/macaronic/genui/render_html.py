"""Static HTML for A2UI v0.8 messages: deterministic markup for snapshot tests and previews.

Applies our data-model and template rules (`datamodel.py`), escapes every
value, and degrades safely on invalid input (unknown ids, cycles, excess depth render as an
inline error). It renders a snapshot only: no scripts, no event handlers, no live binding;
Buttons carry their action name in `data-action`. Interactive rendering is the
official renderer in the web chat (web/a2ui-card.js).
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from macaronic.genui.datamodel import MISSING, apply_update, escape_key, get_path, join_path, template_items

MAX_DEPTH = 32
HEADINGS = {"h1", "h2", "h3", "h4", "h5"}


def render_html(messages: list[dict[str, Any]] | dict[str, Any], *, standalone: bool = False) -> str:
    """HTML for every surface that received beginRendering, in order of first mention. Accepts
    a message list or a `{text_response, a2ui}` object (the text becomes a paragraph)."""
    text = None
    if isinstance(messages, dict):
        text, messages = messages.get("text_response"), messages.get("a2ui")
    messages = messages if isinstance(messages, list) else []
    parts = [f'<p class="a2ui-text-response">{escape(text)}</p>'] if isinstance(text, str) and text else []
    for surface in surfaces(messages).values():
        if surface["root"] is not None:
            parts.append(Html(surface).surface())
    body = "\n".join(parts)
    if not standalone:
        return body
    return ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>A2UI</title></head>'
            f"<body>\n{body}\n</body></html>\n")


def surfaces(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for message in messages:
        if not isinstance(message, dict) or len(message) != 1:
            continue
        (kind, body), = message.items()
        sid = body.get("surfaceId") if isinstance(body, dict) else None
        if not isinstance(sid, str):
            continue
        if kind == "deleteSurface":
            out.pop(sid, None)
            continue
        s = out.setdefault(sid, {"id": sid, "components": {}, "model": {}, "root": None, "styles": {}})
        if kind == "surfaceUpdate":
            for c in body.get("components") if isinstance(body.get("components"), list) else []:
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    s["components"][c["id"]] = c
        elif kind == "dataModelUpdate":
            s["model"] = apply_update(s["model"], body)
        elif kind == "beginRendering":
            styles = body.get("styles")
            s["root"], s["styles"] = body.get("root"), styles if isinstance(styles, dict) else {}
    return out


def attrs(**values: Any) -> str:
    return "".join(f' {k.rstrip("_").replace("_", "-")}="{escape(str(v))}"'
                   for k, v in values.items() if v is not None and v is not False)


def text_of(value: Any) -> str:
    if value is None or value is MISSING:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


class Html:
    def __init__(self, surface: dict[str, Any]):
        self.s = surface

    def surface(self) -> str:
        style = self.s["styles"].get("primaryColor")
        inner = self.node(self.s["root"], "/", 0, ())
        return f'<div class="a2ui-surface"{attrs(data_surface_id=self.s["id"], data_primary=style)}>{inner}</div>'

    def value(self, bound: Any, ctx: str) -> Any:
        if not isinstance(bound, dict):
            return None
        literal = next((bound[k] for k in ("literalString", "literalNumber", "literalBoolean", "literalArray")
                        if k in bound), None)
        if not isinstance(bound.get("path"), str):
            return literal
        found = get_path(self.s["model"], join_path(ctx, bound["path"]))
        return literal if found is MISSING else found

    def node(self, cid: Any, ctx: str, depth: int, stack: tuple[str, ...]) -> str:
        entry = self.s["components"].get(cid) if isinstance(cid, str) else None
        if entry is None or cid in stack or depth > MAX_DEPTH:
            why = "unknown component" if entry is None else "cycle" if cid in stack else "too deep"
            return f'<span class="a2ui-error">{escape(why)}: {escape(str(cid))}</span>'
        comp = entry.get("component") if isinstance(entry.get("component"), dict) else {}
        ctype, props = next(iter(comp.items()), ("?", {}))
        method = getattr(self, "c_" + str(ctype), None)
        if method is None or not isinstance(props, dict):
            return f'<span class="a2ui-error">unknown component type: {escape(str(ctype))}</span>'
        scope = (ctx, depth, stack + (cid,))
        extra = attrs(data_component_id=cid, data_weight=entry.get("weight"))
        try:
            return method(props, scope, f'class="a2ui-{ctype.lower()}"{extra}')
        except (TypeError, AttributeError, ValueError):  # wrong-typed props: validate() says which
            return f'<span class="a2ui-error">malformed {escape(ctype)}: {escape(cid)}</span>'

    def child(self, cid: Any, scope: tuple, ctx: str | None = None) -> str:
        return self.node(cid, scope[0] if ctx is None else ctx, scope[1] + 1, scope[2])

    def children(self, spec: Any, scope: tuple) -> list[str]:
        spec = spec if isinstance(spec, dict) else {}
        if isinstance(spec.get("explicitList"), list):
            return [self.child(c, scope) for c in spec["explicitList"]]
        tpl = spec.get("template")
        if not isinstance(tpl, dict):
            return []
        base = join_path(scope[0], str(tpl.get("dataBinding", "")))
        items = template_items(get_path(self.s["model"], base))
        return [self.child(tpl.get("componentId"), scope, join_path(base, escape_key(k))) for k, _ in items]

    def t(self, bound: Any, scope: tuple) -> str:
        return escape(text_of(self.value(bound, scope[0])))

    # ---- components (one method per standard catalog type) ---------------------------------

    def c_Text(self, p, scope, a):
        hint = p.get("usageHint", "body")
        tag = hint if hint in HEADINGS else "small" if hint == "caption" else "p"
        return f"<{tag} {a}{attrs(data_hint=hint)}>{self.t(p.get('text'), scope)}</{tag}>"

    def c_Image(self, p, scope, a):
        return (f"<img {a}{attrs(src=text_of(self.value(p.get('url'), scope[0])), alt=text_of(self.value(p.get('altText'), scope[0])), data_hint=p.get('usageHint'), data_fit=p.get('fit'))}>")

    def c_Icon(self, p, scope, a):
        return f'<span {a} role="img"{attrs(data_icon=text_of(self.value(p.get("name"), scope[0])))}>{self.t(p.get("name"), scope)}</span>'

    def c_Video(self, p, scope, a):
        return f"<video {a} controls{attrs(src=text_of(self.value(p.get('url'), scope[0])))}></video>"

    def c_AudioPlayer(self, p, scope, a):
        src = text_of(self.value(p.get("url"), scope[0]))
        return f"<figure {a}><figcaption>{self.t(p.get('description'), scope)}</figcaption><audio controls{attrs(src=src)}></audio></figure>"

    def flex(self, p, scope, a, tag="div", item=None):
        kids = self.children(p.get("children"), scope)
        inner = "".join(f"<{item}>{k}</{item}>" if item else k for k in kids)
        extra = attrs(data_distribution=p.get("distribution"), data_alignment=p.get("alignment"),
                      data_direction=p.get("direction"))
        return f"<{tag} {a}{extra}>{inner}</{tag}>"

    def c_Row(self, p, scope, a):
        return self.flex(p, scope, a)

    def c_Column(self, p, scope, a):
        return self.flex(p, scope, a)

    def c_List(self, p, scope, a):
        return self.flex(p, scope, a, tag="ul", item="li")

    def c_Card(self, p, scope, a):
        return f"<div {a}>{self.child(p.get('child'), scope)}</div>"

    def c_Tabs(self, p, scope, a):
        items = [i for i in p.get("tabItems") or [] if isinstance(i, dict)]
        bar = "".join(f'<button type="button" role="tab"{attrs(aria_selected=str(n == 0).lower())}>{self.t(i.get("title"), scope)}</button>'
                      for n, i in enumerate(items))
        panels = "".join(f'<div role="tabpanel"{" hidden" if n else ""}>{self.child(i.get("child"), scope)}</div>'
                         for n, i in enumerate(items))
        return f'<div {a}><div role="tablist">{bar}</div>{panels}</div>'

    def c_Divider(self, p, scope, a):
        return f"<hr {a}{attrs(data_axis=p.get('axis', 'horizontal'))}>"

    def c_Modal(self, p, scope, a):
        return (f"<div {a}>{self.child(p.get('entryPointChild'), scope)}"
                f"<dialog>{self.child(p.get('contentChild'), scope)}</dialog></div>")

    def c_Button(self, p, scope, a):
        action = p.get("action") if isinstance(p.get("action"), dict) else {}
        extra = attrs(data_action=action.get("name", ""), data_primary=str(bool(p.get("primary"))).lower())
        return f'<button type="button" {a}{extra}>{self.child(p.get("child"), scope)}</button>'

    def c_CheckBox(self, p, scope, a):
        checked = " checked" if self.value(p.get("value"), scope[0]) is True else ""
        return f'<label {a}><input type="checkbox"{checked}> {self.t(p.get("label"), scope)}</label>'

    def c_TextField(self, p, scope, a):
        kind = p.get("textFieldType", "shortText")
        value = text_of(self.value(p.get("text"), scope[0]))
        if kind == "longText":
            field = f"<textarea>{escape(value)}</textarea>"
        else:
            itype = {"obscured": "password", "number": "number", "date": "date"}.get(kind, "text")
            shown = "" if kind == "obscured" else value  # never put a password into a snapshot
            field = f"<input{attrs(type=itype, value=shown, pattern=p.get('validationRegexp'))}>"
        return f"<label {a}><span>{self.t(p.get('label'), scope)}</span>{field}</label>"

    def c_DateTimeInput(self, p, scope, a):
        itype = "time" if p.get("enableDate") is False else "datetime-local" if p.get("enableTime") else "date"
        return f"<label {a}><input{attrs(type=itype, value=text_of(self.value(p.get('value'), scope[0])))}></label>"

    def c_MultipleChoice(self, p, scope, a):
        chosen = self.value(p.get("selections"), scope[0])
        chosen = chosen if isinstance(chosen, list) else []
        options = "".join(
            f'<label><input type="checkbox"{attrs(value=o.get("value"), checked=o.get("value") in chosen)}> '
            f'{self.t(o.get("label"), scope)}</label>'
            for o in p.get("options") or [] if isinstance(o, dict))
        return f"<fieldset {a}{attrs(data_variant=p.get('variant'))}>{options}</fieldset>"

    def c_Slider(self, p, scope, a):
        value = text_of(self.value(p.get("value"), scope[0]))
        rng = attrs(type="range", min=p.get("minValue", 0), max=p.get("maxValue", 100), value=value)
        return f"<label {a}><span>{self.t(p.get('label'), scope)}</span><input{rng}></label>"
