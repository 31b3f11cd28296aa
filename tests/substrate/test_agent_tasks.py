"""Task families, splits, hash grading and pass^k."""

from collections import Counter

import pytest

from macaronic.substrate.tasks import (
    FAMILIES, AgentTask, generate_tasks, grade, has_fact, make_task, pass_hat_k,
)

N = 3  # tasks per family in these tests


@pytest.fixture(scope="module")
def tasks():
    return generate_tasks(n_per_family=N)


def run_gold(task):
    ep = task.start()
    for tool, args in task.gold_actions:
        assert "error" not in ep.call(tool, args)
    return ep


def test_families_and_splits():
    splits = Counter(f.split for f in FAMILIES)
    assert len(FAMILIES) >= 10
    assert splits["test"] >= 3 and splits["dev"] >= 1 and splits["train"] > splits["test"] + splits["dev"]
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)
    domains = " ".join(f.domain for f in FAMILIES)
    for d in ("calendar", "reminders", "contacts", "notes", "commerce"):
        assert d in domains


def test_generation_is_deterministic_and_split_filtered(tasks):
    assert len(tasks) == N * len(FAMILIES)
    again = generate_tasks(n_per_family=N)
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in again]
    test_only = generate_tasks(split="test", n_per_family=2)
    assert test_only and {t.split for t in test_only} == {"test"}
    assert len({t.id for t in tasks}) == len(tasks)


def test_phrasings_vary_within_a_family():
    reqs = [t.request for t in generate_tasks(n_per_family=12, families=["calendar_create"])]
    templates = {r.split("'")[0] for r in reqs}
    assert len(templates) >= 3


def test_round_trip_dict(tasks):
    for t in tasks:
        assert AgentTask.from_dict(t.to_dict()) == t


def test_gold_actions_pass(tasks):
    for t in tasks:
        ep = run_gold(t)
        reply = "Done. " + " and ".join(t.required_facts)
        g = grade(t, ep, reply)
        assert g["passed"], (t.id, g)
        assert g["expected_hash"] == g["final_hash"]


def test_doing_nothing_fails_write_tasks_and_passes_read_tasks(tasks):
    for t in tasks:
        ep = t.start()
        writes = [a for a in t.gold_actions if a[0] not in ("list_events", "list_orders", "search_contacts",
                                                            "list_reminders", "search_notes", "get_order")]
        g = grade(t, ep, " ".join(t.required_facts))
        assert g["state_match"] is (not writes), t.id


def test_wrong_action_fails():
    t = make_task("calendar_create", 4)
    ep = t.start()
    args = dict(t.gold_actions[0][1])
    args["end"] = args["start"][:11] + "23:59"
    ep.call("create_event", args)
    g = grade(t, ep, "Done")
    assert not g["passed"] and not g["state_match"]


def test_extra_write_fails_even_if_gold_is_done():
    t = make_task("reminder_add", 1)
    ep = run_gold(t)
    ep.call("add_reminder", {"title": "an extra one"})
    assert not grade(t, ep, "ok")["passed"]


def test_missing_fact_fails_and_facts_match_as_words():
    t = make_task("refund_ineligible", 0)
    ep = run_gold(t)
    assert not grade(t, ep, "Sure, I refunded it.")["passed"]
    assert grade(t, ep, "Sorry: refunds are only possible within 30  DAYS of delivery.")["passed"]
    assert not has_fact("30 days", "within 130 days")


def test_refusing_the_ineligible_refund_is_the_only_pass():
    t = make_task("refund_ineligible", 2)
    ep = t.start()
    order_id = next(o["id"] for o in ep.call("list_orders", t.gold_actions[0][1])["orders"])
    assert ep.call("refund_order", {"order_id": order_id})["error"]["type"] == "policy_refused"
    assert grade(t, ep, "Refunds are limited to 30 days after delivery.")["passed"]


def test_grading_on_another_initial_state_fails():
    t = make_task("note_create", 0)
    other = make_task("note_create", 1)
    ep = run_gold(other)
    g = grade(t, ep, "")
    assert not g["passed"] and not g["same_initial_state"]


def test_pass_hat_k():
    assert pass_hat_k({"a": [True, True], "b": [True, False]}, 1) == pytest.approx(0.75)
    assert pass_hat_k({"a": [True, True], "b": [True, False]}, 2) == pytest.approx(0.5)
    # 3 of 4 trials passed: pass^2 = C(3,2)/C(4,2) = 0.5
    assert pass_hat_k([[True, True, True, False]], 2) == pytest.approx(0.5)
    assert pass_hat_k([[False, False]], 1) == 0.0
    with pytest.raises(ValueError):
        pass_hat_k([[True]], 2)
