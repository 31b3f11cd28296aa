"""Time each projection of a base served from its GGUF's own blocks (`--quant gguf`, csrc/ggml.cpp) at one
row of x, as a decode step calls it (or at each of `--rows`): layer 0's qkv, o, gate_up and down and the output head, at each
thread count and for each family of few-row kernels (`--kernels`: auto, fp32, avx2, vnni; those this CPU
lacks are skipped), medians of repeated calls; the bytes of blocks each call reads over its time.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/gguf_projections.py --json docs/bench/gguf-projections-avx2.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", default="1,2", help="comma list of thread counts")
    ap.add_argument("--rows", default="1", help="comma list of rows of x per call (1: a decode step's)")
    ap.add_argument("--calls", type=int, default=20, help="timed calls per projection (the head: a quarter)")
    ap.add_argument("--kernels", default="auto", help="comma list of auto, fp32 (x as it is), avx2, vnni "
                    "(x rounded to 8 bits, integer dot products)")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    from macaronic.bench.machine import cpu_model
    from macaronic.engine import ggml, native
    from macaronic.engine.base import load_base

    ops = native.ops()
    b = load_base(a.base, dtype=torch.bfloat16, quant="gguf")
    layer, m = b.model.layers[0], b.model
    mods = {"qkv": layer.wqkv, "o": layer.wo, "gate_up": layer.w13, "down": layer.w2, "head": m.lm_head}
    rows = []
    families = [k for k in a.kernels.split(",") if k]
    if unknown := [k for k in families if k not in ggml.KERNELS]:
        ap.error(f"--kernels: unknown {unknown}; choose from {sorted(ggml.KERNELS)}")
    for threads, family in ((int(t), k) for t in a.threads.split(",") for k in families):
        torch.set_num_threads(threads)
        if family not in ("auto", *ggml.kernel_families(ops)):
            print(f"skipping {family}: this CPU lacks it", flush=True)
            continue
        with ggml.kernels(ops, family):
            for n, (name, mod) in ((int(r), m) for r in a.rows.split(",") for m in mods.items()):
                if name == "head" and n > 1:  # a prefill computes the head on its last row only
                    continue
                x = torch.randn(n, mod.in_features, generator=torch.Generator().manual_seed(0)).bfloat16()
                for _ in range(3):
                    mod(x)
                times = []
                for _ in range(max(3, a.calls // 4 if name == "head" else a.calls)):
                    t = time.perf_counter()
                    mod(x)
                    times.append(time.perf_counter() - t)
                dt = statistics.median(times)
                rows.append({"threads": threads, "kernels": family, "rows": n, "projection": name, "types": mod.types,
                             "ms": round(dt * 1e3, 3), "gb_s": round(mod.nbytes() / dt / 1e9, 1)})
                print(json.dumps(rows[-1]), flush=True)
    out = {"base": a.base, "cpu": cpu_model(),
           "kernels": None if ops is None else ("avx512-bf16" if ops.wide_supported() else "avx2"),
           "ggml_few_rows": None if ops is None else ggml.default_family(ops), "rows": rows}
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
