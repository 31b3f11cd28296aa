"""Switched turns against llama.cpp's Activated LoRA, side by side in one run (`macaronic bench --only alora`).

The question: after a history computed with adapter A, how long until the first token of the next
turn on adapter B? Ours: two `turn` adapters (rank 8, all 7 projections) on the base at int4 (the
served precision of both registered bases; SmolLM2's Q4_1 layers repack exactly), the history's
cache reused and only the new turn prefilled. llama.cpp: its own server (`macaronic.llamacpp`,
built from the pinned source) on the base's shipped GGUF, the same two adapters converted by its
converter, twice: as Activated LoRA (invocation tokens = our turn rule's user header; llama.cpp keeps
the cache before the invocation point when the next request asks for another aLoRA) and as plain
LoRA (a change of adapter clears the slot's cache: the whole prompt is prefilled again).

Every variant sees the same token ids: the history trimmed to N tokens, then the next user turn.
Both sides first answer a short prompt with each adapter, untimed (kernels warm). Per repetition: each side's cache emptied, the history computed on A (one token generated), then
the timed request on B (one token). Ours is timed in process (`ttft_ms`); llama.cpp over loopback
HTTP (`wall_ms`, its own `prompt_ms` beside it). Same thread count on both sides; one side idles
while the other runs. The tokens each side prefilled for the switched turn are reported, so the
reuse is visible, not assumed.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from macaronic.engine.sampling import SamplingParams


def med(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 1) if xs else None


def run(base_name: str | None, workdir: Path, lengths=(512, 2048, 4096), reps: int = 3, threads: int = 2,
        progress=None, log=print) -> dict:
    from macaronic import llamacpp
    from macaronic.bench.suite import make_llm, switch_prompt, switched_turn
    from macaronic.engine.base import base_gguf, load_base, resolve_base
    from macaronic.engine.llm import load_tokenizer, user_marker_ids
    from macaronic.testing import make_random_adapter

    binary = llamacpp.build(log=log)
    b = load_base(base_name, dtype=torch.bfloat16, quant="int4")
    tok = load_tokenizer(b.path)
    workdir.mkdir(parents=True, exist_ok=True)
    from macaronic.engine import bases

    gguf = base_gguf(b.name, scratch=workdir / bases.get(b.name).gguf)
    inv = user_marker_ids(tok)
    peft = {n: make_random_adapter(workdir / n, b.args, rank=8, seed=100 + j, mode="turn", scale=0.05)
            for j, n in enumerate(("a", "b"))}
    hf_dir = resolve_base(base_name)
    loras = []
    for n in ("a", "b"):
        loras.append(llamacpp.convert_adapter(peft[n], hf_dir, workdir / f"{n}-alora.gguf", invocation_tokens=inv))
    for n in ("a", "b"):
        loras.append(llamacpp.convert_adapter(peft[n], hf_dir, workdir / f"{n}-plain.gguf", invocation_tokens=[]))
    A_AL, B_AL, A_PL, B_PL = range(4)

    torch.set_num_threads(threads)
    llm = make_llm(b, tok, max_context=8192, prefill_chunk=1024)
    for n, p in peft.items():
        llm.add_adapter(p, n)
    one = SamplingParams(max_tokens=1, stop_token_ids=())
    rows = []
    with llamacpp.Server(gguf, loras, threads=threads, ctx=8192, binary=binary, log=workdir / "llama-server.log") as srv:
        # warm-up, untimed: each side's kernels and both adapters once, so the first row is not a cold start
        warm = llm.encode_chat([{"role": "user", "content": "Warm up."}])
        for name in ("a", "b"):
            llm.submit(warm, name, one).result()
        for i in range(4):
            srv.complete(warm, i)
        for n in lengths:
            hist, prompt = switch_prompt(llm, tok, n)
            res = {k: [] for k in ("ours_ms", "ours_prefill", "alora_ms", "alora_prompt_ms", "alora_prefill",
                                   "plain_ms", "plain_prompt_ms", "plain_prefill")}
            for _ in range(reps):
                usage = switched_turn(llm, hist, prompt, "a", "b")
                res["ours_ms"].append(usage["ttft_ms"])
                res["ours_prefill"].append(usage["prefill_tokens"])
                for key, a_id, b_id in (("alora", A_AL, B_AL), ("plain", A_PL, B_PL)):
                    srv.erase()
                    srv.complete(hist, a_id)
                    out = srv.complete(prompt, b_id)
                    t = out.get("timings", {})
                    res[f"{key}_ms"].append(out["wall_ms"])
                    res[f"{key}_prompt_ms"].append(t.get("prompt_ms"))
                    res[f"{key}_prefill"].append(t.get("prompt_n"))
                if progress:
                    progress()
            row = {"history_tokens": n, "prompt_tokens": len(prompt)}
            row.update({k: med(v) for k, v in res.items()})
            row["alora_over_ours"] = round(row["alora_ms"] / row["ours_ms"], 2) if row["ours_ms"] else None
            row["plain_over_ours"] = round(row["plain_ms"] / row["ours_ms"], 2) if row["ours_ms"] else None
            rows.append(row)
    llm.close()
    return {"base": b.name, "gguf": gguf.name, "threads": threads, "reps": reps, "llamacpp": llamacpp.VERSION,
            "invocation_tokens": inv, "rows": rows, "at": time.strftime("%Y-%m-%d %H:%M:%S")}


def markdown(r: dict) -> list[str]:
    out = [f"Base {r['base']}: ours at int4 (bf16 activations), llama.cpp (llama-cpp-python {r['llamacpp']}'s "
           f"vendored source, `llama-server`) on `{r['gguf']}`; {r['threads']} threads each; two rank-8 turn "
           f"adapters on all 7 projections; median of {r['reps']}. History computed on A, then the next "
           "user turn on B, one token. prefilled: tokens each side computed for the switched turn.", "",
           "| history tokens | ours (ms) | prefilled | llama.cpp aLoRA (ms) | its prompt_ms | prefilled | "
           "llama.cpp plain LoRA (ms) | prefilled | aLoRA / ours | plain / ours |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in r["rows"]:
        out.append(f"| {x['history_tokens']} | {x['ours_ms']} | {x['ours_prefill']} | {x['alora_ms']} | "
                   f"{x['alora_prompt_ms']} | {x['alora_prefill']} | {x['plain_ms']} | {x['plain_prefill']} | "
                   f"{x['alora_over_ours']}x | {x['plain_over_ours']}x |")
    return out
