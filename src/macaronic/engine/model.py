"""The decoder: Llama, Qwen2 and Qwen3 in one small module, over flat token ids.

Each entry point takes the new tokens of one or more sequences concatenated (`tokens: [N]`) and
for each sequence its KV buffer, which knows how many tokens it already holds. One job each:
`decode` (prompt chunks and decode steps, to logits), `recompute` (upper mode: layers from a
split up, from a kept residual) and `score` (the router's hidden states, or an early exit). LoRA
deltas come from a slot bank with a per-token slot index, so one batch can mix adapters and one
sequence can switch adapter mid-way (turn-activated LoRA). The module knows nothing about
tokenizers, sampling, scheduling or where adapters come from; K/V memory is `engine/kvpool.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from macaronic.engine.config import FUSED, ModelArgs
from macaronic.engine.kvpool import KVBuffer, KVPool


class LoraDelta(Protocol):
    """What the model asks of a LoRA bank: add the delta of one fused projection (config.FUSED:
    "qkv", "o", "gate_up", "down") for N tokens to its output y: [N, d_out], in place."""

    def add_delta(self, y: Tensor, layer: int, fused: str, x: Tensor, slots) -> None: ...


@dataclass
class SeqSlice:
    """One sequence's share of a forward: `n_new` tokens appended to `kv` after `kv.length`."""

    kv: KVBuffer
    n_new: int


@dataclass
class _PooledStep:
    pool: KVPool
    rows: Tensor  # [B] pool row of each sequence
    pos: Tensor  # [B] position of its new token
    n_rows: int  # rows 0..n_rows-1 take part (rows of other sequences get a dummy query)
    span: int  # key positions 0..span-1
    mask: Tensor  # [n_rows, 1, 1, span] bool


def _pooled_decode(seqs: list[SeqSlice]) -> _PooledStep | None:
    """The batched-attention plan when every sequence adds one token to rows of the same pool."""
    if len(seqs) < 2 or any(s.n_new != 1 for s in seqs):
        return None
    pool = seqs[0].kv.pool
    if pool is None or any(s.kv.pool is not pool for s in seqs):
        return None
    for s in seqs:
        if s.kv.length + 1 > s.kv.capacity:
            raise ValueError(f"KV buffer overflow: {s.kv.length + 1} > capacity {s.kv.capacity}")
    rows = torch.tensor([s.kv.row for s in seqs])
    pos = torch.tensor([s.kv.length for s in seqs])
    n_rows, span = int(rows.max()) + 1, int(pos.max()) + 1
    limit = torch.zeros(n_rows, dtype=torch.long)  # other rows see position 0 only (no NaN rows)
    limit[rows] = pos
    mask = (torch.arange(span)[None, :] <= limit[:, None])[:, None, None, :]
    return _PooledStep(pool=pool, rows=rows, pos=pos, n_rows=n_rows, span=span, mask=mask)


_NO_SLOTS = torch.empty(0, dtype=torch.long)
_N_TARGETS = [len(FUSED[f]) for f in FUSED]  # decode_layers' LoRA layout: per projection, A then its Bs


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    if x.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)  # one fused kernel
    # Hugging Face's rounding for half precision: normalise in fp32, round, then scale
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def linear(x: Tensor, w, b: Tensor | None = None) -> Tensor:
    """x @ w.T (+b) for a dense weight, or a quantized one (macaronic.engine.quant.QuantLinear)."""
    return F.linear(x, w, b) if isinstance(w, Tensor) else w(x)


def rope_tables(args: ModelArgs, length: int) -> tuple[Tensor, Tensor]:
    inv = 1.0 / (args.rope_theta ** (torch.arange(0, args.head_dim, 2, dtype=torch.float32) / args.head_dim))
    freqs = torch.outer(torch.arange(length, dtype=torch.float32), inv)  # [T, hd/2]
    emb = torch.cat([freqs, freqs], dim=-1)  # [T, hd]
    return emb.cos(), emb.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # x: [N, H, hd]; cos/sin: [N, 1, hd] (rotate-half layout, as in Hugging Face checkpoints)
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos + rot * sin).to(x.dtype)


