"""Weight-only quantized base matmuls for few-row decode: int8 and int4.

Decoding one or a few streams on a CPU is bound by reading the weights once per step, so fewer
weight bytes is the fastest path there; with many rows (a 16-stream batch, a prefill chunk) the
matmuls are compute-bound and bf16 on the CPU's matrix units wins by far. A QuantLinear therefore
keeps the layer's bf16 weight and a packed copy, and picks per call:
- up to SMALL_ROWS rows: torch's weight-only CPU kernels, `_weight_int4pack_mm_for_cpu`
  (asymmetric, a min and a scale per group of 32, like llama.cpp's Q4_1) or `_weight_int8pack_mm`
  (symmetric, one scale per output channel);
- more rows: the bf16 weight.
The LM head in int4 mode computes int4 logits, then recomputes the top RESCORE_TOP rows of each
token exactly from the bf16 weight, so the candidates sampling sees are exact.
Activations, norms, KV and LoRA run in bf16. Measured figures: docs/BENCHMARKS.md, docs/LOG.md.
Knows nothing about adapters or scheduling.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

QUANTS = ("none", "int8", "int4")
INT4_GROUP = 32
SMALL_ROWS = 4  # above this many rows the bf16 matmul beats the weight-only kernels (docs/LOG.md)
RESCORE_TOP = 64


def _int8_pack(w: Tensor) -> tuple[Tensor, Tensor]:
    scale = (w.float().abs().amax(1) / 127).clamp(min=1e-12)
    q = (w.float() / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
    return q, scale.to(torch.bfloat16)


def _int4_pack(w: Tensor, group: int) -> tuple[Tensor, Tensor]:
    o, i = w.shape
    wg = w.float().view(o, i // group, group)
    lo, hi = wg.amin(-1), wg.amax(-1)
    scale = ((hi - lo) / 15).clamp(min=1e-12)
    q = ((wg - lo[..., None]) / scale[..., None]).round().clamp(0, 15).to(torch.int32).view(o, i)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    # the kernel computes (q - 8) * scale + zero, so zero = min + 8 * scale
    return packed, torch.stack([scale, lo + 8 * scale], -1).transpose(0, 1).contiguous().to(torch.bfloat16)


class QuantLinear(nn.Module):
    """y = x @ W.T (+ b) for bf16 x: [N, in] -> [N, out], packed weights for small N."""

    def __init__(self, w: Tensor, kind: str, bias: Tensor | None = None, rescore: bool = False):
        super().__init__()
        if kind not in QUANTS[1:]:
            raise ValueError(f"unknown quantization {kind!r}; choose one of {QUANTS[1:]}")
        self.kind, self.out_features, self.in_features = kind, w.shape[0], w.shape[1]
        self.weight = w.detach().to(torch.bfloat16)  # shared with the embedding when the head is tied
        self.bias = None if bias is None else bias.detach().to(torch.bfloat16)
        self.rescore = rescore
        if kind == "int4":
            self.group = int4_group(self.in_features)
            self.packed = _int4_pack(self.weight, self.group)
        else:
            self.packed = _int8_pack(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        x = x.to(torch.bfloat16)
        if x.shape[0] > SMALL_ROWS:
            return F.linear(x, self.weight, self.bias)
        if self.kind == "int4":
            y = torch.ops.aten._weight_int4pack_mm_for_cpu(x, self.packed[0], self.group, self.packed[1])
        else:
            y = torch.ops.aten._weight_int8pack_mm(x, self.packed[0], self.packed[1])
        if self.rescore:  # exact logits for each row's top candidates
            top = y.topk(min(RESCORE_TOP, y.shape[1]), dim=1).indices  # [N, k]
            exact = torch.einsum("nd,nkd->nk", x.float(), self.weight[top].float())
            y = y.float().scatter_(1, top, exact)
        if self.bias is not None:
            y = y + self.bias
        return y

    def nbytes(self) -> int:
        """Bytes the packed path reads per call (the bf16 weight serves large batches)."""
        return self.packed[0].nbytes + self.packed[1].nbytes


def int4_group(in_features: int) -> int:
    for g in (INT4_GROUP, 64, 128, 256):  # torch's int4 kernel takes groups of 32..256
        if in_features % g == 0:
            return g
    raise ValueError(f"int4: input width {in_features} is not a multiple of 32")


def check_quantizable(model, kind: str) -> None:
    """Raise a clear error before touching the model if `kind` cannot apply to its shapes."""
    if kind not in QUANTS:
        raise ValueError(f"unknown quantization {kind!r}; choose one of {QUANTS}")
    if kind != "int4":
        return
    for name, w in _targets(model):
        if w.shape[0] % 16 or w.shape[1] % 32:
            raise ValueError(f"int4 needs output widths divisible by 16 and input widths by 32; {name} is {tuple(w.shape)}")


def _targets(model):
    for i, blk in enumerate(model.layers):
        for attr in ("wqkv", "wo", "w13", "w2"):
            yield f"layers.{i}.{attr}", getattr(blk, attr)
    yield "lm_head", model.lm_head


@torch.no_grad()
def quantize(model, kind: str) -> None:
    """Replace the model's big weights in place with `kind` QuantLinear modules (bf16 model)."""
    check_quantizable(model, kind)
    if kind == "none":
        return
    if model.dtype != torch.bfloat16:
        raise ValueError("weight-only quantization runs with bf16 activations: load the base with dtype bfloat16")
    for blk in model.layers:
        _swap(blk, "wqkv", QuantLinear(blk.wqkv, kind, blk.bqkv))
        blk.bqkv = None
        for attr in ("wo", "w13", "w2"):
            _swap(blk, attr, QuantLinear(getattr(blk, attr), kind))
    _swap(model, "lm_head", QuantLinear(model.lm_head, kind, rescore=kind == "int4"))
    model.quant = kind


def _swap(module: nn.Module, name: str, new: nn.Module) -> None:
    delattr(module, name)  # a registered parameter cannot be overwritten by a module directly
    setattr(module, name, new)
