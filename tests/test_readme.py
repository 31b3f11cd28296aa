"""The commands the README quotes exist and run (`--help`), and CI calls the README's test command."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from macaronic.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def commands():
    for block in BLOCKS:
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line:
                yield from (part.strip() for part in line.split("&&"))


def test_the_two_commands_and_ci():
    cmds = list(commands())
    assert "scripts/setup" in cmds and "scripts/test" in cmds
    for script in ("scripts/setup", "scripts/test", ".ci/run"):
        assert os.access(ROOT / script, os.X_OK), script
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_every_quoted_macaronic_subcommand_has_help():
    quoted = {shlex.split(c)[1] for c in commands() if c.startswith(".venv/bin/macaronic") and len(shlex.split(c)) > 1}
    quoted.discard("--help")
    assert {"serve", "info", "generate", "mcp"} <= quoted
    for name in sorted(quoted):
        assert name in COMMANDS, name
        r = subprocess.run([sys.executable, "-m", "macaronic.cli", name, "--help"], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0 and "usage" in r.stdout.lower(), (name, r.stderr[-500:])


DOCS = [ROOT / "README.md", ROOT / "docs" / "BENCHMARKS.md", ROOT / "docs" / "ARCHITECTURE.md", ROOT / "docs" / "USAGE.md",
        ROOT / "pairs" / "README.md",
        *sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file()), ROOT / ".ci" / "run"]


def test_the_docs_invoke_only_what_exists():
    """`python -m macaronic.X` in the docs and scripts names a module that runs as a script, and every
    quoted `macaronic COMMAND` (a figure's command line) is a command of `macaronic --help`."""
    import importlib.util

    for doc in DOCS:
        text = doc.read_text()
        for module in re.findall(r"-m (macaronic(?:\.\w+)+)", text):
            spec = importlib.util.find_spec(module)
            assert spec and spec.origin and '__name__ == "__main__"' in Path(spec.origin).read_text(), (doc.name, module)
        for name in re.findall(r"(?:`|^    )(?:\S*/)?macaronic ([a-z][a-z-]*)", text, flags=re.M):
            assert name in COMMANDS, (doc.name, name)


def test_docs_hold_no_weights_and_past_pairs_live_in_pairs():
    """docs/ holds text and the rows that recompute figures; adapters of past pairs live in pairs/,
    each under adapters/<role>/ as an evolve candidate keeps them."""
    import json

    weights = [p for p in (ROOT / "docs").rglob("*") if p.suffix in {".safetensors", ".pt", ".bin", ".gguf"}]
    assert not weights, weights
    adapters = sorted((ROOT / "pairs").glob("*/adapters/*/adapter_model.safetensors"))
    assert adapters
    for a in adapters:
        meta = json.loads((a.parent / "macaronic.json").read_text())
        assert meta["role"] == a.parent.name and a.parent.parent.parent.name in (ROOT / "pairs" / "README.md").read_text()


def test_docs_are_a_reference_not_a_diary():
    """The README's first screen (under 60 lines) says what, why, the two commands, what the web chat
    shows and what to expect; BENCHMARKS.md is under 400 lines, no heading repeats, and every section
    quotes the command that reproduces it (STYLE.md 21)."""
    first = "\n".join(README.splitlines()[:60])
    for needle in ("**Why.**", "scripts/setup && .venv/bin/macaronic serve", "scripts/test",
                   "## What the web chat shows", "## What to expect"):
        assert needle in first, needle
    bench = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    assert len(bench.splitlines()) < 400
    sections = re.split(r"^## ", bench, flags=re.M)[1:]
    titles = [s.splitlines()[0] for s in sections]
    assert len(titles) == len(set(titles)), titles
    for s in sections:
        assert re.search(r"`[^`]*macaronic [a-z]|^    (?:\S*/)?macaronic [a-z]|tests/genui/\S+\.py", s, flags=re.M), s[:80]


def test_a_published_table_recomputes_from_its_committed_rows(monkeypatch, capsys):
    """docs/bench keeps each figure's per-task rows gzipped; `macaronic eval table` reads them and gives
    the table BENCHMARKS.md shows (the default base's served precision, its commands as quoted there)."""
    from macaronic.commands.eval_table import precision

    monkeypatch.chdir(ROOT)  # the summaries name their rows by repository-relative paths
    b = "docs/bench/"
    argv = ["--contract", "contracts/macaronic-core-v4.yaml", "--ablation", b + "bases-qwen.json",
            *(x for q in ("bf16", "int8", "int4-onecall") for x in ("--ablation", f"{b}precision-qwen-{q}.json")),
            "--speed", b + "serve-precision-qwen.json"]
    assert not (ROOT / b / "bases-qwen-v2.tasks.jsonl").exists() and (ROOT / b / "bases-qwen-v2.tasks.jsonl.gz").exists()
    assert precision(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    bench = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    assert len(rows) >= 7 and all(line in bench for line in rows), [r for r in rows if r not in bench]