class Block(nn.Module):
    def __init__(self, args: ModelArgs, dtype: torch.dtype):
        super().__init__()
        q, kv = args.n_heads * args.head_dim, args.n_kv_heads * args.head_dim
        p = lambda *shape: nn.Parameter(torch.empty(*shape, dtype=dtype), requires_grad=False)  # noqa: E731
        self.attn_norm = p(args.dim)
        self.wqkv = p(q + 2 * kv, args.dim)  # fused q, k, v
        self.bqkv = p(q + 2 * kv) if args.qkv_bias else None
        self.q_norm = p(args.head_dim) if args.qk_norm else None
        self.k_norm = p(args.head_dim) if args.qk_norm else None
        self.wo = p(args.dim, q)
        self.ffn_norm = p(args.dim)
        self.w13 = p(2 * args.intermediate_size, args.dim)  # fused gate, up
        self.w2 = p(args.dim, args.intermediate_size)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.args, self.dtype = args, dtype
        self.embed = nn.Parameter(torch.empty(args.vocab_size, args.dim, dtype=dtype), requires_grad=False)
        self.layers = nn.ModuleList(Block(args, dtype) for _ in range(args.n_layers))
        self.norm = nn.Parameter(torch.empty(args.dim, dtype=dtype), requires_grad=False)
        self.lm_head = (
            self.embed
            if args.tie_embeddings
            else nn.Parameter(torch.empty(args.vocab_size, args.dim, dtype=dtype), requires_grad=False)
        )
        self._cos, self._sin = rope_tables(args, min(args.max_seq_len, 1 << 16))
        self.quant = "none"  # or "int8" / "int4" after macaronic.engine.quant.quantize
        self.fused_decode = True  # decode steps in one native call where they can (False: the layer loop)
        self._decode_w = None  # decode_layers' weight list, built on first use (after quantize)

    # ---- weights in Hugging Face names (loading, fingerprint) ----

    def hf_tensors(self) -> Iterator[tuple[str, Tensor]]:
        """The base tensors under their Hugging Face names, as views into the fused buffers."""
        a = self.args
        if self.quant != "none":
            raise ValueError(f"the base weights are {self.quant}-quantized; their original tensors are gone")
        q, kv, inter = a.n_heads * a.head_dim, a.n_kv_heads * a.head_dim, a.intermediate_size
        yield "model.embed_tokens.weight", self.embed
        for i, b in enumerate(self.layers):
            pre = f"model.layers.{i}."
            yield pre + "input_layernorm.weight", b.attn_norm
            yield pre + "self_attn.q_proj.weight", b.wqkv[:q]
            yield pre + "self_attn.k_proj.weight", b.wqkv[q : q + kv]
            yield pre + "self_attn.v_proj.weight", b.wqkv[q + kv :]
            if b.bqkv is not None:
                yield pre + "self_attn.q_proj.bias", b.bqkv[:q]
                yield pre + "self_attn.k_proj.bias", b.bqkv[q : q + kv]
                yield pre + "self_attn.v_proj.bias", b.bqkv[q + kv :]
            if b.q_norm is not None:
                yield pre + "self_attn.q_norm.weight", b.q_norm
                yield pre + "self_attn.k_norm.weight", b.k_norm
            yield pre + "self_attn.o_proj.weight", b.wo
            yield pre + "post_attention_layernorm.weight", b.ffn_norm
            yield pre + "mlp.gate_proj.weight", b.w13[:inter]
            yield pre + "mlp.up_proj.weight", b.w13[inter:]
            yield pre + "mlp.down_proj.weight", b.w2
        yield "model.norm.weight", self.norm
        if not a.tie_embeddings:
            yield "lm_head.weight", self.lm_head

    @torch.no_grad()
    def load_hf_state(self, state: dict[str, Tensor]) -> None:
        """Copy a Hugging Face state dict in; every expected tensor must be present with its shape."""
        problems = []
        for name, dst in self.hf_tensors():
            src = state.get(name)
            if src is None:
                problems.append(f"missing tensor {name}")
            elif tuple(src.shape) != tuple(dst.shape):
                problems.append(f"{name}: shape {tuple(src.shape)} != expected {tuple(dst.shape)}")
            else:
                dst.copy_(src.to(self.dtype))
        if problems:
            raise ValueError("base weights do not match the config:\n  " + "\n  ".join(problems))

    # ---- entry points by job (decode, recompute, score), over one layer loop ----

    def _proj(self, x: Tensor, w: Tensor, b: Tensor | None, layer: int, fused: str, lora, slots) -> Tensor:
        """x @ w.T (+b) plus the LoRA delta of the fused projection `fused` (all its targets)."""
        if lora is not None and hasattr(lora, "linear"):  # the bank: base matmul and delta in one native call
            return lora.linear(x, w, b, layer, fused, slots)
        y = linear(x, w, b)
        if lora is not None:
            lora.add_delta(y, layer, fused, x, slots)
        return y

    def decode(
        self,
        tokens: Tensor,
        seqs: list[SeqSlice],
        lora: LoraDelta | None = None,
        slots: Tensor | None = None,
        logits: str = "last",
    ) -> Tensor:
        """Run the new tokens of `seqs` (concatenated in `tokens: [N]`), append their K/V and
        return logits: "last" one row per sequence [B, V], "all" [N, V], or "none" (empty).
        A prompt chunk and a decode step are the same job; one new token per sequence takes
        the fused native step where it applies.

        `slots` gives each token's LoRA slot (0 = base), in the form `lora` takes (a SlotPlan for
        the bank, a [N] tensor for the reference). A buffer's `resid` layers are written as they pass.
        """
        x = self._layers(self.embed[tokens], seqs, lora, slots)  # x: [N, D]
        return self._head(x, seqs, logits)

    def recompute(
        self,
        resid: Tensor,
        seqs: list[SeqSlice],
        first_layer: int,
        lora: LoraDelta | None = None,
        slots: Tensor | None = None,
        logits: str = "none",
    ) -> Tensor:
        """Upper mode: the new tokens of `seqs` enter `first_layer` with the residual stream
        `resid: [N, D]` (kept by a base forward); layers below are skipped and their K/V must
        already be in the buffers. Returns logits as `decode` does (default none)."""
        a, n = self.args, sum(s.n_new for s in seqs)
        if not 0 < first_layer <= a.n_layers or resid.shape != (n, a.dim):
            raise ValueError(f"first_layer {first_layer} needs resid [N={n}, D={a.dim}]")
        x = self._layers(resid.to(self.dtype), seqs, lora, slots, first=first_layer)
        return self._head(x, seqs, logits)

    def score(
        self,
        tokens: Tensor,
        seqs: list[SeqSlice],
        lora: LoraDelta | None = None,
        slots: Tensor | None = None,
        last_layer: int | None = None,
    ) -> Tensor:
        """The router's features: the final-norm hidden states [N, D] of the new tokens (their
        K/V appended as `decode` does). With `last_layer` < n_layers, an early exit: the residual
        stream entering that layer [N, D], no final norm, and no K/V written from there on."""
        a = self.args
        if last_layer is not None and not 0 < last_layer <= a.n_layers:
            raise ValueError(f"last_layer {last_layer} needs 0 < last_layer <= {a.n_layers}")
        x = self._layers(self.embed[tokens], seqs, lora, slots, last=last_layer)
        if last_layer is not None and last_layer < a.n_layers:
            return x
        return rms_norm(x, self.norm, a.norm_eps)

    def forward(self, tokens: Tensor, seqs: list[SeqSlice], lora: LoraDelta | None = None,
                slots: Tensor | None = None, logits: str = "last") -> Tensor:
        """`model(tokens, seqs)` is `decode` (nn.Module's call); the other jobs are named."""
        return self.decode(tokens, seqs, lora, slots, logits)

    def _head(self, x: Tensor, seqs: list[SeqSlice], logits: str) -> Tensor:
        """Final norm and the logits `logits` asks for (see `decode`)."""
        if logits == "none":
            return x[:0]
        x = rms_norm(x, self.norm, self.args.norm_eps)
        if logits == "last":
            ends = torch.tensor([s.n_new for s in seqs]).cumsum(0) - 1
            x = x[ends]
        return linear(x, self.lm_head)

    def _layers(
        self, x: Tensor, seqs: list[SeqSlice], lora, slots, first: int = 0, last: int | None = None
    ) -> Tensor:
        """The layer loop: layers first..last-1 (last None: all) over the residual stream
        x: [N, D] of the new tokens of `seqs`; appends their K/V and advances the buffers."""
        a = self.args
        q_w, kv_w = a.n_heads * a.head_dim, a.n_kv_heads * a.head_dim
        if slots is None:
            lora = None
        positions = torch.cat([torch.arange(s.kv.length, s.kv.length + s.n_new) for s in seqs])
        if int(positions[-1]) >= self._cos.shape[0] if len(positions) else False:
            raise ValueError("sequence longer than the rotary table")
        # cos/sin: [N, 1, hd], in fp32 for fp32 models (exact), else in the model's dtype
        rope_dtype = torch.float32 if self.dtype == torch.float32 else self.dtype
        cos, sin = self._cos[positions, None].to(rope_dtype), self._sin[positions, None].to(rope_dtype)
        keep = {li for s in seqs for li in s.kv.resid}
        fused = None
        if not first and last is None and not keep and len(x) == len(seqs):
            fused = self._fused_decode(x, seqs, cos, sin, lora, slots)
        pooled = _pooled_decode(seqs) if fused is None else None
        for li, blk in enumerate(self.layers if fused is None else ()):
            if li < first:
                continue
            if last is not None and li >= last:
                break
            if li in keep:
                self._keep_residual(li, x, seqs)
            h = rms_norm(x, blk.attn_norm, a.norm_eps)
            qkv = self._proj(h, blk.wqkv, blk.bqkv, li, "qkv", lora, slots)
            v = qkv[:, q_w + kv_w :].view(-1, a.n_kv_heads, a.head_dim)
            if blk.q_norm is not None:
                q = qkv[:, :q_w].view(-1, a.n_heads, a.head_dim)  # [N, H, hd]
                k = qkv[:, q_w : q_w + kv_w].view(-1, a.n_kv_heads, a.head_dim)
                q, k = rms_norm(q, blk.q_norm, a.norm_eps), rms_norm(k, blk.k_norm, a.norm_eps)
                q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            else:  # q and k side by side: one rotary pass over [N, H + KV, hd]
                qk = apply_rope(qkv[:, : q_w + kv_w].view(-1, a.n_heads + a.n_kv_heads, a.head_dim), cos, sin)
                q, k = qk[:, : a.n_heads], qk[:, a.n_heads :]
            attn = self._attention(li, q, k, v, seqs) if pooled is None else self._pooled_attention(li, q, k, v, pooled)
            x = x + self._proj(attn, blk.wo, None, li, "o", lora, slots)
            h = rms_norm(x, blk.ffn_norm, a.norm_eps)
            gu = self._proj(h, blk.w13, None, li, "gate_up", lora, slots)
            act = F.silu(gu[:, : a.intermediate_size]) * gu[:, a.intermediate_size :]
            x = x + self._proj(act, blk.w2, None, li, "down", lora, slots)
        if fused is not None:
            x = fused
        for s in seqs:
            s.kv.length += s.n_new
        return x

    def _fused_decode(self, x: Tensor, seqs: list[SeqSlice], cos: Tensor, sin: Tensor, lora, slots) -> Tensor | None:
        """Every layer of a decode step (one new token per sequence) in one native call
        (csrc/decode.cpp), or None where it does not apply: then the layer loop below, its
        reference twin, runs. Applies to bf16 models whose projections are dense, native int4 or the
        GGUF's blocks on the native kernels,
        without q/k norms, with no LoRA or the bank's native kernel."""
        if not self.fused_decode or self.dtype != torch.bfloat16 or any(s.n_new != 1 for s in seqs):
            return None
        args = self._decode_weights()
        if args is None:
            return None
        ops, w, gparts, gtypes = args
        if lora is None:
            lw, ls = [], [_NO_SLOTS] * 4
        else:
            got = lora.native_decode_args(slots) if hasattr(lora, "native_decode_args") else None
            if got is None:
                return None
            lw, ls = got
        for s in seqs:
            if s.kv.length + 1 > s.kv.capacity:
                raise ValueError(f"KV buffer overflow: {s.kv.length + 1} > capacity {s.kv.capacity}")
        a = self.args
        return ops.decode_layers(x, w, lw, ls, [s.kv.k for s in seqs], [s.kv.v for s in seqs],
                                 [s.kv.length for s in seqs], cos[:, 0].contiguous(), sin[:, 0].contiguous(),
                                 _N_TARGETS, a.n_heads, a.n_kv_heads, a.norm_eps, gparts, gtypes,
                                 getattr(self, "int4_path", 0))

    def _decode_weights(self):
        """(native ops, the flat weight list decode_layers takes, the GGUF parts and their types), built
        once; None where a projection is neither dense bf16, native int4 nor the GGUF's blocks on the
        native kernels, or the kernels do not run here."""
        if self._decode_w is None:
            from macaronic.engine import native as native_mod

            ops, none = native_mod.ops(), torch.empty(0, dtype=self.dtype)
            a = self.args
            ok = (ops is not None and hasattr(ops, "decode_layers") and self.layers[0].q_norm is None
                  and a.dim % 16 == 0 and a.head_dim % 16 == 0 and a.head_dim <= 256)
            w: list[Tensor] = []
            gparts: list[Tensor] = []
            gtypes: list[int] = []

            def proj(m, bias=None) -> tuple[Tensor, Tensor, Tensor]:  # weight, scales (empty: dense), bias
                nonlocal ok
                if isinstance(m, Tensor):
                    return m, none, none if bias is None else bias
                if ops is not None and getattr(m, "native", None) is ops and not m.rescore:
                    return m.packed[0], m.packed[1], none if m.bias is None else m.bias
                if ops is not None and getattr(m, "kind", None) == "gguf" and m.ops is ops:
                    at = torch.tensor([len(gparts), len(m.parts)], dtype=torch.int64)  # GGUF: [first part, count]
                    gparts.extend(m.parts)
                    gtypes.extend(m.types)
                    return none, at, none if m.bias is None else m.bias
                ok = False
                return none, none, none

            for blk in self.layers:  # 11 per layer, in decode.cpp's order
                w += [blk.attn_norm, *proj(blk.wqkv, blk.bqkv), *proj(blk.wo)[:2], blk.ffn_norm,
                      *proj(blk.w13)[:2], *proj(blk.w2)[:2]]
            self._decode_w = (ops, w, gparts, gtypes) if ok else False
        return self._decode_w or None

    @staticmethod
    def _keep_residual(layer: int, x: Tensor, seqs: list[SeqSlice]) -> None:
        """Store the residual entering `layer` for the sequences whose buffer keeps it."""
        off = 0
        for s in seqs:
            r = s.kv.resid.get(layer)
            if r is not None:
                r[s.kv.length : s.kv.length + s.n_new] = x[off : off + s.n_new]
            off += s.n_new

    def _pooled_attention(self, layer: int, q: Tensor, k: Tensor, v: Tensor, p: "_PooledStep") -> Tensor:
        """One new token per sequence, all in one KVPool: one store and one attention call."""
        a = self.args
        pk, pv = p.pool.k[layer], p.pool.v[layer]  # [rows, n_kv, cap, hd]
        pk[p.rows, :, p.pos] = k  # k: [B, n_kv, hd]
        pv[p.rows, :, p.pos] = v
        qf = q.new_zeros(p.n_rows, a.n_heads, 1, a.head_dim)
        qf[p.rows] = q[:, :, None]
        o = F.scaled_dot_product_attention(
            qf, pk[: p.n_rows, :, : p.span], pv[: p.n_rows, :, : p.span], attn_mask=p.mask,
            enable_gqa=a.n_heads != a.n_kv_heads,
        )  # [rows, H, 1, hd]
        return o[p.rows].reshape(len(p.rows), a.n_heads * a.head_dim)

    def _attention(self, layer: int, q: Tensor, k: Tensor, v: Tensor, seqs: list[SeqSlice]) -> Tensor:
        a = self.args
        out, off = [], 0
        for s in seqs:
            n, start = s.n_new, s.kv.length
            end = start + n
            if end > s.kv.capacity:
                raise ValueError(f"KV buffer overflow: {end} > capacity {s.kv.capacity}")
            s.kv.k[layer, :, start:end] = k[off : off + n].transpose(0, 1)
            s.kv.v[layer, :, start:end] = v[off : off + n].transpose(0, 1)
            qs = q[off : off + n].transpose(0, 1).unsqueeze(0)  # [1, H, n, hd]
            ks = s.kv.k[layer, :, :end].unsqueeze(0)  # [1, n_kv, end, hd]
            vs = s.kv.v[layer, :, :end].unsqueeze(0)
            if n == 1:
                mask = None
            elif start == 0:
                mask = "causal"
            else:  # new tokens see the cached prefix and causally each other
                mask = torch.ones(n, end, dtype=torch.bool).tril(diagonal=start)
            o = F.scaled_dot_product_attention(
                qs,
                ks,
                vs,
                attn_mask=None if mask in (None, "causal") else mask,
                is_causal=mask == "causal",
                enable_gqa=a.n_heads != a.n_kv_heads,
            )
            out.append(o[0].transpose(0, 1).reshape(n, a.n_heads * a.head_dim))
            off += n
        return torch.cat(out) if len(out) > 1 else out[0]
