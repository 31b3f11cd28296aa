"""K/V memory: one sequence's preallocated buffer (`KVBuffer`) and the pool of rows that decoding
sequences share (`KVPool`, grown by doubling, dropped when empty).

Knows shapes and dtypes only: nothing about the decoder's math, prefix reuse (`engine/kvcache.py`)
or scheduling (`engine/engine.py`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from macaronic.engine.config import ModelArgs


class KVBuffer:
    """Preallocated K/V for one sequence: k, v: [L, n_kv, capacity, head_dim].

    Either its own tensors, or a view of one row of a KVPool (`pool`, `row` set), which lets a
    decode step attend for all pooled sequences in one call.
    """

    def __init__(self, args: ModelArgs, capacity: int, dtype: torch.dtype, _alloc: bool = True):
        shape = (args.n_layers, args.n_kv_heads, capacity, args.head_dim)
        self.k = torch.empty(shape, dtype=dtype) if _alloc else None
        self.v = torch.empty(shape, dtype=dtype) if _alloc else None
        self.length = 0
        self.limit = capacity
        self.pool: KVPool | None = None
        self.row = -1

    @property
    def capacity(self) -> int:
        return self.limit

    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def compact(self, args: ModelArgs) -> "KVBuffer":
        """A standalone copy of the first `length` positions (for the prefix cache)."""
        out = KVBuffer(args, self.length, self.k.dtype)
        out.k.copy_(self.k[:, :, : self.length])
        out.v.copy_(self.v[:, :, : self.length])
        out.length = self.length
        return out


class KVPool:
    """K/V rows for the sequences being decoded: k, v: [L, rows, n_kv, cap, head_dim].

    A decode step over pooled sequences writes every new K/V with one indexed store and attends
    with one call (per layer) instead of one per sequence. Rows and capacity grow by doubling
    (live rows are copied over); the pool is dropped when no row is live. Sequences longer than
    `max_cap` get standalone buffers, so one long prompt does not pad every row to its length.
    """

    def __init__(self, args: ModelArgs, dtype: torch.dtype, max_cap: int = 1024):
        self.args, self.dtype, self.max_cap = args, dtype, max_cap
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.live: dict[int, KVBuffer] = {}

    def fits(self, capacity: int) -> bool:
        return capacity <= self.max_cap

    def alloc(self, capacity: int) -> KVBuffer:
        rows = 0 if self.k is None else self.k.shape[1]
        cap = 0 if self.k is None else self.k.shape[3]
        row = next(r for r in range(rows + 1) if r not in self.live)
        if row >= rows or capacity > cap:
            self._grow(max(rows, _pow2(row + 1, 4)), max(cap, _pow2(capacity, 256)))
        kv = KVBuffer(self.args, capacity, self.dtype, _alloc=False)
        kv.pool, kv.row = self, row
        kv.k, kv.v = self.k[:, row], self.v[:, row]
        self.live[row] = kv
        return kv

    def release(self, kv: KVBuffer) -> None:
        if kv.pool is self and self.live.get(kv.row) is kv:
            del self.live[kv.row]
            kv.pool = None
        if not self.live:
            self.k = self.v = None

    def _grow(self, rows: int, cap: int) -> None:
        a = self.args
        shape = (a.n_layers, rows, a.n_kv_heads, cap, a.head_dim)
        # zeros, not empty: masked positions still enter the attention's weighted sum as 0 * V, and
        # uninitialized memory can hold NaN bit patterns
        k, v = torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype)
        for row, kv in self.live.items():
            k[:, row, :, : kv.length] = kv.k[:, :, : kv.length]
            v[:, row, :, : kv.length] = kv.v[:, :, : kv.length]
            kv.k, kv.v = k[:, row], v[:, row]
        self.k, self.v = k, v


def _pow2(n: int, floor: int) -> int:
    return max(floor, 1 << (max(n, 1) - 1).bit_length())
