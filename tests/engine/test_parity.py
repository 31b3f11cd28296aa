"""Logits parity of the lean model against Hugging Face transformers and PEFT."""

from __future__ import annotations

import pytest
import torch

from macaronic.engine.base import load_base
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice


def _hf(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_logits_match_transformers(tiny_dirs, family):
    base = load_base(tiny_dirs[family])
    hf = _hf(tiny_dirs[family])
    ids = torch.randint(3, 300, (40,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(ids[None]).logits[0]
        ours = base.model(ids, [SeqSlice(KVBuffer(base.args, 40, torch.float32), 40)], logits="all")
    assert (ours - ref).abs().max().item() <= 1e-4


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_chunked_and_incremental_match_one_pass(tiny_dirs, family):
    base = load_base(tiny_dirs[family])
    ids = torch.randint(3, 300, (30,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = base.model(ids, [SeqSlice(KVBuffer(base.args, 30, torch.float32), 30)], logits="all")
        kv = KVBuffer(base.args, 30, torch.float32)
        parts = [base.model(ids[:12], [SeqSlice(kv, 12)], logits="all"),
                 base.model(ids[12:20], [SeqSlice(kv, 8)], logits="all")]
        parts += [base.model(ids[i : i + 1], [SeqSlice(kv, 1)], logits="all") for i in range(20, 30)]
    assert torch.allclose(torch.cat(parts), full, atol=1e-5)


def _peft_logits(base_dir, adapter_dir, ids):
    from peft import PeftModel

    model = PeftModel.from_pretrained(_hf(base_dir), str(adapter_dir)).eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


def test_full_mode_matches_peft(tiny_dirs, tmp_path):
    from macaronic.engine.llm import load_llm
    from macaronic.testing import make_random_adapter

    llm = load_llm(tiny_dirs["llama"], [])
    ad = make_random_adapter(tmp_path / "a", llm.args, rank=4, seed=3, mode="full")
    llm.add_adapter(ad)
    ids = llm.encode_chat([{"role": "user", "content": "parity please"}])
    ours = llm.score(ids, "a")
    ref = _peft_logits(tiny_dirs["llama"], ad, ids)
    base_only = llm.score(ids, None)
    assert (ours - ref).abs().max().item() <= 1e-4
    assert (ours - base_only).abs().max().item() > 1e-2  # the adapter really does something


def test_turn_mode_matches_peft_activated_lora(tiny_dirs, tmp_path):
    """PEFT's aLoRA activates from the last invocation sequence on: our turn rule with base history."""
    from macaronic.engine.llm import load_llm
    from macaronic.testing import make_random_adapter

    llm = load_llm(tiny_dirs["qwen2"], [])
    marker = llm._user_marker
    ad = make_random_adapter(tmp_path / "t", llm.args, rank=4, seed=4, mode="turn",
                             targets=["q_proj", "k_proj", "v_proj"], invocation_tokens=marker)
    llm.add_adapter(ad)
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply one"}, {"role": "user", "content": "second question"}]
    ids = llm.encode_chat(msgs)
    start = llm.turn_start(ids)
    assert 0 < start < len(ids) and ids[start : start + len(marker)] == marker
    ours = llm.score(ids, [None] * start + ["t"] * (len(ids) - start))
    ref = _peft_logits(tiny_dirs["qwen2"], ad, ids)
    assert (ours - ref).abs().max().item() <= 1e-4
    # history logits are exactly the base's; the turn's differ
    base_only = llm.score(ids, None)
    assert torch.equal(ours[:start], base_only[:start])
    assert (ours[start:] - base_only[start:]).abs().max().item() > 1e-3


@pytest.mark.real_model
def test_smollm2_matches_transformers(real_llm):
    hf = _hf(real_llm.base.path)
    ids = real_llm.encode_chat([{"role": "user", "content": "What is the capital of France?"}])
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    ours = real_llm.score(ids, None)
    assert (ours - ref).abs().max().item() <= 2e-3
    # identical greedy continuations
    from macaronic.engine.sampling import SamplingParams

    with torch.no_grad():
        hf_out = hf.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0, len(ids):].tolist()
    h = real_llm.submit(ids, None, SamplingParams(max_tokens=16))
    text, _ = h.result()
    eos = real_llm.tokenizer.eos_token_id
    assert h.output_ids == (hf_out[: hf_out.index(eos)] if eos in hf_out else hf_out)
    assert "Paris" in text


def _all_logits(base, ids, one_by_one: int = 0):
    """Logits of every position; the last `one_by_one` positions decoded a token at a time."""
    with torch.no_grad():
        kv = KVBuffer(base.args, len(ids), base.model.dtype)
        head = len(ids) - one_by_one
        parts = [base.model(ids[:head], [SeqSlice(kv, head)], logits="all").float()]
        parts += [base.model(ids[i : i + 1], [SeqSlice(kv, 1)], logits="all").float() for i in range(head, len(ids))]
        return torch.cat(parts)


# Stated tolerances per fast-path option, against the fp32 model on 64 random tokens: top-1
# agreement and the largest |Δlogit| as a share of the fp32 logit range.
FAST_PATHS = {
    ("bfloat16", "none"): (0.95, 0.02),
    ("bfloat16", "int8"): (0.95, 0.02),
    ("bfloat16", "int4"): (0.90, 0.10),
}


@pytest.mark.parametrize("dtype,quant", list(FAST_PATHS))
def test_fast_paths_within_stated_tolerance(tiny_dirs, dtype, quant):
    top1, spread = FAST_PATHS[(dtype, quant)]
    f32 = load_base(tiny_dirs["llama"])
    fast = load_base(tiny_dirs["llama"], dtype=getattr(torch, dtype), quant=quant)
    ids = torch.randint(3, 300, (64,), generator=torch.Generator().manual_seed(3))
    a, b = _all_logits(f32, ids), _all_logits(fast, ids, one_by_one=32)  # prefill path and decode path
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() >= top1
    assert (a - b).abs().max() <= spread * (a.max() - a.min())
    # the fingerprint names the checkpoint, not the precision it runs in: adapters load at any precision
    assert f32.fingerprint == fast.fingerprint and fast.precision == (quant if quant != "none" else dtype)


def test_quantized_weights_are_really_smaller_and_different(tiny_dirs, monkeypatch):
    """Without the native int4 kernel: few-row calls read packed int8/int4 weights; many-row calls
    use the bf16 weight (tests/engine/test_native.py covers the native kernel). On a CPU with native
    bf16; the next test covers one without."""
    from macaronic.engine import native
    from macaronic.engine.quant import SMALL_ROWS, QuantLinear

    monkeypatch.setattr(native, "ops", lambda: None)
    monkeypatch.setattr(native, "cpu_bf16", lambda: True)
    b16 = load_base(tiny_dirs["llama"], dtype=torch.bfloat16)
    q8 = load_base(tiny_dirs["llama"], quant="int8")
    q4 = load_base(tiny_dirs["llama"], quant="int4")
    assert q4.model.layers[0].w13.native is None
    for b in (q8, q4):
        assert isinstance(b.model.layers[0].w13, QuantLinear) and isinstance(b.model.lm_head, QuantLinear)
        assert b.params() == b16.params()
        with pytest.raises(ValueError, match="quantized"):
            next(b.model.hf_tensors())
    w = b16.model.layers[0].w13
    assert q8.model.layers[0].w13.nbytes() < 0.6 * w.nbytes
    assert q4.model.layers[0].w13.nbytes() < 0.35 * w.nbytes
    x = torch.randn(SMALL_ROWS, w.shape[1], generator=torch.Generator().manual_seed(5)).bfloat16()
    dense = torch.nn.functional.linear(x, w).float()
    y8, y4 = q8.model.layers[0].w13(x).float(), q4.model.layers[0].w13(x).float()
    assert not torch.equal(y8, dense) and not torch.equal(y4, dense) and not torch.equal(y8, y4)
    assert (y8 - dense).abs().max() <= 0.05 * dense.abs().max() and (y4 - dense).abs().max() <= 0.2 * dense.abs().max()
    many = torch.cat([x] * 2)  # more than SMALL_ROWS rows: the bf16 weight, exactly
    assert torch.equal(q4.model.layers[0].w13(many), torch.nn.functional.linear(many, w))
    # the int4 head recomputes each row's top candidates exactly
    h = torch.randn(2, b16.args.dim, generator=torch.Generator().manual_seed(6)).bfloat16()
    exact = h.float() @ b16.model.lm_head.float().T
    got = q4.model.lm_head(h)
    top = got.topk(8, dim=1).indices
    assert torch.allclose(got.gather(1, top), exact.gather(1, top), atol=1e-4)
    assert torch.equal(top[:, 0], exact.argmax(1))


def test_without_native_bf16_many_rows_widen_to_fp32(tiny_dirs, monkeypatch):
    """Where bf16 matmuls are emulated (an AVX2 CPU): up to SMALL_ROWS_FP32 rows read the packed
    weights; more rows multiply the bf16 weight widened to fp32, rounded to bf16 once."""
    from macaronic.engine import native, quant
    from macaronic.engine.quant import SMALL_ROWS_FP32

    monkeypatch.setattr(native, "ops", lambda: None)
    monkeypatch.setattr(native, "cpu_bf16", lambda: False)
    b16 = load_base(tiny_dirs["llama"], dtype=torch.bfloat16)
    w = b16.model.layers[0].w13
    for kind in ("int8", "int4"):
        lin = load_base(tiny_dirs["llama"], quant=kind).model.layers[0].w13
        assert lin.widen and lin.small_rows == SMALL_ROWS_FP32
        gen = torch.Generator().manual_seed(7)
        few = torch.randn(SMALL_ROWS_FP32, w.shape[1], generator=gen).bfloat16()
        assert not torch.equal(lin(few).float(), torch.nn.functional.linear(few, w).float())  # packed
        many = torch.randn(SMALL_ROWS_FP32 + 1, w.shape[1], generator=gen).bfloat16()
        y = lin(many)
        assert y.dtype == torch.bfloat16
        assert torch.equal(y, torch.nn.functional.linear(many.float(), w.float()).bfloat16())
    # a weight taller than WIDEN_ROWS is widened in slices: the same product, column for column
    monkeypatch.setattr(quant, "WIDEN_ROWS", 7)
    y = lin(many)
    ref = torch.nn.functional.linear(many.float(), w.float())
    assert torch.allclose(y.float(), ref, rtol=1e-2, atol=1e-3 * ref.abs().max())


def test_unknown_or_impossible_quantization_is_a_clear_error(tiny_dirs):
    with pytest.raises(ValueError, match="unknown quantization"):
        load_base(tiny_dirs["llama"], quant="int3")


@pytest.mark.parametrize("quant", ["int8", "int4"])
def test_adapters_and_batching_work_on_a_quantized_base(tiny_dirs, tmp_path, quant):
    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.engine.sampling import SamplingParams
    from macaronic.testing import make_random_adapter

    llm = load_llm(tiny_dirs["llama"], [], EngineConfig(quant=quant))
    ad = make_random_adapter(tmp_path / "a", llm.args, rank=4, seed=3, mode="full", scale=0.5)
    llm.add_adapter(ad)
    ids = llm.encode_chat([{"role": "user", "content": "quantized"}])
    assert (llm.score(ids, "a") - llm.score(ids, None)).abs().max().item() > 1e-2
    sp = SamplingParams(max_tokens=6, stop_token_ids=())
    alone = [llm.submit(ids, name, sp) for name in (None, "a")]
    alone = [(h.result(), h.output_ids)[1] for h in alone]
    together = [llm.submit(ids, name, sp) for name in (None, "a", None, "a")]
    together = [(h.result(), h.output_ids)[1] for h in together]
    assert together == alone * 2
    llm.close()


@pytest.mark.real_model
@pytest.mark.parametrize("dtype,quant", [("bfloat16", "none"), ("bfloat16", "int4")])
def test_smollm2_fast_paths_answer_like_fp32(real_llm, dtype, quant):
    """The fast paths on the real base with the shipped adapters: same short greedy answers."""
    from macaronic.engine.llm import EngineConfig, load_default_llm
    from macaronic.engine.sampling import SamplingParams

    fast = load_default_llm(EngineConfig(dtype=dtype, quant=quant))
    try:
        assert fast.base.fingerprint == real_llm.base.fingerprint
        assert {i.name for i in fast.adapters.infos()} >= {"chat", "coding"}  # adapters load at any precision
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        for adapter in (None, "chat"):
            text, _ = fast.submit(fast.encode_chat(msgs), adapter, SamplingParams(max_tokens=12)).result()
            assert "Paris" in text
    finally:
        fast.close()
