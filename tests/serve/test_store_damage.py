"""A damaged store fails loud, and a clean shutdown leaves it whole in one file (issue 41 item 4).

Before: random bytes mid-file started a server whose stored responses answered 500, a damaged
`-wal` started one that had silently lost the responses after the damage (`integrity_check`: ok),
a damaged header failed with a raw traceback, and after a clean SIGTERM the data sat only in the
`-wal`. Now `macaronic serve` refuses a damaged store with one line that names the way out,
`macaronic store check` lists the problems (exit 1), `macaronic store backup` makes a whole
single-file copy (`--force` salvages what SQLite can read), and shutdown checkpoints the log."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from serve_helpers import ROOT, ServerProcess, model_args

from macaronic.serve.store import Store, StoreDamaged, check

N = 36  # the probe's store held 36 responses


def filled(path: Path, n: int = N) -> Store:
    """An open store holding `n` responses and a few segments (still in its -wal)."""
    s = Store(path)
    for i in range(n):
        s.save_response({"id": f"resp_{i}", "model": "chat", "output": [{"text": f"reply {i} " + "x" * 300}]},
                        [{"role": "user", "content": f"question {i} " + "hello " * 50}], None)
        if i % 6 == 0:
            s.remember(f"key{i}", "chat", "chat", f"summary {i}")
    return s


def crash_image(store: Path, dest: Path) -> Path:
    """The files as a killed server leaves them: the .sqlite and its -wal, copied while open."""
    for suffix in ("", "-wal"):
        shutil.copy(f"{store}{suffix}", f"{dest}{suffix}")
    return dest


def damage(path: Path, at: int, n: int = 64) -> None:
    with path.open("r+b") as f:
        f.seek(at)
        f.write(random.Random(at).randbytes(n))


def macaronic(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "macaronic.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def serve_refuses(tiny_models, store: Path) -> str:
    """`macaronic serve --store STORE` exits 2 with one line naming the way out, no traceback."""
    r = macaronic("serve", "--port", "0", *model_args(*tiny_models), "--store", str(store))
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stdout + r.stderr and "Web chat" not in r.stdout, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"store {store} is damaged" in lines[0] and f"`macaronic store check {store}`" in lines[0], lines[0]
    assert "restore a backup" in lines[0] and "--store" in lines[0]
    return lines[0]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_random_bytes_mid_file_refuse_the_start(tiny_models, tmp_path):
    path = tmp_path / "state.sqlite"
    filled(path).close()
    data = path.read_bytes()
    at = data.find(b"hello hello", len(data) // 2)  # inside a stored document: what a reader would get wrong
    damage(path, at)
    line = serve_refuses(tiny_models, path)
    assert "responses row" in line or "integrity" in line, line
    r = macaronic("store", "check", str(path))
    assert r.returncode == 1 and r.stdout.strip(), r.stdout
    assert all("row" in x or "integrity" in x for x in r.stdout.strip().splitlines()), r.stdout


def test_a_damaged_header_refuses_the_start_without_a_traceback(tiny_models, tmp_path):
    path = tmp_path / "state.sqlite"
    filled(path).close()
    damage(path, 0, 16)
    assert "the file header is damaged" in serve_refuses(tiny_models, path)
    r = macaronic("store", "check", str(path))
    assert r.returncode == 1 and "file header is damaged" in r.stdout


def test_a_damaged_wal_refuses_the_start_and_is_left_as_it_was(tiny_models, tmp_path):
    live = filled(tmp_path / "live.sqlite")
    path = crash_image(tmp_path / "live.sqlite", tmp_path / "state.sqlite")
    live.close()
    wal = Path(f"{path}-wal")
    damage(wal, wal.stat().st_size // 2)
    before = sha(wal), sha(path)
    assert "state.sqlite-wal: the log breaks at frame" in serve_refuses(tiny_models, path)
    assert (sha(wal), sha(path)) == before  # refusing replays nothing: the evidence and the frames stay
    r = macaronic("store", "check", str(path))
    assert r.returncode == 1 and "SQLite would silently drop" in r.stdout, r.stdout
    # the explicit way out: salvage what SQLite can read into a new store, which then starts
    r = macaronic("store", "backup", str(path), str(tmp_path / "salvaged.sqlite"))
    assert r.returncode == 1 and "--force" in r.stderr
    r = macaronic("store", "backup", str(path), str(tmp_path / "salvaged.sqlite"), "--force")
    assert r.returncode == 0 and "salvaged" in r.stdout, r.stdout + r.stderr
    s = Store(tmp_path / "salvaged.sqlite")
    kept = sum(s.load_response(f"resp_{i}") is not None for i in range(N))
    assert 0 < kept < N  # the responses before the damage; the rest were in the dropped frames
    s.close()


def test_a_crash_image_with_a_whole_wal_opens_with_every_row(tmp_path):
    live = filled(tmp_path / "live.sqlite")
    path = crash_image(tmp_path / "live.sqlite", tmp_path / "state.sqlite")
    live.close()
    assert Path(f"{path}-wal").stat().st_size > 0
    assert check(path, full=True) == []
    s = Store(path)
    assert all(s.load_response(f"resp_{i}") is not None for i in range(N))
    s.close()


def test_a_row_damaged_after_the_start_answers_an_explicit_error(tmp_path):
    s = filled(tmp_path / "state.sqlite", 3)
    db = sqlite3.connect(tmp_path / "state.sqlite")
    db.execute("UPDATE responses SET messages = replace(messages, 'question', 'quest1on') WHERE id = 'resp_1'")
    db.commit()
    db.close()
    assert s.load_response("resp_0") is not None
    try:
        s.load_response("resp_1")
        raise AssertionError("a damaged row was returned")
    except StoreDamaged as e:
        assert "responses row 'resp_1': checksum mismatch" in str(e)
    s.close()


def test_a_store_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "state.sqlite"
    filled(path, 1).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO _migrations VALUES (99, 0)")
    db.commit()
    db.close()
    try:
        Store(path)
        raise AssertionError("opened a store from a newer version")
    except StoreDamaged as e:
        assert "written by a newer macaronic" in str(e)


def test_backup_of_an_open_store_is_one_whole_file(tmp_path):
    live = filled(tmp_path / "state.sqlite")  # open: its rows are still in the -wal
    dest = tmp_path / "backup" / "copy.sqlite"
    dest.parent.mkdir()
    r = macaronic("store", "backup", str(tmp_path / "state.sqlite"), str(dest))
    assert r.returncode == 0 and f"{N} responses" in r.stdout and "checked whole" in r.stdout, r.stdout + r.stderr
    assert sorted(p.name for p in dest.parent.iterdir()) == ["copy.sqlite"]  # no -wal beside it
    copy = Store(dest)
    assert all(copy.load_response(f"resp_{i}") is not None for i in range(N))
    copy.close()
    r = macaronic("store", "backup", str(tmp_path / "state.sqlite"), str(dest))
    assert r.returncode == 2 and "exists" in r.stderr
    live.close()
    r = macaronic("store", "check", str(dest))
    assert r.returncode == 0 and f"whole ({N} responses" in r.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_clean_shutdown_leaves_everything_in_the_sqlite_file(tiny_models, tmp_path, sig):
    path = tmp_path / "state.sqlite"
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "none", "--store", str(path),
                       "--max-tokens-limit", "16"])
    ids = []
    try:
        for i in range(4):
            r = httpx.post(s.url + "/v1/responses", timeout=60,
                           json={"model": "chat", "input": f"note {i}", "max_output_tokens": 2})
            assert r.status_code == 200, r.text
            ids.append(r.json()["id"])
        assert Path(f"{path}-wal").stat().st_size > 0  # while it runs, the log holds the writes
    finally:
        s.proc.send_signal(sig)
        s.proc.wait(timeout=30)
    assert s.proc.returncode == 0 and "Traceback" not in "".join(s.log), "".join(s.log)[-2000:]
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(path, alone / "state.sqlite")  # the .sqlite alone is a backup
    assert check(alone / "state.sqlite", full=True) == []
    copy = Store(alone / "state.sqlite")
    assert all(copy.load_response(rid) is not None for rid in ids)
    copy.close()


def test_a_row_damaged_while_serving_answers_a_store_damaged_error(tiny_models, tmp_path):
    path = tmp_path / "state.sqlite"
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "none", "--store", str(path),
                       "--max-tokens-limit", "16"])
    try:
        r = httpx.post(s.url + "/v1/responses", timeout=60,
                       json={"model": "chat", "input": "note", "max_output_tokens": 2})
        rid = r.json()["id"]
        db = sqlite3.connect(path, timeout=30)  # another writer changes the stored text under the server
        db.execute("UPDATE responses SET response = replace(response, 'chat', 'chaT') WHERE id = ?", (rid,))
        db.commit()
        db.close()
        r = httpx.get(f"{s.url}/v1/responses/{rid}")
        assert r.status_code == 500 and r.json()["error"]["code"] == "store_damaged", r.text
        message = r.json()["error"]["message"]
        assert f"responses row '{rid}': checksum mismatch" in message and "macaronic store check" in message
        assert str(tmp_path) not in message  # server paths stay in the log
        r = httpx.post(s.url + "/v1/responses", timeout=60,
                       json={"model": "chat", "input": "more", "previous_response_id": rid, "max_output_tokens": 2})
        assert r.status_code == 500 and r.json()["error"]["code"] == "store_damaged", r.text
    finally:
        s.stop()
