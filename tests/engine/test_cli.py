"""The engine's command line, run as real subprocesses on a tiny model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_generate_streams_and_rejects_unknown_adapter(tiny_dirs):
    r = run("generate", "--base", str(tiny_dirs["llama"]), "--prompt", "hi", "--max-tokens", "5", "--stats")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stderr.strip().splitlines()[-1])
    assert stats["completion_tokens"] <= 5
    r = run("generate", "--base", str(tiny_dirs["llama"]), "--prompt", "hi", "--adapter", "nope")
    assert r.returncode == 2 and "unknown adapter" in r.stderr


# every command and every stage under one (`macaronic train grpo`, ...): the parent's --help names the stage
STAGES = {"serve": [], "store": [], "experience": ["export", "forget"], "chat": [], "generate": [], "info": [],
          "route": [], "mcp": [], "pair": ["show", "diff", "register", "log", "rollback"],
          "export": [], "genui": ["validate", "probe"], "probe": ["bfcl", "instructions"],
          "train": ["grpo", "compare", "check", "distill", "sample-chat", "sample-coding"], "contract": ["check", "seal", "strata"],
          "eval": ["ablate", "report-only", "table", "toolnames"], "evolve": ["probe"],
          "bench": ["vllm", "modes", "bases"], "specialist": ["add", "list", "remove"], "llamacpp": []}
HELP = """
import contextlib, io, json, sys
from macaronic.cli import main
out = {}
for argv in json.loads(sys.argv[1]):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            rc = main(argv + ["--help"])
        except SystemExit as e:
            rc = e.code
    out[" ".join(argv)] = [rc, buf.getvalue()]
print(json.dumps(out))
"""


def test_every_command_and_stage_answers_help():
    from macaronic.cli import COMMANDS

    assert set(STAGES) == set(COMMANDS)
    argvs = [[c] for c in STAGES] + [[c, s] for c, stages in STAGES.items() for s in stages] + [["eval", "table", t]
                                                                                               for t in ("bases", "precision")]
    r = subprocess.run([sys.executable, "-c", HELP, json.dumps(argvs)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    for cmd, (rc, text) in got.items():
        assert rc in (0, None) and "usage: macaronic " + cmd in text, (cmd, rc, text[:300])
    for c, stages in STAGES.items():
        assert all(s in got[c][1] for s in stages), (c, got[c][1][-600:])
