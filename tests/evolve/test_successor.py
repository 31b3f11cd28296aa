"""Successor-building pieces: budget and plan parsing, RFT data from graded successes, routing
examples from logged outcomes, harness edits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from macaronic.evolve.config import Budget, Plan, step_spec
from macaronic.evolve.successor import harness_edit, macro_recall, routing_examples, successes


class FakeContract:
    """Only .suite(name) -> spec with kind and role is used by these functions."""

    class S:
        def __init__(self, kind, role):
            self.kind, self.role = kind, role

    def suite(self, name):
        return {"agent": self.S("agent", "agent"), "chat": self.S("chat", "chat"), "mixed": self.S("mixed", None)}[name]


def mixed_row(turns, passed=False):
    msgs = []
    for t in turns:
        msgs += [{"role": "user", "content": t["text"]}, {"role": "assistant", "content": t["reply"]}]
    return {"suite": "mixed", "family": "f", "passed": passed, "messages": msgs,
            "detail": {"turns": [{"gold": t["gold"], "routed": t["routed"], "route_ok": t["gold"] == t["routed"],
                                  "answer_ok": t["ok"]} for t in turns]}}


ROWS = [
    {"suite": "agent", "family": "a", "passed": True, "messages": [{"role": "user", "content": "add x"},
                                                                  {"role": "assistant", "content": "done"}]},
    {"suite": "agent", "family": "a", "passed": True, "messages": [{"role": "user", "content": "add x"},
                                                                  {"role": "assistant", "content": "done"}]},
    {"suite": "agent", "family": "a", "passed": False, "messages": [{"role": "user", "content": "add y"},
                                                                   {"role": "assistant", "content": "?"}]},
    mixed_row([{"text": "capital of Peru?", "reply": "Lima", "gold": "chat", "routed": "chat", "ok": True},
               {"text": "write f", "reply": "nope", "gold": "coding", "routed": "chat", "ok": False}]),
]


def test_budget_and_plan():
    assert Budget.parse("samples=3,train_steps=10") == Budget(samples=3, train_steps=10)
    b = Budget.parse("dev_per_family=2,dev_per_family.mixed=1,dev_per_family.agent=4,workers=8,max_tokens=none")
    assert (b.dev_for("mixed"), b.dev_for("agent"), b.dev_for("chat"), b.workers) == (1, 4, 2, 8)
    assert Budget.parse(b.text()) == b  # what the loop hands the reference process
    with pytest.raises(ValueError):
        Budget.parse("dev_per_family.mixed=one")
    with pytest.raises(ValueError):
        Budget.parse("sample=3")
    plan = Plan(generations=(('{"operator": "router_refit", "steps": ["router_refit"]}',),
                             ('{"operator": "e", "steps": ["{\\"harness_edit\\": {\\"file\\": \\"x\\"}}"]}',)))
    assert plan.candidates(1)[0]["steps"] == ["router_refit"] and plan.candidates(5) == plan.candidates(2)
    assert step_spec(plan.candidates(2)[0]["steps"][0]) == ("harness_edit", {"file": "x"})
    with pytest.raises(ValueError, match="unknown operators"):
        Plan.load(None, "prompt,telepathy")


def test_rft_data_is_graded_successes_in_the_served_layout():
    from macaronic.harness import load_bundle
    from macaronic.prompts import prompt_head
    from macaronic.substrate.tools import openai_tools

    bundle = load_bundle()
    found = successes(FakeContract(), bundle, ROWS)
    assert sorted(found) == ["agent", "chat"]
    (agent,) = found["agent"]  # the duplicate success is one example, the failure none
    head = prompt_head(bundle, "agent", openai_tools())  # the compact tool list, as served
    assert agent["messages"][:2] == head and "<tools>" not in agent["messages"][0]["content"]
    assert agent["messages"][2:] == ROWS[0]["messages"]
    (chat,) = found["chat"]  # only the mixed turn that was routed right and answered right
    assert chat["messages"][-1]["content"] == "Lima"


def test_routing_examples_use_the_graders_correct_role():
    ex = routing_examples(FakeContract(), ROWS)
    labels = [(e["messages"][-1]["content"], e["label"]) for e in ex]
    assert labels == [("add x", "agent"), ("add y", "agent"), ("capital of Peru?", "chat"), ("write f", "coding")]
    assert macro_recall(["chat", "chat", "agent"], ["chat", "coding", "agent"]) == pytest.approx((1 + 0 + 1) / 3)


def test_harness_edits_apply_and_are_validated(tmp_path):
    from macaronic.harness import DEFAULT_BUNDLE, load_bundle

    h = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h")
    ch = harness_edit(h, {"file": "router.json", "merge": {"min_confidence": 0.9}, "note": "n"})
    assert ch["step"] == "harness_edit" and load_bundle(h).router["min_confidence"] == 0.9
    harness_edit(h, {"file": "roles/chat.md", "replace": ["directly", "in one sentence"]})
    assert "in one sentence" in load_bundle(h).role("chat").system_prompt
    with pytest.raises(ValueError, match="not found"):
        harness_edit(h, {"file": "summary.md", "replace": ["no such text", "x"]})
    with pytest.raises(ValueError, match="outside"):
        harness_edit(h, {"file": "../evil.json", "text": "{}"})
    with pytest.raises(Exception, match="route/user.md"):
        harness_edit(h, {"file": "route/user.md", "text": "no placeholder"})
    assert json.loads((h / "router.json").read_text())["min_confidence"] == 0.9


def test_rft_retrains_a_specialist_in_a_separate_process(tmp_path):
    """Graded successes -> `macaronic train` on the tiny base -> a new adapter, hence a new pair;
    untouched roles keep their adapters."""
    from macaronic.engine.config import ModelArgs
    from macaronic.evolve.successor import build_successor
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest
    from macaronic.testing import make_random_adapter, make_tiny_model_dir

    base = make_tiny_model_dir(tmp_path / "base", seed=5)
    args = ModelArgs.from_dir(base)
    ads = {r: make_random_adapter(tmp_path / r, args, seed=i, mode="turn", role=r)
           for i, r in enumerate(["chat", "agent"])}
    champ = PairManifest.build(base, ads, DEFAULT_BUNDLE)
    # forced chat rows: a routed turn's prompt carries the tool list, over max_len in the tiny byte tokenizer
    rows = [{"suite": "chat", "family": "f", "passed": True,
             "messages": [{"role": "user", "content": f"capital of {c}?"}, {"role": "assistant", "content": city}]}
            for c, city in [("Peru", "Lima"), ("Japan", "Tokyo")]]
    ctx = {"contract": FakeContract(), "budget": Budget(min_successes=2, train_steps=2)}
    child, changes, _ = build_successor(champ, rows, ("rft",), tmp_path / "cand", ctx)
    by_role = {c["role"]: c for c in changes}
    assert by_role["chat"]["retrained"] and by_role["chat"]["successes"] == 2
    assert not by_role["agent"]["retrained"] and "fewer than 2" in by_role["agent"]["reason"]
    assert child.adapters["agent"] == champ.adapters["agent"]
    assert child.adapters["chat"]["id"] != champ.adapters["chat"]["id"]
    assert child.id != champ.id and child.verify() == []
    assert (tmp_path / "cand" / "adapters" / "chat" / "adapter_model.safetensors").is_file()
    data = [json.loads(l) for l in open(child.data[0])]
    assert [d["messages"][-1]["content"] for d in data] == ["Lima", "Tokyo"]
    assert not (tmp_path / "cand.tmp").exists()


def test_warm_rft_continues_from_the_champion_adapter(tmp_path):
    """`{"rft": {"warm": true}}`: `macaronic train --init-adapter` from the champion's adapter for
    a few steps, with a replay of at most twice the successes."""
    from macaronic.engine.config import ModelArgs
    from macaronic.evolve.successor import build_successor
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest
    from macaronic.testing import make_random_adapter, make_tiny_model_dir

    base = make_tiny_model_dir(tmp_path / "base", seed=5)
    args = ModelArgs.from_dir(base)
    ads = {"chat": make_random_adapter(tmp_path / "chat", args, seed=1, mode="turn", role="chat")}
    champ = PairManifest.build(base, ads, DEFAULT_BUNDLE)
    rows = [{"suite": "chat", "family": "f", "passed": True, "hinted": i == 1,
             "messages": [{"role": "user", "content": f"capital of {c}?"}, {"role": "assistant", "content": city}]}
            for i, (c, city) in enumerate([("Peru", "Lima"), ("Japan", "Tokyo")])]
    ctx = {"contract": FakeContract(), "budget": Budget(min_successes=2)}
    step = json.dumps({"rft": {"roles": ["chat"], "warm": True, "steps": 2}})
    child, changes, _ = build_successor(champ, rows, (step,), tmp_path / "cand", ctx)
    (ch,) = changes
    assert ch["retrained"] and ch["warm"] and ch["train_steps"] == 2 and ch["hinted"] == 1
    meta = json.loads((tmp_path / "cand" / "adapters" / "chat" / "macaronic.json").read_text())
    assert meta["training"]["config"]["init_adapter"] == str(tmp_path / "chat") and child.adapters["chat"]["id"] != champ.adapters["chat"]["id"]


def test_failure_data_composes_tools_outside_every_split():
    from macaronic.evolve.failure_data import SKILLS, examples
    from macaronic.substrate.tasks import FAMILIES

    def tools(domain):
        return frozenset(domain.split("+"))

    composed = {tools(f.domain) for f in FAMILIES}  # every split's compositions, test and dev included
    fams = SKILLS["lookup_then_act"]
    assert len(fams) == 5 and not {tools(f.domain) for f in fams} & composed
    ex = examples("lookup_then_act", 10)
    assert len(ex) == 10 and all(e["messages"][0]["role"] == "system" and "Tools (" in e["messages"][0]["content"]
                                 for e in ex)
    calls = [[m["content"].split('"name": "')[1].split('"')[0] for m in e["messages"]
              if m["role"] == "assistant" and "<tool_call>" in m["content"]] for e in ex]
    # a lookup, then a write into another tool that carries what the lookup returned
    assert all(len(c) == 2 and c[0].startswith(("list_", "search_")) and not c[1].startswith(("list_", "search_"))
               for c in calls)
    assert {c[1] for c in calls} == {"add_reminder", "create_note", "create_event"}


def test_calls_together_makes_independent_calls_in_one_step():
    """Two lookup-then-act requests in one message: both lookups in one assistant message, both
    results after it in order, both writes in the next, a reply that names both writes; on tool
    compositions no split holds."""
    import dataclasses

    from macaronic.evolve.failure_data import SKILLS, examples, make
    from macaronic.substrate.tasks import FAMILIES, AgentTask
    from macaronic.train.builders import agent_turns

    composed = {frozenset(f.domain.split("+")) for f in FAMILIES}
    fams = SKILLS["calls_together"]
    assert len(fams) == 5 and not {frozenset(f.domain.split("+")) for f in fams} & composed
    for e in examples("calls_together", 10):
        turns = [m for m in e["messages"] if m["role"] in ("assistant", "tool")]
        kinds = [m["role"] if m["role"] == "tool" else m["content"].count("<tool_call>") for m in turns]
        assert kinds == [2, "tool", "tool", 2, "tool", "tool", 0], kinds
        names = [[c.split('"')[0] for c in m["content"].split('"name": "')[1:]] for m in turns if m["role"] == "assistant"]
        assert all(n.startswith(("list_", "search_")) for n in names[0]) and len(set(names[0])) == 2
        assert not any(n.startswith(("list_", "search_")) for n in names[1]) and len(set(names[1])) == 2
        assert turns[-1]["content"].count("I ") >= 2  # both writes named
    t = make(fams[0], 10_000)
    assert t.groups == (2, 2) and AgentTask.from_dict(t.to_dict()) == t
    assert "groups" not in dataclasses.replace(t, groups=()).to_dict()  # other tasks' dicts as before
    with pytest.raises(ValueError, match="do not cover"):
        agent_turns(dataclasses.replace(t, groups=(2, 1)))


def test_a_stack_adopts_its_parts_training_instead_of_training_again(tmp_path):
    """The stack of a harness edit and a trained part: the edit is applied again, the trained
    adapter is the part's own (same id, its data file recorded), nothing is retrained."""
    from macaronic.evolve.loop import _adopting
    from macaronic.evolve.search import Candidate
    from macaronic.evolve.successor import build_successor
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    def adapter(d, text):
        d.mkdir(parents=True)
        (d / "adapter_config.json").write_text(json.dumps({"r": 8, "note": text}))
        return d

    harness = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h0", ignore=shutil.ignore_patterns("__pycache__"))
    champ = PairManifest.build(None, {"agent": adapter(tmp_path / "a0", "champion"),
                                      "chat": adapter(tmp_path / "c0", "champion")}, harness, base_fp="f" * 64)
    gdir = tmp_path / "gen-001"
    fd = json.dumps({"failure_data": {"role": "agent", "steps": 3}}, sort_keys=True)
    part = gdir / "cand-02"  # what building cand-02 left behind
    shutil.copytree(harness, part / "harness")
    (part / "data").mkdir()
    (part / "data" / "failure-agent-x.jsonl").write_text("{}\n")
    trained = PairManifest.build(None, {"agent": adapter(part / "adapters" / "agent", "trained"),
                                        "chat": tmp_path / "c0"}, part / "harness",
                                 data=(str(part / "data" / "failure-agent-x.jsonl"),), base_fp="f" * 64)
    trained.save(part / "pair.json")
    (part / "changes.json").write_text(json.dumps({"changes": [{"step": "failure_data", "role": "agent"}],
                                                   "training_config": {"steps": [fd]}}))
    edit = json.dumps({"harness_edit": {"file": "roles/chat.md", "append": "Be brief."}}, sort_keys=True)
    stack = Candidate("stack", "stack", champ.id, (edit, fd), ("adapter:agent", "prompt:chat"), "cand-01 + cand-02")
    steps = _adopting(stack, gdir)
    assert steps[0] == edit and step_spec(steps[1]) == ("adopt", {"dir": str(part), "step": fd})
    m, changes, _ = build_successor(champ, [], steps, gdir / "stack", {"budget": Budget()})  # no model, no trainer
    assert m.adapters["agent"]["id"] == trained.adapters["agent"]["id"]
    assert m.adapters["chat"]["id"] == champ.adapters["chat"]["id"]
    assert "Be brief." in (gdir / "stack" / "harness" / "roles" / "chat.md").read_text()
    assert [c["step"] for c in changes] == ["harness_edit", "failure_data"] and changes[1]["adopted_from"] == "cand-02"
    assert m.data == (str(part / "data" / "failure-agent-x.jsonl"),)


