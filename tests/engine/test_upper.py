"""`upper` mode: LoRA in the top k layers; a switch recomputes only those layers of the history,
exactly (equal to a from-scratch forward under the new adapter on every token)."""

from __future__ import annotations

import pytest
import torch

from macaronic.engine.adapters import AdapterError, read_adapter
from macaronic.engine.engine import EngineConfig
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.llm import load_llm
from macaronic.engine.model import SeqSlice
from macaronic.engine.sampling import SamplingParams
from macaronic.testing import make_random_adapter
from test_engine import Recorder  # the test double that keeps the logits the sampler saw
from test_scoring import record_forwards

GREEDY = SamplingParams(max_tokens=10, stop_token_ids=())
TAIL = "<|im_end|>\n<|im_start|>user\nand now?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture()
def llm(tiny_dirs, tmp_path):
    """Three layers: upper adapters u1 (top 1) and u2a, u2b (top 2), a turn adapter and a full one."""
    m = load_llm(tiny_dirs["llama"], [], EngineConfig(max_context=1024))
    for name, mode, k, seed in [("u1", "upper", 1, 1), ("u2a", "upper", 2, 2), ("u2b", "upper", 2, 3),
                                ("t", "turn", None, 4), ("f", "full", None, 5)]:
        m.add_adapter(make_random_adapter(tmp_path / name, m.args, rank=4, seed=seed, mode=mode, top_k=k), name=name)
    yield m
    m.close()


def _turn(llm, prompt, adapter):
    rec = Recorder()
    h = llm.submit(prompt, adapter, GREEDY, logits_processor=rec)
    h.result()
    return h, rec


def _second(llm, p1, h1):
    return p1 + h1.output_ids + llm.tokenizer.encode(TAIL, add_special_tokens=False)


def _first_prompt(llm, text="hello there"):
    return llm.encode_chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": text}])


def test_switch_recomputes_only_the_top_layers_of_the_history_exactly(llm):
    p1 = _first_prompt(llm)
    h1, _ = _turn(llm, p1, "u2a")
    p2 = _second(llm, p1, h1)
    before = llm.engine.stats["upper_tokens"]
    h2, rec = _turn(llm, p2, "u2b")
    history = len(p1) + len(h1.output_ids) - 1  # the last sampled token was never fed
    assert h2.usage["reused_tokens"] == 0
    assert h2.usage["upper_tokens"] == history  # every history token, in layers 1..2 only
    assert h2.usage["prefill_tokens"] == len(p2) - history
    assert llm.engine.stats["upper_tokens"] - before == history
    scratch = llm.score(p2, "u2b", logits="last")[0]  # full semantics: u2b on every token
    assert torch.allclose(rec.logits[0], scratch, atol=1e-5)
    # back on u2a: turn 1's own entry gives every layer of its positions, turn 2's entry the lower
    # layers of the rest; exact again
    p3 = p2 + h2.output_ids + llm.tokenizer.encode(TAIL, add_special_tokens=False)
    h3, rec3 = _turn(llm, p3, "u2a")
    assert h3.usage["reused_tokens"] == history
    assert h3.usage["upper_tokens"] == len(p2) + len(h2.output_ids) - 1 - history
    assert torch.allclose(rec3.logits[0], llm.score(p3, "u2a", logits="last")[0], atol=1e-5)


def test_same_adapter_reuses_every_layer(llm):
    p1 = _first_prompt(llm, "same adapter")
    h1, _ = _turn(llm, p1, "u1")
    p2 = _second(llm, p1, h1)
    h2, rec = _turn(llm, p2, "u1")
    assert h2.usage["reused_tokens"] == len(p1) + len(h1.output_ids) - 1 and h2.usage["upper_tokens"] == 0
    assert torch.allclose(rec.logits[0], llm.score(p2, "u1", logits="last")[0], atol=1e-5)


def test_history_of_a_deeper_adapter_is_recomputed_in_full(llm):
    """u1's LoRA starts at layer 2, u2's at layer 1: u2's residual at layer 2 carries u2, so a
    switch to u1 cannot take it (nor can a turn adapter's turn be taken by any upper one)."""
    p1 = _first_prompt(llm, "deeper first")
    h1, _ = _turn(llm, p1, "u2a")
    p2 = _second(llm, p1, h1)
    h2, rec = _turn(llm, p2, "u1")
    assert h2.usage["upper_tokens"] == 0 and h2.usage["reused_tokens"] == 0
    assert torch.allclose(rec.logits[0], llm.score(p2, "u1", logits="last")[0], atol=1e-5)
    llm.engine.cache.clear()
    h1, _ = _turn(llm, p1, "t")  # a turn adapter from the last user header on: its turn is not the base's
    p2 = _second(llm, p1, h1)
    h2, rec = _turn(llm, p2, "u2b")
    assert h2.usage["upper_tokens"] == llm.turn_start(p1)  # the base-computed part before turn 1
    assert torch.allclose(rec.logits[0], llm.score(p2, "u2b", logits="last")[0], atol=1e-5)


