"""Multi-LoRA slot buffers and the adapter registry.

The bank holds, per fused projection of the model (config.FUSED: qkv, o, gate_up, down),
A: [L, S, n_t * r_max, d_in] with the n_t targets stacked (targets sharing an input share one
shrink matmul) and one Bt: [L, S, r_max, width] per target (B transposed, its own output columns
only). r_max is the widest registered adapter's rank (up to the engine's max_rank); slot 0 is
all zeros for "no adapter"; a forward passes one slot index per token. LoRA work is grouped by
the adapters present in the batch, never by the resident slots: a decode step runs one masked
shrink and one expand per target over the present slots' stack (or, with the native kernels, one
fused call per projection: csrc/lora.cpp); a prefill runs one shrink and expand per present adapter
over its tokens. The registry maps names to validated adapters (up to
`max_registered`) and keeps an LRU of resident slots; an adapter is registered only after it
loaded and validated, so a bad one leaves it unchanged. Knows nothing about scheduling or tokens.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from macaronic.engine import native as native_mod
from macaronic.engine.adapters import AdapterError, AdapterInfo, check_name, load_pairs, read_adapter
from macaronic.engine.config import FUSED, FUSED_OF, ModelArgs
from macaronic.engine.errors import OVERLOADED, EngineError

STACKED_MAX_TOKENS = 64  # up to this many tokens (decode): one masked matmul over the present slots
AUTO = object()  # LoraBank(native=AUTO): the native fused kernel where it builds and runs


@dataclass
class SlotPlan:
    """Per-forward view of the token slots, computed once and reused by every projection."""

    slots: Tensor  # [N] long
    used: tuple[int, ...]  # slots != 0 present in the batch, ascending
    groups: list[tuple[int, Tensor | slice]]  # (slot, token index or contiguous slice) per used slot
    mask: Tensor | None  # [N, P, 1]: 1 where used[p] is the token's slot (few tokens only)
    stack: "_Stack | None"  # the used slots' weights as one stack (few tokens only)
    fused: frozenset = frozenset()  # fused projections some used slot has weights for
    native_slots: dict = field(default_factory=dict)  # fused -> slots with 0 where a slot lacks it (kernel)


@dataclass
class _Stack:
    """The used slots' rows, one stack per fused projection: views into the bank when the used
    slots are contiguous, else a compact copy (cached while the used set and the bank stay put)."""

    A: dict[str, Tensor]  # fused -> [L, P * rows, d_in]
    B: dict[str, list[Tensor]]  # fused -> per target [L, P * r_max, width]


def int8_rows(A: Tensor, B: Tensor) -> tuple[Tensor, Tensor]:
    """One adapter target's (A [r, d_in], scaled B [w, r]) as (A', Bt_q [r, w] int8) with
    B @ A == Bt_q.T @ A' up to int8 rounding: each Bt row j is quantized with its own absmax scale
    s_j and A's row j is multiplied by s_j (a LoRA pair is unchanged by B diag(s), diag(1/s) A), so
    the scales cost no storage and no kernel work."""
    Bt = B.T.float()
    s = Bt.abs().amax(1).clamp_min(1e-30) / 127.0
    q = torch.round(Bt / s[:, None]).clamp_(-127, 127).to(torch.int8)
    return A.float() * s[:, None], q


def bank_int8_b(model, native=AUTO) -> bool:
    """Whether the bank keeps B as int8 rows (int8_rows): for an int4 model on the native kernel,
    whose weights are already 4-bit; a quarter fewer adapter bytes per decode step (docs/LOG.md)."""
    return getattr(model, "quant", "none") == "int4" and bank_dtype(model.dtype, native) == torch.bfloat16


def bank_dtype(model_dtype: torch.dtype, native=AUTO) -> torch.dtype:
    """The slot buffers' dtype for a model: bf16 for a bf16 model when the fused native kernel runs
    (a decode step reads half the adapter bytes), else fp32 (PyTorch's small bf16 matmuls cost more
    than fp32 ones here, docs/LOG.md)."""
    if model_dtype != torch.bfloat16:
        return torch.float32
    return torch.bfloat16 if (native_mod.ops() if native is AUTO else native) is not None else torch.float32


class LoraBank:
    """Slot buffers; `add_delta` is the fast path, ReferenceLora its obviously-correct twin.

    A[f]: [L, S, n_t * r_max, d_in] (targets of a fused projection stacked, so they share one
    shrink matmul) and, per target, Bt[f][t]: [L, S, r_max, width_t] (each target expands into its
    own output columns only: no zero blocks are read). `dtype` is the bank's (bank_dtype); with
    `int8_b` (bf16 bank on the native kernel) the Bt are int8 rows whose scales live in A (int8_rows).
    """

    def __init__(self, args: ModelArgs, n_slots: int, r_max: int, dtype: torch.dtype = torch.float32, native=AUTO,
                 int8_b: bool = False):
        self.args, self.n_slots, self.r_max, self.dtype = args, n_slots, r_max, dtype
        self.int8_b = int8_b
        b_dtype = torch.int8 if int8_b else dtype
        self.A: dict[str, Tensor] = {}
        self.Bt: dict[str, list[Tensor]] = {}
        self.columns: dict[str, tuple[int, int]] = {}  # target -> (first output column, width)
        for f, targets in FUSED.items():
            d_in, off = args.target_shape(targets[0])[0], 0
            for t in targets:
                self.columns[t] = (off, args.target_shape(t)[1])
                off += args.target_shape(t)[1]
            self.A[f] = torch.zeros(args.n_layers, n_slots, len(targets) * r_max, d_in, dtype=dtype)
            self.Bt[f] = [torch.zeros(args.n_layers, n_slots, r_max, self.columns[t][1], dtype=b_dtype) for t in targets]
        self.present: list[set[str]] = [set() for _ in range(n_slots)]  # fused projections with weights
        self.version = [0] * n_slots  # bumped on every write/clear of a slot (stack cache key)
        self._stack_key: tuple | None = None
        self._stack: _Stack | None = None
        self._views: dict[str, list] = {}  # fused -> per layer (A view, [B views]): the kernel's arguments
        self._flat: list[Tensor] | None = None  # every layer's views in one list: the decode step's arguments
        # the fused decode kernel reads the fp32 bank directly; inputs must be multiples of 16 wide
        fits = dtype in (torch.float32, torch.bfloat16) and all(a.shape[-1] % 16 == 0 for a in self.A.values())
        self.native = (native_mod.ops() if native is AUTO else native) if fits else None
        if int8_b and (self.native is None or dtype != torch.bfloat16):
            raise ValueError("int8 B rows need a bf16 bank on the native kernel")

    @torch.no_grad()
    def ensure_rank(self, r: int) -> None:
        """Widen every slot's rank to `r` (zero rows), keeping resident adapters. The decode path
        reads all r_max rows of each slot, so the bank is only as wide as its widest adapter."""
        if r <= self.r_max:
            return
        for f, old in self.A.items():
            new = old.new_zeros(old.shape[0], old.shape[1], len(FUSED[f]) * r, old.shape[3])
            for i in range(len(FUSED[f])):
                new[:, :, i * r : i * r + self.r_max] = old[:, :, i * self.r_max : (i + 1) * self.r_max]
            self.A[f] = new
        for f, olds in self.Bt.items():
            news = [o.new_zeros(o.shape[0], o.shape[1], r, o.shape[3]) for o in olds]
            for new, o in zip(news, olds):
                new[:, :, : self.r_max] = o
            self.Bt[f] = news
        self.r_max = r
        self._stack_key = self._stack = None
        self._views, self._flat = {}, None

    def nbytes_per_slot(self) -> int:
        return sum(a[:, 0].nbytes + sum(b[:, 0].nbytes for b in bs) for a, bs in zip(self.A.values(), self.Bt.values()))

    @torch.no_grad()
    def write(self, slot: int, pairs: dict[tuple[int, str], tuple[Tensor, Tensor]]) -> None:
        """Copy an adapter's (A, scaled B) into a slot, zero-padding its rank to r_max."""
        assert 0 < slot < self.n_slots, "slot 0 is the fixed no-adapter slot"
        self.clear(slot)
        for (layer, target), (A, B) in pairs.items():
            r = A.shape[0]
            if r > self.r_max:
                raise AdapterError(f"rank {r} exceeds the bank's r_max {self.r_max}")
            f = FUSED_OF[target]
            i = FUSED[f].index(target)
            A, Bt = int8_rows(A, B) if self.int8_b else (A, B.T)
            self.A[f][layer, slot, i * self.r_max : i * self.r_max + r] = A
            self.Bt[f][i][layer, slot, :r] = Bt
            self.present[slot].add(f)
        self.version[slot] += 1

    @torch.no_grad()
    def clear(self, slot: int) -> None:
        for f in self.present[slot]:
            self.A[f][:, slot].zero_()
            for b in self.Bt[f]:
                b[:, slot].zero_()
        self.present[slot] = set()
        self.version[slot] += 1

    def plan(self, slots: Tensor) -> SlotPlan:
        # on Python ints: a decode step's handful of tokens costs a few µs, not a dozen tensor ops
        n, ids = slots.shape[0], slots.tolist()
        used = tuple(sorted(set(ids) - {0}))  # ascending
        at: dict[int, list[int]] = {s: [] for s in used}
        for i, s in enumerate(ids):
            if s:
                at[s].append(i)
        groups: list[tuple[int, Tensor | slice]] = []
        for s in used:
            idx = at[s]
            lo, hi = idx[0], idx[-1] + 1
            groups.append((s, slice(lo, hi) if hi - lo == len(idx) else torch.tensor(idx)))
        mask = stack = None
        fast = bool(used) and n <= STACKED_MAX_TOKENS
        if fast and self.native is None:
            mask = (slots[:, None] == torch.tensor(used)[None, :]).to(self.dtype)[:, :, None]  # [N, P, 1]
            stack = self._stack_of(used)
        fused = frozenset().union(*(self.present[s] for s in used))
        native_slots = {}
        if self.native is not None and fast:  # per projection, once per forward
            for f in fused:
                keep = {s for s in used if f in self.present[s]}
                native_slots[f] = slots if len(keep) == len(used) else torch.tensor([s if s in keep else 0 for s in ids])
        return SlotPlan(slots=slots, used=used, groups=groups, mask=mask, stack=stack, fused=fused,
                        native_slots=native_slots)

    def native_decode_args(self, plan: SlotPlan) -> tuple[list[Tensor], list[Tensor]] | None:
        """What csrc/decode.cpp's decode_layers takes for this plan: every layer's A and Bs per
        fused projection (in config.FUSED order, built once), and per projection its slots (empty
        where no present adapter has weights for it); None where the native kernel does not run it."""
        if self.native is None or (plan.fused and not plan.native_slots):
            return None
        if self._flat is None:  # the per-layer views `linear` and `add_delta` use, laid end to end
            views = {f: self._layer_views(f) for f in FUSED}
            self._flat = [t for li in range(self.args.n_layers) for f in FUSED for t in (views[f][li][0], *views[f][li][1])]
        none = plan.slots.new_empty(0)
        return self._flat, [plan.native_slots.get(f, none) for f in FUSED]

    def _layer_views(self, fused: str) -> list:
        v = self._views.get(fused)
        if v is None:
            v = self._views[fused] = [(self.A[fused][li], [b[li] for b in self.Bt[fused]])
                                      for li in range(self.args.n_layers)]
        return v

    def _stack_of(self, used: tuple[int, ...]) -> _Stack:
        """The used slots as one stack: bank views if contiguous, else a compact copy, kept until
        the used set or one of its slots changes (decode steps reuse it)."""
        lo, hi = used[0], used[-1] + 1
        if hi - lo == len(used):
            return _Stack(A={f: a[:, lo:hi].flatten(1, 2) for f, a in self.A.items()},
                          B={f: [b[:, lo:hi].flatten(1, 2) for b in bs] for f, bs in self.Bt.items()})
        key = (used, tuple(self.version[s] for s in used))
        if key != self._stack_key:
            idx = torch.tensor(used)
            self._stack = _Stack(A={f: a.index_select(1, idx).flatten(1, 2) for f, a in self.A.items()},
                                 B={f: [b.index_select(1, idx).flatten(1, 2) for b in bs] for f, bs in self.Bt.items()})
            self._stack_key = key
        return self._stack

    def linear(self, x: Tensor, w, b: Tensor | None, layer: int, fused: str, plan: SlotPlan) -> Tensor:
        """x @ w.T (+b) plus the delta, as `linear` then `add_delta`; with the native kernel, a dense
        or native-int4 base matmul and its delta are one call (the per-call dispatch was a third of
        the decode step's LoRA cost, docs/LOG.md)."""
        if fused in plan.fused and plan.native_slots:
            a, bs = self._layer_views(fused)[layer]
            s = plan.native_slots[fused]
            if isinstance(w, Tensor):
                return self.native.dense_lora(x.contiguous(), w, b, a, bs, s)
            if getattr(w, "native", None) is self.native and not w.rescore:  # an int4 QuantLinear on this kernel
                return self.native.int4_linear_lora(x.to(torch.bfloat16).contiguous(), w.packed[0], w.packed[1],
                                                    w.bias, a, bs, s, w.path)
        y = F.linear(x, w, b) if isinstance(w, Tensor) else w(x)
        self.add_delta(y, layer, fused, x, plan)
        return y

    def add_delta(self, y: Tensor, layer: int, fused: str, x: Tensor, plan: SlotPlan) -> None:
        """y += the LoRA delta of projection `fused` for each token's slot (y: [N, d_out], in place)."""
        if fused not in plan.fused:
            return
        if plan.native_slots and y.is_contiguous():  # a slot without weights for this projection adds nothing
            a, bs = self._layer_views(fused)[layer]
            self.native.lora_delta(y, x.contiguous(), a, bs, plan.native_slots[fused])
            return
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        n_t, r = len(FUSED[fused]), self.r_max
        cols = [self.columns[t] for t in FUSED[fused]]
        if plan.stack is not None:  # few tokens: one shrink over the present slots, masked, then expand
            p = len(plan.used)
            a = plan.stack.A[fused][layer]  # [P * n_t * r, d_in]
            xa = (x @ a.T).view(-1, p, n_t * r) * plan.mask  # [N, P, n_t * r], zero off the token's slot
            if n_t > 1:  # group the columns by target: [N, n_t, P * r]
                xa = xa.view(-1, p, n_t, r).transpose(1, 2).reshape(-1, n_t, p * r)
            else:
                xa = xa.view(-1, 1, p * r)
            for i, (c0, w) in enumerate(cols):
                _addmm(y[:, c0 : c0 + w], xa[:, i], plan.stack.B[fused][i][layer])  # [N, P*r] @ [P*r, w]
            return
        A, Bs = self.A[fused][layer], [b[layer] for b in self.Bt[fused]]  # [S, n_t*r, d_in], [S, r, w]
        for s, idx in plan.groups:  # many tokens (prefill): one shrink and expand per adapter present
            if fused not in self.present[s]:
                continue
            xa = x[idx] @ A[s].T  # [n_s, n_t * r]
            for i, (c0, w) in enumerate(cols):
                b = Bs[i][s] if not self.int8_b else Bs[i][s].to(xa.dtype)  # int8 rows: scales are in A
                if isinstance(idx, slice):
                    _addmm(y[idx, c0 : c0 + w], xa[:, i * r : (i + 1) * r], b)
                else:
                    d = xa[:, i * r : (i + 1) * r] @ b  # [n_s, w]
                    y[:, c0 : c0 + w].index_add_(0, idx, d.to(y.dtype))


