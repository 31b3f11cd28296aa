"""What a substrate tool is: a name, a JSON schema, a read/write tag and a handler over SQLite.

Handlers receive a `ToolContext` (the connection, the acting user, the simulated today) and
arguments that already passed schema validation; they return a JSON-able dict or raise
`ToolError`, which the episode turns into an `{"error": {...}}` result. Handlers run only
parameterized SQL.

This module knows nothing about transactions, confirmation, logs or which tools exist: those
live in `episode.py` and `tools.py`.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# Error types a model can see in a tool result; stable strings, part of the training format.
ERROR_TYPES = (
    "unknown_tool", "invalid_json", "invalid_arguments", "too_large", "not_found",
    "permission_denied", "policy_refused", "unknown_confirmation", "internal",
)


class ToolError(Exception):
    """A refusal or failure a model should read: becomes `{"error": {"type", "message"}}`."""

    def __init__(self, type_: str, message: str):
        assert type_ in ERROR_TYPES, type_
        super().__init__(message)
        self.type = type_
        self.message = message

    def result(self) -> dict:
        return error_result(self.type, self.message)


def error_result(type_: str, message: str) -> dict:
    return {"error": {"type": type_, "message": message}}


@dataclass(frozen=True)
class ToolContext:
    conn: sqlite3.Connection
    actor: str
    today: dt.date


Handler = Callable[[ToolContext, dict], dict]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict  # JSON Schema of the arguments object
    kind: Literal["read", "write"]
    handler: Handler
    destructive: bool = False  # a write that changes or removes existing rows

    def openai(self) -> dict:
        """The tool in OpenAI function-calling format."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": self.parameters}}

    def mcp_annotations(self) -> dict:
        """MCP tool annotations (camelCase, as on the wire)."""
        if self.kind == "read":
            return {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                    "openWorldHint": False}
        return {"readOnlyHint": False, "destructiveHint": self.destructive,
                "idempotentHint": False, "openWorldHint": False}


# ---- schema helpers: every object schema is closed, every string bounded -------------------

DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$", "description": "YYYY-MM-DD"}
DATETIME = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$",
            "description": "local time, YYYY-MM-DDTHH:MM"}
ID = {"type": "integer", "minimum": 1}


def text(max_len: int = 200, desc: str | None = None, min_len: int = 0) -> dict:
    s: dict[str, Any] = {"type": "string", "maxLength": max_len}
    if min_len:
        s["minLength"] = min_len
    if desc:
        s["description"] = desc
    return s


def obj(properties: dict | None = None, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties or {}, "required": list(required),
            "additionalProperties": False}


def described(schema: dict, desc: str) -> dict:
    return {**schema, "description": desc}


# ---- helpers shared by the domain handlers ----------------------------------------------

def parse_date(value: str, field: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ToolError("invalid_arguments", f"{field}: {value!r} is not a real date (YYYY-MM-DD)")


def parse_datetime(value: str, field: str) -> dt.datetime:
    try:
        return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M")
    except ValueError:
        raise ToolError("invalid_arguments", f"{field}: {value!r} is not a real time (YYYY-MM-DDTHH:MM)")


def fetch_one(ctx: ToolContext, table: str, row_id: int, noun: str) -> sqlite3.Row:
    # `table` is always a literal from the handler modules, never user input.
    row = ctx.conn.execute(f"SELECT * FROM {table} WHERE id = ?", (int(row_id),)).fetchone()
    if row is None:
        raise ToolError("not_found", f"no {noun} with id {int(row_id)}")
    return row


def require_owner(ctx: ToolContext, row: sqlite3.Row, noun: str, owner_field: str = "owner") -> None:
    if row[owner_field] != ctx.actor:
        raise ToolError("permission_denied",
                        f"{noun} {row['id']} belongs to {row[owner_field]}; "
                        f"{ctx.actor} may only change their own {noun}s")


def delete_owned(ctx: ToolContext, table: str, row_id: int, noun: str, to_dict) -> dict:
    """Delete one row the actor owns: {"deleted": to_dict(row)}; not_found / permission_denied
    otherwise. `table` is always a literal from the handler modules."""
    row = fetch_one(ctx, table, row_id, noun)
    require_owner(ctx, row, noun)
    ctx.conn.execute(f"DELETE FROM {table} WHERE id = ?", (row["id"],))
    return {"deleted": to_dict(row)}


def contains(column: str) -> str:
    """A case-insensitive substring test that needs no LIKE escaping (casefold: see state.connect)."""
    return f"instr(casefold({column}), casefold(?)) > 0"
