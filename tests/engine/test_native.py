"""The native int4 kernel (engine/csrc/int4.cpp) against its pure-PyTorch twin, and the fallback when
it cannot be built: every path (registers, AMX tiles, dequantise + at::mm) on odd row counts, a
quantized model on mixed batches with adapters, and a build that fails."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
import torch.nn.functional as F

from macaronic.engine import native
from macaronic.engine.adapters import read_adapter
from macaronic.engine.base import load_base
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice
from macaronic.engine.quant import Int4Reference, pack_int4, quantize, unpack_int4
from macaronic.engine.slots import LoraBank, bank_int8_b
from macaronic.testing import assert_decode_agrees, make_random_adapter


@pytest.fixture(scope="module")
def ops():
    o = native.ops()
    if o is None:  # the default suite must pass where no compiler or no AVX2 exists
        pytest.skip("the native kernels cannot be built or run on this machine")
    return o


def test_packing_is_within_half_a_step_and_exact_on_its_grid():
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(48, 96, generator=g) * 0.05).bfloat16()
    qw, sc = pack_int4(w)
    assert qw.shape == (3, 3, 8, 32) and qw.dtype == torch.uint8 and sc.shape == (3, 3, 2, 16) and sc.dtype == torch.float16
    step = sc[:, :, 0].permute(0, 2, 1).reshape(48, 3, 1).float().expand(48, 3, 32).reshape(48, 96)
    assert ((unpack_int4(qw, sc) - w.float()).abs() <= step * 0.51 + 1e-4).all()
    # weights on a bf16-exact grid (every group spans q = 0..15) come back bit for bit
    q = torch.randint(0, 16, (32, 64), generator=g)
    q[:, ::32], q[:, 1::32] = 0, 15
    grid = (q.float() / 16 - 0.5).bfloat16()
    assert torch.equal(unpack_int4(*pack_int4(grid)), grid.float())
    with pytest.raises(ValueError, match="divisible by 16"):
        pack_int4(torch.zeros(40, 64))


def test_every_kernel_path_matches_the_twin(ops):
    g = torch.Generator().manual_seed(1)
    paths = [0, 1, 3] + ([2] if ops.amx_supported() else [])
    for o, k in ((48, 96), (96, 1536)):
        w = (torch.randn(o, k, generator=g) * 0.05).bfloat16()
        qw, sc = pack_int4(w)
        bias = torch.randn(o, generator=g).bfloat16()
        for n in (1, 2, 3, 4, 5, 16, 17, 40):
            x = torch.randn(n, k, generator=g).bfloat16()
            for b in (None, bias):
                ref = Int4Reference.int4_linear(x, qw, sc, b).float()
                exact = x.float() @ unpack_int4(qw, sc).T + (0 if b is None else b.float())
                for path in paths:
                    y = ops.int4_linear(x, qw, sc, b, path)
                    assert y.dtype == torch.bfloat16 and y.shape == (n, o)
                    # registers: fp32 arithmetic on exact weights; tiles and mm round weights to bf16
                    tol = (4e-3 if path == 1 else 1.5e-2) * float(exact.abs().max())
                    assert float((y.float() - ref).abs().max()) <= tol, (o, k, n, path, b is None)
    assert ops.int4_linear(torch.zeros(0, 96).bfloat16(), qw[:, :3].contiguous(), sc[:, :3].contiguous(), None).shape == (0, o)
    with pytest.raises(RuntimeError, match="int4_linear: x must be"):
        ops.int4_linear(x.float(), qw, sc, None)
    with pytest.raises(RuntimeError, match="inputs, the weight"):
        ops.int4_linear(x[:, :64].contiguous(), qw, sc, None)


def _mixed_run(base, adapters):
    """A prefill of 5 sequences (28 tokens, mixed slots), a 5-stream and a 2-stream decode step."""
    bank = LoraBank(base.args, 4, 4)
    for slot, pairs in zip((1, 2), adapters):
        bank.write(slot, pairs)
    g = torch.Generator().manual_seed(2)
    lengths, seq_slots = [7, 3, 12, 1, 5], [0, 1, 2, 1, 0]
    kvs = [KVBuffer(base.args, 64, base.model.dtype) for _ in lengths]
    toks = torch.randint(3, 300, (sum(lengths),), generator=g)
    slots = torch.cat([torch.full((n,), s) for n, s in zip(lengths, seq_slots)])
    outs = []
    with torch.inference_mode():
        m = base.model
        outs.append(m(toks, [SeqSlice(kv, n) for kv, n in zip(kvs, lengths)], lora=bank, slots=bank.plan(slots), logits="all"))
        step = torch.randint(3, 300, (5,), generator=g)
        outs.append(m(step, [SeqSlice(kv, 1) for kv in kvs], lora=bank, slots=bank.plan(torch.tensor(seq_slots))))
        outs.append(m(step[:2], [SeqSlice(kv, 1) for kv in kvs[:2]], lora=bank, slots=bank.plan(torch.tensor(seq_slots[:2]))))
    return [o.float() for o in outs]


def test_quantized_model_matches_the_twin_on_mixed_batches(ops, tiny_dirs, tmp_path):
    fast = load_base(tiny_dirs["llama"], quant="int4")
    lin = fast.model.layers[0].w13
    assert lin.native is ops and lin.weight is None  # no bf16 copy beside the nibbles
    if fast.args.tie_embeddings:  # the head's rescoring reads the embedding, not a copy
        assert fast.model.lm_head.weight.data_ptr() == fast.model.embed.data_ptr()
    twin = load_base(tiny_dirs["llama"], dtype=torch.bfloat16)
    quantize(twin.model, "int4", native=Int4Reference())
    adapters = [read_adapter(make_random_adapter(tmp_path / f"a{i}", fast.args, rank=4, seed=60 + i, mode="full",
                                                 scale=0.5), fast.args, name=f"a{i}")[1] for i in range(2)]
    plain = _mixed_run(twin, [{}, {}])
    for got, ref, base_out in zip(_mixed_run(fast, adapters), _mixed_run(twin, adapters), plain):
        span = float(ref.max() - ref.min())
        assert float((ref - base_out).abs().max()) > 0.05 * span, "the adapters must change the logits"
        # bf16 activations through the tiny random model amplify the bf16 rounding of the weights
        # on the tile path; the per-call check above is the tight one
        err = (got - ref).abs()
        assert float(err.max()) <= 0.05 * span and float(err.mean()) <= 0.005 * span, (float(err.max()), float(err.mean()), span)
        assert float((got.argmax(-1) == ref.argmax(-1)).float().mean()) >= 0.9


def test_without_the_native_kernel_int4_keeps_the_pytorch_path(tiny_dirs, monkeypatch):
    monkeypatch.setattr(native, "ops", lambda: None)
    b = load_base(tiny_dirs["llama"], quant="int4")
    lin = b.model.layers[0].w13
    assert lin.native is None and lin.weight is not None and lin.weight.dtype == torch.bfloat16
    ids = torch.randint(3, 300, (6,), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        out = b.model(ids, [SeqSlice(KVBuffer(b.args, 16, b.model.dtype), 6)], logits="all")
    assert torch.isfinite(out.float()).all()


def test_either_instruction_set_runs_the_kernels(monkeypatch):
    monkeypatch.setattr(native.sys, "platform", "linux")
    for flags, ok in ((set(), False), ({"avx", "sse4_2"}, False), ({"avx2", "fma"}, False),
                      ({"avx2", "fma", "f16c"}, True), ({"avx512f", "avx512bw", "avx512vl", "avx512_bf16"}, True)):
        monkeypatch.setattr(native, "_cpu_flags", lambda f=flags: f)
        assert native.cpu_can_run() is ok, flags


def test_the_library_says_which_kernels_run_here(ops):
    # the AVX-512 kernels where the CPU has AVX-512 BF16, else their AVX2 twins
    assert ops.wide_supported() == (native.NEEDS_WIDE <= native._cpu_flags())
    assert ops.int4_supported()


def test_a_failed_build_warns_once_and_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("MACARONIC_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.warns(RuntimeWarning, match="native kernels unavailable"):
        assert native.ops() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # decided once per process: no second warning
        assert native.ops() is None
    with pytest.raises(native.NativeBuildError, match="failed"):
        native.build(tmp_path / "x.so", cxx="false")  # a compiler that exits non-zero
    assert not list(tmp_path.iterdir())  # nothing half-built is left behind
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("MACARONIC_NATIVE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # turned off on purpose: silent
        assert native.ops() is None


def test_fused_lora_matches_the_reference_twin(ops, tiny_dirs, tmp_path):
    """One native call per projection (csrc/lora.cpp) on a mixed decode batch: base tokens, three
    adapters of different ranks, one of them on q/v only; fp32 and bf16 slot buffers, and bf16 A with
    int8 B rows (an int4 model's bank) against the twin holding the same int8 rows."""
    from macaronic.engine.config import FUSED
    from macaronic.engine.slots import LoraBank, ReferenceLora

    args = load_base(tiny_dirs["llama"]).args
    specs = ((3, None), (5, ("q_proj", "v_proj")), (2, None))
    adapters = {slot: read_adapter(make_random_adapter(tmp_path / f"f{slot}", args, rank=r, seed=80 + slot, targets=t,
                                                       mode="full", scale=0.5), args, name=f"f{slot}")[1]
                for slot, (r, t) in zip((1, 3, 4), specs)}
    refs = {False: ReferenceLora(adapters, args), True: ReferenceLora(adapters, args, int8_b=True)}
    slots = torch.tensor([0, 1, 3, 4, 1, 0, 4, 3, 3, 1, 1, 1, 1, 1])  # a run of 6 tokens of slot 1 too
    g = torch.Generator().manual_seed(9)
    for dtype, int8_b in ((torch.float32, False), (torch.bfloat16, False), (torch.bfloat16, True)):
        bank, ref = LoraBank(args, 6, 5, dtype=dtype, int8_b=int8_b), refs[int8_b]
        assert bank.native is ops and all(b.dtype == (torch.int8 if int8_b else dtype) for bs in bank.Bt.values() for b in bs)
        for slot, pairs in adapters.items():
            bank.write(slot, pairs)
        plan = bank.plan(slots)
        for layer in range(args.n_layers):
            for fused in FUSED:
                d_in = args.target_shape(FUSED[fused][0])[0]
                d_out = sum(args.target_shape(t)[1] for t in FUSED[fused])
                x = torch.randn(len(slots), d_in, generator=g).bfloat16()
                y0 = torch.randn(len(slots), d_out, generator=g).bfloat16()
                y = y0.clone()
                bank.add_delta(y, layer, fused, x, plan)
                delta = ref.delta(layer, fused, x.float(), slots)
                if delta is None:
                    assert torch.equal(y, y0)
                    continue
                assert float(delta.abs().max()) > 0.1
                err = float((y.float() - (y0.float() + delta)).abs().max())
                # y is bf16 (one rounding of y0 + delta); a bf16 bank also rounds the adapter weights
                assert err <= 0.01 * float(y0.abs().max() + delta.abs().max()) + (0.02 if dtype == torch.bfloat16 else 0) * float(delta.abs().max()), (dtype, int8_b, layer, fused, err)
                assert torch.equal(y[slots == 0], y0[slots == 0])  # base tokens untouched


def test_one_call_linear_and_delta_match_two_calls_and_the_twin(ops, tiny_dirs, tmp_path):
    """`LoraBank.linear` folds the base matmul and the delta into one native call (dense fp32/bf16
    weights: dense_lora; native int4: int4_linear_lora): the same bits as the matmul then
    `add_delta`, and within rounding of the base plus ReferenceLora's delta, on a mixed batch."""
    import torch.nn.functional as F

    from macaronic.engine.config import FUSED
    from macaronic.engine.quant import QuantLinear
    from macaronic.engine.slots import LoraBank, ReferenceLora

    args = load_base(tiny_dirs["llama"]).args
    adapters = {slot: read_adapter(make_random_adapter(tmp_path / f"l{slot}", args, rank=4, seed=90 + slot, mode="full",
                                                       scale=0.5), args, name=f"l{slot}")[1] for slot in (1, 2)}
    refs = {False: ReferenceLora(adapters, args), True: ReferenceLora(adapters, args, int8_b=True)}
    slots = torch.tensor([0, 1, 2, 2, 1, 0, 1])
    g = torch.Generator().manual_seed(11)
    for dtype, quant, int8_b in ((torch.float32, False, False), (torch.bfloat16, False, False),
                                 (torch.bfloat16, True, False), (torch.bfloat16, True, True)):
        bank = LoraBank(args, 4, 4, dtype=torch.bfloat16 if dtype == torch.bfloat16 else torch.float32, int8_b=int8_b)
        ref = refs[int8_b]
        for slot, pairs in adapters.items():
            bank.write(slot, pairs)
        plan = bank.plan(slots)
        for fused in FUSED:
            d_in = args.target_shape(FUSED[fused][0])[0]
            d_out = sum(args.target_shape(t)[1] for t in FUSED[fused])
            w = (torch.randn(d_out, d_in, generator=g) * 0.1).to(dtype)
            lin = QuantLinear(w, "int4", native=ops) if quant else w
            x = torch.randn(len(slots), d_in, generator=g).to(dtype)
            y = bank.linear(x, lin, None, 1, fused, plan)
            y2 = lin(x) if quant else F.linear(x, w)
            base = y2.clone()
            bank.add_delta(y2, 1, fused, x, plan)
            assert torch.equal(y, y2), (dtype, quant, int8_b, fused)
            delta = ref.delta(1, fused, x.float(), slots)
            err = float((y.float() - (base.float() + delta)).abs().max())
            tol = 1e-4 if dtype == torch.float32 else 0.01 * float(base.abs().max() + delta.abs().max()) + 0.02 * float(delta.abs().max())
            assert err <= tol, (dtype, quant, int8_b, fused, err)
            assert torch.equal(y[slots == 0], base[slots == 0])


def test_x_rounded_to_8_bits_matches_its_twin_and_path_5_takes_it_on_few_rows(ops, monkeypatch):
    """Path 4 (csrc/int4.cpp: x rounded per group of 32 as llama.cpp's q8, integer products on VNNI) against
    Int4Reference's path 4, within one bf16 step of the output; near the exact product; every row tile, a
    group of zeros, a bias. Path 5 (what a base with int4_x "int8" asks) takes it where path 0 takes the
    register kernel, and path 0's choice elsewhere; MACARONIC_INT4_X overrides a base's setting."""
    from macaronic.engine import bases

    monkeypatch.setenv("MACARONIC_INT4_X", "int3")
    with pytest.raises(ValueError, match="MACARONIC_INT4_X='int3'"):
        bases.int4_x("qwen2.5-coder-0.5b")
    monkeypatch.setenv("MACARONIC_INT4_X", "bf16")
    assert bases.int4_x("qwen2.5-coder-0.5b") == "bf16"
    monkeypatch.delenv("MACARONIC_INT4_X")
    assert (bases.int4_x("qwen2.5-coder-0.5b"), bases.int4_x("smollm2-135m-instruct"), bases.int4_x(None)) == ("int8", "bf16", "bf16")
    if not ops.q8_supported():
        qw, sc = pack_int4(torch.randn(16, 32).bfloat16())
        x = torch.randn(2, 32).bfloat16()
        assert torch.equal(ops.int4_linear(x, qw, sc, None, 5), ops.int4_linear(x, qw, sc, None, 0))
        with pytest.raises(RuntimeError, match="needs AVX-512 BF16 and VNNI"):
            ops.int4_linear(torch.zeros(1, 32).bfloat16(), *pack_int4(torch.zeros(16, 32)), None, 4)
        pytest.skip("path 4 is an AVX-512 VNNI kernel and this CPU has none (path 5 was checked above to fall back to path 0)")
    g = torch.Generator().manual_seed(4)
    for o, k in ((48, 96), (96, 1536)):
        qw, sc = pack_int4((torch.randn(o, k, generator=g) * 0.05).bfloat16())
        bias = torch.randn(o, generator=g).bfloat16()
        for n in (1, 2, 3, 5, 8, 9, 16, 17):
            x = torch.randn(n, k, generator=g).bfloat16()
            x[0, :32] = 0
            for b in (None, bias):
                ref = Int4Reference.int4_linear(x, qw, sc, b, 4).float()
                exact = Int4Reference.int4_linear(x, qw, sc, b, 1).float()
                y = ops.int4_linear(x, qw, sc, b, 4)
                assert y.dtype == torch.bfloat16 and y.shape == (n, o)
                top = float(exact.abs().max())
                assert float((y.float() - ref).abs().max()) <= top / 128 + 1e-6, (o, k, n)
                assert float((y.float() - exact).abs().max()) <= 0.03 * top, (o, k, n)
    assert torch.equal(ops.int4_linear(x, qw, sc, None, 5), ops.int4_linear(x, qw, sc, None, 4))
    many = torch.randn(200, qw.shape[1] * 32, generator=g).bfloat16()  # past the few-rows path: 5 is 0
    assert torch.equal(ops.int4_linear(many, qw, sc, None, 5), ops.int4_linear(many, qw, sc, None, 0))


def test_the_decode_steps_silu_is_pytorchs_to_the_bit(ops):
    """decode_layers' SiLU * up (csrc/decode.cpp: a vectorised expf, bf16 rounding where F.silu and the
    product round) against the layer loop's F.silu(g) * u, bit for bit, on every kernel family the CPU runs
    (the AVX2 twin runs wherever the library loads): random gates at three scales, a row width that leaves
    a scalar tail, and the edges (exp's overflow and underflow, infinities, NaN)."""
    g = torch.Generator().manual_seed(3)
    twins = [True] + ([False] if ops.wide_supported() else [])
    edges = [0.0, -0.0, 1e-30, -1e-30, 88.0, 88.5, 88.7, 89.0, 100.0, 1e30, -86.0, -87.3, -88.0, -88.5, -89.0,
             -100.0, -104.0, -150.0, -1e30, float("inf"), float("-inf"), float("nan")]
    cases = [(torch.randn(8, 2 * 4867, generator=g) * s).bfloat16() for s in (1.0, 4.0, 30.0)]
    e = torch.tensor(edges).bfloat16()
    cases.append(torch.cat([e, torch.full_like(e, 3.0)]).reshape(1, -1))
    for gu in cases:
        i = gu.shape[1] // 2
        ref = F.silu(gu[:, :i]) * gu[:, i:]
        for twin in twins:
            got = ops.silu_mul(gu, twin)
            assert got.dtype == torch.bfloat16 and got.shape == ref.shape
            assert torch.equal(got.view(torch.int16), ref.view(torch.int16)), (twin, gu.shape)
    with pytest.raises(RuntimeError, match="silu_mul: gu must be"):
        ops.silu_mul(torch.zeros(2, 7).bfloat16(), True)


@pytest.mark.parametrize("family,quant", [("llama", "none"), ("llama", "int4"), ("qwen2", "int4"), ("qwen2", "int4-x8")])
def test_fused_decode_step_matches_the_layer_loop(ops, tiny_dirs, tmp_path, monkeypatch, family, quant):
    """A decode step in one native call (csrc/decode.cpp) against the Python layer loop, its twin:
    pooled and standalone K/V buffers, base and adapter tokens mixed, over several steps. The K/V
    both write must agree too, and the fused path must really have run."""
    from macaronic.engine.kvpool import KVPool
    from macaronic.engine.model import Transformer

    ran = []
    real = Transformer._fused_decode
    monkeypatch.setattr(Transformer, "_fused_decode", lambda self, *a: ran.append(r := real(self, *a)) or r)
    if quant == "int4-x8":  # x rounded to 8 bits on the few-rows path, as the default base serves (path 5)
        monkeypatch.setenv("MACARONIC_INT4_X", "int8")
        quant = "int4"
    b = load_base(tiny_dirs[family], dtype=torch.bfloat16, quant=quant)
    m, args = b.model, b.args
    assert quant != "int4" or m.int4_path == (5 if os.environ.get("MACARONIC_INT4_X") == "int8" else 0)
    bank = LoraBank(args, 4, 4, dtype=torch.bfloat16, int8_b=bank_int8_b(m))  # the engine's bank: int8 B for int4
    assert bank.int8_b == (quant == "int4")
    for slot in (1, 2):
        bank.write(slot, read_adapter(make_random_adapter(tmp_path / f"d{slot}", args, rank=4, seed=70 + slot,
                                                          mode="full", scale=0.5), args, name=f"d{slot}")[1])
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(3, 300, (n,), generator=g) for n in (6, 2, 9, 4)]
    steps = torch.randint(3, 300, (5, 4), generator=g)
    seq_slots = torch.tensor([1, 0, 2, 1])

    def run(fused: bool):
        m.fused_decode = fused
        pool = KVPool(args, torch.bfloat16)
        kvs = [pool.alloc(32) for _ in range(3)] + [KVBuffer(args, 32, torch.bfloat16)]
        outs = []
        with torch.inference_mode():
            for kv, p in zip(kvs, prompts):
                m(p, [SeqSlice(kv, len(p))])
            for i, toks in enumerate(steps):
                rows = [0, 1, 2, 3] if i % 2 == 0 else [3]  # the pool plus a standalone buffer, then one alone
                lora = i < 4  # the last step runs without a bank
                outs.append(m(toks[rows], [SeqSlice(kvs[r], 1) for r in rows], lora=bank if lora else None,
                              slots=bank.plan(seq_slots[rows]) if lora else None).float())
        return outs, [(kv.k[:, :, : kv.length].float(), kv.v[:, :, : kv.length].float()) for kv in kvs]

    ref, ref_kv = run(False)
    got, got_kv = run(True)
    assert len(ran) == 2 * len(steps)  # decode steps only: a prefill never asks
    assert all(r is None for r in ran[: len(steps)]) and all(r is not None for r in ran[len(steps) :])
    # the two attention kernels sum in different orders, and bf16 rounding carries that on
    assert_decode_agrees(got, ref, got_kv, ref_kv)
    m.fused_decode = True
    kv = KVBuffer(args, 2, torch.bfloat16)
    with torch.inference_mode(), pytest.raises(ValueError, match="KV buffer overflow"):
        m(prompts[1][:2], [SeqSlice(kv, 2)])
        m(steps[0][:1], [SeqSlice(kv, 1)])


