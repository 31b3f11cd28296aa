"""Task generators: deterministic, many phrasings, held-out test families, and gold cards that
pass L1 and score L2 = 1. The grader gives partial credit for partial cards."""

from __future__ import annotations

import copy
import json
from collections import Counter

from macaronic.genui.grade import grade
from macaronic.genui.tasks import FAMILIES, TEST_FAMILIES, generate_tasks, make_task

TASKS = generate_tasks(seed=0, per_family=10)


def test_families_and_splits():
    assert len(FAMILIES) >= 8 and len(TEST_FAMILIES) >= 2
    splits = Counter(t.split for t in TASKS)
    assert set(splits) == {"train", "dev", "test"}
    for t in TASKS:
        assert (t.split == "test") == (t.family in TEST_FAMILIES)
    assert generate_tasks(split="test", per_family=3) == [t for t in generate_tasks(per_family=3) if t.split == "test"]


def test_deterministic_and_seeded():
    assert generate_tasks(seed=0, per_family=3) == generate_tasks(seed=0, per_family=3)
    assert generate_tasks(seed=0, per_family=3) != generate_tasks(seed=1, per_family=3)
    assert len({t.id for t in TASKS}) == len(TASKS)


def test_many_phrasings_per_family():
    for family in FAMILIES:
        tasks = [t for t in TASKS if t.family == family]
        assert len(tasks[0].prompts) >= 4
        assert all(t.prompt in t.prompts for t in tasks)


def test_gold_cards_pass_l1_and_score_l2_one():
    for task in TASKS:
        result = grade(task, json.dumps(task.gold))
        assert result["l1_valid"], (task.id, result["errors"])
        assert result["l2_content"] == 1.0, (task.id, result["missing"])


def test_requirements_are_covered_by_context_data():
    for task in TASKS:
        blob = json.dumps(task.context, ensure_ascii=False) + task.prompt
        shown = [v for v in task.requirements.values if v in blob]
        assert shown, task.id  # the model is given what it must display


def test_partial_card_gets_partial_credit():
    task = make_task("order_refund", 0)
    gold = copy.deepcopy(task.gold)
    comps = gold["a2ui"][0]["surfaceUpdate"]["components"]
    for c in comps:  # rename the refund action: loses the action and its context
        if "Button" in c["component"]:
            c["component"]["Button"]["action"]["name"] = "help"
    result = grade(task, json.dumps(gold))
    assert result["l1_valid"]
    n = task.requirements.count()
    assert result["l2_content"] == (n - 2) / n
    assert set(result["missing"]) == {"action refund", f"action refund context order_id={task.context['order_id']!r}"}


def test_broken_reply_fails_l1_but_is_graded_on_what_renders():
    task = make_task("weather", 0)
    text = "Here you go:\n```json\n" + json.dumps(task.gold)[:-3]  # fenced and truncated
    result = grade(task, text)
    assert "markdown_fence" in result["repairs"]
    garbage = grade(task, "sorry, no card")
    assert not garbage["l1_valid"] and garbage["l2_content"] == 0.0 and garbage["errors"]


def test_user_message_carries_prompt_and_data():
    task = make_task("meetings", 0)
    assert task.user_message().startswith(task.prompt)
    assert json.loads(task.user_message().split("Data:\n", 1)[1]) == task.context
