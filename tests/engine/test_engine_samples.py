"""n samples sharing one prefill, logprobs, the repetition-loop cut, and a grammar as the logits
processor, on a tiny random model."""

from __future__ import annotations

import json

import pytest
import torch

from macaronic.engine.engine import EngineConfig
from macaronic.engine.errors import EngineError
from macaronic.engine.llm import load_llm
from macaronic.engine.sampling import SamplingParams, loop_period
from macaronic.testing import make_random_adapter


@pytest.fixture()
def llm(tiny_dirs, tmp_path):
    m = load_llm(tiny_dirs["llama"], [], EngineConfig(max_context=512, max_batch=8))
    m.add_adapter(make_random_adapter(tmp_path / "a", m.args, rank=4, seed=3, mode="turn"), name="a")
    yield m
    m.close()


def test_siblings_share_the_prefill_and_sample_0_equals_a_lone_request(llm):
    prompt = list(range(5, 60))
    sp = [SamplingParams(max_tokens=8, temperature=1.0, seed=s, stop_token_ids=()) for s in (1, 2, 3)]
    before = llm.engine.stats["prefill_tokens"]
    hs = llm.engine.submit_n([llm.request(prompt, "a", p) for p in sp])
    outs = [h.result() for h in hs]
    assert llm.engine.stats["prefill_tokens"] - before == len(prompt)  # one prefill for three samples
    usage = [o[1].usage for o in outs]
    assert usage[0]["prefill_tokens"] == len(prompt) and all(u["prefill_tokens"] == 0 for u in usage[1:])
    assert all(len(h.output_ids) == 8 for h in hs) and len({tuple(h.output_ids) for h in hs}) > 1
    llm.engine.cache.clear()
    alone = llm.engine.submit(llm.request(prompt, "a", sp[1]))
    alone.result()
    assert alone.output_ids == hs[1].output_ids  # a sibling samples exactly as it would alone


def test_submit_n_refuses_mismatched_samples(llm):
    with pytest.raises(EngineError):
        llm.engine.submit_n([llm.request([1, 2, 3], "a"), llm.request([1, 2, 4], "a")])


def test_logprobs_are_of_the_sampled_distribution(llm):
    h = llm.engine.submit(llm.request(list(range(5, 30)), None, SamplingParams(max_tokens=5, stop_token_ids=()),
                                      logprobs=3))
    h.result()
    assert [t for t, _, _ in h.logprobs] == h.output_ids
    for tok, lp, top in h.logprobs:
        assert lp <= 0 and len(top) == 3 and top[0][0] == tok and abs(top[0][1] - lp) < 1e-6  # greedy


def test_loop_period_is_bounded_and_exact():
    assert loop_period([1, 2] * 40, 32, 64) == 2
    assert loop_period([7] * 63, 32, 64) is None and loop_period([7] * 64, 32, 64) == 1
    assert loop_period(list(range(200)), 32, 64) is None
    assert loop_period([9] + [1, 2, 3] * 30, 4, 64) == 3


def test_loop_cut_ends_a_forced_loop_early(llm):
    def loop(generated, logits):
        out = torch.full_like(logits, -1e4)
        out[10 + len(generated) % 3] = 0.0
        return out

    sp = SamplingParams(max_tokens=200, stop_token_ids=(), loop_cut=(8, 24))
    h = llm.engine.submit(llm.request([1, 2, 3], None, sp, logits_processor=loop))
    _, last = h.result()
    assert last.finish_reason == "length" and h.loop_period == 3 and len(h.output_ids) == 24


def test_a_grammar_processor_constrains_a_random_model(llm):
    from macaronic.engine.constraints import Grammars, GrammarSpec

    g = Grammars(llm.tokenizer, llm.args.vocab_size, llm.engine.default_stop_ids)
    spec = GrammarSpec("json_schema", json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                  "required": ["ok"], "additionalProperties": False}))
    for seed in range(3):
        h = llm.engine.submit(llm.request([1, 2, 3], "a", SamplingParams(max_tokens=40, temperature=1.0, seed=seed),
                                          logits_processor=g.processor(spec)))
        text, last = h.result()
        assert last.finish_reason == "stop" and isinstance(json.loads(text)["ok"], bool)
    assert g.stats["compiled"] == 1 and g.stats["hits"] == 2  # compiled once, by content
