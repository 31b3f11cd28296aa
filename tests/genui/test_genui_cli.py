"""`macaronic genui validate FILE...`: one JSON line per file, exit 0 only if all are valid."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from macaronic.cli import main as macaronic_main
from macaronic.commands.genui import main
from macaronic.genui.tasks import make_task


def run(capsys, *argv):
    code = main(list(argv))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return code, lines


def test_valid_files_exit_zero(tmp_path, capsys):
    task = make_task("contact", 0)
    (tmp_path / "a.json").write_text(json.dumps(task.gold))
    (tmp_path / "b.json").write_text(json.dumps(task.gold["a2ui"]))
    code, lines = run(capsys, "validate", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert code == 0
    assert [(line["valid"], line["errors"], line["repaired"]) for line in lines] == [(True, [], [])] * 2
    assert lines[0]["file"].endswith("a.json")


def test_invalid_and_repaired_files_exit_one(tmp_path, capsys):
    task = make_task("todo", 0)
    (tmp_path / "fenced.json").write_text("```json\n" + json.dumps(task.gold) + "\n```")
    (tmp_path / "bad.json").write_text('{"text_response": "x", "a2ui": [{"beginRendering": {"surfaceId": "s"}}]}')
    (tmp_path / "huge.json").write_text(" " * (300 * 1024))
    code, lines = run(capsys, "validate", *(str(tmp_path / n) for n in ("fenced.json", "bad.json", "huge.json")),
                      str(tmp_path / "missing.json"))
    assert code == 1
    fenced, bad, huge, missing = lines
    assert fenced["valid"] and fenced["repaired"] == ["markdown_fence"]
    assert not bad["valid"] and bad["errors"][0]["path"] == "/a2ui/0/beginRendering/root"
    assert "cap" in huge["errors"][0]["message"]
    assert "cannot read" in missing["errors"][0]["message"]


def test_dispatch_through_macaronic_cli(tmp_path, capsys):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(make_task("weather", 0).gold))
    assert macaronic_main(["genui", "validate", str(path)]) == 0


def test_help_runs_as_a_process():
    out = subprocess.run([sys.executable, "-m", "macaronic.cli", "genui", "validate", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "FILE" in out.stdout


def test_the_genui_probe_answers_with_a_given_adapter_directory(tmp_path, capsys):
    """`macaronic genui probe --adapter-dir DIR` answers with that adapter (an evolve candidate's
    genui) on the small base; a directory that is not an adapter is refused."""
    from macaronic.engine.llm import shipped_adapters_dir
    from macaronic.commands.genui import probe as main

    genui = shipped_adapters_dir("smollm2-135m-instruct") / "genui"
    out = tmp_path / "p.json"
    assert main(["--base", "smollm2-135m-instruct", "--adapter-dir", str(genui), "--limit", "1",
                 "--max-tokens", "24", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["summary"]["n"] == 1 and "--adapter-dir" in doc["command"] and doc["rows"][0]["tokens"] > 0
    with pytest.raises(ValueError, match="adapter_config.json: missing"):
        main(["--base", "smollm2-135m-instruct", "--adapter-dir", str(tmp_path), "--limit", "1",
              "--json", str(tmp_path / "q.json")])


def test_the_probe_counts_the_request_values_a_served_card_displays():
    """`shows`: the share of a request's values found in the rendered card's text (not in
    text_response, not in attributes), case-insensitively; an invalid card shows nothing."""
    from types import SimpleNamespace

    from macaronic.genui.build import Card
    from macaronic.genui.probe import score, summary

    c = Card("s")
    c.card("root", c.column("body", c.text("t", "Flight af123", "h2"), c.text("f", "/from")))
    c.data({"from": "Paris", "to": "Rome"})  # Rome is in the data model only: not displayed
    card = {"text_response": "Your flight to Rome at 10:40.", "a2ui": c.messages("root")}
    req = {"id": "flight", "text": "...", "expects": ["Text", "Card"], "shows": ["AF123", "Paris", "Rome", "10:40"]}

    def result(content):
        return SimpleNamespace(text=content, content=content, genui={}, finish_reason="stop",
                               usage={"completion_tokens": 9})

    row = score(req, result(json.dumps(card)))
    assert row["shows"] == 0.5 and row["not_shown"] == ["Rome", "10:40"] and row["coverage"] == 1.0
    bad = score(req, result("not a card"))
    assert bad["shows"] == 0.0
    plain = score({k: v for k, v in req.items() if k != "shows"}, result(json.dumps(card)))
    assert "shows" not in plain
    assert summary([row, bad, plain])["shows"] == 0.25 and summary([row, bad, plain])["shows_n"] == 2


@pytest.mark.parametrize("which, n", [("1", 62), ("2", 30), ("3", 40), ("4", 40), ("5", 40)])
def test_the_packaged_request_sets_name_what_they_grade(which, n):
    from macaronic.genui.probe import load_requests

    known = {"Text", "Image", "Icon", "Video", "AudioPlayer", "Row", "Column", "List", "Card", "Tabs", "Divider",
             "Modal", "Button", "CheckBox", "TextField", "DateTimeInput", "MultipleChoice", "Slider"}
    requests = load_requests(which=which)
    assert len(requests) == n and len({r["id"] for r in requests}) == n
    for r in requests:
        assert r["expects"] and set(r["expects"]) <= known, r["id"]
        assert all(v.lower() in r["text"].lower() for v in r.get("shows", [])), r["id"]  # a value shown is a value named


def test_rescoring_probe_rows_adopts_strays_once(tmp_path):
    """scripts/genui_rescore.py: a row whose served card drops a component is re-closed and re-scored;
    rescoring its output changes nothing (what a probe that already adopted would have written)."""
    import runpy
    from pathlib import Path

    rescore = runpy.run_path(str(Path(__file__).resolve().parents[2] / "scripts" / "genui_rescore.py"))["rescore"]
    comps = [{"id": "name", "component": {"TextField": {"label": {"literalString": "Name"}, "text": {"path": "/f/name"}}}},
             {"id": "go-label", "component": {"Text": {"text": {"literalString": "Submit"}}}},
             {"id": "go", "component": {"Button": {"child": "go-label", "action": {"name": "send"}}}}]
    content = json.dumps({"text_response": "t", "a2ui": [{"surfaceUpdate": {"surfaceId": "s", "components": comps}},
                                                         {"beginRendering": {"surfaceId": "s", "root": "name"}}]})
    row = {"id": "signup", "raw_valid": True, "closed": [], "finish_reason": "stop", "tokens": 9, "content": content}
    once = rescore({"rows": [row]}, "1")
    assert once["rows"][0]["shows"] == 1.0 and once["rows"][0]["closed"] == ["strays_adopted"]
    assert once["rows"][0]["strays"] == 0 and once["summary"]["dropping"] == 0.0
    twice = rescore(once, "1")
    assert twice["rows"] == once["rows"]
