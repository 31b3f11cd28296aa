"""The function-tool engine: verified by execution, deterministic, a call exactly when a listed tool
computes what is asked, and disjoint from BFCL (its function names and questions) and the contract."""

from __future__ import annotations

import json
import random
import re

import pytest

from macaronic.datagen import functions as fn


@pytest.fixture(scope="module")
def sample():
    return fn.examples(300, seed=3)


def _draw(pattern: str, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(100):
        try:
            return fn.PATTERNS[pattern][0](rng)
        except fn.Skip:
            continue
    raise AssertionError(f"no {pattern} transcript in 100 draws")


def _calls(messages):
    return [json.loads(c) for m in messages if m["role"] == "assistant"
            for c in re.findall(r"<tool_call>(.*?)</tool_call>", m["content"], re.S)]


def test_deterministic_and_covers_every_pattern_and_topic(sample):
    assert [e.to_dict() for e in fn.examples(20, seed=3)] == [e.to_dict() for e in sample[:20]]
    assert {e.source.split("/")[2] for e in sample} == set(fn.PATTERNS)
    assert {e.source.split("/")[3] for e in sample} == set(fn.TOPICS)
    assert len({e.messages[-1]["content"] for e in sample}) > 250  # not a handful of templates


def test_every_pattern_replays_clean():
    for name in fn.PATTERNS:
        for seed in range(5):
            assert fn.verify(_draw(name, seed)) == []


def test_a_call_exactly_when_a_listed_tool_computes_what_is_asked(sample):
    for e in sample:
        pattern = e.source.split("/")[2]
        calls = _calls(e.messages)
        assert bool(calls) == (pattern in ("fn_call", "fn_parallel")), e.source
    for seed in range(20):  # a near miss lists only the asked quantity's neighbours; a call lists its tool
        near, call = _draw("fn_near_miss", seed), _draw("fn_call", seed)
        assert near.asked not in {t.q.key for t in near.tools}
        assert call.asked in {t.q.key for t in call.tools}
        assert {fn.BY_KEY[near.asked].topic} & {t.q.topic for t in near.tools}


def test_verifier_catches_an_invented_value_a_wrong_result_and_a_call_where_none_fits():
    t = _draw("fn_call")
    call = t.messages[1]
    bad = dict(call, content=re.sub(r'(": )(-?[\d.]+)([,}])', r"\g<1>987654\3", call["content"], count=1))
    t.messages[1] = bad
    problems = fn.verify(t)
    assert any("not grounded" in p for p in problems) and any("tools' own" in p for p in problems)
    t = _draw("fn_call", 1)
    t.messages[2] = {"role": "tool", "content": json.dumps({"result": -1})}
    assert any("tools' own" in p for p in fn.verify(t))
    near = _draw("fn_near_miss", 2)
    tool = near.tools[0]
    from macaronic.substrate.toolcalls import format_tool_call

    args = {tool.params[a.name]: fn.draw(a, random.Random(0)) for a in tool.q.args if not a.optional}
    near.messages.insert(1, {"role": "assistant", "content": format_tool_call(tool.name, args)})
    near.messages.insert(2, {"role": "tool", "content": json.dumps({"result": fn.result_value(tool.run(args))})})
    assert any("calls, 0 expected" in p for p in fn.verify(near))


def test_a_tool_that_takes_a_percent_as_a_fraction_gets_one_and_the_verifier_reads_it_back():
    tip = fn.BY_KEY["tip"]
    tool = fn.Tool(tip, "calc_tip", {"bill": "bill", "percent": "pct"}, "Returns the tip on a bill.", {"percent": 0.01})
    assert "fraction" in tool.schema()["function"]["parameters"]["properties"]["pct"]["description"]
    assert tool.show({"bill": 80, "percent": 15}) == {"bill": 80, "pct": 0.15}
    assert tool.logical({"bill": 80, "pct": 0.15}) == {"bill": 80, "percent": 15}
    from macaronic.substrate.toolcalls import format_tool_call

    def transcript(pct):
        msgs = [{"role": "user", "content": "What's a 15% tip on $80?"},
                {"role": "assistant", "content": format_tool_call("calc_tip", {"bill": 80, "pct": pct})},
                {"role": "tool", "content": json.dumps({"result": fn.result_value(tool.run({"bill": 80, "pct": pct}))})},
                {"role": "assistant", "content": "It comes to 12 dollars."}]
        return fn.FnTranscript([tool], msgs, set(), ["12"], 1, "tip")

    assert fn.verify(transcript(0.15)) == []
    assert any("not grounded" in p for p in fn.verify(transcript(15)))  # the percent as said, not as the tool takes it
    for share in (0.5, 0.0):
        rng, scaled = fn.EngineRandom(5, fractions=share), 0
        for _ in range(300):  # the engine hands such tools out when asked to, and their calls carry the fraction
            t, _name = fn.transcript(rng, "fn_call")
            tool = next(x for x in t.tools if x.q.key == t.asked)
            for k in tool.scale:
                call = _calls(t.messages)[0]
                scaled += 0 < call["arguments"][tool.params[k]] < 1
        assert (scaled >= 5) if share else (scaled == 0)


def test_examples_encode_under_the_served_prompt(sample, tiny_dirs):
    from macaronic.datagen.examples import encode
    from macaronic.engine.llm import load_tokenizer

    tok = load_tokenizer(tiny_dirs["qwen2"])
    for e in sample[:30]:
        assert encode(tok, e, 8192).n_targets > 0


def test_disjoint_from_bfcl_and_the_contract_agent_suite(sample):
    from macaronic.substrate.tasks import generate_tasks
    from macaronic.substrate.tools import openai_tools
    from macaronic.suites.bfcl import CATEGORIES, MULTI_TURN, call_strings, problems

    names, requests = set(), set()
    for e in sample:
        names |= set(re.findall(r"^- ([\w.]+)[(:]", e.messages[0]["content"], re.M))
        requests |= {m["content"].strip().lower() for m in e.messages if m["role"] == "user"}
    assert names and not names & {t["function"]["name"] for t in openai_tools()}
    suite = {t.request.strip().lower() for split in ("train", "dev", "test") for t in generate_tasks(split, n_per_family=3)}
    assert not requests & suite
    bfcl_names, bfcl_questions = set(), set()
    for cat in CATEGORIES:
        for p in problems(cat):
            if cat not in MULTI_TURN:
                bfcl_names |= {f["name"] for f in p.get("function", [])}
            for turn in (p["question"] if isinstance(p["question"][0], list) else [p["question"]]):
                bfcl_questions |= {m["content"].strip().lower() for m in turn if m["role"] == "user"}
    assert not names & bfcl_names
    assert not requests & bfcl_questions
    gold = {c.replace(" ", "") for p in problems("multi_turn_base") for turn in p["ground_truth"] for c in turn}
    made = {c.replace(" ", "") for c in call_strings([(c["name"], c["arguments"]) for c in _calls(m for e in sample for m in e.messages)])}
    assert made and not made & gold
