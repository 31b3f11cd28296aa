"""A fifth specialist reaches the evolution loop's failure clusters and operators and the dev
scorer through its registry entry alone: a user entry (`sql`, as `macaronic specialist add` writes
one) whose `failures`, `hints`, `failure_data`, `grpo` and `devscore` fields name a labeller and skills in
this module and the coding dev scorer. No module of the package names `sql`. Unit tests: the LLM
of the dev scoring is a test double; the grading is the real sandbox."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from macaronic.evolve import operators
from macaronic.evolve.config import Budget
from macaronic.evolve.failures import clusters, hints_for, label
from macaronic.evolve.operators import FailureData
from macaronic.specialist import Specialist, save_user
from macaronic.train import devscore

SQL_DATA = FailureData((("select_first", ("no_query",), "start-with-select"),
                        ("count_rows", ("wrong_answer",), "count-the-rows")), stack=True)


SQL_HINTS = {"no_query": "Answer with one SQL query."}


def sql_labels(row: dict) -> list[str]:
    reply = next((m["content"] for m in reversed(row["messages"]) if m["role"] == "assistant"), "")
    return ["wrong_answer"] if reply.lstrip().upper().startswith("SELECT") else ["no_query"]


def failing(reply: str) -> dict:
    return {"suite": "sql", "passed": False, "detail": {},
            "messages": [{"role": "user", "content": "How many tickets are open?"},
                         {"role": "assistant", "content": reply}]}


@pytest.fixture
def sql(tmp_path, monkeypatch):
    monkeypatch.setenv("MACARONIC_SPECIALISTS", str(tmp_path / "specialists"))
    entry = Specialist("sql", "text", examples="b/examples/sql.jsonl", base="b", adapter="b/adapters/sql",
                       failures=f"{__name__}:sql_labels", hints=f"{__name__}:SQL_HINTS", failure_data=f"{__name__}:SQL_DATA", grpo=True,
                       devscore="macaronic.train.devscore:CODING", description="SQL")
    save_user([entry])
    return entry


def _pair(tmp_path, adapters: dict, data: tuple = ()):
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    h = tmp_path / "h"
    if not h.exists():
        shutil.copytree(DEFAULT_BUNDLE, h, ignore=shutil.ignore_patterns("__pycache__"))
    return PairManifest.build(None, {k: str(tmp_path / v) for k, v in adapters.items()}, h, base_fp="f" * 64, data=data)


def test_its_failures_are_labelled_by_its_entry(sql):
    rows = [failing("SELECT * FROM tickets;"), failing("There are many."), failing("Open ones: 3."),
            {**failing("SELECT 1"), "passed": True}]
    assert [label(r) for r in rows] == [["wrong_answer"], ["no_query"], ["no_query"], []]
    # its hint reaches the prompt-variant operator's list; a label without one has none
    assert hints_for(clusters(rows)) == [("sql", "Answer with one SQL query.", ("sql", "no_query"), 2)]
    assert clusters(rows) == Counter({("sql", "no_query"): 2, ("sql", "wrong_answer"): 1})


def test_operators_propose_its_failure_data_and_grpo_from_its_entry(sql, tmp_path):
    parent = _pair(tmp_path, {"sql": "s", "coding": "c"})
    found = Counter({("sql", "no_query"): 2, ("sql", "wrong_answer"): 1})
    budget = Budget(candidates=6, grpo_steps=3)
    cands = operators.propose(parent, found, ("failure_data", "grpo"), budget, set())
    steps = [json.loads(c.steps[0]) for c in cands]
    # stacked skills (its FailureData), then GRPO for it and for coding, in the registry's order; the
    # two kinds take turns (operators.fair)
    assert steps == [
        {"failure_data": {"role": "sql", "skills": ["select_first", "count_rows"], "steps": budget.rft_steps}},
        {"grpo": {"role": "coding", "steps": 3}},
        {"failure_data": {"role": "sql", "skill": "select_first", "steps": budget.rft_steps}},
        {"grpo": {"role": "sql", "steps": 3}},
        {"failure_data": {"role": "sql", "skill": "count_rows", "steps": budget.rft_steps}}]
    assert cands[0].components == ("adapter:sql",)
    # its failures count among the roles' failures (the decoding and RFT operators rank by them)
    assert operators._role_failures(found) == {"sql": 3}
    # a pair already trained on its failure data: what it learnt is read from the data file's name
    trained = _pair(tmp_path, {"sql": "s"}, data=(str(tmp_path / "failure-sql-count_rows.jsonl"),))
    assert operators.trained_skills(trained.data, "sql") == ["count_rows"]


def test_without_those_fields_it_gets_the_generic_behaviour(tmp_path, monkeypatch):
    monkeypatch.setenv("MACARONIC_SPECIALISTS", str(tmp_path / "specialists"))
    save_user([Specialist("sql", "text", description="SQL")])
    assert label(failing("There are many.")) == ["failed"]
    parent = _pair(tmp_path, {"sql": "s"})
    assert operators.propose(parent, Counter({("sql", "failed"): 3}), ("failure_data", "grpo"), Budget(grpo_steps=3),
                             set()) == []
    with pytest.raises(ValueError, match="no dev scorer for role 'sql'"):
        devscore.scorer("sql")


class _Done:
    finish_reason = "stop"


class _Handle:
    def __init__(self, text):
        self.text = text

    def result(self):
        return self.text, _Done()


class ReplyLLM:
    """Test double: replies to each request with the text `reply(user message)` gives."""

    def __init__(self, reply):
        self.reply, self.seen = reply, []

    def encode_chat(self, messages):
        return messages

    def submit(self, messages, adapter, sp):
        self.seen.append(adapter)
        return _Handle(self.reply(messages[-1]["content"]))


def test_devscore_scores_it_with_the_scorer_its_entry_names(sql):
    from macaronic.suites.coding import make_task

    tasks = [make_task(f, 0, 5000) for f in ("clamp", "dedupe", "is_palindrome")]
    pairs = [([{"role": "user", "content": t.prompt}], t) for t in tasks]
    by_prompt = {t.prompt: t for t in tasks}
    llm = ReplyLLM(lambda p: by_prompt[p].reference_reply() if "clamp" not in by_prompt[p].family else "no code")
    rows = devscore.score(llm, "sql", {"base": None, "sql": "sql-adapter"}, pairs)
    assert devscore.metrics("sql") == ("pass", "tests") and "sql" in devscore.scored()
    assert [r["pass"] for r in rows["sql"]] == [0.0, 1.0, 1.0] and llm.seen.count("sql-adapter") == 3
    s = devscore.summarize(rows, "sql", reference="base")
    assert s["sql"]["pass"]["mean"] == pytest.approx(2 / 3) and "delta_vs_base" in s["sql"]["tests"]