def test_state_facts_data_states_what_the_write_returned():
    """Each episode: a lookup, a write, and a final reply holding every required fact; each fact
    comes from a tool result, not from the request; no family of any split is reused."""
    from macaronic.evolve.failure_data import SKILLS, examples
    from macaronic.substrate.tasks import FAMILIES

    assert not {f.name for f in SKILLS["state_facts"]} & {f.name for f in FAMILIES}
    ex = examples("state_facts", 9)
    assert len(ex) == 9
    for e in ex:
        msgs = e["messages"]
        request = next(m["content"] for m in msgs if m["role"] == "user")
        calls = [m["content"] for m in msgs if m["role"] == "assistant" and "<tool_call>" in m["content"]]
        results = " ".join(m["content"] for m in msgs if m["role"] == "tool")
        final = msgs[-1]["content"]
        assert len(calls) == 2 and ('"name": "list_' in calls[0] or '"name": "search_' in calls[0])
        facts = final.split(". ", 1)[1].rstrip(".").split(", ") if ". " in final else []
        assert facts and all(f in results and f not in request for f in facts), final


def test_pick_tools_data_looks_where_the_fact_lives_and_writes_with_the_requested_tool():
    """Lookups with the tools the other skills leave out, writes chosen by the request's verb,
    compositions in no split, some requests phrased as a wish or a question; every gold write
    uses an id or value the lookup returned."""
    from macaronic.evolve.failure_data import SKILLS, examples
    from macaronic.substrate.tasks import FAMILIES

    composed = {frozenset(f.domain.split("+")) for f in FAMILIES if "+" in f.domain}
    fams = SKILLS["pick_tools"]
    assert not {f.name for f in fams} & {f.name for f in FAMILIES}
    assert not {frozenset(f.domain.split("+")) for f in fams} & composed
    ex = examples("pick_tools", 16)
    assert len(ex) == 16
    calls, wishes = [], 0
    for e in ex:
        msgs = e["messages"]
        request = next(m["content"] for m in msgs if m["role"] == "user")
        wishes += request.startswith(("Could you", "I'd like"))
        cs = [json.loads(m["content"].split("<tool_call>")[1].split("</tool_call>")[0]) for m in msgs
              if m["role"] == "assistant" and "<tool_call>" in m["content"]]
        assert len(cs) == 2 and cs[0]["name"].startswith(("list_", "search_"))
        result = next(m["content"] for m in msgs if m["role"] == "tool")
        looked_up = [str(v) for k, v in cs[1]["arguments"].items() if k.endswith("_id") or k in ("body", "email")]
        assert looked_up and all(v.split("@")[0] in result for v in looked_up), (request, cs)
        calls.append((cs[0]["name"], cs[1]["name"]))
    assert {c[0] for c in calls} == {"search_notes", "list_reminders", "search_contacts"}
    assert {c[1] for c in calls} == {"append_to_note", "create_note", "delete_reminder", "update_contact"}
    assert wishes >= 4


