"""LoRA overhead at 16 mixed streams, per precision: the base alone, the bank with its fused native
kernel (engine/csrc/lora.cpp), the same bank on its PyTorch path (grouped), and the bank that one
replaced (stacked), side by side in one process.

One decode step of 16 sequences (4 adapters, 4 streams each) through the model, with the adapters
in contiguous slots (1-4) and scattered ones (1, 3, 5, 8 of 8: the old bank paid for every slot up
to the highest used). Each repetition runs the three variants back to back; the figures are medians
of the per-repetition ratios, in this thread's CPU time (a busy machine's preemption drops out) and
in wall time. `StackedLora` is the previous bank, kept here only as the benchmark's peer. Knows
nothing about scheduling, tokenizers or HTTP.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
from torch import Tensor

from macaronic.engine.adapters import read_adapter
from macaronic.engine.config import FUSED, FUSED_OF
from macaronic.engine.kvpool import KVPool
from macaronic.engine.model import SeqSlice
from macaronic.engine.slots import LoraBank, bank_dtype, bank_int8_b
from macaronic.testing import make_random_adapter


class StackedLora:
    """The bank before grouping (2026-11-30): one masked matmul over slots 1..top for every token,
    B block-diagonal over the targets of a fused projection, fp32."""

    def __init__(self, args, n_slots: int, r: int):
        self.r, self.A, self.Bt, self.columns = r, {}, {}, {}
        for f, targets in FUSED.items():
            d_in, off = args.target_shape(targets[0])[0], 0
            for t in targets:
                self.columns[t] = (off, args.target_shape(t)[1])
                off += args.target_shape(t)[1]
            self.A[f] = torch.zeros(args.n_layers, n_slots, len(targets) * r, d_in)
            self.Bt[f] = torch.zeros(args.n_layers, n_slots, len(targets) * r, off)

    def write(self, slot: int, pairs) -> None:
        for (layer, target), (A, B) in pairs.items():
            f = FUSED_OF[target]
            row, (col, w) = FUSED[f].index(target) * self.r, self.columns[target]
            self.A[f][layer, slot, row : row + A.shape[0]] = A
            self.Bt[f][layer, slot, row : row + A.shape[0], col : col + w] = B.T

    def plan(self, slots: Tensor):
        top = int(slots.max())
        masks = {}
        for rows in {len(ts) * self.r for ts in FUSED.values()}:
            col_slot = torch.arange(top * rows) // rows + 1
            masks[rows] = (col_slot[None, :] == slots[:, None]).float()
        return top, masks

    def add_delta(self, y: Tensor, layer: int, fused: str, x: Tensor, plan) -> None:
        top, masks = plan
        A, Bt = self.A[fused][layer], self.Bt[fused][layer]
        k = top * A.shape[1]
        d = ((x.float() @ A[1 : top + 1].reshape(k, -1).T) * masks[A.shape[1]]) @ Bt[1 : top + 1].reshape(k, -1)
        y += d.to(y.dtype)


def lora_overhead(base_dir, workdir: Path, precisions: dict, reps: int = 10, streams: int = 16, rank: int = 8) -> dict:
    """{precision: {layout: {...}}} with the overhead of each bank over the base alone."""
    from macaronic.engine.base import load_base

    out: dict = {"streams": streams, "adapters": 4, "rank": rank, "reps": reps}
    for name, (dtype, quant) in precisions.items():
        b = load_base(base_dir, dtype=getattr(torch, dtype), quant=quant)
        pairs = []
        for i in range(4):
            d = workdir / f"lora{i}"
            if not (d / "adapter_config.json").exists():
                make_random_adapter(d, b.args, rank=rank, seed=300 + i, mode="full", scale=0.05)
            pairs.append(read_adapter(d, b.args, name=f"lora{i}")[1])
        out[name] = {}
        for layout, where in (("contiguous", (1, 2, 3, 4)), ("scattered", (1, 3, 5, 8))):
            banks = {"grouped": LoraBank(b.args, 9, rank, native=None), "stacked": StackedLora(b.args, 9, rank)}
            fused = LoraBank(b.args, 9, rank, dtype=bank_dtype(b.model.dtype), int8_b=bank_int8_b(b.model))
            if fused.native is not None:
                banks = {"fused": fused, **banks}
                if fused.int8_b:  # the engine's int8 B rows, and beside them the same bank with bf16 B
                    banks["fused_bf16_b"] = LoraBank(b.args, 9, rank, dtype=fused.dtype)
            for slot, p in zip(where, pairs):
                for bank in banks.values():
                    bank.write(slot, p)
            out[name][layout] = _step_ratios(b, banks, where, reps, streams)
    return out


def _step_ratios(b, banks: dict, where, reps: int, streams: int) -> dict:
    pool = KVPool(b.args, b.model.dtype)
    kvs = [pool.alloc(256) for _ in range(streams)]
    toks = torch.randint(0, b.args.vocab_size, (streams,), generator=torch.Generator().manual_seed(0))
    slots = torch.tensor([where[i % len(where)] for i in range(streams)])

    @torch.inference_mode()
    def step(bank, loop: bool) -> tuple[float, float]:
        for kv in kvs:
            kv.length = 64  # every step decodes position 64 of the same 16 sequences
        b.model.fused_decode = not loop
        t, c = time.perf_counter(), time.thread_time()
        b.model.decode(toks, [SeqSlice(kv, 1) for kv in kvs], lora=bank, slots=bank.plan(slots) if bank else None)
        return time.perf_counter() - t, time.thread_time() - c

    # The fused bank runs inside the one-call decode step (csrc/decode.cpp) and is measured against the
    # base on that step; the PyTorch banks run in the layer loop and are measured against the base there.
    variants = {"base": (None, False), "base_loop": (None, True),
                **{k: (bank, not k.startswith("fused")) for k, bank in banks.items()}}
    for _ in range(2):  # warm-up
        for bank, loop in variants.values():
            step(bank, loop)
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for k, (bank, loop) in variants.items():
            w, c = step(bank, loop)
            wall[k].append(w)
            cpu[k].append(c)
    b.model.fused_decode = True
    row = {"base_step_ms": round(statistics.median(wall["base"]) * 1000, 2),
           "base_step_cpu_ms": round(statistics.median(cpu["base"]) * 1000, 2),
           "base_loop_step_ms": round(statistics.median(wall["base_loop"]) * 1000, 2)}
    for k in banks:
        ref = "base" if k.startswith("fused") else "base_loop"
        row[f"{k}_overhead_pct"] = _pct(cpu[k], cpu[ref])
        row[f"{k}_overhead_wall_pct"] = _pct(wall[k], wall[ref])
    row["grouped_over_stacked"] = round(statistics.median(a / s for a, s in zip(cpu["grouped"], cpu["stacked"])), 3)
    if "fused" in banks:
        row["fused_over_grouped"] = round(statistics.median(a / s for a, s in zip(cpu["fused"], cpu["grouped"])), 3)
    return row


def _pct(xs: list[float], base: list[float]) -> float:
    return round(100 * (statistics.median(x / y for x, y in zip(xs, base)) - 1), 1)


def markdown(lo: dict) -> list[str]:
    out = [f"One decode step, {lo['adapters']} adapters of rank {lo['rank']} over {lo['streams']} streams, median of "
           f"{lo['reps']} per-repetition ratios, thread CPU time (wall in brackets). Goal (issue 18): at most 10% in "
           "fp32, bf16 and int4. Each bank's overhead is over the base on the same step: the fused kernel's inside "
           "the one-call decode step (engine/csrc/decode.cpp) where it applies (bf16, int4), the PyTorch banks' in "
           "the layer loop.", "",
           "| precision | slots | base step, one call (ms) | base step, layer loop (ms) | fused kernel | grouped bank (PyTorch) "
           "| stacked bank (before) | fused / grouped, whole step | grouped / stacked |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in ("fp32", "bf16", "int8", "int4"):
        for layout in ("contiguous", "scattered"):
            x = lo.get(name, {}).get(layout)
            if x:
                fused = f"{x['fused_overhead_pct']}% ({x['fused_overhead_wall_pct']}%)" if "fused_overhead_pct" in x else "n/a"
                if "fused_bf16_b_overhead_pct" in x:
                    fused += f"; bf16 B: {x['fused_bf16_b_overhead_pct']}% ({x['fused_bf16_b_overhead_wall_pct']}%)"
                out.append(f"| {name} | {layout} | {x['base_step_ms']} | {x.get('base_loop_step_ms', 'n/a')} | {fused} | "
                           f"{x['grouped_overhead_pct']}% ({x['grouped_overhead_wall_pct']}%) | {x['stacked_overhead_pct']}% "
                           f"({x['stacked_overhead_wall_pct']}%) | {x.get('fused_over_grouped', 'n/a')} | "
                           f"{x['grouped_over_stacked']} |")
    return [*out, "", "Contiguous: slots 1-4; scattered: slots 1, 3, 5, 8 (the stacked bank computes every slot up to "
            "the highest used, the grouped one only the slots present). Fused: one native call per projection "
            "(engine/csrc/lora.cpp; n/a where the native kernels do not build); int4's bank keeps B as int8 rows with their "
            "scales folded into A (engine.slots.int8_rows), and \"bf16 B\" is the same bank with bf16 B, in the same run. fp32 and int8 have no one-call step, "
            "so both of their base columns are the layer loop. int4 runs the native int4 kernel when it builds. "
            "`macaronic.bench.lora`.", ""]
