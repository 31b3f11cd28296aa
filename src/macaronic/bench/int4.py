"""int4 side by side: the native kernel (engine/csrc/int4.cpp) against the path it replaces and
against torch's own int4 kernel, in one process, on the base's own layer shapes; a decode step per
variant; resident memory per precision, each in a fresh process.

- kernels: per layer shape and row count, thread CPU time of one call (median of interleaved
  repetitions) for the bf16 matmul, torch's `_weight_int4pack_mm_for_cpu`, the copy path
  (`--quant int4` before: torch's int4 kernel up to 4 rows, the bf16 copy above) and the native kernel;
- steps: one decode step of 1 and 16 streams through the model, base only and with 4 adapters mixed
  (rank 8), for bf16, the int4 copy path and native int4; the LoRA overhead follows;
- memory: bytes of the tensors the model holds and the process's resident set after a forward.
Knows nothing about scheduling, tokenizers or HTTP.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SHAPES = {"qkv": "wqkv", "o": "wo", "gate_up": "w13", "down": "w2"}


def _load(base_dir, variant: str):
    from macaronic.engine import native
    from macaronic.engine.base import load_base
    from macaronic.engine.quant import quantize

    b = load_base(base_dir, dtype=torch.bfloat16)
    if variant == "int4_copy":
        quantize(b.model, "int4", native=None)
    elif variant == "int4":
        ops = native.ops()
        if ops is None:
            raise RuntimeError("the native kernels are not available here (see the warning above)")
        quantize(b.model, "int4", native=ops)
    return b


def _cpu_us(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.thread_time()
        fn()
        out.append((time.thread_time() - t) * 1e6)
    return out


@torch.inference_mode()
def kernels(base_dir, reps: int = 15, rows=ROWS) -> dict:
    from macaronic.engine import native
    from macaronic.engine.quant import QuantLinear, _int4_pack

    ops = native.ops()
    b = _load(base_dir, "bf16")
    out: dict = {"layers": b.args.n_layers, "rows": list(rows), "shapes": {}}
    for name, attr in SHAPES.items():
        w = getattr(b.model.layers[0], attr)
        bias = b.model.layers[0].bqkv if attr == "wqkv" else None
        packed, scales = _int4_pack(w, 32)
        copy, fast = QuantLinear(w, "int4", bias), QuantLinear(w, "int4", bias, native=ops)
        variants = {
            "bf16": lambda x: torch.nn.functional.linear(x, w, bias),
            "torch_int4": lambda x: torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, 32, scales),
            "copy_path": copy,
            "native": fast,
        }
        rows_out = []
        for n in rows:
            x = torch.randn(n, w.shape[1], generator=torch.Generator().manual_seed(n)).bfloat16()
            times: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(2):
                for f in variants.values():
                    f(x)
            for _ in range(reps):  # interleaved: each repetition runs every variant once
                for k, f in variants.items():
                    times[k] += _cpu_us(lambda: f(x), 1)
            med = {k: round(statistics.median(v), 1) for k, v in times.items()}
            rows_out.append({"rows": n, **{f"{k}_us": v for k, v in med.items()},
                             "native_over_copy": round(med["native"] / med["copy_path"], 3),
                             "native_over_torch_int4": round(med["native"] / med["torch_int4"], 3),
                             "native_over_bf16": round(med["native"] / med["bf16"], 3)})
        out["shapes"][name] = {"shape": list(w.shape), "rows": rows_out}
    # the four shapes summed, times the layer count: the layer matmuls of one forward
    out["step"] = []
    for i, n in enumerate(rows):
        tot = {k: sum(out["shapes"][s]["rows"][i][f"{k}_us"] for s in SHAPES) * b.args.n_layers / 1000
               for k in ("bf16", "torch_int4", "copy_path", "native")}
        out["step"].append({"rows": n, **{f"{k}_ms": round(v, 2) for k, v in tot.items()},
                            "native_over_copy": round(tot["native"] / tot["copy_path"], 3),
                            "native_over_torch_int4": round(tot["native"] / tot["torch_int4"], 3)})
    return out


@torch.inference_mode()
def steps(base_dir, workdir: Path, reps: int = 10, streams=(1, 16), rank: int = 8) -> dict:
    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.kvpool import KVPool
    from macaronic.engine.model import SeqSlice
    from macaronic.engine.slots import LoraBank, bank_dtype, bank_int8_b
    from macaronic.testing import make_random_adapter

    models = {v: _load(base_dir, v) for v in ("bf16", "int4_copy", "int4")}
    args = models["bf16"].args
    pairs = []
    for i in range(4):
        d = workdir / f"lora{i}"
        if not (d / "adapter_config.json").exists():
            make_random_adapter(d, args, rank=rank, seed=300 + i, mode="full", scale=0.05)
        pairs.append(read_adapter(d, args, name=f"lora{i}")[1])
    bank = LoraBank(args, 5, rank, dtype=bank_dtype(torch.bfloat16))  # the engine's bank for bf16
    banks = {v: bank for v in models}
    if bank_int8_b(models["int4"].model):  # and for int4: B as int8 rows (engine.slots.int8_rows)
        banks["int4"] = LoraBank(args, 5, rank, dtype=bank.dtype, int8_b=True)
    for slot, p in enumerate(pairs, 1):
        for bk in {id(x): x for x in banks.values()}.values():
            bk.write(slot, p)
    out: dict = {"adapters": 4, "rank": rank, "reps": reps}
    for n in streams:
        pools = {v: KVPool(args, torch.bfloat16) for v in models}
        kvs = {v: [pools[v].alloc(128) for _ in range(n)] for v in models}
        toks = torch.randint(0, args.vocab_size, (n,), generator=torch.Generator().manual_seed(n))
        slots = torch.tensor([1 + i % 4 for i in range(n)])

        def step(v: str, lora: bool) -> float:
            for kv in kvs[v]:
                kv.length = 64  # every step decodes position 64 of the same sequences
            t = time.thread_time()
            models[v].model.decode(toks, [SeqSlice(kv, 1) for kv in kvs[v]], lora=banks[v] if lora else None,
                            slots=banks[v].plan(slots) if lora else None)
            return (time.thread_time() - t) * 1000

        cases = [(v, lora) for v in models for lora in (False, True)]
        for case in cases:  # warm-up
            step(*case)
        times: dict = {c: [] for c in cases}
        for _ in range(reps):
            for c in cases:
                times[c].append(step(*c))
        row = {}
        for v in models:
            base, with_lora = times[(v, False)], times[(v, True)]
            row[v] = {"base_ms": round(statistics.median(base), 2), "lora_ms": round(statistics.median(with_lora), 2),
                      "lora_overhead_pct": round(100 * (statistics.median(a / b for a, b in zip(with_lora, base)) - 1), 1)}
        for v in ("int4_copy", "int4"):
            row[v]["over_bf16"] = round(statistics.median(a / b for a, b in zip(times[(v, True)], times[("bf16", True)])), 3)
        row["int4"]["over_int4_copy"] = round(
            statistics.median(a / b for a, b in zip(times[("int4", True)], times[("int4_copy", True)])), 3)
        out[f"streams{n}"] = row
    return out


MEMORY_PRECISIONS = {"fp32": ("float32", "none", "1"), "bf16": ("bfloat16", "none", "1"), "int8": ("bfloat16", "int8", "1"),
                     "int4_copy": ("bfloat16", "int4", "0"), "int4": ("bfloat16", "int4", "1")}
_PROBE = r"""
import gc, json, sys, torch
from macaronic.engine.base import load_base
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice
b = load_base(sys.argv[1], dtype=getattr(torch, sys.argv[2]), quant=sys.argv[3])
with torch.inference_mode():
    b.model.decode(torch.arange(3, 19), [SeqSlice(KVBuffer(b.args, 16, b.model.dtype), 16)])