def test_find_person_data_carries_one_contacts_field_into_another_contact():
    """A person's phone, company or email looked up in the contacts (never in the calendar) and
    written onto a second contact: two lookups, one update whose only field is the one the request
    names and whose value the first lookup returned; contacts alone, families in no split."""
    from macaronic.evolve.failure_data import SKILLS, examples
    from macaronic.substrate.tasks import FAMILIES

    assert not {f.name for f in SKILLS["find_person"]} & {f.name for f in FAMILIES}
    assert {f.domain for f in SKILLS["find_person"]} == {"contacts"}
    ex = examples("find_person", 12)
    assert len(ex) == 12
    fields = set()
    for e in ex:
        msgs = e["messages"]
        request = next(m["content"] for m in msgs if m["role"] == "user")
        cs = [json.loads(m["content"].split("<tool_call>")[1].split("</tool_call>")[0]) for m in msgs
              if m["role"] == "assistant" and "<tool_call>" in m["content"]]
        results = [json.loads(m["content"].split("<tool_response>")[1].split("</tool_response>")[0])
                   for m in msgs if m["role"] == "tool"]
        assert [c["name"] for c in cs] == ["search_contacts", "search_contacts", "update_contact"]
        src, dst = results[0]["contacts"][0], results[1]["contacts"][0]
        assert src["name"] in request and dst["name"] in request and src["id"] != dst["id"]
        (field,) = set(cs[2]["arguments"]) - {"contact_id"}
        assert cs[2]["arguments"] == {"contact_id": dst["id"], field: src[field]} and src[field] != dst[field]
        assert {"phone": "phone", "company": "company", "email": "email"}[field] in request
        assert results[2]["updated"][field] == src[field]
        fields.add(field)
    assert fields == {"phone", "company", "email"}


