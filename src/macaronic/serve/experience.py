"""Served experience: what each turn did, recorded opt-in into a local SQLite file (`macaronic serve
--experience FILE`) for the loop (DESIGN "Served experience"). Off unless asked; nothing is sent anywhere.

- `turns`: one row per answered turn, keyed by the response id the client got (chatcmpl- / resp_):
  the pair, the route (adapter, role, policy, confidence, reason, probabilities), the grammar the
  reply decoded under and what the request offered (tools, tool_choice, response_format), what the
  harness closed or cut (a GenUI card's repairs and closing fixes, a repetition loop, a tool call
  cut by the token cap), the tool error, the request as received and the reply.
- `events`: what the client did next, read off a later request's history against the recorded
  turns: `tool_results` (the reply's tool calls came back answered; `errors` counts results that
  report an error), `continued` (a new user message after the reply), `regenerate` (the same request
  again), `edit` (the same history with another last user message). Each names the turn it is
  about and the response id of the request that showed it.
- `feedback`: what the user said of a reply (POST /v1/feedback: up / down, the specialist that
  should have answered, free text), keyed by response id; `export` joins it to its turn.

Append-only: a later fact is a new row, never an update; only `forget` deletes (then vacuums, so
the bytes leave the file). Every write runs on one thread in the order the server submitted it, so
a follow-up always finds the turn before it and the event loop never waits on the file.

Limits: a regenerate or an edit is recognised within WINDOW_S of the turn it repeats; an edit of a
conversation's first message looks like a new conversation and is not reported. Knows the
harness's TurnResult and message shapes; nothing about HTTP.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from macaronic.migrations import migrate
from macaronic.serve import store_check, views

log = logging.getLogger("macaronic.serve")
WINDOW_S = 3600.0  # a request repeating a turn older than this is a new conversation, not a regenerate
RESULT_CHARS = 2000  # a tool result is kept up to this many characters in its event

MIGRATIONS: list[str] = [
    """CREATE TABLE turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, response_id TEXT NOT NULL,
        endpoint TEXT, model TEXT, pair_id TEXT,
        adapter TEXT, role TEXT, policy TEXT, confidence REAL, reason TEXT, route_ms REAL, probs TEXT,
        grammar TEXT, offered TEXT, closed TEXT, tool_error TEXT, finish_reason TEXT, usage TEXT,
        request TEXT NOT NULL, reply TEXT NOT NULL,
        request_hash TEXT NOT NULL, prefix_hash TEXT, last_role TEXT, reply_key TEXT);
    CREATE INDEX turns_response ON turns(response_id);
    CREATE INDEX turns_request ON turns(request_hash);
    CREATE INDEX turns_prefix ON turns(prefix_hash);
    CREATE INDEX turns_reply ON turns(reply_key);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, turn_id INTEGER NOT NULL,
        response_id TEXT NOT NULL, kind TEXT NOT NULL, by_response_id TEXT, detail TEXT);
    CREATE INDEX events_turn ON events(turn_id);
    CREATE TABLE feedback (
        id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, response_id TEXT NOT NULL,
        rating TEXT, expected_specialist TEXT, comment TEXT);
    CREATE INDEX feedback_response ON feedback(response_id)""",
]
TURN_COLS = ("id", "created", "response_id", "endpoint", "model", "pair_id", "adapter", "role", "policy",
             "confidence", "reason", "route_ms", "probs", "grammar", "offered", "closed", "tool_error",
             "finish_reason", "usage", "request", "reply", "request_hash", "prefix_hash", "last_role", "reply_key")
EVENT_COLS = ("id", "created", "turn_id", "response_id", "kind", "by_response_id", "detail")
FEEDBACK_COLS = ("id", "created", "response_id", "rating", "expected_specialist", "comment")
TABLES = {"turns": set(TURN_COLS), "events": set(EVENT_COLS), "feedback": set(FEEDBACK_COLS),
          "_migrations": {"version", "applied"}}
JSON_COLS = {"probs", "offered", "closed", "usage", "request", "reply", "detail"}


class ExperienceError(RuntimeError):
    """The experience file cannot be used; the message is one line that says why."""


def plain(messages: list[dict]) -> list[dict]:
    """Messages as the client meant them: role, content, calls, call ids; no harness annotations."""
    keep = ("role", "content", "tool_calls", "tool_call_id")
    return [{k: m[k] for k in keep if m.get(k) not in (None, [])} for m in messages]


def history_hash(messages: list[dict]) -> str:
    """Identity of a (normalized) history as a client resends it: roles, stripped texts, call names
    and arguments; not call ids, not annotations."""
    canon = [[m["role"], (m.get("content") or "").strip(),
              [[c["function"]["name"], c["function"]["arguments"]] for c in m.get("tool_calls") or []]]
             for m in messages]
    return hashlib.sha256(json.dumps(canon, ensure_ascii=False).encode()).hexdigest()


def reports_error(content: str) -> bool:
    """A tool result that says it failed: a JSON object with an `error` key (the substrate's shape)."""
    try:
        obj = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return False
    return isinstance(obj, dict) and obj.get("error") not in (None, "", False)


def closed_of(result) -> dict:
    """What the harness closed, repaired or cut in a reply (empty: nothing)."""
    out: dict[str, Any] = {}
    g = result.genui
    if g is not None:
        if g.get("repaired"):
            out["genui_repaired"] = g["repaired"]
        if g.get("closed") is not None:
            out["genui_closed"] = g["closed"]
            out["genui_raw_errors"] = g.get("raw_errors", [])
        elif not g.get("valid", True):
            out["genui_invalid"] = g.get("errors", [])
    if result.loop_period is not None:
        out["loop_cut_period_tokens"] = result.loop_period
    if result.tool_error and "max_tokens" in result.tool_error:
        out["tool_call_cut"] = True
    return out


class Experience:
    """The experience file. Every method submits its work to one writer thread and returns a Future."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists():
            found = store_check.problems(self.path, TABLES, len(MIGRATIONS))
            if found:
                raise ExperienceError(f"experience file {self.path} is damaged ({found[0]}); move it aside "
                                      f"or record into another --experience FILE")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="macaronic-experience")
        self._db: sqlite3.Connection | None = None
        self._pool.submit(self._open).result()

    def _open(self) -> None:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        # a power cut may lose the last turns; a fsync per turn would cost more than they are worth
        db.execute("PRAGMA synchronous=NORMAL")
        try:
            migrate(db, MIGRATIONS)
        except sqlite3.DatabaseError as e:
            db.close()
            raise ExperienceError(f"experience file {self.path}: a migration failed ({e})") from None
        self._db = db

    def _submit(self, fn, *args) -> Future:
        fut = self._pool.submit(fn, *args)
        fut.add_done_callback(lambda f: f.exception() and log.error("experience %s: %s", self.path, f.exception()))
        return fut

    # ---- what the server submits ----

    def observe(self, messages: list[dict], by_response_id: str) -> Future:
        """Read a new request's history against the recorded turns; record what it shows of them."""
        return self._submit(self._observe, messages, by_response_id, time.time())

    def record(self, response_id: str, endpoint: str, messages: list[dict], result, model: str | None = None,
               offered: dict | None = None) -> Future:
        """One answered turn: `messages` the request's conversation, `result` the harness's TurnResult."""
        return self._submit(self._record, response_id, endpoint, messages, result, model, offered or {}, time.time())

    def feedback(self, response_id: str, rating: str | None, expected_specialist: str | None,
                 comment: str | None) -> Future:
        """A user's verdict on a reply; the Future's value says whether a recorded turn has that id."""
        return self._submit(self._feedback, response_id, rating, expected_specialist, comment, time.time())

    def flush(self) -> None:
        """Wait until everything submitted so far is written."""
        self._pool.submit(lambda: None).result()

    def close(self) -> None:
        self._pool.submit(self._close).result()
        self._pool.shutdown(wait=True)

    # ---- on the writer thread ----

    def _close(self) -> None:
        if self._db is not None:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
            self._db = None

    def _record(self, response_id, endpoint, messages, result, model, offered, now) -> None:
        msgs = views.normalize_messages(messages)
        r = result.route
        reply = {"content": result.content, **({"tool_calls": result.tool_calls} if result.tool_calls else {})}
        prefix = history_hash(msgs[:-1]) if msgs[-1]["role"] == "user" else None
        row = (now, response_id, endpoint, model, result.pair_id, r.adapter, r.specialist, r.policy,
               float(r.confidence), r.reason, float(r.ms), json.dumps(r.probs), result.constrained,
               json.dumps(offered, ensure_ascii=False), json.dumps(closed_of(result), ensure_ascii=False),
               result.tool_error, result.finish_reason, json.dumps(result.usage),
               json.dumps(plain(msgs), ensure_ascii=False), json.dumps(reply, ensure_ascii=False),
               history_hash(msgs), prefix, msgs[-1]["role"], result.key or None)
        self._db.execute(f"INSERT INTO turns ({', '.join(TURN_COLS[1:])}) VALUES ({', '.join('?' * len(row))})", row)
        self._db.commit()

    def _latest(self, where: str, args: tuple) -> tuple[int, str] | None:
        return self._db.execute(f"SELECT id, response_id FROM turns WHERE {where} ORDER BY id DESC LIMIT 1",
                                args).fetchone()

    def _event(self, turn: tuple[int, str], kind: str, by: str, detail: dict, now: float, once: bool = False):
        if once and self._db.execute("SELECT 1 FROM events WHERE turn_id = ? AND kind = ?", (turn[0], kind)).fetchone():
            return  # a regenerate or an edit resends history whose follow-ups were already recorded
        self._db.execute("INSERT INTO events (created, turn_id, response_id, kind, by_response_id, detail) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (now, *turn, kind, by, json.dumps(detail, ensure_ascii=False)))

    def _observe(self, messages, by, now) -> None:
        try:
            msgs = views.normalize_messages(messages)
        except ValueError:
            return
        h, recent = history_hash(msgs), now - WINDOW_S
        again = self._latest("request_hash = ? AND created >= ?", (h, recent))
        if again is not None:
            self._event(again, "regenerate", by, {}, now)
        elif msgs[-1]["role"] == "user" and any(m["role"] == "assistant" for m in msgs[:-1]):
            edited = self._latest("prefix_hash = ? AND last_role = 'user' AND request_hash != ? AND created >= ?",
                                  (history_hash(msgs[:-1]), h, recent))
            if edited is not None:
                self._event(edited, "edit", by, {"content": msgs[-1]["content"]}, now)
        last = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i]["role"] == "assistant"), None)
        if last is not None and last + 1 < len(msgs):
            m = msgs[last]
            key = views.content_key(views.previous_user_text(msgs, last), m["content"], m.get("tool_calls"))
            turn = self._latest("reply_key = ?", (key,))
            after = msgs[last + 1:]
            if turn is not None and after[0]["role"] == "tool":
                results = [{"tool_call_id": t.get("tool_call_id"), "content": t["content"][:RESULT_CHARS],
                            "error": reports_error(t["content"])} for t in after if t["role"] == "tool"]
                self._event(turn, "tool_results", by, {"results": results,
                                                       "errors": sum(x["error"] for x in results)}, now, once=True)
            elif turn is not None and after[0]["role"] == "user":
                self._event(turn, "continued", by, {}, now, once=True)
        self._db.commit()

    def _feedback(self, response_id, rating, expected, comment, now) -> bool:
        self._db.execute("INSERT INTO feedback (created, response_id, rating, expected_specialist, comment) "
                         "VALUES (?, ?, ?, ?, ?)", (now, response_id, rating, expected, comment))
        self._db.commit()
        return self._db.execute("SELECT 1 FROM turns WHERE response_id = ?", (response_id,)).fetchone() is not None


