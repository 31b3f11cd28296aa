"""The base's matmuls served from its GGUF's own quantized blocks (quant "gguf"), byte for byte.

A registered base's GGUF stores each weight row as ggml blocks (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K:
the layouts are described in csrc/ggml.cpp). `gguf_blocks` reads the blocks of the projections
(and the output head) once from the GGUF into `$MACARONIC_HOME/bases/<name>/gguf-blocks.safetensors`;
`GGMLLinear` keeps them as they are and computes y = x @ W.T with the native kernel
(torch.ops.macaronic.ggml_linear), whose twin is `dequantize` here: pure PyTorch over the same bytes,
equal to `gguf.quants.dequantize` bit for bit (the tests hold both to it). Nothing is requantized:
the weights the engine multiplies are the ones llama.cpp multiplies (up to 32 rows of x are rounded to
8 bits first as llama.cpp's x86 code rounds them for each type, `q8_rows`, and meet Q8_0, Q5_0, Q4_K and
Q6_K blocks in integer dot products, with AVX-512 VNNI where the CPU has it, else AVX2; `kernels` picks
another family). Before serving, every tensor's
dequantized blocks are checked against the imported weights (rows permuted where the GGUF converter
permuted them), so blocks that do not belong to the loaded base never serve.
Knows nothing about adapters or scheduling.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor, nn

# ggml type id -> (name, weights per block, bytes per block)
TYPES = {2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 8: ("Q8_0", 32, 34),
         12: ("Q4_K", 256, 144), 14: ("Q6_K", 256, 210)}
BLOCKS_FILE = "gguf-blocks.safetensors"
# our projection -> the GGUF tensors stacked along its outputs, per layer
FUSED = {"wqkv": ("attn_q", "attn_k", "attn_v"), "wo": ("attn_output",), "w13": ("ffn_gate", "ffn_up"),
         "w2": ("ffn_down",)}


def _f16(b: Tensor) -> Tensor:
    """uint8 [..., 2] -> fp32 [...]"""
    return b.contiguous().view(torch.float16).squeeze(-1).float()


def _nibbles(q: Tensor) -> Tensor:
    """uint8 [..., n] -> [..., 2n]: the low nibbles, then the high ones (ggml's order in a run)."""
    return torch.cat([q & 15, q >> 4], -1)


def dequantize(raw: Tensor, type_id: int) -> Tensor:
    """The twin of the native kernel's weights: uint8 [O, row bytes] (each row's blocks as the GGUF
    stores them) -> fp32 [O, K], in gguf.quants' arithmetic (the same products in the same order)."""
    if type_id not in TYPES:
        raise ValueError(f"ggml type {type_id} is not served from its blocks; served: {sorted(TYPES)}")
    _, elems, nbytes = TYPES[type_id]
    o = raw.shape[0]
    b = raw.reshape(-1, nbytes)  # [blocks, bytes]
    if type_id == 8:  # Q8_0
        out = b[:, 2:].view(torch.int8).float() * _f16(b[:, :2])[:, None]
    elif type_id == 2:  # Q4_0
        out = _f16(b[:, :2])[:, None] * (_nibbles(b[:, 2:]).to(torch.int8) - 8).float()
    elif type_id == 3:  # Q4_1
        out = _f16(b[:, :2])[:, None] * _nibbles(b[:, 4:]).float() + _f16(b[:, 2:4])[:, None]
    elif type_id == 6:  # Q5_0
        qh = b[:, 2:6].contiguous().view(torch.int32)  # [blocks, 1], bit j: the fifth bit of weight j
        hi = (qh >> torch.arange(32, dtype=torch.int32)) & 1
        q = (_nibbles(b[:, 6:]).to(torch.int32) | (hi << 4)) - 16
        out = _f16(b[:, :2])[:, None] * q.float()
    elif type_id == 12:  # Q4_K
        d, dmin, s = _f16(b[:, :2]), _f16(b[:, 2:4]), b[:, 4:16].to(torch.int32)
        lo, mid, top = s[:, 0:4], s[:, 4:8], s[:, 8:12]
        sc = torch.cat([lo & 63, (top & 15) | ((lo >> 6) << 4)], -1)  # [blocks, 8] (get_scale_min_k4)
        mn = torch.cat([mid & 63, (top >> 4) | ((mid >> 6) << 4)], -1)
        q = _nibbles(b[:, 16:].reshape(-1, 4, 32)).reshape(-1, 8, 32).float()  # run j: 32 weights
        out = (d[:, None] * sc.float())[..., None] * q - (dmin[:, None] * mn.float())[..., None]
    else:  # Q6_K
        ql, qh = b[:, :128].reshape(-1, 2, 64), b[:, 128:192].reshape(-1, 2, 32)
        low = _nibbles(ql)  # [blocks, 2, 128]: ql[0:64] & 15, then ql[0:64] >> 4
        high = torch.cat([(qh >> s) & 3 for s in (0, 2, 4, 6)], -1)  # [blocks, 2, 128]
        q = ((low | (high << 4)).to(torch.int32) - 32).float().reshape(-1, 16, 16)
        scale = _f16(b[:, 208:210])[:, None] * b[:, 192:208].view(torch.int8).float()  # [blocks, 16]
        out = scale[..., None] * q
    return out.reshape(o, -1)


# the types whose few-row products meet x rounded to 8 bits in the integer kernels (csrc/ggml.cpp)
Q8_TYPES = (6, 8, 12, 14)
FEW_ROWS = 32  # up to this many rows of x take the few-row kernels
# the few-row kernel families (csrc/ggml.cpp's `ggml_kernels`): "auto" is the fastest this CPU runs
# (VNNI, else AVX2); "fp32" meets x as it is (the twin is then the plain dequantize + matmul)
KERNELS = {"auto": 0, "fp32": 1, "avx2": 2, "vnni": 3}


def kernel_families(ops) -> list[str]:
    """The few-row kernel families this CPU runs: fp32 and avx2 always, vnni with AVX-512 VNNI."""
    return ["fp32", "avx2", "vnni"] if ops.vnni_supported() else ["fp32", "avx2"]


@contextmanager
def kernels(ops, family: str):
    """Within the block, every ggml_linear of this process uses `family` for its few rows, then the
    setting before is restored. For benches and tests on one thread: the setting is process-wide, so an
    engine serving meanwhile would change family mid-step. A family the CPU lacks is refused."""
    if family not in KERNELS:
        raise ValueError(f"unknown kernel family {family!r}; choose from {sorted(KERNELS)}")
    before = ops.ggml_kernels(KERNELS[family])
    try:
        yield
    finally:
        ops.ggml_kernels(before)


def default_family(ops) -> str:
    """What "auto" runs on this CPU: "vnni" where it has AVX-512 VNNI, else "avx2"."""
    return "vnni" if ops.vnni_supported() else "avx2"


def rounds_x(n: int, family: str = "auto") -> bool:
    """Does a product of n rows meet the Q8 types with x rounded to 8 bits (`q8_rows`)?"""
    return n <= FEW_ROWS and family != "fp32"


K_QUANTS = (12, 14)  # Q4_K, Q6_K: they meet x as q8_K; Q8_0 and Q5_0 as q8_0


def q8_rows(x: Tensor, type_: int = 8) -> Tensor:
    """x [N, K] as llama.cpp's x86 code rounds it for a weight of ggml type `type_` before its integer dot
    products (fp32 back): Q8_0 and Q5_0 meet q8_0 (per run of 32, d = fp16(max|x| / 127),
    q = nearest(x * (127 / max|x|))); Q4_K and Q6_K meet q8_K (per 256, iscale = -127 / m, m the element
    of largest magnitude, q = min(127, nearest(iscale * x)), d = 1 / iscale). The native kernel's twin for
    the Q8 types (`rounds_x`)."""
    if type_ in K_QUANTS:
        r = x.float().reshape(*x.shape[:-1], -1, 256)
        m = r.gather(-1, r.abs().argmax(-1, keepdim=True))
        # tensor over tensor: a division by or of a number may run as a product with a reciprocal,
        # which rounds differently from the kernel's division
        mul = torch.where(m != 0, torch.full_like(m, -127.0) / m, torch.zeros_like(m))
        d = torch.where(m != 0, torch.ones_like(m) / mul, torch.zeros_like(m))
        return (torch.round(r * mul).clamp(max=127) * d).reshape(x.shape)
    r = x.float().reshape(*x.shape[:-1], -1, 32)
    amax = r.abs().amax(-1, keepdim=True)
    d = (amax / torch.full_like(amax, 127.0)).half().float()
    mul = torch.where(amax > 0, torch.full_like(amax, 127.0) / amax, torch.zeros_like(amax))
    return (torch.round(r * mul) * d).reshape(x.shape)


class GGMLReference:
    """The pure-PyTorch twin of torch.ops.macaronic's ggml_linear (same call), for tests: every part
    dequantized to fp32, one fp32 matmul, rounded to bf16 like the kernel's output (x is met as given:
    the callers round it with `q8_rows` where the kernel does)."""

    @staticmethod
    def ggml_linear(x: Tensor, parts: list[Tensor], types: list[int], bias: Tensor | None = None) -> Tensor:
        w = torch.cat([dequantize(p, t) for p, t in zip(parts, types)])
        y = x.float() @ w.T
        return (y if bias is None else y + bias.float()).to(torch.bfloat16)


class GGMLLinear(nn.Module):
    """y = x @ W.T (+ b) for bf16 x: [N, in] -> [N, out] from the GGUF's blocks (parts stacked along
    the outputs, each with its ggml type)."""

    rescore = False  # the head's logits are the GGUF head's own; nothing to rescore

    def __init__(self, parts: list[Tensor], types: list[int], in_features: int, bias: Tensor | None = None, ops=None):
        super().__init__()
        self.kind = "gguf"
        self.parts, self.types = [p.contiguous() for p in parts], [int(t) for t in types]
        self.in_features, self.out_features = in_features, sum(p.shape[0] for p in parts)
        self.bias = None if bias is None else bias.detach().to(torch.bfloat16).contiguous()
        self.ops = GGMLReference if ops is None else ops

    def forward(self, x: Tensor) -> Tensor:
        return self.ops.ggml_linear(x.to(torch.bfloat16).contiguous(), self.parts, self.types, self.bias)

    def dequantized(self) -> Tensor:
        return torch.cat([dequantize(p, t) for p, t in zip(self.parts, self.types)])

    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)