def test_show_values_cards_are_valid_show_every_value_and_use_only_train_components():
    """GenUI failure data: card families in no split of the GenUI suite, gold cards that pass L1 and
    show every required value (L2 = 1), built from the components of the train families only (the
    dev and test families' own components, TextField, Tabs, Image, MultipleChoice, Slider, stay
    held out), in the served genui layout."""
    from macaronic.evolve.failure_data import ROLE, SKILLS, examples, genui_task
    from macaronic.genui.grade import grade
    from macaronic.genui.tasks import FAMILIES, TEST_FAMILIES, make_task

    assert ROLE["show_values"] == "genui" and not {f.name for f in SKILLS["show_values"]} & set(FAMILIES)

    def types(card):
        return {t for m in card["a2ui"] for c in m.get("surfaceUpdate", {}).get("components", []) for t in c["component"]}

    held_out = {"form", "itinerary", *TEST_FAMILIES}
    train_types = set().union(*(types(make_task(f, 0).gold) for f in FAMILIES if f not in held_out))
    for fam in SKILLS["show_values"]:
        for i in range(4):
            t = genui_task(fam, i, seed=3)
            g = grade(t, json.dumps(t.gold))
            assert g["l1_valid"] and g["l2_content"] == 1.0 and len(t.requirements.values) >= 3, (fam.name, g)
            assert types(t.gold) <= train_types, (fam.name, types(t.gold) - train_types)
    ex = examples("show_values", 10, seed=1)
    assert len(ex) == 10 and len({e["messages"][-2]["content"] for e in ex}) == 10
    assert all(e["role"] == "genui" and "Data:" in e["messages"][-2]["content"] for e in ex)
    assert ex[0]["messages"][0]["role"] == "system"


