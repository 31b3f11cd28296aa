from collections import Counter, defaultdict

from macaronic.router.data import ROLES, build_dataset, load_routing_data
from macaronic.router.families import FAMILIES

KEYS = {"id", "messages", "label", "family", "split", "group", "kind"}
KINDS = {"template", "bait", "ambiguous", "injection", "multiturn", "tool_result", "hand"}


def test_size_keys_and_labels():
    data = load_routing_data()
    assert len(data) >= 1000
    assert len({e["id"] for e in data}) == len(data)
    for e in data:
        assert KEYS <= set(e) and e["label"] in ROLES
        for m in e["messages"]:
            if m["role"] == "assistant":
                assert m["specialist"] in ROLES


def test_families_enough_and_disjoint_across_splits():
    assert len(FAMILIES) >= 40
    per_role = Counter(f.role for f in FAMILIES)
    assert all(per_role[r] >= 8 for r in ROLES)
    splits = defaultdict(set)
    for e in load_routing_data():
        splits[e["family"]].add(e["split"])
    assert all(len(s) == 1 for s in splits.values())


def test_every_kind_present_and_splits_cover_roles():
    data = load_routing_data()
    assert {e["kind"] for e in data} == KINDS
    assert {e["kind"] for e in load_routing_data("test")} == KINDS
    for split in ("train", "dev", "test"):
        assert {e["label"] for e in load_routing_data(split)} == set(ROLES)
        assert {"injection", "multiturn", "tool_result", "bait"} <= {e["kind"] for e in load_routing_data(split)}


def test_deterministic():
    assert build_dataset() == build_dataset()
    assert load_routing_data("dev") == load_routing_data("dev")


def test_paraphrase_groups_injection_twins_and_tool_results():
    data = load_routing_data()
    by_id = {e["id"]: e for e in data}
    groups = defaultdict(list)
    for e in data:
        groups[e["group"]].append(e)
    template_groups = [g for g in groups.values() if g[0]["kind"] == "template"]
    assert template_groups and all(len(g) >= 3 and len({x["messages"][-1]["content"] for x in g}) == len(g)
                                   for g in template_groups)
    injections = [e for e in data if e["kind"] == "injection"]
    assert len(injections) >= 100
    for e in injections:
        twin = by_id[e["twin"]]
        assert twin["label"] == e["label"] and twin["split"] == e["split"]
        assert twin["messages"][-1]["content"] in e["messages"][-1]["content"]
    tools = [e for e in data if e["kind"] == "tool_result"]
    for e in tools:
        call, result = e["messages"][-2], e["messages"][-1]
        assert result["role"] == "tool" and call["tool_calls"][0]["id"] == result["tool_call_id"]
        assert e["label"] == call["specialist"]
    # Some tool results belong to an adapter other than the request's intent: stickiness matters.
    assert any(e["label"] != by_id[e["id"].rsplit("/tool", 1)[0]]["label"] for e in tools)


def test_bait_cases_as_specified():
    bait = [e for e in load_routing_data() if e["kind"] == "bait"]
    assert any(e["label"] == "chat" and "Python" in e["messages"][-1]["content"] for e in bait)
    assert any(e["label"] == "agent" and "<div" in e["messages"][-1]["content"] for e in bait)
    assert all(e["label"] == "coding" for e in load_routing_data() if e["kind"] == "ambiguous")
