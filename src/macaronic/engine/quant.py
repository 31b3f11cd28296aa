"""Weight-only quantized base matmuls: int8, int4, and the GGUF's own blocks ("gguf", engine/ggml.py).

int4 with the native kernel (engine/native.py, csrc/int4.cpp; an x86-64 CPU with AVX-512 BF16, or AVX2 +
FMA + F16C for the kernels' fp32 twins): the layer keeps only its packed nibbles and an fp16 (scale,
min) per 16 outputs x 32 inputs (asymmetric, as llama.cpp's Q4_1: 5 bits a weight), and runs every row
count from them: registers for few rows, AMX tiles dequantised in L1 (or dequantised chunks for at::mm,
in fp32 on AVX2) for more. int4 is a quantization of the base's weights, whatever they came
from: only a base imported from Q4_1 (SmolLM2-135M) repacks exactly. The default base's GGUF
(Qwen2.5-Coder-0.5B, "Q4_K_M": Q5_0, Q8_0, Q4_K and Q6_K tensors) does not: int4 quantizes its
dequantized weights a second time (fp32 reproduced llama.cpp's greedy text on 37 of 40 HumanEval
prompts, int4 on 12, issue 40); quant "gguf" serves that GGUF's own blocks instead.

The rule for requantizing (one place, here): a served precision may requantize a base's weights
only when (a) the result is exact on the source's grid (Q4_1 -> int4 repacks bit for bit), or (b) the
precision is chosen by name as a lossy one (int8, int4 on a GGUF whose blocks are not Q4_1) and its
quality is measured against the fp32 dequantized weights on the contract's suites before it becomes a
base's served default (engine/bases.py `served`). Serving "the GGUF's weights" means quant "gguf".

A base may also ask for x rounded to 8 bits on the native kernel's few-rows path (`BaseSpec.int4_x`,
`MACARONIC_INT4_X`; `quantize(x8=True)`): per group of 32 as llama.cpp rounds it, integer products on
AVX-512 VNNI. The default base does (admitted by the same rule, docs/LOG.md 2026-12-07); SmolLM2 does not.

`pack_int4` writes int4's layout; `unpack_int4` is its pure-PyTorch twin, the reference the tests
hold the kernel to (`Int4Reference`, `q8_groups` for the rounded x).
Without the native kernel (a non-x86 CPU, MACARONIC_NATIVE=0, no compiler; and for int8), decoding few streams is bound by reading the weights
and many rows are compute-bound, so a QuantLinear keeps the layer's bf16 weight and a packed copy,
and picks per call:
- up to SMALL_ROWS rows (SMALL_ROWS_FP32 on a CPU without native bf16): torch's weight-only CPU
  kernels, `_weight_int4pack_mm_for_cpu` (asymmetric, a min and a scale per group of 32) or
  `_weight_int8pack_mm` (symmetric, one scale per output channel);
- more rows: the bf16 weight. On a CPU that computes bf16 natively (AVX512-BF16 or AMX) in a bf16
  matmul; on one that does not (AVX2: most laptops, this project's 2-core AMD boxes), torch
  emulates bf16 matmuls about 4x slower than fp32 ones, so the weight is widened to fp32 for the
  call (exact: every bf16 is an fp32) and the product runs in fp32, rounded to bf16 once at the end.
  Measured on a 2-core AVX2 EPYC (docs/LOG.md 2026-12-05, sixth session; scripts/widen_compare.py):
  a 512-row 4864x896 product 220 ms in bf16, 33 ms widened; the default base's prefill 28 -> 160
  tokens/s, 16 streams' decode 2.4-2.8x (up to SMALL_ROWS_FP32 rows the packed kernel beats both).
The LM head in int4 mode computes int4 logits, then recomputes the top RESCORE_TOP rows of each
token exactly from the bf16 weight, so the candidates sampling sees are exact.
Activations, norms and KV run in bf16; LoRA slots are bf16 with the native kernels, else fp32. Measured figures: docs/BENCHMARKS.md, docs/LOG.md.
Knows nothing about adapters or scheduling.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

QUANTS = ("none", "int8", "int4", "gguf")  # gguf: engine/ggml.py, applied by base.load_base
INT4_GROUP = 32
SMALL_ROWS = 4  # above this many rows the bf16 matmul beats the weight-only kernels (docs/LOG.md)
SMALL_ROWS_FP32 = 48  # the same where bf16 is emulated: the widened fp32 matmul wins from about 48 rows
WIDEN_ROWS = 16384  # output rows widened to fp32 at a time (64 MiB at width 1024)
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


def pack_int4(w: Tensor) -> tuple[Tensor, Tensor]:
    """w: [O, K] -> the native kernel's (qw: uint8 [O/16, G, 8, 32], sc: fp16 [O/16, G, 2, 16]).

    Per output and group of 32 inputs: min m and scale s (fp16, as in GGUF's Q4_1: weights
    dequantized from Q4_1 come back exactly; from any other GGUF type they are requantized), q = round((w - m) / s) in 0..15.
    In chunk c of group g, byte 2*o + e holds q[o, 32g + 2c + e] (low nibble) and
    q[o, 32g + 2(c + 8) + e] (high nibble), o the output within its block of 16.
    """
    o, k = w.shape
    if o % 16 or k % INT4_GROUP:
        raise ValueError(f"int4 packing needs outputs divisible by 16 and inputs by {INT4_GROUP}; got {tuple(w.shape)}")
    g = k // INT4_GROUP
    wg = w.float().view(o, g, INT4_GROUP)
    lo, hi = wg.amin(-1), wg.amax(-1)
    s = ((hi - lo) / 15).clamp(min=2**-24).to(torch.float16)  # 2^-24: fp16's smallest step, never 0
    m = lo.to(torch.float16)
    q = ((wg - m.float()[..., None]) / s.float()[..., None]).round().clamp(0, 15).to(torch.uint8)
    q5 = q.view(o // 16, 16, g, 16, 2).permute(0, 2, 3, 1, 4)  # [block, group, pair, output, e]
    qw = (q5[:, :, :8] | (q5[:, :, 8:] << 4)).reshape(o // 16, g, 8, 32).contiguous()
    blocks = lambda t: t.view(o // 16, 16, g).permute(0, 2, 1)  # noqa: E731  [block, group, output]
    return qw, torch.stack([blocks(s), blocks(m)], 2).contiguous()


def _int4_parts(qw: Tensor, sc: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """q [O, G, 32], scale and min [O, G, 1], fp32, from the native kernel's layout."""
    nb, g = qw.shape[:2]
    q5 = torch.stack([qw & 15, qw >> 4], 2).view(nb, g, 16, 16, 2)  # [block, group, pair, output, e]
    q = q5.permute(0, 3, 1, 2, 4).reshape(nb * 16, g, INT4_GROUP).float()
    s, m = (sc[:, :, i].permute(0, 2, 1).reshape(nb * 16, g, 1).float() for i in (0, 1))
    return q, s, m


