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

Every row carries a checksum of its other columns (`sum`). Opening a file checks it first
(store_check.py: header, the `-wal` frames SQLite would silently drop, `quick_check`, schema, row
checksums) and refuses a damaged one with `StoreDamaged`, one line naming the way out; a row whose
checksum fails when read raises it too. `close` checkpoints the log into the main file
(`wal_checkpoint(TRUNCATE)`), so after a clean shutdown the `.sqlite` alone holds everything.

One connection per thread, WAL mode, writes serialised by a lock. Knows nothing about HTTP.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

from macaronic.migrations import migrate
from macaronic.serve import store_check
from macaronic.serve.store_check import row_sum

log = logging.getLogger("macaronic.serve")

# The schema evolves by appending to MIGRATIONS (ordered, applied once each: macaronic.migrations).
MIGRATIONS: list[str] = [
    # 1: responses and segments (IF NOT EXISTS: files written before migrations adopt it as is)
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY, created REAL NOT NULL, previous_id TEXT, model TEXT,
        messages TEXT NOT NULL, response TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS segments (
        key TEXT PRIMARY KEY, adapter TEXT, specialist TEXT, summary TEXT, raw TEXT, created REAL NOT NULL);
    CREATE INDEX IF NOT EXISTS segments_created ON segments(created)""",
    # 2: a checksum of each row's other columns (store_check.row_sum); older rows get theirs on adoption
    "ALTER TABLE responses ADD COLUMN sum TEXT; ALTER TABLE segments ADD COLUMN sum TEXT",
    # 3: user feedback on replies (the web chat's up/down and "wrong specialist")
    """CREATE TABLE feedback (
        id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, response_id TEXT NOT NULL,
        rating TEXT, expected_specialist TEXT, comment TEXT);
    CREATE INDEX feedback_response ON feedback(response_id)""",
]
# The columns each table must have (the schema check at open, `macaronic store check`).
TABLES: dict[str, set[str]] = {
    "responses": {"id", "created", "previous_id", "model", "messages", "response", "sum"},
    "segments": {"key", "adapter", "specialist", "summary", "raw", "created", "sum"},
    "feedback": {"id", "created", "response_id", "rating", "expected_specialist", "comment"},  # no row sums
    "_migrations": {"version", "applied"},
}
RESPONSE_COLS = ("id", "created", "previous_id", "model", "messages", "response")
SEGMENT_COLS = ("key", "adapter", "specialist", "summary", "raw", "created")


class StoreDamaged(RuntimeError):
    """The store file is damaged; the message is one line that names the way out."""


def check(path: str | Path, full: bool = False) -> list[str]:
    """The problems of the store at `path` (store_check.problems with this version's schema)."""
    return store_check.problems(path, TABLES, len(MIGRATIONS), full=full)


class Store:
    def __init__(self, path: str | Path = ":memory:", max_segments: int = 200_000):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            if Path(self.path).exists():  # before SQLite opens it: opening replays (and drops) the log
                found = check(self.path)
                if found:
                    raise StoreDamaged(store_check.summary(self.path, found))
        self.max_segments = max_segments
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[sqlite3.Connection] = []  # every thread's connection, closed together
        self._shared = sqlite3.connect(self.path, check_same_thread=False) if self.path == ":memory:" else None
        with self._lock:
            db = self._db()
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
            db.commit()
            try:
                self.version = migrate(db, MIGRATIONS)
                self._adopt(db)
            except sqlite3.DatabaseError as e:
                raise StoreDamaged(store_check.summary(self.path, [f"a migration failed ({e})"])) from None

    def _db(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._all.append(db)
        return db

    def _adopt(self, db: sqlite3.Connection) -> None:
        """Rows from before checksums get the checksum of what they hold now."""
        for table, cols in (("responses", RESPONSE_COLS), ("segments", SEGMENT_COLS)):
            rows = db.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE sum IS NULL").fetchall()
            db.executemany(f"UPDATE {table} SET sum = ? WHERE {cols[0]} = ?", [(row_sum(r), r[0]) for r in rows])
        db.commit()

    def _damaged(self, table: str, key: str) -> StoreDamaged:
        return StoreDamaged(store_check.summary(self.path, [f"{table} row {key!r}: checksum mismatch"]))

    # ---- segments ----

    def remember(self, key: str, adapter: str | None, specialist: str | None, summary: str | None = None,
                 raw: str | None = None) -> None:
        with self._lock:
            db = self._db()
            row = (key, adapter, specialist, summary, raw, time.time())
            db.execute(f"INSERT OR REPLACE INTO segments ({', '.join(SEGMENT_COLS)}, sum) "
                       f"VALUES ({', '.join('?' * 7)})", (*row, row_sum(row)))
            (n,) = db.execute("SELECT count(*) FROM segments").fetchone()
            if n > self.max_segments:
                db.execute("DELETE FROM segments WHERE key IN (SELECT key FROM segments ORDER BY created LIMIT ?)",
                           (n - self.max_segments,))
            db.commit()

    def set_summary(self, key: str, summary: str) -> None:
        with self._lock:
            db = self._db()
            row = db.execute(f"SELECT {', '.join(SEGMENT_COLS)} FROM segments WHERE key = ?", (key,)).fetchone()
            if row is not None:
                row = (*row[:3], summary, *row[4:])
                db.execute("UPDATE segments SET summary = ?, sum = ? WHERE key = ?", (summary, row_sum(row), key))
                db.commit()

    def recall(self, key: str) -> dict | None:
        row = self._db().execute(f"SELECT {', '.join(SEGMENT_COLS)}, sum FROM segments WHERE key = ?",
                                 (key,)).fetchone()
        if row is None:
            return None
        if row[-1] is not None and row_sum(row[:-1]) != row[-1]:  # a cache: a damaged row is a loud miss
            log.error("%s", self._damaged("segments", key))
            return None
        return {k: v for k, v in zip(("adapter", "specialist", "summary", "raw"), row[1:5]) if v is not None}

    # ---- responses ----

    def save_response(self, response: dict, messages: list[dict], previous_id: str | None) -> None:
        with self._lock:
            db = self._db()
            row = (response["id"], time.time(), previous_id, response.get("model"),
                   json.dumps(messages, ensure_ascii=False), json.dumps(response, ensure_ascii=False))
            db.execute(f"INSERT OR REPLACE INTO responses ({', '.join(RESPONSE_COLS)}, sum) "
                       f"VALUES ({', '.join('?' * 7)})", (*row, row_sum(row)))
            db.commit()

    def load_response(self, rid: str) -> tuple[dict, list[dict]] | None:
        row = self._db().execute(f"SELECT {', '.join(RESPONSE_COLS)}, sum FROM responses WHERE id = ?",
                                 (rid,)).fetchone()
        if row is None:
            return None
        if row[-1] is not None and row_sum(row[:-1]) != row[-1]:
            raise self._damaged("responses", rid)
        return json.loads(row[5]), json.loads(row[4])

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
        """Checkpoint the log into the main file and close every connection: after this the
        `.sqlite` alone holds everything (a copy of it is a backup)."""
        with self._lock:
            if self._shared is not None:
                self._shared.close()
                return
            for db in self._all[1:]:
                db.close()
            if self._all:
                busy, _, _ = self._all[0].execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy:
                    log.error("store %s: the final checkpoint was blocked; the -wal still holds data", self.path)
                self._all[0].close()
            self._all.clear()
            self._local = threading.local()