gc.collect()
seen, total = set(), 0
for m in b.model.modules():
    for t in [*m.parameters(recurse=False), *(v for v in vars(m).values() if isinstance(v, torch.Tensor)),
              *(p for v in vars(m).values() if isinstance(v, tuple) for p in v if isinstance(p, torch.Tensor))]:
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS"))
print(json.dumps({"weights_mb": round(total / 2**20, 1), "rss_mb": round(rss / 1024, 1)}))
"""


def memory(base_dir, precisions: dict = MEMORY_PRECISIONS) -> dict:
    """Per precision, in a fresh process: the model's tensor bytes and the resident set size."""
    import os

    out = {}
    for name, (dtype, quant, use_native) in precisions.items():
        env = {**os.environ, "MACARONIC_NATIVE": use_native, "OMP_NUM_THREADS": "1"}
        res = subprocess.run([sys.executable, "-c", _PROBE, str(base_dir), dtype, quant], capture_output=True,
                             text=True, env=env, check=True)
        out[name] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def run(base_dir, workdir: Path, quick: bool = False) -> dict:
    return {"kernels": kernels(base_dir, reps=7 if quick else 15),
            "steps": steps(base_dir, workdir, reps=5 if quick else 12),
            "memory": memory(base_dir)}


def markdown(r: dict) -> list[str]:
    k = r["kernels"]
    out = [f"Layer matmuls of one forward ({k['layers']} layers x the 4 shapes below; thread CPU time, ms, median of "
           "interleaved repetitions). Copy path: `--quant int4` before the native kernel (torch's int4 kernel up to 4 "
           "rows, a bf16 copy of every weight above).", "",
           "| rows | bf16 | torch int4 | copy path | native | native / copy | native / torch int4 |",
           "|---:|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {s['rows']} | {s['bf16_ms']} | {s['torch_int4_ms']} | {s['copy_path_ms']} | {s['native_ms']} | "
            f"{s['native_over_copy']} | {s['native_over_torch_int4']} |" for s in k["step"]]
    out += ["", "Per shape (µs per call, native / copy path):", "",
            "| rows | " + " | ".join(f"{n} {tuple(v['shape'])}" for n, v in k["shapes"].items()) + " |",
            "|---:|" + "---:|" * len(k["shapes"])]
    for i, n in enumerate(k["rows"]):
        cells = [f"{v['rows'][i]['native_us']} / {v['rows'][i]['copy_path_us']}" for v in k["shapes"].values()]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    st = r["steps"]
    out += ["", f"One decode step through the model (ms, thread CPU, median of {st['reps']}; {st['adapters']} adapters of "
            f"rank {st['rank']} mixed):", "",
            "| streams | variant | base only | with LoRA | LoRA overhead | with LoRA / bf16 |", "|---:|---|---:|---:|---:|---:|"]
    for key in (k for k in st if k.startswith("streams")):
        for v, row in st[key].items():
            out.append(f"| {key.removeprefix('streams')} | {v} | {row['base_ms']} | {row['lora_ms']} | "
                       f"{row['lora_overhead_pct']}% | {row.get('over_bf16', 1.0)} |")
    mem = r["memory"]
    out += ["", "Resident memory per precision (fresh process each: the model's tensors, and the process's RSS "
            "after a 16-token forward; MB):", "", "| precision | model tensors | process RSS |", "|---|---:|---:|"]
    out += [f"| {n} | {m['weights_mb']} | {m['rss_mb']} |" for n, m in mem.items()]
    out += ["", "int4_copy: `MACARONIC_NATIVE=0` (the PyTorch path when the kernel cannot build). `macaronic.bench.int4`.", ""]
    return out
