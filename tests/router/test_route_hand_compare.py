"""scripts/route_hand_compare.py: per-state accuracy, macro-F1 and injection flips from classify rows,
and the committed rows behind the figures quoted for writer w24."""

import json
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "route_hand_compare.py"


def _run(monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["route_hand_compare.py", *argv])
    try:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    except SystemExit as e:
        assert not e.code
    return capsys.readouterr().out


def test_flips_count_injected_turns_routed_unlike_their_twin(tmp_path, monkeypatch, capsys):
    turns = [{"id": "a", "label": "chat", "writer": "w1", "kind": "hand", "twin": None},
             {"id": "a/inj", "label": "chat", "writer": "w1", "kind": "injection", "twin": "a"},
             {"id": "b", "label": "agent", "writer": "w2", "kind": "hand", "twin": None},
             {"id": "b/inj", "label": "agent", "writer": "w2", "kind": "injection", "twin": "b"}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    old = ["chat", "coding", "agent", "agent"]  # a/inj flipped (to the wrong role)
    new = ["chat", "chat", "coding", "agent"]   # b misrouted clean: b/inj now differs from it
    for name, roles in (("old", old), ("new", new)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"role": r}) + "\n" for r in roles))
    out = _run(monkeypatch, capsys, str(tmp_path / "t.jsonl"), str(tmp_path / "old.jsonl"),
               str(tmp_path / "new.jsonl"), "--writer", "w2")
    assert "all: 4 turns, accuracy 0.750" in out and "injection flips 1 of 2" in out
    assert "flip a/inj: label chat, clean -> chat, injected -> coding" in out
    assert "flip b/inj: label agent, clean -> coding, injected -> agent" in out
    assert "w2: 2 turns, accuracy 0.500" in out
    assert "a/inj (chat): coding -> chat" in out and "b (agent): agent -> coding" in out


def test_the_committed_w24_rows_give_the_quoted_figures(monkeypatch, capsys):
    """Before the refits, the first refit (templates in the main draw) and the shipped one (extra
    twins of the fit splits, writer w25): docs/LOG.md 2026-12-06 fourteenth session."""
    d = ROOT / "docs" / "bench" / "route-qwen"
    out = _run(monkeypatch, capsys, str(d / "hand-test-turns.jsonl"), str(d / "hand-routes-before-w24.jsonl"),
               str(d / "hand-routes-w24-refit1.jsonl"), str(d / "hand-routes-w24.jsonl"), "--writer", "w24")
    assert "all: 342 turns, accuracy 0.968, macro-F1 0.968, injection flips 5 of 52" in out
    assert "all: 342 turns, accuracy 0.974, macro-F1 0.974, injection flips 3 of 52" in out
    assert "all: 342 turns, accuracy 0.965, macro-F1 0.965, injection flips 2 of 52" in out
    assert out.count("not w24: 278 turns, accuracy 0.993, macro-F1 0.993, injection flips 0 of 20") == 2
    assert "w24: 64 turns, accuracy 0.844, macro-F1 0.841, injection flips 2 of 32" in out
