"""Checks across A2UI v0.8 messages that a JSON schema cannot express.

Per surface: unique component ids within an update, a root that exists and is announced by
`beginRendering`, no dangling child references, no cycles, bounded depth, `weight` only under
Row/Column, and data-binding paths that resolve against the surface's data model (inside
templates, relative paths resolve against each item). Works on raw dicts and tolerates malformed
pieces (the schema layer reports those), so every problem is reported at once. Knows nothing
about rendering or about the `{text_response, a2ui}` envelope beyond a pointer prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from macaronic.genui.datamodel import (
    MISSING, build_models, escape_key, get_path, join_path, template_items,
)

# (component type, top-level property) pairs whose path is where user input is written: such a
# path need not exist yet, and a Button's context may read it.
INPUT_BINDINGS = frozenset({
    ("TextField", "text"), ("CheckBox", "value"), ("Slider", "value"),
    ("DateTimeInput", "value"), ("MultipleChoice", "selections"),
})
CONTAINERS_WITH_WEIGHT = frozenset({"Row", "Column"})


def ptr(*parts: Any) -> str:
    """Join JSON-pointer parts, escaping `~` and `/` in keys (RFC 6901)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class Node:
    id: str
    type: str
    props: dict[str, Any]
    where: str  # pointer to the component entry
    weight: bool = False


@dataclass
class Surface:
    sid: str
    where: str  # pointer to the first message that mentions it
    nodes: dict[str, Node] = field(default_factory=dict)
    root: tuple[str, str] | None = None  # (root id, pointer to beginRendering/root)


@dataclass
class Issues:
    errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def error(self, where: str, message: str) -> None:
        self.errors.append({"path": where, "message": message})

    def warn(self, where: str, message: str) -> None:
        self.warnings.append({"path": where, "message": message})


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def child_refs(node: Node) -> Iterator[tuple[str, str, str | None]]:
    """(pointer, child id, template dataBinding or None) for every id this component names."""
    base, p = node.where + ptr("component", node.type), node.props
    for key in ("child", "entryPointChild", "contentChild"):
        if isinstance(p.get(key), str):
            yield base + ptr(key), p[key], None
    children = p.get("children")
    if isinstance(children, dict):
        for i, cid in enumerate(as_list(children.get("explicitList"))):
            if isinstance(cid, str):
                yield base + ptr("children", "explicitList", i), cid, None
        tpl = children.get("template")
        if isinstance(tpl, dict) and isinstance(tpl.get("componentId"), str):
            binding = tpl.get("dataBinding") if isinstance(tpl.get("dataBinding"), str) else ""
            yield base + ptr("children", "template", "componentId"), tpl["componentId"], binding
    for i, item in enumerate(as_list(p.get("tabItems"))):
        if isinstance(item, dict) and isinstance(item.get("child"), str):
            yield base + ptr("tabItems", i, "child"), item["child"], None


