"""An episode: one actor acting on one state through tools, with transactions, confirmation,
per-turn snapshots and an append-only action log; plus `Episodes`, a store of episodes by id.

Every call runs inside an SQLite SAVEPOINT and is rolled back on any error, so a call either
applies completely or leaves the state hash unchanged. Write tools named in the config wait for
`confirm(id)` before touching the state. The log records each operation with the state hash
before and after it, so `replay.py` can rebuild and check the same final state.

Knows nothing about tool-call text formats, tasks or grading.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from macaronic.substrate.state import StateSpec, copy_state, state_hash, today_of
from macaronic.substrate.toolbase import Tool, ToolContext, ToolError, error_result
from macaronic.substrate.tools import MAX_ARGUMENT_BYTES, TOOLS_BY_NAME, validate_call

MAX_SNAPSHOTS = 64
LOGGED_ARGUMENT_CHARS = 2048  # refused oversized arguments are logged as a stub, not verbatim


@dataclass(frozen=True)
class EpisodeConfig:
    confirm: frozenset[str] = frozenset()  # write tools that wait for confirm(id)
    confirm_all_writes: bool = False
    max_argument_bytes: int = MAX_ARGUMENT_BYTES
    max_log: int | None = None  # keep only the latest entries (a long-lived served state); None keeps all

    def needs_confirmation(self, tool: Tool) -> bool:
        return tool.kind == "write" and (self.confirm_all_writes or tool.name in self.confirm)


@dataclass(frozen=True)
class LogEntry:
    """One operation: op is call | confirm | reject | snapshot | undo."""

    seq: int
    op: str
    tool: str | None
    arguments: Any
    result: dict
    pre_hash: str
    post_hash: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> LogEntry:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


@dataclass
class _Pending:
    tool: str
    arguments: dict


@dataclass
class _Snapshot:
    conn: Any
    pending: dict[str, _Pending]


class Episode:
    """A live state plus the rules for changing it. Thread-safe: one call at a time."""

    def __init__(self, spec: StateSpec, *, actor: str | None = None,
                 config: EpisodeConfig | None = None, path: str = ":memory:",
                 episode_id: str | None = None, conn=None):
        self.id = episode_id or "ep-" + secrets.token_hex(6)
        self.spec = spec
        self.actor = actor or spec.actor
        self.config = config or EpisodeConfig()
        # `conn`: an existing state (a served substrate reopened from its file), else a new one
        self.conn = conn if conn is not None else spec.build(path)
        self.today = today_of(self.conn)
        self._log: list[LogEntry] = []
        self._pending: dict[str, _Pending] = {}
        self._snapshots: list[_Snapshot] = []
        self._confirm_counter = 0
        self._seq = 0
        self._lock = threading.RLock()
        self._hash = state_hash(self.conn)
        self.initial_hash = self._hash

    # ---- reading ---------------------------------------------------------------------

    @property
    def log(self) -> tuple[LogEntry, ...]:
        return tuple(self._log)

    def state_hash(self) -> str:
        return self._hash

    def pending(self) -> dict[str, dict]:
        return {k: {"tool": p.tool, "arguments": p.arguments} for k, p in self._pending.items()}

    def log_jsonl(self) -> str:
        return "".join(json.dumps(e.to_dict(), ensure_ascii=False, sort_keys=True) + "\n" for e in self._log)

    # ---- tool calls ------------------------------------------------------------------

    def call(self, name: str, arguments: Any = None) -> dict:
        """Run one tool call and return its result; errors come back as `{"error": ...}`."""
        with self._lock:
            pre = self._hash
            try:
                tool, args = validate_call(name, arguments, max_bytes=self.config.max_argument_bytes)
            except ToolError as e:
                return self._append("call", name, _loggable(arguments), e.result(), pre)
            if self.config.needs_confirmation(tool):
                # Dry-run first so a write the policy would refuse is refused now, not after the
                # user approved it; the preview is what a confirm card shows.
                preview = self._execute(tool, args, commit=False)
                held = preview if "error" in preview else self._hold(tool, args, preview)
                return self._append("call", tool.name, args, held, pre)
            return self._append("call", tool.name, args, self._execute(tool, args), pre)

    def call_openai(self, tool_call: dict) -> dict:
        """Run an OpenAI-format tool call `{"function": {"name", "arguments"}}`."""
        fn = tool_call.get("function", {}) if isinstance(tool_call, dict) else {}
        return self.call(fn.get("name"), fn.get("arguments"))

    def confirm(self, confirmation_id: str) -> dict:
        """Approve a pending write: it runs now, under the policy as of now."""
        with self._lock:
            pre = self._hash
            p = self._pending.pop(confirmation_id, None) if isinstance(confirmation_id, str) else None
            if p is None:
                return self._append("confirm", None, {"id": confirmation_id},
                                    _unknown_confirmation(confirmation_id), pre)
            result = self._execute(TOOLS_BY_NAME[p.tool], p.arguments)
            return self._append("confirm", p.tool, {"id": confirmation_id}, result, pre)

    def reject(self, confirmation_id: str) -> dict:
        """Drop a pending write; nothing is written."""
        with self._lock:
            pre = self._hash
            p = self._pending.pop(confirmation_id, None) if isinstance(confirmation_id, str) else None
            if p is None:
                return self._append("reject", None, {"id": confirmation_id},
                                    _unknown_confirmation(confirmation_id), pre)
            result = {"rejected": {"id": confirmation_id, "tool": p.tool, "arguments": p.arguments}}
            return self._append("reject", p.tool, {"id": confirmation_id}, result, pre)

    # ---- snapshots (paired: snapshot pushes, undo pops) --------------------------------

    def snapshot(self) -> dict:
        """Remember the current state (call at the start of each user turn)."""
        with self._lock:
            pre = self._hash
            if len(self._snapshots) >= MAX_SNAPSHOTS:
                self._snapshots.pop(0)  # keep memory bounded; the oldest turn can no longer be undone
            self._snapshots.append(_Snapshot(copy_state(self.conn), dict(self._pending)))
            result = {"snapshot": {"depth": len(self._snapshots), "state_hash": pre}}
            return self._append("snapshot", None, None, result, pre)

    def undo(self) -> dict:
        """Restore the latest snapshot (state and pending confirmations) and drop it."""
        with self._lock:
            pre = self._hash
            if not self._snapshots:
                return self._append("undo", None, None,
                                    error_result("not_found", "no snapshot to undo to"), pre)
            snap = self._snapshots.pop()
            snap.conn.backup(self.conn)
            snap.conn.close()
            self._pending = snap.pending
            self._hash = state_hash(self.conn)
            # No log positions in results: a replay skips refused calls, so positions differ.
            result = {"undone": {"depth": len(self._snapshots), "state_hash": self._hash}}
            return self._append("undo", None, None, result, pre, rehash=False)

    def close(self) -> None:
        with self._lock:
            for s in self._snapshots:
                s.conn.close()
            self._snapshots.clear()
            self.conn.close()

    # ---- internals -------------------------------------------------------------------

    def _hold(self, tool: Tool, args: dict, preview: dict) -> dict:
        self._confirm_counter += 1
        cid = f"confirm-{self._confirm_counter}"
        self._pending[cid] = _Pending(tool.name, args)
        return {"pending_confirmation": {
            "id": cid, "tool": tool.name, "arguments": args, "preview": preview,
            "message": f"{tool.name} needs the user's confirmation; nothing has been changed yet"}}

    def _execute(self, tool: Tool, args: dict, commit: bool = True) -> dict:
        ctx = ToolContext(self.conn, self.actor, self.today)
        read_only = tool.kind == "read"
        if read_only:
            # A read tool that tried to write would be a bug; SQLite refuses it outright.
            self.conn.execute("PRAGMA query_only = ON")
        self.conn.execute("SAVEPOINT tool_call")
        try:
            result = tool.handler(ctx, args)
            json.dumps(result)  # a result the model cannot read is a bug: roll back
        except ToolError as e:
            self._rollback()
            return e.result()
        except Exception as e:  # noqa: BLE001 - no exception may escape to the model loop
            self._rollback()
            return error_result("internal", f"{tool.name} failed: {type(e).__name__}: {e}")
        finally:
            if read_only:
                self.conn.execute("PRAGMA query_only = OFF")
        if commit:
            self.conn.execute("RELEASE tool_call")
        else:
            self._rollback()
        return result

    def _rollback(self) -> None:
        self.conn.execute("ROLLBACK TO tool_call")
        self.conn.execute("RELEASE tool_call")

    def _append(self, op: str, tool, arguments, result: dict, pre: str, rehash: bool = True) -> dict:
        if rehash and "error" not in result and op in ("call", "confirm"):
            self._hash = state_hash(self.conn)
        self._log.append(LogEntry(self._seq, op, tool, arguments, result, pre, self._hash))
        self._seq += 1
        if self.config.max_log is not None and len(self._log) > self.config.max_log:
            del self._log[:-self.config.max_log]
        return result


def _unknown_confirmation(cid) -> dict:
    return error_result("unknown_confirmation", f"no pending confirmation with id {str(cid)[:80]!r}")


def _loggable(arguments: Any) -> Any:
    """Arguments as logged for a refused call: verbatim unless huge or not JSON."""
    try:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return {"$unserializable": type(arguments).__name__}
    if len(text) > LOGGED_ARGUMENT_CHARS:
        return {"$truncated": text[:200], "$bytes": len(text.encode())}
    return arguments


@dataclass
class Episodes:
    """Episodes addressed by id, so a stateless caller (MCP, HTTP) can name its state."""

    max_open: int = 256
    default_config: EpisodeConfig = field(default_factory=EpisodeConfig)
    _open: dict[str, Episode] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def create(self, spec: StateSpec | int, *, actor: str | None = None,
               config: EpisodeConfig | None = None, episode_id: str | None = None) -> Episode:
        spec = spec if isinstance(spec, StateSpec) else StateSpec(seed=int(spec))
        with self._lock:
            if len(self._open) >= self.max_open:
                raise RuntimeError(f"too many open episodes ({self.max_open}); close some first")
            if episode_id is not None and episode_id in self._open:
                raise ValueError(f"episode {episode_id!r} already exists")
            ep = Episode(spec, actor=actor, config=config or self.default_config, episode_id=episode_id)
            self._open[ep.id] = ep
            return ep

    def get(self, episode_id: str) -> Episode:
        with self._lock:
            if episode_id not in self._open:
                raise KeyError(f"no open episode {str(episode_id)[:80]!r}")
            return self._open[episode_id]

    def close(self, episode_id: str) -> bool:
        with self._lock:
            ep = self._open.pop(episode_id, None)
        if ep is not None:
            ep.close()
        return ep is not None

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._open)

    def __contains__(self, episode_id: str) -> bool:
        return episode_id in self._open

    def __len__(self) -> int:
        return len(self._open)
