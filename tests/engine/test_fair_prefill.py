"""A long prompt's prefill is shared: short prompts that arrive while it runs reach their first
token first, a stream of short prompts never starves it, and a chunk deep in a long prompt is
charged its attention. Order checks on the real (tiny) engine, no timing."""

from __future__ import annotations

import time

import pytest

from macaronic.engine.engine import EngineConfig
from macaronic.engine.sampling import SamplingParams

LONG = 20_000


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    from macaronic.engine.llm import load_llm
    from macaronic.testing import make_tiny_model_dir

    base = make_tiny_model_dir(tmp_path_factory.mktemp("long-ctx") / "base", max_position_embeddings=32768)
    m = load_llm(base, [], EngineConfig(max_context=32768, prefix_cache=False))
    yield m
    m.close()


def _prefilling(llm, h) -> int:
    """Prompt positions computed so far of the request behind `h` (-1 when it is not running)."""
    for s in list(llm.engine._active):
        if s.handle is h:
            return s.pos
    return -1


def test_short_prompts_get_their_first_token_while_a_long_one_prefills(llm):
    one = SamplingParams(max_tokens=1, stop_token_ids=())
    long_h = llm.submit([5 + i % 250 for i in range(LONG)], sampling=one)
    while _prefilling(llm, long_h) <= 0:  # the long prefill has started
        time.sleep(0.001)
    shorts = [llm.submit([7 + i, 8, 9, 10] * 8, sampling=one) for i in range(2)]
    for h in shorts:
        assert h.result()[1].finish_reason == "length"
        # before: the long prompt took the whole budget of every step until its prefill was done
        assert not long_h.done.is_set(), "a short prompt waited for the whole long prefill"
    assert 0 < _prefilling(llm, long_h) < LONG
    assert long_h.result()[1].finish_reason == "length"


def test_a_stream_of_short_prompts_does_not_starve_the_oldest(llm):
    """The prompt waiting longest keeps a quarter of each step's budget."""
    eng = llm.engine
    one = SamplingParams(max_tokens=1, stop_token_ids=())
    long_h = llm.submit([5 + i % 250 for i in range(3000)], sampling=one)
    while _prefilling(llm, long_h) <= 0:
        time.sleep(0.001)
    seen = []
    for i in range(6):  # a prompt as long as the whole budget keeps arriving
        h = llm.submit([6 + (i + j) % 200 for j in range(eng.config.prefill_chunk)], sampling=one)
        seen.append(_prefilling(llm, long_h))
        h.result()
    assert seen[-1] > seen[0] or long_h.done.is_set()
    assert long_h.result()[1].finish_reason == "length"


def test_deep_chunks_are_charged_their_attention(llm):
    eng = llm.engine
    assert eng._depth_cost(0) == 1.0
    assert 1.0 < eng._depth_cost(1000) <= eng._depth_cost(20_000) <= 8.0
