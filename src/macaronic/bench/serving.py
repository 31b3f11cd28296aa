"""The serving benchmark: a real `macaronic serve` subprocess under rounds of concurrent streams.

Each round sends `streams` streaming Chat Completions at once (all-distinct prompts, the adapters
forced in turn, so no route hop), `tokens` tokens each, and records per stream the time to first
token and every gap between content chunks as the client sees them, the completion tokens (usage)
and, after each round, the server process's RSS. The caches fill during the first rounds (the
prefix cache holds up to 1 GiB by default), so the RSS series shows where memory plateaus.
`serving_variants` runs the same load against several servers (precisions, prefill budgets) one
after the other in one run. Knows HTTP and /proc; nothing of the engine's internals.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("harbor lantern meadow quartz ribbon saddle timber velvet walnut yonder amber basil cedar "
         "dune ember fjord glacier hollow island jasper kettle lagoon marble nectar orchard pebble").split()


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


def start_server(args: list[str], timeout: float = 600, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "macaronic.cli", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    deadline, log = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"Web chat: (http://\S+?)/\s", line)
        if m:
            import threading

            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("server did not start:\n" + "".join(log))


async def _stream(client, url: str, model: str, text: str, tokens: int) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    times: list[float] = []
    completion = 0
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            completion = ((chunk.get("usage") or {}).get("completion_tokens")) or completion
            delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
            if delta.get("content"):
                times.append(time.perf_counter())
    gaps = [(b - a) * 1000 for a, b in zip(times, times[1:])]
    return {"ttft_ms": (times[0] - t0) * 1000 if times else None, "gaps_ms": gaps, "chunks": len(times),
            "tokens": completion or len(times), "wall_s": time.perf_counter() - t0}


def serving_load(streams: int = 32, tokens: int = 32, rounds: int = 6, server_args: list[str] | None = None,
                 progress=None, env: dict | None = None) -> dict:
    import httpx

    with tempfile.TemporaryDirectory(prefix="macaronic-serve-bench-") as tmp:
        args = ["--router-policy", "none", "--store", f"{tmp}/state.sqlite", *(server_args or [])]
        proc, url = start_server(args, env=env)
        try:
            models = [m["id"] for m in httpx.get(url + "/v1/models", timeout=60).json()["data"]
                      if (m.get("macaronic") or {}).get("kind") == "adapter"] or ["macaronic"]
            rss = [rss_mb(proc.pid)]
            per_round = []

            async def one_round(r: int) -> list[dict]:
                limits = httpx.Limits(max_connections=streams + 4)
                async with httpx.AsyncClient(timeout=600, limits=limits) as c:
                    jobs = []
                    for i in range(streams):
                        words = " ".join(WORDS[(r * 11 + i * 5 + k) % len(WORDS)] for k in range(24))
                        text = f"Round {r}, request {i}: write a short note that mentions {words}."
                        jobs.append(_stream(c, url, models[i % len(models)], text, tokens))
                    return await asyncio.gather(*jobs)

            for r in range(rounds):
                t0 = time.perf_counter()
                res = asyncio.run(one_round(r))
                wall = time.perf_counter() - t0
                rss.append(rss_mb(proc.pid))
                ttft = [x["ttft_ms"] for x in res if x["ttft_ms"] is not None]
                gaps = [g for x in res for g in x["gaps_ms"]]
                per_round.append({"round": r, "ttft_p50_ms": pct(ttft, 0.5), "ttft_p99_ms": pct(ttft, 0.99),
                                  "gap_p50_ms": pct(gaps, 0.5), "gap_p99_ms": pct(gaps, 0.99),
                                  "gap_max_ms": pct(gaps, 1.0), "chunks": sum(x["chunks"] for x in res),
                                  "tokens": sum(x["tokens"] for x in res), "wall_s": round(wall, 2),
                                  "rss_mb": rss[-1]})
                if progress:
                    progress()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    warm = per_round[1:] or per_round  # round 0 also pays first-use costs (adapter loads, grammar info)
    tail = max(2, rounds // 3)  # what the last third of the rounds added, once the caches are full
    return {"streams": streams, "tokens": tokens, "rounds": rounds, "models": models,
            "ttft_p50_ms": statistics.median(r["ttft_p50_ms"] for r in warm),
            "ttft_p99_ms": max(r["ttft_p99_ms"] for r in warm),
            "gap_p50_ms": statistics.median(r["gap_p50_ms"] for r in warm),
            "gap_p99_ms": max(r["gap_p99_ms"] for r in warm), "gap_max_ms": max(r["gap_max_ms"] for r in warm),
            "chunks_per_s": round(sum(r["chunks"] for r in warm) / sum(r["wall_s"] for r in warm), 1),
            "tok_s": round(sum(r["tokens"] for r in warm) / sum(r["wall_s"] for r in warm), 1),
            "rss_mb": rss, "rss_start_mb": rss[0], "rss_peak_mb": max(rss),
            "rss_growth_last_rounds": tail, "rss_growth_last_rounds_mb": round(max(rss[-tail:]) - rss[-tail - 1], 1),
            "per_round": per_round}


# The variants of the serving section: (label, server arguments, environment, rounds). The first is
# the default server, run longest for the RSS plateau; the others show what the step shape does to
# the running streams: prompt chunks in a forward of their own, a budget as large as the idle one.
def default_variants(rounds: int, quick: bool = False) -> list[tuple[str, list[str], dict, int]]:
    from macaronic.engine.engine import EngineConfig

    few = 2 if quick else max(2, rounds // 2)
    budget = EngineConfig.prefill_chunk_busy
    fp32 = ["--dtype", "float32", "--quant", "none"]  # explicit: a registered base may serve another precision
    rows = [(f"fp32, budget {budget}, fused step (the default step)", fp32, {}, rounds),
            (f"fp32, budget {budget}, two forwards a step", fp32, {"MACARONIC_FUSE_STEPS": "0"}, few),
            ("fp32, budget 512, fused step", fp32, {"MACARONIC_PREFILL_CHUNK_BUSY": "512"}, few)]
    if not quick:
        rows.insert(3, ("fp32, budget 512, two forwards a step (the engine before)", fp32,
                        {"MACARONIC_PREFILL_CHUNK_BUSY": "512", "MACARONIC_FUSE_STEPS": "0"}, few))
    rows += [("bf16", ["--dtype", "bfloat16"], {}, few), ("int4", ["--dtype", "bfloat16", "--quant", "int4"], {}, few)]
    return rows


def precision_variants(rounds: int) -> list[tuple[str, list[str], dict, int]]:
    """One server per precision at the default budget: the speed half of the served-precision rule."""
    return [("fp32", ["--dtype", "float32", "--quant", "none"], {}, rounds), ("bf16", ["--dtype", "bfloat16"], {}, rounds),
            ("int8", ["--dtype", "bfloat16", "--quant", "int8"], {}, rounds),
            ("int4", ["--dtype", "bfloat16", "--quant", "int4"], {}, rounds)]


def serving_variants(variants, streams: int = 32, tokens: int = 32, server_args: list[str] | None = None,
                     threads: int | None = None, progress=None) -> dict:
    """The serving load per variant, one server after another: {"streams", "tokens", "variants": [...]}."""
    out = {"streams": streams, "tokens": tokens, "threads": threads, "variants": []}
    for label, args, env, rounds in variants:
        env = {**env, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
        try:
            res = serving_load(streams, tokens, rounds, [*(server_args or []), *args], progress, env=env)
        except RuntimeError as e:  # a server that does not start (e.g. out of memory) loses its row only
            res = {"error": str(e)[-2000:], "rounds": rounds}
        out["variants"].append({"label": label, "server_args": args, "env": env, **res})
    if all("error" in v for v in out["variants"]):
        raise RuntimeError("no serving variant ran:\n" + out["variants"][0]["error"])
    return out


def markdown(sv: dict) -> list[str]:
    def f(x):
        return "n/a" if x is None else (f"{x:,.1f}" if isinstance(x, float) else str(x))

    ran = [v for v in sv["variants"] if "error" not in v]
    first = ran[0]
    threads = f", {sv['threads']} torch thread(s) in the server" if sv.get("threads") else ""
    out = [f"### Serving under {sv['streams']} concurrent streams", "",
           f"`macaronic serve` subprocesses (the shipped specialists forced in turn: {', '.join(first['models'])}; "
           f"no route hop), rounds of {sv['streams']} streaming requests x {sv['tokens']} tokens, all prompts "
           f"distinct; times as the client sees them, over the rounds after the first; variants one after the "
           f"other in one run{threads}. "
           "Budget: prompt tokens per engine step while streams decode (`prefill_chunk_busy`); fused: prompt chunks "
           "and the decode step in one forward (`fuse_steps`).", "",
           "| server | rounds | tok/s | TTFT p50 (ms) | TTFT p99 | gap p50 (ms) | gap p99 | gap max | peak RSS (MB) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v in sv["variants"]:
        if "error" in v:
            out.append(f"| {v['label']} | {v['rounds']} | did not run: {v['error'].strip().splitlines()[-1][:80]} "
                       "| | | | | | |")
            continue
        out.append(f"| {v['label']} | {v['rounds']} | {f(v.get('tok_s'))} | {f(v['ttft_p50_ms'])} | {f(v['ttft_p99_ms'])} | "
                   f"{f(v['gap_p50_ms'])} | {f(v['gap_p99_ms'])} | {f(v['gap_max_ms'])} | {f(v['rss_peak_mb'])} |")
    out += ["", f"RSS plateau ({first['label']}): server RSS (MB) at start and after each round: "
            + " → ".join(f"{x:,.0f}" for x in first["rss_mb"])
            + f"; added by the last {first['rss_growth_last_rounds']} rounds: {f(first['rss_growth_last_rounds_mb'])} MB. "
            "The bound: the prefix cache (1 GiB by default) plus the decode K/V pool at 32 rows. "
            "`macaronic.bench.serving`.", ""]
    return out