def gguf_blocks(base: str, path: Path, gguf_file) -> dict[str, tuple[int, Tensor]]:
    """The GGUF's blocks of the served projections and the head, {gguf name: (type, uint8 [O, row bytes])},
    read once from the registered base's GGUF into `path/gguf-blocks.safetensors`. `gguf_file(name,
    scratch)` gives the base's GGUF file, assembling a split base into `scratch` (engine/base.py's
    base_gguf, passed in so this module does not import the loader that imports it)."""
    from safetensors.torch import load_file, save_file

    cache = path / BLOCKS_FILE
    if not cache.exists():
        import os

        from macaronic.engine import bases

        spec = bases.get(base)
        scratch = path / f".assemble-{os.getpid()}" / spec.gguf
        try:
            state, types = read_blocks(gguf_file(spec.name, scratch))
        finally:
            if scratch.exists():
                scratch.unlink()
            if scratch.parent.exists():
                scratch.parent.rmdir()
        tmp = cache.with_name(f"{cache.name}.partial-{os.getpid()}")
        save_file(state, str(tmp), metadata={"types": json.dumps(types)})
        os.replace(tmp, cache)
    from safetensors import safe_open

    with safe_open(str(cache), "pt") as f:
        types = json.loads(f.metadata()["types"])
    state = load_file(str(cache))
    return {name: (types[name], t) for name, t in state.items()}


