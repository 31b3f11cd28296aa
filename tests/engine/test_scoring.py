"""Router forwards as engine score requests: same results as the direct forwards, prefix-cached,
and no decoding stream stalled while routed requests and long prefills arrive.

The stall test is not timed: it records every forward of the real (tiny) model and asserts on
the schedule, i.e. how much prompt work ran between two tokens of each decoding stream.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
import torch

from macaronic.engine.engine import EngineConfig
from macaronic.engine.sampling import SamplingParams
from macaronic.router.features import head_features


@pytest.fixture(scope="module")
def llm():
    from macaronic.testing import tiny_llm

    m = tiny_llm(config=EngineConfig(max_context=1024))
    yield m
    m.close()


def _texts():
    return ["hi", "Show me the weather in Oslo as a card.", "def f(x):\n    return x * 2\n# why is this slow? " * 6,
            "Remind me to call mom at 6pm and then book a table for four somewhere quiet. " * 4]


def test_hidden_views_alone_are_the_direct_forwards_bit_for_bit(llm):
    """One sequence alone in one chunk runs the very forward the direct twin runs: the shipped
    router state (fitted one text per forward) sees the same features."""
    for text in _texts():
        ids = llm.tokenizer.encode(text, add_special_tokens=False)
        mean, last = llm.hidden_views([ids])
        m0, l0 = llm.hidden_views_direct([ids])
        assert torch.equal(mean, m0) and torch.equal(last, l0)
    ids = llm.encode_chat([{"role": "user", "content": "hello there"}])
    for adapter in (None, "coding"):
        assert torch.equal(llm.next_logprobs(ids, adapter), llm.next_logprobs_direct(ids, adapter))


def test_scores_chunked_and_batched_with_decoding_streams_within_float_noise(llm):
    """While streams decode the budget is `prefill_chunk_busy` tokens a step: long sequences are
    split and share forwards with other work; the features move by float noise only."""
    budget = llm.config.prefill_chunk_busy
    streams = [llm.submit(llm.encode_chat([{"role": "user", "content": f"count {i}"}]),
                          sampling=SamplingParams(max_tokens=400, stop_token_ids=())) for i in range(4)]
    for h in streams:
        next(iter(h))  # every stream is decoding
    batch = [llm.tokenizer.encode(t, add_special_tokens=False) for t in _texts()]
    assert max(map(len, batch)) > 2 * budget  # some sequence really is chunked
    mean, last = llm.hidden_views(batch)
    for h in streams:
        h.cancel()
    m0, l0 = llm.hidden_views_direct(batch, max_tokens=1)
    assert torch.allclose(mean, m0, atol=1e-5) and torch.allclose(last, l0, atol=1e-5)


def test_early_exit_scores_are_the_residual_entering_their_layer(llm):
    """`score_layer` l: the residual stream entering layer l (what a full forward writes there),
    computed in forwards of their own that run no layer from l on, never cached; alone or while
    streams decode (then chunked)."""
    from macaronic.engine.engine import Request
    from macaronic.engine.errors import EngineError
    from macaronic.engine.kvpool import KVBuffer
    from macaronic.engine.model import SeqSlice

    n_layers = llm.args.n_layers
    ids = llm.tokenizer.encode(_texts()[2], add_special_tokens=False)
    kv = KVBuffer(llm.args, len(ids), llm.base.model.dtype)
    kv.keep_residual([1], llm.args.dim)
    with torch.inference_mode():
        llm.base.model.score(torch.tensor(ids), [SeqSlice(kv, len(ids))])
    want = kv.resid[1][: len(ids)].float()
    calls = []
    real = llm.base.model.score

    def spy(*a, **kw):
        calls.append(kw.get("last_layer"))
        return real(*a, **kw)

    llm.base.model.score = spy
    try:
        mean, last = llm.hidden_views([ids], layer=1)
    finally:
        del llm.base.model.score
    assert calls == [1]  # one forward, stopped before layer 1
    assert torch.allclose(mean[0], want.mean(0), atol=1e-6) and torch.allclose(last[0], want[-1], atol=1e-6)
    m0, l0 = llm.hidden_views_direct([ids], layer=1)
    assert torch.equal(mean, m0) and torch.equal(last, l0)
    full = llm.hidden_views([ids], layer=n_layers)  # the whole forward: the usual final-norm state
    assert torch.equal(full[0], llm.hidden_views([ids])[0])
    streams = [llm.submit(llm.encode_chat([{"role": "user", "content": f"count {i}"}]),
                          sampling=SamplingParams(max_tokens=400, stop_token_ids=())) for i in range(3)]
    for h in streams:
        next(iter(h))
    busy = llm.hidden_views([ids, ids[:5]], layer=1)
    for h in streams:
        h.cancel()
    for h in streams:
        h.result()  # ended (a cancelled stream offers its K/V as it ends)
    assert torch.allclose(busy[0][0], want.mean(0), atol=1e-5) and torch.allclose(busy[1][0], want[-1], atol=1e-5)
    cache = llm.engine.cache
    cache.clear()
    llm.engine.submit(Request(prompt=ids, score="hidden", score_layer=1, cache=True)).result()
    assert len(cache) == 0  # its K/V stops at layer 1: never offered
    llm.engine.submit(Request(prompt=ids, score="hidden", cache=True)).result()
    assert len(cache) == 1  # a whole forward asked to offer its K/V does
    for bad in (Request(prompt=ids, score="hidden", score_layer=0),
                Request(prompt=ids, score="hidden", score_layer=n_layers + 1),
                Request(prompt=ids, score="logprobs", score_layer=1)):
        with pytest.raises(EngineError, match="score_layer"):
            llm.engine.submit(bad)


def test_a_kept_opening_runs_once_and_routes_run_only_their_own_tokens_in_the_schedule(llm, monkeypatch):
    """The router's kept template opening is engine work: one score request keeps its K/V and state
    sum (`score_keep`), later ones carry it (`score_kept`) and run only their own tokens, batched
    with decoding streams by the scheduler (no forward outside it). Their views equal the whole
    forwards' within float noise; a prompt that does not start with the opening is refused."""
    from macaronic.engine.engine import EngineError, Request

    opening = llm.encode_chat([{"role": "user", "content": "x"}])[:-4]
    texts = ["Show me the weather in Oslo as a card.", "write a haiku about tea"]
    ids = [opening + llm.tokenizer.encode(t, add_special_tokens=False) for t in texts]
    kept = llm.engine.submit(Request(prompt=opening, score="hidden", score_layer=1, cache=False,
                                     score_keep=True))
    kept.result()
    k = kept.score["kept"]
    assert k.tokens == tuple(opening) and k.layer == 1 and k.kv.length == len(opening)
    streams = [llm.submit(llm.encode_chat([{"role": "user", "content": f"s{i}"}]),
                          sampling=SamplingParams(max_tokens=400, stop_token_ids=())) for i in range(2)]
    for h in streams:
        next(iter(h))
    log = record_forwards(monkeypatch, llm.base.model)
    before = llm.engine.stats["prefill_tokens"]
    handles = [llm.engine.submit(Request(prompt=x, score="hidden", score_layer=1, cache=False, score_kept=k))
               for x in ids]
    got = [h.result() and h.score for h in handles]
    for h in streams:
        h.cancel()
    assert llm.engine.stats["prefill_tokens"] - before == sum(len(x) - len(opening) for x in ids)
    assert any(n == len(x) - len(opening) for f in log for _, n in f for x in ids)  # only their own tokens ran
    whole = llm.hidden_views_direct(ids, layer=1)
    for i, g in enumerate(got):
        assert torch.allclose(g["mean"], whole[0][i], atol=1e-5) and torch.allclose(g["last"], whole[1][i], atol=1e-5)
    for bad in (Request(prompt=opening, score="hidden", score_layer=1, score_kept=k),  # nothing past it
                Request(prompt=[opening[0] + 1] + ids[0][1:], score="hidden", score_layer=1, score_kept=k),
                Request(prompt=ids[0], score="hidden", score_layer=2, score_kept=k),  # another layer
                Request(prompt=ids[0], score="logprobs", score_kept=k)):
        with pytest.raises(EngineError, match="score_kept"):
            llm.engine.submit(bad)


