"""The server's SQLite store evolves by migrations, like the lineage: a file written before
migrations existed is adopted with its rows, and an appended migration runs exactly once."""

import sqlite3

from macaronic.serve import store as store_mod
from macaronic.serve.store import Store

OLD_SCHEMA = [  # the store's tables as files before migrations hold them
    """CREATE TABLE responses (id TEXT PRIMARY KEY, created REAL NOT NULL, previous_id TEXT, model TEXT,
       messages TEXT NOT NULL, response TEXT NOT NULL)""",
    """CREATE TABLE segments (key TEXT PRIMARY KEY, adapter TEXT, specialist TEXT, summary TEXT, raw TEXT,
       created REAL NOT NULL)""",
]


def test_a_file_from_before_migrations_is_adopted_with_its_rows(tmp_path):
    path = tmp_path / "state.sqlite"
    db = sqlite3.connect(path)
    for stmt in OLD_SCHEMA:
        db.execute(stmt)
    db.execute("INSERT INTO segments VALUES ('k', 'agent', 'agent', 'a summary', NULL, 1.0)")
    db.commit()
    db.close()
    s = Store(path)
    assert s.version == len(store_mod.MIGRATIONS)
    assert s.recall("k")["summary"] == "a summary"
    s.close()


def test_an_appended_migration_runs_once(tmp_path, monkeypatch):
    path = tmp_path / "state.sqlite"
    Store(path).close()
    n = len(store_mod.MIGRATIONS)
    monkeypatch.setattr(store_mod, "MIGRATIONS",
                        [*store_mod.MIGRATIONS, "ALTER TABLE segments ADD COLUMN note TEXT"])
    s = Store(path)  # applies the new one
    assert s.version == n + 1
    s.close()
    s = Store(path)  # a second ALTER of the same column would raise
    cols = [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(segments)")]
    assert cols.count("note") == 1
    applied = [v for (v,) in sqlite3.connect(path).execute("SELECT version FROM _migrations ORDER BY version")]
    assert applied == list(range(1, n + 2))
    s.close()


def test_feedback_rows_are_appended_and_read_back_per_reply(tmp_path):
    s = Store(tmp_path / "state.sqlite")
    s.record_feedback("chatcmpl-a", "up")
    s.record_feedback("chatcmpl-b", None, "coding", "it was code")
    s.record_feedback("chatcmpl-a", "down")  # a changed vote is a new row; the latest is the verdict
    assert [r["rating"] for r in s.feedback("chatcmpl-a")] == ["up", "down"]
    assert s.feedback("chatcmpl-b")[0]["expected_specialist"] == "coding" and len(s.feedback()) == 3
    s.close()
