"""The GGUF's own blocks (engine/ggml.py, csrc/ggml.cpp): the PyTorch twin equals gguf.quants'
dequantization bit for bit on random blocks of every served type, the native kernel matches the twin
on every path, and a tiny model served from blocks equals the same model on the dequantized weights,
with an adapter on top; blocks that do not belong to the base are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants

from macaronic.engine import ggml, native
from macaronic.engine.base import load_base
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice

# where each type keeps its fp16 fields (random bytes there could be inf or NaN)
F16_AT = {2: (0,), 3: (0, 2), 6: (0,), 8: (0,), 12: (0, 2), 14: (208,)}


def random_blocks(type_id: int, rows: int, k: int, seed: int) -> np.ndarray:
    _, elems, nbytes = ggml.TYPES[type_id]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (rows * (k // elems), nbytes), dtype=np.uint8)
    for at in F16_AT[type_id]:
        raw[:, at : at + 2] = (rng.standard_normal((len(raw), 1)) * 0.02).astype(np.float16).view(np.uint8)
    return raw.reshape(rows, -1)


@pytest.fixture(scope="module")
def ops():
    o = native.ops()
    if o is None:  # the default suite must pass where no compiler or no AVX2 exists
        pytest.skip("the native kernels cannot be built or run on this machine")
    return o


@pytest.mark.parametrize("type_id", sorted(ggml.TYPES))
def test_twin_equals_gguf_dequantize_exactly(type_id):
    raw = random_blocks(type_id, 5, 512, seed=type_id)
    ref = quants.dequantize(raw, GGMLQuantizationType(type_id))
    ours = ggml.dequantize(torch.from_numpy(raw), type_id)
    assert ours.dtype == torch.float32 and ours.shape == (5, 512)
    assert torch.equal(ours, torch.from_numpy(ref))


def test_unknown_type_is_refused():
    with pytest.raises(ValueError, match="ggml type 7"):
        ggml.dequantize(torch.zeros(1, 24, dtype=torch.uint8), 7)


@pytest.mark.parametrize("type_id", sorted(ggml.TYPES))
def test_native_dequantize_equals_the_twin(ops, type_id):
    raw = torch.from_numpy(random_blocks(type_id, 7, 768, seed=10 + type_id))
    assert torch.equal(ops.ggml_dequantize(raw, type_id, 768), ggml.dequantize(raw, type_id))


def test_native_linear_matches_the_twin_on_mixed_parts(ops):
    g = torch.Generator().manual_seed(3)
    k = 512
    # a fused projection whose parts have different types, as Qwen's q (Q5_0), k (Q5_0) and v (Q8_0)
    types = [6, 12, 14, 8, 2, 3]
    parts = [torch.from_numpy(random_blocks(t, 16 + 8 * i, k, seed=20 + i)) for i, t in enumerate(types)]
    o = sum(p.shape[0] for p in parts)
    bias = torch.randn(o, generator=g).bfloat16()
    for n in (1, 2, 3, 5, 7, 8, 9, 31, 32, 33):  # every tile width (4, 3, 2, 1 rows), both sides of 32
        x = torch.randn(n, k, generator=g).bfloat16()
        for b in (None, bias):
            ints = {}
            for family in ["auto"] + ggml.kernel_families(ops):
                # up to 32 rows the Q8 types meet x rounded to 8 bits as llama.cpp rounds it for their
                # type (ggml.q8_rows), except in the fp32 family
                q8 = ggml.rounds_x(n, family)
                ref = torch.cat([(ggml.q8_rows(x, t) if q8 and t in ggml.Q8_TYPES else x.float()) @ ggml.dequantize(p, t).T
                                 for p, t in zip(parts, types)], 1)
                ref = (ref if b is None else ref + b.float()).bfloat16().float()
                with ggml.kernels(ops, family):
                    y = ops.ggml_linear(x, parts, types, b)
                assert y.dtype == torch.bfloat16 and y.shape == (n, o)
                # both compute in fp32 and round once to bf16 (one step apart where the sums straddle a
                # rounding boundary; the summation order differs)
                step = 2.0 ** (torch.floor(torch.log2(ref.abs().clamp_min(1e-30))) - 7)
                assert bool(((y.float() - ref).abs() <= step + 1e-3 * ref.abs().max()).all()), (family, n)
                if q8:  # and the rounding is really there: against the unrounded x the Q8 parts differ
                    plain = ggml.GGMLReference.ggml_linear(x, parts, types, b).float()
                    assert not torch.allclose(y.float(), plain, rtol=1e-3, atol=1e-4 * plain.abs().max().item())
                if family != "fp32":
                    ints[family] = y
            # AVX2 and VNNI sum the same exact integer products in the same order: equal bit for bit
            assert all(torch.equal(y, ints["avx2"]) for y in ints.values())
    with pytest.raises(RuntimeError, match="must be a contiguous uint8"):
        ops.ggml_linear(torch.zeros(1, 256, dtype=torch.bfloat16), parts[:1], types[:1], None)


def test_q8_rows_rounds_as_llamacpp_does_for_each_type():
    # q8_0 (Q8_0, Q5_0): per 32, d = fp16(max|x| / 127), q = nearest(x * 127 / max|x|)
    x = torch.tensor([[0.5, -1.27, 0.3] + [0.0] * 29 + [2.0] + [0.001] * 31])
    got = ggml.q8_rows(x, 8)
    d0 = float(torch.tensor(1.27 / 127).half())
    assert got[0, 1].item() == pytest.approx(-127 * d0) and got[0, 0].item() == pytest.approx(50 * d0)
    assert got[0, 32].item() == pytest.approx(127 * float(torch.tensor(2.0 / 127).half()))
    # q8_K (Q4_K, Q6_K): per 256, by the signed element of largest magnitude: iscale = -127 / m
    y = torch.zeros(1, 256)
    y[0, 0], y[0, 1], y[0, 200] = -1.27, 0.5, 1.0
    got = ggml.q8_rows(y, 12)
    d = 1 / (-127 / -1.27)
    assert got[0, 0].item() == pytest.approx(-127 * d) and got[0, 1].item() == pytest.approx(50 * d)
    assert got[0, 200].item() == pytest.approx(100 * d)
    assert torch.equal(ggml.q8_rows(torch.zeros(2, 256), 14), torch.zeros(2, 256))


def test_kernel_families_are_set_per_process_and_refused_when_unknown(ops):
    families = ggml.kernel_families(ops)
    assert families[:2] == ["fp32", "avx2"] and set(families) <= {"fp32", "avx2", "vnni"}
    assert ("vnni" in families) == ({"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= native._cpu_flags())
    with ggml.kernels(ops, "fp32"):
        assert ggml.kernel_families(ops) == families  # probing leaves the setting as it was
        assert ops.ggml_kernels(ggml.KERNELS["fp32"]) == ggml.KERNELS["fp32"]
    assert ops.ggml_kernels(ggml.KERNELS["auto"]) == ggml.KERNELS["auto"]  # restored
    with pytest.raises(ValueError, match="unknown kernel family"):
        with ggml.kernels(ops, "avx9"):
            pass
    with pytest.raises(RuntimeError, match="0 auto, 1 fp32"):
        ops.ggml_kernels(7)
    if "vnni" not in families:
        with pytest.raises(RuntimeError, match="no AVX-512 VNNI"):
            ops.ggml_kernels(ggml.KERNELS["vnni"])


def _blocks_for(model_dir, type_for):
    """The tiny base's weights as GGUF blocks (gguf.quants.quantize), and its state with the
    dequantized weights written back (as an import from that GGUF would hold them)."""
    from safetensors.torch import load_file, save_file

    f = model_dir / "model.safetensors"
    state = load_file(str(f))
    names = {v: k for k, v in {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                               "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                               "ffn_down": "mlp.down_proj"}.items()}
    blocks = {}
    for key, w in list(state.items()):
        parts = key.split(".")
        if key == "lm_head.weight":
            gname = "output.weight"
        elif len(parts) > 4 and ".".join(parts[3:5]) in names and parts[-1] == "weight":
            gname = f"blk.{parts[2]}.{names['.'.join(parts[3:5])]}.weight"
        else:
            continue
        t = type_for(gname, w.shape[1])
        q = quants.quantize(w.float().numpy(), GGMLQuantizationType(t))
        blocks[gname] = (t, torch.from_numpy(q))
        state[key] = torch.from_numpy(quants.dequantize(q, GGMLQuantizationType(t))).to(w.dtype)
    save_file(state, str(f), metadata={"format": "pt"})
    return blocks


def test_a_model_served_from_blocks_equals_its_dequantized_twin(ops, tiny_dirs, tmp_path, monkeypatch):
    import shutil

    d = tmp_path / "base"
    shutil.copytree(tiny_dirs["qwen2"], d)
    blocks = _blocks_for(d, lambda name, k: 8 if "attn_v" in name or name == "output.weight" else 6)
    ref = load_base(d, dtype=torch.float32)
    monkeypatch.setattr(ggml, "gguf_blocks", lambda name, path, gguf_file: blocks)
    served = load_base(d, quant="gguf")
    assert served.precision == "gguf" and served.fingerprint == ref.fingerprint
    assert isinstance(served.model.layers[0].wqkv, ggml.GGMLLinear) and served.model.layers[0].wqkv.ops is ops
    assert served.model.layers[0].wqkv.types == [6, 6, 8]
    a = ref.args
    tokens = torch.randint(0, a.vocab_size, (12,), generator=torch.Generator().manual_seed(0))
    logits = []
    for b in (ref, served):
        kv = KVBuffer(a, 32, b.model.dtype)
        with torch.no_grad():
            out = [b.model.decode(tokens, [SeqSlice(kv, 12)], logits="all").float()]
            for t in (5, 9, 2):  # decode steps
                out.append(b.model.decode(torch.tensor([t]), [SeqSlice(kv, 1)]).float())
        logits.append(torch.cat(out))
    # x rounded to 8 bits (as llama.cpp rounds it) against fp32: logits within that rounding, and the
    # same argmax except where the reference's best two are closer than that
    diff = (logits[0] - logits[1]).abs().max().item()
    assert diff < 0.05 * logits[0].abs().max().item(), diff
    top2 = logits[0].topk(2, -1).values
    near_tie = (top2[:, 0] - top2[:, 1]) < 2 * diff
    same = logits[0].argmax(-1) == logits[1].argmax(-1)
    assert bool((same | near_tie).all()) and int(same.sum()) >= len(same) - 2, (same, near_tie)


def test_blocks_that_are_not_the_base_are_refused(ops, tiny_dirs, tmp_path, monkeypatch):
    import shutil

    d = tmp_path / "base"
    shutil.copytree(tiny_dirs["qwen2"], d)
    blocks = _blocks_for(d, lambda name, k: 8)
    t, raw = blocks["blk.1.ffn_down.weight"]
    raw = raw.clone()
    raw[0, 5] ^= 1  # one weight off by one step
    blocks["blk.1.ffn_down.weight"] = (t, raw)
    del blocks["blk.0.attn_k.weight"]
    monkeypatch.setattr(ggml, "gguf_blocks", lambda name, path, gguf_file: blocks)
    with pytest.raises(ValueError) as e:
        load_base(d, quant="gguf")
    assert "blk.1.ffn_down.weight: dequantized blocks differ" in str(e.value)
    assert "blk.0.attn_k.weight: not in the GGUF" in str(e.value)


def test_adapters_apply_on_top_of_the_blocks_as_on_the_twin(ops, tiny_dirs, tmp_path, monkeypatch):
    import shutil

    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.slots import LoraBank
    from macaronic.testing import make_random_adapter

    d = tmp_path / "base"
    shutil.copytree(tiny_dirs["qwen2"], d)
    blocks = _blocks_for(d, lambda name, k: 8 if "attn_v" in name else 6)
    monkeypatch.setattr(ggml, "gguf_blocks", lambda name, path, gguf_file: blocks)
    fast = load_base(d, quant="gguf")
    monkeypatch.setattr(native, "ops", lambda: None)  # the same load on the PyTorch twin
    twin = load_base(d, quant="gguf")
    assert twin.model.layers[0].w2.ops is ggml.GGMLReference
    adapters = [read_adapter(make_random_adapter(tmp_path / f"a{i}", fast.args, rank=4, seed=60 + i, mode="full",
                                                 scale=0.5), fast.args, name=f"a{i}")[1] for i in range(2)]
    lengths, seq_slots = [7, 3, 12], [0, 1, 2]
    toks = torch.randint(3, 300, (sum(lengths),), generator=torch.Generator().manual_seed(2))
    slots = torch.cat([torch.full((n,), s) for n, s in zip(lengths, seq_slots)])
    outs = []
    for b, pairs in ((fast, adapters), (twin, adapters), (twin, [{}, {}])):
        bank = LoraBank(b.args, 4, 4)
        for slot, p in zip((1, 2), pairs):
            bank.write(slot, p)
        kvs = [KVBuffer(b.args, 32, b.model.dtype) for _ in lengths]
        with torch.inference_mode():
            first = b.model(toks, [SeqSlice(kv, n) for kv, n in zip(kvs, lengths)], lora=bank, slots=bank.plan(slots),
                            logits="all")
            step = b.model(toks[:3], [SeqSlice(kv, 1) for kv in kvs], lora=bank, slots=bank.plan(torch.tensor(seq_slots)))
        outs.append(torch.cat([first, step]).float())
    got, ref, plain = outs
    span = float(ref.max() - ref.min())
    assert float((ref - plain).abs().max()) > 0.05 * span, "the adapters must change the logits"
    assert float((got - ref).abs().max()) <= 0.02 * span
    assert torch.equal(got.argmax(-1), ref.argmax(-1))


def test_gguf_without_the_native_kernels_warns_and_points_to_fp32(tiny_dirs, tmp_path, monkeypatch):
    """Its PyTorch twin serves correctly but slowly: the load says so and names the fast equivalent."""
    import shutil

    d = tmp_path / "base"
    shutil.copytree(tiny_dirs["qwen2"], d)
    blocks = _blocks_for(d, lambda name, k: 8)
    monkeypatch.setattr(ggml, "gguf_blocks", lambda name, path, gguf_file: blocks)
    monkeypatch.setattr(native, "ops", lambda: None)
    with pytest.warns(RuntimeWarning, match="--dtype float32 --quant none"):
        twin = load_base(d, quant="gguf")
    assert twin.model.layers[0].w2.ops is ggml.GGMLReference


def test_the_fused_decode_step_serves_the_blocks_as_the_layer_loop_does(ops, tiny_dirs, tmp_path, monkeypatch):
    """A decode step over the GGUF's blocks in one native call (csrc/decode.cpp reading the parts as
    ggml_linear does) against the layer loop over the same blocks: base and adapter rows mixed, several
    steps, the K/V both write; the fused path must really have run, on mixed part types."""
    import shutil

    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.model import Transformer
    from macaronic.engine.slots import LoraBank
    from macaronic.testing import assert_decode_agrees, make_random_adapter

    KINDS = {"attn_v": 8, "attn_output": 2, "ffn_down": 3}  # Q8_0, Q4_0, Q4_1; Q5_0 elsewhere (no k-quant fits 64 wide)
    ran = []
    real = Transformer._fused_decode
    monkeypatch.setattr(Transformer, "_fused_decode", lambda self, *a: ran.append(r := real(self, *a)) or r)
    d = tmp_path / "base"
    shutil.copytree(tiny_dirs["qwen2"], d)
    blocks = _blocks_for(d, lambda name, k: next((t for n, t in KINDS.items() if n in name), 6))
    monkeypatch.setattr(ggml, "gguf_blocks", lambda name, path, gguf_file: blocks)
    b = load_base(d, quant="gguf")
    m, args = b.model, b.args
    assert len(set(m.layers[0].wqkv.types)) > 1
    bank = LoraBank(args, 4, 4, dtype=torch.bfloat16)
    bank.write(1, read_adapter(make_random_adapter(tmp_path / "a", args, rank=4, seed=81, mode="full", scale=0.5),
                               args, name="a")[1])
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 300, (n,), generator=g) for n in (5, 8, 3)]
    steps = torch.randint(3, 300, (4, 3), generator=g)
    seq_slots = torch.tensor([0, 1, 1])

    def run(fused: bool):
        m.fused_decode = fused
        kvs = [KVBuffer(args, 32, torch.bfloat16) for _ in prompts]
        outs = []
        with torch.inference_mode():
            for kv, p in zip(kvs, prompts):
                m(p, [SeqSlice(kv, len(p))])
            for i, toks in enumerate(steps):
                lora = i % 2 == 0
                outs.append(m(toks, [SeqSlice(kv, 1) for kv in kvs], lora=bank if lora else None,
                              slots=bank.plan(seq_slots) if lora else None).float())
        return outs, [(kv.k[:, :, : kv.length].float(), kv.v[:, :, : kv.length].float()) for kv in kvs]

    ref, ref_kv = run(False)
    got, got_kv = run(True)
    assert all(r is None for r in ran[: len(steps)]) and all(r is not None for r in ran[len(steps) :])
    # the same projections; only the attention kernels sum in another order (bf16 carries it on, and on
    # AVX2 the 8-bit rounding of x turns such a difference into a whole rounding step now and then)
    assert_decode_agrees(got, ref, got_kv, ref_kv, max_frac=0.1)
