"""docs/bench/route-qwen/prefill_compare.py: two policies of one route bench report, or one policy across two
reports (--against: two router states on the same turns), paired per turn."""

import json
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "bench" / "route-qwen" / "prefill_compare.py"


def _report(state: str, preds: dict[str, list[str]], labels: list[str]) -> dict:
    rows = {p: {"rows": [{"id": f"t{i}", "label": y, "pred": x} for i, (x, y) in enumerate(zip(ps, labels))]}
            for p, ps in preds.items()}
    return {"state_id": state + "0" * 8, "sets": {"hand": rows}}


def _run(monkeypatch, capsys, *argv) -> list[str]:
    monkeypatch.setattr(sys, "argv", ["prefill_compare.py", *argv])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    return capsys.readouterr().out.strip().splitlines()


def test_one_policy_across_two_states_and_two_policies_in_one(tmp_path, monkeypatch, capsys):
    labels = ["chat", "agent", "coding", "genui"]
    old = _report("aaaa", {"prefill": ["chat", "chat", "coding", "chat"], "cascade": labels}, labels)
    new = _report("bbbb", {"prefill": labels, "cascade": ["chat", "chat", "chat", "chat"]}, labels)
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    out = _run(monkeypatch, capsys, str(tmp_path / "new.json"), "prefill", "--against", str(tmp_path / "old.json"))
    assert out[0] == ("| set | turns | prefill aaaa0000 acc / macro-F1 | prefill bbbb0000 acc / macro-F1 | "
                      "prefill bbbb0000 − prefill aaaa0000, accuracy |")
    assert out[2].startswith("| hand | 4 | 0.500 / ") and "| 1.000 / 1.000 | +0.500 [" in out[2]
    out = _run(monkeypatch, capsys, str(tmp_path / "new.json"), "cascade", "--against", str(tmp_path / "old.json"),
               "--only", "t1")
    assert out[2].startswith("| hand t1 | 1 | 1.000 / 1.000 | 0.000 / ") and out[2].split("|")[5].strip().startswith("-1.000")
    out = _run(monkeypatch, capsys, str(tmp_path / "new.json"))  # prefill against cascade within one report
    assert out[0].startswith("| set | turns | cascade acc / macro-F1 | prefill acc / macro-F1 |")
    assert out[2].startswith("| hand | 4 | 0.250 / ") and "| 1.000 / 1.000 | +0.750 [" in out[2]
