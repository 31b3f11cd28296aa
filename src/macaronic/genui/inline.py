"""Write a card's data model into its components: the same card, shown values as literals.

A2UI lets a card keep its values in a data model (`dataModelUpdate`) and bind components to paths,
lists included (`children.template` repeats a component once per item). That is two places to get
right, and a small model trained on such cards learns to fill the data model and forget the
components that would show it (run-q3's GenUI failure data). `inline` rewrites a card so each value
sits where it is shown:

- every bound value whose path resolves to a scalar becomes a literal (`literalString`,
  `literalNumber`, `literalBoolean`);
- every template becomes an explicit list of one copy of the template per item, the copies' ids
  suffixed with the item's key (`item` -> `item-0`), relative paths resolved against the item;
- components are listed depth-first from the root (a container, then each thing it holds with what
  that holds, in order), only those the root reaches;
- what a user edits stays bound: the value of an input component (TextField.text, CheckBox.value,
  Slider.value, DateTimeInput.value, MultipleChoice.selections) and every bound value under such a
  path (a Button's context that sends the form); so does an Icon's name (its literal must be a
  catalog icon, the data may hold any string); the `dataModelUpdate`s stay when a binding is left.

Renders the same (`render_html`, component ids aside). Pure; raises ValueError when a card cannot
be inlined (two components would get one id, or the root is not defined).
"""

from __future__ import annotations

from typing import Any

from macaronic.genui.build import lit
from macaronic.genui.datamodel import MISSING, build_models, escape_key, get_path, join_path, template_items

INPUTS = {"TextField": ("text",), "CheckBox": ("value",), "Slider": ("value",), "DateTimeInput": ("value",),
          "MultipleChoice": ("selections",)}
# bound, and kept bound: a user edits them (INPUTS), or the literal has a narrower type than the data
# (an Icon's literal name must be one of the catalog's icons; the data may hold any string)
KEEP = {**INPUTS, "Icon": ("name",)}
CHILD_KEYS = ("child", "entryPointChild", "contentChild")


