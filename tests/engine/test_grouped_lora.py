"""The grouped LoRA bank against its reference twin, in fp32, bf16 and int4: mixed decode batches
(present slots contiguous or scattered), mixed prefill segments, and a slot rewritten mid-run."""

from __future__ import annotations

import pytest
import torch

from macaronic.engine.adapters import read_adapter
from macaronic.engine.base import load_base
from macaronic.engine.config import FUSED
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice
from macaronic.engine.slots import LoraBank, ReferenceLora
from macaronic.testing import make_random_adapter

PRECISIONS = {"fp32": (torch.float32, "none"), "bf16": (torch.bfloat16, "none"), "int4": (torch.bfloat16, "int4")}


@pytest.fixture(scope="module")
def adapters(tiny_dirs, tmp_path_factory):
    args = load_base(tiny_dirs["llama"]).args
    root = tmp_path_factory.mktemp("grouped")
    out = []
    for i, rank in enumerate((2, 4, 3, 5)):  # ranks differ: padding to r_max must not matter
        d = make_random_adapter(root / f"g{i}", args, rank=rank, seed=40 + i, mode="full", scale=0.5)
        out.append(read_adapter(d, args, name=f"g{i}")[1])
    return out


def _banks(base, adapters, where):
    bank = LoraBank(base.args, 9, 5, dtype=torch.float32)  # the engine's bank: fp32 for every model dtype
    for slot, pairs in zip(where, adapters):
        bank.write(slot, pairs)
    return bank, ReferenceLora(dict(zip(where, adapters)), base.args)


def _forward(base, lora, slots, toks, lengths, logits="last"):
    kvs = [KVBuffer(base.args, 160, base.model.dtype) for _ in lengths]
    with torch.inference_mode():
        return base.model(toks, [SeqSlice(kv, n) for kv, n in zip(kvs, lengths)], lora=lora, slots=slots,
                          logits=logits).float()


def _close(fast, ref, base_out, exact=None):
    """fast == reference, measured against what the adapters change. fp32 (`exact` None): within
    0.1% of it (float summation order). Half precision: the fast path is within 5% of the effect of
    the fp32 reference (`exact`), or within twice the distance of the reference twin run at the same
    precision (bf16 rounding through the tiny random model moves that by as much as the adapters
    do on a long prefill); `_projections_close` is the tight per-call check."""
    err = float((fast - ref).abs().max())
    effect = float((ref - base_out).abs().max())
    assert effect > 0.05, "the adapters must change the output for this test to mean anything"
    if exact is None:  # the old masked bank is off the reference by the same 1.8e-4 on the prefill
        assert err <= 1e-3 * effect, (err, effect)
    else:
        floor = float((ref - exact).abs().max())
        assert float((fast - exact).abs().max()) <= max(2 * floor, 0.05 * effect), (err, floor, effect)


def _projections_close(bank, ref, plan, slots, dtype, g):
    """Each fused projection's delta alone (no depth to amplify rounding): to fp32 rounding, or
    within 2% of its size in bf16."""
    n = len(slots)
    for fused in FUSED:
        d_in = bank.A[fused].shape[-1]
        x = torch.randn(n, d_in, generator=g).to(dtype)
        width = sum(b.shape[-1] for b in bank.Bt[fused])
        y_fast, y_ref = torch.zeros(n, width, dtype=dtype), torch.zeros(n, width, dtype=dtype)
        bank.add_delta(y_fast, 1, fused, x, plan)
        ref.add_delta(y_ref, 1, fused, x, slots)
        scale = float(y_ref.float().abs().max())
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        assert scale > 0 and float((y_fast.float() - y_ref.float()).abs().max()) <= tol * scale, fused


def _exact(tiny_dirs, adapters, where, slots, toks, lengths, logits="last"):
    base = load_base(tiny_dirs["llama"])
    return _forward(base, ReferenceLora(dict(zip(where, adapters)), base.args), slots, toks, lengths, logits)


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("where", [(1, 2, 3, 4), (2, 5, 7, 8)], ids=["contiguous", "scattered"])
def test_grouped_equals_reference_on_mixed_decode_batches(tiny_dirs, adapters, precision, where):
    dtype, quant = PRECISIONS[precision]
    base = load_base(tiny_dirs["llama"], dtype=dtype, quant=quant)
    bank, ref = _banks(base, adapters, where)
    g = torch.Generator().manual_seed(1)
    seq_slots = torch.tensor([where[0], where[1], 0, where[2], where[3], where[1], where[0], 0])
    toks = torch.randint(3, 300, (len(seq_slots),), generator=g)
    ones = [1] * len(seq_slots)
    plan = bank.plan(seq_slots)
    # cost follows the adapters present, not the highest slot: the PyTorch path's stack has 4 slots'
    # rows; the fused kernel visits the tokens' slots only and needs no stack
    if bank.native is None:
        assert plan.stack is not None and plan.stack.A["qkv"].shape[1] == 4 * len(FUSED["qkv"]) * bank.r_max
    else:
        assert plan.stack is None and set(plan.native_slots) == set(plan.fused) == set(FUSED)
    fast = _forward(base, bank, plan, toks, ones)
    exact = None if precision == "fp32" else _exact(tiny_dirs, adapters, where, seq_slots, toks, ones)
    _close(fast, _forward(base, ref, seq_slots, toks, ones), _forward(base, None, None, toks, ones), exact)
    _projections_close(bank, ref, plan, seq_slots, base.model.dtype, g)


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_grouped_equals_reference_on_mixed_prefill_segments(tiny_dirs, adapters, precision):
    dtype, quant = PRECISIONS[precision]
    base = load_base(tiny_dirs["llama"], dtype=dtype, quant=quant)
    where = (2, 5, 7, 8)
    bank, ref = _banks(base, adapters, where)
    g = torch.Generator().manual_seed(2)
    # two sequences, 150 tokens: runs of adapters, the base, and one adapter's tokens scattered
    slots = torch.tensor([where[0]] * 40 + [0] * 20 + [where[2]] * 30 + [where[1], where[3]] * 30)
    toks = torch.randint(3, 300, (len(slots),), generator=g)
    lengths = [90, 60]
    plan = bank.plan(slots)
    assert plan.stack is None  # many tokens: the segment path
    fast = _forward(base, bank, plan, toks, lengths, logits="all")
    exact = None if precision == "fp32" else _exact(tiny_dirs, adapters, where, slots, toks, lengths, "all")
    _close(fast, _forward(base, ref, slots, toks, lengths, logits="all"),
           _forward(base, None, None, toks, lengths, logits="all"), exact)
    _projections_close(bank, ref, plan, slots, base.model.dtype, g)


def test_a_rewritten_slot_is_not_served_from_a_stale_stack(tiny_dirs, adapters):
    base = load_base(tiny_dirs["llama"])
    where = (2, 5, 7, 8)
    bank, _ = _banks(base, adapters, where)
    slots = torch.tensor([2, 5, 7, 8, 2])
    toks = torch.arange(10, 15)
    before = _forward(base, bank, bank.plan(slots), toks, [1] * 5)
    bank.write(5, adapters[3])  # slot 5 now holds another adapter
    after = _forward(base, bank, bank.plan(slots), toks, [1] * 5)
    ref = ReferenceLora({2: adapters[0], 5: adapters[3], 7: adapters[2], 8: adapters[3]}, base.args)
    want = _forward(base, ref, slots, toks, [1] * 5)
    assert torch.allclose(after, want, atol=1e-4) and not torch.allclose(before, after, atol=1e-3)