def test_show_values_version_3_writes_its_cards_inline_and_version_1_as_before():
    """Data version 3: the same requests, each card inline (no data model, no template: every value
    in the component that shows it), still valid and showing every value (L2 = 1 against its task);
    version 1 keeps the bound cards; card_style leaves a reply that is not a card alone."""
    from macaronic.evolve.failure_data import DATA_VERSION, SKILLS, card_style, examples, genui_task, step_version
    from macaronic.genui.grade import grade

    assert DATA_VERSION == 3 and step_version(["show_values"]) == 3 and step_version(["find_person"]) == 2
    old, new = examples("show_values", 10, 4, 1), examples("show_values", 10, 4, 3)
    assert [e["messages"][:-1] for e in old] == [e["messages"][:-1] for e in new]
    assert all("dataModelUpdate" in e["messages"][-1]["content"] for e in old)
    fams = SKILLS["show_values"]
    for i, e in enumerate(new):
        reply = e["messages"][-1]["content"]
        assert "dataModelUpdate" not in reply and "template" not in reply and '"path"' not in reply
        g = grade(genui_task(fams[i % len(fams)], i // len(fams), 4), reply)
        assert g["l1_valid"] and g["l2_content"] == 1.0, g
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]}
    assert card_style(chat, 3) == chat and card_style(old[0], 2) == old[0]


def test_fill_placeholder_data_writes_the_looked_up_value():
    """Each request holds a <...> placeholder; the gold write carries a value from the lookup's
    result in its place, never the placeholder; compositions are those of lookup-then-act."""
    import re

    from macaronic.evolve.failure_data import SKILLS, examples

    assert {f.domain for f in SKILLS["fill_placeholders"]} <= {f.domain for f in SKILLS["lookup_then_act"]}
    for e in examples("fill_placeholders", 8):
        msgs = e["messages"]
        request = next(m["content"] for m in msgs if m["role"] == "user")
        write = [m["content"] for m in msgs if m["role"] == "assistant" and "<tool_call>" in m["content"]][1]
        assert re.search(r"<[^<>]+>", request) and not re.search(r"<[^<>/]+>", write.replace("<tool_call>", ""))


def _champion_with_replay(tmp_path, monkeypatch, lr=None):
    """A champion whose agent adapter ships 40 replayable examples (and records `lr`), and a recorder
    in place of the trainer's process: (champion, adapter dir, runs of (role, rows, steps, init, lr))."""
    from macaronic.evolve import successor
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    a0 = tmp_path / "a0"
    a0.mkdir()
    (a0 / "adapter_config.json").write_text(json.dumps({"r": 8}))
    if lr is not None:
        (a0 / "macaronic.json").write_text(json.dumps({"training": {"config": {"lr": lr}}}))
    (a0 / "data.jsonl").write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"replayed {i}"}]}) + "\n"
                                           for i in range(40)))
    harness = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h0", ignore=shutil.ignore_patterns("__pycache__"))
    champ = PairManifest.build(None, {"agent": a0}, harness, base_fp="f" * 64)
    runs = []

    def train(champion, role, data, out_dir, meta, steps, init):  # the trainer's process, not run here
        runs.append((role, [json.loads(l) for l in data.read_text().splitlines()], steps, init, meta["lr"]))
        out_dir.mkdir(parents=True)
        (out_dir / "adapter_config.json").write_text(json.dumps({"r": 8, "trained": True}))

    monkeypatch.setattr(successor, "_train", train)
    return champ, a0, runs


def test_failure_data_for_several_skills_trains_one_adapter_on_all_of_them(tmp_path, monkeypatch):
    """A candidate for two failing skills: one data file with each skill's episodes and as many
    replayed, trained once, warm, for the per-skill steps times the number of skills."""
    from macaronic.evolve import successor
    from macaronic.evolve.failure_data import examples
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    champ, a0, runs = _champion_with_replay(tmp_path, monkeypatch)
    step = json.dumps({"failure_data": {"role": "agent", "skills": ["lookup_then_act", "state_facts"], "steps": 5,
                                        "examples": 6}}, sort_keys=True)
    m, changes, _ = successor.build_successor(champ, [], (step,), tmp_path / "cand", {"budget": Budget()})
    ((role, rows, steps, init, _lr),) = runs
    episodes = examples("lookup_then_act", 6) + examples("state_facts", 6)
    assert role == "agent" and steps == 10 and init == str(a0)
    assert rows[:12] == episodes and len(rows) == 24 and all("replayed" in r["messages"][0]["content"] for r in rows[12:])
    (ch,) = changes
    assert ch["skill"] == "lookup_then_act+state_facts" and ch["examples"] == 12 and ch["replayed"] == 12
    assert m.adapters["agent"]["id"] != champ.adapters["agent"]["id"]


