"""One-stream decode tokens/s of a base served at each named precision, side by side in this process's
threads, each in a fresh process, interleaved repetitions, medians: e.g. `--quant gguf` (the GGUF's own
blocks, csrc/ggml.cpp) against int4 on the same base.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/gguf_decode.py --json docs/bench/gguf-decode-avx2.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def child(base: str, quant: str, tokens: int) -> float:
    import torch

    from macaronic.bench.bases import _decode_tok_s
    from macaronic.bench.suite import make_llm
    from macaronic.engine.base import load_base
    from macaronic.engine.llm import load_tokenizer

    b = load_base(base, dtype=torch.float32 if quant == "none" else torch.bfloat16, quant=quant)
    llm = make_llm(b, load_tokenizer(b.path), prefix_cache=False)
    _decode_tok_s(llm, None, 4)  # warm-up
    out = _decode_tok_s(llm, None, tokens)
    llm.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--quants", default="gguf,int4")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--json")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT", child(a.base, a.child, a.tokens), flush=True)
        return 0
    if not a.json:
        ap.error("--json is required")
    from macaronic.bench.machine import cpu_model
    from macaronic.engine import ggml, native

    t0, rows = time.time(), {q: [] for q in a.quants.split(",")}
    for rep in range(a.reps):
        for q in rows:
            p = subprocess.run([sys.executable, __file__, "--child", q, "--base", a.base, "--tokens", str(a.tokens)],
                               capture_output=True, text=True)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if p.returncode or line is None:
                print(p.stderr[-3000:])
                return 1
            rows[q].append(float(line.split()[1]))
            print(f"rep {rep + 1} {q}: {rows[q][-1]} tok/s", flush=True)
    ops = native.ops()
    out = {"base": a.base, "cpu": cpu_model(), "kernels": None if ops is None else ("avx512-bf16" if ops.wide_supported() else "avx2"),
           "ggml_few_rows": None if ops is None else ggml.default_family(ops),
           "reps": a.reps, "tokens": a.tokens, "seconds": round(time.time() - t0), "rows": rows,
           "medians": {q: statistics.median(v) for q, v in rows.items()}}
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["medians"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
