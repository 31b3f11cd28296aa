"""Is a store file whole? Checks a SQLite store without changing it, and says what is wrong.

One problem per line, in this order (a later check runs only if the earlier ones let it):

- the header: the first 16 bytes must read "SQLite format 3\\0" (SQLite itself only says "file is
  not a database");
- the `-wal` log, read by hand before SQLite opens the file: SQLite replays frames while their
  running checksum holds and silently drops every frame after the first that fails, committed ones
  included (the probe lost 19 of 36 responses that way while `integrity_check` said ok). A frame of
  the current log generation (its salts equal the header's) standing after a broken one is
  therefore damage: it was written, and SQLite would throw it away. Frames with other salts are
  left over from an earlier generation and are ignored by design (a frame matching one salt of two
  was written now and damaged). A damaged log header (SQLite
  then ignores the whole log) is reported when the log holds frames;
- SQLite's own `PRAGMA quick_check` (or the full `integrity_check`) on a read-only connection,
  which never checkpoints or deletes the log;
- the schema: the tables and columns this version's migrations make, and no migration newer than
  it knows (a store written by a later version);
- each row's checksum (`sum`, written with the row): damage to stored text that leaves the b-tree
  well formed (a byte in the middle of a JSON document) passes `integrity_check` but not this.

Limits: damage that changes no stored value (free pages, unused space in a page) is not reported,
because nothing is lost; damage to both salts of the log's last frame looks like a left-over frame;
rows written before checksums existed are adopted with the checksum of what they held then.
A torn sector after a power loss in the log's last frames reads as damage: committed data is lost.

Knows nothing about HTTP or the server; `store.py` calls `problems` before it opens a file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
import time
from pathlib import Path

HEADER = b"SQLite format 3\x00"
WAL_MAGIC = (0x377F0682, 0x377F0683)  # last bit: checksum words are big-endian
WAL_HEADER, FRAME_HEADER = 32, 24
MAX_LINES = 20  # problems listed per check; the rest are counted


def row_sum(values) -> str:
    """The checksum stored beside a row: every other column, in table order."""
    return hashlib.blake2b(json.dumps(list(values), ensure_ascii=False).encode(), digest_size=8).hexdigest()


def _checksum(data: bytes, s0: int, s1: int, big: bool) -> tuple[int, int]:
    """SQLite's WAL checksum (wal.c walChecksumBytes) over `data`, continuing from (s0, s1)."""
    words = struct.unpack((">" if big else "<") + f"{len(data) // 4}I", data)
    m = 0xFFFFFFFF
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & m
        s1 = (s1 + words[i + 1] + s0) & m
    return s0, s1


def wal_problems(path: str | Path, settle_s: float = 0.05) -> list[str]:
    """Problems in `path`-wal that SQLite would hide (see the module docstring); [] if none or no log.
    On a live store a writer may be mid-frame: a break that heals or moves a moment later was a
    write in flight, so a break is reported only when two reads find it at the same frame."""
    found = _wal_break(path)
    for _ in range(5):
        if found is None:
            return []
        time.sleep(settle_s)
        again = _wal_break(path)
        if again is not None and again[0] == found[0]:
            return [again[1]]
        found = again
    return [found[1]] if found else []


