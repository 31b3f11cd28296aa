"""int4 on a CPU without AVX-512 BF16 (AVX2): the PyTorch path (torch's packed int4 kernel for few rows,
the bf16 weight widened to fp32 for more) against the native kernels' AVX2 twins (csrc/avx2.h), on the
same base, interleaved repetitions in fresh processes (the kernels are picked once per process), medians.

Measures, for each way: prefill tokens/s of a cold 512- and 2048-token prompt (one token out); aggregate
decode tokens/s for 1 stream with a rank-8 adapter, 1 base stream, 16 streams with four adapters mixed
and 16 base streams (`bench.suite._decode`, 32 tokens each, timed after the prompts); and greedy replies
(48 tokens, 6 chat prompts) of each way, compared character for character with each other and with
the fp32 weights' (`--quant none`, once).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/avx2_compare.py --json docs/bench/native-avx2.json

Run it on an x86-64 CPU with AVX2 and without AVX-512 BF16 (elsewhere it says so and stops).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from macaronic.bench.machine import cpu_model

WAYS = {"pytorch": "0", "native": "1"}  # MACARONIC_NATIVE per way
PROMPTS = ["Write a Python function that checks whether a string is a palindrome.",
           "What causes the seasons on Earth?", "Give three tips for a first job interview.",
           "Explain what a hash map is in two sentences.", "Translate 'good morning, my friend' into French.",
           "List the planets of the solar system in order."]


def greedy(llm) -> list[str]:
    from macaronic.engine.sampling import SamplingParams

    return [llm.submit(llm.encode_chat([{"role": "user", "content": p}]), None,
                       SamplingParams(max_tokens=48, temperature=0.0)).result()[0] for p in PROMPTS]


def child(base_name: str, tokens: int, fp32: bool) -> dict:
    """One way's figures, in this process (MACARONIC_NATIVE is already set); fp32: only the greedy replies
    of the fp32 weights, the reference both int4 ways are compared with."""
    import torch

    from macaronic.bench.suite import _decode, conversation, load_tokenizer, make_llm
    from macaronic.engine import native
    from macaronic.engine.base import load_base
    from macaronic.engine.quant import QuantLinear
    from macaronic.engine.sampling import SamplingParams

    if fp32:
        b = load_base(base_name, dtype=torch.float32, quant="none")
        llm = make_llm(b, load_tokenizer(b.path), prefix_cache=False)
        out = {"greedy": greedy(llm)}
        llm.close()
        return out
    b = load_base(base_name, dtype=torch.bfloat16, quant="int4")
    on = any(getattr(m, "native", None) is not None for m in b.model.modules() if isinstance(m, QuantLinear))
    ops = native.ops()
    out: dict = {"native": on, "wide": bool(ops is not None and ops.wide_supported())}
    tok = load_tokenizer(b.path)
    msgs, _ = conversation(tok, 2200)
    llm = make_llm(b, tok, prefix_cache=False, prefill_chunk=4096)
    ids = llm.encode_chat(msgs, add_generation_prompt=False)
    for n in (512, 2048):
        h = llm.submit(ids[:n], None, SamplingParams(max_tokens=1, stop_token_ids=()))
        h.result()
        out[f"prefill{n}_tok_s"] = round(n / (h.usage["ttft_ms"] / 1000), 1)
    out["greedy"] = greedy(llm)
    llm.close()
    with tempfile.TemporaryDirectory() as tmp:
        d = _decode(b, Path(tmp), tokens, None, 1)
    for k in ("single_tok_s", "base_single_tok_s", "mixed16_tok_s", "base16_tok_s"):
        out[k] = d[k]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fp32", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.base, a.tokens, a.fp32)), flush=True)
        return 0
    from macaronic.engine import native

    if not native.cpu_can_run() or native.cpu_bf16():
        print("this comparison is for an x86-64 CPU with AVX2 and without AVX-512 BF16")
        return 2
    if not a.json:
        ap.error("--json is required")
    rows: dict[str, list[dict]] = {w: [] for w in WAYS}
    t0 = time.time()

    def run_child(flag: str, *extra: str) -> dict | None:
        env = {**os.environ, "MACARONIC_NATIVE": flag, "MACARONIC_QUANT": "int4", "MACARONIC_DTYPE": "bfloat16"}
        p = subprocess.run([sys.executable, __file__, "--child", "--base", a.base, "--tokens", str(a.tokens), *extra],
                           env=env, capture_output=True, text=True)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if p.returncode or line is None:
            print(p.stdout[-2000:], p.stderr[-4000:])
            return None
        return json.loads(line[7:])

    ref = run_child("0", "--fp32")
    if ref is None:
        return 1
    for rep in range(a.reps):
        for way, flag in WAYS.items():
            r = run_child(flag)
            if r is None:
                return 1
            if r["native"] != (flag == "1"):
                print(f"way {way}: expected native={flag == '1'}, got {r['native']}")
                return 1
            rows[way].append(r)
            print(f"rep {rep + 1} {way}: " + ", ".join(f"{k} {v}" for k, v in r.items() if k.endswith("tok_s")), flush=True)
    keys = [k for k in rows["native"][0] if k.endswith("tok_s")]

    def med(v):
        v = sorted(v)
        return v[len(v) // 2] if len(v) % 2 else round((v[len(v) // 2 - 1] + v[len(v) // 2]) / 2, 2)

    medians = {w: {k: med([r[k] for r in rs]) for k in keys} for w, rs in rows.items()}
    ratios = {k: round(medians["native"][k] / medians["pytorch"][k], 2) for k in keys}

    def first_diff(ga: list[str], gb: list[str]) -> list[int | None]:  # None: the same text
        return [next((i for i, (x, y) in enumerate(zip(u, v)) if x != y), None if len(u) == len(v) else min(len(u), len(v)))
                for u, v in zip(ga, gb)]

    diff = first_diff(rows["pytorch"][0]["greedy"], rows["native"][0]["greedy"])
    vs_fp32 = {w: first_diff(ref["greedy"], rows[w][0]["greedy"]) for w in WAYS}
    out = {"base": a.base, "cpu": cpu_model(), "threads": int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count()),
           "reps": a.reps, "tokens": a.tokens, "seconds": round(time.time() - t0),
           "rows": {w: [{k: v for k, v in r.items() if k != "greedy"} for r in rs] for w, rs in rows.items()},
           "medians": medians, "ratio_native_over_pytorch": ratios,
           "greedy_prompts": len(PROMPTS), "greedy_identical": sum(d is None for d in diff), "greedy_first_difference": diff,
           "greedy_identical_to_fp32": {w: sum(d is None for d in v) for w, v in vs_fp32.items()},
           "greedy_first_difference_from_fp32": vs_fp32,
           "greedy_text": {"fp32": ref["greedy"], **{w: rows[w][0]["greedy"] for w in WAYS}}}
    Path(a.json).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({"medians": medians, "ratios": ratios, "greedy_identical": out["greedy_identical"],
                      "first_difference": diff, "first_difference_from_fp32": vs_fp32}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