def inline(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each rendered surface's shown values written into its components."""
    models = build_models(messages)
    comps: dict[str, dict[str, dict]] = {}
    roots: dict[str, str] = {}
    for m in messages:
        (kind, body), = m.items()
        if kind == "surfaceUpdate":
            comps.setdefault(body["surfaceId"], {}).update({c["id"]: c for c in body.get("components", [])})
        elif kind == "beginRendering":
            roots[body["surfaceId"]] = body["root"]
    kept: dict[str, bool] = {}  # per rendered surface: does some binding stay, so its data model too
    out = []
    for m in messages:
        (kind, body), = m.items()
        sid = body.get("surfaceId")
        if sid not in roots:  # never rendered: as it was
            out.append(m)
            continue
        if sid not in kept:  # the surface's first message: all its components, written once, here
            components = Surface(comps[sid], models.get(sid, {})).walk(roots[sid])
            kept[sid] = _bound(components)
            out.append({"surfaceUpdate": {"surfaceId": sid, "components": components}})
        if kind == "beginRendering" or kind == "dataModelUpdate" and kept[sid]:
            out.append(m)
    return out


def _bound(value: Any) -> bool:
    """Does a bound value (`{"path": ...}`) remain anywhere in `value`?"""
    if isinstance(value, dict):
        return isinstance(value.get("path"), str) or any(_bound(v) for v in value.values())
    return isinstance(value, list) and any(_bound(v) for v in value)


class Surface:
    def __init__(self, components: dict[str, dict], model: dict):
        self.components, self.model = components, model
        self.inputs: list[str] = []  # absolute paths the user edits (found while walking)

    def walk(self, root: str) -> list[dict]:
        if root not in self.components:
            raise ValueError(f"root {root!r} is not defined")
        self._find_inputs(root, "/", set())
        out, seen, stack = [], {}, [(root, "/", "")]
        while stack:
            cid, ctx, suffix = stack.pop()
            new = cid + suffix
            if new in seen:
                if seen[new] != (cid, ctx):
                    raise ValueError(f"two components would be named {new!r}")
                continue
            seen[new] = (cid, ctx)
            entry = self.components.get(cid)
            if entry is None:
                continue  # an undefined child renders as an error either way
            (ctype, props), = entry["component"].items()
            kids: list[tuple[str, str, str]] = []
            props = self._props(ctype, props, ctx, suffix, kids)
            out.append({"id": new, "component": {ctype: props},
                        **{k: v for k, v in entry.items() if k not in ("id", "component")}})
            stack.extend(reversed(kids))
        return out

    def _find_inputs(self, cid: str, ctx: str, stack: set) -> None:
        entry = self.components.get(cid)
        if entry is None or (cid, ctx) in stack or len(stack) > 32:
            return
        stack = stack | {(cid, ctx)}
        (ctype, props), = entry["component"].items()
        for k in INPUTS.get(ctype, ()):
            if isinstance(props.get(k), dict) and isinstance(props[k].get("path"), str):
                self.inputs.append(join_path(ctx, props[k]["path"]))
        for child, cctx in self._children(props, ctx):
            self._find_inputs(child, cctx, stack)

    def _children(self, props: dict, ctx: str) -> list[tuple[str, str]]:
        out = []
        spec = props.get("children")
        if isinstance(spec, dict) and isinstance(spec.get("explicitList"), list):
            out += [(c, ctx) for c in spec["explicitList"]]
        elif isinstance(spec, dict) and isinstance(spec.get("template"), dict):
            base = join_path(ctx, str(spec["template"].get("dataBinding", "")))
            out += [(spec["template"].get("componentId"), join_path(base, escape_key(k)))
                    for k, _ in template_items(get_path(self.model, base))]
        out += [(props[k], ctx) for k in CHILD_KEYS if isinstance(props.get(k), str)]
        out += [(t["child"], ctx) for t in props.get("tabItems") or [] if isinstance(t, dict) and "child" in t]
        return out

    def _props(self, ctype: str, props: dict, ctx: str, suffix: str, kids: list) -> dict:
        def child(cid, cctx=ctx, csuffix=suffix):
            kids.append((cid, cctx, csuffix))
            return cid + csuffix

        out = {}
        for key, value in props.items():
            if key == "children" and isinstance(value, dict):
                if isinstance(value.get("explicitList"), list):
                    out[key] = {"explicitList": [child(c) for c in value["explicitList"]]}
                elif isinstance(value.get("template"), dict):
                    tpl = value["template"]
                    base = join_path(ctx, str(tpl.get("dataBinding", "")))
                    out[key] = {"explicitList": [child(tpl.get("componentId"), join_path(base, escape_key(k)),
                                                       f"{suffix}-{k}")
                                                 for k, _ in template_items(get_path(self.model, base))]}
                else:
                    out[key] = value
            elif key in CHILD_KEYS and isinstance(value, str):
                out[key] = child(value)
            elif key == "tabItems" and isinstance(value, list):
                out[key] = [{**t, "title": self._bound(t.get("title"), ctx), "child": child(t["child"])}
                            if isinstance(t, dict) and "child" in t else t for t in value]
            elif key in KEEP.get(ctype, ()):  # stays bound, its path absolute (no template around it now)
                out[key] = ({**value, "path": join_path(ctx, value["path"])}
                            if isinstance(value, dict) and isinstance(value.get("path"), str) else value)
            else:
                out[key] = self._resolve(value, ctx)
        return out

    def _resolve(self, value: Any, ctx: str) -> Any:
        if isinstance(value, dict):
            if isinstance(value.get("path"), str):
                return self._bound(value, ctx)
            return {k: self._resolve(v, ctx) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve(v, ctx) for v in value]
        return value

    def _bound(self, value: Any, ctx: str) -> Any:
        if not (isinstance(value, dict) and isinstance(value.get("path"), str)):
            return value
        path = join_path(ctx, value["path"])
        if any(path == p or path.startswith(p.rstrip("/") + "/") for p in self.inputs):
            return {**value, "path": path}
        found = get_path(self.model, path)
        if found is MISSING or isinstance(found, (dict, list)) or found is None:
            return value
        return lit(found)
