"""The route read from the answer's own prefill (issue 37 item 3): a "hidden" score with
`score_from` takes the history from the prefix cache and keeps its prefill; the generation that
continues it (`Request.resume`) runs only the layers above the score's layer on the user turn, and
answers as a plain request would. Real engine on the tiny random model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from macaronic.engine.engine import EngineConfig, Request
from macaronic.engine.errors import EngineError
from macaronic.engine.sampling import SamplingParams

HISTORY = [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue, like the sea."}]
TURN = {"role": "user", "content": "Now write a haiku about the sea and the sky, please."}
GREEDY = SamplingParams(max_tokens=6, temperature=0.0)


@pytest.fixture(scope="module")
def llm():
    from macaronic.testing import tiny_llm

    m = tiny_llm(config=EngineConfig(max_context=1024))
    yield m
    m.close()


def _prompts(llm):
    P = llm.encode_chat(HISTORY + [TURN], add_generation_prompt=False)
    G = llm.encode_chat(HISTORY + [TURN])
    assert G[:len(P)] == P and len(G) > len(P)
    return P, G


def _first_logprobs(llm, G, **kw):
    h = llm.submit(G, sampling=GREEDY, logprobs=5, **kw)
    text, last = h.result()
    assert last.finish_reason in ("stop", "length"), last.error
    return h.logprobs[0], text, last.usage


def _cache_history(llm):
    llm.engine.cache.clear()
    llm.submit(llm.encode_chat(HISTORY[:1]), sampling=SamplingParams(max_tokens=2, temperature=0.0)).result()


def test_the_score_reads_the_user_turn_on_the_cached_history_within_float_noise(llm):
    P, _ = _prompts(llm)
    start, layer = llm.turn_start(P), 1
    llm.engine.cache.clear()
    cold = llm.route_prefill(P, start, layer)
    assert cold["kept"].start == 0  # nothing cached: every position ran
    _cache_history(llm)
    warm = llm.route_prefill(P, start, layer)
    assert 0 < warm["kept"].start <= start  # the history came from the cache, the user turn ran
    for view in ("mean", "last"):
        assert torch.allclose(warm[view], cold[view], rtol=1e-3, atol=1e-3 * float(cold[view].abs().max()))
    # the last view is the residual entering `layer` at the prompt's last position
    _, last = llm.hidden_views_direct([P], layer=layer)
    assert torch.allclose(cold["last"], last[0], rtol=1e-3, atol=1e-3 * float(last.abs().max()))


@pytest.mark.parametrize("layer", [1, None])
def test_a_resumed_answer_is_the_plain_answer_and_runs_only_the_upper_layers(llm, layer):
    P, G = _prompts(llm)
    _cache_history(llm)
    plain, plain_text, _ = _first_logprobs(llm, G)
    _cache_history(llm)
    kept = llm.route_prefill(P, llm.turn_start(P), layer)["kept"]
    assert llm.can_resume(G, None, kept)
    got, text, usage = _first_logprobs(llm, G, resume=kept)
    assert got[0] == plain[0] or abs(got[1] - plain[1]) < 1e-3  # the same first token (or a float-noise tie)
    assert [t for t, _ in got[2]][:2] == [t for t, _ in plain[2]][:2] or abs(got[1] - plain[1]) < 1e-3
    assert abs(got[1] - plain[1]) < 1e-2
    assert usage["reused_tokens"] == (kept.start if layer is not None else len(P))
    assert usage["upper_tokens"] == (len(P) - kept.start if layer is not None else 0)
    assert usage["prefill_tokens"] == len(G) - len(P)  # only the assistant header ran whole


def test_a_prefill_on_to_the_assistant_header_leaves_the_answer_only_the_upper_layers(llm):
    """The route reads the user turn (views end at the assistant header) of a prefill that runs on to
    the end of the answer's prompt: the bare answer then runs no token through the lower layers."""
    P, G = _prompts(llm)
    _cache_history(llm)
    plain, _, _ = _first_logprobs(llm, G)
    _cache_history(llm)
    start = llm.turn_start(G)
    got = llm.route_prefill(G, start, 1, llm.turn_rule.answer_start(G))
    _cache_history(llm)
    short = llm.route_prefill(P, start, 1)
    assert llm.turn_rule.answer_start(G) == len(P)
    for view in ("mean", "last"):  # the same views: the header's rows are kept, not read
        assert torch.allclose(got[view], short[view], rtol=1e-3, atol=1e-3 * float(short[view].abs().max()))
    kept = got["kept"]
    first, _, usage = _first_logprobs(llm, G, resume=kept)
    assert usage["prefill_tokens"] == 0 and usage["upper_tokens"] == len(G) - kept.start
    assert abs(first[1] - plain[1]) < 1e-2
    # an assistant-header adapter takes the kept user turn, and computes its own header
    _, _, usage = _first_logprobs(llm, G, adapter="coding", active_from=len(P), resume=kept)
    assert usage["upper_tokens"] == len(P) - kept.start and usage["prefill_tokens"] == len(G) - len(P)


