"""int4 without the native kernels on a CPU that emulates bf16 (AVX2): the many-row matmul in bf16
(before 2026-12-05's sixth session) against the bf16 weight widened to fp32 (now; engine/quant.py's
docstring), side by side in one process on the same loaded base, interleaved repetitions, medians.

Measures, for each way: prefill tokens/s of a cold 512- and 2048-token prompt (one token out), and
aggregate decode tokens/s for 1 stream, 16 streams with four rank-8 adapters mixed, 16 base-only
streams (32 tokens each, timed after the prompts). "before" is the old rule exactly: at most
SMALL_ROWS rows packed, more rows in bf16.

    MACARONIC_NATIVE=0 OMP_NUM_THREADS=2 .venv/bin/python scripts/widen_compare.py \\
        --json docs/bench/widen-avx2.json

Run it on a CPU without AVX512-BF16 or AMX (it says so and stops elsewhere: there the native kernels
serve int4 and neither way runs).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from macaronic.bench.machine import cpu_model
from macaronic.bench.suite import _decode, conversation, load_tokenizer, make_llm, med
from macaronic.engine import native
from macaronic.engine.base import load_base
from macaronic.engine.quant import SMALL_ROWS, SMALL_ROWS_FP32, QuantLinear
from macaronic.engine.sampling import SamplingParams

WAYS = {"before": (False, SMALL_ROWS), "widened": (True, SMALL_ROWS_FP32)}


def set_way(model, way: str) -> None:
    widen, small = WAYS[way]
    for m in model.modules():
        if isinstance(m, QuantLinear):
            m.widen, m.small_rows = widen, small


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    if native.cpu_bf16():
        print("this CPU computes bf16 natively: the widened path does not apply here")
        return 2
    b = load_base(a.base, dtype=torch.bfloat16, quant="int4")
    if any(getattr(m, "native", None) is not None for m in b.model.modules() if isinstance(m, QuantLinear)):
        print("the native kernels serve int4 here: set MACARONIC_NATIVE=0")
        return 2
    tok = load_tokenizer(b.path)
    msgs, _ = conversation(tok, 2200)
    rows: dict[str, dict[str, list[float]]] = {w: {} for w in WAYS}
    t0 = time.time()
    llm = make_llm(b, tok, prefix_cache=False, prefill_chunk=4096)
    ids = llm.encode_chat(msgs, add_generation_prompt=False)
    for rep in range(a.reps):
        for way in WAYS:
            set_way(b.model, way)
            for n in (512, 2048):
                h = llm.submit(ids[:n], None, SamplingParams(max_tokens=1, stop_token_ids=()))
                h.result()
                rows[way].setdefault(f"prefill{n}_tok_s", []).append(round(n / (h.usage["ttft_ms"] / 1000), 1))
            print(f"rep {rep + 1} {way}: prefill {rows[way]['prefill512_tok_s'][-1]} / {rows[way]['prefill2048_tok_s'][-1]} tok/s",
                  flush=True)
    llm.close()
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for way in WAYS:
                set_way(b.model, way)
                d = _decode(b, Path(tmp), a.tokens, None, 1)
                for k in ("single_tok_s", "mixed16_tok_s", "base16_tok_s"):
                    rows[way].setdefault(k, []).append(d[k])
                print(f"rep {rep + 1} {way}: decode 1 / 16 mixed / 16 base {d['single_tok_s']} / {d['mixed16_tok_s']} / "
                      f"{d['base16_tok_s']} tok/s", flush=True)
    medians = {w: {k: med(v) for k, v in r.items()} for w, r in rows.items()}
    ratios = {k: round(medians["widened"][k] / medians["before"][k], 2) for k in medians["before"]}
    out = {"base": a.base, "cpu": cpu_model(), "threads": torch.get_num_threads(), "reps": a.reps,
           "tokens": a.tokens, "seconds": round(time.time() - t0), "rows": rows, "medians": medians,
           "ratio_widened_over_before": ratios}
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"medians": medians, "ratios": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
