"""Multi-LoRA slot buffers and the adapter registry.

The bank holds buffers per target, A: [L, S, r_max, d_in] and Bt: [L, S, r_max, d_out]
(B transposed, so a run of slots is one contiguous [k*r_max, d] matrix; r_max is the widest
registered adapter's rank, up to the engine's max_rank), slot 0 all zeros for
"no adapter"; a forward passes one slot index per token. The registry maps
names to validated adapters (up to `max_registered`) and keeps an LRU of resident slots; an
adapter is registered only after it loaded and validated, so a bad one leaves it unchanged.
Knows nothing about scheduling or tokens.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from macaronic.engine.adapters import AdapterError, AdapterInfo, check_name, load_pairs, read_adapter
from macaronic.engine.config import ModelArgs

STACKED_MAX_TOKENS = 64  # up to this many tokens (decode), one masked matmul over stacked slots


@dataclass
class SlotPlan:
    """Per-forward view of the token slots, computed once and reused by every projection."""

    slots: Tensor  # [N] long
    groups: list[tuple[int, Tensor | slice]]  # (slot, token index or contiguous slice), slot != 0
    top: int  # highest slot used
    mask: Tensor | None  # [N, top * r_max]: 1 where the column belongs to the token's slot (stacked path)
    targets: frozenset = frozenset()  # targets some used slot has weights for


class LoraBank:
    """Fixed slot buffers; `delta` is the fast path, `reference_delta` its obviously-correct twin."""

    def __init__(self, args: ModelArgs, n_slots: int, r_max: int, dtype: torch.dtype = torch.float32):
        from macaronic.engine.config import TARGETS

        self.args, self.n_slots, self.r_max, self.dtype = args, n_slots, r_max, dtype
        self.A: dict[str, Tensor] = {}
        self.Bt: dict[str, Tensor] = {}
        for t in TARGETS:
            d_in, d_out = args.target_shape(t)
            self.A[t] = torch.zeros(args.n_layers, n_slots, r_max, d_in, dtype=dtype)
            self.Bt[t] = torch.zeros(args.n_layers, n_slots, r_max, d_out, dtype=dtype)
        self.present: list[set[str]] = [set() for _ in range(n_slots)]  # targets with weights per slot

    @torch.no_grad()
    def ensure_rank(self, r: int) -> None:
        """Widen every slot's rank to `r` (zero rows), keeping resident adapters. The decode path
        reads all r_max rows of each slot, so the bank is only as wide as its widest adapter."""
        if r <= self.r_max:
            return
        for d in (self.A, self.Bt):
            for t, old in d.items():
                new = old.new_zeros(old.shape[0], old.shape[1], r, old.shape[3])
                new[:, :, : self.r_max] = old
                d[t] = new
        self.r_max = r

    def nbytes_per_slot(self) -> int:
        return sum(a[:, 0].nbytes + b[:, 0].nbytes for a, b in zip(self.A.values(), self.Bt.values()))

    @torch.no_grad()
    def write(self, slot: int, pairs: dict[tuple[int, str], tuple[Tensor, Tensor]]) -> None:
        """Copy an adapter's (A, scaled B) into a slot, zero-padding its rank to r_max."""
        assert 0 < slot < self.n_slots, "slot 0 is the fixed no-adapter slot"
        self.clear(slot)
        for (layer, target), (A, B) in pairs.items():
            r = A.shape[0]
            if r > self.r_max:
                raise AdapterError(f"rank {r} exceeds the bank's r_max {self.r_max}")
            self.A[target][layer, slot, :r] = A
            self.Bt[target][layer, slot, :r] = B.T
            self.present[slot].add(target)

    @torch.no_grad()
    def clear(self, slot: int) -> None:
        for t in self.present[slot]:
            self.A[t][:, slot].zero_()
            self.Bt[t][:, slot].zero_()
        self.present[slot] = set()

    def plan(self, slots: Tensor) -> SlotPlan:
        n = slots.shape[0]
        used = [int(s) for s in torch.unique(slots) if int(s) != 0]
        groups: list[tuple[int, Tensor | slice]] = []
        for s in used:
            idx = (slots == s).nonzero().squeeze(1)
            lo, hi = int(idx[0]), int(idx[-1]) + 1
            groups.append((s, slice(lo, hi) if hi - lo == idx.numel() else idx))
        top = max(used, default=0)
        mask = None
        if used and n <= STACKED_MAX_TOKENS:
            # column j of the stacked slots 1..top belongs to slot 1 + j // r_max
            col_slot = torch.arange(top * self.r_max) // self.r_max + 1
            mask = (col_slot[None, :] == slots[:, None]).to(self.dtype)  # [N, top * r]
        return SlotPlan(slots=slots, groups=groups, top=top, mask=mask,
                        targets=frozenset().union(*(self.present[s] for s in used)))

    def delta(self, layer: int, target: str, x: Tensor, plan: SlotPlan) -> Tensor | None:
        if target not in plan.targets:
            return None
        A, Bt = self.A[target][layer], self.Bt[target][layer]  # [S, r, d_in], [S, r, d_out]
        if x.dtype != self.dtype:  # a bf16 model keeps an fp32 bank: small fp32 matmuls are faster here
            return self.delta(layer, target, x.to(self.dtype), plan).to(x.dtype)
        if plan.mask is not None:  # few tokens: one masked matmul over the stacked slots 1..top
            k = plan.top * self.r_max
            a = A[1 : plan.top + 1].reshape(k, -1)  # [top*r, d_in], a view
            bt = Bt[1 : plan.top + 1].reshape(k, -1)  # [top*r, d_out]
            return ((x @ a.T) * plan.mask) @ bt  # [N, d_out]
        out = x.new_zeros(x.shape[0], Bt.shape[2])
        for s, idx in plan.groups:
            if target not in self.present[s]:
                continue
            d = (x[idx] @ A[s].T) @ Bt[s]  # [n_s, d_out]
            if isinstance(idx, slice):
                out[idx] = d
            else:
                out.index_copy_(0, idx, d)
        return out


