"""Greedy agreement with llama.cpp on the same GGUF (`macaronic bench --only agreement`).

Does the served base compute what llama.cpp computes from the same file? For the first P HumanEval
prompts (the request the coding suite sends, rendered by the chat template), each precision of ours
(`fp32`: the dequantized weights; `int4`: the served requantization; `gguf`: the GGUF's own blocks,
`engine/ggml.py`, with bf16 activations) and llama.cpp's server (`macaronic.llamacpp`, no adapter)
decode greedily from the same token ids until the end-of-turn token or N tokens, as the coding suite
does. llama.cpp runs twice: as its server starts by default (flash attention, which on a CPU keeps
K/V in fp16 and sums the attention in fp16 while it decodes) and with `-fa off` (fp16 K/V, fp32
sums); the second also against the first, which is how far llama.cpp agrees with itself. Per row:
replies identical token for token, and where the others first differ (the shorter reply's length
where one is a prefix of the other).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from macaronic.engine.sampling import SamplingParams

VARIANTS = {"fp32": ("float32", "none"), "int4": ("bfloat16", "int4"), "gguf": ("bfloat16", "gguf")}
REFERENCES = {"default": (), "fa-off": ("-fa", "off")}  # llama-server's flags for each reference run


def humaneval_asks(indices) -> list[list[dict]]:
    """The chat messages this bench (and scripts/llamacpp_logprobs.py, llamacpp_parting.py) sends for
    HumanEval problems `indices`: the coding suite's request, the prompt stripped."""
    from macaronic.suites.external import humaneval_problems

    problems = humaneval_problems()
    return [[{"role": "user", "content": "Complete this Python function. Reply with the whole function in one "
                                         f"```python block.\n\n```python\n{problems[i]['prompt'].strip()}\n```"}]
            for i in indices]


def _compare(ours: list[list[int]], refs: dict[str, list[list[int]]]) -> dict:
    """Per reference: replies identical token for token, where the others first differ (the shorter
    reply's length where one is a prefix of the other) and which prompts they were."""
    row = {}
    for ref, theirs in refs.items():
        firsts = [next((i for i, (a, c) in enumerate(zip(o, t)) if a != c), min(len(o), len(t)))
                  for o, t in zip(ours, theirs)]
        key = "" if ref == "default" else f"_{ref.replace('-', '_')}"
        row[f"identical{key}"] = sum(o == t for o, t in zip(ours, theirs))
        row[f"first_differences{key}"] = [f for f, o, t in zip(firsts, ours, theirs) if o != t]
        row[f"parted{key}"] = [i for i, (o, t) in enumerate(zip(ours, theirs)) if o != t]  # scripts/llamacpp_parting.py --prompts
    return row


def run(base_name: str | None, workdir: Path, prompts: int = 8, tokens: int = 64, threads: int = 2,
        variants=tuple(VARIANTS), progress=None, log=print) -> dict:
    from macaronic import llamacpp
    from macaronic.bench.suite import make_llm
    from macaronic.engine import bases
    from macaronic.engine.base import base_gguf, load_base
    from macaronic.engine.llm import load_tokenizer
    binary = llamacpp.build(log=log)
    workdir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(threads)
    first = load_base(base_name)
    tok = load_tokenizer(first.path)
    gguf = base_gguf(first.name, scratch=workdir / bases.get(first.name).gguf)
    asks = humaneval_asks(range(prompts))
    probe = make_llm(first, tok)
    ids = [probe.encode_chat(m) for m in asks]
    eos = set(probe.engine._default_stop_ids())  # the end-of-turn tokens a served reply stops at
    probe.close()
    del first, probe
    # llama.cpp twice: as its server starts by default (flash attention on this CPU: K/V in fp16 and the
    # attention's sum in fp16 while it decodes) and with `-fa off` (fp16 K/V, fp32 sums)
    refs = {}
    for ref, extra in REFERENCES.items():
        with llamacpp.Server(gguf, (), threads=threads, ctx=4096, binary=binary, log=workdir / f"llama-server-{ref}.log",
                             extra=extra) as srv:
            refs[ref] = []
            for p in ids:
                out = srv.post("/completion", {"prompt": p, "n_predict": tokens, "temperature": 0.0, "top_k": 1,
                                                "cache_prompt": False, "return_tokens": True})
                refs[ref].append([t for t in out["tokens"] if t not in eos])
                if progress:
                    progress()
    sp = SamplingParams(max_tokens=tokens)  # both sides stop at the model's end-of-turn tokens
    rows = {}
    for name in variants:
        dtype, quant = VARIANTS[name]
        b = load_base(base_name, dtype=getattr(torch, dtype), quant=quant)
        llm = make_llm(b, tok, max_batch=len(ids), prefix_cache=False)
        handles = [llm.submit(p, None, sp) for p in ids]
        ours = []
        for h in handles:
            h.result()
            ours.append([t for t in h.output_ids if t not in eos])
        llm.close()
        rows[name] = _compare(ours, refs)
        if progress:
            progress()
    rows["llama.cpp -fa off"] = _compare(refs["fa-off"], {"default": refs["default"]})
    return {"base": bases.get(base_name).name, "gguf": gguf.name,
            "prompts": len(ids), "tokens": tokens, "threads": threads, "llamacpp": llamacpp.VERSION, "rows": rows,
            "at": time.strftime("%Y-%m-%d %H:%M:%S")}


def markdown(r: dict) -> list[str]:
    out = [f"Base {r['base']}, `{r['gguf']}`: the first {r['prompts']} HumanEval prompts as the coding suite asks "
           f"them, greedy to the end of the reply or {r['tokens']} tokens; llama.cpp's server (llama-cpp-python "
           f"{r['llamacpp']}'s source) as it starts by default and with `-fa off`, against each of our precisions "
           f"and against itself, {r['threads']} threads.", "",
           "| ours | identical to llama.cpp's replies | to llama.cpp -fa off's | first differences (default) |",
           "|---|---:|---:|---|"]
    n = r["prompts"]
    for name, x in r["rows"].items():
        off = x.get("identical_fa_off")
        off = "" if off is None else f"{off} / {n}"
        out.append(f"| {name} | {x['identical']} / {n} | {off} | {', '.join(map(str, x['first_differences']))} |")
    return out
