"""The cost of constrained decoding (`macaronic bench --only structured`).

Side by side in one run on the same engine: decode of 1 and 16 streams free and under a grammar
(a JSON schema, and the tool-call grammar with `tool_choice: required`), per-token mask work
measured inside the processors, and time to first token with a cold (compiled on the spot) and a
cached grammar. Knows the engine and the structure builder; nothing about HTTP.
"""

from __future__ import annotations

import json
import statistics
import time

SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}, "notes": {"type": "string"},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["title", "notes", "tags"], "additionalProperties": False}


def tools(salt: str = "") -> list[dict]:
    return [{"type": "function", "function": {"name": f"{n}{salt}", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}, "when": {"type": "string"}},
        "required": ["text"]}}} for n in ("add_reminder", "create_event", "send_message", "search_notes")]


def _run(llm, prompt: list[int], k: int, tokens: int, spec=None, grammars=None) -> dict:
    from macaronic.engine.sampling import SamplingParams

    procs = [grammars.processor(spec) if spec is not None else None for _ in range(k)]
    reqs = [llm.request(prompt, None, SamplingParams(max_tokens=tokens, temperature=1.0, seed=i),
                        logits_processor=p) for i, p in enumerate(procs)]
    t0 = time.perf_counter()
    handles = [llm.engine.submit(r) for r in reqs]
    for h in handles:
        h.result()
    dt = time.perf_counter() - t0
    n = sum(len(h.output_ids) for h in handles)
    mask = sum(p.mask_s for p in procs if p is not None)
    return {"tok_s": round(n / dt, 1), "tokens": n, "mask_us_per_token": round(mask / max(n, 1) * 1e6, 1) if spec else None}


def structured_cost(base_path, tokens: int = 32, reps: int = 3) -> dict:
    from macaronic.engine.constraints import Grammars, GrammarSpec
    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.serve.structured import structure_for

    llm = load_llm(base_path, [], EngineConfig(max_batch=16, prefix_cache=False))
    try:
        g = Grammars(llm.tokenizer, llm.base.args.vocab_size, llm.engine.default_stop_ids)
        prompt = llm.encode_chat([{"role": "user", "content": "Write a short note about the meeting tomorrow."}])
        specs = {"free": None, "json_schema": GrammarSpec("json_schema", json.dumps(SCHEMA)),
                 "tools_required": structure_for(tools=tools(), tool_choice="required").spec}
        out: dict = {"tokens": tokens, "reps": reps}
        for k in (1, 16):
            rows = {name: [] for name in specs}
            for _ in range(reps):  # alternate the variants so drift hits them alike
                for name, spec in specs.items():
                    rows[name].append(_run(llm, prompt, k, tokens, spec, g))
            for name, rs in rows.items():
                out[f"{name}_{k}"] = {"tok_s": statistics.median(r["tok_s"] for r in rs),
                                      "mask_us_per_token": None if specs[name] is None else
                                      statistics.median(r["mask_us_per_token"] for r in rs)}
            free = out[f"free_{k}"]["tok_s"]
            for name in ("json_schema", "tools_required"):
                out[f"{name}_{k}"]["slowdown_pct"] = round((free / out[f"{name}_{k}"]["tok_s"] - 1) * 100, 1)
        # TTFT: a grammar never seen (fresh tool names: compiled now) vs the same one again (cached)
        cold, warm = [], []
        for i in range(reps):
            spec = structure_for(tools=tools(f"_{i}_{time.time_ns()}"), tool_choice="required").spec
            for bucket in (cold, warm):
                t0 = time.perf_counter()
                proc = g.processor(spec)
                h = llm.engine.submit(llm.request(prompt, None, _one(), logits_processor=proc))
                next(iter(h))
                bucket.append((time.perf_counter() - t0) * 1000)
                h.cancel()
                h.result()
        out["ttft_cold_grammar_ms"] = round(statistics.median(cold), 1)
        out["ttft_cached_grammar_ms"] = round(statistics.median(warm), 1)
        out["genui_compile_ms"] = _genui_compile_ms(g)
        out["mask_engines_us_per_token"] = mask_engines(llm.tokenizer, llm.base.args.vocab_size, reps)
        return out
    finally:
        llm.close()