def test_genui_failure_data_of_version_3_replays_inline_cards_and_no_dev_family(tmp_path, monkeypatch):
    """A show_values step of data version 3 trains on inline cards and replays the genui adapter's own
    (bound) cards inline beside them, so the adapter sees one card style, leaving out the examples of
    the contract's GenUI dev families (the shipped adapter's data has them); version 1 replays every
    example as it was."""
    from macaronic.contract.spec import parse
    from macaronic.evolve import successor
    from macaronic.evolve.failure_data import examples
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    g0 = tmp_path / "g0"
    g0.mkdir()
    (g0 / "adapter_config.json").write_text(json.dumps({"r": 8}))
    shipped = examples("show_values", 6, 9, 1)  # bound cards, as the shipped adapter's generator writes them
    for e, fam in zip(shipped[:2], ("form", "itinerary")):  # two of v5's GenUI dev families, as shipped data had
        e["source"] = f"genui/{fam}"
    (g0 / "data.jsonl").write_text("".join(json.dumps(e) + "\n" for e in shipped))
    harness = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h0", ignore=shutil.ignore_patterns("__pycache__"))
    champ = PairManifest.build(None, {"genui": g0}, harness, base_fp="f" * 64)
    runs = []

    def train(champion, role, data, out_dir, meta, steps, init):  # the trainer's process, not run here
        runs.append([json.loads(l) for l in data.read_text().splitlines()])
        out_dir.mkdir(parents=True)
        (out_dir / "adapter_config.json").write_text(json.dumps({"r": 8, "trained": True}))

    monkeypatch.setattr(successor, "_train", train)
    v5 = parse(Path(__file__).resolve().parents[2] / "contracts" / "macaronic-core-v5.yaml")
    assert successor.dev_families(v5, "genui") == {"itinerary", "form"} and successor.dev_families(None, "genui") == set()
    for version in (3, 1):
        step = json.dumps({"failure_data": {"role": "genui", "skill": "show_values", "steps": 2, "examples": 4,
                                            "data": version}}, sort_keys=True)
        successor.build_successor(champ, [], (step,), tmp_path / f"cand-{version}", {"budget": Budget(), "contract": v5})
    inline_rows, bound_rows = runs
    assert len(inline_rows) == len(bound_rows) == 8
    assert not any("dataModelUpdate" in r["messages"][-1]["content"] for r in inline_rows)
    assert all("dataModelUpdate" in r["messages"][-1]["content"] for r in bound_rows)
    assert {r["messages"][-2]["content"] for r in inline_rows[4:]} <= {e["messages"][-2]["content"] for e in shipped[2:]}
    assert {r.get("source") for r in bound_rows[4:]} >= {"genui/form", "genui/itinerary"}  # version 1 replays as it did


def test_an_adapter_the_loop_trained_on_a_file_replays_that_file(tmp_path):
    """A champion whose agent adapter came from failure data (source `file:NAME`) replays that
    file, found among its pair's data files, instead of nothing; a missing file is an error."""
    import pytest

    from macaronic.evolve.successor import _adapter_meta, _replay

    a = tmp_path / "agent"
    a.mkdir()
    (a / "adapter_config.json").write_text(json.dumps({"r": 8}))
    (a / "macaronic.json").write_text(json.dumps({"data": {"source": "file:failure-agent-x.jsonl", "examples": 2}}))
    f = tmp_path / "cand-03" / "data" / "failure-agent-x.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text('{"messages": [1]}\n{"messages": [2]}\n')
    meta = _adapter_meta(str(a))
    assert _replay(meta, [tmp_path / "other.jsonl", f]) == [{"messages": [1]}, {"messages": [2]}]
    with pytest.raises(FileNotFoundError, match="failure-agent-x.jsonl"):
        _replay(meta, [])


def test_verb_to_write_data_picks_the_write_the_request_and_the_record_allow():
    """A refund for a delivered order inside the refund window, a cancellation for an unshipped one
    (then a note with the amount or the old status), a reminder ticked off or deleted by what the
    request says happened: the write's tool follows the record's status and the request's verb;
    families in no split, no refund outside the window (the test split's refusal)."""
    from macaronic.evolve.failure_data import SKILLS, examples
    from macaronic.substrate.tasks import FAMILIES

    assert not {f.name for f in SKILLS["verb_to_write"]} & {f.name for f in FAMILIES}
    assert {f.domain for f in SKILLS["verb_to_write"]} == {"commerce+notes", "reminders"}
    seen = set()
    for e in examples("verb_to_write", 30):
        msgs = e["messages"]
        request = next(m["content"] for m in msgs if m["role"] == "user")
        cs = [json.loads(m["content"].split("<tool_call>")[1].split("</tool_call>")[0]) for m in msgs
              if m["role"] == "assistant" and "<tool_call>" in m["content"]]
        results = [json.loads(m["content"].split("<tool_response>")[1].split("</tool_response>")[0])
                   for m in msgs if m["role"] == "tool"]
        assert not any("error" in r for r in results), (request, results)
        if cs[0]["name"] == "list_orders":
            (order,) = results[0]["orders"]
            write = {"placed": "cancel_order", "delivered": "refund_order"}[order["status"]]
            assert order["status"] == "placed" or order["refundable"]
            assert [c["name"] for c in cs] == ["list_orders", write, "create_note"]
            assert cs[2]["arguments"]["body"] in (order["amount"], order["status"])
        else:
            assert [c["name"] for c in cs][0] == "list_reminders"
            write = cs[1]["name"]
            assert write == ("complete_reminder" if any(w in request for w in ("done", "tick", "check it off"))
                             else "delete_reminder"), request
        seen.add(write)
    assert seen == {"cancel_order", "refund_order", "complete_reminder", "delete_reminder"}


def test_order_writes_data_refunds_inside_the_window_and_cancels_what_has_not_shipped():
    """The write an order allows: a refund of a delivered order inside the refund window (then a
    note with the amount or an event to drop it off), or a cancellation of an unshipped one; orders
    only, families in no split, the refunded amount stated where it is asked for."""
    from macaronic.evolve.failure_data import SKILLS, examples
    from macaronic.substrate.tasks import FAMILIES

    assert not {f.name for f in SKILLS["order_writes"]} & {f.name for f in FAMILIES}
    assert {f.domain for f in SKILLS["order_writes"]} == {"commerce+notes", "commerce+calendar"}
    writes = set()
    for e in examples("order_writes", 24):
        msgs = e["messages"]
        cs = [json.loads(m["content"].split("<tool_call>")[1].split("</tool_call>")[0]) for m in msgs
              if m["role"] == "assistant" and "<tool_call>" in m["content"]]
        results = [json.loads(m["content"].split("<tool_response>")[1].split("</tool_response>")[0])
                   for m in msgs if m["role"] == "tool"]
        (order,) = results[0]["orders"]
        assert not any("error" in r for r in results)
        assert cs[1] == {"name": {"placed": "cancel_order", "delivered": "refund_order"}[order["status"]],
                         "arguments": {"order_id": order["id"]}}
        assert order["status"] == "placed" or order["refundable"]
        assert cs[2]["name"] in ("create_note", "create_event")
        if cs[2]["name"] == "create_event" or "amount" in msgs[1]["content"]:
            assert order["amount"] in msgs[-1]["content"]
        writes.add(cs[1]["name"])
    assert writes == {"refund_order", "cancel_order"}


