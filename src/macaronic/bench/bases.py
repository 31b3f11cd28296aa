"""`macaronic bench bases`: the engine's fast path on each registered base, side by side in one run.

Per base: single-stream decode tokens/s at int4 and bf16 (bare base and with a rank-8 turn adapter),
cold prefill tokens/s of a 2k-token prompt, the time to first token of a turn on adapter B after a
2k-token history computed on adapter A (turn mode: the history is reused; cache cleared: the
llama.cpp rule, the whole prompt recomputed), and llama.cpp (`llama-cpp-python`, the optional
`bench` extra; null when absent) on the same GGUF. These are the figures the default-base rule
reads (README "Choosing the default base"). Knows nothing about routing, suites or HTTP.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch

START, END = "<!-- bench-bases:start -->", "<!-- bench-bases:end -->"
# The default-base rule's speed conditions (README): int4 single-stream decode and switched-turn TTFT.
MIN_DECODE_TOK_S, MAX_TTFT_MS = 15.0, 1500.0


def _decode_tok_s(llm, adapter: str | None, tokens: int) -> float:
    from macaronic.engine.sampling import SamplingParams

    ids = llm.encode_chat([{"role": "user", "content": "Write a long list of fruits, one per line."}])
    h = llm.submit(ids, adapter, SamplingParams(max_tokens=tokens, stop_token_ids=()))
    next(iter(h))  # the prefill and the first token are not decode
    t = time.perf_counter()
    h.result()
    return round((tokens - 1) / (time.perf_counter() - t), 2)


PRECISIONS = {"int4": (torch.bfloat16, "int4"), "bf16": (torch.bfloat16, "none")}
FIGURES = ("decode_tok_s", "decode_lora_tok_s", "prefill{n}_tok_s", "switch_ttft_ms", "cleared_ttft_ms", "turn_prefill_tokens")


def measure_base(name: str, workdir: Path, history: int = 2048, tokens: int = 32, reps: int = 2,
                 precisions: tuple[str, ...] = ("int4", "bf16")) -> dict:
    """Every figure of one registered base (the process's torch threads apply throughout); a precision
    left out of `precisions` has null figures. int4 is always measured: the default-base rule reads it."""
    from macaronic.bench.suite import _llamacpp_decode, _llamacpp_prefill, _trim, adapters_for, conversation, \
        make_llm, med
    from macaronic.engine import bases
    from macaronic.engine.base import base_gguf, load_base, resolve_base
    from macaronic.engine.llm import load_tokenizer
    from macaronic.engine.sampling import SamplingParams

    spec = bases.get(name)
    path = resolve_base(name)
    tok = load_tokenizer(path)
    out: dict = {"base": name, "history_tokens": history}
    one = SamplingParams(max_tokens=1, stop_token_ids=())
    msgs, nxt = conversation(tok, history + 200)
    for key in PRECISIONS:
        if key != "int4" and key not in precisions:  # int4 always: the rule reads it
            out.update({f"{key}_{f.format(n=history)}": None for f in FIGURES})
            continue
        dtype, quant = PRECISIONS[key]
        b = load_base(path, dtype=dtype, quant=quant)
        paths = adapters_for(b.args, workdir / key)
        cached = make_llm(b, tok, max_context=history + 512, prefill_chunk=1024)
        cleared = make_llm(b, tok, max_context=history + 512, prefill_chunk=1024, prefix_cache=False)
        for llm in (cached, cleared):
            for n, p in paths.items():
                llm.add_adapter(p, n)
        hist = _trim(cached, msgs, history)
        tail = cached.encode_chat([{"role": "user", "content": nxt[0]["content"]}])
        prompt = hist + tail[cached.turn_start(tail):]
        r: dict[str, list[float]] = {"decode_base": [], "decode_lora": [], "prefill": [], "turn_ms": [], "cleared_ms": []}
        _decode_tok_s(cleared, None, 4)  # warm-up
        for _ in range(reps):
            r["decode_base"].append(_decode_tok_s(cleared, None, tokens))
            r["decode_lora"].append(_decode_tok_s(cleared, "a_turn", tokens))
            cached.engine.cache.clear()
            h = cached.submit(hist, "a_turn", one, active_from=cached.turn_start(hist))
            h.result()
            r["prefill"].append(round(len(hist) / (h.usage["ttft_ms"] / 1000), 1))  # a cold 2k prompt
            h = cached.submit(prompt, "b_turn", one)  # the switched turn: history reused
            h.result()
            r["turn_ms"].append(h.usage["ttft_ms"])
            out[f"{key}_turn_prefill_tokens"] = h.usage["prefill_tokens"]
            h = cleared.submit(prompt, "b_full", one)  # llama.cpp rule: the whole prompt again
            h.result()
            r["cleared_ms"].append(h.usage["ttft_ms"])
        out.update({f"{key}_decode_tok_s": med(r["decode_base"]), f"{key}_decode_lora_tok_s": med(r["decode_lora"]),
                    f"{key}_prefill{history}_tok_s": med(r["prefill"]), f"{key}_switch_ttft_ms": med(r["turn_ms"]),
                    f"{key}_cleared_ttft_ms": med(r["cleared_ms"])})
        cached.close(), cleared.close()
        del b
    # llama.cpp on the very GGUF the base was imported from (a split base is assembled first)
    from importlib.util import find_spec

    out["llamacpp_decode_tok_s"] = out[f"llamacpp_prefill{history}_tok_s"] = None  # not installed: null
    scratch = workdir / spec.gguf
    try:
        if find_spec("llama_cpp") is None or not spec.packages:  # no llama.cpp, or no GGUF to give it
            raise LookupError
        gguf = base_gguf(name, scratch)
        ids = cached.encode_chat([{"role": "user", "content": "Write a long list of fruits, one per line."}])
        lc = _llamacpp_decode(tokens, [ids], gguf=gguf, n16=False)
        out["llamacpp_decode_tok_s"] = lc["llamacpp_single_tok_s"]
        out[f"llamacpp_prefill{history}_tok_s"] = _llamacpp_prefill(hist, gguf=gguf)
    except LookupError:
        pass
    finally:
        scratch.unlink(missing_ok=True)
    out["rule_speed_ok"] = (out["int4_decode_tok_s"] >= MIN_DECODE_TOK_S and out["int4_switch_ttft_ms"] < MAX_TTFT_MS)
    return out


def _fmt(x) -> str:
    return "n/a" if x is None else (f"{x:,.1f}" if isinstance(x, float) else str(x))


def markdown(r: dict) -> str:
    m = r["machine"]
    n = r["history_tokens"]
    lines = [
        f"Command: `{r['command']}` ({r['seconds']:.0f} s). Machine: {m.get('cpu')}, {m.get('cores')} cores, "
        f"torch threads {r['threads']}, load average at start {r['load_average']}. Every base measured in the same "
        f"process, one after the other; llama.cpp: {'on the same GGUF' if r['llamacpp'] else 'not installed (null)'}."
        + ("" if "bf16" in r.get("precisions", ["bf16"]) else " bf16 not measured (n/a): this CPU emulates bf16."),
        "",
        f"| base | int4 decode 1 stream (tok/s) | + turn LoRA | bf16 decode | + turn LoRA | int4 prefill {n} (tok/s) | "
        f"bf16 prefill {n} | switched-turn TTFT after {n} (ms, int4, turn mode) | same, cache cleared | "
        f"llama.cpp decode | llama.cpp prefill {n} | rule: ≥ {MIN_DECODE_TOK_S:.0f} tok/s and < {MAX_TTFT_MS:.0f} ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for b in r["bases"]:
        lines.append(
            f"| {b['base']} | {_fmt(b['int4_decode_tok_s'])} | {_fmt(b['int4_decode_lora_tok_s'])} | "
            f"{_fmt(b['bf16_decode_tok_s'])} | {_fmt(b['bf16_decode_lora_tok_s'])} | {_fmt(b[f'int4_prefill{n}_tok_s'])} | "
            f"{_fmt(b[f'bf16_prefill{n}_tok_s'])} | {_fmt(b['int4_switch_ttft_ms'])} | {_fmt(b['int4_cleared_ttft_ms'])} | "
            f"{_fmt(b['llamacpp_decode_tok_s'])} | {_fmt(b[f'llamacpp_prefill{n}_tok_s'])} | "
            f"{'met' if b['rule_speed_ok'] else 'not met'} |")
    if len(r["bases"]) == 2:
        a, b = r["bases"]
        lines += ["", f"Ratios {b['base']} / {a['base']}: int4 decode "
                  f"{b['int4_decode_tok_s'] / a['int4_decode_tok_s']:.2f}x, int4 prefill "
                  f"{b[f'int4_prefill{n}_tok_s'] / a[f'int4_prefill{n}_tok_s']:.2f}x, switched-turn TTFT "
                  f"{b['int4_switch_ttft_ms'] / a['int4_switch_ttft_ms']:.2f}x."]
    return "\n".join(lines) + "\n"


def run(a, names: list[str], argv: list[str]) -> int:
    """Measure the bases `names` with the options of `macaronic bench bases` (`a`: commands/bench.py)."""
    import os
    from importlib.util import find_spec

    from macaronic.bench import machine

    t0 = time.time()
    r = {"command": "macaronic bench bases " + " ".join(argv), "machine": machine.describe(), "threads": a.threads,
         "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()), "history_tokens": a.history,
         "llamacpp": find_spec("llama_cpp") is not None, "precisions": [p for p in PRECISIONS if p == "int4" or p in a.precisions], "bases": []}
    with tempfile.TemporaryDirectory(prefix="macaronic-bench-bases-") as tmp:
        for n in names:
            print(f"[bench bases] {n} ...", file=sys.stderr, flush=True)
            r["bases"].append(measure_base(n, Path(tmp) / n, a.history, a.tokens, a.reps, tuple(a.precisions)))
            print(json.dumps(r["bases"][-1]), file=sys.stderr, flush=True)
    r["seconds"] = round(time.time() - t0, 1)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(r, indent=2) + "\n")
    if a.md:
        from macaronic.bench.docs import write_section

        write_section(Path(a.md), START, END, "Embedded bases side by side (`macaronic bench bases`)", markdown(r))
    print(markdown(r))
    return 0