def read_blocks(gguf_path: Path) -> tuple[dict[str, Tensor], dict[str, int]]:
    """Every quantized 2-D tensor of the layers and the head, as its raw blocks (uint8 [rows, row bytes])."""
    import gguf

    r = gguf.GGUFReader(str(gguf_path))
    state, types = {}, {}
    for t in r.tensors:
        tid = int(t.tensor_type)
        if tid in TYPES and (t.name.startswith("blk.") or t.name == "output.weight"):
            state[t.name] = torch.from_numpy(t.data.copy()).view(torch.uint8).reshape(int(t.shape[1]), -1)
            types[t.name] = tid
    return state, types


def _unpermute(rows: Tensor, n_head: int) -> Tensor:
    """Undo the llama GGUF converter's q/k row permutation (transformers' reverse_permute_weights)."""
    dim = rows.shape[0] // n_head // 2
    return rows.reshape(n_head, dim, 2, *rows.shape[1:]).swapaxes(2, 1).reshape(rows.shape)


def _match(raw: Tensor, tid: int, ref: Tensor, n_head: int) -> Tensor:
    """raw's rows in the order whose dequantization equals `ref` exactly (as imported), or ValueError."""
    for cand in (raw, _unpermute(raw, n_head)) if n_head else (raw,):
        if cand.shape[0] == ref.shape[0] and torch.equal(dequantize(cand, tid), ref.float()):
            return cand.contiguous()
    raise ValueError("dequantized blocks differ from the imported weights")


