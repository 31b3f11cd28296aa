"""The engine's command line, run as real subprocesses on a tiny model."""

from __future__ import annotations

import json
import subprocess
import sys

from macaronic.testing import make_random_adapter


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "macaronic.cli", *args], capture_output=True, text=True,
                          timeout=300, **kw)


def test_help_is_instant_and_imports_nothing_heavy():
    code = "import sys; from macaronic.cli import main; main(['--help']); print(sorted(m for m in ('torch', 'transformers', 'fastapi') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "serve" in out.stdout and out.stdout.strip().endswith("[]")


def test_unknown_command():
    r = run("frobnicate")
    assert r.returncode == 2 and "unknown command" in r.stderr


def test_info_json_reports_fingerprint_and_adapters(tiny_dirs, tmp_path):
    from macaronic.engine.base import load_base

    base = load_base(tiny_dirs["qwen3"])
    ad = make_random_adapter(tmp_path / "coding", base.args, seed=3, mode="turn", role="coding")
    r = run("info", "--json", "--base", str(tiny_dirs["qwen3"]), "--adapter", str(ad))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["base"]["fingerprint"] == base.fingerprint and d["base"]["family"] == "qwen3"
    assert d["base"]["params"] == base.params()
    (a,) = d["adapters"]
    assert a["name"] == "coding" and a["mode"] == "turn" and a["rank"] == 4 and len(a["id"]) == 64
    assert "down_proj" in a["targets"]


def test_generate_streams_and_rejects_unknown_adapter(tiny_dirs):
    r = run("generate", "--base", str(tiny_dirs["llama"]), "--prompt", "hi", "--max-tokens", "5", "--stats")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stderr.strip().splitlines()[-1])
    assert stats["completion_tokens"] <= 5
    r = run("generate", "--base", str(tiny_dirs["llama"]), "--prompt", "hi", "--adapter", "nope")
    assert r.returncode == 2 and "unknown adapter" in r.stderr
