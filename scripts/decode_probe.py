"""Decode tokens/s of our engine alone, 1 and 16 streams, on a registered base at its served precision (the
peer bench's setting without llama.cpp: rank-8 turn adapters, 4 over 16 streams), greedy or sampled, after a
short or a long prompt; and the sampler's time per token on a peaked 151,936-token distribution. The quick
before/after probe of docs/LOG.md 2026-12-07 (twenty-first session): run it on two trees,

    git archive COMMIT src | tar -x -C /tmp/old
    OMP_NUM_THREADS=2 .venv/bin/python scripts/decode_probe.py                      # this tree
    OMP_NUM_THREADS=2 PYTHONPATH=/tmp/old/src .venv/bin/python scripts/decode_probe.py   # the other
    # --context 1500 (16 streams after a long prompt), --temperature 0.8 --top-p 0.95 (sampled)

Interleave the runs and compare ratios; a shared box moves both.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--tokens", type=int, default=32, help="tokens per stream")
    ap.add_argument("--context", type=int, default=0, help="words of filler in every prompt (0: a short prompt)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp/macaronic-decode-probe", help="the random adapters")
    a = ap.parse_args()
    import torch

    import macaronic
    from macaronic.bench.suite import make_llm
    from macaronic.engine.base import load_base, resolve_base
    from macaronic.engine.bases import BASES
    from macaronic.engine.llm import load_tokenizer
    from macaronic.engine.sampling import SamplingParams, make_generator, sample
    from macaronic.testing import make_random_adapter

    torch.set_num_threads(a.threads)
    dtype, quant = BASES[a.base].served
    b = load_base(resolve_base(a.base), dtype=getattr(torch, dtype), quant=quant)
    llm = make_llm(b, load_tokenizer(b.path), max_batch=16, prefix_cache=a.context > 0)
    work = Path(a.workdir)
    for i in range(4):
        d = work / f"peer{i}"
        if not (d / "adapter_config.json").exists():
            make_random_adapter(d, b.args, rank=8, seed=500 + i, mode="turn", scale=0.05)
        llm.add_adapter(d, f"p{i}")
    filler = "word " * a.context
    prompts = [llm.encode_chat([{"role": "user", "content": f"{filler}Write item {i} of a long list."}]) for i in range(16)]
    sp = SamplingParams(max_tokens=a.tokens, stop_token_ids=(), temperature=a.temperature, top_p=a.top_p, seed=1)

    def run(n: int) -> float:
        hs = [llm.submit(p, f"p{i % 4}", sp) for i, p in enumerate(prompts[:n])]
        for h in hs:  # prompts first: only decode is timed
            next(iter(h))
        t = time.perf_counter()
        for h in hs:
            h.result()
        return n * (a.tokens - 1) / (time.perf_counter() - t)

    try:
        run(2)
        got = {1: [], 16: []}
        for _ in range(a.reps):
            for n in got:
                got[n].append(run(n))
    finally:
        llm.close()
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(151_936, generator=g) * 3
    logits[:50] += 12
    p = SamplingParams(max_tokens=1, temperature=0.8, top_p=0.95)
    gen = make_generator(1)
    t = time.perf_counter()
    for _ in range(50):
        sample(logits, p, gen)
    per = (time.perf_counter() - t) / 50 * 1000
    print(f"{macaronic.__file__}: {a.base} {dtype}/{quant}, {a.threads} threads, context {a.context} words, "
          f"T {a.temperature} top-p {a.top_p}: 1 stream {statistics.median(got[1]):.1f} tok/s, 16 streams "
          f"{statistics.median(got[16]):.1f} (medians of {a.reps}); sampler {per:.2f} ms a token (T 0.8, top-p 0.95)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
