"""The first request against warm ones, on fresh `macaronic serve` processes (`macaronic bench --only
first-request`).

For each kind of request a client opens with (a routed plain turn; a GenUI card, forced to the card
role; a routed turn offered the built-in tools, as the web chat sends it), a fresh server is started,
that request is sent first and then `warm` more of the same kind (other text, one at a time), all
streaming. Reported per kind: start-up until /health answers, the warm-up the server reported, the
first request's time to first token, the median of the warm ones, and first / warm (issue 40's goal:
at most 1.5x). `--no-warmup` servers give the cold figures beside them. TTFT is the client's: until
the first chunk carrying text or a tool call (the end of the stream if none does). Knows HTTP and
the server's command line; nothing of the engine.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time

from macaronic.bench.serving import start_server

TOKENS = 8
CHAT = ("What is the capital of France?", "Tell me a fun fact about octopuses.", "Explain what a hash map is.",
        "Name three colors of the rainbow.", "Why is the sky blue?")
CARD = ("Show me a card with today's weather in Paris.", "Make a card listing three fruits.",
        "A card with a signup form.", "A card with my two next meetings.", "A card with a shopping list.")
TOOLS = ("Remind me to call mom tomorrow at 9.", "What is on my calendar today?", "Add a note: buy milk.",
         "Show my reminders.", "Who are my contacts?")
KINDS = ("chat", "card", "tools")


def request(kind: str, i: int, tools: list[dict]) -> dict:
    """The i-th request of a kind (the first is i = 0)."""
    texts = {"chat": CHAT, "card": CARD, "tools": TOOLS}[kind]
    body = {"model": "genui" if kind == "card" else "macaronic",
            "messages": [{"role": "user", "content": texts[i % len(texts)]}], "max_tokens": TOKENS,
            "temperature": 0, "stream": True}
    return {**body, "tools": tools} if kind == "tools" else body


def ttft_ms(url: str, body: dict) -> float:
    import httpx

    t0 = time.perf_counter()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if "error" in chunk:
                raise RuntimeError(f"the server answered an error: {chunk['error']}")
            delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
            if delta.get("content") or delta.get("tool_calls"):
                return round((time.perf_counter() - t0) * 1000, 1)
    return round((time.perf_counter() - t0) * 1000, 1)


def one_server(kind: str, warmup: bool, warm: int, server_args: list[str], env: dict | None) -> dict:
    """A fresh server, its first request of `kind`, then `warm` more."""
    import httpx

    with tempfile.TemporaryDirectory(prefix="macaronic-first-bench-") as tmp:
        args = ["--store", f"{tmp}/state.sqlite", "--substrate", ":memory:", *server_args,
                *([] if warmup else ["--no-warmup"])]
        t0 = time.perf_counter()
        proc, url = start_server(args, env=env)
        try:
            for _ in range(600):  # the socket opens just after the address is printed
                try:
                    health = httpx.get(url + "/health", timeout=10).json()
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            else:
                raise RuntimeError("the server printed its address but /health never answered")
            ready_s = time.perf_counter() - t0
            tools = httpx.get(url + "/v1/tools", timeout=10).json()["data"] if kind == "tools" else []
            first = ttft_ms(url, request(kind, 0, tools))
            later = [ttft_ms(url, request(kind, i, tools)) for i in range(1, warm + 1)]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    w = statistics.median(later)
    return {"kind": kind, "warmup": warmup, "ready_s": round(ready_s, 1),
            "warmup_s": (health.get("warmup") or {}).get("seconds"), "warmup_steps": (health.get("warmup") or {}).get("steps"),
            "first_ttft_ms": first, "warm_ttft_ms": w, "warm_ttft_all_ms": later,
            "first_over_warm": round(first / w, 2) if w else None}


def run(server_args: list[str] | None = None, warm: int = 4, kinds=KINDS, cold: bool = True,
        threads: int | None = None, progress=None) -> dict:
    """Every kind on a warmed-up server, and (`cold`) on a --no-warmup one: {"rows": [...]}."""
    env = {"OMP_NUM_THREADS": str(threads)} if threads else None
    rows = []
    for kind in kinds:
        for warmup in ((True, False) if cold else (True,)):
            try:
                rows.append(one_server(kind, warmup, warm, list(server_args or []), env))
            except RuntimeError as e:  # a server that does not start loses its row only
                rows.append({"kind": kind, "warmup": warmup, "error": str(e)[-2000:]})
            if progress:
                progress()
    return {"tokens": TOKENS, "warm_requests": warm, "server_args": list(server_args or []), "threads": threads,
            "rows": rows}


def markdown(r: dict) -> list[str]:
    def f(x):
        return "n/a" if x is None else f"{x:,.1f}" if isinstance(x, float) else str(x)

    out = ["### The first request against warm ones", "",
           f"A fresh `macaronic serve` {' '.join(r['server_args'])} per row; its first streaming request, then "
           f"{r['warm_requests']} more of the same kind one at a time ({r['tokens']} tokens each); chat: routed; "
           "card: forced to the card role (GenUI grammar); tools: routed, the built-in tools offered (the web "
           "chat's request). Goal: first within 1.5x of warm.", "",
           "| first request | server | ready (s) | warm-up (s) | first TTFT (ms) | warm TTFT (ms, median) | first / warm |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for row in r["rows"]:
        server = "warm-up" if row["warmup"] else "`--no-warmup`"
        if "error" in row:
            out.append(f"| {row['kind']} | {server} | did not run: {row['error'].strip().splitlines()[-1][:80]} | | | | |")
            continue
        out.append(f"| {row['kind']} | {server} | {f(row['ready_s'])} | {f(row['warmup_s'])} | {f(row['first_ttft_ms'])} | "
                   f"{f(row['warm_ttft_ms'])} | {f(row['first_over_warm'])}x |")
    out += ["", "`macaronic.bench.first`.", ""]
    return out
