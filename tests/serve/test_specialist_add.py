"""Bring your own specialist, end to end on the test base (SmolLM2-135M): `macaronic specialist add`
trains a fifth specialist from examples/sql.jsonl in a few steps, refits the router, passes the
do-no-harm check and registers it; a real `macaronic serve` on loopback routes a held-out request to
it and serves it by name through the official `openai` client; `list` and `remove` undo it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import openai
import pytest

from serve_helpers import ROOT, ServerProcess

pytestmark = [pytest.mark.real_model, pytest.mark.long, pytest.mark.timeout(1800)]  # a shared 2-core box took 222 s


def cli(*args, env):
    return subprocess.run([sys.executable, "-m", "macaronic.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=ROOT, timeout=1500)


def test_a_fifth_specialist_is_trained_routed_checked_and_served(tmp_path):
    env = {"MACARONIC_SPECIALISTS": str(tmp_path / "specialists"), "OMP_NUM_THREADS": "1"}
    r = cli("specialist", "add", "sql", "--examples", str(ROOT / "examples" / "sql.jsonl"), "--steps", "20",
            "--route-limit", "15", "--threads", "2", "--description", "Writes one SQL query for a question about a table.",
            "--hints", "macaronic.evolve.failures:CODING_HINTS", "--grpo", env=env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "do-no-harm check for sql" in r.stdout and "passed" in r.stdout
    base = os.environ["MACARONIC_BASE"]
    here = tmp_path / "specialists" / base
    check = json.loads((here / "checks" / "sql.json").read_text())
    assert check["domain"]["ci95"][0] > 0 and check["routing"]["passed"]
    (entry,) = json.loads((tmp_path / "specialists" / "registry.json").read_text())["specialists"]
    assert entry["hints"] == "macaronic.evolve.failures:CODING_HINTS" and entry["grpo"] and entry["failures"] is None
    assert sorted(p.name for p in (here / "bundle" / "roles").iterdir()) == [
        "agent.md", "chat.md", "coding.md", "genui.md", "sql.md"]
    listed = cli("specialist", "list", env=env).stdout
    assert "sql" in listed and "user" in listed

    s = ServerProcess(["--store", str(tmp_path / "s.sqlite")], env=env, timeout=300)
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=300)
        assert "sql" in {m.id for m in c.models.list()}
        ask = [{"role": "user", "content": "SQL: how many rows are in the tickets table?"}]  # held out
        routed = c.chat.completions.create(model="macaronic", messages=ask, max_tokens=24, temperature=0)
        assert routed.model_extra["macaronic"]["specialist"] == "sql"
        assert "SELECT COUNT(*) FROM tickets" in routed.choices[0].message.content
        forced = c.chat.completions.create(model="sql", messages=ask, max_tokens=24, temperature=0)
        assert forced.choices[0].message.content.startswith("SELECT")
        chat = c.chat.completions.create(model="macaronic", messages=[
            {"role": "user", "content": "What is the capital of France?"}], max_tokens=16, temperature=0)
        assert chat.model_extra["macaronic"]["specialist"] == "chat"  # the shipped routes still hold
    finally:
        s.stop()

    r = cli("specialist", "remove", "sql", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "sql" not in cli("specialist", "list", env=env).stdout
    assert not (here / "adapters" / "sql").exists() and not (here / "router").exists()
