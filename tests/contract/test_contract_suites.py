"""Suite data and graders: HumanEval and BFCL from their packages, the mixed generator."""

from __future__ import annotations

import pytest

from macaronic.contract import graders
from macaronic.contract.mixed import FAMILIES, Turn, answer_ok, generate_tasks
from macaronic.suites.external import bfcl_simple_problems, bfcl_tools, humaneval_problems


def test_humaneval_from_package_and_sandboxed_grader():
    probs = humaneval_problems()
    assert len(probs) == 164 and probs[0]["task_id"] == "HumanEval/0"
    g = graders.get("humaneval.exec@1")
    assert g(probs[0], probs[0]["canonical_solution"])["passed"]
    full = f"```python\n{probs[2]['prompt']}{probs[2]['canonical_solution']}```"
    assert g(probs[2], full)["passed"]  # a whole function in a fence works too
    assert not g(probs[0], "    return True\n")["passed"]
    r = g(probs[0], "    import socket\n    socket.create_connection(('127.0.0.1', 9))\n    return True\n")
    assert not r["passed"]
    r = g(probs[0], "    while True:\n        pass\n", timeout_s=2)
    assert r["status"] == "timeout"


def test_humaneval_v2_keeps_the_prompt_header_for_whole_functions():
    p = humaneval_problems()[0]
    whole = ("```python\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
             + p["canonical_solution"] + "```")
    assert not graders.get("humaneval.exec@1")(p, whole)["passed"]  # v1 stays as published
    assert graders.get("humaneval.exec@2")(p, whole)["passed"]
    assert graders.get("humaneval.exec@2")(p, p["canonical_solution"])["passed"]


def test_bfcl_simple_from_package_and_ast_grader():
    probs = bfcl_simple_problems()
    assert len(probs) == 400
    p = probs[0]
    tool = bfcl_tools(p)[0]["function"]
    assert tool["parameters"]["type"] == "object"  # BFCL's "dict" became JSON Schema's "object"
    g = graders.get("bfcl.ast_simple@1")
    ok = '<tool_call>{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}</tool_call>'
    assert g(p, ok)["passed"]
    assert g(p, ok.replace('"height": 5', '"height": 5, "unit": "units"'))["passed"]
    assert not g(p, ok.replace("10", "11"))["passed"]
    assert not g(p, ok.replace(', "height": 5', ""))["passed"]
    assert not g(p, "The area is 25.")["passed"]


def test_mixed_families_cross_roles_and_keep_splits():
    for fam, (split, builders) in FAMILIES.items():
        t = generate_tasks(split, per_family=1)
        assert any(x.family == fam for x in t)
    for t in generate_tasks(None, per_family=2):
        assert len({turn.role for turn in t.turns}) == len(t.turns) >= 2  # every turn changes role
    assert [t.id for t in generate_tasks("test", 2)] == [t.id for t in generate_tasks("test", 2)]


@pytest.mark.parametrize("turn, good, bad", [
    (Turn("capital?", "chat", "Lima"), "It is Lima.", "It is Limassol."),
    (Turn("code", "coding", "add_numbers"), "```python\ndef add_numbers(a, b):\n    return a + b\n```", "def add(a, b)"),
    (Turn("remind", "agent", "add_reminder"),
     '<tool_call>{"name": "add_reminder", "arguments": {"title": "Dentist", "due": "2026-01-02"}}</tool_call>',
     '<tool_call>{"name": "add_reminder", "arguments": {}}</tool_call>'),
    (Turn("card", "genui", ""), None, "Here is your card!"),
])
def test_mixed_answer_checks(turn, good, bad):
    if good is not None:
        assert answer_ok(turn, good)
    assert not answer_ok(turn, bad)


def test_graders_are_versioned():
    assert graders.parse_grader("genui.l1_l2@1") == ("genui.l1_l2", 1)
    with pytest.raises(KeyError):
        graders.get("genui.l1_l2@2")
