"""The agent data engine: verified, varied, deterministic, and disjoint from every split and suite
we evaluate on."""

from __future__ import annotations

import copy
import json
import random
import re

import pytest

from macaronic.datagen import agent
from macaronic.datagen.worlds import AGENT_SUITE_NOUNS, DOMAINS


@pytest.fixture(scope="module")
def sample():
    return agent.examples(400, seed=3)


def _transcript(pattern: str, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(200):
        try:
            return agent.transcript(rng, pattern)
        except agent.Skip:
            continue
    raise AssertionError(f"no {pattern} transcript in 200 draws")


def test_examples_are_deterministic_and_cover_every_pattern(sample):
    assert [e.to_dict() for e in agent.examples(20, seed=3)] == [e.to_dict() for e in sample[:20]]
    patterns = {e.source.split("/")[2] for e in sample}
    assert patterns == set(agent.PATTERNS)
    assert len({e.source.split("/")[3] for e in sample}) == len(DOMAINS)
    assert len({e.messages[-1]["content"] for e in sample}) > 300  # not a handful of templates


def test_every_pattern_replays_clean_on_its_world():
    for name in agent.PATTERNS:
        start, t, _ = _transcript(name)
        assert agent.verify(start, t) == []


def _calls(t):
    return [m for turn in t.turns for m in turn if m["role"] == "assistant" and "<tool_call>" in m["content"]]


def test_verifier_catches_an_invented_argument():
    start, t, _ = _transcript("lookup_act")
    m = _calls(t)[-1]
    m["content"] = re.sub(r'"[A-Z]{2}-\d{4}"', '"12345"', m["content"])  # an id nobody returned
    problems = agent.verify(start, t)
    assert any("not grounded" in p for p in problems) and any("end state" in p for p in problems)


def test_verifier_catches_a_skipped_action_and_a_reply_without_its_facts():
    start, t, _ = _transcript("lookup_act")
    t2 = copy.deepcopy(t)
    turn = t2.turns[-1]
    i = turn.index(_calls(t2)[-1])
    del turn[i:i + 2]  # the update call and its result
    assert any("end state" in p for p in agent.verify(start, t2))
    t3 = copy.deepcopy(t)
    t3.turns[-1][-1] = {"role": "assistant", "content": "All done!"}
    assert any("reply lacks" in p for p in agent.verify(start, t3))


def test_verifier_catches_an_action_the_condition_forbids():
    rng = random.Random(5)
    while True:
        try:
            start, t, _ = agent.transcript(rng, "conditional")
        except agent.Skip:
            continue
        if len(_calls(t)) == (2 if start.summary_search else 1):  # the condition did not hold: no write
            break
    w = t.world
    r = next(iter(start.records.values()))
    f = agent.settable(w.domain)[0]
    extra = agent.Transcript(copy.deepcopy(start))
    extra.turns = copy.deepcopy(t.turns)
    extra.facts = t.facts
    from macaronic.substrate.toolcalls import format_tool_call
    call = format_tool_call(w.names["update"], {w.params["id"]: r["id"], w.params[f.name]: w.arg(f, r[f.name])})
    extra.turns[-1].insert(-1, {"role": "assistant", "content": call})
    extra.turns[-1].insert(-1, {"role": "tool", "content": "{}"})
    assert agent.verify(start, extra)  # an unplanned write is caught (ungrounded or a changed state)


def test_a_request_of_several_steps_is_a_chain_done_in_order_and_a_step_left_out_is_caught():
    rng = random.Random(11)
    seen = 0
    for _ in range(60):
        try:
            start, t, _ = agent.transcript(rng, "sequence")  # in CHAINS, outside the default mix
        except agent.Skip:
            continue
        seen += 1
        calls = _calls(t)
        assert len(t.turns) == 1 and len(calls) >= 2
        assert all(m["content"].count("<tool_call>") == 1 for m in calls)  # one call a step: each can depend on the last
        assert len(t.facts) in (2, 3)
        if not t.changes:
            continue
        t2 = copy.deepcopy(t)  # the last write and its result left out: the declared end state is not reached
        turn = t2.turns[0]
        writes = [i for i, m in enumerate(turn) if m in calls and not any(
            f'"{start.names[op]}"' in m["content"] for op in ("search", "get"))]
        del turn[writes[-1]:writes[-1] + 2]
        assert agent.verify(start, t2)
    assert seen > 30
    assert "sequence" not in agent.PATTERNS  # the default mix (and the shipped agent's data) is unchanged
    rows = agent.examples(12, seed=1, patterns=("sequence",))
    assert {e.source.split("/")[2] for e in rows} == {"sequence"}
    with pytest.raises(ValueError, match="unknown agent patterns"):
        agent.examples(1, patterns=("nope",))


def test_the_same_requests_with_independent_calls_made_together():
    rng = random.Random(12)
    seen = together = 0
    for _ in range(80):
        try:
            start, t, _ = agent.transcript(rng, "together")
        except agent.Skip:
            continue
        seen += 1
        calls = _calls(t)
        assert agent.verify(start, t) == [] and len(t.turns) == 1
        # lookups first (searches together, then gets together), the writes last, all in one message
        phase = lambda ops: "search" if ops == {"search"} else "get" if ops == {"get"} else "write"  # noqa: E731
        phases = [phase({op for op, n in start.names.items() if f'"{n}"' in m["content"]}) for m in calls]
        assert phases == [p for p in ("search", "get", "write") if p in phases]  # each once, in this order
        together += any(m["content"].count("<tool_call>") >= 2 for m in calls)
    assert seen > 40 and together > seen / 2


def test_examples_encode_under_the_served_prompt(sample, tiny_dirs):
    from macaronic.engine.llm import load_tokenizer
    from macaronic.datagen.examples import encode

    tok = load_tokenizer(tiny_dirs["qwen2"])
    for e in sample[:40]:
        enc = encode(tok, e, 8192)
        assert enc.n_targets > 0


def test_disjoint_from_the_contract_agent_suite_and_bfcl(sample):
    from macaronic.substrate.tasks import generate_tasks
    from macaronic.substrate.tools import openai_tools
    from macaronic.suites.bfcl import CATEGORIES, MULTI_TURN, call_strings, problems

    assert not {d.noun for d in DOMAINS} & set(AGENT_SUITE_NOUNS)
    substrate = {t["function"]["name"] for t in openai_tools()}
    engine_tools, requests = set(), set()
    for e in sample + agent.examples(100, seed=3, patterns=tuple(agent.CHAINS)):
        if not e.source.startswith("engine/"):
            continue
        listing = e.messages[0]["content"]
        engine_tools |= set(re.findall(r"^- ([\w.]+)\(", listing, re.M))
        requests |= {m["content"].strip().lower() for m in e.messages if m["role"] == "user"}
    assert engine_tools and not engine_tools & substrate
    suite = {t.request.strip().lower() for split in ("train", "dev", "test")
             for t in generate_tasks(split, n_per_family=3)}
    assert not requests & suite
    bfcl_names, bfcl_questions = set(), set()
    for cat in CATEGORIES:
        for p in problems(cat):
            if cat not in MULTI_TURN:  # a single-turn problem's functions are the item itself
                bfcl_names |= {f["name"] for f in p.get("function", [])}
            for turn in (p["question"] if isinstance(p["question"][0], list) else [p["question"]]):
                bfcl_questions |= {m["content"].strip().lower() for m in turn if m["role"] == "user"}
    assert not engine_tools & bfcl_names
    assert not requests & bfcl_questions
    # multi_turn_base's backends are public APIs shared by all its problems (ls, cd, get_ticket, ...):
    # a generic name may recur in a generated world (send_message, get_ticket), the problems may not:
    # no user turn (checked above) and no call of a ground-truth trajectory appears in the data
    gold_calls = {c.replace(" ", "") for p in problems("multi_turn_base") for turn in p["ground_truth"] for c in turn}
    made = [json.loads(c) for e in sample for m in e.messages if m["role"] == "assistant"
            for c in re.findall(r"<tool_call>(.*?)</tool_call>", m["content"], re.S)]
    assert made
    made_calls = {c.replace(" ", "") for c in call_strings([(c["name"], c["arguments"]) for c in made])}
    assert not made_calls & gold_calls


def test_agent_engine_generator_mixes_in_the_substrate_train_families():
    from macaronic.train.builders import build

    ex = build("agent_engine", 40, 0)
    sources = [e.source for e in ex]
    assert sum(s.startswith("engine/agent/") for s in sources) == 30
    assert all(s.startswith(("engine/agent/", "agent/")) for s in sources)


def test_offtopic_questions_are_answered_in_text_with_the_computed_answer():
    import random

    from macaronic.datagen.agent import examples, offtopic_question

    rng = random.Random(3)
    for _ in range(200):
        q, answer, fact = offtopic_question(rng)
        assert fact in answer and q.endswith("?")
    off = [e for e in examples(300, 1) if "/offtopic/" in e.source]
    assert off
    for e in off:  # no call anywhere in the turn: the question is not what the tools are for
        assert not any(m["role"] == "tool" or "<tool_call>" in m["content"] for m in e.messages if m["role"] != "system")
        q, a = e.messages[-2]["content"], e.messages[-1]["content"]
        if " times " in q:
            x, y = (int(w) for w in q.rstrip("?").split() if w.isdigit())
            assert str(x * y) in a