class ReferenceLora:
    """Slow twin of LoraBank.delta: a per-token loop over each adapter's own unpadded tensors."""

    def __init__(self, adapters: dict[int, dict[tuple[int, str], tuple[Tensor, Tensor]]]):
        self.adapters = adapters  # slot -> {(layer, target): (A, B scaled)}

    def delta(self, layer: int, target: str, x: Tensor, slots: Tensor) -> Tensor | None:
        out = None
        for n in range(x.shape[0]):
            pair = self.adapters.get(int(slots[n]), {}).get((layer, target))
            if pair is None:
                continue
            A, B = pair
            if out is None:
                out = x.new_zeros(x.shape[0], B.shape[0])
            out[n] = B.to(x.dtype) @ (A.to(x.dtype) @ x[n])
        return out


class AdapterRegistry:
    """Registered adapters by name, and an LRU of the ones resident in bank slots."""

    def __init__(
        self,
        args: ModelArgs,
        bank: LoraBank,
        base_fingerprint: str | None = None,
        max_registered: int = 512,
        max_rank: int | None = None,
        forward_lock: threading.RLock | None = None,
    ):
        self.args, self.bank, self.base_fingerprint = args, bank, base_fingerprint
        self.max_registered = max_registered
        self.max_rank = max_rank or bank.r_max
        self._forward_lock = forward_lock or threading.RLock()  # held while the bank widens
        self._infos: dict[str, AdapterInfo] = {}
        self._resident: OrderedDict[str, int] = OrderedDict()  # name -> slot, LRU order
        self._pins: dict[int, int] = {}  # slot -> running requests using it
        self._free = list(range(bank.n_slots - 1, 0, -1))
        self._lock = threading.RLock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adapter-load")
        self._staging: dict[str, Future] = {}

    # ---- registration ----

    def register(self, path: str | Path, name: str | None = None) -> AdapterInfo:
        """Validate an adapter completely, then register it. On any error nothing changes."""
        name = check_name(name or Path(path).name)
        info, pairs = read_adapter(path, self.args, name=name, base_fingerprint=self.base_fingerprint)
        if info.rank > self.max_rank:
            raise AdapterError(f"adapter {name!r}: rank {info.rank} exceeds the engine's max rank {self.max_rank}")
        if info.rank > self.bank.r_max:
            with self._forward_lock, self._lock:  # no forward reads and no load writes the bank meanwhile
                self.bank.ensure_rank(info.rank)
        with self._lock:
            if name not in self._infos and len(self._infos) >= self.max_registered:
                raise AdapterError(f"cannot register {name!r}: {self.max_registered} adapters already registered")
            old = self._infos.get(name)
            if old is not None and old.id != info.id:
                if name in self._resident and self._pins.get(self._resident[name], 0):
                    raise AdapterError(f"cannot replace {name!r}: it is serving a request")
                self._evict(name)
            self._infos[name] = info
        return info

    def unregister(self, name: str) -> None:
        with self._lock:
            if name not in self._infos:
                raise KeyError(name)
            if name in self._resident and self._pins.get(self._resident[name], 0):
                raise AdapterError(f"cannot unregister {name!r}: it is serving a request")
            self._evict(name)
            del self._infos[name]

    def names(self) -> list[str]:
        return list(self._infos)

    def get(self, name: str) -> AdapterInfo:
        try:
            return self._infos[name]
        except KeyError:
            raise KeyError(f"unknown adapter {name!r}; registered: {sorted(self._infos)}") from None

    def infos(self) -> list[AdapterInfo]:
        return list(self._infos.values())

    def lora_pairs(self, name: str) -> dict[tuple[int, str], tuple[Tensor, Tensor]]:
        """The adapter's (A, scaled B) per (layer, target), read from disk."""
        info = self.get(name)
        return load_pairs(info, self.args)

    # ---- residency ----

    def is_resident(self, name: str) -> bool:
        return name in self._resident

    def stage(self, name: str) -> Future:
        """Start reading an adapter's tensors in a background thread (no slot touched)."""
        info = self.get(name)
        with self._lock:
            fut = self._staging.get(name)
            if fut is None:
                fut = self._pool.submit(load_pairs, info, self.args)
                self._staging[name] = fut
            return fut

    def acquire(self, name: str, pairs=None) -> int:
        """Pin the adapter in a slot and return the slot, loading it (from `pairs` if staged)."""
        with self._lock:
            info = self.get(name)
            slot = self._resident.get(name)
            if slot is None:
                if pairs is None:
                    fut = self._staging.pop(name, None)
                    pairs = fut.result() if fut is not None else load_pairs(info, self.args)
                else:
                    self._staging.pop(name, None)
                slot = self._take_slot()
                self.bank.write(slot, pairs)
                self._resident[name] = slot
            self._resident.move_to_end(name)
            self._pins[slot] = self._pins.get(slot, 0) + 1
            return slot

    def release(self, slot: int) -> None:
        with self._lock:
            if self._pins.get(slot, 0) > 0:
                self._pins[slot] -= 1

    def _take_slot(self) -> int:
        if self._free:
            return self._free.pop()
        for victim, slot in self._resident.items():  # least recently used first
            if not self._pins.get(slot, 0):
                del self._resident[victim]
                self.bank.clear(slot)
                return slot
        raise AdapterError(
            f"all {self.bank.n_slots - 1} adapter slots are serving requests; raise max_loras or retry"
        )

    def _evict(self, name: str) -> None:
        slot = self._resident.pop(name, None)
        if slot is not None:
            self.bank.clear(slot)
            self._free.append(slot)
        self._staging.pop(name, None)