def mask_engines(tokenizer, vocab_size: int, reps: int = 3) -> dict:
    """Per-token mask work (fill + apply) of xgrammar and llguidance (when installed, the `bench`
    extra) on the same JSON schema and the same token walks, at batch 1 and 16: the measurement
    behind the choice of xgrammar."""
    import torch
    import xgrammar as xgr

    docs = [json.dumps({"title": f"meeting number {i} about the budget", "notes": "bring the q3 figures",
                        "tags": ["work", f"t{i}"]}) for i in range(16)]
    walks = [tokenizer.encode(d, add_special_tokens=False) for d in docs]
    schema = json.dumps(SCHEMA)
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    compiled = xgr.GrammarCompiler(info).compile_json_schema(schema, any_whitespace=False, separators=(", ", ": "))

    def walk(k, fill, apply, accept, bitmask):
        logits = torch.randn(k, vocab_size)  # logits: [k, V]
        steps, t = min(len(w) for w in walks[:k]), 0.0
        for s in range(steps):
            t0 = time.perf_counter()
            for i in range(k):
                fill(i, bitmask)
            apply(logits, bitmask)
            t += time.perf_counter() - t0
            for i in range(k):
                accept(i, walks[i][s])
        return t / (steps * k) * 1e6

    def xg(k):
        ms = [xgr.GrammarMatcher(compiled) for _ in range(k)]
        return walk(k, lambda i, b: ms[i].fill_next_token_bitmask(b, i),
                    lambda lg, b: xgr.apply_token_bitmask_inplace(lg, b, vocab_size=vocab_size),
                    lambda i, t: ms[i].accept_token(t), xgr.allocate_token_bitmask(k, vocab_size))

    runners = {"xgrammar": xg}
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        lltok = llguidance.hf.from_tokenizer(tokenizer)
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "})

        def ll(k):
            ms = [llguidance.LLMatcher(lltok, grammar) for _ in range(k)]
            return walk(k, lambda i, b: llguidance.torch.fill_next_token_bitmask(ms[i], b, i),
                        lambda lg, b: llguidance.torch.apply_token_bitmask_inplace(lg, b),
                        lambda i, t: ms[i].consume_token(t), llguidance.torch.allocate_token_bitmask(k, lltok.vocab_size))

        runners["llguidance"] = ll
    except ImportError:
        pass
    rows: dict = {}
    for _ in range(reps):
        for k in (1, 16):
            for name, run in runners.items():
                rows.setdefault(f"{name}_{k}", []).append(run(k))
    return {k: round(statistics.median(v), 1) for k, v in rows.items()}


def _one():
    from macaronic.engine.sampling import SamplingParams

    return SamplingParams(max_tokens=4, temperature=0.0)


def _genui_compile_ms(g) -> float:
    from macaronic.engine.constraints import GrammarSpec
    from macaronic.genui.grammar import contract_schema

    spec = GrammarSpec("json_schema", json.dumps(contract_schema()) + " ", (",", ":"))  # a key no one cached
    t0 = time.perf_counter()
    g.compile(spec)
    return round((time.perf_counter() - t0) * 1000, 1)


def markdown(r: dict) -> list[str]:
    out = ["### Constrained decoding cost", "",
           f"Base only, {r['tokens']} tokens per stream at temperature 1, median of {r['reps']} alternated runs.", "",
           "| streams | free tok/s | JSON schema tok/s | slowdown | mask µs/token | tool calls (required) tok/s | slowdown | mask µs/token |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in (1, 16):
        j, t = r[f"json_schema_{k}"], r[f"tools_required_{k}"]
        out.append(f"| {k} | {r[f'free_{k}']['tok_s']} | {j['tok_s']} | {j['slowdown_pct']}% | {j['mask_us_per_token']} | "
                   f"{t['tok_s']} | {t['slowdown_pct']}% | {t['mask_us_per_token']} |")
    out += ["", f"Time to first token with a tool grammar compiled on the spot: {r['ttft_cold_grammar_ms']} ms; "
            f"the same grammar again (cached by content): {r['ttft_cached_grammar_ms']} ms. Compiling the GenUI "
            f"card grammar: {r['genui_compile_ms']} ms (once per process).", ""]
    me = r.get("mask_engines_us_per_token") or {}
    if me:
        out += ["Mask work per token (fill + apply, µs), same schema and token walks:", "",
                "| engine | batch 1 | batch 16 |", "|---|---:|---:|"]
        for name in ("xgrammar", "llguidance"):
            if f"{name}_1" in me:
                out.append(f"| {name} | {me[f'{name}_1']} | {me[f'{name}_16']} |")
        out.append("")
    return out
