"""The external-suite probes run end to end on the small base with its shipped specialists and
router: every row answers, the routed row is routed (not the default route), JSON rows are written."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.real_model


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_instructions_probe_rows(tmp_path):
    from macaronic.commands.probe import instructions as main

    out = tmp_path / "instr.json"
    assert main(["--base", "smollm2-135m-instruct", "--limit", "3", "--max-tokens", "12", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())["categories"]["instructions"]
    assert set(doc["rows"]) == {"base", "chat", "macaronic"} and doc["n"] == 3
    assert all(r["adapter"] is None for r in doc["rows"]["base"])
    assert all(r["specialist"] == "chat" for r in doc["rows"]["chat"])
    assert all(isinstance(r["passed"], bool) and len(r["checks"]) >= 1 for r in doc["rows"]["macaronic"])


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_instructions_probe_with_tools_attached_under_another_bundle(tmp_path):
    """`--tools`: every prompt carries the toolset (a reply that calls fails its prompt); `--bundle`:
    the rows are served under that harness, and the JSON says which."""
    import shutil

    from macaronic.commands.probe import instructions as main
    from macaronic.harness import load_bundle
    from macaronic.harness.bundle import DEFAULT_BUNDLE

    bundle = tmp_path / "bundle"
    shutil.copytree(DEFAULT_BUNDLE, bundle)
    router = json.loads((bundle / "router.json").read_text())
    (bundle / "router.json").write_text(json.dumps({**router, "tools_decide": True}))
    out = tmp_path / "instr.json"
    assert main(["--base", "smollm2-135m-instruct", "--limit", "2", "--max-tokens", "12", "--models", "macaronic",
                 "--tools", "assistant", "--bundle", str(bundle), "--json", str(out)]) == 0
    full = json.loads(out.read_text())
    assert full["tools"] == "assistant" and full["harness"]["id"] == load_bundle(bundle).id != load_bundle().id
    rows = full["categories"]["instructions"]["rows"]["macaronic"]
    assert len(rows) == 2 and all(r["passed"] is False for r in rows if r["calls"])
    # every prompt either went to the agent (by the tools rule or the agent's own call) or was answered
    # by the head's specialist without the tools, after the agent declined
    assert all(r["adapter"] == "agent" or "tools-decided-no-call" in r["reason"] or r["specialist"] == "genui"
               for r in rows), rows


@pytest.mark.long
def test_bfcl_probe_rows(tmp_path):
    from macaronic.commands.probe import bfcl as main

    out = tmp_path / "bfcl.json"
    assert main(["--base", "smollm2-135m-instruct", "--categories", "simple,irrelevance", "--limit", "1",
                 "--max-tokens", "48", "--json", str(out)]) == 0
    full = json.loads(out.read_text())
    from macaronic.harness import load_bundle

    b = load_bundle()
    assert full["harness"] == {"id": b.id, "version": b.version, "tool_listing": b.tool_listing}  # the listing the rows were served under
    doc = full["categories"]
    assert set(doc) == {"simple", "irrelevance"}
    routed = doc["simple"]["rows"]["macaronic"]
    assert all(r["policy"] == "tools" and r["adapter"] == "agent" for r in routed)  # the tools rule
    assert all(r["adapter"] is None for r in doc["simple"]["rows"]["base"])


@pytest.mark.long
def test_bfcl_multi_turn_probe_runs_calls_on_the_backends(tmp_path):
    """One multi_turn_base conversation, forced to the agent: every user turn is answered, each
    step's calls are the call strings the checker replays, and the row is graded."""
    from macaronic.commands.probe import bfcl as main

    out = tmp_path / "bfcl-mt.json"
    assert main(["--base", "smollm2-135m-instruct", "--categories", "multi_turn_base", "--limit", "1",
                 "--models", "agent", "--max-tokens", "48", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["categories"]["multi_turn_base"]["rows"]["agent"]
    assert row["id"] == "multi_turn_base_0" and len(row["turns"]) == 4 and isinstance(row["passed"], bool)
    assert row["adapters"] == ["agent"] and row["steps"] >= 1
    assert all(isinstance(c, str) and c.endswith(")") for t in row["turns"] for step in t for c in step)
