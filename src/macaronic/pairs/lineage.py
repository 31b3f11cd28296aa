"""Lineage: an append-only SQLite log of pairs, evaluation decisions and alias moves.

Four tables, each written once per row and never changed: `pairs` (id -> manifest), `records`
(one per evaluated successor: parent, what changed, data manifest hash, training config, contract
id and sha256, report sha256, decision and reasons), `screens` (one per candidate screened on dev
by a search: operator, components touched, per-suite dev scores and deltas, verdict; the archive
is read from them) and `alias_moves` (`champion`/`challenger` history; the current holder is the
latest move). Triggers refuse UPDATE and DELETE, so history
cannot be rewritten even by a buggy caller. Every write carries a caller-chosen `key` (UNIQUE):
replaying a write after a crash is a no-op, which is how the evolve loop avoids double counting.
The schema evolves by appending to MIGRATIONS (ordered, applied once each). Knows nothing about
models, contracts or how decisions are made.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from macaronic.migrations import migrate as apply_migrations
from macaronic.pairs.ids import PairManifest

MIGRATIONS: list[str] = [
    # 1: the three append-only tables
    """
    CREATE TABLE pairs (id TEXT PRIMARY KEY, manifest TEXT NOT NULL, created REAL NOT NULL);
    CREATE TABLE records (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,
        pair_id TEXT NOT NULL REFERENCES pairs(id), parent_id TEXT REFERENCES pairs(id),
        generation INTEGER, changes TEXT NOT NULL, data_manifest_sha256 TEXT,
        training_config TEXT NOT NULL, contract_id TEXT, contract_sha256 TEXT,
        report_sha256 TEXT, decision TEXT NOT NULL, reasons TEXT NOT NULL, created REAL NOT NULL);
    CREATE TABLE alias_moves (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, alias TEXT NOT NULL,
        pair_id TEXT NOT NULL REFERENCES pairs(id), reason TEXT NOT NULL, created REAL NOT NULL);
    """,
    # 2: history is append-only, enforced by the database itself
    "".join(
        f"CREATE TRIGGER {t}_no_{op} BEFORE {op.upper()} ON {t} "
        f"BEGIN SELECT RAISE(ABORT, 'lineage is append-only: {op.upper()} on {t} refused'); END;\n"
        for t in ("pairs", "records", "alias_moves") for op in ("update", "delete")),
    # 3: lookups by pair
    "CREATE INDEX records_pair ON records(pair_id); CREATE INDEX alias_moves_alias ON alias_moves(alias);",
    # 4: dev screenings: every candidate of a search, kept whatever its verdict (the archive)
    """
    CREATE TABLE screens (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, generation INTEGER NOT NULL,
        pair_id TEXT NOT NULL REFERENCES pairs(id), parent_id TEXT NOT NULL REFERENCES pairs(id),
        operator TEXT NOT NULL, components TEXT NOT NULL, suites TEXT NOT NULL, verdict TEXT NOT NULL,
        detail TEXT NOT NULL, created REAL NOT NULL);
    CREATE TRIGGER screens_no_update BEFORE UPDATE ON screens
        BEGIN SELECT RAISE(ABORT, 'lineage is append-only: UPDATE on screens refused'); END;
    CREATE TRIGGER screens_no_delete BEFORE DELETE ON screens
        BEGIN SELECT RAISE(ABORT, 'lineage is append-only: DELETE on screens refused'); END;
    """,
]
ALIASES = ("champion", "challenger")
ROLLBACK = "rolled back from "  # the reason of a move that undoes the one before it


def default_lineage() -> Path:
    """$MACARONIC_LINEAGE, else lineage.sqlite under the Macaronic home."""
    from macaronic.engine.base import home

    return Path(os.environ.get("MACARONIC_LINEAGE", home() / "lineage.sqlite"))


class LineageError(LookupError):
    pass


def migrate(conn: sqlite3.Connection) -> int:
    """The lineage's migrations not yet applied, applied in order; returns the schema version."""
    return apply_migrations(conn, MIGRATIONS)


