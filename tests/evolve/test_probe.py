"""`macaronic evolve probe`: the hand-written agent requests are sound (every gold action succeeds
on the seeded state, every write changes it, every fact is something a tool says), and the probe
grades pairs of a lineage side by side with a paired comparison."""

from __future__ import annotations

import json

import pytest


def test_the_hand_written_requests_replay_cleanly():
    from macaronic.evolve.probe import load_requests
    from macaronic.substrate.tasks import FAMILIES, initial_hash

    units = load_requests()
    assert len(units) >= 30 and len({t.id for t, _ in units}) == len(units)
    assert {t.family for t, _ in units} >= {"lookup", "single_write", "verb", "compose", "policy"}
    templated = {f.name for f in FAMILIES}
    for task, _ in units:
        t = task.obj
        assert t.family == "hand-written" and t.family not in templated
        ep = t.start()
        try:
            outs = [ep.call(name, args) for name, args in t.gold_actions]
            assert not [o for o in outs if isinstance(o, dict) and "error" in o], (t.id, outs)
            writes = [n for n, _ in t.gold_actions if not n.startswith(("list_", "search_", "get_"))]
            changed = ep.state_hash() != initial_hash(t.state)
            assert changed == bool(writes), t.id
            said = json.dumps(outs)
            # a policy refusal's wording comes from the refused write, which the gold leaves out
            assert all(f in said for f in t.required_facts) or task.family == "policy", (t.id, t.required_facts)
        finally:
            ep.close()


def test_a_bad_pair_or_missing_lineage_is_a_clear_error(tmp_path, capsys):
    from macaronic.commands.evolve import probe as main

    assert main(["--workdir", str(tmp_path), "--contract", "contracts/macaronic-core-v5.yaml",
                 "--json", str(tmp_path / "p.json")]) == 2
    assert "no lineage" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--workdir", str(tmp_path)])
