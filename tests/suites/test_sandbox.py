"""The sandbox stops loops, memory hogs, network, subprocesses and file escapes."""

from __future__ import annotations

from macaronic.suites.sandbox import run_python


def test_runs_ordinary_code_with_stdlib():
    r = run_python("import math, json, collections, re\nprint(json.dumps([math.gcd(12, 18)]))")
    assert r.ok and r.stdout.strip() == "[6]"


def test_kills_infinite_loop():
    r = run_python("while True:\n    pass", timeout_s=1.5)
    assert r.timed_out and not r.ok


def test_memory_limit():
    r = run_python("x = bytearray(3 * 1024 ** 3)", mem_mb=256)
    assert not r.ok and "MemoryError" in r.stderr


def test_blocks_network():
    r = run_python("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)")
    assert not r.ok and "not allowed" in r.stderr


def test_blocks_file_escape(tmp_path):
    target = tmp_path / "escape.txt"
    r = run_python(f"open({str(target)!r}, 'w').write('x')")
    assert not r.ok and "not allowed" in r.stderr and not target.exists()
    r = run_python("print(open('/etc/hostname').read())")
    assert not r.ok and "not allowed" in r.stderr
    r = run_python("open('inside.txt', 'w').write('ok')\nprint(open('inside.txt').read())")
    assert r.ok and r.stdout.strip() == "ok"  # its own temp dir is fine


def test_blocks_subprocess():
    r = run_python("import os\nos.system('echo escaped')")
    assert not r.ok and "escaped" not in r.stdout
    r = run_python("import subprocess\nsubprocess.run(['true'])")
    assert not r.ok and "not allowed" in r.stderr