def test_score_requests_are_prefix_cached(llm):
    """The prompted router's route prompt is a long shared prefix: the second request reuses it."""
    prompt = llm.encode_chat([{"role": "system", "content": "Pick one route: chat, agent, coding, genui. " * 8},
                              {"role": "user", "content": "draw me a chart"}])
    llm.next_logprobs(prompt + [5])
    before = llm.engine.stats["reused_tokens"]
    got = llm.next_logprobs(prompt + [6])
    assert llm.engine.stats["reused_tokens"] - before >= len(prompt)
    assert torch.allclose(got, llm.next_logprobs_direct(prompt + [6]), atol=1e-5)


def test_score_requests_wait_for_no_decode_row(llm):
    """A full batch of generating streams does not hold routing up: score requests take no row."""
    llm2_cfg = llm.config
    streams = [llm.submit(llm.encode_chat([{"role": "user", "content": f"s{i}"}]),
                          sampling=SamplingParams(max_tokens=400, stop_token_ids=()))
               for i in range(llm2_cfg.max_batch + 2)]  # two more than fit: they wait for a row
    for h in streams[: llm2_cfg.max_batch]:
        next(iter(h))
    mean, _ = llm.hidden_views([llm.tokenizer.encode("route me", add_special_tokens=False)])
    assert mean.shape == (1, llm.args.dim)
    assert not any(h.done.is_set() for h in streams)  # answered while every row was still busy
    for h in streams:
        h.cancel()


