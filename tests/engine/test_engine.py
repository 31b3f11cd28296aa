"""Engine behaviour on tiny random models: mixed batches, exact turn switches, caching, bad input."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from macaronic.engine.engine import EngineConfig
from macaronic.engine.errors import EngineError
from macaronic.engine.llm import load_llm
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice
from macaronic.engine.sampling import SamplingParams
from macaronic.engine.slots import ReferenceLora
from macaronic.testing import make_random_adapter

GREEDY = SamplingParams(max_tokens=12, stop_token_ids=())


@pytest.fixture()
def llm_factory(tiny_dirs, tmp_path):
    made = []

    def make(mode="turn", n=4, family="llama", **cfg):
        llm = load_llm(tiny_dirs[family], [], EngineConfig(max_context=1024, **cfg))
        for i in range(n):
            llm.add_adapter(make_random_adapter(tmp_path / f"{mode}{i}", llm.args, rank=2 + i, seed=10 + i, mode=mode),
                            name=f"a{i}")
        made.append(llm)
        return llm

    yield make
    for m in made:
        m.close()


class Recorder:
    """A logits processor that records the logits the sampler saw (test double)."""

    def __init__(self):
        self.logits = []

    def __call__(self, generated, logits):
        self.logits.append(logits.clone())
        return logits


def test_fast_bank_equals_reference_on_mixed_batches(llm_factory):
    llm = llm_factory(mode="full", n=4)
    model, bank = llm.base.model, llm.engine.bank
    slot_of = {n: llm.adapters.acquire(n) for n in ["a0", "a1", "a2", "a3"]}
    ref = ReferenceLora({slot_of[n]: llm.adapters.lora_pairs(n) for n in slot_of}, llm.args)
    g = torch.Generator().manual_seed(0)
    # decode-shaped batch: 6 sequences, one token each, 3+ adapters and the base mixed
    seq_slots = [slot_of["a0"], slot_of["a1"], 0, slot_of["a2"], slot_of["a3"], slot_of["a1"]]
    prompts = [torch.randint(3, 300, (5 + i,), generator=g) for i in range(6)]
    outs = {}
    for path in ("fast", "ref"):
        kvs = [KVBuffer(llm.args, 32, torch.float32) for _ in prompts]
        with torch.no_grad():
            for p, kv, s in zip(prompts, kvs, seq_slots):  # prefill each alone (segment path)
                sl = torch.full((len(p),), s)
                model(p, [SeqSlice(kv, len(p))], lora=bank if path == "fast" else ref,
                      slots=bank.plan(sl) if path == "fast" else sl, logits="none")
            toks = torch.tensor([int(p[-1]) for p in prompts])
            sl = torch.tensor(seq_slots)
            outs[path] = model(toks, [SeqSlice(kv, 1) for kv in kvs], lora=bank if path == "fast" else ref,
                               slots=bank.plan(sl) if path == "fast" else sl)
    assert torch.allclose(outs["fast"], outs["ref"], atol=1e-5)
    # a long mixed-slot prefill (segment path with a switch mid-sequence) also matches
    p = torch.randint(3, 300, (100,), generator=g)
    sl = torch.tensor([slot_of["a0"]] * 40 + [0] * 20 + [slot_of["a2"]] * 40)
    with torch.no_grad():
        f = model(p, [SeqSlice(KVBuffer(llm.args, 100, torch.float32), 100)], lora=bank, slots=bank.plan(sl), logits="all")
        r = model(p, [SeqSlice(KVBuffer(llm.args, 100, torch.float32), 100)], lora=ref, slots=sl, logits="all")
    assert torch.allclose(f, r, atol=1e-5)


def test_concurrent_mixed_adapters_equal_solo_runs(llm_factory):
    llm = llm_factory(mode="turn", n=4, prefix_cache=False)
    prompts = [llm.encode_chat([{"role": "user", "content": f"question number {i}"}]) for i in range(6)]
    adapters = ["a0", "a1", "a2", "a3", None, "a1"]
    solo = []
    for p, a in zip(prompts, adapters):
        h = llm.submit(p, a, GREEDY)
        h.result()
        solo.append(h.output_ids)
    llm.engine.stats["decode_steps"] = 0
    handles = [llm.submit(p, a, GREEDY) for p, a in zip(prompts, adapters)]
    for h in handles:
        h.result()
    assert [h.output_ids for h in handles] == solo
    assert llm.engine.stats["decode_steps"] < sum(len(s) for s in solo)  # they really shared steps


def _two_turns(llm, first, second):
    """Turn 1 on `first`, then turn 2 (built at token level) on `second`; returns usage and logits."""
    p1 = llm.encode_chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}])
    h1 = llm.submit(p1, first, GREEDY)
    h1.result()
    tail = llm.tokenizer.encode("<|im_end|>\n<|im_start|>user\nand now?<|im_end|>\n<|im_start|>assistant\n",
                                add_special_tokens=False)
    p2 = p1 + h1.output_ids + tail
    rec = Recorder()
    h2 = llm.submit(p2, second, GREEDY, logits_processor=rec)
    h2.result()
    return p1, h1, p2, h2, rec


def test_turn_mode_switch_recomputes_no_history_and_is_exact(llm_factory):
    llm = llm_factory(mode="turn", n=2)
    p1, h1, p2, h2, rec = _two_turns(llm, "a0", "a1")
    history = len(p1) + len(h1.output_ids) - 1  # the last sampled token was never fed
    assert h2.usage["reused_tokens"] == history
    assert h2.usage["prefill_tokens"] == len(p2) - history
    # equals a from-scratch forward under the same rule: each position keeps the adapter of its turn
    start1, start2 = llm.turn_start(p1), llm.turn_start(p2)
    labels = [None] * start1 + ["a0"] * (history - start1) + [None] * (start2 - history) + ["a1"] * (len(p2) - start2)
    scratch = llm.score(p2, labels, logits="last")[0]
    assert torch.allclose(rec.logits[0], scratch, atol=1e-5)


def test_full_mode_switch_recomputes_everything_same_adapter_reuses(llm_factory):
    llm = llm_factory(mode="full", n=2)
    _, _, p2, h2, _ = _two_turns(llm, "a0", "a1")
    assert h2.usage["reused_tokens"] == 0 and h2.usage["prefill_tokens"] == len(p2)
    llm.engine.cache.clear()
    p1, h1, p2, h2, rec = _two_turns(llm, "a0", "a0")
    assert h2.usage["reused_tokens"] == len(p1) + len(h1.output_ids) - 1
    scratch = llm.score(p2, "a0", logits="last")[0]
    assert torch.allclose(rec.logits[0], scratch, atol=1e-5)


def test_history_base_rule_recomputes_the_previous_turn_only(llm_factory):
    llm = llm_factory(mode="turn", n=2, history="base")
    p1, h1, p2, h2, rec = _two_turns(llm, "a0", "a1")
    assert h2.usage["reused_tokens"] == llm.turn_start(p1)  # up to where turn 1's adapter began
    start2 = llm.turn_start(p2)
    scratch = llm.score(p2, [None] * start2 + ["a1"] * (len(p2) - start2), logits="last")[0]
    assert torch.allclose(rec.logits[0], scratch, atol=1e-5)


def test_prefix_cache_is_bounded(llm_factory):
    llm = llm_factory(mode="turn", n=1, prefix_cache_bytes=200_000)
    for i in range(8):
        llm.submit(llm.encode_chat([{"role": "user", "content": f"fill {i} " * 5}]), "a0", GREEDY).result()
    assert llm.engine.cache.nbytes <= 200_000
    assert len(llm.engine.cache) >= 1


def test_base_is_frozen_through_a_session(llm_factory, tmp_path):
    from macaronic.engine.base import fingerprint

    llm = llm_factory(mode="turn", n=3, max_loras=2)
    before = fingerprint(llm.base.model)
    assert before == llm.base.fingerprint
    for a in ["a0", "a1", "a2", "a0", None]:
        llm.submit(llm.encode_chat([{"role": "user", "content": "hi"}]), a, GREEDY).result()
    llm.adapters.unregister("a2")
    llm.add_adapter(make_random_adapter(tmp_path / "late", llm.args, seed=99))
    llm.submit(llm.encode_chat([{"role": "user", "content": "hi"}]), "late", GREEDY).result()
    assert fingerprint(llm.base.model) == before


def test_lru_serves_more_adapters_than_slots(llm_factory):
    llm = llm_factory(mode="turn", n=4, max_loras=2)
    p = llm.encode_chat([{"role": "user", "content": "rotate"}])
    outs = {}
    for a in ["a0", "a1", "a2", "a3", "a0"]:
        h = llm.submit(p, a, GREEDY)
        h.result()
        outs.setdefault(a, []).append(h.output_ids)
    assert outs["a0"][0] == outs["a0"][1]  # reloaded into a different slot, same result
    assert len({tuple(v[0]) for v in outs.values()}) == 4


def test_bad_requests_are_clear_errors_and_do_not_hurt_others(llm_factory):
    llm = llm_factory(mode="turn", n=1)
    good = llm.encode_chat([{"role": "user", "content": "good"}])
    running = llm.submit(good, "a0", SamplingParams(max_tokens=40, stop_token_ids=()))
    for call, code, words in [
        (lambda: llm.submit([], "a0"), "bad_prompt", "empty prompt"),
        (lambda: llm.submit([5] * 2000, "a0"), "context_overflow", "context window"),
        (lambda: llm.submit(good, "nope"), "unknown_adapter", "unknown adapter"),
        (lambda: llm.submit(good, "a0", SamplingParams(temperature=-1)), "bad_sampling", "temperature"),
        (lambda: llm.submit(good, "a0", SamplingParams(max_tokens=0)), "bad_sampling", "max_tokens"),
        (lambda: llm.submit([10**9], "a0"), "bad_prompt", "token ids"),
        (lambda: llm.submit(good, "a0", active_from=99), "bad_request", "active_from"),
    ]:
        with pytest.raises(EngineError, match=words) as err:
            call()
        assert err.value.code == code

    def boom(generated, logits):
        raise RuntimeError("processor exploded")

    bad = llm.submit(good, "a0", GREEDY, logits_processor=boom)
    text, last = bad.result()
    assert last.finish_reason == "error" and "exploded" in last.error and last.code == "internal"
    text, last = running.result()
    assert last.finish_reason == "length" and len(running.output_ids) == 40


def test_cancel_stops_a_running_request(llm_factory):
    llm = llm_factory(mode="turn", n=1)
    h = llm.submit(llm.encode_chat([{"role": "user", "content": "long"}]), "a0",
                   SamplingParams(max_tokens=2000, stop_token_ids=()))
    first = next(iter(h))
    assert first.finish_reason is None
    h.cancel()
    reasons = [ev.finish_reason for ev in h]
    assert reasons[-1] == "cancelled" and len(h.output_ids) < 2000


def test_sampling_seed_stop_strings_and_top_k(llm_factory):
    llm = llm_factory(mode="turn", n=1)
    p = llm.encode_chat([{"role": "user", "content": "sample"}])
    sp = SamplingParams(max_tokens=20, temperature=1.0, top_p=0.9, top_k=50, seed=123, stop_token_ids=())
    a, b = llm.submit(p, "a0", sp), llm.submit(p, "a0", sp)
    a.result(), b.result()
    assert a.output_ids == b.output_ids
    full, _ = llm.submit(p, "a0", GREEDY).result()
    stop = full[3:5]
    text, last = llm.submit(p, "a0", SamplingParams(max_tokens=12, stop_token_ids=(), stop=(stop,))).result()
    assert last.finish_reason == "stop" and stop not in text and full.startswith(text)


def test_ignore_eos_decodes_past_the_end_of_turn_tokens_to_max_tokens(llm_factory):
    """`ignore_eos` (vLLM's): the end-of-turn tokens end nothing; max_tokens does. The third token greedy
    decoding gives stands in for an end-of-turn token."""
    llm = llm_factory(mode="turn", n=1)
    p = llm.encode_chat([{"role": "user", "content": "end early"}])
    llm.submit(p, "a0", GREEDY).result()
    full = llm.submit(p, "a0", GREEDY)
    full.result()
    eot = full.output_ids[2]
    ended = llm.submit(p, "a0", SamplingParams(max_tokens=12, stop_token_ids=(eot,)))
    _, last = ended.result()
    assert last.finish_reason == "stop" and ended.output_ids == full.output_ids[:full.output_ids.index(eot)]
    on = llm.submit(p, "a0", SamplingParams(max_tokens=12, stop_token_ids=(eot,), ignore_eos=True))
    _, last = on.result()
    assert last.finish_reason == "length" and on.output_ids == full.output_ids
    with pytest.raises(ValueError, match="ignore_eos must be true or false"):
        SamplingParams(ignore_eos="yes").validate()


def test_async_iteration(llm_factory):
    import asyncio

    llm = llm_factory(mode="turn", n=1)

    async def run():
        h = llm.submit(llm.encode_chat([{"role": "user", "content": "x"}]), "a0", GREEDY,
                       loop=asyncio.get_running_loop())
        return [ev async for ev in h.aiter()]

    evs = asyncio.run(run())
    assert evs[-1].finish_reason == "length" and evs[-1].usage["completion_tokens"] == 12


def test_adapter_load_happens_off_the_engine_thread(llm_factory):
    """A request whose adapter is still loading does not block another request's decoding."""
    llm = llm_factory(mode="turn", n=2, max_loras=1)
    gate = threading.Event()
    real_read = llm.adapters.stage.__func__

    def slow_stage(self, name):
        fut = real_read(self, name)
        return fut if name != "a1" else _GatedFuture(fut, gate)

    llm.adapters.stage = slow_stage.__get__(llm.adapters)
    p = llm.encode_chat([{"role": "user", "content": "hi"}])
    running = llm.submit(p, "a0", SamplingParams(max_tokens=30, stop_token_ids=()))
    waiting = llm.submit(p, "a1", GREEDY)  # its only slot is busy and its load is gated
    text, last = running.result()
    assert last.finish_reason == "length"
    assert not waiting.done.is_set()
    gate.set()
    assert waiting.result()[1].finish_reason == "length"


class _GatedFuture:
    def __init__(self, fut, gate):
        self.fut, self.gate = fut, gate

    def done(self):
        return self.gate.is_set() and self.fut.done()

    def result(self):
        self.gate.wait()
        return self.fut.result()


def test_pooled_hidden_batched_equals_one_at_a_time(llm_factory):
    llm = llm_factory(mode="turn", n=1)
    batch = [llm.encode_chat([{"role": "user", "content": "x" * k}]) for k in (1, 7, 30, 3)]
    together = llm.pooled_hidden(batch, max_tokens=60)  # forces several chunks
    alone = torch.stack([llm.score(ids, None, hidden=True).mean(0) for ids in batch])
    assert together.shape == (4, llm.args.dim)
    assert torch.allclose(together, alone, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pooled_decode_attention_equals_one_call_per_sequence(tiny_dirs, dtype):
    """One batched attention over KVPool rows gives the per-sequence logits (with a gap row)."""
    from macaronic.engine.base import load_base
    from macaronic.engine.kvpool import KVPool

    base = load_base(tiny_dirs["llama"], dtype=dtype)
    m, args = base.model, base.args
    g = torch.Generator().manual_seed(11)
    prompts = [torch.randint(3, 300, (n,), generator=g) for n in (5, 17, 9, 30)]
    pool = KVPool(args, dtype, max_cap=64)
    pooled = [pool.alloc(40) for _ in prompts]
    alone = [KVBuffer(args, 40, dtype) for _ in prompts]
    with torch.no_grad():
        for p, a, b in zip(prompts, pooled, alone):
            m(p, [SeqSlice(a, len(p))]), m(p, [SeqSlice(b, len(p))])
        batch = [0, 1, 3]  # row 2 is live but not in this step: it must not disturb the others
        for step in range(3):
            toks = torch.tensor([7 + step] * len(batch))
            got = m(toks, [SeqSlice(pooled[i], 1) for i in batch], logits="all")
            want = torch.cat([m(toks[:1], [SeqSlice(alone[i], 1)], logits="all") for i in batch])
            assert torch.allclose(got.float(), want.float(), atol=1e-5 if dtype == torch.float32 else 0.05)
    assert [kv.length for kv in pooled] == [8, 20, 9, 33]
    # growing the pool keeps live rows; releasing every row drops it
    before = pooled[3].k[:, :, :33].clone()
    more = pool.alloc(60)  # more rows than the pool has: it grows
    assert pool.k.shape[1] > 4 and torch.equal(pooled[3].k[:, :, :33], before)
    for kv in [*pooled, more]:
        pool.release(kv)
    assert pool.k is None and not pool.live


def test_engine_results_do_not_depend_on_the_kv_pool(tiny_dirs, tmp_path):
    outs = {}
    for pool_tokens in (0, 1024):
        llm = load_llm(tiny_dirs["llama"], [], EngineConfig(kv_pool_tokens=pool_tokens))
        llm.add_adapter(make_random_adapter(tmp_path / "a", llm.args, rank=4, seed=3, mode="turn", scale=0.5), "a")
        sp = SamplingParams(max_tokens=8, stop_token_ids=())
        hs = [llm.submit(llm.encode_chat([{"role": "user", "content": "x" * (i + 1)}]), "a" if i % 2 else None, sp)
              for i in range(6)]
        outs[pool_tokens] = [(h.result(), h.output_ids)[1] for h in hs]
        assert llm.engine.kv_pool.k is None  # every row released when the requests finished
        llm.close()
    assert outs[0] == outs[1024]


def test_slot_bank_widens_to_the_widest_adapter_and_keeps_residents(llm_factory, tmp_path):
    llm = llm_factory(n=0)
    assert llm.engine.bank.r_max <= 4
    ids = llm.encode_chat([{"role": "user", "content": "widen"}])
    llm.add_adapter(make_random_adapter(tmp_path / "r2", llm.args, rank=2, seed=1, scale=0.5), "r2")
    before = llm.score(ids, "r2")
    llm.add_adapter(make_random_adapter(tmp_path / "r12", llm.args, rank=12, seed=2, scale=0.5), "r12")
    assert llm.engine.bank.r_max == 12
    assert torch.allclose(llm.score(ids, "r2"), before, atol=1e-5)  # the resident rank-2 adapter survived
    with pytest.raises(Exception, match="max rank"):
        llm.add_adapter(make_random_adapter(tmp_path / "r32", llm.args, rank=32, seed=3), "r32")


def test_a_burst_of_short_prompts_is_prefilled_together_and_exactly(llm_factory):
    llm = llm_factory(mode="turn", n=3, prefix_cache=False)
    prompts = [llm.encode_chat([{"role": "user", "content": f"burst {i}"}]) for i in range(6)]
    adapters = ["a0", None, "a1", "a2", "a0", None]
    solo = []
    for p, a in zip(prompts, adapters):
        h = llm.submit(p, a, GREEDY)
        h.result()
        solo.append(h.output_ids)
    before = llm.engine.stats["prefill_forwards"]
    with llm.engine.lock:  # the engine thread waits: the burst queues up meanwhile
        handles = [llm.submit(p, a, GREEDY) for p, a in zip(prompts, adapters)]
    for h in handles:
        h.result()
    assert [h.output_ids for h in handles] == solo
    assert llm.engine.stats["prefill_forwards"] - before <= 2  # not one forward per prompt