# ---- reading and forgetting a file (the `macaronic experience` commands) ----

def _open_existing(path: str | Path, readonly: bool) -> sqlite3.Connection:
    path = Path(path)
    if not path.exists():
        raise ExperienceError(f"no experience file {path}")
    found = store_check.problems(path, TABLES, len(MIGRATIONS))
    if found:
        raise ExperienceError(f"experience file {path} is damaged ({found[0]})")
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) if readonly else sqlite3.connect(path)
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'turns'").fetchone():
        db.close()
        raise ExperienceError(f"{path} is not an experience file (no turns table)")
    return db


def _rows(db: sqlite3.Connection, table: str, cols: tuple[str, ...], order: str = "id") -> Iterator[dict]:
    for r in db.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}"):
        yield {k: (json.loads(v) if k in JSON_COLS and v is not None else v) for k, v in zip(cols, r)}


def records(path: str | Path) -> Iterator[dict]:
    """The file as records, oldest first: one per turn (with its `next` events and its `feedback`),
    then feedback on response ids that no recorded turn has."""
    db = _open_existing(path, readonly=True)
    try:
        events: dict[int, list[dict]] = {}
        for e in _rows(db, "events", EVENT_COLS):
            events.setdefault(e["turn_id"], []).append(
                {k: e[k] for k in ("created", "kind", "by_response_id", "detail")})
        feedback: dict[str, list[dict]] = {}
        for f in _rows(db, "feedback", FEEDBACK_COLS):
            feedback.setdefault(f["response_id"], []).append(
                {k: f[k] for k in ("created", "rating", "expected_specialist", "comment")})
        for t in _rows(db, "turns", TURN_COLS):
            route = {k: t.pop(k) for k in ("adapter", "role", "policy", "confidence", "reason", "route_ms", "probs")}
            tid = t.pop("id")
            for k in ("request_hash", "prefix_hash", "last_role", "reply_key"):
                t.pop(k)
            yield {"type": "turn", **t, "route": route, "next": events.get(tid, []),
                   "feedback": feedback.pop(t["response_id"], [])}
        for rid, rows in feedback.items():
            for f in rows:
                yield {"type": "feedback", "response_id": rid, **f}
    finally:
        db.close()


def export(path: str | Path, out: str | Path) -> int:
    """Write the file's records as JSON lines to `out`; the number of lines."""
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for rec in records(path):
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n


def forget(path: str | Path, before: float | None = None) -> dict[str, int]:
    """Delete what was recorded before `before` (seconds since the epoch; None: everything), then
    vacuum so the deleted rows leave the file. Rows deleted per table."""
    db = _open_existing(path, readonly=False)
    try:
        cut = float("inf") if before is None else before
        gone_turns = [r for (r,) in db.execute("SELECT id FROM turns WHERE created < ?", (cut,))]
        n = {"events": 0}
        with db:
            for i in range(0, len(gone_turns), 500):
                part = gone_turns[i:i + 500]
                n["events"] += db.execute(f"DELETE FROM events WHERE turn_id IN ({', '.join('?' * len(part))})",
                                          part).rowcount
            n["events"] += db.execute("DELETE FROM events WHERE created < ?", (cut,)).rowcount
            n["turns"] = db.execute("DELETE FROM turns WHERE created < ?", (cut,)).rowcount
            n["feedback"] = db.execute("DELETE FROM feedback WHERE created < ?", (cut,)).rowcount
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return n
    finally:
        db.close()
