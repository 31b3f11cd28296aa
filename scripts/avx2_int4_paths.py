"""Where the native int4 kernel's register path stops paying: path 1 (registers) against path 3 (dequantised
chunks for at::mm) per row count, on one layer of the default base's four projection shapes (random weights
packed by `pack_int4`), wall time, median of 7, this process's threads. The AVX2 twins' `kFewRows2`
(csrc/int4.cpp) was chosen from this; on an AVX-512 box it shows the AVX-512 paths (their `kFewRowsWide` without AMX).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/avx2_int4_paths.py --json docs/bench/int4-paths-avx2.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from macaronic.bench.machine import cpu_model
from macaronic.engine import native
from macaronic.engine.quant import pack_int4

SHAPES = {"qkv": (1152, 896), "gate_up": (9728, 896), "down": (896, 4864), "o": (896, 896)}  # (out, in)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1,4,8,16,32,48,64,96,128")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    ops = native.ops()
    if ops is None:
        print("the native kernels do not run here")
        return 2
    torch.manual_seed(0)
    packs = {k: pack_int4((torch.randn(o, i) * 0.02).bfloat16()) for k, (o, i) in SHAPES.items()}
    rows = {}
    for n in map(int, a.rows.split(",")):
        xs = {k: torch.randn(n, i).bfloat16() for k, (_, i) in SHAPES.items()}
        ms = {}
        for path in (1, 3):
            ts = []
            for _ in range(7):
                t = time.perf_counter()
                for k in SHAPES:
                    ops.int4_linear(xs[k], *packs[k], None, path)
                ts.append(time.perf_counter() - t)
            ms[f"path{path}_ms"] = round(statistics.median(ts) * 1000, 2)
        rows[n] = ms
        print(f"rows {n:3d}: registers {ms['path1_ms']:7.2f} ms, chunks + at::mm {ms['path3_ms']:7.2f} ms", flush=True)
    out = {"cpu": cpu_model(), "threads": torch.get_num_threads(), "kernels": "avx512-bf16" if ops.wide_supported() else "avx2",
           "rows": rows}
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
