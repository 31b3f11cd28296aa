"""Decode against llama.cpp on the same GGUF, for a base `macaronic bench bases` takes too long on where
bf16 is emulated (an AVX2 CPU: its bf16 rows alone run past 15 minutes): our int4 or gguf (the native kernels,
whichever instruction set runs here) and llama.cpp (`llama-cpp-python`, the `bench` extra), 1 stream
and 16 streams, 32 tokens each, timed after the prompts, interleaved repetitions, medians.

Ours: one stream bare and with a rank-8 turn adapter; 16 streams with four such adapters mixed, and
bare (`bench.suite._decode`). llama.cpp: the same GGUF, no adapter, 1 sequence and 16 in one batch
(`bench.suite._llamacpp_decode`), in this process, idle while ours runs. Both at torch's thread count.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/avx2_peer.py --json docs/bench/peer-qwen-avx2.json
    OMP_NUM_THREADS=2 .venv/bin/python scripts/avx2_peer.py --quant gguf --json docs/bench/peer-qwen-gguf-avx2.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from macaronic.bench.machine import cpu_model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--quant", default="int4", choices=["int4", "gguf"],
                    help="ours at int4 (requantized, the served default) or gguf (the GGUF's own blocks)")
    ap.add_argument("--kernels", default="auto", choices=["auto", "fp32", "avx2", "vnni"],
                    help="with --quant gguf: the few-row kernel family (engine/ggml.py's KERNELS)")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    from importlib.util import find_spec

    from macaronic.bench.suite import _decode, _llamacpp_decode, med
    from macaronic.engine import bases, ggml, native
    from macaronic.engine.base import base_gguf, load_base, resolve_base
    from macaronic.engine.llm import load_tokenizer

    if find_spec("llama_cpp") is None:
        print("llama.cpp is not installed: pip install 'llama-cpp-python==0.3.36' (the bench extra)")
        return 2
    t0, load = time.time(), os.getloadavg()
    ops = native.ops()
    if ops is not None:
        ops.ggml_kernels(ggml.KERNELS[a.kernels])
    b = load_base(resolve_base(a.base), dtype=torch.bfloat16, quant=a.quant)
    tok = load_tokenizer(b.path)
    prompts = [tok.apply_chat_template([{"role": "user", "content": f"Write item {i} of a long list."}],
                                       add_generation_prompt=True, tokenize=True) for i in range(16)]
    prompts = [list(p["input_ids"] if hasattr(p, "keys") else p) for p in prompts]
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / bases.get(a.base).gguf
        gguf = base_gguf(a.base, scratch)
        for rep in range(a.reps):
            d = _decode(b, Path(tmp), a.tokens, None, 1)
            for k in ("single_tok_s", "base_single_tok_s", "mixed16_tok_s", "base16_tok_s"):
                rows.setdefault(k, []).append(d[k])
            lc = _llamacpp_decode(a.tokens, prompts, gguf=gguf, n16=True)
            rows.setdefault("llamacpp_single_tok_s", []).append(lc["llamacpp_single_tok_s"])
            rows.setdefault("llamacpp16_tok_s", []).append(lc["llamacpp16_tok_s"])
            print(f"rep {rep + 1}: " + ", ".join(f"{k} {v[-1]}" for k, v in rows.items()), flush=True)
    m = {k: med(v) for k, v in rows.items()}
    out = {"base": a.base, "quant": a.quant, "cpu": cpu_model(), "threads": torch.get_num_threads(),
           "kernels": None if ops is None else ("avx512-bf16" if ops.wide_supported() else "avx2"),
           "ggml_few_rows": None if ops is None else (ggml.default_family(ops) if a.kernels == "auto" else a.kernels),
           "reps": a.reps, "tokens": a.tokens, "seconds": round(time.time() - t0), "rows": rows, "medians": m,
           "ratios": {"1 stream, ours with an adapter / llama.cpp bare": round(m["single_tok_s"] / m["llamacpp_single_tok_s"], 3),
                      "1 stream, bare / bare": round(m["base_single_tok_s"] / m["llamacpp_single_tok_s"], 3),
                      "16 streams, ours mixed adapters / llama.cpp bare": round(m["mixed16_tok_s"] / m["llamacpp16_tok_s"], 3),
                      "16 streams, bare / bare": round(m["base16_tok_s"] / m["llamacpp16_tok_s"], 3)},
           "load_average_at_start": load}
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"medians": m, "ratios": out["ratios"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
