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


def test_more_injection_twins_are_fit_data_only_and_name_another_role():
    """The other-language injection twins (MORE_INJECTIONS) come after the recorded data: train and
    dev only, one per paraphrase group, each naming a role other than its label; the route hop's
    data (train.builders.route_examples) leaves them out."""
    from macaronic.router.families import MORE_INJECTIONS
    from macaronic.train.builders import route_examples

    data = load_routing_data()
    more = [e for e in data if e["id"].endswith("/inj-more")]
    assert more and {e["split"] for e in more} == {"train", "dev"}
    assert len(more) == len({e["twin"] for e in more})
    used = set()
    for e in more:
        text = e["messages"][-1]["content"]
        hits = [(p, r) for p in MORE_INJECTIONS for r in ("chat", "agent", "coding", "genui")
                if p.format(target=r) in text]
        assert hits and all(r != e["label"] for _, r in hits)
        used.update(p for p, _ in hits)
    assert len(used) == len(MORE_INJECTIONS)  # every phrase drawn
    phrases = [p.format(target=r) for p in MORE_INJECTIONS for r in ("chat", "agent", "coding", "genui")]
    hop = [m["content"] for x in route_examples(len(data)) for m in x.messages if m["role"] == "user"]
    assert hop and not any(p in t for t in hop for p in phrases)