def bindings(node: Node) -> Iterator[tuple[str, str, bool, bool]]:
    """(pointer to `path`, path, has literal, is input) for every data binding of a component."""
    def walk(value: Any, where: str, top: str | None) -> Iterator[tuple[str, str, bool, bool]]:
        if isinstance(value, dict):
            if isinstance(value.get("path"), str):
                literal = any(k.startswith("literal") for k in value)
                yield where + ptr("path"), value["path"], literal, (node.type, top) in INPUT_BINDINGS
            for k, v in value.items():
                if k not in ("path", "template"):
                    yield from walk(v, where + ptr(k), top or k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from walk(v, where + ptr(i), top)

    yield from walk(node.props, node.where + ptr("component", node.type), None)


def gather(messages: list[Any], prefix: str, issues: Issues) -> dict[str, Surface]:
    surfaces: dict[str, Surface] = {}
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or len(msg) != 1:
            continue
        (kind, body), = msg.items()
        if not isinstance(body, dict) or not isinstance(body.get("surfaceId"), str):
            continue
        sid, where = body["surfaceId"], prefix + ptr(i, kind)
        if kind == "deleteSurface":
            surfaces.pop(sid, None)
            continue
        surface = surfaces.setdefault(sid, Surface(sid, where))
        if kind == "beginRendering" and isinstance(body.get("root"), str):
            surface.root = (body["root"], where + ptr("root"))
        if kind == "surfaceUpdate":
            add_components(surface, body.get("components"), where, issues)
    return surfaces


def add_components(surface: Surface, components: Any, where: str, issues: Issues) -> None:
    seen: dict[str, int] = {}
    for j, entry in enumerate(components if isinstance(components, list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        cid, at = entry["id"], where + ptr("components", j)
        if cid in seen:
            issues.error(at + "/id", f"duplicate component id {cid!r} (first at components/{seen[cid]})")
            continue
        seen[cid] = j
        comp = entry.get("component")
        if isinstance(comp, dict) and len(comp) == 1:
            (ctype, props), = comp.items()
            props = props if isinstance(props, dict) else {}
            # A later surfaceUpdate may replace a component by id: that is an update, not a clash.
            surface.nodes[cid] = Node(cid, ctype, props, at, "weight" in entry)


def find_cycles(surface: Surface, issues: Issues) -> set[tuple[str, str]]:
    """Report each cycle once, at the reference that closes it; return those back edges.
    The walk starts at the root, so the reported edge is the one pointing back up the tree."""
    nodes, color, back = surface.nodes, {}, set()
    first = [surface.root[0]] if surface.root and surface.root[0] in nodes else []
    for start in first + list(nodes):
        if start in color:
            continue
        color[start], path = 1, [start]
        stack = [(start, iter(list(child_refs(nodes[start]))))]
        while stack:
            nid, refs = stack[-1]
            nxt = next(refs, None)
            if nxt is None:
                color[nid] = 2
                stack.pop()
                path.pop()
                continue
            where, cid, _ = nxt
            if cid not in nodes:
                continue
            if color.get(cid) == 1:
                cycle = " -> ".join(path[path.index(cid):] + [cid])
                issues.error(where, f"reference to {cid!r} closes a cycle: {cycle}")
                back.add((nid, where))
            elif cid not in color:
                color[cid] = 1
                path.append(cid)
                stack.append((cid, iter(list(child_refs(nodes[cid])))))
    return back


def check_surface(surface: Surface, model: dict[str, Any], issues: Issues, max_depth: int,
                  require_begin: bool) -> None:
    nodes = surface.nodes
    for node in nodes.values():
        for where, cid, _ in child_refs(node):
            if cid not in nodes:
                issues.error(where, f"unknown component id {cid!r} in surface {surface.sid!r}")
    back = find_cycles(surface, issues)
    if surface.root is None:
        if nodes and require_begin:
            issues.error(surface.where, f"surface {surface.sid!r} has no beginRendering message")
        return
    root, root_at = surface.root
    if root not in nodes:
        issues.error(root_at, f"root {root!r} is not a component of surface {surface.sid!r}")
        return
    visits = walk_tree(surface, model, back, issues, max_depth)
    check_weights(surface, visits, issues)
    check_bindings(surface, model, visits, issues)
    reached = {nid for nid, _ in visits}
    for nid, node in nodes.items():
        if nid not in reached:
            issues.warn(node.where, f"component {nid!r} is not reachable from root {root!r}")


def walk_tree(surface: Surface, model: dict[str, Any], back: set[tuple[str, str]], issues: Issues,
              max_depth: int) -> dict[tuple[str, str], set[str]]:
    """Visit the tree from the root: (id, data context) -> parent types. Templates descend into
    their first item so relative paths inside them can be checked."""
    nodes, (root, root_at) = surface.nodes, surface.root
    visits: dict[tuple[str, str], set[str]] = {(root, "/"): set()}
    stack, too_deep = [(root, "/", 1)], False
    while stack:
        nid, ctx, depth = stack.pop()
        node = nodes[nid]
        for where, cid, binding in child_refs(node):
            if cid not in nodes or (nid, where) in back:
                continue
            child_ctx = ctx
            if binding is not None:
                child_ctx = template_context(node, where, ctx, binding, model, issues)
                if child_ctx is None:
                    continue
            if depth + 1 > max_depth:
                too_deep = True
                continue
            key = (cid, child_ctx)
            first = key not in visits
            visits.setdefault(key, set()).add(node.type)
            if first:
                stack.append((cid, child_ctx, depth + 1))
    if too_deep:
        issues.error(root_at, f"component tree is deeper than {max_depth} levels")
    return visits


def template_context(node: Node, where: str, ctx: str, binding: str, model: dict[str, Any],
                     issues: Issues) -> str | None:
    at = where.rsplit("/", 1)[0] + "/dataBinding"
    path = join_path(ctx, binding)
    value = get_path(model, path)
    if value is MISSING:
        issues.error(at, f"template data binding {binding!r} does not resolve in the data model")
        return None
    items = template_items(value)
    if not isinstance(value, (dict, list)):
        issues.error(at, f"template data binding {binding!r} is not a map or list")
        return None
    # An empty collection renders nothing; there is no item to check relative paths against.
    return join_path(path, escape_key(items[0][0])) if items else None


def check_weights(surface: Surface, visits: dict[tuple[str, str], set[str]], issues: Issues) -> None:
    parents: dict[str, set[str]] = {}
    for (nid, _), types in visits.items():
        parents.setdefault(nid, set()).update(types)
    for nid, types in parents.items():
        node = surface.nodes[nid]
        if node.weight and not types & CONTAINERS_WITH_WEIGHT:
            issues.error(node.where + "/weight", f"'weight' is only allowed on a direct child of a Row or Column")


def check_bindings(surface: Surface, model: dict[str, Any], visits: dict[tuple[str, str], set[str]],
                   issues: Issues) -> None:
    found = []
    for (nid, ctx) in visits:
        for where, path, literal, is_input in bindings(surface.nodes[nid]):
            found.append((where, join_path(ctx, path), path, literal, is_input))
    writable = {resolved for _, resolved, _, _, is_input in found if is_input}
    reported = set()
    for where, resolved, path, literal, is_input in found:
        if is_input or literal or where in reported:
            continue
        value = get_path(model, resolved)
        if value is MISSING and resolved not in writable:
            reported.add(where)
            issues.error(where, f"path {path!r} does not resolve in the data model of surface {surface.sid!r}")
        elif isinstance(value, (dict, list)) and not where.endswith("/selections/path"):
            reported.add(where)
            issues.error(where, f"path {path!r} resolves to a {type(value).__name__}, expected a value")


def check(messages: list[Any], prefix: str = "", *, max_depth: int = 32,
          require_begin_rendering: bool = True) -> Issues:
    issues = Issues()
    surfaces = gather(messages, prefix, issues)
    models = build_models(messages)
    for sid, surface in surfaces.items():
        check_surface(surface, models.get(sid, {}), issues, max_depth, require_begin_rendering)
    return issues