def record_forwards(monkeypatch, model) -> list[list[tuple[int, int]]]:
    """Every forward of `model` from now on (each entry point: decode, recompute, score), as
    (K/V buffer id, new tokens) per sequence."""
    log: list[list[tuple[int, int]]] = []

    def recording(job):
        def run(first, seqs, *a, **kw):
            log.append([(id(s.kv), s.n_new) for s in seqs])
            return job(first, seqs, *a, **kw)
        return run

    for name in ("decode", "recompute", "score"):
        monkeypatch.setattr(model, name, recording(getattr(model, name)))
    return log


@pytest.mark.parametrize("fused", [True, False])
def test_no_stream_stalls_while_routed_requests_and_long_prefills_arrive(llm, monkeypatch, fused):
    """Eight streams decode; meanwhile a routing thread computes the router's features (the
    route head's two views of four requests, two long) and next-token log-probs, and two long
    prompts arrive. Between any two tokens of any stream at most one other forward ran and at
    most `prefill_chunk_busy` prompt tokens were computed (the old direct router forwards ran
    whole requests under the engine lock between two tokens: this fails on them). Both step
    shapes: prompt chunks fused into the decode forward, and a forward each."""
    budget = llm.config.prefill_chunk_busy
    monkeypatch.setattr(llm.engine, "config", replace(llm.engine.config, fuse_steps=fused))
    log = record_forwards(monkeypatch, llm.base.model)
    streams = [llm.submit(llm.encode_chat([{"role": "user", "content": f"tell me about {i}"}]),
                          sampling=SamplingParams(max_tokens=600, stop_token_ids=())) for i in range(8)]
    for h in streams:
        next(iter(h))
    kvs = {id(s.kv) for s in list(llm.engine._active) if s.handle in streams}
    assert len(kvs) == 8
    start = len(log)

    def route():
        head_features(llm, _texts())
        prompt = llm.encode_chat([{"role": "user", "content": "route prompt " * 30}])
        llm.next_logprobs(prompt)
        llm.next_logprobs(prompt + [7])

    router = threading.Thread(target=route)
    router.start()
    long_prompts = [llm.submit(llm.encode_chat([{"role": "user", "content": f"{i} " + "long history " * 25}]),
                               sampling=SamplingParams(max_tokens=4, stop_token_ids=())) for i in range(2)]
    for h in long_prompts:
        assert h.result()[1].finish_reason == "length"
    router.join()
    end = len(log)
    assert not any(h.done.is_set() for h in streams), "a stream ended before the routed work did: no overlap"
    for h in streams:
        h.cancel()
    window = log[start:end]
    work = sum(n for f in window for k, n in f if k not in kvs)
    assert work > 4 * budget  # the routed and long-prompt work really overlapped decoding
    worst_forwards = worst_tokens = 0
    fewest = len(window)
    for kv in kvs:
        steps = [i for i, f in enumerate(window) if (kv, 1) in f]  # this stream's tokens
        fewest = min(fewest, len(steps))
        for a, b in zip(steps, steps[1:]):
            worst_forwards = max(worst_forwards, b - a - 1)  # forwards strictly between the two tokens
            # prompt work up to the second token: the forwards between, and that token's own
            # forward (a fused step carries prompt chunks with the decode step; other streams'
            # one-token decodes are not prompt work)
            worst_tokens = max(worst_tokens, sum(n for f in window[a + 1 : b + 1] for k, n in f if k not in kvs and n > 1))
    seen = f"{worst_tokens} prompt tokens in {worst_forwards} forwards between two tokens of a stream, " \
           f"{fewest} tokens of the slowest stream while {work} prompt tokens ran"
    print(seen)
    assert worst_tokens <= budget, seen
    assert worst_forwards <= 1, seen
    assert fewest > work // budget, seen  # every stream kept decoding all along