def _addmm(out: Tensor, a: Tensor, b: Tensor) -> None:
    """out += a @ b in place, in out's dtype."""
    if out.dtype == a.dtype:
        out.addmm_(a, b)
    else:
        out.add_(a @ b)  # an fp32 product into bf16 y: the in-place add casts, no temporary


def _widened(A: Tensor, Bt_q: Tensor) -> tuple[Tensor, Tensor]:
    """int8_rows' output as a plain (A, B) pair again."""
    return A, Bt_q.T.float()


class ReferenceLora:
    """Slow twin of LoraBank.delta: a per-token loop over each adapter's own unpadded tensors
    (with `int8_b`, the pairs as an int8-row bank holds them: int8_rows)."""

    def __init__(self, adapters: dict[int, dict[tuple[int, str], tuple[Tensor, Tensor]]], args: ModelArgs,
                 int8_b: bool = False):
        if int8_b:
            adapters = {s: {k: _widened(*int8_rows(*p)) for k, p in pairs.items()} for s, pairs in adapters.items()}
        self.adapters, self.args = adapters, args  # slot -> {(layer, target): (A, B scaled)}

    def delta(self, layer: int, fused: str, x: Tensor, slots: Tensor) -> Tensor | None:
        widths = [self.args.target_shape(t)[1] for t in FUSED[fused]]
        out = x.new_zeros(x.shape[0], sum(widths))
        hit = False
        for n in range(x.shape[0]):
            col = 0
            for t, w in zip(FUSED[fused], widths):
                pair = self.adapters.get(int(slots[n]), {}).get((layer, t))
                if pair is not None:
                    A, B = pair
                    out[n, col : col + w] = B.to(x.dtype) @ (A.to(x.dtype) @ x[n])
                    hit = True
                col += w
        return out if hit else None

    def add_delta(self, y: Tensor, layer: int, fused: str, x: Tensor, slots: Tensor) -> None:
        d = self.delta(layer, fused, x, slots)
        if d is not None:
            y += d.to(y.dtype)


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
                slot = self._take_slot()  # first: with every slot pinned, a staged read stays staged
                try:
                    fut = self._staging.pop(name, None)
                    if pairs is None:
                        pairs = fut.result() if fut is not None else load_pairs(info, self.args)
                    self.bank.write(slot, pairs)
                except BaseException:
                    self.bank.clear(slot)
                    self._free.append(slot)
                    raise
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
        raise EngineError(
            OVERLOADED, f"all {self.bank.n_slots - 1} adapter slots are serving requests; raise max_loras or retry"
        )

    def _evict(self, name: str) -> None:
        slot = self._resident.pop(name, None)
        if slot is not None:
            self.bank.clear(slot)
            self._free.append(slot)
        self._staging.pop(name, None)