def test_the_kernels_give_the_same_bits_on_any_thread_count_and_thread(ops, tiny_dirs, tmp_path):
    """The kernels' own pool (csrc/pool.cpp) splits work by output blocks, tokens and heads, never a
    sum: one thread, two, and two from a thread that is not the main one give the same bits (the
    engine decodes on its own thread), for the matmul, the LoRA delta and a whole decode step."""
    import threading

    b = load_base(tiny_dirs["llama"], dtype=torch.bfloat16, quant="int4")
    bank = LoraBank(b.args, 4, 4, dtype=torch.bfloat16)
    bank.write(1, read_adapter(make_random_adapter(tmp_path / "t1", b.args, rank=4, seed=71, mode="full", scale=0.5),
                               b.args, name="t1")[1])
    g = torch.Generator().manual_seed(6)
    w = (torch.randn(1024, 96, generator=g) * 0.05).bfloat16()
    qw, sc = pack_int4(w)
    x = torch.randn(3, 96, generator=g).bfloat16()
    prompt, step = torch.randint(3, 300, (7,), generator=g), torch.randint(3, 300, (2,), generator=g)

    def run() -> list[torch.Tensor]:
        with torch.inference_mode():
            kvs = [KVBuffer(b.args, 16, torch.bfloat16) for _ in range(2)]
            for kv in kvs:
                b.model(prompt, [SeqSlice(kv, len(prompt))])
            slots = torch.tensor([1, 0])
            out = b.model(step, [SeqSlice(kv, 1) for kv in kvs], lora=bank, slots=bank.plan(slots))
            return [ops.int4_linear(x, qw, sc, None), out]

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run()
        torch.set_num_threads(2)
        two = run()
        got: list = []
        t = threading.Thread(target=lambda: (torch.set_num_threads(2), got.append(run())))
        t.start()
        t.join()
    finally:
        torch.set_num_threads(before)
    for a, b2, c in zip(one, two, got[0]):
        assert torch.equal(a, b2) and torch.equal(a, c)


