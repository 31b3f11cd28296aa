"""A small builder for A2UI v0.8 cards, used by the task generators for gold answers.

Knows the message and component shapes; knows nothing about tasks or grading. Each method adds
one component and returns its id, so a card reads top-down like its tree.
"""

from __future__ import annotations

from typing import Any


def lit(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"literalBoolean": value}
    if isinstance(value, (int, float)):
        return {"literalNumber": value}
    return {"literalString": str(value)}


def at(path: str) -> dict[str, str]:
    return {"path": path}


def bound(value: Any) -> dict[str, Any]:
    """A path if `value` starts with '/' or '@' (relative: '@title' -> 'title'), else a literal."""
    if isinstance(value, str) and value[:1] == "/":
        return at(value)
    if isinstance(value, str) and value[:1] == "@":
        return at(value[1:])
    return lit(value)


def entries(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            out.append({"key": key, "valueBoolean": value})
        elif isinstance(value, (int, float)):
            out.append({"key": key, "valueNumber": value})
        elif isinstance(value, dict):
            out.append({"key": key, "valueMap": entries(value)})
        else:
            out.append({"key": key, "valueString": str(value)})
    return out


class Card:
    def __init__(self, surface_id: str):
        self.sid = surface_id
        self.components: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []

    def add(self, cid: str, ctype: str, **props: Any) -> str:
        self.components.append({"id": cid, "component": {ctype: props}})
        return cid

    def data(self, values: dict[str, Any], path: str | None = None) -> None:
        body: dict[str, Any] = {"surfaceId": self.sid, "contents": entries(values)}
        if path:
            body["path"] = path
        self.updates.append({"dataModelUpdate": body})

    def items(self, path: str, rows: list[dict[str, Any]]) -> None:
        """A list for a template: one update per row at `path/<i>` (valueMap cannot nest)."""
        for i, row in enumerate(rows):
            self.data(row, f"{path}/{i}")

    def text(self, cid: str, value: Any, hint: str | None = None) -> str:
        return self.add(cid, "Text", text=bound(value), **({"usageHint": hint} if hint else {}))

    def column(self, cid: str, *children: str, **style: Any) -> str:
        return self.add(cid, "Column", children={"explicitList": list(children)}, **style)

    def row(self, cid: str, *children: str, **style: Any) -> str:
        return self.add(cid, "Row", children={"explicitList": list(children)}, **style)

    def list(self, cid: str, template: str, binding: str, **style: Any) -> str:
        return self.add(cid, "List", children={"template": {"componentId": template, "dataBinding": binding}}, **style)

    def card(self, cid: str, child: str) -> str:
        return self.add(cid, "Card", child=child)

    def button(self, cid: str, label: str, action: str, context: dict[str, Any] | None = None,
               primary: bool = False) -> str:
        self.text(cid + "-label", label)
        act: dict[str, Any] = {"name": action}
        if context:
            act["context"] = [{"key": k, "value": bound(v)} for k, v in context.items()]
        return self.add(cid, "Button", child=cid + "-label", action=act, **({"primary": True} if primary else {}))

    def messages(self, root: str) -> list[dict[str, Any]]:
        return [{"surfaceUpdate": {"surfaceId": self.sid, "components": self.components}},
                *self.updates, {"beginRendering": {"surfaceId": self.sid, "root": root}}]
