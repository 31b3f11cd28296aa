"""Successor-building pieces: budget and plan parsing, RFT data from graded successes, routing
examples from logged outcomes, harness edits."""

from __future__ import annotations

import json
import shutil

import pytest

from macaronic.evolve.config import Budget, Plan, step_spec
from macaronic.evolve.successor import harness_edit, macro_recall, routing_examples, successes


class FakeContract:
    """Only .suite(name) -> spec with kind and role is used by these functions."""

    class S:
        def __init__(self, kind, role):
            self.kind, self.role = kind, role

    def suite(self, name):
        return {"agent": self.S("agent", "agent"), "mixed": self.S("mixed", None)}[name]


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
    with pytest.raises(ValueError):
        Budget.parse("sample=3")
    plan = Plan(generations=(("router_refit",), ('{"harness_edit": {"file": "x"}}',)))
    assert plan.steps(1) == ("router_refit",) and plan.steps(5) == plan.steps(2)
    assert step_spec(plan.steps(2)[0]) == ("harness_edit", {"file": "x"})


def test_rft_data_is_graded_successes_with_the_served_system_prompt():
    from macaronic.harness import load_bundle

    bundle = load_bundle()
    found = successes(FakeContract(), bundle, ROWS)
    assert sorted(found) == ["agent", "chat"]
    (agent,) = found["agent"]  # the duplicate success is one example, the failure none
    assert agent["messages"][0]["role"] == "system" and "<tools>" in agent["messages"][0]["content"]
    assert agent["messages"][1:] == ROWS[0]["messages"]
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
    harness_edit(h, {"file": "roles/chat.md", "replace": ["concisely", "in one sentence"]})
    assert "in one sentence" in load_bundle(h).role("chat").system_prompt
    with pytest.raises(ValueError, match="not found"):
        harness_edit(h, {"file": "summary.md", "replace": ["no such text", "x"]})
    with pytest.raises(ValueError, match="outside"):
        harness_edit(h, {"file": "../evil.json", "text": "{}"})
    with pytest.raises(Exception, match="route/user.md"):
        harness_edit(h, {"file": "route/user.md", "text": "no placeholder"})
    assert json.loads((h / "router.json").read_text())["min_confidence"] == 0.9