class Lineage:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.version = migrate(self.conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- pairs ---------------------------------------------------------------------------

    def add_pair(self, manifest: PairManifest) -> str:
        """Record a pair (no-op if its id is already there). Returns the pair id."""
        self.conn.execute("INSERT OR IGNORE INTO pairs VALUES (?, ?, ?)",
                          (manifest.id, json.dumps(manifest.to_dict(), sort_keys=True), time.time()))
        return manifest.id

    def resolve(self, ref: str) -> str:
        """A pair id from an alias, a full id or a unique id prefix (>= 6 hex digits)."""
        held = self.alias(ref)
        if held is not None:
            return held
        rows = [r[0] for r in self.conn.execute("SELECT id FROM pairs WHERE id LIKE ?", (ref + "%",))] if len(ref) >= 6 else []
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise LineageError(f"no pair or alias {ref!r} in {self.path}")
        raise LineageError(f"{ref!r} is ambiguous: {len(rows)} pairs start with it")

    def pair(self, ref: str) -> PairManifest:
        pid = self.resolve(ref)
        (text,) = self.conn.execute("SELECT manifest FROM pairs WHERE id = ?", (pid,)).fetchone()
        return PairManifest.from_dict(json.loads(text))

    def pairs(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT id FROM pairs ORDER BY created, id")]

    # ---- records -------------------------------------------------------------------------

    def record(self, *, key: str, pair_id: str, parent_id: str | None, decision: str, reasons: list,
               changes: list | dict, generation: int | None = None, data_manifest_sha256: str | None = None,
               training_config: dict | None = None, contract_id: str | None = None,
               contract_sha256: str | None = None, report_sha256: str | None = None) -> int:
        """Append one decision; replaying the same `key` returns the existing row's seq."""
        row = self.conn.execute("SELECT seq FROM records WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return row[0]
        cur = self.conn.execute(
            "INSERT INTO records (key, pair_id, parent_id, generation, changes, data_manifest_sha256, "
            "training_config, contract_id, contract_sha256, report_sha256, decision, reasons, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, pair_id, parent_id, generation, json.dumps(changes, sort_keys=True), data_manifest_sha256,
             json.dumps(training_config or {}, sort_keys=True), contract_id, contract_sha256, report_sha256,
             decision, json.dumps(reasons, sort_keys=True), time.time()))
        return cur.lastrowid

    def records(self, pair_id: str | None = None) -> list[dict]:
        sql, args = "SELECT * FROM records", ()
        if pair_id is not None:
            sql, args = sql + " WHERE pair_id = ? OR parent_id = ?", (pair_id, pair_id)
        return self._rows(sql, args, ("changes", "training_config", "reasons"))

    # ---- screens (the search's archive) ---------------------------------------------------

    def screen(self, *, key: str, generation: int, pair_id: str, parent_id: str, operator: str,
               components: list[str], suites: dict, verdict: str, detail: dict | None = None) -> int:
        """Append one dev screening of a candidate (its per-suite dev scores and deltas against
        its parent, and the verdict); replaying the same `key` returns the existing row's seq."""
        row = self.conn.execute("SELECT seq FROM screens WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return row[0]
        return self.conn.execute(
            "INSERT INTO screens (key, generation, pair_id, parent_id, operator, components, suites, verdict, "
            "detail, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, generation, pair_id, parent_id, operator, json.dumps(sorted(components)),
             json.dumps(suites, sort_keys=True), verdict, json.dumps(detail or {}, sort_keys=True),
             time.time())).lastrowid

    def screens(self, generation: int | None = None) -> list[dict]:
        sql, args = "SELECT * FROM screens", ()
        if generation is not None:
            sql, args = sql + " WHERE generation = ?", (generation,)
        return self._rows(sql, args, ("components", "suites", "detail"))

    def _rows(self, sql: str, args: tuple, json_cols: tuple[str, ...]) -> list[dict]:
        """The rows of `sql` in append order, their JSON columns decoded."""
        out = []
        for r in self.conn.execute(sql + " ORDER BY seq", args):
            d = dict(r)
            for k in json_cols:
                d[k] = json.loads(d[k])
            out.append(d)
        return out

    # ---- aliases -------------------------------------------------------------------------

    def move_alias(self, alias: str, pair_id: str, reason: str, key: str | None = None) -> int:
        """Point `alias` at `pair_id` by appending a move; replaying the same `key` is a no-op."""
        if alias not in ALIASES:
            raise ValueError(f"alias must be one of {ALIASES}, got {alias!r}")
        key = key or f"{alias}:{pair_id}:{time.time_ns()}"
        row = self.conn.execute("SELECT seq FROM alias_moves WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return row[0]
        return self.conn.execute("INSERT INTO alias_moves (key, alias, pair_id, reason, created) VALUES (?, ?, ?, ?, ?)",
                                 (key, alias, pair_id, reason, time.time())).lastrowid

    def rollback(self, alias: str = "champion") -> tuple[str, str]:
        """Point `alias` back at the pair that held it before the current holder, by appending a
        move (reason ROLLBACK + the current id); a rolled-back move stays undone, so rolling back
        twice goes two holders back. Returns (from, to)."""
        held: list[str] = []  # the holders still in effect, oldest first
        for m in self.alias_history(alias):
            if m["reason"].startswith(ROLLBACK) and len(held) >= 2 and held[-2] == m["pair_id"]:
                held.pop()
            else:
                held.append(m["pair_id"])
        if len(held) < 2:
            raise LineageError(f"{alias!r} has no earlier holder to roll back to in {self.path}")
        self.move_alias(alias, held[-2], ROLLBACK + held[-1])
        return held[-1], held[-2]

    def alias(self, alias: str) -> str | None:
        row = self.conn.execute("SELECT pair_id FROM alias_moves WHERE alias = ? ORDER BY seq DESC LIMIT 1",
                                (alias,)).fetchone()
        return None if row is None else row[0]

    def alias_history(self, alias: str) -> list[dict]:
        return [dict(r) for r in self.conn.execute(
            "SELECT seq, alias, pair_id, reason, created FROM alias_moves WHERE alias = ? ORDER BY seq", (alias,))]
