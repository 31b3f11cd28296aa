"""Coding and chat suites: disjoint family splits, deterministic tasks, graders that can fail."""

from __future__ import annotations

import pytest

from macaronic.suites import chat, coding


@pytest.mark.parametrize("suite", [coding, chat])
def test_splits_are_family_disjoint_and_deterministic(suite):
    by_split = {s: {t.family for t in suite.generate_tasks(s, 2)} for s in suite.SPLITS}
    assert all(by_split.values())
    assert not (by_split["train"] & by_split["dev"]) and not (by_split["train"] & by_split["test"])
    assert not (by_split["dev"] & by_split["test"])
    assert suite.generate_tasks("dev", 3, seed=1) == suite.generate_tasks("dev", 3, seed=1)
    assert suite.generate_tasks("dev", 3, seed=1) != suite.generate_tasks("dev", 3, seed=2)
    with pytest.raises(ValueError):
        suite.generate_tasks("sealed", 1)


def test_coding_reference_passes_and_wrong_code_fails():
    tasks = coding.generate_tasks("dev", 1)
    for t in tasks:
        assert coding.grade(t, t.reference_reply())["passed"], t.id
    t = tasks[0]
    wrong = f"```python\ndef {t.entry_point}(*a, **k):\n    return None\n```"
    g = coding.grade(t, wrong)
    assert not g["passed"] and g["tests_passed"] < g["tests_total"]
    g = coding.grade(t, "I cannot help with that.")
    assert not g["passed"] and g["error"]


def test_coding_extracts_fenced_block_and_times_out():
    t = coding.generate_tasks("train", 1)[0]
    reply = "Here you go:\n" + t.reference_reply() + "\nThat's it."
    assert coding.grade(t, reply)["passed"]
    g = coding.grade(t, "```python\nwhile True:\n    pass\n```", timeout_s=1.5)
    assert g["timed_out"] and not g["passed"]


def test_chat_grader():
    t = chat.make_task("who", 0)
    assert chat.grade(t, t.gold)["passed"]
    assert not chat.grade(t, "I am SmolLM, trained by Hugging Face.")["passed"]
    t = chat.make_task("multiply", 0)
    assert chat.grade(t, t.gold)["passed"]
    assert not chat.grade(t, "It is 7.")["passed"]
    assert not chat.grade(t, t.gold + " word" * 100)["passed"]  # too long