@torch.no_grad()
def serve_blocks(model, blocks: dict[str, tuple[int, Tensor]], ref: dict[str, Tensor], ops=None) -> None:
    """Replace the model's projections and head with GGMLLinear over `blocks`, each checked against `ref`
    (the imported fp32 weights, Hugging Face names). Raises ValueError naming every tensor that fails."""
    a, problems = model.args, []
    hf = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
          "ffn_down": "mlp.down_proj"}
    heads = {"attn_q": a.n_heads, "attn_k": a.n_kv_heads}
    new = []
    for i, blk in enumerate(model.layers):
        for attr, names in FUSED.items():
            parts, types = [], []
            for n in names:
                key, want = f"blk.{i}.{n}.weight", ref.get(f"model.layers.{i}.{hf[n]}.weight")
                if key not in blocks or want is None:
                    problems.append(f"{key}: not in the GGUF's quantized blocks or not in the base")
                    continue
                tid, raw = blocks[key]
                try:
                    parts.append(_match(raw, tid, want, heads.get(n, 0) if a.family == "llama" else 0))
                    types.append(tid)
                except ValueError as e:
                    problems.append(f"{key}: {e}")
            bias = blk.bqkv if attr == "wqkv" else None
            new.append((blk, attr, parts, types, bias))
    head, want = blocks.get("output.weight"), ref.get("lm_head.weight")
    if head is None and a.tie_embeddings:
        pass  # a tied head stays the (bf16) embedding: exact, as the GGUF's token_embd dequantized
    elif head is None or want is None:
        problems.append("output.weight: the GGUF has no quantized head for this base")
    else:
        try:
            head = (head[0], _match(head[1], head[0], want, 0))
        except ValueError as e:
            problems.append(f"output.weight: {e}")
    if problems:
        raise ValueError("gguf: the GGUF's blocks cannot serve this base:\n  " + "\n  ".join(problems))
    for blk, attr, parts, types, bias in new:
        _swap(blk, attr, GGMLLinear(parts, types, a.dim if attr != "w2" else a.intermediate_size, bias, ops))
        if attr == "wqkv":
            blk.bqkv = None
    if head is not None:
        _swap(model, "lm_head", GGMLLinear([head[1]], [head[0]], a.dim, None, ops))
    model.quant = "gguf"
    model._decode_w = None


def _swap(module: nn.Module, name: str, new: nn.Module) -> None:
    delattr(module, name)
    setattr(module, name, new)