def unpack_int4(qw: Tensor, sc: Tensor) -> Tensor:
    """The reference twin of the native kernel's weights: fp32 W [O, K] = q * scale + min."""
    q, s, m = _int4_parts(qw, sc)
    return (q * s + m).view(q.shape[0], -1)


def q8_groups(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """x [N, K] rounded per group of 32 as the kernel's path 4 (and llama.cpp's q8) rounds it: xq int8
    [N, K] = nearest(x * 127 / max|x|), d = max|x| / 127 and the exact sum of x, fp32 [N, G]."""
    xf = x.float().view(x.shape[0], -1, INT4_GROUP)
    amax = xf.abs().amax(2, keepdim=True)
    inv = torch.where(amax > 0, 127 / amax, torch.zeros_like(amax))
    return (xf * inv).round().to(torch.int8).view(x.shape), (amax / 127).squeeze(2), xf.sum(2)


class Int4Reference:
    """The pure-PyTorch twin of torch.ops.macaronic's int4_linear (same call), for tests: the
    weights unpacked to fp32 and one fp32 matmul, rounded to bf16 like the kernel's output; path 4
    multiplies q * scale with x rounded per group (q8_groups) and min with the exact sums of x."""

    @staticmethod
    def int4_linear(x: Tensor, qw: Tensor, sc: Tensor, bias: Tensor | None = None, path: int = 0) -> Tensor:
        if path == 4:
            q, s, m = _int4_parts(qw, sc)
            xq, d, xs = q8_groups(x)
            xr = (xq.float().view(x.shape[0], -1, INT4_GROUP) * d[:, :, None]).view(x.shape[0], -1)
            y = xr @ (q * s).view(q.shape[0], -1).T + xs @ m[:, :, 0].T
        else:
            y = x.float() @ unpack_int4(qw, sc).T
        return (y if bias is None else y + bias.float()).to(torch.bfloat16)


class QuantLinear(nn.Module):
    """y = x @ W.T (+ b) for bf16 x: [N, in] -> [N, out] from int4 nibbles (native), or packed
    weights for small N and the bf16 weight for large N."""

    def __init__(self, w: Tensor, kind: str, bias: Tensor | None = None, rescore: bool = False, native=None,
                 bf16_native: bool | None = None, x8: bool = False):
        super().__init__()
        self.path = 5 if x8 else 0  # the native kernel's path: 5 rounds x to 8 bits where it would take the registers
        if kind not in QUANTS[1:]:
            raise ValueError(f"unknown quantization {kind!r}; choose one of {QUANTS[1:]}")
        self.kind, self.out_features, self.in_features = kind, w.shape[0], w.shape[1]
        self.weight = w.detach().to(torch.bfloat16)  # shared with the embedding when the head is tied
        self.bias = None if bias is None else bias.detach().to(torch.bfloat16).contiguous()
        self.rescore = rescore
        self.native = None
        if kind == "int4" and native is not None and w.shape[0] % 16 == 0 and w.shape[1] % INT4_GROUP == 0:
            self.native, self.packed = native, pack_int4(self.weight)
            if not rescore:  # the head's exact rescoring reads rows of the bf16 weight (tied: the embedding)
                self.weight = None
        elif kind == "int4":
            self.group = int4_group(self.in_features)
            self.packed = _int4_pack(self.weight, self.group)
        else:
            self.packed = _int8_pack(self.weight)
        if bf16_native is None:
            from macaronic.engine.native import cpu_bf16

            bf16_native = cpu_bf16()
        # without the native kernel: how many rows the packed kernels take, and whether more rows
        # multiply in bf16 or widen the weight to fp32 (module docstring)
        self.widen = not bf16_native
        self.small_rows = SMALL_ROWS if bf16_native else SMALL_ROWS_FP32

    def forward(self, x: Tensor) -> Tensor:
        x = x.to(torch.bfloat16)
        if self.native is not None:
            y = self.native.int4_linear(x.contiguous(), self.packed[0], self.packed[1], self.bias, self.path)
            return self._rescored(x, y) if self.rescore else y
        if x.shape[0] > self.small_rows:
            if self.widen:
                return self._widened(x)
            return F.linear(x, self.weight, self.bias)
        if self.kind == "int4":
            y = torch.ops.aten._weight_int4pack_mm_for_cpu(x, self.packed[0], self.group, self.packed[1])
        else:
            y = torch.ops.aten._weight_int8pack_mm(x, self.packed[0], self.packed[1])
        if self.rescore:
            y = self._rescored(x, y)
        if self.bias is not None:
            y = y + self.bias
        return y

    def _widened(self, x: Tensor) -> Tensor:
        """x @ W.T (+ b) in fp32 from the bf16 weight, WIDEN_ROWS output rows widened at a time (the
        head's 150k rows would otherwise take a transient fp32 copy of half a gigabyte)."""
        xf, w = x.float(), self.weight
        b = None if self.bias is None else self.bias.float()
        if w.shape[0] <= WIDEN_ROWS:
            return F.linear(xf, w.float(), b).to(torch.bfloat16)
        y = torch.empty(x.shape[0], w.shape[0], dtype=torch.bfloat16)
        for s in range(0, w.shape[0], WIDEN_ROWS):
            e = min(s + WIDEN_ROWS, w.shape[0])
            y[:, s:e] = F.linear(xf, w[s:e].float(), None if b is None else b[s:e])
        return y

    def _rescored(self, x: Tensor, y: Tensor) -> Tensor:
        """Exact logits (bf16 weight, fp32 accumulate) for each row's top RESCORE_TOP candidates."""
        top = y.topk(min(RESCORE_TOP, y.shape[1]), dim=1).indices  # [N, k]
        exact = torch.einsum("nd,nkd->nk", x.float(), self.weight[top].float())
        return y.float().scatter_(1, top, exact)

    def nbytes(self) -> int:
        """Bytes the packed path reads per call (without the native kernel the bf16 weight serves
        large batches)."""
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
    if kind != "int4":  # gguf: engine/ggml.serve_blocks checks every tensor against its blocks
        return
    for name, w in _targets(model):
        if w.shape[0] % 16 or w.shape[1] % 32:
            raise ValueError(f"int4 needs output widths divisible by 16 and input widths by 32; {name} is {tuple(w.shape)}")


def _targets(model):
    for i, blk in enumerate(model.layers):
        for attr in ("wqkv", "wo", "w13", "w2"):
            yield f"layers.{i}.{attr}", getattr(blk, attr)
    yield "lm_head", model.lm_head


_AUTO = object()


@torch.no_grad()
def quantize(model, kind: str, native=_AUTO, x8: bool = False) -> None:
    """Replace the model's big weights in place with `kind` QuantLinear modules (bf16 model).
    int4 uses the native kernel when it builds and runs here (`native`: torch.ops.macaronic, or
    None for the PyTorch path); otherwise it keeps the bf16 weights beside torch's int4 packing.
    `x8`: the native int4 kernel rounds x to 8 bits per group of 32 on the few-rows path where the CPU has
    AVX-512 VNNI (its path 5; a base's `int4_x`, engine/bases.py)."""
    check_quantizable(model, kind)
    if kind == "none":
        return
    if kind == "gguf":
        raise ValueError("quant gguf serves the GGUF's own blocks: load the base with load_base(..., quant='gguf')")
    if model.dtype != torch.bfloat16:
        raise ValueError("weight-only quantization runs with bf16 activations: load the base with dtype bfloat16")
    if native is _AUTO:
        native = None
        if kind == "int4":
            from macaronic.engine import native as native_mod

            native = native_mod.ops()  # None (with one warning) where it cannot build or run
    from macaronic.engine.native import cpu_bf16

    bf = cpu_bf16()
    x8 = bool(x8 and kind == "int4" and native is not None)
    for blk in model.layers:
        _swap(blk, "wqkv", QuantLinear(blk.wqkv, kind, blk.bqkv, native=native, bf16_native=bf, x8=x8))
        blk.bqkv = None
        for attr in ("wo", "w13", "w2"):
            _swap(blk, attr, QuantLinear(getattr(blk, attr), kind, native=native, bf16_native=bf, x8=x8))
    _swap(model, "lm_head", QuantLinear(model.lm_head, kind, rescore=kind == "int4", native=native, bf16_native=bf, x8=x8))
    model.quant = kind
    model.int4_path = 5 if x8 else 0  # what the fused decode step asks its int4 projections for
    model._decode_w = None  # the fused decode step's weight list names the replaced tensors


def _swap(module: nn.Module, name: str, new: nn.Module) -> None:
    delattr(module, name)  # a registered parameter cannot be overwritten by a module directly
    setattr(module, name, new)