def test_a_forked_child_runs_the_kernels_on_a_pool_of_its_own(ops):
    """A child forked after the parent's pool started has none of its workers: it must start its own
    (waiting for the parent's would hang), and the parent's pool keeps working."""
    import os
    import time

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        qw, sc = pack_int4((torch.randn(1024, 96, generator=torch.Generator().manual_seed(8)) * 0.05).bfloat16())
        x = torch.randn(3, 96, generator=torch.Generator().manual_seed(9)).bfloat16()
        y = ops.int4_linear(x, qw, sc, None)  # the parent's pool is running now
        pid = os.fork()
        if pid == 0:  # the child: same bits, on a pool of its own
            os._exit(0 if torch.equal(ops.int4_linear(x, qw, sc, None), y) else 3)
        deadline, status = time.monotonic() + 60, None
        while status is None and time.monotonic() < deadline:
            done, st = os.waitpid(pid, os.WNOHANG)
            status = os.waitstatus_to_exitcode(st) if done else None
            time.sleep(0.05)
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert status == 0, "the forked child hung or computed other bits"
        assert torch.equal(ops.int4_linear(x, qw, sc, None), y)
    finally:
        torch.set_num_threads(before)


def test_int8_b_rows_hold_the_product_and_serve_prefill_and_decode(ops, tiny_dirs, tmp_path):
    """int8_rows keeps B @ A within int8 rounding (scales folded into A, none stored), and an int8-B
    bank gives the twin's delta on a long batch (the per-adapter prefill path, which widens the int8
    rows itself) as on a decode batch (the native kernel)."""
    from macaronic.engine.config import FUSED
    from macaronic.engine.slots import STACKED_MAX_TOKENS, ReferenceLora, int8_rows

    g = torch.Generator().manual_seed(3)
    A, B = torch.randn(6, 64, generator=g), torch.randn(40, 6, generator=g) * torch.logspace(-3, 0, 6)  # rows of every size
    A2, q = int8_rows(A, B)
    assert q.dtype == torch.int8 and q.shape == (6, 40) and A2.shape == A.shape and int(q.abs().amax(1).min()) == 127
    exact, got = B @ A, q.T.float() @ A2
    assert float((got - exact).norm() / exact.norm()) < 0.01
    args = load_base(tiny_dirs["llama"]).args
    adapters = {s: read_adapter(make_random_adapter(tmp_path / f"q{s}", args, rank=4, seed=60 + s, mode="full", scale=0.5),
                                args, name=f"q{s}")[1] for s in (1, 3)}
    bank, ref = LoraBank(args, 4, 4, dtype=torch.bfloat16, int8_b=True), ReferenceLora(adapters, args, int8_b=True)
    exact_ref = ReferenceLora(adapters, args)
    for s, pairs in adapters.items():
        bank.write(s, pairs)
    for n in (5, STACKED_MAX_TOKENS + 11):
        slots = torch.tensor([(0, 1, 3)[i % 3] for i in range(n)])
        plan = bank.plan(slots)
        assert bool(plan.native_slots) == (n <= STACKED_MAX_TOKENS)
        for fused in FUSED:
            d_in = args.target_shape(FUSED[fused][0])[0]
            d_out = sum(args.target_shape(t)[1] for t in FUSED[fused])
            x = torch.randn(n, d_in, generator=g).bfloat16()
            y = torch.zeros(n, d_out, dtype=torch.bfloat16)
            bank.add_delta(y, 0, fused, x, plan)
            delta, exact = ref.delta(0, fused, x.float(), slots), exact_ref.delta(0, fused, x.float(), slots)
            assert float((y.float() - delta).abs().max()) <= 0.03 * float(delta.abs().max()), (n, fused)
            assert float((delta - exact).norm() / exact.norm()) < 0.01  # the int8 rows next to bf16's own rounding
    with pytest.raises(ValueError, match="int8 B rows"):
        LoraBank(args, 4, 4, dtype=torch.float32, int8_b=True)


def test_the_int4_engine_serves_int8_b_rows_unless_told_not_to(ops, tiny_dirs, monkeypatch):
    """An int4 engine's bank holds B as int8 rows; lora_int8=False (MACARONIC_LORA_INT8=0) keeps bf16,
    and a bf16 engine never quantizes its adapters."""
    from macaronic.engine.llm import EngineConfig, load_llm

    for env, quant, want in ((None, "int4", True), ("0", "int4", False), (None, "none", False)):
        if env is None:
            monkeypatch.delenv("MACARONIC_LORA_INT8", raising=False)
        else:
            monkeypatch.setenv("MACARONIC_LORA_INT8", env)
        llm = load_llm(tiny_dirs["llama"], [], EngineConfig.from_env(dtype="bfloat16", quant=quant))
        try:
            assert llm.engine.bank.int8_b is want, (env, quant)
            assert all((b.dtype == torch.int8) is want for bs in llm.engine.bank.Bt.values() for b in bs)
        finally:
            llm.close()
