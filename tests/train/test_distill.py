"""Rejection-sampled coding data: only passing train-family code, under the served prompt head."""

from __future__ import annotations

from macaronic.train import distill


def _rec(task, k, passed, code, prompt=None):
    return {"task": task, "family": "f", "prompt": prompt or f"p-{task}", "k": k, "passed": passed, "code": code}


def test_select_keeps_distinct_passing_code_greedy_first():
    recs = [_rec("a", 2, True, "def f(): return 2"), _rec("a", 0, True, "def f(): return 1"),
            _rec("a", 1, True, "def f(): return 1"), _rec("a", 3, True, "def f(): return 3"),
            _rec("b", 0, False, "def g(): pass"), _rec("b", 1, True, ""), _rec("c", 1, False, "x")]
    kept = distill.select(recs, per_prompt=2)
    assert [(r["task"], r["k"]) for r in kept] == [("a", 0), ("a", 2)]  # duplicate k=1 and the third one dropped
    assert all("passed" not in r for r in kept)


def test_checked_in_data_is_train_families_and_passes_the_tests():
    from macaronic.suites.coding import FAMILIES, grade, make_task

    rows = distill.read()
    assert len(rows) >= 40
    assert {FAMILIES[r["family"]][0] for r in rows} == {"train"}
    for r in rows:
        fam, seed, idx = r["task"].rsplit("-", 2)
        t = make_task(r["family"], int(idx), int(seed))
        assert t.id == r["task"] and t.prompt == r["prompt"]
        assert grade(t, f"```python\n{r['code']}\n```")["passed"], r


def test_builder_wraps_the_code_under_the_served_head():
    from macaronic.train.builders import build, role_prompt_head

    exs = build("coding_distill", 5, 0)
    assert len(exs) == 5 and len({e.messages[-2]["content"] for e in exs}) >= 2
    head = role_prompt_head("coding")
    for e in exs:
        assert list(e.messages[:len(head)]) == head
        assert e.messages[-1]["role"] == "assistant" and e.messages[-1]["content"].startswith("```python\n")
        assert e.messages[-1]["content"].endswith("\n```") and e.role == "coding"
    assert [e.messages for e in build("coding_distill", 5, 0)] == [e.messages for e in exs]
    assert [e.messages for e in build("coding_distill", 5, 1)] != [e.messages for e in exs]


def test_references_only_for_families_the_base_never_solved():
    from macaronic.suites.coding import FAMILIES
    from macaronic.train.builders import build

    rows = distill.read()
    solved = {r["family"] for r in rows}
    unsolved = {f for f, (s, _) in FAMILIES.items() if s == "train"} - solved
    exs = build("coding_distill", len(rows) + 3 * len(unsolved), 0)
    refs = [e for e in exs if e.source.startswith("coding-ref/")]
    assert unsolved and {e.source.split("/")[1] for e in refs} == unsolved and len(refs) == 3 * len(unsolved)
    assert len({e.messages[-2]["content"] for e in refs}) == len(refs)  # distinct prompts
    assert sum(e.source.startswith("coding/") for e in exs) == len(rows)  # every base solution once