def test_base_history_and_concurrent_conversations_are_exact(llm):
    """A base request's history (a route hop) and two conversations decoded in one batch (pooled
    K/V rows keep their residual rows too) both feed exact upper switches."""
    prompts = [_first_prompt(llm, f"conversation {i}") for i in range(2)]
    firsts = [llm.submit(p, a, GREEDY) for p, a in zip(prompts, [None, "u2a"])]
    for h in firsts:
        h.result()
    for p1, h1, nxt in zip(prompts, firsts, ["u2b", "u2b"]):
        p2 = _second(llm, p1, h1)
        h2, rec = _turn(llm, p2, nxt)
        # the second one takes the shared system prefix whole from the first one's u2b entry
        assert h2.usage["reused_tokens"] + h2.usage["upper_tokens"] == len(p1) + len(h1.output_ids) - 1
        assert h2.usage["upper_tokens"] > 0
        assert torch.allclose(rec.logits[0], llm.score(p2, nxt, logits="last")[0], atol=1e-5)


def test_forward_from_a_kept_residual_equals_the_whole_forward(llm):
    model, n = llm.base.model, 20
    ids = torch.randint(3, 300, (n,), generator=torch.Generator().manual_seed(0))
    whole = KVBuffer(llm.args, n, torch.float32)
    whole.keep_residual([1], llm.args.dim)
    with torch.no_grad():
        ref = model(ids, [SeqSlice(whole, n)], logits="all")
        part = KVBuffer(llm.args, n, torch.float32)
        part.copy_prefix(whole, n, below=1)  # layer 0's K/V only
        out = model.recompute(whole.resid[1], [SeqSlice(part, n)], 1, logits="all")
    assert torch.allclose(out, ref, atol=1e-5)
    assert torch.allclose(part.k, whole.k, atol=1e-6) and part.length == n
    with pytest.raises(ValueError, match="needs resid"):
        model.recompute(whole.resid[1][:-1], [SeqSlice(KVBuffer(llm.args, n, torch.float32), n)], 1)


def test_upper_metadata_is_checked(llm, tmp_path):
    args = llm.args
    ok = make_random_adapter(tmp_path / "ok", args, mode="upper", top_k=2)
    info, _ = read_adapter(ok, args)
    assert (info.mode, info.top_k, info.layers) == ("upper", 2, (1, 2))
    with pytest.raises(AdapterError, match="needs top_k"):
        read_adapter(make_random_adapter(tmp_path / "nok", args, mode="upper", layers=[2]), args)
    with pytest.raises(AdapterError, match=r"layers 1\.\.2 only; found layers \[0\]"):
        read_adapter(make_random_adapter(tmp_path / "low", args, mode="upper", top_k=2, layers=[0, 1, 2]), args)
    with pytest.raises(AdapterError, match="top_k 1 is for mode 'upper'"):
        read_adapter(make_random_adapter(tmp_path / "full", args, mode="full", top_k=1), args)
    with pytest.raises(AdapterError, match=r"integer in \[1, 3\]"):
        read_adapter(make_random_adapter(tmp_path / "deep", args, mode="upper", top_k=5, layers=[2]), args)
    with pytest.raises(AdapterError, match="alora_invocation_tokens"):
        read_adapter(make_random_adapter(tmp_path / "alora", args, mode="upper", top_k=1, invocation_tokens=[1, 2]), args)


def test_a_long_switched_history_is_recomputed_a_chunk_a_step_without_stalling_streams(llm, monkeypatch):
    """Two streams decode while a switch to another upper adapter recomputes a long history:
    the recompute runs `prefill_chunk_busy` tokens a step, between two tokens of each stream
    (one forward in one step ran it whole before), and the switched turn is still exact."""
    budget = llm.config.prefill_chunk_busy
    p1 = _first_prompt(llm, "a long history of many words " * 12)
    h1, _ = _turn(llm, p1, "u2a")
    p2 = _second(llm, p1, h1)
    history = len(p1) + len(h1.output_ids) - 1
    assert history > 4 * budget
    log = record_forwards(monkeypatch, llm.base.model)  # per forward: (K/V buffer id, new tokens) per sequence
    streams = [llm.submit(_first_prompt(llm, f"stream {i}"), None, SamplingParams(max_tokens=900, stop_token_ids=()))
               for i in range(2)]
    for h in streams:
        next(iter(h))
    kvs = {id(s.kv) for s in list(llm.engine._active) if s.handle in streams}
    start = len(log)
    h2, rec = _turn(llm, p2, "u2b")
    window = log[start:]
    assert not any(h.done.is_set() for h in streams), "a stream ended before the switched turn: no overlap"
    for h in streams:
        h.cancel()
    assert h2.usage["upper_tokens"] == history and h2.usage["reused_tokens"] == 0
    worst = 0
    for kv in kvs:
        steps = [i for i, f in enumerate(window) if (kv, 1) in f]  # this stream's tokens
        assert len(steps) > history // budget  # it kept decoding all along
        for a, b in zip(steps, steps[1:]):
            worst = max(worst, sum(n for f in window[a + 1 : b + 1] for k, n in f if k not in kvs and n > 1))
    assert worst <= budget, f"{worst} prompt tokens between two tokens of a stream"
    monkeypatch.undo()
    assert torch.allclose(rec.logits[0], llm.score(p2, "u2b", logits="last")[0], atol=1e-5)