def test_failure_data_borrows_no_remark_from_a_dev_or_test_request_and_is_versioned():
    """No request of the current failure data carries a parenthetical remark of an agent dev or
    test family's requests (data version 1 did: find_person's "(find it first)", the contacts+notes
    dev family's own words). A step names the version it was built with; version 1 stays for reruns;
    a skill unchanged between versions gives the same data under both; an unknown version is refused."""
    import re

    from macaronic.evolve.failure_data import DATA_VERSION, ROLE, SKILLS, examples, families, make, step_version
    from macaronic.substrate.tasks import FAMILIES, NoCandidate, build_task

    def remarks(text):
        return set(re.findall(r"\([^)]*\)", text))

    held = set()
    for fam in FAMILIES:
        if fam.split != "train":
            for seed in range(30):
                held |= remarks(build_task(fam, seed).request)
    assert "(find it first)" in held

    def borrowed(version):
        out = set()
        for skill in SKILLS:
            if ROLE.get(skill) != "genui":
                for fam in families(skill, version):
                    for seed in range(10_000, 10_030):
                        try:
                            out |= remarks(make(fam, seed).request) & held
                        except NoCandidate:  # a seed with no fitting record: the generator skips it too
                            pass
        return out

    assert borrowed(1) == {"(find it first)"}
    assert borrowed(DATA_VERSION) == set()
    assert examples("find_person", 12, 0, 1) != examples("find_person", 12, 0, DATA_VERSION)
    assert examples("order_writes", 6, 0, 1) == examples("order_writes", 6, 0, DATA_VERSION)
    assert step_version(["order_writes", "state_facts"]) == 1 and step_version(["find_person", "state_facts"]) == 2
    with pytest.raises(ValueError, match="unknown"):
        families("find_person", DATA_VERSION + 1)


def test_a_data_engine_step_trains_the_adapter_warm_on_fresh_engine_examples_and_replay(tmp_path, monkeypatch):
    """data_engine: `examples` fresh examples of the role's registry data engine at the step's seed,
    as many replayed from what the adapter was trained on, `steps` steps at lr_pct of its lr, warm."""
    from macaronic.evolve import successor
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest
    from macaronic.specialist import find
    from macaronic.train.builders import build

    champ, a0, runs = _champion_with_replay(tmp_path, monkeypatch, lr=4e-4)
    step = json.dumps({"data_engine": {"role": "agent", "examples": 5, "steps": 7, "seed": 11, "lr_pct": 50}},
                      sort_keys=True)
    m, changes, _ = successor.build_successor(champ, [], (step,), tmp_path / "cand", {"budget": Budget()})
    ((role, rows, steps, init, lr),) = runs
    assert find("agent").data_engine == "agent_engine"
    assert rows[:5] == [e.to_dict() for e in build("agent_engine", 5, 11)]
    assert len(rows) == 10 and all("replayed" in r["messages"][0]["content"] for r in rows[5:])
    assert (role, steps, init, lr) == ("agent", 7, str(a0), 2e-4)
    (ch,) = changes
    assert (ch["generator"], ch["examples"], ch["replayed"], ch["seed"]) == ("agent_engine", 5, 5, 11)
    assert [Path(f).name for f in m.data] == ["engine-agent.jsonl"]
    assert m.adapters["agent"]["id"] != champ.adapters["agent"]["id"]


def test_a_data_engine_step_with_served_seeds_trains_on_examples_like_them(tmp_path, monkeypatch):
    from macaronic.evolve import successor
    from macaronic.evolve.served import training_examples

    champ, a0, runs = _champion_with_replay(tmp_path, monkeypatch, lr=4e-4)
    seeds = [{"id": "served/r1", "specialist": "agent", "engine": "datagen.agent", "intent": {"pattern": "delete"}},
             {"id": "served/r2", "specialist": "genui", "engine": "datagen.genui", "intent": {"intent": "form"}}]
    served = tmp_path / "served"
    served.mkdir()
    (served / "seeds-0123456789abcdef.jsonl").write_text("".join(json.dumps(x) + "\n" for x in seeds))
    step = json.dumps({"data_engine": {"role": "agent", "examples": 4, "steps": 3, "seed": 5,
                                       "served": "0123456789abcdef"}}, sort_keys=True)
    m, changes, _ = successor.build_successor(champ, [], (step,), tmp_path / "cand",
                                              {"budget": Budget(), "served_dir": served})
    ((role, rows, steps, init, lr),) = runs
    assert rows[:4] == training_examples(seeds[:1], "agent_engine", 4, 5)  # the agent's seed only
    assert all(r["source"].startswith("engine/agent/delete/") for r in rows[:4])
    (ch,) = changes
    assert (ch["served"], ch["served_seeds"], ch["examples"]) == ("0123456789abcdef", 1, 4)
    missing = json.dumps({"data_engine": {"role": "agent", "served": "f" * 16}}, sort_keys=True)
    with pytest.raises(ValueError, match="missing"):
        successor.build_successor(champ, [], (missing,), tmp_path / "cand2", {"budget": Budget(), "served_dir": served})