def _wal_break(path: str | Path) -> tuple[int, str] | None:
    """(the first frame SQLite would drop, -1 for the header; the problem) or None."""
    wal = Path(str(path) + "-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return None
    data = wal.read_bytes()
    name = wal.name
    if len(data) < WAL_HEADER:
        return -1, f"{name}: {len(data)} bytes, shorter than a log header"
    magic, version, page_size, _, salt1, salt2, c0, c1 = struct.unpack(">8I", data[:WAL_HEADER])
    frame = FRAME_HEADER + page_size
    frames = (len(data) - WAL_HEADER) // frame if page_size else 0
    big = magic == WAL_MAGIC[1]
    if magic not in WAL_MAGIC or version != 3007000 or not page_size or page_size & (page_size - 1) \
            or _checksum(data[:24], 0, 0, big) != (c0, c1):
        return (-1, f"{name}: the log header is damaged; SQLite would ignore all {frames} frames in it") if frames \
            else None
    s0, s1, valid = c0, c1, 0
    for i in range(frames):
        at = WAL_HEADER + i * frame
        pgno, _, f1, f2, k0, k1 = struct.unpack(">6I", data[at:at + FRAME_HEADER])
        if (f1, f2) != (salt1, salt2) or pgno == 0:
            break
        s0, s1 = _checksum(data[at:at + 8], s0, s1, big)
        s0, s1 = _checksum(data[at + FRAME_HEADER:at + frame], s0, s1, big)
        if (s0, s1) != (k0, k1):
            break
        valid += 1
    # salt-1 grows by one and salt-2 is drawn anew at each log reset, so a frame left over from an
    # earlier generation matches neither; one that matches either was written now (and damaged)
    salts = [(at, struct.unpack(">II", data[at + 8:at + 16])) for at in range(WAL_HEADER + valid * frame,
                                                                         WAL_HEADER + frames * frame, frame)]
    current = [at for at, (f1, f2) in salts if f1 == salt1 or f2 == salt2]
    if not current:
        return None  # the log ends, or frames left over from an earlier generation follow
    commits = sum(1 for at in current if struct.unpack(">I", data[at + 4:at + 8])[0])
    return valid, (f"{name}: the log breaks at frame {valid + 1} of {frames} (checksum or salt damaged); SQLite "
                   f"would silently drop the {_n(len(current), 'frame')} of this log from there on "
                   f"({_n(commits, 'commit')})")


def _n(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


def _schema_problems(db: sqlite3.Connection, tables: dict[str, set[str]], known: int) -> list[str]:
    """Tables and columns as this version's migrations leave them; a store at an older version is
    checked after its migrations ran (they add what is missing), a newer one is refused."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = '_migrations'").fetchone():
        return []  # from before migrations (or new): the migrations adopt it
    (applied,) = db.execute("SELECT max(version) FROM _migrations").fetchone()
    if (applied or 0) > known:
        return [f"schema: version {applied} was written by a newer macaronic (this one knows {known})"]
    if (applied or 0) < known:
        return []
    out = []
    for table, want in tables.items():
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if not have:
            out.append(f"schema: table {table!r} is missing")
        elif want - have:
            out.append(f"schema: table {table!r} lacks columns {', '.join(sorted(want - have))}")
    return out


def _row_problems(db: sqlite3.Connection, tables: dict[str, set[str]]) -> list[str]:
    out = []
    db.text_factory = bytes  # a damaged byte can make text invalid UTF-8: that row is reported, not the check
    for table in tables:
        cols = [r[1].decode() for r in db.execute(f"PRAGMA table_info({table})")]
        if "sum" not in cols:
            continue
        rest = [c for c in cols if c != "sum"]
        for row in db.execute(f"SELECT {', '.join(rest)}, sum FROM {table}"):
            key = row[0].decode(errors="replace") if isinstance(row[0], bytes) else row[0]
            try:
                values = [v.decode() if isinstance(v, bytes) else v for v in row]
            except UnicodeDecodeError:
                out.append(f"{table} row {key!r}: its text is not valid UTF-8 (changed on disk)")
                continue
            if values[-1] is not None and row_sum(values[:-1]) != values[-1]:
                out.append(f"{table} row {key!r}: checksum mismatch (its stored text was changed on disk)")
    return out


def problems(path: str | Path, tables: dict[str, set[str]], known: int, full: bool = False) -> list[str]:
    """Every problem found in the store at `path` (empty: whole). `tables` maps each table to the
    columns it must have, `known` is the newest migration this version knows; `full` runs
    `integrity_check` instead of `quick_check`. Opens the file read-only: nothing is changed."""
    path = Path(path)
    if not path.exists():
        return [f"{path}: no such file"]
    with path.open("rb") as f:
        head = f.read(len(HEADER))
    if path.stat().st_size == 0:
        return []  # SQLite's own empty database: the server makes its tables
    if head != HEADER:
        return [f"{path.name}: the file header is damaged (not 'SQLite format 3'); SQLite cannot open it"]
    out = wal_problems(path)
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        return out + [f"{path.name}: SQLite cannot open it ({e})"]
    try:
        rows = db.execute("PRAGMA integrity_check" if full else "PRAGMA quick_check").fetchall()
        bad = [r[0] for r in rows if r[0] != "ok"]
        out += [f"integrity: {m}" for m in bad]
        if not bad:
            out += _schema_problems(db, tables, known)
            out += _row_problems(db, {t: c for t, c in tables.items() if t != "_migrations"})
    except sqlite3.DatabaseError as e:
        if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
            raise  # held by another process: not damage
        out.append(f"integrity: SQLite cannot read it ({e})")
    finally:
        db.close()
    return out


def summary(path: str | Path, found: list[str]) -> str:
    """The one line the server prints when it refuses a damaged store: what and the way out."""
    more = f"; and {len(found) - 1} more" if len(found) > 1 else ""
    return (f"store {path} is damaged ({found[0]}{more}): run `macaronic store check {path}` to list the "
            f"problems, restore a backup (`macaronic store backup` makes one), or start with a new --store")


def lines(found: list[str]) -> list[str]:
    """At most MAX_LINES problems, then how many more."""
    return found[:MAX_LINES] + ([f"... and {len(found) - MAX_LINES} more"] if len(found) > MAX_LINES else [])
