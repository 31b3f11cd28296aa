"""`macaronic store check PATH` and `macaronic store backup PATH DEST`: the server's SQLite store.

`check` prints one line per problem (store_check.py: header, `-wal` frames SQLite would drop,
`integrity_check`, schema, row checksums) and exits 1 if there is any, 0 if the store is whole.
`backup` copies a store with SQLite's online backup API: one read transaction, so the copy is
consistent even while a server writes, and whole (the log's committed frames are in it). The copy
is a single file (rollback journal, no `-wal`), checked before it replaces DEST. A damaged store is
refused; `--force` copies what SQLite can still read, the explicit way to salvage one.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="macaronic store", description="Check or back up the server's SQLite store "
                                "(macaronic serve --store; default $MACARONIC_HOME/serve/state.sqlite).")
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("check", help="list the store's problems; exit 1 if it is damaged")
    c.add_argument("path")
    c.add_argument("--quick", action="store_true", help="quick_check instead of the full integrity_check")
    b = sub.add_parser("backup", help="a whole, consistent single-file copy (SQLite online backup)")
    b.add_argument("path")
    b.add_argument("dest")
    b.add_argument("--force", action="store_true", help="copy a damaged store too (what SQLite can read)")
    b.add_argument("--overwrite", action="store_true", help="replace DEST if it exists")
    return p


def counts(path: str | Path) -> str:
    db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        n = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("responses", "segments")}
    except sqlite3.Error:
        return "no tables yet"
    finally:
        db.close()
    return f"{n['responses']} responses, {n['segments']} segments"


def check(a) -> int:
    from macaronic.serve.store import check as problems
    from macaronic.serve.store_check import lines

    if not Path(a.path).is_file():
        print(f"macaronic store: no file {a.path}", file=sys.stderr)
        return 2
    found = problems(a.path, full=not a.quick)
    for line in lines(found):
        print(line)
    if not found:
        print(f"{a.path}: whole ({counts(a.path)})")
    return 1 if found else 0


def backup(a) -> int:
    from macaronic.serve.store import check as problems
    from macaronic.serve.store_check import lines

    src, dest = Path(a.path), Path(a.dest)
    if not src.is_file():
        print(f"macaronic store: no file {src}", file=sys.stderr)
        return 2
    if dest.exists() and not a.overwrite:
        print(f"macaronic store: {dest} exists (--overwrite replaces it)", file=sys.stderr)
        return 2
    found = problems(src)
    if found and not a.force:
        for line in lines(found):
            print(line)
        print(f"macaronic store: {src} is damaged; not backed up (--force copies what SQLite can read)",
              file=sys.stderr)
        return 1
    part = dest.with_name(dest.name + ".part")
    part.unlink(missing_ok=True)
    try:
        reader = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)  # never checkpoints the source
        writer = sqlite3.connect(part)
        try:
            reader.backup(writer)  # all pages in one step: one read transaction, a consistent snapshot
            writer.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
        finally:
            writer.close()
            reader.close()
    except sqlite3.Error as e:
        part.unlink(missing_ok=True)
        print(f"macaronic store: cannot back up {src}: {e}", file=sys.stderr)
        return 1
    after = problems(part, full=True)
    if after and not a.force:
        part.unlink(missing_ok=True)
        for line in lines(after):
            print(line)
        print(f"macaronic store: the copy of {src} did not check whole; not written", file=sys.stderr)
        return 1
    os.replace(part, dest)
    print(f"{src} -> {dest}: {counts(dest)}, {dest.stat().st_size} bytes"
          + (f", {len(after)} problems copied as they are" if after else ", checked whole")
          + (" (salvaged from a damaged store: what SQLite could read)" if found else ""))
    return 0


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    try:
        return check(a) if a.action == "check" else backup(a)
    except sqlite3.Error as e:  # not damage (store_check lets a lock through): say so, no traceback
        print(f"macaronic store: cannot read {a.path}: {e}", file=sys.stderr)
        return 2