def test_the_data_engine_operator_proposes_fresh_examples_for_the_roles_that_fail(tmp_path):
    from collections import Counter

    from macaronic.evolve import operators
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    h = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h", ignore=shutil.ignore_patterns("__pycache__"))
    for r in ("agent", "genui"):
        (tmp_path / r).mkdir()
        (tmp_path / r / "adapter_config.json").write_text(json.dumps({"r": 8, "role": r}))
    parent = PairManifest.build(None, {"agent": str(tmp_path / "agent"), "genui": str(tmp_path / "genui")}, h,
                                base_fp="f" * 64)
    found = Counter({("genui", "missing_content"): 9, ("agent", "wrong_state"): 4, ("chat", "wrong_answer"): 12})
    cands = operators.propose(parent, found, ("data_engine",), Budget(engine_examples=32, rft_steps=6), set())
    steps = [json.loads(c.steps[0])["data_engine"] for c in cands]
    # chat fails most but the pair has no chat adapter to warm-start; genui, then the agent
    assert [(s["role"], s["examples"], s["steps"]) for s in steps] == [("genui", 32, 6), ("agent", 32, 6)]
    assert steps[1]["seed"] == int(parent.adapters["agent"]["id"][:6], 16)
    assert [c.components for c in cands] == [("adapter:genui",), ("adapter:agent",)]


def test_a_candidates_training_resumes_from_its_checkpoint_after_a_kill(tmp_path, monkeypatch):
    """A candidate's `macaronic train` runs in cand-NN.ckpt/ROLE-KEY with checkpoints; killed there
    (a session's end), the next build of the same candidate (same command, same data bytes) passes
    `--resume` to the same directory; different data trains afresh. The finished adapter moves into
    the candidate's tmp/adapters/ROLE. (A stand-in for the train process: the real one's resume is
    tests/train's.)"""
    import subprocess
    from types import SimpleNamespace

    from macaronic.evolve import successor

    calls = []

    def fake_run(cmd, **kw):
        out = Path(cmd[cmd.index("--out") + 1])
        calls.append((out, "--resume" in cmd))
        out.mkdir(parents=True, exist_ok=True)
        if len(calls) == 1:  # killed after its first checkpoint
            (out / "checkpoint").mkdir()
            (out / "checkpoint" / "state.json").write_text('{"step": 10}')
            return SimpleNamespace(returncode=-9, stderr="killed")
        (out / "adapter_model.safetensors").write_bytes(b"w")
        (out / "macaronic.json").write_text("{}")
        return SimpleNamespace(returncode=0, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    champ = SimpleNamespace(base=None)
    meta = {"mode": "turn", "rank": 8, "batch": 4, "lr": 2e-4, "seed": 0, "description": "d"}
    tmp = tmp_path / "gen-003" / "cand-02.tmp"
    data = tmp_path / "data.jsonl"
    data.write_text('{"a": 1}\n')
    out_dir = tmp / "adapters" / "agent"
    with pytest.raises(RuntimeError, match="killed"):
        successor._train(champ, "agent", data, out_dir, meta, 40, None)
    work = calls[0][0]
    assert work.parent == tmp_path / "gen-003" / "cand-02.ckpt" and not calls[0][1]
    successor._train(champ, "agent", data, out_dir, meta, 40, None)  # the same candidate, built again
    assert calls[1] == (work, True)
    assert sorted(f.name for f in out_dir.iterdir()) == ["adapter_model.safetensors", "macaronic.json"]
    assert not work.exists()
    data.write_text('{"a": 2}\n')  # other data: another directory, no resume
    successor._train(champ, "agent", data, tmp / "adapters" / "genui", meta, 40, None)
    assert calls[2][0] != work and calls[2][1] is False


def test_a_successor_trains_under_its_parents_activation_rule(tmp_path, monkeypatch):
    """An adapter that switches on at the assistant header is retrained at the assistant header (the
    layout it was trained and is served with), and GRPO, which trains at the user header, refuses it;
    a user-header adapter's command is the one it always was (resume keys unchanged)."""
    import subprocess
    from types import SimpleNamespace

    import pytest

    from macaronic.evolve import successor

    seen = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: seen.append(cmd) or SimpleNamespace(returncode=1, stderr="stop"))
    data = tmp_path / "d.jsonl"
    data.write_text('{"messages": []}\n')
    for activation in ("assistant", "user"):
        a = tmp_path / activation / "genui"
        a.mkdir(parents=True)
        (a / "adapter_config.json").write_text(json.dumps({"r": 8}))
        (a / "macaronic.json").write_text(json.dumps({"mode": "turn", **({"activation": activation} if activation != "user" else {})}))
        meta = successor._adapter_meta(str(a))
        assert meta["activation"] == activation
        with pytest.raises(RuntimeError, match="stop"):
            successor._train(SimpleNamespace(base=None), "genui", data, tmp_path / "out" / activation, meta, 2, None)
    assert seen[0][seen[0].index("--activation") + 1] == "assistant" and "--activation" not in seen[1]
    with pytest.raises(ValueError, match="switches on at the assistant header"):
        successor.grpo(SimpleNamespace(base=None), tmp_path, {}, {"genui": str(tmp_path / "assistant" / "genui")},
                       print, {"role": "genui"})
