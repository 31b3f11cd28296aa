"""Schema migrations for the project's SQLite files (the server's store, the lineage).

A file outlives versions, so its schema evolves by appending to an ordered list of SQL scripts;
`migrate` applies the ones not yet applied, each in its own transaction, and records them in a
`_migrations` table. Knows nothing about what the tables hold.
"""

from __future__ import annotations

import sqlite3
import time


def migrate(conn: sqlite3.Connection, migrations: list[str]) -> int:
    """Apply the migrations not yet applied, in order; returns the schema version."""
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (version INTEGER PRIMARY KEY, applied REAL)")
    done = {v for (v,) in conn.execute("SELECT version FROM _migrations")}
    for version, sql in enumerate(migrations, start=1):
        if version in done:
            continue
        with conn:  # one transaction per migration: a crash leaves it applied or not at all
            conn.executescript("BEGIN;" + sql + f";INSERT INTO _migrations VALUES ({version}, {time.time()});COMMIT;")
    return len(migrations)
