"""Logits parity of the lean model against Hugging Face transformers and PEFT."""

from __future__ import annotations

import pytest
import torch

from macaronic.engine.base import load_base
from macaronic.engine.model import KVBuffer, SeqSlice


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


def test_bf16_fast_path_within_stated_tolerance(tiny_dirs):
    """bf16 weights: top-1 agrees with fp32 on >= 95% of positions, |Δlogit| <= 5% of the logit range."""
    f32 = load_base(tiny_dirs["llama"])
    b16 = load_base(tiny_dirs["llama"], dtype=torch.bfloat16)
    ids = torch.randint(3, 300, (64,), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        a = f32.model(ids, [SeqSlice(KVBuffer(f32.args, 64, torch.float32), 64)], logits="all")
        b = b16.model(ids, [SeqSlice(KVBuffer(b16.args, 64, torch.bfloat16), 64)], logits="all").float()
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() >= 0.95
    assert (a - b).abs().max() <= 0.05 * (a.max() - a.min())
    assert f32.fingerprint != b16.fingerprint  # the fingerprint names the dtype it hashes