def test_an_adapter_that_switches_on_after_the_prefill_takes_it(llm):
    """An assistant-header adapter (turn mode, active from the answer) answers on the bare prefill."""
    P, G = _prompts(llm)
    _cache_history(llm)
    plain, _, _ = _first_logprobs(llm, G, adapter="coding", active_from=len(P))
    kept = llm.route_prefill(P, llm.turn_start(P), 1)["kept"]
    got, _, usage = _first_logprobs(llm, G, adapter="coding", active_from=len(P), resume=kept)
    assert abs(got[1] - plain[1]) < 1e-2 and usage["upper_tokens"] > 0
    # the same adapter from the user header computes the user turn itself: it cannot take the prefill
    assert not llm.can_resume(G, "coding", kept)


def test_bad_resumes_and_route_scores_are_refused_before_anything_runs(llm):
    P, G = _prompts(llm)
    llm.engine.cache.clear()
    kept = llm.route_prefill(P, llm.turn_start(P), 1)["kept"]
    assert kept.start == 0
    for bad, match in [
        (Request(prompt=[(G[0] + 1) % llm.args.vocab_size] + G[1:], resume=kept), "must start with the kept"),
        (Request(prompt=G, adapter="coding", active_from=0, resume=kept), "active on the kept"),
        (Request(prompt=G, adapter="coding", resume=kept), "active on the kept"),  # no active_from: every position
        (Request(prompt=G, score="hidden", resume=kept), "resume needs a generation"),
        (Request(prompt=P, score="hidden", score_from=len(P)), "score_from"),
        (Request(prompt=P, score="hidden", score_from=2, score_to=2), "score_from"),
        (Request(prompt=P, score="hidden", score_to=2), "score_to needs"),
        (Request(prompt=P, score="hidden", adapter="chat", score_from=0), "score_from"),
        (Request(prompt=P, score="logprobs", score_from=0), "score_from"),
    ]:
        with pytest.raises(EngineError, match=match):
            llm.engine.submit(bad)
    # a kept opening of the request-alone views is not a route prefill
    opening = llm.engine.submit(Request(prompt=P[:8], score="hidden", score_layer=1, score_keep=True))
    opening.result()
    with pytest.raises(EngineError, match="resume needs"):
        llm.engine.submit(Request(prompt=G, resume=opening.score["kept"]))
    # and the engine still serves
    assert llm.submit(G, sampling=GREEDY).result()[1].finish_reason in ("stop", "length")


def test_the_kept_prefill_is_never_cached_half_computed(llm):
    """The score stops below the top layers: its K/V must not reach the prefix cache, or a later
    request would read layers nobody computed."""
    P, G = _prompts(llm)
    llm.engine.cache.clear()
    llm.route_prefill(P, llm.turn_start(P), 1)
    assert llm.engine.cache.lookup(np.asarray(G), np.zeros(len(G), dtype=np.int64)).length == 0
