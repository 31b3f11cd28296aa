"""The default base's GGUF blocks (Q5_0, Q8_0, Q4_K, Q6_K) through engine/ggml.py: the twin equals
gguf.quants and the imported weights bit for bit, the native kernel matches the twin on real tensors,
and the base served from its blocks (quant gguf) agrees with the fp32 dequantized base."""

from __future__ import annotations

import pytest
import torch
from gguf import GGMLQuantizationType, quants

from macaronic.engine import ggml, native

QWEN = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def qwen_blocks(tmp_path_factory):
    from macaronic.engine.base import base_gguf

    scratch = tmp_path_factory.mktemp("gguf") / "qwen.gguf"
    state, types = ggml.read_blocks(base_gguf(QWEN, scratch))
    scratch.unlink()
    return state, types


def test_real_tensors_dequantize_exactly_and_the_kernel_matches(qwen_blocks, qwen_dir):
    from safetensors import safe_open

    state, types = qwen_blocks
    picked = {}
    for name, t in types.items():  # one tensor of each type the GGUF uses
        picked.setdefault(t, name)
    assert {6, 8, 12, 14} <= set(picked), picked
    ops = native.ops()
    # On an x86-64 CPU with AVX2 (or AVX-512 BF16) the kernels must build; elsewhere the dequantization
    # is still checked, the kernel comparison cannot run
    assert ops is not None or not native.cpu_can_run(), "the native kernels must build on a CPU that can run them"
    hf = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    g = torch.Generator().manual_seed(0)
    with safe_open(str(qwen_dir / "model.safetensors"), "pt") as f:
        for t, name in sorted(picked.items()):
            raw = state[name][:512] if name == "output.weight" else state[name]
            w = ggml.dequantize(raw, t)
            assert torch.equal(w, torch.from_numpy(quants.dequantize(raw.numpy(), GGMLQuantizationType(t)))), name
            if name.startswith("blk."):
                _, i, part, _ = name.split(".")
                assert torch.equal(w, f.get_tensor(f"model.layers.{i}.{hf[part]}.weight")), name  # the import's weights
            for n in (1, 3, 24) if ops is not None else ():
                x = torch.randn(n, w.shape[1], generator=g).bfloat16()
                # up to 32 rows the Q8 types meet x rounded to 8 bits as llama.cpp rounds it for their type
                # (ggml.q8_rows)
                q8 = ggml.rounds_x(n) and t in ggml.Q8_TYPES
                ref = ggml.GGMLReference.ggml_linear(ggml.q8_rows(x, t) if q8 else x, [raw], [t]).float()
                y = ops.ggml_linear(x, [raw.contiguous()], [t], None).float()
                assert torch.allclose(y, ref, rtol=1e-2, atol=2e-3 * ref.abs().max().item()), (name, n)


def test_served_from_blocks_agrees_with_the_fp32_dequantized_base(qwen_dir):
    from macaronic.engine.engine import EngineConfig
    from macaronic.engine.llm import load_llm

    ids = None
    out = {}
    for quant in ("none", "gguf"):
        llm = load_llm(str(qwen_dir), [], EngineConfig.from_env(dtype="float32", quant=quant))
        try:
            if quant == "gguf":
                assert llm.base.precision == "gguf"
                assert isinstance(llm.base.model.layers[0].w2, ggml.GGMLLinear)
            ids = ids or llm.encode_chat([{"role": "user", "content": "Write a Python function that reverses a string."}])
            out[quant] = llm.score(ids, None).float()
        finally:
            llm.close()
    agree = float((out["gguf"].argmax(-1) == out["none"].argmax(-1)).float().mean())
    print(f"qwen gguf vs fp32: argmax agreement {agree:.3f} over {len(ids)} positions")
    assert agree >= 0.95
