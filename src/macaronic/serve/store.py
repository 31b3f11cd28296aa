"""SQLite state of the server: stored Responses and the segment memory.

- `responses`: one row per Responses API response, holding the full conversation after it (each
  assistant message annotated with the adapter that produced it and its hidden summary), so a
  request with `previous_response_id` continues exactly, also after a restart.
- `segments`: content key (views.content_key) -> adapter, specialist role, hidden summary and
  the raw generated text. Chat Completions clients resend history without saying which adapter
  produced each assistant message; the harness looks it up here. Rows past `max_segments` are
  pruned oldest first (a miss only means the message counts as foreign: shown verbatim).
- `feedback`: what a user said of a reply (POST /v1/feedback: up/down, the specialist that should
  have answered, a comment), keyed by the reply's response id. Append-only: a changed verdict is a
  new row (the web chat sends its whole verdict each time), so the latest row per response id is
  what the user now thinks. Kept for the loop (DESIGN "Served experience").

One connection per thread, WAL mode, writes serialised by a lock. Knows nothing about HTTP.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from macaronic.migrations import migrate

# The schema evolves by appending to MIGRATIONS (ordered, applied once each: macaronic.migrations).
MIGRATIONS: list[str] = [
    # 1: responses and segments (IF NOT EXISTS: files written before migrations adopt it as is)
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY, created REAL NOT NULL, previous_id TEXT, model TEXT,
        messages TEXT NOT NULL, response TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS segments (
        key TEXT PRIMARY KEY, adapter TEXT, specialist TEXT, summary TEXT, raw TEXT, created REAL NOT NULL);
    CREATE INDEX IF NOT EXISTS segments_created ON segments(created)""",
    # 2: user feedback on replies (the web chat's up/down and "wrong specialist")
    """CREATE TABLE feedback (
        id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, response_id TEXT NOT NULL,
        rating TEXT, expected_specialist TEXT, comment TEXT);
    CREATE INDEX feedback_response ON feedback(response_id)""",
]


class Store:
    def __init__(self, path: str | Path = ":memory:", max_segments: int = 200_000):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.max_segments = max_segments
        self._local = threading.local()
        self._lock = threading.Lock()
        self._shared = sqlite3.connect(self.path, check_same_thread=False) if self.path == ":memory:" else None
        with self._lock:
            db = self._db()
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
            db.commit()
            self.version = migrate(db, MIGRATIONS)

    def _db(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = sqlite3.connect(self.path, timeout=30)
        return db

    # ---- segments ----

    def remember(self, key: str, adapter: str | None, specialist: str | None, summary: str | None = None,
                 raw: str | None = None) -> None:
        with self._lock:
            db = self._db()
            db.execute("INSERT OR REPLACE INTO segments VALUES (?, ?, ?, ?, ?, ?)",
                       (key, adapter, specialist, summary, raw, time.time()))
            (n,) = db.execute("SELECT count(*) FROM segments").fetchone()
            if n > self.max_segments:
                db.execute("DELETE FROM segments WHERE key IN (SELECT key FROM segments ORDER BY created LIMIT ?)",
                           (n - self.max_segments,))
            db.commit()

    def set_summary(self, key: str, summary: str) -> None:
        with self._lock:
            db = self._db()
            db.execute("UPDATE segments SET summary = ? WHERE key = ?", (summary, key))
            db.commit()

    def recall(self, key: str) -> dict | None:
        row = self._db().execute("SELECT adapter, specialist, summary, raw FROM segments WHERE key = ?",
                                 (key,)).fetchone()
        if row is None:
            return None
        return {k: v for k, v in zip(("adapter", "specialist", "summary", "raw"), row) if v is not None}

    # ---- responses ----

    def save_response(self, response: dict, messages: list[dict], previous_id: str | None) -> None:
        with self._lock:
            db = self._db()
            db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
                       (response["id"], time.time(), previous_id, response.get("model"),
                        json.dumps(messages, ensure_ascii=False), json.dumps(response, ensure_ascii=False)))
            db.commit()

    def load_response(self, rid: str) -> tuple[dict, list[dict]] | None:
        row = self._db().execute("SELECT response, messages FROM responses WHERE id = ?", (rid,)).fetchone()
        return None if row is None else (json.loads(row[0]), json.loads(row[1]))

    def delete_response(self, rid: str) -> bool:
        with self._lock:
            db = self._db()
            n = db.execute("DELETE FROM responses WHERE id = ?", (rid,)).rowcount
            db.commit()
        return n > 0

    # ---- feedback ----

    def record_feedback(self, response_id: str, rating: str | None = None, expected_specialist: str | None = None,
                        comment: str | None = None) -> dict:
        with self._lock:
            db = self._db()
            created = time.time()
            cur = db.execute("INSERT INTO feedback (created, response_id, rating, expected_specialist, comment) "
                             "VALUES (?, ?, ?, ?, ?)", (created, response_id, rating, expected_specialist, comment))
            db.commit()
        return {"id": cur.lastrowid, "created": created, "response_id": response_id, "rating": rating,
                "expected_specialist": expected_specialist, "comment": comment}

    def feedback(self, response_id: str | None = None) -> list[dict]:
        """Feedback rows, oldest first; only those on `response_id` when given."""
        keys = ("id", "created", "response_id", "rating", "expected_specialist", "comment")
        where, args = (" WHERE response_id = ?", (response_id,)) if response_id else ("", ())
        rows = self._db().execute(f"SELECT {', '.join(keys)} FROM feedback{where} ORDER BY id", args).fetchall()
        return [dict(zip(keys, r)) for r in rows]

    def close(self) -> None:
        db = self._shared or getattr(self._local, "db", None)
        if db is not None:
            db.close()
